"""The one table reader: header, field counts, missing values, text columns, targets.

Ingest streams a CSV (or a Parquet file, through ``pyarrow``, as the same rows of text
fields) in two passes through it (a survey, then the encoding); the ``saspa demo``
command reads a small CSV whole through the same functions.
"""

from __future__ import annotations

import csv
import math

from ..files.errors import StoreError

__all__ = ["MISSING_TOKENS", "PARQUET_SUFFIXES", "encode_row", "feature_names",
           "plan_columns", "read_rows", "survey_csv", "target_index"]

PARQUET_SUFFIXES = (".parquet", ".pq")

MISSING_TOKENS = frozenset({"", "na", "nan", "null", "none", "?"})
_MAX_CATEGORIES = 1000


_MISSING, _NUMBER, _TEXT = "missing", "number", "text"


def _parse(token):
    """What one field is, read once: ``(_MISSING, None)`` for an empty or NA-like token
    or a number that is not finite (``inf``, ``1e309``: one rule with the ``.npy``
    reader, which calls NaN and inf missing), ``(_NUMBER, value)``, or
    ``(_TEXT, stripped token)``."""
    stripped = token.strip()
    if stripped.lower() in MISSING_TOKENS:
        return _MISSING, None
    try:
        value = float(stripped)
    except ValueError:
        return _TEXT, stripped
    return (_NUMBER, value) if math.isfinite(value) else (_MISSING, None)


class _ColumnSurvey:
    """First pass over a table: counts, missing values and text values per column, and
    every distinct token of the target column (``target``, an index or None)."""

    def __init__(self, header, target=None):
        self.header = header
        self.target = target
        self.n_rows = 0
        self.missing = [0] * len(header)
        self.categories = [dict() for _ in header]
        # distinct numeric tokens of the target (capped): a target mixing "0", "1" and
        # "unknown" is encoded with all of them as labels
        self.target_numbers = set()

    def add(self, row):
        self.n_rows += 1
        for j, token in enumerate(row):
            kind, value = _parse(token)
            if kind is _MISSING:
                self.missing[j] += 1
            elif kind is _TEXT:
                cats = self.categories[j]
                if len(cats) <= _MAX_CATEGORIES:
                    cats.setdefault(value, len(cats))
            elif j == self.target and len(self.target_numbers) <= _MAX_CATEGORIES:
                self.target_numbers.add(token.strip())

    def target_tokens(self):
        """Every distinct token of the target column, text and numbers alike."""
        if len(self.target_numbers) > _MAX_CATEGORIES:
            raise StoreError(f"target column {self.header[self.target]!r} mixes text labels "
                             f"with over {_MAX_CATEGORIES} distinct numbers")
        return set(self.categories[self.target]) | self.target_numbers

    def labels(self):
        """Sorted labels of a target column that holds text (numeric tokens among them
        kept as text), or None for a numeric target."""
        if not self.categories[self.target]:
            return None
        return sorted(self.target_tokens())

    def text_columns(self):
        return [j for j, cats in enumerate(self.categories) if cats]


def read_rows(path):
    """Yield (line number, fields) of a CSV after its header (the header first, as
    line 1); checks field counts.  A Parquet file gives its rows as text fields (row
    numbers for line numbers)."""
    if str(path).lower().endswith(PARQUET_SUFFIXES):
        yield from _parquet_rows(path)
        return
    # utf-8-sig: a byte-order mark is not part of the first column's name
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if not header:
            raise StoreError(f"{path}: empty file (no header row)")
        yield 1, header
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise StoreError(
                    f"{path}:{reader.line_num}: {len(row)} fields, "
                    f"the header has {len(header)}"
                )
            yield reader.line_num, row


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
    try:
        handle = pq.ParquetFile(str(path))
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


def survey_csv(path, target_of=None):
    """The first pass over a table; ``target_of(header)`` names the target column's
    index (or None: no target column)."""
    rows = read_rows(path)
    _, header = next(rows)
    survey = _ColumnSurvey(header, None if target_of is None else target_of(header))
    for _, row in rows:
        survey.add(row)
    if survey.n_rows == 0:
        raise StoreError(f"{path}: no data rows after the header")
    return survey


def plan_columns(survey, target_index, missing, text, path):
    """Decide what happens to each column, or raise naming the offending ones."""
    header = survey.header
    plan = []  # (column index, kind, categories)
    problems = []
    for j, name in enumerate(header):
        if j == target_index:
            continue
        cats = survey.categories[j]
        if cats:
            if len(cats) > _MAX_CATEGORIES:
                problems.append(f"column {name!r} is text with over {_MAX_CATEGORIES} "
                                "distinct values; it cannot be one-hot encoded")
                continue
            if text == "error":
                example = next(iter(cats))
                problems.append(
                    f"column {name!r} is text ({len(cats)} distinct values, e.g. "
                    f"{example!r}); use text='onehot' (--text onehot) or text='drop'"
                )
                continue
            if text == "drop":
                continue
            plan.append((j, "onehot", sorted(cats)))
        else:
            plan.append((j, "numeric", None))
        if survey.missing[j] and missing == "error":
            problems.append(
                f"column {name!r} has {survey.missing[j]} missing values in "
                f"{survey.n_rows} rows; use missing='drop-rows' (--missing drop-rows)"
            )
    if survey.missing[target_index] and missing == "error":
        problems.append(f"target column {header[target_index]!r} has "
                        f"{survey.missing[target_index]} missing values")
    if problems:
        raise StoreError(f"{path}: " + "; ".join(problems))
    if not plan:
        raise StoreError(f"{path}: no input columns left after the text policy")
    return plan


def feature_names(header, plan):
    names = []
    for j, kind, cats in plan:
        if kind == "numeric":
            names.append(header[j])
        else:
            names.extend(f"{header[j]}={c}" for c in cats)
    return names


def encode_row(row, plan, target_index, target_codes):
    """One table row -> (features, target) or None if it has a missing value.

    ``plan`` holds (column, kind, categories) with categories as a dict of category ->
    position; ``target_codes`` maps a text target's labels to their codes (None for a
    numeric target).  A one-hot value not among its column's categories (possible only
    when they come from another store: ``ingest --like --unknown ignore``) is all
    zeros; a row without a target column (``target_index`` None) has target NaN."""
    out = []
    for j, kind, cats in plan:
        what, value = _parse(row[j])
        if what is _MISSING:
            return None
        if kind == "numeric":
            out.append(value)
        else:
            hot = [0.0] * len(cats)
            position = cats.get(row[j].strip())
            if position is not None:
                hot[position] = 1.0
            out.extend(hot)
    if target_index is None:
        return out, float("nan")
    what, value = _parse(row[target_index])
    if what is _MISSING:
        return None
    return out, float(value if target_codes is None else target_codes[row[target_index].strip()])


def target_index(header, target, path, notes=None):
    """The target column's index: an exact column name first, else an integer index
    (negative from the end), else the last column.  When ``target`` is both a column's
    name and a valid index of another column, the name wins and ``notes`` (a list) is
    told so.  Duplicate column names are an error."""
    duplicates = sorted({name for name in header if header.count(name) > 1})
    if duplicates:
        raise StoreError(f"{path}: duplicate column names {duplicates}")
    if target is None:
        return len(header) - 1
    text = str(target)
    is_index = text.lstrip("-").isdigit() and -len(header) <= int(text) < len(header)
    if text in header:
        index = header.index(text)
        if is_index and int(text) % len(header) != index and notes is not None:
            notes.append(f"--target {text}: the column named {text!r} (index {index}) was "
                         f"used, not the column at index {text}")
        return index
    if text.lstrip("-").isdigit():
        if not is_index:
            raise StoreError(f"{path}: target column {text} out of range "
                             f"({len(header)} columns)")
        return int(text) % len(header)
    raise StoreError(f"{path}: no column {text!r} (columns: {', '.join(header)})")
