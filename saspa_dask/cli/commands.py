"""The ``saspa`` command: a thin click layer over :mod:`saspa_dask.jobs`.

Every command parses its options, calls the job function of the same name and prints
what it returns; ``saspa run JOB.toml`` (:mod:`saspa_dask.pipelines`) calls the same
functions.  Commands that use a cluster connect to ``--scheduler tcp://HOST:PORT`` or,
without it, start an embedded ``LocalCluster`` of ``--workers`` processes.

The numerical modules are imported inside the commands, so ``--help`` answers at once.
Exit codes: 0 success; 1 a clear error (one line naming the problem, an OS error with
its path, or an unexpected error: ``SASPA_DEBUG=1`` shows its traceback); 2 a usage error;
3 EP did not converge; 130 interrupted by Ctrl-C (SIGINT), 143 by SIGTERM.  An
interrupted job removes its temporary stores and leaves every existing store as it was.
"""

from __future__ import annotations

from json import dumps
import os
import sys
import time

import click

from .._version import __version__
from ..parameters import CLI_COMMANDS, COMMANDS
from .info import print_data_summary, print_summary
from .options import SweepReporter, cluster_options, command_options, echo, job_errors

__all__ = ["main"]


@click.group()
@click.version_option(__version__, prog_name="saspa")
@click.option("--verbose", "-v", is_flag=True,
              help="Show Dask's own log lines and warnings too (by default only the "
                   "tool's lines and Dask's critical errors are shown).")
def main(verbose):
    """Sparse Gaussian processes by SASPA expectation propagation."""
    if not verbose:
        quiet_dask()


# What a normal run would otherwise print from Dask: scheduler and nanny warnings
# ("Detected different run_spec", "Worker process still alive after 4.0 seconds,
# killing"), the client's large-graph warning, a worker's heartbeat traceback while the
# cluster closes.  Failures reach the user as the job's own errors.
DASK_LOG_LEVEL = "critical"


def quiet_dask():
    """Dask's loggers at :data:`DASK_LOG_LEVEL`, here and in the worker processes an
    embedded cluster starts (they read the environment when they import distributed),
    the client's "Sending large graph" warning ignored, and warnings printed as one
    ``warning:`` line each."""
    import warnings

    import logging

    # distributed.client has a level of its own (warning), set when distributed is
    # imported: the whole logging table is given, so it is quiet too
    levels = {name: DASK_LOG_LEVEL for name in ("distributed", "distributed.client",
                                                 "tornado", "tornado.application", "bokeh")}
    os.environ["DASK_LOGGING"] = repr(levels)
    for name in (*levels, "asyncio"):
        logging.getLogger(name).setLevel(DASK_LOG_LEVEL.upper())
    warnings.filterwarnings("ignore", message=r"\s*Sending large graph",
                            category=UserWarning)
    # multiprocessing's resource tracker (a process of its own, started for the embedded
    # cluster's nannies) warns at exit about "leaked" semaphores of nannies that a
    # SIGTERM caught starting, then unlinks them: noise after the job's own interrupt
    # line.  It takes its warning filters from sys.warnoptions when it starts.
    tracker = "ignore::UserWarning:multiprocessing.resource_tracker"
    if tracker not in sys.warnoptions:
        sys.warnoptions.append(tracker)
    warnings.formatwarning = _warning_line


def _warning_line(message, category, filename, lineno, line=None):
    """A warning as one job line, like the job's own (``--verbose`` keeps Python's
    form, with the source line)."""
    return f"warning: {message} ({category.__name__})\n"


@main.command()
@command_options(CLI_COMMANDS["demo"])
@job_errors
def demo(json, **options):
    """Fit SASPA in memory on generated (or CSV) data and report test error (the
    classifier's options and defaults are saspa train's)."""
    from .. import jobs

    report = jobs.demo(**options, verbose=int(not json), echo=echo)
    if json:
        click.echo(dumps(report, indent=2))
    else:
        for key, value in report.items():
            click.echo(f"{key:>17}: {value}")
    if not report["converged"]:
        sys.exit(3)


@main.command("make-data")
@command_options(CLI_COMMANDS["make-data"])
@job_errors
def make_data(out, rows, features, seed, kind, overwrite):
    """Write generated data (inputs, then the label or target column) to OUT.npy."""
    from .. import jobs

    path = jobs.make_data(out, rows=rows, features=features, seed=seed, kind=kind,
                          overwrite=overwrite)
    click.echo(f"wrote {rows} x {features} inputs + "
               f"{'label' if kind == 'two-class' else 'target'} to {path}")


@main.command("ingest")
@command_options(COMMANDS["ingest"])
@job_errors
def ingest_command(**options):
    """Stream a CSV, Parquet or .npy file into a chunked zarr data store."""
    from .. import jobs

    start, out = time.perf_counter(), options["out"]
    attrs = jobs.ingest(**options)
    for note in attrs.get("notes", []):
        echo(f"note: {note}")
    for line in drift_lines(attrs.get("drift") or {}):
        echo(line)
    pre = attrs["preprocessing"]
    for line in missing_token_lines(pre.get("missing_tokens") or {}):
        echo(line)
    target_text = (f"target {attrs['target']!r}" if attrs.get("has_target", True)
                   else "no target column (data to score)")
    imputed = sum((pre.get("values_imputed") or {}).values())
    click.echo(f"ingested {attrs['n_rows']} rows x {len(attrs['columns'])} inputs into {out} "
               f"({time.perf_counter() - start:.1f}s; {target_text}, "
               f"{pre.get('rows_dropped_for_missing', 0)} rows dropped"
               f"{f', {imputed} values imputed' if imputed else ''}"
               + (f", encoded like {options['like']}" if options["like"] else "") + ")")


def missing_token_lines(tokens, most=20):
    """What was read as missing, one line per column (at most ``most`` columns)."""
    lines = [f"missing values: column {name!r}: " + ", ".join(
        f"{token!r} in {rows} row{'s' if rows != 1 else ''}" for token, rows in seen.items())
        for name, seen in list(tokens.items())[:most]]
    if len(tokens) > most:
        lines.append(f"missing values: and in {len(tokens) - most} more columns")
    return lines


def drift_lines(drift):
    """One line per drifted column of a ``--like`` ingest."""
    lines = []
    for name, entry in drift.items():
        parts = []
        if entry.get("unseen_categories"):
            parts.append(f"{entry['unseen_categories']} rows with unseen categories")
        if entry.get("below_range") or entry.get("above_range"):
            parts.append(f"{entry['below_range']} below and {entry['above_range']} above "
                         "the training range")
        if "missing" in entry:
            old = entry["training_missing_rate"]
            parts.append(f"missing {entry['missing_rate']:.2%}"
                         + ("" if old is None else f" (training {old:.2%})"))
        lines.append(f"drift: column {name!r}: " + "; ".join(parts))
    return lines


@main.command("split")
@command_options(COMMANDS["split"])
@job_errors
def split_command(**options):
    """Split a data store into a training and a test store (chunk-wise, seeded)."""
    from .. import jobs

    result = jobs.split(**options)
    click.echo(f"split {options['store']}: {result['train_rows']} training rows -> "
               f"{result['train']}, {result['test_rows']} test rows -> {result['test']} "
               f"(seed {options['seed']})")


@main.command("export")
@command_options(COMMANDS["export"])
@job_errors
def export_command(**options):
    """Write a data store's rows to CSV or Parquet: ids, row numbers, inputs, target.

    The inputs as encoded (what a model sees), or with --decode the source's columns
    back; the same split's rows for a baseline run elsewhere.
    """
    from .. import jobs

    result = jobs.export(**options)
    click.echo(f"exported {result['rows']} rows x {len(result['columns'])} columns of "
               f"{options['store']} -> {result['out']}")


@main.command("train")
@command_options(COMMANDS["train"])
@cluster_options
@job_errors
def train(cluster, json, **options):
    """Train a SASPA model on a zarr data store, on a Dask cluster.

    Classification with more than two classes is one-vs-rest on shared bases.
    """
    from .. import jobs

    _report_model(_with_sweeps(jobs.train, options["tol"], **cluster, **options), json)


def _report_model(result, as_json=False):
    from ..fitting.learning_advice import learning_state
    from ..jobs import metrics_line

    model = result["model"]
    learning = learning_state(getattr(model, "hyperparameter_info_", None))
    if as_json:
        click.echo(dumps({
            "out": str(result["out"]), "seconds": result["seconds"],
            "converged": bool(result["converged"]), "learning": learning,
            "cv": result.get("cv"),
            "n_sweeps": int(model.n_sweeps_),
            "log_evidence": float(model.log_evidence_),
            "n_invalid_cavities": int(model.n_invalid_cavities_),
            "metrics": result.get("metrics")}))
    else:
        click.echo(f"model: {result['out']}  sweeps {model.n_sweeps_}  EP converged "
                   f"{model.converged_}  learning {learning}  log evidence "
                   f"{model.log_evidence_:.6g}  invalid cavities "
                   f"{model.n_invalid_cavities_}  {result['seconds']:.1f}s")
        if result.get("metrics"):
            click.echo("held out: " + metrics_line(result["metrics"]))
        if result.get("cv"):
            from ..jobs.cross_validation import cv_lines

            click.echo(cv_lines(result["cv"])[-1])
    if not result["converged"]:
        sys.exit(3)


@main.command("retrain")
@command_options(COMMANDS["retrain"])
@cluster_options
@job_errors
def retrain(cluster, json, **options):
    """Retrain MODEL on DATA (rows appended, labels possibly corrected), warm-started.

    Starts from the old model's bases and hyperparameters (bases refitted with
    --refit-bases) and learns them again from there (--fixed-hyperparameters keeps
    them); the old rows start from their stored sites, the appended rows from
    one EP update against the old posterior (--new-rows: adf for an
    assumed-density-filtering pass, empty for zero sites).  The new model is written
    aside and renamed into place; MODEL is never touched.  --tol, --anderson-memory
    and --block-rows default to the old model's.
    """
    from .. import jobs

    tol = options["tol"] if options["tol"] is not None else 1e-6
    _report_model(_with_sweeps(jobs.retrain, tol, **options, **cluster), json)


def _with_sweeps(job, sweep_tol, /, **arguments):
    """Run a training job with the sweep progress reporter."""
    verbose = click.get_current_context().find_root().params.get("verbose", False)
    reporter = SweepReporter(sweep_tol, every_sweep=verbose)
    try:
        return job(progress=reporter, **arguments)
    finally:
        reporter.close()


@main.command("score")
@command_options(COMMANDS["score"])
@cluster_options
@job_errors
def score_command(cluster, **options):
    """Score DATA's X with MODEL (mean, variance[, proba, label | rate]).

    DATA's columns are matched to the model's by name (reordered when needed).  The
    zarr store is resumable: rerunning after an interruption writes only the missing
    chunks; it records which class each proba column is.
    """
    from .. import jobs

    start = time.perf_counter()
    result = jobs.score(**options, **cluster)
    click.echo(f"scores of {options['data']}: {options['out']} ({result['format']})  "
               f"{result['rows']} rows, "
               f"{result['chunks_written']} of {result['chunks_total']} chunks written this "
               f"run, {result['columns']}, {time.perf_counter() - start:.1f}s")


@main.command("predict")
@command_options(COMMANDS["predict"])
@cluster_options
@job_errors
def predict_command(cluster, **options):
    """Score a CSV or Parquet FILE with MODEL, without a separate ingest.

    FILE is encoded as MODEL's training store was (columns, categories, imputation
    values, id column); the drift from the training rows is printed.  Resumable: a
    rerun after an interruption reuses the encoded rows and the scores written.
    """
    from .. import jobs

    start = time.perf_counter()
    result = jobs.predict(**options, **cluster)
    for note in result["notes"]:
        echo(f"note: {note}")
    for line in drift_lines(result["drift"]):
        echo(line)
    if result["restarted"]:
        echo(f"predict: started over: {result['restarted']}")
    click.echo(f"predictions for {options['source']}: {options['out']}  {result['rows']} rows"
               f"{' (resumed)' if result['reused'] else ''}, "
               f"{time.perf_counter() - start:.1f}s")


@main.command("evaluate")
@command_options(COMMANDS["evaluate"])
@cluster_options
@job_errors
def evaluate_command(json, cluster, **options):
    """Error and NLP (classification) or RMSE, MAE and NLPD (regression) on DATA.

    The metrics are of the rows of DATA (say a held-out store from ``saspa split``);
    its columns are matched to the model's by name.
    """
    from .. import jobs

    metrics = jobs.evaluate(**options, **cluster)
    if json:
        click.echo(dumps(metrics))
    else:
        click.echo(jobs.metrics_line(metrics))


@main.command("report")
@command_options(COMMANDS["report"])
@job_errors
def report_command(**options):
    """An HTML page on MODEL, with plots: calibration (reliability or interval
    coverage), learning, input relevances, residuals, EP diagnostics, drift.

    With DATA (a store with targets, its columns matched to the model's by name) the
    metrics are of all its rows (those of saspa evaluate) and the other held-out
    sections use a seeded sample of at most --max-rows of them; without it the page
    shows the model, its learning, relevances and EP.  The page loads nothing from
    anywhere.
    """
    from .. import jobs

    result = jobs.report(**options)
    rows = ""
    if options["data"]:
        sample = ("" if result["sample_rows"] == result["rows"] else
                  f", the plots on a sample of {result['sample_rows']}")
        rows = f" (metrics on all {result['rows']} rows of {options['data']}{sample})"
    click.echo(f"report: {result['out']}{rows}")


@main.command("run")
@command_options(CLI_COMMANDS["run"])
@job_errors
def run_command(job, force, json):
    """Run a declarative job file (TOML): ingest, split, train, retrain, score,
    predict, evaluate and report steps, then a table of the steps run."""
    from ..pipelines import run_job

    result = run_job(job, force=force, echo=echo, out=echo if json else click.echo)
    if json:
        click.echo(dumps(result))


@main.command("info")
@command_options(CLI_COMMANDS["info"])
@job_errors
def info(store, json):
    """Describe a model store (or a latest pointer), or a data store."""
    from .. import jobs

    summary = jobs.describe(store)
    if json:
        click.echo(dumps(summary, indent=2))
    elif summary.get("kind") == "data store":
        print_data_summary(summary)
    else:
        print_summary(summary, jobs.metrics_line)
