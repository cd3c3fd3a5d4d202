"""Whether a Dask fit keeps its chunks' whitened blocks in worker memory.

Cached blocks (``cache="memory"``) make every sweep after the first a pass over numbers
already in memory; they take N (M + 3) floats over the cluster, which at 10^8 rows and
M = 256 is 200 GB: more than the workers hold, so Dask spills them to disk and reads
them back every sweep, or the nannies restart workers over their memory limit and the
job starts over.  Rebuilding each chunk's block in every sweep (``cache="none"``) bounds
a worker's memory by a chunk at the cost of the kernel's evaluation per sweep.
``cache="auto"`` (the default) keeps the blocks where they fit within
:data:`CACHE_MEMORY_SHARE` of the workers' memory limits (as the scheduler reports
them) and rebuilds them otherwise, and says which it chose and why.
"""

from __future__ import annotations

__all__ = ["CACHE_MEMORY_SHARE", "block_bytes", "choose_cache"]

#: the share of the workers' memory limits the cached blocks may take: below the
#: 0.6 at which Dask's workers start spilling, with room for a sweep's temporaries
CACHE_MEMORY_SHARE = 0.4


def block_bytes(n_rows, n_bases):
    """Bytes of the whitened blocks of ``n_rows`` rows: phi (M floats a row) and the
    row's residual variance, target and site scratch."""
    return int(n_rows) * (int(n_bases) + 3) * 8


def _worker_limits():
    """The memory limit (bytes) of each worker of the active Client, None for a
    worker without one; an empty list without a distributed Client."""
    try:
        from distributed import get_client

        workers = get_client().scheduler_info(n_workers=-1)["workers"]
    except (ImportError, ValueError):
        return []
    return [w.get("memory_limit") or None for w in workers.values()]


def choose_cache(cache, n_rows, n_bases):
    """``(cache, reason)``: "memory" or "none" for ``cache="auto"`` (module
    docstring), ``cache`` itself otherwise (reason None)."""
    if cache != "auto":
        return cache, None
    need = block_bytes(n_rows, n_bases)
    limits = _worker_limits()
    if not limits or any(limit is None for limit in limits):
        return "memory", (f"blocks cached ({need / 2**30:.3g} GiB; the workers have no "
                          "memory limit)")
    # blocks are spread evenly: the smallest worker bounds what each may hold
    room = CACHE_MEMORY_SHARE * min(limits) * len(limits)
    if need <= room:
        return "memory", (f"blocks cached in worker memory ({need / 2**30:.3g} GiB of the "
                          f"{room / 2**30:.3g} GiB allowed: {CACHE_MEMORY_SHARE:g} of the "
                          "workers' memory limits)")
    return "none", (f"blocks rebuilt every sweep: they would take {need / 2**30:.3g} GiB, "
                    f"more than the {room / 2**30:.3g} GiB allowed ({CACHE_MEMORY_SHARE:g} "
                    "of the workers' memory limits)")
