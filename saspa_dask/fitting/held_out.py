"""Held-out rows a fit is measured on while it learns: a fitted posterior's metrics on
rows it did not learn from, and when a fit takes them (``held_out_trace_``).

The metrics are those of ``saspa evaluate`` (:func:`saspa_dask.storage.scores.evaluate`
sums the same per-row terms, :func:`metric_sums`): for a classifier the error rate and
the mean negative log probability of the true label (``nlp``), for a regressor the
RMSE, the mean absolute error and the mean negative log predictive density with the
noise (``nlpd``).

A measurement costs a prediction on every held-out row (O(n M^2)), so a fit takes one
at its start, then no sooner than :data:`GAP_SHARE` of the time so far and than
:data:`COST_SHARE` of the time allows (measuring takes at most that share of the fit),
after each learning stage, and always of the final model.
"""

from __future__ import annotations

import time

import dask
import numpy as np
from dask import delayed

from ..engines.chunks import as_dask, is_lazy, row_chunked

__all__ = ["COST_SHARE", "area_under_roc", "GAP_SHARE", "HeldOut", "HeldOutError", "HeldOutWatch",
           "class_metrics", "metric_sums", "metric_sums_at", "metrics_from_sums"]

# measurements are at least this share of the fit's time so far apart (a geometric
# schedule: a metric-against-time curve with points at every scale of time) ...
GAP_SHARE = 0.25
# ... and take at most this share of the fit's time
COST_SHARE = 0.1

_ROWS = 65536  # rows per block of an in-memory held-out set (bounds the n x M temporaries)


class HeldOutError(ValueError):
    """Held-out rows that cannot be measured (their shape, or labels the model does
    not know): a job names the store they came from."""


# the level of the predictive interval whose coverage evaluate reports
COVERAGE_LEVEL = 0.95


def metric_sums(posterior, X, y):
    """The additive terms of the held-out metrics on rows ``X`` (NumPy) with targets
    ``y``: ``(sums, proba, codes)``, ``sums`` = [rows, errors (classifier) or squared
    residuals, sum of -log p(y), sum of |residual|, and for a regressor the sums of
    y - c and (y - c)^2, c the model's offset (their spread: the best constant's
    error), and the rows inside their central 95% predictive interval (a gaussian
    regressor's; NaN for the others)]; ``proba`` and ``codes`` (class probabilities
    and each row's class index, for the AUC) for a classifier, else None.
    """
    return metric_sums_at(posterior, *posterior.latent(X), y)


def metric_sums_at(posterior, mean, var, y):
    """:func:`metric_sums` from the rows' latent moments (offset not added), already
    computed: the kernel block is the cost."""
    y = np.asarray(y)
    log_p = posterior.log_predictive_at(mean, var, y)
    if posterior.is_classifier:
        proba = posterior.class_probabilities(mean, var)
        codes = posterior.class_codes(y)
        errors = float((proba.argmax(axis=1) != codes).sum())
        return (np.array([len(y), errors, -log_p.sum(), 0.0, 0.0, 0.0, np.nan]), proba,
                codes)
    resid = y - posterior.point_prediction(mean, var)[:, 0]
    # shifted by the offset (the training mean): no cancellation in the spread of
    # targets far from zero
    centred = y - float(np.mean(posterior.offset))
    inside = np.nan
    if posterior.has_intervals:
        lower, upper = posterior.predictive_interval(mean, var, COVERAGE_LEVEL)
        inside = float(((y >= lower) & (y <= upper)).sum())
    return (np.array([len(y), float((resid ** 2).sum()), -log_p.sum(),
                      float(np.abs(resid).sum()), float(centred.sum()),
                      float((centred ** 2).sum()), inside]), None, None)


def class_metrics(proba, codes):
    """What a classifier's probabilities say beyond the error: the Brier score as
    scikit-learn's ``brier_score_loss`` defines it (two classes: the mean squared
    difference between P(positive) and the 0/1 truth; more: the mean over rows of the
    squared distance between the class probabilities and the one-hot truth, summed
    over the classes) and ``base_error``, the error of always predicting the
    commonest class of these rows (the error's context)."""
    proba = np.asarray(proba, dtype=np.float64)
    codes = np.asarray(codes)
    n_rows, n_classes = proba.shape
    counts = np.bincount(codes, minlength=n_classes)
    squared = (proba * proba).sum(axis=1) - 2.0 * proba[np.arange(n_rows), codes] + 1.0
    # two classes: the sum over both is twice P(positive)'s squared error
    brier = squared.mean() / (2.0 if n_classes == 2 else 1.0)
    return {"brier": float(brier), "base_error": 1.0 - counts.max() / n_rows}


def area_under_roc(proba, codes):
    """The area under the ROC curve (exact, ties counted half): of P(y = classes[1])
    for two classes, else the mean over classes of each class against the rest
    (classes absent from ``codes`` or present alone are left out); None when no class
    can be scored."""
    from sklearn.metrics import roc_auc_score

    columns = [1] if proba.shape[1] == 2 else range(proba.shape[1])
    areas = [roc_auc_score(codes == k, proba[:, k]) for k in columns
             if 0 < np.count_nonzero(codes == k) < len(codes)]
    return float(np.mean(areas)) if areas else None


def metrics_from_sums(sums, is_classifier, context=False):
    """The metrics from summed :func:`metric_sums` terms: ``rows`` and ``error``,
    ``nlp`` (classifier) or ``rmse``, ``mae``, ``nlpd`` (regressor); with ``context``
    a regressor's ``base_rmse`` too (the RMSE of always predicting these rows' mean),
    ``r2`` (1 - MSE / their variance; None when they do not vary) and, for a gaussian
    regressor, ``coverage_95`` (the share of rows inside their central 95% predictive
    interval, the noise included: calibrated intervals give about 0.95)."""
    n, a, nlp, c, sy, syy, inside = (float(v) for v in sums)
    if is_classifier:
        return {"rows": int(n), "error": a / n, "nlp": nlp / n}
    metrics = {"rows": int(n), "rmse": float(np.sqrt(a / n)), "mae": c / n, "nlpd": nlp / n}
    if context:
        spread = max(syy / n - (sy / n) ** 2, 0.0)
        metrics.update(base_rmse=float(np.sqrt(spread)),
                       r2=1.0 - (a / n) / spread if spread > 0 else None)
        if np.isfinite(inside):
            metrics["coverage_95"] = inside / n
    return metrics


def _sums(posterior, X, y):
    return metric_sums(posterior, X, y)[0]


class HeldOut:
    """Held-out rows: NumPy arrays in memory, or dask arrays measured chunk by chunk
    on the active Dask scheduler.

    Parameters
    ----------
    X : ndarray or dask array of shape (n, d)
    y : ndarray or dask array of shape (n,)
        Targets as the estimator's ``fit`` takes them (class labels, values, counts).
    """

    def __init__(self, X, y):
        if X.shape[0] != y.shape[0]:
            raise HeldOutError(f"X_val has {X.shape[0]} rows but y_val has {y.shape[0]}")
        if X.shape[0] == 0:
            raise HeldOutError("X_val has no rows")
        self.lazy = is_lazy(X) or is_lazy(y)
        if self.lazy:  # one column chunk, y's chunks aligned with X's rows
            X, y = row_chunked(as_dask(X), as_dask(y))
        self.X, self.y = X, y

    def metrics(self, posterior):
        """The posterior's metrics on these rows (:func:`metrics_from_sums`)."""
        try:
            if self.lazy:
                shared = delayed(posterior, pure=True)
                parts = [delayed(_sums)(shared, xb, yb) for xb, yb in
                         zip(self.X.to_delayed().ravel(), self.y.to_delayed().ravel())]
                total = np.sum(dask.compute(*parts), axis=0)
            else:
                total = np.sum([_sums(posterior, self.X[a:a + _ROWS], self.y[a:a + _ROWS])
                                for a in range(0, self.X.shape[0], _ROWS)], axis=0)
        except ValueError as err:  # labels the model does not know
            raise HeldOutError(f"y_val: {err}") from None
        return metrics_from_sums(total, posterior.is_classifier)


class HeldOutWatch:
    """When a fit measures its model on held-out rows, and the record of what it
    measured (the fit report's ``held_out_trace_``).

    Parameters
    ----------
    held_out : HeldOut
    began : float
        ``time.perf_counter()`` at the fit's start.
    posterior_of : callable
        ``posterior_of(outcome)``: the fitted posterior of a trainer's outcome.
    say : callable
        Says each measurement (a phase line).
    """

    def __init__(self, held_out, began, posterior_of, say):
        self.held_out, self.began = held_out, began
        self.posterior_of, self.say = posterior_of, say
        self.trace = []
        self._next = began  # the first chance is taken
        self._last = None

    def __call__(self, make_outcome, *, rows, iteration=None, stage="learning",
                 always=False):
        """Measure the outcome ``make_outcome()`` builds, when one is due (or
        ``always``); ``rows`` the rows it was learnt on, ``iteration`` its optimiser
        iteration or stochastic step."""
        now = time.perf_counter()
        if not always and now < self._next:
            return
        outcome = make_outcome()
        if outcome is self._last:  # already measured (a stage ends at its best point)
            return
        self._last = outcome
        self.measure(self.posterior_of(outcome), rows=rows, iteration=iteration,
                     stage=stage)

    def measure(self, posterior, *, rows, iteration=None, stage="final"):
        """Measure ``posterior`` (learnt on ``rows`` rows) now, and record it."""
        now = time.perf_counter()
        metrics = self.held_out.metrics(posterior)
        cost = time.perf_counter() - now
        # "rows": what the model was learnt on (the held-out set's size is the same
        # in every record: said, not kept)
        record = {"seconds": now - self.began, "stage": stage, "rows": int(rows),
                  "iteration": iteration,
                  **{k: v for k, v in metrics.items() if k != "rows"}}
        self.trace.append(record)
        self._next = time.perf_counter() + max(GAP_SHARE * (now - self.began),
                                               cost * (1 - COST_SHARE) / COST_SHARE)
        shown = ", ".join(f"{k} {v:.5g}" for k, v in metrics.items() if k != "rows")
        where = "" if iteration is None else f", iteration {iteration}"
        self.say(f"held-out ({metrics['rows']} rows): {shown} at {record['seconds']:.1f}s "
                 f"({stage} on {rows} rows{where})")
