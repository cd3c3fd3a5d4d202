"""The likelihoods with closed-form tilted moments: Gaussian noise, the probit, the
step with label noise (the paper's eqs. 29-32) and the probit with label noise; with
the Gaussian's and the step's power-EP forms, also closed."""

from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr, ndtr

from .base import Likelihood, Powered
from .quadrature import PoweredQuadrature
from .tails import MIN_VARIANCE, inverse_mills, mills_curvature, smoothed_step

__all__ = ["Gaussian", "NoisyProbit", "PoweredGaussian", "PoweredStep", "Probit", "Step"]


class Gaussian(Likelihood):
    """Gaussian noise, y = f + e with e ~ N(0, noise_variance).

    EP with it is exact: one sweep gives the closed-form (FITC) posterior.
    """

    name = "gaussian"
    learnable = ("noise_variance",)
    exact_sites = True
    gaussian_observations = True

    def __init__(self, noise_variance):
        if not noise_variance > 0:
            raise ValueError(f"noise_variance must be > 0, got {noise_variance!r}")
        self.noise_variance = float(noise_variance)

    @classmethod
    def from_params(cls, noise_variance, **_):
        return cls(noise_variance)

    def tilted(self, y, m, v):
        """Return ``(log Z, a, c)`` for cavities N(m, v) and targets y."""
        total = v + self.noise_variance
        r = y - m
        log_z = -0.5 * (np.log(2.0 * np.pi * total) + r * r / total)
        return log_z, r / total, 1.0 / total

    def log_predictive(self, y, mean, var):
        """log p(y* | data) for a latent prediction N(mean, var)."""
        return self.tilted(y, mean, var)[0]

    def observation_variance(self, var):
        """The latent's variance plus the noise's."""
        return var + self.noise_variance

    def params(self):
        return {"noise_variance": self.noise_variance}

    def hyperparameters(self):
        """Parameters learnable by evidence maximisation (all positive)."""
        return {"noise_variance": self.noise_variance}

    def with_hyperparameters(self, values):
        return Gaussian(values.get("noise_variance", self.noise_variance))

    def _powered(self, alpha):
        return PoweredGaussian(self, alpha)

    def log_z_gradient(self, y, m, v):
        """d log Z / d log(noise_variance) per row: the heat-equation identity
        d log Z / d v = (a^2 - c) / 2 holds for any likelihood smoothed by N(m, v)."""
        _, a, c = self.tilted(y, m, v)
        return {"noise_variance": self.noise_variance * 0.5 * (a * a - c)}


class Probit(Likelihood):
    """Probit classification, p(y | f) = Phi(y f), y in {-1, +1}."""

    name = "probit"
    is_classification = True

    def log_density(self, y, f):
        return log_ndtr(y * f)

    def tilted(self, y, m, v):
        """Return ``(log Z, a, c)`` for cavities N(m, v) and labels y = +-1."""
        scale = np.sqrt(1.0 + v)
        z = y * m / scale
        r = inverse_mills(z)
        log_z = log_ndtr(z)
        a = y * r / scale
        c = mills_curvature(z, r) / (1.0 + v)
        return log_z, a, c

    def margin(self, mean, var):
        """Standardised margin z with P(y = +1) = Phi(z)."""
        return mean / np.sqrt(1.0 + var)

    def proba(self, mean, var):
        """P(y = +1) under a latent N(mean, var)."""
        return ndtr(self.margin(mean, var))

    def log_predictive(self, y, mean, var):
        return log_ndtr(y * self.margin(mean, var))

    def _powered(self, alpha):
        return PoweredQuadrature(self, alpha)


class Step(Likelihood):
    """Step likelihood with label noise: p(y | f) = eps + (1 - 2 eps) H(y f).

    The paper's eqs. 29-32.  It is not log-concave for eps > 0: site precisions can be
    negative, so the EP engine needs damping and the invalid-cavity rule with it.
    """

    name = "step"
    learnable = ("label_noise",)
    # label noise makes it non-log-concave: negative site precisions, which undamped
    # parallel EP can oscillate on
    default_damping = 0.8
    is_classification = True

    def __init__(self, label_noise):
        if not 0.0 <= label_noise < 0.5:
            raise ValueError(f"label_noise must be in [0, 0.5), got {label_noise!r}")
        self.label_noise = float(label_noise)

    @classmethod
    def from_params(cls, label_noise, **_):
        return cls(label_noise)

    def _smoothing_variance(self, v):
        """Variance of the Gaussian the step is smoothed by: the cavity's alone."""
        return np.maximum(v, MIN_VARIANCE)

    def _log_z(self, z):
        eps = self.label_noise
        if eps == 0.0:
            return log_ndtr(z)
        return np.logaddexp(np.log(eps), np.log1p(-2.0 * eps) + log_ndtr(z))

    def tilted(self, y, m, v):
        """Return ``(log Z, a, c)`` for cavities N(m, v) and labels y = +-1.

        With s2 the smoothing variance and z = y m / sqrt(s2): Z = eps + (1 - 2 eps)
        Phi(z), a = y g and c = g (y m / s2 + g), g = (1 - 2 eps) N(z) / (Z sqrt(s2)).
        """
        eps = self.label_noise
        log_low = -np.inf if eps == 0.0 else np.log(eps)
        return smoothed_step(y, m, self._smoothing_variance(v), log_low,
                              np.log1p(-2.0 * eps))

    def margin(self, mean, var):
        """Standardised margin z with P(y = +1) = eps + (1 - 2 eps) Phi(z)."""
        return mean / np.sqrt(self._smoothing_variance(var))

    def proba(self, mean, var):
        """P(y = +1) under a latent N(mean, var)."""
        eps = self.label_noise
        return eps + (1.0 - 2.0 * eps) * ndtr(self.margin(mean, var))

    def log_predictive(self, y, mean, var):
        return self._log_z(y * self.margin(mean, var))

    def params(self):
        return {"label_noise": self.label_noise}

    def hyperparameters(self):
        return {"label_noise": self.label_noise} if self.label_noise > 0 else {}

    def with_hyperparameters(self, values):
        return type(self)(values.get("label_noise", self.label_noise))

    def _powered(self, alpha):
        return PoweredStep(self, alpha)

    def log_z_gradient(self, y, m, v):
        """d log Z / d log(eps) per row: eps (1 - 2 Phi(z)) / Z."""
        if self.label_noise == 0.0:
            return {}
        z = y * m / np.sqrt(self._smoothing_variance(v))
        eps = self.label_noise
        return {"label_noise": eps * (1.0 - 2.0 * ndtr(z)) * np.exp(-self._log_z(z))}


class NoisyProbit(Step):
    """Probit with label noise: p(y | f) = eps + (1 - 2 eps) Phi(y f).

    The SASPA paper's eq. 3 with the probit in place of the step: a step smoothed by
    unit-variance Gaussian latent noise, so its tilted moments are the step's with the
    cavity variance v replaced by 1 + v.  With eps = 0 it is :class:`Probit`.  Like the
    step with label noise it is not log-concave for eps > 0.
    """

    name = "noisy_probit"

    def _smoothing_variance(self, v):
        return 1.0 + v

    def _powered(self, alpha):
        # a step smoothed by unit noise, but its power is not a step: integrated
        return PoweredQuadrature(self, alpha)

    def log_density(self, y, f):
        """log(eps + (1 - 2 eps) Phi(y f)): the label-noisy probit at a latent value."""
        return self._log_z(y * f)

    def log_density_gradient(self, y, f):
        """d log p / d log(eps) = eps (1 - 2 Phi(y f)) / p."""
        eps = self.label_noise
        return {"label_noise": eps * (1.0 - 2.0 * ndtr(y * f)) * np.exp(-self._log_z(y * f))}


class PoweredGaussian(Powered):
    """Power EP with Gaussian noise, in closed form: p^alpha = N(y; f, vy / alpha)
    (2 pi vy)^((1 - alpha) / 2) alpha^(-1/2)."""

    def tilted(self, y, m, v):
        """Return ``(log Z, a, c)`` of p^alpha for cavities N(m, v)."""
        vy, alpha = self.base.noise_variance, self.alpha
        log_z, a, c = Gaussian(vy / alpha).tilted(y, m, v)
        return log_z + 0.5 * (1.0 - alpha) * np.log(2.0 * np.pi * vy) \
            - 0.5 * np.log(alpha), a, c

    def log_z_gradient(self, y, m, v):
        """Z's variance is v + vy / alpha, and the constant carries vy^((1 - alpha)/2)."""
        _, a, c = self.tilted(y, m, v)
        vy, alpha = self.base.noise_variance, self.alpha
        return {"noise_variance": vy / alpha * 0.5 * (a * a - c) + 0.5 * (1.0 - alpha)}


class PoweredStep(Powered):
    """Power EP with the step with label noise eps, in closed form: p^alpha is again a
    step, from eps^alpha to (1 - eps)^alpha, smoothed by N(m, v)."""

    def _levels(self):
        eps = self.base.label_noise
        low = 0.0 if eps == 0.0 else eps ** self.alpha
        return low, (1.0 - eps) ** self.alpha

    def tilted(self, y, m, v):
        """The step's moments with the levels (eps^alpha, (1 - eps)^alpha)."""
        low, high = self._levels()
        log_low = -np.inf if low == 0.0 else np.log(low)
        return smoothed_step(y, m, self.base._smoothing_variance(v), log_low,
                             np.log(high - low))

    def log_z_gradient(self, y, m, v):
        """d log Z / d log(eps) per row."""
        base, alpha = self.base, self.alpha
        if base.label_noise == 0.0:
            return {}
        eps, (low, high) = base.label_noise, self._levels()
        z = y * m / np.sqrt(base._smoothing_variance(v))
        log_z = self.tilted(y, m, v)[0]
        # d low / d log eps = alpha low, d high / d log eps = -alpha eps high / (1 - eps)
        d_low, d_high = alpha * low, -alpha * eps * high / (1.0 - eps)
        return {"label_noise": (d_low + (d_high - d_low) * ndtr(z)) * np.exp(-log_z)}
