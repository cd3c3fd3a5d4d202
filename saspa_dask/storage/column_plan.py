"""What happens to each column of a table: the target, the id, inputs kept as numbers,
one-hot encoded or dropped, and what fills a missing value.

A plan is a list of ``(column index, kind, categories, fill)``: ``kind`` is
``"numeric"`` or ``"onehot"``; ``fill`` is what a missing value becomes: None (the row
is dropped), a number (``missing="impute"``: the column's median), or for a one-hot
column the position of its :data:`MISSING_CATEGORY` (or :data:`ZEROS` when the
training rows had no missing value there: all zeros, counted as drift).
"""

from __future__ import annotations

from ..files.errors import StoreError
from .survey import (DEFAULT_MISSING, INFINITE, MAX_CATEGORIES, MISSING, NONE_WORD,
                     parse_date, parse_token)

__all__ = ["MISSING_CATEGORY", "MISSING_POLICIES", "ZEROS", "encode_row", "feature_names",
           "named_columns", "plan_columns", "target_index"]

MISSING_POLICIES = ("error", "drop-rows", "impute")
MISSING_CATEGORY = "(missing)"
# the category of a capped text column's rarer values (max_categories)
OTHER_CATEGORY = "(other)"
ZEROS = -1


def plan_columns(survey, target, missing, text, path, max_categories=None, notes=None):
    """Decide what happens to each surveyed column, or raise naming the offending
    ones.  Columns in ``survey.skip`` (id, excluded) and the target are not inputs.
    With ``max_categories`` a one-hot column keeps its commonest categories and puts
    the rest in :data:`OTHER_CATEGORY` (each such column said in ``notes``)."""
    header = survey.header
    plan, problems = [], []
    for j, name in enumerate(header):
        if j == target or j in survey.skip:
            continue
        entry, problem = _plan_one(survey, j, missing, text, max_categories, notes)
        if problem:
            problems.append(problem)
        elif entry:
            plan.append(entry)
    if survey.missing[target] and missing == "error":
        problems.append(f"target column {header[target]!r} has "
                        f"{survey.missing_text(target)}")
    if problems:
        raise StoreError(f"{path}: " + "; ".join(problems))
    if not plan:
        raise StoreError(f"{path}: no input columns left after the text policy")
    return plan


def _plan_one(survey, j, missing, text, max_categories=None, notes=None):
    """(plan entry or None for a dropped column, problem or None) of column ``j``."""
    name, cats, n_missing = survey.header[j], survey.categories[j], survey.missing[j]
    if n_missing and missing == "error":
        return None, (f"column {name!r} has {survey.missing_text(j)} in "
                      f"{survey.n_rows} rows; use missing='drop-rows' or 'impute' "
                      "(--missing drop-rows / impute)")
    if survey.is_date(j):  # days since 1970-01-01, whatever the text policy
        return (j, "date", None, survey.median(j) if missing == "impute" else None), None
    if cats and survey.n_numbers[j]:
        # one-hot over its words would encode every number as no category at all
        words = sorted(cats, key=lambda c: (-cats[c], c))[:3]
        numbers, texts = survey.n_numbers[j], sum(cats.values())
        return None, (f"column {name!r} holds numbers ({numbers} row"
                      f"{'s' if numbers != 1 else ''}) and text ({texts} row"
                      f"{'s' if texts != 1 else ''}, e.g. "
                      f"{', '.join(repr(w) for w in words)}): if the text means a missing "
                      "value, name it with na_values (--na-values TOKEN) and choose "
                      "missing='impute' or 'drop-rows'; else exclude the column "
                      "(--exclude)")
    if not cats:
        if missing == "impute" and survey.median(j) is None:
            return None, (f"column {name!r} has no values to impute from (all "
                          f"{survey.n_rows} missing); --exclude it")
        return (j, "numeric", None, survey.median(j) if missing == "impute" else None), None
    capped = max_categories is not None and len(cats) > max_categories
    if len(cats) > MAX_CATEGORIES and not capped:
        advice = ("--max-categories N keeps the commonest" if max_categories is None else
                  f"--max-categories {max_categories} is more than the {MAX_CATEGORIES} "
                  f"this reader counts: give at most {MAX_CATEGORIES}")
        return None, (f"column {name!r} is text with over {MAX_CATEGORIES} distinct "
                      f"values; it cannot be one-hot encoded ({advice}; or --exclude it, "
                      "or give it as --id-column)")
    if text == "error":
        return None, (f"column {name!r} is text ({len(cats)} distinct values, e.g. "
                      f"{next(iter(cats))!r}); use text='onehot' (--text onehot) or "
                      "text='drop'")
    if text == "drop":
        return None, None
    values = _capped(cats, max_categories, name, notes) if capped else sorted(cats)
    fill = None
    if missing == "impute":
        if n_missing and MISSING_CATEGORY not in values:
            values.append(MISSING_CATEGORY)
        fill = values.index(MISSING_CATEGORY) if MISSING_CATEGORY in values else ZEROS
    return (j, "onehot", values, fill), None


def _capped(cats, max_categories, name, notes):
    """The ``max_categories`` commonest categories (ties by name), sorted, then
    :data:`OTHER_CATEGORY` for the rest."""
    ranked = sorted(cats, key=lambda c: (-cats[c], c))
    kept, rest = ranked[:max_categories], ranked[max_categories:]
    rows = sum(cats[c] for c in rest)
    if notes is not None:
        notes.append(f"column {name!r}: {len(kept)} commonest of {len(cats)}"
                     f"{'+' if len(cats) > MAX_CATEGORIES else ''} categories kept; "
                     f"{len(rest)} rarer ones ({rows} rows) are {OTHER_CATEGORY!r}")
    return sorted(kept) + [OTHER_CATEGORY]


def feature_names(header, plan):
    names = []
    for j, kind, cats, _ in plan:
        if kind in ("numeric", "date"):
            names.append(header[j])
        else:
            names.extend(f"{header[j]}={c}" for c in cats)
    return names


def encode_row(row, plan, target_index, target_codes, missing=DEFAULT_MISSING):
    """One table row -> (features, target), or None to drop it (a missing value with
    no fill, or a missing target).

    ``plan`` holds (column, kind, categories, fill) with categories as a dict of
    category -> position; ``target_codes`` maps a text target's labels to their codes
    (None for a numeric target).  A one-hot value not among its column's categories
    (possible only when they come from another store: ``ingest --like --unknown
    ignore``) is all zeros; a row without a target column (``target_index`` None) has
    target NaN.  ``missing``: the tokens read as missing (:class:`~saspa_dask.storage.survey.MissingTokens`)."""
    out = []
    for j, kind, cats, fill in plan:
        what, value = parse_token(row[j], missing)
        # a "none" word is a category of a text column, a missing value of any other
        absent = what is MISSING or what is INFINITE or (what is NONE_WORD
                                                         and kind != "onehot")
        if absent and fill is None:
            return None
        if kind == "numeric":
            out.append(fill if absent else value)
            continue
        if kind == "date":
            out.append(fill if absent else parse_date(value))
            continue
        hot = [0.0] * len(cats)
        position = fill if absent else cats.get(
            row[j].strip(), cats.get(OTHER_CATEGORY, ZEROS))
        if position != ZEROS:
            hot[position] = 1.0
        out.extend(hot)
    if target_index is None:
        return out, float("nan")
    what, value = parse_token(row[target_index], missing)
    if what is MISSING or what is INFINITE or (what is NONE_WORD and (
            target_codes is None or row[target_index].strip() not in target_codes)):
        return None
    return out, float(value if target_codes is None else target_codes[row[target_index].strip()])


def named_columns(header, names, path, option):
    """The indexes of the columns ``names`` (exact names), or an error naming the ones
    the header lacks and the option that gave them."""
    unknown = [n for n in names if n not in header]
    if unknown:
        raise StoreError(f"{path}: {option}: no column {', '.join(map(repr, unknown))} "
                         f"(columns: {', '.join(header)})")
    return [header.index(n) for n in names]


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
