"""Batch scoring to zarr: results, resumability after a real kill, input checks."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
from scipy.stats import norm
import pytest
import zarr

from saspa_dask import SASPAClassifier, SASPARegressor, load_model
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.storage.scores import evaluate, score
from saspa_dask.storage import StoreError, ingest

import in_process
from conftest import scoring_problem, wait_for_done_flags

BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def threaded_dask():
    with dask.config.set(scheduler="threads"):
        yield


@pytest.fixture(scope="module")
def classification(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cls")
    X, y = synthetic_two_class(12_000, 4, seed=5)
    np.save(tmp / "d.npy", np.column_stack([X, y]))
    ingest(tmp / "d.npy", tmp / "d.zarr", chunk_rows=2_500)
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=24, random_state=0).fit(X, y)
    model.save(tmp / "m.zarr")
    return tmp, X, y, load_model(tmp / "m.zarr")


def _read(path):
    g = zarr.open_group(str(path), mode="r")
    return g, dict(g.attrs)


def test_scores_equal_in_memory_predictions(classification, tmp_path):
    tmp, X, y, model = classification
    result = score(model, tmp / "d.zarr", tmp_path / "s.zarr")
    assert result == {"chunks_total": 5, "chunks_written": 5, "rows": 12_000,
                      "columns": "columns matched by count (the store or the model records "
                                 "no names)"}
    g, attrs = _read(tmp_path / "s.zarr")
    assert attrs["complete"] and attrs["model_fingerprint"] == model.model_fingerprint()
    assert g["done"][...].all() and g["proba"].chunks == (2_500,)
    mean, var = model.predict_latent(X)
    np.testing.assert_allclose(g["mean"][...], mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g["variance"][...], var, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g["proba"][...], model.predict_proba(X)[:, 1], rtol=1e-12)
    with pytest.raises(StoreError, match="scores are complete; use --overwrite"):
        score(model, tmp / "d.zarr", tmp_path / "s.zarr")
    again = score(model, tmp / "d.zarr", tmp_path / "s.zarr", overwrite=True)
    assert again["chunks_written"] == 5


def test_evaluate_matches_metrics_from_predictions(classification):
    tmp, X, y, model = classification
    metrics = evaluate(model, tmp / "d.zarr")
    proba = model.predict_proba(X)
    p_true = np.where(y == model.classes_[1], proba[:, 1], proba[:, 0])
    assert metrics["rows"] == 12_000
    assert metrics["error"] == pytest.approx(np.mean(model.predict(X) != y), abs=1e-12)
    assert metrics["nlp"] == pytest.approx(-np.mean(np.log(p_true)), rel=1e-9)
    # the error's context: always the commonest class; the Brier score of two classes,
    # scikit-learn's (the mean squared error of P(positive))
    from sklearn.metrics import brier_score_loss

    positive = np.mean(y == model.classes_[1])
    assert metrics["base_error"] == pytest.approx(min(positive, 1 - positive), abs=1e-12)
    is_positive = (y == model.classes_[1]).astype(float)
    assert metrics["brier"] == pytest.approx(np.mean((proba[:, 1] - is_positive) ** 2),
                                             rel=1e-9)
    assert metrics["brier"] == pytest.approx(brier_score_loss(is_positive, proba[:, 1]),
                                             rel=1e-9)


def test_regression_scores_and_metrics(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(3_000, 2))
    y = 5.0 + np.sin(X[:, 0]) * X[:, 1] + 0.2 * rng.normal(size=3_000)
    np.save(tmp_path / "r.npy", np.column_stack([X, y]))
    ingest(tmp_path / "r.npy", tmp_path / "r.zarr", chunk_rows=700)
    model = SASPARegressor(optimize_hyperparameters=False, n_bases=20, random_state=0).fit(X, y)
    score(model, tmp_path / "r.zarr", tmp_path / "s.zarr")
    g, attrs = _read(tmp_path / "s.zarr")
    assert "proba" not in set(g.array_keys())
    np.testing.assert_allclose(g["mean"][...], model.predict(X), rtol=1e-12)
    metrics = evaluate(model, tmp_path / "r.zarr")
    mean, std = model.predict(X, return_std=True)
    assert metrics["rmse"] == pytest.approx(np.sqrt(np.mean((y - mean) ** 2)), rel=1e-10)
    assert metrics["mae"] == pytest.approx(np.mean(np.abs(y - mean)), rel=1e-10)
    nlpd = -np.mean(-0.5 * np.log(2 * np.pi * std**2) - 0.5 * ((y - mean) / std) ** 2)
    assert metrics["nlpd"] == pytest.approx(nlpd, rel=1e-10)
    # the RMSE's context: the best constant's (these rows' standard deviation), and R^2
    assert metrics["base_rmse"] == pytest.approx(np.std(y), rel=1e-10)
    assert metrics["r2"] == pytest.approx(1 - np.mean((y - mean) ** 2) / np.var(y), rel=1e-10)
    # and the intervals' calibration: the share inside mean -+ 1.96 std
    z = norm.ppf(0.975)
    assert metrics["coverage_95"] == np.mean(np.abs(y - mean) <= z * std)


def test_gaussian_regression_writes_its_predictive_interval(tmp_path):
    """lower / upper: mean -+ the normal quantile times the new observation's standard
    deviation (computed here from predict's), at the store's recorded level; with
    log_target the exponential of log y's interval; held-out rows fall inside about
    as often as the level says (binomial: 4 standard deviations); an incomplete store
    of another level is not resumed; a Student-t regressor writes no interval."""
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(6_000, 2))
    f = np.sin(X[:, 0]) * X[:, 1]
    y = 5.0 + f + 0.2 * rng.normal(size=6_000)
    np.save(tmp_path / "r.npy", np.column_stack([X, y]))
    ingest(tmp_path / "r.npy", tmp_path / "r.zarr", chunk_rows=1_500)
    model = SASPARegressor(n_bases=20, random_state=0, max_hyper_iter=30).fit(X[:3_000],
                                                                              y[:3_000])
    score(model, tmp_path / "r.zarr", tmp_path / "s.zarr", interval_level=0.8)
    g, attrs = _read(tmp_path / "s.zarr")
    assert attrs["interval_level"] == 0.8 and {"lower", "upper"} <= set(attrs["outputs"])
    mean, std = model.predict(X, return_std=True)
    z = norm.ppf(0.9)
    np.testing.assert_allclose(g["lower"][...], mean - z * std, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g["upper"][...], mean + z * std, rtol=1e-12, atol=1e-12)
    lower, upper = model.predict_interval(X, level=0.8)
    np.testing.assert_allclose(lower, mean - z * std, rtol=1e-12, atol=1e-12)
    held = slice(3_000, None)
    inside = np.mean((y[held] >= lower[held]) & (y[held] <= upper[held]))
    assert abs(inside - 0.8) < 4 * np.sqrt(0.8 * 0.2 / 3_000), inside
    # the job, to CSV: the same bounds under their names
    from saspa_dask import jobs

    model.save(tmp_path / "m.zarr")
    jobs.score(tmp_path / "m.zarr", tmp_path / "r.zarr", tmp_path / "s.csv", format="csv",
               interval_level=0.8)
    table = np.genfromtxt(tmp_path / "s.csv", delimiter=",", names=True)
    assert {"lower", "upper"} <= set(table.dtype.names)
    np.testing.assert_allclose(table["lower"], mean - z * std, rtol=1e-12, atol=1e-12)
    zarr.open_group(str(tmp_path / "s.zarr"), mode="r+").attrs["complete"] = False
    with pytest.raises(StoreError, match="different interval_level"):
        score(model, tmp_path / "r.zarr", tmp_path / "s.zarr", interval_level=0.9)
    with pytest.raises(ValueError, match="interval_level must be in"):
        score(model, tmp_path / "r.zarr", tmp_path / "t.zarr", interval_level=1.0)
    # log_target: y = exp(log y), the interval of y* is exp of log y*'s
    positive = np.exp(0.3 * y)
    logged = SASPARegressor(n_bases=20, random_state=0, max_hyper_iter=30,
                            log_target=True).fit(X[:3_000], positive[:3_000])
    latent, latent_var = logged.predict_latent(X[:500])
    sd = np.sqrt(latent_var + logged.noise_variance_)
    lower, upper = logged.predict_interval(X[:500], level=0.8)
    np.testing.assert_allclose(lower, np.exp(latent - z * sd), rtol=1e-10)
    np.testing.assert_allclose(upper, np.exp(latent + z * sd), rtol=1e-10)
    heavy = SASPARegressor(n_bases=8, random_state=0, optimize_hyperparameters=False,
                           likelihood="student_t").fit(X[:1_000], y[:1_000])
    score(heavy, tmp_path / "r.zarr", tmp_path / "h.zarr")
    g, attrs = _read(tmp_path / "h.zarr")
    assert "lower" not in set(g.array_keys()) and "interval_level" not in attrs
    with pytest.raises(ValueError, match="need the gaussian likelihood"):
        heavy.predict_interval(X[:10])
    with pytest.raises(ValueError, match="level must be in"):
        model.predict_interval(X[:10], level=0.0)


def test_bad_input_writes_nothing(classification, tmp_path):
    tmp, X, y, model = classification
    np.save(tmp_path / "w.npy", np.column_stack([X[:, :3], y]))
    ingest(tmp_path / "w.npy", tmp_path / "w.zarr")
    with pytest.raises(ValueError, match="input has 3 features, the model expects 4"):
        score(model, tmp_path / "w.zarr", tmp_path / "s.zarr")
    assert not (tmp_path / "s.zarr").exists()
    g = zarr.open_group(str(tmp_path / "nan.zarr"), mode="w")
    Xn = X[:100].copy()
    Xn[[3, 50]] = np.nan
    g.create_array("X", data=Xn, chunks=(30, 4))
    with pytest.raises(ValueError, match="2 rows with NaN or infinity; nothing was written"):
        score(model, tmp_path / "nan.zarr", tmp_path / "s.zarr")
    assert not (tmp_path / "s.zarr").exists()
    with pytest.raises(StoreError, match="no such data store"):
        score(model, tmp_path / "missing.zarr", tmp_path / "s.zarr")


def test_resume_refuses_a_different_model(classification, tmp_path):
    tmp, X, y, model = classification
    score(model, tmp / "d.zarr", tmp_path / "s.zarr")
    zarr.open_group(str(tmp_path / "s.zarr"), mode="r+").attrs["complete"] = False
    other = SASPAClassifier(optimize_hyperparameters=False, n_bases=8, random_state=1).fit(X[:500], y[:500])
    with pytest.raises(StoreError, match="different model_fingerprint"):
        score(other, tmp / "d.zarr", tmp_path / "s.zarr")


def test_killed_scorer_resumes_and_marks_only_written_chunks(tmp_path):
    """A real ``saspa score`` process group is killed mid-run; the rerun completes.
    Every chunk flagged done before the kill holds exactly the right numbers."""
    # 24 chunks: each a task that also writes its scores and its done flag (about a
    # quarter of a second each here), so the kill after 3 comes mid-run
    X, model_path, data_path = scoring_problem(tmp_path, 48_000, 5_000, seed=9,
                                               chunk_rows=2_000)
    model = load_model(model_path)
    out = tmp_path / "s.zarr"
    proc = subprocess.Popen([str(BIN / "saspa"), "score", str(model_path), str(data_path),
                             "--out", str(out), "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    n_done = wait_for_done_flags(out, proc, at_least=3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert 3 <= n_done < 24, f"kill came at {n_done} chunks; the test needs a mid-run kill"
    g, attrs = _read(out)
    assert attrs["complete"] is False
    done = g["done"][...].astype(bool)
    mean, var = model.predict_latent(X)
    proba = norm.cdf(mean / np.sqrt(1.0 + var))  # the probit's predictive, in closed form
    for i in np.flatnonzero(done):
        rows = slice(2_000 * i, 2_000 * (i + 1))
        np.testing.assert_allclose(g["mean"][rows], mean[rows], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g["proba"][rows], proba[rows], rtol=1e-12)
    # the rerun in this process (on an embedded cluster again): only the kill needed one
    res = in_process.saspa("score", model_path, data_path, "--out", out, "--workers", 1)
    assert res.returncode == 0, res.stderr
    assert f"{24 - int(done.sum())} of 24 chunks written this run" in res.stdout
    g, attrs = _read(out)
    assert attrs["complete"] is True and g["done"][...].all()
    np.testing.assert_allclose(g["mean"][...], mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g["variance"][...], var, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g["proba"][...], proba, rtol=1e-12)


def test_the_brier_score_is_scikit_learns_for_two_classes_and_more():
    from sklearn.metrics import brier_score_loss

    from saspa_dask.fitting.held_out import class_metrics

    rng = np.random.default_rng(3)
    for k in (2, 3, 5):
        proba = rng.dirichlet(np.ones(k), size=200)
        codes = rng.integers(0, k, 200)
        expected = (brier_score_loss(codes, proba[:, 1]) if k == 2
                    else brier_score_loss(codes, proba, labels=np.arange(k)))
        assert class_metrics(proba, codes)["brier"] == pytest.approx(expected, rel=1e-12)
