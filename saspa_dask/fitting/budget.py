"""A fit's wall-clock budget (``max_fit_time``): the best model by then.

Learning ends early enough for EP on all rows to make a model by the end of the
budget, and EP on all rows stops between sweeps when the next one would end after it.
After learning on a row subsample, EP on all rows starts from the subsample's
posterior scaled to all rows (:func:`saspa_dask.fitting.plan._scaled_starts`);
measured at 10^6 rows (``benchmarks/RESULTS.md``, "An anytime fit"), the held-out
error and NLP after its second sweep were the converged ones to four digits, where
convergence to ``tol`` took eight.  So the budget keeps room for building the blocks
and :data:`FINAL_SWEEPS` sweeps on all rows, at the cost per row and sweep that
learning's own EP sweeps measure.  A run that EP stops early is reported as not
converged, never hidden.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["FINAL_SWEEPS", "FitBudget"]

# sweeps of EP on all rows the budget keeps room for (the block build counts as one)
FINAL_SWEEPS = 2


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
        self.end = began + float(seconds)
        self.n_rows = int(n_rows)
        self._per_row_sweep = []

    def observe(self, rows, seconds):
        """Record one EP sweep of ``seconds`` over ``rows`` rows."""
        if rows > 0 and seconds > 0:
            self._per_row_sweep.append(seconds / rows)

    def reserve(self):
        """Seconds kept for EP on all rows: the block build and :data:`FINAL_SWEEPS`
        sweeps at the median cost per row of the recent sweeps (0 before any)."""
        if not self._per_row_sweep:
            return 0.0
        per_row = float(np.median(self._per_row_sweep[-50:]))
        return (FINAL_SWEEPS + 1) * per_row * self.n_rows

    def learning_deadline(self):
        """The ``time.perf_counter()`` value after which no learning step starts."""
        return self.end - self.reserve()

    def left(self):
        """Seconds left of the whole budget."""
        return self.end - time.perf_counter()
