"""Likelihoods for EP: tilted moments of p(y | f) against a Gaussian cavity N(f | m, v).

Every likelihood is an object (:class:`~saspa_dask.core.likelihoods.base.Likelihood`)
with, on vectors, ``tilted(y, m, v) = (log Z, a, c)`` with ``a = d log Z / d m`` and
``c = -d^2 log Z / d m^2`` (docs/design.md, section 2), the gradient of log Z in its
hyperparameters, its predictive density and ``powered(alpha)``, its power-EP form
(docs/design.md, "Power EP"; itself at alpha = 1).  Classification labels are -1 / +1.

- :mod:`~saspa_dask.core.likelihoods.closed_form`: Gaussian, probit, step, noisy probit
  (and the Gaussian's and the step's powers);
- :mod:`~saspa_dask.core.likelihoods.quadrature`: any log-density by Gauss-Hermite
  quadrature; logistic, Poisson, Student-t (and every other power);
- :mod:`~saspa_dask.core.likelihoods.tails`: tail-safe Mills ratios, the smoothed step.

:func:`make_likelihood` is the one factory: a likelihood from its name and parameters.
"""

from __future__ import annotations

from .base import Likelihood, Powered, Shifted
from .closed_form import Gaussian, NoisyProbit, PoweredGaussian, PoweredStep, Probit, Step
from .quadrature import Logistic, Poisson, PoweredQuadrature, Quadrature, StudentT

__all__ = ["Gaussian", "LIKELIHOODS", "Likelihood", "Logistic", "NoisyProbit", "Poisson",
           "Powered", "PoweredGaussian", "PoweredQuadrature", "PoweredStep", "Probit",
           "Quadrature", "Shifted", "Step", "StudentT", "make_likelihood", "powered"]

LIKELIHOODS = {cls.name: cls for cls in (Gaussian, Probit, Step, NoisyProbit)}
LIKELIHOODS.update(logistic=Logistic, poisson=Poisson, student_t=StudentT)


def make_likelihood(name, **params):
    """Build a likelihood by name with its parameters.

    Parameters
    ----------
    name : {"gaussian", "probit", "step", "noisy_probit", "logistic", "poisson", "student_t"}
    **params
        ``noise_variance`` for gaussian, ``label_noise`` for step and noisy_probit,
        ``dof`` and ``scale`` for student_t, ``offset`` for poisson, optionally
        ``n_points`` for the quadrature ones; parameters of other likelihoods are
        ignored.

    Examples
    --------
    >>> make_likelihood("step", label_noise=0.1).params()
    {'label_noise': 0.1}
    """
    if name not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {sorted(LIKELIHOODS)}, got {name!r}")
    return LIKELIHOODS[name].from_params(**params)


def powered(likelihood, alpha):
    """``likelihood`` for power EP with power ``alpha`` in (0, 1]: the likelihood
    itself at alpha = 1 (EP as published, to the last bit), else its powered form."""
    base = likelihood.base if isinstance(likelihood, Powered) else likelihood
    return base.powered(alpha)
