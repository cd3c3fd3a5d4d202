"""Bases against bases: the blurred basis covariance Kh a block of pairs at a time.

The pairs (i, j) with i <= j of the symmetric M x M matrix are formed directly (no
expansion of a_i - a_j), in blocks that hold about :data:`_PAIR_FLOATS` floats, batched
through LAPACK (full blurs) or elementwise (diagonal blurs, O(M^2 d)); delta bases are
points, their squared distances one Gram product.  In scaled coordinates (``~``:
divided by the lengthscales, :func:`scaled_blurs`) every matrix factorised is
I + C~_i + C~_j, whose eigenvalues are >= 1.  :func:`saspa_dask.core.kernels.
basis_covariance` dispatches here; the gradients (:mod:`saspa_dask.core.
kernel_gradients`) reuse the blocks.
"""

from __future__ import annotations

import numpy as np

from .bases import blur_diagonals, dense_blur, is_diagonal

__all__ = ["delta_pair_sq", "diagonal_basis_covariance", "diagonal_pairs",
           "mixture_basis_covariance", "mixture_pair_log_k", "pair_blocks", "pair_eigen",
           "scaled_blur", "scaled_blurs", "se_basis_covariance", "upper_blocks"]


def scaled_blur(covs, lengthscale):
    """C~ = diag(1/l) C diag(1/l) for every basis, as (M, d, d) matrices."""
    inv_l = 1.0 / lengthscale
    return dense_blur(covs) * np.outer(inv_l, inv_l)  # one pass over the M d x d


def scaled_blurs(covs, lengthscale):
    """(C~, diag C~ (M, d)) with C~ None when every blur is diagonal (given as (M, d)
    diagonals or as matrices): the M d x d scaled matrices are then never formed (on
    a wide one-hot table that product, not the fit's arithmetic, dominated an
    evaluation)."""
    inv_l = 1.0 / lengthscale
    if is_diagonal(covs):
        return None, blur_diagonals(covs) * (inv_l * inv_l)
    cs = covs * np.outer(inv_l, inv_l)
    return cs, np.diagonal(cs, axis1=1, axis2=2)


def mixture_pair_log_k(lam, p, c2):
    """log(k / (s2 w)) of a mixture term (scale^2 ``c2``) for pairs of bases given by
    :func:`pair_eigen`'s eigenvalues ``lam`` and projected differences ``p``."""
    return -0.5 * (np.log1p(lam / c2).sum(axis=-1) + (p * p / (c2 + lam)).sum(axis=-1))


def mixture_basis_covariance(means, covs, lengthscale, signal_variance, scales, weights):
    """Kh of a scale mixture of SE kernels (as :func:`cross_covariance_terms`): for
    full blurs one eigendecomposition per pair of bases serves every term."""
    ms = np.asarray(means, dtype=np.float64) / lengthscale
    cs, cd = scaled_blurs(covs, lengthscale)
    if cs is None:  # elementwise already: O(M^2 d) a term
        return sum(diagonal_basis_covariance(ms / c, cd / (c * c), signal_variance * w)
                   for c, w in zip(scales, weights))
    n_bases, d = ms.shape
    out = np.empty((n_bases, n_bases))
    for i, j in pair_blocks(n_bases, d * d):
        lam, p = pair_eigen(cs, ms, i, j)[:2]
        out[i, j] = out[j, i] = sum(
            signal_variance * weight * np.exp(mixture_pair_log_k(lam, p, scale * scale))
            for scale, weight in zip(scales, weights))
    return out


def pair_eigen(cs, ms, i, j):
    """For pairs (i, j) of bases in scaled coordinates: the eigenvalues lam (>= 0) and
    vectors V of C~_i + C~_j, and the difference a~_i - a~_j in that eigenbasis, as
    (lam, p, V)."""
    lam, vectors = np.linalg.eigh(cs[i] + cs[j])
    p = np.einsum("pkm,pk->pm", vectors, ms[i] - ms[j])
    return np.maximum(lam, 0.0), p, vectors


def se_basis_covariance(means, covs, lengthscale, signal_variance):
    """:func:`~saspa_dask.core.kernels.basis_covariance` for the SE kernel."""
    ms = np.asarray(means, dtype=np.float64) / lengthscale
    cs, cd = scaled_blurs(covs, lengthscale)
    n_bases, d = ms.shape
    if cs is None:
        return diagonal_basis_covariance(ms, cd, signal_variance)
    eye = np.eye(d)
    out = np.empty((n_bases, n_bases))
    for i, j in pair_blocks(n_bases, d * d):
        S = eye + cs[i] + cs[j]  # (pairs, d, d)
        chol = np.linalg.cholesky(S)
        z = np.linalg.solve(chol, (ms[i] - ms[j])[..., None])[..., 0]
        logdet = 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1)
        out[i, j] = out[j, i] = signal_variance * np.exp(
            -0.5 * (logdet + (z * z).sum(axis=-1)))
    return out


# pairs of bases are handled in blocks (of pairs for full blurs, of basis rows for
# diagonal ones) holding about this many floats (32 MB)
_PAIR_FLOATS = 4_000_000


def pair_blocks(n_bases, floats_per_pair):
    """The pairs (i, j) with i <= j of a symmetric pair matrix, as index arrays in
    blocks of about _PAIR_FLOATS floats (``floats_per_pair`` a pair)."""
    first, second = np.triu_indices(n_bases)
    size = max(1, _PAIR_FLOATS // max(1, floats_per_pair))
    return [(first[k:k + size], second[k:k + size]) for k in range(0, first.size, size)]


def upper_blocks(n_bases, d):
    """(rows, cols) of the pairs i in rows, j >= rows.start: row blocks whose (rows x
    M x d) pair arrays fit _PAIR_FLOATS, and of at most an eighth of the bases, cut to
    the upper triangle and the diagonal blocks, so a symmetric pair quantity is
    computed about 0.56 times a pair, not twice."""
    size = min(max(1, _PAIR_FLOATS // max(1, n_bases * d)), -(-n_bases // 8))
    return [(slice(i, min(i + size, n_bases)), slice(i, n_bases))
            for i in range(0, n_bases, size)]


def diagonal_pairs(ms, cd, rows, cols=slice(None)):
    """Per pair (rows x cols x d) of diagonal blurs: the precisions S = 1 / (1 + c_i +
    c_j), the differences r = a_i - a_j and log k / s2 (scaled coordinates)."""
    S = 1.0 / (1.0 + cd[rows, None] + cd[None, cols])
    r = ms[rows, None] - ms[None, cols]
    log_k = 0.5 * (np.log(S) - r * r * S).sum(axis=-1)
    return S, r, log_k


def delta_pair_sq(ms):
    """Squared distances |a~_i - a~_j|^2 of delta bases (scaled coordinates), from the
    Gram matrix of the centred means: one product, M^2 d flops in BLAS rather than
    elementwise passes over (M, M, d) differences, which at d in the thousands were
    most of an evaluation.  The expansion's round-off is eps |a~|^2 in u, as in Kt's."""
    c = ms - ms.mean(axis=0)
    sq = np.einsum("ij,ij->i", c, c)
    u = sq[:, None] + sq[None, :] - 2.0 * (c @ c.T)
    np.maximum(u, 0.0, out=u)
    np.fill_diagonal(u, 0.0)
    return 0.5 * (u + u.T)


def diagonal_basis_covariance(ms, cd, signal_variance):
    """:func:`~saspa_dask.core.kernels.basis_covariance` when every blur is diagonal (delta, spherical,
    diagonal): the d x d factorisations are elementwise, O(M^2 d); delta bases are
    points, their pairs a product (:func:`delta_pair_sq`)."""
    if not np.any(cd):
        return signal_variance * np.exp(-0.5 * delta_pair_sq(ms))
    n_bases, d = ms.shape
    out = np.empty((n_bases, n_bases))
    for rows, cols in upper_blocks(n_bases, d):
        block = signal_variance * np.exp(diagonal_pairs(ms, cd, rows, cols)[2])
        out[rows, cols] = block
        out[cols, rows] = block.T
    return 0.5 * (out + out.T)
