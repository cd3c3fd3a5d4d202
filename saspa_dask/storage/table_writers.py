"""Table files written a block of rows at a time: CSV (text cells a spreadsheet would
run as a formula escaped, unless asked not to) and Parquet (``pyarrow``), each created
aside and renamed into place by :func:`write_table` only when complete."""

from __future__ import annotations

import csv
import os
from pathlib import Path

from ..files.errors import StoreError
from ..files.names import aside
from ..files.outputs import CSV, PARQUET, check_output
from ..files.safe import create_file

__all__ = ["TABLE_FORMATS", "write_table"]

TABLE_FORMATS = ("csv", "parquet")


def write_table(path, fmt, names, blocks, *, text_columns=(), integer_columns=("row",),
                escape_formulas=True):
    """Write ``blocks`` (an iterable of lists of columns, one per name) to ``path`` as
    CSV or Parquet, aside first; ``text_columns`` are strings in Parquet's schema,
    ``integer_columns`` 64-bit integers, the rest float64.  Returns the rows written."""
    if fmt not in TABLE_FORMATS:
        raise StoreError(f"format must be one of {TABLE_FORMATS}, got {fmt!r}")
    tmp = aside(path)
    rows = 0
    try:
        writer = (_CsvWriter(tmp, names, escape_formulas) if fmt == "csv"
                  else _ParquetWriter(tmp, names, set(text_columns), set(integer_columns)))
        with writer:
            for columns in blocks:
                writer.write(columns)
                rows += len(columns[0]) if columns else 0
        # checked again just before the rename: only a file of this format (or a link,
        # replaced as a link) is ever replaced, never a device or a folder
        check_output(path, CSV if fmt == "csv" else PARQUET, overwrite=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return rows


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _escaped(cell):
    """A text cell a spreadsheet would run as a formula, made text (leading ``'``)."""
    if not cell.startswith(_FORMULA_STARTS):
        return cell
    try:
        float(cell)
        return cell  # a number such as -1: shown as the number it is
    except ValueError:
        return "'" + cell


class _CsvWriter:
    def __init__(self, path, names, escape_formulas=True):
        self.handle = os.fdopen(create_file(path, "an export being written"), "w",
                                newline="")
        self.writer = csv.writer(self.handle)
        self.escape = escape_formulas
        # the header too: a column is named as its source file named it
        self.writer.writerow([_escaped(n) for n in names] if escape_formulas else names)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()

    def write(self, columns):
        cells = [c.tolist() for c in columns]
        if self.escape:
            cells = [[_escaped(v) if isinstance(v, str) else v for v in c] for c in cells]
        self.writer.writerows(zip(*cells))


class _ParquetWriter:
    def __init__(self, path, names, text_columns=frozenset(), integer_columns=frozenset()):
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise StoreError("Parquet export needs pyarrow: pip install "
                             "'saspa-dask[parquet]'") from None
        self.pa = pa
        def kind(name):
            if name in text_columns:
                return pa.string()
            return pa.int64() if name in integer_columns else pa.float64()

        self.schema = pa.schema([pa.field(n, kind(n)) for n in names])
        self.sink = os.fdopen(create_file(path, "an export being written"), "wb")
        self.writer = pq.ParquetWriter(self.sink, self.schema)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.writer.close()
        self.sink.close()

    def write(self, columns):
        arrays = [self.pa.array([str(v) for v in c] if f.type == self.pa.string() else c,
                                type=f.type) for c, f in zip(columns, self.schema)]
        self.writer.write_table(self.pa.Table.from_arrays(arrays, schema=self.schema))
