"""Loading a model store: the estimator classes by the names stores record.

A store names its estimator's class; this module is the one place that maps those
names to classes (a plain table of the classes the package defines: nothing has to be
imported first for a class to be known).
"""

from __future__ import annotations

from ..files.atomic import resolve_model_path
from .classifier import SASPAClassifier
from .full_gp import FullGPClassifier, FullGPRegressor
from .ivm import IVMClassifier
from .model_reader import read_model
from .online import SparseOnlineGPClassifier, SparseOnlineGPRegressor
from .regressor import SASPARegressor

__all__ = ["ESTIMATORS", "load_model", "load_model_and_attrs"]

ESTIMATORS = {cls.__name__: cls for cls in (
    SASPAClassifier, SASPARegressor, FullGPClassifier, FullGPRegressor,
    SparseOnlineGPClassifier, SparseOnlineGPRegressor, IVMClassifier)}


def load_model(path):
    """Load a model written by ``model.save(path)`` (or :func:`saspa_dask.save_model`).

    Parameters
    ----------
    path : str or Path
        A model store, or a ``latest`` pointer file naming one.

    Returns
    -------
    estimator
        The estimator named in the store, fitted: ``fitted_posterior_``, the fit
        report and ``get_params()`` as saved; it predicts exactly as the saved one.

    Raises
    ------
    StoreError
        Missing, foreign, incomplete, truncated or inconsistent store.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from saspa_dask import SASPARegressor, load_model
    >>> X = np.linspace(-2, 2, 40)[:, None]
    >>> model = SASPARegressor(n_bases=4, random_state=0).fit(X, np.sin(X[:, 0]))
    >>> path = model.save(pathlib.Path(tempfile.mkdtemp()) / "model.zarr")
    >>> bool(np.array_equal(load_model(path).predict(X), model.predict(X)))
    True
    """
    return load_model_and_attrs(path)[0]


def load_model_and_attrs(path):
    """:func:`load_model`, and the store's attributes it read (what the training job
    recorded beside the model: data columns, target labels, row probes ...), from one
    reading of the store."""
    return read_model(resolve_model_path(path), ESTIMATORS)
