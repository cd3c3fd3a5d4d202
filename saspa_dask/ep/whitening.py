"""Whitening: the basis covariance's Cholesky factor and the whitened row blocks.

With L L^T = Kh (+ jitter) and v = L^{-1} u ~ N(0, I), every training point i sees the
projection phi_i^T v, phi_i = L^{-1} k_i, plus an independent residual of variance
lam_i = s2 - |phi_i|^2 (docs/design.md, section 2).  A :class:`Block` holds (phi, lam, y) for
one row block; everything EP does works on one block at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, blas, cholesky

from ..core.kernels import blurred_cross_covariance
from .approximation import FITC, Approximation

__all__ = ["Block", "make_block", "relabel_block", "whiten"]

# Residual variances more negative than this (relative to s2) are not round-off.
_NEGATIVE_RESIDUAL_TOLERANCE = 1e-6
# The jitter is raised tenfold up to this (relative to s2) before giving up.
_MAX_JITTER = 1e-2


def whiten(Kh, signal_variance, jitter):
    """Lower Cholesky factor of ``Kh + jitter_used * I``.

    Parameters
    ----------
    Kh : ndarray of shape (M, M)
    signal_variance : float
    jitter : float
        Starting jitter relative to ``signal_variance``.  It is raised tenfold until
        the factorisation succeeds (up to 1e-2) and the value used is returned.

    Returns
    -------
    L : ndarray of shape (M, M)
    jitter_used : float
        Absolute jitter added to the diagonal.
    """
    relative = float(jitter)
    n = Kh.shape[0]
    while True:
        try:
            absolute = relative * signal_variance
            L = cholesky(Kh + absolute * np.eye(n), lower=True)
            return L, absolute
        except LinAlgError:
            if relative >= _MAX_JITTER:
                raise LinAlgError(
                    f"basis covariance is not positive definite even with jitter "
                    f"{relative:g} x signal_variance; bases are degenerate"
                ) from None
            relative = max(relative * 10.0, 1e-12)


@dataclass
class Block:
    """One row block in whitened form.

    Attributes
    ----------
    phi : ndarray of shape (n, M)
        Rows phi_i = L^{-1} k_i.
    lam : ndarray of shape (n,)
        Residual (FITC) variances s2 - |phi_i|^2, clipped at 0.
    y : ndarray of shape (n,)
        Targets (regression) or labels in {-1, +1}.
    approximation : Approximation
        Where the rows' residual variance is kept (:mod:`saspa_dask.ep.approximation`):
        for DTC and SoR the likelihood sees phi_i^T v only, and ``lam`` is zero and
        does not vary with the hyperparameters.
    kt : ndarray of shape (n, M) or None
        The unwhitened cross-covariances Kt = phi L^T, kept only where asked
        (learning's in-memory blocks): the gradient then reads them instead of
        remaking them with a product.
    """

    phi: np.ndarray
    lam: np.ndarray
    y: np.ndarray
    approximation: Approximation = FITC
    kt: np.ndarray | None = None

    def __sizeof__(self):
        # Dask sizes task results with sys.getsizeof: without this a block would count
        # as ~56 bytes, so the scheduler would move it freely and workers would
        # misjudge their memory.
        kept = 0 if self.kt is None else self.kt.nbytes
        return (object.__sizeof__(self) + self.phi.nbytes + self.lam.nbytes + self.y.nbytes
                + kept)


def relabel_block(block, label):
    """The block's rows as the binary problem "y == label" (+1) against the rest (-1).

    phi and lam are shared, not copied: one-vs-rest classes reuse one kernel block.
    """
    return Block(block.phi, block.lam, np.where(block.y == label, 1.0, -1.0),
                 block.approximation, block.kt)


def make_block(X, y, means, covs, lengthscale, signal_variance, L, approximation=FITC,
               frequencies=None, phases=None, kernel=None, keep_kt=False):
    """Whitened block for rows X: Kt (n x M), then phi = (L^{-1} Kt^T)^T and lam.

    The residual variances are checked, then kept as ``approximation`` says (DTC and
    SoR: 0, the likelihood sees the projection phi^T v only).  ``frequencies`` and ``phases``
    make the bases frequency inducing features (:mod:`saspa_dask.core.fourier`);
    ``kernel`` is the kernel's shape (:mod:`saspa_dask.core.kernel_profiles`, None: SE);
    ``keep_kt`` keeps a copy of Kt in the block (twice its memory).

    Raises
    ------
    FloatingPointError
        When a residual variance is negative beyond round-off: the bases and the
        kernel are inconsistent (this cannot happen for valid blur covariances).
    """
    phi = blurred_cross_covariance(X, means, covs, lengthscale, signal_variance, frequencies,
                                   phases, kernel)
    kt = phi.copy() if keep_kt else None
    if phi.size:
        # phi = (L^{-1} Kt^T)^T, solved in place on the F-ordered view Kt^T: no
        # M x n temporary and no copy (the rows stay C-ordered for the sweeps).
        blas.dtrsm(1.0, L, phi.T, lower=1, overwrite_b=1)
    lam = signal_variance - np.einsum("ij,ij->i", phi, phi)
    worst = lam.min() if lam.size else 0.0
    if worst < -_NEGATIVE_RESIDUAL_TOLERANCE * signal_variance:
        raise FloatingPointError(
            f"residual variance {worst:.3g} < 0 beyond round-off "
            f"(signal variance {signal_variance:.3g}): bases or kernel are inconsistent"
        )
    return Block(phi, approximation.training_residuals(lam), np.asarray(y, float),
                 approximation, kt)

