"""``saspa report``: a model store's report page, on a sample of a data store's rows.

The page is :func:`saspa_dask.models.report.model_report`'s.  With a data store, at
most ``max_rows`` of its rows (a seeded uniform sample, read chunk by chunk under a
reader lock, its columns matched to the model's by name) give the held-out sections
(headed as the training rows' when the store is the model's own training store), and
the store's drift counts (an ``ingest --like`` store's) their own.  No cluster: the
sample is read in this process.
"""

from __future__ import annotations

import dask
import numpy as np

from ..files.groups import zarr_group
from ..files.atomic import check_destination, reading, write_text_file
from ..files.outputs import HTML
from ..models.loading import load_model_and_attrs
from ..models.model_summary import class_labels
from ..models.report import model_report
from ..storage.data_store import input_arrays, is_training_store
from .errors import JobError, reported
from .paths import absolute

__all__ = ["report"]


def report(model, data=None, *, out, max_rows=20_000, seed=0, overwrite=False):
    """Write a model's HTML report (plots and tables, one self-contained file).

    Parameters
    ----------
    model : str or Path
        A model store or a ``latest`` pointer.
    data : str or Path, optional
        A data store with X and y (say a held-out store from ``saspa split``).
    out : str or Path
        The HTML file to write (whole or not at all).
    max_rows : int, default=20000
        At most this many of the data store's rows (a seeded sample) are used.
    overwrite : bool, default=False
        Replace an existing ``out``.
    seed : int, default=0
        The sample's seed.

    Returns
    -------
    dict
        ``out``, ``rows`` (of the data store used; 0 without one).
    """
    out, model = absolute(out), absolute(model)
    data = absolute(data)
    with reported():  # before any work
        check_destination(out, overwrite, HTML, {"model": model, "data store": data})
        estimator, attrs = load_model_and_attrs(model)
        X = y = drift = None
        training = False
        if data is not None:
            with reading(data):  # the sample and the store's fingerprint, under one lock
                X, y, drift = _sample(estimator, data, int(max_rows), seed)
                training = is_training_store(getattr(estimator, "data_fingerprint_", None),
                                             data)
        page = model_report(estimator, X, y, drift=drift,
                            source=None if data is None else str(data),
                            training_rows=training,
                            class_labels=class_labels(attrs) if attrs.get("classes") else None)
        write_text_file(out, page, HTML, overwrite=overwrite,
                        inputs={"model": model, "data store": data})
    return {"out": out, "rows": 0 if X is None else len(X)}


def _sample(estimator, data, max_rows, seed):
    """At most ``max_rows`` rows of the store (sorted, seeded), their targets and the
    store's drift counts."""

    names = estimator.fitted_posterior_.feature_names
    X, y, _ = input_arrays(data, None if names is None else list(names))
    if y is None:
        raise JobError(f"{data}: no target column y: a report's held-out sections need "
                       "one (or leave DATA out)")
    n = X.shape[0]
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(n, max_rows),
                                                      replace=False))
    X, y = dask.compute(X[rows], y[rows], scheduler="threads")
    drift = zarr_group(data, "r").attrs.get("drift")
    return np.asarray(X, dtype=np.float64), np.asarray(y), drift
