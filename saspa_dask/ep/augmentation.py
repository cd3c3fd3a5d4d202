"""Augmented prediction (Quiñonero-Candela & Rasmussen): the test point joins the bases.

For a test input x*, the support set becomes the M bases plus a delta basis at x*.  In
whitened form the new basis adds one coordinate: with phi* = L^{-1} k(B, x*) and
delta^2 = k(x*, x*) + jitter - |phi*|^2 (the new diagonal entry of the extended
Cholesky factor), a training row's whitened features gain

    psi_i = (k(x_i, x*) - phi*^T phi_i) / delta,

its residual variance falls to lam_i - psi_i^2 (FITC; zero for DTC), and the
Gaussian-likelihood posterior over the M + 1 whitened coordinates is

    P' = I + sum_i w_i [phi_i; psi_i] [phi_i; psi_i]^T,   h' = sum_i w_i y_i [phi_i; psi_i],

with w_i = 1 / (lam_i - psi_i^2 + noise).  The test latent's whitened feature is
t = [phi*; (k(x*, x*) - |phi*|^2) / delta], so its mean is t^T P'^{-1} h' and its
variance k(x*, x*) - |t|^2 + t^T P'^{-1} t (docs/design.md, section 2 with one more basis).

The sums split over training row chunks (:func:`chunk_statistics`, added by
:func:`add_statistics`); :func:`solve_augmented` turns them into predictions.  For
DTC w_i does not depend on x*, and a chunk costs O(n M B) for B test points on top of
one Gram matrix; for FITC every test point reweights the rows and a chunk costs
O(n M^2 B).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, cholesky

__all__ = ["AugmentedStatistics", "add_statistics", "chunk_statistics", "solve_augmented",
           "test_features"]


@dataclass
class AugmentedStatistics:
    """Sums over training rows for B test points (see the module docstring).

    Attributes
    ----------
    gram : ndarray of shape (B, M, M), or (M, M) for DTC (shared by every test point)
        sum_i w_i phi_i phi_i^T.
    cross : ndarray of shape (B, M)
        sum_i w_i psi_i phi_i.
    extra : ndarray of shape (B,)
        sum_i w_i psi_i^2.
    h : ndarray of shape (B, M), or (M,) for DTC
        sum_i w_i y_i phi_i.
    h_extra : ndarray of shape (B,)
        sum_i w_i y_i psi_i.
    """

    gram: np.ndarray
    cross: np.ndarray
    extra: np.ndarray
    h: np.ndarray
    h_extra: np.ndarray


def test_features(phi_star, prior_variance, jitter):
    """delta and the test latent's new whitened coordinate for test rows.

    Parameters
    ----------
    phi_star : ndarray of shape (B, M)
        L^{-1} k(B, x*) of each test row.
    prior_variance : float
        k(x*, x*), the signal variance.
    jitter : float
        Absolute jitter of the basis covariance (the new basis gets it too).

    Returns
    -------
    delta : ndarray of shape (B,)
    t_extra : ndarray of shape (B,)
    """
    residual = prior_variance - np.einsum("bm,bm->b", phi_star, phi_star)
    delta = np.sqrt(np.maximum(residual, 0.0) + jitter)
    return delta, residual / delta


def chunk_statistics(phi, lam, y, k_cross, phi_star, delta, noise_variance,
                     approximation):
    """The sums of :class:`AugmentedStatistics` over one chunk of training rows.

    Parameters
    ----------
    phi : ndarray of shape (n, M)
        Whitened features of the training rows.
    lam : ndarray of shape (n,)
        Their residual variances (ignored for DTC).
    y : ndarray of shape (n,)
        Centred targets.
    k_cross : ndarray of shape (n, B)
        k(x_i, x*) for the B test rows.
    phi_star, delta : ndarray of shape (B, M) and (B,)
        The test rows' features (:func:`test_features`).
    noise_variance : float
    approximation : Approximation
        Where the rows' residual variance is kept (:mod:`saspa_dask.ep.approximation`):
        for DTC and SoR they see their projection only.
    """
    psi = (k_cross - phi @ phi_star.T) / delta
    if not approximation.residual_in_training:
        w = np.full(psi.shape, 1.0 / noise_variance)
        gram = (phi.T @ phi) / noise_variance
        h = phi.T @ y / noise_variance
    else:
        # the new basis explains psi_i^2 of the row's residual variance
        w = 1.0 / (np.maximum(lam[:, None] - psi * psi, 0.0) + noise_variance)
        gram = np.stack([(phi * w[:, b, None]).T @ phi for b in range(psi.shape[1])])
        h = (w * y[:, None]).T @ phi
    wpsi = w * psi
    return AugmentedStatistics(gram, wpsi.T @ phi, np.einsum("ib,ib->b", wpsi, psi), h,
                               wpsi.T @ y)


def add_statistics(a, b):
    """The statistics of two chunks together."""
    return AugmentedStatistics(a.gram + b.gram, a.cross + b.cross, a.extra + b.extra,
                               a.h + b.h, a.h_extra + b.h_extra)


def solve_augmented(stats, phi_star, t_extra, prior_variance):
    """Latent mean and variance at each test row from the summed statistics.

    One (M + 1) x (M + 1) Cholesky factorisation per test row: P' >= I, so it is well
    conditioned whatever the bases.
    """
    B, M = phi_star.shape
    mean, var = np.empty(B), np.empty(B)
    for b in range(B):
        P = np.empty((M + 1, M + 1))
        P[:M, :M] = stats.gram if stats.gram.ndim == 2 else stats.gram[b]
        P[:M, M] = P[M, :M] = stats.cross[b]
        P[M, M] = stats.extra[b]
        P[np.diag_indices(M + 1)] += 1.0
        h = np.append(stats.h if stats.h.ndim == 1 else stats.h[b], stats.h_extra[b])
        t = np.append(phi_star[b], t_extra[b])
        R = cholesky(P, lower=True, check_finite=False)
        mean[b] = t @ cho_solve((R, True), h, check_finite=False)
        var[b] = (prior_variance - t @ t) + t @ cho_solve((R, True), t, check_finite=False)
    return mean, np.maximum(var, 0.0)
