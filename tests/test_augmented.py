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

from scipy.stats import norm

from saspa_dask import SASPAClassifier, SASPARegressor, kmeans_bases
from saspa_dask.models.augmented import augmented_ep_latent

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
    fourier = SASPARegressor(n_bases=4, blur="fourier", likelihood="student_t",
                             random_state=0, optimize_hyperparameters=False).fit(X, y)
    with pytest.raises(ValueError, match="frequency features cannot be mixed"):
        fourier.predict(Xs, augment=(X, y), return_std=True)
    model = SASPARegressor(n_bases=4, random_state=0, optimize_hyperparameters=False)
    model.fit(X, y)
    # the estimator keeps no training rows (nor does its pickle)
    assert not any(isinstance(v, np.ndarray) and v.shape == X.shape
                   for v in vars(model).values())
    with pytest.raises(ValueError, match=r"pass augment=\(X_train, y_train\)"):
        model.predict(Xs, augment=True)
    with pytest.raises(ValueError, match="augment must be"):
        model.predict(Xs, augment="yes")


# ----------------------------------------------------------------------------------
# Every other likelihood: EP again on the augmented support
# ----------------------------------------------------------------------------------


def _hermite_tilted(log_lik, n=200):
    """Tilted moments of exp(log_lik(y, f)) N(f | mu, var) by Gauss-Hermite (n nodes)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(n)
    weights = weights / weights.sum()

    def tilted(y, mu, var):
        y, mu, var = (np.asarray(a, dtype=float)[..., None] for a in (y, mu, var))
        f = mu + np.sqrt(var) * nodes
        w = weights * np.exp(log_lik(y, f))
        Z = w.sum(axis=-1)
        mean = (w * f).sum(axis=-1) / Z
        return np.log(Z), mean, (w * (f - mean[..., None]) ** 2).sum(axis=-1) / Z

    return tilted


def _logistic(y, f):
    return -np.logaddexp(0.0, -y * f)


def _student_t(dof, scale):
    from scipy.stats import t as student

    return lambda y, f: student.logpdf(y - f, dof, scale=scale)


@pytest.mark.parametrize("case", ["probit", "logistic", "student_t"])
def test_augmented_ep_equals_dense_ep_on_the_augmented_support(case):
    """For each test row, dense EP (R&W Algorithm 3.5) on the approximation's prior
    with the support "bases plus a delta basis at the test row", then the dense
    predictive at the test row."""
    from reference import full_gp_ep, full_gp_predict, probit_tilted

    rng = np.random.default_rng(11)
    X = rng.uniform(-2.5, 2.5, size=(70, 2))
    f = np.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1]
    Xs = np.array([[0.2, -0.3], [2.2, -2.4], [12.0, 0.0]])
    common = dict(n_bases=5, blur="full", lengthscale=[0.9, 1.3], signal_variance=1.5,
                  optimize_hyperparameters=False, random_state=0, jitter=1e-8,
                  ep={"tol": 1e-11, "max_sweeps": 500})
    if case == "student_t":
        # scale 0.6: the likelihood's 256-node quadrature is exact to 1e-9 here; with a
        # scale far below the cavity's spread (0.2 against sd 1.2) it errs by ~1e-4
        y = f + 0.6 * rng.standard_t(4, size=70)
        model = SASPARegressor(likelihood="student_t", dof=4.0, scale=0.6, **common)
        tilted, targets = _hermite_tilted(_student_t(4.0, 0.6)), None
    else:
        y = (f + 0.3 * rng.normal(size=70) > 0).astype(int)
        model = SASPAClassifier(likelihood=case, **common)
        tilted = probit_tilted if case == "probit" else _hermite_tilted(_logistic)
        targets = 2.0 * y - 1
    model.fit(X, y)
    if case == "student_t":
        targets = y - model.y_mean_
        mean, std = model.predict(Xs, return_std=True, augment=(X, y))
        latent_mean = mean - model.y_mean_
    else:
        proba = model.predict_proba(Xs, augment=(X, y))[:, 1]
        latent_mean, latent_var = (a[:, 0] for a in augmented_ep_latent(model, Xs, X, y))
    basis, ls, s2 = model.bases_, model.lengthscale_, model.signal_variance_
    for i, x in enumerate(Xs):
        means = np.vstack([basis.means, x])
        covs = np.concatenate([basis.covs, np.zeros((1, 2, 2))])
        K, Ks, _ = blurred_prior(X, x[None], means, covs, ls, s2, model.jitter_)
        _, _, mu, Sigma, _ = full_gp_ep(K, targets, tilted)
        m, v = full_gp_predict(K, Ks, s2, mu, Sigma)
        assert latent_mean[i] == pytest.approx(m[0], abs=1e-7)
        if case == "student_t":
            want = np.sqrt(v[0] + 0.6 ** 2 * 4.0 / 2.0)  # the latent's and the noise's
            assert std[i] == pytest.approx(want, abs=1e-7)
        else:
            assert latent_var[i] == pytest.approx(v[0], abs=1e-7)
        if case == "probit":
            assert proba[i] == pytest.approx(norm.cdf(m[0] / np.sqrt(1 + v[0])), abs=1e-7)
    if case != "student_t":
        # on the data augmentation moves the probability; far away both are the prior's
        plain = model.predict_proba(Xs)[:, 1]
        assert abs(proba[0] - plain[0]) > 1e-3
        assert proba[2] == pytest.approx(plain[2], abs=1e-6)
