"""saspa_dask: sparse Gaussian processes by SASPA expectation propagation, on Dask.

The public API is small: the two estimators, their full-GP (exact) counterparts,
``Basis`` for explicit bases, model stores, and the job functions in
:mod:`saspa_dask.jobs`.  The package is layered; each layer imports only the ones
below it (checked by import-linter in CI)::

    cli, pipelines     interfaces: the saspa command, TOML jobs
    jobs               ingest / train / retrain / score / evaluate / describe
    storage            data, model and score stores, fingerprints, ingest
    models             estimators, the fitted posterior
    fitting            hyperparameters, evidence gradient, optimiser, trainer
    engines            in-memory and Dask EP engines, K-means, row chunks
    ep                 whitening, sites, acceleration, the EP driver
    core               kernels, likelihoods, bases
    datasets           synthetic data
"""

from ._version import __version__
from .core.bases import Basis
from .engines.kmeans import kmeans_bases
from .ep.driver import EPConvergenceWarning
from .models import (FittedPosterior, FullGPClassifier, FullGPRegressor, SASPAClassifier,
                     SASPARegressor)
from .storage import StoreError, load_model

__all__ = [
    "Basis",
    "EPConvergenceWarning",
    "FittedPosterior",
    "FullGPClassifier",
    "FullGPRegressor",
    "StoreError",
    "load_model",
    "SASPAClassifier",
    "SASPARegressor",
    "kmeans_bases",
    "__version__",
]
