"""Tail-safe pieces of the closed-form likelihoods: the inverse Mills ratio and its
curvature in log space (finite, accurate values far in the tails rather than 0/0), and
the step smoothed by a Gaussian."""

from __future__ import annotations

import numpy as np
from scipy.special import erfcx, log_ndtr

__all__ = ["MIN_VARIANCE", "inverse_mills", "log_normal_pdf", "mills_curvature",
           "smoothed_step"]

LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
# Cavity variances below this are treated as this: keeps z finite for the step
# likelihood when both the cavity and the FITC residual vanish.
MIN_VARIANCE = 1e-300


def log_normal_pdf(z):
    return -0.5 * z * z - LOG_SQRT_2PI


# Beyond this |z| (z < 0) r (z + r) comes from its asymptotic series, whose error
# there is below 1e-17; closer in, z + r is formed directly from the erfcx ratio.
ASYMPTOTIC_Z = 1e3


def inverse_mills(z):
    """r = N(z) / Phi(z) = sqrt(2/pi) / erfcx(-z / sqrt(2)), accurate for z << 0.

    Forming it as exp(log N - log Phi) subtracts two numbers of size z^2/2 and loses
    all precision of z + r far in the tail; erfcx keeps the relative error at 1e-15.
    """
    return np.sqrt(2.0 / np.pi) / erfcx(-z / np.sqrt(2.0))


def mills_curvature(z, r):
    """r (z + r), which lies in (0, 1); series 1 - 1/z^2 + 6/z^4 for z < -1e3."""
    direct = r * (z + r)
    inv2 = 1.0 / np.maximum(z * z, 1.0)
    series = 1.0 - inv2 + 6.0 * inv2 * inv2
    return np.where(z < -ASYMPTOTIC_Z, series, direct)


def smoothed_step(y, m, s2, log_low, log_span):
    """``(log Z, a, c)`` of a step from ``low`` to ``low + span`` in y f, smoothed by
    N(m, s2): Z = low + span Phi(z), z = y m / sqrt(s2), a = y g, c = g (y m / s2 + g)
    with g = span N(z) / (Z sqrt(s2)).  ``log_low = -inf`` (no floor) takes the probit's
    tail-safe ratio.  The step with label noise and its power
    (:class:`~saspa_dask.core.likelihoods.closed_form.PoweredStep`) share it, with their
    own levels."""
    s = np.sqrt(s2)
    z = y * m / s
    if log_low == -np.inf:
        r = inverse_mills(z)
        return log_span + log_ndtr(z), y * r / s, mills_curvature(z, r) / s2
    log_z = np.logaddexp(log_low, log_span + log_ndtr(z))
    g = np.exp(log_span + log_normal_pdf(z) - log_z) / s
    return log_z, g * y, g * (y * m / s2 + g)
