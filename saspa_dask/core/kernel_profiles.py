"""Stationary kernels as functions of the scaled squared distance: SE and Matérn.

Every kernel here is ``s2 k(u)`` with u = |(x - x') / l|^2 (ARD lengthscales l):

    se        k(u) = exp(-u / 2)
    matern12  k(u) = exp(-r)                    r = sqrt(u)
    matern32  k(u) = (1 + r) exp(-r)            r = sqrt(3 u)
    matern52  k(u) = (1 + r + r^2 / 3) exp(-r)  r = sqrt(5 u)

(the lengthscale convention of scikit-learn's ``Matern``, GPyTorch's and GPflow's).

Two forms serve the blurred bases (:mod:`saspa_dask.core.kernels`):

* **Exact, for delta blur.**  Kt and Kh are k itself at the bases' points, and the
  evidence gradient needs only ``weight(u) = -2 dk/du`` (for SE it is k): the
  derivatives of the SE formulas at zero blur hold for any k(u) with k's value
  replaced by that weight (:mod:`saspa_dask.core.kernel_gradients`).
* **A scale mixture of SE kernels, for the other blurs.**  With t ~ Gamma(nu, 1),

      Matérn_nu(r) = E_t[ exp(-r^2 / (4 t)) ],

  an SE kernel of lengthscale l sqrt(2 t / (2 nu)) averaged over t
  (from int_0^inf t^(nu-1) exp(-t - r^2/(4t)) dt = 2 (r/2)^nu K_nu(r)).  A Gaussian
  blur of an SE kernel has a closed form, so the blurred Matérn is the same
  average of closed forms.  The average is a trapezoid rule in log t (exponentially
  convergent for such integrals) with the nodes of :data:`_MIXTURE_RULES`, its
  weights rescaled to sum to one so the kernel's variance is exactly s2.  The
  mixture is a valid kernel in its own right (positive weights on SE kernels);
  :data:`MIXTURE_ERROR` is its largest distance from the Matérn kernel, in units of
  s2 (the tests check it against the closed forms above).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.special import gammaln

from ..parameters import KERNEL_CHOICES

__all__ = ["KERNELS", "KernelProfile", "MIXTURE_ERROR", "SE", "kernel_named"]

# kernel name -> Matérn's nu (None: squared exponential), in the order of the CLI's
# choices
_NU = dict(zip(KERNEL_CHOICES, (None, 0.5, 1.5, 2.5)))
KERNELS = KERNEL_CHOICES

# Per nu: (nodes, log-step h, first log-node u0) of the trapezoid rule in log t, chosen
# by a grid search over h and u0 for the smallest largest |mixture - Matérn| over
# distances 0-30 lengthscales with the weights rescaled (their largest errors are at
# distances 3.4, 0.16 and 2.1); the nodes so that it is about 1e-3 of s2
# or less: matern12's kink at r = 0, which no finite mixture
# of smooth kernels has, needs the most.  The cost of a blurred Kt grows with the nodes.
_MIXTURE_RULES = {0.5: (12, 1.3, -13.625), 1.5: (8, 0.85, -4.375), 2.5: (6, 0.775, -2.0)}
# the largest |mixture - Matérn| of each rule (units of s2), as the search measured it
MIXTURE_ERROR = {0.5: 1.2e-3, 1.5: 4.8e-4, 2.5: 6.2e-4}


@dataclass(frozen=True)
class KernelProfile:
    """A stationary kernel's shape ``k(u)`` (module docstring); ``name`` one of
    :data:`KERNELS`."""

    name: str = "se"

    def __post_init__(self):
        if self.name not in _NU:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.name!r}")

    @property
    def nu(self):
        return _NU[self.name]

    @property
    def is_se(self):
        return self.nu is None

    def value(self, u):
        """k(u) (k(0) = 1) for scaled squared distances ``u >= 0``."""
        u = np.maximum(np.asarray(u, dtype=np.float64), 0.0)
        if self.is_se:
            return np.exp(-0.5 * u)
        r = np.sqrt(2.0 * self.nu * u)
        if self.nu == 0.5:
            poly = 1.0
        elif self.nu == 1.5:
            poly = 1.0 + r
        else:
            poly = 1.0 + r + r * r / 3.0
        return poly * np.exp(-r)

    def weight(self, u):
        """-2 dk/du: what the SE gradient formulas take in place of k (for SE, k).

        Matérn 1/2 has no derivative at u = 0 (its kink); the weight there is 0, the
        subgradient whose contributions vanish (they multiply x - x' = 0)."""
        u = np.maximum(np.asarray(u, dtype=np.float64), 0.0)
        if self.is_se:
            return np.exp(-0.5 * u)
        r = np.sqrt(2.0 * self.nu * u)
        if self.nu == 0.5:
            with np.errstate(divide="ignore"):
                return np.where(r > 0.0, np.exp(-r) / np.where(r > 0.0, r, 1.0), 0.0)
        if self.nu == 1.5:
            return 3.0 * np.exp(-r)
        return (5.0 / 3.0) * (1.0 + r) * np.exp(-r)

    @cached_property
    def mixture(self):
        """(scales, weights): k is approximated by sum_q w_q SE(lengthscale l c_q);
        SE itself is ([1], [1])."""
        if self.is_se:
            return np.ones(1), np.ones(1)
        nodes, h, u0 = _MIXTURE_RULES[self.nu]
        log_t = u0 + h * np.arange(nodes)
        t = np.exp(log_t)
        # Gamma(nu, 1)'s density times dt = t dlog t, in logs (no overflow)
        weights = np.exp(self.nu * log_t - t - gammaln(self.nu))
        # exp(-r^2 / (4t)) with r^2 = 2 nu u is SE's exp(-u / (2 c^2)), c^2 = t / nu
        return np.sqrt(t / self.nu), weights / weights.sum()

    def n_terms(self, blurred):
        """SE terms the kernel costs: 1 for SE and for the exact (delta-blur) forms, the
        mixture's length for a blurred Matérn."""
        return len(self.mixture[0]) if blurred else 1

    def mixture_value(self, u):
        """The SE mixture's k(u) (for SE, exactly k)."""
        scales, weights = self.mixture
        u = np.maximum(np.asarray(u, dtype=np.float64), 0.0)[..., None]
        return (weights * np.exp(-0.5 * u / scales ** 2)).sum(axis=-1)


SE = KernelProfile("se")


def kernel_named(kernel):
    """A :class:`KernelProfile` from its name (or itself; None is SE)."""
    if kernel is None:
        return SE
    if isinstance(kernel, KernelProfile):
        return kernel
    return KernelProfile(str(kernel))
