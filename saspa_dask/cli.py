"""The ``saspa`` command: ``make-data``, ``ingest``, ``train``, ``info``, ``demo``.

``train`` runs on a Dask cluster: ``--scheduler tcp://HOST:PORT`` connects to one, and
without it an embedded ``LocalCluster`` with ``--workers`` processes is started.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import json
import sys
import time
from pathlib import Path

import click
import numpy as np

from . import __version__
from .estimators import SASPAClassifier, SASPARegressor
from .store import (
    StoreError,
    describe_model,
    ingest,
    open_data_store,
    resolve_model_path,
    save_model,
    write_latest,
)


def synthetic_two_class(n_rows, n_features, seed):
    """Two classes, each a Gaussian with its own full covariance (the paper's setup)."""
    rng = np.random.default_rng(seed)
    X = np.empty((n_rows, n_features))
    y = rng.integers(0, 2, size=n_rows)
    for label in (0, 1):
        A = rng.normal(size=(n_features, n_features)) / np.sqrt(n_features)
        centre = rng.normal(size=n_features) * 0.8
        rows = y == label
        X[rows] = centre + rng.normal(size=(rows.sum(), n_features)) @ A
    return X, y


def read_csv(path, target):
    """Numeric CSV with a header row; ``target`` names the label column (default last)."""
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise click.ClickException(f"{path}: empty file")
        rows = list(reader)
    column = len(header) - 1 if target is None else _column_index(header, target, path)
    features, labels = [], []
    for line, row in enumerate(rows, start=2):
        if len(row) != len(header):
            raise click.ClickException(
                f"{path}:{line}: {len(row)} fields, the header has {len(header)}"
            )
        try:
            features.append([float(v) for i, v in enumerate(row) if i != column])
        except ValueError as err:
            raise click.ClickException(f"{path}:{line}: not numeric ({err})") from None
        labels.append(row[column])
    return np.array(features), np.array(labels)


def _column_index(header, target, path):
    if target not in header:
        raise click.ClickException(f"{path}: no column {target!r} (columns: {header})")
    return header.index(target)


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

    click.echo(f"saspa demo: {source}; {len(train)} train / {len(test)} test rows", err=True)
    start = time.perf_counter()
    clf = SASPAClassifier(n_bases=n_bases, blur=blur, likelihood=likelihood,
                          ep_mode=ep_mode, random_state=seed, verbose=int(not as_json),
                          optimize_hyperparameters=optimize_hyperparameters)
    clf.fit(Xs[train], y[train])
    fit_seconds = time.perf_counter() - start
    proba = clf.predict_proba(Xs[test])
    y_test = y[test]
    positive = y_test == clf.classes_[1]
    p_true = np.where(positive, proba[:, 1], proba[:, 0])
    report = {
        "train_rows": int(len(train)),
        "test_rows": int(len(test)),
        "n_bases": int(clf.bases_.n_bases),
        "blur": blur,
        "test_error": float(np.mean(clf.predict(Xs[test]) != y_test)),
        "test_nlp": float(-np.mean(np.log(np.maximum(p_true, 1e-300)))),
        "log_evidence": clf.log_evidence_,
        "sweeps": clf.n_sweeps_,
        "converged": bool(clf.converged_),
        "invalid_cavities": clf.n_invalid_cavities_,
        "jitter": clf.jitter_,
        "fit_seconds": round(fit_seconds, 3),
    }
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            click.echo(f"{key:>17}: {value}")
    if not clf.converged_:
        sys.exit(3)


@main.command("make-data")
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--rows", default=200_000, show_default=True)
@click.option("--features", default=8, show_default=True)
@click.option("--seed", default=0, show_default=True)
def make_data(out, rows, features, seed):
    """Write generated two-class data (inputs then a 0/1 label column) to OUT.npy."""
    X, y = synthetic_two_class(rows, features, seed)
    path = Path(out)
    tmp = path.with_name(f".{path.name}.partial.npy")
    np.save(tmp, np.column_stack([X, y]))
    tmp.replace(path)
    click.echo(f"wrote {rows} x {features} inputs + label to {path}")


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
def ingest_command(source, out, target, chunk_rows, missing, text, overwrite):
    """Stream a CSV or .npy file into a chunked zarr data store."""
    start = time.perf_counter()
    try:
        attrs = ingest(source, out, target=target, chunk_rows=chunk_rows, missing=missing,
                       text=text, overwrite=overwrite)
    except (StoreError, ValueError) as err:
        raise click.ClickException(str(err)) from None
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


def _security(tls_ca_file, tls_cert, tls_key):
    if not (tls_ca_file or tls_cert or tls_key):
        return None
    if not (tls_ca_file and tls_cert and tls_key):
        raise click.ClickException("TLS needs all of --tls-ca-file, --tls-cert and --tls-key")
    from distributed.security import Security

    return Security(tls_ca_file=tls_ca_file, tls_client_cert=tls_cert,
                    tls_client_key=tls_key, require_encryption=True)


@contextlib.contextmanager
def dask_client(scheduler, workers, timeout, tls_ca_file=None, tls_cert=None, tls_key=None):
    """A distributed Client: connected to ``scheduler`` or to an embedded LocalCluster."""
    import dask
    from distributed import Client, LocalCluster

    security = _security(tls_ca_file, tls_cert, tls_key)
    if scheduler:
        try:
            client = Client(scheduler, timeout=timeout, security=security)
        except Exception as err:  # refused, TLS handshake or configuration, time-out
            raise click.ClickException(
                f"cannot reach the Dask scheduler at {scheduler} within {timeout}s "
                f"({type(err).__name__}: {err})"
            ) from None
        cluster = None
    else:
        # Work stealing would move a chunk's cached whitened block (N/chunks x M
        # floats) to an idle worker, costing more than it saves; the blocks are spread
        # evenly instead (measured: benchmarks/RESULTS.md).
        with dask.config.set({"distributed.scheduler.work-stealing": False}):
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
        client = Client(cluster)
    try:
        where = scheduler or f"embedded LocalCluster, {workers} workers"
        click.echo(f"dask: {where}; dashboard: {_dashboard(client)}", err=True)
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _dashboard(client):
    try:
        import bokeh  # noqa: F401  (the dashboard needs it)
    except ImportError:
        return "unavailable (pip install 'saspa-dask[dashboard]')"
    return client.dashboard_link


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
def train(data, out, task, n_bases, blur, likelihood, ep_mode, damping, optimize_hyperparameters,
          max_hyper_iter, hyper_restarts, learn_blur_scale, max_sweeps, tol, lengthscale,
          signal_variance, noise_variance, label_noise, dof, scale, seed, cache, work_dir,
          scheduler, workers, timeout, coarse_start, anderson_memory, overwrite, latest,
          tls_ca_file, tls_cert, tls_key):
    """Train a SASPA model on a zarr data store, on a Dask cluster.

    Classification with more than two classes is one-vs-rest on shared bases.
    """
    classification = task == "classification"
    allowed = ("probit", "logistic", "step") if classification else (
        "gaussian", "student_t", "poisson")
    if likelihood is not None and likelihood not in allowed:
        raise click.BadParameter(f"{likelihood!r} is not a {task} likelihood; use one of "
                                 f"{', '.join(allowed)}", param_hint="--likelihood")
    X, y, attrs = _training_data(data, out, overwrite)
    common = dict(n_bases=n_bases, blur=blur, ep_mode=ep_mode, damping=damping,
                  max_sweeps=max_sweeps, tol=tol, lengthscale=lengthscale,
                  signal_variance=signal_variance, random_state=seed, cache=cache,
                  work_dir=work_dir or str(Path(out).resolve().parent),
                  optimize_hyperparameters=optimize_hyperparameters,
                  max_hyper_iter=max_hyper_iter, n_restarts_optimizer=hyper_restarts,
                  learn_blur_scale=learn_blur_scale, coarse_start=coarse_start,
                  anderson_memory=anderson_memory,
                  verbose=int(optimize_hyperparameters))
    if classification:
        model = SASPAClassifier(likelihood=likelihood or "probit", label_noise=label_noise,
                                **common)
    else:
        model = SASPARegressor(likelihood=likelihood or "gaussian",
                               noise_variance=noise_variance, dof=dof, scale=scale, **common)
    _fit_and_save(model, X, y, attrs, data, out, overwrite, latest,
                  (scheduler, workers, timeout, tls_ca_file, tls_cert, tls_key), max_sweeps)


def _training_data(data, out, overwrite):
    """The data store to train on, after checking the destination is free."""
    if Path(out).exists() and not overwrite:
        raise click.ClickException(f"{out} exists; pass --overwrite to replace it")
    try:
        return open_data_store(data)
    except StoreError as err:
        raise click.ClickException(str(err)) from None


def _fit_and_save(model, X, y, attrs, data, out, overwrite, latest, cluster, max_sweeps,
                  init_sites=None, extra=None):
    """Fit on the cluster, write the model aside and rename it, update ``latest``."""
    from .distributed import fingerprint

    start = time.perf_counter()
    with dask_client(*cluster):
        click.echo(f"data: {data} ({X.shape[0]} rows x {X.shape[1]} inputs, "
                   f"{len(X.chunks[0])} chunks)", err=True)
        data_fingerprint = fingerprint(X, y)
        if callable(init_sites):  # computed on the cluster (reads the appended rows)
            init_sites = init_sites()
        reporter = SweepReporter(max_sweeps)
        try:
            model.fit(X, y, progress=reporter, init_sites=init_sites)
        except ValueError as err:
            raise click.ClickException(str(err)) from None
        finally:
            reporter.close()
    seconds = time.perf_counter() - start
    model.data_fingerprint_ = data_fingerprint
    attributes = {"data_store": str(Path(data).resolve()), "data_columns": attrs.get("columns"),
                  "target_classes": attrs.get("target_classes"),
                  "kmeans": getattr(model, "kmeans_info_", None), "train_seconds": seconds,
                  "timings": model.timings_, **(extra or {})}
    try:
        save_model(model, out, overwrite=overwrite, extra_attrs=attributes)
    except StoreError as err:
        raise click.ClickException(str(err)) from None
    if latest:
        write_latest(latest, out)
    for level in getattr(model, "coarse_start_", []):
        click.echo(f"coarse start: {level['rows']} rows, {level['sweeps']} sweeps, "
                   f"{level['seconds']:.1f}s", err=True)
    click.echo(f"model: {out}  sweeps {model.n_sweeps_}  converged {model.converged_}  "
               f"log evidence {model.log_evidence_:.6g}  invalid cavities "
               f"{model.n_invalid_cavities_}  {seconds:.1f}s")
    if not model.converged_:
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
    old_path = resolve_model_path(model_path)
    old = _load(old_path)
    if Path(out).resolve() == old_path.resolve():
        raise click.ClickException("--out must differ from MODEL (the old model is kept)")
    X, y, attrs = _training_data(data, out, overwrite)
    n_old, n_new = old.sites_tau_.shape[-1], X.shape[0]
    if n_new < n_old:
        raise click.ClickException(
            f"{data} has {n_new} rows but the model was trained on {n_old}: retraining "
            "expects the old rows first, with new rows appended")
    # the old model's (possibly learnt) hyperparameters are kept, not re-learnt
    params = {**old.get_params(), "max_sweeps": max_sweeps, "cache": cache,
              "work_dir": work_dir or str(Path(out).resolve().parent),
              "lengthscale": old.lengthscale_, "signal_variance": old.signal_variance_,
              "optimize_hyperparameters": False, "verbose": 0}
    if tol is not None:
        params["tol"] = tol
    if anderson_memory is not None:
        params["anderson_memory"] = anderson_memory
    for attr, param in (("noise_variance_", "noise_variance"), ("label_noise_", "label_noise"),
                        ("dof_", "dof"), ("scale_", "scale")):
        if hasattr(old, attr):
            params[param] = getattr(old, attr)
    init_sites = None
    if not refit_bases:
        params["bases"] = old.bases_
        init_sites = functools.partial(_warm_start_sites, old, X, y, new_rows)
    model = type(old)(**params)
    click.echo(f"retrain: {n_old} old rows warm-started, {n_new - n_old} new rows "
               f"({new_rows})" if init_sites is not None
               else "retrain: bases refitted, cold start", err=True)
    _fit_and_save(model, X, y, attrs, data, out, overwrite, latest,
                  (scheduler, workers, timeout, tls_ca_file, tls_cert, tls_key), max_sweeps,
                  init_sites=init_sites,
                  extra={"retrained_from": str(old_path.resolve()),
                         "warm_started_rows": n_old if init_sites is not None else 0,
                         "new_rows_start": new_rows if init_sites is not None else "empty"})


def _warm_start_sites(old, X, y, new_rows):
    """The old rows' stored sites, then the appended rows' (``warm_start_sites``)."""
    n_old = old.sites_tau_.shape[-1]
    if X.shape[0] == n_old:
        return old.sites_tau_, old.sites_nu_
    start = time.perf_counter()
    try:  # problems met on the new rows are warnings, printed on stderr
        sites = old.warm_start_sites(X[n_old:], y[n_old:], new_rows=new_rows)
    except ValueError as err:
        raise click.ClickException(f"appended rows: {err}") from None
    if new_rows != "empty":
        click.echo(f"retrain: starting sites of {X.shape[0] - n_old} new rows ({new_rows}) "
                   f"{time.perf_counter() - start:.1f}s", err=True)
    return sites


def _load(model_path):
    from .store import load_model

    try:
        return load_model(model_path)
    except StoreError as err:
        raise click.ClickException(str(err)) from None


@main.command("score")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("data", type=click.Path())
@click.option("--out", required=True, type=click.Path(), help="Score store to write.")
@click.option("--overwrite", is_flag=True, help="Replace a complete or foreign store.")
@click.option("--scheduler", help="Address of a running Dask scheduler, tcp://HOST:PORT.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1))
@click.option("--timeout", default=10, show_default=True, type=click.IntRange(1))
@tls_options
def score_command(model_path, data, out, overwrite, scheduler, workers, timeout, tls_ca_file,
                  tls_cert, tls_key):
    """Score DATA's X with MODEL into a zarr store (mean, variance[, proba]).

    Resumable: rerunning after an interruption writes only the missing chunks.
    """
    from .scoring import score

    model = _load(model_path)
    start = time.perf_counter()
    with dask_client(scheduler, workers, timeout, tls_ca_file, tls_cert, tls_key):
        try:
            result = score(model, data, out, overwrite=overwrite)
        except (StoreError, ValueError) as err:
            raise click.ClickException(str(err)) from None
    seconds = time.perf_counter() - start
    click.echo(f"scores: {out}  {result['rows']} rows, {result['chunks_written']} of "
               f"{result['chunks_total']} chunks written this run, {seconds:.1f}s")


@main.command("evaluate")
@click.argument("model_path", metavar="MODEL", type=click.Path())
@click.argument("data", type=click.Path())
@click.option("--scheduler", help="Address of a running Dask scheduler, tcp://HOST:PORT.")
@click.option("--workers", default=2, show_default=True, type=click.IntRange(1))
@click.option("--timeout", default=10, show_default=True, type=click.IntRange(1))
@click.option("--json", "as_json", is_flag=True)
@tls_options
def evaluate_command(model_path, data, scheduler, workers, timeout, as_json, tls_ca_file,
                     tls_cert, tls_key):
    """Error and NLP (classification) or RMSE, MAE and NLPD (regression) on DATA."""
    from .scoring import evaluate

    model = _load(model_path)
    with dask_client(scheduler, workers, timeout, tls_ca_file, tls_cert, tls_key):
        try:
            metrics = evaluate(model, data)
        except (StoreError, ValueError) as err:
            raise click.ClickException(str(err)) from None
    if as_json:
        click.echo(json.dumps(metrics))
    else:
        click.echo("  ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}"
                             for k, v in metrics.items()))


@main.command("run")
@click.argument("job", type=click.Path())
@click.option("--force", is_flag=True, help="Run even if the job already completed "
              "with the same inputs.")
def run_command(job, force):
    """Run a declarative job file (TOML): ingest / train / retrain / score / evaluate."""
    from .pipelines import JobError, run_job

    try:
        run_job(job, force=force, echo=lambda message: click.echo(message, err=True))
    except JobError as err:
        raise click.ClickException(str(err)) from None
    except click.ClickException as err:
        raise click.ClickException(f"job {job} failed: {err.message}") from None


@main.command("info")
@click.argument("model", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print everything as JSON.")
def info(model, as_json):
    """Describe a model store."""
    try:
        summary = describe_model(resolve_model_path(model))
    except StoreError as err:
        raise click.ClickException(str(err)) from None
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


if __name__ == "__main__":
    main()
