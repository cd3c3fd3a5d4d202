"""Hyperparameter learning by EP evidence: gradients against finite differences, the
Gaussian optimum against the closed-form FITC marginal likelihood, monotone trace."""

import numpy as np
import pytest
from scipy.optimize import minimize

from saspa_dask import Basis, SASPARegressor, SASPAClassifier
from saspa_dask import kmeans_bases
from saspa_dask.ep import EPSchedule
from saspa_dask.ep.approximation import DTC, FITC
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.learning_advice import LearntBoundWarning
from saspa_dask.core.kernels import blur_covariances
from saspa_dask.core.likelihoods import Gaussian, NoisyProbit, Probit, Step, StudentT
from saspa_dask.fitting.trainer import Trainer

from scipy.stats import multivariate_normal

from reference import (central_differences, converged_gradient, evidence_differences,
                       fitc_regression, se)


def _problem(likelihood_name, blur, seed=0, n=240, d=3, M=10):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    f = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    if likelihood_name == "gaussian":
        y, lik = f + 0.3 * rng.normal(size=n), Gaussian(0.1)
    elif likelihood_name == "probit":
        y, lik = np.sign(f + 0.3 * rng.normal(size=n)), Probit()
    elif likelihood_name == "step":
        y, lik = np.sign(f + 0.3 * rng.normal(size=n)), Step(0.05)
    elif likelihood_name == "noisy_probit":
        y, lik = np.sign(f + 0.3 * rng.normal(size=n)), NoisyProbit(0.05)
    else:
        y = f + 0.3 * rng.normal(size=n)
        y[:8] += 8.0  # gross outliers: negative site precisions
        lik = StudentT(4.0, 0.3)
    basis = kmeans_bases(X, M, random_state=0)
    return X, y, lik, basis.means, blur_covariances(basis.covs, blur)


# The gradient is checked on the Trainer (saspa_dask.fitting.trainer) because the
# evidence at *fixed* sites, whose derivative the gradient is, has no estimator-level
# route: an estimator always re-runs EP.

@pytest.mark.parametrize("likelihood_name,blur,dtc", [
    ("gaussian", "full", False), ("probit", "spherical", False), ("step", "full", False),
    ("student_t", "diagonal", False), ("gaussian", "delta", True), ("probit", "full", True),
    ("noisy_probit", "diagonal", False)])
def test_gradient_matches_finite_differences(likelihood_name, blur, dtc):
    X, y, lik, means, covs = _problem(likelihood_name, blur)
    damping = 0.5 if likelihood_name in ("step", "student_t", "noisy_probit") else 1.0
    trainer = Trainer(X, y, None, means, covs, EPSchedule("parallel", damping, 3000, 1e-12, anderson_memory=0, coarse_start=False),
                      jitter=1e-8, block_rows=100, approximation=DTC if dtc else FITC)
    h0 = Hyperparameters(np.array([1.3, 0.9, 1.7]), 1.4, lik.hyperparameters(), 0.7,
                         learn_blur_scale=True)
    grad, sites = converged_gradient(trainer, h0, lik)
    # student_t: the quadrature's log Z obeys the heat equation to ~1e-5 relative
    rtol = 1e-4 if likelihood_name == "student_t" else 1e-6
    for reconverge in (False, True):
        fd = evidence_differences(trainer, h0, lik, sites, reconverge)
        np.testing.assert_allclose(grad, fd, rtol=rtol, atol=1e-5)


def test_dtc_gaussian_equals_closed_form_dtc():
    """dtc=True with the Gaussian likelihood is Seeger et al.'s DTC: evidence
    log N(y | 0, Q + noise I) with Q = Kfu Kuu^-1 Kuf, and the DTC predictive mean."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=150)
    Xs = rng.normal(size=(40, 2))
    Z = X[rng.choice(150, 12, replace=False)]
    ls, s2, noise, jitter = np.array([0.8, 1.1]), 1.3, 0.05, 1e-8
    model = SASPARegressor(bases=Basis(Z), blur="delta", lengthscale=ls, signal_variance=s2,
                           noise_variance=noise, jitter=jitter, optimize_hyperparameters=False, approximation="dtc", ep={"tol": 1e-12}).fit(X, y)
    yc = y - y.mean()
    Kuu = se(Z, Z, ls, s2) + jitter * s2 * np.eye(12)
    Kuf = se(Z, X, ls, s2)
    Q = Kuf.T @ np.linalg.solve(Kuu, Kuf)
    logml = multivariate_normal(np.zeros(150), Q + noise * np.eye(150)).logpdf(yc)
    assert model.log_evidence_ == pytest.approx(logml, rel=1e-9)
    Sigma_inv = Kuu + Kuf @ Kuf.T / noise
    mean = se(Xs, Z, ls, s2) @ np.linalg.solve(Sigma_inv, Kuf @ yc) / noise + y.mean()
    np.testing.assert_allclose(model.predict(Xs), mean, rtol=1e-7, atol=1e-9)
    fitc = SASPARegressor(bases=Basis(Z), blur="delta", lengthscale=ls, signal_variance=s2,
                          noise_variance=noise, jitter=jitter, optimize_hyperparameters=False, ep={"tol": 1e-12}).fit(X, y)
    assert abs(fitc.log_evidence_ - model.log_evidence_) > 1e-3  # the flag does something


def _negative_fitc(X, y, Z, jitter):
    """-log FITC marginal likelihood (closed form, reference.fitc_regression) as a
    function of log (lengthscales, signal variance, noise variance)."""
    def negative_fitc(x):
        ls, s2, noise = np.exp(x[:2]), np.exp(x[2]), np.exp(x[3])
        return -fitc_regression(X, y, X[:1], Z, ls, s2, noise, jitter * s2)[2]

    return negative_fitc


def test_gaussian_optimum_equals_closed_form_fitc_optimum():
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(150, 2))
    y = np.sin(1.5 * X[:, 0]) * np.cos(X[:, 1]) + 0.2 * rng.normal(size=150)
    Z = kmeans_bases(X, 12, random_state=0).means
    jitter = 1e-8

    negative_fitc = _negative_fitc(X, y, Z, jitter)

    x0 = np.log([1.0, 1.0, 0.5, 0.1])
    ref = minimize(negative_fitc, x0, method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 500})
    reg = SASPARegressor(bases=Basis(Z), blur="delta", lengthscale=1.0, signal_variance=0.5,
                         noise_variance=0.1, center_y=False, learn_offset=False,
                         jitter=jitter, max_hyper_iter=200, hyper_tol=1e-12).fit(X, y)
    ours = np.log([*reg.lengthscale_, reg.signal_variance_, reg.noise_variance_])
    np.testing.assert_allclose(ours, ref.x, atol=2e-3)
    assert reg.log_evidence_ == pytest.approx(-ref.fun, abs=1e-6)
    assert reg.hyperparameter_info_["n_failed_evaluations"] == 0
    # each evaluation is one sweep from the prior, which sets the exact sites, and its
    # evidence comes from the gradient's pass: the closed form at the learnt values
    assert reg.n_sweeps_ == 1
    assert reg.log_evidence_ == pytest.approx(-negative_fitc(ours), rel=1e-10)


def test_a_learnt_constant_mean_is_the_closed_form_fitc_optimum_with_a_mean():
    """learn_offset: the FITC marginal likelihood of y - c maximised over the kernel,
    the noise and c together (written here), against the estimator's optimum; targets
    resting at 0 with bumps, so the optimal c is far from y's mean."""
    rng = np.random.default_rng(5)
    X = rng.uniform(-3, 3, size=(150, 2))
    y = 4.0 * np.exp(-((X[:, 0] - 1) ** 2 + X[:, 1] ** 2)) + 0.1 * rng.normal(size=150)
    Z = kmeans_bases(X, 12, random_state=0).means
    jitter = 1e-8

    def negative_fitc(x):
        ls, s2, noise, c = np.exp(x[:2]), np.exp(x[2]), np.exp(x[3]), x[4]
        return -fitc_regression(X, y - c, X[:1], Z, ls, s2, noise, jitter * s2)[2]

    x0 = np.array([0.0, 0.0, np.log(0.5), np.log(0.1), y.mean()])
    ref = minimize(negative_fitc, x0, method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 1000})
    reg = SASPARegressor(bases=Basis(Z), blur="delta", lengthscale=1.0, signal_variance=0.5,
                         noise_variance=0.1, jitter=jitter, max_hyper_iter=300,
                         hyper_tol=1e-12).fit(X, y)
    ours = np.log([*reg.lengthscale_, reg.signal_variance_, reg.noise_variance_])
    np.testing.assert_allclose(ours, ref.x[:4], atol=2e-3)
    assert reg.y_mean_ == pytest.approx(ref.x[4], abs=2e-3)
    assert abs(ref.x[4] - y.mean()) > 0.1  # the mean moved: the test can fail
    assert reg.log_evidence_ == pytest.approx(-ref.fun, abs=1e-6)
    # predictions carry the learnt mean: the closed form's at the optimum
    Xs = rng.uniform(-3, 3, size=(30, 2))
    ls, s2, noise, c = np.exp(ref.x[:2]), np.exp(ref.x[2]), np.exp(ref.x[3]), ref.x[4]
    mean = fitc_regression(X, y - c, Xs, Z, ls, s2, noise, jitter * s2)[0] + c
    np.testing.assert_allclose(reg.predict(Xs), mean, atol=5e-3)


def test_a_noise_floor_is_the_closed_form_fitc_optimum_bounded_there():
    """min_noise_variance: the FITC marginal likelihood maximised with the noise held
    above a floor three times its free optimum (scipy's bounded L-BFGS-B on the closed
    form written here) against the estimator: the noise ends on the floor, the kernel
    where the bounded optimum has it, and no bound warning for a floor the user set."""
    import warnings

    rng = np.random.default_rng(4)
    X = rng.uniform(-3, 3, size=(150, 2))
    y = np.sin(X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=150)
    Z = kmeans_bases(X, 12, random_state=0).means
    jitter = 1e-8

    negative_fitc = _negative_fitc(X, y, Z, jitter)

    x0 = np.log([1.0, 1.0, 0.5, 0.1])
    options = {"ftol": 1e-15, "gtol": 1e-9, "maxiter": 500}
    free = minimize(negative_fitc, x0, method="L-BFGS-B", options=options)
    floor = 3.0 * np.exp(free.x[3])
    bounded = minimize(negative_fitc, np.maximum(x0, [-9, -9, -9, np.log(floor)]),
                       method="L-BFGS-B", bounds=[(None, None)] * 3 + [(np.log(floor), None)],
                       options=options)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LearntBoundWarning)
        reg = SASPARegressor(bases=Basis(Z), blur="delta", lengthscale=1.0,
                             signal_variance=0.5, noise_variance=0.1, center_y=False,
                             learn_offset=False, min_noise_variance=floor, jitter=jitter,
                             max_hyper_iter=200, hyper_tol=1e-12).fit(X, y)
    assert reg.noise_variance_ == pytest.approx(floor, rel=1e-9)
    ours = np.log([*reg.lengthscale_, reg.signal_variance_])
    np.testing.assert_allclose(ours, bounded.x[:3], atol=2e-3)
    assert reg.log_evidence_ == pytest.approx(-bounded.fun, abs=1e-6)
    assert -bounded.fun < -free.fun - 0.1  # the floor binds: the test can fail
    assert reg.hyperparameter_info_["at_bounds"] == []
    with pytest.raises(ValueError, match="min_noise_variance is a floor of the gaussian"):
        SASPARegressor(n_bases=4, likelihood="student_t", min_noise_variance=0.1).fit(X, y)


def test_evidence_never_decreases_across_iterations():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 2))
    y = np.where(X[:, 0] ** 2 + X[:, 1] ** 2 + 0.3 * rng.normal(size=300) > 1.4, 1, 0)
    clf = SASPAClassifier(n_bases=16, random_state=0, max_hyper_iter=15).fit(X, y)
    trace = [r["log_evidence"] for r in clf.hyperparameter_trace_]
    assert len(trace) >= 3
    assert np.all(np.diff(trace) >= -1e-6 * np.abs(trace[:-1]))
    assert trace[-1] > trace[0] + 1.0
    # the trace's EP stops at learning's site change (policy.learning_ep_tol, 1e-4), the
    # model's is polished to ep's 1e-6: the energy, stationary in the sites at EP's
    # fixed point, moves by about their change squared (1.2e-9 here)
    assert clf.log_evidence_ == pytest.approx(max(trace), abs=1e-7)
    assert clf.converged_ and clf.history_[-1]["change"] < 1e-6  # the polished EP's
    start = SASPAClassifier(n_bases=16, random_state=0, optimize_hyperparameters=False).fit(X, y)
    assert start.log_evidence_ == pytest.approx(trace[0], abs=1e-7)


def test_learnt_hyperparameters_are_saved_with_their_trace(tmp_path):
    from saspa_dask import load_model

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 2))
    y = X[:, 0] - X[:, 1] ** 2 + 0.1 * rng.normal(size=200)
    reg = SASPARegressor(n_bases=10, random_state=0, learn_blur_scale=True).fit(X, y)
    assert reg.blur_scale_ != 1.0
    reg.save(tmp_path / "m.zarr")
    back = load_model(tmp_path / "m.zarr")
    assert ([r["log_evidence"] for r in back.hyperparameter_trace_]
            == [r["log_evidence"] for r in reg.hyperparameter_trace_])
    assert (back.hyperparameter_trace_[-1]["hyperparameters"]["lengthscale"]
            == list(reg.hyperparameter_trace_[-1]["hyperparameters"]["lengthscale"]))
    assert back.blur_scale_ == reg.blur_scale_
    np.testing.assert_array_equal(back.predict(X), reg.predict(X))


def _restart_case(kind):
    """Constructed so that one start wins by a wide margin: labels that change on a
    short scale along one of 4 inputs favour the shorter start (the last); a smooth
    (linear) boundary over 16 inputs favours the default, long start (the first)."""
    rng = np.random.default_rng(0 if kind == "short" else 2)
    d = 4 if kind == "short" else 16
    X = rng.normal(size=(240, d))
    f = np.sin(3 * X[:, 0]) if kind == "short" else X.sum(1) / 4
    y = (f + 0.1 * rng.normal(size=240) > 0).astype(int)
    # restarts, and optimiser iterations (few: each start stays in its own basin)
    return X, y, (1, 4) if kind == "short" else (2, 1)


@pytest.mark.parametrize("kind,winner", [("short", 1), ("smooth", 0)])
def test_restarts_keep_the_start_with_the_highest_evidence(kind, winner):
    """Each start maximised on its own (independent fits) against the restarted fit:
    the restarted fit must be the one of highest evidence, with its EP state rerun at
    the chosen point when that is not the last start (the "smooth" case) and kept
    when it is (the "short" case)."""
    X, y, (n_restarts, max_iter) = _restart_case(kind)
    # K-means bases kept (learnt means would be scaled by each start's lengthscales,
    # so a single fit from a restart's lengthscales would take another path)
    common = dict(n_bases=8, random_state=0, max_hyper_iter=max_iter, learn_bases=False)
    model = SASPAClassifier(n_restarts_optimizer=n_restarts, **common).fit(X, y)
    d = X.shape[1]
    start = model.hyperparameter_info_["starts"][0]["lengthscale_start"]
    singles = [SASPAClassifier(lengthscale=np.asarray(start) * d ** (-0.5 * k / n_restarts),
                               **common).fit(X, y) for k in range(n_restarts + 1)]
    evidences = [m.log_evidence_ for m in singles]
    best = int(np.argmax(evidences))
    assert best == winner  # the construction: both code paths are exercised
    assert max(evidences) > sorted(evidences)[-2]  # one start is strictly best
    assert model.hyperparameter_info_["chosen_start"] == best
    np.testing.assert_allclose([s["log_evidence"] for s in model.hyperparameter_info_["starts"]],
                               evidences, rtol=1e-9)
    assert model.log_evidence_ == pytest.approx(max(evidences), rel=1e-9)
    np.testing.assert_allclose(model.lengthscale_, singles[best].lengthscale_, rtol=1e-9)
    np.testing.assert_allclose(model.alpha_, singles[best].alpha_, rtol=1e-6,
                               atol=1e-6 * np.abs(singles[best].alpha_).max())
    assert {rec["start"] for rec in model.hyperparameter_trace_} == set(range(n_restarts + 1))


def test_the_optimiser_reports_its_cap_bounds_and_evidence(tmp_path):
    """Noise-free targets take the noise variance to the floor of its box (three decades
    below the data's start, a tenth of the target variance, whatever the start); a
    single iteration stops at the cap.  Both are reported, with the evidence before
    and after, on the estimator, in the store's summary and as job warnings."""
    from saspa_dask.jobs.training import optimiser_warnings
    from saspa_dask.storage import describe_model

    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(300, 1))
    y = np.sin(X[:, 0])
    with pytest.warns(UserWarning, match="noise variance ran to its floor"):
        reg = SASPARegressor(n_bases=15, random_state=0, noise_variance=10.0,
                             max_hyper_iter=50, learn_bases=None).fit(X, y)
    info = reg.hyperparameter_info_
    assert info["at_bounds"] == ["likelihood.noise_variance"] and not info["hit_iteration_cap"]
    assert reg.noise_variance_ == pytest.approx(0.1 * y.var() / 1000, rel=1e-9)
    assert info["log_evidence_start"] == pytest.approx(reg.hyperparameter_trace_[0]["log_evidence"])
    assert info["log_evidence_end"] == pytest.approx(reg.log_evidence_, rel=1e-9)
    assert info["log_evidence_end"] > info["log_evidence_start"]
    assert any("on a bound" in line and "noise_variance" in line
               for line in optimiser_warnings(info))
    clf = SASPAClassifier(n_bases=10, random_state=0, max_hyper_iter=1).fit(X, X[:, 0] > 0)
    assert clf.hyperparameter_info_["hit_iteration_cap"]
    assert clf.hyperparameter_info_["n_iterations"] == 1
    assert any("cap of 1 iterations" in line
               for line in optimiser_warnings(clf.hyperparameter_info_))
    clf.save(tmp_path / "m.zarr")
    assert describe_model(tmp_path / "m.zarr")["hyperparameters"]["info"][
        "hit_iteration_cap"] is True


def test_noisy_probit_learns_the_flip_rate():
    """Labels from a clean, well-separated boundary with 15% of them flipped at random:
    the learnt label noise of likelihood='noisy_probit' recovers the flip rate (the
    known truth of the generator), and far from the boundary the predicted class
    probability is the model's 1 - eps."""
    rng = np.random.default_rng(3)
    n, flip = 1500, 0.15
    X = rng.uniform(-3, 3, size=(n, 1))
    clean = np.where(X[:, 0] > 0, 1, -1)
    y = np.where(rng.uniform(size=n) < flip, -clean, clean)
    noisy = SASPAClassifier(n_bases=12, likelihood="noisy_probit", label_noise=0.05,
                            random_state=0).fit(X, y)
    assert noisy.label_noise_ == pytest.approx(flip, abs=0.03)
    Xt = np.array([[-2.0], [2.0]])
    p_noisy = noisy.predict_proba(Xt)[:, 1]
    # the model's class probability far from the boundary is 1 - eps at most
    np.testing.assert_allclose(p_noisy, [noisy.label_noise_, 1 - noisy.label_noise_],
                               atol=0.02)
    assert np.all(noisy.predict(Xt) == [-1, 1])


def test_the_learning_box_is_the_datas_and_does_not_move_with_the_start():
    """The hostile pass's case: every regression fit ended with its noise on the lower
    bound, and each retrain (which starts from the last fit's values) re-centred the
    box, so the noise could fall three decades further every time.  The box is
    centred on the values the data alone would start from, stretched to hold the
    start; a refit from a fit's own values keeps it, and the noise stays on the same
    floor, with a warning that says what to try."""
    from saspa_dask import LearntBoundWarning

    centre = Hyperparameters(np.array([2.0]), 1.0, {"noise_variance": 0.1})
    start = Hyperparameters(np.array([0.5]), 3.0, {"noise_variance": 1e-5}, centre=centre)
    box = np.exp(np.array(start.bounds()))
    np.testing.assert_allclose(box[0], [2e-3, 2e3], rtol=1e-12)
    np.testing.assert_allclose(box[1], [1e-3, 1e3], rtol=1e-12)
    np.testing.assert_allclose(box[2], [1e-5, 100.0], rtol=1e-12)  # stretched to 1e-5

    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(150, 1))
    y = np.sin(2 * X[:, 0])  # no noise: the noise runs to its floor
    with pytest.warns(LearntBoundWarning, match="noise variance ran to its floor.*alpha=0.5"):
        first = SASPARegressor(n_bases=40, learn_bases=None).fit(X, y)
    floor = 1e-4 * y.var()
    assert "likelihood.noise_variance" in first.hyperparameter_info_["at_bounds"]
    assert first.noise_variance_ == pytest.approx(floor, rel=1e-9)
    with pytest.warns(LearntBoundWarning):
        again = SASPARegressor(n_bases=40, learn_bases=None,
                               noise_variance=first.noise_variance_,
                               lengthscale=first.lengthscale_,
                               signal_variance=first.signal_variance_).fit(X, y)
    assert again.noise_variance_ == pytest.approx(floor, rel=1e-9)  # not 1e-3 x lower


@pytest.mark.parametrize("likelihood_name,blur", [("gaussian", "full"),
                                                  ("student_t", "delta")])
def test_the_learnt_mean_offsets_gradient_is_that_of_shifted_targets(likelihood_name, blur):
    """A constant prior mean c seen by a location likelihood is the same model as the
    targets y - c with no mean: the gradient (the code's shifted likelihood) against
    central differences of the evidence of shifted targets, at fixed sites and after
    EP re-converges (written here without the code's shift)."""
    from dataclasses import replace

    X, y, lik, means, covs = _problem(likelihood_name, blur)
    schedule = EPSchedule("parallel", 0.5, 3000, 1e-12, anderson_memory=0,
                          coarse_start=False)

    def trainer_for(targets):
        return Trainer(X, targets, None, means, covs, schedule, jitter=1e-8, block_rows=100)

    h0 = Hyperparameters(np.array([1.3, 0.9, 1.7]), 1.4, lik.hyperparameters(),
                         mean_offset=0.4, offset_scale=1.7)
    trainer = trainer_for(y)
    trainer.build(h0)
    results = trainer.run(h0.bind(lik))
    assert results[0].converged
    grad = h0.gradient_vector(trainer.gradient(results, h0.bind(lik)))
    sites = [(results[0].tau, results[0].nu)]
    assert h0.names()[-1 - len(lik.hyperparameters())] == "mean_offset"

    for reconverge in (False, True):
        def evidence(x):
            hyper = h0.from_log(x)
            shifted = trainer_for(y - hyper.mean_offset)
            shifted.build(replace(hyper, mean_offset=None), sites)
            plain = lik.with_hyperparameters(hyper.likelihood)
            return (shifted.run(plain)[0].log_evidence if reconverge
                    else shifted.evidence(plain))

        fd = central_differences(evidence, h0.to_log(), 1e-5)
        rtol = 1e-4 if likelihood_name == "student_t" else 1e-6
        np.testing.assert_allclose(grad, fd, rtol=rtol, atol=1e-5)
