"""Starting a regression's learning where an exact GP on a few hundred rows would.

The data-driven start (lengthscales ``std * sqrt(d)``, the targets' variance as signal
and a tenth of it as noise) knows nothing of which inputs matter: learning's first
tens of iterations on all rows (or a 20,000-row sample) are spent finding the
lengthscales, and the model is poor until then.  The SPGP and IDGP papers start from
the hyperparameters of a full GP on a subset instead (Snelson & Ghahramani 2006;
Lázaro-Gredilla & Figueiras-Vidal 2009).  Here: the exact SE-ARD GP's log marginal
likelihood on ``exact_start_rows`` seeded rows (:mod:`saspa_dask.fitting.policy`),
maximised by L-BFGS-B from the
data-driven start within the box learning itself uses, so the start never moves the
box.  With the Gaussian likelihood the marginal likelihood is closed-form; its cost is
a few Cholesky factorisations of a square matrix of that size per iteration.

When (the regressor's ``exact_start``): by default as the start of a fit with a time
budget whose learning runs on a row sample of larger data, where the first model is far
better; learning run to convergence from this start ended at a worse held-out NLPD on
most real sets measured (``benchmarks/RESULTS.md``, "An exact GP's start").  Without
a budget, as a check after learning on every row from the data-driven start
(:func:`exact_check_applies`): where the exact start's energy is higher than where
learning ended, learning stopped on a plateau and goes on from the exact start
(``benchmarks/RESULTS.md``, "Learning that stopped on a plateau").
"""

from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np
from scipy.linalg import cho_factor, cho_solve, lapack
from scipy.optimize import minimize
from sklearn.utils import check_random_state

from ..core.kernels import scaled_sq_distances
from . import policy

__all__ = ["exact_check_applies", "exact_gp_flops", "exact_gp_start",
           "exact_start_applies", "exact_start_possible", "log_marginal", "start_rows"]

def exact_start_applies(plan, likelihood, hyper, n_rows, on_sample):
    """Whether a fit on ``n_rows`` rows starts from an exact GP on a sample: asked
    (``plan.exact_start`` True, or "auto" with a time budget and learning
    ``on_sample``, a row sample of larger data) and possible
    (:func:`exact_start_possible`)."""
    asked = plan.exact_start is True or (plan.exact_start == "auto" and on_sample
                                         and plan.max_fit_time is not None)
    return asked and exact_start_possible(plan, likelihood, hyper, n_rows)


def exact_check_applies(plan, likelihood, hyper, n_rows):
    """Whether learning on all ``n_rows`` rows from the data-driven start is checked
    against an exact GP's start afterwards: ``plan.exact_start`` "auto" without a time
    budget, where the exact start is possible (:func:`exact_start_possible`)."""
    return (plan.exact_start == "auto" and plan.max_fit_time is None
            and exact_start_possible(plan, likelihood, hyper, n_rows))


def exact_gp_flops(n_rows, d):
    """The exact GP's floating-point work at most: the policy's ``exact_start_max_iter``
    evaluations on min(``n_rows``, ``exact_start_rows``) rows, each a Cholesky factor and
    its inverse (n^3) and the distances and lengthscale gradients (6 n^2 d)."""
    rules = policy.POLICY
    n = min(n_rows, rules.exact_start_rows)
    return float(rules.exact_start_max_iter * (n ** 3 + 6 * n * n * d))


def exact_start_possible(plan, likelihood, hyper, n_rows):
    """A Gaussian regression that learns its hyperparameters from the data-driven start
    (no lengthscale, signal or noise variance given: the start equals the box's centre,
    ``hyper.centre``), one SE kernel over every input (no feature groups or additive
    terms), and a sample of at least the policy's ``exact_rows_per_value`` rows per
    value."""
    if not plan.optimize_hyperparameters or plan.lengthscale is not None:
        return False
    rules = policy.POLICY
    if min(n_rows, rules.exact_start_rows) < rules.exact_rows_per_value * (
            hyper.lengthscale.size + 2):
        return False
    if not likelihood.gaussian_observations or "noise_variance" not in hyper.likelihood:
        return False
    if hyper.kernel != "se" or hyper.groups is not None or hyper.additive is not None:
        return False
    centre = hyper.centre
    if centre is None or "noise_variance" not in centre.likelihood:
        return False
    return (math.isclose(hyper.signal_variance, centre.signal_variance, rel_tol=1e-12)
            and math.isclose(hyper.likelihood["noise_variance"],
                             centre.likelihood["noise_variance"], rel_tol=1e-12))


def log_marginal(log_values, X, y):
    """The exact SE-ARD GP's log marginal likelihood of centred ``y`` and its gradient
    in ``log_values`` = [log lengthscales, log signal variance, log noise variance].

    The gradient's trace term needs the entries of C^{-1} (as scikit-learn's
    ``GaussianProcessRegressor`` computes them): from the Cholesky factor of
    C = K + noise I, which the noise keeps well conditioned; every solve uses the
    factor.
    """
    n, d = X.shape
    lengthscale = np.exp(log_values[:d])
    signal, noise = math.exp(log_values[d]), math.exp(log_values[d + 1])
    K = signal * np.exp(-0.5 * scaled_sq_distances(X, X, lengthscale))
    C = K + noise * np.eye(n)
    factor = cho_factor(C, lower=True)
    a = cho_solve(factor, y)
    value = -0.5 * y @ a - np.log(np.diag(factor[0])).sum() - 0.5 * n * math.log(2 * math.pi)
    # dL/dtheta = 1/2 tr(W dC/dtheta), W = a a^T - C^{-1}; C^{-1} from the factor
    # (LAPACK's potri: half the flops of solving for the identity)
    inverse, info = lapack.dpotri(factor[0], lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"potri failed ({info})")
    inverse = np.tril(inverse) + np.tril(inverse, -1).T
    W = np.outer(a, a) - inverse
    KW = K * W
    rows = KW.sum(axis=1)
    # sum_ij KW_ij (z_ik - z_jk)^2 = 2 sum_i rows_i z_ik^2 - 2 z_k^T KW z_k: the
    # lengthscales' terms without an (n, n, d) array
    Z = X / lengthscale
    spread = 2.0 * (rows @ Z**2) - 2.0 * np.einsum("ik,ik->k", Z, KW @ Z)
    grad = np.concatenate([0.5 * spread, [0.5 * KW.sum(), 0.5 * noise * np.trace(W)]])
    return value, grad


def start_rows(n_rows, random_state):
    """The sorted indices of the exact GP's seeded sample of ``n_rows`` rows."""
    rng = check_random_state(random_state)
    size = min(n_rows, policy.POLICY.exact_start_rows)
    return np.sort(rng.choice(n_rows, size=size, replace=False))


def exact_gp_start(hyper, bounds, X, y, max_iter=None):
    """``hyper`` with its lengthscales, signal and noise variance where an exact GP on
    the sample (``X``, ``y``: :func:`start_rows` of EP's rows and targets) puts them,
    within ``bounds`` (``hyper.bounds()``); and a record of the start (rows,
    iterations, seconds, the exact GP's log marginal likelihood per row before and
    after).  ``hyper`` itself is returned (with the record's ``method`` "data" and its
    ``reason``) when the exact GP explains the sample by less than
    the policy's ``exact_structure_per_row`` nats per row beyond independent noise, or fails at the
    start.  A trial point whose kernel matrix cannot be factorised is refused (L-BFGS-B's
    line search steps back).  ``max_iter``: L-BFGS-B's iterations at most (None: the
    policy's ``exact_start_max_iter``; the check after learning takes its
    ``exact_check_max_iter``).
    """
    t0 = time.perf_counter()
    d = X.shape[1]
    Xs = np.asarray(X, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    Xs, ys = Xs - Xs.mean(axis=0), ys - ys.mean()
    names = hyper.names()
    where = [names.index(f"lengthscale[{k}]") for k in range(d)]
    where += [names.index("signal_variance"), names.index("likelihood.noise_variance")]
    # a decade inside learning's box: learning then never starts on a bound (an
    # irrelevant input's lengthscale would start on the box's top and warn of it)
    inset = math.log(10.0)
    box = [(lo + inset, hi - inset) if hi - lo > 2 * inset else (lo, hi)
           for lo, hi in (bounds[k] for k in where)]
    lower, upper = np.array(box).T
    x0 = np.clip(hyper.to_log()[where], lower, upper)

    # per row: with every value boxed, L-BFGS-B's first trial point is x - g (the
    # Cauchy point at unit curvature); for the sum over the rows that is the box's
    # corner, and on Pumadyn-32nm the line search back from it ended on the all-noise
    # optimum (benchmarks/RESULTS.md, "The exact GP's start, per row")
    def objective(x):
        try:
            value, grad = log_marginal(x, Xs, ys)
        except np.linalg.LinAlgError:
            return np.inf, np.zeros_like(x)
        return -value / ys.size, -grad / ys.size

    start_value = -objective(x0)[0]  # per row
    if not np.isfinite(start_value):
        return hyper, {"method": "data", "reason": "the exact GP's kernel matrix failed"}
    result = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=box,
                      options={"maxiter": max_iter or policy.POLICY.exact_start_max_iter})
    found = -result.fun
    noise_only = -0.5 * (math.log(2 * math.pi * max(float(ys.var()), 1e-300)) + 1.0)
    if not found > noise_only + policy.POLICY.exact_structure_per_row:
        return hyper, {"method": "data", "rows": int(ys.size),
                       "reason": f"the exact GP found no structure ({found:.4g} nats per "
                                 f"row against independent noise's {noise_only:.4g})"}
    x = np.clip(result.x, lower, upper)
    values = np.exp(x)
    start = replace(hyper, lengthscale=values[:d], signal_variance=float(values[d]),
                    likelihood={**hyper.likelihood, "noise_variance": float(values[d + 1])})
    record = {"method": "exact-gp", "rows": int(ys.size), "iterations": int(result.nit),
              "seconds": time.perf_counter() - t0,
              "log_marginal_per_row": [float(start_value), float(found)],
              "noise_only_per_row": float(noise_only)}
    return start, record
