"""Held-out rows measured while a fit learns (``fit(X, y, X_val=, y_val=)``,
``held_out_trace_``): the final record against metrics computed here from the
model's own predictions with NumPy and SciPy, the records' invariants, and the errors
that name the held-out arguments."""

import dask.array as da
import numpy as np
import pytest
from scipy.stats import norm

from saspa_dask import SASPAClassifier, SASPARegressor
from saspa_dask.fitting.held_out import GAP_SHARE, HeldOutError


def _two_class(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, np.where(np.sin(2 * X[:, 0]) + 0.4 * rng.normal(size=n) > 0, "yes", "no")


def _regression(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=n)


@pytest.mark.filterwarnings("ignore::saspa_dask.LearntBoundWarning")
def test_classifier_measured_while_learning_ends_on_the_models_own_metrics():
    X, y = _two_class(600, 0)
    X_val, y_val = _two_class(300, 1)
    model = SASPAClassifier(n_bases=8, hyper_subsample=200, random_state=0).fit(
        X, y, X_val=X_val, y_val=y_val)
    trace = model.held_out_trace_
    learning = [r for r in trace if r["stage"] == "learning"]
    assert learning[0]["iteration"] == 0 and learning[0]["rows"] == 200
    assert trace[-1]["stage"] == "final" and trace[-1]["rows"] == 600
    assert trace[-1]["iteration"] is None
    # the final record is the fitted model, measured independently here
    proba = model.predict_proba(X_val)
    true = proba[np.arange(len(y_val)), np.searchsorted(model.classes_, y_val)]
    assert trace[-1]["error"] == pytest.approx(np.mean(model.predict(X_val) != y_val),
                                               abs=1e-12)
    assert trace[-1]["nlp"] == pytest.approx(-np.mean(np.log(true)), rel=1e-9)
    # the start is the untrained model: learning must have improved on it
    assert trace[-1]["nlp"] < learning[0]["nlp"]
    seconds = [r["seconds"] for r in trace]
    assert seconds == sorted(seconds)
    # measurements during a stage are at least GAP_SHARE of the time so far apart
    for a, b in zip(learning, learning[1:]):
        if b is not learning[-1]:  # a stage's end is always measured
            assert b["seconds"] >= a["seconds"] * (1 + GAP_SHARE)


def test_regressor_final_record_is_rmse_and_nlpd_of_its_predictions():
    X, y = _regression(500, 2)
    X_val, y_val = _regression(200, 3)
    model = SASPARegressor(n_bases=8, random_state=0).fit(X, y, X_val=X_val, y_val=y_val)
    mean, std = model.predict(X_val, return_std=True)
    last = model.held_out_trace_[-1]
    assert last["rmse"] == pytest.approx(np.sqrt(np.mean((y_val - mean) ** 2)), rel=1e-9)
    assert last["mae"] == pytest.approx(np.mean(np.abs(y_val - mean)), rel=1e-9)
    assert last["nlpd"] == pytest.approx(-np.mean(norm.logpdf(y_val, mean, std)), rel=1e-9)


def test_dask_held_out_rows_give_the_numpy_numbers():
    X, y = _regression(400, 4)
    X_val, y_val = _regression(250, 5)
    params = dict(n_bases=6, random_state=0, optimize_hyperparameters=False)
    here = SASPARegressor(**params).fit(X, y, X_val=X_val, y_val=y_val)
    # column chunks and y chunks unlike X's: aligned before the chunk tasks
    lazy = SASPARegressor(**params).fit(X, y, X_val=da.from_array(X_val, chunks=(60, 1)),
                                        y_val=da.from_array(y_val, chunks=45))
    for key in ("rmse", "mae", "nlpd"):
        assert lazy.held_out_trace_[-1][key] == pytest.approx(
            here.held_out_trace_[-1][key], rel=1e-12)


def test_stochastic_learning_is_measured_as_it_steps():
    X, y = _regression(800, 6)
    X_val, y_val = _regression(200, 7)
    model = SASPARegressor(n_bases=8, random_state=0, learning="stochastic",
                           stochastic={"max_epochs": 2, "batch_rows": 100}).fit(
        X, y, X_val=X_val, y_val=y_val)
    learning = [r for r in model.held_out_trace_ if r["stage"] == "learning"]
    assert learning and all(r["rows"] == 800 for r in learning)
    assert learning[0]["iteration"] == 1  # the first step
    assert model.held_out_trace_[-1]["stage"] == "final"


def test_held_out_errors_name_the_held_out_rows():
    X, y = _two_class(200, 8)
    model = SASPAClassifier(n_bases=4, optimize_hyperparameters=False)
    with pytest.raises(HeldOutError, match="X_val and y_val go together"):
        model.fit(X, y, X_val=X)
    with pytest.raises(HeldOutError, match=r"y_val has labels \['maybe'\]"):
        model.fit(X, y, X_val=X[:3], y_val=np.array(["yes", "no", "maybe"]))
    with pytest.raises(HeldOutError, match="X_val, y_val: X has 3 features"):
        model.fit(X, y, X_val=np.zeros((2, 3)), y_val=np.array(["yes", "no"]))
    lazy_labels = da.from_array(np.array(["yes", "maybe"]), chunks=1)
    with pytest.raises(HeldOutError, match="y_val: labels .*maybe.* are not among"):
        model.fit(X, y, X_val=da.from_array(X[:2], chunks=1), y_val=lazy_labels)
    assert not hasattr(SASPAClassifier(n_bases=4, optimize_hyperparameters=False)
                       .fit(X, y), "held_out_trace_")
