"""A fitted model's report: one self-contained HTML page with pictures.

What a user looks at to trust a probabilistic model: its calibration on held-out rows
(a reliability diagram for a classifier, the coverage of predictive intervals for a
regressor), how learning went (the energy and the held-out metric against time),
which inputs matter (ARD relevances by column name), its residuals or probabilities
against the most relevant inputs, EP's diagnostics, and the drift of the rows it was
shown.  Every plot is drawn with matplotlib's object interface (no global pyplot
state, so reports can be made from threads) and embedded as a PNG data URI: the page
loads nothing from anywhere.
"""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime, timezone

import numpy as np
from scipy.special import ndtri

from ..fitting.held_out import class_metrics, metric_sums_at, metrics_from_sums
from .model_summary import named_kernel_terms

__all__ = ["model_report"]

#: Inputs shown in the relevance chart (the most relevant first)
MAX_INPUTS_SHOWN = 30
#: Inputs whose residuals or probabilities are plotted against them
SCATTER_INPUTS = 2
_COVERAGE_LEVELS = np.array([0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99])
_BINS = 10

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .8em;text-align:left;
border-bottom:1px solid #eee}td.n{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;height:auto}p.note{color:#555;font-size:.9em}
"""


def model_report(model, X=None, y=None, *, title=None, drift=None, source=None,
                 training_rows=False):
    """The HTML report of a fitted SASPA-family estimator.

    Parameters
    ----------
    model : fitted estimator
        Any estimator of the package with a fitted posterior.
    X, y : array-like, optional
        Held-out rows and their targets (NumPy; a sample of a large store): the
        metrics, calibration and residual sections need them.
    title : str, optional
        The page's title (default: the estimator's class name).
    drift : dict, optional
        Per-column drift counts of the rows shown (a data store's ``drift``).
    source : str, optional
        Where the rows came from, said above the metrics.
    training_rows : bool, default=False
        The rows are (a sample of) the model's own training rows: the metrics are
        headed so, not as held-out ones.

    Returns
    -------
    str
        A complete HTML document.
    """
    fitted = model.fitted_posterior_
    names = _input_names(model, fitted)
    if X is not None:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y)
    relevance, what = _relevances(fitted, X)
    sections = [_summary(model, fitted)]
    if X is not None:
        held = _HeldOutRows(fitted, X, y)
        sections += [_metrics(held, source, training_rows), _calibration(held)]
    sections += [_learning(model), _relevance(fitted, names, relevance, what),
                 _kernel_terms(fitted, names)]
    if X is not None:
        sections.append(_against_inputs(held, names, np.argsort(-relevance)))
    sections += [_ep_diagnostics(model), _drift(drift)]
    title = title or f"{type(model).__name__} report"
    return _page(title, [s for s in sections if s])


# -- the page -----------------------------------------------------------------------


def _page(title, sections):
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"generator\" content=\"saspa_dask\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "img-src data:; style-src 'unsafe-inline'\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p class=\"note\">made {made} by saspa_dask</p>"
            + "".join(sections) + "</body></html>\n")


def _section(heading, *parts):
    return f"<h2>{html.escape(heading)}</h2>" + "".join(parts)


def _table(rows):
    cells = "".join(
        f"<tr><th>{html.escape(str(k))}</th>"
        f"<td class=\"n\">{html.escape(_text(v))}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def _note(text):
    return f"<p class=\"note\">{html.escape(text)}</p>"


def _text(value):
    if isinstance(value, (float, np.floating)):
        return f"{value:.6g}"
    return str(value)


def _image(fig, alt):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img alt=\"{html.escape(alt)}\" src=\"data:image/png;base64,{data}\">"


def _figure(width=7.0, height=3.6, columns=1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, columns)
    return fig, np.atleast_1d(axes)


# -- sections -----------------------------------------------------------------------


def _summary(model, fitted):
    rows = [("estimator", type(model).__name__),
            ("task", "classification" if fitted.is_classifier else "regression"),
            ("likelihood", fitted.likelihood), ("approximation", fitted.approximation.name),
            ("inputs", fitted.means.shape[1]), ("bases", fitted.n_bases),
            ("blur", getattr(model, "blur_", "delta")),
            ("training rows", _training_rows(model))]
    if fitted.classes is not None:
        rows.append(("classes", ", ".join(str(c) for c in fitted.classes)))
    for label, attribute in (("log evidence", "log_evidence_"),
                             ("EP converged", "converged_"), ("EP sweeps", "n_sweeps_"),
                             ("data fingerprint", "data_fingerprint_")):
        value = getattr(model, attribute, None)
        if value is not None:
            rows.append((label, value))
    rows.append(("signal variance", float(fitted.signal_variance)))
    rows += [(k.replace("_", " "), float(v)) for k, v in fitted.likelihood_params.items()
             if np.ndim(v) == 0]
    return _section("Model", _table(rows))


def _training_rows(model):
    tau = getattr(model, "sites_tau_", None)
    return "unknown" if tau is None else np.shape(tau)[-1]


class _HeldOutRows:
    """The held-out rows and what every section needs of them, computed once: the
    latent moments (the kernel block is the cost), the metric sums, and a
    classifier's class probabilities and codes."""

    def __init__(self, fitted, X, y):
        self.fitted, self.X, self.y = fitted, X, y
        self.mean, self.var = fitted.latent(X)
        self.sums, self.proba, self.codes = metric_sums_at(fitted, self.mean, self.var, y)


def _metrics(held, source, training_rows=False):
    fitted, y = held.fitted, held.y
    metrics = metrics_from_sums(held.sums, fitted.is_classifier, context=True)
    rows = [(k, v) for k, v in metrics.items()]
    if fitted.is_classifier:
        more = class_metrics(held.proba, held.codes)
        rows += [("error of always the commonest class", more["base_error"]),
                 ("Brier score", more["brier"])]
    where = f"on {source}, " if source else ""
    heading = ("Metrics on the training rows (not held out)" if training_rows
               else "Held-out metrics")
    return _section(heading, _note(f"{where}{len(y)} rows"), _table(rows))


def _calibration(held):
    if held.fitted.is_classifier:
        return _reliability(held.proba, held.codes)
    return _coverage(held.fitted, held.mean, held.var, np.asarray(held.y, dtype=np.float64))


def _reliability(proba, codes):
    """Confidence (the largest class probability) against accuracy, in equal-width
    bins, and how many rows fall in each."""
    confidence = proba.max(axis=1)
    correct = proba.argmax(axis=1) == codes
    low = 1.0 / proba.shape[1]
    edges = np.linspace(low, 1.0, _BINS + 1)
    which = np.clip(np.digitize(confidence, edges[1:-1]), 0, _BINS - 1)
    counts = np.bincount(which, minlength=_BINS)
    filled = counts > 0
    mean_conf = np.bincount(which, confidence, _BINS)[filled] / counts[filled]
    accuracy = np.bincount(which, correct, _BINS)[filled] / counts[filled]
    fig, (ax, hist) = _figure(columns=2)
    ax.plot([low, 1], [low, 1], color="0.6", lw=1, label="calibrated")
    ax.plot(mean_conf, accuracy, "o-", label="this model")
    ax.set(xlabel="predicted probability of the predicted class", ylabel="accuracy",
           title="Reliability")
    ax.legend(loc="upper left")
    hist.bar(0.5 * (edges[1:] + edges[:-1]), counts, width=np.diff(edges) * 0.9)
    hist.set(xlabel="predicted probability of the predicted class", ylabel="rows",
             title="Rows per bin")
    gap = np.abs(mean_conf - accuracy) @ counts[filled] / counts.sum()
    rows = [(f"{a:.2f}-{b:.2f}", f"{n} rows, confidence {c:.3f}, accuracy {r:.3f}")
            for a, b, n, c, r in zip(edges[:-1][filled], edges[1:][filled],
                                     counts[filled], mean_conf, accuracy)]
    return _section("Calibration", _image(fig, "reliability diagram"),
                    _note(f"expected calibration error {gap:.4f} (the rows' weighted "
                          "mean of |confidence - accuracy| over the bins)"), _table(rows))


def _coverage(fitted, mean, var, y):
    """The share of rows inside the central predictive interval at each level
    (Gaussian intervals: mean +- z std, the noise included)."""
    point = fitted.point_prediction(mean, var)[:, 0]
    std = fitted.predictive_std(mean, var)
    z = np.abs(y - point) / np.where(std > 0, std, np.inf)
    covered = np.array([(z <= ndtri(0.5 + level / 2)).mean() for level in _COVERAGE_LEVELS])
    fig, (ax, resid) = _figure(columns=2)
    ax.plot([0.5, 1], [0.5, 1], color="0.6", lw=1, label="calibrated")
    ax.plot(_COVERAGE_LEVELS, covered, "o-", label="this model")
    ax.set(xlabel="nominal level", ylabel="rows inside the interval",
           title="Interval coverage")
    ax.legend(loc="upper left")
    resid.scatter(point, y - point, s=4, alpha=0.4)
    resid.axhline(0.0, color="0.6", lw=1)
    resid.set(xlabel="prediction", ylabel="residual", title="Residuals")
    rows = [(f"{level:.0%} interval", f"{share:.3f} of rows")
            for level, share in zip(_COVERAGE_LEVELS, covered)]
    note = "" if fitted.likelihood_object.gaussian_observations else (
        f" (a {fitted.likelihood} likelihood's predictive is not Gaussian: these "
        "intervals are a Gaussian approximation)")
    return _section("Calibration", _image(fig, "interval coverage and residuals"),
                    _note("mean +- z x predictive std, the noise included" + note),
                    _table(rows))


def _learning(model):
    trace = getattr(model, "hyperparameter_trace_", None) or []
    held = getattr(model, "held_out_trace_", None) or []
    if not trace and not held:
        return _section("Learning", _note("the hyperparameters were not learnt"))
    fig, axes = _figure(columns=2 if held else 1)
    if trace:
        seconds = [r.get("seconds", r.get("iteration", 0)) for r in trace]
        axes[0].plot(seconds, [r["log_evidence"] for r in trace], ".-")
        axes[0].set(xlabel="seconds", ylabel="energy (log Z_EP)", title="Energy")
    if held:
        metric = "error" if "error" in held[0] else "rmse"
        axes[-1].plot([r["seconds"] for r in held], [r[metric] for r in held], "o-")
        axes[-1].set(xlabel="seconds", ylabel=f"held-out {metric}", title="Held-out")
    info = getattr(model, "hyperparameter_info_", None) or {}
    rows = [(k.replace("_", " "), info[k]) for k in
            ("message", "n_iterations", "n_evaluations", "n_rows_learnt") if k in info]
    return _section("Learning", _image(fig, "learning curve"), _table(rows))


def _lengthscales(fitted):
    return np.broadcast_to(np.asarray(fitted.lengthscale, float), (fitted.means.shape[1],))


def _relevances(fitted, X):
    """ARD relevances and what they are: each input's spread over its lengthscale
    (with rows), else the inverse lengthscale in the input's own units."""
    lengthscale = _lengthscales(fitted)
    if X is not None:
        return X.std(axis=0) / lengthscale, "input standard deviation / lengthscale"
    return 1.0 / lengthscale, "1 / lengthscale (in each input's own units)"


def _relevance(fitted, names, relevance, what):
    lengthscale = _lengthscales(fitted)
    order = np.argsort(-relevance)[:MAX_INPUTS_SHOWN]
    fig, (ax,) = _figure(height=0.8 + 0.25 * len(order))
    ax.barh(np.arange(len(order))[::-1], relevance[order])
    ax.set_yticks(np.arange(len(order))[::-1], [names[j] for j in order])
    ax.set(xlabel=what, title="Which inputs matter")
    rows = [(names[j], f"lengthscale {lengthscale[j]:.4g}, relevance {relevance[j]:.4g}")
            for j in order]
    shown = ("" if len(order) == len(names)
             else f" (the {len(order)} most relevant of {len(names)})")
    return _section("Input relevance", _image(fig, "input relevances"),
                    _note(f"relevance: {what}{shown}"), _table(rows))


def _kernel_terms(fitted, names):
    """An additive kernel's terms and their shares of the signal variance (None for
    one kernel): the relevances above compare inputs within a term."""
    terms = named_kernel_terms(fitted.additive, fitted.term_weights, names)
    if terms is None:
        return None
    return _section("Kernel terms", _note(
        "an additive kernel: s2 times the sum of the terms' kernels, each term's share "
        "of s2 below"), _table([(t["inputs"], t["weight"]) for t in terms]))


def _against_inputs(held, names, order):
    """Probabilities of the true class, or residuals, against the inputs first in
    ``order`` (the most relevant)."""
    fitted, top = held.fitted, order[:SCATTER_INPUTS]
    if fitted.is_classifier:
        shown = held.proba[np.arange(len(held.codes)), held.codes]
        label = "probability of the true class"
    else:
        shown = held.y - fitted.point_prediction(held.mean, held.var)[:, 0]
        label = "residual"
    fig, axes = _figure(columns=len(top))
    for ax, j in zip(axes, top):
        ax.scatter(held.X[:, j], shown, s=4, alpha=0.4)
        if not fitted.is_classifier:
            ax.axhline(0.0, color="0.6", lw=1)
        ax.set(xlabel=names[j], ylabel=label)
    heading = "Probabilities" if fitted.is_classifier else "Residuals"
    return _section(f"{heading} against the most relevant inputs",
                    _image(fig, f"{heading.lower()} against inputs"))


def _ep_diagnostics(model):
    history = getattr(model, "history_", None) or []
    counts = [(name.rstrip("_").replace("_", " "), getattr(model, name)) for name in
              ("ep_stop_reason_", "n_sweeps_", "n_invalid_cavities_", "n_skipped_updates_",
               "n_damping_halvings_", "n_damping_reductions_", "n_anderson_steps_",
               "n_anderson_restarts_", "jitter_") if getattr(model, name, None) is not None]
    parts = []
    if history:
        fig, (ax,) = _figure(height=3.0)
        ax.semilogy([r["sweep"] for r in history],
                    [max(r["change"], 1e-300) for r in history], "o-")
        ax.set(xlabel="sweep", ylabel="largest site change", title="EP on all rows")
        parts.append(_image(fig, "EP site changes per sweep"))
    if not counts and not parts:
        return ""
    return _section("EP", *parts, _table(counts))


def _drift(drift):
    if not drift:
        return ""
    rows = [(column, value if not isinstance(value, dict) else
             ", ".join(f"{k} {v}" for k, v in value.items()))
            for column, value in drift.items()]
    return _section("Drift of the rows shown", _table(rows))


def _input_names(model, fitted):
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        names = fitted.feature_names
    d = fitted.means.shape[1]
    return [f"x{j}" for j in range(d)] if names is None else [str(n) for n in names]
