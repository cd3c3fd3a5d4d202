"""Stochastic learning (``learning="stochastic"``) against the closed forms and the
full-batch optimiser: one full minibatch from the prior is the closed-form FITC
posterior; minibatch gradients average to the full-batch one; learning reaches the
full-batch optimum's evidence (the evidence itself computed by full-batch EP, which
its own tests check against closed forms) for regression, binary and one-vs-rest
classification, on NumPy and chunked Dask input; a time budget stops it with a model."""

import time

import dask
import dask.array as da
import numpy as np
import pytest

from saspa_dask import SASPAClassifier, SASPARegressor
from saspa_dask.core.likelihoods import Gaussian
from saspa_dask.ep import EPSchedule
from saspa_dask.fitting.gradient import gradient_chunk
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.anchors import scaled_summary as _scaled
from saspa_dask.fitting.stochastic import StochasticLearning, learn_stochastic
from saspa_dask.fitting.trainer import Trainer
from saspa_dask.ep.whitening import make_block

from reference import fitc_regression, se


def _regression(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, size=(n, 1))
    return X, np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=n)


def test_one_full_minibatch_from_the_prior_is_the_fitc_posterior():
    """With the Gaussian likelihood one EP update from the prior is exact: the tied
    site after one minibatch of every row gives closed-form FITC's predictions."""
    X, y = _regression(300)
    Z = np.linspace(-3, 3, 12)[:, None]
    ls, s2, noise = np.array([0.8]), 1.3, 0.05
    trainer = Trainer(X, y, None, Z, np.zeros((12, 1, 1)), EPSchedule("parallel", 1.0, 10, 1e-8, anderson_memory=0, coarse_start=False),
                      jitter=1e-8, block_rows=1000)
    start = Hyperparameters(ls, s2, {"noise_variance": noise})
    out = learn_stochastic(trainer, Gaussian(noise), start,
                           StochasticLearning(batch_rows=300, learning_rate=1e-300,
                                              max_epochs=1), seed=0)
    assert out.info["n_iterations"] == 1
    Xs = np.linspace(-3.5, 3.5, 40)[:, None]
    post, L = out.results[0].posterior, out.L
    phi = np.linalg.solve(L, se(Z, Xs, ls, s2)).T
    mean = phi @ post.mean
    var = s2 - (phi ** 2).sum(1) + np.einsum("ij,ij->i", phi, phi @ post.covariance())
    ref_mean, ref_var, _ = fitc_regression(X, y, Xs, Z, ls, s2, noise, out.jitter)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(var, ref_var, rtol=1e-7, atol=1e-9)


def test_minibatch_gradient_sums_average_to_the_full_batch_sums():
    """At a fixed posterior and sites, N/b times a minibatch's gradient sums, averaged
    over a partition of the rows into minibatches, is the full-batch sum."""
    from saspa_dask.core.likelihoods import Probit
    from saspa_dask.ep.posterior import Posterior

    rng = np.random.default_rng(1)
    X = rng.normal(size=(240, 2))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    Z, ls, s2 = X[:8], np.array([1.0, 1.5]), 1.0
    Kh = se(Z, Z, ls, s2) + 1e-8 * np.eye(8)
    L = np.linalg.cholesky(Kh)
    tau, nu = rng.uniform(0.1, 1, 240), rng.normal(size=240)
    block = make_block(X, y, Z, np.zeros((8, 2, 2)), ls, s2, L)
    posterior = Posterior.from_statistics((block.phi * tau[:, None]).T @ block.phi,
                                          block.phi.T @ nu)
    def sums(rows):
        part = make_block(X[rows], y[rows], Z, np.zeros((8, 2, 2)), ls, s2, L)
        return gradient_chunk(X[rows], part, tau[rows], nu[rows], posterior, Probit(), L,
                              Z, ls, False)
    full = sums(np.arange(240))
    parts = [_scaled(sums(np.arange(k, k + 60)), 240 / 60) for k in range(0, 240, 60)]
    total = parts[0]
    for part in parts[1:]:
        total = total.merge(part)
    for name in ("m0", "m1", "m2", "A"):
        np.testing.assert_allclose(getattr(total, name) / 4, getattr(full, name),
                                   rtol=1e-10, atol=1e-12)
    assert total.g_sum / 4 == pytest.approx(full.g_sum, rel=1e-10)
    assert total.evidence_terms / 4 == pytest.approx(full.evidence_terms, rel=1e-10)


def _energy_gap(stochastic, full_batch, n_rows):
    """Nats per row by which the stochastic fit's evidence (full-batch EP at its values)
    falls short of the full-batch optimiser's."""
    return (full_batch.log_evidence_ - stochastic.log_evidence_) / n_rows


def test_regression_reaches_the_full_batch_optimum():
    X, y = _regression(600)
    common = dict(n_bases=10, blur="delta", learn_bases=None, random_state=0)
    full = SASPARegressor(**common).fit(X, y)
    sgd = SASPARegressor(**common, learning="stochastic",
                         stochastic={"batch_rows": 150, "max_epochs": 150}).fit(X, y)
    info = sgd.hyperparameter_info_
    assert info["method"] == "stochastic" and info["rows_seen"] >= 600
    assert _energy_gap(sgd, full, 600) < 0.005, (sgd.log_evidence_, full.log_evidence_)
    np.testing.assert_allclose(sgd.lengthscale_, full.lengthscale_, rtol=0.1)
    assert sgd.noise_variance_ == pytest.approx(full.noise_variance_, rel=0.2)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_classification_reaches_the_full_batch_optimum(n_classes):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(600, 2))
    angle = np.arctan2(X[:, 1], X[:, 0])
    y = (np.floor((angle + np.pi) / (2 * np.pi) * n_classes) % n_classes).astype(int)
    flip = rng.random(600) < 0.05
    y[flip] = rng.integers(0, n_classes, flip.sum())
    common = dict(n_bases=12, blur="delta", learn_bases=None, random_state=0)
    full = SASPAClassifier(**common).fit(X, y)
    sgd = SASPAClassifier(**common, learning="stochastic",
                          stochastic={"batch_rows": 150, "max_epochs": 150}).fit(X, y)
    assert _energy_gap(sgd, full, 600 * (1 if n_classes == 2 else n_classes)) < 0.01
    assert np.mean(sgd.predict(X) == full.predict(X)) > 0.97


def test_dask_minibatches_are_read_chunk_by_chunk_and_reach_the_optimum():
    X, y = _regression(800, seed=3)
    common = dict(n_bases=10, blur="delta", learn_bases=None, random_state=0)
    full = SASPARegressor(**common).fit(X, y)
    with dask.config.set(scheduler="sync"):
        sgd = SASPARegressor(**common, learning="stochastic",
                             stochastic={"batch_rows": 100, "max_epochs": 100}).fit(
            da.from_array(X, chunks=(200, 1)), da.from_array(y, chunks=200))
    assert _energy_gap(sgd, full, 800) < 0.005
    assert sgd.hyperparameter_info_["rows_seen"] == 100 * 800 or \
        sgd.hyperparameter_info_["stop_reason"] == "energy"


def test_a_time_budget_stops_learning_with_a_usable_model(monkeypatch):
    """The budget, not the energy rule, ends learning: the rule is switched off here
    (on a fast machine it can end learning within the budget), so the real clock
    decides on any machine."""
    from saspa_dask.fitting import learning_records

    monkeypatch.setattr(learning_records.Progress, "converged", lambda self, *args: False)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(20_000, 3))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=20_000)
    start = time.perf_counter()
    reg = SASPARegressor(n_bases=32, learning="stochastic", max_fit_time=2.0,
                         stochastic={"batch_rows": 256, "max_epochs": 1000},
                         random_state=0).fit(X, y)
    info = reg.hyperparameter_info_
    assert info["stop_reason"] == "time" and info["hit_time_budget"]
    assert info["n_iterations"] >= 1
    mean, std = reg.predict(X[:100], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    assert np.sqrt(np.mean((mean - np.sin(X[:100, 0])) ** 2)) < 0.5
    assert time.perf_counter() - start < 60  # the budget, then EP once on all rows


def test_the_job_takes_stochastic_learning_from_the_parameter_table(tmp_path, threads_client):
    """saspa train's options and TOML keys come from one table: learning and the
    stochastic fields reach the model through the job function."""
    from saspa_dask import jobs, load_model
    from saspa_dask.parameters import by_name

    assert by_name()["learning"].flag == "--learning"
    assert by_name()["minibatch_rows"].group == "stochastic"
    X, y = _regression(500, seed=5)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    jobs.ingest(tmp_path / "d.npy", tmp_path / "d.zarr")
    result = jobs.train(tmp_path / "d.zarr", tmp_path / "m.zarr", task="regression",
                        n_bases=6, learning="stochastic", minibatch_rows=100,
                        max_epochs=5, client=threads_client)
    model = load_model(tmp_path / "m.zarr")
    assert model.learning == "stochastic"
    assert model.stochastic == {"batch_rows": 100, "max_epochs": 5.0}
    assert model.hyperparameter_info_["method"] == "stochastic"
    assert result["model"].hyperparameter_info_["rows_seen"] == 2500


# -- issue 55: an unbiased minibatch gradient, and learning that ends at the optimum -----

def _two_d(likelihood, n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    f = np.sin(1.5 * X[:, 0]) + 0.5 * np.cos(X[:, 1])
    if likelihood == "probit":
        return X, np.where(f + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, f + 0.3 * rng.normal(size=n)


def _gaussian_tilted(noise):
    def tilted(y, m, v):
        total = v + noise
        log_z = -0.5 * np.log(2 * np.pi * total) - 0.5 * (y - m) ** 2 / total
        return log_z, m + v * (y - m) / total, v - v * v / total
    return tilted


@pytest.mark.parametrize("name", ["probit", "gaussian"])
def test_the_minibatch_gradient_at_eps_fixed_point_is_unbiased(name):
    """At EP's fixed point (full-batch EP converged at theta, every row's site set),
    the mean of 2,400 minibatch gradients of b = N/8 rows, each drawn independently,
    equals the central differences of the converged full-batch energy within 3
    standard errors in every coordinate.  The full-batch energy is anchored to a dense
    EP on the FITC prior written in tests/reference.py (to 1e-8 nats).  Tied sites
    (the learner before) were 28 standard errors off on the probit's signal variance."""
    from saspa_dask.core.likelihoods import Probit
    from saspa_dask.fitting.stochastic import _Learner

    from reference import central_differences, full_gp_ep, probit_tilted

    N, M = 400, 10
    X, y = _two_d(name, N, seed=11)
    Z = X[:M]
    ls, s2, noise = np.array([0.9, 1.4]), 1.2, 0.15
    gaussian = name == "gaussian"
    likelihood = Gaussian(noise) if gaussian else Probit()
    settings = EPSchedule("parallel", 1.0, 500, 1e-12, anderson_memory=0,
                          coarse_start=False)

    def trainer():
        return Trainer(X, y, None, Z, np.zeros((M, 2, 2)), settings, jitter=1e-8,
                       block_rows=N)

    h0 = Hyperparameters(ls, s2, {"noise_variance": noise} if gaussian else {})

    def converged(x):
        hyper = h0.from_log(x)
        t = trainer()
        t.build(hyper)
        result = t.run(likelihood.with_hyperparameters(hyper.likelihood))[0]
        assert result.converged
        return result

    at_h0 = converged(h0.to_log())
    # the energy against the dense reference: EP on the FITC prior Q + diag(lam)
    Kmm = se(Z, Z, ls, s2) + 1e-8 * s2 * np.eye(M)
    Knm = se(X, Z, ls, s2)
    Q = Knm @ np.linalg.solve(Kmm, Knm.T)
    K = Q + np.diag(s2 - np.diag(Q))
    dense = full_gp_ep(K, y, _gaussian_tilted(noise) if gaussian else probit_tilted)[-1]
    assert at_h0.log_evidence == pytest.approx(dense, abs=1e-8)
    truth = central_differences(lambda x: converged(x).log_evidence, h0.to_log(), 1e-5)

    learner = _Learner(trainer(), likelihood, h0, StochasticLearning(batch_rows=N // 8))
    learner.tau[0][:], learner.nu[0][:] = at_h0.tau, at_h0.nu
    learner.refresh()
    rng = np.random.default_rng(0)
    draws = np.array([learner.gradient_estimate(rows, X[rows], y[rows]) for rows in
                      (np.sort(rng.choice(N, N // 8, replace=False)) for _ in range(2400))])
    mean = draws.mean(axis=0)
    se_mean = draws.std(axis=0, ddof=1) / np.sqrt(len(draws))
    assert np.all(np.abs(mean - truth) < 3 * se_mean), (mean, truth, se_mean)
    assert np.all(se_mean > 0)


@pytest.mark.parametrize("name", ["probit", "gaussian"])
@pytest.mark.parametrize("seed", [0, 1])
def test_300_epochs_at_the_default_step_end_at_the_full_batch_optimum(name, seed,
                                                                       monkeypatch):
    """300 epochs of b = N/8 at the default learning rate (the stop rule off) end
    within 0.002 nats per row of the full-batch optimiser's energy, both energies by
    full-batch EP at the learnt values (the tied-site learner before drifted up the
    signal variance's ridge and ended 1.08 nats per row below on the Gaussian)."""
    from saspa_dask.fitting import learning_records

    monkeypatch.setattr(learning_records.Progress, "converged", lambda self, *args: False)
    N = 800
    X, y = _two_d(name, N, seed=20 + seed)
    cls = SASPARegressor if name == "gaussian" else SASPAClassifier
    common = dict(n_bases=12, blur="delta", learn_bases=None, random_state=seed)
    if name == "gaussian":
        common.update(learn_offset=False, exact_start=False)
    full = cls(**common, hyper_tol=1e-8).fit(X, y)
    sgd = cls(**common, learning="stochastic",
              stochastic={"batch_rows": N // 8, "max_epochs": 300}).fit(X, y)
    info = sgd.hyperparameter_info_
    assert info["epochs"] == 300 and info["stop_reason"] == "cap"
    assert (full.log_evidence_ - sgd.log_evidence_) / N < 0.002, (
        full.log_evidence_, sgd.log_evidence_)


def test_an_epoch_of_few_rows_takes_eight_steps():
    """600 rows with the default 2,048-row minibatches: minibatches of 75 rows (an
    eighth), so 3 epochs are 16 learning steps after the first epoch's 8 site-setting
    ones, and the fit records the minibatch it used."""
    X, y = _regression(600)
    model = SASPARegressor(8, blur="delta", learning="stochastic", random_state=0,
                           stochastic={"max_epochs": 3}).fit(X, y)
    info = model.hyperparameter_info_
    assert info["batch_rows"] == 75 and info["epochs"] == 3
    assert info["rows_seen"] == 3 * 600 and info["n_iterations"] == 24
