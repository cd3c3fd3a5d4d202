"""Scoring jobs: ``score`` a data store into a zarr score store, ``evaluate`` metrics."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..storage import scores
from ..files.atomic import check_not_an_input, resolve_model_path
from ..storage.export import EXPORT_FORMATS, export_scores
from ..storage import load_model_and_attrs
from ..storage.data_store import input_arrays
from .cluster import dask_client, n_workers
from .errors import JobError, reported
from .paths import absolute

__all__ = ["evaluate", "metrics_line", "score"]


def _load(model):
    """The fitted posterior, the model's column names and its classes' original labels
    (from the model store: what the training store recorded)."""
    with reported():
        path = resolve_model_path(model)
        estimator, attrs = load_model_and_attrs(path)
    fitted = estimator.fitted_posterior_
    columns = (list(fitted.feature_names) if fitted.feature_names is not None
               else attrs.get("data_columns"))
    return fitted, columns, attrs.get("target_classes"), path


def score(model, data, out, *, overwrite=False, format="zarr", client=None, scheduler=None,
          workers=2, timeout=10, security=None, echo=None):
    """Score a data store's X with a model into a zarr score store, resumably.

    Writes ``mean`` and ``variance`` of the latent function, ``proba`` for a
    classifier and ``rate`` for a Poisson model, chunk-aligned with the input; a rerun
    after an interruption writes only the missing chunks.

    Parameters
    ----------
    model : str or Path
        Model store (or ``latest`` pointer).
    data : str or Path
        Data store with ``X``.
    out : str or Path
        Score store (``format="zarr"``), or the CSV / Parquet file to write.
    overwrite : bool
        Replace a complete or foreign store (or an existing file) at ``out``.
    format : {"zarr", "csv", "parquet"}
        With csv or parquet the zarr score store is written beside ``out`` (hidden,
        resumable), exported chunk by chunk, then removed.
    client, scheduler, workers, timeout, security, echo
        Where to run (:func:`saspa_dask.jobs.cluster.dask_client`).

    Returns
    -------
    dict
        ``chunks_total``, ``chunks_written`` (this run), ``rows``, ``columns`` (how
        the data's columns were matched to the model's).
    """
    if format not in ("zarr", *EXPORT_FORMATS):
        raise JobError(f"format must be zarr, csv or parquet, got {format!r}")
    model, data, out = absolute(model), absolute(data), absolute(out)
    fitted, columns, class_labels, model_path = _load(model)
    with reported():
        check_not_an_input(out, {"data store": data, "model": model_path,
                                 "model pointer": model})
    if format != "zarr" and Path(out).exists() and not overwrite:
        raise JobError(f"{out} exists; pass --overwrite to replace it")
    store = out if format == "zarr" else Path(out).with_name(f".{Path(out).name}.scores.zarr")
    with reported():  # the data's columns checked before any cluster starts
        inputs = input_arrays(data, columns)
    with dask_client(client, scheduler=scheduler, workers=workers, timeout=timeout,
                     security=security, echo=echo) as running, reported():
        result = scores.score(fitted, data, store, overwrite=overwrite and format == "zarr",
                              class_labels=class_labels, n_workers=n_workers(running),
                              inputs=inputs)
    if format != "zarr":
        with reported():
            export_scores(store, out, format)
        shutil.rmtree(store, ignore_errors=True)
    return result


def evaluate(model, data, *, client=None, scheduler=None, workers=2, timeout=10,
             security=None, echo=None):
    """Test metrics of a model on a data store with X and y, chunk by chunk.

    Returns
    -------
    dict
        Classification: ``error``, ``nlp`` (mean negative log probability of the true
        label); regression: ``rmse``, ``mae``, ``nlpd``; always ``rows``, ``data``
        (the store evaluated on) and ``columns`` (how its columns were matched).
    """
    shown, data = data, absolute(data)
    fitted, columns, _, _ = _load(absolute(model))
    with reported():  # the data's columns checked before any cluster starts
        inputs = input_arrays(data, columns)
    with dask_client(client, scheduler=scheduler, workers=workers, timeout=timeout,
                     security=security, echo=echo) as running, reported():
        metrics = scores.evaluate(fitted, data, n_workers=n_workers(running), inputs=inputs)
    return {"data": str(shown), **metrics}


def metrics_line(metrics):
    """:func:`evaluate`'s result as the one line ``saspa evaluate`` and ``saspa run``
    print: which store (and rows) the metrics are of, then the metrics."""
    values = "  ".join(f"{k} {v:.6g}" for k, v in metrics.items()
                       if k not in ("data", "rows", "columns"))
    return f"on {metrics['data']} ({metrics['rows']} rows, {metrics['columns']}): {values}"
