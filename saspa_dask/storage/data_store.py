"""Opening data stores: a zarr group with ``X`` (N x d) and ``y`` (N), row-chunked.

Any group with compatible ``X`` and ``y`` arrays can be used; one written by ingest
also records its columns, target, preprocessing and content fingerprint.
"""

from __future__ import annotations

from pathlib import Path

import dask.array as da
import numpy as np

from ..files.errors import StoreError
from ..files.seals import check_seal
from ..files.store import read_regular
from ..files.groups import chunk_counts, open_group, store_format, zarr_array
from .columns import match_columns

__all__ = ["DATA_FORMAT", "FORMAT_VERSION", "check_chunks", "check_identity", "data_group",
           "describe_data", "input_arrays", "is_data_store",
           "is_training_store", "open_data_store", "row_identity", "store_identity",
           "unreadable_chunk"]

DATA_FORMAT = "saspa-data"
# 4: attributes sealed by a checksum (files.seals); 3: row numbers, ids, imputation and
# column stats
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)


def check_chunks(path, array, name):
    """Every chunk of ``array`` is stored, when its writer stores every chunk.

    zarr does not store a chunk that equals the fill value and reads a missing chunk
    as the fill value.  Ingest's fill value is NaN, which it never writes, so a missing
    chunk of its arrays is a lost file (refused: it would be read as NaN).  An array
    whose fill value is a number (another writer's store) may well have left chunks
    of that value unstored on purpose: they are read as what was written."""
    fill = np.asarray(array.fill_value)
    if fill.dtype.kind != "f" or not np.isnan(fill):
        return
    stored, declared = chunk_counts(array)
    missing = declared - stored
    if missing > 0:
        raise StoreError(f"{path}: {missing} of {declared} chunks of {name!r} are "
                         "missing (lost or deleted files); zarr would read them as "
                         f"{array.fill_value!r}, so nothing is read")


def unreadable_chunk(path, err):
    """The StoreError naming the first chunk of the store's X or y that zarr cannot
    read as its metadata says (a chunk file replaced by another array's, or damaged),
    found by reading each chunk on the client; None when every chunk reads (``err``
    then came from elsewhere)."""
    group = open_group(path, "data store")
    for name in ("X", "y"):
        if name not in set(group.array_keys()):
            continue
        array = group[name]
        rows = array.chunks[0]
        for index in range(-(-array.shape[0] // rows)):
            try:
                array.blocks[(index,) + (0,) * (array.ndim - 1)]
            except Exception as chunk_err:  # zarr's codecs raise many kinds
                return StoreError(
                    f"{path}: chunk {index} of {name!r} (rows {index * rows} to "
                    f"{min((index + 1) * rows, array.shape[0]) - 1}) cannot be read as "
                    f"stored ({type(chunk_err).__name__}: {chunk_err}); the file was "
                    "replaced or damaged: ingest the data again")
    return None


def store_identity(path):
    """Which store is at ``path`` now: its folder (device, inode) and the fingerprint
    it records.  A store replaced by another (written aside, renamed in) has another
    folder, so a reader that pins this at its start and compares it after each read
    knows whether all it read came from one store.  None when nothing is there."""
    import json
    import os

    try:
        folder = os.stat(path)
        meta = json.loads(read_regular(Path(path) / "zarr.json", limit=1 << 24) or b"{}")
    except (OSError, ValueError):
        return None
    recorded = (meta.get("attributes") or {}).get("fingerprint") if isinstance(meta,
                                                                              dict) else None
    return (folder.st_dev, folder.st_ino, recorded)


def check_identity(path, pin):
    """Raise when the store at ``path`` is no longer the one pinned at the start."""
    if store_identity(path) != pin:
        raise StoreError(f"{path}: the data store was replaced while this job read it "
                         "(another job wrote it); nothing read after that was used and "
                         "nothing was marked complete: run the job again")


def row_identity(group):
    """``(numbers, ids)`` of a data store: ``numbers(start, stop)`` gives the source row
    numbers of rows start..stop (``row``; their positions for a store without one),
    ``ids`` the ``id`` array or None."""
    keys = set(group.array_keys())
    row = group["row"] if "row" in keys else None

    def numbers(start, stop):
        if row is None:
            return np.arange(start, stop, dtype=np.int64)
        return np.asarray(row[start:stop], dtype=np.int64)

    return numbers, (group["id"] if "id" in keys else None)


def data_group(path):
    """The zarr group of the data store at ``path`` and its attributes, checked: a
    store ingest wrote is complete, of a version this code reads, and its attributes
    are those it was written with (their checksum, which every store of version 4 has;
    its content fingerprint, which every such store records, is checked against the
    arrays where they are read).  A group of another writer's (no ``format``) is read
    as arrays alone, unless it has the arrays only ingest writes (``row``): then its
    attributes were removed.

    Raises
    ------
    StoreError
        Missing, incomplete, of an unknown version, or with edited attributes.
    """
    group = open_group(path, "data store")
    attrs = dict(group.attrs)
    if attrs.get("format") != DATA_FORMAT:
        if attrs.get("format") is not None or "row" in set(group.array_keys()):
            raise StoreError(f"{path}: not a data store (its attributes say format "
                             f"{attrs.get('format')!r}); if ingest wrote it, its "
                             "attributes were removed or changed since: ingest it again")
        return group, attrs
    if not attrs.get("complete", False):
        raise StoreError(f"{path}: data store is incomplete (an ingest did not finish)")
    version = attrs.get("format_version", 1)
    if version not in READABLE_VERSIONS:
        raise StoreError(f"{path}: data store format version {version!r}; this saspa "
                         f"reads versions {list(READABLE_VERSIONS)}")
    sealed = version >= 4
    if sealed and not attrs.get("fingerprint"):
        raise StoreError(f"{path}: the data store's fingerprint is missing (removed since "
                         "it was written); refusing to read it: ingest it again")
    check_seal(path, attrs, "data store", required=sealed)
    return group, attrs


def open_data_store(path):
    """Open a data store lazily: ``(X, y, attrs)`` with X, y as dask arrays.

    Raises
    ------
    StoreError
        Missing path, not a zarr group, no ``X`` / ``y``, an ingest that did not
        finish, or shapes and chunks that do not fit together.
    """
    group, attrs = data_group(path)
    keys = set(group.array_keys())
    if not {"X", "y"} <= keys:
        raise StoreError(f"{path}: a data store needs arrays 'X' and 'y'; found {sorted(keys)}")
    Xz, yz = group["X"], group["y"]
    if Xz.ndim != 2 or yz.ndim != 1 or Xz.shape[0] != yz.shape[0]:
        raise StoreError(f"{path}: X must be (N, d) and y (N,); got {Xz.shape} and {yz.shape}")
    if Xz.shape[0] == 0:
        raise StoreError(f"{path}: no rows")
    check_chunks(path, Xz, "X")
    check_chunks(path, yz, "y")
    X = da.from_zarr(zarr_array(path, "X"))
    y = da.from_zarr(zarr_array(path, "y"))
    rows = Xz.chunks[0]
    X = X.rechunk({0: rows, 1: -1})
    y = y.rechunk({0: rows})
    return X.astype(np.float64), y, attrs


def input_arrays(path, columns=None):
    """X (and y if present) of a data store, as row-chunked dask arrays, with X's
    columns in the order of ``columns`` (a model's column names, matched by name:
    :func:`~saspa_dask.storage.columns.match_columns`).

    Returns
    -------
    X, y, match
        ``y`` is None when the store has none; ``match`` says how the columns were
        matched.
    """
    group, attrs = data_group(path)
    if "X" not in set(group.array_keys()):
        raise StoreError(f"{path}: no array 'X' to score")
    Xz = group["X"]
    if Xz.ndim != 2:
        raise StoreError(f"{path}: X must be 2-D, got shape {Xz.shape}")
    match = match_columns(columns, attrs.get("columns"), str(path), n_store=Xz.shape[1])
    check_chunks(path, Xz, "X")
    rows = Xz.chunks[0]
    X = da.from_zarr(zarr_array(path, "X")).rechunk({0: rows, 1: -1})
    y = None
    if "y" in set(group.array_keys()) and group["y"].shape == (Xz.shape[0],):
        check_chunks(path, group["y"], "y")
        y = da.from_zarr(zarr_array(path, "y")).rechunk({0: rows})
    return match.apply(X), y, match


def is_training_store(model_fingerprint, path):
    """Whether the data store at ``path`` holds the rows a model was trained on: its
    recorded content fingerprint is the model's ``data_fingerprint_`` (so its metrics
    are not held-out ones)."""
    recorded = data_group(Path(path))[1].get("fingerprint")
    return model_fingerprint is not None and recorded == model_fingerprint


def is_data_store(path):
    """Whether ``path`` is a folder holding a data store ingest wrote (by its format
    attribute, or, where that is gone, by the ``row`` array only ingest writes; a model
    store or anything else is not)."""
    found = store_format(path)
    if found is None and (Path(path) / "row" / "zarr.json").is_file():
        return True  # its attributes were removed: describe_data says so
    return found == DATA_FORMAT


def describe_data(path):
    """A JSON-able summary of a data store (``saspa info DATA``): its rows, inputs and
    columns, target and classes, chunking, where it came from (source file, split),
    preprocessing, drift, notes and fingerprint, and whether it is complete."""
    group, attrs = data_group(path)
    keys = set(group.array_keys())
    X = group["X"] if "X" in keys else None
    return {
        "kind": "data store", "path": str(path), "complete": attrs.get("complete") is True,
        "rows": attrs.get("n_rows", None if X is None else int(X.shape[0])),
        "inputs": None if X is None else int(X.shape[1]),
        "columns": attrs.get("columns"), "target": attrs.get("target") if "y" in keys else None,
        "target_classes": attrs.get("target_classes"),
        "ids": "id" in keys, "chunk_rows": None if X is None else int(X.chunks[0]),
        **{key: attrs.get(key) for key in ("source", "split", "preprocessing", "drift",
                                           "notes", "fingerprint")}}
