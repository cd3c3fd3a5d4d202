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

import functools
import json
import os
import signal
import sys
import time
from pathlib import Path

import click

from ._version import __version__
from .parameters import BLUR_CHOICES, RETRAIN_PARAMETERS, TRAIN_PARAMETERS

# what learn_bases moved, for frequency features (saspa info)
_LEARNT_PARTS = {
    ("fourier", "means"): "means (centres, frequencies, phases)",
    ("fourier", "means+blur"): "means+blur (centres, frequencies, phases, window)",
    ("fourier-global", "means"): "means (frequencies, phases)",
    ("fourier-global", "means+blur"): "means+blur (frequencies, phases, window)",
}



def parameter_options(parameters, defaults=None):
    """click options for training parameters, from their one table
    (:mod:`saspa_dask.parameters`): ``--name`` (``--name/--no-name`` for a flag, with
    any further off-flags), the job default, the table's help; old flags as hidden
    deprecated options (:func:`_take_old_flags` folds them in).  ``defaults``
    overrides a command's defaults (None: the help says what None means)."""
    defaults = defaults or {}

    def decorate(command):
        for p in reversed(parameters):
            default = defaults.get(p.name, p.default_in_jobs)
            kind = click.Choice(p.choices) if p.choices else (str if p.parse else p.kind)
            for flag, dest in p.old_flag_names:
                command = click.option(flag, dest, type=kind, hidden=True,
                                       deprecated=f"use {p.flag}")(command)
            if p.kind is bool:
                decls = [f"{p.flag}/--no-{p.flag[2:]}"] + [f" /{off}" for off in p.off_flags]
                command = click.option(*decls, p.name, default=default, show_default=True,
                                       help=p.help)(command)
            else:
                command = click.option(p.flag, p.name, type=kind, default=default,
                                       show_default=default is not None,
                                       help=p.help)(command)
        return command

    return decorate


def _take_old_flags(parameters, options):
    """Fold values given by old flags (``--bases``, ``--seed`` ...) into the current
    names; click has already warned that they are deprecated."""
    for p in parameters:
        for flag, dest in p.old_flag_names:
            value = options.pop(dest, None)
            if value is not None:
                options[p.name] = value
    return options


def _job_errors(command):
    """A job's errors (bad options, stores, an unreachable cluster) as one clear line;
    SIGINT and SIGTERM unwind the job (its cleanup runs) and end in one line and exit
    130 / 143."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        from .jobs.errors import Interrupted, JobError
        from .files.errors import StoreError

        def interrupt(signum, frame):
            _quiet_shutdown()
            raise Interrupted(signal.Signals(signum).name, signum)

        previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT,
                                                                   signal.SIGTERM)}
        try:
            return command(*args, **kwargs)
        except (JobError, StoreError) as err:
            raise click.ClickException(str(err)) from None
        except OSError as err:  # read-only output, disk full, a missing directory ...
            where = f"{err.filename}: " if err.filename else ""
            raise click.ClickException(f"{where}{err.strerror or err}") from None
        except KeyboardInterrupt as err:
            name, code = ((err.signal_name, err.exit_code) if isinstance(err, Interrupted)
                          else ("SIGINT", 130))
            click.echo(f"saspa: interrupted ({name}); temporary stores removed, existing "
                       "stores left as they were", err=True)
            sys.exit(code)
        except (click.ClickException, click.exceptions.Exit, SystemExit):
            raise
        except Exception as err:  # noqa: BLE001 - the last line of defence: one line
            if os.environ.get("SASPA_DEBUG"):
                raise
            raise click.ClickException(
                f"unexpected {type(err).__name__}: {err} (run again with SASPA_DEBUG=1 for "
                "the traceback, and please report it)") from None
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    return run


def _quiet_shutdown():
    """While an interrupted job unwinds, Dask's client and the event loop log the
    cancelled work (tracebacks of AllExit, closed comms): not the user's concern."""
    import logging

    for name in ("asyncio", "distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _echo(message):
    click.echo(message, err=True)


def read_csv(path, target):
    """A small numeric CSV with a header, whole (``saspa demo``); ``target`` names the
    label column (default: the last)."""
    import numpy as np

    from .storage.column_plan import target_index
    from .storage.csv_reader import read_rows

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
    if not labels:
        raise click.ClickException(f"{path}: no data rows after the header")
    return np.array(features), np.array(labels)


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
@_job_errors
def demo(csv_path, target, rows, features, n_bases, old_bases, blur, likelihood, ep_mode,
         optimize_hyperparameters, test_fraction, seed, as_json):
    """Fit SASPA in memory on generated (or CSV) data and report test error."""
    import numpy as np

    from .datasets import synthetic_two_class
    from .models import SASPAClassifier

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
    clf = SASPAClassifier(n_bases=n_bases if old_bases is None else old_bases, blur=blur,
                          likelihood=likelihood, ep={"mode": ep_mode}, random_state=seed, verbose=int(not as_json),
                          optimize_hyperparameters=optimize_hyperparameters)
    try:
        clf.fit(Xs[train], y[train])
    except ValueError as err:  # the data cannot be fitted (one class, too few rows ...)
        raise click.ClickException(f"{source}: {err}") from None
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
    import numpy as np

    proba = clf.predict_proba(X)
    codes = np.searchsorted(clf.classes_, y)
    p_true = proba[np.arange(len(y)), codes]
    return {"test_error": float(np.mean(clf.predict(X) != y)),
            "test_nlp": float(-np.mean(np.log(np.maximum(p_true, 1e-300))))}


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

    from .datasets import multiscale_regression, synthetic_two_class

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
@_job_errors
def ingest_command(source, out, target, chunk_rows, missing, text, id_column, exclude,
                   delimiter, like, unknown, overwrite):
    """Stream a CSV, Parquet or .npy file into a chunked zarr data store."""
    from . import jobs

    if like and (target or missing != "error" or text != "error" or id_column or exclude):
        raise click.UsageError("--like takes the target, --missing, --text, --id-column and "
                               "--exclude from the --like store; do not give them too")
    start = time.perf_counter()
    attrs = jobs.ingest(source, out, target=target, chunk_rows=chunk_rows, missing=missing,
                        text=text, overwrite=overwrite, like=like, unknown=unknown,
                        id_column=id_column, exclude=exclude, delimiter=delimiter)
    for note in attrs.get("notes", []):
        _echo(f"note: {note}")
    for line in drift_lines(attrs.get("drift") or {}):
        _echo(line)
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
@_job_errors
def split_command(store, test_fraction, seed, train_out, test_out, overwrite):
    """Split a data store into a training and a test store (chunk-wise, seeded)."""
    from . import jobs

    result = jobs.split(store, train_out, test_out, test_fraction=test_fraction, seed=seed,
                        overwrite=overwrite)
    click.echo(f"split {store}: {result['train_rows']} training rows -> {result['train']}, "
               f"{result['test_rows']} test rows -> {result['test']} (seed {seed})")


_CLUSTER_OPTIONS = ("scheduler", "workers", "timeout", "dashboard", "tls_ca_file", "tls_cert",
                    "tls_key")


def cluster_options(command):
    """Where a command runs: --scheduler (or an embedded cluster of --workers,
    --dashboard), --timeout, and --tls-ca-file / --tls-cert / --tls-key for a tls://
    scheduler; the command receives them as one argument, ``cluster`` (the job
    functions' keyword arguments)."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        from .jobs.errors import JobError

        try:
            cluster = _cluster(*(kwargs.pop(k) for k in _CLUSTER_OPTIONS))
        except JobError as err:
            raise click.ClickException(str(err)) from None
        return inner(*args, cluster=cluster, **kwargs)

    inner, command = command, run
    command = click.option("--dashboard", is_flag=True,
                           help="Serve the embedded cluster's dashboard on 127.0.0.1 (any "
                                "local user can read it; off by default).")(command)
    for name, text in (("--tls-key", "Client private key (PEM) for a tls:// scheduler."),
                       ("--tls-cert", "Client certificate (PEM) for a tls:// scheduler."),
                       ("--tls-ca-file", "CA certificate(s) (PEM) for a tls:// scheduler.")):
        command = click.option(name, type=click.Path(exists=True, dir_okay=False),
                               help=text)(command)
    command = click.option("--timeout", default=10, show_default=True,
                           type=click.IntRange(1),
                           help="Seconds to wait for --scheduler to connect; a scheduler "
                                "that gives no answer for 3 times this while the job runs "
                                "is lost.")(command)
    command = click.option("--workers", type=click.IntRange(1),
                           help="Worker processes of an embedded LocalCluster (without "
                                "--scheduler). Default: 2, except that a job of at most "
                                "2,000,000 input values (rows x inputs) runs in this "
                                "process, without a cluster.")(command)
    return click.option("--scheduler",
                        help="Address of a running Dask scheduler, tcp://HOST:PORT.")(command)


def _cluster(scheduler, workers, timeout, dashboard, tls_ca_file, tls_cert, tls_key):
    from . import jobs

    return dict(scheduler=scheduler, workers=workers, timeout=timeout, dashboard=dashboard,
                security=jobs.tls_security(tls_ca_file, tls_cert, tls_key), echo=_echo)


class SweepReporter:
    """Per-sweep progress: a tqdm bar on a terminal, one log line a sweep otherwise.

    Shown per sweep: the undamped site change against the tolerance it must reach,
    invalid cavities, seconds, and for one-vs-rest which class's problem it is.  The
    bar counts sweeps without a total (EP stops when the change is below ``tol``, not
    at ``--max-sweeps``).  No evidence is shown per sweep: EP's evidence means
    something only at a fixed point (at the sites of an unfinished sweep it is not a
    bound of anything, and can be large and positive); the final line gives it.
    """

    def __init__(self, tol, stream=None):
        self.stream = stream or sys.stderr
        self.tol = tol
        self.bar = None
        self.problem = None
        self.interactive = self.stream.isatty()

    def _open(self, problem):
        from tqdm import tqdm

        if self.bar is not None:
            self.bar.close()
        desc = "EP sweeps" if problem is None else f"EP sweeps, {problem}"
        self.bar = tqdm(total=None, desc=desc, unit="sweep", file=self.stream)
        self.problem = problem

    def __call__(self, record):
        problem = record.get("problem") if record.get("n_problems", 1) > 1 else None
        if problem is not None:  # one-vs-rest: one EP problem per class, in turn
            problem = f"class {problem + 1} of {record.get('n_problems', '?')}"
        where = "" if problem is None else f"{problem}  "
        if self.interactive:
            if self.bar is None or problem != self.problem:
                self._open(problem)
            self.bar.update(1)
            self.bar.set_postfix(change=f"{record['change']:.2e}", tol=f"{self.tol:.0e}",
                                 invalid=record["n_invalid"])
        else:
            click.echo(f"{where}sweep {record['sweep']:4d}  change {record['change']:.3e} "
                       f"(tol {self.tol:.0e})  invalid {record['n_invalid']}  "
                       f"{record['seconds']:.2f}s", file=self.stream)

    def close(self):
        if self.bar is not None:
            self.bar.close()


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
@_job_errors
def train(data, out, overwrite, latest, test, cluster, **options):
    """Train a SASPA model on a zarr data store, on a Dask cluster.

    Classification with more than two classes is one-vs-rest on shared bases.
    """
    from . import jobs

    options = _take_old_flags(TRAIN_PARAMETERS, options)
    reporter = SweepReporter(options["tol"])
    try:
        result = jobs.train(data, out, overwrite=overwrite, latest=latest, test=test,
                            progress=reporter, **cluster, **options)
    finally:
        reporter.close()
    _report_model(result)


def _report_model(result):
    from .jobs import metrics_line

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
@_job_errors
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
    from . import jobs

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
@_job_errors
def score_command(model_path, data, out, fmt, overwrite, escape_formulas, cluster):
    """Score DATA's X with MODEL (mean, variance[, proba, label | rate]).

    DATA's columns are matched to the model's by name (reordered when needed).  The
    zarr store is resumable: rerunning after an interruption writes only the missing
    chunks; it records which class each proba column is.
    """
    from . import jobs

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
@_job_errors
def predict_command(model_path, source, out, fmt, unknown, delimiter, chunk_rows, overwrite,
                    escape_formulas, cluster):
    """Score a CSV or Parquet FILE with MODEL, without a separate ingest.

    FILE is encoded as MODEL's training store was (columns, categories, imputation
    values, id column); the drift from the training rows is printed.  Resumable: a
    rerun after an interruption reuses the encoded rows and the scores written.
    """
    from . import jobs

    start = time.perf_counter()
    result = jobs.predict(model_path, source, out, unknown=unknown, delimiter=delimiter,
                          format=fmt, overwrite=overwrite, chunk_rows=chunk_rows,
                          escape_formulas=escape_formulas, **cluster)
    for note in result["notes"]:
        _echo(f"note: {note}")
    for line in drift_lines(result["drift"]):
        _echo(line)
    if result["restarted"]:
        _echo(f"predict: started over: {result['restarted']}")
    click.echo(f"predictions for {source}: {out}  {result['rows']} rows"
               f"{' (resumed)' if result['reused'] else ''}, "
               f"{time.perf_counter() - start:.1f}s")


@main.command("evaluate")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("data", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the metrics as JSON.")
@cluster_options
@_job_errors
def evaluate_command(model_path, data, as_json, cluster):
    """Error and NLP (classification) or RMSE, MAE and NLPD (regression) on DATA.

    The metrics are of the rows of DATA (say a held-out store from ``saspa split``);
    its columns are matched to the model's by name.
    """
    from . import jobs

    metrics = jobs.evaluate(model_path, data, **cluster)
    if as_json:
        click.echo(json.dumps(metrics))
    else:
        click.echo(jobs.metrics_line(metrics))


@main.command("run")
@click.argument("job", type=click.Path())
@click.option("--force", is_flag=True, help="Run even if the job already completed "
              "with the same inputs.")
@_job_errors
def run_command(job, force):
    """Run a declarative job file (TOML): ingest / train / retrain / score / evaluate."""
    from .pipelines import run_job

    run_job(job, force=force, echo=_echo, out=click.echo)


@main.command("info")
@click.argument("model", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
@_job_errors
def info(model, as_json):
    """Describe a model store."""
    from . import jobs

    summary = jobs.describe(model)
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    for key in ("estimator", "task", "n_training_rows", "n_features_in", "n_bases", "blur",
                "likelihood", "log_evidence", "columns", "target", "class_labels",
                "data_fingerprint"):
        click.echo(f"{key:>17}: {summary[key]}")
    if summary["lengthscale"] is not None:
        click.echo(f"{'lengthscales':>17}: "
                   + ", ".join(f"{v:.4g}" for v in summary["lengthscale"]))
    seconds = summary["train_seconds"]
    click.echo(f"{'training time':>17}: "
               + ("not recorded" if seconds is None else f"{seconds:.1f}s"))
    if summary.get("test_metrics"):
        from .jobs import metrics_line

        click.echo(f"{'held out':>17}: {metrics_line(summary['test_metrics'])}")
    km = summary["kmeans"]
    not_run = ("not run (features on the inputs' mean)" if summary["blur"] == "fourier-global"
               else "not run (bases given)")
    click.echo(f"{'k-means':>17}: " + (not_run if km is None else
                                       f"converged {km['converged']}, {km['n_iter']} "
                                       "iterations"))
    if summary["approximation"] is not None:
        power = ("EP" if summary["alpha"] == 1.0 else
                 f"power EP, alpha {summary['alpha']:g}")
        click.echo(f"{'approximation':>17}: {summary['approximation']}, {power}")
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
        for k, stage in enumerate(info.get("stages", [])):
            click.echo(f"{'stage ' + str(k):>17}: {stage['rows']} rows on the "
                       f"{stage['where']}, {stage['n_iterations']} iterations, "
                       f"{stage['gain_per_row']:.3g} nats per row gained, "
                       f"{stage['seconds']:.1f}s")
    else:
        click.echo(f"{'hyperparameters':>17}: fixed (not learnt)")


if __name__ == "__main__":
    main()
