"""``saspa report``: a model store's report page, on a sample of a data store's rows.

The page is :func:`saspa_dask.models.report.model_report`'s.  With a data store, at
most ``max_rows`` of its rows (a seeded uniform sample, read chunk by chunk under a
reader lock, its columns matched to the model's by name) give the held-out sections
(headed as the training rows' when the store is the model's own training store), and
the store's drift counts (an ``ingest --like`` store's) their own; the metrics table is
of every row, :func:`saspa_dask.storage.scores.evaluate`'s (equal to ``saspa
evaluate``'s), computed chunk by chunk under the same lock.  No cluster: both run in
this process.
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
from ..storage import scores
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
        ``out``, ``rows`` (of the data store: the metrics' rows; 0 without one) and
        ``sample_rows`` (the sample's, for the other sections).
    """
    out, model = absolute(out), absolute(model)
    data = absolute(data)
    with reported():  # before any work
        check_destination(out, overwrite, HTML, {"model": model, "data store": data})
        estimator, attrs = load_model_and_attrs(model)
        X = y = drift = metrics = None
        training = False
        if data is not None:
            with reading(data):  # the sample, the metrics and the fingerprint, one lock
                inputs = _inputs(estimator, data)
                X, y, drift = _sample(inputs, data, int(max_rows), seed)
                metrics = (None if len(y) == inputs[0].shape[0] else
                           scores.evaluate(estimator, data, inputs=inputs))
                training = is_training_store(getattr(estimator, "data_fingerprint_", None),
                                             data)
        page = model_report(estimator, X, y, drift=drift,
                            source=None if data is None else str(data),
                            training_rows=training, metrics=metrics,
                            class_labels=class_labels(attrs) if attrs.get("classes") else None)
        write_text_file(out, page, HTML, overwrite=overwrite,
                        inputs={"model": model, "data store": data})
    return {"out": out, "rows": 0 if X is None else inputs[0].shape[0],
            "sample_rows": 0 if X is None else len(X)}


def _inputs(estimator, data):
    """The store's X, y and column match, its columns matched to the model's by name."""
    names = estimator.fitted_posterior_.feature_names
    return input_arrays(data, None if names is None else list(names))


def _sample(inputs, data, max_rows, seed):
    """At most ``max_rows`` rows of the store (sorted, seeded), their targets and the
    store's drift counts."""
    X, y, _ = inputs
    if y is None:
        raise JobError(f"{data}: no target column y: a report's held-out sections need "
                       "one (or leave DATA out)")
    n = X.shape[0]
    rows = np.sort(np.random.default_rng(seed).choice(n, size=min(n, max_rows),
                                                      replace=False))
    X, y = dask.compute(X[rows], y[rows], scheduler="threads")
    drift = zarr_group(data, "r").attrs.get("drift")
    return np.asarray(X, dtype=np.float64), np.asarray(y), drift
