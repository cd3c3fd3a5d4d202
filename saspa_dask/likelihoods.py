"""Likelihoods for EP: tilted moments of p(y | f) against a Gaussian cavity N(f | m, v).

Every likelihood returns, on vectors, ``log Z``, ``a = d log Z / d m`` and
``c = -d^2 log Z / d m^2`` (DESIGN.md section 2).  Classification labels are -1 / +1.
Ratios of the normal density to its CDF are computed in log space so that the tails
(z << 0) give finite, accurate values rather than 0/0.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfcx, log_ndtr, ndtr

__all__ = ["Gaussian", "Probit", "Step", "make_likelihood", "LIKELIHOODS"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
# Cavity variances below this are treated as this: keeps z finite for the step
# likelihood when both the cavity and the FITC residual vanish.
_MIN_VARIANCE = 1e-300


def _log_normal_pdf(z):
    return -0.5 * z * z - _LOG_SQRT_2PI


# Beyond this |z| (z < 0) r (z + r) comes from its asymptotic series, whose error
# there is below 1e-17; closer in, z + r is formed directly from the erfcx ratio.
_ASYMPTOTIC_Z = 1e3


def _inverse_mills(z):
    """r = N(z) / Phi(z) = sqrt(2/pi) / erfcx(-z / sqrt(2)), accurate for z << 0.

    Forming it as exp(log N - log Phi) subtracts two numbers of size z^2/2 and loses
    all precision of z + r far in the tail; erfcx keeps the relative error at 1e-15.
    """
    return np.sqrt(2.0 / np.pi) / erfcx(-z / np.sqrt(2.0))


def _mills_curvature(z, r):
    """r (z + r), which lies in (0, 1); series 1 - 1/z^2 + 6/z^4 for z < -1e3."""
    direct = r * (z + r)
    inv2 = 1.0 / np.maximum(z * z, 1.0)
    series = 1.0 - inv2 + 6.0 * inv2 * inv2
    return np.where(z < -_ASYMPTOTIC_Z, series, direct)


class Gaussian:
    """Gaussian noise, y = f + e with e ~ N(0, noise_variance).

    EP with it is exact: one sweep gives the closed-form (FITC) posterior.
    """

    name = "gaussian"
    is_classification = False

    def __init__(self, noise_variance):
        if not noise_variance > 0:
            raise ValueError(f"noise_variance must be > 0, got {noise_variance!r}")
        self.noise_variance = float(noise_variance)

    def tilted(self, y, m, v):
        """Return ``(log Z, a, c)`` for cavities N(m, v) and targets y."""
        total = v + self.noise_variance
        r = y - m
        log_z = -0.5 * (np.log(2.0 * np.pi * total) + r * r / total)
        return log_z, r / total, 1.0 / total

    def log_predictive(self, y, mean, var):
        """log p(y* | data) for a latent prediction N(mean, var)."""
        return self.tilted(y, mean, var)[0]

    def params(self):
        return {"noise_variance": self.noise_variance}


class Probit:
    """Probit classification, p(y | f) = Phi(y f), y in {-1, +1}."""

    name = "probit"
    is_classification = True

    def tilted(self, y, m, v):
        """Return ``(log Z, a, c)`` for cavities N(m, v) and labels y = +-1."""
        scale = np.sqrt(1.0 + v)
        z = y * m / scale
        r = _inverse_mills(z)
        log_z = log_ndtr(z)
        a = y * r / scale
        c = _mills_curvature(z, r) / (1.0 + v)
        return log_z, a, c

    def margin(self, mean, var):
        """Standardised margin z with P(y = +1) = Phi(z)."""
        return mean / np.sqrt(1.0 + var)

    def proba(self, mean, var):
        """P(y = +1) under a latent N(mean, var)."""
        return ndtr(self.margin(mean, var))

    def log_predictive(self, y, mean, var):
        return log_ndtr(y * self.margin(mean, var))

    def params(self):
        return {}


class Step:
    """Step likelihood with label noise: p(y | f) = eps + (1 - 2 eps) H(y f).

    The paper's eqs. 29-32.  It is not log-concave for eps > 0: site precisions can be
    negative, so the EP engine needs damping and the invalid-cavity rule with it.
    """

    name = "step"
    is_classification = True

    def __init__(self, label_noise):
        if not 0.0 <= label_noise < 0.5:
            raise ValueError(f"label_noise must be in [0, 0.5), got {label_noise!r}")
        self.label_noise = float(label_noise)

    def _log_z(self, z):
        eps = self.label_noise
        if eps == 0.0:
            return log_ndtr(z)
        return np.logaddexp(np.log(eps), np.log1p(-2.0 * eps) + log_ndtr(z))

    def tilted(self, y, m, v):
        """Return ``(log Z, a, c)`` for cavities N(m, v) and labels y = +-1."""
        eps = self.label_noise
        v = np.maximum(v, _MIN_VARIANCE)
        sv = np.sqrt(v)
        z = y * m / sv
        log_z = self._log_z(z)
        if eps == 0.0:
            # The probit case with no added variance: same tail-safe ratio.
            r = _inverse_mills(z)
            return log_z, y * r / sv, _mills_curvature(z, r) / v
        g = np.exp(np.log1p(-2.0 * eps) + _log_normal_pdf(z) - log_z) / sv
        a = g * y
        c = g * (y * m + v * g) / v
        return log_z, a, c

    def margin(self, mean, var):
        """Standardised margin z with P(y = +1) = eps + (1 - 2 eps) Phi(z)."""
        return mean / np.sqrt(np.maximum(var, _MIN_VARIANCE))

    def proba(self, mean, var):
        """P(y = +1) under a latent N(mean, var)."""
        eps = self.label_noise
        return eps + (1.0 - 2.0 * eps) * ndtr(self.margin(mean, var))

    def log_predictive(self, y, mean, var):
        return self._log_z(y * self.margin(mean, var))

    def params(self):
        return {"label_noise": self.label_noise}


LIKELIHOODS = {"gaussian": Gaussian, "probit": Probit, "step": Step}


def make_likelihood(name, **params):
    """Build a likelihood by name with its parameters.

    Parameters
    ----------
    name : {"gaussian", "probit", "step"}
    **params
        ``noise_variance`` for gaussian, ``label_noise`` for step.
    """
    if name not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {sorted(LIKELIHOODS)}, got {name!r}")
    cls = LIKELIHOODS[name]
    if name == "gaussian":
        return cls(params["noise_variance"])
    if name == "step":
        return cls(params["label_noise"])
    return cls()
