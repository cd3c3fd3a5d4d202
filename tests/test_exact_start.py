"""The exact GP's start of a regression's learning (saspa_dask.fitting.exact_start),
against a multivariate normal density computed here and finite differences."""

import math
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from conftest import DATASETS, needs_dataset

from saspa_dask import SASPAClassifier, SASPARegressor
from dataclasses import replace

from saspa_dask.fitting import policy
from saspa_dask.fitting.policy import POLICY
from saspa_dask.fitting.exact_start import (exact_gp_start, log_marginal,
                                             start_rows)
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.input_groups import default_lengthscale
from saspa_dask.parameters import parse_exact_start


def _se_covariance(X, lengthscale, signal, noise):
    """K + noise I of the SE-ARD kernel, entry by entry (a reference, not the code's
    distance trick)."""
    n = X.shape[0]
    K = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            K[i, j] = signal * math.exp(-0.5 * np.sum(((X[i] - X[j]) / lengthscale) ** 2))
    return K + noise * np.eye(n)


def test_log_marginal_is_the_gaussian_density_and_its_gradient_is_the_slope():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(40, 3)), rng.normal(size=40)
    x = np.log([0.7, 1.9, 3.1, 1.3, 0.2])
    value, grad = log_marginal(x, X, y)
    C = _se_covariance(X, np.exp(x[:3]), math.exp(x[3]), math.exp(x[4]))
    assert value == pytest.approx(multivariate_normal(np.zeros(40), C).logpdf(y), rel=1e-12)
    h = 1e-5
    for k in range(x.size):
        step = np.zeros_like(x)
        step[k] = h
        slope = (log_marginal(x + step, X, y)[0] - log_marginal(x - step, X, y)[0]) / (2 * h)
        assert grad[k] == pytest.approx(slope, rel=1e-6, abs=1e-7)


def _gp_draw(n, d, relevant_lengthscale, noise, seed):
    """Targets drawn from an SE GP in the first input only, plus Gaussian noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    C = _se_covariance(X[:, :1], np.array([relevant_lengthscale]), 1.0, 1e-8)
    f = np.linalg.cholesky(C) @ rng.normal(size=n)
    return X, f + math.sqrt(noise) * rng.normal(size=n)


def test_the_start_finds_the_relevant_input_and_the_noise_within_the_box():
    X, y = _gp_draw(300, 4, 0.8, 0.01, seed=5)
    start = Hyperparameters(np.full(4, 2.0), float(y.var()),
                            {"noise_variance": 0.1 * float(y.var())})
    bounds = start.bounds()
    moved, record = exact_gp_start(start, bounds, X, y - y.mean())
    assert record["method"] == "exact-gp" and record["rows"] == 300
    before, after = record["log_marginal_per_row"]
    assert after > before
    # the first input is the relevant one: its lengthscale near the truth, the others
    # far longer; the noise within a factor of 2 of the truth
    assert 0.5 < moved.lengthscale[0] < 1.3
    assert np.all(moved.lengthscale[1:] > 10 * moved.lengthscale[0])
    assert 0.005 < moved.likelihood["noise_variance"] < 0.02
    # a decade inside learning's box everywhere
    x = moved.to_log()
    for k in (0, 1, 2, 3, 4, 5):
        lo, hi = bounds[k]
        assert lo + math.log(10) - 1e-12 <= x[k] <= hi - math.log(10) + 1e-12


PUMADYN = DATASETS / "pumadyn32nm_train.csv"


def _pumadyn_rows(n):
    data = np.loadtxt(PUMADYN, delimiter=",", skiprows=1)[:n]
    return data[:, :-1], data[:, -1]


@needs_dataset(PUMADYN)
def test_the_start_finds_pumadyn_32nm_four_relevant_inputs():
    # Pumadyn-32nm: 4 of its 32 inputs matter (the datasets' README): inputs 4, 5, 15
    # and 16 counted from 1, the ones an exact GP without the box singles out on other
    # samples (lengthscales 20 times shorter than the rest's; benchmarks/RESULTS.md,
    # "The exact GP's start, per row").  With every value boxed,
    # L-BFGS-B's first trial point is the Cauchy point at unit curvature, x - g: for a
    # log marginal likelihood summed over 512 rows that is the box's corner, and the
    # line search back from it ended on the all-noise optimum (every lengthscale
    # short, the signal a second noise).  On the fit's own sample it must find them.
    X, y = _pumadyn_rows(None)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = (y - y.mean()) / y.std()
    rows = start_rows(y.size, 0)
    Xs, ys = X[rows], y[rows] - y[rows].mean()
    d = X.shape[1]
    start = Hyperparameters(np.full(d, math.sqrt(d)), float(ys.var()),
                            {"noise_variance": 0.1 * float(ys.var())})
    moved, record = exact_gp_start(start, start.bounds(), Xs, ys)
    assert record["method"] == "exact-gp"
    assert sorted(np.argsort(moved.lengthscale)[:4].tolist()) == [3, 4, 14, 15]
    # a second noise would explain nothing beyond independent noise: this explains
    # more than a nat per row
    assert record["log_marginal_per_row"][1] > record["noise_only_per_row"] + 1.0


@needs_dataset(PUMADYN)
def test_learning_stopped_on_the_plateau_goes_on_from_the_exact_start(monkeypatch):
    # On 2,000 of Pumadyn-32nm's rows with 16 bases (random_state=3), learning from the
    # data-driven start stops by its rule on the plateau where no input is switched off
    # (energy -2379.8); the exact GP's start is higher (-2167.2), and learning goes on
    # from there to the four inputs that matter.  That learning's work is a fiftieth of
    # the exact GP's most: checked here whatever its work (not by default)
    X, y = _pumadyn_rows(2000)
    short = SASPARegressor(16, random_state=3, learning_start="data").fit(X, y)
    assert "start" not in short.hyperparameter_info_
    monkeypatch.setattr(policy, "POLICY", replace(policy.POLICY, exact_check_work_ratio=0.0))
    model = SASPARegressor(16, random_state=3, learning_start="data").fit(X, y)
    start = model.hyperparameter_info_["start"]
    assert start["method"] == "exact-gp" and start["checked_after_learning"]
    assert start["energy_at_exact_start"] > start["energy_learnt"]
    assert model.log_evidence_ > start["energy_at_exact_start"] + 1000.0
    relative = model.lengthscale_ / X.std(axis=0)
    assert sorted(np.argsort(relative)[:4].tolist()) == [3, 4, 14, 15]
    # without the check (the default's "auto" checks only with a budget: the first
    # fit), the fit is the one that stopped
    assert short.log_evidence_ == pytest.approx(start["energy_learnt"], rel=1e-12)
    # Dask rows are checked too (their learning is a stage of every row, in memory);
    # the two paths' targets differ in the last bit, which 300 L-BFGS-B iterations
    # grow to a few nats, so the same decision and end are asked, not the same bits
    with dask.config.set(scheduler="sync"):
        lazy = SASPARegressor(16, random_state=3, learning_start="data").fit(
            da.from_array(X, chunks=(500, 32)), da.from_array(y, chunks=500))
    assert lazy.hyperparameter_info_["start"]["method"] == "exact-gp"
    assert lazy.log_evidence_ > start["energy_at_exact_start"] + 1000.0


@needs_dataset(PUMADYN)
def test_learning_that_ended_above_the_exact_start_is_kept_as_it_is(monkeypatch, tmp_path):
    monkeypatch.setattr(policy, "POLICY", replace(policy.POLICY, exact_check_work_ratio=0.0))
    X, y = _pumadyn_rows(2000)
    checked = SASPARegressor(16, random_state=0, learning_start="data").fit(X, y)
    plain = SASPARegressor(16, random_state=0, exact_start=False,
                           learning_start="data").fit(X, y)
    start = checked.hyperparameter_info_["start"]
    assert start["method"] == "data" and start["checked_after_learning"]
    assert start["energy_learnt"] > start["energy_at_exact_start"]
    np.testing.assert_array_equal(checked.lengthscale_, plain.lengthscale_)
    assert checked.log_evidence_ == plain.log_evidence_
    # the saved model keeps the check's record, and saspa info says it
    checked.save(tmp_path / "m.zarr")
    import in_process

    res = in_process.saspa("info", str(tmp_path / "m.zarr"))
    assert res.returncode == 0, res.stderr
    assert (f"start: the data-driven values (learning from the data-driven start ended "
            f"above the exact GP's start); checked after learning: ended at "
            f"{start['energy_learnt']:.6g}, {start['energy_at_exact_start']:.6g} at the "
            f"exact GP's start") in res.stdout


def test_a_regression_starts_from_the_exact_gp_when_asked_and_not_from_a_given_start():
    X, y = _gp_draw(800, 3, 0.8, 0.01, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = SASPARegressor(16, random_state=0, max_hyper_iter=3,
                                exact_start=True).fit(X, y)
        # "auto": only with a time budget and learning on a row sample of larger data
        auto_all = SASPARegressor(16, random_state=0, max_hyper_iter=3,
                                  max_fit_time=600).fit(X, y)
        auto_unbudgeted = SASPARegressor(16, random_state=0, max_hyper_iter=3,
                                         hyper_subsample=600).fit(X, y)
        auto_sample = SASPARegressor(16, random_state=0, max_hyper_iter=3,
                                     hyper_subsample=600, max_fit_time=600).fit(X, y)
        # the data-driven start's lengthscales, given: no exact start
        given = SASPARegressor(16, random_state=0, max_hyper_iter=3, exact_start=True,
                               lengthscale=default_lengthscale(X.std(axis=0))).fit(X, y)
        fixed = SASPARegressor(16, random_state=0, exact_start=True,
                               optimize_hyperparameters=False).fit(X, y)
    start = fitted.hyperparameter_info_["start"]
    assert start["method"] == "exact-gp" and start["rows"] == min(POLICY.exact_start_rows, 800)
    assert "start" not in given.hyperparameter_info_
    assert "start" not in auto_all.hyperparameter_info_
    assert "start" not in auto_unbudgeted.hyperparameter_info_
    assert auto_sample.hyperparameter_info_["start"]["rows"] == POLICY.exact_start_rows
    assert "start" not in fixed.hyperparameter_info_
    # from the exact GP's start, three iterations are past the data-driven start's
    assert fitted.log_evidence_ > given.log_evidence_


def test_classification_keeps_the_data_driven_start():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = (X[:, 0] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SASPAClassifier(8, random_state=0, max_hyper_iter=2,
                                hyper_subsample=100, max_fit_time=600).fit(X, y)
    assert "start" not in model.hyperparameter_info_


def test_a_sample_with_no_structure_keeps_the_data_driven_start():
    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(300, 3)), rng.normal(size=300)  # y independent of X
    start = Hyperparameters(np.full(3, 1.7), 1.0, {"noise_variance": 0.1})
    moved, record = exact_gp_start(start, start.bounds(), X, y)
    assert record["method"] == "data" and "no structure" in record["reason"]
    assert moved is start


@pytest.mark.parametrize("text, value", [("auto", "auto"), ("on", True), ("OFF", False),
                                         ("true", True), (False, False)])
def test_exact_start_from_the_cli_and_toml(text, value):
    assert parse_exact_start(text) == value


def test_a_bad_exact_start_is_refused_by_name():
    with pytest.raises(ValueError, match="exact_start: 'sometimes'"):
        parse_exact_start("sometimes")


def test_a_saved_model_keeps_its_start_and_saspa_info_says_it(tmp_path):
    import in_process

    from saspa_dask import load_model

    X, y = _gp_draw(700, 3, 0.8, 0.01, seed=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SASPARegressor(8, random_state=0, exact_start=True, max_hyper_iter=2).fit(
            X, y).save(tmp_path / "m.zarr")
    loaded = load_model(tmp_path / "m.zarr")
    assert loaded.exact_start is True
    assert loaded.hyperparameter_info_["start"]["rows"] == POLICY.exact_start_rows
    res = in_process.saspa("info", str(tmp_path / "m.zarr"))
    assert res.returncode == 0, res.stderr
    assert f"start: an exact GP on {POLICY.exact_start_rows} rows" in res.stdout
