"""The whitened Gaussian posterior N(mu_v, P^{-1}) over v = L^{-1} u.

P = I + sum_i tau_i phi_i phi_i^T and h = sum_i nu_i phi_i are sums over row blocks
(what makes a sweep a map-reduce); the posterior is kept as the Cholesky factor of P.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.linalg import LinAlgError, blas, cho_solve, cholesky, lapack
from .approximation import FITC

__all__ = ["Posterior", "predict_latent"]


@dataclass
class Posterior:
    """Whitened Gaussian posterior N(mu_v, P^{-1}) over v = L^{-1} u.

    Attributes
    ----------
    chol : ndarray of shape (M, M)
        Lower Cholesky factor R of P.
    h : ndarray of shape (M,)
    mean : ndarray of shape (M,)
        mu_v = P^{-1} h.
    scale : float
        How many rows each row of the sites behind it stands for (1 but for
        :meth:`scaled` posteriors).
    is_prior : bool
        The prior N(0, I) (:meth:`prior`): its marginals need no product.
    """

    chol: np.ndarray
    h: np.ndarray
    mean: np.ndarray
    scale: float = 1.0
    is_prior: bool = False

    @classmethod
    def prior(cls, n_bases):
        eye = np.eye(n_bases)
        return cls(eye, np.zeros(n_bases), np.zeros(n_bases), is_prior=True)

    @classmethod
    def from_statistics(cls, A, b):
        """Posterior from the site sums A = Phi^T T Phi and b = Phi^T nu.

        Raises ``LinAlgError`` when I + A is not positive definite.
        """
        P = np.eye(A.shape[0]) + 0.5 * (A + A.T)
        R = cholesky(P, lower=True, check_finite=False)
        return cls(R, b.copy(), cho_solve((R, True), b, check_finite=False))

    def scaled(self, factor):
        """The posterior whose site sums are ``factor`` times this one's: sites on n
        rows standing for ``factor * n`` rows (a start for EP on all of them)."""
        A = self.chol @ self.chol.T - np.eye(self.chol.shape[0])
        scaled = Posterior.from_statistics(factor * A, factor * self.h)
        scaled.scale = self.scale * factor
        return scaled

    @cached_property
    def inverse_chol_t(self):
        """R^{-T} (upper triangular), C-contiguous for the GEMM of :meth:`marginals`.

        Since P = I + A >= I, every singular value of R^{-1} is at most 1: forming it
        is well conditioned (unlike an inverse of a kernel matrix), and it turns the
        per-row triangular solves into one GEMM, which OpenBLAS runs several times
        faster than TRSM (``benchmarks/RESULTS.md``, "Design measurements").
        """
        inverse, info = lapack.dtrtri(self.chol, lower=1)
        if info != 0:
            raise LinAlgError(f"posterior Cholesky factor is singular (dtrtri info {info})")
        return np.ascontiguousarray(np.tril(inverse).T)

    def marginals(self, phi, workspace=None):
        """Means and variances of phi_i^T v for the rows of phi.

        var_i = |R^{-1} phi_i|^2, computed as the rows of phi R^{-T} (one GEMM).  With
        a :class:`Workspace` the product goes into its buffer (no n x M temporary), and
        with a ``triangular`` one it is a triangular product (:func:`triangular_rows`).
        """
        if self.is_prior:  # R = I: the first sweep of a cold run costs no GEMM
            return np.zeros(phi.shape[0]), np.einsum("ij,ij->i", phi, phi)
        if workspace is not None and workspace.triangular:
            W = triangular_rows(phi, self.inverse_chol_t, workspace.rows(phi.shape[0]))
        else:
            out = None if workspace is None else workspace.rows(phi.shape[0])
            W = np.matmul(phi, self.inverse_chol_t, out=out)
        return phi @ self.mean, np.einsum("ij,ij->i", W, W)

    def covariance(self):
        """Sigma_v = P^{-1} (an M x M whitened covariance, not a kernel inverse)."""
        return cho_solve((self.chol, True), np.eye(self.chol.shape[0]), check_finite=False)

    def log_det(self):
        return 2.0 * np.log(np.diag(self.chol)).sum()


def triangular_rows(phi, upper, out):
    """``phi @ upper`` for an upper triangular ``upper``, written into ``out``.

    A TRMM: half a GEMM's flops, through SciPy's BLAS, which the package keeps at one
    thread (:mod:`saspa_dask.core.threads`), so it pays where NumPy's products run on
    one thread too (a Dask chunk task); on several threads NumPy's GEMM is the faster.
    The C-ordered rows are the transpose in Fortran order, so the product runs in
    place as (phi U)^T = U^T phi^T on a copy of phi.
    """
    np.copyto(out, phi)
    return blas.dtrmm(1.0, upper.T, out.T, side=0, lower=1, overwrite_b=1).T


def predict_latent(phi, posterior, signal_variance, approximation=FITC):
    """Latent predictive mean and variance at rows with whitened features phi.

    variance = s2 - |phi|^2 + phi^T Sigma_v phi, the residual clipped at 0 against
    round-off; for the subset of regressors (``approximation`` SOR) the residual is
    left out, so the variance is phi^T Sigma_v phi
    (:meth:`~saspa_dask.ep.approximation.Approximation.predictive_variance`).
    """
    mean, var_v = posterior.marginals(phi)
    return mean, approximation.predictive_variance(phi, var_v, signal_variance)

