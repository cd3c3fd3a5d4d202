"""Hyperparameter learning by maximising the EP evidence (DESIGN.md section 2).

Gradient at converged sites
---------------------------
log Z_EP = F + sum_i log C_i with F = -1/2 log|P| + 1/2 h^T mu_v (the Gaussian sites'
normaliser) and C_i = Z_i / (Gaussian site against the cavity).  At an EP fixed point
the site parameters are stationary points of log Z_EP, so its total derivative with
respect to a hyperparameter theta is the partial one with (tau, nu) held fixed; and
there, because the tilted and the approximate marginal share their first two moments,
the terms through the cavities cancel.  What is left (with G_i the row below):

    d log Z_EP = sum_i G_i^T d phi_i  +  sum_i g_i d s2  +  sum_i d log Z_i / d theta_lik

    G_i = (nu_i - tau_i m_i) mu_v - tau_i Sigma_v phi_i - 2 g_i phi_i,
    g_i = d log Z_i / d v = (a_i^2 - c_i) / 2     (heat equation: Z is smoothed by N)

where the -2 g_i phi_i and g_i d s2 parts come from the residual lam_i = s2 - |phi_i|^2
that the likelihood sees.  With Phi = Kt L^{-T}:

    sum_i G_i^T d phi_i = <G L^{-1}, dKt> - <L^{-T} sym(G^T Phi) L^{-1}, dKh>

(sym: strictly-lower part mirrored plus half the diagonal, from d L = L tril_half(...)).
Every piece is a per-chunk sum: the weights E = (G L^{-1}) o Kt reduce to weighted
moments of the inputs (M d^2 floats a chunk), and G^T Phi is M x M, so a gradient pass
costs about three sweeps and the driver's share is O(M^2 d^2).

Optimisation
------------
L-BFGS-B in log space over the ARD lengthscales, the signal variance, the
likelihood's parameters and optionally a multiplier of the blur covariances.  Every
objective evaluation rebuilds the whitened blocks, runs EP warm-started from the sites
of the best point so far, and returns -log Z_EP and its gradient.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import solve_triangular
from scipy.optimize import minimize

from .ep import _SUB_ROWS, cavities, evidence_site_terms
from .kernels import basis_covariance_gradient, cross_covariance_gradient, cross_moments

__all__ = ["GradientSummary", "gradient_chunk", "assemble_gradient", "optimize"]


@dataclass
class GradientSummary:
    """Per-chunk sums for the evidence gradient; ``merge`` makes a tree reduction."""

    m0: np.ndarray
    m1: np.ndarray
    m2: np.ndarray
    A: np.ndarray
    g_sum: float
    likelihood: dict
    evidence_terms: float
    n_invalid: int

    def merge(self, other):
        return GradientSummary(
            self.m0 + other.m0, self.m1 + other.m1, self.m2 + other.m2, self.A + other.A,
            self.g_sum + other.g_sum,
            {k: self.likelihood[k] + other.likelihood[k] for k in self.likelihood},
            self.evidence_terms + other.evidence_terms, self.n_invalid + other.n_invalid)


def gradient_chunk(X, block, tau, nu, posterior, likelihood, L, means, lengthscale, full):
    """Gradient sums of one row chunk at fixed sites (module docstring).

    Parameters
    ----------
    X : ndarray of shape (n, d)
        The chunk's inputs (for the moments of dKt).
    block : saspa_dask.ep.Block
        Its whitened block (phi, lam, y) built with the same kernel and ``L``.
    tau, nu : ndarray of shape (n,)
    posterior : saspa_dask.ep.Posterior
    likelihood : likelihood object with ``log_z_gradient``
    L : ndarray of shape (M, M)
    means : ndarray of shape (M, d)
    lengthscale : ndarray of shape (d,)
    full : bool
        Blur covariances are full (not diagonal).

    Returns
    -------
    GradientSummary
    """
    M, d = means.shape
    R, mu = posterior.chol, posterior.mean
    summary = None
    for start in range(0, max(block.y.shape[0], 1), _SUB_ROWS):
        rows = slice(start, start + _SUB_ROWS)
        phi, lam, y, t, n = block.phi[rows], block.lam[rows], block.y[rows], tau[rows], nu[rows]
        W = solve_triangular(R, phi.T, lower=True, check_finite=False)
        m, s = phi @ mu, np.einsum("ji,ji->i", W, W)
        mc, sc, valid = cavities(m, s, t, n)
        log_z, a, c = likelihood.tilted(y, mc, sc + lam)
        # d log Z_i / d lam_i (heat equation); DTC's lam is fixed at 0, so it drops
        g = 0.5 * (a * a - c) if not block.projected_only else np.zeros_like(a)
        sigma_phi = solve_triangular(R, W, lower=True, trans="T", check_finite=False)
        G = np.outer(n - t * m, mu) - t[:, None] * sigma_phi.T - 2.0 * g[:, None] * phi
        Bt = solve_triangular(L, G.T, lower=True, trans="T", check_finite=False).T
        E = Bt * (phi @ L.T)  # (G L^{-1}) o Kt
        lik = {k: float(v.sum()) for k, v in likelihood.log_z_gradient(y, mc, sc + lam).items()}
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = float(evidence_site_terms(log_z, m, s, mc, sc).sum())
        part = GradientSummary(
            *cross_moments(X[rows], E, means, lengthscale, full), G.T @ phi, float(g.sum()),
            lik, terms, int((~valid).sum()))
        summary = part if summary is None else summary.merge(part)
    return summary


def _sym_lower(A):
    """The symmetric S with <A, tril_half(X)> = <S, X> for symmetric X."""
    low = np.tril(A, -1)
    return 0.5 * (low + low.T) + 0.5 * np.diag(np.diag(A))


def assemble_gradient(summary, basis, lengthscale, signal_variance, L, learn_blur_scale):
    """Gradient of log Z_EP in log space from the merged per-chunk sums.

    Returns
    -------
    dict
        ``lengthscale`` (d,), ``signal_variance``, ``blur_scale`` (if asked) and one
        entry per likelihood hyperparameter; each is d log Z_EP / d log(theta).
    """
    S = _sym_lower(summary.A)
    # Ah = L^{-T} S L^{-1}, the weights of dKh; Kh + jitter is proportional to s2
    # (the jitter is relative), so <Ah, dKh / dlog s2> = <Ah, L L^T> = tr(S).
    left = solve_triangular(L, S, lower=True, trans="T")
    Ah = solve_triangular(L, left.T, lower=True, trans="T").T
    Ah = 0.5 * (Ah + Ah.T)
    gl_t, gg_t = cross_covariance_gradient((summary.m0, summary.m1, summary.m2), basis.means,
                                           basis.covs, lengthscale)
    gl_h, gg_h = basis_covariance_gradient(Ah, basis.means, basis.covs, lengthscale,
                                           signal_variance)
    grad = {"lengthscale": gl_t - gl_h,
            "signal_variance": float(summary.m0.sum() + signal_variance * summary.g_sum
                                     - np.trace(S))}
    if learn_blur_scale:
        grad["blur_scale"] = gg_t - gg_h
    grad.update(summary.likelihood)
    return grad


# ----------------------------------------------------------------------------------
# The outer loop
# ----------------------------------------------------------------------------------


@dataclass
class Hyperparameters:
    """Kernel and likelihood hyperparameters (all positive; optimised in log space)."""

    lengthscale: np.ndarray
    signal_variance: float
    likelihood: dict = field(default_factory=dict)
    blur_scale: float = 1.0

    def names(self, learn_blur_scale):
        names = [f"lengthscale[{k}]" for k in range(self.lengthscale.size)]
        names.append("signal_variance")
        if learn_blur_scale:
            names.append("blur_scale")
        return names + [f"likelihood.{k}" for k in self.likelihood]

    def to_log(self, learn_blur_scale):
        values = [*self.lengthscale, self.signal_variance]
        if learn_blur_scale:
            values.append(self.blur_scale)
        return np.log(np.array(values + list(self.likelihood.values()), dtype=np.float64))

    def from_log(self, x, learn_blur_scale):
        v = np.exp(np.asarray(x, dtype=np.float64))
        d = self.lengthscale.size
        pos = d + 1
        blur = self.blur_scale
        if learn_blur_scale:
            blur, pos = float(v[pos]), pos + 1
        lik = {k: float(val) for k, val in zip(self.likelihood, v[pos:])}
        return Hyperparameters(v[:d].copy(), float(v[d]), lik, blur)

    def as_dict(self):
        return {"lengthscale": [float(x) for x in self.lengthscale],
                "signal_variance": float(self.signal_variance),
                "blur_scale": float(self.blur_scale), "likelihood": dict(self.likelihood)}


def gradient_vector(grad, learn_blur_scale, likelihood_names):
    values = [*grad["lengthscale"], grad["signal_variance"]]
    if learn_blur_scale:
        values.append(grad["blur_scale"])
    return np.array(values + [grad[k] for k in likelihood_names], dtype=np.float64)


def _bounds(start, learn_blur_scale, likelihood_bounds):
    """Log-space box: three decades either side of the start, tighter where the
    parameter has a natural range (label noise < 1/2)."""
    x0 = start.to_log(learn_blur_scale)
    span = 3.0 * math.log(10.0)
    bounds = [(x - span, x + span) for x in x0]
    names = list(start.likelihood)
    offset = x0.size - len(names)
    for k, name in enumerate(names):
        lo, hi = likelihood_bounds.get(name, (None, None))
        a, b = bounds[offset + k]
        bounds[offset + k] = (a if lo is None else max(a, math.log(lo)),
                              b if hi is None else min(b, math.log(hi)))
    return bounds


LIKELIHOOD_BOUNDS = {"label_noise": (1e-6, 0.45), "dof": (0.5, 1e3)}


def optimize(evaluate, start, *, learn_blur_scale=False, max_iter=20, gtol=1e-5,
             callback=None):
    """Maximise the EP evidence with L-BFGS-B in log space.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(hyper) -> (log_evidence, grad dict, state)``: runs EP at ``hyper``
        warm-started as the caller sees fit and returns the gradient of
        :func:`assemble_gradient`; ``state`` is whatever the caller wants back for
        the best point (e.g. the EP result).  It may raise ``FloatingPointError`` or
        ``LinAlgError`` where EP fails; the point is then treated as infinitely bad.
    start : Hyperparameters
    learn_blur_scale : bool
    max_iter : int
        Cap on L-BFGS-B iterations (each needs one or more evaluations).
    gtol : float
        Projected-gradient tolerance, relative to the number of rows' evidence scale.
    callback : callable, optional
        Called with each accepted iteration's record.

    Returns
    -------
    best : Hyperparameters
    state : the ``state`` of the best evaluation
    trace : list of dict
        Per accepted iteration: ``iteration``, ``log_evidence``, ``hyperparameters``,
        ``n_evaluations`` so far, ``seconds``.
    info : dict
        ``n_evaluations``, ``n_iterations``, ``message``, ``n_failed_evaluations``.
    """
    lik_names = list(start.likelihood)
    cache = {}
    best = {"value": -np.inf}
    counters = {"evaluations": 0, "failed": 0}
    t0 = time.perf_counter()

    def objective(x):
        key = x.tobytes()
        if key in cache:
            return cache[key]
        hyper = start.from_log(x, learn_blur_scale)
        counters["evaluations"] += 1
        try:
            value, grad, state = evaluate(hyper)
        except (FloatingPointError, np.linalg.LinAlgError):
            value = np.nan
        if not np.isfinite(value):
            counters["failed"] += 1
            # a finite but bad value keeps L-BFGS-B's line search backtracking
            out = (abs(best["value"]) * 10.0 + 1e10 if np.isfinite(best["value"]) else 1e10,
                   np.zeros_like(x))
        else:
            out = (-value, -gradient_vector(grad, learn_blur_scale, lik_names))
            if value > best["value"]:
                best.update(value=value, hyper=hyper, state=state)
        cache[key] = out
        return out

    trace = []

    def record(x):
        value = -objective(np.asarray(x, dtype=np.float64))[0]
        rec = {"iteration": len(trace), "log_evidence": float(value),
               "hyperparameters": start.from_log(x, learn_blur_scale).as_dict(),
               "n_evaluations": counters["evaluations"],
               "seconds": time.perf_counter() - t0}
        trace.append(rec)
        if callback is not None:
            callback(rec)

    x0 = start.to_log(learn_blur_scale)
    f0 = objective(x0)[0]
    trace.append({"iteration": 0, "log_evidence": float(-f0),
                  "hyperparameters": start.as_dict(), "n_evaluations": 1,
                  "seconds": time.perf_counter() - t0})
    if "hyper" not in best:
        raise FloatingPointError("EP failed at the starting hyperparameters")
    result = minimize(objective, x0, jac=True, method="L-BFGS-B",
                      bounds=_bounds(start, learn_blur_scale, LIKELIHOOD_BOUNDS),
                      callback=record,
                      options={"maxiter": int(max_iter), "maxfun": 3 * int(max_iter) + 5,
                               "gtol": gtol, "ftol": 1e-9})
    info = {"n_evaluations": counters["evaluations"], "n_iterations": int(result.nit),
            "n_failed_evaluations": counters["failed"], "message": str(result.message),
            "converged": bool(result.success)}
    return best["hyper"], best["state"], trace, info
