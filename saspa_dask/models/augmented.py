"""Augmented prediction over training rows in memory, in zarr or on Dask.

Gaussian likelihood: :mod:`saspa_dask.ep.augmentation` holds the closed form; this
module maps it over the training rows' chunks (one task per chunk, summed by a tree as
a sweep is) for one batch of test rows at a time, and solves for the batch on the
driver (:func:`augmented_latent`).

Every other likelihood (probit, logistic, step, noisy probit, Student-t, Poisson):
there is no closed form, so for each test row EP is run again on the training rows
with the support "the bases plus a delta basis at the test row", warm-started from
the model's own sites, and the test row's latent is read from that posterior
(:func:`augmented_ep_latent`).  It is the fitted estimator's own EP (same kernel,
likelihood, approximation and power, nothing learnt), so the training rows may be
NumPy, dask or zarr like any fit's; it costs a (warm) EP run per test row.
"""

from __future__ import annotations

import dask
import numpy as np
from dask.delayed import Delayed

from sklearn.base import clone

from ..core.threads import single_scipy_thread
from ..core.bases import Basis
from ..core.kernels import se_kernel
from ..engines.chunks import as_dask, is_lazy, tree_reduce
from ..ep.augmentation import (add_statistics, chunk_statistics, solve_augmented,
                               test_features)

__all__ = ["as_numpy", "augmented_ep_latent", "augmented_latent", "check_augment"]

# FITC keeps one M x M matrix per test row of a batch: at most this many bytes of them
_GRAM_BYTES = 256 * 2**20
# DTC keeps M-vectors per test row only
_DTC_BATCH = 2048


@single_scipy_thread
def augmented_latent(fitted, X, training_rows, noise_variance, approximation, block_rows):
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
    approximation : Approximation
        The model's (:mod:`saspa_dask.ep.approximation`): DTC and SoR rows have no
        residual variances.
    block_rows : int
        Rows per kernel block within a chunk.

    Returns
    -------
    mean, variance : ndarray of shape (n,)
    """
    _check_kernel(fitted)
    M = fitted.n_bases
    batch = (max(1, _GRAM_BYTES // (8 * M * M)) if approximation.residual_in_training
             else _DTC_BATCH)
    means, variances = [], []
    for start in range(0, X.shape[0], batch):
        part = X[start:start + batch]
        part = np.asarray(part.compute() if hasattr(part, "compute") else part, float)
        phi_star = fitted.block(part).phi
        delta, t_extra = test_features(phi_star, fitted.signal_variance, fitted.jitter)
        parts = [_chunk_task(Xc, yc, fitted, part, phi_star, delta, noise_variance,
                             approximation, block_rows, chunk_is_lazy)
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


def _chunk_task(Xc, yc, fitted, X_test, phi_star, delta, noise_variance, approximation,
                block_rows, lazy):
    if lazy:
        return dask.delayed(_chunk_sums, pure=True)(
            Xc, yc, fitted, X_test, phi_star, delta, noise_variance, approximation,
            block_rows)
    return _chunk_sums(Xc, yc, fitted, X_test, phi_star, delta, noise_variance,
                       approximation, block_rows)


def _chunk_sums(Xc, yc, fitted, X_test, phi_star, delta, noise_variance, approximation,
                block_rows):
    """The statistics of one chunk, kernel block by kernel block."""
    Xc, yc = np.asarray(Xc, float), np.asarray(yc, float)
    total = None
    # an empty chunk still gives (zero) statistics of the right shapes
    for a in range(0, max(Xc.shape[0], 1), block_rows):
        rows = slice(a, a + block_rows)
        block = fitted.block(Xc[rows], yc[rows], approximation)
        k_cross = se_kernel(Xc[rows], X_test, fitted.lengthscale, fitted.signal_variance)
        part = chunk_statistics(block.phi, block.lam, block.y, k_cross, phi_star, delta,
                                noise_variance, approximation)
        total = part if total is None else add_statistics(total, part)
    return total


def _check_kernel(fitted):
    """Augmented prediction mixes a delta basis at the test row with the model's; it is
    built for the SE kernel, whose blurred and delta forms are one kernel."""
    if fitted.kernel != "se" or fitted.additive is not None:
        raise ValueError(f"augmented prediction is built for one SE kernel, not the "
                         f"model's {'additive' if fitted.additive is not None else ''}"
                         f"{fitted.kernel!r}")


def check_augment(augment):
    """``augment`` is a pair (X_train, y_train)."""
    if augment is True:
        # the estimator does not keep its training rows (a pickle or a model store
        # would carry the data)
        raise ValueError("augment=True is no longer supported: the estimator does not "
                         "keep its training rows; pass augment=(X_train, y_train)")
    if not isinstance(augment, tuple) or len(augment) != 2:
        raise ValueError("augment must be False or a tuple (X_train, y_train); got "
                         f"{type(augment).__name__}")


def as_numpy(X):
    """Test rows in memory (they are predicted one at a time)."""
    return np.asarray(X.compute() if hasattr(X, "compute") else X, dtype=np.float64)


@single_scipy_thread
def augmented_ep_latent(model, X, X_train, y_train):
    """Latent mean and variance (offset not added, one column per EP problem) at each
    row of X by EP with that row joined to the bases (module docstring).

    Parameters
    ----------
    model : fitted SASPAClassifier or SASPARegressor
    X : ndarray of shape (n, d)
        Test rows.
    X_train, y_train : array-like, dask or zarr arrays
        The training rows and labels (targets); warm-started from the model's sites
        when their number matches.

    Returns
    -------
    mean, variance : ndarray of shape (n, n_problems)
    """
    fitted = model.fitted_posterior_
    _check_kernel(fitted)
    if fitted.frequencies is not None:
        raise ValueError("augmented prediction adds a delta basis at the test row; "
                         "frequency features cannot be mixed with it")
    n_train = X_train.shape[0]
    sites = getattr(model, "sites_tau_", None)
    init = None
    if sites is not None and sites.shape[-1] == n_train:
        init = (model.sites_tau_, model.sites_nu_)
    template = clone(model).set_params(
        n_bases=fitted.n_bases + 1, blur="full", lengthscale=fitted.lengthscale,
        signal_variance=fitted.signal_variance, optimize_hyperparameters=False,
        learn_bases=False, verbose=0, **fitted.estimator_likelihood_params)
    X = np.asarray(X, dtype=np.float64)
    mean = np.empty((X.shape[0], fitted.n_problems))
    var = np.empty_like(mean)
    for i, row in enumerate(X):
        support = Basis(np.vstack([fitted.means, row]),
                        np.concatenate([fitted.covs, np.zeros((1,) + fitted.covs.shape[1:])]))
        joined = clone(template).set_params(bases=support)
        joined.fit(X_train, y_train, init_sites=init)
        mean[i], var[i] = (a[0] for a in joined.fitted_posterior_.latent(row[None]))
    return mean, var
