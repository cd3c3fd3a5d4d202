"""Frequency inducing features (Lázaro-Gredilla & Figueiras-Vidal's inter-domain GPs).

A feature is the latent function integrated against a Gaussian window times a cosine,

    u_j = kappa integral f(x) N(x | mu_j, C) cos(phi_j + omega_j^T (x - mu_j)) dx,

with centre mu_j, frequency omega_j, phase phi_j and a window covariance
C = diag(c^2) shared by the features (TFIFGP; FIFGP pins every centre to one point).
For the SE-ARD kernel k(x, x') = s2 exp(-1/2 (x - x')^T Lam^{-1} (x - x')),
Lam = diag(l^2), both covariances the EP engine needs are closed forms.

kappa = (|P| / |Lam|)^{1/4}, P = Lam + 2 C, scales every feature alike so that a
zero-frequency feature has variance s2.  It changes no prediction (the features
span the same functions), but without it the variances are s2 sqrt(|Lam| / |P|),
which for a window much wider than the lengthscales in many inputs falls below the
jitter (relative to s2): the features vanish into it and EP fails (FIFGP's learnt
windows went there, ``benchmarks/RESULTS.md``, "Frequency features against
pseudo-inputs").

Cross-covariance (x a data row; r = x - mu_j; S = Lam + C, all diagonal):

    Kt(x, j) = s2 kappa sqrt(|Lam| / |S|)
               exp(-1/2 r^T S^{-1} r - 1/2 omega_j^T Lam S^{-1} C omega_j)
               cos(phi_j + omega_j^T C S^{-1} r)

Feature covariance (Delta = mu_i - mu_j):

    Kh(i, j) = s2/2 exp(-1/2 Delta^T P^{-1} Delta)
               sum over s = +1, -1 of exp(E_s) cos(phi_i + s phi_j - Delta^T P^{-1} C (omega_i - s omega_j)),
    E_s = -1/2 omega_i^T C omega_i - 1/2 omega_j^T C omega_j
          + 1/2 (omega_i - s omega_j)^T C P^{-1} C (omega_i - s omega_j).

Derivation: write the kernel as s2 (2 pi)^{d/2} |Lam|^{1/2} N(x - x' | 0, Lam) and the
cosines as real parts of complex exponentials; the Gaussian integrals are then
characteristic functions.  With zero frequencies and phases the features are kappa
times the multiscale (blurred) bases N(mu_j, C): Kt and Kh are kappa and kappa^2
times :func:`saspa_dask.core.kernels.blurred_cross_covariance` and
``basis_covariance`` with every blur covariance C.  The tests check both forms
against Gauss-Hermite quadrature of the defining integrals.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["FourierGradient", "fourier_covariance_gradient", "fourier_cross_covariance",
           "fourier_cross_gradient", "fourier_feature_covariance", "fourier_moments",
           "fourier_parts"]


def fourier_parts(X, centres, frequencies, phases, window_variance, lengthscale,
                  signal_variance):
    """Kt's envelope and phase, Kt = envelope cos(phase) (module docstring), with the
    rows and centres both centred on the features' centroid: the expanded square's
    round-off is then relative to the data's spread, not its offset.

    Returns
    -------
    Xc, centres_c, envelope, phase
        The centred rows (n, d) and centres (M, d), and envelope and phase (n, M).
    """
    centre = centres.mean(axis=0)
    X = np.asarray(X, dtype=np.float64) - centre
    centres = centres - centre
    l2 = np.asarray(lengthscale, dtype=np.float64) ** 2
    c2 = np.asarray(window_variance, dtype=np.float64)
    S = l2 + c2
    log_kappa = 0.25 * np.log((l2 + 2.0 * c2) / l2).sum()
    log_amp = (log_kappa + 0.5 * np.log(l2 / S).sum()
               - 0.5 * (frequencies ** 2 * (l2 * c2 / S)).sum(1))
    scaled = X / np.sqrt(S)
    mu = centres / np.sqrt(S)
    sq = ((scaled * scaled).sum(1)[:, None] + (mu * mu).sum(1)[None, :]
          - 2.0 * scaled @ mu.T)
    np.maximum(sq, 0.0, out=sq)
    w = frequencies * (c2 / S)  # omega^T C S^{-1}
    phase = phases[None, :] + X @ w.T - (w * centres).sum(1)[None, :]
    return X, centres, signal_variance * np.exp(log_amp[None, :] - 0.5 * sq), phase


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
    _, _, envelope, phase = fourier_parts(X, centres, frequencies, phases, window_variance,
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
    l2 = np.asarray(lengthscale, dtype=np.float64) ** 2
    K = sum(T for _, T, _ in _pair_terms(centres, frequencies, phases,
                                         np.asarray(window_variance, dtype=np.float64), l2,
                                         signal_variance))
    return 0.5 * (K + K.T)


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

    With r = x - mu_j, S = l^2 + c^2 and rho = c^2 / S per input (Kt = envelope cos,
    kappa included):
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
    P = l2 + 2.0 * c2  # kappa's: d log kappa / dc^2 = 1/(2P), / dl^2 = (1/P - 1/l^2)/4
    g_window = (m0[:, None] * (0.5 / P - 0.5 / S) + 0.5 * r2 / S ** 2
                - 0.5 * w2 * l2 ** 2 / S ** 2 * m0[:, None] - frequencies * l2 / S ** 2 * q1).sum(0)
    g_l2 = (m0[:, None] * (0.5 / l2 - 0.5 / S + 0.25 / P - 0.25 / l2) + 0.5 * r2 / S ** 2
            - 0.5 * w2 * c2 ** 2 / S ** 2 * m0[:, None] + frequencies * c2 / S ** 2 * q1).sum(0)
    return FourierGradient(2.0 * l2 * g_l2, g_centres, g_freq, g_phase, g_window)


def fourier_covariance_gradient(weights, centres, frequencies, phases, window_variance,
                                lengthscale, signal_variance):
    """sum_ab W_ab dKh_ab / d theta for a symmetric weight matrix W, in closed form.

    Kh (module docstring) is a sum over s = +1, -1 of T_s = A G exp(E_s) cos(Phi_s),
    with A = s2 / 2, G the centres' Gaussian, E_s the frequency exponent and Phi_s
    the phase; U_s is the same with sin.  Kh(a, b) = Kh(b, a) as a function of the
    parameters, so feature b's derivative is twice the first-argument derivative
    weighted by row b of W.  Every sum over pairs of a pair difference times the
    weighted T_s or U_s expands into row sums and one (M, M) x (M, d) product, so the
    cost is O(M^2 d), not the O(M^2 d^2) of differentiating the pair array per input.
    """
    l2 = np.asarray(lengthscale, dtype=np.float64) ** 2
    c2 = np.asarray(window_variance, dtype=np.float64)
    P = l2 + 2.0 * c2
    mu, om = centres - centres.mean(axis=0), frequencies  # see _pair_terms
    g_centres, g_freq = np.zeros_like(mu), np.zeros_like(om)
    g_phase = np.zeros(mu.shape[0])
    g_window, g_l2 = np.zeros_like(c2), np.zeros_like(c2)
    for sign, T, U in _pair_terms(centres, frequencies, phases, c2, l2, signal_variance):
        QT, QU = weights * T, weights * U
        rT, rU, cT, cU = QT.sum(1), QU.sum(1), QT.sum(0), QU.sum(0)
        QTmu, QTom, QUmu, QUom = QT @ mu, QT @ om, QU @ mu, QU @ om
        # first-argument derivatives, weighted and summed over the second argument
        sum_T_delta = mu * rT[:, None] - QTmu  # sum_b Q^T_ab (mu_a - mu_b)
        sum_T_w = om * rT[:, None] - sign * QTom  # ... (omega_a - s omega_b)
        sum_U_delta = mu * rU[:, None] - QUmu
        sum_U_w = om * rU[:, None] - sign * QUom
        g_centres += 2.0 * (-sum_T_delta / P + c2 / P * sum_U_w)
        g_freq += 2.0 * (-c2 * om * rT[:, None] + c2 ** 2 / P * sum_T_w
                         + c2 / P * sum_U_delta)
        g_phase += -2.0 * rU
        # whole-pair sums for the window and lengthscales (both arguments move)
        delta2 = (rT + cT) @ mu ** 2 - 2.0 * (mu * QTmu).sum(0)
        w2 = rT @ om ** 2 + cT @ om ** 2 - 2.0 * sign * (om * QTom).sum(0)
        own2 = rT @ om ** 2 + cT @ om ** 2  # sum Q^T (omega_a^2 + omega_b^2)
        delta_w = (rU @ (mu * om) - sign * (mu * QUom).sum(0) - (om * QUmu).sum(0)
                   + sign * cU @ (mu * om))
        # (kappa^2 cancels Kh's sqrt(|Lam| / |P|): its amplitude is s2 / 2, constant)
        g_window += (delta2 / P ** 2 - 0.5 * own2 + w2 * c2 * (l2 + c2) / P ** 2
                     + delta_w * l2 / P ** 2)
        g_l2 += (0.5 * delta2 / P ** 2 - 0.5 * w2 * c2 ** 2 / P ** 2
                 - delta_w * c2 / P ** 2)
    return FourierGradient(2.0 * l2 * g_l2, g_centres, g_freq, g_phase, g_window)


def _pair_terms(centres, frequencies, phases, c2, l2, signal_variance):
    """(s, T_s, U_s) for s = +1, -1: Kh's two terms with cos and with sin (M, M)."""
    P = l2 + 2.0 * c2
    # Kh depends on the centres through their differences only: centre them so that
    # the expanded squares' round-off is relative to their spread, not their offset
    centres = centres - centres.mean(axis=0)
    scaled = centres / np.sqrt(P)
    sq = ((scaled * scaled).sum(1)[:, None] + (scaled * scaled).sum(1)[None, :]
          - 2.0 * scaled @ scaled.T)
    np.maximum(sq, 0.0, out=sq)
    envelope = 0.5 * signal_variance * np.exp(-0.5 * sq)  # kappa^2 sqrt(|Lam|/|P|) = 1
    own = 0.5 * (frequencies ** 2 * c2).sum(1)
    q = c2 * c2 / P  # E_s's quadratic form in (omega_a - s omega_b)
    wq = frequencies * q
    fq = (frequencies * wq).sum(1)
    cp = c2 / P  # Phi_s's form between Delta and (omega_a - s omega_b)
    mc = centres * cp
    a_self = (mc * frequencies).sum(1)  # mu_a^T C P^{-1} omega_a
    for sign in (1.0, -1.0):
        quad = 0.5 * (fq[:, None] + fq[None, :]) - sign * frequencies @ wq.T
        exponent = -own[:, None] - own[None, :] + quad
        # Delta^T C P^{-1} (omega_a - s omega_b), Delta = mu_a - mu_b
        cross = (a_self[:, None] - sign * mc @ frequencies.T - frequencies @ mc.T
                 + sign * a_self[None, :])
        phase = phases[:, None] + sign * phases[None, :] - cross
        scale = envelope * np.exp(exponent)
        yield sign, scale * np.cos(phase), scale * np.sin(phase)
