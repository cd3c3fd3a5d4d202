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
  average of closed forms.  The average is over a few scales t_q, log-spaced on the
  grid of :data:`_MIXTURE_GRIDS`, with non-negative weights summing to one (so the
  kernel's variance is exactly s2, and the mixture is a valid kernel in its own
  right) chosen by a linear programme to minimise the largest relative error

      |mixture(r) - Matérn(r)| / max(Matérn(r), MIXTURE_FLOOR)

  over distances up to 40 lengthscales; scales whose weight is zero are dropped.
  That relative error is at most :data:`MIXTURE_ERROR` (checked when the weights are
  made, and against the closed forms in the tests).  A blur is an average of the
  kernel against a Gaussian, so the bound carries over to every blurred Kt and Kh:
  |K_mixture - K_Matérn| <= MIXTURE_ERROR (K_Matérn + MIXTURE_FLOOR s2), a relative
  error in the tails as well, down to 1e-4 of s2 (below it the absolute error is
  under MIXTURE_ERROR 1e-4 s2, less than the jitter).  (A trapezoid rule on the
  Gamma density, the earlier form, was within 1.2e-3 of s2 everywhere but 17-97%
  off in relative terms where Matérn falls below 1e-3 of s2: its largest scale was
  too short for the exponential tail.)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog

from ..parameters import KERNEL_CHOICES

__all__ = ["KERNELS", "KernelProfile", "MIXTURE_ERROR", "MIXTURE_FLOOR", "SE", "kernel_named"]

# kernel name -> Matérn's nu (None: squared exponential), in the order of the CLI's
# choices
_NU = dict(zip(KERNEL_CHOICES, (None, 0.5, 1.5, 2.5)))
_NAME_OF_NU = {nu: name for name, nu in _NU.items() if nu is not None}
KERNELS = KERNEL_CHOICES

# Per nu: (candidate scales, first and last log t) of the log-spaced grid the weights
# are chosen on, found by a search over the ends (steps of 1/8) for the smallest
# relative error; the candidates so that it is below 0.5% (the linear programme keeps
# 11, 7 and 8 of them: the terms a blurred Kt costs).  matern12's kink at r = 0, which
# no finite mixture of smooth kernels has, needs the most.
_MIXTURE_GRIDS = {0.5: (16, -8.625, 1.75), 1.5: (8, -2.0, 2.25), 2.5: (8, -1.125, 2.375)}
# below this kernel value (units of s2) the mixture's error is bounded absolutely
MIXTURE_FLOOR = 1e-4
# the largest |mixture - Matérn| / max(Matérn, MIXTURE_FLOOR) of each mixture
MIXTURE_ERROR = {0.5: 4.5e-3, 1.5: 3.0e-3, 2.5: 5.0e-4}
# distances (in lengthscales) the weights are fitted on: dense near the kink at 0, and
# out to where every term and the kernel are far below the floor
_FIT_DISTANCES = np.unique(np.concatenate([np.linspace(0.0, 0.05, 501),
                                           np.linspace(0.0, 1.0, 1001),
                                           np.linspace(1.0, 40.0, 3901)]))


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

    @property
    def mixture(self):
        """(scales, weights): k is approximated by sum_q w_q SE(lengthscale l c_q);
        SE itself is ([1], [1])."""
        if self.is_se:
            return np.ones(1), np.ones(1)
        return _matern_mixture(self.nu)

    def n_terms(self, blurred):
        """SE terms the kernel costs: 1 for SE and for the exact (delta-blur) forms, the
        mixture's length for a blurred Matérn."""
        return len(self.mixture[0]) if blurred else 1

    def mixture_value(self, u):
        """The SE mixture's k(u) (for SE, exactly k)."""
        scales, weights = self.mixture
        u = np.maximum(np.asarray(u, dtype=np.float64), 0.0)[..., None]
        return (weights * np.exp(-0.5 * u / scales ** 2)).sum(axis=-1)


@functools.cache
def _matern_mixture(nu):
    """The scales and weights of Matérn nu's SE mixture (module docstring): the
    minimax relative error, a linear programme in (weights, error)."""
    n, first, last = _MIXTURE_GRIDS[nu]
    t = np.exp(np.linspace(first, last, n))
    scales = np.sqrt(t / nu)  # exp(-r^2 / (4t)), r^2 = 2 nu u, is SE's exp(-u / (2 c^2))
    u = _FIT_DISTANCES ** 2
    truth = KernelProfile(_NAME_OF_NU[nu]).value(u)
    scale = np.maximum(truth, MIXTURE_FLOOR)
    terms = np.exp(-0.5 * u[:, None] / scales ** 2) / scale[:, None]
    target = truth / scale
    # variables (w_1..w_n, e): minimise e with |terms w - target| <= e, sum w = 1, w >= 0
    column = -np.ones((len(u), 1))
    result = linprog(np.r_[np.zeros(n), 1.0],
                     A_ub=np.block([[terms, column], [-terms, column]]),
                     b_ub=np.r_[target, -target],
                     A_eq=np.r_[np.ones(n), 0.0][None, :], b_eq=[1.0],
                     bounds=[(0.0, None)] * (n + 1), method="highs")
    weights, error = result.x[:n], result.x[n]
    if not result.success or error > MIXTURE_ERROR[nu]:
        raise RuntimeError(f"the Matérn {nu} mixture's weights were not found within "
                           f"its bound ({result.message}; error {error:.3g})")
    kept = weights > 1e-12  # a vertex of the programme: most candidates get none
    return scales[kept], weights[kept] / weights[kept].sum()


SE = KernelProfile("se")


def kernel_named(kernel):
    """A :class:`KernelProfile` from its name (or itself; None is SE)."""
    if kernel is None:
        return SE
    if isinstance(kernel, KernelProfile):
        return kernel
    return KernelProfile(str(kernel))
