"""Checks of training and prediction input, in memory or chunk by chunk on Dask.

:func:`check_training_data` validates lazy (dask/zarr) training data in one pass and
raises the same kinds of errors, with the same wording, as scikit-learn's validation of
in-memory data; :func:`dense_rows`
turns a SciPy sparse matrix (a one-hot encoder's output) into dense rows.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
from dask import delayed

from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import validate_data

from ..engines.chunks import as_dask, is_lazy, row_chunked
from ..engines.row_statistics import chunk_statistics, merged_statistics

__all__ = ["check_lazy_features", "check_training_data", "column_names_of", "dense_rows",
           "validate_training_input"]

DENSE_BYTES = 1 << 28  # a sparse input densified whole up to this size, else per block


def dense_rows(X, max_bytes=DENSE_BYTES):
    """``X`` itself, or a SciPy sparse matrix as dense rows: one array when it fits
    ``max_bytes``, else a dask array whose row blocks (of at most ``max_bytes``) are
    densified only when a task reads them.  The kernels need every input of a row, so
    nothing is gained by keeping it sparse past this point."""
    import scipy.sparse

    if not scipy.sparse.issparse(X):
        return X
    X = scipy.sparse.csr_array(X)
    n, d = X.shape
    if n * d * 8 <= max_bytes:
        return X.toarray().astype(np.float64, copy=False)
    step = max(1, max_bytes // (8 * max(d, 1)))
    blocks = [da.from_delayed(dask.delayed(_densified)(X[a:a + step]),
                              shape=(min(step, n - a), d), dtype=np.float64)
              for a in range(0, n, step)]
    return da.concatenate(blocks, axis=0)


def _densified(block):
    return block.toarray().astype(np.float64, copy=False)


MAX_MAGNITUDE = 1e150  # squared distances must stay finite: (2 * 1e150)**2 < 1.8e308


def check_magnitude(absmax):
    """Inputs whose squares overflow (values near 1e300) would make every kernel
    distance infinite: refused, naming the columns (by index)."""
    absmax = np.asarray(absmax)
    big = np.flatnonzero(absmax > MAX_MAGNITUDE)
    if big.size:
        raise ValueError(f"input columns {big.tolist()} hold values up to "
                         f"{absmax[big].max():.3g}; beyond {MAX_MAGNITUDE:g} their squared "
                         "distances overflow: rescale them (e.g. divide by a power of ten)")


def check_lazy_features(estimator, X):
    if X.ndim == 2 and X.shape[1] != estimator.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} is "
                         f"expecting {estimator.n_features_in_} features as input.")


def check_training_data(X, y, classification):
    """Validate lazy training data in one pass over it; returns (X, y, stats).

    ``stats`` has ``std`` (per input) and, for classification, ``classes``; for
    regression ``mean``, ``var``, ``min`` and ``non_integer`` of y.
    """
    X, y = _known_chunks(as_dask(X)), _known_chunks(as_dask(y))
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead")
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                         f"[{X.shape[0]}, {y.shape[0]}]")
    if X.shape[0] < 2:
        raise ValueError(f"Found array with {X.shape[0]} sample(s) while a minimum of 2 is "
                         "required")
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"X must be numeric, got dtype {X.dtype}")
    X, y = row_chunked(X.astype(np.float64), y)
    if not classification:
        y = y.astype(np.float64)
    # one task per chunk (dask's separate reductions cost twice a read of the data)
    parts = [delayed(chunk_statistics)(xb, yb, classification)
             for xb, yb in zip(X.to_delayed().ravel(), y.to_delayed().ravel())]
    stats = merged_statistics(dask.compute(parts)[0], classification)
    if stats["bad_rows"]:
        raise ValueError(f"Input X contains NaN or infinity in {int(stats['bad_rows'])} rows")
    check_magnitude(stats["absmax"])
    if stats.get("bad_y"):
        raise ValueError(f"Input y contains NaN or infinity in {int(stats['bad_y'])} rows")
    if classification:
        check_classification_targets(stats["classes"])
    return X, y, stats


def _known_chunks(array):
    """A dask array whose chunk sizes are known (after boolean indexing they are not,
    and its number of rows is NaN): they are computed, one pass of small tasks."""
    if any(np.isnan(size) for size in array.shape):
        array = array.compute_chunk_sizes()
    return array


def validate_training_input(estimator, X, y, *, classification, reset):
    """The one dispatch on the input type of training rows: ``(X, y, stats)``.

    Dask and zarr input is validated chunk by chunk in one pass and stays lazy;
    NumPy-like input goes through scikit-learn's ``validate_data``.  ``reset`` (fit)
    sets ``n_features_in_`` (and ``feature_names_in_``); otherwise (new rows) the rows
    are checked against them.  ``stats``: ``std`` of each input and, for
    classification, the ``classes`` found; for regression ``mean``, ``var``, ``min``
    and ``non_integer`` of y.
    """
    X = dense_rows(X)
    if is_lazy(X) or is_lazy(y):
        if not reset:
            check_lazy_features(estimator, X)
        X, y, stats = check_training_data(X, y, classification)
        if reset:
            estimator.n_features_in_ = X.shape[1]
        return X, y, stats
    X, y = validate_data(estimator, X, y, reset=reset, dtype=np.float64,
                         ensure_min_samples=2 if reset else 1, y_numeric=not classification)
    check_magnitude(np.abs(X).max(axis=0))
    if classification:
        if reset:
            check_classification_targets(y)
        return X, y, {"std": X.std(axis=0), "classes": np.unique(y)}
    return X, y, {"std": X.std(axis=0), "mean": float(y.mean()), "var": float(y.var()),
                  "min": float(y.min()), "non_integer": int((y != np.round(y)).sum())}


def column_names_of(estimator, column_names):
    """The names of the input columns a fitted posterior keeps: ``column_names`` (a
    data store's columns, given to ``fit``), checked against the width of the input,
    else the DataFrame's (``feature_names_in_``), else None.  Only a DataFrame sets
    ``feature_names_in_``: an array trained on with column names given predicts on
    arrays without scikit-learn's feature-name warning."""
    if column_names is None:
        return getattr(estimator, "feature_names_in_", None)
    names = np.array([str(c) for c in column_names], dtype=object)
    if names.shape != (estimator.n_features_in_,):
        raise ValueError(f"column_names has {names.size} names for "
                         f"{estimator.n_features_in_} input columns")
    return names
