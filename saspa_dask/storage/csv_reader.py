"""The one CSV reader: header, field counts, missing values, text columns, targets.

Ingest streams a CSV in two passes through it (a survey, then the encoding); the
``saspa demo`` command reads a small CSV whole through the same functions.
"""

from __future__ import annotations

import csv

from .errors import StoreError

__all__ = ["MISSING_TOKENS", "encode_row", "feature_names", "plan_columns", "read_rows",
           "survey_csv", "target_index"]

MISSING_TOKENS = frozenset({"", "na", "nan", "null", "none", "?"})
_MAX_CATEGORIES = 1000


def _is_missing(token):
    return token.strip().lower() in MISSING_TOKENS


def _as_float(token):
    try:
        return float(token)
    except ValueError:
        return None


class _ColumnSurvey:
    """First pass over a CSV: counts, missing values and text values per column."""

    def __init__(self, header):
        self.header = header
        self.n_rows = 0
        self.missing = [0] * len(header)
        self.categories = [dict() for _ in header]
        self.numeric_seen = [0] * len(header)

    def add(self, row):
        self.n_rows += 1
        for j, token in enumerate(row):
            if _is_missing(token):
                self.missing[j] += 1
            elif _as_float(token) is not None:
                self.numeric_seen[j] += 1
            else:
                cats = self.categories[j]
                if len(cats) <= _MAX_CATEGORIES:
                    cats.setdefault(token.strip(), len(cats))

    def text_columns(self):
        return [j for j, cats in enumerate(self.categories) if cats]


def read_rows(path):
    """Yield (line number, fields) of a CSV after its header; checks field counts."""
    with open(path, newline="") as handle:
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


def survey_csv(path):
    rows = read_rows(path)
    _, header = next(rows)
    survey = _ColumnSurvey(header)
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


def encode_row(row, plan, target_index, target_classes):
    """One CSV row -> (features, target) or None if it has a missing value."""
    out = []
    for j, kind, cats in plan:
        token = row[j]
        if _is_missing(token):
            return None
        if kind == "numeric":
            out.append(float(token))
        else:
            hot = [0.0] * len(cats)
            hot[cats.index(token.strip())] = 1.0
            out.extend(hot)
    token = row[target_index]
    if _is_missing(token):
        return None
    value = _as_float(token) if target_classes is None else target_classes.index(token.strip())
    return out, float(value)


def target_index(header, target, path):
    if target is None:
        return len(header) - 1
    if isinstance(target, int) or (isinstance(target, str) and target.lstrip("-").isdigit()):
        index = int(target)
        if not -len(header) <= index < len(header):
            raise StoreError(f"{path}: target column {index} out of range ({len(header)} columns)")
        return index % len(header)
    if target not in header:
        raise StoreError(f"{path}: no column {target!r} (columns: {', '.join(header)})")
    return header.index(target)

