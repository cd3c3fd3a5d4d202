"""What every estimator does with its fitted posterior: predict, describe, save.

Each public estimator (SASPA, the full GP, the online GPs, the IVM) fits its own way
and ends with a :class:`~saspa_dask.fitting.posterior.FittedPosterior` in
``fitted_posterior_``; these mixins give all of them the same predictions, fitted
attributes (read-only views of the posterior, one source of truth), fingerprint and
model store, by composition rather than by subclassing one another.

- :class:`PosteriorModel`: the views, ``predict_latent``, ``save``;
- :class:`PosteriorClassifierMixin`: ``predict``, ``predict_proba``,
  ``decision_function``, ``classes_``;
- :class:`PosteriorRegressorMixin`: ``predict`` (mean, standard deviation), ``y_mean_``
  and the likelihood's fitted parameters.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ..engines.chunks import is_lazy
from ..files.atomic import write_text_file
from ..files.outputs import HTML
from .model_store import save_model
from .report import model_report
from .settings import execution_of
from .validation import dense_rows

__all__ = ["PosteriorClassifierMixin", "PosteriorModel", "PosteriorRegressorMixin"]

# rows per kernel block when an estimator sets no block size of its own
_PREDICT_ROWS = 8192


def _posterior_attribute(name, doc):
    return property(lambda self: getattr(self._posterior(), name), doc=doc)


class PosteriorModel(BaseEstimator):
    """Fitted state, predictions and persistence of an estimator with a fitted posterior.

    Subclasses set ``fitted_posterior_`` in ``fit`` and name their fit report:
    ``_REPORT_ATTRIBUTES`` (JSON values) and ``_REPORT_ARRAYS`` (arrays), which a model
    store keeps beside the posterior.
    """

    _REPORT_ATTRIBUTES: tuple = ()
    _REPORT_ARRAYS: tuple = ()

    bases_ = property(lambda self: self._posterior().basis,
                      doc="Basis means and the blur covariances used.")
    lengthscale_ = _posterior_attribute("lengthscale", "Fitted ARD lengthscales.")
    signal_variance_ = _posterior_attribute("signal_variance", "Fitted signal variance.")
    term_weights_ = _posterior_attribute(
        "term_weights", "An additive kernel's learnt term weights (None: one kernel).")
    jitter_ = _posterior_attribute("jitter", "Absolute diagonal jitter used.")
    whitening_ = _posterior_attribute("whitening", "L, Cholesky factor of Kh + jitter_ I.")
    likelihood_params_ = _posterior_attribute("likelihood_params",
                                              "The likelihood's fitted parameters.")

    def _posterior(self):
        check_is_fitted(self, "fitted_posterior_")
        return self.fitted_posterior_

    @property
    def posteriors_(self):
        """One whitened posterior per EP problem."""
        return list(self._posterior().posteriors)

    @property
    def posterior_(self):
        """The whitened posterior of a one-problem model."""
        posteriors = self._posterior().posteriors
        if len(posteriors) != 1:
            raise AttributeError("posterior_ is not defined for a one-vs-rest model; "
                                 "use posteriors_")
        return posteriors[0]

    @property
    def alpha_(self):
        """The paper's alpha: predictive mean = Kt(x, B) @ alpha_."""
        return self._posterior().alpha_beta[0]

    @property
    def beta_(self):
        """The paper's beta: latent variance = s2 - k^T beta_ k."""
        return self._posterior().alpha_beta[1]

    def _likelihood_parameter(self, name):
        """A fitted likelihood parameter, defined only for likelihoods that learn it
        (``Likelihood.learnable``)."""
        fitted = self._posterior()
        if name not in fitted.likelihood_object.learnable:
            raise AttributeError(f"{name}_ is defined only for a likelihood with a "
                                 f"{name}; this model's is {fitted.likelihood}")
        return float(fitted.likelihood_params[name])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.input_tags.sparse = True  # densified per row block (validation.dense_rows)
        return tags

    def _reset(self):
        """Forget every fitted attribute (a refit starts from nothing)."""
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)

    # -- prediction ----------------------------------------------------------------

    @property
    def _prediction_rows(self):
        """Rows per kernel block when predicting: the ``execution`` settings' where the
        estimator has them."""
        if not hasattr(self, "execution"):
            return _PREDICT_ROWS
        return execution_of(self).block_rows

    def _predict(self, X, func, *, columns=None, dtype=np.float64):
        """``func(fitted_posterior_, X_block, rows)`` over the rows of X, after the one
        dispatch on input type: lazy input is checked for its width and stays lazy
        (the result is a dask array), NumPy-like input is validated as scikit-learn
        does."""
        fitted = self._posterior()
        return fitted.map_rows(self._checked_rows(X), func, columns=columns, dtype=dtype,
                               rows=self._prediction_rows)

    def _checked_rows(self, X):
        """Rows to predict at: lazy input checked for its width (and left lazy),
        NumPy-like input validated as scikit-learn does (sparse input densified:
        :func:`~saspa_dask.models.validation.dense_rows`)."""
        X = dense_rows(X)
        if not is_lazy(X):
            return validate_data(self, X, reset=False, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[-1]} features, but {type(self).__name__} "
                             f"is expecting {self.n_features_in_} features as input")
        return X

    def predict_latent(self, X):
        """Latent predictive mean and variance of f at X.

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)

        Returns
        -------
        mean : ndarray of shape (n_samples,) or (n_samples, n_classes)
            Including the regressor's offset ``y_mean_``.
        variance : ndarray of shape (n_samples,) or (n_samples, n_classes)
            s2 - |phi|^2 + phi^T Sigma_v phi: returns to the signal variance far from
            the data.  One column per class for a one-vs-rest multi-class model.
            Dask arrays, chunked like X's rows, for dask or zarr input.
        """
        K = self._posterior().n_problems
        both = self._predict(X, _latent_columns, columns=2 * K)
        mean, var = both[:, :K], both[:, K:]
        if K == 1:
            return mean[:, 0], var[:, 0]
        return mean, var

    # -- identity and persistence --------------------------------------------------

    def model_fingerprint(self):
        """sha256 of everything predictions depend on (bases, kernel, factors,
        posterior, likelihood, label mapping); equal for a model and its saved copy."""
        return self._posterior().fingerprint()

    def save(self, path, *, overwrite=False):
        """Write the fitted model to a zarr model store (see :func:`saspa_dask.load_model`).

        Parameters
        ----------
        path : str or Path
        overwrite : bool, default=False
            Replace an existing store (the old one stays whole until the new one is
            complete).

        Returns
        -------
        Path
        """
        return save_model(self, path, overwrite=overwrite)

    def report(self, X=None, y=None, *, path=None, overwrite=False, title=None):
        """The model's report: one self-contained HTML page with pictures.

        Calibration on ``X, y`` (a reliability diagram, or the coverage of
        predictive intervals and the residuals), the held-out metrics with the base
        rate, how learning went (energy and held-out metric against time), ARD
        relevances by input name, residuals or probabilities against the most
        relevant inputs, and EP's diagnostics (:mod:`saspa_dask.models.report`).

        Parameters
        ----------
        X, y : array-like, optional
            Held-out rows and targets (NumPy, or a sample of larger data); without
            them the page has the model, learning, relevance and EP sections only.
        path : str or Path, optional
            Write the page there (whole or not at all).
        overwrite : bool, default=False
            Replace an existing file at ``path``.
        title : str, optional

        Returns
        -------
        str
            The HTML document.
        """
        self._posterior()  # not fitted: sklearn's NotFittedError
        if X is not None:
            X = self._checked_rows(X)
            X = np.asarray(X.compute() if hasattr(X, "compute") else X, dtype=np.float64)
            y = np.asarray(y.compute() if hasattr(y, "compute") else y)
            if y.shape != (X.shape[0],):
                raise ValueError(f"y has shape {y.shape}; X has {X.shape[0]} rows")
        page = model_report(self, X, y, title=title)
        if path is not None:
            write_text_file(path, page, HTML, overwrite=overwrite)
        return page


def _latent_columns(fitted, Xb, rows):
    mean, var = fitted.latent(Xb, rows)
    return np.column_stack([mean + fitted.offset, var])


# -- classification ------------------------------------------------------------------


def _proba(fitted, Xb, rows):
    return fitted.class_probabilities(*fitted.latent(Xb, rows))


def _labels(fitted, Xb, rows):
    return fitted.classes[_proba(fitted, Xb, rows).argmax(axis=1)]


def _margin(fitted, Xb, rows):
    mean, var = fitted.latent(Xb, rows)
    # the likelihood sees the latent plus the offset (the IVM's bias), as in
    # class_probabilities
    margin = fitted.likelihood_object.margin(mean + fitted.offset, var)
    return margin[:, 0] if margin.shape[1] == 1 else margin


class PosteriorClassifierMixin(ClassifierMixin):
    """Class predictions from ``fitted_posterior_`` (with :class:`PosteriorModel`)."""

    classes_ = property(lambda self: self._posterior().classes,
                        doc="Labels; for two classes classes_[1] is the positive class.")
    label_noise_ = property(
        lambda self: self._likelihood_parameter("label_noise"),
        doc="Fitted label noise (step and noisy-probit likelihoods only).")

    def _check_known_labels(self, labels):
        """New rows' labels are among ``classes_``."""
        unknown = np.setdiff1d(np.asarray(labels), self.classes_)
        if unknown.size:
            raise ValueError(f"labels {unknown.tolist()} are not among classes_ "
                             f"{self.classes_.tolist()}")

    def _check_classes(self, classes):
        """``partial_fit``'s ``classes`` (scikit-learn's convention) are the fitted ones."""
        if classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes {np.unique(classes).tolist()} differ from the fitted "
                             f"classes_ {self.classes_.tolist()}")

    def decision_function(self, X):
        """Latent margin; positive values favour ``classes_[1]``.

        The probability of the class is an increasing function of it: ``mean /
        sqrt(1 + var)`` for probit (P = Phi(margin)), ``mean / sqrt(var)`` for step
        (P = eps + (1 - 2 eps) Phi(margin)) and, for logistic, the log-odds
        log(P / (1 - P)) of the predictive probability P = E[sigmoid(f)] under the
        latent N(mean, var).  For more than two classes, one column per class (its
        one-vs-rest margin).

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        K = self._posterior().n_problems
        return self._predict(X, _margin, columns=None if K == 1 else K)

    def predict_proba(self, X):
        """Class probabilities, columns ordered as ``classes_``.

        For more than two classes the one-vs-rest probabilities P(y = k | x) of the
        classes' binary models are normalised to sum to one.

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        return self._predict(X, _proba, columns=len(self.classes_))

    def predict(self, X):
        """Most probable label.

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._predict(X, _labels, dtype=self.classes_.dtype)


# -- regression ----------------------------------------------------------------------


def _mean(fitted, Xb, rows):
    """Predictive mean of y (the expected count for Poisson)."""
    return fitted.point_prediction(*fitted.latent(Xb, rows))[:, 0]


def _mean_and_std(fitted, Xb, rows):
    """Predictive mean of y and the standard deviation of a new observation."""
    return mean_and_std_at(fitted, *fitted.latent(Xb, rows))


def _interval(fitted, Xb, rows, level):
    """Lower and upper bounds of a new observation's central interval at ``level``."""
    return np.column_stack(fitted.predictive_interval(*fitted.latent(Xb, rows), level))


def mean_and_std_at(fitted, mean, var):
    """:func:`_mean_and_std` from latent moments (n, 1), offset not added."""
    return np.column_stack([fitted.point_prediction(mean, var)[:, 0],
                            fitted.predictive_std(mean, var)])


class PosteriorRegressorMixin(RegressorMixin):
    """Predictions of y from ``fitted_posterior_`` (with :class:`PosteriorModel`)."""

    y_mean_ = property(lambda self: self._posterior().offset,
                       doc="Offset added to the latent function.")
    noise_variance_ = property(
        lambda self: self._likelihood_parameter("noise_variance"),
        doc="Fitted noise variance (gaussian only).")
    dof_ = property(lambda self: self._likelihood_parameter("dof"),
                    doc="Fitted degrees of freedom (student_t only).")
    scale_ = property(lambda self: self._likelihood_parameter("scale"),
                      doc="Fitted scale (student_t only).")

    def predict(self, X, return_std=False):
        """Predictive mean of y, and optionally its standard deviation.

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of a new observation y* (the latent
            variance plus the noise's: ``noise_variance_`` for gaussian,
            scale^2 dof / (dof - 2) for student_t (infinite for dof <= 2), and for
            poisson the count's, E[rate] + Var[rate]); ``predict_latent`` gives the
            latent one.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
            For poisson the expected count E[exp(f)] = exp(mean + var / 2).
        std : ndarray of shape (n_samples,), only if ``return_std``
        """
        if not return_std:
            return self._predict(X, _mean)
        both = self._predict(X, _mean_and_std, columns=2)
        return both[:, 0], both[:, 1]

    def predict_interval(self, X, level=0.95):
        """The central interval holding a new observation y* with probability ``level``.

        Exact for the gaussian likelihood: the mean plus or minus the normal quantile
        times :meth:`predict`'s standard deviation (the noise included), and with
        ``log_target`` the exponential of the interval of log y* (the log-normal's own
        quantiles).  ``saspa score`` and ``predict`` write the same bounds as ``lower``
        and ``upper`` (``--interval-level``).

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)
        level : float in (0, 1), default=0.95

        Returns
        -------
        lower, upper : ndarray of shape (n_samples,)

        Raises
        ------
        ValueError
            For another likelihood (student_t, poisson: their intervals are not
            Gaussian ones), or a level outside (0, 1).
        """
        self._posterior().interval_quantile(level, "level")  # before any row is predicted
        both = self._predict(X, partial(_interval, level=float(level)), columns=2)
        return both[:, 0], both[:, 1]
