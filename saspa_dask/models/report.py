"""A fitted model's report: one self-contained HTML page with pictures.

What a user looks at to trust a probabilistic model: what the model is (its classes
as the user wrote them, whether it fits log(y), how learning and EP ended), its
metrics on held-out rows (the same as ``evaluate``'s), its calibration
(:mod:`~saspa_dask.models.report_calibration`), how learning went (the energy and
the held-out metrics against time), which inputs matter and the residuals against
them (:mod:`~saspa_dask.models.report_inputs`), EP's diagnostics, and the drift of
the rows it was shown.  The page's parts are :mod:`~saspa_dask.models.report_page`'s.
"""

from __future__ import annotations

import numpy as np

from ..fitting.held_out import area_under_roc, class_metrics, metric_sums_at, metrics_from_sums
from ..fitting.learning_advice import learning_state
from ..fitting.posterior import label_text
from .report_calibration import calibration_section
from .report_inputs import (against_inputs_section, kernel_terms_section,
                            relevance_order, relevance_section, relevances)
from .report_page import (figure, image, integer_ticks, note, page, readable_range,
                          section, table)

__all__ = ["model_report"]

# what the held-out trace's records hold, by task: (key, label) pairs plotted
_HELD_OUT_CURVES = {True: (("error", "error"), ("nlp", "NLP (nats per row)")),
                    False: (("rmse", "RMSE"), ("nlpd", "NLPD (nats per row)"))}


def model_report(model, X=None, y=None, *, title=None, drift=None, source=None,
                 training_rows=False, class_labels=None, metrics=None):
    """The HTML report of a fitted SASPA-family estimator.

    Parameters
    ----------
    model : fitted estimator
        Any estimator of the package with a fitted posterior.
    X, y : array-like, optional
        Held-out rows and their targets (NumPy; a sample of a large store): the
        metrics, calibration, relevance and residual sections need them.
    title : str, optional
        The page's title (default: the estimator's class name).
    drift : dict, optional
        Per-column drift counts of the rows shown (a data store's ``drift``).
    source : str, optional
        Where the rows came from, said above the metrics.
    training_rows : bool, default=False
        The rows are (a sample of) the model's own training rows: the metrics are
        headed so, not as held-out ones.
    class_labels : sequence of str, optional
        The classes as the user wrote them, when the model's classes are codes (a
        model trained on a store with text labels); default: the classes themselves.
    metrics : dict, optional
        The metrics section's values when ``X, y`` are a sample of more rows: those of
        every row of ``source`` (:func:`saspa_dask.storage.scores.evaluate`'s, with
        ``rows``); the other sections stay on the sample.  Default: the metrics of
        ``X, y``.

    Returns
    -------
    str
        A complete HTML document.
    """
    fitted = model.fitted_posterior_
    names = _input_names(model, fitted)
    labels = None
    if fitted.is_classifier:
        labels = ([str(c) for c in class_labels] if class_labels is not None
                  else [label_text(c) for c in fitted.classes])
    if X is not None:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y)
    relevance, what = relevances(fitted, X, y)
    sections = [_summary(model, fitted, labels)]
    if X is not None:
        held = HeldOutRows(fitted, X, y)
        sections += [_metrics(held, source, training_rows, metrics),
                     calibration_section(held, labels)]
    sections += [_learning(model, fitted.is_classifier),
                 relevance_section(fitted, names, relevance, what),
                 kernel_terms_section(fitted, names)]
    if X is not None:
        sections.append(against_inputs_section(held, names, relevance_order(relevance)))
    sections += [_ep_diagnostics(model), _drift(drift)]
    title = title or f"{type(model).__name__} report"
    return page(title, [s for s in sections if s])


class HeldOutRows:
    """The held-out rows and what every section needs of them, computed once: the
    latent moments (the kernel block is the cost), the metric sums, and a
    classifier's class probabilities and codes."""

    def __init__(self, fitted, X, y):
        self.fitted, self.X, self.y = fitted, X, y
        self.mean, self.var = fitted.latent(X)
        self.sums, self.proba, self.codes = metric_sums_at(fitted, self.mean, self.var, y)


def _summary(model, fitted, labels):
    rows = [("estimator", type(model).__name__),
            ("task", "classification" if fitted.is_classifier else "regression"),
            ("likelihood", fitted.likelihood), ("approximation", fitted.approximation.name),
            ("inputs", fitted.means.shape[1]), ("bases", fitted.n_bases),
            ("blur", getattr(model, "blur_", "delta")),
            ("training rows", _training_rows(model))]
    if labels is not None:
        rows.append(("classes", ", ".join(labels)))
        if len(labels) == 2:
            rows.append(("positive class", f"{labels[1]} (the probabilities are of it)"))
    if fitted.log_target:
        rows.append(("target", "log(y): the model fits the logarithm of the target; its "
                               "predictions, intervals and metrics are of y"))
    info = getattr(model, "hyperparameter_info_", None)
    rows.append(("learning", learning_state(info)))
    for label, attribute in (("log evidence", "log_evidence_"),
                             ("EP converged on all rows", "converged_"),
                             ("EP sweeps", "n_sweeps_"),
                             ("data fingerprint", "data_fingerprint_")):
        value = getattr(model, attribute, None)
        if value is not None:
            rows.append((label, value))
    rows.append(("signal variance", float(fitted.signal_variance)))
    scale = " (of log y)" if fitted.log_target else ""
    rows += [(k.replace("_", " ") + (scale if k == "noise_variance" else ""), float(v))
             for k, v in fitted.likelihood_params.items() if np.ndim(v) == 0]
    return section("Model", table(rows))


def _training_rows(model):
    tau = getattr(model, "sites_tau_", None)
    return "unknown" if tau is None else np.shape(tau)[-1]


_CLASS_METRICS = (("auc", "AUC"), ("brier", "Brier score"),
                  ("base_error", "error of always the commonest class"))


def held_out_metrics(held):
    """The metrics of the held rows, as :func:`saspa_dask.storage.scores.evaluate`
    gives them for a store's rows."""
    fitted = held.fitted
    metrics = metrics_from_sums(held.sums, fitted.is_classifier, context=True)
    if fitted.is_classifier:
        metrics["auc"] = area_under_roc(held.proba, held.codes)
        metrics.update(class_metrics(held.proba, held.codes))
    return metrics


def _metrics(held, source, training_rows=False, metrics=None):
    """The metrics table: of ``metrics`` (every row of ``source``) when given, else of
    the held rows; the note says which rows and, when the other sections are on a
    sample of them, so."""
    sample = len(held.y)
    metrics = held_out_metrics(held) if metrics is None else metrics
    named = dict(_CLASS_METRICS) if held.fitted.is_classifier else {}
    rows = [(k, v) for k, v in metrics.items() if k not in named and k != "columns"]
    for key, label in named.items():
        value = metrics.get(key)
        rows.append((label, "n/a (one class)" if value is None else value))
    where = f"on {source}, " if source else ""
    heading = ("Metrics on the training rows (not held out)" if training_rows
               else "Held-out metrics")
    said = f"{where}all {metrics['rows']} rows (the metrics of saspa evaluate)"
    if metrics["rows"] != sample:
        said += f"; the sections below are on a seeded sample of {sample} of them"
    return section(heading, note(said), table(rows))


def _learning(model, is_classifier):
    trace = getattr(model, "hyperparameter_trace_", None) or []
    held = getattr(model, "held_out_trace_", None) or []
    if not trace and not held:
        return section("Learning", note("the hyperparameters were not learnt"))
    curves = [(key, label) for key, label in _HELD_OUT_CURVES[is_classifier]
              if held and key in held[0]]
    fig, axes = figure(columns=(1 if trace else 0) + len(curves) or 1)
    if trace:
        timed = all("seconds" in r for r in trace)
        x = [r["seconds"] if timed else r.get("iteration", k) for k, r in enumerate(trace)]
        energy = [r["log_evidence"] for r in trace]
        axes[0].plot(x, energy, ".-")
        readable_range(axes[0], energy)
        axes[0].set(xlabel="seconds" if timed else "iteration",
                    ylabel="energy (log Z_EP)", title="Energy")
        if not timed:
            integer_ticks(axes[0].xaxis)
    for ax, (key, label) in zip(axes[1 if trace else 0:], curves):
        values = [r[key] for r in held]
        ax.plot([r["seconds"] for r in held], values, "o-")
        readable_range(ax, values)
        ax.set(xlabel="seconds", ylabel=f"held-out {label}", title=f"Held-out {key}")
    info = getattr(model, "hyperparameter_info_", None) or {}
    rows = [(k.replace("_", " "), info[k]) for k in
            ("message", "n_iterations", "n_evaluations", "n_rows_learnt") if k in info]
    return section("Learning", image(fig, "learning curve"),
                   note("each curve's range is at least 5% of its values: a flat curve "
                        "did not move"), table(rows))


def _ep_diagnostics(model):
    history = getattr(model, "history_", None) or []
    counts = [(name.rstrip("_").replace("_", " "), getattr(model, name)) for name in
              ("ep_stop_reason_", "n_sweeps_", "n_invalid_cavities_", "n_skipped_updates_",
               "n_damping_halvings_", "n_damping_reductions_", "n_anderson_steps_",
               "n_anderson_restarts_", "jitter_") if getattr(model, name, None) is not None]
    parts = []
    if history:
        fig, (ax,) = figure(height=3.0)
        ax.semilogy([r["sweep"] for r in history],
                    [max(r["change"], 1e-300) for r in history], "o-")
        integer_ticks(ax.xaxis)
        ax.set(xlabel="sweep", ylabel="largest site change", title="EP on all rows")
        parts.append(image(fig, "EP site changes per sweep"))
    if not counts and not parts:
        return ""
    return section("EP", *parts, table(counts))


def _drift(drift):
    if not drift:
        return ""
    rows = [(column, value if not isinstance(value, dict) else
             ", ".join(f"{k} {v}" for k, v in value.items()))
            for column, value in drift.items()]
    return section("Drift of the rows shown", table(rows))


def _input_names(model, fitted):
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        names = fitted.feature_names
    d = fitted.means.shape[1]
    return [f"x{j}" for j in range(d)] if names is None else [str(n) for n in names]
