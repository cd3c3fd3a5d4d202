"""Augmented prediction against a dense implementation of the augmented model.

The reference builds, for each test point x* separately, the function-space prior of
the approximation with the support set "the bases plus a delta basis at x*"
(``reference.blurred_prior``: Q' + diag(k - Q') for FITC, Q' alone for DTC), adds the
noise and conditions on y by dense linear algebra: mean Q'(x*, X) C^{-1} y and
variance k(x*, x*) - Q'(x*, X) C^{-1} Q'(X, x*).
"""

import dask.array as da
import numpy as np
import pytest
import zarr

from saspa_dask import SASPARegressor, kmeans_bases

from reference import blurred_prior


def _data(n=160, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=n) + 0.7
    # on the data, between clusters, far away
    Xs = np.array([[0.1, -0.2], [2.5, 2.5], [-2.9, 0.4], [15.0, 15.0], [0.0, 4.5]])
    return X, y, Xs


def _dense_augmented(X, y, Xs, model, dtc):
    basis = model.bases_
    ls, s2, noise = model.lengthscale_, model.signal_variance_, model.noise_variance_
    jitter = model.jitter_
    yc = y - model.y_mean_
    means, variances = [], []
    for x in Xs:
        m_aug = np.vstack([basis.means, x])
        c_aug = np.concatenate([basis.covs, np.zeros((1, 2, 2))])
        C, q_star, lam = blurred_prior(X, x[None], m_aug, c_aug, ls, s2, jitter)
        if dtc:
            C = C - np.diag(lam)
        C = C + noise * np.eye(len(y))
        q = q_star[:, 0]
        means.append(q @ np.linalg.solve(C, yc) + model.y_mean_)
        variances.append(s2 - q @ np.linalg.solve(C, q))
    return np.array(means), np.array(variances)


@pytest.mark.parametrize("blur,dtc", [("full", False), ("delta", False), ("spherical", True),
                                      ("full", True)])
def test_augmented_prediction_equals_the_dense_augmented_model(blur, dtc):
    X, y, Xs = _data()
    model = SASPARegressor(n_bases=7, blur=blur, approximation="dtc" if dtc else "fitc",
                           lengthscale=[1.1, 0.9],
                           signal_variance=0.8, noise_variance=0.02, jitter=1e-8,
                           optimize_hyperparameters=False, random_state=0).fit(X, y)
    mean, std = model.predict(Xs, return_std=True, augment=(X, y))
    ref_mean, ref_var = _dense_augmented(X, y, Xs, model, dtc)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(std ** 2, ref_var + model.noise_variance_, rtol=1e-7,
                               atol=1e-9)
    # far from the data and the bases both reduce to the prior
    plain_mean, plain_std = model.predict(Xs, return_std=True)
    assert mean[3] == pytest.approx(plain_mean[3], abs=1e-8)
    assert std[3] == pytest.approx(plain_std[3], abs=1e-8)


def test_augmented_prediction_on_dask_and_zarr_training_rows(tmp_path):
    """The same numbers whether the training rows are read from NumPy, a dask array
    of several chunks or a zarr store on disk (and from the rows given explicitly)."""
    X, y, Xs = _data()
    common = dict(n_bases=6, blur="full", lengthscale=[1.0, 1.0], signal_variance=0.8,
                  noise_variance=0.03, optimize_hyperparameters=False, random_state=0)
    basis = kmeans_bases(X, 6, random_state=0)
    in_memory = SASPARegressor(bases=basis, **common).fit(X, y)
    want = in_memory.predict(Xs, return_std=True, augment=(X, y))
    X_lazy, y_lazy = da.from_array(X, chunks=(45, 2)), da.from_array(y, chunks=45)
    lazy = SASPARegressor(bases=basis, **common).fit(X_lazy, y_lazy)
    got = lazy.predict(Xs, return_std=True, augment=(X_lazy, y_lazy))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    Xz = zarr.create_array(str(tmp_path / "X.zarr"), shape=X.shape, chunks=(50, 2),
                           dtype="f8")
    Xz[:] = X
    yz = zarr.create_array(str(tmp_path / "y.zarr"), shape=y.shape, chunks=(50,),
                           dtype="f8")
    yz[:] = y
    got = in_memory.predict(da.from_array(Xs, chunks=2), return_std=True, augment=(Xz, yz))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_augmenting_after_partial_fit_equals_augmenting_a_whole_fit():
    """Gaussian partial_fit is exact, so augmenting after it (with all its rows) equals
    augmenting a fit on all rows."""
    X, y, Xs = _data(n=200)
    common = dict(bases=kmeans_bases(X, 6, random_state=0), lengthscale=[1.0, 1.2],
                  signal_variance=0.9, noise_variance=0.03, optimize_hyperparameters=False,
                  center_y=False)
    whole = SASPARegressor(**common).fit(X, y).predict(Xs, return_std=True, augment=(X, y))
    online = SASPARegressor(**common).fit(X[:120], y[:120]).partial_fit(X[120:], y[120:])
    np.testing.assert_allclose(online.predict(Xs, return_std=True, augment=(X, y)), whole,
                               rtol=1e-8, atol=1e-10)


def test_augmented_prediction_errors_name_the_problem():
    X, y, Xs = _data(n=60)
    robust = SASPARegressor(n_bases=4, likelihood="student_t", random_state=0,
                            optimize_hyperparameters=False).fit(X, y)
    with pytest.raises(ValueError, match="Gaussian likelihood"):
        robust.predict(Xs, augment=(X, y))
    model = SASPARegressor(n_bases=4, random_state=0, optimize_hyperparameters=False)
    model.fit(X, y)
    # the estimator keeps no training rows (nor does its pickle)
    assert not any(isinstance(v, np.ndarray) and v.shape == X.shape
                   for v in vars(model).values())
    with pytest.raises(ValueError, match=r"pass augment=\(X_train, y_train\)"):
        model.predict(Xs, augment=True)
    with pytest.raises(ValueError, match="augment must be"):
        model.predict(Xs, augment="yes")
