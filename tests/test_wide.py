"""Wide tables: diagonal blurs are kept as (M, d) diagonals, never as an M d x d stack.

At d = 3,000 inputs and M = 8 bases an (M, d, d) stack is 576 MB; the fits below must
stay far under that (measured with tracemalloc, which NumPy reports its buffers to),
give the closed-form predictions of their approximation (written here for diagonal
blurs, per input, without d x d matrices), and save the diagonals, not the stack.
"""

import tracemalloc

import numpy as np
import pytest
import zarr

from reference import fitc_regression
from saspa_dask import Basis, SASPARegressor, load_model

D, M, N = 3000, 8, 240
STACK_BYTES = M * D * D * 8  # what an (M, d, d) blur stack would take


def _wide_rows(seed=0):
    """One-hot columns of a 1,000-category text column and its neighbours (at most a
    few ones per row) and two numeric inputs; y depends on the numeric inputs and on
    which of four category blocks a row is in."""
    rng = np.random.default_rng(seed)
    X = np.zeros((N, D))
    cats = rng.integers(0, 1000, size=N)
    X[np.arange(N), cats] = 1.0
    X[np.arange(N), 1000 + rng.integers(0, 1998, size=N)] = 1.0
    X[:, -2:] = rng.normal(size=(N, 2))
    y = np.sin(X[:, -2]) + 0.5 * X[:, -1] + 0.3 * (cats % 4) + 0.1 * rng.normal(size=N)
    return X, y


def _peak_bytes(fit):
    tracemalloc.start()
    try:
        result = fit()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _diagonal_blur_prediction(X, y, Xs, means, blur, ls, s2, noise, jitter):
    """FITC-style predictions of diagonal-blur bases, written per input: Kt and Kh of
    bases N(a_j, diag(c_j)) are products over inputs of 1-D Gaussian integrals of the
    SE kernel (docs/design.md, section 2), then the Gaussian regression with the prior
    Q + diag(s2 - q_i) and the noise."""
    def cross(Z):
        var = ls**2 + blur  # (M, d)
        amp = s2 * np.exp(0.5 * np.log(ls**2 / var).sum(axis=1))
        quad = ((Z[:, None, :] - means[None]) ** 2 / var[None]).sum(axis=-1)
        return amp * np.exp(-0.5 * quad)

    var = ls**2 + blur[:, None, :] + blur[None, :, :]
    Kh = s2 * np.exp(0.5 * np.log(ls**2 / var).sum(-1)
                     - 0.5 * ((means[:, None] - means[None]) ** 2 / var).sum(-1))
    Kh += jitter * np.eye(len(means))
    Kt, Ks = cross(X), cross(Xs)
    Q = Kt @ np.linalg.solve(Kh, Kt.T)
    lam = np.maximum(s2 - np.diag(Q), 0.0)
    Qs = Kt @ np.linalg.solve(Kh, Ks.T)
    C = Q + np.diag(lam + noise)
    mean = Qs.T @ np.linalg.solve(C, y)
    # f* = its projection plus its own residual: prior variance s2, and only the
    # projection correlates with the training rows
    return mean, s2 - np.einsum("ij,ij->j", Qs, np.linalg.solve(C, Qs))


def _fixed(**kw):
    return SASPARegressor(n_bases=M, optimize_hyperparameters=False, lengthscale=2.0,
                          signal_variance=1.3, noise_variance=0.05, center_y=False,
                          random_state=0, **kw)


def test_a_wide_delta_fit_is_closed_form_fitc_without_a_blur_stack():
    X, y = _wide_rows()
    Xs = _wide_rows(seed=1)[0][:30]
    Z = X[:M] + 0.1
    model, peak = _peak_bytes(lambda: _fixed(bases=Basis(Z), blur="delta").fit(X, y))
    assert model.bases_.blur.shape == (M, D) and not model.bases_.blur.any()
    assert peak < STACK_BYTES / 5, peak / 2**20
    ls = np.full(D, 2.0)
    mean_ref, var_ref, logml_ref = fitc_regression(X, y, Xs, Z, ls, 1.3, 0.05,
                                                   model.jitter_)
    mean, var = model.predict_latent(Xs)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(var, var_ref, rtol=1e-8, atol=1e-8)
    assert model.log_evidence_ == pytest.approx(logml_ref, rel=1e-9)


def test_a_wide_diagonal_blur_fit_matches_its_closed_form_and_saves_diagonals(tmp_path):
    X, y = _wide_rows()
    Xs = _wide_rows(seed=1)[0][:30]
    model, peak = _peak_bytes(lambda: _fixed(blur="diagonal").fit(X, y))
    blur = model.bases_.blur
    assert blur.shape == (M, D) and blur.min() > 0  # K-means' shrunk diagonals
    assert peak < STACK_BYTES / 5, peak / 2**20
    mean_ref, var_ref = _diagonal_blur_prediction(
        X, y, Xs, model.bases_.means, blur, np.full(D, 2.0), 1.3, 0.05, model.jitter_)
    mean, var = model.predict_latent(Xs)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(var, var_ref, rtol=1e-7, atol=1e-8)
    # saved as diagonals (an (M, d, d) array would be 576 MB), loaded to the same model
    model.save(tmp_path / "m.zarr")
    stored = zarr.open_group(str(tmp_path / "m.zarr"), mode="r")["bases_covs"]
    assert stored.shape == (M, D)
    back = load_model(tmp_path / "m.zarr")
    np.testing.assert_array_equal(back.predict_latent(Xs)[0], mean)
    assert back.fitted_posterior_.fingerprint() == model.fitted_posterior_.fingerprint()


def test_small_diagonal_blurs_are_saved_as_matrices_as_before(tmp_path):
    """Below 2^24 floats a store keeps (M, d, d) matrices, as stores always did (older
    readers and fingerprints of saved models stay valid)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    model = _fixed(blur="diagonal").fit(X, y)
    assert model.bases_.blur.shape == (M, 3)
    np.testing.assert_array_equal(model.bases_.covs,
                                  np.stack([np.diag(c) for c in model.bases_.blur]))
    model.save(tmp_path / "m.zarr")
    stored = zarr.open_group(str(tmp_path / "m.zarr"), mode="r")["bases_covs"]
    assert stored.shape == (M, 3, 3)
    np.testing.assert_array_equal(stored[...], model.bases_.covs)
    assert load_model(tmp_path / "m.zarr").fitted_posterior_.fingerprint() == model.fitted_posterior_.fingerprint()
