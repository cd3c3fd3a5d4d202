"""Scoring jobs: ``score`` a data store into a zarr score store, ``evaluate`` metrics."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import NamedTuple


from ..files.groups import zarr_group
from ..storage import scores
from ..storage.ingestion import ingest as ingest_file
from ..files.atomic import check_destination, reading, resolve_model_path
from ..files.outputs import CSV, PARQUET, SCORES
from ..files.safe import own_directory, write_new_text
from ..storage.export import EXPORT_FORMATS, export_scores
from ..models.model_reader import read_fitted_posterior, training_encoding
from ..fitting.posterior import check_interval_level
from ..storage.data_store import input_arrays, is_training_store
from .cluster import dask_client, input_values, n_workers
from .errors import JobError, locked, reported
from .paths import absolute, table_format

__all__ = ["evaluate", "metrics_line", "predict", "score"]


class _LoadedModel(NamedTuple):
    """A model store as the scoring jobs use it: the fitted posterior, the model's
    column names, its classes' original labels (what the training store recorded),
    the store's path and its checked attributes."""

    fitted: object
    columns: list | None
    class_labels: list | None
    path: Path
    attrs: dict


def _load(model):
    """The model store ``model`` (a path or latest pointer) as a :class:`_LoadedModel`,
    read and checked once."""
    with reported():
        path = resolve_model_path(model)
        fitted, attrs = read_fitted_posterior(path)
    columns = (list(fitted.feature_names) if fitted.feature_names is not None
               else attrs.get("data_columns"))
    return _LoadedModel(fitted, columns, attrs.get("target_classes"), path, attrs)


def score(model, data, out, *, overwrite=False, format=None, escape_formulas=True,
          interval_level=0.95, id_header=None, client=None, scheduler=None, workers=None, timeout=10,
          security=None, echo=None, dashboard=False):
    """Score a data store's X with a model into a zarr score store, resumably.

    Writes ``mean`` and ``variance`` of the latent function, ``proba`` and ``label``
    for a classifier, ``std`` (a new observation's) for a regressor, ``rate`` for a
    Poisson model and ``lower`` / ``upper`` (a new observation's central interval at
    ``interval_level``) for a gaussian one, chunk-aligned with the input; a rerun
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
    format : {"zarr", "csv", "parquet"}, optional
        Default: from ``out``'s suffix (``.csv``; ``.parquet`` or ``.pq``; zarr for any
        other).  With csv or parquet the zarr score store is written beside ``out`` (hidden,
        resumable: reused by a rerun with the same model and data, started anew
        otherwise), exported chunk by chunk, then removed.
    escape_formulas : bool
        CSV: text cells a spreadsheet would run as formulas are written with a
        leading ``'`` (:mod:`~saspa_dask.storage.export`).
    interval_level : float in (0, 1)
        The probability of a gaussian regressor's ``lower`` / ``upper`` interval.
    id_header : {"source", "id"}, optional
        CSV / Parquet: the ids' header, the source's own id column name (None:
        the same) or ``id`` (:func:`~saspa_dask.storage.export.export_scores`).
    client, scheduler, workers, timeout, security, echo, dashboard
        Where to run (:func:`saspa_dask.jobs.cluster.dask_client`).

    Returns
    -------
    dict
        ``chunks_total``, ``chunks_written`` (this run), ``rows``, ``format`` (what was
        written), ``columns`` (how the data's columns were matched to the model's).
    """
    if format is None:
        format = table_format(out, default="zarr")
    if format not in ("zarr", *EXPORT_FORMATS):
        raise JobError(f"format must be zarr, csv or parquet, got {format!r}")
    _check_level(interval_level)
    model, data, out = absolute(model), absolute(data), absolute(out)
    loaded = _load(model)
    with reported():
        check_destination(out, overwrite or format == "zarr", _OUTPUT_KINDS[format],
                          {"data store": data, "model": loaded.path, "model pointer": model})
    with locked(out, "score output"):
        result = _score_locked(loaded, data, out, overwrite, (format, escape_formulas,
                                                              id_header),
                               dict(client=client, scheduler=scheduler, workers=workers,
                                    timeout=timeout, security=security, echo=echo,
                                    dashboard=dashboard), interval_level)
    return {**result, "format": format}


# what each format writes at --out; a zarr score store that exists is resumed when
# incomplete (storage.scores checks it is one), so it is checked as replaceable
_OUTPUT_KINDS = {"zarr": SCORES, "csv": CSV, "parquet": PARQUET}


def _check_level(interval_level):
    """A level the interval can have, checked before any cluster starts."""
    try:
        check_interval_level(interval_level, "--interval-level")
    except ValueError as err:
        raise JobError(str(err)) from None


def _score_locked(loaded, data, out, overwrite, export, cluster, interval_level):
    """``export``: (format, escape_formulas, id_header) of the output."""
    format = export[0]
    private = format != "zarr"
    store = out if not private else Path(out).with_name(f".{Path(out).name}.scores.zarr")
    if private:
        with reported():
            _check_private(store)
    result = _score_store(loaded, data, store, overwrite and not private, private, cluster,
                          interval_level)
    if private:
        with reported():
            export_scores(store, out, *export)
        shutil.rmtree(store, ignore_errors=True)
    return result


def _score_store(loaded, data, store, overwrite, private, cluster, interval_level):
    """Score ``data`` into the zarr score ``store`` on a cluster, holding a reader's
    lock on the data store."""
    fitted, columns, class_labels = loaded.fitted, loaded.columns, loaded.class_labels
    with reported(), reading(data):
        inputs = input_arrays(data, columns)  # columns checked before a cluster starts
        with dask_client(**cluster, values=input_values(inputs[0])) as running:
            return scores.score(fitted, data, store, overwrite=overwrite,
                                class_labels=class_labels, n_workers=n_workers(running),
                                inputs=inputs, private=private,
                                interval_level=interval_level)


def _check_private(path):
    """A job's hidden store beside its output, if already there, is a folder of this
    user's (not a link another user planted there)."""
    if os.path.lexists(path):
        own_directory(path, "this job's hidden score store")


def predict(model, source, out, *, unknown="error", delimiter=None, format=None,
            overwrite=False, chunk_rows=65536, escape_formulas=True, interval_level=0.95,
            id_header=None, client=None, scheduler=None, workers=None, timeout=10, security=None,
            echo=None, dashboard=False):
    """Score a CSV or Parquet file directly: encode it as the model's training store
    was encoded, score it, and write ids, row numbers and scores to one file.

    Resumable: the encoded rows and the scores are kept in a hidden work directory
    beside ``out`` (``.OUT.predict``) until the file is written, with a record of what
    they were made from (the model's fingerprint, the source file's path, size and
    modification time, and the options).  A rerun with all of these the same reuses
    them and writes only the score chunks still missing; with any of them different it
    starts over (``restarted`` in the result says why).

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
    escape_formulas : bool
        CSV: text cells a spreadsheet would run as formulas are written with a
        leading ``'`` (:mod:`~saspa_dask.storage.export`).
    interval_level : float in (0, 1)
        The probability of a gaussian regressor's ``lower`` / ``upper`` interval.
    id_header : {"id", "source"}, optional
        The ids' header (as :func:`score`'s).
    client, scheduler, workers, timeout, security, echo, dashboard
        Where to run (:func:`saspa_dask.jobs.cluster.dask_client`).

    Returns
    -------
    dict
        ``rows``, ``out``, ``drift`` (per column, against the training rows),
        ``reused`` (encoded rows from an interrupted run), ``restarted`` (why an
        interrupted run's work was not reused, or None), ``chunks_written``.
    """
    model, source, out = absolute(model), absolute(source), absolute(out)
    _check_level(interval_level)
    fmt = format or table_format(out)
    loaded = _load(model)  # the whole model: its fingerprint names the work
    with reported():
        check_destination(out, overwrite, _OUTPUT_KINDS.get(fmt, CSV),
                          {"source file": source, "model": loaded.path,
                           "model pointer": model})
        encoding = training_encoding(loaded.path, loaded.attrs)
    try:
        stat = Path(source).stat()
    except OSError as err:
        raise JobError(f"{source}: cannot be read ({err.strerror})") from None
    recipe = {"model_fingerprint": loaded.fitted.fingerprint(), "source": str(source),
              "source_size": stat.st_size, "source_mtime_ns": stat.st_mtime_ns,
              "unknown": unknown, "delimiter": delimiter, "chunk_rows": int(chunk_rows),
              "format": fmt, "escape_formulas": bool(escape_formulas),
              "interval_level": float(interval_level)}
    with locked(out, "prediction output"):
        return _predict_locked(loaded, source, out, recipe, encoding, id_header,
                               dict(client=client, scheduler=scheduler, workers=workers,
                                    timeout=timeout, security=security, echo=echo,
                                    dashboard=dashboard))


_RECIPE = "recipe.json"  # what a predict work directory was made from


def _predict_locked(loaded, source, out, recipe, encoding, id_header, cluster):
    work = Path(out).with_name(f".{Path(out).name}.predict")
    data = work / "data.zarr"
    with reported():
        restarted = _reusable_work(work, recipe)
        if restarted is not None:
            shutil.rmtree(work, ignore_errors=True)
        own_directory(work, "this prediction's work directory")
        if restarted is not None:
            ingest_file(source, data, encoding=encoding, unknown=recipe["unknown"],
                        delimiter=recipe["delimiter"], chunk_rows=recipe["chunk_rows"])
            write_new_text(work / _RECIPE, json.dumps(recipe))
    encoded = dict(zarr_group(data, "r").attrs)
    result = _score_store(loaded, data, work / "scores.zarr", False, True, cluster,
                          recipe["interval_level"])
    with reported():
        export_scores(work / "scores.zarr", out, recipe["format"],
                      recipe["escape_formulas"], id_header)
    shutil.rmtree(work, ignore_errors=True)
    return {"rows": result["rows"], "out": Path(out), "drift": encoded.get("drift") or {},
            "notes": encoded.get("notes") or [], "reused": restarted is None,
            "restarted": restarted or None, "chunks_written": result["chunks_written"]}


def _reusable_work(work, recipe):
    """None when an interrupted predict's work directory can be reused (made by this
    user, from this model, file and options, its rows completely encoded); else why
    not ("" when there is none)."""
    if not os.path.lexists(work):
        return ""
    own_directory(work, "this prediction's work directory")  # refuses a link
    try:
        recorded = json.loads((work / _RECIPE).read_text())
    except (OSError, ValueError):
        return "the interrupted run left no record of what it was made from"
    changed = [key for key in recipe if recorded.get(key) != recipe[key]]
    if changed:
        return f"the interrupted run had another {', '.join(changed)}"
    try:
        complete = zarr_group(work / "data.zarr", "r").attrs.get("complete")
    except Exception:  # absent or unreadable
        complete = False
    return None if complete else "the interrupted run had not encoded every row"


def evaluate(model, data, *, client=None, scheduler=None, workers=None, timeout=10,
             security=None, echo=None, dashboard=False):
    """Test metrics of a model on a data store with X and y, chunk by chunk.

    Returns
    -------
    dict
        Classification: ``error``, ``nlp`` (mean negative log probability of the true
        label), ``auc``, ``brier``, ``base_error``; regression: ``rmse``, ``mae``,
        ``nlpd``, ``base_rmse``, ``r2`` and (gaussian) ``coverage_95``
        (:func:`saspa_dask.storage.scores.evaluate`); always ``rows``, ``data``
        (the store evaluated on), ``columns`` (how its columns were matched) and
        ``training_data`` (True when DATA is the store the model was trained on:
        its content fingerprint is the model's, so the metrics are not held out).
    """
    shown, data = data, absolute(data)
    loaded = _load(absolute(model))
    fitted, columns = loaded.fitted, loaded.columns
    with reported(), reading(data):
        inputs = input_arrays(data, columns)  # columns checked before a cluster starts
        with dask_client(client, scheduler=scheduler, workers=workers, timeout=timeout,
                         security=security, echo=echo, dashboard=dashboard,
                         values=input_values(inputs[0])) as running:
            metrics = scores.evaluate(fitted, data, n_workers=n_workers(running),
                                      inputs=inputs)
        trained_on = (loaded.attrs.get("report") or {}).get("data_fingerprint_")
        training = is_training_store(trained_on, data)
    return {"data": str(shown), **metrics, "training_data": training}


def metrics_line(metrics):
    """:func:`evaluate`'s result as the one line ``saspa evaluate`` and ``saspa run``
    print: which store (and rows) the metrics are of, then the metrics."""
    values = "  ".join(f"{k} {'n/a' if v is None else f'{v:.6g}'}"
                       for k, v in metrics.items()
                       if k not in ("data", "rows", "columns", "training_data"))
    own = ("the model's own training rows, not held out; "
           if metrics.get("training_data") else "")
    return (f"on {metrics['data']} ({own}{metrics['rows']} rows, {metrics['columns']}): "
            f"{values}")
