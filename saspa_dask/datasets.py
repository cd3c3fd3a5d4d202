"""Synthetic data for demos, tests and benchmarks (the SASPA paper's setup)."""

from __future__ import annotations

import numpy as np

__all__ = ["synthetic_two_class"]


def synthetic_two_class(n_rows, n_features, seed):
    """Two classes, each a Gaussian with its own full covariance.

    Parameters
    ----------
    n_rows, n_features : int
    seed : int

    Returns
    -------
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_rows,) with labels 0 and 1

    Examples
    --------
    >>> X, y = synthetic_two_class(100, 3, seed=0)
    >>> X.shape, sorted(set(y.tolist()))
    ((100, 3), [0, 1])
    """
    rng = np.random.default_rng(seed)
    X = np.empty((n_rows, n_features))
    y = rng.integers(0, 2, size=n_rows)
    for label in (0, 1):
        A = rng.normal(size=(n_features, n_features)) / np.sqrt(n_features)
        centre = rng.normal(size=n_features) * 0.8
        rows = y == label
        X[rows] = centre + rng.normal(size=(rows.sum(), n_features)) @ A
    return X, y
