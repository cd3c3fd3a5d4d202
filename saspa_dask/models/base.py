"""The SASPA estimators' shared part: parameters, their checks, fitted state, new rows.

A fit is a :class:`~saspa_dask.fitting.plan.FitPlan` built from the parameters; its
result is a :class:`~saspa_dask.fitting.posterior.FittedPosterior`
(``fitted_posterior_``, what every prediction uses) and a fit report (EP and optimiser
diagnostics, per-row sites: the attributes named in ``_REPORT_ATTRIBUTES`` and
``_REPORT_ARRAYS``).  Predictions, the fitted attributes that describe the posterior
and ``save`` come from :class:`~saspa_dask.models.predictor.PosteriorModel`.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import (Interval, InvalidParameterError, Options,
                                            StrOptions)
from sklearn.utils.validation import check_is_fitted

from ..core.threads import single_scipy_thread
from ..core.likelihoods import LIKELIHOODS
from ..core.bases import Basis
from ..core.kernel_profiles import KERNELS
from ..core.kernels import BASIS_FAMILIES
from ..engines.chunks import is_lazy
from ..fitting.basis_parameters import LEARN_BASES
from ..fitting.held_out import HeldOut, HeldOutError
from ..fitting.input_groups import FEATURE_GROUP_RULES, FEATURE_GROUPS_AUTO
from ..fitting.new_rows import adf_pass, update_pass
from ..fitting.learning_start import run_plan
from ..fitting.plan import REPORT_ARRAYS, REPORT_ATTRIBUTES, FitPlan
from .predictor import PosteriorModel
from .settings import (APPROXIMATIONS, LEARNING_METHODS, EPSchedule, Execution,
                       StochasticLearning, settings_of)
from .validation import column_names_of, validate_training_input

__all__ = ["SASPABase"]

_POSITIVE = Interval(Real, 0, None, closed="neither")

# the parameters a FitPlan takes under the same name
_PLAN_PARAMETERS = ("n_bases", "blur", "kernel", "feature_groups", "additive_groups",
                    "term_weights", "bases",
                    "lengthscale", "jitter", "alpha",
                    "approximation", "random_state", "optimize_hyperparameters",
                    "learn_bases", "learn_blur_scale", "n_restarts_optimizer",
                    "hyper_subsample", "learning", "hyper_tol", "max_hyper_iter",
                    "max_fit_time", "verbose")


class SASPABase(PosteriorModel):
    """Parameters, fitted state and new rows shared by the SASPA estimators."""

    _parameter_constraints: dict = {
        "n_bases": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "blur": [StrOptions(set(BASIS_FAMILIES) | {"auto"})],
        "kernel": [StrOptions(set(KERNELS))],
        "feature_groups": [StrOptions({*FEATURE_GROUP_RULES, FEATURE_GROUPS_AUTO}),
                           "array-like", None],
        "additive_groups": [StrOptions(set(FEATURE_GROUP_RULES)), "array-like", None],
        "term_weights": ["array-like", None],
        "approximation": [StrOptions(set(APPROXIMATIONS))],
        "alpha": [Interval(Real, 0, 1, closed="right")],
        "lengthscale": ["array-like", _POSITIVE, None],
        "signal_variance": [_POSITIVE, None],
        "bases": [Basis, None],
        "jitter": [_POSITIVE],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "optimize_hyperparameters": ["boolean"],
        "max_hyper_iter": [Interval(Integral, 1, None, closed="left")],
        "hyper_tol": [Interval(Real, 0, None, closed="left")],
        "max_fit_time": [Interval(Real, 0, None, closed="neither"), None],
        "n_restarts_optimizer": [Interval(Integral, 0, None, closed="left")],
        "learn_blur_scale": ["boolean"],
        "learn_bases": [StrOptions(set(LEARN_BASES) | {"auto"}), Options(bool, {False}),
                        None],
        "hyper_subsample": [Interval(Integral, 1, None, closed="left"), str, tuple, list,
                            None],
        "learning": [StrOptions(set(LEARNING_METHODS))],
        "stochastic": [StochasticLearning, dict, None],
        "ep": [EPSchedule, dict, None],
        "execution": [Execution, dict, None],
    }

    # the fit report: diagnostics a model store keeps beside the fitted posterior
    _REPORT_ATTRIBUTES = REPORT_ATTRIBUTES
    _REPORT_ARRAYS = REPORT_ARRAYS

    @property
    def _ep(self):
        return self._settings("ep")

    @property
    def _execution(self):
        return self._settings("execution")

    def _validate_params(self):
        """scikit-learn's parameter checks, then the grouped settings' fields (before
        any work: the data's checks and K-means come after)."""
        super()._validate_params()
        for group in ("ep", "execution", "stochastic"):
            self._settings(group)
        try:  # how the parameters combine (FitPlan.validate): before any data is read
            self._fit_plan().validate(LIKELIHOODS.get(getattr(self, "likelihood", None)))
        except ValueError as err:
            raise InvalidParameterError(f"{type(self).__name__}: {err}") from None

    def _settings(self, group):
        """A grouped setting, checked; errors as scikit-learn's for its parameters."""
        try:
            return settings_of(group, getattr(self, group))
        except ValueError as err:
            raise InvalidParameterError(f"The {group!r} parameter of {type(self).__name__}: "
                                        f"{err}") from None

    @property
    def _prediction_rows(self):
        return self._execution.block_rows

    # -- fitting -------------------------------------------------------------------

    def _reset(self):
        """Forget every fitted attribute (a refit starts from nothing)."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)

    def _fit_plan(self, damping=None):
        """This estimator's fit: its parameters as a plan (``damping`` resolved for a
        plan that runs; None for one that is only validated)."""
        ep = self._ep if damping is None else replace(self._ep, damping=float(damping))
        return FitPlan(owner=type(self).__name__,
                       **{name: getattr(self, name) for name in _PLAN_PARAMETERS},
                       **self._task_plan_parameters(),
                       stochastic=self._settings("stochastic"), ep=ep,
                       execution=self._execution)

    def _task_plan_parameters(self):
        """The plan's parameters only one task's estimator has (the regressor's)."""
        return {}

    def _fit_posterior(self, X, targets, likelihood, signal_variance, damping, column_std,
                       *, progress=None, init_sites=None, labels=None, offset=0.0,
                       classes=None, column_names=None, data_fingerprint=None, centre=None,
                       held_out=None):
        """Run this estimator's :class:`~saspa_dask.fitting.plan.FitPlan` and keep its
        result: ``fitted_posterior_`` and the fit report.

        ``labels`` (one-vs-rest) makes one EP problem per class on shared blocks.
        ``column_names`` and ``data_fingerprint`` describe where X came from (a data
        store's columns and content): the posterior keeps the names (scoring matches
        columns by them) and the report the fingerprint.
        """
        result = run_plan(
            self._fit_plan(damping), X, targets, likelihood,
            signal_variance=signal_variance, column_std=column_std,
            labels=labels, init_sites=init_sites, centre=centre, progress=progress,
            offset=offset, classes=classes,
            feature_names=column_names_of(self, column_names), held_out=held_out)
        for name, value in result.report.items():
            setattr(self, name, value)
        self.fitted_posterior_ = result.posterior
        self.data_fingerprint_ = data_fingerprint
        return self

    def _held_out(self, X_val, y_val, classes=None):
        """``fit``'s held-out rows, checked like new training rows (None when not
        given); ``classes``: a classifier's training labels, which ``y_val``'s must be
        among (checked here for in-memory labels, chunk by chunk otherwise)."""
        if X_val is None and y_val is None:
            return None
        if X_val is None or y_val is None:
            raise HeldOutError("X_val and y_val go together: give both or neither")
        try:
            X_val, y_val, _ = validate_training_input(
                self, X_val, y_val, classification=classes is not None, reset=False)
        except ValueError as err:
            raise HeldOutError(f"X_val, y_val: {err}") from None
        if classes is not None and not is_lazy(y_val):
            unknown = np.setdiff1d(np.unique(y_val), classes)
            if unknown.size:
                raise HeldOutError(f"y_val has labels {unknown[:5].tolist()} that are not "
                                 f"among the training labels {classes[:10].tolist()}")
        return HeldOut(X_val, y_val)

    # -- new rows ------------------------------------------------------------------

    def warm_start_sites(self, X_new, y_new, *, new_rows="update"):
        """Sites to warm-start a refit on the training rows followed by ``X_new``.

        The training rows keep their fitted sites.  The new rows' sites remove the
        first, largest sweep of a start from zero sites; ``new_rows`` says how:

        - ``"update"``: one EP site update of every new row against the current
          posterior, all at once (a parallel EP step restricted to the new rows; costs
          a sweep over the new rows only);
        - ``"adf"``: one assumed-density-filtering pass, as ``partial_fit`` gives them
          (each row also sees the rows before it; sequential, so slower per row);
        - ``"empty"``: zero sites.

        The model is not changed.  Pass the result as ``init_sites`` to ``fit`` on all
        rows, with this model's bases and hyperparameters, as ``saspa retrain`` does.

        Parameters
        ----------
        X_new : array-like of shape (n_new, n_features)
            NumPy, dask or zarr; lazy inputs are read one row chunk at a time.
        y_new : array-like of shape (n_new,)
        new_rows : {"update", "adf", "empty"}, default="update"

        Returns
        -------
        tau, nu : ndarray of shape (n_train + n_new,), or (n_problems, n_train + n_new)
            for one-vs-rest.  Invalid cavities and skipped updates met on the new rows
            are reported as a warning (their sites stay zero).
        """
        check_is_fitted(self, "fitted_posterior_")
        if new_rows not in ("update", "adf", "empty"):
            raise ValueError(f"new_rows must be one of ('update', 'adf', 'empty'), got "
                             f"{new_rows!r}")
        X_new, targets, labels = self._new_rows(X_new, y_new)
        fitted, n_skipped = self.fitted_posterior_, 0
        if new_rows == "update":
            tau, nu, n_invalid = update_pass(fitted, X_new, targets, labels,
                                             self._execution.block_rows, self.alpha)
        elif new_rows == "adf":
            _, tau, nu, n_invalid, n_skipped = adf_pass(fitted, X_new, targets, labels,
                                                        self._execution.block_rows,
                                                        self.alpha)
        else:
            tau = nu = np.zeros(self.sites_tau_.shape[:-1] + (X_new.shape[0],))
            n_invalid = 0
        if n_invalid or n_skipped:
            warnings.warn(f"new rows' starting sites ({new_rows}): {n_invalid} invalid "
                          f"cavities, {n_skipped} skipped updates", UserWarning, stacklevel=2)
        return (np.concatenate([self.sites_tau_, tau], axis=-1),
                np.concatenate([self.sites_nu_, nu], axis=-1))

    @single_scipy_thread
    def _partial_fit_rows(self, X, y):
        """One assumed-density-filtering pass over new rows (see ``partial_fit``)."""
        X, targets, labels = self._new_rows(X, y)
        posteriors, tau, nu, n_invalid, n_skipped = adf_pass(
            self.fitted_posterior_, X, targets, labels, self._execution.block_rows, self.alpha)
        self.sites_tau_ = np.concatenate([self.sites_tau_, tau], axis=-1)
        self.sites_nu_ = np.concatenate([self.sites_nu_, nu], axis=-1)
        self.n_invalid_cavities_ += n_invalid
        self.n_skipped_updates_ += n_skipped
        self.history_ = [*self.history_, {"partial_fit_rows": int(X.shape[0]),
                                          "n_invalid": n_invalid, "n_skipped": n_skipped}]
        self.fitted_posterior_ = replace(self.fitted_posterior_, posteriors=tuple(posteriors))
        # the evidence needs every row's cavity; partial_fit does not revisit old rows
        self.log_evidence_ = float("nan")
        return self
