"""Independent reference implementations for the exactness tests.

Nothing here imports saspa_dask: these are textbook formulas written in function
space (N-dimensional), against which the whitened M-dimensional engine is checked.
"""

import numpy as np
from scipy.special import ndtr
from scipy.stats import multivariate_normal, norm


def se(X1, X2, lengthscale, s2):
    """Plain SE-ARD kernel, by explicit differences."""
    diff = (X1[:, None, :] - X2[None, :, :]) / lengthscale
    return s2 * np.exp(-0.5 * (diff**2).sum(-1))


# ----------------------------------------------------------------------------------
# FITC / SPGP regression in closed form (Snelson & Ghahramani 2006)
# ----------------------------------------------------------------------------------


def fitc_regression(X, y, Xs, Z, lengthscale, s2, noise, jitter):
    """Predictive mean/variance of f* and the log marginal likelihood of FITC."""
    Kuu = se(Z, Z, lengthscale, s2) + jitter * np.eye(len(Z))
    Kuf = se(Z, X, lengthscale, s2)
    Kus = se(Z, Xs, lengthscale, s2)
    Qff = Kuf.T @ np.linalg.solve(Kuu, Kuf)
    Lam = s2 - np.diag(Qff) + noise  # diag(K - Q) + noise
    Sigma = np.linalg.inv(Kuu + (Kuf / Lam) @ Kuf.T)
    mean = Kus.T @ Sigma @ (Kuf @ (y / Lam))
    Qss = np.einsum("ij,ij->j", Kus, np.linalg.solve(Kuu, Kus))
    var = s2 - Qss + np.einsum("ij,ij->j", Kus, Sigma @ Kus)
    cov = Qff + np.diag(Lam)
    logml = multivariate_normal(np.zeros(len(y)), cov).logpdf(y)
    return mean, var, logml


# ----------------------------------------------------------------------------------
# Full-GP EP, Rasmussen & Williams (2006) Algorithm 3.5, with tilted moments
# computed directly as E[f] and Var[f] (not through derivatives of log Z).
# ----------------------------------------------------------------------------------


def probit_tilted(y, mu, var):
    """R&W eq. 3.58: log Z, mean and variance of Phi(y f) N(f | mu, var)."""
    z = y * mu / np.sqrt(1.0 + var)
    ratio = norm.pdf(z) / ndtr(z)
    mean = mu + y * var * ratio / np.sqrt(1.0 + var)
    variance = var - var**2 * ratio * (z + ratio) / (1.0 + var)
    return np.log(ndtr(z)), mean, variance


def step_tilted(eps):
    """Tilted moments of (eps + (1 - 2 eps) H(y f)) N(f | mu, var), as a mixture."""

    def tilted(y, mu, var):
        sd = np.sqrt(var)
        z = y * mu / sd
        Phi, phi = ndtr(z), norm.pdf(z)
        Z = eps + (1 - 2 * eps) * Phi
        # E[f 1{yf>0}] = mu Phi + y sd phi ; E[f^2 1{yf>0}] = (mu^2 + var) Phi + y mu sd phi
        first = eps * mu + (1 - 2 * eps) * (mu * Phi + y * sd * phi)
        second = eps * (mu**2 + var) + (1 - 2 * eps) * ((mu**2 + var) * Phi + y * mu * sd * phi)
        mean = first / Z
        return np.log(Z), mean, second / Z - mean**2

    return tilted


def full_gp_ep(K, y, tilted, tol=1e-12, max_sweeps=500):
    """Sequential EP on a dense GP prior N(0, K).  Returns sites, posterior, log Z_EP."""
    n = len(y)
    tau = np.zeros(n)
    nu = np.zeros(n)
    Sigma = K.copy()
    mu = np.zeros(n)
    for _ in range(max_sweeps):
        old = np.concatenate([tau, nu])
        for i in range(n):
            tau_c = 1.0 / Sigma[i, i] - tau[i]
            nu_c = mu[i] / Sigma[i, i] - nu[i]
            _, m_hat, v_hat = tilted(y[i], nu_c / tau_c, 1.0 / tau_c)
            d_tau = 1.0 / v_hat - tau_c - tau[i]
            tau[i] += d_tau
            nu[i] = m_hat / v_hat - nu_c
            si = Sigma[:, i].copy()
            Sigma -= d_tau / (1.0 + d_tau * si[i]) * np.outer(si, si)
            mu = Sigma @ nu
        # recompute: Sigma = (K^-1 + T)^-1 = K (I + T K)^-1
        Sigma = K @ np.linalg.inv(np.eye(n) + tau[:, None] * K)
        Sigma = 0.5 * (Sigma + Sigma.T)
        mu = Sigma @ nu
        if np.max(np.abs(np.concatenate([tau, nu]) - old)) < tol:
            break
    else:
        raise RuntimeError("reference EP did not converge")
    # log Z_EP = log int N(f|0,K) prod_i t_i(f_i) df + sum_i log(Zhat_i / int cavity*t_i)
    sign, logdet = np.linalg.slogdet(np.eye(n) + K * tau[None, :])
    assert sign > 0
    log_z = -0.5 * logdet + 0.5 * nu @ Sigma @ nu
    s = np.diag(Sigma)
    s_c = 1.0 / (1.0 / s - tau)
    m_c = s_c * (mu / s - nu)
    log_zhat, _, _ = tilted(y, m_c, s_c)
    log_z += np.sum(
        log_zhat
        + 0.5 * np.log1p(tau * s_c)
        - 0.5 * ((m_c / s_c + nu) ** 2 / (1.0 / s_c + tau) - m_c**2 / s_c)
    )
    return tau, nu, mu, Sigma, log_z


def full_gp_predict(K, Ks, kss, mu, Sigma):
    """Latent predictive mean and variance from the posterior N(mu, Sigma) of f."""
    A = np.linalg.solve(K, Ks)  # K^-1 k*
    mean = A.T @ mu
    var = kss - np.einsum("ij,ij->j", Ks, A) + np.einsum("ij,ij->j", A, Sigma @ A)
    return mean, var


# ----------------------------------------------------------------------------------
# Blurred bases in function space: the prior the SASPA approximation implies
# ----------------------------------------------------------------------------------


def blurred_cross(X, means, covs, lengthscale, s2):
    """Kt(x, j) = s2 sqrt(|Lam| / |Lam + C_j|) exp(-1/2 r^T (Lam + C_j)^{-1} r), r = x - a_j,
    the Gaussian integral of the SE kernel against N(a_j, C_j), term by term."""
    Lam = np.diag(np.asarray(lengthscale, float) ** 2)
    out = np.empty((len(X), len(means)))
    for j, (a, C) in enumerate(zip(means, covs)):
        S = Lam + C
        r = X - a
        quad = np.einsum("ij,ij->i", r, np.linalg.solve(S, r.T).T)
        out[:, j] = s2 * np.sqrt(np.linalg.det(Lam) / np.linalg.det(S)) * np.exp(-0.5 * quad)
    return out


def blurred_basis(means, covs, lengthscale, s2):
    """Kh(i, j) = s2 sqrt(|Lam| / |Lam + C_i + C_j|) exp(-1/2 d^T (Lam + C_i + C_j)^{-1} d)."""
    Lam = np.diag(np.asarray(lengthscale, float) ** 2)
    M = len(means)
    out = np.empty((M, M))
    for i in range(M):
        for j in range(M):
            S = Lam + covs[i] + covs[j]
            d = means[i] - means[j]
            out[i, j] = (s2 * np.sqrt(np.linalg.det(Lam) / np.linalg.det(S))
                         * np.exp(-0.5 * d @ np.linalg.solve(S, d)))
    return out


def blurred_prior(X, Xs, means, covs, lengthscale, s2, jitter):
    """The function-space prior of a blurred-basis approximation: f = Kt Kh^{-1} u plus
    an independent residual of variance s2 - q_i per point.  Returns the training
    covariance Q + diag(lam), the train-test covariance and lam."""
    Kh = blurred_basis(means, covs, lengthscale, s2) + jitter * np.eye(len(means))
    Kt, Ks = blurred_cross(X, means, covs, lengthscale, s2), blurred_cross(Xs, means, covs, lengthscale, s2)
    Q = Kt @ np.linalg.solve(Kh, Kt.T)
    lam = np.maximum(s2 - np.diag(Q), 0.0)
    return Q + np.diag(lam), Kt @ np.linalg.solve(Kh, Ks.T), lam


def central_differences(f, x0, eps=1e-5):
    """(f(x0 + eps e_k) - f(x0 - eps e_k)) / (2 eps) for every coordinate k."""
    fd = np.empty(x0.size)
    for k in range(x0.size):
        step = np.zeros(x0.size)
        step[k] = eps
        fd[k] = (f(x0 + step) - f(x0 - step)) / (2 * eps)
    return fd


def converged_gradient(trainer, h0, likelihood):
    """EP run to convergence at ``h0``: the gradient vector there (the code under
    test) and the sites, for :func:`evidence_differences` to check it against."""
    trainer.build(h0)
    results = trainer.run(likelihood)
    assert results[0].converged
    grad = h0.gradient_vector(trainer.gradient(results, likelihood))
    return grad, [(results[0].tau, results[0].nu)]


def evidence_differences(trainer, h0, likelihood, sites, reconverge, eps=1e-5):
    """Central differences of log Z_EP over ``h0``'s log-space vector: at the fixed
    ``sites`` (the evidence the gradient differentiates), or after EP re-converges
    from them (the stationarity argument that makes it the total derivative)."""

    def evidence(x):
        hyper = h0.from_log(x)
        lik = likelihood.with_hyperparameters(hyper.likelihood)
        trainer.build(hyper, sites)
        return trainer.run(lik)[0].log_evidence if reconverge else trainer.evidence(lik)

    return central_differences(evidence, h0.to_log(), eps)


def engine_gradients(make_trainer, X, y, h0, likelihood, work_dir, chunk_rows=70):
    """(log evidence, gradient vector) at ``h0`` from a trainer on the NumPy rows and
    from one on dask arrays of ``chunk_rows`` rows (``make_trainer(X, y, work_dir)``):
    the Dask engine's blocks and per-chunk gradient sums against the in-memory ones."""
    import dask.array as da

    out = []
    for Xi, yi, where in ((X, y, None),
                          (da.from_array(X, chunks=(chunk_rows, X.shape[1])),
                           da.from_array(y, chunks=chunk_rows), work_dir)):
        trainer = make_trainer(Xi, yi, where)
        trainer.build(h0)
        results = trainer.run(likelihood)
        out.append((results[0].log_evidence,
                    h0.gradient_vector(trainer.gradient(results, likelihood))))
    return out
