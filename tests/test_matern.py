"""Matérn kernels (saspa_dask.core.kernel_profiles): the profiles against the general
Matérn formula (Bessel K) and scikit-learn's ``Matern``, the blurred forms against
numerical integration, the evidence gradient against finite differences, the
Gaussian-likelihood fit against a closed-form FITC with scikit-learn's kernel, the
model store, and the refusals."""

import numpy as np
import pytest
from scipy import integrate
from scipy.special import gamma, kv
from sklearn.gaussian_process.kernels import Matern

from saspa_dask import Basis, SASPAClassifier, SASPARegressor, kmeans_bases, load_model
from saspa_dask.core.kernel_profiles import MIXTURE_ERROR, MIXTURE_FLOOR, KernelProfile
from saspa_dask.core.kernels import basis_covariance, blur_covariances, blurred_cross_covariance
from saspa_dask.core.likelihoods import Gaussian, Probit
from saspa_dask.ep import EPSchedule
from saspa_dask.files.errors import StoreError
from saspa_dask.fitting.basis_parameters import LearntBases
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.trainer import Trainer

from reference import converged_gradient, engine_gradients, evidence_differences

NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def matern(distance, nu):
    """The general Matérn correlation 2^(1-nu)/Gamma(nu) (sqrt(2 nu) d)^nu K_nu(...),
    written from its definition (d already divided by the lengthscale)."""
    r = np.sqrt(2.0 * nu) * np.maximum(np.abs(distance), 1e-300)
    with np.errstate(invalid="ignore", over="ignore"):  # 0 * inf where masked below
        value = 2.0 ** (1.0 - nu) / gamma(nu) * r ** nu * kv(nu, r)
    return np.where(np.abs(distance) > 0, value, 1.0)


@pytest.mark.parametrize("name", list(NU))
def test_profiles_are_the_matern_kernels_and_the_mixtures_are_within_their_bound(name):
    nu, profile = NU[name], KernelProfile(name)
    d = np.concatenate([np.linspace(0, 0.1, 2001), np.linspace(0.1, 40.0, 40000)])
    truth = matern(d, nu)
    np.testing.assert_allclose(profile.value(d * d), truth, rtol=1e-10, atol=1e-14)
    # the gradient's weight is -2 dk/du, u = d^2: central differences of the truth
    u = np.linspace(0.05, 30.0, 200)
    eps = 1e-6
    slope = (matern(np.sqrt(u + eps), nu) - matern(np.sqrt(u - eps), nu)) / (2 * eps)
    np.testing.assert_allclose(profile.weight(u), -2.0 * slope, rtol=1e-6)
    # relative to the kernel down to the floor, in the tails too (a finer grid, and
    # farther out, than the one the weights were chosen on)
    d = np.concatenate([d, np.linspace(40.0, 80.0, 4001)])
    truth = matern(d, nu)
    gap = (np.abs(profile.mixture_value(d * d) - truth) / np.maximum(truth, MIXTURE_FLOOR))
    assert gap.max() <= MIXTURE_ERROR[nu]
    assert gap.max() > 0.5 * MIXTURE_ERROR[nu]  # the bound is the mixture's, not loose
    tail = (truth < 1e-3) & (truth >= MIXTURE_FLOOR)
    assert tail.any() and gap[tail].max() <= MIXTURE_ERROR[nu]
    scales, weights = profile.mixture
    assert np.all(weights > 0) and weights.sum() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize("name", list(NU))
def test_delta_blur_is_scikit_learns_matern_exactly(name):
    rng = np.random.default_rng(1)
    X, A = rng.normal(size=(30, 3)), rng.normal(size=(7, 3))
    ls, s2 = np.array([0.6, 1.4, 2.5]), 1.7
    reference = s2 * Matern(length_scale=ls, nu=NU[name])
    zeros = np.zeros((7, 3, 3))
    np.testing.assert_allclose(blurred_cross_covariance(X, A, zeros, ls, s2, kernel=name),
                               reference(X, A), rtol=1e-10, atol=1e-13)
    np.testing.assert_allclose(basis_covariance(A, zeros, ls, s2, kernel=name),
                               reference(A, A), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("name", list(NU))
def test_blurred_matern_is_the_integral_of_matern_against_the_blur(name):
    """1-D: Kt(x, j) = int k(x - z) N(z; a, c) dz and Kh(i, j) = int k(t) N(t; a_i - a_j,
    c_i + c_j) dt, by adaptive quadrature (the kink at 0 as a break point); the mixture
    is within MIXTURE_ERROR max(k, MIXTURE_FLOOR) of Matérn everywhere, so its
    integrals are within MIXTURE_ERROR (K + MIXTURE_FLOOR s2): relative, in the tails
    too (x = 6.5 and 9 are far out; small blurs, where the issue found 10% errors)."""
    nu, ls, s2 = NU[name], np.array([0.8]), 1.3
    means, variances = np.array([[0.3], [-1.1], [0.1]]), np.array([0.25, 1.7, 0.01])
    covs = variances[:, None, None] * np.ones((3, 1, 1))
    X = np.array([[-2.0], [0.0], [0.4], [2.5], [6.5], [9.0]])

    def blurred(centre, variance, x):
        sd = np.sqrt(variance)
        density = lambda z: np.exp(-0.5 * (z - centre) ** 2 / variance) / np.sqrt(
            2 * np.pi * variance)
        return integrate.quad(lambda z: s2 * matern((x - z) / ls[0], nu) * density(z),
                              centre - 12 * sd, centre + 12 * sd, points=[x],
                              epsabs=1e-12, epsrel=1e-12, limit=200)[0]

    Kt = blurred_cross_covariance(X, means, covs, ls, s2, kernel=name)
    Kh = basis_covariance(means, covs, ls, s2, kernel=name)
    def bound(exact):  # quadrature's own error is 1e-12 relative
        return MIXTURE_ERROR[nu] * (exact + MIXTURE_FLOOR * s2) + 1e-12 * s2

    smallest = s2
    for i, x in enumerate(X[:, 0]):
        for j in range(3):
            exact = blurred(means[j, 0], variances[j], x)
            assert abs(Kt[i, j] - exact) <= bound(exact)
            smallest = min(smallest, exact)
    for i in range(3):
        for j in range(3):
            exact = blurred(means[i, 0] - means[j, 0], variances[i] + variances[j], 0.0)
            assert abs(Kh[i, j] - exact) <= bound(exact)
    assert smallest < 1e-3 * s2  # the tail is tested
    # and the blur matters: the delta-blur values are far from these
    assert np.abs(Kt - blurred_cross_covariance(X, means, 0 * covs, ls, s2,
                                                kernel=name)).max() > 0.05


def test_full_blur_in_two_dimensions_is_the_integral_of_matern():
    """2-D, a correlated blur: Gauss-Hermite on 120 x 120 nodes in the blur's own
    frame (Matérn 5/2 is smooth enough for it)."""
    nu, ls, s2 = 2.5, np.array([0.7, 1.5]), 0.9
    mean = np.array([[0.2, -0.4]])
    C = np.array([[[0.5, 0.3], [0.3, 0.4]]])
    x = np.array([[0.9, 0.1], [-1.0, 0.6]])
    nodes, weights = np.polynomial.hermite_e.hermegauss(120)
    weights = weights / weights.sum()
    chol = np.linalg.cholesky(C[0])
    grid = np.stack(np.meshgrid(nodes, nodes, indexing="ij"), -1).reshape(-1, 2)
    w = np.outer(weights, weights).ravel()
    z = mean[0] + grid @ chol.T
    Kt = blurred_cross_covariance(x, mean, C, ls, s2, kernel="matern52")
    for i in range(2):
        dist = np.sqrt((((x[i] - z) / ls) ** 2).sum(1))
        exact = s2 * (w * matern(dist, nu)).sum()
        assert abs(Kt[i, 0] - exact) <= MIXTURE_ERROR[nu] * (exact + MIXTURE_FLOOR * s2)


def _problem(likelihood, blur, seed=0, n=200, d=3, M=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    y = f + 0.3 * rng.normal(size=n)
    lik = Gaussian(0.1)
    if likelihood == "probit":
        y, lik = np.sign(y), Probit()
    basis = kmeans_bases(X, M, random_state=0)
    return X, y, lik, basis.means, blur_covariances(basis.covs, blur)


@pytest.mark.parametrize("name,likelihood,blur,learn", [
    ("matern12", "gaussian", "delta", None), ("matern32", "probit", "delta", "means"),
    ("matern52", "gaussian", "full", "means+blur"), ("matern32", "probit", "full", None),
    ("matern32", "probit", "diagonal", None),
    ("matern12", "probit", "spherical", "means")])
def test_matern_gradient_matches_finite_differences(name, likelihood, blur, learn):
    """Every entry (lengthscales, s2, blur scale, the bases' means and blurs, the
    likelihood's) against central differences of log Z_EP, at fixed sites and after
    EP re-converges: the exact delta-blur form and the blurred mixtures."""
    X, y, lik, means, covs = _problem(likelihood, blur)
    trainer = Trainer(X, y, None, means, covs,
                      EPSchedule("parallel", 1.0, 3000, 1e-12, anderson_memory=0,
                                 coarse_start=False), jitter=1e-8, block_rows=70)
    ls = np.array([1.3, 0.9, 1.7])
    bases = None if learn is None else LearntBases(means, covs, blur, learn == "means+blur",
                                                   ls)
    # a blur scale (0.7, learnt) only beside bases that are not learnt, as a fit has it
    h0 = Hyperparameters(ls.copy(), 1.4, lik.hyperparameters(), 0.7 if learn is None else 1.0,
                         learn_blur_scale=blur != "delta" and learn is None, bases=bases,
                         kernel=name)
    grad, sites = converged_gradient(trainer, h0, lik)
    if learn is not None:
        assert np.abs(grad[4:4 + means.size]).max() > 0.1  # the means move the evidence
    for reconverge in (False, True):
        fd = evidence_differences(trainer, h0, lik, sites, reconverge)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-5 * np.abs(fd).max())


@pytest.mark.parametrize("blur", ["delta", "full"])
def test_the_dask_engine_gives_the_in_memory_gradient(blur, tmp_path):
    """The kernel reaches the workers: Dask chunks (their blocks and gradient sums)
    against the in-memory engine, the exact delta form and a blurred mixture."""
    X, y, lik, means, covs = _problem("probit", blur, n=300)
    bases = LearntBases(means, covs, blur, blur == "full", np.array([1.3, 0.9, 1.7]))
    h0 = Hyperparameters(np.array([1.3, 0.9, 1.7]), 1.4, {}, bases=bases, kernel="matern32")
    (e0, g0), (e1, g1) = engine_gradients(
        lambda Xi, yi, work_dir: Trainer(
            Xi, yi, None, means, covs, EPSchedule("parallel", 1.0, 3000, 1e-12,
                                                  anderson_memory=0, coarse_start=False),
            jitter=1e-8, block_rows=64, work_dir=work_dir), X, y, h0, lik, tmp_path)
    assert e1 == pytest.approx(e0, rel=1e-10)
    np.testing.assert_allclose(g1, g0, rtol=1e-8, atol=1e-10)


def _fitc_log_evidence(X, y, Z, kernel, noise, jitter):
    """FITC's log marginal likelihood, written out: N(y | 0, Q + diag(K - Q) + noise)."""
    Kuu = kernel(Z, Z) + jitter * np.eye(len(Z))
    Kuf = kernel(Z, X)
    Q = Kuf.T @ np.linalg.solve(Kuu, Kuf)
    cov = Q + np.diag(np.diag(kernel(X, X)) - np.diag(Q) + noise)
    sign, logdet = np.linalg.slogdet(cov)
    return -0.5 * (logdet + y @ np.linalg.solve(cov, y) + len(y) * np.log(2 * np.pi))


@pytest.mark.parametrize("name", list(NU))
def test_gaussian_delta_fit_is_fitc_with_scikit_learns_matern(name, tmp_path):
    rng = np.random.default_rng(5)
    X = rng.uniform(-3, 3, size=(120, 2))
    y = np.abs(X[:, 0]) + 0.1 * rng.normal(size=120)
    Z = X[rng.choice(120, 10, replace=False)] + 0.05
    ls, s2, noise, jitter = np.array([0.9, 1.6]), 1.2, 0.04, 1e-8
    model = SASPARegressor(bases=Basis(Z), blur="delta", kernel=name, lengthscale=ls,
                           signal_variance=s2, noise_variance=noise, jitter=jitter,
                           optimize_hyperparameters=False, ep={"tol": 1e-12}).fit(X, y)
    kernel = s2 * Matern(length_scale=ls, nu=NU[name])
    expected = _fitc_log_evidence(X, y - y.mean(), Z, kernel, noise, jitter * s2)
    assert model.log_evidence_ == pytest.approx(expected, rel=1e-9)
    se = SASPARegressor(bases=Basis(Z), blur="delta", lengthscale=ls, signal_variance=s2,
                        noise_variance=noise, jitter=jitter, optimize_hyperparameters=False,
                        ep={"tol": 1e-12}).fit(X, y)
    assert abs(se.log_evidence_ - model.log_evidence_) > 1.0  # the kernel does something
    model.save(tmp_path / "m.zarr")
    loaded = load_model(tmp_path / "m.zarr")
    assert loaded.kernel == name and loaded.fitted_posterior_.kernel == name
    Xs = rng.uniform(-3, 3, size=(20, 2))
    np.testing.assert_array_equal(loaded.predict(Xs), model.predict(Xs))
    assert loaded.fitted_posterior_.fingerprint() == model.fitted_posterior_.fingerprint()
    assert model.fitted_posterior_.fingerprint() != se.fitted_posterior_.fingerprint()


def test_a_learnt_matern_classifier_is_near_the_bayes_rule_and_saves(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(600, 2))
    y = (np.abs(X[:, 0]) + 0.3 * rng.normal(size=600) > 0.8).astype(int)
    model = SASPAClassifier(12, kernel="matern32", random_state=0, max_hyper_iter=40)
    model.fit(X[:400], y[:400])
    assert model.blur_ == "full" and model.fitted_posterior_.kernel == "matern32"
    bayes = np.mean((np.abs(X[400:, 0]) > 0.8) == y[400:])  # the rule the labels follow
    assert bayes == 0.85 and model.score(X[400:], y[400:]) >= bayes - 0.03
    model.save(tmp_path / "c.zarr")
    loaded = load_model(tmp_path / "c.zarr")
    np.testing.assert_array_equal(loaded.predict_proba(X[400:]), model.predict_proba(X[400:]))


def test_a_store_with_an_unknown_kernel_type_is_refused(tmp_path):
    import zarr
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    model = SASPARegressor(4, blur="delta", kernel="matern52",
                           optimize_hyperparameters=False).fit(X, X[:, 0])
    model.save(tmp_path / "m.zarr")
    group = zarr.open_group(tmp_path / "m.zarr", mode="r+")
    attrs = dict(group.attrs)
    assert attrs["kernel"]["type"] == "matern52_ard"
    group.attrs["kernel"] = {**attrs["kernel"], "type": "matern72_ard"}
    with pytest.raises(StoreError, match="kernel.type"):
        load_model(tmp_path / "m.zarr")


def test_what_matern_does_not_support_is_refused_by_name():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 2))
    y = X[:, 0]
    with pytest.raises(ValueError, match="frequency features"):
        SASPARegressor(4, blur="fourier", kernel="matern32").fit(X, y)
    with pytest.raises(ValueError, match="blur='delta' has none"):
        SASPARegressor(4, blur="delta", kernel="matern32", learn_bases="means+blur").fit(X, y)
    with pytest.raises(ValueError, match="kernel"):
        SASPARegressor(4, kernel="matern72").fit(X, y)
    model = SASPARegressor(4, blur="delta", kernel="matern12",
                           optimize_hyperparameters=False).fit(X, y)
    with pytest.raises(ValueError, match="SE kernel"):
        model.predict(X[:3], augment=(X, y))
