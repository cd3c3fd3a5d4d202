"""The hyperparameter optimiser stops when it has converged, at its cap, or at its time
budget, says which, and backtracks from points where EP fails.

The objectives here are written in the tests in closed form (a concave quadratic in
log space, with a known maximiser) and fed to :func:`optimize` through real
:class:`Hyperparameters`; the estimator-level tests compare with an independent
dense FITC optimum.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy.optimize import minimize

import in_process
from saspa_dask import Basis, SASPAClassifier, SASPARegressor, kmeans_bases
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.optimizer import WINDOW, StopRule, optimize
from saspa_dask.jobs.training import optimiser_warnings

from reference import fitc_regression

# the maximiser in log space: log lengthscales, log signal variance
PEAK = np.array([0.3, -0.4, 0.2])


def quadratic(fail_above=None, delay=0.0, calls=None, banana=0.0):
    """energy = 1000 - 50 |x - PEAK|^2 in log space (a sum of many rows' worth),
    minus ``banana`` (r0 - r1^2)^2 (a curved valley that takes many iterations);
    EP "fails" (FloatingPointError) where log lengthscale[0] > ``fail_above``."""

    def evaluate(hyper):
        if calls is not None:
            calls.append(hyper)
        if delay:
            time.sleep(delay)
        x = np.log([*hyper.lengthscale, hyper.signal_variance])
        if fail_above is not None and x[0] > fail_above:
            raise FloatingPointError("EP broke down")
        r = x - PEAK
        valley = r[0] - r[1] ** 2
        grad = -100.0 * r - banana * 2 * valley * np.array([1.0, -2 * r[1], 0.0])
        return (1000.0 - 50.0 * r @ r - banana * valley ** 2,
                {"lengthscale": grad[:2], "signal_variance": grad[2]}, None)

    return evaluate


START = Hyperparameters(np.array([1.0, 1.0]), 1.0)


def test_converges_to_the_maximiser_and_says_so():
    best, _, trace, info = optimize(quadratic(), START, tol=1e-9, scale_rows=100)
    np.testing.assert_allclose(np.log([*best.lengthscale, best.signal_variance]), PEAK,
                               atol=1e-4)
    assert info["converged"] and info["stop_reason"] in ("energy", "gradient")
    assert not info["hit_iteration_cap"] and not info["hit_time_budget"]
    assert info["log_evidence_end"] == pytest.approx(1000.0, abs=1e-6)
    # the trace's relative change is each iteration's gain per row
    for a, b in zip(trace, trace[1:]):
        assert b["relative_change"] == pytest.approx(
            (b["log_evidence"] - a["log_evidence"]) / 100.0)


def test_the_energy_rule_averages_the_last_iterations():
    """Gains of 0.9 tol x scale per iteration stop once WINDOW of them are in; one
    small gain after large ones does not."""
    rule = StopRule(tol=1e-3, scale_rows=1000)

    def trace(gains):
        energy, out = 0.0, []
        for g in [0.0, *gains]:
            energy += g
            out.append({"log_evidence": energy, "projected_gradient": 1.0})
        return out

    assert rule.converged(trace([0.9] * WINDOW)) == "energy"
    assert rule.converged(trace([0.9] * (WINDOW - 1))) is None
    assert rule.converged(trace([50.0] * (WINDOW - 1) + [0.0])) is None
    assert StopRule(tol=0.0).converged(trace([0.0] * 10)) is None


def test_each_iteration_says_how_far_the_energy_rule_is(capsys):
    """The trace's window gain is the mean gain per row over the last WINDOW
    iterations, computed here from the energies; learning stopped by the energy rule
    stopped at the first iteration whose gain fell below tol; the progress line says
    both numbers."""
    from saspa_dask.fitting.progress import print_hyper

    best, _, trace, info = optimize(quadratic(banana=300.0), START, tol=1e-4,
                                    scale_rows=100)
    assert info["stop_reason"] == "energy"  # a curved valley: the energy rule ends it
    gains = [r["window_gain"] for r in trace]
    assert gains[:WINDOW] == [None] * WINDOW and len(trace) > WINDOW + 2
    for k in range(WINDOW, len(trace)):
        mean = (trace[k]["log_evidence"] - trace[k - WINDOW]["log_evidence"]) / WINDOW
        assert gains[k] == pytest.approx(mean / 100.0, rel=1e-12)
    assert gains[-1] < 1e-4 and all(g >= 1e-4 for g in gains[WINDOW:-1])
    print_hyper(trace[-1])
    line = capsys.readouterr().err
    assert f"(gain {gains[-1]:.1e}/row, stops below 1e-04)" in line


def test_a_small_gradient_right_after_a_large_step_is_not_convergence():
    """The hostile pass's case: "converged: the projected gradient is below tol after 1
    iterations" while that iteration had moved the energy by 7.7%."""
    rule = StopRule(tol=1e-4, scale_rows=1000)
    start = {"log_evidence": -2000.0, "projected_gradient": 1.0, "relative_change": None}
    big_step = {"log_evidence": -1850.0, "projected_gradient": 1e-6,
                "relative_change": 150.0 / 1000}
    small_step = {"log_evidence": -1849.99, "projected_gradient": 1e-6,
                  "relative_change": 0.01 / 1000}
    assert rule.converged([start, big_step]) is None
    assert rule.converged([start, big_step, small_step]) == "gradient"


def test_learning_stops_where_it_would_in_other_units():
    """Per row, not relative to the energy: targets in other units (y times 1e5, as
    prices in cents against dollars) shift the energy by N log 1e5 and change nothing
    else, so learning takes the same iterations to the same lengthscales, with the
    noise and signal variances scaled by 1e10."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-3, 3, size=(300, 2))
    y = np.sin(X[:, 0]) * np.cos(0.5 * X[:, 1]) + 0.1 * rng.normal(size=300)
    fits = [SASPARegressor(n_bases=10, learn_bases=None, random_state=0).fit(X, c * y)
            for c in (1.0, 1e5)]
    a, b = (f.hyperparameter_info_ for f in fits)
    assert a["n_iterations"] == b["n_iterations"] and a["stop_reason"] == b["stop_reason"]
    assert a["converged"]
    np.testing.assert_allclose(fits[1].lengthscale_, fits[0].lengthscale_, rtol=1e-5)
    np.testing.assert_allclose(fits[1].noise_variance_, 1e10 * fits[0].noise_variance_,
                               rtol=1e-4)
    # the energies differ by exactly N log c (the density's units)
    assert fits[1].log_evidence_ - fits[0].log_evidence_ == pytest.approx(
        -300 * np.log(1e5), rel=1e-8)


def test_the_cap_stops_and_is_not_convergence():
    _, _, trace, info = optimize(quadratic(banana=1e5), START, tol=0.0, max_iter=3)
    assert info["stop_reason"] == "cap" and info["hit_iteration_cap"]
    assert not info["converged"] and info["n_iterations"] == 3 and len(trace) == 4


def test_the_time_budget_stops_within_one_evaluation():
    calls = []
    t0 = time.perf_counter()
    _, _, _, info = optimize(quadratic(delay=0.02, calls=calls, banana=1e5), START, tol=0.0,
                             max_iter=10**6, deadline=t0 + 0.3)
    elapsed = time.perf_counter() - t0
    assert info["stop_reason"] == "time" and info["hit_time_budget"] and not info["converged"]
    # no evaluation starts after the deadline: at most one runs past it
    assert elapsed < 0.3 + 0.02 + 1.0
    assert len(calls) == info["n_evaluations"] >= 2


def test_no_evaluation_starts_that_would_end_after_the_deadline():
    """Evaluations of at least 0.2 s and a deadline 0.5 s after the start: the third
    would start at 0.4 s or later and, at the shortest one's duration, end after it, so
    at most two run (the first, at the start, always does)."""
    calls = []
    t0 = time.perf_counter()
    _, _, _, info = optimize(quadratic(delay=0.2, calls=calls, banana=1e5), START, tol=0.0,
                             max_iter=10**6, deadline=t0 + 0.5)
    assert info["stop_reason"] == "time" and 1 <= len(calls) <= 2


def test_failed_evaluations_backtrack_to_the_edge_of_the_good_region():
    """The maximiser lies where EP fails (log lengthscale[0] > 0.15): the optimiser
    backtracks from the failed points to the edge of the good region (log
    lengthscale[0] -> 0.15), gains on every coordinate, and reports the failures and
    that its line search, not convergence, stopped it."""
    best, _, _, info = optimize(quadratic(fail_above=0.15), START, tol=1e-9,
                                scale_rows=100)
    x = np.log([*best.lengthscale, best.signal_variance])
    assert info["n_failed_evaluations"] > 0 and info["stop_reason"] == "line search"
    assert not info["converged"]
    assert 0.14 < x[0] <= 0.15
    assert np.all(np.abs(x - PEAK) < np.abs(PEAK))  # every coordinate moved towards it
    assert info["log_evidence_end"] > 995.0 > info["log_evidence_start"]


def test_estimator_converges_to_the_dense_fitc_optimum_with_defaults():
    """Default stopping (no cap reached) lands on the optimum of an independent dense
    FITC marginal likelihood."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-3, 3, size=(150, 2))
    y = np.sin(1.5 * X[:, 0]) * np.cos(X[:, 1]) + 0.2 * rng.normal(size=150)
    Z = kmeans_bases(X, 12, random_state=0).means

    def negative_fitc(x):
        ls, s2, noise = np.exp(x[:2]), np.exp(x[2]), np.exp(x[3])
        return -fitc_regression(X, y, X[:1], Z, ls, s2, noise, 1e-8 * s2)[2]

    ref = minimize(negative_fitc, np.log([1.0, 1.0, 0.5, 0.1]), method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 500})
    reg = SASPARegressor(bases=Basis(Z), blur="delta", lengthscale=1.0, signal_variance=0.5,
                         noise_variance=0.1, center_y=False, learn_offset=False).fit(X, y)
    info = reg.hyperparameter_info_
    assert info["converged"] and info["stop_reason"] in ("energy", "gradient")
    ours = np.log([*reg.lengthscale_, reg.signal_variance_, reg.noise_variance_])
    np.testing.assert_allclose(ours, ref.x, atol=2e-2)
    assert -ref.fun - 1e-3 * 150 < reg.log_evidence_ <= -ref.fun + 1e-9


def test_a_budget_keeps_the_best_point_and_warns():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    clf = SASPAClassifier(n_bases=12, random_state=0, max_fit_time=1e-6).fit(X, y)
    info = clf.hyperparameter_info_
    assert info["stop_reason"] == "time" and info["n_iterations"] == 0
    # the start is kept: its evidence is that of a fit that learns nothing
    fixed = SASPAClassifier(n_bases=12, random_state=0, optimize_hyperparameters=False,
                            learn_bases=False).fit(X, y)
    assert clf.log_evidence_ == pytest.approx(fixed.log_evidence_, rel=1e-9)
    assert any("time budget" in line for line in optimiser_warnings(info))


def _posterior_of_sites(clf, X, y, n_bases):
    """The posterior mean the sites a classifier keeps give, computed here."""
    from saspa_dask.ep import block_statistics, make_block

    fitted = clf.fitted_posterior_
    block = make_block(X, np.where(y == 1, 1.0, -1.0), fitted.means, fitted.covs,
                       fitted.lengthscale, fitted.signal_variance, fitted.whitening)
    A, b = block_statistics(block.phi, clf.sites_tau_, clf.sites_nu_)
    return np.linalg.solve(np.eye(n_bases) + A, b)


def test_a_budget_with_no_room_for_ep_on_all_rows_keeps_the_samples_model():
    """max_fit_time is the whole fit's: spent before learning's first step, the
    subsample's start is learnt from (one evaluation) and, with no room left for EP on
    all rows, the model is EP on the learning sample, reported (not converged, no
    sweep on all rows, a warning); its sites are the sample's, zero elsewhere, and
    the model is the posterior of those sites.  (A budget this short learns first on
    half the first stage: 1,500 of the 3,000 rows asked for.)"""
    from saspa_dask.datasets import synthetic_two_class
    from saspa_dask.ep import EPConvergenceWarning

    X, y = synthetic_two_class(40_000, 3, seed=5)
    with pytest.warns(EPConvergenceWarning, match="no room for EP on all 40000 rows: the "
                                                  "model is EP on the learning sample's "
                                                  "1500 rows"):
        clf = SASPAClassifier(n_bases=16, blur="delta", random_state=0, hyper_subsample=3000,
                              max_fit_time=1e-9, execution={"block_rows": 2048}).fit(
            X, y, X_val=X[:500], y_val=y[:500])
    info = clf.hyperparameter_info_
    assert info["stop_reason"] == "time" and info["n_iterations"] == 0
    assert clf.held_out_trace_[-1]["rows"] == 1500  # the final model's sites' rows
    assert clf.n_sweeps_ == 0 and not clf.converged_ and clf.ep_stop_reason_ == "time"
    assert np.isnan(clf.log_evidence_)
    assert np.count_nonzero(clf.sites_tau_) == 1500 and clf.sites_tau_.shape == (40_000,)
    from saspa_dask.jobs import not_converged_advice
    assert "--max-fit-time" in not_converged_advice(clf)
    np.testing.assert_allclose(clf.fitted_posterior_.posteriors[0].mean,
                               _posterior_of_sites(clf, X, y, 16), rtol=1e-8, atol=1e-10)


def test_a_budget_short_of_ep_on_all_rows_sizes_the_sample_model_by_the_time_left():
    """Once a sweep is timed: with the time left under SAMPLE_MODEL_RATIO reserves of
    EP on all rows the model is a sample's, of the largest share of the rows whose
    reserve the time left holds as many times, within the shares learning allows (at
    or below the lower: learning's own sample, 0); learning then leaves that share of
    the reserve and the time a gathering of rows took (nothing for its own sample)."""
    from saspa_dask.fitting.budget import FitBudget
    from saspa_dask.fitting.policy import POLICY

    SWEEPS = POLICY.build_sweeps + POLICY.final_sweeps + 1
    assert POLICY.sample_model_ratio == 2.0  # the shares below are for this ratio
    reserve = SWEEPS * 2e-6 * 10**6  # 2 microseconds a row, 10^6 rows
    for left, shares, sample_model, share in (
            (2.5 * reserve, (0.02, 0.2), False, 0.0),    # room for EP on all rows
            (0.2 * reserve, (0.02, 0.2), True, 0.1),     # 0.2 / RATIO of the rows
            (1.0 * reserve, (0.02, 0.2), True, 0.2),     # 0.5 of the rows, capped
            (0.03 * reserve, (0.02, 0.2), True, 0.0),    # 0.015: below learning's
            (-1.0, (0.02, 0.2), True, 0.0)):             # the budget is spent
        budget = FitBudget(1e6, time.perf_counter(), n_rows=10**6)
        budget.observe(10_000, 0.02)
        budget.sample_shares, budget.read_seconds = shares, 0.25  # gathering a sample
        assert budget.reserve() == pytest.approx(reserve, rel=1e-12)
        budget._decide_sample_model(left)  # as learning_deadline does with the time left
        assert budget.sample_model is sample_model
        assert budget.sample_share == pytest.approx(share, rel=1e-12)
        kept = (reserve if not sample_model else 0.25 + share * reserve if share else 0.0)
        assert budget.learning_deadline() == pytest.approx(budget.end - kept, rel=1e-15)


def test_learning_starts_no_stage_whose_first_evaluation_the_budget_cannot_hold():
    """A learning stage that ended before the budget's learning deadline starts the
    next only when the time to the deadline holds one evaluation there, at the cost
    per row of the last stage's (here 0.5 s an evaluation on 20,000 rows: 2.5 s on
    100,000); said when not.  Without a budget, always."""
    from types import SimpleNamespace

    from saspa_dask.fitting.phases import _next_stage_fits

    said = []
    learnt = SimpleNamespace(trace=[{"seconds": 10.0, "n_evaluations": 20}])

    def run_with(left):
        deadline = time.perf_counter() + left
        return SimpleNamespace(budget=SimpleNamespace(learning_deadline=lambda: deadline),
                               say=said.append)

    assert _next_stage_fits(run_with(4.0), learnt, 20_000, 100_000) and not said
    assert not _next_stage_fits(run_with(1.0), learnt, 20_000, 100_000)
    assert said == ["learning: the time budget leaves no room for an evaluation on 100000 "
                    "rows; no further stages"]
    assert _next_stage_fits(SimpleNamespace(budget=None), learnt, 20_000, 100_000)


def test_a_budget_with_room_for_a_larger_sample_models_ep_on_it_at_the_learnt_values(
        monkeypatch):
    """A budget with no room for EP on all rows but room for EP on a larger sample
    than learning's (its ``sample_share``; the decision is fixed here: the test above
    checks it): the model is EP at the learnt values on that many rows, a prefix of
    learning's seeded permutation (so learning's sample is in it), reported (a
    warning naming its rows, no sweep on all rows, not converged); Gaussian EP on it
    equals closed-form FITC on those rows at the learnt values."""
    from saspa_dask.ep import EPConvergenceWarning
    from saspa_dask.fitting.budget import FitBudget

    def decide(budget, left):
        budget.sample_model, budget.sample_share = True, 0.25

    monkeypatch.setattr(FitBudget, "_decide_sample_model", decide)
    monkeypatch.setattr(FitBudget, "holds_reserve", lambda budget: False)
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, size=(6000, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.2 * rng.normal(size=6000)
    Z = rng.uniform(-2, 2, size=(15, 2))
    with pytest.warns(EPConvergenceWarning, match="the model is EP on a sample's 1500 rows "
                                                  "at the learnt values"):
        reg = SASPARegressor(bases=Basis(Z), blur="delta", learn_bases=False, center_y=False,
                             learn_offset=False, random_state=0, hyper_subsample=1000,
                             max_fit_time=600.0).fit(X, y)
    order = np.random.RandomState(0).permutation(6000)
    rows, learnt = np.sort(order[:1500]), np.sort(order[:1000])
    assert np.isin(learnt, rows).all()
    np.testing.assert_array_equal(np.flatnonzero(reg.sites_tau_), rows)
    assert reg.hyperparameter_info_["n_rows_learnt"] == 1000
    assert reg.n_sweeps_ == 0 and not reg.converged_ and np.isnan(reg.log_evidence_)
    Xs = rng.uniform(-2.5, 2.5, size=(50, 2))
    mean_ref, var_ref, _ = fitc_regression(X[rows], y[rows], Xs, Z, reg.lengthscale_,
                                           reg.signal_variance_, reg.noise_variance_,
                                           reg.jitter_)
    mean, var = reg.predict_latent(Xs)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(var, var_ref, rtol=1e-8, atol=1e-8)


def test_a_budget_stops_warm_started_ep_on_all_rows_after_a_sweep():
    """Warm-start sites give every row information, so EP on all rows runs whatever the
    budget; a budget spent stops it after its first sweep, reported (not converged, a
    warning); the model is the posterior of the sites it keeps."""
    from saspa_dask.datasets import synthetic_two_class
    from saspa_dask.ep import EPConvergenceWarning

    X, y = synthetic_two_class(40_000, 3, seed=5)
    start = (np.full(40_000, 0.1), np.zeros(40_000))
    with pytest.warns(EPConvergenceWarning, match="stopped by the time budget after 1 sweep") \
            as caught:
        clf = SASPAClassifier(n_bases=16, blur="delta", random_state=0, hyper_subsample=3000,
                              max_fit_time=1e-9, execution={"block_rows": 2048}).fit(
            X, y, init_sites=start)
    # the budget stopped EP, not its sweep cap: no advice to raise max_sweeps
    assert not [w for w in caught if "max_sweeps" in str(w.message)]
    assert clf.n_sweeps_ == 1 and not clf.converged_ and clf.coarse_start_ == []
    assert clf.ep_stop_reason_ == "time" and np.isfinite(clf.log_evidence_)
    np.testing.assert_allclose(clf.fitted_posterior_.posteriors[0].mean,
                               _posterior_of_sites(clf, X, y, 16), rtol=1e-8, atol=1e-10)


def test_a_budget_keeps_room_for_ep_on_all_rows_by_the_sweeps_it_timed():
    """The reserve is the block build (BUILD_SWEEPS), FINAL_SWEEPS sweeps on all rows and
    the closing evidence pass at the median cost per row of the timed sweeps; learning on all rows
    needs room for EVALUATIONS_ON_ALL evaluations of EVALUATION_SWEEPS sweeps besides."""
    import time

    from saspa_dask.fitting.budget import FitBudget
    from saspa_dask.fitting.policy import POLICY

    BUILD_SWEEPS, FINAL_SWEEPS = POLICY.build_sweeps, POLICY.final_sweeps
    EVALUATIONS_ON_ALL, EVALUATION_SWEEPS = POLICY.evaluations_on_all, POLICY.evaluation_sweeps

    began = time.perf_counter()
    budget = FitBudget(1000.0, began, n_rows=10**6)
    assert budget.reserve() == 0.0 and budget.learning_deadline() == began + 1000.0
    assert not budget.affords_learning_on_all()  # nothing timed yet
    for rows, seconds in ((10_000, 0.01), (10_000, 0.03), (20_000, 0.04)):
        budget.observe(rows, seconds)  # 1, 3 and 2 microseconds a row: median 2
    sweep = 2e-6 * 10**6
    assert budget.reserve() == pytest.approx((BUILD_SWEEPS + FINAL_SWEEPS + 1) * sweep,
                                             rel=1e-12)
    assert budget.learning_deadline() == pytest.approx(began + 1000.0 - budget.reserve(),
                                                       rel=1e-15)
    needed = (EVALUATIONS_ON_ALL * EVALUATION_SWEEPS + BUILD_SWEEPS + FINAL_SWEEPS + 1) * sweep
    assert needed < 500.0 and budget.affords_learning_on_all()
    short = FitBudget(needed / 2, time.perf_counter(), 10**6)
    short.observe(10_000, 0.02)
    assert not short.affords_learning_on_all()


def test_a_budget_counts_the_block_build_at_the_builds_it_timed():
    """Once learning's block builds are timed, the reserve's build is their median cost
    per row times the rows (once for all of one-vs-rest's problems, which each sweep
    the rows), not BUILD_SWEEPS sweeps."""
    from saspa_dask.fitting.budget import FitBudget
    from saspa_dask.fitting.policy import POLICY

    FINAL_SWEEPS = POLICY.final_sweeps
    budget = FitBudget(1000.0, time.perf_counter(), n_rows=10**5, problems=3)
    budget.observe(10_000, 0.02)  # 2 microseconds a row and problem
    for rows, seconds in ((20_000, 0.1), (20_000, 0.06), (10_000, 0.04)):
        budget.observe_build(rows, seconds)  # 5, 3 and 4 microseconds a row: median 4
    build, sweep = 4e-6 * 10**5, 2e-6 * 3 * 10**5
    assert budget.reserve() == pytest.approx(build + (FINAL_SWEEPS + 1) * sweep, rel=1e-12)


def test_a_budget_pays_for_the_k_means_rows_it_affords(monkeypatch):
    """K-means' Lloyd rows under a budget: what KMEANS_SHARE of it pays for at
    KMEANS_ROW_COST one-core matmul flops per row, basis and input, rounded down to a
    power of two, never below its start's sample nor above its default; a fit hands
    them to K-means."""
    from saspa_dask.datasets import synthetic_two_class
    from dataclasses import replace

    from saspa_dask.fitting import policy
    from saspa_dask.fitting.budget import FitBudget

    KMEANS_ROW_COST, KMEANS_SHARE = policy.POLICY.kmeans_row_cost, policy.POLICY.kmeans_share

    monkeypatch.setattr("saspa_dask.fitting.costs.matmul_rate", lambda: 4.8e10)
    # 10 s: 0.05 * 10 * 4.8e10 / (240 * 256 * 8) = 48,828 rows: 2^15
    assert KMEANS_SHARE * 10.0 * 4.8e10 / (KMEANS_ROW_COST * 256 * 8) == pytest.approx(
        48_828.125, rel=1e-12)
    assert FitBudget(10.0, time.perf_counter(), 10**6).lloyd_rows(256, 8) == 32_768
    assert FitBudget(1e4, time.perf_counter(), 10**6).lloyd_rows(256, 8) == 200_000
    assert FitBudget(1e4, time.perf_counter(), 10**6).lloyd_rows(4096, 8) == 409_600
    assert FitBudget(1e-3, time.perf_counter(), 10**6).lloyd_rows(256, 8) == 10_000
    assert FitBudget(1e-3, time.perf_counter(), 10**6).lloyd_rows(1024, 8) == 20_480
    # through a fit: nothing affordable, so the start's sample of 10,000 of 30,000 rows
    monkeypatch.setattr(policy, "POLICY", replace(policy.POLICY, kmeans_share=0.0))
    X, y = synthetic_two_class(30_000, 2, seed=3)
    clf = SASPAClassifier(n_bases=8, blur="delta", random_state=0, max_fit_time=60.0,
                          optimize_hyperparameters=False).fit(X, y)
    assert clf.kmeans_info_["lloyd_rows"] == 10_000
    unbudgeted = SASPAClassifier(n_bases=8, blur="delta", random_state=0,
                                 optimize_hyperparameters=False).fit(X, y)
    assert unbudgeted.kmeans_info_["lloyd_rows"] == 30_000


def test_a_short_budget_learns_first_on_half_the_first_stage(monkeypatch):
    """A budget shorter than HALF_STAGE_EVALUATIONS estimated evaluations of the first
    stage learns first on half its rows (not below HALF_STAGE_ROWS_PER_BASIS rows a
    basis), then on the stages asked for: prefixes of one permutation."""
    from saspa_dask.datasets import synthetic_two_class
    from saspa_dask.fitting.budget import FitBudget
    from saspa_dask.fitting.policy import POLICY

    HALF_STAGE_EVALUATIONS = POLICY.half_stage_evaluations
    HALF_STAGE_ROWS_PER_BASIS = POLICY.half_stage_rows_per_basis

    budget = FitBudget(10.0, time.perf_counter(), 10**6)
    just_over = 10.0 / HALF_STAGE_EVALUATIONS * 1.001
    assert budget.first_stage_rows(20_000, just_over, 256) == 10_000
    assert budget.first_stage_rows(20_000, just_over / 1.002, 256) == 20_000
    assert budget.first_stage_rows(20_000, 100.0, 10_000 // HALF_STAGE_ROWS_PER_BASIS) \
        == 10_000
    assert budget.first_stage_rows(20_000, 100.0, 10_000 // HALF_STAGE_ROWS_PER_BASIS + 1) \
        == 20_000
    # through a fit: an evaluation estimated at an hour, so any budget is short
    monkeypatch.setattr("saspa_dask.fitting.fit_run.evaluation_cost",
                        lambda *a, **k: {"seconds_per_evaluation": 3600.0,
                                         "flops_per_evaluation": 1.0})
    X, y = synthetic_two_class(12_000, 2, seed=4)
    clf = SASPAClassifier(n_bases=8, blur="delta", random_state=0, max_fit_time=60.0,
                          hyper_subsample=[4_000, 8_000], max_hyper_iter=2).fit(X, y)
    assert [s["rows"] for s in clf.hyperparameter_info_["stages"]] == [2_000, 4_000, 8_000]


def test_restarts_move_learnt_bases_out_of_a_bad_corner():
    """Twelve bases started in one corner of a 2-D square and learnt from there stay
    near it; restarts over basis positions (K-means with further seeds) find a
    far higher energy, keep it, and spread the bases over the data."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(600, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=600)
    corner = Basis(np.column_stack([np.linspace(-3, -2.6, 12)] * 2))
    # exact_start=False: the check against an exact GP's start (which takes the lone
    # corner fit from -524 to -18 here) is not what this test measures
    common = dict(bases=corner, blur="delta", learn_bases="means", random_state=0,
                  exact_start=False)
    alone = SASPARegressor(**common).fit(X, y)
    restarted = SASPARegressor(n_restarts_optimizer=2, **common).fit(X, y)
    starts = restarted.hyperparameter_info_["starts"]
    assert starts[0]["log_evidence"] == pytest.approx(alone.log_evidence_, rel=1e-9)
    assert not starts[0]["bases_moved"] and all(s["bases_moved"] for s in starts[1:])
    best = max(s["log_evidence"] for s in starts)
    assert restarted.log_evidence_ == pytest.approx(best, rel=1e-9)
    assert best > alone.log_evidence_ + 100.0
    means = restarted.bases_.means
    quadrants = {(bool(a > 0), bool(b > 0)) for a, b in means}
    assert len(quadrants) == 4


def test_staged_learning_continues_from_each_stage_on_a_larger_subsample():
    """hyper_subsample=(300, 1000): the first stage is the single-stage fit on 300
    rows; the second starts at its learnt values on 1000 rows (a prefix of one seeded
    permutation, containing the first), where its starting energy equals an
    independent fixed fit there, and ends higher; 'all' (None) last learns on every
    row."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-3, 3, size=(3000, 2))
    y = np.sin(2 * X[:, 0]) * np.cos(X[:, 1]) + 0.1 * rng.normal(size=3000)
    common = dict(n_bases=10, blur="delta", random_state=0, center_y=False,
                  learn_offset=False)
    one = SASPARegressor(hyper_subsample=300, **common).fit(X, y)
    staged = SASPARegressor(hyper_subsample=(300, 1000), **common).fit(X, y)
    first, second = staged.hyperparameter_info_["stages"]
    assert (first["rows"], second["rows"]) == (300, 1000)
    assert first["log_evidence_end"] == pytest.approx(
        one.hyperparameter_info_["log_evidence_end"], rel=1e-12)
    rows = np.sort(np.random.RandomState(0).permutation(3000)[:1000])
    at_first = SASPARegressor(optimize_hyperparameters=False, bases=one.bases_,
                              lengthscale=one.lengthscale_,
                              signal_variance=one.signal_variance_,
                              noise_variance=one.noise_variance_, blur="delta",
                              center_y=False, ep={"tol": 1e-10}).fit(X[rows], y[rows])
    assert second["log_evidence_start"] == pytest.approx(at_first.log_evidence_, abs=1e-4)
    assert second["log_evidence_end"] > second["log_evidence_start"]
    assert staged.hyperparameter_info_["n_rows_learnt"] == 1000
    assert {r["stage"] for r in staged.hyperparameter_trace_} == {0, 1}
    every = SASPARegressor(hyper_subsample=(300, None), **common).fit(X, y)
    assert every.hyperparameter_info_["n_rows_learnt"] == 3000
    assert [s["rows"] for s in every.hyperparameter_info_["stages"]] == [300, 3000]
    with pytest.raises(ValueError, match="must be increasing"):
        SASPARegressor(hyper_subsample=(1000, 300), **common).fit(X, y)


def test_cli_learns_in_stages_and_info_says_where(tmp_path):
    """saspa train --hyper-subsample 300,1000,all on a Dask store: two stages in
    memory on the driver, the last on the workers; saspa info lists them; a bad stage
    list is refused naming the option."""

    from saspa_dask import load_model

    def saspa(*args):
        return in_process.saspa(*args)

    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=3000)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    assert saspa("ingest", tmp_path / "d.npy", "--out", tmp_path / "d.zarr",
                 "--chunk-rows", 1000).returncode == 0
    res = saspa("train", tmp_path / "d.zarr", "--out", tmp_path / "m.zarr", "--task",
                "regression", "--n-bases", 6, "--blur", "delta", "--hyper-subsample",
                "300,1000,all", "--max-hyper-iter", 2, "--workers", 1)
    assert res.returncode == 0, res.stderr
    info = load_model(tmp_path / "m.zarr").hyperparameter_info_
    assert [(s["rows"], s["where"]) for s in info["stages"]] == [
        (300, "driver (in memory)"), (1000, "driver (in memory)"), (3000, "workers")]
    shown = saspa("info", tmp_path / "m.zarr").stdout
    assert "stage 2: 3000 rows on the workers" in shown
    bad = saspa("train", tmp_path / "d.zarr", "--out", tmp_path / "n.zarr",
                "--hyper-subsample", "300,lots")
    assert bad.returncode != 0 and "hyper_subsample: 'lots'" in bad.stderr


def test_a_checkpoint_stops_learning_that_is_behind_there_and_only_then():
    """``StopRule.checkpoint`` (a race of learning starts): at iteration 3 the energy
    per row is compared with the other start's; below it, learning stops there
    ("overtaken"), not a converged end; above it, learning runs on as without it."""
    free = optimize(quadratic(banana=1e5), START, tol=0.0, max_iter=8, scale_rows=10)
    at_3 = free[2][3]["log_evidence"] / 10
    behind = optimize(quadratic(banana=1e5), START, tol=0.0, max_iter=8, scale_rows=10,
                      checkpoint=(3, at_3 + 1e-6))
    ahead = optimize(quadratic(banana=1e5), START, tol=0.0, max_iter=8, scale_rows=10,
                     checkpoint=(3, at_3 - 1e-6))
    assert behind[3]["stop_reason"] == "overtaken" and behind[3]["n_iterations"] == 3
    assert not behind[3]["converged"]
    assert ahead[3]["stop_reason"] == "cap" and ahead[3]["n_iterations"] == 8
    assert [r["log_evidence"] for r in ahead[2]] == [r["log_evidence"] for r in free[2]]
