"""The informative vector machine (Lawrence, Seeger & Herbrich, 2003) as a basis selector.

IVM builds a sparse GP posterior by assumed-density filtering on an active set chosen
greedily: at each step every remaining row's ADF update is scored by the entropy
reduction of its own marginal,

    dH_i = -1/2 log(1 - c_i s_i),

(s_i its current marginal variance, c_i = -d^2 log Z_i / d m^2 of its tilted moments,
so that the variance after the update is s_i (1 - c_i s_i)), and the row with the
largest reduction joins.  The posterior over all N latents is kept as
Sigma = K - M^T M with one row of M per active row, so a step costs O(N k) and the
selection of d rows O(N d^2), plus one kernel column per step.

The active rows are the bases of the IVM posterior (delta bases); their ADF sites
give it.  :func:`ivm_select` returns both; :func:`ivm_bases` the bases alone, e.g. to
start a SASPA fit (``SASPAClassifier(bases=ivm_bases(...), blur="delta")``).

Lawrence et al. learn the kernel by the IVM's approximate evidence: with the active
set I and its sites (site means m~ = nu / tau, variances 1 / tau) held fixed,

    log p(y) ~ log N(m~ | 0, K_II + diag(1 / tau)),

maximised over the kernel, then the active set is selected again under the new kernel
(:func:`ivm_evidence` gives it and its gradient).  The likelihood's bias b (the latent
seen by the likelihood is f + b) is, as in their software, the maximiser of the
training rows' predictive log likelihood sum_n log p(y_n | m_n + b, v_n) under the
current posterior marginals (:func:`ivm_bias`).

That bias is invisible to the evidence, which cannot then tell a shifted latent from
a larger signal; the estimator's default instead puts the offset in the prior, as a
**bias kernel**: k(x, x') = SE(x, x') + b2, the constant b2 learnt with the kernel by
the same evidence (``bias_variance`` below), the offset integrated out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, cholesky
from scipy.optimize import minimize_scalar

from ..core.threads import single_scipy_thread
from ..core.bases import Basis
from ..core.kernels import se_kernel

__all__ = ["IVMSelection", "ivm_bases", "ivm_bias", "ivm_evidence", "ivm_offset_moments",
           "ivm_select", "ivm_site_statistics"]

# the bias is searched within this many latent standard deviations of zero
_BIAS_RANGE = 6.0


@dataclass
class IVMSelection:
    """What :func:`ivm_select` chose.

    Attributes
    ----------
    indices : ndarray of int, shape (k,)
        Active rows in the order they joined.
    tau, nu : ndarray of shape (k,)
        Their ADF sites (natural parameters) at the time they joined.
    entropy_reductions : ndarray of shape (k,)
        dH of each chosen row when it joined.
    mean, var : ndarray of shape (n,)
        The posterior marginals of every row's latent f after the selection.
    """

    indices: np.ndarray
    tau: np.ndarray
    nu: np.ndarray
    entropy_reductions: np.ndarray
    mean: np.ndarray
    var: np.ndarray


def ivm_select(X, y, n_active, likelihood, lengthscale, signal_variance, bias=0.0,
               bias_variance=0.0):
    """Greedy IVM selection of ``n_active`` rows (module docstring).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
        EP targets (labels +-1, or centred regression targets).
    n_active : int
    likelihood : likelihood object (``tilted``)
    lengthscale : ndarray of shape (d,)
    signal_variance : float
    bias : float, default=0.0
        The likelihood sees f + bias.
    bias_variance : float, default=0.0
        A constant added to the kernel (the bias kernel's variance b2).

    Returns
    -------
    IVMSelection
        Fewer than ``n_active`` rows when no remaining row reduces the entropy (all
        rows explained, or only non-log-concave updates that would widen it).
    """
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = X.shape[0]
    n_active = min(int(n_active), n)
    mean = np.zeros(n)
    var = np.full(n, float(signal_variance) + float(bias_variance))
    rows_M = np.zeros((n_active, n))
    free = np.ones(n, dtype=bool)
    chosen, taus, nus, gains = [], [], [], []
    for k in range(n_active):
        _, a, c = likelihood.tilted(y, mean + bias, var)
        shrink = c * var
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(free & (shrink > 0) & (shrink < 1), -0.5 * np.log1p(-shrink),
                            -np.inf)
        j = int(np.argmax(gain))
        if not np.isfinite(gain[j]):
            break
        # column j of Sigma = K - M^T M: one kernel column, O(N k)
        column = (se_kernel(X, X[j:j + 1], lengthscale, signal_variance)[:, 0]
                  + bias_variance - rows_M[:k].T @ rows_M[:k, j])
        denom = 1.0 - c[j] * var[j]
        taus.append(c[j] / denom)
        nus.append((a[j] + c[j] * mean[j]) / denom)
        mean = mean + a[j] * column
        rows_M[k] = np.sqrt(c[j]) * column
        var = np.maximum(var - c[j] * column * column, 0.0)
        free[j] = False
        chosen.append(j)
        gains.append(gain[j])
    return IVMSelection(np.array(chosen, dtype=np.intp), np.array(taus), np.array(nus),
                        np.array(gains), mean, var)


def ivm_evidence(X_active, tau, nu, lengthscale, signal_variance, jitter,
                 bias_variance=None):
    """Lawrence et al.'s approximate log evidence of an active set and its gradient.

    log N(m~ | 0, C), C = K_II + jitter s2 I + diag(1 / tau), m~ = nu / tau: the
    marginal likelihood of the sites read as Gaussian observations; with a bias
    kernel, K_II has b2 added to every entry.

    Parameters
    ----------
    X_active : ndarray of shape (k, d)
    tau, nu : ndarray of shape (k,)
        The active rows' sites (tau > 0, as the selection keeps them).
    lengthscale : ndarray of shape (d,)
    signal_variance : float
    jitter : float
        Relative to the signal variance.
    bias_variance : float, optional
        The bias kernel's variance b2 (none when not given).

    Returns
    -------
    value : float
    gradient : ndarray of shape (d + 1,), or (d + 2,) with ``bias_variance``
        With respect to log lengthscales, then log signal variance (then log b2).
    """
    X_active, k = np.asarray(X_active, dtype=np.float64), len(tau)
    K_se, K, R = _site_covariance(X_active, tau, lengthscale, signal_variance, jitter,
                                  bias_variance)
    bias = [] if bias_variance is None else [np.full((k, k), float(bias_variance))]
    m = nu / tau
    a = cho_solve((R, True), m, check_finite=False)
    value = (-0.5 * m @ a - np.log(np.diag(R)).sum() - 0.5 * k * np.log(2 * np.pi))
    # dL/dtheta = 1/2 (a^T dK a - tr(C^{-1} dK)), one solve per parameter
    scaled = (X_active / lengthscale).T
    derivatives = [K_se * (scaled[j][:, None] - scaled[j][None, :]) ** 2
                   for j in range(len(lengthscale))] + [K] + bias
    gradient = np.array([0.5 * (a @ dK @ a - np.trace(cho_solve((R, True), dK,
                                                                check_finite=False)))
                         for dK in derivatives])
    return float(value), gradient


def _site_covariance(X_active, tau, lengthscale, signal_variance, jitter, bias_variance):
    """K_se (the SE part), K = K_se + jitter s2 I, and the lower Cholesky factor of
    C = K (+ b2 11^T) + diag(1 / tau), the sites' marginal covariance."""
    X_active = np.asarray(X_active, dtype=np.float64)
    K_se = se_kernel(X_active, X_active, lengthscale, signal_variance)
    K = K_se + jitter * signal_variance * np.eye(len(tau))
    C = K + np.diag(1.0 / tau)
    if bias_variance is not None:
        C += bias_variance
    return K_se, K, cholesky(C, lower=True, check_finite=False)


def ivm_offset_moments(phi, tau, nu, bias_variance, posterior):
    """The bias kernel's offset c given the sites, jointly with the whitened v.

    The sites N(f | m~, diag(1 / tau)) on f = phi^T v + c, with v ~ N(0, I) and
    c ~ N(0, b2), give (v, c) the precision [[I + Phi^T T Phi, t], [t^T, D]] with
    t = Phi^T tau and D = 1 / b2 + sum(tau).  With Sigma_v and mu_v the posterior of v
    with c integrated out (``posterior``, from :func:`ivm_site_statistics`), the
    blocks of its inverse give

        E[c] = (sum(nu) - t^T mu_v) / D,   Var[c] = 1 / D + t^T Sigma_v t / D^2,
        Cov(v, c) = -Sigma_v t / D,

    so that a new latent f* = phi*^T v + e* + c has variance
    Var[g*] + Var[c] + 2 phi*^T Cov(v, c): smaller than Var[g*] + Var[c], c and g
    being negatively correlated given the data.

    Returns
    -------
    mean, variance : float
    covariance : ndarray of shape (M,)
    """
    t = phi.T @ tau
    D = 1.0 / bias_variance + tau.sum()
    spread = cho_solve((posterior.chol, True), t, check_finite=False)
    return (float((nu.sum() - t @ posterior.mean) / D),
            float(1.0 / D + t @ spread / D ** 2), -spread / D)


def ivm_site_statistics(phi, tau, nu, bias_variance=0.0):
    """The site sums (A, b) of :meth:`saspa_dask.ep.posterior.Posterior.from_statistics`
    for the whitened rows ``phi`` of the active set, with the bias kernel's offset c
    integrated out: the sites N(f | m~, diag(1 / tau)) on f = g + c, c ~ N(0, b2),
    are the Gaussian N(g | m~, S) on g with S = diag(1 / tau) + b2 11^T, whose inverse
    is T - T 1 1^T T / (1 / b2 + 1^T T 1) (Woodbury, T = diag(tau)); so
    A = phi^T S^-1 phi and b = phi^T S^-1 m~.  Without a bias (b2 = 0), the plain
    sums phi^T T phi and phi^T nu."""
    A = phi.T @ (tau[:, None] * phi)
    b = phi.T @ nu
    if bias_variance > 0:
        t1 = phi.T @ tau
        denominator = 1.0 / bias_variance + tau.sum()
        A = A - np.outer(t1, t1) / denominator
        b = b - t1 * (nu.sum() / denominator)
    return A, b


def ivm_bias(likelihood, y, mean, var):
    """The bias b maximising sum_n log p(y_n | mean_n + b, var_n): the training rows'
    predictive log likelihood under the current marginals (a concave 1-D search for
    the log-concave likelihoods)."""
    spread = _BIAS_RANGE * np.sqrt(1.0 + np.max(var))

    def negative(b):
        return -np.sum(likelihood.log_predictive(y, mean + b, var))

    result = minimize_scalar(negative, bounds=(-spread, spread), method="bounded",
                             options={"xatol": 1e-8})
    return float(result.x)


@single_scipy_thread
def ivm_bases(X, y, n_bases, likelihood, lengthscale, signal_variance):
    """The rows IVM selects, as delta bases (see :func:`ivm_select`)."""
    selection = ivm_select(X, y, n_bases, likelihood, lengthscale, signal_variance)
    return Basis(np.asarray(X, dtype=np.float64)[selection.indices])
