"""Scoring jobs: ``score`` a data store into a zarr score store, ``evaluate`` metrics."""

from __future__ import annotations

import shutil
from pathlib import Path

import zarr

from ..storage import scores
from ..storage.ingestion import ingest as ingest_file
from ..files.atomic import check_not_an_input, resolve_model_path
from ..storage.export import EXPORT_FORMATS, export_scores
from ..models.model_store import read_model_attrs
from ..storage import load_model_and_attrs
from ..storage.data_store import input_arrays
from .cluster import dask_client, n_workers
from .errors import JobError, locked, reported
from .paths import absolute

__all__ = ["evaluate", "metrics_line", "predict", "score"]


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
    with locked(out, "score output"):
        with dask_client(client, scheduler=scheduler, workers=workers, timeout=timeout,
                         security=security, echo=echo) as running, reported():
            result = scores.score(fitted, data, store,
                                  overwrite=overwrite and format == "zarr",
                                  class_labels=class_labels, n_workers=n_workers(running),
                                  inputs=inputs)
        if format != "zarr":
            with reported():
                export_scores(store, out, format)
            shutil.rmtree(store, ignore_errors=True)
    return result


def predict(model, source, out, *, unknown="error", delimiter=None, format=None,
            overwrite=False, chunk_rows=65536, client=None, scheduler=None, workers=2,
            timeout=10, security=None, echo=None):
    """Score a CSV or Parquet file directly: encode it as the model's training store
    was encoded, score it, and write ids, row numbers and scores to one file.

    Resumable: the encoded rows and the scores are kept in a hidden work directory
    beside ``out`` (``.OUT.predict``) until the file is written; a rerun after an
    interruption reuses the encoded rows (when the source file is unchanged: same size
    and modification time) and writes only the score chunks still missing.

    Parameters
    ----------
    model : str or Path
        Model store (or ``latest`` pointer) trained on a store written by ingest.
    source : str or Path
        CSV (gzip or not) or Parquet file with the training table's columns (the
        target may be absent).
    out : str or Path
        The CSV or Parquet file to write.
    unknown : {"error", "ignore"}
        A category the training rows never had: an error naming it, or all zeros.
    delimiter : str, optional
        The CSV's delimiter (default: found from its header line).
    format : {"csv", "parquet"}, optional
        Default: from ``out``'s suffix (``.csv``, ``.parquet`` / ``.pq``).
    overwrite : bool
        Replace an existing ``out``.
    chunk_rows : int
        Rows per chunk of the encoded rows (one scoring task each).
    client, scheduler, workers, timeout, security, echo
        Where to run (:func:`saspa_dask.jobs.cluster.dask_client`).

    Returns
    -------
    dict
        ``rows``, ``out``, ``drift`` (per column, against the training rows),
        ``reused`` (encoded rows from an interrupted run), ``chunks_written``.
    """
    model, source, out = absolute(model), absolute(source), absolute(out)
    fmt = format or _format_of(out)
    with reported():  # the attributes only: score() loads the model itself
        model_path = resolve_model_path(model)
        _, attrs = read_model_attrs(model_path)
        check_not_an_input(out, {"source file": source, "model": model_path})
    encoding = attrs.get("data_encoding")
    if not encoding:
        raise JobError(f"{model_path}: the model records no encoding of its training data "
                       "(trained on a store not written by saspa ingest, or by an older "
                       "saspa): ingest the file with --like TRAINING_STORE, then score")
    if Path(out).exists() and not overwrite:
        raise JobError(f"{out} exists; pass --overwrite to replace it")
    with locked(out, "prediction output"):
        return _predict_locked(model, source, out, fmt, unknown, delimiter, chunk_rows,
                               encoding, dict(client=client, scheduler=scheduler,
                                              workers=workers, timeout=timeout,
                                              security=security, echo=echo))


def _predict_locked(model, source, out, fmt, unknown, delimiter, chunk_rows, encoding,
                    cluster):
    work = Path(out).with_name(f".{Path(out).name}.predict")
    data = work / "data.zarr"
    reused = _encoded_rows_reusable(data, source)
    if not reused:
        with reported():
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
            ingest_file(source, data, encoding=encoding, unknown=unknown,
                        delimiter=delimiter, chunk_rows=chunk_rows)
    encoded = dict(zarr.open_group(str(data), mode="r").attrs)
    result = {"rows": encoded["n_rows"], "chunks_written": 0}
    if not _complete(work / "scores.zarr"):  # else: interrupted while exporting
        result = score(model, data, work / "scores.zarr", **cluster)
    with reported():
        export_scores(work / "scores.zarr", out, fmt)
    shutil.rmtree(work, ignore_errors=True)
    return {"rows": result["rows"], "out": Path(out), "drift": encoded.get("drift") or {},
            "notes": encoded.get("notes") or [], "reused": reused,
            "chunks_written": result["chunks_written"]}


def _complete(store):
    try:
        return bool(zarr.open_group(str(store), mode="r").attrs.get("complete"))
    except Exception:  # absent or unreadable
        return False


def _format_of(out):
    suffix = Path(out).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise JobError(f"{out}: say --format csv or parquet (the name ends in neither .csv "
                   "nor .parquet)")


def _encoded_rows_reusable(data, source):
    """An interrupted predict's encoded rows are reused only when complete and made
    from this very file, unchanged since."""
    try:
        attrs = dict(zarr.open_group(str(data), mode="r").attrs)
    except Exception:  # absent or unreadable: encode again
        return False
    stat = Path(source).stat()
    return bool(attrs.get("complete") and attrs.get("source") == str(source)
                and attrs.get("source_size") == stat.st_size
                and attrs.get("source_mtime_ns") == stat.st_mtime_ns)


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
    values = "  ".join(f"{k} {'n/a' if v is None else f'{v:.6g}'}"
                       for k, v in metrics.items() if k not in ("data", "rows", "columns"))
    return f"on {metrics['data']} ({metrics['rows']} rows, {metrics['columns']}): {values}"
