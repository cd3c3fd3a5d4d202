"""Layer 7, jobs: the workflow as Python functions, one per ``saspa`` command.

``ingest``, ``train``, ``retrain``, ``score``, ``evaluate`` and ``describe`` take the
same options as the command-line tool and where to run (``client``, or ``scheduler``,
or an embedded cluster of ``workers``); the ``saspa`` commands and ``saspa run`` job
files are thin layers over them.

- :mod:`~saspa_dask.jobs.stores`: ingest, split, describe;
- :mod:`~saspa_dask.jobs.training`: train; :mod:`~saspa_dask.jobs.retraining`:
  retrain (and the retraining rules);
- :mod:`~saspa_dask.jobs.estimators`: the estimator a job's options describe;
- :mod:`~saspa_dask.jobs.row_probes`: the data's fingerprint and the rows a model keeps;
- :mod:`~saspa_dask.jobs.scratch`: a job's scratch folder for its site stores;
- :mod:`~saspa_dask.jobs.demo`: the in-memory demonstration;
- :mod:`~saspa_dask.jobs.scoring`: score, predict (a file, directly), evaluate;
- :mod:`~saspa_dask.jobs.cluster`: Dask clients, TLS;
- :mod:`~saspa_dask.jobs.task`: which task a target calls for;
- :mod:`~saspa_dask.jobs.errors`: :class:`JobError`, interrupts.
"""

from .cluster import dask_client, tls_security
from .demo import demo
from .errors import JobError
from .scoring import evaluate, metrics_line, predict, score
from .stores import describe, ingest, split
from .retraining import retrain
from .training import train

__all__ = ["JobError", "dask_client", "demo", "describe", "evaluate", "ingest", "metrics_line",
           "predict", "retrain", "score", "split", "tls_security", "train"]
