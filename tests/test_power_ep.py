"""Power EP (``alpha``): against closed forms, a dense reference written here, finite
differences, and across engines (docs/design.md, "Power EP")."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from scipy import integrate
from scipy.special import log_ndtr, ndtr

from reference import blurred_basis, blurred_cross, converged_gradient, evidence_differences
import in_process
from saspa_dask import Basis, SASPAClassifier, SASPARegressor, load_model
from saspa_dask.core.kernels import blur_covariances
from saspa_dask.core.likelihoods import (Gaussian, NoisyProbit, Probit, Step, StudentT,
                                         powered)
from saspa_dask.engines.kmeans import kmeans
from saspa_dask.ep import EPSchedule
from saspa_dask.fitting.hyperparameters import Hyperparameters
from saspa_dask.fitting.trainer import Trainer

LS, S2, NOISE, JITTER = np.array([0.9, 1.2]), 1.3, 0.05, 1e-8


def _regression(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.2 * rng.normal(size=n)
    return X, y, rng.normal(size=(30, 2)) * 1.3


def _bases(X, blur, M=7):
    basis = kmeans(X, M, random_state=0)[0]
    return Basis(basis.means, blur_covariances(basis.covs, blur))


def _dense(X, Xs, basis):
    """Kt, Ks, Kh (+ jitter), Q, lam with the reference kernels of tests/reference.py."""
    Kh = blurred_basis(basis.means, basis.covs, LS, S2) + JITTER * S2 * np.eye(basis.n_bases)
    Kt = blurred_cross(X, basis.means, basis.covs, LS, S2)
    Ks = blurred_cross(Xs, basis.means, basis.covs, LS, S2)
    Q = Kt @ np.linalg.solve(Kh, Kt.T)
    return Kt, Ks, Kh, Q, S2 - np.diag(Q)


def _gaussian_fit(X, y, basis, blur, alpha, approximation="fitc"):
    return SASPARegressor(bases=basis, blur=blur, lengthscale=LS, signal_variance=S2,
                          noise_variance=NOISE, jitter=JITTER, center_y=False,
                          optimize_hyperparameters=False, alpha=alpha,
                          approximation=approximation, ep={"tol": 1e-12}).fit(X, y)


def _log_normal(y, C):
    sign, logdet = np.linalg.slogdet(C)
    assert sign > 0
    return -0.5 * (logdet + y @ np.linalg.solve(C, y) + len(y) * np.log(2 * np.pi))


def _sparse_gaussian_predictive(Kt, Ks, Kh, y, noise_per_row):
    """Mean and latent variance of the Gaussian model whose rows have their own noise
    (the inducing posterior, then the residual s2 - Q** kept): written out densely."""
    A = Kh + Kt.T @ (Kt / noise_per_row[:, None])
    mean = Ks @ np.linalg.solve(A, Kt.T @ (y / noise_per_row))
    q_ss = np.einsum("ij,ji->i", Ks, np.linalg.solve(Kh, Ks.T))
    var = S2 - q_ss + np.einsum("ij,ji->i", Ks, np.linalg.solve(A, Ks.T))
    return mean, var


@pytest.mark.parametrize("blur", ["delta", "spherical", "full"])
@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.1])
def test_gaussian_sites_energy_and_predictions_are_the_closed_forms(blur, alpha):
    """After one sweep tau_i = 1 / (vy + alpha lam_i), nu_i = y_i tau_i; the energy is
    log N(y; 0, Q + alpha diag(lam) + vy I) - (1 - alpha) / (2 alpha) sum log(1 + alpha
    lam_i / vy); predictions are the Gaussian model's with row noise vy + alpha lam_i."""
    X, y, Xs = _regression()
    basis = _bases(X, blur)
    model = _gaussian_fit(X, y, basis, blur, alpha)
    Kt, Ks, Kh, Q, lam = _dense(X, Xs, basis)
    tau = 1.0 / (NOISE + alpha * lam)
    np.testing.assert_allclose(model.sites_tau_, tau, rtol=1e-9)
    np.testing.assert_allclose(model.sites_nu_, y * tau, rtol=1e-9)
    energy = (_log_normal(y, Q + np.diag(alpha * lam + NOISE))
              - (1 - alpha) / (2 * alpha) * np.sum(np.log1p(alpha * lam / NOISE)))
    assert model.log_evidence_ == pytest.approx(energy, rel=1e-9)
    mean, var = _sparse_gaussian_predictive(Kt, Ks, Kh, y, NOISE + alpha * lam)
    got_mean, got_var = model.predict_latent(Xs)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got_var, var, rtol=1e-7, atol=1e-9)


def test_small_alpha_tends_to_titsias_vfe():
    """As alpha -> 0 the energy tends to Titsias' bound log N(y; 0, Q + vy I) -
    sum(lam) / (2 vy), the gap shrinking linearly in alpha, and the predictive to
    VFE/SGPR's (the DTC predictive)."""
    X, y, Xs = _regression(seed=3)
    basis = _bases(X, "delta")
    Kt, Ks, Kh, Q, lam = _dense(X, Xs, basis)
    vfe = _log_normal(y, Q + NOISE * np.eye(len(y))) - lam.sum() / (2 * NOISE)
    sgpr_mean, sgpr_var = _sparse_gaussian_predictive(Kt, Ks, Kh, y,
                                                      np.full(len(y), NOISE))
    gaps, mean_gaps = [], []
    for alpha in (1e-2, 1e-3, 1e-4):
        model = _gaussian_fit(X, y, basis, "delta", alpha)
        gaps.append(model.log_evidence_ - vfe)
        mean_gaps.append(np.abs(model.predict_latent(Xs)[0] - sgpr_mean).max())
    # linear in alpha: each tenfold smaller alpha gives a gap about ten times smaller
    # (ratios 10 +- 1: the energy's first-order term dominates)
    assert 9.0 < gaps[0] / gaps[1] < 11.0 and 9.0 < gaps[1] / gaps[2] < 11.0
    assert abs(gaps[2]) < 1e-2 * abs(vfe - _log_normal(y, Q + np.diag(lam + NOISE)))
    assert mean_gaps[0] > mean_gaps[1] > mean_gaps[2]
    assert mean_gaps[2] < 1e-3 * np.abs(sgpr_mean).max()


# -- probit: a dense sequential power EP written here --------------------------------


def _tilted_by_quad(y, mc, v, alpha):
    """log Z, a, c of Phi(y f)^alpha against N(mc, v), by adaptive quadrature."""
    sd = np.sqrt(v)

    def moment(k):
        def f(u):
            return u ** k * np.exp(-0.5 * ((u - mc) / sd) ** 2 + alpha * log_ndtr(y * u))
        lo, hi = mc - 12 * sd, mc + 12 * sd
        return integrate.quad(f, lo, hi, points=[0.0] if lo < 0 < hi else None,
                              epsabs=0, epsrel=1e-10, limit=200)[0] / (sd * np.sqrt(2 * np.pi))

    z0, z1, z2 = moment(0), moment(1), moment(2)
    mean, var = z1 / z0, z2 / z0 - (z1 / z0) ** 2
    return np.log(z0), (mean - mc) / v, (v - var) / v ** 2


def _dense_power_ep(phi, lam, y, alpha, tol=1e-11, max_sweeps=300):
    """Sequential power EP on v ~ N(0, I), site i acting on phi_i^T v, the likelihood
    seeing f_i ~ N(phi_i^T v, lam_i): explicit inverses, one row at a time."""
    N, M = phi.shape
    tau, nu = np.zeros(N), np.zeros(N)
    for _ in range(max_sweeps):
        change = 0.0
        for i in range(N):
            Sigma = np.linalg.inv(np.eye(M) + phi.T @ (tau[:, None] * phi))
            mu = Sigma @ (phi.T @ nu)
            m, s = phi[i] @ mu, phi[i] @ Sigma @ phi[i]
            sc = 1.0 / (1.0 / s - alpha * tau[i])
            mc = sc * (m / s - alpha * nu[i])
            _, a, c = _tilted_by_quad(y[i], mc, sc + lam[i], alpha)
            D = 1.0 - sc * c
            new_tau, new_nu = c / (alpha * D), (a + mc * c) / (alpha * D)
            change = max(change, abs(new_tau - tau[i]), abs(new_nu - nu[i]))
            tau[i], nu[i] = new_tau, new_nu
        if change < tol:
            break
    # the energy from its definition (docs/design.md), with 1-D logA written out
    Sigma = np.linalg.inv(np.eye(M) + phi.T @ (tau[:, None] * phi))
    h = phi.T @ nu
    energy = 0.5 * h @ Sigma @ h + 0.5 * np.linalg.slogdet(Sigma)[1]
    for i in range(N):
        m, s = phi[i] @ Sigma @ h, phi[i] @ Sigma @ phi[i]
        sc = 1.0 / (1.0 / s - alpha * tau[i])
        mc = sc * (m / s - alpha * nu[i])
        log_z = _tilted_by_quad(y[i], mc, sc + lam[i], alpha)[0]
        log_a_cavity = mc * mc / (2 * sc) + 0.5 * np.log(sc)
        log_a_marginal = m * m / (2 * s) + 0.5 * np.log(s)
        energy += (log_z + log_a_cavity - log_a_marginal) / alpha
    return tau, nu, energy


def _probit_problem(blur, seed=5, n=40):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(np.sin(2 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    return X, y, _bases(X, blur, M=5)


@pytest.mark.parametrize("alpha", [0.5, 0.25])
@pytest.mark.parametrize("blur", ["delta", "spherical"])
def test_probit_sites_and_energy_against_a_dense_power_ep(alpha, blur):
    X, y, basis = _probit_problem(blur)
    Kt, _, Kh, _, lam = _dense(X, X[:1], basis)
    L = np.linalg.cholesky(Kh)
    phi = np.linalg.solve(L, Kt.T).T
    tau, nu, energy = _dense_power_ep(phi, lam, y, alpha)
    fits = {mode: SASPAClassifier(bases=basis, blur=blur, lengthscale=LS, signal_variance=S2,
                                  jitter=JITTER, optimize_hyperparameters=False, alpha=alpha,
                                  ep={"mode": mode, "tol": 1e-11, "max_sweeps": 500})
            .fit(X, y) for mode in ("sequential", "parallel")}
    for mode, model in fits.items():
        assert model.converged_, mode
        np.testing.assert_allclose(model.sites_tau_, tau, rtol=1e-6, atol=1e-9, err_msg=mode)
        np.testing.assert_allclose(model.sites_nu_, nu, rtol=1e-6, atol=1e-9, err_msg=mode)
        assert model.log_evidence_ == pytest.approx(energy, rel=1e-8, abs=1e-8), mode
    np.testing.assert_allclose(fits["sequential"].predict_proba(X),
                               fits["parallel"].predict_proba(X), rtol=1e-8, atol=1e-10)


def test_alpha_near_one_meets_ep():
    """alpha = 1 is EP's own code path; alpha just below 1 (quadrature for the probit,
    the closed forms for the Gaussian and step) lands next to it, the energy's
    difference of order 1 - alpha."""
    X, y, basis = _probit_problem("spherical")
    yr = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    for cls, target, extra in ((SASPAClassifier, y, {}),
                               (SASPAClassifier, y, {"likelihood": "step",
                                                     "label_noise": 0.05}),
                               (SASPARegressor, yr, {"noise_variance": NOISE})):
        kw = dict(bases=basis, blur="spherical", lengthscale=LS, signal_variance=S2,
                  optimize_hyperparameters=False, ep={"tol": 1e-11, "max_sweeps": 500},
                  **extra)
        ep = cls(**kw).fit(X, target)
        near = cls(alpha=1 - 1e-7, **kw).fit(X, target)
        assert near.log_evidence_ == pytest.approx(ep.log_evidence_, abs=1e-4)
        np.testing.assert_allclose(near.sites_tau_, ep.sites_tau_, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("likelihood,alpha", [(Probit(), 0.5), (Step(0.05), 0.5),
                                              (NoisyProbit(0.05), 0.3),
                                              (Gaussian(0.1), 0.3),
                                              (StudentT(4.0, 0.3), 0.5)])
def test_energy_gradient_matches_finite_differences(likelihood, alpha):
    """The gradient at fixed converged sites equals central differences of the energy
    at those sites and after power EP re-converges (the stationarity the optimiser
    relies on): lengthscales, signal variance, blur scale and the likelihood's own."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(160, 3))
    f = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    y = (f + 0.3 * rng.normal(size=160) if likelihood.name in ("gaussian", "student_t")
         else np.sign(f + 0.3 * rng.normal(size=160)))
    basis = kmeans(X, 8, random_state=0)[0]
    lik = powered(likelihood, alpha)
    damping = 0.5 if likelihood.name in ("step", "noisy_probit", "student_t") else 1.0
    trainer = Trainer(X, y, None, basis.means, blur_covariances(basis.covs, "spherical"),
                      EPSchedule("parallel", damping, 3000, 1e-12, anderson_memory=0, coarse_start=False), jitter=1e-8,
                      block_rows=60)
    h0 = Hyperparameters(np.array([1.3, 0.9, 1.7]), 1.4, lik.hyperparameters(), 0.7,
                         learn_blur_scale=True)
    grad, sites = converged_gradient(trainer, h0, lik)
    rtol = 1e-4 if likelihood.name == "student_t" else 1e-6
    for reconverge in (False, True):
        fd = evidence_differences(trainer, h0, lik, sites, reconverge)
        np.testing.assert_allclose(grad, fd, rtol=rtol, atol=1e-5)


def test_dask_equals_in_memory_and_the_store_keeps_alpha(tmp_path):
    X, y, basis = _probit_problem("full", n=300)
    kw = dict(n_bases=6, blur="full", alpha=0.5, random_state=0, max_hyper_iter=3,
              ep={"tol": 1e-10, "coarse_start": False})
    local = SASPAClassifier(**kw).fit(X, y)
    lazy = SASPAClassifier(**kw).fit(da.from_array(X, chunks=(70, 2)),
                                     da.from_array(y, chunks=70))
    assert local.hyperparameter_trace_ and local.alpha == 0.5
    assert lazy.log_evidence_ == pytest.approx(local.log_evidence_, rel=1e-8)
    np.testing.assert_allclose(lazy.predict_proba(X), local.predict_proba(X), rtol=1e-8,
                               atol=1e-10)
    loaded = load_model(local.save(tmp_path / "m.zarr"))
    assert loaded.alpha == 0.5
    np.testing.assert_array_equal(loaded.predict_proba(X), local.predict_proba(X))
    from saspa_dask.storage import describe_model

    summary = describe_model(tmp_path / "m.zarr")
    assert summary["alpha"] == 0.5 and summary["approximation"] == "fitc"


def test_powered_tilted_moments_against_quadrature():
    """The closed forms (Gaussian, step) and the Gauss-Hermite ones (probit, noisy
    probit) against adaptive quadrature of p^alpha N(m, v)."""
    cases = [(Gaussian(0.3), 0.7, lambda y, f: np.exp(-0.5 * (y - f) ** 2 / 0.3)
              / np.sqrt(2 * np.pi * 0.3)),
             (Step(0.05), 1.0, lambda y, f: 0.05 + 0.9 * (y * f > 0)),
             (Probit(), -1.0, lambda y, f: ndtr(y * f)),
             (NoisyProbit(0.1), 1.0, lambda y, f: 0.1 + 0.8 * ndtr(y * f))]
    for base, y, density in cases:
        for alpha in (0.5, 0.1):
            lik = powered(base, alpha)
            for m, v in ((0.3, 0.5), (-1.0, 2.0), (2.0, 6.0)):
                sd = np.sqrt(v)

                def moment(k):
                    return integrate.quad(
                        lambda f: f ** k * np.exp(-0.5 * ((f - m) / sd) ** 2)
                        / (sd * np.sqrt(2 * np.pi)) * density(y, f) ** alpha,
                        m - 14 * sd, m + 14 * sd, points=[0.0], limit=400,
                        epsabs=0, epsrel=1e-12)[0]

                z0, z1, z2 = moment(0), moment(1), moment(2)
                mean, var = z1 / z0, z2 / z0 - (z1 / z0) ** 2
                log_z, a, c = (float(t[0]) for t in lik.tilted(np.array([y]), np.array([m]),
                                                                 np.array([v])))
                assert log_z == pytest.approx(np.log(z0), abs=1e-8), (base.name, alpha, m)
                assert a == pytest.approx((mean - m) / v, abs=1e-7), (base.name, alpha, m)
                assert c == pytest.approx((v - var) / v ** 2, abs=1e-7), (base.name, alpha, m)


def test_saspa_train_alpha_reaches_the_model_and_info(tmp_path):
    """``saspa train --alpha 0.5`` on the embedded cluster fits the same power-EP model
    as the estimator on the same rows (same energy), and ``saspa info`` says so."""

    X, y, _ = _probit_problem("full", n=400)
    np.save(tmp_path / "d.npy", np.column_stack([X, (y > 0).astype(float)]))

    def saspa(*args):
        res = in_process.saspa(*args)
        assert res.returncode == 0, res.stderr
        return res.stdout

    saspa("ingest", tmp_path / "d.npy", "--out", tmp_path / "d.zarr", "--chunk-rows", 200)
    saspa("train", "--fixed-hyperparameters", tmp_path / "d.zarr", "--out", tmp_path / "m.zarr", "--n-bases", 6,
          "--alpha", 0.5, "--no-coarse-start", "--tol", 1e-10)
    model = load_model(tmp_path / "m.zarr")
    assert model.alpha == 0.5
    local = SASPAClassifier(n_bases=6, alpha=0.5, random_state=0,
                            optimize_hyperparameters=False,
                            ep={"tol": 1e-10, "coarse_start": False}).fit(X, (y > 0) * 1.0)
    assert model.log_evidence_ == pytest.approx(local.log_evidence_, rel=1e-8)
    assert "fitc, power EP, alpha 0.5" in saspa("info", tmp_path / "m.zarr")


def test_gaussian_closed_forms_hold_for_frequency_features():
    """The same closed forms with TFIFGP's frequency features as the bases (their
    covariances from saspa_dask.core.fourier, checked against quadrature in
    tests/test_fourier.py): the power belongs to the site update, whatever the bases."""
    from saspa_dask.core.fourier import fourier_cross_covariance, fourier_feature_covariance

    X, y, Xs = _regression(seed=2)
    rng = np.random.default_rng(0)
    centres = X[rng.choice(len(X), 6, replace=False)]
    window = np.array([0.4, 0.6])
    basis = Basis(centres, np.repeat(np.diag(window)[None], 6, axis=0),
                  rng.normal(size=(6, 2)), rng.uniform(0, 2 * np.pi, 6))
    Kt = fourier_cross_covariance(X, centres, basis.frequencies, basis.phases, window, LS, S2)
    Kh = fourier_feature_covariance(centres, basis.frequencies, basis.phases, window, LS, S2)
    for alpha in (0.5, 0.1):
        model = _gaussian_fit(X, y, basis, "fourier", alpha)
        Kh_j = Kh + model.jitter_ * np.eye(6)
        Q = Kt @ np.linalg.solve(Kh_j, Kt.T)
        lam = S2 - np.diag(Q)
        np.testing.assert_allclose(model.sites_tau_, 1.0 / (NOISE + alpha * lam), rtol=1e-8)
        energy = (_log_normal(y, Q + np.diag(alpha * lam + NOISE))
                  - (1 - alpha) / (2 * alpha) * np.sum(np.log1p(alpha * lam / NOISE)))
        assert model.log_evidence_ == pytest.approx(energy, rel=1e-8)
