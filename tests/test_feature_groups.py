"""Lengthscales shared by groups of inputs (``feature_groups``): one per text column's
one-hot group is the exchangeable kernel over its categories.  The learnt optimum
against the closed-form FITC optimum of that kernel written from the categories
themselves, the gradient against finite differences, the job path from a CSV."""

import csv

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import multivariate_normal

import in_process
from saspa_dask import Basis, SASPARegressor, jobs, kmeans_bases, load_model
from saspa_dask.core.kernels import blur_covariances
from saspa_dask.core.likelihoods import Probit
from saspa_dask.ep import EPSchedule
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.input_groups import feature_groups_of
from saspa_dask.fitting.trainer import Trainer

from reference import converged_gradient, evidence_differences


def _category_kernel(x1, c1, x2, c2, lx, lc, s2):
    """SE in x times rho^[c != c'], rho = exp(-1 / lc^2): the exchangeable kernel that a
    one-hot group with one lengthscale lc is (2 / lc^2 apart, halved by SE's 1/2)."""
    se = np.exp(-0.5 * ((x1[:, None] - x2[None, :]) / lx) ** 2)
    return s2 * se * np.where(c1[:, None] == c2[None, :], 1.0, np.exp(-1.0 / lc ** 2))


def _one_hot(x, c, n_categories):
    return np.column_stack([x, np.eye(n_categories)[c]])


def test_a_one_hot_groups_optimum_is_the_exchangeable_kernels_fitc_optimum():
    rng = np.random.default_rng(7)
    n, K = 160, 4
    x, c = rng.uniform(-3, 3, n), rng.integers(0, K, n)
    y = np.sin(x) + np.array([0.8, -0.5, 0.1, 0.4])[c] + 0.15 * rng.normal(size=n)
    zx, zc = np.linspace(-3, 3, 12), np.arange(12) % K  # bases on points of the data's kind
    jitter = 1e-8

    def negative_fitc(theta):
        lx, lc, s2, noise = np.exp(theta)
        Kuu = _category_kernel(zx, zc, zx, zc, lx, lc, s2) + jitter * s2 * np.eye(12)
        Kuf = _category_kernel(zx, zc, x, c, lx, lc, s2)
        Q = Kuf.T @ np.linalg.solve(Kuu, Kuf)
        cov = Q + np.diag(s2 - np.diag(Q) + noise)
        return -multivariate_normal(np.zeros(n), cov).logpdf(y)

    ref = minimize(negative_fitc, np.log([1.0, 1.0, 0.5, 0.1]), method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 500})
    names = ["x"] + [f"city=c{k}" for k in range(K)]
    import pandas as pd
    X = pd.DataFrame(_one_hot(x, c, K), columns=names)
    reg = SASPARegressor(bases=Basis(_one_hot(zx, zc, K)), blur="delta",
                         feature_groups="one-hot", lengthscale=1.0, signal_variance=0.5,
                         noise_variance=0.1, center_y=False, learn_offset=False,
                         jitter=jitter, max_hyper_iter=200, hyper_tol=1e-12).fit(X, y)
    ls = reg.lengthscale_
    assert np.all(ls[1:] == ls[1])  # one lengthscale for the group
    ours = np.log([ls[0], ls[1], reg.signal_variance_, reg.noise_variance_])
    np.testing.assert_allclose(ours, ref.x, atol=2e-3)
    assert reg.log_evidence_ == pytest.approx(-ref.fun, abs=1e-6)
    # learnt apart, the four category lengthscales go their own ways
    free = SASPARegressor(bases=Basis(_one_hot(zx, zc, K)), blur="delta",
                          feature_groups=None, lengthscale=1.0,
                          signal_variance=0.5, noise_variance=0.1, center_y=False,
                          learn_offset=False, jitter=jitter, max_hyper_iter=200,
                          hyper_tol=1e-12).fit(X, y)
    assert np.ptp(np.log(free.lengthscale_[1:])) > 0.05
    assert free.log_evidence_ > reg.log_evidence_  # more freedom, higher evidence


def test_the_grouped_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.normal(size=(200, 2)), np.eye(3)[rng.integers(0, 3, 200)]])
    y = np.sign(np.sin(X[:, 0]) + X[:, 2] - X[:, 3] + 0.3 * rng.normal(size=200))
    basis = kmeans_bases(X, 8, random_state=0)
    covs = blur_covariances(basis.covs, "full")
    trainer = Trainer(X, y, None, basis.means, covs,
                      EPSchedule("parallel", 1.0, 3000, 1e-12, anderson_memory=0,
                                 coarse_start=False), jitter=1e-8, block_rows=70)
    groups = feature_groups_of("one-hot", ["a", "b", "k=x", "k=y", "k=z"], 5)
    assert groups.tolist() == [0, 1, 2, 2, 2]
    h0 = Hyperparameters(np.array([1.3, 0.9, 1.7, 1.7, 1.7]), 1.4, {}, 0.7,
                         learn_blur_scale=True, groups=groups, kernel="matern52")
    assert h0.names()[:3] == ["lengthscale[0]", "lengthscale[1]", "lengthscale[2]"]
    assert h0.to_log().size == 3 + 1 + 1
    grad, sites = converged_gradient(trainer, h0, Probit())
    for reconverge in (False, True):
        fd = evidence_differences(trainer, h0, Probit(), sites, reconverge)
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-5 * np.abs(fd).max())


def test_bad_groups_are_refused_by_name():
    with pytest.raises(ValueError, match="3 labels for 2 inputs"):
        feature_groups_of(["a", "b", "c"], None, 2)
    with pytest.raises(ValueError, match="reads the inputs' names"):
        SASPARegressor(4, feature_groups="one-hot").fit(np.eye(6)[:, :3], np.arange(6.0))
    assert feature_groups_of(["a", "b"], None, 2) is None  # no input shares: untied


def _city_table(path):
    rng = np.random.default_rng(3)
    rows = [["size", "city", "kind", "price"]]
    for _ in range(300):
        city, kind = rng.choice(["Oslo", "Rome", "Lima"]), rng.choice(["flat", "house"])
        size = rng.uniform(20, 200)
        price = size / 50 + {'Oslo': 2, 'Rome': 1, 'Lima': 0}[city] + rng.normal() * 0.2
        rows.append([f"{size:.1f}", city, kind, f"{price:.3f}"])
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(rows)


def test_the_job_path_ties_each_text_columns_one_hot_group(tmp_path, threads_client):
    _city_table(tmp_path / "t.csv")
    jobs.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", text="onehot")
    jobs.train(tmp_path / "t.zarr", tmp_path / "m.zarr", n_bases=8, kernel="matern32",
               feature_groups="one-hot", max_hyper_iter=30, client=threads_client)
    model = load_model(tmp_path / "m.zarr")
    names = list(model.fitted_posterior_.feature_names)  # the store's columns
    ls = dict(zip(names, model.lengthscale_))
    assert model.feature_groups == "one-hot"
    assert ls["city=Oslo"] == ls["city=Rome"] == ls["city=Lima"]
    assert ls["kind=flat"] == ls["kind=house"] and ls["kind=flat"] != ls["city=Oslo"]
    assert model.fitted_posterior_.kernel == "matern32"
    shown = in_process.saspa("info", tmp_path / "m.zarr")
    assert shown.returncode == 0 and "kernel_type: matern32_ard" in shown.stdout


def test_tying_keeps_tied_groups_exactly_and_takes_the_geometric_mean_otherwise():
    """A retrain at fixed values starts from the model's tied lengthscales: a group
    that is tied already keeps its value to the bit (exp(mean(log l)) of three equal
    values 3.8462453348911207 is 3.8462453348911216); an untied one takes the
    geometric mean."""
    from saspa_dask.fitting.input_groups import tied_lengthscale

    tied = 3.8462453348911207
    groups = np.array([0, 1, 1, 1, 2, 2])
    values = np.array([156.35, tied, tied, tied, 2.0, 8.0])
    out = tied_lengthscale(values, groups)
    assert out[1:4].tolist() == [tied] * 3 and out[0] == 156.35
    assert out[4] == out[5] == pytest.approx(4.0, rel=1e-15)


def test_by_default_one_hot_columns_are_tied_and_none_unties_them(tmp_path, threads_client):
    """feature_groups="auto" (the default) ties each text column's one-hot inputs when
    the data names them so; the CLI's and TOML's "none" gives every input its own; an
    array without names keeps one per input."""
    _city_table(tmp_path / "t.csv")
    jobs.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", text="onehot")
    learnt = {}
    for given in ({}, {"feature_groups": "none"}):
        out = tmp_path / f"m{len(learnt)}.zarr"
        jobs.train(tmp_path / "t.zarr", out, n_bases=6, max_hyper_iter=8,
                   client=threads_client, **given)
        model = load_model(out)
        learnt[model.feature_groups] = dict(zip(model.fitted_posterior_.feature_names,
                                                model.lengthscale_))
    assert set(learnt) == {"auto", None}
    tied, free = learnt["auto"], learnt[None]
    assert tied["city=Oslo"] == tied["city=Rome"] == tied["city=Lima"]
    assert tied["kind=flat"] == tied["kind=house"]
    assert len({free["city=Oslo"], free["city=Rome"], free["city=Lima"]}) == 3
    # no names: one lengthscale per input, as before the default
    X = np.random.default_rng(0).normal(size=(60, 3))
    model = SASPARegressor(4, max_hyper_iter=5).fit(X, X[:, 0])
    assert model.feature_groups == "auto" and len(set(model.lengthscale_)) == 3
