"""Appending rows to a data store's ``X`` and ``y``, chunk-aligned and fingerprinted.

Ingest and split write data stores through :class:`ChunkWriter`: rows arrive one at a
time or in blocks of any size, and only whole chunks are written (the last one when
the writer is flushed), so zarr writes stay chunk-aligned and the content fingerprint
is computed as the rows go by.
"""

from __future__ import annotations

import numpy as np

from .fingerprint import Fingerprint

__all__ = ["ChunkWriter"]


class ChunkWriter:
    """Appends rows to X and y, writing only whole chunks (writes stay chunk-aligned)."""

    def __init__(self, group, n_features, chunk_rows, with_target=True):
        self.X = group.create_array("X", shape=(0, n_features), chunks=(chunk_rows, n_features),
                                    dtype="f8", fill_value=np.nan)
        self.y = None
        if with_target:
            self.y = group.create_array("y", shape=(0,), chunks=(chunk_rows,), dtype="f8",
                                        fill_value=np.nan)
        self.chunk_rows = chunk_rows
        self.rows, self.targets = [], []  # single rows (CSV)
        self.pending_X = np.empty((0, n_features))
        self.pending_y = np.empty(0)
        self.n = 0
        self.hasher = Fingerprint(n_features, chunk_rows)

    def add(self, features, target):
        self.rows.append(features)
        self.targets.append(target)
        if len(self.rows) == self.chunk_rows:
            self._flush_rows()

    def _flush_rows(self):
        rows, targets = self.rows, self.targets
        self.rows, self.targets = [], []
        self.add_block(np.array(rows, dtype=np.float64), np.array(targets, dtype=np.float64))

    def add_block(self, X, y):
        X = np.concatenate([self.pending_X, X])
        y = np.concatenate([self.pending_y, y])
        full = (len(y) // self.chunk_rows) * self.chunk_rows
        for start in range(0, full, self.chunk_rows):
            self._write(X[start:start + self.chunk_rows], y[start:start + self.chunk_rows])
        self.pending_X, self.pending_y = X[full:], y[full:]

    def flush(self):
        """Write what is left (the last, partial chunk)."""
        if self.rows:
            self._flush_rows()
        if len(self.pending_y):
            self._write(self.pending_X, self.pending_y)
            self.pending_X, self.pending_y = self.pending_X[:0], self.pending_y[:0]

    def _write(self, X, y):
        start, stop = self.n, self.n + len(y)
        self.X.resize((stop, self.X.shape[1]))
        self.X[start:stop] = X
        if self.y is not None:
            self.y.resize((stop,))
            self.y[start:stop] = y
        self.hasher.add(X, y if self.y is not None else np.zeros(0))
        self.n = stop
