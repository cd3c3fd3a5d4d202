"""Appending rows to a data store's ``X``, ``y``, ``row`` and ``id``, chunk-aligned and
fingerprinted.

Ingest and split write data stores through :class:`ChunkWriter`: rows arrive one at a
time or in blocks of any size, and only whole chunks are written (the last one when
the writer is flushed), so zarr writes stay chunk-aligned and the content fingerprint
(of X and y) is computed as the rows go by.  ``row`` is each row's number in the source
file (0 for its first data row), so a row kept through dropped rows and splits can be
joined back to the file; ``id`` (text) is the value of the file's id column.
"""

from __future__ import annotations

import numpy as np

from .fingerprint import Fingerprint

__all__ = ["ChunkWriter"]


class ChunkWriter:
    """Appends rows to X and y, writing only whole chunks (writes stay chunk-aligned)."""

    def __init__(self, group, n_features, chunk_rows, with_target=True, with_ids=False):
        self.X = group.create_array("X", shape=(0, n_features), chunks=(chunk_rows, n_features),
                                    dtype="f8", fill_value=np.nan)
        self.y = None
        if with_target:
            self.y = group.create_array("y", shape=(0,), chunks=(chunk_rows,), dtype="f8",
                                        fill_value=np.nan)
        # -1 is never a row number, so a chunk of row numbers is always stored
        self.row = group.create_array("row", shape=(0,), chunks=(chunk_rows,), dtype="i8",
                                      fill_value=-1)
        self.id = None
        if with_ids:
            self.id = group.create_array("id", shape=(0,), chunks=(chunk_rows,), dtype=str)
        self.chunk_rows = chunk_rows
        self.single = []  # single rows (CSV): (features, target, row number, id)
        self.pending = None  # rows short of a whole chunk: (X, y, rows, ids)
        self.n = 0
        self.hasher = Fingerprint(n_features, chunk_rows)

    def add(self, features, target, row, row_id=None):
        self.single.append((features, target, row, row_id))
        if len(self.single) == self.chunk_rows:
            self._flush_single()

    def _flush_single(self):
        features, targets, rows, ids = zip(*self.single)
        self.single = []
        self.add_block(np.array(features, dtype=np.float64),
                       np.array(targets, dtype=np.float64), np.array(rows, dtype=np.int64),
                       None if self.id is None else np.array(ids, dtype=str))

    def add_block(self, X, y, rows, ids=None):
        """Rows ``X`` with targets ``y``, source row numbers ``rows`` and ``ids`` (needed
        when the store has ids)."""
        if self.pending is not None:
            X, y, rows, ids = _joined(self.pending, (X, y, rows, ids))
        full = (len(y) // self.chunk_rows) * self.chunk_rows
        for start in range(0, full, self.chunk_rows):
            part = slice(start, start + self.chunk_rows)
            self._write(X[part], y[part], rows[part], None if ids is None else ids[part])
        self.pending = (X[full:], y[full:], rows[full:], None if ids is None else ids[full:])

    def flush(self):
        """Write what is left (the last, partial chunk)."""
        if self.single:
            self._flush_single()
        if self.pending is not None and len(self.pending[1]):
            self._write(*self.pending)
        self.pending = None

    def _write(self, X, y, rows, ids):
        start, stop = self.n, self.n + len(y)
        self.X.resize((stop, self.X.shape[1]))
        self.X[start:stop] = X
        if self.y is not None:
            self.y.resize((stop,))
            self.y[start:stop] = y
        self.row.resize((stop,))
        self.row[start:stop] = rows
        if self.id is not None:
            self.id.resize((stop,))
            self.id[start:stop] = ids
        self.hasher.add(X, y if self.y is not None else np.zeros(0))
        self.n = stop


def _joined(first, second):
    return tuple(None if a is None else np.concatenate([a, b]) for a, b in zip(first, second))
