"""Likelihoods for EP: tilted moments of p(y | f) against a Gaussian cavity N(f | m, v).

Every likelihood returns, on vectors, ``log Z``, ``a = d log Z / d m`` and
``c = -d^2 log Z / d m^2`` (DESIGN.md section 2).  Power EP (DESIGN.md, "Power EP")
needs the same moments of the likelihood raised to a power alpha inside the integral:
:func:`powered` gives them (closed forms for the Gaussian and the step, Gauss-Hermite
quadrature of alpha log p otherwise), with alpha = 1 the likelihood itself.  Classification labels are -1 / +1.
Ratios of the normal density to its CDF are computed in log space so that the tails
(z << 0) give finite, accurate values rather than 0/0.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, erfcx, gammaln, log_ndtr, ndtr

__all__ = ["Gaussian", "Logistic", "NoisyProbit", "Poisson", "Powered", "Probit", "Quadrature",
           "Step", "StudentT", "make_likelihood", "powered", "LIKELIHOODS"]

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


def _smoothed_step(y, m, s2, log_low, log_span):
    """``(log Z, a, c)`` of a step from ``low`` to ``low + span`` in y f, smoothed by
    N(m, s2): Z = low + span Phi(z), z = y m / sqrt(s2), a = y g, c = g (y m / s2 + g)
    with g = span N(z) / (Z sqrt(s2)).  ``log_low = -inf`` (no floor) takes the probit's
    tail-safe ratio.  The step with label noise and its power (:class:`Powered`) share
    it, with their own levels."""
    s = np.sqrt(s2)
    z = y * m / s
    if log_low == -np.inf:
        r = _inverse_mills(z)
        return log_span + log_ndtr(z), y * r / s, _mills_curvature(z, r) / s2
    log_z = np.logaddexp(log_low, log_span + log_ndtr(z))
    g = np.exp(log_span + _log_normal_pdf(z) - log_z) / s
    return log_z, g * y, g * (y * m / s2 + g)


class Gaussian:
    """Gaussian noise, y = f + e with e ~ N(0, noise_variance).

    EP with it is exact: one sweep gives the closed-form (FITC) posterior.
    """

    name = "gaussian"
    is_classification = False
    alpha = 1.0  # the EP power (see Powered)

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

    def hyperparameters(self):
        """Parameters learnable by evidence maximisation (all positive)."""
        return {"noise_variance": self.noise_variance}

    def with_hyperparameters(self, values):
        return Gaussian(values.get("noise_variance", self.noise_variance))

    def log_z_gradient(self, y, m, v):
        """d log Z / d log(noise_variance) per row: the heat-equation identity
        d log Z / d v = (a^2 - c) / 2 holds for any likelihood smoothed by N(m, v)."""
        _, a, c = self.tilted(y, m, v)
        return {"noise_variance": self.noise_variance * 0.5 * (a * a - c)}


class Probit:
    """Probit classification, p(y | f) = Phi(y f), y in {-1, +1}."""

    name = "probit"
    is_classification = True
    alpha = 1.0

    def log_density(self, y, f):
        return log_ndtr(y * f)

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

    def hyperparameters(self):
        return {}

    def with_hyperparameters(self, values):
        return self

    def log_z_gradient(self, y, m, v):
        return {}


class Step:
    """Step likelihood with label noise: p(y | f) = eps + (1 - 2 eps) H(y f).

    The paper's eqs. 29-32.  It is not log-concave for eps > 0: site precisions can be
    negative, so the EP engine needs damping and the invalid-cavity rule with it.
    """

    name = "step"
    is_classification = True
    alpha = 1.0

    def __init__(self, label_noise):
        if not 0.0 <= label_noise < 0.5:
            raise ValueError(f"label_noise must be in [0, 0.5), got {label_noise!r}")
        self.label_noise = float(label_noise)

    def _smoothing_variance(self, v):
        """Variance of the Gaussian the step is smoothed by: the cavity's alone."""
        return np.maximum(v, _MIN_VARIANCE)

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
        return _smoothed_step(y, m, self._smoothing_variance(v), log_low,
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

    def log_density(self, y, f):
        """log(eps + (1 - 2 eps) Phi(y f)): the label-noisy probit at a latent value."""
        return self._log_z(y * f)

    def log_density_gradient(self, y, f):
        """d log p / d log(eps) = eps (1 - 2 Phi(y f)) / p."""
        eps = self.label_noise
        return {"label_noise": eps * (1.0 - 2.0 * ndtr(y * f)) * np.exp(-self._log_z(y * f))}


# ----------------------------------------------------------------------------------
# Likelihoods by Gauss-Hermite quadrature on the cavity
# ----------------------------------------------------------------------------------


class Quadrature:
    """A likelihood given by any vectorised log-density, moments by Gauss-Hermite.

    With cavity N(f | m, v) and nodes f_k = m + sqrt(2 v) x_k (Hermite nodes x_k,
    weights w_k), log Z = logsumexp_k(log w_k + log p(y | f_k)) - log(pi) / 2; the
    tilted mean and variance are the weighted moments of the f_k, and
    a = (mean - m) / v, c = (v - var) / v^2.  Everything is in log space, so tiny
    likelihood values do not underflow.

    Accuracy (measured against adaptive integration, ``tests/test_quadrature.py``):
    with the default 256 points, log Z and the tilted mean and variance agree to 4e-9
    or better on logistic, Poisson (counts up to 12, cavities away from log y) and
    Student-t (an outlier at 16 scales) cases; with 64 points the same cases were
    off by up to 5e-4 where the likelihood is much sharper than the cavity.  256
    nodes a row cost little next to EP's M^2 linear algebra a row.

    Parameters
    ----------
    log_density : callable
        ``log_density(y, f)`` -> log p(y | f), broadcasting over arrays.
    n_points : int, default=256
    name : str
    """

    is_classification = False
    alpha = 1.0

    def __init__(self, log_density, n_points=256, name="quadrature"):
        self.log_density = log_density
        self.n_points = int(n_points)
        self.name = name
        x, w = np.polynomial.hermite.hermgauss(self.n_points)
        keep = w > 0  # the outermost weights of large rules underflow to zero
        self._nodes = x[keep]
        self._log_weights = np.log(w[keep]) - 0.5 * np.log(np.pi)

    def _tilted_nodes(self, y, m, v):
        y, m, v = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (y, m, v)))
        f = m[..., None] + np.sqrt(2.0 * v)[..., None] * self._nodes
        log_terms = self._log_weights + self.log_density(y[..., None], f)
        top = log_terms.max(axis=-1, keepdims=True)
        weights = np.exp(log_terms - top)
        total = weights.sum(axis=-1, keepdims=True)
        log_z = (np.log(total) + top)[..., 0]
        return f, weights / total, log_z, m, v

    def tilted(self, y, m, v):
        """Return ``(log Z, a, c)`` for cavities N(m, v)."""
        f, weights, log_z, m, v = self._tilted_nodes(y, m, v)
        mean = (weights * f).sum(axis=-1)
        var = (weights * (f - mean[..., None]) ** 2).sum(axis=-1)
        return log_z, (mean - m) / v, (v - var) / (v * v)

    def log_predictive(self, y, mean, var):
        """log p(y* | data) = log of the integral of p(y* | f) N(f | mean, var)."""
        return self._tilted_nodes(y, mean, var)[2]

    def params(self):
        return {"n_points": self.n_points}

    def hyperparameters(self):
        return {}

    def with_hyperparameters(self, values):
        return self

    def log_density_gradient(self, y, f):
        """d log p(y | f) / d log(theta) for each hyperparameter (override)."""
        return {}

    def log_z_gradient(self, y, m, v):
        """d log Z / d log(theta) per row: the tilted mean of d log p / d log(theta)."""
        f, weights, _, _, _ = self._tilted_nodes(y, m, v)
        y_b = np.broadcast_to(np.asarray(y, dtype=np.float64), f.shape[:-1])[..., None]
        return {name: (weights * g).sum(axis=-1)
                for name, g in self.log_density_gradient(y_b, f).items()}


class Logistic(Quadrature):
    """Logistic classification, p(y | f) = 1 / (1 + exp(-y f)), y in {-1, +1}."""

    is_classification = True

    def __init__(self, n_points=256):
        super().__init__(lambda y, f: -np.logaddexp(0.0, -y * f), n_points, "logistic")

    def proba(self, mean, var):
        """P(y = +1) under a latent N(mean, var), by the same quadrature."""
        return np.exp(self.log_predictive(np.ones_like(mean), mean, var))

    def margin(self, mean, var):
        """Log-odds of the predictive probability (increasing in it)."""
        ones = np.ones_like(mean)
        return self.log_predictive(ones, mean, var) - self.log_predictive(-ones, mean, var)


class Poisson(Quadrature):
    """Counts with a log link: y ~ Poisson(exp(f + offset)).

    ``offset`` is a fixed shift of the latent log-rate (the estimator uses the log of
    the mean count, so the zero-mean GP models the deviation from it).
    """

    def __init__(self, n_points=256, offset=0.0):
        self.offset = float(offset)
        o = self.offset
        super().__init__(lambda y, f: y * (f + o) - np.exp(f + o) - gammaln(y + 1.0),
                         n_points, "poisson")

    def params(self):
        return {"n_points": self.n_points, "offset": self.offset}


class StudentT(Quadrature):
    """Robust regression: y = f + e, e ~ Student-t(dof, scale).

    Not log-concave: sites can have negative precision (EP then needs damping and the
    invalid-cavity rule).
    """

    def __init__(self, dof=4.0, scale=1.0, n_points=256):
        if not dof > 0 or not scale > 0:
            raise ValueError(f"dof and scale must be > 0, got {dof!r}, {scale!r}")
        self.dof, self.scale = float(dof), float(scale)
        const = (gammaln((self.dof + 1) / 2) - gammaln(self.dof / 2)
                 - 0.5 * np.log(self.dof * np.pi * self.scale**2))

        def log_density(y, f):
            r = (y - f) / self.scale
            return const - 0.5 * (self.dof + 1) * np.log1p(r * r / self.dof)

        super().__init__(log_density, n_points, "student_t")

    def params(self):
        return {"dof": self.dof, "scale": self.scale, "n_points": self.n_points}

    def hyperparameters(self):
        return {"dof": self.dof, "scale": self.scale}

    def with_hyperparameters(self, values):
        return StudentT(values.get("dof", self.dof), values.get("scale", self.scale),
                        self.n_points)

    def log_density_gradient(self, y, f):
        nu = self.dof
        r2 = ((y - f) / self.scale) ** 2
        ratio = r2 / (nu + r2)
        d_dof = 0.5 * nu * (digamma((nu + 1) / 2) - digamma(nu / 2) - 1.0 / nu
                            - np.log1p(r2 / nu) + (nu + 1) / nu * ratio)
        return {"dof": d_dof, "scale": -1.0 + (nu + 1) * ratio}


# ----------------------------------------------------------------------------------
# Power EP: the likelihood to a power alpha inside the tilted integral
# ----------------------------------------------------------------------------------


class Powered:
    """The tilted moments of p(y | f)^alpha against a cavity N(f | m, v), for power EP.

    Z = integral N(f; m, v) p(y | f)^alpha df, with ``a`` and ``c`` its first two
    log-derivatives in m, as :meth:`tilted` of every likelihood.  The Gaussian and the
    step have closed forms:

    - Gaussian: p^alpha = N(y; f, vy / alpha) (2 pi vy)^((1 - alpha) / 2) alpha^(-1/2);
    - step with label noise eps: p^alpha is again a step, from eps^alpha to
      (1 - eps)^alpha, smoothed by N(m, v);

    every other likelihood (probit, noisy probit, logistic, Poisson, Student-t) is
    integrated by Gauss-Hermite quadrature of alpha log p on the cavity
    (``n_points`` nodes).  Predictions, parameters and hyperparameters are the base
    likelihood's: the power belongs to the inference, not to the model.

    Parameters
    ----------
    base : likelihood object
    alpha : float in (0, 1)
    n_points : int, default=256
        Quadrature nodes where there is no closed form.
    """

    def __init__(self, base, alpha, n_points=256):
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"a powered likelihood needs 0 < alpha < 1, got {alpha!r}")
        self.base, self.alpha = base, float(alpha)
        self.name, self.is_classification = base.name, base.is_classification
        # the noisy probit is a Step subclass (a step smoothed by unit noise), but its
        # power is not a step: it is integrated like the others
        if type(base) not in (Gaussian, Step):
            density = base.log_density
            self._quadrature = Quadrature(lambda y, f: self.alpha * density(y, f), n_points,
                                          base.name)

    def tilted(self, y, m, v):
        """Return ``(log Z, a, c)`` of p^alpha for cavities N(m, v)."""
        base, alpha = self.base, self.alpha
        if isinstance(base, Gaussian):
            vy = base.noise_variance
            log_z, a, c = Gaussian(vy / alpha).tilted(y, m, v)
            return log_z + 0.5 * (1.0 - alpha) * np.log(2.0 * np.pi * vy) \
                - 0.5 * np.log(alpha), a, c
        if type(base) is Step:
            return self._step_tilted(y, m, v)
        return self._quadrature.tilted(y, m, v)

    def _step_levels(self):
        eps = self.base.label_noise
        low = 0.0 if eps == 0.0 else eps ** self.alpha
        return low, (1.0 - eps) ** self.alpha

    def _step_tilted(self, y, m, v):
        """The step's moments with the levels (eps^alpha, (1 - eps)^alpha)."""
        low, high = self._step_levels()
        log_low = -np.inf if low == 0.0 else np.log(low)
        return _smoothed_step(y, m, self.base._smoothing_variance(v), log_low,
                              np.log(high - low))

    def log_z_gradient(self, y, m, v):
        """d log Z / d log(theta) per row for the base's hyperparameters."""
        base, alpha = self.base, self.alpha
        if not base.hyperparameters():
            return {}
        if isinstance(base, Gaussian):
            # Z's variance is v + vy / alpha, and the constant carries vy^((1 - alpha)/2)
            _, a, c = self.tilted(y, m, v)
            vy = base.noise_variance
            return {"noise_variance": vy / alpha * 0.5 * (a * a - c) + 0.5 * (1.0 - alpha)}
        if type(base) is Step:
            if base.label_noise == 0.0:
                return {}
            eps, (low, high) = base.label_noise, self._step_levels()
            z = y * m / np.sqrt(base._smoothing_variance(v))
            log_z = self._step_tilted(y, m, v)[0]
            # d low / d log eps = alpha low, d high / d log eps = -alpha eps high / (1 - eps)
            d_low, d_high = alpha * low, -alpha * eps * high / (1.0 - eps)
            return {"label_noise": (d_low + (d_high - d_low) * ndtr(z)) * np.exp(-log_z)}
        f, weights, _, _, _ = self._quadrature._tilted_nodes(y, m, v)
        y_b = np.broadcast_to(np.asarray(y, dtype=np.float64), f.shape[:-1])[..., None]
        return {name: alpha * (weights * g).sum(axis=-1)
                for name, g in base.log_density_gradient(y_b, f).items()}

    # the model is the base likelihood's: its parameters and its predictions
    def params(self):
        return self.base.params()

    def hyperparameters(self):
        return self.base.hyperparameters()

    def log_predictive(self, y, mean, var):
        return self.base.log_predictive(y, mean, var)

    def with_hyperparameters(self, values):
        return powered(self.base.with_hyperparameters(values), self.alpha)


def powered(likelihood, alpha):
    """``likelihood`` for power EP with power ``alpha`` in (0, 1]: the likelihood
    itself at alpha = 1 (EP as published, to the last bit), else :class:`Powered`."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
    base = likelihood.base if isinstance(likelihood, Powered) else likelihood
    return base if alpha == 1.0 else Powered(base, alpha)


LIKELIHOODS = {"gaussian": Gaussian, "probit": Probit, "step": Step,
               "noisy_probit": NoisyProbit, "logistic": Logistic, "poisson": Poisson,
               "student_t": StudentT}


def make_likelihood(name, **params):
    """Build a likelihood by name with its parameters.

    Parameters
    ----------
    name : {"gaussian", "probit", "step", "noisy_probit", "logistic", "poisson", "student_t"}
    **params
        ``noise_variance`` for gaussian, ``label_noise`` for step and noisy_probit, ``dof`` and
        ``scale`` for student_t, optionally ``n_points`` for the quadrature ones.
    """
    if name not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {sorted(LIKELIHOODS)}, got {name!r}")
    if name == "gaussian":
        return Gaussian(params["noise_variance"])
    if name in ("step", "noisy_probit"):
        return LIKELIHOODS[name](params["label_noise"])
    if name == "student_t":
        return StudentT(params["dof"], params["scale"], int(params.get("n_points", 256)))
    if name == "poisson":
        return Poisson(int(params.get("n_points", 256)), float(params.get("offset", 0.0)))
    if name == "logistic":
        return Logistic(int(params.get("n_points", 256)))
    return Probit()
