"""The ``saspa`` command.

``saspa demo`` is the end-to-end job of this release: it generates (or reads) a
classification problem, fits SASPA in memory, and reports test error, evidence and EP
diagnostics.  The distributed ``train`` / ``score`` jobs build on the same engine.
"""

from __future__ import annotations

import csv
import json
import sys
import time

import click
import numpy as np

from . import __version__
from .estimators import SASPAClassifier


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
@click.option("--test-fraction", default=0.3, show_default=True)
@click.option("--seed", default=0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def demo(csv_path, target, rows, features, n_bases, blur, likelihood, ep_mode,
         test_fraction, seed, as_json):
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
                          ep_mode=ep_mode, random_state=seed, verbose=int(not as_json))
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


if __name__ == "__main__":
    main()
