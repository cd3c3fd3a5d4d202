"""The report's sections on the inputs: which matter, the additive kernel's terms,
and the residuals or probabilities against the inputs that matter most.

Relevance with held-out rows is what an input is worth to the predictions: the
increase of the held-out mean negative log predictive density (nats per row) when the
input's values are shuffled among the rows (permutation importance).  It does not
follow the input's spread, as an ARD relevance such as std / lengthscale does: a
heavy-tailed input with a large standard deviation is not ranked first for it.
Without rows, the inverse lengthscale in the input's own units is all there is.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from .model_summary import named_kernel_terms
from .report_page import figure, image, note, section, table

__all__ = ["against_inputs_section", "kernel_terms_section", "relevance_section",
           "relevances"]

#: inputs shown in the relevance chart (the most relevant first)
MAX_INPUTS_SHOWN = 30
#: inputs whose residuals or probabilities are plotted against them
SCATTER_INPUTS = 2
#: held-out rows the permutations are measured on (a seeded sample of the rows given)
PERMUTATION_ROWS = 2000
#: inputs permuted at most (beyond, those with the shortest lengthscale for their
#: spread): each costs one prediction of the sample
MAX_PERMUTED_INPUTS = 200
#: an input whose range exceeds this many interquartile ranges is plotted against its
#: quantile, where a few far values would squeeze the rest into one column
HEAVY_TAIL_RANGE = 10.0


def _lengthscales(fitted):
    return np.broadcast_to(np.asarray(fitted.lengthscale, float), (fitted.means.shape[1],))


def relevances(fitted, X=None, y=None, seed=0):
    """Each input's relevance and what it is (module docstring); inputs not permuted
    (beyond :data:`MAX_PERMUTED_INPUTS`) are NaN."""
    lengthscale = _lengthscales(fitted)
    if X is None:
        return 1.0 / lengthscale, "1 / lengthscale (in each input's own units)"
    rng = np.random.default_rng(seed)
    n, d = X.shape
    rows = np.sort(rng.choice(n, size=min(n, PERMUTATION_ROWS), replace=False))
    X, y = X[rows], np.asarray(y)[rows]
    start = -fitted.log_predictive(X, y).mean()
    candidates = np.argsort(-X.std(axis=0) / lengthscale)[:MAX_PERMUTED_INPUTS]
    relevance = np.full(d, np.nan)
    for j in candidates:
        shuffled = X.copy()
        shuffled[:, j] = X[rng.permutation(len(X)), j]
        relevance[j] = -fitted.log_predictive(shuffled, y).mean() - start
    what = ("held-out increase of the mean negative log predictive density when the "
            f"input's values are shuffled among {len(X)} rows (nats per row)")
    return relevance, what


def relevance_order(relevance):
    """Inputs from the most relevant (NaN, not measured, last)."""
    return np.argsort(-np.nan_to_num(relevance, nan=-np.inf), kind="stable")


def relevance_section(fitted, names, relevance, what):
    lengthscale = _lengthscales(fitted)
    measured = np.isfinite(relevance)
    order = relevance_order(relevance)[:min(MAX_INPUTS_SHOWN, int(measured.sum()))]
    fig, (ax,) = figure(height=0.8 + 0.25 * len(order))
    ax.barh(np.arange(len(order))[::-1], relevance[order])
    ax.axvline(0.0, color="0.6", lw=1)
    ax.set_yticks(np.arange(len(order))[::-1], [names[j] for j in order])
    ax.set(xlabel="relevance", title="Which inputs matter")
    rows = [(names[j], f"lengthscale {lengthscale[j]:.4g}, relevance {relevance[j]:.4g}")
            for j in order]
    shown = ("" if len(order) == len(names)
             else f" (the {len(order)} most relevant of {len(names)})")
    return section("Input relevance", image(fig, "input relevances"),
                   note(f"relevance: {what}{shown}"), table(rows))


def kernel_terms_section(fitted, names):
    """An additive kernel's terms and their shares of the signal variance (None for
    one kernel)."""
    terms = named_kernel_terms(fitted.additive, fitted.term_weights, names)
    if terms is None:
        return None
    return section("Kernel terms", note(
        "an additive kernel: s2 times the sum of the terms' kernels, each term's share "
        "of s2 below"), table([(t["inputs"], t["weight"]) for t in terms]))


def plotted_input(x):
    """The values an input is plotted at, and the axis label's suffix: its quantile
    among the rows when it is heavy-tailed (module constants), else itself."""
    low, high = np.percentile(x, [25.0, 75.0])
    if high > low and np.ptp(x) > HEAVY_TAIL_RANGE * (high - low):
        return rankdata(x) / len(x), " (quantile among the rows)"
    return x, ""


def against_inputs_section(held, names, order):
    """Probabilities of the true class, or residuals, against the inputs first in
    ``order`` (the most relevant)."""
    fitted, top = held.fitted, order[:SCATTER_INPUTS]
    if fitted.is_classifier:
        shown = held.proba[np.arange(len(held.codes)), held.codes]
        label = "probability of the true class"
    else:
        shown = held.y - fitted.point_prediction(held.mean, held.var)[:, 0]
        label = "residual"
    fig, axes = figure(columns=len(top))
    for ax, j in zip(axes, top):
        x, suffix = plotted_input(held.X[:, j])
        ax.scatter(x, shown, s=4, alpha=0.4)
        if not fitted.is_classifier:
            ax.axhline(0.0, color="0.6", lw=1)
        ax.set(xlabel=names[j] + suffix, ylabel=label)
    heading = "Probabilities" if fitted.is_classifier else "Residuals"
    return section(f"{heading} against the most relevant inputs",
                   image(fig, f"{heading.lower()} against inputs"))
