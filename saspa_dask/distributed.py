"""Dask orchestration: K-means passes, EP sweeps over row chunks, fingerprints.

Every function here builds one task per row chunk and reduces the per-chunk results
pairwise (a tree), so the driver only ever holds O(M^2) numbers per pass.  The chunk
tasks call the same per-block functions as the in-memory engine (:mod:`saspa_dask.ep`):
there is one implementation of the mathematics.

Sites live in a zarr group with arrays ``tau`` and ``nu`` of shape (2, N), chunked
(1, chunk_rows) like X.  Slot ``k`` holds the current sites and slot ``1 - k`` the
pending ones a sweep writes; the driver switches slots only after accepting the new
posterior.  A chunk task therefore reads one slot and writes the other, so re-running a
task (after a worker died) reproduces the same output: tasks are idempotent, and no
two tasks write one chunk.

Why not dask-ml's KMeans: LESSONS.md lists its breakages with current scikit-learn
(k-means++ start fails, k-means|| pads with random rows, empty clusters collapse to the
origin, private API).  The map-reduce Lloyd here is small: per-chunk sums, counts and
SSE, a k-means++ start on a seeded uniform sample (scikit-learn's public
``kmeans_plusplus``), empty clusters relocated deterministically, and one more pass for
the cluster covariances.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import zarr
from dask import delayed

from .bases import Basis, shrunk_covariances
from .ep import (
    PassSummary,
    block_statistics,
    evaluate_chunk,
    make_block,
    mix_steps,
    parallel_chunk,
    relabel_block,
    sequential_chunk,
)
from .store import chunk_digest, combine_digests

__all__ = ["DaskEngine", "kmeans", "fingerprint", "row_chunked", "chunk_bounds"]


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


def _tree(parts, combine):
    """Pairwise reduction of delayed objects, in order."""
    parts = list(parts)
    while len(parts) > 1:
        parts = [delayed(combine)(parts[i], parts[i + 1]) if i + 1 < len(parts) else parts[i]
                 for i in range(0, len(parts), 2)]
    return parts[0]


def _add(a, b):
    return tuple(x + y for x, y in zip(a, b))


# ----------------------------------------------------------------------------------
# Fingerprint
# ----------------------------------------------------------------------------------


def fingerprint(X, y):
    """Content fingerprint of a (row-chunked) data set, as ``ingest`` records it."""
    digests = [delayed(chunk_digest)(xb, yb)
               for xb, yb in zip(X.to_delayed().ravel(), y.to_delayed().ravel())]
    digests = dask.compute(*digests)
    return combine_digests(digests, X.shape[0], X.shape[1], X.chunks[0][0])


# ----------------------------------------------------------------------------------
# K-means
# ----------------------------------------------------------------------------------


_DISTANCE_ROWS = 16384  # rows per distance block: keeps the n x M temporary in cache


def _nearest(Xb, centres):
    """Labels and squared distances to the nearest centre (expanded, clipped at 0)."""
    c_sq = (centres * centres).sum(1)
    labels = np.empty(Xb.shape[0], dtype=np.intp)
    dist = np.empty(Xb.shape[0])
    for start in range(0, Xb.shape[0], _DISTANCE_ROWS):
        rows = Xb[start:start + _DISTANCE_ROWS]
        G = rows @ centres.T
        G *= -2.0
        G += c_sq
        lab = G.argmin(axis=1)
        labels[start:start + len(rows)] = lab
        dist[start:start + len(rows)] = G[np.arange(len(rows)), lab] + (rows * rows).sum(1)
    return labels, np.maximum(dist, 0.0)


def _cluster_sums(Xb, labels, M):
    return np.stack([np.bincount(labels, weights=Xb[:, k], minlength=M)
                     for k in range(Xb.shape[1])], axis=1)


def _lloyd_chunk(Xb, centres, offset):
    Xb = Xb - offset
    labels, dist = _nearest(Xb, centres)
    M = centres.shape[0]
    counts = np.bincount(labels, minlength=M).astype(float)
    return _cluster_sums(Xb, labels, M), counts, dist.sum(), dist.max(initial=0)


def _scatter_chunk(Xb, centres, offset):
    """Counts, sums and scatter about the centres; plus sums for the total variance."""
    Xb = Xb - offset
    labels, _ = _nearest(Xb, centres)
    M, d = centres.shape
    counts = np.bincount(labels, minlength=M).astype(float)
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(M + 1))
    scatter = np.zeros((M, d, d))
    for j in np.flatnonzero(counts):
        D = Xb[order[bounds[j]:bounds[j + 1]]] - centres[j]
        scatter[j] = D.T @ D
    return counts, _cluster_sums(Xb, labels, M), scatter, Xb.sum(0), (Xb * Xb).sum(0)


def _lloyd_on_sample(sample, centres, max_iter=100):
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=len(centres), init=centres, n_init=1, max_iter=max_iter).fit(sample)
    return km.cluster_centers_


def _sample_rows(X, n_sample, rng):
    idx = np.sort(rng.choice(X.shape[0], size=n_sample, replace=False))
    return np.asarray(X[idx].compute())


def kmeans(X, n_clusters, *, random_state=None, max_iter=10, tol=1e-4, sample_size=None):
    """K-means bases over all rows of a row-chunked dask array.

    Parameters
    ----------
    X : dask.array.Array of shape (N, d)
    n_clusters : int
    random_state : int or None
        Seeds the row sample and the k-means++ start; the result does not depend on
        the chunking (up to the order of floating-point sums).
    max_iter : int
        Lloyd iterations over all rows (one pass over the data each).  The k-means++
        start is first refined by Lloyd on the in-memory row sample, so the full
        passes only polish it.
    tol : float
        Stop when the largest squared centre shift is below ``tol`` times the mean
        input variance.
    sample_size : int, optional
        Rows for the k-means++ start; default ``min(N, max(10000, 20 M))``.

    Returns
    -------
    basis : Basis
        Means and shrunk covariances (:func:`saspa_dask.bases.shrunk_covariances`).
    info : dict
        ``n_iter``, ``inertia`` (sum of squared distances), ``converged``,
        ``n_relocated`` (empty clusters moved), ``n_empty_dropped``.
    """
    from sklearn.cluster import kmeans_plusplus

    X = row_chunked(X)
    N, d = X.shape
    if n_clusters > N:
        raise ValueError(f"n_bases={n_clusters} exceeds n_samples={N}")
    rng = np.random.default_rng(random_state)
    n_sample = min(N, sample_size or max(10_000, 20 * n_clusters))
    sample = _sample_rows(X, n_sample, rng)
    offset = sample.mean(axis=0)
    sample = sample - offset
    scale = max(float(sample.var(axis=0).mean()), 1e-300)
    unique = np.unique(sample, axis=0)
    k_start = min(n_clusters, len(unique))
    centres, _ = kmeans_plusplus(unique, k_start, random_state=int(rng.integers(2**31 - 1)))
    centres = _lloyd_on_sample(unique, centres)
    offset_d = delayed(offset)
    blocks = X.to_delayed().ravel()
    n_relocated = 0
    converged = False
    inertia = np.nan
    for n_iter in range(1, max_iter + 1):
        centres_d = delayed(centres)
        parts = [delayed(_lloyd_chunk)(b, centres_d, offset_d) for b in blocks]
        sums, counts, inertia, _ = _tree(parts, _add).compute()
        new = centres.copy()
        filled = counts > 0
        new[filled] = sums[filled] / counts[filled, None]
        empty = np.flatnonzero(~filled)
        if empty.size:
            # Relocate each empty cluster to the sample row farthest from its centre.
            _, dist = _nearest(sample, new[filled])
            order = np.argsort(-dist, kind="stable")
            new[empty] = sample[order[: empty.size]]
            n_relocated += empty.size
        shift = ((new - centres) ** 2).sum(1).max()
        centres = new
        if shift <= tol * scale and not empty.size:
            converged = True
            break
    parts = [delayed(_scatter_chunk)(b, delayed(centres), offset_d) for b in blocks]
    counts, sums, scatter, total, total_sq = _tree(parts, _add).compute()
    keep = counts > 0
    counts, sums, scatter, centres = counts[keep], sums[keep], scatter[keep], centres[keep]
    means = sums / counts[:, None]
    # scatter about the final means = scatter about the centres - n (m - c)(m - c)^T
    delta = means - centres
    scatter = scatter - counts[:, None, None] * delta[:, :, None] * delta[:, None, :]
    total_var = np.maximum(total_sq / N - (total / N) ** 2, 0.0)
    covs = shrunk_covariances(counts, scatter, total_var)
    info = {"n_iter": n_iter, "inertia": float(inertia), "converged": converged,
            "n_relocated": int(n_relocated), "n_empty_dropped": int((~keep).sum()),
            "sample_size": int(n_sample)}
    return Basis(means + offset, covs), info


# ----------------------------------------------------------------------------------
# EP engine on Dask
# ----------------------------------------------------------------------------------


def _persist_balanced(build, n_blocks):
    """Build and persist chunk blocks, spread round-robin over the active Client's workers.

    ``build(i)`` returns the delayed block of chunk i; it is created under a worker
    annotation so the block is *built* where it will stay.  Every sweep's task for a
    chunk then runs where its block is (the scheduler follows the largest dependency),
    and the workers carry equal shares.  The worker is a preference, not a
    restriction: if a worker dies its blocks are rebuilt elsewhere.  Without a
    distributed Client this is a plain ``dask.persist``.
    """
    try:
        from distributed import get_client

        workers = sorted(get_client().scheduler_info()["workers"])
    except (ImportError, ValueError):
        workers = []
    if not workers:
        return list(dask.persist(*[build(i) for i in range(n_blocks)]))
    placed = []
    for i in range(n_blocks):
        with dask.annotate(workers=[workers[i % len(workers)]], allow_other_workers=True):
            placed.append(build(i))
    return list(dask.persist(*placed, optimize_graph=False))


def _open_sites(path):
    """The (tau, nu) zarr arrays; a chunk task opens them once and reads and writes
    through these handles."""
    group = zarr.open_group(str(path), mode="r+")
    return group["tau"], group["nu"]


def _parallel_task(block, path, slot, start, stop, posterior, likelihood, damping, s2,
                   ring_slot):
    tau, nu = _open_sites(path)
    ring = ring_array = None
    if ring_slot is not None:
        ring_array = zarr.open_group(str(path), mode="r+")["anderson"]
        ring = ring_array[:, :, start:stop]
    tau_new, nu_new, summary = parallel_chunk(block, tau[slot, start:stop],
                                              nu[slot, start:stop], posterior, likelihood,
                                              damping, s2, ring, ring_slot)
    if ring is not None:
        # the whole chunk, already read: a partial write would read it again.  A rerun
        # of this task (lost worker) rewrites the same slot: idempotent
        ring_array[:, :, start:stop] = ring
    tau[1 - slot, start:stop] = tau_new
    nu[1 - slot, start:stop] = nu_new
    return summary


def _mix_task(path, slot, start, stop, weights):
    group = zarr.open_group(str(path), mode="r+")
    tau, nu = group["tau"], group["nu"]
    ring = group["anderson"][:, :, start:stop]
    tau[1 - slot, start:stop], nu[1 - slot, start:stop] = mix_steps(ring, weights)


def _sequential_task(block, path, slot, start, stop, state, likelihood, damping, s2):
    sigma, mean = state
    tau, nu = _open_sites(path)
    t, n, sigma, mean, summary = sequential_chunk(block, tau[slot, start:stop],
                                                  nu[slot, start:stop], sigma, mean,
                                                  likelihood, damping, s2)
    tau[1 - slot, start:stop] = t
    nu[1 - slot, start:stop] = n
    return (sigma, mean), summary


def _halve_task(path, slot, start, stop):
    tau, nu = _open_sites(path)
    for arr in (tau, nu):
        arr[1 - slot, start:stop] = 0.5 * (arr[1 - slot, start:stop] + arr[slot, start:stop])


def _statistics_task(block, path, slot, start, stop):
    tau, nu = _open_sites(path)
    A, b = block_statistics(block.phi, tau[slot, start:stop], nu[slot, start:stop])
    return PassSummary(A, b)


def _evaluate_task(block, path, slot, start, stop, posterior, likelihood):
    tau, nu = _open_sites(path)
    return evaluate_chunk(block, tau[slot, start:stop], nu[slot, start:stop], posterior,
                          likelihood)


def _gradient_task(Xb, block, path, slot, start, stop, posterior, likelihood, L, means,
                   lengthscale, full):
    from .hyper import gradient_chunk

    tau, nu = _open_sites(path)
    return gradient_chunk(Xb, block, tau[slot, start:stop], nu[slot, start:stop], posterior,
                          likelihood, L, means, lengthscale, full)


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
    projected_only : bool
        DTC-EP blocks (no residual variances).
    """

    def __init__(self, X, y, bases, lengthscale, signal_variance, L, sites_path, *,
                 cache="memory", sites=None, blocks=None, label=None, projected_only=False,
                 anderson_memory=0):
        if cache not in ("memory", "none"):
            raise ValueError(f"cache must be 'memory' or 'none', got {cache!r}")
        self.X, self.y = row_chunked(X, y)
        self.bounds = chunk_bounds(self.X)
        self.path = str(sites_path)
        self.slot = 0
        self.n_bases = bases.n_bases
        N = self.X.shape[0]
        chunk_rows = self.X.chunks[0][0]
        group = zarr.open_group(self.path, mode="w")
        for name in ("tau", "nu"):
            group.create_array(name, shape=(2, N), chunks=(1, chunk_rows), dtype="f8",
                               fill_value=0.0)
        self.anderson_memory = int(anderson_memory)
        if self.anderson_memory > 0:
            # one chunk per row chunk: a task reads and writes only its own
            group.create_array("anderson", shape=(4, self.anderson_memory + 1, N),
                               chunks=(4, self.anderson_memory + 1, chunk_rows), dtype="f8",
                               fill_value=0.0, compressors=None)
        self.is_cold = sites is None
        if sites is not None:
            tau, nu = (np.asarray(s, dtype=np.float64) for s in sites)
            if tau.shape != (N,) or nu.shape != (N,):
                raise ValueError(f"warm-start sites of shape {tau.shape} do not match "
                                 f"{N} rows")
            group["tau"][0, :] = tau
            group["nu"][0, :] = nu
        self.label = label
        self._kernel = (bases, lengthscale, signal_variance, L)
        self._x_parts = self.X.to_delayed().ravel()
        if blocks is not None:
            self._blocks = blocks
            return
        args = [delayed(a) for a in (bases.means, bases.covs, lengthscale)]
        L_d = delayed(L)
        y_parts = self.y.to_delayed().ravel()

        def build(i):
            return delayed(make_block)(self._x_parts[i], y_parts[i], *args, signal_variance,
                                       L_d, projected_only)

        if cache == "memory":
            self._blocks = _persist_balanced(build, len(self._x_parts))
        else:
            self._blocks = [build(i) for i in range(len(self._x_parts))]

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

    def _per_chunk(self, func, *args):
        return [delayed(func)(blk, self.path, self.slot, start, stop, *args)
                for blk, (start, stop) in zip(self._task_blocks(), self.bounds)]

    def gradient(self, posterior, likelihood, L, means, lengthscale, full):
        """Evidence-gradient sums at the current sites (:mod:`saspa_dask.hyper`)."""
        shared = [delayed(a) for a in (posterior, likelihood, L, means, lengthscale)]
        parts = [delayed(_gradient_task)(x, blk, self.path, self.slot, start, stop, *shared,
                                         full)
                 for x, blk, (start, stop) in zip(self._x_parts, self._task_blocks(),
                                                  self.bounds)]
        return _tree(parts, _merge_two).compute()

    def _reduce(self, summaries):
        return _tree(summaries, _merge_two).compute()

    def statistics(self):
        summary = self._reduce(self._per_chunk(_statistics_task))
        return summary.A, summary.b

    def parallel_pass(self, posterior, likelihood, damping, signal_variance, ring_slot=None):
        post = delayed(posterior)
        lik = delayed(likelihood)
        return self._reduce(self._per_chunk(_parallel_task, post, lik, damping,
                                            signal_variance, ring_slot))

    def mix_pending(self, weights):
        """Pending sites := the Anderson combination of the ring slots."""
        dask.compute(*[delayed(_mix_task)(self.path, self.slot, a, b, weights)
                       for a, b in self.bounds])

    def halve_pending(self):
        dask.compute(*[delayed(_halve_task)(self.path, self.slot, a, b)
                       for a, b in self.bounds])

    def sequential_pass(self, posterior, likelihood, damping, signal_variance):
        state = delayed((posterior.covariance(), posterior.mean))
        lik = delayed(likelihood)
        summaries = []
        for blk, (start, stop) in zip(self._task_blocks(), self.bounds):
            result = delayed(_sequential_task)(blk, self.path, self.slot, start, stop, state,
                                               lik, damping, signal_variance)
            state = result[0]
            summaries.append(delayed(_second)(result))
        return self._reduce(summaries)

    def commit(self):
        self.slot = 1 - self.slot

    def evaluate(self, posterior, likelihood):
        return self._reduce(self._per_chunk(_evaluate_task, delayed(posterior),
                                            delayed(likelihood)))

    def sites(self):
        """Current sites as lazy dask arrays of length N (read from zarr)."""
        tau = da.from_zarr(self.path, component="tau")[self.slot]
        nu = da.from_zarr(self.path, component="nu")[self.slot]
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


# ----------------------------------------------------------------------------------
# Estimator support for Dask and zarr inputs
# ----------------------------------------------------------------------------------


def is_lazy(X):
    """True for inputs that are trained on chunk by chunk (dask or zarr arrays)."""
    return isinstance(X, (da.Array, zarr.Array))


def as_dask(X):
    if isinstance(X, zarr.Array):
        return da.from_zarr(X)
    if isinstance(X, da.Array):
        return X
    return da.from_array(np.asarray(X))


def seed_from(random_state):
    """An int seed (or None) from an estimator's random_state."""
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return random_state
    return int(random_state.randint(2**31 - 1))


def compute(*arrays):
    return dask.compute(*arrays)


def check_training_data(estimator, X, y, classification):
    """Validate lazy training data in one pass over it; returns (X, y, stats).

    Raises the same kinds of errors, with the same wording, as scikit-learn's
    validation of in-memory data (NaN / infinity, shapes, sample counts).
    """
    X, y = as_dask(X), as_dask(y)
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead")
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                         f"[{X.shape[0]}, {y.shape[0]}]")
    if X.shape[0] < 2:
        raise ValueError(f"Found array with {X.shape[0]} sample(s) while a minimum of 2 is "
                         "required")
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"X must be numeric, got dtype {X.dtype}")
    X, y = row_chunked(X.astype(np.float64), y)
    estimator.n_features_in_ = X.shape[1]
    lazy_stats = {"bad_rows": (~da.isfinite(X)).any(axis=1).sum(), "std": X.std(axis=0)}
    if classification:
        lazy_stats["classes"] = da.unique(y)
    else:
        y = y.astype(np.float64)
        lazy_stats.update(bad_y=(~da.isfinite(y)).sum(), mean=y.mean(), var=y.var(),
                          min=y.min(), non_integer=(y != da.round(y)).sum())
    stats = dict(zip(lazy_stats, dask.compute(*lazy_stats.values())))
    if stats["bad_rows"]:
        raise ValueError(f"Input X contains NaN or infinity in {int(stats['bad_rows'])} rows")
    if not classification and stats["bad_y"]:
        raise ValueError(f"Input y contains NaN or infinity in {int(stats['bad_y'])} rows")
    return X, y, stats


def _latent_chunk(Xb, means, covs, lengthscale, s2, L, posteriors):
    from .ep import predict_latent

    if not np.all(np.isfinite(Xb)):
        raise ValueError("Input X contains NaN or infinity")
    block = make_block(Xb, np.zeros(Xb.shape[0]), means, covs, lengthscale, s2, L)
    parts = [predict_latent(block.phi, post, s2) for post in posteriors]
    return np.column_stack([m for m, _ in parts] + [v for _, v in parts])


def predict_latent(estimator, X):
    """Latent mean and variance as dask arrays chunked like X's rows (one column per
    class for a one-vs-rest model)."""
    X = as_dask(X)
    if X.ndim != 2 or X.shape[1] != estimator.n_features_in_:
        raise ValueError(f"X has {X.shape[-1]} features, but {type(estimator).__name__} is "
                         f"expecting {estimator.n_features_in_} features as input")
    X = X.astype(np.float64).rechunk({1: -1})
    K = len(estimator.posteriors_)
    out = X.map_blocks(_latent_chunk, estimator.bases_.means, estimator.bases_.covs,
                       estimator.lengthscale_, estimator.signal_variance_,
                       estimator.whitening_, list(estimator.posteriors_),
                       chunks=(X.chunks[0], (2 * K,)), dtype=np.float64,
                       meta=np.empty((0, 2 * K)))
    if K == 1:
        return out[:, 0], out[:, 1]
    return out[:, :K], out[:, K:]
