"""Learnt bases: the basis means and per-basis blur as one unconstrained vector.

The optimiser sees, per basis j (docs/design.md, section 2,
"Gradients"):

- the mean a_j divided by the starting lengthscales (so that a unit step is about one
  lengthscale, the same size as a unit step of a log lengthscale);
- with ``blur=True``, the blur covariance C_j in a form that keeps it positive
  definite: ``spherical`` log c_j (C_j = c_j I); ``diagonal`` log C_j,kk per input;
  ``full`` the Cholesky factor R_j (C_j = R_j R_j^T) with its diagonal as logs.

``delta`` bases have no blur to learn (they are SPGP's pseudo-inputs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..core.bases import Basis, blur_diagonals
from ..core.blur_families import blur_family

__all__ = ["LEARN_BASES", "LearntBases", "LearntFeatures"]

LEARN_BASES = ("means", "means+blur")

# box for log blur variances, relative to the starting squared lengthscales: from a
# blur far below the kernel's resolution (close to delta) to one far wider than it
_BLUR_DECADES_BELOW, _BLUR_DECADES_ABOVE = 6.0, 3.0


@dataclass(frozen=True)
class LearntBases:
    """Basis means and blur covariances that the evidence maximisation moves.

    Parameters
    ----------
    means : ndarray of shape (M, d)
    covs : ndarray of shape (M, d, d) or (M, d)
        The blur covariances of family ``family``: (M, d, d) matrices for ``full``,
        (M, d) diagonals otherwise (either form is taken and converted).
    family : {"delta", "spherical", "diagonal", "full"}
    blur : bool
        The blur covariances are learnt too (not ``delta``).
    scale : ndarray of shape (d,)
        The means' unit in the vector (the starting lengthscales).

    Examples
    --------
    >>> import numpy as np
    >>> b = LearntBases(np.zeros((2, 1)), np.ones((2, 1, 1)), "spherical", True,
    ...                 np.array([2.0]))
    >>> b.vector()
    array([0., 0., 0., 0.])
    >>> b.from_vector(np.array([1.0, 0.0, 0.5, np.log(4.0)])).covs[:, 0]
    array([1., 4.])
    """

    means: np.ndarray
    covs: np.ndarray
    family: str
    blur: bool
    scale: np.ndarray

    def __post_init__(self):
        family = blur_family(self.family)
        if self.blur:
            family.width(1)  # a family without learnable blurs (delta) says so
        # one form per family: matrices for full blurs, diagonals for the others (an
        # M d x d stack is what wide tables cannot afford)
        covs = family.stored(self.covs)
        if self.blur:
            # a blur family's covariances must be positive definite to be learnt in
            # log / Cholesky form: lift exact zeros (a constant input) a little
            floor = 1e-12 * self.scale**2
            diag = blur_diagonals(covs)
            if np.any(diag < floor):
                covs = covs.copy()
                if covs.ndim == 2:
                    covs = np.maximum(covs, floor)
                else:
                    idx = np.arange(self.scale.size)
                    covs[:, idx, idx] = np.maximum(diag, floor)
        object.__setattr__(self, "covs", covs)

    def basis(self, blur_scale=1.0):
        """The bases as a :class:`~saspa_dask.core.bases.Basis`."""
        return Basis.scaled(self.means, self.covs, blur_scale)

    @property
    def size(self):
        """Entries of :meth:`vector`."""
        return self.means.shape[0] * self.width

    # -- the vector (the blur's part is the family's) --------------------------------

    def vector(self):
        """The unconstrained vector: scaled means, then the blur parameters, per basis."""
        parts = [self.means / self.scale]
        if self.blur:
            parts.append(blur_family(self.family).vector(self.covs))
        return np.concatenate(parts, axis=1).ravel()

    @property
    def width(self):
        """Entries per basis in :meth:`vector`."""
        d = self.means.shape[1]
        return d + (blur_family(self.family).width(d) if self.blur else 0)

    def from_vector(self, v):
        """A copy at the vector ``v``."""
        M, d = self.means.shape
        v = np.asarray(v, dtype=np.float64).reshape(M, self.width)
        means = v[:, :d] * self.scale
        if not self.blur:
            return replace(self, means=means)
        return replace(self, means=means,
                       covs=blur_family(self.family).from_vector(v[:, d:], d))

    def gradient(self, grad):
        """The gradient with respect to :meth:`vector`, from the gradient dict's
        ``means`` and ``covs``: the gradients with respect to the means and the
        (symmetric-matrix) gradients with respect to the blur covariances
        (:class:`~saspa_dask.core.kernel_gradients.KernelGradient`)."""
        parts = [grad["means"] * self.scale]
        if self.blur:
            parts.append(blur_family(self.family).chain(self.covs, grad["covs"]))
        return np.concatenate(parts, axis=1).ravel()

    def bounds(self):
        """(low, high) per entry of :meth:`vector`: means free, log blur variances in
        a box around the starting lengthscales, Cholesky off-diagonals free."""
        d = self.means.shape[1]
        rows = [(None, None)] * d
        if self.blur:
            l2 = np.log(self.scale**2)
            ten = math.log(10.0)
            rows += blur_family(self.family).bounds(l2 - _BLUR_DECADES_BELOW * ten,
                                                    l2 + _BLUR_DECADES_ABOVE * ten)
        return rows * self.means.shape[0]

    def names(self):
        """Names of the entries of :meth:`vector`."""
        M, d = self.means.shape
        family = blur_family(self.family)
        names = []
        for j in range(M):
            names += [f"bases.means[{j},{k}]" for k in range(d)]
            if self.blur:
                names += family.names(j, d)
        return names


@dataclass(frozen=True)
class LearntFeatures:
    """Frequency inducing features that the evidence maximisation moves.

    Per feature j the vector holds the centre divided by the starting lengthscales
    (unless the centres are pinned), the frequency times them (both O(1) per unit
    step, as a log lengthscale) and the phase; with ``window=True`` the log window
    variances (d, shared by the features) follow at the end.

    Parameters
    ----------
    centres, frequencies : ndarray of shape (M, d)
    phases : ndarray of shape (M,)
    window_variance : ndarray of shape (d,)
    window : bool
        The window variances are learnt too (``learn_bases="means+blur"``).
    scale : ndarray of shape (d,)
    centres_learnt : bool, default=True
        False pins the centres where they are (FIFGP: every feature on one point).

    Examples
    --------
    >>> import numpy as np
    >>> f = LearntFeatures(np.zeros((2, 1)), np.ones((2, 1)), np.zeros(2), np.ones(1),
    ...                    True, np.array([2.0]), centres_learnt=False)
    >>> f.vector()
    array([2., 0., 2., 0., 0.])
    >>> f.from_vector(np.array([4.0, 0.5, 2.0, 0.0, np.log(3.0)])).frequencies[:, 0]
    array([2., 1.])
    """

    centres: np.ndarray
    frequencies: np.ndarray
    phases: np.ndarray
    window_variance: np.ndarray
    window: bool
    scale: np.ndarray
    centres_learnt: bool = True

    family = "fourier"

    @property
    def means(self):
        return self.centres

    @property
    def blur(self):
        return self.window

    def basis(self, blur_scale=1.0):
        """The features as a :class:`~saspa_dask.core.bases.Basis`."""
        M, d = self.centres.shape
        covs = np.repeat((blur_scale * self.window_variance)[None], M, axis=0)  # diagonals
        return Basis(self.centres, covs, self.frequencies, self.phases)

    @property
    def _width(self):
        """Entries per feature: (centre,) frequency, phase."""
        d = self.centres.shape[1]
        return (2 * d if self.centres_learnt else d) + 1

    @property
    def size(self):
        """Entries of :meth:`vector`."""
        M, d = self.centres.shape
        return M * self._width + (d if self.window else 0)

    def _columns(self, centres, frequencies, phases):
        learnt = [centres] if self.centres_learnt else []
        return np.column_stack([*learnt, frequencies, phases])

    def vector(self):
        """The unconstrained vector: per feature (scaled centre), scaled frequency,
        phase; then the log window variances if learnt."""
        per_feature = self._columns(self.centres / self.scale, self.frequencies * self.scale,
                                    self.phases)
        tail = [np.log(self.window_variance)] if self.window else []
        return np.concatenate([per_feature.ravel(), *tail])

    def from_vector(self, v):
        """A copy at the vector ``v``."""
        M, d = self.centres.shape
        v = np.asarray(v, dtype=np.float64)
        per_feature = v[:M * self._width].reshape(M, self._width)
        window = np.exp(v[M * self._width:]) if self.window else self.window_variance
        first = d if self.centres_learnt else 0
        centres = per_feature[:, :d] * self.scale if self.centres_learnt else self.centres
        return replace(self, centres=centres,
                       frequencies=per_feature[:, first:first + d] / self.scale,
                       phases=per_feature[:, first + d].copy(), window_variance=window)

    def gradient(self, grad):
        """The gradient with respect to :meth:`vector` from the gradient dict's
        ``centres``, ``frequencies``, ``phases`` and ``window`` (d / d c^2) entries."""
        per_feature = self._columns(grad["centres"] * self.scale,
                                    grad["frequencies"] / self.scale, grad["phases"])
        tail = [grad["window"] * self.window_variance] if self.window else []
        return np.concatenate([per_feature.ravel(), *tail])

    def bounds(self):
        """(low, high) per entry of :meth:`vector`: features free, log window
        variances in the box of :class:`LearntBases`' blur."""
        M = self.centres.shape[0]
        rows = [(None, None)] * (M * self._width)
        if self.window:
            l2 = np.log(self.scale**2)
            ten = math.log(10.0)
            rows += [(float(a - _BLUR_DECADES_BELOW * ten), float(a + _BLUR_DECADES_ABOVE * ten))
                     for a in l2]
        return rows

    def names(self):
        """Names of the entries of :meth:`vector`."""
        M, d = self.centres.shape
        names = []
        for j in range(M):
            if self.centres_learnt:
                names += [f"features.centres[{j},{k}]" for k in range(d)]
            names += [f"features.frequencies[{j},{k}]" for k in range(d)]
            names.append(f"features.phases[{j}]")
        if self.window:
            names += [f"features.log_window[{k}]" for k in range(d)]
        return names
