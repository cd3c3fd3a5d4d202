"""The package's full-GP EP against the independent dense EP of tests/reference.py
(R&W Algorithm 3.5, written in function space) and closed-form GP regression."""

import numpy as np
import pytest
from scipy.stats import multivariate_normal
from sklearn.utils._param_validation import InvalidParameterError

from saspa_dask import FullGPClassifier, FullGPRegressor, load_model

from reference import full_gp_ep, full_gp_predict, probit_tilted, se


def _two_class(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] + 0.4 * rng.normal(size=n) > 0, 1, 0)
    return X, y


@pytest.mark.filterwarnings("error")
def test_full_gp_classifier_equals_reference_dense_ep():
    X, y = _two_class(70, 0)
    Xs = np.random.default_rng(1).normal(size=(30, 2))
    ls, s2, jitter = np.array([0.9, 1.4]), 2.0, 1e-9
    model = FullGPClassifier(lengthscale=ls, signal_variance=s2, jitter=jitter,
                             ep={"tol": 1e-12, "max_sweeps": 500},
                             optimize_hyperparameters=False).fit(X, y)
    K = se(X, X, ls, s2) + jitter * s2 * np.eye(70)
    tau, nu, mu, Sigma, log_z = full_gp_ep(K, np.where(y == 1, 1.0, -1.0), probit_tilted)
    assert model.log_evidence_ == pytest.approx(log_z, rel=1e-7)
    np.testing.assert_allclose(model.sites_tau_, tau, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(model.sites_nu_, nu, rtol=1e-5, atol=1e-8)
    mean, var = model.predict_latent(Xs)
    ref_mean, ref_var = full_gp_predict(K, se(X, Xs, ls, s2), np.full(30, s2), mu, Sigma)
    # the reference solves with K (condition ~1e9 at this jitter): ~1e-6 round-off
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, ref_var, rtol=1e-5, atol=1e-5)
    assert model.bases_.n_bases == 70 and model.jitter_ == pytest.approx(jitter * s2)


def test_full_gp_regressor_is_exact_gp_regression_at_its_learnt_optimum():
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(60, 1))
    y = np.sin(X[:, 0]) + 0.2 * rng.normal(size=60)
    Xs = np.linspace(-3, 3, 25)[:, None]
    model = FullGPRegressor(jitter=1e-10, ep={"tol": 1e-12}, hyper_tol=1e-8).fit(X, y)
    ls, s2, noise = model.lengthscale_, model.signal_variance_, model.noise_variance_
    c = model.y_mean_  # the learnt constant mean
    yc = y - c
    C = se(X, X, ls, s2) + (noise + 1e-10 * s2) * np.eye(60)
    assert model.log_evidence_ == pytest.approx(
        multivariate_normal(np.zeros(60), C).logpdf(yc), rel=1e-8)
    # at the optimum, the constant mean is the generalised least-squares one at the
    # learnt kernel: 1' C^-1 y / 1' C^-1 1
    ones = np.ones(60)
    gls = ones @ np.linalg.solve(C, y) / (ones @ np.linalg.solve(C, ones))
    assert c == pytest.approx(gls, abs=1e-5 * y.std())
    assert abs(c - y.mean()) > 0.05  # it moved from the start: the test can fail
    Ks = se(X, Xs, ls, s2)
    np.testing.assert_allclose(model.predict(Xs), Ks.T @ np.linalg.solve(C, yc) + c,
                               rtol=1e-6, atol=1e-8)
    # the optimum: the closed-form log marginal likelihood is not higher nearby
    def logml(ls_, s2_, noise_):
        Cn = se(X, X, ls_, s2_) + (noise_ + 1e-10 * s2_) * np.eye(60)
        return multivariate_normal(np.zeros(60), Cn).logpdf(yc)
    best = logml(ls, s2, noise)
    for f in (0.9, 1.1):
        assert logml(ls * f, s2, noise) <= best + 1e-6
        assert logml(ls, s2 * f, noise) <= best + 1e-6
        assert logml(ls, s2, noise * f) <= best + 1e-6


def test_full_gp_refuses_lazy_or_too_large_input(tmp_path):
    import dask.array as da

    X, y = _two_class(50, 2)
    with pytest.raises(ValueError, match="max_samples=40"):
        FullGPClassifier(max_samples=40).fit(X, y)
    with pytest.raises(ValueError, match="dense method"):
        FullGPClassifier().fit(da.from_array(X, chunks=25), da.from_array(y, chunks=25))
    assert not hasattr(FullGPClassifier(), "partial_fit")


def test_the_flat_ep_parameters_still_work_with_a_future_warning():
    """ep_mode, damping, max_sweeps and tol (before ``ep=``) give the fit ``ep`` gives,
    each with a FutureWarning naming its replacement; the full GP's EP is plain unless
    asked (no Anderson step, no coarse start)."""
    X, y = _two_class(60, 3)
    fixed = dict(lengthscale=[1.0, 1.0], signal_variance=2.0, optimize_hyperparameters=False)
    new = FullGPClassifier(ep={"mode": "sequential", "damping": 0.7, "tol": 1e-10},
                           **fixed).fit(X, y)
    with pytest.warns(FutureWarning) as caught:
        old = FullGPClassifier(ep_mode="sequential", damping=0.7, tol=1e-10, **fixed).fit(X, y)
    said = sorted(str(w.message) for w in caught if issubclass(w.category, FutureWarning))
    assert len(said) == 3 and "ep={'mode': 'sequential'}" in said[1]
    np.testing.assert_array_equal(old.sites_tau_, new.sites_tau_)
    assert new.n_anderson_steps_ == 0 and new.coarse_start_ == []
    with pytest.raises(InvalidParameterError, match="'ep' parameter of FullGPClassifier"):
        FullGPClassifier(ep={"tol": -1.0}).fit(X, y)


def test_full_gp_model_round_trips_through_the_store(tmp_path):
    X, y = _two_class(60, 5)
    model = FullGPClassifier(max_hyper_iter=5).fit(X, y)
    model.save(tmp_path / "m.zarr")
    loaded = load_model(tmp_path / "m.zarr")
    assert type(loaded) is FullGPClassifier
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_subset_of_data_is_the_exact_gp_of_a_seeded_sample(tmp_path):
    """subset_of_data=True with 200 rows and max_samples=40: 40 distinct rows drawn by
    the seed (NumPy's generator, as the docstring says), and the posterior is closed-form
    GP regression on those rows alone; saved and loaded with them."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(200, 2))
    y = np.sin(2 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=200)
    Xs = rng.uniform(-2, 2, size=(15, 2))
    ls, s2, noise = np.array([0.8, 1.2]), 1.5, 0.02
    model = FullGPRegressor(lengthscale=ls, signal_variance=s2, noise_variance=noise,
                            optimize_hyperparameters=False, jitter=1e-10, max_samples=40,
                            subset_of_data=True, random_state=7).fit(X, y)
    rows = np.sort(np.random.default_rng(7).choice(200, size=40, replace=False))
    np.testing.assert_array_equal(model.subset_indices_, rows)
    Xr, yr = X[rows], y[rows]
    C = se(Xr, Xr, ls, s2) + (noise + 1e-10 * s2) * np.eye(40)
    Ks = se(Xs, Xr, ls, s2)
    solved = np.linalg.solve(C, np.column_stack([yr - yr.mean(), Ks.T]))
    mean, var = model.predict_latent(Xs)
    np.testing.assert_allclose(mean, yr.mean() + Ks @ solved[:, 0], rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(var, s2 - np.einsum("ij,ji->i", Ks, solved[:, 1:]),
                               rtol=1e-6, atol=1e-8)
    model.save(tmp_path / "sod.zarr")
    np.testing.assert_array_equal(load_model(tmp_path / "sod.zarr").subset_indices_, rows)
    # without the flag, too many rows are still refused, naming the way out
    with pytest.raises(ValueError, match="subset_of_data=True"):
        FullGPRegressor(max_samples=40).fit(X, y)
    assert FullGPRegressor(optimize_hyperparameters=False).fit(X[:30], y[:30]) \
        .subset_indices_.tolist() == list(range(30))
