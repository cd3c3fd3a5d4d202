"""Gauss-Hermite likelihoods against adaptive numerical integration."""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import gammaln
from scipy.stats import norm, poisson, t as student_t

from saspa_dask.core.likelihoods import Logistic, Poisson, Probit, Quadrature, StudentT


def _adaptive(density, m, v):
    """log Z, tilted mean and variance of density(f) N(f | m, v) by scipy.quad."""
    sd = np.sqrt(v)
    lo, hi = m - 14 * sd, m + 14 * sd

    def moment(k):
        return quad(lambda f: f**k * density(f) * norm.pdf(f, m, sd), lo, hi, limit=400,
                    epsabs=0, epsrel=1e-12)[0]

    z, m1, m2 = moment(0), moment(1), moment(2)
    mean = m1 / z
    return np.log(z), mean, m2 / z - mean**2


CASES = {
    "logistic": (Logistic(), lambda y: (lambda f: 1 / (1 + np.exp(-y * f))),
                 [(1.0, 0.3, 0.5), (-1.0, 2.0, 3.0), (1.0, -4.0, 1.0), (1.0, 0.0, 10.0)]),
    "poisson": (Poisson(), lambda y: (lambda f: poisson.pmf(y, np.exp(f))),
                [(0.0, 0.0, 0.5), (3.0, 1.0, 0.3), (12.0, 2.0, 0.8), (1.0, -1.0, 2.0)]),
    "student_t": (StudentT(dof=4.0, scale=0.5),
                  lambda y: (lambda f: student_t.pdf(y - f, 4.0, scale=0.5)),
                  [(0.2, 0.0, 0.3), (3.0, 0.0, 0.5), (-1.0, 0.5, 1.5), (8.0, 0.0, 0.2)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_tilted_moments_match_adaptive_integration(name):
    lik, density, cases = CASES[name]
    for y, m, v in cases:
        log_z, a, c = lik.tilted(np.array([y]), np.array([m]), np.array([v]))
        ref_log_z, ref_mean, ref_var = _adaptive(density(y), m, v)
        assert log_z[0] == pytest.approx(ref_log_z, rel=1e-8, abs=1e-9), (name, y, m, v)
        assert m + v * a[0] == pytest.approx(ref_mean, rel=1e-7, abs=1e-8), (name, y, m, v)
        assert v - v * v * c[0] == pytest.approx(ref_var, rel=1e-6, abs=1e-9), (name, y, m, v)


def test_probit_by_quadrature_equals_the_closed_form():
    from scipy.special import log_ndtr

    lik = Quadrature(lambda y, f: log_ndtr(y * f))
    rng = np.random.default_rng(0)
    y = np.where(rng.random(50) < 0.5, -1.0, 1.0)
    m, v = rng.normal(size=50) * 2, rng.uniform(0.05, 4, size=50)
    for got, want in zip(lik.tilted(y, m, v), Probit().tilted(y, m, v)):
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)


def test_student_t_outlier_gives_negative_curvature_and_logistic_proba():
    _, _, c = StudentT(dof=3.0, scale=0.3).tilted(np.array([6.0]), np.array([0.0]),
                                                  np.array([0.2]))
    assert c[0] < 0  # not log-concave: a negative site precision
    p = Logistic().proba(np.array([0.0, 3.0, -3.0]), np.array([1.0, 0.5, 0.5]))
    assert p[0] == pytest.approx(0.5, abs=1e-12) and p[1] > 0.9 and p[2] < 0.1
    assert p[1] + p[2] == pytest.approx(1.0, abs=1e-10)
    with pytest.raises(ValueError, match="dof and scale must be > 0"):
        StudentT(dof=0.0)
    # log p for Poisson uses the exact pmf
    assert Poisson().log_density(np.array(3.0), np.array(1.0)) == pytest.approx(
        3.0 - np.exp(1.0) - gammaln(4.0))


@pytest.mark.parametrize("kind", ["logistic", "student_t"])
def test_ep_with_quadrature_likelihoods_reaches_one_fixed_point(kind):
    from saspa_dask.engines.memory import InMemoryEngine
    from saspa_dask.ep import EPSchedule, make_block, run_ep, whiten
    from saspa_dask.core.kernels import basis_covariance

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 2))
    f = np.sin(2 * X[:, 0]) + X[:, 1]
    if kind == "logistic":
        lik, y = Logistic(), np.where(f + 0.5 * rng.normal(size=300) > 0, 1.0, -1.0)
    else:
        y = f + 0.1 * rng.normal(size=300)
        y[:15] += 8.0  # gross outliers: negative site precisions
        lik = StudentT(dof=3.0, scale=0.2)
    means, covs, ls = X[:25] + 0.01, np.zeros((25, 2, 2)), np.ones(2)
    L, _ = whiten(basis_covariance(means, covs, ls, 1.5), 1.5, 1e-8)
    blocks = [make_block(X[a:a + 100], y[a:a + 100], means, covs, ls, 1.5, L)
              for a in range(0, 300, 100)]
    results = [run_ep(InMemoryEngine(blocks), lik, 1.5, EPSchedule(mode, 0.5, 2000, 1e-10, anderson_memory=0, coarse_start=False))
               for mode in ("parallel", "sequential")]
    for r in results:
        assert r.converged and np.isfinite(r.log_evidence)
    np.testing.assert_allclose(results[0].posterior.mean, results[1].posterior.mean,
                               rtol=1e-6, atol=1e-8)
    if kind == "student_t":
        assert (np.concatenate(results[0].tau) < 0).any()
