"""The Dask EP engine: blocks and sites chunk by chunk on Dask, sites in zarr.

Sites live in a zarr group with arrays ``tau`` and ``nu`` of shape (2, N), chunked
(1, chunk_rows) like X.  Slot ``k`` holds the current sites and slot ``1 - k`` the
pending ones a sweep writes; the driver switches slots only after accepting the new
posterior.  A chunk task therefore reads one slot and writes the other, so re-running a
task (after a worker died) reproduces the same output: tasks are idempotent, and no
two tasks write one chunk.  Each task calls the same per-block functions as the
in-memory engine (:mod:`saspa_dask.ep.sites`): there is one implementation of the
mathematics.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import dask
import dask.array as da
import numpy as np
from dask import delayed

from ..core.threads import single_scipy_thread
from ..files.groups import zarr_group, zarr_array
from ..ep.approximation import FITC
from ..ep.acceleration import mix_steps
from ..ep.sites import (PassSummary, block_statistics, evaluate_chunk, parallel_chunk,
                        sequential_chunk)
from ..ep.whitening import make_block, relabel_block
from .chunks import chunk_bounds, is_lazy, persist_balanced, row_chunked, tree_reduce

__all__ = ["DaskEngine", "WorkDir"]


class SiteStore(NamedTuple):
    """A site store as chunk tasks name it: its directory, and a token that is new
    for every engine (so an opened handle is never taken for a later store that
    happens to reuse a removed directory's name)."""

    path: str
    token: str


@functools.lru_cache(maxsize=16)
def _site_arrays(store):
    """The store's zarr arrays (tau, nu, and the Anderson ring or None), opened once
    per process: on small chunks a sweep's tasks spent most of their time reading the
    same metadata again (17.8 ms a task against 0.4 ms of arithmetic, 500 rows)."""
    group = zarr_group(store.path, "r+")
    return group["tau"], group["nu"], group["anderson"] if "anderson" in group else None


def _open_sites(store):
    """The (tau, nu) zarr arrays a chunk task reads and writes through."""
    return _site_arrays(store)[:2]


# A chunk task runs on one of its worker's threads, NumPy's BLAS at one thread too
# (Dask's workers start so): the marginals' triangular products pay there.
@single_scipy_thread
def _parallel_task(block, store, slot, start, stop, posterior, likelihood, damping, s2,
                   ring_slot):
    tau, nu, ring_array = _site_arrays(store)
    ring = None
    if ring_slot is not None:
        ring = ring_array[:, :, start:stop]
    tau_new, nu_new, summary = parallel_chunk(block, tau[slot, start:stop],
                                              nu[slot, start:stop], posterior, likelihood,
                                              damping, s2, ring, ring_slot, triangular=True)
    if ring is not None:
        # the whole chunk, already read: a partial write would read it again.  A rerun
        # of this task (lost worker) rewrites the same slot: idempotent
        ring_array[:, :, start:stop] = ring
    tau[1 - slot, start:stop] = tau_new
    nu[1 - slot, start:stop] = nu_new
    return summary


def _mix_task(store, slot, start, stop, weights):
    tau, nu, ring_array = _site_arrays(store)
    ring = ring_array[:, :, start:stop]
    tau[1 - slot, start:stop], nu[1 - slot, start:stop] = mix_steps(ring, weights)


@single_scipy_thread
def _sequential_task(block, store, slot, start, stop, state, likelihood, damping, s2):
    sigma, mean = state
    tau, nu = _open_sites(store)
    t, n, sigma, mean, summary = sequential_chunk(block, tau[slot, start:stop],
                                                  nu[slot, start:stop], sigma, mean,
                                                  likelihood, damping, s2)
    tau[1 - slot, start:stop] = t
    nu[1 - slot, start:stop] = n
    return (sigma, mean), summary


def _warm_task(store, start, stop, tau_part, nu_part):
    tau, nu = _open_sites(store)
    tau[0, start:stop], nu[0, start:stop] = tau_part, nu_part


def _halve_task(store, slot, start, stop):
    tau, nu = _open_sites(store)
    for arr in (tau, nu):
        arr[1 - slot, start:stop] = 0.5 * (arr[1 - slot, start:stop] + arr[slot, start:stop])


@single_scipy_thread
def _statistics_task(block, store, slot, start, stop):
    tau, nu = _open_sites(store)
    A, b = block_statistics(block.phi, tau[slot, start:stop], nu[slot, start:stop])
    return PassSummary(A, b)


@single_scipy_thread
def _evaluate_task(block, store, slot, start, stop, posterior, likelihood):
    tau, nu = _open_sites(store)
    return evaluate_chunk(block, tau[slot, start:stop], nu[slot, start:stop], posterior,
                          likelihood, triangular=True)



@single_scipy_thread
def _chunk_task(func, Xb, block, store, slot, start, stop, args):
    tau, nu = _open_sites(store)
    return func(Xb, block, tau[slot, start:stop], nu[slot, start:stop], *args)


def _shipped(posterior):
    """The posterior as a literal argument of every chunk task, without the factors it
    caches (a task forms R^{-T} itself, O(M^3) against the chunk's O(n M^2)).

    Not a key of its own: the scheduler may run a task on any worker that holds one of
    its dependencies, so a shared key held by another worker than the chunk's block
    made that worker a candidate, and the scheduler copied whole blocks to it
    (``benchmarks/RESULTS.md``, "A sweep on all rows against the matmul limit").
    """
    return replace(posterior)


def _merge_two(a, b):
    return a.merge(b)


def _second(pair):
    return pair[1]


class DaskEngine:
    """EP engine over row chunks on Dask (any scheduler; a distributed Client if active).

    Parameters
    ----------
    X, y : dask arrays
        Row-chunked inputs and targets (y already encoded: +-1 labels or centred
        regression targets).
    bases : Basis
        Means and blur covariances in use.
    lengthscale, signal_variance, L
        Kernel and whitening factor.
    sites_path : str or Path
        Directory for the site arrays (must be reachable by every worker).
    cache : {"memory", "none"}
        ``memory`` persists each chunk's whitened block (phi, lam) in worker memory
        (N M floats over the cluster, spilled by Dask if needed); ``none`` rebuilds it
        from X in every pass (adds the Kt and triangular-solve cost to each pass).
    sites : tuple of array-likes, optional
        Warm-start sites (tau, nu) of length N.
    blocks : list, optional
        The persisted blocks of another engine on the same X, kernel and ``L``: they
        are shared, not rebuilt (one-vs-rest classes share their blocks).
    label : float, optional
        If given, the targets ``y`` hold class codes and this engine fits the binary
        problem "code == label" (+1) against the rest (-1); the relabelling happens
        inside each chunk task, so the blocks stay shared.
    approximation : Approximation, default=FITC
        Where the rows' residual variance is kept (:mod:`saspa_dask.ep.approximation`).
    kernel : str, optional
        The kernel's shape (:mod:`saspa_dask.core.kernel_profiles`; None: SE).
    groups : int, default=1
        The groups a grouped sweep updates the blocks in (``EPSchedule.groups``):
        cached blocks are spread over the workers group by group
        (:func:`~saspa_dask.engines.chunks.persist_balanced`).
    """

    def __init__(self, X, y, bases, lengthscale, signal_variance, L, sites_path, *,
                 cache="memory", sites=None, blocks=None, label=None, approximation=FITC,
                 anderson_memory=0, kernel=None, groups=1):
        if cache not in ("memory", "none"):
            raise ValueError(f"cache must be 'memory' or 'none', got {cache!r}")
        self.X, self.y = row_chunked(X, y)
        self.bounds = chunk_bounds(self.X)
        self.path = str(sites_path)
        self._store = SiteStore(self.path, uuid.uuid4().hex)
        self.slot = 0
        self.n_bases = bases.n_bases
        N = self.X.shape[0]
        chunk_rows = self.X.chunks[0][0]
        group = zarr_group(self.path, "w")
        for name in ("tau", "nu"):  # scratch: written every sweep, never compressed
            group.create_array(name, shape=(2, N), chunks=(1, chunk_rows), dtype="f8",
                               fill_value=0.0, compressors=None)
        self.anderson_memory = int(anderson_memory)
        if self.anderson_memory > 0:
            # one chunk per row chunk: a task reads and writes only its own
            group.create_array("anderson", shape=(4, self.anderson_memory + 1, N),
                               chunks=(4, self.anderson_memory + 1, chunk_rows), dtype="f8",
                               fill_value=0.0, compressors=None)
        self.is_cold = sites is None
        if sites is not None:
            self._warm_start(group, sites)
        self.label = label
        self._kernel = (bases, lengthscale, signal_variance, L)
        self._x_parts = self.X.to_delayed().ravel()
        if blocks is not None:
            self._blocks = blocks
            return
        args = [delayed(a) for a in (bases.means, bases.blur, lengthscale)]
        L_d = delayed(L)
        y_parts = self.y.to_delayed().ravel()

        fourier = [delayed(bases.frequencies), delayed(bases.phases)]

        def build(i):
            return delayed(make_block)(self._x_parts[i], y_parts[i], *args, signal_variance,
                                       L_d, approximation, *fourier, kernel)

        if cache == "memory":
            self._blocks = persist_balanced(build, len(self._x_parts), groups)
        else:
            self._blocks = [build(i) for i in range(len(self._x_parts))]

    def _warm_start(self, group, sites):
        """Warm-start sites into slot 0: lazy ones (a kept copy) written chunk by chunk
        by the workers, in-memory ones from here."""
        N = self.X.shape[0]
        if any(np.shape(s) != (N,) for s in sites):
            raise ValueError(f"warm-start sites of shape {np.shape(sites[0])} do not "
                             f"match {N} rows")
        if not any(is_lazy(s) for s in sites):
            group["tau"][0, :] = np.asarray(sites[0], dtype=np.float64)
            group["nu"][0, :] = np.asarray(sites[1], dtype=np.float64)
            return
        parts = [da.asarray(s).rechunk(self.X.chunks[0]).to_delayed().ravel() for s in sites]
        dask.compute(*[delayed(_warm_task)(self._store, start, stop, tau, nu)
                       for (start, stop), tau, nu in zip(self.bounds, *parts)])

    @property
    def blocks(self):
        """The (persisted or lazy) blocks, to share with another engine."""
        return self._blocks

    @property
    def n_rows(self):
        return self.X.shape[0]

    def subset(self, stride):
        """A cold engine on every ``stride``-th chunk, sharing this engine's blocks
        (its sites live beside this engine's)."""
        chunks = range(0, len(self._blocks), stride)
        X = da.concatenate([self.X.blocks[i] for i in chunks])
        y = da.concatenate([self.y.blocks[i] for i in chunks])
        return DaskEngine(X, y, *self._kernel, f"{self.path}-coarse", label=self.label,
                          blocks=[self._blocks[i] for i in chunks],
                          anderson_memory=self.anderson_memory)

    def _task_blocks(self):
        if self.label is None:
            return self._blocks
        return [delayed(relabel_block)(blk, self.label) for blk in self._blocks]

    def _per_chunk(self, func, *args, part=None):
        chunks = range(len(self.bounds)) if part is None else range(part[0],
                                                                    len(self.bounds), part[1])
        blocks = self._task_blocks()
        return [delayed(func)(blocks[i], self._store, self.slot, *self.bounds[i], *args)
                for i in chunks]

    def rows_in(self, part):
        return sum(stop - start for start, stop in self.bounds[part[0]::part[1]])

    def reduce_chunks(self, func, *args):
        """``func(X_chunk, block, tau, nu, *args)`` at the current sites of every chunk,
        merged (``.merge``) as a tree; e.g. the evidence gradient's per-chunk sums."""
        shared = delayed(args)
        parts = [delayed(_chunk_task)(func, x, blk, self._store, self.slot, start, stop,
                                      shared)
                 for x, blk, (start, stop) in zip(self._x_parts, self._task_blocks(),
                                                  self.bounds)]
        return tree_reduce(parts, _merge_two).compute()

    def _reduce(self, summaries):
        return tree_reduce(summaries, _merge_two).compute()

    def statistics(self, part=None):
        summary = self._reduce(self._per_chunk(_statistics_task, part=part))
        return summary.A, summary.b

    def parallel_pass(self, posterior, likelihood, damping, signal_variance, ring_slot=None,
                      part=None):
        return self._reduce(self._per_chunk(_parallel_task, _shipped(posterior), likelihood,
                                            damping, signal_variance, ring_slot, part=part))

    def mix_pending(self, weights):
        """Pending sites := the Anderson combination of the ring slots."""
        dask.compute(*[delayed(_mix_task)(self._store, self.slot, a, b, weights)
                       for a, b in self.bounds])

    def halve_pending(self):
        dask.compute(*[delayed(_halve_task)(self._store, self.slot, a, b)
                       for a, b in self.bounds])

    def sequential_pass(self, posterior, likelihood, damping, signal_variance):
        state = delayed((posterior.covariance(), posterior.mean))
        lik = delayed(likelihood)
        summaries = []
        for blk, (start, stop) in zip(self._task_blocks(), self.bounds):
            result = delayed(_sequential_task)(blk, self._store, self.slot, start, stop, state,
                                               lik, damping, signal_variance)
            state = result[0]
            summaries.append(delayed(_second)(result))
        return self._reduce(summaries)

    def commit(self):
        self.slot = 1 - self.slot

    def evaluate(self, posterior, likelihood):
        return self._reduce(self._per_chunk(_evaluate_task, _shipped(posterior), likelihood))

    def sites(self):
        """Current sites as lazy dask arrays of length N (read from zarr)."""
        tau = da.from_zarr(zarr_array(self.path, "tau"))[self.slot]
        nu = da.from_zarr(zarr_array(self.path, "nu"))[self.slot]
        return tau, nu


class WorkDir:
    """A scratch directory for site arrays, removed on exit.

    Parameters
    ----------
    parent : str or Path, optional
        Where to create it; on a multi-machine cluster it must be a filesystem every
        worker sees.  Default: the system temporary directory.
    """

    def __init__(self, parent=None, prefix="saspa-sites-"):
        if parent is not None:
            Path(parent).mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))

    def __enter__(self):
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)

