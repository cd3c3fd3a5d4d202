"""ARD kernels and their blurred (Gaussian-smoothed) forms: SE, and Matérn through it.

A basis point j is a Gaussian N(a_j, C_j).  Convolving the SE kernel with it gives
(docs/design.md, section 2)::

    Kt(x, j) = s2 |I + C~_j|^{-1/2} exp(-1/2 (x~ - a~_j)^T (I + C~_j)^{-1} (x~ - a~_j))
    Kh(i, j) = s2 |I + C~_i + C~_j|^{-1/2}
                  exp(-1/2 (a~_i - a~_j)^T (I + C~_i + C~_j)^{-1} (a~_i - a~_j))

where ``~`` means "divided by the lengthscales": x~ = x / l, C~ = diag(1/l) C diag(1/l).
This is the printed formula with |Lam| / |Lam + C| = 1 / |I + C~| (the paper's eq. 9
prints the power as M/2; it is d/2).  Working in scaled coordinates keeps every matrix
that is factorised well conditioned (its eigenvalues are >= 1).

Other kernel shapes (Matérn 1/2, 3/2, 5/2: :mod:`saspa_dask.core.kernel_profiles`)
are exact at delta blur (Kt and Kh are the kernel at the bases' points) and, for the
other blurs, the blurred forms above averaged over the profile's SE scale mixture.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .bases import blur_diagonals
from .blur_families import BASIS_FAMILIES, BLUR_FAMILIES, FOURIER_FAMILIES, blur_family
from .kernel_sums import AdditiveKernel, restrict_blur
from .fourier import fourier_cross_covariance, fourier_feature_covariance
from .kernel_pairs import (delta_pair_sq, mixture_basis_covariance, scaled_blurs,
                           se_basis_covariance)
from .kernel_profiles import kernel_named
from .row_features import (as_rows, feature_blocks, feature_scales, quadratic_product,
                           raw_rows, row_blocks, row_centre, row_features)

__all__ = [
    "BASIS_FAMILIES",
    "BLUR_FAMILIES",
    "FOURIER_FAMILIES",
    "basis_covariance",
    "blur_covariances",
    "blurred_cross_covariance",
    "cross_covariance_terms",
    "kernel_form",
    "mixture_factors",
    "scaled_sq_distances",
    "se_kernel",
]

def blur_covariances(covs, family):
    """Map cluster covariances to the blur covariances of a blur family.

    Parameters
    ----------
    covs : ndarray of shape (M, d, d) or (M, d)
        Symmetric positive semi-definite covariances, or diagonals.
    family : {"delta", "spherical", "diagonal", "full", "fourier", "fourier-global"}
        ``delta`` gives zeros (FITC / SPGP), ``spherical`` gives ``trace(C)/d * I``
        (multiscale GP), ``diagonal`` keeps the diagonal, ``full`` keeps ``C``;
        ``fourier`` and ``fourier-global`` give every basis the mean of the
        diagonals (frequency features' shared window).

    Returns
    -------
    ndarray of shape (M, d, d) for ``full`` given matrices, else (M, d) diagonals
    (:class:`~saspa_dask.core.bases.Basis` keeps diagonal blurs so)
    """
    return blur_family(family).covariances(np.asarray(covs, dtype=np.float64))


def se_kernel(X1, X2, lengthscale, signal_variance):
    """Plain SE-ARD kernel matrix k(X1, X2) (used for reference and tests).

    Parameters
    ----------
    X1 : ndarray of shape (n1, d)
    X2 : ndarray of shape (n2, d)
    lengthscale : ndarray of shape (d,)
    signal_variance : float

    Returns
    -------
    ndarray of shape (n1, n2)
    """
    A = np.asarray(X1, dtype=np.float64) / lengthscale
    B = np.asarray(X2, dtype=np.float64) / lengthscale
    sq = (A * A).sum(1)[:, None] + (B * B).sum(1)[None, :] - 2.0 * A @ B.T
    return signal_variance * np.exp(-0.5 * np.maximum(sq, 0.0))


def _quadratic_coefficients(means_s, precisions, diagonal):
    """Coefficients turning a quadratic form per basis into one matrix product.

    (x - a)^T S (x - a) = sum_{k<=l} w_kl x_k x_l  - 2 (S a)^T x + a^T S a, so with the
    row features [x_k x_l (k <= l), x, 1] every basis is one column of a (F, M) matrix.
    """
    n_bases, d = means_s.shape
    Sa = np.einsum("jkl,jl->jk", precisions, means_s)
    const = np.einsum("jk,jk->j", Sa, means_s)
    if diagonal:
        quad = np.diagonal(precisions, axis1=1, axis2=2).T  # (d, M)
    else:
        iu, ju = np.triu_indices(d)
        scale = np.where(iu == ju, 1.0, 2.0)
        quad = (precisions[:, iu, ju] * scale).T  # (d(d+1)/2, M)
    return np.vstack([quad, -2.0 * Sa.T, const[None, :]])


def _diagonal_quadratic_coefficients(means_s, precision_diagonals):
    """:func:`_quadratic_coefficients` for diagonal precisions (M, d): the row
    features are then [x_k^2, x, 1]."""
    Sa = precision_diagonals * means_s
    const = np.einsum("jk,jk->j", Sa, means_s)
    return np.vstack([precision_diagonals.T, -2.0 * Sa.T, const[None, :]])


def _unscaled(coef, lengthscale, diagonal):
    """Quadratic coefficients in scaled coordinates (x - centre) / l, rewritten for the
    unscaled features of :func:`~saspa_dask.core.row_features.row_features`."""
    return coef * feature_scales(lengthscale, diagonal)[:, None]


def blurred_cross_covariance(X, means, covs, lengthscale, signal_variance, frequencies=None,
                             phases=None, kernel=None):
    """Kt(X, B): covariance between f(x) and each blurred basis.

    Parameters
    ----------
    X : ndarray of shape (n, d), or PreparedRows
        The rows (prepared ones: :mod:`saspa_dask.core.row_features`).
    means : ndarray of shape (M, d)
    covs : ndarray of shape (M, d, d)
        Blur covariances (already mapped to the blur family).
    lengthscale : ndarray of shape (d,)
    signal_variance : float
    frequencies, phases : ndarray of shape (M, d) and (M,), optional
        Frequency inducing features instead (as :func:`basis_covariance`).
    kernel : str, KernelProfile or AdditiveKernel, optional
        The kernel's shape (:mod:`saspa_dask.core.kernel_profiles`; None is SE), or a
        sum of SE kernels over groups of inputs (:mod:`saspa_dask.core.kernel_sums`).

    Returns
    -------
    ndarray of shape (n, M)

    Notes
    -----
    Costs ``n M d^2`` flops as one matrix product per row block (``n M d`` for
    diagonal blurs), times the mixture's nodes for a Matérn kernel with a blur.  The
    quadratic form is expanded, so the inputs are first centred on the bases'
    centroid: the round-off of the expansion is then relative to the spread of the
    data, not to its offset.
    """
    if isinstance(kernel, AdditiveKernel):
        return _summed(kernel, frequencies, lambda inputs, w: blurred_cross_covariance(
            np.asarray(raw_rows(X), dtype=np.float64)[:, inputs], means[:, inputs],
            restrict_blur(covs, inputs), lengthscale[inputs], signal_variance * w,
            kernel=kernel.shape))
    profile = _profile(kernel, frequencies)
    if frequencies is not None:
        return fourier_cross_covariance(raw_rows(X), means, frequencies, phases,
                                        blur_diagonals(covs)[0],
                                        lengthscale, signal_variance)
    form = kernel_form(profile, covs)
    if form == "se":
        return _se_cross_covariance(X, means, covs, lengthscale, signal_variance)
    if form == "exact":
        return _delta_quadratic(X, means, lengthscale,
                                lambda u: signal_variance * profile.value(u))
    factors = mixture_factors(means, covs, lengthscale, signal_variance, *profile.mixture)
    out = np.zeros((np.shape(X)[0], means.shape[0]))
    for rows in feature_blocks(out.shape[0], means.shape[1], factors.diagonal):
        block = out[rows]  # bounded temporaries, as for SE
        for term in cross_covariance_terms(X[rows], factors):
            block += term
    return out


class MixtureFactors(NamedTuple):
    """What Kt of a scale mixture of SE kernels needs of the bases, computed once for
    any number of rows (:func:`mixture_factors`): the centre and lengthscales the rows
    are scaled by, whether the row features are diagonal ones, and per term the (F, M)
    quadratic coefficients and the (M,) log amplitudes."""

    centre: np.ndarray
    lengthscale: np.ndarray
    diagonal: bool
    terms: list


def mixture_factors(means, covs, lengthscale, signal_variance, scales, weights):
    """:class:`MixtureFactors` of the terms q (lengthscale ``l * scales[q]``, signal
    variance ``s2 * weights[q]``).  The terms share one factorisation per basis: in the
    base scaled coordinates term q's precision is (c^2 I + C~)^{-1} and its log
    determinant sum log(1 + lam / c^2), lam the eigenvalues of C~ (c = scales[q])."""
    centre = means.mean(axis=0)
    ms = (means - centre) / lengthscale
    cs, lam = scaled_blurs(covs, lengthscale)
    diagonal = cs is None
    if not diagonal:
        lam, vectors = np.linalg.eigh(0.5 * (cs + np.swapaxes(cs, 1, 2)))
        lam = np.maximum(lam, 0.0)  # semi-definite blurs: round-off only below 0
    terms = []
    for scale, weight in zip(scales, weights):
        c2 = scale * scale
        if diagonal:
            coef = _diagonal_quadratic_coefficients(ms, 1.0 / (c2 + lam))
        else:
            precisions = np.einsum("jkm,jm,jlm->jkl", vectors, 1.0 / (c2 + lam), vectors)
            coef = _quadratic_coefficients(ms, precisions, False)
        log_amp = np.log(signal_variance * weight) - 0.5 * np.log1p(lam / c2).sum(axis=1)
        terms.append((coef, log_amp))
    return MixtureFactors(centre, lengthscale, diagonal, terms)


def cross_covariance_terms(X, factors):
    """Kt of rows X for each term of a scale mixture (a generator, one (n, M) array a
    term), from its :func:`mixture_factors`; the terms share the row features."""
    features = row_features(np.asarray(raw_rows(X), dtype=np.float64), factors.centre,
                            factors.diagonal)
    for coef, log_amp in factors.terms:
        quad = features @ _unscaled(coef, factors.lengthscale, factors.diagonal)
        np.maximum(quad, 0.0, out=quad)
        quad *= -0.5
        quad += log_amp[None, :]
        yield np.exp(quad, out=quad)


def _summed(kernel, frequencies, term):
    """The sum over an additive kernel's terms of ``term(inputs, w_g)``."""
    if frequencies is not None:
        raise ValueError("frequency features are built on one SE kernel, not a sum")
    total = None
    for inputs, weight in kernel.parts():
        part = term(inputs, weight)
        total = part if total is None else total + part
    return total


def _profile(kernel, frequencies):
    profile = kernel_named(kernel)
    if frequencies is not None and not profile.is_se:
        raise ValueError(f"frequency features are built on the SE kernel, not "
                         f"{profile.name!r}")
    return profile


def kernel_form(kernel, covs):
    """How a kernel meets these bases: ``"se"`` (the SE formulas), ``"exact"`` (a
    Matérn profile at delta blur: the kernel itself at the bases' points) or
    ``"mixture"`` (a Matérn profile with a blur: its SE scale mixture).  The one rule
    the covariances, their gradients and the cost estimate follow."""
    profile = kernel_named(kernel)
    if profile.is_se:
        return "se"
    return "mixture" if np.any(covs) else "exact"


def _delta_quadratic(X, means, lengthscale, finish):
    """``finish(u)`` of the scaled squared distances u = |(x - a) / l|^2 of rows X to the
    points ``means``, row block by row block in one (n, M) array (expanded as the SE
    form expands its quadratic, about the bases' centroid or prepared rows' centre)."""
    X = as_rows(X)
    centre = row_centre(X, means)
    ms = (means - centre) / lengthscale
    coef = _unscaled(_diagonal_quadratic_coefficients(ms, np.ones_like(ms)), lengthscale,
                     True)
    out = np.empty((X.shape[0], means.shape[0]))
    for rows in row_blocks(X, True):
        quad = out[rows]
        quadratic_product(X[rows], centre, True, coef, out=quad)
        quad[...] = finish(np.maximum(quad, 0.0))
    return out


def scaled_sq_distances(X, means, lengthscale):
    """u = |(x - a) / l|^2 for rows X and points ``means`` (the delta blur's, for the
    gradient's weights), as :func:`blurred_cross_covariance` forms them."""
    return _delta_quadratic(X, means, lengthscale, lambda u: u)


def _se_cross_covariance(X, means, covs, lengthscale, signal_variance):
    """:func:`blurred_cross_covariance` for the SE kernel."""
    X = as_rows(X)
    centre = row_centre(X, means)
    ms = (means - centre) / lengthscale
    cs, cd = scaled_blurs(covs, lengthscale)
    d = X.shape[1]
    diagonal = cs is None
    if diagonal:
        # elementwise: M d x d factorisations and inverses cost M d^3, which on a wide
        # one-hot table (d in the hundreds) outweighed the whole EP sweep
        spread = 1.0 + cd  # (M, d)
        logdet = np.log(spread).sum(axis=1)
        coef = _diagonal_quadratic_coefficients(ms, 1.0 / spread)
    else:
        S = np.eye(d)[None] + cs
        chol = np.linalg.cholesky(S)
        logdet = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        precisions = np.linalg.inv(S)  # d x d blur precisions, not kernel matrices
        precisions = 0.5 * (precisions + np.swapaxes(precisions, 1, 2))
        coef = _quadratic_coefficients(ms, precisions, False)
    coef = _unscaled(coef, lengthscale, diagonal)
    log_amp = np.log(signal_variance) - 0.5 * logdet
    out = np.empty((X.shape[0], means.shape[0]))
    for rows in row_blocks(X, diagonal):
        # computed in place in the output: no (rows x M) temporaries, which matters
        # in Dask workers where every large temporary is a fresh mmap
        quad = out[rows]
        quadratic_product(X[rows], centre, diagonal, coef, out=quad)
        np.maximum(quad, 0.0, out=quad)
        quad *= -0.5
        quad += log_amp[None, :]
        np.exp(quad, out=quad)
    return out


def basis_covariance(means, covs, lengthscale, signal_variance, frequencies=None,
                     phases=None, kernel=None):
    """Kh(B, B): covariance between blurred bases i and j.

    Parameters
    ----------
    means : ndarray of shape (M, d)
    covs : ndarray of shape (M, d, d)
        Blur covariances (already mapped to the blur family).
    lengthscale : ndarray of shape (d,)
    signal_variance : float
    frequencies, phases : ndarray of shape (M, d) and (M,), optional
        Frequency inducing features instead (:mod:`saspa_dask.core.fourier`; the
        window is ``covs[0]``'s diagonal).
    kernel : str, KernelProfile or AdditiveKernel, optional
        The kernel (as :func:`blurred_cross_covariance`); None is SE.

    Returns
    -------
    ndarray of shape (M, M), symmetric.

    Notes
    -----
    Differences a_i - a_j are formed directly (no expansion), for the pairs i <= j
    only (the matrix is symmetric), a block of pairs at a time (:func:`pair_blocks`:
    about ``_PAIR_FLOATS`` floats of d x d matrices), batched through LAPACK rather
    than one basis at a time in Python.
    """
    if isinstance(kernel, AdditiveKernel):
        return _summed(kernel, frequencies, lambda inputs, w: basis_covariance(
            means[:, inputs], restrict_blur(covs, inputs), lengthscale[inputs],
            signal_variance * w, kernel=kernel.shape))
    profile = _profile(kernel, frequencies)
    if frequencies is not None:
        return fourier_feature_covariance(means, frequencies, phases,
                                          blur_diagonals(covs)[0], lengthscale,
                                          signal_variance)
    form = kernel_form(profile, covs)
    if form == "se":
        return se_basis_covariance(means, covs, lengthscale, signal_variance)
    if form == "exact":
        ms = np.asarray(means, dtype=np.float64) / lengthscale
        return signal_variance * profile.value(delta_pair_sq(ms))
    return mixture_basis_covariance(means, covs, lengthscale, signal_variance,
                                     *profile.mixture)
