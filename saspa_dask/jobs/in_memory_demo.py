"""The in-memory demonstration (``saspa demo``): a SASPA classifier fitted on generated
two-class data (or a small numeric CSV), scored on a held-out share of the rows."""

from __future__ import annotations

import time

import numpy as np

from ..datasets import synthetic_two_class
from ..models import SASPAClassifier
from ..storage.column_plan import target_index
from ..storage.csv_reader import read_rows
from .errors import JobError

__all__ = ["demo", "read_csv"]


def demo(csv_path=None, target=None, *, rows=20_000, features=8, n_bases=64, blur="full",
         likelihood="probit", ep_mode="parallel", optimize_hyperparameters=False,
         test_fraction=0.3, seed=0, verbose=1, echo=print):
    """Fit a :class:`~saspa_dask.SASPAClassifier` in memory and report its test metrics.

    Parameters
    ----------
    csv_path : str, optional
        A numeric CSV with a header (default: ``rows`` x ``features`` generated rows).
    target : str, optional
        The label column of ``csv_path`` (default: the last).
    rows, features : int
        The generated data's size.
    n_bases, blur, likelihood, ep_mode, optimize_hyperparameters
        The classifier's settings (``ep_mode`` is ``ep={"mode": ...}``).
    test_fraction : float
        The share of rows held out.
    seed : int
        Seeds the data, the split and K-means.
    verbose : int
    echo : callable
        Receives the opening line.

    Returns
    -------
    dict
        Rows, bases, test error and NLP, evidence, sweeps, convergence, jitter, seconds.
    """
    if csv_path:
        X, y = read_csv(csv_path, target)
        source = csv_path
    else:
        X, y = synthetic_two_class(rows, features, seed)
        source = f"generated two-class data ({rows} x {features})"
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    test, train = order[:n_test], order[n_test:]
    centre, spread = X[train].mean(0), X[train].std(0)
    spread[spread == 0] = 1.0
    Xs = (X - centre) / spread

    echo(f"saspa demo: {source}; {len(train)} train / {len(test)} test rows")
    start = time.perf_counter()
    clf = SASPAClassifier(n_bases=n_bases, blur=blur, likelihood=likelihood,
                          ep={"mode": ep_mode}, random_state=seed, verbose=verbose,
                          optimize_hyperparameters=optimize_hyperparameters)
    try:
        clf.fit(Xs[train], y[train])
    except ValueError as err:  # the data cannot be fitted (one class, too few rows ...)
        raise JobError(f"{source}: {err}") from None
    return {"train_rows": int(len(train)), "test_rows": int(len(test)),
            "n_bases": int(clf.bases_.n_bases), "blur": blur,
            **_test_metrics(clf, Xs[test], y[test]),
            "log_evidence": clf.log_evidence_, "sweeps": clf.n_sweeps_,
            "converged": bool(clf.converged_), "invalid_cavities": clf.n_invalid_cavities_,
            "jitter": clf.jitter_, "fit_seconds": round(time.perf_counter() - start, 3)}


def _test_metrics(clf, X, y):
    """Test error and NLP: the mean -log probability of each row's own class (any
    number of classes)."""
    proba = clf.predict_proba(X)
    codes = np.searchsorted(clf.classes_, y)
    p_true = proba[np.arange(len(y)), codes]
    return {"test_error": float(np.mean(clf.predict(X) != y)),
            "test_nlp": float(-np.mean(np.log(np.maximum(p_true, 1e-300))))}


def read_csv(path, target):
    """A small numeric CSV with a header, whole; ``target`` names the label column
    (default: the last)."""
    rows = read_rows(path)
    _, header = next(rows)
    column = target_index(header, target, path)
    features, labels = [], []
    for line, row in rows:
        try:
            features.append([float(v) for i, v in enumerate(row) if i != column])
        except ValueError as err:
            raise JobError(f"{path}:{line}: not numeric ({err})") from None
        labels.append(row[column])
    if not labels:
        raise JobError(f"{path}: no data rows after the header")
    return np.array(features), np.array(labels)
