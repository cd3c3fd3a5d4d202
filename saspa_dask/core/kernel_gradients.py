"""Derivatives of the blurred SE kernels (:mod:`saspa_dask.core.kernels`) with
respect to log lengthscales, a log blur scale and the bases, as weighted sums over
rows and basis pairs (the evidence gradient's per-chunk sums, docs/design.md, section 2).

For K = s2 |I + C~|^{-1/2} exp(-1/2 r~^T (I + C~)^{-1} r~) with C fixed in the
original coordinates, S = (I + C~)^{-1} and z = S r~::

    d log K / d log l_k = 1 - S_kk + z_k^2
    d log K / d log g   = -1/2 tr(S C~) + 1/2 z^T C~ z     (C -> g C, at g = 1)
    d log K / d a~      = z (for Kt, r~ = x~ - a~)
    d log K / d C~      = -1/2 S + 1/2 z z^T

A weighted sum over rows sum_i E_i dK_i needs only the weighted moments of r~:
sum_i E_i K_i z_k^2 = (S M2 S)_kk with M2 = sum_i E_i K_i r~_i r~_i^T.  The basis
gradients come back in the original coordinates: a~ = (a - centre) / l and
C~ = diag(1/l) C diag(1/l) give d/da = (d/da~) / l and d/dC_kl = (d/dC~_kl) / (l_k l_l).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import sparse

from .bases import dense_blur
from .kernel_pairs import (delta_pair_sq, diagonal_pairs, mixture_pair_log_k, pair_blocks,
                           pair_eigen, scaled_blur, scaled_blurs, upper_blocks)
from .row_features import (as_rows, feature_scales, row_blocks, row_centre,
                           weighted_features)

__all__ = ["KernelGradient", "basis_covariance_gradient", "cross_covariance_gradient",
           "cross_moments", "mixture_covariance_gradient", "summed"]


class KernelGradient(NamedTuple):
    """A weighted sum of kernel derivatives, sum W dK / d theta.

    ``lengthscale`` (d,) and ``blur_scale`` are with respect to their logs;
    ``means`` (M, d) and ``covs`` (M, d, d) per basis, with respect to the means and
    the blur covariances themselves (``covs[j]`` is the symmetric matrix gradient: the
    derivative along a symmetric change dC_j is <covs[j], dC_j>); for blurs given as
    (M, d) diagonals, ``covs`` is (M, d): the gradient along the diagonals."""

    lengthscale: np.ndarray
    blur_scale: float
    means: np.ndarray
    covs: np.ndarray


def _to_original(grad_means_s, grad_covs_s, lengthscale):
    inv_l = 1.0 / lengthscale
    if grad_covs_s is None:
        return grad_means_s * inv_l[None, :], None
    if grad_covs_s.ndim == 2:  # along diagonal blurs' diagonals
        return grad_means_s * inv_l[None, :], grad_covs_s * (inv_l * inv_l)[None, :]
    return (grad_means_s * inv_l[None, :],
            grad_covs_s * inv_l[None, :, None] * inv_l[None, None, :])


def cross_moments(X, weights, means, lengthscale, full):
    """Weighted moments of the scaled inputs, per basis, for the Kt gradient.

    Parameters
    ----------
    X : ndarray of shape (n, d), or PreparedRows
        The rows (prepared ones: :mod:`saspa_dask.core.row_features`).
    weights : ndarray of shape (n, M)
        E_ij = (dEvidence / dKt_ij) * Kt_ij.
    means : ndarray of shape (M, d)
    lengthscale : ndarray of shape (d,)
    full : bool
        Also the off-diagonal second moments (needed for full blur covariances).

    Returns
    -------
    tuple (m0, m1, m2)
        m0 (M,) = sum_i E_ij, m1 (M, d) = sum_i E_ij x~_i, m2 = sum_i E_ij x~_i x~_i^T as
        (M, d, d) if ``full`` else its diagonal (M, d); x~ = (x - centre) / l with the
        centre of the bases' means (as in :func:`blurred_cross_covariance`).
    """
    X = as_rows(X)
    d = X.shape[1]
    centre = row_centre(X, means)
    # sum_i E_ij [z z^T entries, z, 1] of z = x - centre, one product per row block
    # (no n x d scaled copy); scaled by 1 / l afterwards, M d work
    scales = feature_scales(lengthscale, not full)
    sums = np.zeros((weights.shape[1], scales.size))
    for rows in row_blocks(X, not full):
        sums += weighted_features(X[rows], centre, not full, weights[rows])
    sums *= scales
    packed, m1, m0 = sums[:, :-d - 1], sums[:, -d - 1:-1], sums[:, -1]
    if full:
        iu, ju = np.triu_indices(d)
        m2 = np.empty((weights.shape[1], d, d))
        m2[:, iu, ju] = packed
        m2[:, ju, iu] = packed
    else:
        m2 = packed
    return _recentred(m0, m1, m2, (centre - means.mean(axis=0)) / lengthscale)


def _recentred(m0, m1, m2, shift):
    """Moments about the scaled centre moved by ``-shift`` (x~ - c'~ = (x~ - c~) +
    shift): what rows prepared about their own centre give, about the bases'."""
    if not shift.any():
        return m0, m1, m2
    moved = m1 + m0[:, None] * shift
    if m2.ndim == 2:
        m2 = m2 + 2.0 * m1 * shift + m0[:, None] * shift * shift
    else:
        cross = m1[:, :, None] * shift[None, None, :]
        m2 = (m2 + cross + np.swapaxes(cross, 1, 2)
              + m0[:, None, None] * np.multiply.outer(shift, shift)[None])
    return m0, moved, m2


def cross_covariance_gradient(moments, means, covs, lengthscale, with_covs=True):
    """sum_ij E_ij d log Kt_ij / d theta from :func:`cross_moments` (summed over chunks).

    Returns
    -------
    KernelGradient
        With diagonal second moments (``full=False`` in :func:`cross_moments`) the
        off-diagonal entries of ``covs`` are not available and are zero; without
        ``with_covs`` (the blur covariances are not learnt) ``covs`` is None; for
        blurs given as (M, d) diagonals, ``covs`` is (M, d) (full moments are then
        reduced to their diagonals: such a blur's Kt depends on no other).
    """
    m0, m1, m2 = moments
    d = means.shape[1]
    centre = means.mean(axis=0)
    a = (means - centre) / lengthscale
    cs, cd = scaled_blurs(covs, lengthscale)
    compact = covs is not None and np.ndim(covs) == 2
    if compact and m2.ndim == 3:
        m2 = np.diagonal(m2, axis1=1, axis2=2)
    diagonal_moments = m2.ndim == 2
    if diagonal_moments and cs is None:
        grads = _diagonal_cross_gradient(m0, m1, m2, a, cd, with_covs, dense=not compact)
        return KernelGradient(grads[0], grads[1], *_to_original(*grads[2:], lengthscale))
    if cs is None:  # diagonal blurs whose full blur gradient is asked for
        cs = scaled_blur(covs, lengthscale)
    S = np.linalg.inv(np.eye(d)[None] + cs)  # d x d blur precisions, not kernel matrices
    # second moments of r~ = x~ - a~ about each basis
    if diagonal_moments:
        m2 = m2[:, :, None] * np.eye(d)[None]
    r2 = (m2 - a[:, :, None] * m1[:, None, :] - m1[:, :, None] * a[:, None, :]
          + m0[:, None, None] * a[:, :, None] * a[:, None, :])
    if diagonal_moments:
        r2 = r2 * np.eye(d)[None]
    SrS = S @ r2 @ S
    diag_S = np.diagonal(S, axis1=1, axis2=2)
    grad_l = (m0[:, None] * (1.0 - diag_S) + np.diagonal(SrS, axis1=1, axis2=2)).sum(0)
    SC = S @ cs
    grad_g = (-0.5 * np.trace(SC, axis1=1, axis2=2) * m0
              + 0.5 * np.einsum("jkl,jlk->j", SrS, cs)).sum()
    grad_a = np.einsum("jkl,jl->jk", S, m1 - m0[:, None] * a)
    grad_c = -0.5 * m0[:, None, None] * S + 0.5 * SrS
    if diagonal_moments:
        grad_c = grad_c * np.eye(d)[None]
    return KernelGradient(grad_l, float(grad_g),
                          *_to_original(grad_a, grad_c if with_covs else None, lengthscale))


def _diagonal_cross_gradient(m0, m1, m2, a, c, with_covs=True, dense=True):
    """:func:`cross_covariance_gradient` for diagonal blurs (``c``: (M, d) scaled blur
    variances) and diagonal moments, elementwise: the precisions are 1 / (1 + c), and
    every d x d product of the general formulas is a product of diagonals.  Returns
    (lengthscale, blur scale, means, covs) gradients in the scaled inputs, the blur's
    as (M, d, d) diagonal matrices if ``dense`` else as (M, d) diagonals."""
    p = 1.0 / (1.0 + c)
    r2 = m2 - 2.0 * a * m1 + m0[:, None] * a * a  # diagonal second moments about a
    prp = p * p * r2
    grad_l = (m0[:, None] * (1.0 - p) + prp).sum(0)
    grad_g = float((-0.5 * (p * c).sum(1) * m0 + 0.5 * (prp * c).sum(1)).sum())
    grad_a = p * (m1 - m0[:, None] * a)
    if not with_covs:
        return grad_l, grad_g, grad_a, None
    diagonals = -0.5 * m0[:, None] * p + 0.5 * prp
    return grad_l, grad_g, grad_a, dense_blur(diagonals) if dense else diagonals


def basis_covariance_gradient(weights, means, covs, lengthscale, signal_variance,
                              with_covs=True, kernel=None):
    """sum_ab W_ab dKh_ab / d theta for a symmetric weight matrix W.

    ``kernel``: a :class:`~saspa_dask.core.kernel_profiles.KernelProfile` at delta
    blur, whose weight -2 dk/du takes k's place in the formulas at zero blur (None:
    SE; a blurred profile is a sum of SE terms, summed by the caller).

    Returns
    -------
    KernelGradient
        Without ``with_covs`` (the blur covariances are not learnt) ``covs`` is None.

    Notes
    -----
    The pairs i <= j only, a block at a time (as :func:`basis_covariance`).  The
    terms of pair (i, j) in a_i and C_i hold those of (j, i) too (hence the factor 2
    in each formula; z_ji = -z_ij, S_ji = S_ij), so a pair i < j adds its C-term to
    both bases, its a-term to i and its negative to j, and counts twice in the
    lengthscale and blur-scale sums; Kh(i, i), which has C_i twice and no a_i, fits
    the same formulas once.
    """
    ms = np.asarray(means, dtype=np.float64) / lengthscale
    cs, cd = scaled_blurs(covs, lengthscale)
    n_bases, d = ms.shape
    if kernel is not None and not kernel.is_se:
        if np.any(cd) or cs is not None or with_covs:
            raise ValueError(f"the {kernel.name} kernel's exact form is for delta blur, "
                             "which is not learnt")
    if cs is None:
        grads = _diagonal_covariance_gradient(weights, ms, cd, signal_variance, with_covs,
                                              kernel, dense=np.ndim(covs) == 3)
        return KernelGradient(grads[0], grads[1], *_to_original(*grads[2:], lengthscale))
    eye = np.eye(d)
    grad_l = np.zeros(d)
    grad_g = 0.0
    grad_a = np.zeros((n_bases, d))
    grad_c = np.zeros((n_bases, d, d))
    for i, j in pair_blocks(n_bases, d * d):
        C = cs[i] + cs[j]  # (pairs, d, d)
        S = np.linalg.inv(eye + C)  # d x d blur precisions, not kernel matrices
        r = ms[i] - ms[j]
        z = (S @ r[..., None])[..., 0]
        _, logdet = np.linalg.slogdet(eye + C)
        k = signal_variance * np.exp(-0.5 * (logdet + (r * z).sum(axis=-1)))
        wk = weights[i, j] * k
        both = np.where(i != j, 2.0 * wk, wk)  # (i, j) and (j, i) alike
        diag_S = np.diagonal(S, axis1=-2, axis2=-1)
        grad_l += both @ (1.0 - diag_S + z * z)
        dg = (-0.5 * np.einsum("pkl,plk->p", S, C)
              + 0.5 * ((C @ z[..., None])[..., 0] * z).sum(axis=-1))
        grad_g += float(both @ dg)
        # each pair's terms summed into its bases: sparse (bases x pairs) incidences
        to_both, to_i_minus_j = _incidence(i, j, n_bases)
        term_a = -2.0 * wk[:, None] * z  # zero on the diagonal (z_ii = 0)
        grad_a += to_i_minus_j @ term_a
        term_c = (wk[:, None, None] * (z[:, :, None] * z[:, None, :] - S)).reshape(-1, d * d)
        grad_c += (to_both @ term_c).reshape(n_bases, d, d)
    return KernelGradient(grad_l, grad_g,
                          *_to_original(grad_a, grad_c if with_covs else None, lengthscale))


def summed(gradients):
    """The sum of KernelGradients (None entries stay None)."""
    if len(gradients) == 1:
        return gradients[0]
    return KernelGradient(*(None if values[0] is None else sum(values)
                            for values in zip(*gradients)))


def mixture_covariance_gradient(weights, means, covs, lengthscale, signal_variance, scales,
                                mix_weights, with_covs=True):
    """:func:`basis_covariance_gradient` of a scale mixture of SE kernels (term q:
    lengthscale l c_q, signal variance s2 w_q), summed over its terms.

    For full blurs each pair's C~_i + C~_j = V diag(lam) V^T is decomposed once
    (:func:`~saspa_dask.core.kernels.pair_eigen`) and serves every term: in term q's
    coordinates S = V diag(c^2 / (c^2 + lam)) V^T, z = V (s p / c) with p = V^T r~,
    C~ / c^2 has eigenvalues lam / c^2, and the a- and C-terms come back to the base
    scaled coordinates divided by c and c^2."""
    ms = np.asarray(means, dtype=np.float64) / lengthscale
    cs = scaled_blurs(covs, lengthscale)[0]
    n_bases, d = ms.shape
    if cs is None:  # elementwise already: O(M^2 d) a term
        return summed([basis_covariance_gradient(weights, means, covs, lengthscale * c,
                                                 signal_variance * w, with_covs)
                       for c, w in zip(scales, mix_weights)])
    grad_l, grad_g = np.zeros(d), 0.0
    grad_a = np.zeros((n_bases, d))
    grad_c = np.zeros((n_bases, d, d)) if with_covs else None
    for i, j in pair_blocks(n_bases, d * d):
        lam, p, vectors = pair_eigen(cs, ms, i, j)
        to_both, to_i_minus_j = _incidence(i, j, n_bases)
        for scale, weight in zip(scales, mix_weights):
            c2 = scale * scale
            shrink = c2 / (c2 + lam)  # S's eigenvalues
            k = signal_variance * weight * np.exp(mixture_pair_log_k(lam, p, c2))
            wk = weights[i, j] * k
            both = np.where(i != j, 2.0 * wk, wk)
            z_hat = shrink * p / scale
            z = np.einsum("pkm,pm->pk", vectors, z_hat)
            diag_S = np.einsum("pkm,pm->pk", vectors * vectors, shrink)
            grad_l += both @ (1.0 - diag_S + z * z)
            grad_g += float(both @ (0.5 * (lam / c2 * (z_hat * z_hat - shrink)).sum(axis=-1)))
            grad_a += to_i_minus_j @ (-2.0 * wk[:, None] * z / scale)
            if with_covs:
                S = np.einsum("pkm,pm,plm->pkl", vectors, shrink, vectors)
                term_c = wk[:, None, None] * (z[:, :, None] * z[:, None, :] - S) / c2
                grad_c += (to_both @ term_c.reshape(-1, d * d)).reshape(n_bases, d, d)
    return KernelGradient(grad_l, grad_g, *_to_original(grad_a, grad_c, lengthscale))


def _incidence(i, j, n_bases):
    """Sparse (n_bases x pairs) matrices that sum each pair's term into its bases:
    into i and j (j only off the diagonal), and into i with its negative into j."""
    pairs = np.arange(i.size)
    off = i != j
    ones = np.ones(i.size)
    first = sparse.csr_matrix((ones, (i, pairs)), shape=(n_bases, i.size))
    second = sparse.csr_matrix((ones[off], (j[off], pairs[off])), shape=(n_bases, i.size))
    return first + second, first - second


def _delta_covariance_gradient(weights, ms, signal_variance, with_covs, kernel):
    """:func:`_diagonal_covariance_gradient` at delta blur (S = 1, C = 0, z = r): its
    pair sums are then products.  With wk = W o k (symmetric), row sums s and
    P = wk a~: sum_ij wk r_k^2 = 2 sum_i (s_i a~_ik^2 - a~_ik P_ik), the mean gradient
    -2 (s_i a~_i - P_i), the blur scale's 0 and the blur's (diagonal) s_i a~_i^2 -
    2 a~_i P_i + (wk a~^2)_i - s_i."""
    u = delta_pair_sq(ms)
    shape = np.exp(-0.5 * u) if kernel is None else kernel.weight(u)
    wk = weights * (signal_variance * shape)
    wk = 0.5 * (wk + wk.T)
    row = wk.sum(axis=1)[:, None]
    c = ms - ms.mean(axis=0)  # r is unchanged by the shift; the products are smaller
    P = wk @ c
    squares = c * c
    grad_l = 2.0 * (row * squares - c * P).sum(axis=0)
    grad_a = -2.0 * (row * c - P)
    grad_c = (row * squares - 2.0 * c * P + wk @ squares - row) if with_covs else None
    return grad_l, 0.0, grad_a, grad_c


def _diagonal_covariance_gradient(weights, ms, cd, signal_variance, with_covs=True,
                                  kernel=None, dense=True):
    """:func:`basis_covariance_gradient`'s sums when every blur is diagonal: S and
    C~ are then diagonal, so the same formulas need no d x d inverse.  With ``dense``
    (blurs given as matrices) the blur gradient keeps its off-diagonal entries
    (sum_j w_ij k_ij z_k z_l), which a full blur that happens to be diagonal needs;
    otherwise it is the (M, d) gradient along the diagonals (O(M^2 d))."""
    if not np.any(cd) and not (with_covs and dense):
        return _delta_covariance_gradient(weights, ms, signal_variance, with_covs, kernel)
    n_bases, d = ms.shape
    grad_l, grad_g = np.zeros(d), 0.0
    grad_a = np.zeros((n_bases, d))
    # the blur gradient (M^2 d^2 work if dense) only when the blurs are learnt
    grad_c = None if not with_covs else np.zeros((n_bases, d, d) if dense else (n_bases, d))
    idx = np.arange(d)
    # each pair once (i <= j): its symmetric terms count twice off the diagonal, and
    # its per-basis terms go to both of its bases (z = S r changes sign with r)
    for rows, cols in upper_blocks(n_bases, d):
        S, r, log_k = diagonal_pairs(ms, cd, rows, cols)
        C = cd[rows, None] + cd[None, cols]
        z = S * r
        # k, or a delta-blur profile's weight at u = -2 log k (SE's log k at zero blur)
        shape = np.exp(log_k) if kernel is None else kernel.weight(-2.0 * log_k)
        wk = weights[rows, cols] * (signal_variance * shape)  # (b, m)
        after = np.arange(cols.start, n_bases)[None, :] - np.arange(
            rows.start, rows.stop)[:, None]
        upper = np.where(after > 0, wk, 0.0)  # pairs i < j
        own = np.where(after >= 0, wk, 0.0)  # pairs i <= j, for basis i
        twice = upper + own  # the symmetric sums: i < j twice, i = j once
        grad_l += np.einsum("bj,bjk->k", twice, 1.0 - S + z * z)
        grad_g += float((twice * 0.5 * (C * (z * z - S)).sum(axis=-1)).sum())
        grad_a[rows] -= 2.0 * np.einsum("bj,bjk->bk", upper, z)
        grad_a[cols] += 2.0 * np.einsum("bj,bjk->jk", upper, z)
        if with_covs and dense:
            grad_c[rows] += np.einsum("bjk,bjl->bkl", own[..., None] * z, z)
            grad_c[cols] += np.einsum("bjk,bjl->jkl", upper[..., None] * z, z)
            grad_c[rows, idx, idx] -= np.einsum("bj,bjk->bk", own, S)
            grad_c[cols, idx, idx] -= np.einsum("bj,bjk->jk", upper, S)
        elif with_covs:
            q = z * z - S
            grad_c[rows] += np.einsum("bj,bjk->bk", own, q)
            grad_c[cols] += np.einsum("bj,bjk->jk", upper, q)
    return grad_l, grad_g, grad_a, grad_c