"""Blurred kernels against Monte-Carlo integrals of the plain SE kernel (docs/design.md, section 2)."""

import numpy as np
import pytest

from reference import se
from saspa_dask.core.bases import dense_blur
from saspa_dask.core.kernels import (
    BLUR_FAMILIES,
    basis_covariance,
    blur_covariances,
    blurred_cross_covariance,
    se_kernel,
)

N_MC = 400_000


def _random_spd(rng, d, scale):
    A = rng.normal(size=(d, d))
    return scale * (A @ A.T / d + 0.1 * np.eye(d))


def _problem(rng, d, n_bases=3):
    lengthscale = rng.uniform(0.5, 2.0, size=d)
    s2 = rng.uniform(0.5, 3.0)
    means = rng.normal(size=(n_bases, d))
    covs = np.stack([_random_spd(rng, d, rng.uniform(0.2, 1.5)) for _ in range(n_bases)])
    X = rng.normal(size=(4, d))
    return lengthscale, s2, means, covs, X


def _mc_cross(rng, x, mean, cov, lengthscale, s2):
    z = rng.multivariate_normal(mean, cov, size=N_MC) if cov.any() else mean[None]
    vals = se(x[None], z, lengthscale, s2)[0]
    return vals.mean(), vals.std() / np.sqrt(len(vals))


@pytest.mark.parametrize("family", BLUR_FAMILIES)
@pytest.mark.parametrize("d", [3, 5])
def test_blurred_cross_covariance_matches_monte_carlo(family, d):
    rng = np.random.default_rng(100 + d)
    lengthscale, s2, means, covs, X = _problem(rng, d)
    blur = blur_covariances(covs, family)  # (M, d) diagonals unless full
    Kt = blurred_cross_covariance(X, means, blur, lengthscale, s2)
    assert Kt.shape == (len(X), len(means))
    covs = dense_blur(blur)  # matrices for the sampler
    for i, x in enumerate(X):
        for j in range(len(means)):
            est, se_mc = _mc_cross(rng, x, means[j], covs[j], lengthscale, s2)
            # 5 standard errors, plus round-off for the exact (delta) case
            assert abs(Kt[i, j] - est) <= 5 * se_mc + 1e-12 * s2, (family, i, j)


@pytest.mark.parametrize("family", BLUR_FAMILIES)
def test_basis_covariance_matches_monte_carlo(family):
    d = 4
    rng = np.random.default_rng(7)
    lengthscale, s2, means, covs, _ = _problem(rng, d)
    blur = blur_covariances(covs, family)
    Kh = basis_covariance(means, blur, lengthscale, s2)
    np.testing.assert_allclose(Kh, Kh.T, rtol=0, atol=1e-15)
    covs = dense_blur(blur)
    for i in range(len(means)):
        for j in range(i, len(means)):
            if covs[i].any() or covs[j].any():
                z1 = rng.multivariate_normal(means[i], covs[i] + 1e-300 * np.eye(d), N_MC)
                z2 = rng.multivariate_normal(means[j], covs[j] + 1e-300 * np.eye(d), N_MC)
                vals = s2 * np.exp(-0.5 * (((z1 - z2) / lengthscale) ** 2).sum(1))
                est, err = vals.mean(), vals.std() / np.sqrt(N_MC)
            else:
                est, err = se(means[i : i + 1], means[j : j + 1], lengthscale, s2)[0, 0], 0.0
            assert abs(Kh[i, j] - est) <= 5 * err + 1e-12 * s2, (family, i, j)


def test_delta_blur_is_the_plain_kernel():
    rng = np.random.default_rng(3)
    d = 6
    X = rng.normal(size=(50, d)) * 10 + 100  # offset data: the expansion is centred
    means = X[:7] + 0.01
    ls = rng.uniform(0.5, 5, size=d)
    zeros = np.zeros((7, d, d))
    np.testing.assert_allclose(
        blurred_cross_covariance(X, means, zeros, ls, 2.0), se(X, means, ls, 2.0),
        rtol=1e-10, atol=1e-14,
    )
    np.testing.assert_allclose(
        basis_covariance(means, zeros, ls, 2.0), se(means, means, ls, 2.0), rtol=1e-12
    )
    np.testing.assert_allclose(se_kernel(X, means, ls, 2.0), se(X, means, ls, 2.0),
                               rtol=1e-10, atol=1e-14)


def test_blur_families_reduce_full_covariances():
    rng = np.random.default_rng(0)
    covs = np.stack([_random_spd(rng, 3, 1.0) for _ in range(4)])
    sph = blur_covariances(covs, "spherical")  # diagonal families: (M, d) diagonals
    assert sph.shape == (4, 3)
    np.testing.assert_allclose(sph.sum(axis=1), np.trace(covs, axis1=1, axis2=2))
    np.testing.assert_allclose(sph, sph[:, :1] * np.ones(3))
    diag = blur_covariances(covs, "diagonal")
    np.testing.assert_array_equal(diag, np.diagonal(covs, axis1=1, axis2=2))
    assert not blur_covariances(covs, "delta").any()
    assert blur_covariances(covs, "delta").shape == (4, 3)
    np.testing.assert_allclose(blur_covariances(covs, "full"), covs, rtol=1e-15)
    with pytest.raises(ValueError, match="blur must be one of"):
        blur_covariances(covs, "gaussian")


def test_blurred_cross_covariance_is_exact_at_large_row_counts():
    """Row blocking inside the kernel does not change values."""
    rng = np.random.default_rng(1)
    d = 3
    X = rng.normal(size=(20_000, d))
    means = rng.normal(size=(5, d))
    covs = blur_covariances(np.stack([_random_spd(rng, d, 0.5) for _ in range(5)]), "full")
    ls = np.ones(d)
    whole = blurred_cross_covariance(X, means, covs, ls, 1.0)
    parts = np.vstack([blurred_cross_covariance(X[i : i + 3000], means, covs, ls, 1.0)
                       for i in range(0, len(X), 3000)])
    np.testing.assert_allclose(whole, parts, rtol=1e-13, atol=0)


@pytest.mark.parametrize("family", ["delta", "diagonal", "full"])
def test_basis_covariance_in_small_row_blocks(monkeypatch, family):
    """Kh and its weighted gradient, forced through many row blocks (the diagonal
    path for diagonal blurs, the d x d one for full; delta blurs take the means' Gram
    matrix, no blocks): Kh against the
    term-by-term reference, the means' and log lengthscales' gradient against
    central differences of sum W Kh."""
    import saspa_dask.core.kernel_pairs as kernel_pairs
    import saspa_dask.core.kernels as kernels
    from saspa_dask.core.kernel_gradients import basis_covariance_gradient
    from reference import blurred_basis, central_differences

    monkeypatch.setattr(kernel_pairs, "_PAIR_FLOATS", 40)
    rng = np.random.default_rng(5)
    M, d = 7, 3
    means, ls, s2 = rng.normal(size=(M, d)), np.array([0.8, 1.3, 1.1]), 1.7
    A = rng.normal(size=(M, d, d)) * 0.3
    covs = {"delta": np.zeros((M, d, d)),
            "diagonal": np.stack([np.diag(rng.uniform(0.1, 0.6, d)) for _ in range(M)]),
            "full": A @ np.swapaxes(A, 1, 2) + 0.05 * np.eye(d)}[family]
    np.testing.assert_allclose(kernels.basis_covariance(means, covs, ls, s2),
                               blurred_basis(means, covs, ls, s2), rtol=1e-12)
    W = rng.normal(size=(M, M))
    W = W + W.T
    grad = basis_covariance_gradient(W, means, covs, ls, s2)
    fd_means = central_differences(
        lambda v: (W * blurred_basis(v.reshape(M, d), covs, ls, s2)).sum(), means.ravel())
    fd_ls = central_differences(
        lambda v: (W * blurred_basis(means, covs, np.exp(v), s2)).sum(), np.log(ls))
    np.testing.assert_allclose(grad.means.ravel(), fd_means, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(grad.lengthscale, fd_ls, rtol=1e-6, atol=1e-8)
