"""Ingest: stream a CSV or ``.npy`` file into a chunked zarr data store.

Data store: a group with ``X`` (N x d float64, row chunks), ``y`` (N), attributes
``format = "saspa-data"``, ``format_version``, ``columns``, ``target``, ``preprocessing``,
``fingerprint`` and ``complete``.  The file is never held in memory: a CSV is read in
two passes (survey, then encode), a ``.npy`` file memory-mapped.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import zarr

from .atomic import aside, check_destination, move_into_place
from .csv_reader import (encode_row, feature_names, plan_columns, read_rows, survey_csv,
                         target_index)
from .data_store import DATA_FORMAT, FORMAT_VERSION
from .errors import StoreError
from .fingerprint import Fingerprint

__all__ = ["ingest"]


class _ChunkWriter:
    """Appends rows to X and y, writing only whole chunks (writes stay chunk-aligned)."""

    def __init__(self, group, n_features, chunk_rows):
        self.X = group.create_array("X", shape=(0, n_features), chunks=(chunk_rows, n_features),
                                    dtype="f8", fill_value=np.nan)
        self.y = group.create_array("y", shape=(0,), chunks=(chunk_rows,), dtype="f8",
                                    fill_value=np.nan)
        self.chunk_rows = chunk_rows
        self.rows, self.targets = [], []  # single rows (CSV)
        self.pending_X = np.empty((0, n_features))
        self.pending_y = np.empty(0)
        self.n = 0
        self.hasher = Fingerprint(n_features, chunk_rows)

    def add(self, features, target):
        self.rows.append(features)
        self.targets.append(target)
        if len(self.rows) == self.chunk_rows:
            self._flush_rows()

    def _flush_rows(self):
        rows, targets = self.rows, self.targets
        self.rows, self.targets = [], []
        self.add_block(np.array(rows, dtype=np.float64), np.array(targets, dtype=np.float64))

    def add_block(self, X, y):
        X = np.concatenate([self.pending_X, X])
        y = np.concatenate([self.pending_y, y])
        full = (len(y) // self.chunk_rows) * self.chunk_rows
        for start in range(0, full, self.chunk_rows):
            self._write(X[start:start + self.chunk_rows], y[start:start + self.chunk_rows])
        self.pending_X, self.pending_y = X[full:], y[full:]

    def flush(self):
        """Write what is left (the last, partial chunk)."""
        if self.rows:
            self._flush_rows()
        if len(self.pending_y):
            self._write(self.pending_X, self.pending_y)
            self.pending_X, self.pending_y = self.pending_X[:0], self.pending_y[:0]

    def _write(self, X, y):
        start, stop = self.n, self.n + len(y)
        self.X.resize((stop, self.X.shape[1]))
        self.y.resize((stop,))
        self.X[start:stop] = X
        self.y[start:stop] = y
        self.hasher.add(X, y)
        self.n = stop



def ingest(source, out, *, target=None, chunk_rows=65536, missing="error", text="error",
           overwrite=False):
    """Stream a CSV or ``.npy`` file into a zarr data store.

    Parameters
    ----------
    source : str or Path
        ``.csv`` with a header row, or ``.npy`` holding a 2-D numeric array.
    out : str or Path
        Destination directory (a zarr v3 group).
    target : str or int, optional
        Target column: a CSV column name, or a column index (``.npy`` and CSV).
        Default: the last column.
    chunk_rows : int
        Rows per zarr chunk.
    missing : {"error", "drop-rows"}
        Missing values (empty, NA, NaN, null, None, ?) raise an error naming the
        columns and counts, or the rows holding them are dropped (and counted).
    text : {"error", "onehot", "drop"}
        Non-numeric input columns raise an error naming them, are one-hot encoded
        (one 0/1 column per value, recorded in the attributes) or are dropped.
        A text *target* is always encoded as 0, 1, ... with its labels recorded.
    overwrite : bool
        Replace an existing store at ``out``.

    Returns
    -------
    dict
        The store's attributes.
    """
    source = Path(source)
    if not source.is_file():
        raise StoreError(f"{source}: no such file")
    if missing not in ("error", "drop-rows"):
        raise ValueError(f"missing must be 'error' or 'drop-rows', got {missing!r}")
    if text not in ("error", "onehot", "drop"):
        raise ValueError(f"text must be 'error', 'onehot' or 'drop', got {text!r}")
    if int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows!r}")
    check_destination(out, overwrite)
    tmp = aside(out)
    try:
        group = zarr.open_group(str(tmp), mode="w")
        if source.suffix.lower() == ".npy":
            attrs = _ingest_npy(source, group, target, int(chunk_rows), missing)
        else:
            attrs = _ingest_csv(source, group, target, int(chunk_rows), missing, text)
        attrs.update(format=DATA_FORMAT, format_version=FORMAT_VERSION,
                     source=str(source), chunk_rows=int(chunk_rows), complete=True)
        group.attrs.update(attrs)
        move_into_place(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return attrs



def _ingest_csv(path, group, target, chunk_rows, missing, text):
    survey = survey_csv(path)
    header = survey.header
    t = target_index(header, target, path)
    plan = plan_columns(survey, t, missing, text, path)
    target_classes = sorted(survey.categories[t]) if survey.categories[t] else None
    names = feature_names(header, plan)
    writer = _ChunkWriter(group, len(names), chunk_rows)
    dropped = 0
    rows = read_rows(path)
    next(rows)
    for _, row in rows:
        encoded = encode_row(row, plan, t, target_classes)
        if encoded is None:
            dropped += 1
            continue
        writer.add(*encoded)
    writer.flush()
    if writer.n == 0:
        raise StoreError(f"{path}: every row has a missing value")
    preprocessing = {
        "missing": missing,
        "rows_dropped_for_missing": dropped,
        "text": text,
        "onehot": {header[j]: cats for j, kind, cats in plan if kind == "onehot"},
        "dropped_text_columns": [header[j] for j in survey.text_columns()
                                 if j != t and all(j != p[0] for p in plan)],
    }
    return {"columns": names, "target": header[t], "target_classes": target_classes,
            "n_rows": writer.n, "preprocessing": preprocessing,
            "fingerprint": writer.hasher.hexdigest(writer.n)}


def _ingest_npy(path, group, target, chunk_rows, missing):
    try:
        data = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as err:
        raise StoreError(f"{path}: not a numeric .npy array ({err})") from None
    if data.ndim != 2 or data.shape[1] < 2:
        raise StoreError(f"{path}: need a 2-D array with at least 2 columns, got {data.shape}")
    if data.shape[0] == 0:
        raise StoreError(f"{path}: no rows")
    if not np.issubdtype(data.dtype, np.number):
        raise StoreError(f"{path}: dtype {data.dtype} is not numeric")
    header = [f"x{j}" for j in range(data.shape[1])]
    t = target_index(header, target, path)
    keep = [j for j in range(data.shape[1]) if j != t]
    n_missing = 0
    for start in range(0, data.shape[0], chunk_rows):  # first pass: missing values
        n_missing += int((~np.isfinite(np.asarray(data[start:start + chunk_rows], float))
                          ).any(axis=1).sum())
    if n_missing and missing == "error":
        raise StoreError(f"{path}: {n_missing} rows hold NaN or inf; "
                         "use missing='drop-rows' (--missing drop-rows)")
    writer = _ChunkWriter(group, len(keep), chunk_rows)
    for start in range(0, data.shape[0], chunk_rows):
        block = np.asarray(data[start:start + chunk_rows], dtype=np.float64)
        block = block[np.isfinite(block).all(axis=1)]
        writer.add_block(block[:, keep], block[:, t])
    writer.flush()
    if writer.n == 0:
        raise StoreError(f"{path}: every row holds NaN or inf")
    return {"columns": [header[j] for j in keep], "target": header[t], "target_classes": None,
            "n_rows": writer.n,
            "preprocessing": {"missing": missing, "rows_dropped_for_missing": n_missing},
            "fingerprint": writer.hasher.hexdigest(writer.n)}

