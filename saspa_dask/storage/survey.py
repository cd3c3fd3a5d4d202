"""The first pass over a table: what each column holds.

Per column: rows, missing values, distinct text values with their counts, and for
numbers the range and a uniform sample of the values (bottom-k sampling by random keys,
merged block by block: the median of up to :data:`SAMPLE_SIZE` values, exact below
that).  Given the training store's record (``reference``), the survey also counts what
is new in this table against it: unseen categories and values outside the training
range (drift, :func:`drift_report`).
"""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass

import numpy as np

from ..files.errors import StoreError

__all__ = ["DEFAULT_MISSING", "INFINITE", "MAX_CATEGORIES", "MISSING_IN_NUMBERS",
           "MISSING_TOKENS", "MissingTokens", "NONE_WORD", "SAMPLE_SIZE", "TableSurvey",
           "drift_report", "parse_date", "parse_token"]

MISSING_TOKENS = frozenset({"", "na", "nan", "null", "?"})
# missing in a column of numbers, but a category where a column holds text ("airbag =
# none" is a value); decided per column when the survey ends (TableSurvey.finish)
MISSING_IN_NUMBERS = frozenset({"none"})


@dataclass(frozen=True)
class MissingTokens:
    """The tokens a table's fields are read as missing by (compared stripped and in
    lower case): ``everywhere``, and ``in_numbers``, missing only where a column holds
    numbers (categories where it holds text)."""

    everywhere: frozenset
    in_numbers: frozenset = frozenset()

    @classmethod
    def given(cls, na_values):
        """The user's ``na_values`` (missing in every column, and nothing else), or the
        default for None."""
        if na_values is None:
            return DEFAULT_MISSING
        if isinstance(na_values, str):
            raise ValueError("na_values must be a list of tokens, not one string")
        return cls(frozenset(str(v).strip().lower() for v in na_values))

    def record(self):
        """What a store records (and ``--like`` reapplies): None for the default,
        else the tokens."""
        return None if self == DEFAULT_MISSING else sorted(self.everywhere)

    def describe(self):
        words = ", ".join(repr(w) for w in sorted(self.everywhere))
        if self.in_numbers:
            words += " (and " + ", ".join(repr(w) for w in sorted(self.in_numbers)) + \
                " in columns of numbers)"
        return words


DEFAULT_MISSING = MissingTokens(MISSING_TOKENS, MISSING_IN_NUMBERS)
MAX_CATEGORIES = 1000
SAMPLE_SIZE = 100_000  # values kept per numeric column for its median
_BLOCK = 65536  # rows between vectorised merges of the numeric values

MISSING, INFINITE, NUMBER, TEXT = "missing", "infinite", "number", "text"
NONE_WORD = "none-word"  # a MISSING_IN_NUMBERS token: missing or text by its column
# a number as a table writes one: ASCII digits only (no "1_000", which Python's float
# reads as 1000, and no other script's digits, which it reads as numbers too)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                     r"|[+-]?(?:inf|infinity)", re.ASCII | re.IGNORECASE)


_EPOCH = datetime.datetime(1970, 1, 1)


def parse_date(text):
    """An ISO 8601 date or date-time (``2024-03-05``, ``2024-03-05 14:30:00``,
    ``2024-03-05T14:30+02:00``) as days since 1970-01-01 (UTC; fractions of a day for
    the time), or None for anything else."""
    if len(text) < 10 or text[4] != "-" or text[7] != "-":
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return (moment - _EPOCH).total_seconds() / 86400.0


def parse_token(token, missing=DEFAULT_MISSING):
    """What one field is, read once: ``(MISSING, stripped token)`` for an empty or
    NA-like token (one of ``missing``'s),
    ``(INFINITE, None)`` for a number that is not finite (``inf``, ``1e309``: missing to
    the policies, as in the ``.npy`` reader, but counted and named apart),
    ``(NUMBER, value)`` for a number written in ASCII digits, or
    ``(TEXT, stripped token)``."""
    stripped = token.strip()
    lowered = stripped.lower()
    if lowered in missing.everywhere:
        return MISSING, stripped
    if lowered in missing.in_numbers:
        return NONE_WORD, stripped
    if not _NUMBER.fullmatch(stripped):
        return TEXT, stripped
    value = float(stripped)
    return (NUMBER, value) if math.isfinite(value) else (INFINITE, None)


class TableSurvey:
    """Counts of a table's columns, gathered row by row (:meth:`add`, then
    :meth:`finish`).

    Parameters
    ----------
    header : list of str
    target : int or None
        The target column (its distinct numeric tokens are kept too: a target mixing
        "0", "1" and "unknown" is encoded with all of them as labels).
    skip : set of int
        Columns not surveyed (the id column, excluded columns).
    seed : int
        Seeds the median samples (the same file gives the same medians).
    ranges : dict, optional
        Column index -> (low, high), the training range: rows outside it are counted
        per column in ``range_counts`` ([below, above]).
    missing : MissingTokens, optional
        The tokens read as missing (default: :data:`DEFAULT_MISSING`); each column's
        missing tokens as written are counted in ``missing_tokens``.
    """

    def __init__(self, header, target=None, skip=(), seed=0, ranges=None,
                 missing=DEFAULT_MISSING):
        self.header = header
        self.missing_rule = missing
        self.missing_tokens = [dict() for _ in header]  # token as written -> rows
        self.target = target
        self.skip = frozenset(skip)
        self.n_rows = 0
        self.missing = [0] * len(header)  # infinities included
        self.none_words = [dict() for _ in header]  # "none" as written -> rows
        self.missing_words = {}  # column -> the none-words counted as missing
        self.infinite = [0] * len(header)
        self.categories = [dict() for _ in header]  # value -> rows holding it
        self.target_numbers = set()
        # per column: whether every text value so far is a date, and how many plain
        # numbers it holds (a date column has text, all of it dates, and no numbers)
        self.all_dates = [True] * len(header)
        self.n_numbers = [0] * len(header)
        self.low = [math.inf] * len(header)
        self.high = [-math.inf] * len(header)
        self._numbers = [[] for _ in header]  # this block's numbers, per column
        self._samples = [(np.empty(0), np.empty(0)) for _ in header]  # (keys, values)
        self._rng = np.random.default_rng(seed)
        self.ranges = dict(ranges or {})
        self.range_counts = {j: [0, 0] for j in self.ranges}

    def add(self, row):
        self.n_rows += 1
        for j, token in enumerate(row):
            if j in self.skip:
                continue
            kind, value = parse_token(token, self.missing_rule)
            if kind is MISSING or kind is INFINITE:
                self.missing[j] += 1
                self.infinite[j] += kind is INFINITE
                if kind is MISSING:  # at most one entry per token of the rule's
                    seen = self.missing_tokens[j]
                    seen[value.lower()] = seen.get(value.lower(), 0) + 1
            elif kind is NONE_WORD:
                words = self.none_words[j]
                words[value] = words.get(value, 0) + 1
            elif kind is TEXT:
                cats = self.categories[j]
                if value in cats:
                    cats[value] += 1
                elif len(cats) <= MAX_CATEGORIES:
                    cats[value] = 1
                if self.all_dates[j]:
                    days = parse_date(value)
                    if days is None:
                        self._not_dates(j)
                    elif not self.n_numbers[j]:  # its range and median, as a number's
                        self._numbers[j].append(days)
            else:
                if self.all_dates[j] and self.categories[j]:
                    self._not_dates(j)
                self.n_numbers[j] += 1
                self._numbers[j].append(value)
                if j == self.target and len(self.target_numbers) <= MAX_CATEGORIES:
                    self.target_numbers.add(token.strip())
        if self.n_rows % _BLOCK == 0:
            self._merge()

    def missing_text(self, j):
        """Column ``j``'s missing values in words, infinities named apart."""
        n, inf = self.missing[j], self.infinite[j]
        text = f"{n} missing value{'s' if n != 1 else ''}"
        if inf == n:
            return (f"{n} infinite value{'s' if n != 1 else ''} (inf, -inf or a number "
                    "beyond the float range)")
        if inf:
            text = f"{text} ({inf} of them infinite)"
        words = self.missing_words.get(self.header[j])
        if words:
            text += f" (counting {', '.join(repr(w) for w in words)} in a column of numbers)"
        return text

    def _not_dates(self, j):
        """Column ``j`` holds something besides dates: the date values its number
        record took so far are dropped (it then holds what it would have held)."""
        self.all_dates[j] = False
        if self.n_numbers[j]:
            return  # its dates never entered the record
        self._numbers[j] = []
        self._samples[j] = (np.empty(0), np.empty(0))
        self.low[j], self.high[j] = math.inf, -math.inf
        if j in self.range_counts:
            self.range_counts[j] = [0, 0]

    def finish(self):
        """Merge the last block, and decide each column's "none" words: categories
        where the column holds other text, missing values where it holds numbers (or
        nothing else).  Returns the survey."""
        self._merge()
        for j, words in enumerate(self.none_words):
            if not words:
                continue
            if self.categories[j] and not self.all_dates[j]:  # text (not only dates)
                for word, rows in words.items():
                    self.categories[j][word] = self.categories[j].get(word, 0) + rows
            else:
                self.missing[j] += sum(words.values())
                self.missing_words[self.header[j]] = sorted(words)
                for word, rows in words.items():
                    seen = self.missing_tokens[j]
                    seen[word.lower()] = seen.get(word.lower(), 0) + rows
        return self

    def missing_token_counts(self):
        """Column -> {token read as missing (lower case): rows}, for the columns with
        any (what ingest records and says)."""
        return {self.header[j]: dict(sorted(seen.items()))
                for j, seen in enumerate(self.missing_tokens) if seen}

    def _merge(self):
        for j, values in enumerate(self._numbers):
            if not values:
                continue
            block = np.asarray(values, dtype=np.float64)
            self._numbers[j] = []
            self.low[j] = min(self.low[j], float(block.min()))
            self.high[j] = max(self.high[j], float(block.max()))
            if j in self.ranges:
                low, high = self.ranges[j]
                self.range_counts[j][0] += int((block < low).sum())
                self.range_counts[j][1] += int((block > high).sum())
            keys, kept = self._samples[j]
            keys = np.concatenate([keys, self._rng.random(block.size)])
            kept = np.concatenate([kept, block])
            if keys.size > SAMPLE_SIZE:  # the SAMPLE_SIZE smallest keys: a uniform sample
                top = np.argpartition(keys, SAMPLE_SIZE)[:SAMPLE_SIZE]
                keys, kept = keys[top], kept[top]
            self._samples[j] = (keys, kept)

    def median(self, j):
        """The median of column ``j``'s numbers (of a uniform sample of
        :data:`SAMPLE_SIZE` of them when it has more), or None when it has none."""
        values = self._samples[j][1]
        return float(np.median(values)) if values.size else None

    def target_tokens(self):
        """Every distinct token of the target column, text and numbers alike."""
        if len(self.target_numbers) > MAX_CATEGORIES:
            raise StoreError(f"target column {self.header[self.target]!r} mixes text labels "
                             f"with over {MAX_CATEGORIES} distinct numbers")
        return set(self.categories[self.target]) | self.target_numbers

    def labels(self):
        """Sorted labels of a target column that holds text (numeric tokens among them
        kept as text), or None for a numeric target."""
        if not self.categories[self.target]:
            return None
        if len(self.categories[self.target]) > MAX_CATEGORIES:
            raise StoreError(f"target column {self.header[self.target]!r} holds over "
                             f"{MAX_CATEGORIES} distinct text labels: as classes that is "
                             "one EP problem each; give a numeric target, or group the "
                             "labels first")
        return sorted(self.target_tokens())

    def is_date(self, j):
        """Whether column ``j`` is a date column: text, all of it ISO dates (encoded
        as days since 1970-01-01), no plain numbers."""
        return bool(self.categories[j]) and self.all_dates[j] and not self.n_numbers[j]

    def text_columns(self):
        return [j for j, cats in enumerate(self.categories) if cats]

    def stats(self, j):
        """Column ``j``'s record for a data store: rows, missing, and the range of its
        numbers (None when it holds none)."""
        numeric = self.low[j] <= self.high[j]
        return {"rows": self.n_rows, "missing": self.missing[j],
                "min": self.low[j] if numeric else None,
                "max": self.high[j] if numeric else None}


def drift_report(survey, reference, plan):
    """What is new in a surveyed table against the training store's column record.

    Parameters
    ----------
    survey : TableSurvey
        Of the new table, made with the training columns' ``ranges``.
    reference : dict
        The training store's ``column_stats`` (name -> rows, missing, min, max) and
        ``onehot`` categories.
    plan : list of (column index, kind, categories, fill)
        The new table's column plan (:mod:`~saspa_dask.storage.column_plan`).

    Returns
    -------
    dict
        Per column with anything to report: ``unseen_categories`` (rows holding a
        category the training rows lacked), ``below_range`` / ``above_range`` (rows
        outside the training range), ``missing`` (rows) and ``missing_rate`` against
        ``training_missing_rate``.
    """
    out = {}
    stats = reference.get("column_stats") or {}
    for j, kind, cats, _ in plan:
        name, entry = survey.header[j], {}
        if kind == "onehot":
            known = set(cats)
            unseen = sum(n for value, n in survey.categories[j].items() if value not in known)
            if unseen:
                entry["unseen_categories"] = unseen
        ranged = survey.range_counts.get(j)
        if ranged and any(ranged):
            entry["below_range"], entry["above_range"] = ranged
        old = stats.get(name)
        rate = survey.missing[j] / survey.n_rows
        old_rate = (old["missing"] / old["rows"]) if old and old.get("rows") else None
        if survey.missing[j] or (old_rate or 0.0) > 0:
            entry.update(missing=survey.missing[j], missing_rate=rate,
                         training_missing_rate=old_rate)
        if entry:
            out[name] = entry
    return out
