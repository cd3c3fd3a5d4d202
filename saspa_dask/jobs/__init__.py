"""Layer 7, jobs: the workflow as Python functions, one per ``saspa`` command.

``ingest``, ``train``, ``retrain``, ``score``, ``evaluate`` and ``describe`` take the
same options as the command-line tool and where to run (``client``, or ``scheduler``,
or an embedded cluster of ``workers``); the ``saspa`` commands and ``saspa run`` job
files are thin layers over them.

- :mod:`~saspa_dask.jobs.stores`: ingest, split, export; :mod:`~saspa_dask.jobs.summary`:
  describe;
- :mod:`~saspa_dask.jobs.training`: train; :mod:`~saspa_dask.jobs.retraining`:
  retrain (and the retraining rules);
- :mod:`~saspa_dask.jobs.estimators`: the estimator a job's options describe;
- :mod:`~saspa_dask.jobs.row_probes`: the data's fingerprint and the rows a model keeps;
- :mod:`~saspa_dask.jobs.scratch`: a job's scratch folder for its site stores;
- :mod:`~saspa_dask.jobs.in_memory_demo`: the in-memory demonstration;
- :mod:`~saspa_dask.jobs.scoring`: score, predict (a file, directly), evaluate;
- :mod:`~saspa_dask.jobs.reporting`: report (a model's HTML page with plots);
- :mod:`~saspa_dask.jobs.cluster`: Dask clients, TLS;
- :mod:`~saspa_dask.jobs.task`: which task a target calls for;
- :mod:`~saspa_dask.jobs.errors`: :class:`JobError`, interrupts.
"""

# The job functions load on first use (PEP 562): `saspa ingest` and `saspa split` do
# not import the estimators and scikit-learn.
from .._lazy import lazy_getattr

_PUBLIC = {
    "JobError": ".errors", "dask_client": ".cluster", "demo": ".in_memory_demo",
    "describe": ".summary", "evaluate": ".scoring", "export": ".stores",
    "ingest": ".stores",
    "make_data": ".in_memory_demo", "metrics_line": ".scoring", "not_converged_advice": ".training", "predict": ".scoring",
    "report": ".reporting", "retrain": ".retraining",
    "score": ".scoring", "split": ".stores", "tls_security": ".cluster", "train": ".training",
}

__all__ = sorted(_PUBLIC)


__getattr__ = lazy_getattr(__name__, _PUBLIC)
