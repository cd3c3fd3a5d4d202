"""Tilted moments against adaptive numerical integration and finite differences."""

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from saspa_dask.core.likelihoods import Gaussian, NoisyProbit, Probit, Step, make_likelihood

CASES = [(1.0, 0.3, 0.5), (-1.0, 0.3, 0.5), (1.0, -2.0, 4.0), (-1.0, 1.5, 0.05),
         (1.0, 0.0, 10.0)]


def _numeric_log_z(density, m, v):
    sd = np.sqrt(v)
    val, _ = quad(lambda f: density(f) * norm.pdf(f, m, sd), m - 12 * sd, m + 12 * sd,
                  points=[0.0] if abs(m) < 12 * sd else None, limit=200, epsabs=1e-14,
                  epsrel=1e-12)
    return np.log(val)


LIKS = [
    (Probit(), lambda y: (lambda f: norm.cdf(y * f))),
    (Step(0.1), lambda y: (lambda f: 0.1 + 0.8 * (y * f > 0))),
    (Step(0.0), lambda y: (lambda f: 1.0 * (y * f > 0))),
    (Gaussian(0.3), lambda y: (lambda f: norm.pdf(y, f, np.sqrt(0.3)))),
    (NoisyProbit(0.1), lambda y: (lambda f: 0.1 + 0.8 * norm.cdf(y * f))),
    (NoisyProbit(0.3), lambda y: (lambda f: 0.3 + 0.4 * norm.cdf(y * f))),
]


@pytest.mark.parametrize("lik,density", LIKS, ids=lambda x: getattr(x, "name", ""))
def test_log_z_and_derivatives(lik, density):
    for y, m, v in CASES:
        log_z, a, c = lik.tilted(np.array([y]), np.array([m]), np.array([v]))
        assert log_z[0] == pytest.approx(_numeric_log_z(density(y), m, v), rel=1e-7, abs=1e-9)
        h = 1e-4
        lp = lik.tilted(np.array([y]), np.array([m + h]), np.array([v]))[0][0]
        lm = lik.tilted(np.array([y]), np.array([m - h]), np.array([v]))[0][0]
        assert a[0] == pytest.approx((lp - lm) / (2 * h), rel=1e-6, abs=1e-8)
        assert c[0] == pytest.approx(-(lp - 2 * log_z[0] + lm) / h**2, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("lik", [Probit(), Step(0.0), Step(0.05), NoisyProbit(0.05)],
                         ids=["probit", "step0", "step", "noisy_probit"])
def test_tails_are_finite_and_correct(lik):
    m = np.array([-1e2, -1e3, -1e5, 1e5, 0.0])
    y = np.ones_like(m)
    v = np.full_like(m, 0.5)
    log_z, a, c = lik.tilted(y, m, v)
    assert np.all(np.isfinite(log_z)) and np.all(np.isfinite(a)) and np.all(np.isfinite(c))
    if isinstance(lik, Probit) or lik.label_noise == 0:  # log-concave: c >= 0
        assert np.all(c >= -1e-12)
    if isinstance(lik, Probit):
        # Mills ratio asymptotics: for z -> -inf, a -> -z/sqrt(1+v), c -> 1/(1+v)
        z = m[:3] / np.sqrt(1.5)
        np.testing.assert_allclose(a[:3] * np.sqrt(1.5), -z, rtol=1e-3)
        np.testing.assert_allclose(c[:3] * 1.5, 1.0, rtol=2e-3)
        np.testing.assert_allclose(log_z[:3], norm.logcdf(z), rtol=1e-12)


def test_step_is_not_log_concave_with_label_noise():
    """c < 0 (negative site precision) in the far tail: what damping exists for."""
    _, _, c = Step(0.1).tilted(np.array([1.0]), np.array([-5.0]), np.array([1.0]))
    assert c[0] < 0


def test_noisy_probit_reduces_to_probit_and_its_label_noise_gradient():
    """eps = 0 is the probit exactly; d log Z / d log eps against finite differences
    of the quadrature log Z; in the far tail Z -> eps (a flipped label costs log eps,
    not the probit's unbounded -z^2/2)."""
    y = np.array([1.0, -1.0, 1.0, -1.0])
    m, v = np.array([0.3, 0.3, -2.0, 4.0]), np.array([0.5, 0.5, 4.0, 0.1])
    for got, want in zip(NoisyProbit(0.0).tilted(y, m, v), Probit().tilted(y, m, v)):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    eps, h = 0.07, 1e-6
    grad = NoisyProbit(eps).log_z_gradient(y, m, v)["label_noise"]
    for k in range(4):
        def log_z(e):
            return _numeric_log_z(lambda f: e + (1 - 2 * e) * norm.cdf(y[k] * f), m[k], v[k])
        fd = (log_z(eps * np.exp(h)) - log_z(eps * np.exp(-h))) / (2 * h)
        assert grad[k] == pytest.approx(fd, rel=1e-6)
    tail = NoisyProbit(eps).tilted(np.array([1.0]), np.array([-1e4]), np.array([0.5]))[0]
    assert tail[0] == pytest.approx(np.log(eps), rel=1e-12)


def test_make_likelihood_validates():
    assert make_likelihood("gaussian", noise_variance=2.0).noise_variance == 2.0
    with pytest.raises(ValueError, match="likelihood must be one of"):
        make_likelihood("cauchy")
    with pytest.raises(ValueError, match="noise_variance must be > 0"):
        Gaussian(-1.0)
    with pytest.raises(ValueError, match="label_noise"):
        Step(0.5)
