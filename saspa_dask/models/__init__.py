"""Layer 5, models: the scikit-learn estimators and the fitted posterior they share.

- :mod:`~saspa_dask.models.posterior`: :class:`FittedPosterior`, what predictions use;
- :mod:`~saspa_dask.models.base`: fitting, fitted state and new rows (shared);
- :mod:`~saspa_dask.models.classifier`, :mod:`~saspa_dask.models.regressor`: the
  public SASPA estimators; :mod:`~saspa_dask.models.full_gp`: the dense full-GP EP;
- :mod:`~saspa_dask.models.online`: Csató & Opper's sparse online GP estimators;
- :mod:`~saspa_dask.models.ivm`: the informative vector machine (a baseline);
- :mod:`~saspa_dask.models.augmented`: augmented prediction over the training rows;
- :mod:`~saspa_dask.models.new_rows`: ADF and update passes over unseen rows;
- :mod:`~saspa_dask.models.validation`: input checks (lazy input in one pass);
- :mod:`~saspa_dask.models.registry`: estimator classes by name, the store's writer;
- :mod:`~saspa_dask.models.docs`: shared docstring fragments.
"""

from .classifier import SASPAClassifier
from .full_gp import FullGPClassifier, FullGPRegressor
from .ivm import IVMClassifier
from .online import SparseOnlineGPClassifier, SparseOnlineGPRegressor
from .posterior import FittedPosterior
from .regressor import SASPARegressor

__all__ = ["FittedPosterior", "FullGPClassifier", "FullGPRegressor", "IVMClassifier",
           "SASPAClassifier",
           "SASPARegressor", "SparseOnlineGPClassifier", "SparseOnlineGPRegressor"]
