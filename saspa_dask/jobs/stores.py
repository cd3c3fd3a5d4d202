"""Store jobs: ``ingest`` a file into a data store, ``split`` one into training and
test stores, ``export`` one's rows to CSV or Parquet."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..storage.ingestion import ingest as ingest_file
from ..files.atomic import check_destination, reading, resolve_model_path
from ..files.groups import store_format
from ..models.model_reader import read_model_attrs, training_encoding
from ..models.model_store import MODEL_FORMAT
from ..files.outputs import CSV, PARQUET
from ..storage.data_export import export_rows
from ..storage.split import split_store
from .errors import JobError, locked, reported
from .paths import absolute, table_format

__all__ = ["export", "ingest", "split"]


def ingest(source, out, *, target=None, chunk_rows=65536, missing="error", text="error",
           overwrite=False, like=None, unknown="error", id_column=None, exclude=(),
           delimiter=None, max_categories=None, na_values=None):
    """Stream a CSV, Parquet or ``.npy`` file into a chunked zarr data store.

    ``like=TRAIN_STORE`` encodes the file as TRAIN_STORE was encoded (same columns,
    categories, target labels, id column and missing-value rule; ``unknown="ignore"``
    encodes an unseen category as all zeros) and records the drift from it.
    ``like=MODEL`` (a model store or a ``latest`` pointer) encodes it as that model's
    training data was (the encoding the model store recorded): what a nightly job
    that re-ingests a grown file over its old store needs, where the old store is
    gone by then.
    ``missing="impute"`` fills missing values (medians, a ``"(missing)"`` category);
    ``id_column`` keeps a column of row ids out of the inputs; ``na_values`` sets the
    tokens read as missing.  See
    :func:`saspa_dask.storage.ingestion.ingest` for the options; returns the store's
    attributes (columns, target, rows, preprocessing, drift, fingerprint, notes).
    """
    if like is not None and (target is not None or missing != "error" or text != "error"
                             or id_column is not None or tuple(exclude)
                             or max_categories is not None or na_values):
        raise JobError("like takes the target, missing, text, id_column, exclude, "
                       "max_categories and na_values from the like store; do not give "
                       "them too")
    source, out, like = absolute(source), absolute(out), absolute(like)
    with reported():
        model = None if like is None else _model_store(like)
    if model is not None:
        with locked(out, "data store"), reported(), reading(model, "model store"):
            return ingest_file(source, out, chunk_rows=chunk_rows, overwrite=overwrite,
                               unknown=unknown, delimiter=delimiter,
                               encoding=training_encoding(model, read_model_attrs(model)[1]))
    with locked(out, "data store"), reported(), \
            (reading(like) if like is not None else contextlib.nullcontext()):
        return ingest_file(source, out, target=target, chunk_rows=chunk_rows,
                           missing=missing, text=text, overwrite=overwrite, like=like,
                           unknown=unknown, id_column=id_column, exclude=tuple(exclude),
                           delimiter=delimiter, max_categories=max_categories,
                           na_values=list(na_values) if na_values else None)


def _model_store(like):
    """The model store ``like`` names (itself, or through a ``latest`` pointer), or None
    when it is not a model store (then it is taken for a data store)."""
    path = resolve_model_path(like)
    return path if store_format(path) == MODEL_FORMAT else None


def split(store, train_out=None, test_out=None, *, test_fraction=0.2, seed=0,
          overwrite=False):
    """Split a data store into a training and a test store, chunk by chunk, seeded.

    Defaults: ``STORE-train.zarr`` and ``STORE-test.zarr`` beside ``STORE.zarr``.
    Returns ``train``, ``test`` (paths), ``train_rows``, ``test_rows``.
    See :func:`saspa_dask.storage.split.split_store`.
    """
    base = Path(store)
    stem = base.name[:-5] if base.name.endswith(".zarr") else base.name
    train_out = Path(train_out) if train_out else base.with_name(f"{stem}-train.zarr")
    test_out = Path(test_out) if test_out else base.with_name(f"{stem}-test.zarr")
    with locked(train_out, "data store"), locked(test_out, "data store"), reported(), \
            reading(absolute(store)):
        counts = split_store(store, train_out, test_out, test_fraction=test_fraction,
                             seed=seed, overwrite=overwrite)
    return {"train": train_out, "test": test_out, **counts}


def export(store, out, *, format=None, decode=False, overwrite=False,
           escape_formulas=True):
    """Write a data store's rows to a CSV or Parquet file (ids, row numbers, the
    inputs, the target), under a reader lock on the store.

    Parameters
    ----------
    store : str or Path
        A data store (from ``ingest`` or ``split``).
    out : str or Path
        The file to write (whole or not at all).
    format : {"csv", "parquet"}, optional
        Default: from ``out``'s suffix.
    decode : bool, default=False
        The source's columns back (a one-hot group as its category, a date as an ISO
        date) instead of the encoded inputs the model sees.
    overwrite : bool, default=False
        Replace an existing file this tool wrote.
    escape_formulas : bool, default=True
        CSV: text cells a spreadsheet would run as formulas get a leading ``'``.

    Returns
    -------
    dict
        ``out``, ``rows``, ``columns``.  See
        :func:`saspa_dask.storage.data_export.export_rows`.
    """
    store, out = absolute(store), absolute(out)
    with reported():
        fmt = format or table_format(out)
        if fmt not in ("csv", "parquet"):
            raise JobError(f"format must be csv or parquet, got {fmt!r}")
    with locked(out, "export"), reported():
        check_destination(out, overwrite, CSV if fmt == "csv" else PARQUET,
                          {"data store": store})
        with reading(store):
            result = export_rows(store, out, fmt, decode=decode,
                                 escape_formulas=escape_formulas)
    return {"out": out, **result}
