"""Statistics of training rows, one task per row chunk and merged in chunk order: what
:func:`saspa_dask.models.validation.check_training_data` needs from lazy input in one
pass (dask's separate reductions cost twice a read of the data).  Kept apart from the
estimators so that a worker running a chunk's task imports NumPy only, not
scikit-learn (1.2 s a worker)."""

from __future__ import annotations

import functools

import numpy as np

__all__ = ["chunk_statistics", "merged_statistics"]


def chunk_statistics(X, y, classification):
    """One row chunk's part of the statistics (:func:`merged_statistics`)."""
    part = {"bad_rows": int((~np.isfinite(X)).any(axis=1).sum()),
            "absmax": np.abs(X).max(axis=0, initial=0.0), "x": _moments(X)}
    if classification:
        part["classes"] = np.unique(y)
        if np.issubdtype(y.dtype, np.number):
            part["bad_y"] = int((~np.isfinite(y)).sum())
        return part
    return {**part, "y": _moments(y), "bad_y": int((~np.isfinite(y)).sum()),
            "min": y.min(initial=np.inf), "non_integer": int((y != np.round(y)).sum())}


def _moments(values):
    """Count, mean and sum of squared deviations (per column), for Chan's merge."""
    n = values.shape[0]
    if n == 0:
        return 0, np.zeros(values.shape[1:]), np.zeros(values.shape[1:])
    mean = values.mean(axis=0)
    return n, mean, ((values - mean) ** 2).sum(axis=0)


def _merge_moments(a, b):
    """Chan et al.'s pairwise update of (count, mean, squared deviations)."""
    (na, ma, sa), (nb, mb, sb) = a, b
    n = na + nb
    if n == 0:
        return a
    delta = mb - ma
    return n, ma + delta * (nb / n), sa + sb + delta * delta * (na * nb / n)


def merged_statistics(parts, classification):
    """The chunks' statistics merged in chunk order: ``bad_rows``, ``std`` and
    ``absmax`` of X; ``classes`` (and ``bad_y``) or y's ``bad_y``, ``mean``, ``var``,
    ``min`` and ``non_integer``."""
    x = functools.reduce(_merge_moments, [p["x"] for p in parts])
    stats = {"bad_rows": sum(p["bad_rows"] for p in parts), "std": np.sqrt(x[2] / x[0]),
             "absmax": np.max([p["absmax"] for p in parts], axis=0)}
    if "bad_y" in parts[0]:
        stats["bad_y"] = sum(p["bad_y"] for p in parts)
    if classification:
        stats["classes"] = np.unique(np.concatenate([p["classes"] for p in parts]))
        return stats
    n, mean, squares = functools.reduce(_merge_moments, [p["y"] for p in parts])
    return {**stats, "mean": float(mean), "var": float(squares / n),
            "min": float(min(p["min"] for p in parts)),
            "non_integer": sum(p["non_integer"] for p in parts)}
