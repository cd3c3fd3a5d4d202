"""The ``saspa`` command: a thin click layer over :mod:`saspa_dask.jobs`.

Every command parses its options, calls the job function of the same name and prints
what it returns; ``saspa run JOB.toml`` (:mod:`saspa_dask.pipelines`) calls the same
functions.  Commands that use a cluster connect to ``--scheduler tcp://HOST:PORT`` or,
without it, start an embedded ``LocalCluster`` of ``--workers`` processes.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from pathlib import Path

import click
import numpy as np

from . import jobs
from ._version import __version__
from .datasets import multiscale_regression, synthetic_two_class
from .jobs import JobError
from .models import SASPAClassifier
from .pipelines import run_job
from .storage.csv_reader import read_rows, target_index
from .storage.errors import StoreError


def _job_errors(command):
    """A job's errors (bad options, stores, an unreachable cluster) as one clear line."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (JobError, StoreError) as err:
            raise click.ClickException(str(err)) from None

    return run


def _echo(message):
    click.echo(message, err=True)


def read_csv(path, target):
    """A small numeric CSV with a header, whole (``saspa demo``); ``target`` names the
    label column (default: the last)."""
    rows = read_rows(path)
    _, header = next(rows)
    column = target_index(header, target, path)
    features, labels = [], []
    for line, row in rows:
        try:
            features.append([float(v) for i, v in enumerate(row) if i != column])
        except ValueError as err:
            raise click.ClickException(f"{path}:{line}: not numeric ({err})") from None
        labels.append(row[column])
    return np.array(features), np.array(labels)


@click.group()
@click.version_option(__version__, prog_name="saspa")
def main():
    """Sparse Gaussian processes by SASPA expectation propagation."""


@main.command()
@click.option("--csv", "csv_path", type=click.Path(exists=True, dir_okay=False),
              help="Numeric CSV with a header (default: generated data).")
@click.option("--target", help="Label column of --csv (default: the last).")
@click.option("--rows", default=20_000, show_default=True, help="Generated rows.")
@click.option("--features", default=8, show_default=True, help="Generated inputs.")
@click.option("--bases", "n_bases", default=64, show_default=True, help="Basis points M.")
@click.option("--blur", default="full", show_default=True,
              type=click.Choice(["delta", "spherical", "diagonal", "full"]))
@click.option("--likelihood", default="probit", show_default=True,
              type=click.Choice(["probit", "step"]))
@click.option("--ep-mode", default="parallel", show_default=True,
              type=click.Choice(["parallel", "sequential"]))
@click.option("--optimize-hyperparameters/--fixed-hyperparameters", default=False,
              show_default=True, help="Maximise the EP evidence over the hyperparameters.")
@click.option("--test-fraction", default=0.3, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_job_errors
def demo(csv_path, target, rows, features, n_bases, blur, likelihood, ep_mode,
         optimize_hyperparameters, test_fraction, seed, as_json):
    """Fit SASPA in memory on generated (or CSV) data and report test error."""
    if csv_path:
        X, y = read_csv(csv_path, target)
        source = csv_path
    else:
        X, y = synthetic_two_class(rows, features, seed)
        source = f"generated two-class data ({rows} x {features})"
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    centre, spread = X[train].mean(0), X[train].std(0)
    spread[spread == 0] = 1.0
    Xs = (X - centre) / spread

    _echo(f"saspa demo: {source}; {len(train)} train / {len(test)} test rows")
    start = time.perf_counter()
    clf = SASPAClassifier(n_bases=n_bases, blur=blur, likelihood=likelihood,
                          ep_mode=ep_mode, random_state=seed, verbose=int(not as_json),
                          optimize_hyperparameters=optimize_hyperparameters)
    clf.fit(Xs[train], y[train])
    fit_seconds = time.perf_counter() - start
    report = {"train_rows": int(len(train)), "test_rows": int(len(test)),
              "n_bases": int(clf.bases_.n_bases), "blur": blur,
              **_test_metrics(clf, Xs[test], y[test]),
              "log_evidence": clf.log_evidence_, "sweeps": clf.n_sweeps_,
              "converged": bool(clf.converged_), "invalid_cavities": clf.n_invalid_cavities_,
              "jitter": clf.jitter_, "fit_seconds": round(fit_seconds, 3)}
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            click.echo(f"{key:>17}: {value}")
    if not clf.converged_:
        sys.exit(3)


def _test_metrics(clf, X, y):
    """Test error and NLP: the mean -log probability of each row's own class (any
    number of classes)."""
    proba = clf.predict_proba(X)
    codes = np.searchsorted(clf.classes_, y)
    p_true = proba[np.arange(len(y)), codes]
    return {"test_error": float(np.mean(clf.predict(X) != y)),
            "test_nlp": float(-np.mean(np.log(np.maximum(p_true, 1e-300))))}


@main.command("make-data")
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--rows", default=200_000, show_default=True)
@click.option("--features", default=8, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--kind", default="two-class", show_default=True,
              type=click.Choice(["two-class", "multiscale-regression"]),
              help="two-class: two Gaussian classes with full covariances (0/1 label); "
                   "multiscale-regression: structure at several length scales, inputs 7 "
                   "and beyond irrelevant, noise std 0.1 of the signal's (needs "
                   "--features >= 8).")
def make_data(out, rows, features, seed, kind):
    """Write generated data (inputs, then the label or target column) to OUT.npy."""
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
@click.option("--target", help="Target column name or index (default: the last column).")
@click.option("--chunk-rows", default=65536, show_default=True, type=click.IntRange(1))
@click.option("--missing", default="error", show_default=True,
              type=click.Choice(["error", "drop-rows"]))
@click.option("--text", default="error", show_default=True,
              type=click.Choice(["error", "onehot", "drop"]))
@click.option("--overwrite", is_flag=True, help="Replace an existing store.")
@_job_errors
def ingest_command(source, out, target, chunk_rows, missing, text, overwrite):
    """Stream a CSV or .npy file into a chunked zarr data store."""
    start = time.perf_counter()
    attrs = jobs.ingest(source, out, target=target, chunk_rows=chunk_rows, missing=missing,
                        text=text, overwrite=overwrite)
    click.echo(f"ingested {attrs['n_rows']} rows x {len(attrs['columns'])} inputs into {out} "
               f"({time.perf_counter() - start:.1f}s; target {attrs['target']!r}, "
               f"{attrs['preprocessing'].get('rows_dropped_for_missing', 0)} rows dropped)")


def tls_options(command):
    """--tls-ca-file / --tls-cert / --tls-key for commands that connect to a scheduler."""
    for name, text in (("--tls-key", "Client private key (PEM) for a tls:// scheduler."),
                       ("--tls-cert", "Client certificate (PEM) for a tls:// scheduler."),
                       ("--tls-ca-file", "CA certificate(s) (PEM) for a tls:// scheduler.")):
        command = click.option(name, type=click.Path(exists=True, dir_okay=False),
                               help=text)(command)
    return command


def _cluster(scheduler, workers, timeout, tls_ca_file, tls_cert, tls_key):
    return dict(scheduler=scheduler, workers=workers, timeout=timeout,
                security=jobs.tls_security(tls_ca_file, tls_cert, tls_key), echo=_echo)


class SweepReporter:
    """Per-sweep progress: a tqdm bar on a terminal, one log line a sweep otherwise.

    Shown per sweep: the undamped site change, the log evidence of the posterior the
    sweep started from (parallel mode; '-' in sequential mode, where it is computed
    once at the end), invalid cavities and seconds.
    """

    def __init__(self, max_sweeps, stream=None):
        self.stream = stream or sys.stderr
        self.bar = None
        if self.stream.isatty():
            from tqdm import tqdm

            self.bar = tqdm(total=max_sweeps, desc="EP sweeps", unit="sweep", file=self.stream)

    def __call__(self, record):
        evidence = record.get("log_evidence_start")
        evidence = "-" if evidence is None else f"{evidence:.6g}"
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(change=f"{record['change']:.2e}", evidence=evidence,
                                 invalid=record["n_invalid"])
        else:
            click.echo(f"sweep {record['sweep']:4d}  change {record['change']:.3e}  "
                       f"evidence {evidence}  invalid {record['n_invalid']}  "
                       f"{record['seconds']:.2f}s", file=self.stream)

    def close(self):
        if self.bar is not None:
            self.bar.close()


@main.command("train")
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Model store to write.")
@click.option("--task", default="classification", show_default=True,
              type=click.Choice(["classification", "regression"]))
@click.option("--bases", "n_bases", default=64, show_default=True, type=click.IntRange(1))
@click.option("--blur", default="full", show_default=True,
              type=click.Choice(["delta", "spherical", "diagonal", "full"]))
@click.option("--likelihood",
              type=click.Choice(["probit", "logistic", "step", "gaussian", "student_t",
                                 "poisson"]),
              help="Classification: probit (default), logistic or step.  Regression: "
                   "gaussian (default), student_t (robust) or poisson (counts).")
@click.option("--ep-mode", default="parallel", show_default=True,
              type=click.Choice(["parallel", "sequential"]))
@click.option("--damping", type=float, help="Site damping in (0, 1] (default: by likelihood).")
@click.option("--optimize-hyperparameters/--fixed-hyperparameters", default=False,
              show_default=True,
              help="Maximise the EP evidence over lengthscales, signal variance and the "
                   "likelihood's parameters (each optimiser step is an EP run plus a "
                   "gradient pass on the cluster).")
@click.option("--max-hyper-iter", default=20, show_default=True, type=click.IntRange(1),
              help="Cap on optimiser iterations.")
@click.option("--hyper-restarts", default=0, show_default=True, type=click.IntRange(0),
              help="Further evidence maximisations from shorter starting lengthscales; "
                   "the highest evidence is kept (n_restarts_optimizer).")
@click.option("--learn-blur-scale", is_flag=True,
              help="Also learn a multiplier of the blur covariances.")
@click.option("--learn-bases", default="none", show_default=True,
              type=click.Choice(["none", "means", "means+blur"]),
              help="Also learn the basis means (and each basis's blur) by the EP evidence; "
                   "implies --optimize-hyperparameters.")
@click.option("--hyper-subsample", default=20000, show_default=True, type=click.IntRange(1),
              help="Learn hyperparameters and bases on a seeded uniform subsample of this "
                   "many rows when the data has more, then run EP on all rows.")
@click.option("--max-sweeps", default=100, show_default=True, type=click.IntRange(1))
@click.option("--tol", default=1e-6, show_default=True, type=float)
@click.option("--lengthscale", type=float, help="One lengthscale for every input.")
@click.option("--signal-variance", type=float)
@click.option("--noise-variance", type=float, help="Regression noise variance.")
@click.option("--label-noise", default=0.01, show_default=True, type=float,
              help="Step likelihood label noise.")
@click.option("--dof", default=4.0, show_default=True, type=float,
              help="Student-t degrees of freedom.")
@click.option("--scale", type=float, help="Student-t scale (default from the targets).")
@click.option("--seed", default=0, show_default=True, help="K-means seed.")
@click.option("--cache", default="memory", show_default=True,
              type=click.Choice(["memory", "none"]),
              help="Keep whitened chunk blocks in worker memory between sweeps.")
@click.option("--work-dir", type=click.Path(),
              help="Directory for site arrays during training (default: beside --out).")
@click.option("--scheduler", help="Address of a running Dask scheduler, tcp://HOST:PORT.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1),
              help="Workers of the embedded LocalCluster (without --scheduler).")
@click.option("--timeout", default=10, show_default=True, type=click.IntRange(1),
              help="Seconds to wait for --scheduler.")
@click.option("--coarse-start/--cold-start", default=True, show_default=True,
              help="Start parallel EP from EP on every 10th chunk (recursively), scaled to "
                   "all rows; the fixed point is the same.")
@click.option("--anderson-memory", default=3, show_default=True, type=click.IntRange(0),
              help="Sweeps remembered by Anderson acceleration of parallel EP (0: off).")
@click.option("--overwrite", is_flag=True, help="Replace an existing model store.")
@click.option("--latest", type=click.Path(dir_okay=False),
              help="Pointer file to update to the new model (e.g. models/latest).")
@tls_options
@_job_errors
def train(data, out, overwrite, latest, scheduler, workers, timeout, tls_ca_file, tls_cert,
          tls_key, **options):
    """Train a SASPA model on a zarr data store, on a Dask cluster.

    Classification with more than two classes is one-vs-rest on shared bases.
    """
    reporter = SweepReporter(options["max_sweeps"])
    try:
        result = jobs.train(data, out, overwrite=overwrite, latest=latest, progress=reporter,
                            **_cluster(scheduler, workers, timeout, tls_ca_file, tls_cert,
                                       tls_key), **options)
    finally:
        reporter.close()
    _report_model(result)


def _report_model(result):
    model = result["model"]
    click.echo(f"model: {result['out']}  sweeps {model.n_sweeps_}  converged "
               f"{model.converged_}  log evidence {model.log_evidence_:.6g}  invalid "
               f"cavities {model.n_invalid_cavities_}  {result['seconds']:.1f}s")
    if not result["converged"]:
        sys.exit(3)


@main.command("retrain")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="New model store to write.")
@click.option("--anderson-memory", type=click.IntRange(0),
              help="Sweeps remembered by Anderson acceleration (default: the old model's).")
@click.option("--refit-bases", is_flag=True,
              help="Run K-means again (then EP starts cold: sites act on the old bases).")
@click.option("--new-rows", type=click.Choice(["update", "adf", "empty"]), default="update",
              show_default=True,
              help="Start the appended rows' sites from one EP update against the old "
                   "posterior (update), one assumed-density-filtering pass (adf, "
                   "sequential), or zero (empty).")
@click.option("--max-sweeps", default=100, show_default=True, type=click.IntRange(1))
@click.option("--tol", type=float, help="Default: the old model's.")
@click.option("--cache", default="memory", show_default=True,
              type=click.Choice(["memory", "none"]))
@click.option("--work-dir", type=click.Path())
@click.option("--scheduler", help="Address of a running Dask scheduler, tcp://HOST:PORT.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1))
@click.option("--timeout", default=10, show_default=True, type=click.IntRange(1))
@click.option("--overwrite", is_flag=True, help="Replace an existing store at --out.")
@click.option("--latest", type=click.Path(dir_okay=False),
              help="Pointer file to update to the new model.")
@tls_options
@_job_errors
def retrain(model_path, data, out, anderson_memory, refit_bases, new_rows, max_sweeps, tol,
            cache, work_dir, scheduler, workers, timeout, overwrite, latest, tls_ca_file,
            tls_cert, tls_key):
    """Retrain MODEL on DATA (rows appended, labels possibly corrected), warm-started.

    Keeps the old model's bases and hyperparameters (bases refitted with
    --refit-bases); the old rows start from their stored sites, the appended rows from
    one EP update against the old posterior (--new-rows: adf for an
    assumed-density-filtering pass, empty for zero sites).  The new model is written
    aside and renamed into place; MODEL is never touched.
    """
    reporter = SweepReporter(max_sweeps)
    try:
        result = jobs.retrain(model_path, data, out, refit_bases=refit_bases,
                              new_rows=new_rows, max_sweeps=max_sweeps, tol=tol,
                              anderson_memory=anderson_memory, cache=cache,
                              work_dir=work_dir, overwrite=overwrite, latest=latest,
                              progress=reporter,
                              **_cluster(scheduler, workers, timeout, tls_ca_file, tls_cert,
                                         tls_key))
    finally:
        reporter.close()
    _report_model(result)


@main.command("score")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Score store to write.")
@click.option("--overwrite", is_flag=True, help="Replace a complete or foreign store.")
@click.option("--scheduler", help="Address of a running Dask scheduler, tcp://HOST:PORT.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1))
@click.option("--timeout", default=10, show_default=True, type=click.IntRange(1))
@tls_options
@_job_errors
def score_command(model_path, data, out, overwrite, scheduler, workers, timeout, tls_ca_file,
                  tls_cert, tls_key):
    """Score DATA's X with MODEL into a zarr store (mean, variance[, proba]).

    Resumable: rerunning after an interruption writes only the missing chunks.
    """
    start = time.perf_counter()
    result = jobs.score(model_path, data, out, overwrite=overwrite,
                        **_cluster(scheduler, workers, timeout, tls_ca_file, tls_cert, tls_key))
    click.echo(f"scores: {out}  {result['rows']} rows, {result['chunks_written']} of "
               f"{result['chunks_total']} chunks written this run, "
               f"{time.perf_counter() - start:.1f}s")


@main.command("evaluate")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("data", type=click.Path())
@click.option("--scheduler", help="Address of a running Dask scheduler, tcp://HOST:PORT.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1))
@click.option("--timeout", default=10, show_default=True, type=click.IntRange(1))
@click.option("--json", "as_json", is_flag=True)
@tls_options
@_job_errors
def evaluate_command(model_path, data, scheduler, workers, timeout, as_json, tls_ca_file,
                     tls_cert, tls_key):
    """Error and NLP (classification) or RMSE, MAE and NLPD (regression) on DATA."""
    metrics = jobs.evaluate(model_path, data,
                            **_cluster(scheduler, workers, timeout, tls_ca_file, tls_cert,
                                       tls_key))
    if as_json:
        click.echo(json.dumps(metrics))
    else:
        click.echo("  ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
                             for k, v in metrics.items()))


@main.command("run")
@click.argument("job", type=click.Path())
@click.option("--force", is_flag=True, help="Run even if the job already completed "
              "with the same inputs.")
@_job_errors
def run_command(job, force):
    """Run a declarative job file (TOML): ingest / train / retrain / score / evaluate."""
    run_job(job, force=force, echo=_echo, out=click.echo)


@main.command("info")
@click.argument("model", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
@_job_errors
def info(model, as_json):
    """Describe a model store."""
    summary = jobs.describe(model)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    for key in ("estimator", "task", "n_training_rows", "n_features_in", "n_bases", "blur",
                "likelihood", "log_evidence", "classes", "data_fingerprint"):
        click.echo(f"{key:>17}: {summary[key]}")
    ep = summary["ep"]
    click.echo(f"{'ep':>17}: {ep['mode']}, damping {ep['damping']}, {ep['n_sweeps']} sweeps, "
               f"converged {ep['converged']}, invalid cavities {ep['n_invalid_cavities']}")
    click.echo(f"{'kernel':>17}: signal variance {summary['kernel']['signal_variance']:.4g}, "
               f"jitter {summary['kernel']['jitter']:.3g}")
    hyper = summary["hyperparameters"]
    if hyper["optimized"]:
        info = hyper["info"]
        line = f"learnt, {info.get('n_iterations')} iterations"
        if "n_rows_learnt" in info:  # not recorded by older versions
            bases = info["learn_bases"] or "no"
            line += f", on {info['n_rows_learnt']} rows, bases learnt: {bases}"
        if "log_evidence_start" in info:  # not recorded by older versions
            line += (f", log evidence {info['log_evidence_start']:.6g} -> "
                     f"{info['log_evidence_end']:.6g}, stopped at the cap "
                     f"{info['hit_iteration_cap']}, on a bound: "
                     f"{', '.join(info['at_bounds']) or 'none'}")
        click.echo(f"{'hyperparameters':>17}: {line}")


if __name__ == "__main__":
    main()
