"""saspa_dask: sparse Gaussian processes by SASPA expectation propagation, on Dask.

The public API is small: the two estimators, their full-GP (exact) counterparts, ``Basis`` for explicit bases, and the
likelihood and kernel functions for users who build on the engine.
"""

from .bases import Basis, kmeans_bases
from .store import StoreError, load_model
from .ep import EPConvergenceWarning
from .estimators import SASPAClassifier, SASPARegressor
from .exact import FullGPClassifier, FullGPRegressor

__all__ = [
    "Basis",
    "EPConvergenceWarning",
    "FullGPClassifier",
    "FullGPRegressor",
    "StoreError",
    "load_model",
    "SASPAClassifier",
    "SASPARegressor",
    "kmeans_bases",
]

__version__ = "0.1.0"
