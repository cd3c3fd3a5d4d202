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

from typing import NamedTuple

import numpy as np

__all__ = ["FourierGradient", "fourier_covariance_gradient", "fourier_cross_covariance",
           "fourier_cross_gradient", "fourier_feature_covariance", "fourier_moments",
           "fourier_parts"]


def fourier_parts(X, centres, frequencies, phases, window_variance, lengthscale,
                  signal_variance):
    """Kt's envelope and phase, Kt = envelope cos(phase) (module docstring), for rows X
    and features already centred alike (the caller subtracts one centre from both)."""
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
    return signal_variance * np.exp(log_amp[None, :] - 0.5 * sq), phase


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
    # centred on the features' centroid: the expanded square's round-off is then
    # relative to the data's spread, not its offset
    centre = centres.mean(axis=0)
    envelope, phase = fourier_parts(np.asarray(X, dtype=np.float64) - centre,
                                    centres - centre, frequencies, phases, window_variance,
                                    lengthscale, signal_variance)
    return envelope * np.cos(phase)


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
    K = _pair_covariance(centres, frequencies, phases, centres, frequencies, phases,
                         np.asarray(window_variance, dtype=np.float64),
                         np.asarray(lengthscale, dtype=np.float64), signal_variance)
    return 0.5 * (K + K.T)


def _pair_covariance(ci, fi, pi, cj, fj, pj, window_variance, lengthscale, signal_variance):
    """Kh between features (ci, fi, pi) (rows) and (cj, fj, pj) (columns); analytic in
    every argument, so complex arguments give complex-step derivatives."""
    l2 = lengthscale ** 2
    c2 = window_variance
    P = l2 + 2.0 * c2
    delta = ci[:, None, :] - cj[None, :, :]  # (Mi, Mj, d)
    envelope = (0.5 * signal_variance * np.sqrt(np.prod(l2 / P))
                * np.exp(-0.5 * (delta * delta / P).sum(-1)))
    own_i = 0.5 * (fi ** 2 * c2).sum(1)  # 1/2 omega^T C omega per feature
    own_j = 0.5 * (fj ** 2 * c2).sum(1)
    out = 0.0
    for sign in (1.0, -1.0):
        w = fi[:, None, :] - sign * fj[None, :, :]  # omega_i - s omega_j
        exponent = -own_i[:, None] - own_j[None, :] + 0.5 * (w * w * c2 * c2 / P).sum(-1)
        phase = pi[:, None] + sign * pj[None, :] - (delta * c2 / P * w).sum(-1)
        out = out + np.exp(exponent) * np.cos(phase)
    return envelope * out


class FourierGradient(NamedTuple):
    """A weighted sum of derivatives of Kt or Kh for frequency features: with respect
    to the log lengthscales (d,), the centres (M, d), frequencies (M, d), phases (M,)
    and the window variances c^2 themselves (d,)."""

    lengthscale: np.ndarray
    centres: np.ndarray
    frequencies: np.ndarray
    phases: np.ndarray
    window: np.ndarray


def fourier_moments(X, cos_weights, sin_weights):
    """Per-feature moments of the (centred) rows for the Kt gradient.

    ``cos_weights`` E_ij = W_ij Kt_ij and ``sin_weights`` W_ij envelope_ij
    sin(phase_ij), with W the evidence's derivative with respect to Kt.  Returns
    (m0, m1, m2, s0, s1): sum_i E_ij, sum_i E_ij x_i, sum_i E_ij x_i^2 (elementwise),
    and the first two for the sine weights.
    """
    return (cos_weights.sum(0), cos_weights.T @ X, cos_weights.T @ (X * X),
            sin_weights.sum(0), sin_weights.T @ X)


def fourier_cross_gradient(moments, centres, frequencies, window_variance, lengthscale):
    """sum_ij W_ij dKt_ij / d theta from :func:`fourier_moments` (summed over chunks),
    with ``centres`` centred as the rows were.

    With r = x - mu_j, S = l^2 + c^2 and rho = c^2 / S per input (Kt = envelope cos):
    dKt/dmu = Kt r / S + env sin omega rho; dKt/domega = -Kt omega l^2 rho - env sin
    rho r; dKt/dphi = -env sin; the window and lengthscale terms likewise, each a
    moment of r of order at most two.
    """
    m0, m1, m2, s0, s1 = moments
    l2 = lengthscale ** 2
    c2 = window_variance
    S = l2 + c2
    rho = c2 / S
    r1 = m1 - m0[:, None] * centres  # sum E r
    r2 = m2 - 2.0 * centres * m1 + centres ** 2 * m0[:, None]  # sum E r^2
    q1 = s1 - s0[:, None] * centres  # sum E_sin r
    w2 = frequencies ** 2
    g_centres = r1 / S + frequencies * rho * s0[:, None]
    g_freq = -frequencies * l2 * rho * m0[:, None] - rho * q1
    g_phase = -s0
    g_window = (-0.5 * m0[:, None] / S + 0.5 * r2 / S ** 2 - 0.5 * w2 * l2 ** 2 / S ** 2
                * m0[:, None] - frequencies * l2 / S ** 2 * q1).sum(0)
    g_l2 = (0.5 * m0[:, None] * (1.0 / l2 - 1.0 / S) + 0.5 * r2 / S ** 2
            - 0.5 * w2 * c2 ** 2 / S ** 2 * m0[:, None] + frequencies * c2 / S ** 2 * q1).sum(0)
    return FourierGradient(2.0 * l2 * g_l2, g_centres, g_freq, g_phase, g_window)


# complex step: the derivative of an analytic f is Im f(x + i h) / h, exact to
# round-off for any tiny h (no cancellation)
_STEP = 1e-30


def fourier_covariance_gradient(weights, centres, frequencies, phases, window_variance,
                                lengthscale, signal_variance):
    """sum_ab W_ab dKh_ab / d theta for a symmetric weight matrix W, by complex steps.

    Kh_ab depends on feature b's parameters through its second argument only (and on
    a's through its first, symmetrically), so one complex evaluation per parameter
    coordinate, all features stepped at once, gives every feature's derivative:
    d/dtheta_b = 2 sum_a W_ab Im Kh(a, b + i h e) / h.  Global parameters step both
    sides.  Cost: (2 d + 1) + 2 d evaluations of the M x M x d pair array.
    """
    args = (centres, frequencies, phases)
    d = centres.shape[1]

    def stepped_column(part, k):
        stepped = [a.astype(complex) for a in args]
        if part == 2:
            stepped[2] = stepped[2] + 1j * _STEP
        else:
            stepped[part] = stepped[part].copy()
            stepped[part][:, k] += 1j * _STEP
        K = _pair_covariance(*args, *stepped, window_variance, lengthscale, signal_variance)
        return 2.0 * (weights * K.imag / _STEP).sum(0)

    g_centres = np.column_stack([stepped_column(0, k) for k in range(d)])
    g_freq = np.column_stack([stepped_column(1, k) for k in range(d)])
    g_phase = stepped_column(2, None)

    def stepped_global(which, k):
        c2, ls = window_variance.astype(complex), lengthscale.astype(complex)
        if which == "window":
            c2[k] += 1j * _STEP
        else:  # log lengthscale: l -> l (1 + i h)
            ls[k] += 1j * _STEP * lengthscale[k]
        K = _pair_covariance(*args, *args, c2, ls, signal_variance)
        return float((weights * K.imag / _STEP).sum())

    g_window = np.array([stepped_global("window", k) for k in range(d)])
    g_l = np.array([stepped_global("lengthscale", k) for k in range(d)])
    return FourierGradient(g_l, g_centres, g_freq, g_phase, g_window)
