"""Content fingerprints of data sets: sha256 over the shape, chunking and each chunk.

Ingest computes it while writing; training and scoring compute the same value chunk
by chunk on Dask (:func:`fingerprint`), so a model records exactly which data it saw.
"""

from __future__ import annotations

import hashlib

import dask
import numpy as np
from dask import delayed

from ..files.errors import StoreError

__all__ = ["Fingerprint", "check_recorded", "chunk_digest", "combine_digests", "fingerprint",
           "fingerprint_and_rows"]


class Fingerprint:
    """sha256 over (shape, chunking, then each chunk's X and y bytes in order)."""

    def __init__(self, n_features, chunk_rows):
        self.chunk_hashes = []
        self.n_features = n_features
        self.chunk_rows = chunk_rows

    def add(self, X, y):
        self.chunk_hashes.append(chunk_digest(X, y))

    def hexdigest(self, n_rows):
        return combine_digests(self.chunk_hashes, n_rows, self.n_features, self.chunk_rows)


def chunk_digest(X, y):
    """Digest of one row chunk (what the fingerprint is made of)."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(X, dtype="<f8").tobytes())
    h.update(np.ascontiguousarray(y, dtype="<f8").tobytes())
    return h.hexdigest()


def combine_digests(digests, n_rows, n_features, chunk_rows):
    h = hashlib.sha256(f"{n_rows}x{n_features}/{chunk_rows}".encode())
    for d in digests:
        h.update(d.encode())
    return h.hexdigest()


def fingerprint(X, y, chunk_rows=None):
    """Content fingerprint of a (row-chunked) dask data set, as ``ingest`` records it
    (``chunk_rows``: the store's chunk size, which a store smaller than one chunk does
    not show in ``X.chunks``)."""
    return fingerprint_and_rows(X, y, np.zeros(0, dtype=int), chunk_rows)[0]


def fingerprint_and_rows(X, y, index, chunk_rows=None):
    """:func:`fingerprint`, and the rows of X and y at ``index`` (in its order), from
    one pass over the chunks: each chunk's task returns its digest and its rows at
    ``index`` (fancy indexing the dask arrays instead cost as much as the pass)."""
    index = np.asarray(index, dtype=int)
    edges = np.cumsum((0,) + tuple(X.chunks[0]))
    chunk_of = np.searchsorted(edges, index, side="right") - 1
    places = [np.flatnonzero(chunk_of == c) for c in range(len(edges) - 1)]
    parts = [delayed(_digest_and_rows)(xb, yb, index[at] - edges[c])
             for c, (xb, yb, at) in enumerate(zip(X.to_delayed().ravel(),
                                                    y.to_delayed().ravel(), places))]
    parts = dask.compute(parts)[0]
    # the chunks' rows come in chunk order: row j of them is index[places' j-th]
    in_order = np.argsort(np.concatenate(places), kind="stable")
    X_rows, y_rows = (np.concatenate([p[k] for p in parts])[in_order] for k in (1, 2))
    return (combine_digests([p[0] for p in parts], X.shape[0], X.shape[1],
                            chunk_rows or X.chunks[0][0]), X_rows, y_rows)


def _digest_and_rows(X, y, local):
    return chunk_digest(X, y), np.asarray(X)[local], np.asarray(y)[local]


def check_recorded(path, recorded, computed):
    """A data store's content against the fingerprint recorded when it was written (None
    recorded: nothing to check)."""
    if recorded is not None and computed != recorded:
        raise StoreError(f"{path}: its content differs from the fingerprint recorded when "
                         "it was written (a chunk was changed or replaced since); "
                         "ingest it again")
