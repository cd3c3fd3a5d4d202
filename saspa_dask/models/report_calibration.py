"""The report's calibration section: are the model's probabilities and intervals
what they say?

* Two classes: the predicted probability of the positive class (``classes[1]``)
  against the observed share of positives, in bins of equal row counts (quantile
  bins: with rare positives, equal-width bins put nearly every row in the first),
  with each bin's rows.
* More classes: the same for each class against the rest, one panel a class.
* A regressor: the share of rows inside the model's central predictive interval at
  several levels, from the model's own predictive distribution (log-normal for a
  ``log_target`` model, as ``evaluate``'s ``coverage_95``), and the residuals.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtri

from .report_page import figure, image, note, section, table

__all__ = ["calibration_section", "COVERAGE_LEVELS"]

COVERAGE_LEVELS = np.array([0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99])
#: bins of the reliability diagrams (equal row counts)
RELIABILITY_BINS = 10
#: classes shown one against the rest (the most frequent first)
MAX_CLASS_PANELS = 6


def calibration_section(held, labels):
    """The calibration section for held-out rows (:class:`HeldOutRows`)."""
    if held.fitted.is_classifier:
        if held.proba.shape[1] == 2:
            return _binary(held.proba[:, 1], held.codes == 1, labels[1])
        return _one_vs_rest(held.proba, held.codes, labels)
    return _coverage(held.fitted, held.mean, held.var, np.asarray(held.y, dtype=np.float64))


def quantile_bins(p, n_bins=RELIABILITY_BINS):
    """Each row's bin among at most ``n_bins`` bins of about equal row counts (ties
    keep rows together, so there can be fewer), and the bins' edges."""
    edges = np.unique(np.quantile(p, np.linspace(0.0, 1.0, n_bins + 1)))
    which = np.searchsorted(edges[1:-1], p, side="right")
    return which, edges


def reliability(p, positive, n_bins=RELIABILITY_BINS):
    """Per non-empty bin: its range, rows, mean predicted probability and observed
    share of positives; and the expected calibration error (the rows' mean
    |predicted - observed| over the bins)."""
    which, edges = quantile_bins(p, n_bins)
    if len(edges) == 1:  # every row has one probability: one bin
        edges = np.repeat(edges, 2)
    n = len(edges) - 1
    counts = np.bincount(which, minlength=n)
    filled = counts > 0
    predicted = np.bincount(which, p, n)[filled] / counts[filled]
    observed = np.bincount(which, positive.astype(np.float64), n)[filled] / counts[filled]
    ece = float(np.abs(predicted - observed) @ counts[filled] / counts.sum())
    return (edges[:-1][filled], edges[1:][filled], counts[filled], predicted, observed,
            ece)


def _draw(ax, predicted, observed, what):
    top = min(1.0, 1.05 * max(predicted.max(), observed.max(), 1e-3))
    ax.plot([0, top], [0, top], color="0.6", lw=1, label="calibrated")
    ax.plot(predicted, observed, "o-", label="this model")
    ax.set(xlim=(0, top), ylim=(0, top), xlabel=f"predicted P({what})",
           ylabel=f"observed share of {what}")


def _binary(p, positive, label):
    lows, highs, counts, predicted, observed, ece = reliability(p, positive)
    fig, (ax, hist) = figure(columns=2)
    _draw(ax, predicted, observed, label)
    ax.set_title("Reliability (bins of equal rows)")
    ax.legend(loc="upper left")
    hist.hist(p, bins=np.linspace(0.0, 1.0, 21))
    hist.set_yscale("log")
    hist.set(xlabel=f"predicted P({label})", ylabel="rows (log scale)",
             title="Predicted probabilities")
    rows = [(f"bin {k + 1}: P {a:.6g} to {b:.6g}",
             f"{n} rows, predicted {c:.4f}, observed {r:.4f}")
            for k, (a, b, n, c, r) in enumerate(zip(lows, highs, counts, predicted,
                                                    observed))]
    return section("Calibration", image(fig, "reliability diagram"),
                   note(f"P({label}) against the share of rows that are {label}, in bins "
                        f"of equal row counts; {int(positive.sum())} of {len(p)} rows are "
                        f"{label}; expected calibration error {ece:.4f} (the rows' "
                        "mean |predicted - observed| over the bins)"), table(rows))


def _one_vs_rest(proba, codes, labels):
    order = np.argsort(-np.bincount(codes, minlength=proba.shape[1]), kind="stable")
    shown = order[:MAX_CLASS_PANELS]
    columns = min(3, len(shown))
    rows_of_panels = -(-len(shown) // columns)
    fig, axes = figure(width=3.2 * columns, height=3.0, columns=columns,
                       rows=rows_of_panels)
    lines = []
    for ax, k in zip(axes, shown):
        *_, predicted, observed, ece = reliability(proba[:, k], codes == k)
        _draw(ax, predicted, observed, labels[k])
        ax.set_title(f"{labels[k]} against the rest")
        lines.append((labels[k], f"{int((codes == k).sum())} rows, expected calibration "
                                 f"error {ece:.4f}"))
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    more = ("" if len(shown) == proba.shape[1]
            else f" (the {len(shown)} most frequent of {proba.shape[1]} classes)")
    return section("Calibration", image(fig, "reliability diagrams, one class a panel"),
                   note("each class's predicted probability against the share of rows "
                        f"of that class, in bins of equal row counts{more}"), table(lines))


def _coverage(fitted, mean, var, y):
    point = fitted.point_prediction(mean, var)[:, 0]
    if fitted.has_intervals:  # the model's own predictive distribution
        covered = []
        for level in COVERAGE_LEVELS:
            lower, upper = fitted.predictive_interval(mean, var, level)
            covered.append(float(((y >= lower) & (y <= upper)).mean()))
        how = ("the central interval of the model's predictive distribution, the noise "
               "included" + (" (log-normal: the model fits log(y))" if fitted.log_target
                             else ""))
    else:  # a Gaussian approximation, said so
        std = fitted.predictive_std(mean, var)
        z = np.abs(y - point) / np.where(std > 0, std, np.inf)
        covered = [float((z <= ndtri(0.5 + level / 2)).mean()) for level in COVERAGE_LEVELS]
        how = (f"mean +- z x predictive std, the noise included (a {fitted.likelihood} "
               "likelihood's predictive is not Gaussian: these intervals are a Gaussian "
               "approximation)")
    fig, (ax, resid) = figure(columns=2)
    ax.plot([0.5, 1], [0.5, 1], color="0.6", lw=1, label="calibrated")
    ax.plot(COVERAGE_LEVELS, covered, "o-", label="this model")
    ax.set(xlabel="nominal level", ylabel="rows inside the interval",
           title="Interval coverage")
    ax.legend(loc="upper left")
    resid.scatter(point, y - point, s=4, alpha=0.4)
    resid.axhline(0.0, color="0.6", lw=1)
    resid.set(xlabel="prediction", ylabel="residual", title="Residuals")
    rows = [(f"{level:.0%} interval", f"{share:.3f} of rows")
            for level, share in zip(COVERAGE_LEVELS, covered)]
    return section("Calibration", image(fig, "interval coverage and residuals"), note(how),
                   table(rows))
