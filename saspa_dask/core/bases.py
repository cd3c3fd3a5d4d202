"""Blurred basis points: ``Basis``, and the shrinkage rule for cluster covariances.

K-means itself (which finds the clusters) is :mod:`saspa_dask.engines.kmeans`.

Shrinkage rule (documented contract)
------------------------------------
For cluster j with n_j points and maximum-likelihood covariance S_j, the blur
covariance is::

    C_j = (n_j S_j + n0 D) / (n_j + n0),   n0 = d + 2,

where D is the diagonal of the pooled within-cluster covariance, each entry floored at
1e-6 times that input's total variance (and at 1e-12 for a constant input).  D is
positive definite, so every C_j is, including for singleton clusters (C_j = n0 D /
(1 + n0)); for clusters much larger than d, C_j is close to S_j.  This is the posterior
mean of a conjugate (inverse-Wishart-like) prior centred on the pooled spread.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Basis", "blur_diagonals", "dense_blur", "saved_blur", "shrunk_covariances"]

_VARIANCE_FLOOR = 1e-6
_ABSOLUTE_FLOOR = 1e-12
# diagonal blurs are saved (and fingerprinted) as (M, d, d) matrices, as every model
# store before them was, up to this many floats (128 MiB); as (M, d) diagonals beyond
SAVED_MATRIX_FLOATS = 2**24


def is_diagonal(covs):
    """Whether a stack of matrices (..., d, d) has no nonzero entry off the diagonals
    (counted without a temporary of its size: wide tables have M d^2 entries).  A
    stack of diagonals (M, d), the compact form of diagonal blurs, is diagonal."""
    if np.ndim(covs) == 2:
        return True
    return (np.count_nonzero(covs)
            == np.count_nonzero(np.diagonal(covs, axis1=-2, axis2=-1)))


def blur_diagonals(blur):
    """The (M, d) diagonals of blur covariances given as (M, d) diagonals or (M, d, d)
    matrices."""
    return blur if np.ndim(blur) == 2 else np.diagonal(blur, axis1=1, axis2=2)


def dense_blur(blur):
    """Blur covariances as (M, d, d) matrices, from (M, d) diagonals or matrices (the
    form users and the full blur family read; M d^2 floats, so never on a path a wide
    table takes)."""
    blur = np.asarray(blur, dtype=np.float64)
    if blur.ndim == 3:
        return blur
    n_bases, d = blur.shape
    out = np.zeros((n_bases, d, d))
    idx = np.arange(d)
    out[:, idx, idx] = blur
    return out


def _semi_definite(covs, tol):
    """Whether every matrix's smallest eigenvalue is at least ``-tol``: a Cholesky
    factor of C + tol I exists exactly when it is above, and costs a sixth of the
    eigenvalues (which decide only when the factorisation fails)."""
    shifted = covs + tol * np.eye(covs.shape[-1])
    try:
        np.linalg.cholesky(shifted)
        return True
    except np.linalg.LinAlgError:
        return np.linalg.eigvalsh(covs).min() >= -tol


def saved_blur(blur):
    """The form a model store keeps (and a fingerprint hashes) of blur covariances:
    matrices while at most :data:`SAVED_MATRIX_FLOATS` floats, so that stores and
    fingerprints of models saved before diagonals were kept compact stay the same;
    the (M, d) diagonals of diagonal blurs beyond (a wide table's 64 x 676 x 676
    stack was 234 MB)."""
    blur = np.asarray(blur, dtype=np.float64)
    n_bases, d = blur.shape[:2]
    return dense_blur(blur) if n_bases * d * d <= SAVED_MATRIX_FLOATS else blur


class Basis:
    """M blurred basis points, each a Gaussian N(means[j], covs[j]).

    With ``frequencies`` (and ``phases``) the bases are frequency inducing features
    instead (:mod:`saspa_dask.core.fourier`): feature j integrates f against the window
    N(means[j], covs[j]) times cos(phases[j] + frequencies[j]^T (x - means[j])), and
    every window must be the same diagonal covariance.

    Parameters
    ----------
    means : array-like of shape (M, d)
    covs : array-like of shape (M, d, d) or (M, d), optional
        Symmetric positive semi-definite covariances, or the diagonals of diagonal
        ones.  ``None`` means zeros (delta bases).  The estimator's ``blur`` maps them
        to the blur family in use.
    frequencies : array-like of shape (M, d), optional
    phases : array-like of shape (M,), optional
        Default zeros when ``frequencies`` is given.

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import Basis
    >>> b = Basis(np.zeros((2, 3)), np.stack([np.eye(3), 2 * np.eye(3)]))
    >>> b.means.shape, b.covs.shape
    ((2, 3), (2, 3, 3))
    """

    def __init__(self, means, covs=None, frequencies=None, phases=None):
        means = np.array(means, dtype=np.float64, ndmin=2)
        if means.ndim != 2 or means.shape[0] == 0 or means.shape[1] == 0:
            raise ValueError(f"Basis means must have shape (M, d), got {means.shape}")
        if not np.all(np.isfinite(means)):
            raise ValueError("Basis means contain NaN or inf")
        n_bases, d = means.shape
        blur = np.zeros((n_bases, d)) if covs is None else np.array(covs, dtype=np.float64)
        if blur.shape not in ((n_bases, d, d), (n_bases, d)):
            raise ValueError(
                f"Basis covs must have shape {(n_bases, d, d)} (or {(n_bases, d)}: "
                f"diagonals) to match means, got {blur.shape}")
        if not np.all(np.isfinite(blur)):
            raise ValueError("Basis covs contain NaN or inf")
        if is_diagonal(blur):
            # delta, spherical and diagonal blurs: kept as (M, d) diagonals (an M d x d
            # stack is what made wide tables unaffordable), symmetric, and positive
            # semi-definite when the diagonal is
            blur = np.ascontiguousarray(blur_diagonals(blur))
            scale = np.abs(blur).max() if blur.size else 0.0
            if scale > 0 and blur.min() < -1e-10 * scale:
                raise ValueError("Basis covs must be positive semi-definite")
        else:
            if not np.allclose(blur, np.swapaxes(blur, 1, 2), rtol=1e-10, atol=1e-12):
                raise ValueError("Basis covs must be symmetric")
            blur = 0.5 * (blur + np.swapaxes(blur, 1, 2))
            scale = np.abs(blur).max() if blur.size else 0.0
            if scale > 0 and not _semi_definite(blur, 1e-10 * scale):
                raise ValueError("Basis covs must be positive semi-definite")
        self.means = means
        self.blur = blur
        self.frequencies, self.phases = _fourier_parts(frequencies, phases, blur)

    @property
    def covs(self):
        """The blur covariances as (M, d, d) matrices (formed on each access from the
        diagonals when every blur is diagonal: read :attr:`blur` on wide tables)."""
        return dense_blur(self.blur)

    @classmethod
    def scaled(cls, means, covs, blur_scale=1.0, frequencies=None, phases=None):
        """Bases whose covariances are ``blur_scale`` times covariances a Basis has
        already checked (a learnt point's means, K-means' blurs), in either form of
        :attr:`blur`: the means are checked, the covariances (positive semi-definite
        times a positive number) neither copied nor checked again.  On a wide table
        the copy and the checks were M d^2 passes in every optimiser evaluation."""
        means = np.asarray(means, dtype=np.float64)
        if means.shape != covs.shape[:2] or not np.all(np.isfinite(means)):
            raise ValueError(f"Basis means must be finite and of shape {covs.shape[:2]}")
        if not blur_scale > 0:
            raise ValueError(f"blur_scale must be > 0, got {blur_scale!r}")
        basis = cls.__new__(cls)
        basis.means = means
        basis.blur = covs if blur_scale == 1.0 else blur_scale * covs
        basis.frequencies, basis.phases = _fourier_parts(frequencies, phases, basis.blur)
        return basis

    @property
    def n_bases(self):
        return self.means.shape[0]

    @property
    def is_fourier(self):
        """The bases are frequency inducing features."""
        return self.frequencies is not None

    @property
    def window_variance(self):
        """The features' shared window variances c^2 (d,), or None."""
        return None if self.frequencies is None else blur_diagonals(self.blur)[0].copy()

    def __repr__(self):
        return f"Basis(n_bases={self.means.shape[0]}, n_features={self.means.shape[1]})"


def _fourier_parts(frequencies, phases, covs):
    """Validated (frequencies, phases), or (None, None) for blurred bases."""
    if frequencies is None:
        if phases is not None:
            raise ValueError("Basis phases need frequencies")
        return None, None
    n_bases, d = covs.shape[:2]
    frequencies = np.array(frequencies, dtype=np.float64)
    phases = np.zeros(n_bases) if phases is None else np.array(phases, dtype=np.float64)
    if frequencies.shape != (n_bases, d) or phases.shape != (n_bases,):
        raise ValueError(f"Basis frequencies must have shape {(n_bases, d)} and phases "
                         f"{(n_bases,)}, got {frequencies.shape} and {phases.shape}")
    if not (np.all(np.isfinite(frequencies)) and np.all(np.isfinite(phases))):
        raise ValueError("Basis frequencies or phases contain NaN or inf")
    if not is_diagonal(covs):
        raise ValueError("frequency features need one shared diagonal window covariance "
                         "with positive variances (the same covs[j] for every j)")
    diagonals = blur_diagonals(covs)
    if np.any(diagonals != diagonals[0]) or np.any(diagonals[0] <= 0):
        raise ValueError("frequency features need one shared diagonal window covariance "
                         "with positive variances (the same covs[j] for every j)")
    return frequencies, phases


def shrunk_covariances(counts, scatter, total_variance):
    """Blur covariances by the module's shrinkage rule.

    Parameters
    ----------
    counts : ndarray of shape (M,)
        Points per cluster (all > 0).
    scatter : ndarray of shape (M, d, d) or (M, d)
        Per-cluster centred scatter, sum over the cluster of (x - a_j)(x - a_j)^T, or
        only its diagonal (the result is then diagonal: O(M d) work, not O(M d^2)).
    total_variance : ndarray of shape (d,)
        Variance of each input over all rows.

    Returns
    -------
    ndarray of shape (M, d, d), or (M, d) diagonals from diagonal scatter
    """
    if scatter.ndim == 2:
        return _shrunk_diagonals(counts, scatter, total_variance)
    n = counts[:, None, None]
    scatter = 0.5 * (scatter + np.swapaxes(scatter, 1, 2))
    pooled = np.diagonal(scatter, axis1=1, axis2=2).sum(axis=0) / counts.sum()
    floor = np.where(total_variance > 0, _VARIANCE_FLOOR * total_variance, _ABSOLUTE_FLOOR)
    D = np.diag(np.maximum(pooled, floor))
    n0 = scatter.shape[1] + 2.0
    return (scatter + n0 * D[None]) / (n + n0)


def _shrunk_diagonals(counts, scatter, total_variance):
    """:func:`shrunk_covariances`' rule on the diagonals alone (M, d)."""
    pooled = scatter.sum(axis=0) / counts.sum()
    floor = np.where(total_variance > 0, _VARIANCE_FLOOR * total_variance, _ABSOLUTE_FLOOR)
    n0 = scatter.shape[1] + 2.0
    return (scatter + n0 * np.maximum(pooled, floor)[None]) / (counts[:, None] + n0)
