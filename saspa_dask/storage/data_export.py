"""A data store's rows out to CSV or Parquet: the rows a model learnt from or is tested
on, for a baseline (scikit-learn, a spreadsheet) run on the same split.

Columns: the ids (under the source's id column name) when the store has them, ``row``
(the row's number in the source file), the inputs, then the target under its own name
(a text target's labels as written).  The inputs are the store's as encoded (one-hot
columns ``name=category``, dates as days since 1970-01-01, imputed values filled in:
what the model saw), or with ``decode=True`` the source's columns back: a one-hot
group as its category (empty where no category was hot: a value ``--like --unknown
ignore`` did not know), a date column as an ISO date.  Read chunk by chunk; the
store's content is checked against its recorded fingerprint before the file is
renamed into place.
"""

from __future__ import annotations

import datetime

import numpy as np

from ..files.errors import StoreError
from .data_store import data_group
from .fingerprint import Fingerprint, check_recorded
from .table_writers import write_table

__all__ = ["export_rows"]

_EPOCH = datetime.datetime(1970, 1, 1)


def export_rows(store, path, fmt, *, decode=False, escape_formulas=True):
    """Write data store ``store``'s rows to ``path`` (module docstring).

    Returns
    -------
    dict
        ``rows`` written and ``columns`` (their names).
    """
    group, attrs = data_group(store)
    keys = set(group.array_keys())
    if "X" not in keys:
        raise StoreError(f"{store}: no array 'X' to export")
    X, y = group["X"], group["y"] if "y" in keys else None
    inputs = _Inputs(attrs, X.shape[1], decode)
    target = attrs.get("target") or "y"
    names = [n for n, present in ((_id_name(attrs, inputs.names, target), "id" in keys),
                                  ("row", "row" in keys)) if present]
    names += inputs.names + ([target] if y is not None else [])
    if len(set(names)) != len(names):
        raise StoreError(f"{store}: two exported columns would share a name ({names})")
    labels = attrs.get("target_classes")
    text = set(inputs.text) | ({names[0]} if "id" in keys else set()) | (
        {target} if labels else set())
    blocks = _blocks(store, group, attrs, inputs, labels)
    rows = write_table(path, fmt, names, blocks, text_columns=text,
                       escape_formulas=escape_formulas)
    return {"rows": rows, "columns": names}


def _id_name(attrs, input_names, target):
    name = (attrs.get("preprocessing") or {}).get("id_column") or "id"
    return "id" if name in (*input_names, target, "row") else name


def _blocks(store, group, attrs, inputs, labels):
    """Each chunk's columns; the content's fingerprint checked after the last."""
    keys = set(group.array_keys())
    X = group["X"]
    n, step = X.shape[0], int(attrs.get("chunk_rows") or X.chunks[0])
    hasher = Fingerprint(X.shape[1], step)
    for start in range(0, n, step):
        stop = min(start + step, n)
        xb = np.asarray(X[start:stop], dtype=np.float64)
        yb = np.asarray(group["y"][start:stop], dtype=np.float64) if "y" in keys else None
        hasher.add(xb, yb if yb is not None else np.zeros(0))
        columns = []
        if "id" in keys:
            columns.append(np.asarray(group["id"][start:stop], dtype=object))
        if "row" in keys:
            columns.append(np.asarray(group["row"][start:stop], dtype=np.int64))
        columns += inputs.columns(xb)
        if yb is not None:
            columns.append(yb if not labels else
                           np.array([labels[int(v)] for v in yb], dtype=object))
        if stop == n:  # before the file is renamed into place
            check_recorded(store, attrs.get("fingerprint"), hasher.hexdigest(n))
        yield columns


class _Inputs:
    """The exported input columns: the store's, or the source's decoded back."""

    def __init__(self, attrs, width, decode):
        columns = list(attrs.get("columns") or [f"x{j}" for j in range(width)])
        pre = attrs.get("preprocessing") or {}
        self.parts, self.names, self.text = [], [], []
        if not decode:
            self.parts = [("number", [j], None) for j in range(width)]
            self.names = columns
            return
        onehot, dates = pre.get("onehot") or {}, set(pre.get("date_columns") or [])
        groups = {f"{name}={cat}": (name, cat) for name, cats in onehot.items()
                  for cat in cats}
        seen = {}
        for j, column in enumerate(columns):
            if column in groups:
                name, category = groups[column]
                if name not in seen:
                    seen[name] = len(self.parts)
                    self.parts.append(("category", [], []))
                    self.names.append(name)
                    self.text.append(name)
                self.parts[seen[name]][1].append(j)
                self.parts[seen[name]][2].append(category)
            else:
                self.parts.append(("date" if column in dates else "number", [j], None))
                self.names.append(column)
                if column in dates:
                    self.text.append(column)

    def columns(self, xb):
        out = []
        for kind, at, categories in self.parts:
            if kind == "number":
                out.append(xb[:, at[0]])
            elif kind == "date":
                out.append(np.array([_iso(v) for v in xb[:, at[0]]], dtype=object))
            else:
                hot = xb[:, at]
                which = hot.argmax(axis=1)
                names = np.array(categories, dtype=object)[which]
                out.append(np.where(hot.max(axis=1) > 0.5, names, ""))
        return out


def _iso(days):
    """Days since 1970-01-01 as an ISO date (with the time when it has one)."""
    moment = _EPOCH + datetime.timedelta(days=float(days))
    if moment.time() == datetime.time(0):
        return moment.date().isoformat()
    return moment.isoformat(timespec="seconds")
