"""Exporting a complete score store to CSV or Parquet, one row chunk at a time.

Columns: ``mean`` and ``variance`` (one per class for a one-vs-rest model, named
``mean[LABEL]``), ``proba[LABEL]`` for each class whose probability the store holds,
``label`` (the predicted class's original label) and ``rate`` (Poisson).  The file is
written aside and renamed into place when complete.  Parquet needs ``pyarrow``
(``pip install 'saspa-dask[parquet]'``).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import zarr

from ..files.atomic import aside
from ..files.errors import StoreError

__all__ = ["EXPORT_FORMATS", "export_scores"]

EXPORT_FORMATS = ("csv", "parquet")


def _column_names(attrs, name, width):
    if width == 1:
        return [name]
    labels = attrs.get("class_labels") or [str(k) for k in range(width)]
    return [f"{name}[{label}]" for label in labels[:width]]


def _columns(group, attrs):
    """(column names, arrays) in export order; 2-D arrays are split per class."""
    names, arrays = [], []
    for name in attrs["outputs"]:
        arr = group[name]
        width = 1 if arr.ndim == 1 else arr.shape[1]
        if name == "proba" and arr.ndim == 1:
            names.append(f"proba[{attrs['proba_columns'][0]}]")
        else:
            names.extend(_column_names(attrs, name, width))
        arrays.append(arr)
    return names, arrays


def _block(group, arrays, start, stop):
    parts = [np.asarray(a[start:stop]) for a in arrays]
    return np.column_stack([p if p.ndim == 2 else p[:, None] for p in parts])


def _label_text(attrs, values):
    """The original label of each predicted ``label`` value."""
    labels = attrs.get("class_labels")
    if labels is None:
        return values
    if attrs.get("label_values") == "classes":
        index = {float(c): i for i, c in enumerate(attrs["classes"])}
        return [labels[index[v]] for v in values]
    return [labels[int(v)] for v in values]


def export_scores(store, path, fmt):
    """Write a complete score store's outputs to ``path`` as CSV or Parquet.

    Returns the number of rows written.

    Raises
    ------
    StoreError
        An incomplete score store, an unknown format, or Parquet without pyarrow.
    """
    if fmt not in EXPORT_FORMATS:
        raise StoreError(f"format must be one of {EXPORT_FORMATS}, got {fmt!r}")
    group = zarr.open_group(str(store), mode="r")
    attrs = dict(group.attrs)
    if not attrs.get("complete"):
        raise StoreError(f"{store}: scores are incomplete; nothing exported")
    names, arrays = _columns(group, attrs)
    label_at = names.index("label") if "label" in names else None
    n, step = int(attrs["n_rows"]), int(attrs["chunk_rows"])
    tmp = aside(path)
    try:
        writer = _CsvWriter(tmp, names) if fmt == "csv" else _ParquetWriter(tmp, names,
                                                                              label_at)
        with writer:
            for start in range(0, n, step):
                block = _block(group, arrays, start, min(start + step, n))
                labels = None if label_at is None else _label_text(attrs, block[:, label_at])
                writer.write(block, labels, label_at)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return n


class _CsvWriter:
    def __init__(self, path, names):
        self.handle = open(path, "w", newline="")
        self.writer = csv.writer(self.handle)
        self.writer.writerow(names)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()

    def write(self, block, labels, label_at):
        rows = block.tolist()
        if labels is not None:
            for row, label in zip(rows, labels):
                row[label_at] = label
        self.writer.writerows(rows)


class _ParquetWriter:
    def __init__(self, path, names, label_at):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise StoreError("Parquet export needs pyarrow: pip install "
                             "'saspa-dask[parquet]'") from None
        self.pa = pa
        fields = [pa.field(n, pa.string() if j == label_at else pa.float64())
                  for j, n in enumerate(names)]
        self.schema = pa.schema(fields)
        self.writer = pq.ParquetWriter(str(path), self.schema)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.writer.close()

    def write(self, block, labels, label_at):
        columns = [self.pa.array([str(v) for v in labels]) if j == label_at
                   else self.pa.array(block[:, j]) for j in range(block.shape[1])]
        self.writer.write_table(self.pa.Table.from_arrays(columns, schema=self.schema))
