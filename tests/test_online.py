"""Csató & Opper's sparse online GP against independent references written here:
the exact ADF posterior of the full GP (dense, row by row), Csató & Opper's closed-form
removal (natural parameters with dense inverses), streaming equivalences."""

import dask.array as da
import numpy as np
import pytest
import zarr
from scipy.stats import norm

from saspa_dask import SASPAClassifier, SparseOnlineGPClassifier, SparseOnlineGPRegressor
from saspa_dask.core.likelihoods import Probit
from saspa_dask.ep.online import OnlineSparseGP

from reference import blurred_prior, full_gp_ep, full_gp_predict, probit_tilted, se


def _dense_adf(X, y, Xs, ls, s2, tilted):
    """ADF on the full GP: one pass, the joint of all training and test latents."""
    Z = np.vstack([X, Xs])
    S = se(Z, Z, ls, s2)
    m = np.zeros(len(Z))
    for i in range(len(y)):
        a, c = tilted(y[i], m[i], S[i, i])
        col = S[:, i].copy()
        m = m + a * col
        S = S - c * np.outer(col, col)
    n = len(y)
    return m[n:], np.diag(S)[n:]


def _gaussian_tilted(noise):
    def tilted(y, m, v):
        return (y - m) / (v + noise), 1.0 / (v + noise)
    return tilted


def _probit_tilted(y, m, v):
    z = y * m / np.sqrt(1 + v)
    r = norm.pdf(z) / norm.cdf(z)
    return y * r / np.sqrt(1 + v), r * (z + r) / (1 + v)


@pytest.mark.parametrize("kind", ["regression", "classification"])
def test_unlimited_budget_equals_full_gp_adf(kind):
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(70, 2))
    Xs = rng.uniform(-2.5, 2.5, size=(15, 2))
    ls, s2 = np.array([0.9, 1.3]), 1.7
    f = np.sin(2 * X[:, 0]) + X[:, 1]
    if kind == "regression":
        y, noise = f + 0.2 * rng.normal(size=70), 0.04
        model = SparseOnlineGPRegressor(max_bases=100, novelty_threshold=0.0, lengthscale=ls,
                                        signal_variance=s2, noise_variance=noise,
                                        jitter=1e-12).fit(X, y)
        mean, var = model.predict_latent(Xs)
        ref = _dense_adf(X, y - y.mean(), Xs, ls, s2, _gaussian_tilted(noise))
        mean = mean - y.mean()
    else:
        y = np.where(f + 0.3 * rng.normal(size=70) > 0, 1, -1)
        model = SparseOnlineGPClassifier(max_bases=100, novelty_threshold=0.0,
                                         lengthscale=ls, signal_variance=s2,
                                         jitter=1e-12).fit(X, y)
        mean, var = model.predict_latent(Xs)
        ref = _dense_adf(X, y.astype(float), Xs, ls, s2, _probit_tilted)
    assert model.bases_.n_bases == 70 and model.n_bases_removed_ == 0
    np.testing.assert_allclose(mean, ref[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(var, ref[1], rtol=1e-6, atol=1e-7)


def test_removal_is_csato_oppers_closed_form():
    """Remove the lowest-scoring basis and compare the predictive mean and covariance
    with Csató & Opper's update of (alpha, C) with Q = K_B^{-1} (dense, here)."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-3, 3, size=(40, 1))
    y = np.where(np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=40) > 0, 1.0, -1.0)
    ls, s2, jitter = np.array([0.7]), 2.0, 1e-10
    state = OnlineSparseGP(Probit(), ls, s2, jitter, 0.05, 1000)
    state.add_rows(X, y)
    m = state.bases.shape[0]
    assert 5 < m < 40
    B = state.bases.copy()
    K = se(B, B, ls, s2) + jitter * np.eye(m)
    Q = np.linalg.inv(K)
    L = np.linalg.cholesky(K)
    Linv = np.linalg.inv(L)
    sigma = state.posterior_covariance()
    alpha = Linv.T @ state.mean
    C = Linv.T @ (sigma - np.eye(m)) @ Linv
    scores = alpha ** 2 / (np.diag(Q) + np.diag(C))
    np.testing.assert_allclose(state.scores(), scores, rtol=1e-7)
    i = int(np.argmin(scores))
    r = np.delete(np.arange(m), i)
    Qs, qs, Cs, cs, a_s = Q[r, i], Q[i, i], C[r, i], C[i, i], alpha[i]
    alpha_new = alpha[r] - a_s * Qs / qs
    C_new = (C[np.ix_(r, r)] + cs * np.outer(Qs, Qs) / qs ** 2
             - (np.outer(Qs, Cs) + np.outer(Cs, Qs)) / qs)
    Xs = np.linspace(-3.5, 3.5, 9)[:, None]
    k = se(Xs, B[r], ls, s2)
    want_mean = k @ alpha_new
    want_cov = se(Xs, Xs, ls, s2) + k @ C_new @ k.T
    state.max_bases = m - 1
    state._prune(np.zeros((0, m)))
    assert state.bases.shape[0] == m - 1 and not np.any(np.all(state.bases == B[i], axis=1))
    phi = np.linalg.solve(state.L, se(state.bases, Xs, ls, s2)).T
    got_mean = phi @ state.mean
    got_cov = se(Xs, Xs, ls, s2) - phi @ phi.T + phi @ state.posterior_covariance() @ phi.T
    np.testing.assert_allclose(got_mean, want_mean, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got_cov, want_cov, rtol=1e-6, atol=1e-8)


def test_budget_streaming_and_partial_fit(tmp_path):
    """The budget holds; NumPy, dask and zarr input and a pass split by partial_fit give
    the same model (the same rows in the same order)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 3))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=600)
    # both parts centred: the offset (the mean of y) that fit fixes from the first
    # part is then the whole pass's too
    y[:250] -= y[:250].mean()
    y[250:] -= y[250:].mean()
    params = dict(max_bases=25, novelty_threshold=1e-2, lengthscale=1.0,
                  signal_variance=1.0, noise_variance=0.02)
    whole = SparseOnlineGPRegressor(**params).fit(X, y)
    assert whole.bases_.n_bases == 25
    assert whole.n_bases_added_ - whole.n_bases_removed_ == 25 and whole.n_rows_seen_ == 600
    Xs = rng.normal(size=(30, 3))
    want = whole.predict(Xs, return_std=True)
    lazy = SparseOnlineGPRegressor(**params).fit(da.from_array(X, chunks=(128, 3)),
                                                 da.from_array(y, chunks=128))
    Xz = zarr.create_array(str(tmp_path / "X.zarr"), shape=X.shape, chunks=(100, 3),
                           dtype="f8")
    Xz[:] = X
    yz = zarr.create_array(str(tmp_path / "y.zarr"), shape=y.shape, chunks=(100,),
                           dtype="f8")
    yz[:] = y
    stored = SparseOnlineGPRegressor(**params).fit(Xz, yz)
    split = SparseOnlineGPRegressor(**params).fit(X[:250], y[:250])
    split.partial_fit(X[250:], y[250:])
    for other in (lazy, stored, split):
        np.testing.assert_allclose(other.predict(Xs, return_std=True), want, rtol=1e-10,
                                   atol=1e-12)
    assert split.n_rows_seen_ == 600 and split.bases_.n_bases == 25


def test_online_bases_start_a_saspa_fit():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(800, 2))
    y = (X[:, 0] ** 2 + X[:, 1] ** 2 < 1.4).astype(int)
    online = SparseOnlineGPClassifier(max_bases=20, novelty_threshold=1e-2,
                                      signal_variance=5.0).fit(X, y)
    Xt = rng.normal(size=(2000, 2))
    yt = (Xt[:, 0] ** 2 + Xt[:, 1] ** 2 < 1.4).astype(int)
    assert online.score(Xt, yt) > 0.9
    saspa = SASPAClassifier(bases=online.bases_, blur="delta", random_state=0).fit(X, y)
    np.testing.assert_array_equal(saspa.bases_.means, online.bases_.means)
    assert saspa.score(Xt, yt) > 0.93


def test_online_errors_name_the_problem():
    X = np.random.default_rng(5).normal(size=(30, 2))
    with pytest.raises(ValueError, match="2 classes"):
        SparseOnlineGPClassifier().fit(X, np.zeros(30))
    with pytest.raises(ValueError, match="novelty_threshold"):
        SparseOnlineGPRegressor(novelty_threshold=1.0).fit(X, X[:, 0])
    model = SparseOnlineGPClassifier().fit(X, (X[:, 0] > 0).astype(int))
    with pytest.raises(ValueError, match="classes"):
        model.partial_fit(X, (X[:, 0] > 0).astype(int), classes=[0, 2])
    assert not hasattr(model, "warm_start_sites")


def test_one_vs_rest_shares_the_bases():
    """Three classes: one basis set, one posterior per class; each class's posterior
    equals a binary online GP on "this class against the rest" when nothing is pruned
    (the bases depend on the inputs only)."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(300, 2))
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])
    params = dict(max_bases=400, novelty_threshold=1e-2, lengthscale=1.0,
                  signal_variance=4.0)
    multi = SparseOnlineGPClassifier(**params).fit(X, y)
    assert multi.classes_.tolist() == [0, 1, 2] and multi.n_bases_removed_ == 0
    Xs = rng.normal(size=(20, 2))
    mean, var = multi.predict_latent(Xs)
    for k in range(3):
        binary = SparseOnlineGPClassifier(**params).fit(X, (y == k).astype(int))
        np.testing.assert_array_equal(binary.bases_.means, multi.bases_.means)
        b_mean, b_var = binary.predict_latent(Xs)
        np.testing.assert_allclose(mean[:, k], b_mean, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(var[:, k], b_var, rtol=1e-9, atol=1e-12)
    assert multi.score(X, y) > 0.9
    pruned = SparseOnlineGPClassifier(**{**params, "max_bases": 15}).fit(X, y)
    assert pruned.bases_.n_bases == 15 and pruned.score(X, y) > 0.85


# ----------------------------------------------------------------------------------
# Csató & Opper's iterated sparse EP (``ep_passes``) and learning
# ----------------------------------------------------------------------------------


def _probit_problem(n=90, seed=7):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    f = np.sin(2 * X[:, 0]) + X[:, 1]
    y = np.where(f + 0.4 * rng.normal(size=n) > 0, 1, -1)
    return X, y, rng.uniform(-2.5, 2.5, size=(12, 2))


def _kl_bernoulli(p, q):
    return p * np.log(p / q) + (1 - p) * np.log((1 - p) / (1 - q))


@pytest.mark.parametrize("budget", [12, 90])
def test_refined_pass_equals_dense_ep_on_its_bases(budget):
    """EP passes over the rows, with the basis set the pass kept, reach dense EP (R&W
    Algorithm 3.5) on the FITC prior of that set; with every row a basis, the full GP's
    EP, whose predictions the single pass does not reach."""
    X, y, Xs = _probit_problem()
    ls, s2 = np.array([0.9, 1.3]), 1.7
    common = dict(max_bases=budget, novelty_threshold=0.0 if budget == 90 else 1e-3,
                  lengthscale=ls, signal_variance=s2, jitter=1e-10)
    single = SparseOnlineGPClassifier(**common).fit(X, y)
    model = SparseOnlineGPClassifier(ep_passes=100, **common).fit(X, y)
    assert model.converged_ and model.n_sweeps_ > 1
    np.testing.assert_array_equal(model.bases_.means, single.bases_.means)
    Z = model.bases_.means
    K, Ks, _ = blurred_prior(X, Xs, Z, np.zeros((len(Z), 2, 2)), ls, s2, model.jitter_)
    _, _, mu, Sigma, log_z = full_gp_ep(K, y.astype(float), probit_tilted)
    ref_mean, ref_var = full_gp_predict(K, Ks, s2, mu, Sigma)
    mean, var = model.predict_latent(Xs)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(var, ref_var, rtol=1e-5, atol=1e-5)
    assert model.log_evidence_ == pytest.approx(log_z, abs=1e-5)
    # the paper's KL to the full GP's predictive: the refinement closes the single
    # pass's gap (all of it when every row is a basis)
    Kf = se(X, X, ls, s2) + 1e-10 * s2 * np.eye(len(X))
    _, _, mu_f, Sigma_f, _ = full_gp_ep(Kf, y.astype(float), probit_tilted)
    m_full, v_full = full_gp_predict(Kf, se(X, Xs, ls, s2), s2, mu_f, Sigma_f)
    p_full = norm.cdf(m_full / np.sqrt(1 + v_full))
    kl_single = _kl_bernoulli(p_full, single.predict_proba(Xs)[:, 1]).sum()
    kl_refined = _kl_bernoulli(p_full, model.predict_proba(Xs)[:, 1]).sum()
    assert kl_refined < kl_single
    if budget == 90:
        assert kl_refined < 1e-8 < 1e-4 < kl_single


def test_the_pass_records_its_adf_sites():
    """With every row a basis the pass is ADF on the full GP, whose posterior is the
    prior times the sites it made: the GP posterior given Gaussian observations
    nu / tau of variance 1 / tau (dense) equals the pass's, at the rows and beyond."""
    X, y, Xs = _probit_problem()
    ls, s2 = np.array([0.9, 1.3]), 1.7
    state = OnlineSparseGP(Probit(), ls, s2, 1e-12 * s2, 0.0, 200, record_sites=True)
    state.add_rows(X, y.astype(float))
    tau, nu = state.site_arrays()
    assert tau.shape == nu.shape == (1, len(X)) and np.all(tau > 0)
    K = se(X, X, ls, s2)
    Ks = se(Xs, X, ls, s2)
    solved = np.linalg.solve(K + np.diag(1 / tau[0]), np.column_stack([nu[0] / tau[0],
                                                                         Ks.T]))
    mean_ref, var_ref = Ks @ solved[:, 0], s2 - np.einsum("ij,ji->i", Ks, solved[:, 1:])
    ref = _dense_adf(X, y.astype(float), Xs, ls, s2, _probit_tilted)
    np.testing.assert_allclose(mean_ref, ref[0], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(var_ref, ref[1], rtol=1e-6, atol=1e-7)


def test_each_refining_sweep_comes_closer_to_the_full_gp():
    """``ep_passes=K`` continues EP from the pass's sites (sequential sweeps, as
    Csató & Opper iterate it): the KL from the full GP's EP predictive to the model's
    does not grow with K, from the single pass (K = 0) on, with 12 bases here.  Not a
    theorem: with 6 or 20 bases EP's fixed point on the pass's bases is itself farther
    from the full GP than the pass (0.83 against 0.75; 0.00154 against 0.00149)."""
    budget = 12
    X, y, Xs = _probit_problem()
    ls, s2 = np.array([0.9, 1.3]), 1.7
    Kf = se(X, X, ls, s2) + 1e-10 * s2 * np.eye(len(X))
    _, _, mu_f, Sigma_f, _ = full_gp_ep(Kf, y.astype(float), probit_tilted)
    m_full, v_full = full_gp_predict(Kf, se(X, Xs, ls, s2), s2, mu_f, Sigma_f)
    p_full = norm.cdf(m_full / np.sqrt(1 + v_full))
    kls = []
    for passes in range(5):
        model = SparseOnlineGPClassifier(max_bases=budget, lengthscale=ls, signal_variance=s2,
                                         ep_passes=passes, jitter=1e-10).fit(X, y)
        kls.append(_kl_bernoulli(p_full, model.predict_proba(Xs)[:, 1]).sum())
    assert all(b <= a * (1 + 1e-9) for a, b in zip(kls, kls[1:])), kls
    assert kls[1] < kls[0]


def test_execution_is_a_parameter(tmp_path):
    """The online GPs and the IVM take ``execution`` like the SASPA estimators; a store
    keeps the setting; the block size does not change the predictions."""
    from saspa_dask import IVMClassifier, SparseOnlineGPRegressor, load_model

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    new = SparseOnlineGPRegressor(max_bases=20, execution={"block_rows": 7}).fit(X, y)
    reference = SparseOnlineGPRegressor(max_bases=20).fit(X, y)
    np.testing.assert_allclose(new.predict(X), reference.predict(X), rtol=1e-12)
    new.save(tmp_path / "m.zarr")
    assert load_model(tmp_path / "m.zarr").get_params()["execution"] == {"block_rows": 7}
    ivm = IVMClassifier(n_bases=10, optimize_hyperparameters=False,
                        execution={"block_rows": 5}).fit(X, y > 0)
    np.testing.assert_array_equal(
        ivm.predict(X), IVMClassifier(n_bases=10, optimize_hyperparameters=False).fit(
            X, y > 0).predict(X))
