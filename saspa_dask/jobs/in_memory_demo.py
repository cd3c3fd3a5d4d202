"""The in-memory demonstration (``saspa demo``): a SASPA classifier fitted on generated
two-class data (or a small numeric CSV), scored on a held-out share of the rows; and
``saspa make-data``'s generated data written to a ``.npy`` file."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..datasets import multiscale_regression, synthetic_two_class, synthetic_two_class_chunks
from ..files.names import aside
from ..files.outputs import NPY, check_output
from ..storage.column_plan import target_index
from ..storage.csv_reader import read_rows
from .errors import JobError, reported
from .estimators import build_estimator

__all__ = ["demo", "make_data", "read_csv"]


def demo(csv=None, target=None, *, rows=20_000, features=8, test_fraction=0.3,
         verbose=1, echo=print, **options):
    """Fit a :class:`~saspa_dask.SASPAClassifier` in memory and report its test metrics.

    Parameters
    ----------
    csv : str, optional
        A numeric CSV with a header (default: ``rows`` x ``features`` generated rows).
    target : str, optional
        The label column of ``csv`` (default: the last).
    rows, features : int
        The generated data's size.
    test_fraction : float
        The share of rows held out.
    verbose : int
    echo : callable
        Receives the opening line.
    **options
        The classifier's options, as ``saspa train`` names them and with its
        defaults (:func:`~saspa_dask.jobs.estimators.build_estimator`);
        ``random_state`` (0) also seeds the generated data and the split.

    Returns
    -------
    dict
        Rows, bases, test error and NLP, evidence, sweeps, convergence, jitter, seconds.
    """
    clf = build_estimator("classification", **options)
    clf.set_params(verbose=verbose)
    seed = clf.random_state
    if csv:
        X, y = read_csv(csv, target)
        source = csv
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
    try:
        clf.fit(Xs[train], y[train])
    except ValueError as err:  # the data cannot be fitted (one class, too few rows ...)
        raise JobError(f"{source}: {err}") from None
    return {"train_rows": int(len(train)), "test_rows": int(len(test)),
            "n_bases": int(clf.bases_.n_bases), "blur": clf.blur_,
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


# rows generated and written at a time by make-data (two-class): about 70 MB of memory
# at 8 inputs whatever the rows, and one piece (the same bits) up to a million rows
MAKE_DATA_CHUNK_ROWS = 1_000_000


def _write_npy(path, shape, chunks):
    """A float64 ``.npy`` file of ``shape`` written from (X, y) row chunks in order."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f8", "fortran_order": False, "shape": shape})
        for X, y in chunks:
            np.column_stack([X, y]).astype("<f8", copy=False).tofile(f)


def make_data(out, *, rows=200_000, features=8, seed=0, kind="two-class",
              overwrite=False):
    """Write generated rows (inputs, then the label or target column) to the ``.npy``
    file ``out``: ``kind`` "two-class" (two Gaussian classes with full covariances, a
    0/1 label) or "multiscale-regression" (structure at several length scales, inputs 7
    and beyond irrelevant; needs ``features >= 8``).  An existing ``out`` is replaced
    only with ``overwrite`` and only when it is a ``.npy`` array
    (:func:`~saspa_dask.files.outputs.check_output`).  Two-class rows are generated and
    written a million at a time (:func:`~saspa_dask.datasets.synthetic_two_class_chunks`:
    the same values), so memory does not grow with ``rows``; the multiscale regression
    is drawn whole.  Returns the path."""
    path = Path(out)
    with reported():
        check_output(path, NPY, overwrite=overwrite)
    if kind == "two-class":
        chunks = synthetic_two_class_chunks(rows, features, seed, MAKE_DATA_CHUNK_ROWS)
    elif features < 8:
        raise JobError("multiscale-regression needs --features >= 8")
    else:
        X, y, _ = multiscale_regression(rows, features, seed)
        chunks = [(X, y)]
    tmp = aside(path).with_suffix(".npy")
    try:
        _write_npy(tmp, (rows, features + 1), chunks)
        check_output(path, NPY, overwrite=overwrite)  # again, just before the rename
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
