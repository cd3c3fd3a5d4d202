"""A model store's summary (``saspa info``, :func:`saspa_dask.jobs.describe`)."""

from __future__ import annotations

import json


from ..core.blur_families import BASIS_FAMILIES, blur_family
from ..fitting.learning_advice import learning_state
from ..fitting.posterior import label_text
from .model_reader import read_fitted_posterior, read_model_attrs, report_of

__all__ = ["class_labels", "describe_model", "named_kernel_terms"]


def class_labels(attrs):
    """The original label of each class: the training store's text labels when the
    model's classes are their codes, else the classes themselves."""
    classes, labels = attrs.get("classes"), attrs.get("target_classes")
    if classes is None:
        return None
    if labels is None:
        return [label_text(c) for c in classes]
    try:
        return [str(labels[int(c)]) for c in classes]
    except (IndexError, TypeError, ValueError):
        return [label_text(c) for c in classes]


def _ep_mode(attrs):
    """How EP ran: the ``ep`` settings (format 4), the flat ``ep_mode`` (format 3),
    the ``ep`` record (format 2); "adf" for the one-pass estimators."""
    params = attrs["params"]
    if attrs["format_version"] < 3:
        return attrs["ep"].get("mode")
    flat = params.get("ep_mode")  # a full GP's (deprecated since ``ep``)
    if flat is not None and flat != "deprecated":
        return flat
    if "ep" in params:  # a settings record, a dict of some fields, or None
        ep = params["ep"] if isinstance(params["ep"], dict) else {}
        return ep.get("fields", ep).get("mode", "parallel")
    return None  # the one-pass estimators


def describe_model(path):
    """A JSON-able summary of a model store (for ``saspa info``), read and checked as
    scoring reads it (its checksum included)."""
    read_fitted_posterior(path)
    group, attrs = read_model_attrs(path)
    report = report_of(attrs)
    summary = {k: attrs.get(k) for k in ("estimator", "task", "n_features_in", "n_bases",
                                         "kernel", "likelihood", "classes", "versions")}
    new = attrs["format_version"] >= 3
    params = attrs["params"]
    summary["blur"] = params.get("blur", "delta") if new else attrs.get("blur")
    if summary["blur"] == "auto":  # what the fit chose
        summary["blur"] = report.get("blur_", "auto")
    # the sparse prior and EP's power of a SASPA model (older stores: a dtc flag, no
    # alpha: EP); None for the estimators without them
    approximation = params.get("approximation")
    if approximation is None and ("dtc" in params or not new):
        approximation = "dtc" if params.get("dtc") else "fitc"
    summary["approximation"] = approximation
    summary["alpha"] = None if approximation is None else float(params.get("alpha", 1.0))
    summary["ep"] = {"mode": _ep_mode(attrs),
                     "damping": report.get("damping_"), "n_sweeps": report.get("n_sweeps_"),
                     "converged": report.get("converged_"),
                     "stop_reason": report.get("ep_stop_reason_"),
                     "n_invalid_cavities": report.get("n_invalid_cavities_"),
                     "n_anderson_steps": report.get("n_anderson_steps_", 0)}
    summary["log_evidence"] = report.get("log_evidence_")
    summary["data_fingerprint"] = report.get("data_fingerprint_")
    trace = report.get("hyperparameter_trace_", [])
    summary["hyperparameters"] = {
        "optimized": bool(trace), "blur_scale": report.get("blur_scale_", 1.0),
        "log_evidence_per_iteration": [r["log_evidence"] for r in trace],
        "info": report.get("hyperparameter_info_", {}),
        "learning": learning_state(report.get("hyperparameter_info_"))}
    # the model fits log(y): its noise variance is of log(y), its intervals log-normal
    summary["log_target"] = bool(attrs.get("log_target", False))
    # the rows axis is the last one: one-vs-rest sites have a leading class axis
    summary["n_training_rows"] = (int(group["sites_tau"].shape[-1]) if "sites_tau" in group
                                  else report.get("n_rows_seen_"))
    summary["columns"] = attrs.get("feature_names") or attrs.get("data_columns")
    summary["target"] = attrs.get("target")
    summary["class_labels"] = class_labels(attrs)
    summary["lengthscale"] = attrs["kernel"].get("lengthscale")
    summary["kernel_type"] = attrs["kernel"].get("type", "squared_exponential_ard")
    kernel = attrs["kernel"]
    summary["kernel_terms"] = named_kernel_terms(kernel.get("additive_terms"),
                                                 kernel.get("term_weights"),
                                                 summary["columns"])
    summary["train_seconds"] = attrs.get("train_seconds")
    summary["test_metrics"] = attrs.get("test_metrics")
    summary["cv_metrics"] = attrs.get("cv_metrics")  # train --cv K: the folds' metrics
    summary["held_out_trace"] = report.get("held_out_trace_")
    kmeans = report.get("kmeans_info_")
    summary["kmeans"] = None if not kmeans else {
        k: kmeans.get(k) for k in ("converged", "n_iter", "inertia")}
    # FIFGP's features all sit on the inputs' mean: no K-means to run
    summary["features_on_one_centre"] = (summary["blur"] in BASIS_FAMILIES and
                                         not blur_family(summary["blur"]).centres_learnt)
    summary["sweeps"] = [{k: r.get(k) for k in ("sweep", "change", "log_evidence", "seconds")}
                         for r in report.get("history_", [])]
    return json.loads(json.dumps(summary, default=str))


def named_kernel_terms(terms, weights, columns):
    """An additive kernel's terms (``terms``: each input's, ``weights``: each term's),
    each named by its inputs (a text column's name when they are its one-hot columns)
    with its weight; None for one kernel."""
    if terms is None or weights is None:
        return None
    out = []
    for g, weight in enumerate(weights):
        inputs = [k for k, t in enumerate(terms) if t == g]
        names = ([str(columns[k]) for k in inputs] if columns and len(columns) == len(terms)
                 else [f"input {k}" for k in inputs])
        sources = {n.split("=", 1)[0] for n in names}
        name = (sources.pop() if len(sources) == 1 and all("=" in n for n in names)
                else ", ".join(names[:3]) + (f" and {len(names) - 3} more"
                                             if len(names) > 3 else ""))
        out.append({"inputs": name, "weight": float(weight)})
    return out
