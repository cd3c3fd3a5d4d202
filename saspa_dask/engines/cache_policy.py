"""Whether a Dask fit keeps its chunks' whitened blocks in worker memory.

Cached blocks (``cache="memory"``) make every sweep after the first a pass over numbers
already in memory; they take N (M + 3) floats over the cluster, which at 10^8 rows and
M = 256 is 200 GB: more than the workers hold, so Dask spills them to disk and reads
them back every sweep, or the nannies restart workers over their memory limit and the
job starts over.  Rebuilding each chunk's block in every sweep (``cache="none"``) bounds
a worker's memory by a chunk at the cost of the kernel's evaluation per sweep
(``docs/distributed.md``, "Memory").
``cache="auto"`` (the default) keeps the blocks where every worker's share of them
fits below the fraction of its memory limit at which Dask starts spilling (its
``distributed.worker.memory`` ``target`` and ``spill``), after what the worker holds
now (as the scheduler reports it) and a sweep's temporaries; it rebuilds them
otherwise, and says which it chose and why.
"""

from __future__ import annotations

import math

__all__ = ["block_bytes", "choose_cache", "spill_fraction"]

#: a sweep's temporaries on a worker, in chunks' blocks: a block being built (its
#: kernel values and their whitened copy) and a pass's product of a block's size
TEMPORARY_BLOCKS = 3


def block_bytes(n_rows, n_bases):
    """Bytes of the whitened blocks of ``n_rows`` rows: phi (M floats a row) and the
    row's residual variance, target and site scratch."""
    return int(n_rows) * (int(n_bases) + 3) * 8


def spill_fraction():
    """The share of a worker's memory limit at which Dask starts spilling: the lower
    of its ``target`` (managed memory) and ``spill`` (process memory) fractions, 0.95
    (its ``terminate``) where both are off."""
    import dask

    memory = dask.config.get("distributed.worker.memory", {})
    fractions = [memory.get(k, default) for k, default in (("target", 0.6), ("spill", 0.7))]
    return min([f for f in fractions if f] or [0.95])


def _workers():
    """``(memory limit, bytes held now)`` of each worker of the active Client (limit
    None without one); an empty list without a distributed Client."""
    try:
        from distributed import get_client

        workers = get_client().scheduler_info(n_workers=-1)["workers"]
    except (ImportError, ValueError):
        return []
    return [(w.get("memory_limit") or None, w.get("metrics", {}).get("memory", 0))
            for w in workers.values()]


def choose_cache(cache, n_rows, n_bases, chunk_rows=None):
    """``(cache, reason)``: "memory" or "none" for ``cache="auto"`` (module
    docstring), ``cache`` itself otherwise (reason None).  ``chunk_rows``: the
    largest chunk's rows (default: all rows in one)."""
    if cache != "auto":
        return cache, None
    need = block_bytes(n_rows, n_bases)
    workers = _workers()
    if not workers or any(limit is None for limit, _ in workers):
        return "memory", (f"blocks cached ({need / 2**30:.3g} GiB; the workers have no "
                          "memory limit)")
    chunk_rows = chunk_rows or n_rows
    n_chunks, chunk = math.ceil(n_rows / chunk_rows), block_bytes(chunk_rows, n_bases)
    # the scheduler spreads the blocks about evenly: a worker may get one more
    share = (math.ceil(n_chunks / len(workers)) + 1 + TEMPORARY_BLOCKS) * chunk
    fraction = spill_fraction()
    room = min(fraction * limit - held for limit, held in workers)
    said = (f"{need / 2**30:.3g} GiB of blocks, up to {share / 2**30:.3g} GiB a worker "
            f"with a sweep's temporaries, against {max(room, 0) / 2**30:.3g} GiB free "
            f"below {fraction:g} of a worker's memory limit, where Dask spills")
    if share <= room:
        return "memory", f"blocks cached in worker memory ({said})"
    return "none", f"blocks rebuilt every sweep ({said})"
