"""A fit's wall-clock budget (``max_fit_time``): the best model by then.

Learning ends early enough for EP on all rows to make a model by the end of the
budget, and EP on all rows stops between sweeps when another sweep and the evidence
pass that closes a stopped run would end after it.
After learning on a row subsample, EP on all rows starts from the subsample's
posterior scaled to all rows (:func:`saspa_dask.fitting.fit_run._scaled_starts`);
measured at 10^6 rows (``benchmarks/RESULTS.md``, "An anytime fit"), the held-out
error and NLP after its first sweep were within 2e-4 and 5e-4 of the converged
model's, where convergence to ``tol`` took eight sweeps; learning on the sample gains
more in a sweep's time.  So the budget keeps room for building the
blocks, :data:`FINAL_SWEEPS` sweeps on all rows and the closing evidence pass, each
about a sweep at the cost per row that learning's own EP sweeps measure.  A run that EP stops early is reported as not
converged, never hidden.
"""

from __future__ import annotations

import time

import numpy as np

from ..engines.kmeans import default_lloyd_rows, start_sample_rows
from . import costs

__all__ = ["BUILD_SWEEPS", "EVALUATIONS_ON_ALL", "EVALUATION_SWEEPS", "FINAL_SWEEPS",
           "FitBudget", "HALF_STAGE_EVALUATIONS", "HALF_STAGE_ROWS_PER_BASIS",
           "KMEANS_ROW_COST", "KMEANS_SHARE", "SAMPLE_MODEL_RATIO"]

# sweeps of EP on all rows the budget keeps room for (besides the block build and the
# closing evidence pass)
FINAL_SWEEPS = 1
# the block build of EP on all rows, in sweeps: at 10^6 rows (M = 256, d = 8, full blur,
# 2 workers) the first sweep with the build took 11.0-11.2 s and the next 3.5-5.0 s, a
# build of 1.2-2.2 sweeps; counted as one sweep, 39.6 s fits ended at 41.6-44.3 s, as
# two at 40.8 s (benchmarks/RESULTS.md, "The budget's reserve for EP on all rows")
BUILD_SWEEPS = 2
# learning on all rows after the in-memory stages starts only with room for this many
# evaluations, each about EVALUATION_SWEEPS sweeps on all rows (EP from sites known on
# the stages' rows only, then the gradient pass: one evaluation at 10^6 rows took
# 80.6 s in benchmarks/RESULTS.md "An anytime fit": 11-23 of the 3.5-7.3 s that
# bench_anytime's further sweeps on all rows took there; 16 is in between)
EVALUATIONS_ON_ALL = 3
EVALUATION_SWEEPS = 16
# EP on all rows runs only when the time left once learning's first sweeps are timed
# holds its reserve this many times (the rest is learning); below that the model is EP
# on the learning sample, learnt until the budget's end.  Learning's first iterations
# gain far more than EP on all rows at the starting values: at 10^6 rows the
# 20,000-row sample's model after 6 iterations had held-out error 0.1234 where EP on
# all rows at the start had 0.1576 (benchmarks/RESULTS.md, "Held-out metrics as a fit
# learns").
SAMPLE_MODEL_RATIO = 2
# K-means' Lloyd passes run over at most the rows that this share of the budget pays
# for (never fewer than its start's sample, never more than without a budget): at
# 10^6 rows, M = 256, its default 200,000 Lloyd rows took 2.7-3.2 s, a third of a 10 s
# budget, for centres that learning then moves (benchmarks/RESULTS.md, "A first model
# by 10 s")
KMEANS_SHARE = 0.05
# ... at this cost in one-core matmul flops per Lloyd row, basis and input (its passes,
# the cluster scatter and the sample's read together; measured there: 240)
KMEANS_ROW_COST = 240.0
# A budget shorter than this many evaluations of learning's first stage (at the cost
# estimate on one core, fitting.costs) learns first on half its rows, when that half
# keeps at least HALF_STAGE_ROWS_PER_BASIS rows a basis.  At 10^6 rows, M = 256, d = 8
# (an evaluation on the 20,000-row first stage estimated at 4.6 s; a warm-started one
# took 1.3 s on the driver's 2 threads), fits of 4.5 and 10 s learnt better models from
# 10,000 rows first (classification error 0.1276 / 0.1226 against 0.1690 / 0.1261), of 15 and 25 s
# from 20,000 (0.1204 / 0.1200 against 0.1222 / 0.1230): benchmarks/RESULTS.md, "A
# first model by 10 s"
HALF_STAGE_EVALUATIONS = 2.7
HALF_STAGE_ROWS_PER_BASIS = 20


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
    """

    def __init__(self, seconds, began, n_rows):
        self.seconds = float(seconds)
        self.end = began + self.seconds
        self.n_rows = int(n_rows)
        self._per_row_sweep = []
        # decided once learning's first sweeps are timed: whether the model is EP on
        # the learning sample (no EP on all rows); None until then
        self.sample_model = None

    def observe(self, rows, seconds):
        """Record one EP sweep of ``seconds`` over ``rows`` rows."""
        if rows > 0 and seconds > 0:
            self._per_row_sweep.append(seconds / rows)

    def reserve(self):
        """Seconds kept for EP on all rows: the block build (:data:`BUILD_SWEEPS`),
        :data:`FINAL_SWEEPS` sweeps and the closing evidence pass at the median cost
        per row of the recent sweeps (0 before any)."""
        if not self._per_row_sweep:
            return 0.0
        return (BUILD_SWEEPS + FINAL_SWEEPS + 1) * self._sweep_seconds()

    def affords_learning_on_all(self):
        """Whether the time left holds :data:`EVALUATIONS_ON_ALL` evaluations of
        learning on all rows and the reserve (False before any sweep was timed)."""
        if not self._per_row_sweep:
            return False
        sweeps = EVALUATIONS_ON_ALL * EVALUATION_SWEEPS
        return time.perf_counter() + sweeps * self._sweep_seconds() + self.reserve() < self.end

    def _sweep_seconds(self):
        """A sweep on all rows at the median cost per row of the recent sweeps."""
        return float(np.median(self._per_row_sweep[-50:])) * self.n_rows

    def lloyd_rows(self, n_bases, d):
        """The rows K-means' Lloyd passes may run over: what :data:`KMEANS_SHARE` of the
        budget pays for at :data:`KMEANS_ROW_COST`, rounded down to a power of two (so
        that the same budget gives the same bases despite the rate's noise), between
        the default k-means++ start's sample and the default without a budget
        (:func:`~saspa_dask.engines.kmeans.kmeans`)."""
        affordable = (KMEANS_SHARE * self.seconds * costs.matmul_rate()
                      / (KMEANS_ROW_COST * n_bases * d))
        rows = 2 ** int(np.floor(np.log2(max(affordable, 1.0))))
        return int(min(default_lloyd_rows(n_bases), max(start_sample_rows(n_bases), rows)))

    def first_stage_rows(self, rows, seconds_per_evaluation, n_bases):
        """The rows learning starts on when its first stage has ``rows`` and an
        evaluation there is estimated at ``seconds_per_evaluation`` on one core:
        ``rows`` or, for a budget that short (:data:`HALF_STAGE_EVALUATIONS`), half."""
        half = int(rows) // 2
        if (self.seconds < HALF_STAGE_EVALUATIONS * seconds_per_evaluation
                and half >= HALF_STAGE_ROWS_PER_BASIS * n_bases):
            return half
        return int(rows)

    def learning_deadline(self):
        """The ``time.perf_counter()`` value after which no learning step starts: the
        budget's end less the reserve, or its end when the model is to be EP on the
        learning sample (:data:`SAMPLE_MODEL_RATIO`, decided at the first call after
        a sweep was timed)."""
        if self.sample_model is None and self._per_row_sweep:
            left = self.end - time.perf_counter()
            self.sample_model = left < SAMPLE_MODEL_RATIO * self.reserve()
        return self.end if self.sample_model else self.end - self.reserve()
