"""Frequency inducing features (Lázaro-Gredilla & Figueiras-Vidal's inter-domain GPs).

A feature is the latent function integrated against a Gaussian window times a cosine,

    u_j = integral f(x) N(x | mu_j, C) cos(phi_j + omega_j^T (x - mu_j)) dx,

with centre mu_j, frequency omega_j, phase phi_j and a window covariance
C = diag(c^2) shared by the features (TFIFGP; FIFGP pins every centre to one point).
For the SE-ARD kernel k(x, x') = s2 exp(-1/2 (x - x')^T Lam^{-1} (x - x')),
Lam = diag(l^2), both covariances the EP engine needs are closed forms.

Cross-covariance (x a data row; r = x - mu_j; S = Lam + C, all diagonal):

    Kt(x, j) = s2 sqrt(|Lam| / |S|) exp(-1/2 r^T S^{-1} r - 1/2 omega_j^T Lam S^{-1} C omega_j)
               cos(phi_j + omega_j^T C S^{-1} r)

Feature covariance (Delta = mu_i - mu_j; P = Lam + 2 C):

    Kh(i, j) = s2/2 sqrt(|Lam| / |P|) exp(-1/2 Delta^T P^{-1} Delta)
               sum over s = +1, -1 of exp(E_s) cos(phi_i + s phi_j - Delta^T P^{-1} C (omega_i - s omega_j)),
    E_s = -1/2 omega_i^T C omega_i - 1/2 omega_j^T C omega_j
          + 1/2 (omega_i - s omega_j)^T C P^{-1} C (omega_i - s omega_j).

Derivation: write the kernel as s2 (2 pi)^{d/2} |Lam|^{1/2} N(x - x' | 0, Lam) and the
cosines as real parts of complex exponentials; the Gaussian integrals are then
characteristic functions.  With zero frequencies and phases the features are the
multiscale (blurred) bases N(mu_j, C): Kt and Kh are
:func:`saspa_dask.core.kernels.blurred_cross_covariance` and ``basis_covariance``
with every blur covariance C.  The tests check both forms against Gauss-Hermite
quadrature of the defining integrals.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fourier_cross_covariance", "fourier_feature_covariance"]


def fourier_cross_covariance(X, centres, frequencies, phases, window_variance, lengthscale,
                             signal_variance):
    """Kt(X, features): covariance between f at rows X and each feature.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    centres : ndarray of shape (M, d)
    frequencies : ndarray of shape (M, d)
    phases : ndarray of shape (M,)
    window_variance : ndarray of shape (d,)
        c^2, the window's variance along each input.
    lengthscale : ndarray of shape (d,)
    signal_variance : float

    Returns
    -------
    ndarray of shape (n, M)
    """
    X = np.asarray(X, dtype=np.float64)
    l2 = np.asarray(lengthscale, dtype=np.float64) ** 2
    c2 = np.asarray(window_variance, dtype=np.float64)
    S = l2 + c2
    log_amp = 0.5 * np.log(l2 / S).sum() - 0.5 * (frequencies ** 2 * (l2 * c2 / S)).sum(1)
    scaled = X / np.sqrt(S)
    mu = centres / np.sqrt(S)
    sq = ((scaled * scaled).sum(1)[:, None] + (mu * mu).sum(1)[None, :]
          - 2.0 * scaled @ mu.T)
    np.maximum(sq, 0.0, out=sq)
    w = frequencies * (c2 / S)  # omega^T C S^{-1}
    phase = phases[None, :] + X @ w.T - (w * centres).sum(1)[None, :]
    return signal_variance * np.exp(log_amp[None, :] - 0.5 * sq) * np.cos(phase)


def fourier_feature_covariance(centres, frequencies, phases, window_variance, lengthscale,
                               signal_variance):
    """Kh(features, features), symmetric.

    Parameters
    ----------
    centres, frequencies : ndarray of shape (M, d)
    phases : ndarray of shape (M,)
    window_variance, lengthscale : ndarray of shape (d,)
    signal_variance : float

    Returns
    -------
    ndarray of shape (M, M)
    """
    l2 = np.asarray(lengthscale, dtype=np.float64) ** 2
    c2 = np.asarray(window_variance, dtype=np.float64)
    P = l2 + 2.0 * c2
    delta = centres[:, None, :] - centres[None, :, :]  # (M, M, d)
    envelope = (0.5 * signal_variance * np.sqrt(np.prod(l2 / P))
                * np.exp(-0.5 * (delta * delta / P).sum(-1)))
    own = 0.5 * (frequencies ** 2 * c2).sum(1)  # 1/2 omega^T C omega per feature
    out = np.zeros(envelope.shape)
    for sign in (1.0, -1.0):
        w = frequencies[:, None, :] - sign * frequencies[None, :, :]  # omega_i - s omega_j
        exponent = -own[:, None] - own[None, :] + 0.5 * (w * w * c2 * c2 / P).sum(-1)
        phase = (phases[:, None] + sign * phases[None, :]
                 - (delta * c2 / P * w).sum(-1))
        out += np.exp(exponent) * np.cos(phase)
    K = envelope * out
    return 0.5 * (K + K.T)
