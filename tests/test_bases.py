"""K-means bases and the documented covariance shrinkage rule."""

import numpy as np
import pytest

from saspa_dask import Basis, kmeans_bases
from saspa_dask.core.bases import shrunk_covariances


def test_shrinkage_rule_by_hand():
    rng = np.random.default_rng(0)
    d = 3
    counts = np.array([1.0, 50.0])
    big = rng.normal(size=(50, d)) @ np.diag([1.0, 2.0, 0.5])
    scatter = np.stack([np.zeros((d, d)), (big - big.mean(0)).T @ (big - big.mean(0))])
    total_var = np.array([4.0, 9.0, 1.0])
    covs = shrunk_covariances(counts, scatter, total_var)
    D = np.diag(np.diagonal(scatter[1]) / 51.0)  # pooled: (0 + scatter) / (1 + 50)
    n0 = d + 2
    np.testing.assert_allclose(covs[0], n0 * D / (1 + n0))
    np.testing.assert_allclose(covs[1], (scatter[1] + n0 * D) / (50 + n0))
    assert np.all(np.linalg.eigvalsh(covs) > 0)


def test_all_singletons_use_the_floor():
    X = np.arange(12.0).reshape(4, 3) ** 1.5
    covs = shrunk_covariances(np.ones(4), np.zeros((4, 3, 3)), X.var(0))
    np.testing.assert_allclose(np.diagonal(covs, axis1=1, axis2=2),
                               np.tile(1e-6 * X.var(0) * 5 / 6, (4, 1)))


def test_kmeans_bases_are_pd_deterministic_and_close_to_cluster_covariances():
    rng = np.random.default_rng(1)
    centres = np.array([[0, 0, 0], [20, 0, 0], [0, 20, 0]], float)
    A = [np.array([[1, 0.5, 0], [0, 1, 0], [0, 0, 0.2]]) * s for s in (1, 2, 0.5)]
    X = np.vstack([c + rng.normal(size=(2000, 3)) @ a for c, a in zip(centres, A)])
    outlier = np.array([[100.0, 100.0, 100.0]])  # a singleton cluster
    X = np.vstack([X, outlier])
    b1 = kmeans_bases(X, 4, random_state=0)
    b2 = kmeans_bases(X, 4, random_state=0)
    np.testing.assert_array_equal(b1.means, b2.means)
    np.testing.assert_array_equal(b1.covs, b2.covs)
    assert np.all(np.linalg.eigvalsh(b1.covs) > 0)
    for c, a in zip(centres, A):
        j = np.argmin(((b1.means - c) ** 2).sum(1))
        np.testing.assert_allclose(b1.covs[j], a.T @ a, atol=0.1 * np.abs(a.T @ a).max())
    j = np.argmin(((b1.means - outlier) ** 2).sum(1))
    np.testing.assert_allclose(b1.means[j], outlier[0])


def test_too_few_distinct_points_drops_duplicate_clusters():
    X = np.repeat(np.array([[0.0, 1.0], [2.0, 3.0], [5.0, 0.0]]), 5, axis=0)
    with pytest.warns(UserWarning, match="found 3 distinct clusters for n_bases=6"):
        basis = kmeans_bases(X, 6, random_state=0)
    assert basis.n_bases == 3
    assert len(np.unique(basis.means, axis=0)) == 3


def test_basis_defaults_to_delta_and_validates():
    b = Basis([[0.0, 1.0]])
    assert b.covs.shape == (1, 2, 2) and not b.covs.any()
    with pytest.raises(ValueError, match="NaN"):
        Basis([[np.nan, 1.0]])
    with pytest.raises(ValueError, match="symmetric"):
        Basis([[0.0, 1.0]], [[[1.0, 0.5], [0.0, 1.0]]])


def test_lloyd_on_a_sample_of_the_rows():
    """Beyond ``lloyd_rows`` the Lloyd passes run on a seeded sample: the same bases
    for NumPy and chunked Dask input, and on 30 well-separated clusters the same
    partition quality as Lloyd over every row (squared error within 1%)."""
    import dask.array as da

    from saspa_dask.engines.kmeans import kmeans

    rng = np.random.default_rng(5)
    centres = rng.uniform(-20, 20, size=(30, 3))
    X = centres[rng.integers(0, 30, size=60_000)] + rng.normal(size=(60_000, 3))
    sampled, info = kmeans(X, 30, random_state=2, lloyd_rows=6_000)
    assert info["lloyd_rows"] == 6_000
    lazy, _ = kmeans(da.from_array(X, chunks=(7_000, 3)), 30, random_state=2,
                     lloyd_rows=6_000)
    np.testing.assert_allclose(lazy.means, sampled.means, rtol=1e-10, atol=1e-12)
    full, full_info = kmeans(X, 30, random_state=2, lloyd_rows=60_000)
    assert full_info["lloyd_rows"] == 60_000

    def error(basis):
        return ((X[:, None, :] - basis.means[None]) ** 2).sum(-1).min(1).sum()

    assert error(sampled) <= 1.01 * error(full)


def test_diagonal_covariances_follow_the_rule_from_the_clusters_variances():
    """K-means without the full scatter (delta, spherical, diagonal blurs: O(N d), not
    O(N d^2)) gives the shrinkage rule on each cluster's per-input variances, computed
    here from the clusters the means define, and zeros off the diagonal."""
    from saspa_dask.engines.kmeans import kmeans

    rng = np.random.default_rng(4)
    X = np.vstack([c + rng.normal(size=(400, 4)) * s
                   for c, s in ((0.0, 0.5), (8.0, 1.5), (-8.0, 1.0))])
    basis, _ = kmeans(X, 3, random_state=0, full_covariances=False)
    labels = np.argmin(((X[:, None, :] - basis.means[None]) ** 2).sum(-1), axis=1)
    counts = np.bincount(labels, minlength=3).astype(float)
    scatter = np.stack([((X[labels == j] - basis.means[j]) ** 2).sum(0) for j in range(3)])
    n0 = 4 + 2
    pooled = scatter.sum(0) / counts.sum()
    expected = (scatter + n0 * pooled) / (counts[:, None] + n0)
    np.testing.assert_allclose(np.diagonal(basis.covs, axis1=1, axis2=2), expected,
                               rtol=1e-10)
    off = basis.covs * (1 - np.eye(4))
    assert not off.any()
    full, _ = kmeans(X, 3, random_state=0)
    np.testing.assert_array_equal(full.means, basis.means)
    assert np.abs(full.covs * (1 - np.eye(4))).max() > 1e-3  # the full scatter has them


def test_scaled_bases_check_their_means_and_scale_without_copying():
    """``Basis.scaled`` (a learnt point's bases in every optimiser evaluation): the
    covariances of a checked Basis times a positive scale, the means checked."""
    rng = np.random.default_rng(0)
    checked = Basis(rng.normal(size=(3, 2)), np.stack([np.eye(2)] * 3))
    same = Basis.scaled(checked.means + 1.0, checked.blur)
    assert same.blur is checked.blur  # not copied
    np.testing.assert_array_equal(Basis.scaled(checked.means, checked.blur, 2.5).covs,
                                  2.5 * checked.covs)
    with pytest.raises(ValueError, match="finite"):
        Basis.scaled(np.full((3, 2), np.nan), checked.blur)
    with pytest.raises(ValueError, match="shape"):
        Basis.scaled(np.zeros((4, 2)), checked.blur)
    with pytest.raises(ValueError, match="blur_scale"):
        Basis.scaled(checked.means, checked.covs, 0.0)
