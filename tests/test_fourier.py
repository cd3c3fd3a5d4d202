"""Frequency inducing features: both covariances against Gauss-Hermite quadrature of
their defining integrals, and the zero-frequency reduction to blurred bases."""

import numpy as np
import pytest

from saspa_dask.core.fourier import fourier_cross_covariance, fourier_feature_covariance
from saspa_dask.core.kernels import (basis_covariance, blur_covariances,
                                     blurred_cross_covariance)

from reference import central_differences, converged_gradient, evidence_differences, se

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


# the features' common scale by definition: (|Lam + 2 C| / |Lam|)^(1/4)
KAPPA = np.prod((LS ** 2 + 2 * C2) / LS ** 2) ** 0.25


def test_cross_covariance_is_the_window_integral():
    X = np.array([[0.0, 0.0], [1.2, -0.7], [-2.0, 1.5]])
    got = fourier_cross_covariance(X, CENTRES, FREQS, PHASES, C2, LS, S2)
    for j in range(3):
        nodes, weights = _window_nodes(CENTRES[j], C2)
        want = KAPPA * se(X, nodes, LS, S2) @ (weights * _window(j, nodes))
        np.testing.assert_allclose(got[:, j], want, rtol=1e-9, atol=1e-12)


def test_feature_covariance_is_the_double_window_integral():
    got = fourier_feature_covariance(CENTRES, FREQS, PHASES, C2, LS, S2)
    for i in range(3):
        ni, wi = _window_nodes(CENTRES[i], C2, 30)
        for j in range(3):
            nj, wj = _window_nodes(CENTRES[j], C2, 30)
            want = KAPPA ** 2 * (wi * _window(i, ni)) @ se(ni, nj, LS, S2) @ (wj * _window(j, nj))
            assert got[i, j] == pytest.approx(want, rel=1e-8, abs=1e-12), (i, j)
    assert np.all(np.linalg.eigvalsh(got) > 0)


def test_zero_frequencies_are_the_multiscale_bases():
    X = np.random.default_rng(0).normal(size=(6, 2))
    zeros, covs = np.zeros((3, 2)), np.repeat(np.diag(C2)[None], 3, axis=0)
    np.testing.assert_allclose(
        fourier_cross_covariance(X, CENTRES, zeros, np.zeros(3), C2, LS, S2),
        KAPPA * blurred_cross_covariance(X, CENTRES, covs, LS, S2), rtol=1e-12)
    Kh = fourier_feature_covariance(CENTRES, zeros, np.zeros(3), C2, LS, S2)
    np.testing.assert_allclose(Kh, KAPPA ** 2 * basis_covariance(CENTRES, covs, LS, S2),
                               rtol=1e-12)
    np.testing.assert_allclose(np.diag(Kh), S2, rtol=1e-14)  # what kappa is for
    # a spherical window: the multiscale GP's bases N(mu_j, c^2 I)
    c2 = np.full(2, 0.6)
    spherical = blur_covariances(np.repeat(np.diag(c2)[None], 3, axis=0), "spherical")
    kappa = np.prod((LS ** 2 + 2 * c2) / LS ** 2) ** 0.25
    np.testing.assert_allclose(
        fourier_cross_covariance(X, CENTRES, zeros, np.zeros(3), c2, LS, S2),
        kappa * blurred_cross_covariance(X, CENTRES, spherical, LS, S2), rtol=1e-12)


def test_feature_covariance_gradient_matches_finite_differences():
    """The closed-form sum_ab W_ab dKh_ab against central differences of that sum,
    with centres far from the origin (the gradient centres them internally)."""
    from saspa_dask.core.fourier import fourier_covariance_gradient

    rng = np.random.default_rng(3)
    M, d = 7, 2
    args = [rng.normal(size=(M, d)) + 40.0, rng.normal(size=(M, d)),
            rng.uniform(0, 2 * np.pi, M), C2.copy(), LS.copy()]
    W = rng.normal(size=(M, M))
    W = W + W.T

    def weighted(a):
        return (W * fourier_feature_covariance(*a, S2)).sum()

    got = fourier_covariance_gradient(W, *args, S2)
    for part, want in enumerate([got.centres, got.frequencies, got.phases, got.window,
                                 got.lengthscale]):
        def moved(x, part=part):
            a = list(args)
            # the lengthscale's derivative is with respect to its log
            a[part] = np.exp(x).reshape(want.shape) if part == 4 else x.reshape(want.shape)
            return weighted(a)

        x0 = np.log(args[4]) if part == 4 else args[part].ravel()
        np.testing.assert_allclose(want.ravel(), central_differences(moved, x0, 1e-6),
                                   rtol=1e-6, atol=1e-8)


# -- learning the features by the EP evidence ----------------------------------------

import dask.array as da  # noqa: E402

from saspa_dask import Basis, SASPARegressor, kmeans_bases  # noqa: E402
from saspa_dask.core.likelihoods import Gaussian, Logistic, Probit  # noqa: E402
from saspa_dask.ep import EPSchedule  # noqa: E402
from saspa_dask.fitting.basis_parameters import LearntFeatures  # noqa: E402
from saspa_dask.fitting.hyperparameters import Hyperparameters  # noqa: E402
from saspa_dask.fitting.trainer import Trainer  # noqa: E402

LS3 = np.array([1.3, 0.9, 1.7])


def _feature_problem(likelihood_name, n=150, M=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    f = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    noisy = f + 0.3 * rng.normal(size=n)
    lik = {"gaussian": Gaussian(0.1), "probit": Probit(), "logistic": Logistic()}[
        likelihood_name]
    y = noisy if likelihood_name == "gaussian" else np.sign(noisy)
    centres = kmeans_bases(X, M, random_state=0).means
    freqs = rng.normal(size=(M, 3)) / LS3
    return X, y, lik, Basis(centres, np.repeat(np.diag([0.3, 0.5, 0.4])[None], M, axis=0),
                            freqs, rng.uniform(0, 2 * np.pi, M))


def _feature_trainer(X, y, basis, work_dir=None, block_rows=50):
    return Trainer(X, y, None, basis.means, basis.covs,
                   EPSchedule("parallel", 1.0, 3000, 1e-12, anderson_memory=0, coarse_start=False), jitter=1e-8,
                   block_rows=block_rows, work_dir=work_dir, frequencies=basis.frequencies,
                   phases=basis.phases)


def _feature_start(lik, basis, window, centres_learnt=True):
    features = LearntFeatures(basis.means, basis.frequencies, basis.phases,
                              basis.window_variance, window, LS3,
                              centres_learnt=centres_learnt)
    return Hyperparameters(LS3.copy(), 1.4, lik.hyperparameters(), bases=features)


def _pinned(basis):
    """The features with every centre on the inputs' origin (FIFGP)."""
    return Basis(np.zeros_like(basis.means), basis.covs, basis.frequencies, basis.phases)


@pytest.mark.parametrize("likelihood_name,window,pinned", [
    ("gaussian", True, False), ("probit", True, False), ("logistic", False, False),
    ("probit", True, True)])
def test_feature_gradient_matches_finite_differences(likelihood_name, window, pinned):
    """Every entry (centres unless pinned, frequencies, phases, windows, kernel and
    likelihood values) against central differences of log Z_EP at fixed sites and
    after re-convergence."""
    X, y, lik, basis = _feature_problem(likelihood_name)
    if pinned:
        basis = _pinned(basis)
    trainer = _feature_trainer(X, y, basis)
    h0 = _feature_start(lik, basis, window, centres_learnt=not pinned)
    grad, sites = converged_gradient(trainer, h0, lik)
    x0 = h0.to_log()
    assert x0.size == 4 + 5 * (4 if pinned else 7) + 3 * window + len(lik.hyperparameters())
    rtol = 1e-6 if likelihood_name != "logistic" else 1e-4
    for reconverge in (False, True):
        fd = evidence_differences(trainer, h0, lik, sites, reconverge)
        np.testing.assert_allclose(grad, fd, rtol=rtol, atol=1e-5 * np.abs(fd).max())


def test_dask_feature_gradient_equals_in_memory(tmp_path):
    X, y, lik, basis = _feature_problem("probit", n=300)
    h0 = _feature_start(lik, basis, True)
    grads = []
    for Xi, yi, work_dir in ((X, y, None),
                             (da.from_array(X, chunks=(70, 3)), da.from_array(y, chunks=70),
                              tmp_path)):
        trainer = _feature_trainer(Xi, yi, basis, work_dir=work_dir, block_rows=64)
        trainer.build(h0)
        grads.append(h0.gradient_vector(trainer.gradient(trainer.run(lik), lik)))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-8, atol=1e-10)


def test_fourier_estimator_learns_saves_and_reloads(tmp_path):
    """blur='fourier' with learnt centres, frequencies, phases and window: the evidence
    rises from its start, predictions survive a model store round trip, and zero
    frequencies with fixed features give the spherical (multiscale) fit exactly."""
    from saspa_dask import load_model
    from saspa_dask.storage import save_model

    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(300, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=300)
    model = SASPARegressor(8, blur="fourier", learn_bases="means+blur", max_hyper_iter=30,
                           random_state=0).fit(X, y)
    info = model.hyperparameter_info_
    assert info["log_evidence_end"] > info["log_evidence_start"] + 100
    assert model.bases_.is_fourier and model.fitted_posterior_.frequencies.shape == (8, 2)
    save_model(model, tmp_path / "m.zarr")
    loaded = load_model(tmp_path / "m.zarr")
    Xt = rng.uniform(-3, 3, size=(50, 2))
    np.testing.assert_array_equal(loaded.predict(Xt), model.predict(Xt))
    assert loaded.fitted_posterior_.fingerprint() == model.fitted_posterior_.fingerprint()
    # a store of features from before their scaling is refused, not misread
    import zarr

    from saspa_dask.files.errors import StoreError

    group = zarr.open_group(str(tmp_path / "m.zarr"), mode="r+")
    attrs = dict(group.attrs)
    del attrs["fourier_scaling"]
    group.attrs.clear()
    group.attrs.update(attrs)
    with pytest.raises(StoreError, match="refit the model"):
        load_model(tmp_path / "m.zarr")
    # zero frequencies and phases: the multiscale model with the same window
    km = kmeans_bases(X, 8, random_state=0)
    window = np.repeat(np.diag([0.5, 0.7])[None], 8, axis=0)
    common = dict(lengthscale=[1.0, 1.2], signal_variance=0.7, noise_variance=0.05,
                  optimize_hyperparameters=False)
    zero = SASPARegressor(blur="fourier", bases=Basis(km.means, window, np.zeros((8, 2))),
                          jitter=1e-8, **common).fit(X, y)
    # the features are kappa times the blurred bases: the same span, and the same
    # model once the jitter (relative to s2) is scaled alike
    kappa2 = np.prod((np.array([1.0, 1.2]) ** 2 + 2 * np.array([0.5, 0.7]))
                     / np.array([1.0, 1.2]) ** 2) ** 0.5
    multiscale = SASPARegressor(blur="diagonal", bases=Basis(km.means, window),
                                jitter=1e-8 / kappa2, **common).fit(X, y)
    np.testing.assert_allclose(zero.predict(Xt), multiscale.predict(Xt), rtol=1e-10)
    assert zero.log_evidence_ == pytest.approx(multiscale.log_evidence_, rel=1e-12)


def test_global_features_keep_one_centre_on_numpy_and_dask():
    """blur='fourier-global' (FIFGP): every feature starts on the inputs' mean with
    the inputs' variance as its window; learning moves frequencies, phases and window
    but leaves the centre exactly; NumPy and Dask input give the same fit."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 2)) * [1.0, 2.0] + [3.0, -1.0]
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=400)
    kw = dict(n_bases=6, blur="fourier-global", learn_bases="means+blur",
              max_hyper_iter=15, random_state=0)
    start = SASPARegressor(**kw).set_params(optimize_hyperparameters=False,
                                            learn_bases=False).fit(X, y)
    np.testing.assert_allclose(start.bases_.means, np.repeat([X.mean(0)], 6, axis=0),
                               rtol=1e-12)
    np.testing.assert_allclose(start.bases_.window_variance, X.var(0), rtol=1e-12)
    fits = [SASPARegressor(**kw).fit(Xi, yi) for Xi, yi in
            ((X, y), (da.from_array(X, chunks=(150, 2)), da.from_array(y, chunks=150)))]
    for model in fits:
        assert np.ptp(model.bases_.means, axis=0).max() == 0.0
        np.testing.assert_allclose(model.bases_.means, start.bases_.means, rtol=1e-12)
        assert not np.allclose(model.bases_.frequencies, start.bases_.frequencies)
        info = model.hyperparameter_info_
        assert info["log_evidence_end"] > info["log_evidence_start"] + 50
    Xt = rng.normal(size=(50, 2))
    np.testing.assert_allclose(fits[1].predict(Xt), fits[0].predict(Xt), rtol=1e-6,
                               atol=1e-6)


def test_global_features_refuse_bases_with_different_centres():
    X = np.random.default_rng(0).normal(size=(40, 2))
    y = X[:, 0]
    bases = Basis(CENTRES, np.repeat(np.diag(C2)[None], 3, axis=0), FREQS, PHASES)
    with pytest.raises(ValueError, match="share one centre"):
        SASPARegressor(blur="fourier-global", bases=bases,
                       optimize_hyperparameters=False).fit(X, y)
    with pytest.raises(ValueError, match="frequency features"):
        SASPARegressor(blur="full", bases=bases, optimize_hyperparameters=False).fit(X, y)
