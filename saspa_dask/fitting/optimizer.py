"""Maximising the EP (power-EP) energy over the hyperparameters: L-BFGS-B in log space.

L-BFGS-B in log space over the ARD lengthscales, the signal variance, the
likelihood's parameters, optionally a multiplier of the blur covariances and the
learnt bases.  Every objective evaluation rebuilds the whitened blocks, runs EP
warm-started from the sites of the best point so far, and returns the energy and its
gradient.

When it stops (:class:`StopRule`), in this order of checks after every accepted
iteration:

- *energy*: the energy rose by less than ``tol`` per row per iteration, on average
  over the last :data:`WINDOW` iterations;
- *gradient*: the projected gradient's largest entry is below ``tol`` per row, and the
  last iteration moved the energy by less than ``tol`` per row too (a gradient that is
  small right after a large step is not convergence);
- *iteration cap*: ``max_iter`` iterations (a safety cap, reported as not converged);
- *time budget*: the wall-clock ``deadline`` would pass during the next evaluation
  (checked before every evaluation at the shortest one's duration so far: the first,
  from sites at zero, can take twice as long as the warm-started ones after it; a
  budget then ends before its deadline unless an evaluation takes longer than the
  shortest; reported as not converged).

The scale is the number of rows (times the EP problems): the energy is a sum over rows,
so its change per row is what ``tol`` bounds.  Unlike a change relative to the energy
itself, this does not depend on the targets' units (rescaling y by c shifts the energy
by N log c and leaves its changes and its gradient in log space unchanged), so a fit on
prices in dollars stops where the same fit in thousands of dollars does.
L-BFGS-B's own tests (``ftol``, ``pgtol``) are set far below these so that they only
end runs whose line search can no longer make progress (reported with scipy's
message).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

__all__ = ["optimize", "StopRule", "WINDOW", "DEFAULT_TOL"]

# the energy test averages the gain over this many iterations: L-BFGS-B's steps vary,
# and one short step is not convergence
WINDOW = 5
# relative change per iteration (see benchmarks/RESULTS.md, "When learning stops")
DEFAULT_TOL = 1e-4
# restarts of L-BFGS-B from the best point after its line search ran into failures
MAX_RESTARTS = 5
# L-BFGS-B's memory: the number of past steps its curvature model keeps
MEMORY = 10


@dataclass(frozen=True)
class StopRule:
    """When the maximisation stops (see the module docstring).

    Parameters
    ----------
    tol : float
        Energy change per row per iteration, and projected-gradient size per row.
    max_iter : int
        Safety cap on iterations.
    deadline : float, callable or None
        A ``time.perf_counter()`` value after which no evaluation starts, or a
        function returning it (a budget whose learning share is re-estimated as
        learning goes, :class:`saspa_dask.fitting.budget.FitBudget`).
    scale_rows : int
        Rows the energy sums over (its scale's floor).
    checkpoint : (int, float), optional
        (iteration, energy per row): learning stops there ("overtaken") when its
        energy per row is below that value (another start's, in a race of starts:
        :mod:`saspa_dask.fitting.learning_start`).
    """

    tol: float = DEFAULT_TOL
    max_iter: int = 500
    deadline: float | None = None
    scale_rows: int = 1
    checkpoint: tuple | None = None

    def time_is_up(self, ahead=0.0):
        """Whether the deadline (if any) has passed, or will have in ``ahead``
        seconds (the next step's expected duration)."""
        deadline = self.deadline() if callable(self.deadline) else self.deadline
        return deadline is not None and time.perf_counter() + ahead > deadline

    def scale(self, energy=None):
        """Rows the energy sums over (``energy`` is not used: see the module
        docstring)."""
        return max(float(self.scale_rows), 1.0)

    def window_gain(self, trace):
        """The energy's mean gain per iteration and row over the last :data:`WINDOW`
        iterations (what the energy test compares with ``tol``), or None before
        there are that many."""
        if len(trace) <= WINDOW:
            return None
        gain = (trace[-1]["log_evidence"] - trace[-1 - WINDOW]["log_evidence"]) / WINDOW
        return float(gain / self.scale())

    def overtaken(self, trace):
        """"overtaken" at the checkpoint's iteration if the energy per row is below
        its value, else None."""
        if self.checkpoint is None or len(trace) - 1 != self.checkpoint[0]:
            return None
        behind = trace[-1]["log_evidence"] / self.scale() < self.checkpoint[1]
        return "overtaken" if behind else None

    def converged(self, trace):
        """"energy", "gradient" or None for the trace so far."""
        if self.tol <= 0:
            return None
        last = trace[-1]
        gain = self.window_gain(trace)
        if gain is not None and gain < self.tol:
            return "energy"
        # both recorded per row; a first small gradient right after a big step is not
        # convergence (L-BFGS-B's first step can land near a stationary point of a
        # line, not of the energy)
        moved = last.get("relative_change")
        if (last["projected_gradient"] < self.tol and moved is not None
                and abs(moved) < self.tol):
            return "gradient"
        return None


class _Stop(Exception):
    """Ends the L-BFGS-B run from inside its callback or objective."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


_REASONS = {
    "energy": "converged: the energy changed by less than tol per iteration",
    "gradient": "converged: the projected gradient is below tol",
    "cap": "stopped at the iteration cap",
    "time": "stopped by the time budget",
    "overtaken": "stopped: another learning start's energy was higher at this iteration",
}


def optimize(evaluate, start, rule=None, *, callback=None, **rule_fields):
    """Maximise the energy with L-BFGS-B in log space.

    Parameters
    ----------
    evaluate : callable
        ``evaluate(hyper) -> (energy, grad dict, state)``: runs EP at ``hyper``
        warm-started as the caller sees fit and returns the gradient of
        :func:`assemble_gradient`; ``state`` is whatever the caller wants back for
        the best point (e.g. the EP result).  It may raise ``FloatingPointError`` or
        ``LinAlgError`` where EP fails.
    start : Hyperparameters
        The starting point; it says which values are learnt and their bounds.
    rule : StopRule, optional
        When to stop; or give its fields as keywords (``tol``, ``max_iter``,
        ``deadline``, ``scale_rows``).
    callback : callable, optional
        Called with each accepted iteration's record.

    Returns
    -------
    best : Hyperparameters
    state : the ``state`` of the best evaluation
    trace : list of dict
        Per accepted iteration: ``iteration``, ``log_evidence`` (the energy),
        ``relative_change`` (its gain over the iteration per row),
        ``window_gain`` (its mean gain per row over the last :data:`WINDOW`
        iterations, which stops learning below ``tol``; None before),
        ``projected_gradient`` (the largest entry, per row likewise), ``tol``,
        ``hyperparameters``, ``n_evaluations`` so far, ``seconds``.
    info : dict
        ``n_evaluations``, ``n_iterations``, ``n_failed_evaluations``,
        ``n_line_search_restarts``, ``converged``,
        ``stop_reason`` ("energy", "gradient", "cap", "time", "overtaken" or "line
        search"),
        ``message``, ``tol``, ``hit_iteration_cap``, ``hit_time_budget``,
        ``at_bounds`` (names of the learnt values that ended on a bound of
        :meth:`Hyperparameters.bounds`), ``log_evidence_start`` and
        ``log_evidence_end``.
    """
    rule = rule or StopRule(**rule_fields)
    bounds = start.bounds()
    lower = np.array([-np.inf if lo is None else lo for lo, _ in bounds])
    upper = np.array([np.inf if hi is None else hi for _, hi in bounds])
    objective = _Objective(evaluate, start, rule.time_is_up)
    x0 = start.to_log()
    f0, g0 = objective(x0)  # the start is always evaluated, whatever the budget
    if objective.best_hyper is None:
        raise FloatingPointError("EP failed at the starting hyperparameters")
    trace = [_record(0, -f0, None, _projected(x0, g0, lower, upper), start, objective, rule)]
    if callback is not None:
        callback(trace[0])

    def accept(x):
        x = np.asarray(x, dtype=np.float64)
        f, g = objective(x)
        trace.append(_record(len(trace), -f, trace[-1]["log_evidence"],
                             _projected(x, g, lower, upper), start.from_log(x), objective,
                             rule))
        trace[-1]["window_gain"] = rule.window_gain(trace)  # how far the stop rule is
        if callback is not None:
            callback(trace[-1])
        reason = rule.converged(trace) or rule.overtaken(trace)
        if reason is None and len(trace) - 1 >= rule.max_iter:
            reason = "cap"
        if reason is not None:
            raise _Stop(reason)

    reason, message, restarts = _run(objective, x0, bounds, accept, rule, f0)
    info = {"n_evaluations": objective.evaluations, "n_iterations": len(trace) - 1,
            "n_failed_evaluations": objective.failed, "n_line_search_restarts": restarts,
            "converged": reason in ("energy", "gradient"),
            "stop_reason": reason, "message": _REASONS.get(reason, message),
            "tol": float(rule.tol),
            "hit_iteration_cap": reason == "cap", "hit_time_budget": reason == "time",
            "at_bounds": objective.best_hyper.on_bounds(bounds),
            "log_evidence_start": float(-f0), "log_evidence_end": float(objective.best_value)}
    return objective.best_hyper, objective.best_state, trace, info


def _run(objective, x0, bounds, accept, rule, f0):
    """L-BFGS-B from ``x0`` until the rule (raised from ``accept``) or scipy stops it,
    restarted from the best point after a line search that ran into failed points.
    Returns (stop reason, scipy's message, restarts)."""
    reason, message, restarts, x = "line search", "", 0, x0
    while True:
        failed, best = objective.failed, objective.best_value
        try:
            result = minimize(objective, x, jac=True, method="L-BFGS-B", bounds=bounds,
                              callback=accept,
                              # scipy's own tests only catch a line search that is stuck
                              options={"maxiter": 10 * int(rule.max_iter) + 10, "maxcor": MEMORY,
                                       "maxfun": 20 * int(rule.max_iter) + 20,
                                       "ftol": 1e-15, "gtol": 1e-12 * rule.scale(f0)})
        except _Stop as stop:
            reason = stop.reason
            break
        # scipy's own (far smaller) projected-gradient test is convergence; anything
        # else is a line search that could make no progress
        reason = "gradient" if result.status == 0 else "line search"
        message = str(result.message)
        # a line search that ran into points where EP fails: start again from the best
        # point with the curvature memory cleared (a steepest step along the edge of
        # the failing region), as long as that still gains
        gained = objective.best_value - best > rule.tol * rule.scale(best)
        if (reason != "line search" or objective.failed == failed or not gained
                or restarts >= MAX_RESTARTS):
            break
        restarts, x = restarts + 1, objective.best_x
    return reason, message, restarts


def _record(iteration, energy, previous, gradient, hyper, objective, rule):
    scale = rule.scale(energy)
    return {"iteration": iteration, "log_evidence": float(energy),
            "relative_change": None if previous is None else float((energy - previous) / scale),
            "projected_gradient": float(gradient / scale),
            "hyperparameters": hyper.as_dict(), "n_evaluations": objective.evaluations,
            "seconds": objective.seconds(), "tol": float(rule.tol), "window_gain": None}


def _projected(x, g, lower, upper):
    """Largest entry of L-BFGS-B's projected gradient (of the minimised -energy)."""
    return float(np.max(np.abs(x - np.clip(x - g, lower, upper)), initial=0.0))


class _Objective:
    """-energy and its gradient at log-space points, cached per point; remembers the
    best evaluation.

    Where EP fails (it broke down, or the energy is not finite) the point gets a
    *backtracking* value: the best point's linear model plus a steep quadratic wall,
    ``f_b + g_b.dx + w |dx|^2 / |dx|_0^2`` with a gradient to match.  L-BFGS-B's line
    search then sees the objective rise steeply along its step with a consistent
    slope and interpolates a shorter step towards the good point, rather than a huge
    value with a zero gradient (which its cubic interpolation cannot use).
    """

    def __init__(self, evaluate, start, time_is_up=None):
        self.evaluate, self.start, self.time_is_up = evaluate, start, time_is_up
        self.cache = {}
        self.best_value, self.best_hyper, self.best_state = -np.inf, None, None
        self.best_x = self.best_grad = None
        self.evaluations = self.failed = 0
        self.t0 = time.perf_counter()
        self.shortest_seconds = np.inf  # of the evaluations so far: the next one's expected

    def seconds(self):
        return time.perf_counter() - self.t0

    def __call__(self, x):
        key = x.tobytes()
        if key not in self.cache:
            if (self.evaluations and self.time_is_up is not None
                    and self.time_is_up(self.shortest_seconds)):
                raise _Stop("time")
            began = time.perf_counter()
            self.cache[key] = self._evaluate(np.array(x, dtype=np.float64))
            self.shortest_seconds = min(self.shortest_seconds, time.perf_counter() - began)
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
            return self._wall(x)
        gradient = -hyper.gradient_vector(grad)
        if value > self.best_value:
            self.best_value, self.best_hyper, self.best_state = value, hyper, state
            self.best_x, self.best_grad = x, gradient
        # the vector's chain rule (log blur variances, Cholesky factors) needs the
        # point's own bases, not the start's
        return -value, gradient

    def _wall(self, x):
        if self.best_x is None:  # the start itself failed
            return 1e300, np.zeros_like(x)
        dx = x - self.best_x
        height = 10.0 * (abs(self.best_value) + 1.0)
        width2 = max(float(dx @ dx), 1e-300)
        f = -self.best_value + float(self.best_grad @ dx) + height
        # the wall's slope along dx is 2 height / |dx|: steep, and pointing back
        return f, self.best_grad + 2.0 * height * dx / width2
