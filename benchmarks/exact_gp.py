"""Exact GP regression in closed form: the reference the sparse fits are measured against.

Written separately from the package (nothing here imports ``saspa_dask``): SE-ARD
kernel, Gaussian noise, the log marginal likelihood and its gradient from one Cholesky
factorisation (GPML, Rasmussen & Williams, eqs. 2.30 and 5.9), maximised by L-BFGS-B
over log lengthscales, log signal variance and log noise variance.  O(N^3) per
evaluation and a few N x N matrices of memory: 10,000 rows take about 2.4 GB.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_solve, cholesky, lapack, solve_triangular
from scipy.optimize import minimize

__all__ = ["ExactGP"]


def _kernel(X, Z, lengthscale, signal_variance):
    a, b = X / lengthscale, Z / lengthscale
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * a @ b.T
    np.maximum(d2, 0.0, out=d2)
    return signal_variance * np.exp(-0.5 * d2)


class ExactGP:
    """Exact GP regression; ``fit`` learns the hyperparameters by the evidence."""

    def __init__(self, max_iter=100, theta0=None):
        self.max_iter = max_iter
        self.theta0 = theta0

    def _unpack(self, theta):
        d = self.X.shape[1]
        return np.exp(theta[:d]), np.exp(theta[d]), np.exp(theta[d + 1])

    def _negative_evidence(self, theta):
        X, y = self.X, self.y
        n = len(y)
        lengthscale, sf2, sn2 = self._unpack(theta)
        Kf = _kernel(X, X, lengthscale, sf2)
        K = Kf + sn2 * np.eye(n)
        L = cholesky(K, lower=True)
        alpha = cho_solve((L, True), y)
        value = 0.5 * y @ alpha + np.log(np.diag(L)).sum() + 0.5 * n * np.log(2 * np.pi)
        # W = K^{-1} - alpha alpha^T; dK^{-1} from the Cholesky factor (LAPACK potri)
        Kinv, info = lapack.dpotri(L, lower=1)
        if info != 0:
            raise np.linalg.LinAlgError(f"dpotri failed: {info}")
        Kinv = np.tril(Kinv) + np.tril(Kinv, -1).T
        W = Kinv - np.outer(alpha, alpha)
        A = W * Kf  # d nll / d K_f entries, times K_f
        r = A.sum(1)
        Xs = X / lengthscale
        # sum_ij A_ij (x_id - x_jd)^2 / l_d^2 = 2 sum_i x_id^2 r_i - 2 x_d^T A x_d
        quad = np.einsum("id,id->d", Xs, A @ Xs)
        grad_l = 0.5 * (2.0 * (Xs * Xs).T @ r - 2.0 * quad)
        grad = np.concatenate([grad_l, [0.5 * A.sum(), 0.5 * sn2 * np.trace(W)]])
        return value, grad

    def fit(self, X, y):
        self.X, self.y = np.asarray(X, float), np.asarray(y, float)
        d = self.X.shape[1]
        theta0 = self.theta0
        if theta0 is None:
            theta0 = np.concatenate([np.log(self.X.std(0) + 1e-12),
                                     [np.log(self.y.var()), np.log(0.1 * self.y.var())]])
        result = minimize(self._negative_evidence, theta0, jac=True, method="L-BFGS-B",
                          bounds=[(-7, 7)] * d + [(-7, 7), (-12, 3)],
                          options={"maxiter": self.max_iter})
        self.theta_, self.result_ = result.x, result
        return self.condition(self.X, self.y, *self._unpack(result.x))

    def condition(self, X, y, lengthscale, signal_variance, noise_variance):
        """The exact posterior given rows (X, y) at these hyperparameters (no fit)."""
        self.X, self.y = np.asarray(X, float), np.asarray(y, float)
        self.lengthscale_ = np.asarray(lengthscale, float)
        self.signal_variance_, self.noise_variance_ = signal_variance, noise_variance
        K = _kernel(self.X, self.X, self.lengthscale_, self.signal_variance_)
        K[np.diag_indices_from(K)] += self.noise_variance_
        self._L = cholesky(K, lower=True)
        self._alpha = cho_solve((self._L, True), self.y)
        return self

    def predict_latent(self, Xs, block=2048):
        """Latent mean and variance at ``Xs`` (blocks of rows)."""
        means, variances = [], []
        for start in range(0, len(Xs), block):
            Ks = _kernel(np.asarray(Xs[start:start + block], float), self.X,
                         self.lengthscale_, self.signal_variance_)
            v = solve_triangular(self._L, Ks.T, lower=True)
            means.append(Ks @ self._alpha)
            variances.append(self.signal_variance_ - (v * v).sum(0))
        return np.concatenate(means), np.maximum(np.concatenate(variances), 0.0)
