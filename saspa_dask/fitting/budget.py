"""A fit's wall-clock budget (``max_fit_time``): the best model by then.

Learning ends early enough for EP on all rows to make a model by the end of the
budget, and EP on all rows stops between sweeps when another sweep and the evidence
pass that closes a stopped run would end after it.  After learning on a row subsample,
EP on all rows starts from the subsample's posterior scaled to all rows
(:func:`saspa_dask.fitting.sample_model.scaled_starts`), whose first sweep's model is
nearly the converged one's (``benchmarks/RESULTS.md``, "An anytime fit"); so the
budget keeps room for building the blocks, a sweep on all rows and the closing evidence
pass, at the cost per row that learning's own block builds and EP sweeps measure.
A budget too short for that ends with EP at the learnt values on a row sample as large
as the time left holds (:mod:`saspa_dask.fitting.sample_model`).
The numbers of these rules are :mod:`saspa_dask.fitting.policy`'s.  A run that EP
stops early is reported as not converged, never hidden.
"""

from __future__ import annotations

import time

import numpy as np

from ..engines.kmeans import default_lloyd_rows, start_sample_rows
from . import costs, policy

__all__ = ["FitBudget"]

class FitBudget:
    """The wall-clock budget of one fit.

    Parameters
    ----------
    seconds : float
        ``max_fit_time``.
    began : float
        ``time.perf_counter()`` at the fit's start.
    n_rows : int
        Rows EP runs on at the end.
    problems : int, default=1
        EP problems on those rows (one-vs-rest classes): each sweeps them, one build
        of their blocks serves all.
    """

    def __init__(self, seconds, began, n_rows, problems=1):
        self.seconds = float(seconds)
        self.end = began + self.seconds
        self.build_rows = int(n_rows)
        self.n_rows = int(n_rows) * int(problems)
        self._per_row_sweep, self._per_row_build = [], []
        # the shares of all rows EP at the learnt values may run on when the model is
        # a sample's: more than the first, at most the second (learning sets them:
        # :func:`~saspa_dask.fitting.sample_model.sample_shares`)
        self.sample_shares = (0.0, 0.0)
        # decided once learning's first sweeps are timed: whether the model is EP on
        # a sample (no EP on all rows; None until then), and the share of all rows
        # that sample has (0: the learning sample)
        self.sample_model = None
        self.sample_share = 0.0
        # the last pass that gathered a sample's rows from lazy inputs (a larger
        # sample's costs about as much: it reads every chunk too)
        self.read_seconds = 0.0

    def observe(self, rows, seconds):
        """Record one EP sweep of ``seconds`` over ``rows`` rows."""
        if rows > 0 and seconds > 0:
            self._per_row_sweep.append(seconds / rows)

    def observe_build(self, rows, seconds):
        """Record one build of ``rows`` rows' blocks that took ``seconds``."""
        if rows > 0 and seconds > 0:
            self._per_row_build.append(seconds / rows)

    def reserve(self):
        """Seconds kept for EP on all rows: the block build, ``final_sweeps`` sweeps
        and the closing evidence pass, at the median cost per row of the recent
        builds and sweeps (the build as ``build_sweeps`` sweeps before any was
        timed; 0 before any sweep)."""
        if not self._per_row_sweep:
            return 0.0
        rules = policy.POLICY
        if self._per_row_build:
            build = float(np.median(self._per_row_build[-50:])) * self.build_rows
        else:
            build = rules.build_sweeps * self._sweep_seconds()
        return build + (rules.final_sweeps + 1) * self._sweep_seconds()

    def affords_learning_on_all(self):
        """Whether the time left holds ``evaluations_on_all`` evaluations of
        learning on all rows and the reserve (False before any sweep was timed)."""
        if not self._per_row_sweep:
            return False
        sweeps = policy.POLICY.evaluations_on_all * policy.POLICY.evaluation_sweeps
        return time.perf_counter() + sweeps * self._sweep_seconds() + self.reserve() < self.end

    def _sweep_seconds(self):
        """A sweep on all rows at the median cost per row of the recent sweeps."""
        return float(np.median(self._per_row_sweep[-50:])) * self.n_rows

    def lloyd_rows(self, n_bases, d):
        """The rows K-means' Lloyd passes may run over: what ``kmeans_share`` of the
        budget pays for at ``kmeans_row_cost``, rounded down to a power of two (so
        that the same budget gives the same bases despite the rate's noise), between
        the default k-means++ start's sample and the default without a budget
        (:func:`~saspa_dask.engines.kmeans.kmeans`)."""
        rules = policy.POLICY
        affordable = (rules.kmeans_share * self.seconds * costs.matmul_rate()
                      / (rules.kmeans_row_cost * n_bases * d))
        rows = 2 ** int(np.floor(np.log2(max(affordable, 1.0))))
        return int(min(default_lloyd_rows(n_bases), max(start_sample_rows(n_bases), rows)))

    def first_stage_rows(self, rows, seconds_per_evaluation, n_bases):
        """The rows learning starts on when its first stage has ``rows`` and an
        evaluation there is estimated at ``seconds_per_evaluation`` on one core:
        ``rows`` or, for a budget that short (``half_stage_evaluations``), half."""
        half, rules = int(rows) // 2, policy.POLICY
        if (self.seconds < rules.half_stage_evaluations * seconds_per_evaluation
                and half >= rules.half_stage_rows_per_basis * n_bases):
            return half
        return int(rows)

    def learning_deadline(self):
        """The ``time.perf_counter()`` value after which no learning step starts: the
        budget's end less the reserve, or, when the model is to be EP on a sample
        (``sample_model_ratio``, decided at the first call after a sweep was timed),
        less the reserve of EP on that sample (:meth:`_decide_sample_model`,
        :meth:`sample_reserve`)."""
        if self.sample_model is None and self._per_row_sweep:
            self._decide_sample_model(self.end - time.perf_counter())
        if self.sample_model:
            return self.end - self.sample_reserve()
        return self.end - self.reserve()

    def sample_reserve(self):
        """Seconds kept for EP on the sample: gathering its rows, and its share of the
        reserve (0 for learning's own sample)."""
        if not self.sample_share:
            return 0.0
        return self.read_seconds + self.sample_share * self.reserve()

    def _decide_sample_model(self, left):
        """EP on all rows only when ``left`` seconds hold its reserve
        ``sample_model_ratio`` times; else EP at the learnt values on the largest
        share of the rows whose reserve ``left`` holds as many times (learning and
        that EP then share the time left as learning and EP on all rows would),
        within ``sample_shares`` (below their first: the learning sample's EP)."""
        ratio, reserve = policy.POLICY.sample_model_ratio, self.reserve()
        self.sample_model = left < ratio * reserve
        low, high = self.sample_shares
        share = min(high, left / (ratio * reserve)) if self.sample_model else 0.0
        self.sample_share = share if share > low else 0.0

    def holds_reserve(self):
        """Whether the time left holds the reserve of EP on all rows once (learning
        that stopped before its deadline may leave that much)."""
        return bool(self._per_row_sweep) and time.perf_counter() + self.reserve() < self.end
