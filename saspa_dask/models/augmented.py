"""Augmented prediction over training rows in memory, in zarr or on Dask.

:mod:`saspa_dask.ep.augmentation` holds the mathematics; this module maps it over the
training rows' chunks (one task per chunk, summed by a tree as a sweep is) for one
batch of test rows at a time, and solves for the batch on the driver.
"""

from __future__ import annotations

import dask
import numpy as np
from dask.delayed import Delayed

from ..core.kernels import se_kernel
from ..engines.chunks import as_dask, is_lazy, tree_reduce
from ..ep.augmentation import (add_statistics, chunk_statistics, solve_augmented,
                               test_features)

__all__ = ["augmented_latent"]

# FITC keeps one M x M matrix per test row of a batch: at most this many bytes of them
_GRAM_BYTES = 256 * 2**20
# DTC keeps M-vectors per test row only
_DTC_BATCH = 2048


def augmented_latent(fitted, X, training_rows, noise_variance, projected_only, block_rows):
    """Latent mean (offset not added) and variance at rows X, each with its own augmented
    support set.

    Parameters
    ----------
    fitted : FittedPosterior
        A one-problem Gaussian-likelihood posterior (its bases, kernel and whitening).
    X : ndarray, dask or zarr array of shape (n, d)
        Test rows (read a batch at a time).
    training_rows : list of (X_train, y_train) pairs
        The training rows, NumPy, dask or zarr, with targets centred by the offset.
    noise_variance : float
    projected_only : bool
        The model is DTC (no residual variances).
    block_rows : int
        Rows per kernel block within a chunk.

    Returns
    -------
    mean, variance : ndarray of shape (n,)
    """
    M = fitted.n_bases
    batch = _DTC_BATCH if projected_only else max(1, _GRAM_BYTES // (8 * M * M))
    means, variances = [], []
    for start in range(0, X.shape[0], batch):
        part = X[start:start + batch]
        part = np.asarray(part.compute() if hasattr(part, "compute") else part, float)
        phi_star = fitted.block(part).phi
        delta, t_extra = test_features(phi_star, fitted.signal_variance, fitted.jitter)
        parts = [_chunk_task(Xc, yc, fitted, part, phi_star, delta, noise_variance,
                             projected_only, block_rows, chunk_is_lazy)
                 for Xt, yt in training_rows
                 for Xc, yc, chunk_is_lazy in _chunks(Xt, yt, block_rows)]
        lazy = any(is_lazy(Xt) for Xt, _ in training_rows)
        if lazy:  # NumPy parts join the graph as values
            parts = [p if isinstance(p, Delayed) else dask.delayed(p) for p in parts]
        stats = tree_reduce(parts, add_statistics, lazy=lazy)
        if lazy:
            (stats,) = dask.compute(stats)
        mean, var = solve_augmented(stats, phi_star, t_extra, fitted.signal_variance)
        means.append(mean)
        variances.append(var)
    return np.concatenate(means), np.concatenate(variances)


def _chunks(X, y, block_rows):
    """(X chunk, y chunk, lazy) for each row chunk: the array's own chunks for dask
    and zarr input (delayed), blocks of ``block_rows`` for NumPy."""
    if is_lazy(X):
        X, y = as_dask(X).rechunk({1: -1}), as_dask(y)
        y = y.rechunk({0: X.chunks[0]})
        Xd, yd = X.to_delayed().ravel(), y.to_delayed().ravel()
        return [(a, b, True) for a, b in zip(Xd, yd)]
    bounds = [(a, min(a + block_rows, X.shape[0])) for a in range(0, X.shape[0], block_rows)]
    return [(X[a:b], y[a:b], False) for a, b in bounds]


def _chunk_task(Xc, yc, fitted, X_test, phi_star, delta, noise_variance, projected_only,
                block_rows, lazy):
    if lazy:
        return dask.delayed(_chunk_sums, pure=True)(
            Xc, yc, fitted, X_test, phi_star, delta, noise_variance, projected_only,
            block_rows)
    return _chunk_sums(Xc, yc, fitted, X_test, phi_star, delta, noise_variance,
                       projected_only, block_rows)


def _chunk_sums(Xc, yc, fitted, X_test, phi_star, delta, noise_variance, projected_only,
                block_rows):
    """The statistics of one chunk, kernel block by kernel block."""
    Xc, yc = np.asarray(Xc, float), np.asarray(yc, float)
    total = None
    # an empty chunk still gives (zero) statistics of the right shapes
    for a in range(0, max(Xc.shape[0], 1), block_rows):
        rows = slice(a, a + block_rows)
        block = fitted.block(Xc[rows], yc[rows], projected_only)
        k_cross = se_kernel(Xc[rows], X_test, fitted.lengthscale, fitted.signal_variance)
        part = chunk_statistics(block.phi, block.lam, block.y, k_cross, phi_star, delta,
                                noise_variance, projected_only)
        total = part if total is None else add_statistics(total, part)
    return total
