"""IVM against a dense implementation written here: the full posterior covariance
updated row by row, every candidate's entropy reduction from it."""

import numpy as np
import pytest
from scipy.stats import norm

from saspa_dask import IVMClassifier, SASPAClassifier, ivm_bases
from saspa_dask.core.likelihoods import Gaussian, Probit
from saspa_dask.engines.ivm import ivm_select

from reference import se


def _dense_ivm(K, y, n_active, tilted):
    n = len(y)
    m, S = np.zeros(n), K.copy()
    chosen, taus, nus = [], [], []
    for _ in range(n_active):
        best, best_gain = None, -np.inf
        for i in set(range(n)) - set(chosen):
            _, c = tilted(y[i], m[i], S[i, i])
            gain = -0.5 * np.log(1 - c * S[i, i])
            if gain > best_gain:
                best, best_gain = i, gain
        a, c = tilted(y[best], m[best], S[best, best])
        taus.append(c / (1 - c * S[best, best]))
        nus.append((a + c * m[best]) / (1 - c * S[best, best]))
        col = S[:, best].copy()
        m, S = m + a * col, S - c * np.outer(col, col)
        chosen.append(best)
    return chosen, np.array(taus), np.array(nus), m, S


def _probit(y, m, v):
    z = y * m / np.sqrt(1 + v)
    r = norm.pdf(z) / norm.cdf(z)
    return y * r / np.sqrt(1 + v), r * (z + r) / (1 + v)


def test_selection_and_sites_equal_the_dense_ivm():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(90, 2))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=90) > 0, 1.0, -1.0)
    ls, s2 = np.array([0.8, 1.1]), 3.0
    K = se(X, X, ls, s2)
    chosen, taus, nus, _, _ = _dense_ivm(K, y, 12, _probit)
    got = ivm_select(X, y, 12, Probit(), ls, s2)
    assert got.indices.tolist() == chosen
    np.testing.assert_allclose(got.tau, taus, rtol=1e-9)
    np.testing.assert_allclose(got.nu, nus, rtol=1e-9)
    # Gaussian: the entropy reduction 1/2 log(1 + s / noise) picks the largest
    # variance first, i.e. any row of the prior, then rows far from those chosen
    sel = ivm_select(X, y, 5, Gaussian(0.1), ls, s2)
    ref = _dense_ivm(K, y, 5, lambda y_, m, v: ((y_ - m) / (v + 0.1), 1 / (v + 0.1)))
    assert sel.indices.tolist() == ref[0]


def test_ivm_classifier_predicts_the_gp_posterior_given_the_active_sites():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(150, 2))
    y = (X[:, 0] * X[:, 1] > 0).astype(int)
    Xs = rng.normal(size=(25, 2))
    ls, s2 = np.array([0.9, 0.9]), 4.0
    clf = IVMClassifier(n_bases=20, lengthscale=ls, signal_variance=s2, jitter=1e-10).fit(X, y)
    chosen, taus, nus, _, _ = _dense_ivm(se(X, X, ls, s2), 2.0 * y - 1, 20, _probit)
    assert clf.active_indices_.tolist() == chosen
    # GP posterior given Gaussian sites on the active rows, dense
    A = np.array(chosen)
    KA = se(X[A], X[A], ls, s2)
    Ks = se(Xs, X[A], ls, s2)
    B = np.linalg.solve(KA + np.diag(1 / taus), np.column_stack([nus / taus, Ks.T]))
    mean_ref = Ks @ B[:, 0]
    var_ref = s2 - np.einsum("ij,ji->i", Ks, B[:, 1:])
    mean, var = clf.predict_latent(Xs)
    np.testing.assert_allclose(mean, mean_ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(var, var_ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(clf.predict_proba(Xs)[:, 1],
                               norm.cdf(mean_ref / np.sqrt(1 + var_ref)), atol=1e-6)


def test_ivm_bases_start_a_saspa_fit_and_errors():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 2))
    y = (X[:, 0] ** 2 + X[:, 1] ** 2 < 1.4).astype(int)
    basis = ivm_bases(X, 2.0 * y - 1, 15, Probit(), np.ones(2), 5.0)
    assert basis.n_bases == 15 and np.all(np.isin(basis.means, X).all(axis=1))
    clf = SASPAClassifier(bases=basis, blur="delta", random_state=0).fit(X, y)
    assert clf.score(X, y) > 0.93
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        IVMClassifier().fit(X, np.arange(400) % 3)
    assert not hasattr(IVMClassifier(), "partial_fit")
