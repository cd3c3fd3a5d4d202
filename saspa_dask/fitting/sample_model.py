"""The model of a fit whose time budget leaves no room for EP on all rows: EP at the
learnt values on a sample (:class:`~saspa_dask.fitting.budget.FitBudget`'s
``sample_share`` of the rows, or learning's own sample), as a model of every row; and
the posterior EP on more rows than learning's starts from.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

from ..ep.result import EPConvergenceWarning
from . import policy
from .stages import every_row, gather_rows, learning_stages, sites_on_all
from .trainer import FitOutcome

__all__ = ["budget_leaves_the_sample_model", "rows_of", "sample_model", "sample_shares",
           "scaled_starts"]


def sample_model(run, state):
    """The model when the budget leaves no room for EP on all rows, and its rows: EP at
    the learnt values on the budget's sample (its ``sample_share`` of the rows, a
    prefix of learning's permutation, from the learning sample's posterior scaled to
    it) when that has more rows than learning's, else learning's own EP.  Said and
    warned."""
    learnt, rows, n = state.learnt, state.learnt_rows, run.X.shape[0]
    size, fitted = int(run.budget.sample_share * n), learnt
    if size > rows.size:
        run.say(f"EP on {n} rows: the time budget leaves no room; EP at the learnt values "
                f"on a sample of {size} rows")
        # the first ``size`` rows of learning's seeded permutation (one stage of them)
        rows = learning_stages([size], n, run.plan.random_state, run.lazy)[0][0]
        X_sub, y_sub = rows_of(run, state, rows)
        fitted = state.fit(state.trainer_for(X_sub, y_sub, None, False), state.hyper, None,
                           False, restarts=False, rows=size,
                           starts=scaled_starts(learnt, state.learnt_rows, size, None,
                                                 False),
                           probe_rows=state.probe_rows, evidence=False)
        what = f"a sample's {size} rows at the learnt values"
    else:
        run.say(f"EP on {n} rows: the time budget leaves no room; the model is EP on the "
                f"{rows.size}-row learning sample")
        what = f"the learning sample's {rows.size} rows"
    warnings.warn(f"the max_fit_time budget left no room for EP on all {n} rows: the "
                  f"model is EP on {what} (its sites on the other rows are zero); raise "
                  "max_fit_time for EP on all rows", EPConvergenceWarning, stacklevel=7)
    return _as_model_of_all(learnt, fitted, rows, n), rows


def sample_shares(stages, n_samples, n_bases):
    """The shares of ``n_samples`` rows a time budget's sample model may run EP on in
    memory on the driver (:class:`~saspa_dask.fitting.budget.FitBudget`): from the
    first learning stage's (``stages``: row-index arrays; fewer rows add nothing to
    learning's own EP) to the largest stage's or, if more, the rows whose ``n_bases``
    features take the policy's ``sample_model_bytes``; (0, 0) without stages."""
    if not stages:
        return 0.0, 0.0
    most = max(stages[-1].size, policy.POLICY.sample_model_bytes // (8 * n_bases))
    return min(stages[0].size / n_samples, 1.0), min(most / n_samples, 1.0)


def rows_of(run, state, rows):
    """The inputs and targets of ``rows``, in memory (one pass over the chunks for
    both when lazy, timed for the budget)."""
    began = time.perf_counter()
    gathered = gather_rows(run.X, state.targets, rows)
    if run.lazy and run.budget is not None:
        run.budget.read_seconds = time.perf_counter() - began
    return gathered


def _as_model_of_all(learnt, fitted, rows, n_samples):
    """EP on ``rows`` (``fitted``, at ``learnt``'s values) as a model of all
    ``n_samples`` rows: its sites on ``rows`` and zero elsewhere (no information; the
    posterior is the same), no sweep on all rows, not converged (stopped by the time
    budget), no evidence (it needs every row), and learning's report."""
    results = []
    for result, (tau, nu) in zip(fitted.results, every_row(
            sites_on_all(fitted, rows, n_samples, None))):
        results.append(replace(result, tau=tau, nu=nu, n_sweeps=0, converged=False,
                               stopped_by_time=True, log_evidence=float("nan"),
                               history=[], coarse_start=[]))
    return FitOutcome(fitted.hyper, fitted.basis, fitted.L, fitted.jitter, results,
                      float("nan"), learnt.trace, learnt.info)


def scaled_starts(learnt, rows, n_samples, sites, learn_here):
    """Where EP on all rows after learning starts: the last stage's posterior at the
    learnt values, its sites on ``rows`` standing for all ``n_samples`` rows (what
    :func:`saspa_dask.ep.driver.coarse_start` builds from every 10th chunk, here from
    a random sample EP has already converged on, at no cost).  None when EP on all
    rows is warm-started by sites (stochastic learning's, every row's) or learns
    itself."""
    if learnt is None or sites is not None or learn_here:
        return None
    factor = 1.0 if rows is None else n_samples / rows.size
    return [result.posterior.scaled(factor) for result in learnt.results]


def budget_leaves_the_sample_model(run, state):
    """Whether the model is EP on a sample: the budget (if any) left no room for EP on
    all rows (by the policy's ``sample_model_ratio`` when learning's first sweeps were
    timed, and the time left now is under the reserve), learning ran on a sample, and
    no warm-start sites give the other rows information EP on a sample would not use."""
    rows, n = state.learnt_rows, run.X.shape[0]
    return not (run.budget is None or not run.budget.sample_model or rows is None
                or state.given_sites is not None or state.learns_on_all or rows.size == n
                or run.budget.holds_reserve())
