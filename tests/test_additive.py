"""An additive kernel over groups of inputs (``additive_groups``): s2 sum_g w_g SE(x_g).

Checked against: the blurred covariances by Gauss-Hermite quadrature of the additive
kernel over the blurs (written here), the evidence gradient (every entry, the terms'
weights included) by central differences of log Z_EP, the Dask engine against the
in-memory one, a Gaussian delta fit's evidence against FITC with the additive kernel
written out, and a fit that recovers an additive truth better than one kernel does.
"""

import csv

import numpy as np
import pytest

import in_process
from reference import converged_gradient, engine_gradients, evidence_differences
from saspa_dask import Basis, SASPARegressor, jobs, load_model
from saspa_dask.core.kernel_sums import AdditiveKernel
from saspa_dask.core.kernels import basis_covariance, blur_covariances, blurred_cross_covariance
from saspa_dask.core.likelihoods import Gaussian, Probit
from saspa_dask.engines.kmeans import kmeans as kmeans_bases
from saspa_dask.fitting.basis_parameters import LearntBases
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.input_groups import additive_terms_of
from saspa_dask.fitting.trainer import Trainer
from saspa_dask.models.settings import EPSchedule

TERMS = np.array([0, 1, 0, 1])  # inputs 0 and 2 in one term, 1 and 3 in the other
WEIGHTS = np.array([0.7, 0.3])


def _additive(X1, X2, ls, s2, terms=TERMS, weights=WEIGHTS):
    """The additive SE kernel by explicit differences, term by term."""
    out = 0.0
    for g, w in enumerate(weights):
        dims = terms == g
        diff = (X1[:, None, dims] - X2[None, :, dims]) / ls[dims]
        out = out + s2 * w * np.exp(-0.5 * (diff ** 2).sum(-1))
    return out


def test_blurred_additive_covariances_are_the_kernel_averaged_over_the_blurs():
    """Kt (one blurred basis) and Kh (two) against Gauss-Hermite averages of the
    additive kernel over full (correlated across terms) blurs in 4-D: the blurs'
    correlations between terms' inputs must not matter, their marginals must."""
    rng = np.random.default_rng(0)
    ls, s2 = np.array([0.8, 1.4, 1.1, 0.6]), 1.7
    means = rng.normal(size=(2, 4))
    A = rng.normal(size=(2, 4, 4)) * 0.4
    covs = A @ np.swapaxes(A, 1, 2) + 0.1 * np.eye(4)
    X = rng.normal(size=(3, 4))
    kernel = AdditiveKernel(TERMS, WEIGHTS)
    nodes, weights = np.polynomial.hermite_e.hermegauss(28)
    weights = weights / weights.sum()
    grid = np.stack(np.meshgrid(*[nodes] * 4, indexing="ij"), -1).reshape(-1, 4)
    w = np.prod(np.stack(np.meshgrid(*[weights] * 4, indexing="ij"), -1).reshape(-1, 4), 1)
    samples = [m + grid @ np.linalg.cholesky(C).T for m, C in zip(means, covs)]
    Kt = blurred_cross_covariance(X, means, covs, ls, s2, kernel=kernel)
    for j in range(2):
        np.testing.assert_allclose(Kt[:, j], _additive(X, samples[j], ls, s2) @ w,
                                   rtol=1e-9)
    Kh = basis_covariance(means, covs, ls, s2, kernel=kernel)
    # the two blurs are independent: their difference is N(a_0 - a_1, C_0 + C_1)
    diff = (means[0] - means[1]) + grid @ np.linalg.cholesky(covs[0] + covs[1]).T
    np.testing.assert_allclose(Kh[0, 1], _additive(diff, np.zeros((1, 4)), ls, s2)[:, 0] @ w,
                               rtol=1e-9)
    np.testing.assert_allclose(Kh[0, 0], _additive((grid @ np.linalg.cholesky(
        2 * covs[0]).T), np.zeros((1, 4)), ls, s2)[:, 0] @ w, rtol=1e-9)


def _problem(likelihood, blur, seed=0, n=200, M=8):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    f = np.sin(X[:, 0]) + X[:, 2] + np.cos(2 * X[:, 1]) * 0.5
    y = f + 0.3 * rng.normal(size=n)
    lik = Gaussian(0.1)
    if likelihood == "probit":
        y, lik = np.sign(y), Probit()
    basis, _ = kmeans_bases(X, M, random_state=0, full_covariances=True)
    return X, y, lik, basis.means, blur_covariances(basis.covs, blur)


def _schedule():
    return EPSchedule("parallel", 1.0, 3000, 1e-12, anderson_memory=0, coarse_start=False)


@pytest.mark.parametrize("likelihood,blur,learn,shape", [
    ("gaussian", "delta", "means", "se"), ("probit", "full", "means+blur", "se"),
    ("gaussian", "diagonal", "means+blur", "se"), ("probit", "spherical", None, "se"),
    ("gaussian", "delta", "means", "matern32"), ("probit", "diagonal", "means+blur",
                                                 "matern52")])
def test_additive_gradient_matches_finite_differences(likelihood, blur, learn, shape):
    """Every entry (lengthscales, s2, the term weight's logit, blur scale, the bases'
    means and blurs, the likelihood's) against central differences of log Z_EP, at
    fixed sites and after EP re-converges; SE terms and Matérn ones (the exact delta
    form and the blurred scale mixture)."""
    X, y, lik, means, covs = _problem(likelihood, blur)
    trainer = Trainer(X, y, None, means, covs, _schedule(), jitter=1e-8, block_rows=70)
    ls = np.array([1.3, 0.9, 1.7, 1.1])
    bases = None if learn is None else LearntBases(means, covs, blur, learn == "means+blur",
                                                   ls)
    h0 = Hyperparameters(ls.copy(), 1.4, lik.hyperparameters(), 0.7 if learn is None else 1.0,
                         learn_blur_scale=blur != "delta" and learn is None, bases=bases,
                         additive=TERMS, term_weights=WEIGHTS.copy(), kernel=shape)
    assert "term_weight[1]" in h0.names()
    grad, sites = converged_gradient(trainer, h0, lik)
    weight_entry = h0.names().index("term_weight[1]")
    assert abs(grad[weight_entry]) > 1e-3  # the weights move the evidence
    for reconverge in (False, True):
        fd = evidence_differences(trainer, h0, lik, sites, reconverge)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-5 * np.abs(fd).max())


def test_the_dask_engine_gives_the_in_memory_additive_gradient(tmp_path):
    X, y, lik, means, covs = _problem("probit", "diagonal", n=300)
    bases = LearntBases(means, covs, "diagonal", True, np.ones(4))
    h0 = Hyperparameters(np.array([1.3, 0.9, 1.7, 1.1]), 1.4, {}, bases=bases,
                         additive=TERMS, term_weights=WEIGHTS.copy())
    (e0, g0), (e1, g1) = engine_gradients(
        lambda Xi, yi, work_dir: Trainer(Xi, yi, None, means, covs, _schedule(), jitter=1e-8,
                                         block_rows=64, work_dir=work_dir),
        X, y, h0, lik, tmp_path)
    assert e1 == pytest.approx(e0, rel=1e-10)
    np.testing.assert_allclose(g1, g0, rtol=1e-8, atol=1e-10)


def test_gaussian_delta_fit_is_fitc_with_the_additive_kernel(tmp_path):
    """Fixed values: the log evidence and predictions of FITC with the additive kernel
    written out here; saved and loaded, the same predictions."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-3, 3, size=(150, 4))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=150)
    Z = X[rng.choice(150, 12, replace=False)] + 0.05
    ls, s2, noise = np.array([0.9, 1.5, 1.2, 2.0]), 1.3, 0.05
    model = SASPARegressor(bases=Basis(Z), blur="delta", lengthscale=ls, signal_variance=s2,
                           noise_variance=noise, center_y=False, learn_offset=False,
                           optimize_hyperparameters=False,
                           additive_groups=["a", "b", "a", "b"]).fit(X, y)
    k = lambda A, B: _additive(A, B, ls, s2, weights=np.array([0.5, 0.5]))  # noqa: E731
    Kuu = k(Z, Z) + model.jitter_ * np.eye(12)
    Kuf = k(Z, X)
    Q = Kuf.T @ np.linalg.solve(Kuu, Kuf)
    cov = Q + np.diag(s2 - np.diag(Q) + noise)
    _, logdet = np.linalg.slogdet(cov)
    logml = -0.5 * (logdet + y @ np.linalg.solve(cov, y) + 150 * np.log(2 * np.pi))
    assert model.log_evidence_ == pytest.approx(logml, rel=1e-9)
    Xs = rng.uniform(-3, 3, size=(20, 4))
    Qs = Kuf.T @ np.linalg.solve(Kuu, k(Z, Xs))
    np.testing.assert_allclose(model.predict(Xs), Qs.T @ np.linalg.solve(cov, y), rtol=1e-8,
                               atol=1e-10)
    model.save(tmp_path / "m.zarr")
    back = load_model(tmp_path / "m.zarr")
    np.testing.assert_array_equal(back.predict(Xs), model.predict(Xs))
    assert back.fitted_posterior_.fingerprint() == model.fitted_posterior_.fingerprint()
    np.testing.assert_array_equal(back.term_weights_, [0.5, 0.5])


def test_an_additive_truth_is_learnt_better_by_the_additive_kernel():
    """y = f(x0) + g(x1) + h(x2) + noise in 3-D from 300 rows: the additive kernel
    (one term per input) beats one SE kernel over all inputs on held-out rows (0.026
    against 0.123 when written), with a higher evidence, its weights a distribution."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(1300, 3))
    f = 1.5 * np.sin(2 * X[:, 0]) + np.cos(2.5 * X[:, 1]) + 0.3 * X[:, 2]
    y = f + 0.1 * rng.normal(size=1300)
    common = dict(n_bases=16, random_state=0)
    one = SASPARegressor(**common).fit(X[:300], y[:300])
    add = SASPARegressor(additive_groups=[0, 1, 2], **common).fit(X[:300], y[:300])
    rmse = [np.sqrt(np.mean((m.predict(X[300:]) - f[300:]) ** 2)) for m in (one, add)]
    assert rmse[1] < 0.5 * rmse[0], rmse
    assert add.log_evidence_ > one.log_evidence_ + 50
    assert add.term_weights_.shape == (3,) and add.term_weights_.sum() == pytest.approx(1.0)
    assert one.term_weights_ is None


def test_additive_terms_and_refusals_by_name():
    assert list(additive_terms_of("one-hot", ["city=a", "size", "city=b", "kind=x"], 4)) \
        == [1, 0, 1, 2]  # the inputs that are not one-hot form the first term
    with pytest.raises(ValueError, match="3 labels for 2 inputs"):
        additive_terms_of(["a", "b", "c"], None, 2)
    with pytest.raises(ValueError, match="every input in one term"):
        additive_terms_of(["a", "a"], None, 2)
    # groups written as lists of input indices are refused as such, not counted as labels
    with pytest.raises(ValueError, match="one label per input, not lists of input indices"):
        additive_terms_of([[0, 1], [2]], None, 3)
    X, y = np.random.default_rng(0).normal(size=(40, 2)), np.arange(40.0)
    with pytest.raises(ValueError, match="not with frequency features"):
        SASPARegressor(4, additive_groups=[0, 1], blur="fourier").fit(X, y)
    with pytest.raises(ValueError, match="set additive_groups too"):
        SASPARegressor(4, term_weights=[1.0, 2.0]).fit(X, y)
    with pytest.raises(ValueError, match="term_weights must be 2 positive numbers"):
        SASPARegressor(4, additive_groups=[0, 1], term_weights=[1.0, 0.0]).fit(X, y)
    fixed = SASPARegressor(4, additive_groups=[0, 1], term_weights=[1.0, 3.0],
                           optimize_hyperparameters=False).fit(X, y)
    np.testing.assert_allclose(fixed.term_weights_, [0.25, 0.75], rtol=1e-15)


def test_the_job_path_fits_a_term_per_text_column(tmp_path, threads_client):
    """ingest -> train with ``additive_groups="one-hot"`` (and tied lengthscales): a
    numeric term and one per text column, saved, shown by ``saspa info`` by name."""
    rng = np.random.default_rng(3)
    rows = [["size", "city", "kind", "price"]]
    for _ in range(300):
        city, kind = rng.choice(["Oslo", "Rome", "Lima"]), rng.choice(["flat", "house"])
        size = rng.uniform(20, 200)
        price = size / 50 + {"Oslo": 2, "Rome": 1, "Lima": 0}[city] + rng.normal() * 0.2
        rows.append([f"{size:.1f}", city, kind, f"{price:.3f}"])
    with open(tmp_path / "t.csv", "w", newline="") as fh:
        csv.writer(fh).writerows(rows)
    jobs.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", text="onehot")
    jobs.train(tmp_path / "t.zarr", tmp_path / "m.zarr", n_bases=8, kernel="matern52",
               additive_groups="one-hot", feature_groups="one-hot", max_hyper_iter=30,
               client=threads_client)
    model = load_model(tmp_path / "m.zarr")
    names = list(model.fitted_posterior_.feature_names)
    terms = dict(zip(names, model.fitted_posterior_.additive))
    assert terms["size"] == 0 and terms["city=Oslo"] == terms["city=Lima"] != terms["kind=flat"]
    assert model.term_weights_.shape == (3,)
    shown = in_process.saspa("info", tmp_path / "m.zarr")
    assert shown.returncode == 0
    assert "kernel_type: additive_matern52_ard" in shown.stdout
    line = next(x for x in shown.stdout.splitlines() if "kernel terms:" in x)
    for name, w in zip(("size", "city", "kind"), model.term_weights_):
        assert f"{name} {w:.3g}" in line
    # a retrain at fixed values keeps the learnt weights (not equal ones)
    assert np.ptp(model.term_weights_) > 1e-3
    jobs.retrain(tmp_path / "m.zarr", tmp_path / "t.zarr", tmp_path / "r.zarr",
                 optimize_hyperparameters=False, client=threads_client)
    again = load_model(tmp_path / "r.zarr")
    np.testing.assert_allclose(again.term_weights_, model.term_weights_, rtol=1e-12)
    np.testing.assert_array_equal(again.lengthscale_, model.lengthscale_)


def test_delta_matern_terms_are_scikit_learns_matern_on_their_inputs():
    """Matérn terms at delta blur: Kt and Kh equal the sum over terms of
    scikit-learn's ``Matern`` on each term's inputs, times s2 w_g."""
    from sklearn.gaussian_process.kernels import Matern

    rng = np.random.default_rng(2)
    ls, s2 = np.array([0.8, 1.4, 1.1, 0.6]), 1.7
    X, Z = rng.normal(size=(30, 4)), rng.normal(size=(6, 4))
    kernel = AdditiveKernel(TERMS, WEIGHTS, "matern32")
    want = sum(s2 * w * Matern(ls[TERMS == g], nu=1.5)(A[:, TERMS == g], B[:, TERMS == g])
               for g, w in enumerate(WEIGHTS) for A, B in [(X, Z)])
    Kt = blurred_cross_covariance(X, Z, np.zeros((6, 4)), ls, s2, kernel=kernel)
    np.testing.assert_allclose(Kt, want, rtol=1e-10)
    want_h = sum(s2 * w * Matern(ls[TERMS == g], nu=1.5)(Z[:, TERMS == g])
                 for g, w in enumerate(WEIGHTS))
    np.testing.assert_allclose(basis_covariance(Z, np.zeros((6, 4)), ls, s2, kernel=kernel),
                               want_h, rtol=1e-10)


def test_the_report_page_lists_the_terms_and_their_weights():
    from saspa_dask.models.report import model_report

    rng = np.random.default_rng(4)
    X = rng.normal(size=(120, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 2] + 0.1 * rng.normal(size=120)
    model = SASPARegressor(6, additive_groups=["a", "b", "a"], random_state=0,
                           max_hyper_iter=20).fit(X, y)
    page = model_report(model, X, y)
    assert "<h2>Kernel terms</h2>" in page
    for name, w in (("x0, x2", model.term_weights_[0]), ("x1", model.term_weights_[1])):
        assert f"<tr><th>{name}</th><td class=\"n\">{w:.6g}</td></tr>" in page
    assert "Kernel terms" not in model_report(SASPARegressor(6, random_state=0,
                                                             max_hyper_iter=5).fit(X, y))
