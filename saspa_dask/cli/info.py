"""``saspa info``'s text: a model store's or a data store's summary
(:func:`saspa_dask.jobs.describe`), one line a topic."""

from __future__ import annotations

import click

__all__ = ["print_data_summary", "print_summary"]

# what learn_bases moved, for frequency features (saspa info)
_LEARNT_PARTS = {
    ("fourier", "means"): "means (centres, frequencies, phases)",
    ("fourier", "means+blur"): "means+blur (centres, frequencies, phases, window)",
    ("fourier-global", "means"): "means (frequencies, phases)",
    ("fourier-global", "means+blur"): "means+blur (frequencies, phases, window)",
}


# a line lists at most this many items (columns, lengthscales) and a topic's entry at
# most this many characters; --json gives every one (a wide one-hot table's columns
# and categories were thousands of characters on one line)
_SHOWN_ITEMS = 24
_SHOWN_CHARS = 240


def _abridged(items):
    """``items`` joined by commas, the middle left out past :data:`_SHOWN_ITEMS`."""
    items = list(items)
    if len(items) <= _SHOWN_ITEMS:
        return ", ".join(items)
    head = items[:_SHOWN_ITEMS - 4]
    return ", ".join([*head, "...", *items[-4:]]) + f" ({len(items)} in all; --json lists all)"


def _cut(text):
    """``text`` cut to :data:`_SHOWN_CHARS` characters."""
    text = str(text)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "... (--json for all)"


def print_data_summary(summary):
    """Print a data store's summary (``kind`` "data store") line by line."""
    def line(key, value):
        click.echo(f"{key:>17}: {value}")

    line("data store", summary["path"] + ("" if summary["complete"] else
                                          "  (INCOMPLETE: its ingest did not finish)"))
    rows, chunk = summary["rows"], summary["chunk_rows"]
    chunks = -(-rows // chunk) if rows and chunk else 0
    line("rows", f"{rows} x {summary['inputs']} inputs in {chunks} chunk(s) of up to "
                 f"{chunk} rows" + (", ids kept" if summary["ids"] else ""))
    line("columns", _abridged(summary["columns"] or []) or "not recorded")
    target = summary["target"]
    classes = summary["target_classes"]
    line("target", "none (rows to score)" if target is None else
         str(target) + (f" (classes {', '.join(map(str, classes))})" if classes else ""))
    for key in ("source", "split", "preprocessing", "drift", "notes", "fingerprint"):
        if summary[key]:
            line(key, _cut(summary[key]) if not isinstance(summary[key], dict) else
                 ", ".join(_cut(f"{k} {v}") for k, v in summary[key].items()))


def print_summary(summary, metrics_line):
    """Print ``summary`` line by line; ``metrics_line`` formats held-out metrics."""
    for key in ("estimator", "task", "n_training_rows", "n_features_in", "n_bases", "blur",
                "kernel_type", "likelihood", "log_evidence", "columns", "target", "class_labels",
                "data_fingerprint"):
        value = summary[key]
        click.echo(f"{key:>17}: " + (_abridged(value) if key == "columns" and value
                                     else _cut(value)))
        if key == "likelihood" and summary.get("log_target"):
            click.echo(f"{'target scale':>17}: log(y): the model fits log(y) (its noise "
                       "variance is of log(y); predictions, intervals and metrics are "
                       "of y, log-normal)")
    if summary["lengthscale"] is not None:
        values, columns = summary["lengthscale"], summary["columns"]
        values = values if isinstance(values, list) else [values]
        if columns is not None and len(columns) == len(values):  # said by column name
            shown = _abridged(f"{c} {v:.4g}" for c, v in zip(columns, values))
        else:
            shown = _abridged(f"{v:.4g}" for v in values)
        click.echo(f"{'lengthscales':>17}: {shown}")
    if summary.get("kernel_terms"):  # an additive kernel's terms and weights
        click.echo(f"{'kernel terms':>17}: " + "; ".join(
            f"{t['inputs']} {t['weight']:.3g}" for t in summary["kernel_terms"]))
    seconds = summary["train_seconds"]
    click.echo(f"{'training time':>17}: "
               + ("not recorded" if seconds is None else f"{seconds:.1f}s"))
    if summary.get("test_metrics"):
        click.echo(f"{'held out':>17}: {metrics_line(summary['test_metrics'])}")
    cv = summary.get("cv_metrics")
    if cv:
        click.echo(f"{'cross-validation':>17}: {cv['k']} folds (seed {cv['seed']}): " + ", ".join(
            f"{key} {cv['mean'][key]:.5g} (sd {cv['std'][key]:.2g})" for key in cv["mean"]))
    for record in summary.get("held_out_trace") or []:  # the metric against time
        shown = ", ".join(f"{k} {record[k]:.5g}" for k in
                          ("error", "nlp", "rmse", "mae", "nlpd") if k in record)
        where = record["stage"] + ("" if record["iteration"] is None
                                   else f", iteration {record['iteration']}")
        click.echo(f"{'at ' + format(record['seconds'], '.1f') + 's':>17}: {shown} "
                   f"({where}, {record['rows']} rows)")
    km = summary["kmeans"]
    not_run = ("not run (features on the inputs' mean)"
               if summary.get("features_on_one_centre") else "not run (bases given)")
    click.echo(f"{'k-means':>17}: " + (not_run if km is None else
                                       f"converged {km['converged']}, {km['n_iter']} "
                                       "iterations"))
    if summary["approximation"] is not None:
        power = ("EP" if summary["alpha"] == 1.0 else
                 f"power EP, alpha {summary['alpha']:g}")
        click.echo(f"{'approximation':>17}: {summary['approximation']}, {power}")
    ep = summary["ep"]
    settled = " (predictions settled)" if ep.get("stop_reason") == "predictions" else ""
    click.echo(f"{'ep':>17}: {ep['mode']}, damping {ep['damping']}, {ep['n_sweeps']} sweeps, "
               f"converged {ep['converged']}{settled}, invalid cavities "
               f"{ep['n_invalid_cavities']}")
    click.echo(f"{'kernel':>17}: signal variance {summary['kernel']['signal_variance']:.4g}, "
               f"jitter {summary['kernel']['jitter']:.3g}")
    _print_learning(summary)


def _print_learning(summary):
    """The hyperparameters' lines: how learning went, its start and stages."""
    hyper = summary["hyperparameters"]
    if hyper["optimized"]:
        info = hyper["info"]
        line = f"learnt ({hyper.get('learning')}), {info.get('n_iterations')} iterations"
        if "n_rows_learnt" in info:  # not recorded by older versions
            bases = _LEARNT_PARTS.get((summary["blur"], info["learn_bases"]),
                                      info["learn_bases"] or "no")
            line += f", on {info['n_rows_learnt']} rows, bases learnt: {bases}"
        if "log_evidence_start" in info:  # not recorded by older versions
            stopped = (info["message"] if "stop_reason" in info
                       else f"stopped at the cap {info['hit_iteration_cap']}")
            line += (f", log evidence {info['log_evidence_start']:.6g} -> "
                     f"{info['log_evidence_end']:.6g}, {stopped}, on a bound: "
                     f"{', '.join(info['at_bounds']) or 'none'}")
        click.echo(f"{'hyperparameters':>17}: {line}")
        start = info.get("start")
        if start is not None and "learning_start" in start:
            click.echo(f"{'learning start':>17}: {start['learning_start']}, kept the "
                       f"{start['kept']} start (log evidence " + ", ".join(
                           f"{name} {_or_nan(fit['log_evidence']):.6g}"
                           for name, fit in start["fits"].items()) + ")")
        if start is not None and "method" in start:
            checked = (f"; checked after learning: ended at {start['energy_learnt']:.6g}, "
                       f"{start['energy_at_exact_start']:.6g} at the exact GP's start"
                       if start.get("checked_after_learning") else "")
            click.echo(f"{'start':>17}: " + (
                f"an exact GP on {start['rows']} rows, {start['iterations']} iterations, "
                f"{start['seconds']:.1f}s" if start["method"] == "exact-gp"
                else f"the data-driven values ({start['reason']})") + checked)
        for k, stage in enumerate(info.get("stages", [])):
            click.echo(f"{'stage ' + str(k):>17}: {stage['rows']} rows on the "
                       f"{stage['where']}, {stage['n_iterations']} iterations, "
                       f"{stage['gain_per_row']:.3g} nats per row gained, "
                       f"{stage['seconds']:.1f}s")
    else:
        click.echo(f"{'hyperparameters':>17}: fixed (not learnt)")


def _or_nan(value):
    """A recorded number, NaN where the record has none (None)."""
    return float("nan") if value is None else value
