"""Data for demos, tests and benchmarks: synthetic sets (the SASPA paper's setup) and
one small real set shipped with the package (:func:`load_ionosphere`)."""

from __future__ import annotations

import copy
import gzip
import io
from importlib.resources import files

import numpy as np

__all__ = ["load_ionosphere", "multiscale_regression", "multiscale_signal",
           "synthetic_two_class", "synthetic_two_class_chunks"]


def load_ionosphere():
    """The UCI Ionosphere data set, shipped with the package (CC BY 4.0; its source in
    ``saspa_dask/data/README.md``): 351 radar returns, 33 numeric inputs, class ``"g"``
    (good) or ``"b"`` (bad).  The SASPA paper's Figure 5 data.

    Returns
    -------
    X : ndarray of shape (351, 33), float64
    y : ndarray of shape (351,), str

    Examples
    --------
    >>> from saspa_dask.datasets import load_ionosphere
    >>> X, y = load_ionosphere()
    >>> X.shape, sorted(set(y.tolist()))
    ((351, 33), ['b', 'g'])
    """
    packed = files("saspa_dask").joinpath("data", "ionosphere.csv.gz").read_bytes()
    text = gzip.decompress(packed).decode("ascii")
    table = np.loadtxt(io.StringIO(text), delimiter=",", skiprows=1, dtype=str)
    return table[:, :-1].astype(np.float64), table[:, -1]


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


def synthetic_two_class_chunks(n_rows, n_features, seed, chunk_rows=1_000_000):
    """:func:`synthetic_two_class`'s rows, ``chunk_rows`` at a time, in a chunk's
    memory: the same draws in the same order (its labels, then each class's
    covariance, centre and rows), so the same values (to the last bit wherever a class's
    rows of a chunk are multiplied as they are in one piece; to rounding otherwise).

    The generator's stream is replayed instead of held: one pass counts the labels, a
    second skips class 0's rows to reach class 1's draws, and the chunks then take
    their labels and each class's rows from three copies of the generator, each at its
    place in the stream.

    Yields
    ------
    X : ndarray of shape (rows, n_features)
    y : ndarray of shape (rows,) with labels 0 and 1

    Examples
    --------
    >>> import numpy as np
    >>> X, y = synthetic_two_class(1000, 3, seed=0)
    >>> parts = list(synthetic_two_class_chunks(1000, 3, seed=0, chunk_rows=300))
    >>> [len(p[1]) for p in parts]
    [300, 300, 300, 100]
    >>> np.allclose(np.vstack([p[0] for p in parts]), X, rtol=1e-15, atol=1e-15)
    True
    """
    starts = range(0, n_rows, chunk_rows)
    rng = np.random.default_rng(seed)
    labels = copy.deepcopy(rng)
    n_first = sum(int((rng.integers(0, 2, size=min(chunk_rows, n_rows - s)) == 0).sum())
                  for s in starts)
    classes = []
    for n_class in (n_first, n_rows - n_first):
        A = rng.normal(size=(n_features, n_features)) / np.sqrt(n_features)
        centre = rng.normal(size=n_features) * 0.8
        classes.append((copy.deepcopy(rng), centre, A))
        for done in range(0, n_class, chunk_rows):  # past this class's rows
            rng.normal(size=(min(chunk_rows, n_class - done), n_features))
    for start in starts:
        y = labels.integers(0, 2, size=min(chunk_rows, n_rows - start))
        X = np.empty((y.size, n_features))
        for label, (stream, centre, A) in enumerate(classes):
            rows = y == label
            X[rows] = centre + stream.normal(size=(rows.sum(), n_features)) @ A
        yield X, y


def multiscale_signal(X):
    """The noise-free function of :func:`multiscale_regression` (the last input is
    irrelevant: it never enters).

    Structure at three length scales: a slow trend (inputs 0 and 1, scale ~2), a medium
    wave across inputs 2 and 3 (scale ~0.5), a fast product of inputs 4 and 5 (scale
    ~0.2), and a medium bump in input 6; inputs 7 and beyond are not used.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.shape[1] < 8:
        raise ValueError(f"the multiscale signal needs at least 8 inputs, got {X.shape[1]}")
    return (np.sin(0.5 * X[:, 0]) + 0.25 * X[:, 1]
            + 0.6 * np.sin(2.0 * X[:, 2] + X[:, 3])
            + 0.3 * np.sin(5.0 * X[:, 4]) * np.cos(4.0 * X[:, 5])
            + 0.5 * np.exp(-2.0 * X[:, 6] ** 2))


def multiscale_regression(n_rows, n_features=8, seed=0):
    """Regression rows with structure at several length scales, irrelevant inputs and
    noise of standard deviation 0.1 times the signal's.

    Inputs are independent uniforms on [-2, 2]; the target is
    :func:`multiscale_signal` plus Gaussian noise whose standard deviation is 0.1 times
    the standard deviation of the signal over these rows.

    Parameters
    ----------
    n_rows : int
    n_features : int, default=8
        At least 8; inputs 7 and beyond are irrelevant.
    seed : int

    Returns
    -------
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_rows,)
    f : ndarray of shape (n_rows,)
        The noise-free signal.

    Examples
    --------
    >>> X, y, f = multiscale_regression(20000, seed=1)
    >>> round(float(np.std(y - f) / np.std(f)), 2)
    0.1
    """
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n_rows, n_features))
    f = multiscale_signal(X)
    y = f + 0.1 * f.std() * rng.normal(size=n_rows)
    return X, y, f
