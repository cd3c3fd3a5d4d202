"""Blur families: what each kind of basis is, and everything that depends on which.

A basis point j is N(a_j, C_j).  The family says what C_j may be and owns what follows
from it: the map from a K-means cluster's covariance to the blur (:meth:`covariances`),
the form it is kept in (matrices or diagonals), and, for learnt blurs, the unconstrained
parameters that keep C_j positive definite (log width, log variances, or a Cholesky
factor with log diagonal), their gradient and box (:meth:`vector`, :meth:`from_vector`,
:meth:`chain`, :meth:`bounds`, :meth:`names`).

========================  ========================================  =================
family                    C_j                                       learnt as
========================  ========================================  =================
``delta``                 0 (FITC / SPGP pseudo-inputs)             nothing
``spherical``             c_j I, c_j = trace(S_j) / d (multiscale)  log c_j
``diagonal``              diag(S_j)                                 log C_j,kk
``full``                  S_j (SASPA-full)                          Cholesky, log diag
``fourier``               frequency features, a centre each         (their own)
``fourier-global``        frequency features, one centre            (their own)
========================  ========================================  =================

(S_j: the cluster's shrunk covariance, :func:`saspa_dask.core.bases.shrunk_covariances`;
the frequency families share one window, the mean of the clusters' diagonals.)  Code
elsewhere asks the family (``blurred``, ``dense``, ``frequency``) instead of comparing
its name.
"""

from __future__ import annotations

import numpy as np

from .bases import blur_diagonals, dense_blur

__all__ = ["BASIS_FAMILIES", "BLUR_FAMILIES", "BlurFamily", "FOURIER_FAMILIES",
           "blur_family"]


class BlurFamily:
    """A family of blur covariances (module docstring); :func:`blur_family` gives
    each by name."""

    name = None
    #: the bases have a blur (not points)
    blurred = True
    #: the blurs are kept as (M, d, d) matrices (else as (M, d) diagonals)
    dense = False
    #: frequency inducing features, not blurred points
    frequency = False
    #: each basis has its own centre (K-means or given); False: all on one point
    centres_learnt = True

    def __repr__(self):
        return f"blur_family({self.name!r})"

    def covariances(self, covs):
        """The family's blurs from cluster covariances (M, d, d) or diagonals (M, d)."""
        raise NotImplementedError

    def stored(self, covs):
        """``covs`` in the family's form: matrices when :attr:`dense`, else diagonals."""
        return dense_blur(covs) if self.dense else blur_diagonals(covs)

    # -- the learnt block: C_j as unconstrained parameters ------------------------------

    def width(self, d):
        """Parameters per basis."""
        raise ValueError(f"blur={self.name!r} has no blur covariances to learn; use "
                         "learn_bases='means'")

    def vector(self, covs):
        """(M, width) parameters of the stored blurs."""
        raise NotImplementedError

    def from_vector(self, p, d):
        """The stored blurs at parameters ``p`` (M, width)."""
        raise NotImplementedError

    def chain(self, covs, grad_covs):
        """(M, width) gradient with respect to the parameters, from the (symmetric)
        gradient with respect to the blur covariances at ``covs``."""
        raise NotImplementedError

    def bounds(self, low, high):
        """Boxes of one basis's parameters, given the boxes (low, high) of the log blur
        variances per input."""
        raise NotImplementedError

    def names(self, j, d):
        """Names of basis ``j``'s parameters."""
        raise NotImplementedError


class _Delta(BlurFamily):
    name, blurred = "delta", False

    def covariances(self, covs):
        return np.zeros_like(blur_diagonals(covs))


class _Spherical(BlurFamily):
    name = "spherical"

    def covariances(self, covs):
        diag = blur_diagonals(covs)
        return np.repeat(diag.mean(axis=1, keepdims=True), diag.shape[1], axis=1)

    def width(self, d):
        return 1

    def vector(self, covs):
        return np.log(covs[:, 0])[:, None]

    def from_vector(self, p, d):
        return np.repeat(np.exp(p[:, :1]), d, axis=1)

    def chain(self, covs, grad_covs):
        return (covs[:, 0] * blur_diagonals(grad_covs).sum(axis=1))[:, None]

    def bounds(self, low, high):
        return [(float(low.min()), float(high.max()))]

    def names(self, j, d):
        return [f"bases.log_width[{j}]"]


class _Diagonal(BlurFamily):
    name = "diagonal"

    def covariances(self, covs):
        return np.array(blur_diagonals(covs))

    def width(self, d):
        return d

    def vector(self, covs):
        return np.log(covs)

    def from_vector(self, p, d):
        return np.exp(p)

    def chain(self, covs, grad_covs):
        return covs * blur_diagonals(grad_covs)

    def bounds(self, low, high):
        return [(float(a), float(b)) for a, b in zip(low, high)]

    def names(self, j, d):
        return [f"bases.log_variance[{j},{k}]" for k in range(d)]


class _Full(BlurFamily):
    name, dense = "full", True

    def covariances(self, covs):
        covs = np.asarray(covs, dtype=np.float64)
        return covs if covs.ndim == 2 else 0.5 * (covs + np.swapaxes(covs, 1, 2))

    def width(self, d):
        return d * (d + 1) // 2

    def vector(self, covs):
        d = covs.shape[1]
        R = np.linalg.cholesky(covs)
        idx = np.arange(d)
        R[:, idx, idx] = np.log(R[:, idx, idx])
        return R[:, *np.tril_indices(d)]

    def from_vector(self, p, d):
        R = np.zeros((p.shape[0], d, d))
        R[:, *np.tril_indices(d)] = p
        idx = np.arange(d)
        R[:, idx, idx] = np.exp(R[:, idx, idx])
        return R @ np.swapaxes(R, 1, 2)

    def chain(self, covs, grad_covs):
        # C = R R^T: <G, dC> = 2 <G R, dR>; the log diagonal: times R_kk
        d = covs.shape[1]
        R = np.linalg.cholesky(covs)
        gR = 2.0 * grad_covs @ R
        idx = np.arange(d)
        gR[:, idx, idx] *= R[:, idx, idx]
        return gR[:, *np.tril_indices(d)]

    def bounds(self, low, high):
        # the log diagonal of R is half the log variance; off-diagonals are free
        return [(float(low[i] / 2), float(high[i] / 2)) if i == j else (None, None)
                for i, j in zip(*np.tril_indices(len(low)))]

    def names(self, j, d):
        return [f"bases.cholesky[{j},{a},{b}]" for a, b in zip(*np.tril_indices(d))]


class _Frequency(BlurFamily):
    """Frequency features: one window shared by every feature, the clusters' mean
    spread (their own parameters: :mod:`saspa_dask.fitting.basis_parameters`)."""

    frequency = True

    def __init__(self, name, centres_learnt):
        self.name, self.centres_learnt = name, centres_learnt

    def covariances(self, covs):
        diag = blur_diagonals(covs)
        return np.repeat(diag.mean(axis=0, keepdims=True), diag.shape[0], axis=0)


_FAMILIES = {f.name: f for f in (_Delta(), _Spherical(), _Diagonal(), _Full(),
                                 _Frequency("fourier", True),
                                 _Frequency("fourier-global", False))}
BLUR_FAMILIES = tuple(n for n, f in _FAMILIES.items() if not f.frequency)
# TFIFGP's features, each with its own centre ("fourier"), and FIFGP's, all centred on
# one point ("fourier-global")
FOURIER_FAMILIES = tuple(n for n, f in _FAMILIES.items() if f.frequency)
# what an estimator's ``blur`` accepts
BASIS_FAMILIES = BLUR_FAMILIES + FOURIER_FAMILIES


def blur_family(family):
    """The :class:`BlurFamily` named ``family`` (or ``family`` itself)."""
    if isinstance(family, BlurFamily):
        return family
    try:
        return _FAMILIES[family]
    except (KeyError, TypeError):
        raise ValueError(f"blur must be one of {BASIS_FAMILIES}, got {family!r}") from None
