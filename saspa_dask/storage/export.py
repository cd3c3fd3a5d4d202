"""Exporting a complete score store to CSV or Parquet, one row chunk at a time.

Columns: the ids (when the scored data had an id column: under the source file's own
name for it, or ``id`` with ``id_header="id"`` or where that name is also an output's)
and ``row`` (the row's number in the file the data
came from) first, then ``mean`` and ``variance`` (one per class for
a one-vs-rest model, named ``mean[LABEL]``), ``proba[LABEL]`` for each class whose probability the store holds,
``label`` (the predicted class's original label) and ``rate`` (Poisson).  The file is
written aside and renamed into place when complete.

A CSV cell of text (an id, a label) that a spreadsheet would run as a formula (one that
begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return, and is not a number)
is written with a leading ``'``, which spreadsheets show as text (OWASP's advice
against CSV injection); ``escape_formulas=False`` (``--no-escape-formulas``) writes
every cell exactly.  Parquet needs ``pyarrow``
(``pip install 'saspa-dask[parquet]'``).
"""

from __future__ import annotations

import numpy as np

from ..files.errors import StoreError
from ..files.groups import zarr_group
from ..files.seals import check_seal
from .table_writers import TABLE_FORMATS, write_table

__all__ = ["EXPORT_FORMATS", "export_scores"]

EXPORT_FORMATS = TABLE_FORMATS


def _column_names(attrs, name, width):
    if width == 1:
        return [name]
    labels = attrs.get("class_labels") or [str(k) for k in range(width)]
    return [f"{name}[{label}]" for label in labels[:width]]


def _columns(group, attrs):
    """(column names, (array name, column within it or None) per name) in export
    order: id and row first, then the outputs, 2-D arrays split per class."""
    keys = set(group.array_keys())
    names = [n for n in ("id", "row") if n in keys]
    sources = [(n, None) for n in names]
    for name in attrs["outputs"]:
        arr = group[name]
        width = 1 if arr.ndim == 1 else arr.shape[1]
        if name == "proba" and arr.ndim == 1:
            names.append(f"proba[{attrs['proba_columns'][0]}]")
        else:
            names.extend(_column_names(attrs, name, width))
        sources.extend([(name, None)] if arr.ndim == 1 else [(name, k) for k in range(width)])
    return names, sources


def _block(group, sources, attrs, start, stop):
    """The columns of rows start..stop, each array read once: ids and labels as text,
    row numbers as integers, the rest as floats."""
    read = {name: np.asarray(group[name][start:stop]) for name in dict(sources)}
    return [_label_text(attrs, read[name]) if name == "label"
            else read[name] if k is None else read[name][:, k] for name, k in sources]


def _label_text(attrs, values):
    """The original label of each predicted ``label`` value."""
    labels = attrs.get("class_labels")
    if labels is None:
        return values
    if attrs.get("label_values") == "classes":
        index = {float(c): i for i, c in enumerate(attrs["classes"])}
        return np.array([labels[index[v]] for v in values], dtype=object)
    return np.array([labels[int(v)] for v in values], dtype=object)


def export_scores(store, path, fmt, escape_formulas=True, id_header=None):
    """Write a complete score store's outputs to ``path`` as CSV or Parquet
    (``escape_formulas``: see the module docstring; ``id_header``: ``"source"`` (or
    None) for the source's own id column name, ``"id"`` for ``id``).

    Returns the number of rows written.

    Raises
    ------
    StoreError
        An incomplete score store, an unknown format, or Parquet without pyarrow.
    """
    group = zarr_group(store, "r")
    attrs = dict(group.attrs)
    if not attrs.get("complete"):
        raise StoreError(f"{store}: scores are incomplete; nothing exported")
    check_seal(store, attrs, "score store", required=attrs.get("format_version", 1) >= 2)
    names, sources = _columns(group, attrs)
    if names and names[0] == "id":
        names[0] = _id_name(attrs, names, id_header, store)
    n, step = int(attrs["n_rows"]), int(attrs["chunk_rows"])
    id_name = names[0] if sources and sources[0][0] == "id" else None
    blocks = (_block(group, sources, attrs, start, min(start + step, n))
              for start in range(0, n, step))
    return write_table(path, fmt, names, blocks,
                       text_columns={"label", *([id_name] if id_name else [])},
                       escape_formulas=escape_formulas)


def _id_name(attrs, names, id_header, store):
    """The ids' column header (:func:`export_scores`): the source's own id column name
    (``id_header`` "source" or None), or ``id`` (asked, or where the source's name is
    also an output column's)."""
    source = attrs.get("id_column") or "id"
    if id_header not in (None, "id", "source"):
        raise StoreError(f"id_header must be 'id' or 'source', got {id_header!r}")
    if id_header == "id" or source in names:
        return "id"
    return source


