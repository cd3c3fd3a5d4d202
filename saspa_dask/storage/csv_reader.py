"""The one table reader: rows of text fields from a CSV or Parquet file.

A CSV may be gzip-compressed (read as it is, whatever its name), may start with a
byte-order mark, and may use ``,``, ``;``, a tab or ``|`` between fields: given no
``delimiter``, the one of these that occurs most often in the header line is used
(``,`` when none does).  Every problem is a :class:`~saspa_dask.files.errors.StoreError`
naming the file and line: a wrong field count, a field over the size limit, a line
over its limit (found before the line is read whole), bytes that are not UTF-8, a NUL
byte.  A Parquet file (through ``pyarrow``) gives its rows as text
fields, so both go through the same survey and encoding.
"""

from __future__ import annotations

import csv
import gzip

from ..files.errors import StoreError
from ..files.store import open_regular

__all__ = ["DELIMITERS", "PARQUET_SUFFIXES", "choose_delimiter", "read_rows"]

PARQUET_SUFFIXES = (".parquet", ".pq")
DELIMITERS = (",", ";", "\t", "|")
FIELD_LIMIT = 1 << 20  # characters in one field
LINE_LIMIT = 1 << 24  # bytes in one line: a longer one is refused before it is read whole


def _is_parquet(path):
    return str(path).lower().endswith(PARQUET_SUFFIXES)


def _is_gzip(path):
    with open_regular(path, "a table to read") as raw:
        return raw.read(2) == b"\x1f\x8b"


def _open_bytes(path):
    """The file's bytes (a regular file's only: a FIFO or device is refused before it
    is read): gzip is recognised by its magic bytes, not its name."""
    raw = open_regular(path, "a table to read")
    return gzip.GzipFile(fileobj=raw, mode="rb") if _is_gzip(path) else raw


def _text_lines(handle, path):
    """The file's lines as text, each decoded on its own so that a byte that is not
    UTF-8 is reported with its line; a byte-order mark is not part of the first
    column's name."""
    number = 0
    while True:
        raw = handle.readline(LINE_LIMIT + 1)
        if not raw:
            return
        number += 1
        if len(raw) > LINE_LIMIT:
            raise StoreError(f"{path}:{number}: a line longer than {LINE_LIMIT >> 20} MiB; "
                             "not a table this reader takes (is it a CSV file?)")
        try:
            yield raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as err:
            raise StoreError(f"{path}:{number}: not UTF-8 text (byte "
                             f"{raw[err.start:err.start + 1]!r} at column {err.start + 1}); "
                             "save the file as UTF-8") from None


def choose_delimiter(path, delimiter=None):
    """The field delimiter of a CSV: ``delimiter`` when given (one character), else the
    one of :data:`DELIMITERS` found most often in the header line (``,`` on a tie or
    when none is).  None for a Parquet file."""
    if _is_parquet(path):
        return None
    if delimiter is not None:
        if len(delimiter) != 1 or delimiter in "\r\n\"":
            raise StoreError(f"--delimiter must be one character (not a quote or line "
                             f"break), got {delimiter!r}")
        return delimiter
    try:  # bytes: a bad byte further on is the reading pass's to report, by line
        with _open_bytes(path) as handle:
            line = handle.readline(FIELD_LIMIT).decode("utf-8", errors="replace")
    except (OSError, EOFError) as err:
        raise StoreError(f"{path}:1: cannot read the header ({err})") from None
    counts = {d: line.count(d) for d in DELIMITERS}
    best = max(DELIMITERS, key=lambda d: (counts[d], d == ","))
    return best if counts[best] else ","


def read_rows(path, delimiter=None):
    """Yield (line number, fields) of a table, the header first (as line 1); checks
    field counts.  A Parquet file gives its rows as text fields (row numbers for line
    numbers)."""
    if _is_parquet(path):
        yield from _parquet_rows(path)
        return
    _refuse_binary(path)
    delimiter = choose_delimiter(path, delimiter)
    csv.field_size_limit(FIELD_LIMIT)
    with _open_bytes(path) as handle:
        reader = csv.reader(_text_lines(handle, path), delimiter=delimiter)
        try:
            yield from _checked_rows(reader, path, delimiter)
        except csv.Error as err:
            raise StoreError(f"{path}:{max(reader.line_num, 1)}: {err}") from None
        except (OSError, EOFError) as err:  # a truncated or corrupt gzip stream
            raise StoreError(f"{path}: after line {reader.line_num}: {err}") from None


def _checked_rows(reader, path, delimiter):
    header = next(reader, None)
    if not header:
        raise StoreError(f"{path}: empty file (no header row)")
    yield 1, header
    start = reader.line_num + 1
    for row in reader:
        if not row:
            start = reader.line_num + 1
            continue
        if len(row) != len(header) and any("\n" in field for field in row):
            raise StoreError(f"{path}:{start}: a quote opened on this line is never "
                             f"closed (the field runs on to line {reader.line_num}); "
                             "close it, or double the quote inside a quoted field")
        if len(row) != len(header):
            hint = ""
            if len(header) == 1:
                hint = (f" (one column read with delimiter {delimiter!r}: give "
                        "--delimiter)")
            raise StoreError(f"{path}:{reader.line_num}: {len(row)} fields, the header "
                             f"has {len(header)}{hint}")
        yield reader.line_num, row
        start = reader.line_num + 1


# the first bytes of files that are not tables this reader takes, and what they are
_NOT_TABLES = ((b"PK\x03\x04", "a zip archive (.npz, .xlsx, .zip)"),
               (b"\x93NUMPY", "a NumPy array without the .npy suffix"),
               (b"PAR1", "a Parquet file without the .parquet suffix"))


def _refuse_binary(path):
    """A file that is plainly not a CSV table (an archive, an array, binary bytes) is
    refused by name before it is read as text, line by line."""
    with _open_bytes(path) as handle:
        head = handle.read(8192)
    for magic, what in _NOT_TABLES:
        if head.startswith(magic):
            raise StoreError(f"{path}: {what}, not a CSV table: save the table as CSV "
                             "or Parquet, or one array with numpy.save as .npy")
    if b"\0" in head:
        raise StoreError(f"{path}: binary data (NUL bytes in its first 8 KiB), not a CSV "
                         "table")


def _parquet_text(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # round-trips exactly through float()
    return str(value)


def _parquet_rows(path, batch_rows=65536):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise StoreError(f"{path}: reading Parquet needs pyarrow: pip install "
                         "'saspa-dask[parquet]'") from None
    raw = open_regular(path, "a table to read")
    try:
        handle = pq.ParquetFile(raw)
    except Exception as err:  # pyarrow raises its own types for corrupt files
        raise StoreError(f"{path}: not a readable Parquet file ({err})") from None
    header = [str(name) for name in handle.schema_arrow.names]
    if not header:
        raise StoreError(f"{path}: no columns")
    yield 1, header
    line = 1
    for batch in handle.iter_batches(batch_size=batch_rows):
        columns = [[_parquet_text(v) for v in column.to_pylist()] for column in batch.columns]
        for row in zip(*columns):
            line += 1
            yield line, list(row)
