"""Rows prepared once for a fit's many products (saspa_dask.core.row_features): a
table's two-valued columns (one-hot indicators, a flag coded 2.5 / -1, a constant
column) kept sparse.  Kt and the gradient's moments of prepared rows against the
Gaussian integrals written term by term in reference.py and against weighted sums
written here; the evidence gradient of a fit on such a table, learnt means and blurs
included, against central differences of log Z_EP."""

import numpy as np
import pytest

from saspa_dask import kmeans_bases
from saspa_dask.core.kernel_gradients import cross_moments
from saspa_dask.core.kernels import blur_covariances, blurred_cross_covariance
from saspa_dask.core.likelihoods import Probit
from saspa_dask.core.row_features import PreparedRows
from saspa_dask.ep import EPSchedule
from saspa_dask.fitting.basis_parameters import LearntBases
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.trainer import Trainer

from reference import blurred_cross, converged_gradient, evidence_differences


def _table(n=160, seed=0):
    """Two numbers, a 4-category one-hot column, a flag coded 2.5 / -1 (commoner value
    2.5) and a constant column."""
    rng = np.random.default_rng(seed)
    numbers = rng.normal(size=(n, 2))
    cats = rng.integers(0, 4, size=n)
    onehot = np.eye(4)[cats]
    flag = np.where(rng.random(n) < 0.7, 2.5, -1.0)
    X = np.column_stack([numbers, onehot, flag, np.full(n, 4.0)])
    f = np.sin(numbers[:, 0]) + 0.5 * numbers[:, 1] + 0.6 * (cats % 2) - 0.2 * flag
    y = np.sign(f + 0.3 * rng.normal(size=n))
    return X, y


def test_two_valued_columns_are_sparse_about_their_commoner_value():
    X, _ = _table()
    rows = PreparedRows.of(X)
    np.testing.assert_array_equal(rows.two_valued, [False] * 2 + [True] * 6)
    assert rows.centre[6] == 2.5 and rows.centre[7] == 4.0
    np.testing.assert_array_equal(rows.centre[2:6], 0.0)
    np.testing.assert_array_equal(rows.centre[:2], X[:, :2].mean(axis=0))
    # each row has one indicator on, a third of the flags off their commoner value
    assert rows.indicators.nnz == X.shape[0] + int((X[:, 6] == -1.0).sum())
    assert rows.numbers.shape == (X.shape[0], 2)


@pytest.mark.parametrize("blur", ["delta", "diagonal", "full"])
def test_kt_of_prepared_rows_is_the_gaussian_integral(blur):
    X, _ = _table()
    rng = np.random.default_rng(1)
    means = X[rng.choice(len(X), 6, replace=False)] + 0.1 * rng.normal(size=(6, 8))
    A = rng.normal(size=(6, 8, 8))
    covs = 0.05 * A @ np.swapaxes(A, 1, 2)
    covs = blur_covariances(covs, blur)
    dense = covs if covs.ndim == 3 else np.stack([np.diag(c) for c in covs])
    lengthscale = np.array([1.3, 0.8, 0.7, 1.1, 0.9, 1.6, 2.0, 1.2])
    expected = blurred_cross(X, means, dense, lengthscale, 1.4)
    prepared = PreparedRows.of(X)
    got = blurred_cross_covariance(prepared, means, covs, lengthscale, 1.4)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
    # and row slices of prepared rows are those rows
    np.testing.assert_allclose(
        blurred_cross_covariance(prepared[40:90], means, covs, lengthscale, 1.4),
        expected[40:90], rtol=1e-12, atol=1e-14)


def test_prepared_rows_keep_their_features_across_values_and_slices():
    """Rows prepared for learning build their features once about their own
    centre, and later products at other lengthscales, means and blurs, and row
    slices, read them again; features wider than the width kept are rebuilt."""
    X, _ = _table()
    prepared = PreparedRows.of(X, keep_width=64)
    rng = np.random.default_rng(3)
    for trial in range(3):
        means = X[rng.choice(len(X), 4, replace=False)] + 0.1 * rng.normal(size=(4, 8))
        A = rng.normal(size=(4, 8, 8))
        covs = 0.05 * (trial + 1) * A @ np.swapaxes(A, 1, 2)
        lengthscale = rng.uniform(0.6, 2.0, size=8)
        expected = blurred_cross(X, means, covs, lengthscale, 1.1)
        for rows in (slice(None), slice(13, 101)):
            np.testing.assert_allclose(
                blurred_cross_covariance(prepared[rows], means, covs, lengthscale, 1.1),
                expected[rows], rtol=1e-12, atol=1e-14)
    # 8 inputs: 36 + 8 + 1 features a row, kept within 64 floats, not within 44
    assert prepared.features(False) is prepared.features(False)
    for narrower in (PreparedRows.of(X), PreparedRows.of(X, keep_width=44)):
        assert narrower.features(False) is not narrower.features(False)
        np.testing.assert_array_equal(narrower.features(False), prepared.features(False))
    # the diagonal form's features are the two numbers' 2 + 2 + 1
    assert PreparedRows.of(X, keep_width=5).features(True).shape == (len(X), 5)
    kept = PreparedRows.of(X, keep_width=5)
    assert kept.features(True) is kept.features(True)


@pytest.mark.parametrize("full", [False, True])
def test_moments_of_prepared_rows_are_the_weighted_sums_about_the_bases_centroid(full):
    X, _ = _table()
    rng = np.random.default_rng(2)
    means = rng.normal(size=(5, 8))
    weights = rng.normal(size=(len(X), 5))
    lengthscale = np.linspace(0.6, 1.9, 8)
    z = (X - means.mean(axis=0)) / lengthscale
    m0, m1, m2 = cross_moments(PreparedRows.of(X), weights, means, lengthscale, full)
    np.testing.assert_allclose(m0, weights.sum(axis=0), rtol=1e-12)
    for j in range(5):
        np.testing.assert_allclose(m1[j], weights[:, j] @ z, rtol=1e-11, atol=1e-11)
        second = np.einsum("i,ik,il->kl", weights[:, j], z, z)
        np.testing.assert_allclose(m2[j], second if full else np.diag(second),
                                   rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("blur", ["diagonal", "delta", "full"])
def test_the_evidence_gradient_on_a_one_hot_table_is_its_central_differences(blur):
    """A Trainer prepares its rows; its gradient (lengthscales, signal variance, the
    means and, for blurred bases, the blur parameters) against central differences of
    log Z_EP at fixed sites and after EP re-converges."""
    X, y = _table()
    basis = kmeans_bases(X, 5, random_state=0)
    covs = blur_covariances(basis.covs, blur)
    trainer = Trainer(X, y, None, basis.means, covs,
                      EPSchedule("parallel", 1.0, 3000, 1e-12, anderson_memory=0,
                                 coarse_start=False),
                      jitter=1e-8, block_rows=60)
    assert all(isinstance(rows, PreparedRows) for rows in trainer.inputs)
    lengthscale = np.array([1.3, 0.9, 1.1, 0.8, 1.2, 1.0, 1.5, 1.7])
    bases = LearntBases(basis.means, covs, blur, blur != "delta", lengthscale)
    h0 = Hyperparameters(lengthscale, 1.4, {}, bases=bases)
    grad, sites = converged_gradient(trainer, h0, Probit())
    assert np.abs(grad[9:9 + basis.means.size]).max() > 0.01  # the means move it
    for reconverge in (False, True):
        fd = evidence_differences(trainer, h0, Probit(), sites, reconverge)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-5 * np.abs(fd).max())
