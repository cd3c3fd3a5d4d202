"""Maximising the EP evidence over the hyperparameters: L-BFGS-B in log space.

L-BFGS-B in log space over the ARD lengthscales, the signal variance, the
likelihood's parameters and optionally a multiplier of the blur covariances.  Every
objective evaluation rebuilds the whitened blocks, runs EP warm-started from the sites
of the best point so far, and returns -log Z_EP and its gradient.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.optimize import minimize

__all__ = ["optimize"]


def optimize(evaluate, start, *, max_iter=20, gtol=1e-5, callback=None):
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
        The starting point; it says which values are learnt and their bounds.
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
        ``n_evaluations``, ``n_iterations``, ``message``, ``n_failed_evaluations``,
        ``converged``; ``hit_iteration_cap`` (stopped by ``max_iter`` or its evaluation
        budget), ``at_bounds`` (names of the learnt values that ended on a bound of
        :meth:`Hyperparameters.bounds`), ``log_evidence_start`` and
        ``log_evidence_end``.
    """
    objective = _Objective(evaluate, start)
    x0 = start.to_log()
    f0 = objective(x0)[0]
    trace = [{"iteration": 0, "log_evidence": float(-f0), "hyperparameters": start.as_dict(),
              "n_evaluations": 1, "seconds": objective.seconds()}]
    if objective.best_hyper is None:
        raise FloatingPointError("EP failed at the starting hyperparameters")

    def record(x):
        rec = {"iteration": len(trace),
               "log_evidence": float(-objective(np.asarray(x, dtype=np.float64))[0]),
               "hyperparameters": start.from_log(x).as_dict(),
               "n_evaluations": objective.evaluations, "seconds": objective.seconds()}
        trace.append(rec)
        if callback is not None:
            callback(rec)

    result = minimize(objective, x0, jac=True, method="L-BFGS-B", bounds=start.bounds(),
                      callback=record,
                      options={"maxiter": int(max_iter), "maxfun": 3 * int(max_iter) + 5,
                               "gtol": gtol, "ftol": 1e-9})
    info = {"n_evaluations": objective.evaluations, "n_iterations": int(result.nit),
            "n_failed_evaluations": objective.failed, "message": str(result.message),
            "converged": bool(result.success),
            # scipy's status 1: the iteration or function-evaluation limit was reached
            "hit_iteration_cap": bool(result.status == 1),
            "at_bounds": _at_bounds(objective.best_hyper, start.bounds()),
            "log_evidence_start": float(-f0), "log_evidence_end": float(objective.best_value)}
    return objective.best_hyper, objective.best_state, trace, info


def _at_bounds(hyper, bounds, tol=1e-8):
    """Names of the learnt values of ``hyper`` that lie on a bound (in log space)."""
    x = hyper.to_log()
    return [name for name, v, (lo, hi) in zip(hyper.names(), x, bounds)
            if (lo is not None and v <= lo + tol) or (hi is not None and v >= hi - tol)]


class _Objective:
    """-log Z_EP and its gradient at log-space points, cached per point; remembers the
    best evaluation.  A failed evaluation (EP broke down, or a non-finite evidence) is
    a finite but bad value, which keeps L-BFGS-B's line search backtracking."""

    def __init__(self, evaluate, start):
        self.evaluate, self.start = evaluate, start
        self.cache = {}
        self.best_value, self.best_hyper, self.best_state = -np.inf, None, None
        self.evaluations = self.failed = 0
        self.t0 = time.perf_counter()

    def seconds(self):
        return time.perf_counter() - self.t0

    def __call__(self, x):
        key = x.tobytes()
        if key not in self.cache:
            self.cache[key] = self._evaluate(x)
        return self.cache[key]

    def _evaluate(self, x):
        hyper = self.start.from_log(x)
        self.evaluations += 1
        try:
            value, grad, state = self.evaluate(hyper)
        except (FloatingPointError, np.linalg.LinAlgError):
            value = np.nan
        if not np.isfinite(value):
            self.failed += 1
            bad = abs(self.best_value) * 10.0 + 1e10 if np.isfinite(self.best_value) else 1e10
            return bad, np.zeros_like(x)
        if value > self.best_value:
            self.best_value, self.best_hyper, self.best_state = value, hyper, state
        # the vector's chain rule (log blur variances, Cholesky factors) needs the
        # point's own bases, not the start's
        return -value, -hyper.gradient_vector(grad)
