"""Matching a data store's columns to a model's, by name.

A model trained from a data store records the store's column names; a store written by
ingest records its own.  Scoring, evaluation and retraining take the data store's
columns in the model's order: when both sides have names, a store with the same
columns in another order is reordered, and one with missing or extra columns is
refused naming them.  Only when a side has no names (a store not written by ingest,
a model fitted on a bare array) are the columns matched by count, and the caller is
told so.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..files.errors import StoreError

__all__ = ["ColumnMatch", "match_columns"]


class ColumnMatch:
    """How a data store's columns map to a model's.

    Attributes
    ----------
    order : ndarray of int or None
        Column ``order[j]`` of the store is the model's column ``j``; None when the
        store's columns are already in the model's order (or matched by count).
    by_name : bool
        Whether names were compared (False: matched by count only).
    """

    def __init__(self, order, by_name):
        self.order = order
        self.by_name = by_name

    @property
    def reordered(self):
        return self.order is not None

    def describe(self):
        """One line for the user: how the columns were matched."""
        if not self.by_name:
            return "columns matched by count (the store or the model records no names)"
        if self.reordered:
            return "columns matched by name and reordered to the model's order"
        return "columns matched by name"

    def apply(self, X):
        """X (NumPy or dask, rows x store columns) in the model's column order."""
        return X if self.order is None else X[:, self.order]


def _duplicates(names):
    return sorted(name for name, count in Counter(names).items() if count > 1)


def match_columns(model_columns, store_columns, where, *, n_store=None):
    """Map a store's columns onto a model's, by name when both are known.

    Parameters
    ----------
    model_columns : sequence of str or None
        The columns the model was trained on, in its order.
    store_columns : sequence of str or None
        The data store's recorded columns, in the store's order.
    where : str
        The store's path, for messages.
    n_store : int, optional
        The store's actual column count (checked when names are missing).

    Returns
    -------
    ColumnMatch

    Raises
    ------
    StoreError
        Missing or extra columns (named), duplicate names, or a count that differs.
    """
    if model_columns is None or store_columns is None:
        n_model = None if model_columns is None else len(model_columns)
        if n_model is not None and n_store is not None and n_model != n_store:
            raise StoreError(f"{where}: {n_store} input columns, the model expects {n_model}")
        return ColumnMatch(None, False)
    model_columns = [str(c) for c in model_columns]
    store_columns = [str(c) for c in store_columns]
    for side, names in (("the model", model_columns), (where, store_columns)):
        dup = _duplicates(names)
        if dup:
            raise StoreError(f"{side}: duplicate column names {dup}")
    missing = [c for c in model_columns if c not in set(store_columns)]
    extra = [c for c in store_columns if c not in set(model_columns)]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"not in the model {extra}")
        raise StoreError(f"{where}: columns do not match the model's ({'; '.join(parts)}); "
                         f"the model's columns are {model_columns}")
    if model_columns == store_columns:
        return ColumnMatch(None, True)
    position = {name: j for j, name in enumerate(store_columns)}
    return ColumnMatch(np.array([position[c] for c in model_columns]), True)
