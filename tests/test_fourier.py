"""Frequency inducing features: both covariances against Gauss-Hermite quadrature of
their defining integrals, and the zero-frequency reduction to blurred bases."""

import numpy as np
import pytest

from saspa_dask.core.fourier import fourier_cross_covariance, fourier_feature_covariance
from saspa_dask.core.kernels import basis_covariance, blurred_cross_covariance

from reference import se

LS, S2 = np.array([0.7, 1.3]), 1.8
C2 = np.array([0.4, 0.9])
CENTRES = np.array([[0.2, -0.5], [1.0, 0.3], [-0.6, 0.8]])
FREQS = np.array([[1.5, -0.4], [0.0, 2.0], [-0.8, 0.6]])
PHASES = np.array([0.3, -1.1, 2.0])


def _window_nodes(centre, c2, n=40):
    """Gauss-Hermite nodes and weights for E over x ~ N(centre, diag(c2)), d = 2."""
    x, w = np.polynomial.hermite.hermgauss(n)
    gx, gy = np.meshgrid(x, x, indexing="ij")
    nodes = np.column_stack([gx.ravel(), gy.ravel()]) * np.sqrt(2 * c2) + centre
    return nodes, np.outer(w, w).ravel() / np.pi


def _window(j, nodes):
    return np.cos(PHASES[j] + (nodes - CENTRES[j]) @ FREQS[j])


def test_cross_covariance_is_the_window_integral():
    X = np.array([[0.0, 0.0], [1.2, -0.7], [-2.0, 1.5]])
    got = fourier_cross_covariance(X, CENTRES, FREQS, PHASES, C2, LS, S2)
    for j in range(3):
        nodes, weights = _window_nodes(CENTRES[j], C2)
        want = se(X, nodes, LS, S2) @ (weights * _window(j, nodes))
        np.testing.assert_allclose(got[:, j], want, rtol=1e-9, atol=1e-12)


def test_feature_covariance_is_the_double_window_integral():
    got = fourier_feature_covariance(CENTRES, FREQS, PHASES, C2, LS, S2)
    for i in range(3):
        ni, wi = _window_nodes(CENTRES[i], C2, 30)
        for j in range(3):
            nj, wj = _window_nodes(CENTRES[j], C2, 30)
            want = (wi * _window(i, ni)) @ se(ni, nj, LS, S2) @ (wj * _window(j, nj))
            assert got[i, j] == pytest.approx(want, rel=1e-8, abs=1e-12), (i, j)
    assert np.all(np.linalg.eigvalsh(got) > 0)


def test_zero_frequencies_are_the_multiscale_bases():
    X = np.random.default_rng(0).normal(size=(6, 2))
    zeros, covs = np.zeros((3, 2)), np.repeat(np.diag(C2)[None], 3, axis=0)
    np.testing.assert_allclose(
        fourier_cross_covariance(X, CENTRES, zeros, np.zeros(3), C2, LS, S2),
        blurred_cross_covariance(X, CENTRES, covs, LS, S2), rtol=1e-12)
    np.testing.assert_allclose(
        fourier_feature_covariance(CENTRES, zeros, np.zeros(3), C2, LS, S2),
        basis_covariance(CENTRES, covs, LS, S2), rtol=1e-12)
