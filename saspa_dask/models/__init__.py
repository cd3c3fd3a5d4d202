"""Layer 5, models: the scikit-learn estimators and the model store.

The fit itself and the fitted posterior are the fitting layer's
(:mod:`~saspa_dask.fitting.plan`, :mod:`~saspa_dask.fitting.posterior`).

- :mod:`~saspa_dask.models.predictor`: predictions, fitted attributes and ``save``
  from a fitted posterior (shared by every estimator);
- :mod:`~saspa_dask.models.base`: the SASPA estimators' parameters, fitted state, new rows;
- :mod:`~saspa_dask.models.settings`: the grouped settings as parameters (object, dict or
  None) and their old flat names;
- :mod:`~saspa_dask.models.classifier`, :mod:`~saspa_dask.models.regressor`: the
  public SASPA estimators; :mod:`~saspa_dask.models.full_gp`: the dense full-GP EP;
- :mod:`~saspa_dask.models.online`: Csató & Opper's sparse online GP estimators;
- :mod:`~saspa_dask.models.ivm`: the informative vector machine (a baseline);
- :mod:`~saspa_dask.models.greedy_alternation`: greedy basis selection alternating with
  kernel learning;
- :mod:`~saspa_dask.models.augmented`: augmented prediction over the training rows;
- :mod:`~saspa_dask.models.validation`: input checks (lazy input in one pass);
- :mod:`~saspa_dask.models.model_store`: a fitted model as a zarr group (no pickle);
  :mod:`~saspa_dask.models.model_reader` reads it back, checked;
  :mod:`~saspa_dask.models.model_summary` summarises it (``saspa info``);
- :mod:`~saspa_dask.models.loading`: the estimator classes by name, ``load_model``;
- :mod:`~saspa_dask.models.docs`: shared docstring fragments.
"""

# The names load on first use (PEP 562): reading a model store's summary does not
# import every estimator.
from .._lazy import lazy_getattr

_PUBLIC = {
    "EPSchedule": ".settings", "Execution": ".settings", "FittedPosterior": "..fitting.posterior",
    "FullGPClassifier": ".full_gp", "FullGPRegressor": ".full_gp", "IVMClassifier": ".ivm",
    "SASPAClassifier": ".classifier", "SASPARegressor": ".regressor",
    "SparseOnlineGPClassifier": ".online", "SparseOnlineGPRegressor": ".online",
    "StochasticLearning": ".settings", "greedy_fit": ".greedy_alternation", "load_model": ".loading", "save_model": ".model_store",
}

__all__ = sorted(_PUBLIC)


__getattr__ = lazy_getattr(__name__, _PUBLIC)
