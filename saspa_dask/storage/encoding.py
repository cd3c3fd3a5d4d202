"""A data store's encoding, reapplied to new data (``saspa ingest NEW --like STORE``).

A store written by ingest records how its file was encoded: its input columns (numeric
ones by name, one-hot ones as ``name=category``, date columns by name in
``date_columns``), the target column and its text labels
(``target_classes``), the id and excluded columns, the missing-value rule with its
imputation values, and each column's range and missing count (``column_stats``, the
reference for drift counts).  :func:`plan_like` turns that record
into a column plan for a new table, so the new store has the same columns in the same
order, the same categories and the same label codes: a test split that lacks a rare
category still gets its all-zero column.  Anything the record cannot encode is an
error naming it: a column missing from the new table or not in the old one, a category
not seen before (all zeros instead with ``unknown="ignore"``), a target label not seen
before.
"""

from __future__ import annotations

from ..files.errors import StoreError
from .column_plan import MISSING_CATEGORY, OTHER_CATEGORY, ZEROS
from .data_store import DATA_FORMAT

__all__ = ["UNKNOWN_POLICIES", "like_encoding", "plan_like", "recorded_ranges"]

UNKNOWN_POLICIES = ("error", "ignore")


def like_encoding(group_attrs, like):
    """The encoding record of the store ``like`` (its attributes), checked."""
    if group_attrs.get("format") != DATA_FORMAT or not group_attrs.get("columns"):
        raise StoreError(f"{like}: not a data store written by saspa ingest (no recorded "
                         "columns to copy)")
    pre = group_attrs.get("preprocessing") or {}
    return {"columns": list(group_attrs["columns"]), "target": group_attrs.get("target"),
            "target_classes": group_attrs.get("target_classes"),
            "missing": pre.get("missing", "error"), "onehot": pre.get("onehot") or {},
            "dates": list(pre.get("date_columns") or []),
            "dropped": list(pre.get("dropped_text_columns") or []),
            "id_column": pre.get("id_column"), "excluded": list(pre.get("excluded") or []),
            "impute": pre.get("impute") or {}, "column_stats": pre.get("column_stats") or {},
            "na_values": pre.get("na_values"), "like": str(like)}


def recorded_ranges(encoding, header):
    """Column index -> (min, max) of the recorded numeric columns present in
    ``header``: the training ranges the new table's values are counted against."""
    out = {}
    for name, stats in encoding["column_stats"].items():
        if name in header and stats.get("min") is not None:
            out[header.index(name)] = (stats["min"], stats["max"])
    return out


def _origins(encoding):
    """Each input column of the old store as (source column, kind, categories), in
    order, one entry per source column."""
    onehot_names = {f"{name}={cat}": name for name, cats in encoding["onehot"].items()
                    for cat in cats}
    plan, seen = [], set()
    for column in encoding["columns"]:
        source = onehot_names.get(column, column)
        if source in seen:
            continue
        seen.add(source)
        if source in encoding["onehot"]:
            plan.append((source, "onehot", list(encoding["onehot"][source])))
        elif source in encoding["dates"]:
            plan.append((source, "date", None))
        else:
            plan.append((source, "numeric", None))
    return plan


def plan_like(encoding, survey, path, unknown="error"):
    """The column plan (as :func:`~saspa_dask.storage.column_plan.plan_columns` gives)
    for a surveyed table, following ``encoding``; the survey located the target by its
    recorded name (None: a table without it, data to score).

    Returns
    -------
    plan : list of (column index, kind, categories, fill)

    Raises
    ------
    StoreError
        Missing or extra columns, text in a numeric column, unseen categories (unless
        ``unknown="ignore"``), unseen target labels, missing values under the error
        rule.
    """
    if unknown not in UNKNOWN_POLICIES:
        raise ValueError(f"unknown must be one of {UNKNOWN_POLICIES}, got {unknown!r}")
    header = survey.header
    position = {name: j for j, name in enumerate(header)}
    origins = _origins(encoding)
    missing_cols = [name for name, _, _ in origins if name not in position]
    target = survey.target
    used = ({name for name, _, _ in origins} | {encoding["target"], encoding["id_column"]}
            | set(encoding["dropped"]) | set(encoding["excluded"]))
    extra = [name for name in header if name not in used]
    if missing_cols or extra:
        raise StoreError(f"{path}: columns differ from {encoding['like']}'s: "
                         f"missing {missing_cols}, not in it {extra}")
    problems, plan = [], []
    for name, kind, cats in origins:
        j = position[name]
        seen = survey.categories[j]
        if kind == "numeric" and seen:
            problems.append(f"column {name!r} is numeric in {encoding['like']} but holds "
                            f"text here (e.g. {next(iter(seen))!r})")
        elif kind == "date" and (survey.n_numbers[j] or not survey.all_dates[j]):
            problems.append(f"column {name!r} holds dates in {encoding['like']} but here "
                            "also other text or numbers (dates are ISO 8601: 2024-03-05)")
        elif kind == "onehot" and OTHER_CATEGORY not in cats:  # else: "(other)"
            new = sorted(set(seen) - set(cats))
            if new and unknown == "error":
                problems.append(f"column {name!r} has categories not seen in "
                                f"{encoding['like']}: {new[:10]}; use --unknown ignore "
                                "to encode them as all zeros")
        if survey.missing[j] and encoding["missing"] == "error":
            problems.append(f"column {name!r} has {survey.missing_text(j)}")
        plan.append((j, kind, cats, _fill(encoding, name, kind, cats)))
    if target is not None:
        problems += _target_problems(encoding, survey, target)
    if problems:
        raise StoreError(f"{path}: " + "; ".join(problems))
    return plan


def _fill(encoding, name, kind, cats):
    """What a missing value of column ``name`` becomes under the recorded rule (see
    :mod:`~saspa_dask.storage.column_plan`)."""
    if encoding["missing"] != "impute":
        return None
    if kind in ("numeric", "date"):
        return encoding["impute"][name]
    return cats.index(MISSING_CATEGORY) if MISSING_CATEGORY in cats else ZEROS


def _target_problems(encoding, survey, target):
    labels, seen = encoding["target_classes"], survey.categories[target]
    if labels is None and seen:
        return [f"target {encoding['target']!r} is numeric in {encoding['like']} but "
                f"holds text here (e.g. {next(iter(seen))!r})"]
    if labels is not None:
        new = sorted(survey.target_tokens() - set(labels))
        if new:
            return [f"target {encoding['target']!r} has labels not seen in "
                    f"{encoding['like']}: {new[:10]}"]
    if survey.missing[target] and encoding["missing"] == "error":
        return [f"target column {encoding['target']!r} has {survey.missing_text(target)}"]
    return []
