"""K-means bases: one map-reduce Lloyd for in-memory and Dask input alike.

The same data gives the same bases whether it is a NumPy array or a chunked dask
array (up to the order of floating-point sums): a seeded uniform row sample gives a
k-means++ start (scikit-learn's public ``kmeans_plusplus``) refined by Lloyd on the
sample, then at most ``max_iter`` Lloyd passes polish it, each a sum of per-chunk
counts, sums and squared errors: over all rows up to ``lloyd_rows`` (default
:data:`LLOYD_ROWS`), and beyond that over a seeded uniform sample of that many rows
(each pass over 10^6 rows cost more than the sample's whole polish, for centres that
a fit then moves anyway: ``benchmarks/RESULTS.md``, "K-means on a sample").  Empty
clusters are relocated deterministically; one more pass over the same rows gives the
cluster means and scatter for the blur covariances
(:func:`saspa_dask.core.bases.shrunk_covariances`).  Beyond ``lloyd_rows`` the data
is read once, for the sample, and the start's rows are drawn from it.

Why not dask-ml's KMeans: docs/design.md, section 7, lists its breakages with current scikit-learn
(k-means++ start fails, k-means|| pads with random rows, empty clusters collapse to the
origin, private API).
"""

from __future__ import annotations

import warnings

import dask
import numpy as np
from dask import delayed

from ..core.bases import Basis, shrunk_covariances
from .chunks import add_tuples, as_dask, is_lazy, row_chunked, seed_from, tree_reduce

__all__ = ["LLOYD_ROWS", "default_lloyd_rows", "kmeans", "kmeans_bases", "start_sample_rows"]

#: Rows the Lloyd passes run over at most (a seeded sample beyond it)
LLOYD_ROWS = 200_000

# rows a NumPy input is cut into for the Lloyd passes (the result does not depend on it)
_MEMORY_CHUNK_ROWS = 65536

# elements of the rows x M distance block: 2 MiB of float64 stays in cache, where a
# 16384-row block at M = 256 (32 MiB) made each pass over it a trip to memory (4.7
# times slower at 200,000 rows: benchmarks/RESULTS.md, "K-means' distance blocks")
_DISTANCE_ELEMENTS = 2**18


def default_lloyd_rows(n_clusters):
    """The rows :func:`kmeans`' Lloyd passes run over at most by default."""
    return max(LLOYD_ROWS, 100 * n_clusters)


def start_sample_rows(n_clusters):
    """The rows of :func:`kmeans`' k-means++ start by default (fewer Lloyd rows than
    this shrink the start's sample too)."""
    return max(10_000, 20 * n_clusters)


def _nearest(Xb, centres):
    """Labels and squared distances to the nearest centre (expanded, clipped at 0)."""
    c_sq = (centres * centres).sum(1)
    scaled = -2.0 * centres.T  # exact: the -2 of the expansion folded into the product
    step = int(np.clip(_DISTANCE_ELEMENTS // max(len(centres), 1), 64, 16384))
    labels = np.empty(Xb.shape[0], dtype=np.intp)
    dist = np.empty(Xb.shape[0])
    for start in range(0, Xb.shape[0], step):
        rows = Xb[start:start + step]
        G = rows @ scaled
        G += c_sq
        lab = G.argmin(axis=1)
        labels[start:start + len(rows)] = lab
        dist[start:start + len(rows)] = (np.take_along_axis(G, lab[:, None], 1)[:, 0]
                                         + np.einsum("ij,ij->i", rows, rows))
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


def _scatter_chunk(Xb, centres, offset, full=True):
    """Counts, sums and scatter about the centres (with ``full=False`` only its
    diagonal, (M, d): O(n d) rather than O(n d^2)); plus sums for the total variance."""
    Xb = Xb - offset
    labels, _ = _nearest(Xb, centres)
    M, d = centres.shape
    counts = np.bincount(labels, minlength=M).astype(float)
    if not full:
        scatter = np.stack([np.bincount(labels, weights=(Xb[:, k] - centres[labels, k]) ** 2,
                                        minlength=M) for k in range(d)], axis=1)
        return counts, _cluster_sums(Xb, labels, M), scatter, Xb.sum(0), (Xb * Xb).sum(0)
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


class _Rows:
    """The row chunks of X and how to sum a function over them: Dask tasks (tree
    reduced) for lazy input, a plain loop for NumPy input (never shipped to a
    cluster)."""

    def __init__(self, X):
        self.lazy = is_lazy(X)
        if self.lazy:
            self.X = row_chunked(as_dask(X).astype(np.float64))
            self.blocks = self.X.to_delayed().ravel()
        else:
            self.X = np.asarray(X, dtype=np.float64)
            self.blocks = [self.X[a:a + _MEMORY_CHUNK_ROWS]
                           for a in range(0, self.X.shape[0], _MEMORY_CHUNK_ROWS)]

    def sample(self, n_sample, rng):
        idx = np.sort(rng.choice(self.X.shape[0], size=n_sample, replace=False))
        rows = self.X[idx]
        return np.asarray(rows.compute() if self.lazy else rows)

    def total(self, func, *args):
        if not self.lazy:
            parts = [func(block, *args) for block in self.blocks]
            return tree_reduce(parts, add_tuples, lazy=False)
        shared = [delayed(a) for a in args]
        parts = [delayed(func)(block, *shared) for block in self.blocks]
        return dask.compute(tree_reduce(parts, add_tuples))[0]


def kmeans(X, n_clusters, *, random_state=None, max_iter=10, tol=1e-4, sample_size=None,
           lloyd_rows=None, full_covariances=True):
    """K-means bases over all rows of X.

    Parameters
    ----------
    X : ndarray, dask or zarr array of shape (N, d)
    n_clusters : int
    random_state : int, RandomState or None
        Seeds the row sample and the k-means++ start; the result does not depend on
        the input's type or chunking (up to the order of floating-point sums).
    max_iter : int
        Lloyd iterations over all rows (one pass over the data each).
    tol : float
        Stop when the largest squared centre shift is below ``tol`` times the mean
        input variance.
    sample_size : int, optional
        Rows for the start; default ``min(N, max(10000, 20 M))``.
    lloyd_rows : int, optional
        Rows the Lloyd passes run over (a seeded uniform sample when fewer than N);
        default ``max(LLOYD_ROWS, 100 M)``.  The cluster means and scatter are of the
        same rows.
    full_covariances : bool, default=True
        False: only the covariances' diagonals are computed (the off-diagonal entries
        are zero), which is all delta, spherical, diagonal blurs and frequency
        features use: O(N d) where the full scatter costs O(N d^2) (wide one-hot
        tables).

    Returns
    -------
    basis : Basis
        Means and shrunk covariances; clusters that stay empty are dropped.
    info : dict
        ``n_iter``, ``inertia`` (sum of squared distances), ``converged``,
        ``n_relocated`` (empty clusters moved), ``n_empty_dropped``, ``sample_size``,
        ``lloyd_rows`` (the rows the Lloyd passes, the means and the scatter are of).
    """
    from sklearn.cluster import kmeans_plusplus

    rows = _Rows(X)
    N, d = rows.X.shape
    if n_clusters > N:
        raise ValueError(f"n_bases={n_clusters} exceeds n_samples={N}")
    rng = np.random.default_rng(seed_from(random_state))
    n_sample = min(N, sample_size or start_sample_rows(n_clusters))
    cap = default_lloyd_rows(n_clusters) if lloyd_rows is None else int(lloyd_rows)
    lloyd = rows if N <= cap else _Rows(rows.sample(cap, rng))  # one read of the data
    n_sample = min(n_sample, lloyd.X.shape[0])
    sample = lloyd.sample(n_sample, rng)
    offset = sample.mean(axis=0)
    sample = sample - offset
    scale = max(float(sample.var(axis=0).mean()), 1e-300)
    unique = np.unique(sample, axis=0)
    k_start = min(n_clusters, len(unique))
    centres, _ = kmeans_plusplus(unique, k_start, random_state=int(rng.integers(2**31 - 1)))
    centres = _lloyd_on_sample(unique, centres)
    centres, n_iter, inertia, converged, n_relocated = _lloyd_passes(
        lloyd, centres, offset, sample, max_iter, tol * scale)
    counts, sums, scatter, total, total_sq = lloyd.total(_scatter_chunk, centres, offset,
                                                         full_covariances)
    n_used = lloyd.X.shape[0]  # the rows the Lloyd passes, means and scatter are of
    keep = counts > 0
    counts, sums, scatter, centres = counts[keep], sums[keep], scatter[keep], centres[keep]
    means = sums / counts[:, None]
    # scatter about the final means = scatter about the centres - n (m - c)(m - c)^T
    delta = means - centres
    if full_covariances:
        scatter = scatter - counts[:, None, None] * delta[:, :, None] * delta[:, None, :]
    else:  # the diagonal only (shrunk_covariances returns diagonal matrices)
        scatter = scatter - counts[:, None] * delta * delta
    total_var = np.maximum(total_sq / n_used - (total / n_used) ** 2, 0.0)
    covs = shrunk_covariances(counts, scatter, total_var)
    info = {"n_iter": n_iter, "inertia": float(inertia), "converged": converged,
            "n_relocated": int(n_relocated), "n_empty_dropped": int((~keep).sum()),
            "sample_size": int(n_sample), "lloyd_rows": int(n_used)}
    return Basis(means + offset, covs), info


def _lloyd_passes(rows, centres, offset, sample, max_iter, tol):
    """Lloyd over all rows: (centres, iterations, inertia, converged, relocated)."""
    n_relocated, converged, inertia, n_iter = 0, False, np.nan, 0
    for n_iter in range(1, max_iter + 1):
        sums, counts, inertia, _ = rows.total(_lloyd_chunk, centres, offset)
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
        if shift <= tol and not empty.size:
            converged = True
            break
    return centres, n_iter, inertia, converged, n_relocated


def kmeans_bases(X, n_bases, random_state=None):
    """K-means bases: cluster means and shrunk covariances (:func:`kmeans`).

    Parameters
    ----------
    X : ndarray, dask or zarr array of shape (N, d)
    n_bases : int
    random_state : int, RandomState or None

    Returns
    -------
    Basis
        With at most ``n_bases`` points: clusters that came out empty or duplicated
        (fewer distinct points than ``n_bases``) are dropped with a warning.

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import kmeans_bases
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> kmeans_bases(X, 8, random_state=0).means.shape
    (8, 2)
    """
    basis, _ = kmeans(X, n_bases, random_state=random_state)
    if basis.n_bases < n_bases:
        warnings.warn(
            f"K-means found {basis.n_bases} distinct clusters for n_bases={n_bases} "
            "(too few distinct points); using those",
            UserWarning,
            stacklevel=2,
        )
    return basis
