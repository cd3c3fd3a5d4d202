"""Full (non-sparse) Gaussian-process EP: the exact method for N up to a few thousand.

A full GP is SASPA with one delta basis at every training input: then
Kh = K(X, X), phi_i = L^{-1} k_i spans the training latents exactly and the residual
variances s2 - |phi_i|^2 are zero up to the jitter.  EP, the evidence, its gradient,
hyperparameter learning, one-vs-rest classes and prediction are the tested SASPA
machinery; the cost is O(N^3) per sweep and N^2 floats of memory, like any dense GP.

The estimators compose a SASPA estimator (bases at the training inputs, delta blur,
no K-means, no subsample, plain EP) rather than inherit from it: they take only the
parameters a full GP has, and predict through the same fitted posterior.

The benchmarks use it as the reference of the paper's KL measure; users can use it
as the exact method on small data.  With ``subset_of_data=True`` it is also the
subset-of-data baseline of the sparse-GP literature: the full GP of a seeded uniform
sample of ``max_samples`` rows, the rest ignored (its rows are ``subset_indices_``).  The jitter (relative to the signal variance,
default 1e-6) acts as a tiny extra latent noise and is reported as ``jitter_``.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import (Hidden, Interval, InvalidParameterError,
                                             StrOptions)
from sklearn.utils.validation import validate_data

from ..core.threads import single_scipy_thread
from ..core.bases import Basis
from ..engines.chunks import is_lazy, seed_from
from .classifier import SASPAClassifier
from .predictor import PosteriorClassifierMixin, PosteriorModel, PosteriorRegressorMixin
from .regressor import SASPARegressor
from .settings import EPSchedule
from .validation import dense_rows

__all__ = ["FullGPClassifier", "FullGPRegressor"]


class _FullGP:
    """Fit by a SASPA estimator with a delta basis at every training input."""

    _REPORT_ATTRIBUTES = SASPAClassifier._REPORT_ATTRIBUTES
    _REPORT_ARRAYS = (*SASPAClassifier._REPORT_ARRAYS, "subset_indices_")
    # the SASPA estimator that fits it, and the parameters it shares
    _SPARSE: type
    _SHARED: tuple

    @single_scipy_thread
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Fit by EP with every training row as a basis.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            In memory, at most ``max_samples`` rows.
        y : array-like of shape (n_samples,)

        Returns
        -------
        self
        """
        self._reset()
        schedule = self._schedule()  # a bad schedule fails before the data's checks
        if is_lazy(X):
            raise ValueError(f"{type(self).__name__} is a dense method: pass in-memory "
                             "arrays (use SASPAClassifier / SASPARegressor on Dask data)")
        # scikit-learn's checks and messages first; the checked rows are the bases
        X_checked = self._validated_rows(X, y)
        n = X_checked.shape[0]
        rows = np.arange(n)
        if n > self.max_samples and self.subset_of_data:
            rng = np.random.default_rng(seed_from(self.random_state))
            rows = np.sort(rng.choice(n, size=self.max_samples, replace=False))
            X, y, X_checked = (_safe_indexing(X, rows), _safe_indexing(y, rows),
                               X_checked[rows])
        elif n > self.max_samples:
            raise ValueError(
                f"{type(self).__name__} with {n} rows needs an {n} x {n} kernel matrix and "
                f"O(N^3) work per sweep; max_samples={self.max_samples}. Raise max_samples, "
                "set subset_of_data=True to fit a random sample of that many rows, or use "
                "the sparse estimators")
        sparse = self._SPARSE(
            **{name: getattr(self, name) for name in self._SHARED}, blur="delta",
            bases=Basis(np.array(X_checked, dtype=np.float64, copy=True)),
            learn_bases=False, hyper_subsample=None, ep=schedule)
        sparse.fit(X, y)
        for name in (*self._REPORT_ATTRIBUTES, *self._REPORT_ARRAYS):
            if hasattr(sparse, name):
                setattr(self, name, getattr(sparse, name))
        self.fitted_posterior_ = sparse.fitted_posterior_
        self.subset_indices_ = rows
        self.n_features_in_ = sparse.n_features_in_
        if hasattr(sparse, "feature_names_in_"):
            self.feature_names_in_ = sparse.feature_names_in_
        return self

    def _schedule(self):
        """The EP schedule: ``ep`` over the full GP's own defaults (plain EP: no
        Anderson acceleration, no coarse start), with the deprecated flat parameters
        folded in (each with a FutureWarning)."""
        given = self.ep
        if isinstance(given, EPSchedule):
            given = asdict(given)
        fields = {**_FULL_EP, **(given or {})}
        for flat, field in _FLAT_EP.items():
            value = getattr(self, flat)
            if not (isinstance(value, str) and value == "deprecated"):
                warnings.warn(f"{type(self).__name__}({flat}=...) is deprecated and will "
                              f"be removed in the next release; use ep={{'{field}': "
                              f"{value!r}}}", FutureWarning, stacklevel=5)
                fields[field] = value
        try:
            return EPSchedule(**fields)
        except (TypeError, ValueError) as err:
            raise InvalidParameterError(f"The 'ep' parameter of {type(self).__name__}: "
                                        f"{err}") from None

    def _validated_rows(self, X, y):
        X, _ = validate_data(self, dense_rows(X), y, reset=True, dtype=np.float64, ensure_min_samples=2,
                             y_numeric=isinstance(self, PosteriorRegressorMixin))
        return X


# the full GP's EP: plain (no Anderson acceleration, no coarse start) for the
# reference method; the four flat parameters it took before ``ep`` (deprecated)
_FULL_EP = {"anderson_memory": 0, "coarse_start": False}
_FLAT_EP = {"ep_mode": "mode", "damping": "damping", "max_sweeps": "max_sweeps",
            "tol": "tol"}
_DEPRECATED = Hidden(StrOptions({"deprecated"}))


def _constraints(sparse, names):
    """The sparse estimator's constraints of the parameters a full GP shares with it,
    and the full GP's own."""
    return {**{k: sparse._parameter_constraints[k] for k in names},
            "ep": [EPSchedule, dict, None],
            "ep_mode": [StrOptions({"parallel", "sequential"}), _DEPRECATED],
            "damping": [Interval(Real, 0, 1, closed="right"), None, _DEPRECATED],
            "max_sweeps": [Interval(Integral, 1, None, closed="left"), _DEPRECATED],
            "tol": [Interval(Real, 0, None, closed="neither"), _DEPRECATED],
            "max_samples": [Interval(Integral, 1, None, closed="left")],
            "subset_of_data": ["boolean"],
            "random_state": ["random_state"]}


_FULL_PARAMS_DOC = """
    lengthscale : float or array-like of shape (n_features,), default=None
        Starting SE-ARD lengthscales (default: ``std(X[:, k]) * sqrt(n_features)``).
    signal_variance : float, default=None
        Starting signal variance (classifier 1.0; regressor the variance of y).
    ep : EPSchedule or dict, default=None
        How EP runs (:class:`EPSchedule`; a dict sets some of its fields).  The full
        GP's defaults are plain EP: ``anderson_memory=0`` and ``coarse_start=False``
        unless given; the other fields default as in :class:`EPSchedule`.
    ep_mode, damping, max_sweeps, tol : deprecated
        Use ``ep={"mode": ..., "damping": ..., "max_sweeps": ..., "tol": ...}``; each
        still works, with a ``FutureWarning``, until the next release.
    jitter : float, default=1e-6
        Jitter relative to the signal variance on the N x N kernel matrix (raised
        tenfold while the Cholesky factorisation fails; the value used is
        ``jitter_``).
    optimize_hyperparameters : bool, default=True
        Maximise the EP evidence over the kernel and likelihood hyperparameters.
    max_hyper_iter : int, default=500
    hyper_tol : float, default=1e-4
    max_fit_time : float or None, default=None
        When the optimiser stops (see :class:`SASPAClassifier`).
    n_restarts_optimizer : int, default=0
        Further evidence maximisations from shorter starting lengthscales (see
        :class:`SASPAClassifier`).
    max_samples : int, default=5000
        Largest training set accepted (the kernel matrix has N^2 entries).
    subset_of_data : bool, default=False
        With more rows than ``max_samples``, fit a uniform random sample of
        ``max_samples`` of them (the subset-of-data baseline) instead of refusing.
    random_state : int, RandomState or None, default=None
        Seeds that sample.
    verbose : int, default=0
"""


class FullGPClassifier(_FullGP, PosteriorClassifierMixin, PosteriorModel):
    __doc__ = f"""Full Gaussian-process classification by EP (dense, O(N^3) per sweep).

    The same kernel, likelihoods, evidence and hyperparameter learning as
    :class:`SASPAClassifier`, with every training input as a basis: the exact EP
    method the sparse approximations approximate.

    Parameters
    ----------
    likelihood : {{"probit", "logistic", "step", "noisy_probit"}}, default="probit"
    label_noise : float in [0, 0.5), default=0.01
{_FULL_PARAMS_DOC}
    Attributes
    ----------
    The fitted attributes of :class:`SASPAClassifier` (``bases_`` holds the
    training inputs), and ``subset_indices_``, the rows fitted (all of them unless
    ``subset_of_data`` sampled them).

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import FullGPClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 2))
    >>> y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> bool(FullGPClassifier().fit(X, y).score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = _constraints(SASPAClassifier, (
        "likelihood", "label_noise", "lengthscale", "signal_variance", "jitter",
        "optimize_hyperparameters", "max_hyper_iter", "hyper_tol", "max_fit_time",
        "n_restarts_optimizer", "verbose"))

    _SPARSE = SASPAClassifier
    _SHARED = ("likelihood", "label_noise", "lengthscale", "signal_variance", "jitter",
               "optimize_hyperparameters", "max_hyper_iter", "hyper_tol", "max_fit_time",
               "n_restarts_optimizer", "verbose")

    def __init__(self, *, likelihood="probit", label_noise=0.01, lengthscale=None,
                 signal_variance=None, ep=None, jitter=1e-6, optimize_hyperparameters=True,
                 max_hyper_iter=500, hyper_tol=1e-4, max_fit_time=None, n_restarts_optimizer=0, max_samples=5000,
                 subset_of_data=False, random_state=None, verbose=0, ep_mode="deprecated",
                 damping="deprecated", max_sweeps="deprecated", tol="deprecated"):
        self.likelihood = likelihood
        self.label_noise = label_noise
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.ep = ep
        self.ep_mode = ep_mode
        self.damping = damping
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.jitter = jitter
        self.optimize_hyperparameters = optimize_hyperparameters
        self.max_hyper_iter = max_hyper_iter
        self.hyper_tol = hyper_tol
        self.max_fit_time = max_fit_time
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_samples = max_samples
        self.subset_of_data = subset_of_data
        self.random_state = random_state
        self.verbose = verbose


class FullGPRegressor(_FullGP, PosteriorRegressorMixin, PosteriorModel):
    __doc__ = f"""Full Gaussian-process regression by EP (dense, O(N^3) per sweep).

    With the Gaussian likelihood this is exact GP regression; ``student_t`` and
    ``poisson`` use EP as in :class:`SASPARegressor`.

    Parameters
    ----------
    likelihood : {{"gaussian", "student_t", "poisson"}}, default="gaussian"
    noise_variance : float, default=None
    dof : float, default=4.0
    scale : float, default=None
    center_y : bool, default=True
    learn_offset : bool, default=True
        Learn a constant prior mean with the kernel (as :class:`SASPARegressor`).
{_FULL_PARAMS_DOC}
    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import FullGPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(80, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    >>> bool(np.abs(FullGPRegressor().fit(X, y).predict(X) - np.sin(X[:, 0])).max() < 0.2)
    True
    """

    _parameter_constraints: dict = _constraints(SASPARegressor, (
        "likelihood", "noise_variance", "dof", "scale", "center_y", "learn_offset",
        "lengthscale", "signal_variance", "jitter", "optimize_hyperparameters",
        "max_hyper_iter", "hyper_tol", "max_fit_time", "n_restarts_optimizer", "verbose"))

    _SPARSE = SASPARegressor
    _SHARED = ("likelihood", "noise_variance", "dof", "scale", "center_y", "learn_offset",
               "lengthscale", "signal_variance", "jitter", "optimize_hyperparameters",
               "max_hyper_iter", "hyper_tol", "max_fit_time", "n_restarts_optimizer",
               "verbose")

    def __init__(self, *, likelihood="gaussian", noise_variance=None, dof=4.0, scale=None,
                 center_y=True, learn_offset=True, lengthscale=None, signal_variance=None,
                 ep=None, jitter=1e-6, optimize_hyperparameters=True, max_hyper_iter=500, hyper_tol=1e-4,
                 max_fit_time=None, n_restarts_optimizer=0, max_samples=5000,
                 subset_of_data=False, random_state=None, verbose=0, ep_mode="deprecated",
                 damping="deprecated", max_sweeps="deprecated", tol="deprecated"):
        self.likelihood = likelihood
        self.noise_variance = noise_variance
        self.dof = dof
        self.scale = scale
        self.center_y = center_y
        self.learn_offset = learn_offset
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.ep = ep
        self.ep_mode = ep_mode
        self.damping = damping
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.jitter = jitter
        self.optimize_hyperparameters = optimize_hyperparameters
        self.max_hyper_iter = max_hyper_iter
        self.hyper_tol = hyper_tol
        self.max_fit_time = max_fit_time
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_samples = max_samples
        self.subset_of_data = subset_of_data
        self.random_state = random_state
        self.verbose = verbose

