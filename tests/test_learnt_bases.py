"""Learnt bases: the gradient with respect to the basis means and per-basis blur against
finite differences and against an independent SPGP (closed-form FITC) objective; SPGP's
Figure 1 situation; the learning subsample; the estimator, the store and the CLI."""


import dask.array as da
import numpy as np
import pytest
from scipy.stats import norm

import in_process
from saspa_dask import Basis, SASPAClassifier, SASPARegressor, jobs, kmeans_bases, load_model
from saspa_dask.core.kernels import blur_covariances
from saspa_dask.core.likelihoods import Gaussian, Logistic, Probit, StudentT
from saspa_dask.ep import EPSchedule
from saspa_dask.fitting.basis_parameters import LearntBases
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.trainer import Trainer

from reference import (central_differences, converged_gradient, evidence_differences,
                       fitc_regression)

LENGTHSCALE = np.array([1.3, 0.9, 1.7])


def _problem(likelihood_name, blur, n=150, M=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    f = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    noisy = f + 0.3 * rng.normal(size=n)
    if likelihood_name == "gaussian":
        y, lik = noisy, Gaussian(0.1)
    elif likelihood_name == "probit":
        y, lik = np.sign(noisy), Probit()
    elif likelihood_name == "logistic":
        y, lik = np.sign(noisy), Logistic()
    else:
        y = noisy.copy()
        y[:6] += 8.0  # gross outliers: negative site precisions
        lik = StudentT(4.0, 0.3)
    basis = kmeans_bases(X, M, random_state=0)
    return X, y, lik, basis.means, blur_covariances(basis.covs, blur)


def _trainer(X, y, means, covs, damping=1.0, work_dir=None, block_rows=50):
    return Trainer(X, y, None, means, covs, EPSchedule("parallel", damping, 3000, 1e-12, anderson_memory=0, coarse_start=False),
                   jitter=1e-8, block_rows=block_rows, work_dir=work_dir)


def _start(lik, means, covs, blur, learn):
    bases = LearntBases(means, covs, blur, learn == "means+blur", LENGTHSCALE)
    return Hyperparameters(LENGTHSCALE.copy(), 1.4, lik.hyperparameters(), bases=bases)


@pytest.mark.parametrize("likelihood_name,blur,learn", [
    ("gaussian", "delta", "means"), ("gaussian", "spherical", "means+blur"),
    ("probit", "diagonal", "means+blur"), ("probit", "full", "means+blur"),
    ("logistic", "full", "means+blur"), ("student_t", "spherical", "means+blur")])
def test_basis_gradient_matches_finite_differences(likelihood_name, blur, learn):
    """Every entry of the gradient (means, blur parameters, and the kernel and likelihood
    values beside them) against central differences of log Z_EP, at the fixed sites
    (the evidence whose derivative it is) and after EP re-converges (the stationarity
    argument that makes it the total derivative)."""
    X, y, lik, means, covs = _problem(likelihood_name, blur)
    damping = 0.5 if likelihood_name == "student_t" else 1.0
    trainer = _trainer(X, y, means, covs, damping)
    h0 = _start(lik, means, covs, blur, learn)
    grad, sites = converged_gradient(trainer, h0, lik)
    x0 = h0.to_log()
    assert x0.size == 3 + 1 + means.size + (0 if learn == "means" else {
        "spherical": 5, "diagonal": 15, "full": 30}[blur]) + len(lik.hyperparameters())
    # quadrature likelihoods obey the heat equation to ~1e-5 relative
    rtol = 1e-6 if likelihood_name in ("gaussian", "probit") else 1e-4
    assert np.abs(grad[4:4 + means.size]).max() > 0.1  # the means do move the evidence
    for reconverge in (False, True):
        fd = evidence_differences(trainer, h0, lik, sites, reconverge)
        np.testing.assert_allclose(grad, fd, rtol=rtol, atol=1e-5 * np.abs(fd).max())


def test_dask_basis_gradient_equals_in_memory(tmp_path):
    X, y, lik, means, covs = _problem("probit", "full", n=300)
    h0 = _start(lik, means, covs, "full", "means+blur")
    grads = []
    for Xi, yi, work_dir in ((X, y, None),
                             (da.from_array(X, chunks=(70, 3)), da.from_array(y, chunks=70),
                              tmp_path)):
        trainer = _trainer(Xi, yi, means, covs, work_dir=work_dir, block_rows=64)
        trainer.build(h0)
        grads.append(h0.gradient_vector(trainer.gradient(trainer.run(lik), lik)))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-8, atol=1e-10)


def test_gaussian_delta_equals_an_independent_spgp_objective_and_gradient():
    """Gaussian likelihood, delta blur: log Z_EP is SPGP's (FITC's) marginal likelihood,
    written in the tests from Snelson & Ghahramani's closed form, and its gradient with
    respect to the pseudo-inputs is that objective's central difference."""
    rng = np.random.default_rng(11)
    X = rng.uniform(-3, 3, size=(120, 2))
    y = np.sin(1.5 * X[:, 0]) * np.cos(X[:, 1]) + 0.2 * rng.normal(size=120)
    Z = X[rng.choice(120, 7, replace=False)] + 0.1
    ls, s2, noise = np.array([0.9, 1.4]), 1.2, 0.05
    trainer = Trainer(X, y, None, Z, np.zeros((7, 2, 2)), EPSchedule("parallel", 1.0, 10, 1e-12, anderson_memory=0, coarse_start=False),
                      jitter=1e-8, block_rows=40)
    hyper = Hyperparameters(ls, s2, {}, bases=LearntBases(Z, np.zeros((7, 2, 2)), "delta",
                                                          False, ls))
    trainer.build(hyper)
    results = trainer.run(Gaussian(noise))
    jitter = trainer.jitter_used

    def spgp(Zk):
        return fitc_regression(X, y, X[:1], Zk, ls, s2, noise, jitter)[2]

    assert results[0].log_evidence == pytest.approx(spgp(Z), rel=1e-9, abs=1e-6)
    ours = trainer.gradient(results, Gaussian(noise))["means"]
    fd = np.empty_like(Z)
    for idx in np.ndindex(*Z.shape):
        dZ = np.zeros_like(Z)
        dZ[idx] = 1e-5
        fd[idx] = (spgp(Z + dZ) - spgp(Z - dZ)) / 2e-5
    np.testing.assert_allclose(ours, fd, rtol=1e-6, atol=1e-6)


def _sine_data(n, rng):
    x = np.sort(rng.uniform(-3.0, 3.0, n))
    return x[:, None], np.sin(2.0 * x)


def _nlpd(model, X, y):
    mean, var = model.predict_latent(X)
    return float(-norm.logpdf(y, mean, np.sqrt(var + model.noise_variance_)).mean())


def test_bunched_pseudo_inputs_spread_over_the_data_and_beat_kmeans():
    """SPGP's Figure 1 situation in 1-D: pseudo-inputs started bunched in one corner
    move out over the data, and the learnt model beats K-means bases with learnt
    hyperparameters in evidence and in held-out NLPD (both fits learn the kernel and
    the noise from the same start)."""
    rng = np.random.default_rng(2)
    X, f = _sine_data(300, rng)
    y = f + 0.15 * rng.normal(size=300)
    Xt, ft = _sine_data(2000, rng)
    yt = ft + 0.15 * rng.normal(size=2000)
    M = 6
    bunched = Basis(np.linspace(-3.0, -2.5, M)[:, None])
    common = dict(blur="delta", lengthscale=1.0, signal_variance=1.0, noise_variance=0.1,
                  max_hyper_iter=200, random_state=0, learn_offset=False)
    learnt = SASPARegressor(M, bases=bunched, learn_bases="means", **common).fit(X, y)
    kmeans = SASPARegressor(M, learn_bases=False, **common).fit(X, y)
    means = np.sort(learnt.bases_.means[:, 0])
    assert means[0] < -2.5 and means[-1] > 1.5  # spread over [-3, 3] from [-3, -2.5]
    # every row is within 1.5 lengthscales of a pseudo-input (kernel > 0.32 of s2):
    # no stretch of the data is left unexplained (at the start, rows at x = 3 were
    # 5.5 starting lengthscales from the nearest)
    gap = np.abs(X - means[None, :]).min(axis=1).max()
    assert gap < 1.5 * learnt.lengthscale_[0]
    # orderings, not margins: the gap (about 4 nats) is the optimiser's, and round-off
    # moves this multimodal maximisation by more than any fixed margin would allow
    assert learnt.log_evidence_ > kmeans.log_evidence_
    assert _nlpd(learnt, Xt, yt) < _nlpd(kmeans, Xt, yt)
    assert learnt.hyperparameter_info_["learn_bases"] == "means"
    assert kmeans.hyperparameter_info_["learn_bases"] is False


def test_learning_on_a_subsample_is_learning_on_those_rows():
    """hyper_subsample: the values learnt are a maximum of the energy of the seeded
    uniform subsample itself (learning on those rows, started there, stays: its
    energy gains nothing), and the posterior is EP on all rows at those values; a Dask
    input (read chunk-wise) gives the same model."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1500, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=1500)
    common = dict(n_bases=8, blur="spherical", random_state=3, ep={"tol": 1e-10},
                  lengthscale=1.0, signal_variance=1.0, noise_variance=0.1,
                  learn_offset=False)
    # learnt to a tight tolerance: the surface is flat along the blurs, and at 1e-6 an
    # optimiser's stop lay up to 0.014 nats below the maximum, as round-off decided
    model = SASPARegressor(learn_bases="means+blur", hyper_subsample=400,
                           max_hyper_iter=2000, hyper_tol=1e-9, **common).fit(X, y)
    assert model.hyperparameter_info_["n_rows_learnt"] == 400
    assert model.hyperparameter_info_["converged"]
    # the documented draw: 400 rows without replacement from RandomState(random_state)
    rows = np.sort(np.random.RandomState(3).choice(1500, 400, replace=False))
    learnt = {"bases": model.bases_, "lengthscale": model.lengthscale_,
              "signal_variance": model.signal_variance_,
              "noise_variance": model.noise_variance_}
    # the same targets: the model centres y on the mean of all rows
    on_rows = SASPARegressor(learn_bases="means+blur", hyper_subsample=None, center_y=False,
                             max_hyper_iter=2000, hyper_tol=1e-9,
                             **{**common, **learnt}).fit(X[rows], y[rows] - y.mean())
    info = on_rows.hyperparameter_info_
    assert (info["log_evidence_end"] - info["log_evidence_start"]) / 400 < 1e-5
    np.testing.assert_allclose(on_rows.lengthscale_, model.lengthscale_, rtol=1e-3)
    fixed = SASPARegressor(**{**common, **learnt, "learn_bases": False,
                              "optimize_hyperparameters": False}).fit(X, y)
    np.testing.assert_allclose(model.predict(X[:50]), fixed.predict(X[:50]), rtol=1e-7,
                               atol=1e-9)
    # a Dask input takes the same steps (15 of them: a long run amplifies round-off)
    short = dict(learn_bases="means+blur", hyper_subsample=400, max_hyper_iter=15, **common)
    eager = SASPARegressor(**short).fit(X, y)
    lazy = SASPARegressor(**short).fit(da.from_array(X, chunks=(300, 2)),
                                       da.from_array(y, chunks=300))
    np.testing.assert_allclose(lazy.bases_.means, eager.bases_.means, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(np.asarray(lazy.predict(X[:50])), eager.predict(X[:50]),
                               rtol=1e-6, atol=1e-8)


def test_learnt_bases_are_stored_and_reported(tmp_path):
    X = np.random.default_rng(0).normal(size=(200, 2))
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    clf = SASPAClassifier(6, blur="diagonal", learn_bases="means+blur", max_hyper_iter=5,
                          random_state=0).fit(X, y)
    start = kmeans_bases(X, 6, random_state=0)
    assert not np.allclose(clf.bases_.means, start.means, atol=1e-3)  # they moved
    clf.save(tmp_path / "m.zarr")
    back = load_model(tmp_path / "m.zarr")
    np.testing.assert_array_equal(back.bases_.means, clf.bases_.means)
    np.testing.assert_array_equal(back.bases_.covs, clf.bases_.covs)
    assert back.get_params()["learn_bases"] == "means+blur"
    assert back.hyperparameter_info_["learn_bases"] == "means+blur"
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))


def test_auto_learns_kmeans_means_and_keeps_given_bases():
    """learn_bases="auto" (the default): K-means bases move when the hyperparameters
    are learnt; bases given by the user, or fixed hyperparameters, keep them."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=200)
    learnt = SASPARegressor(5, random_state=0).fit(X, y)
    assert learnt.get_params()["learn_bases"] == "auto"
    assert learnt.hyperparameter_info_["learn_bases"] == "means"
    start = kmeans_bases(X, 5, random_state=0).means
    assert not np.allclose(np.sort(learnt.bases_.means, axis=0), np.sort(start, axis=0))
    given = Basis(start)
    kept = SASPARegressor(bases=given, blur="delta", random_state=0).fit(X, y)
    assert kept.hyperparameter_info_["learn_bases"] is False
    np.testing.assert_array_equal(kept.bases_.means, start)
    fixed = SASPARegressor(5, optimize_hyperparameters=False, random_state=0).fit(X, y)
    np.testing.assert_allclose(np.sort(fixed.bases_.means, axis=0), np.sort(start, axis=0))


def test_bad_learn_bases_settings_are_refused_by_name():
    X = np.random.default_rng(0).normal(size=(50, 2))
    y = X[:, 0]
    with pytest.raises(ValueError, match="needs a blur family with covariances"):
        SASPARegressor(4, blur="delta", learn_bases="means+blur").fit(X, y)
    with pytest.raises(ValueError, match="needs optimize_hyperparameters=True"):
        SASPARegressor(4, learn_bases="means", optimize_hyperparameters=False).fit(X, y)
    with pytest.raises(ValueError, match="redundant"):
        SASPARegressor(4, learn_bases="means+blur", learn_blur_scale=True).fit(X, y)
    with pytest.raises(ValueError, match="learn_bases"):
        SASPARegressor(4, learn_bases="blur").fit(X, y)


def _saspa(*args):
    return in_process.saspa(*args)


def test_cli_learns_bases_on_a_subsample_and_says_so(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=3000)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    data = tmp_path / "d.zarr"
    jobs.ingest(str(tmp_path / "d.npy"), str(data), chunk_rows=1000)
    res = _saspa("train", str(data), "--out", str(tmp_path / "m.zarr"), "--task",
                 "regression", "--n-bases", "8", "--blur", "delta", "--learn-bases", "means",
                 "--hyper-subsample", "1000", "--max-hyper-iter", "10")
    assert res.returncode == 0, res.stderr
    model = load_model(tmp_path / "m.zarr")
    assert model.hyperparameter_info_["n_rows_learnt"] == 1000
    kmeans = kmeans_bases(X, 8, random_state=0).means
    assert not np.allclose(np.sort(model.bases_.means[:, 0]), np.sort(kmeans[:, 0]), atol=1e-3)
    info = _saspa("info", str(tmp_path / "m.zarr"))
    assert info.returncode == 0, info.stderr
    assert "on 1000 rows, bases learnt: means" in info.stdout
    res = _saspa("train", str(data), "--out", str(tmp_path / "n.zarr"), "--task",
                 "regression", "--blur", "delta", "--learn-bases", "means+blur")
    assert res.returncode != 0 and "blur='delta' has none" in res.stderr
    assert not (tmp_path / "n.zarr").exists()


def test_make_data_multiscale_regression(tmp_path):
    """The generated regression rows: noise std 0.1 of the signal's, the signal as
    written here, and the last input irrelevant."""
    out = tmp_path / "r.npy"
    res = _saspa("make-data", str(out), "--rows", "50000", "--kind", "multiscale-regression",
                 "--seed", "3")
    assert res.returncode == 0, res.stderr
    table = np.load(out)
    X, y = table[:, :8], table[:, 8]
    assert X.min() >= -2.0 and X.max() <= 2.0
    f = (np.sin(0.5 * X[:, 0]) + 0.25 * X[:, 1] + 0.6 * np.sin(2 * X[:, 2] + X[:, 3])
         + 0.3 * np.sin(5 * X[:, 4]) * np.cos(4 * X[:, 5]) + 0.5 * np.exp(-2 * X[:, 6] ** 2))
    assert np.std(y - f) / np.std(f) == pytest.approx(0.1, rel=0.02)
    assert abs(np.corrcoef(X[:, 7], y - f)[0, 1]) < 0.02
    res = _saspa("make-data", str(tmp_path / "s.npy"), "--kind", "multiscale-regression",
                 "--features", "4")
    assert res.returncode != 0 and "--features >= 8" in res.stderr


@pytest.mark.parametrize("blur", ["spherical", "diagonal", "full", "fourier"])
def test_optimiser_gradient_away_from_the_start(blur):
    """The objective L-BFGS-B sees, at a point away from its start: its gradient
    against central differences of its own values.  The blur parameters' chain rule
    needs the blur at that point, not the start's (it once used the start's, which
    every check at the start itself missed)."""
    from saspa_dask.fitting.basis_parameters import LearntFeatures
    from saspa_dask.fitting.optimizer import _Objective

    X, y, lik, means, covs = _problem("gaussian", "diagonal" if blur == "fourier" else blur)
    if blur == "fourier":
        rng = np.random.default_rng(1)
        window = covs.mean(axis=0)  # diagonal blurs come as (M, d) diagonals
        basis = Basis(means, np.repeat(window[None], len(means), axis=0),
                      rng.normal(size=means.shape) / LENGTHSCALE,
                      rng.uniform(0, 2 * np.pi, len(means)))
        trainer = Trainer(X, y, None, basis.means, basis.covs,
                          EPSchedule("parallel", 1.0, 3000, 1e-12, anderson_memory=0, coarse_start=False), jitter=1e-8,
                          block_rows=50, frequencies=basis.frequencies, phases=basis.phases)
        features = LearntFeatures(basis.means, basis.frequencies, basis.phases, window, True,
                                  LENGTHSCALE)
        start = Hyperparameters(LENGTHSCALE.copy(), 1.4, lik.hyperparameters(),
                                bases=features)
    else:
        trainer = _trainer(X, y, means, covs)
        start = _start(lik, means, covs, blur, "means+blur")

    def evaluate(hyper):
        trainer.build(hyper)
        li = lik.with_hyperparameters(hyper.likelihood)
        results = trainer.run(li)
        return results[0].log_evidence, trainer.gradient(results, li), None

    objective = _Objective(evaluate, start)
    # half a unit along every coordinate: the blur variances move by e^0.5 or so
    x = start.to_log() + 0.5 * np.random.default_rng(2).uniform(-1, 1, start.to_log().size)
    grad = objective(x)[1]
    fd = central_differences(lambda v: objective._evaluate(v)[0], x)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-5 * np.abs(fd).max())
