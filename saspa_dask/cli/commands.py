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

import json
import os
import sys
import time
from pathlib import Path

import click

from .._version import __version__
from ..parameters import BLUR_CHOICES, RETRAIN_PARAMETERS, TRAIN_PARAMETERS
from .info import print_summary
from .options import (SweepReporter, cluster_options, echo, job_errors, parameter_options,
                      take_old_flags)

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
    and the client's "Sending large graph" warning ignored."""
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


@main.command()
@click.option("--csv", "csv_path", type=click.Path(exists=True, dir_okay=False),
              help="Numeric CSV with a header (default: generated data).")
@click.option("--target", help="Label column of --csv (default: the last).")
@click.option("--rows", default=20_000, show_default=True, help="Generated rows.")
@click.option("--features", default=8, show_default=True, help="Generated inputs.")
@click.option("--n-bases", "n_bases", default=64, show_default=True, help="Basis points M.")
@click.option("--bases", "old_bases", type=int, hidden=True, deprecated="use --n-bases")
@click.option("--blur", default="full", show_default=True,
              type=click.Choice(BLUR_CHOICES),
              help="Basis blur: delta (FITC/SPGP), spherical, diagonal or full (SASPA-full); "
                   "fourier or fourier-global for frequency features (TFIFGP, FIFGP).")
@click.option("--likelihood", default="probit", show_default=True,
              type=click.Choice(["probit", "step"]), help="Classification likelihood.")
@click.option("--ep-mode", default="parallel", show_default=True,
              type=click.Choice(["parallel", "sequential"]),
              help="Parallel (all sites per sweep) or sequential EP updates.")
@click.option("--optimize-hyperparameters/--no-optimize-hyperparameters",
              " /--fixed-hyperparameters", default=False, show_default=True,
              help="Maximise the EP evidence over the hyperparameters.")
@click.option("--test-fraction", default=0.3, show_default=True,
              help="Share of the rows held out for the reported test metrics.")
@click.option("--seed", default=0, show_default=True, help="Seed of the split and K-means.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@job_errors
def demo(csv_path, target, rows, features, n_bases, old_bases, blur, likelihood, ep_mode,
         optimize_hyperparameters, test_fraction, seed, as_json):
    """Fit SASPA in memory on generated (or CSV) data and report test error."""
    from .. import jobs

    report = jobs.demo(csv_path, target, rows=rows, features=features,
                       n_bases=n_bases if old_bases is None else old_bases, blur=blur,
                       likelihood=likelihood, ep_mode=ep_mode,
                       optimize_hyperparameters=optimize_hyperparameters,
                       test_fraction=test_fraction, seed=seed, verbose=int(not as_json),
                       echo=echo)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            click.echo(f"{key:>17}: {value}")
    if not report["converged"]:
        sys.exit(3)


@main.command("make-data")
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--rows", default=200_000, show_default=True, help="Rows to generate.")
@click.option("--features", default=8, show_default=True, help="Input columns.")
@click.option("--seed", default=0, show_default=True, help="Generator seed.")
@click.option("--kind", default="two-class", show_default=True,
              type=click.Choice(["two-class", "multiscale-regression"]),
              help="two-class: two Gaussian classes with full covariances (0/1 label); "
                   "multiscale-regression: structure at several length scales, inputs 7 "
                   "and beyond irrelevant, noise std 0.1 of the signal's (needs "
                   "--features >= 8).")
def make_data(out, rows, features, seed, kind):
    """Write generated data (inputs, then the label or target column) to OUT.npy."""
    import numpy as np

    from ..datasets import multiscale_regression, synthetic_two_class

    if kind == "two-class":
        X, y = synthetic_two_class(rows, features, seed)
    elif features < 8:
        raise click.UsageError("multiscale-regression needs --features >= 8")
    else:
        X, y, _ = multiscale_regression(rows, features, seed)
    path = Path(out)
    tmp = path.with_name(f".{path.name}.partial.npy")
    np.save(tmp, np.column_stack([X, y]))
    tmp.replace(path)
    click.echo(f"wrote {rows} x {features} inputs + {'label' if kind == 'two-class' else 'target'}"
               f" to {path}")


@main.command("ingest")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, type=click.Path(), help="Data store to create.")
@click.option("--target", help="Target column: its name (an exact name wins), else its index "
              "(default: the last column).")
@click.option("--chunk-rows", default=65536, show_default=True, type=click.IntRange(1),
              help="Rows per zarr chunk (one task per chunk on the cluster).")
@click.option("--missing", default="error", show_default=True,
              type=click.Choice(["error", "drop-rows", "impute"]),
              help="Missing or non-finite values: an error naming the columns, drop the "
                   "rows holding them, or impute (a number column's median, a text "
                   "column's '(missing)' category; recorded and reapplied by --like).")
@click.option("--text", default="error", show_default=True,
              type=click.Choice(["error", "onehot", "drop"]),
              help="Text input columns: an error naming them, one-hot encode, or drop.")
@click.option("--id-column", help="A column of row ids: kept out of the inputs, stored "
              "with each row and carried by split, score, predict and export.")
@click.option("--exclude", multiple=True, metavar="NAME",
              help="A column to leave out (repeat for several).")
@click.option("--delimiter", help="CSV field delimiter (default: the most frequent of , ; "
              "tab | in the header line).")
@click.option("--like", "like", type=click.Path(exists=True, file_okay=False),
              help="Encode SOURCE exactly as this data store was encoded (same columns, "
                   "categories, target labels, id column, missing-value rule and "
                   "imputation values) and count the drift from it: new data to score or "
                   "evaluate with a model trained on it.")
@click.option("--unknown", default="error", show_default=True,
              type=click.Choice(["error", "ignore"]),
              help="With --like: a category the --like store never saw is an error, or "
                   "(ignore) all zeros, counted as drift.")
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
@job_errors
def ingest_command(source, out, target, chunk_rows, missing, text, id_column, exclude,
                   delimiter, like, unknown, overwrite):
    """Stream a CSV, Parquet or .npy file into a chunked zarr data store."""
    from .. import jobs

    if like and (target or missing != "error" or text != "error" or id_column or exclude):
        raise click.UsageError("--like takes the target, --missing, --text, --id-column and "
                               "--exclude from the --like store; do not give them too")
    start = time.perf_counter()
    attrs = jobs.ingest(source, out, target=target, chunk_rows=chunk_rows, missing=missing,
                        text=text, overwrite=overwrite, like=like, unknown=unknown,
                        id_column=id_column, exclude=exclude, delimiter=delimiter)
    for note in attrs.get("notes", []):
        echo(f"note: {note}")
    for line in drift_lines(attrs.get("drift") or {}):
        echo(line)
    pre = attrs["preprocessing"]
    target_text = (f"target {attrs['target']!r}" if attrs.get("has_target", True)
                   else "no target column (data to score)")
    imputed = sum((pre.get("values_imputed") or {}).values())
    click.echo(f"ingested {attrs['n_rows']} rows x {len(attrs['columns'])} inputs into {out} "
               f"({time.perf_counter() - start:.1f}s; {target_text}, "
               f"{pre.get('rows_dropped_for_missing', 0)} rows dropped"
               f"{f', {imputed} values imputed' if imputed else ''}"
               f"{', encoded like ' + str(like) if like else ''})")


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
@click.argument("store", type=click.Path(exists=True, file_okay=False))
@click.option("--test-fraction", default=0.2, show_default=True,
              type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Probability that a row goes to the test store.")
@click.option("--seed", default=0, show_default=True, help="Seed of the row assignment.")
@click.option("--train-out", type=click.Path(),
              help="Training store to write (default: STORE-train.zarr beside STORE).")
@click.option("--test-out", type=click.Path(),
              help="Test store to write (default: STORE-test.zarr beside STORE).")
@click.option("--overwrite", is_flag=True, help="Replace existing stores.")
@job_errors
def split_command(store, test_fraction, seed, train_out, test_out, overwrite):
    """Split a data store into a training and a test store (chunk-wise, seeded)."""
    from .. import jobs

    result = jobs.split(store, train_out, test_out, test_fraction=test_fraction, seed=seed,
                        overwrite=overwrite)
    click.echo(f"split {store}: {result['train_rows']} training rows -> {result['train']}, "
               f"{result['test_rows']} test rows -> {result['test']} (seed {seed})")


@main.command("train")
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Model store to write.")
@click.option("--task", type=click.Choice(["classification", "regression"]),
              help="Default: inferred from the target and printed (text labels, or at most "
                   "20 distinct integer values: classification; otherwise regression).")
@click.option("--max-classes", default=100, show_default=True, type=click.IntRange(2),
              help="Refuse a classification with more classes (each is an EP problem).")
@parameter_options(TRAIN_PARAMETERS)
@click.option("--overwrite", is_flag=True, help="Replace an existing model store.")
@click.option("--latest", type=click.Path(dir_okay=False),
              help="Pointer file to update to the new model (e.g. models/latest).")
@click.option("--test", "test", type=click.Path(exists=True, file_okay=False),
              help="A held-out data store: print the model's metrics on it and record "
                   "them in the model store.")
@cluster_options
@job_errors
def train(data, out, overwrite, latest, test, cluster, **options):
    """Train a SASPA model on a zarr data store, on a Dask cluster.

    Classification with more than two classes is one-vs-rest on shared bases.
    """
    from .. import jobs

    options = take_old_flags(TRAIN_PARAMETERS, options)
    reporter = SweepReporter(options["tol"])
    try:
        result = jobs.train(data, out, overwrite=overwrite, latest=latest, test=test,
                            progress=reporter, **cluster, **options)
    finally:
        reporter.close()
    _report_model(result)


def _report_model(result):
    from ..jobs import metrics_line

    model = result["model"]
    click.echo(f"model: {result['out']}  sweeps {model.n_sweeps_}  converged "
               f"{model.converged_}  log evidence {model.log_evidence_:.6g}  invalid "
               f"cavities {model.n_invalid_cavities_}  {result['seconds']:.1f}s")
    if result.get("metrics"):
        click.echo("held out: " + metrics_line(result["metrics"]))
    if not result["converged"]:
        sys.exit(3)


@main.command("retrain")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="New model store to write.")
@click.option("--refit-bases", is_flag=True,
              help="Run K-means again (then EP starts cold: sites act on the old bases).")
@click.option("--new-rows", type=click.Choice(["update", "adf", "empty"]), default="update",
              show_default=True,
              help="Start the appended rows' sites from one EP update against the old "
                   "posterior (update), one assumed-density-filtering pass (adf, "
                   "sequential), or zero (empty).")
@parameter_options(RETRAIN_PARAMETERS, defaults={"tol": None, "anderson_memory": None,
                                               "block_rows": None, "max_hyper_iter": None,
                                               "hyper_tol": None})
@click.option("--overwrite", is_flag=True, help="Replace an existing store at --out.")
@click.option("--latest", type=click.Path(dir_okay=False),
              help="Pointer file to update to the new model.")
@click.option("--test", "test", type=click.Path(exists=True, file_okay=False),
              help="A held-out data store: print the new model's metrics on it and "
                   "record them in the model store.")
@cluster_options
@job_errors
def retrain(model_path, data, out, refit_bases, new_rows, overwrite, latest, test, cluster,
            **options):
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

    reporter = SweepReporter(options["tol"] if options["tol"] is not None else 1e-6)
    try:
        result = jobs.retrain(model_path, data, out, refit_bases=refit_bases,
                              new_rows=new_rows, overwrite=overwrite, latest=latest,
                              test=test,
                              progress=reporter, **options, **cluster)
    finally:
        reporter.close()
    _report_model(result)


@main.command("score")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(),
              help="Score store to write (zarr), or the CSV / Parquet file with --format.")
@click.option("--format", "fmt", default="zarr", show_default=True,
              type=click.Choice(["zarr", "csv", "parquet"]),
              help="zarr: a resumable score store; csv or parquet: one file (Parquet needs "
                   "pyarrow).")
@click.option("--overwrite", is_flag=True, help="Replace a complete or foreign store.")
@click.option("--escape-formulas/--no-escape-formulas", default=True, show_default=True,
              help="CSV: write text cells a spreadsheet would run as formulas (=, +, -, @ "
                   "...) with a leading ' (CSV injection).")
@cluster_options
@job_errors
def score_command(model_path, data, out, fmt, overwrite, escape_formulas, cluster):
    """Score DATA's X with MODEL (mean, variance[, proba, label | rate]).

    DATA's columns are matched to the model's by name (reordered when needed).  The
    zarr store is resumable: rerunning after an interruption writes only the missing
    chunks; it records which class each proba column is.
    """
    from .. import jobs

    start = time.perf_counter()
    result = jobs.score(model_path, data, out, overwrite=overwrite, format=fmt,
                        escape_formulas=escape_formulas, **cluster)
    click.echo(f"scores of {data}: {out} ({fmt})  {result['rows']} rows, "
               f"{result['chunks_written']} of {result['chunks_total']} chunks written this "
               f"run, {result['columns']}, {time.perf_counter() - start:.1f}s")


@main.command("predict")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("source", metavar="FILE", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", required=True, type=click.Path(),
              help="CSV or Parquet file to write: id, row, then the scores.")
@click.option("--format", "fmt", type=click.Choice(["csv", "parquet"]),
              help="Default: from --out's suffix.")
@click.option("--unknown", default="error", show_default=True,
              type=click.Choice(["error", "ignore"]),
              help="A category the training rows never had: an error, or all zeros "
                   "(counted as drift).")
@click.option("--delimiter", help="FILE's field delimiter (default: found from its header).")
@click.option("--chunk-rows", default=65536, show_default=True, type=click.IntRange(1),
              help="Rows per chunk (one scoring task each).")
@click.option("--overwrite", is_flag=True, help="Replace an existing --out file.")
@click.option("--escape-formulas/--no-escape-formulas", default=True, show_default=True,
              help="CSV: write text cells a spreadsheet would run as formulas (=, +, -, @ "
                   "...) with a leading ' (CSV injection).")
@cluster_options
@job_errors
def predict_command(model_path, source, out, fmt, unknown, delimiter, chunk_rows, overwrite,
                    escape_formulas, cluster):
    """Score a CSV or Parquet FILE with MODEL, without a separate ingest.

    FILE is encoded as MODEL's training store was (columns, categories, imputation
    values, id column); the drift from the training rows is printed.  Resumable: a
    rerun after an interruption reuses the encoded rows and the scores written.
    """
    from .. import jobs

    start = time.perf_counter()
    result = jobs.predict(model_path, source, out, unknown=unknown, delimiter=delimiter,
                          format=fmt, overwrite=overwrite, chunk_rows=chunk_rows,
                          escape_formulas=escape_formulas, **cluster)
    for note in result["notes"]:
        echo(f"note: {note}")
    for line in drift_lines(result["drift"]):
        echo(line)
    if result["restarted"]:
        echo(f"predict: started over: {result['restarted']}")
    click.echo(f"predictions for {source}: {out}  {result['rows']} rows"
               f"{' (resumed)' if result['reused'] else ''}, "
               f"{time.perf_counter() - start:.1f}s")


@main.command("evaluate")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("data", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@cluster_options
@job_errors
def evaluate_command(model_path, data, as_json, cluster):
    """Error and NLP (classification) or RMSE, MAE and NLPD (regression) on DATA.

    The metrics are of the rows of DATA (say a held-out store from ``saspa split``);
    its columns are matched to the model's by name.
    """
    from .. import jobs

    metrics = jobs.evaluate(model_path, data, **cluster)
    if as_json:
        click.echo(json.dumps(metrics))
    else:
        click.echo(jobs.metrics_line(metrics))


@main.command("run")
@click.argument("job", type=click.Path())
@click.option("--force", is_flag=True, help="Run even if the job already completed "
              "with the same inputs.")
@job_errors
def run_command(job, force):
    """Run a declarative job file (TOML): ingest / train / retrain / score / evaluate."""
    from ..pipelines import run_job

    run_job(job, force=force, echo=echo, out=click.echo)


@main.command("info")
@click.argument("model", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
@job_errors
def info(model, as_json):
    """Describe a model store."""
    from .. import jobs

    summary = jobs.describe(model)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    print_summary(summary, jobs.metrics_line)
