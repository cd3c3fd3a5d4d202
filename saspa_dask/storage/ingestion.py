"""Ingest: stream a CSV, Parquet or ``.npy`` file into a chunked zarr data store.

Data store: a group with ``X`` (N x d float64, row chunks), ``y`` (N; absent when a
``like`` ingest finds no target column), attributes ``format = "saspa-data"``,
``format_version``, ``columns``, ``target``, ``target_classes``, ``preprocessing``,
``fingerprint`` and ``complete``.  The file is never held in memory: a CSV or Parquet
file is read in two passes (survey, then encode), a ``.npy`` file memory-mapped.
``like=STORE`` encodes a new file exactly as STORE was (:mod:`~saspa_dask.storage.encoding`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import zarr

from ..files.atomic import aside, check_destination, check_not_an_input, move_into_place
from .chunk_writer import ChunkWriter
from .csv_reader import (encode_row, feature_names, plan_columns, read_rows, survey_csv,
                         target_index)
from .data_store import DATA_FORMAT, FORMAT_VERSION
from ..files.groups import open_group
from .encoding import UNKNOWN_POLICIES, like_encoding, plan_like
from ..files.errors import StoreError

__all__ = ["ingest"]


def ingest(source, out, *, target=None, chunk_rows=65536, missing="error", text="error",
           overwrite=False, like=None, unknown="error"):
    """Stream a CSV, Parquet or ``.npy`` file into a zarr data store.

    Parameters
    ----------
    source : str or Path
        ``.csv`` with a header row, ``.parquet`` (needs ``pyarrow``), or ``.npy``
        holding a 2-D real array.
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
    like : str or Path, optional
        A data store written by ingest (the training data): encode ``source`` exactly
        as it was encoded (same columns in the same order, same categories, same
        target labels and codes, same missing-value rule).  ``target``, ``missing``
        and ``text`` are then taken from it; a source without the target column gives
        a store without ``y`` (data to score).
    unknown : {"error", "ignore"}
        With ``like``: a category the like store never saw is an error naming it, or
        (``"ignore"``) encoded as all zeros.

    Returns
    -------
    dict
        The store's attributes; ``notes`` lists anything the caller should be told
        (a target name that is also another column's index).
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
    if unknown not in UNKNOWN_POLICIES:
        raise ValueError(f"unknown must be one of {UNKNOWN_POLICIES}, got {unknown!r}")
    check_not_an_input(out, {"source file": source, "--like store": like})
    encoding = None
    if like is not None:
        encoding = like_encoding(dict(open_group(like, "data store").attrs), like)
    check_destination(out, overwrite)
    tmp = aside(out)
    try:
        group = zarr.open_group(str(tmp), mode="w")
        if source.suffix.lower() == ".npy":
            attrs = _ingest_npy(source, group, target, int(chunk_rows), missing, encoding)
        else:
            attrs = _ingest_table(source, group, target, int(chunk_rows), missing, text,
                                  encoding, unknown)
        attrs.update(format=DATA_FORMAT, format_version=FORMAT_VERSION,
                     source=str(source), chunk_rows=int(chunk_rows), complete=True)
        if like is not None:
            attrs["like"] = str(Path(like).resolve())
        group.attrs.update(attrs)
        move_into_place(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return attrs



def _ingest_table(path, group, target, chunk_rows, missing, text, encoding, unknown):
    """A CSV or Parquet table: survey, plan the columns (or follow ``encoding``), encode."""
    notes = []
    if encoding is None:
        survey = survey_csv(path, lambda header: target_index(header, target, path, notes))
        t = survey.target
        plan = plan_columns(survey, t, missing, text, path)
        target_classes = survey.labels()
    else:
        name = encoding["target"]
        survey = survey_csv(path, lambda header: header.index(name) if name in header
                            else None)
        plan, t = plan_like(encoding, survey, path, unknown)
        target_classes = encoding["target_classes"]
        missing, text = encoding["missing"], "as --like"
    header = survey.header
    names = feature_names(header, plan)
    writer = ChunkWriter(group, len(names), chunk_rows, with_target=t is not None)
    # categories and labels as positions, for the per-row lookups
    positions = [(j, kind, None if cats is None else {c: i for i, c in enumerate(cats)})
                 for j, kind, cats in plan]
    codes = None if target_classes is None else {c: i for i, c in enumerate(target_classes)}
    dropped = 0
    rows = read_rows(path)
    next(rows)
    for _, row in rows:
        encoded = encode_row(row, positions, t, codes)
        if encoded is None:
            dropped += 1
            continue
        writer.add(*encoded)
    writer.flush()
    if writer.n == 0:
        raise StoreError(f"{path}: every row has a missing value")
    onehot = {header[j]: cats for j, kind, cats in plan if kind == "onehot"}
    preprocessing = {
        "missing": missing,
        "rows_dropped_for_missing": dropped,
        "text": text,
        "onehot": onehot,
        "dropped_text_columns": (encoding["dropped"] if encoding is not None else
                                 [header[j] for j in survey.text_columns()
                                  if j != t and all(j != p[0] for p in plan)]),
    }
    if encoding is not None:
        preprocessing["unknown_categories"] = unknown
    target_name = header[t] if t is not None else (encoding or {}).get("target")
    return {"columns": names, "target": target_name, "target_classes": target_classes,
            "has_target": t is not None, "n_rows": writer.n, "preprocessing": preprocessing,
            "notes": notes, "fingerprint": writer.hasher.hexdigest(writer.n)}


def _ingest_npy(path, group, target, chunk_rows, missing, encoding=None):
    try:
        data = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as err:
        raise StoreError(f"{path}: not a numeric .npy array ({err})") from None
    if data.ndim != 2 or data.shape[1] < 2:
        raise StoreError(f"{path}: need a 2-D array with at least 2 columns, got {data.shape}")
    if data.shape[0] == 0:
        raise StoreError(f"{path}: no rows")
    if not np.issubdtype(data.dtype, np.number) or np.issubdtype(data.dtype,
                                                                   np.complexfloating):
        raise StoreError(f"{path}: dtype {data.dtype} is not a real number type")
    header = [f"x{j}" for j in range(data.shape[1])]
    if encoding is not None:
        if encoding["columns"] != [h for h in header if h != encoding["target"]]:
            raise StoreError(f"{path}: columns {header} do not match {encoding['like']}'s "
                             f"{encoding['columns']} plus target {encoding['target']!r}")
        target, missing = encoding["target"], encoding["missing"]
    t = target_index(header, target, path)
    keep = [j for j in range(data.shape[1]) if j != t]
    n_missing = 0
    for start in range(0, data.shape[0], chunk_rows):  # first pass: missing values
        n_missing += int((~np.isfinite(np.asarray(data[start:start + chunk_rows], float))
                          ).any(axis=1).sum())
    if n_missing and missing == "error":
        raise StoreError(f"{path}: {n_missing} rows hold NaN or inf; "
                         "use missing='drop-rows' (--missing drop-rows)")
    writer = ChunkWriter(group, len(keep), chunk_rows)
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

