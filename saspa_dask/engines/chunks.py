"""Row chunks: how arrays are cut, mapped over and reduced, in this process or on Dask.

Every chunked computation builds one task per row chunk and reduces the per-chunk
results pairwise (a tree), so the driver only ever holds small summaries.
"""

from __future__ import annotations

import sys

import dask
import dask.array as da
import numpy as np
import zarr
from dask import delayed

__all__ = ["as_dask", "chunk_bounds", "is_lazy", "persist_balanced",
           "row_chunked", "seed_from", "spread_rows", "tree_reduce"]


def is_lazy(X):
    """True for inputs that are worked on chunk by chunk (dask or zarr arrays)."""
    return isinstance(X, (da.Array, zarr.Array))


def as_dask(X):
    """A dask array view of NumPy, zarr or dask input."""
    if isinstance(X, zarr.Array):
        return da.from_zarr(X)
    if isinstance(X, da.Array):
        return X
    return da.from_array(np.asarray(X))


def spread_rows(n_workers, *arrays):
    """The arrays (row-chunked alike) cut into ``n_workers`` row chunks when they are
    one chunk: one task per chunk, so a small store would keep one worker busy and the
    others idle.  Arrays of several chunks, or too few rows, are returned as they are."""
    first = arrays[0]
    if n_workers < 2 or len(first.chunks[0]) > 1 or first.shape[0] < 2 * n_workers:
        return arrays
    rows = -(-first.shape[0] // n_workers)
    return tuple(a.rechunk({0: rows}) for a in arrays)


def seed_from(random_state):
    """An int seed (or None) from an estimator's random_state."""
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return random_state
    return int(random_state.randint(2**31 - 1))


def row_chunked(X, y=None):
    """Dask arrays with regular row chunks, one column chunk, y aligned with X."""
    X = X if isinstance(X, da.Array) else da.from_array(X)
    X = X.rechunk({1: -1})
    rows = X.chunks[0]
    if len(set(rows[:-1])) > 1 or (len(rows) > 1 and rows[-1] > rows[0]):
        X = X.rechunk({0: rows[0]})
    if y is None:
        return X
    y = y if isinstance(y, da.Array) else da.from_array(y)
    return X, y.rechunk({0: X.chunks[0]})


def chunk_bounds(X):
    """(start, stop) of each row chunk."""
    edges = np.cumsum((0,) + X.chunks[0])
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


def tree_reduce(parts, combine, *, lazy=True, levels=3):
    """Pairwise reduction, in order: of delayed objects (a task graph) or, with
    ``lazy=False``, of values in this process (the same order of sums).

    A task of the graph does ``levels`` levels of the pairwise tree at once (up to
    2**levels parts, aligned): the sums and their order are the pairwise tree's, with
    a seventh of its tasks, each of which costs the scheduler and workers more than
    adding a few M x M matrices.
    """
    parts = list(parts)
    if not lazy:
        return _pairwise(combine, *parts)
    width = 2 ** levels
    while len(parts) > 1:
        groups = [parts[i:i + width] for i in range(0, len(parts), width)]
        parts = [delayed(_pairwise)(combine, *group) if len(group) > 1 else group[0]
                 for group in groups]
    return parts[0]


def _pairwise(combine, *parts):
    """The pairwise tree over ``parts`` in this process."""
    parts = list(parts)
    while len(parts) > 1:
        parts = [combine(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


def add_tuples(a, b):
    return tuple(x + y for x, y in zip(a, b))



def persist_balanced(build, n_blocks, groups=1):
    """Build and persist chunk blocks on the workers, group by group.

    The scheduler spreads the blocks' tasks over the workers it has (each is a root of
    the graph: queued to the least busy worker), and every sweep's task for a chunk
    then runs where its block is (its only dependency).  The blocks of each of
    ``groups`` interleaved groups (blocks g, g + groups, ...: the rounds of a grouped
    sweep) are persisted and waited for before the next group's, so that each round's
    blocks are spread evenly over the workers and a round does not wait for the worker
    that drew more of them.  No block is pinned to a worker's address: a block on a
    worker that is lost, or every worker restarted at once by their nannies at new
    addresses, is rebuilt on the workers the cluster has then (tasks restricted to an
    address, even loosely, stay in the scheduler's "no-worker" state for ever once that
    address is gone).
    """
    blocks = [None] * n_blocks
    for g in range(groups):
        members = range(g, n_blocks, groups)
        persisted = dask.persist(*[build(i) for i in members])
        _wait_for(persisted)
        for i, block in zip(members, persisted):
            blocks[i] = block
    return blocks


def _wait_for(persisted):
    """Wait for persisted objects on a distributed cluster.  Without ``distributed``
    imported no client can exist, and a local scheduler's persist has computed them
    already: importing it here would add its start-up to every import of the package."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return
    futures = distributed.futures_of(persisted)
    if futures:
        distributed.wait(futures)
