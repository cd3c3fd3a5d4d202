"""Minibatches of every row, epoch after epoch, for stochastic learning.

NumPy rows are drawn directly; dask (zarr) rows one row chunk at a time in a random
chunk order, the next chunk read by a background thread while this one is used.
"""

from __future__ import annotations

import threading

import dask
import numpy as np

from ..engines.chunks import is_lazy

__all__ = ["Minibatches"]


class Minibatches:
    """Minibatches of rows in a random order, epoch after epoch: NumPy rows directly;
    dask (zarr) rows one row chunk at a time in a random chunk order, the next chunk
    read by a background thread while this one is used."""

    def __init__(self, X, y, batch_rows, seed):
        self.X, self.y, self.rows = X, y, int(batch_rows)
        self.rng = np.random.default_rng(seed)
        self.lazy = is_lazy(X)
        if self.lazy:
            self.x_parts = X.to_delayed().ravel()
            self.y_parts = y.to_delayed().ravel()
            self.offsets = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]])

    def epoch(self):
        """``(rows, X_B, y_B)``: each minibatch's row numbers (into all N rows) and
        rows, every row once."""
        if not self.lazy:
            yield from self._batches(self.X, self.y, 0)
            return
        order = self.rng.permutation(len(self.x_parts))
        pending = self._fetch(order[0])
        for k in range(len(order)):
            thread, box = pending
            thread.join()
            if "error" in box:
                raise box["error"]
            if k + 1 < len(order):
                pending = self._fetch(order[k + 1])
            yield from self._batches(*box["value"], self.offsets[order[k]])

    def _fetch(self, index):
        box = {}

        def read():
            try:
                X, y = dask.compute(self.x_parts[index], self.y_parts[index])
                box["value"] = (np.asarray(X, dtype=np.float64), np.asarray(y))
            except Exception as err:  # raised in the learning thread
                box["error"] = err
        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread, box

    def _batches(self, X, y, offset):
        n = X.shape[0]
        order = self.rng.permutation(n)
        for start in range(0, n, self.rows):
            rows = np.sort(order[start:start + self.rows])
            if rows.size:
                yield offset + rows, X[rows], y[rows]
