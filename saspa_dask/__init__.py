"""saspa_dask: sparse Gaussian processes by SASPA expectation propagation, on Dask.

The public API is small: the two estimators, their full-GP (exact) counterparts,
``Basis`` for explicit bases, model stores, and the job functions in
:mod:`saspa_dask.jobs`.  The package is layered; each layer imports only the ones
below it (checked by import-linter in CI)::

    cli, pipelines     interfaces: the saspa command, TOML jobs
    jobs               ingest / train / retrain / score / evaluate / describe
    storage            data and score stores, fingerprints, ingest
    models             estimators, the fitted posterior, model stores
    fitting            hyperparameters, evidence gradient, optimiser, trainer
    engines            in-memory and Dask EP engines, K-means, row chunks
    ep                 whitening, sites, acceleration, the EP driver
    core               kernels, likelihoods, bases
    datasets           synthetic data
    files              atomic writes, zarr groups, StoreError
"""

from ._version import __version__
from ._lazy import lazy_getattr

# The public names load on first use (PEP 562), so ``saspa --help`` and other light
# entry points do not import NumPy, SciPy, Dask and scikit-learn.
_PUBLIC = {
    "Basis": ".core.bases",
    "EPConvergenceWarning": ".ep.driver",
    "EPSchedule": ".models",
    "Execution": ".models",
    "FittedPosterior": ".models",
    "FullGPClassifier": ".models",
    "FullGPRegressor": ".models",
    "IVMClassifier": ".models",
    "LearntBoundWarning": ".fitting.learning_advice",
    "LearningStoppedWarning": ".fitting.learning_advice",
    "SASPAClassifier": ".models",
    "SASPARegressor": ".models",
    "SparseOnlineGPClassifier": ".models",
    "SparseOnlineGPRegressor": ".models",
    "StochasticLearning": ".models",
    "StoreError": ".files.errors",
    "greedy_bases": ".engines.greedy",
    "greedy_fit": ".models.greedy_alternation",
    "ivm_bases": ".engines.ivm",
    "kmeans_bases": ".engines.kmeans",
    "load_model": ".models",
    "save_model": ".models",
}

__all__ = [*_PUBLIC, "__version__"]


__getattr__ = lazy_getattr(__name__, _PUBLIC)


def __dir__():
    return sorted(set(globals()) | set(__all__))
