"""``SASPARegressor``: Gaussian-process regression, robust regression and counts."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.base import RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from ..core.likelihoods import Gaussian, Poisson, StudentT
from .augmented import augmented_latent
from .base import SASPABase
from .docs import _REGRESSOR_PARAMS_DOC, _SHARED_ATTRS_DOC
from .registry import register
from .validation import validate_training_input

__all__ = ["SASPARegressor"]


@register
class SASPARegressor(RegressorMixin, SASPABase):
    __doc__ = f"""Gaussian-process regression by SASPA expectation propagation.

    With the Gaussian likelihood one EP sweep is exact: delta blur gives the FITC /
    SPGP posterior, other blurs its smoothed counterparts.  ``student_t`` is robust
    regression (heavy-tailed noise; EP with damping, negative site precisions where
    the posterior stays valid), ``poisson`` models counts with a log link; both use
    Gauss-Hermite quadrature (256 points) for their tilted moments.

    Parameters
    ----------{_REGRESSOR_PARAMS_DOC}    likelihood : {{"gaussian", "student_t", "poisson"}}, default="gaussian"
    noise_variance : float, default=None
        Gaussian noise variance; ``None`` uses a tenth of the target variance.
    dof : float, default=4.0
        Student-t degrees of freedom (starting value when learnt).
    scale : float, default=None
        Student-t scale; ``None`` uses the square root of a tenth of the target
        variance.
    center_y : bool, default=True
        Subtract the mean of y before fitting (the GP prior has zero mean).  For
        ``poisson`` the latent log-rate is offset by log(mean(y)) instead.

    Attributes
    ----------
    y_mean_ : float
        Offset added to the latent function: the mean of y (gaussian, student_t;
        0 if ``center_y`` is False) or log(mean(y)) (poisson).
    noise_variance_ : float
        (gaussian only)
    dof_, scale_ : float
        (student_t only){_SHARED_ATTRS_DOC}
    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import SASPARegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(300, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    >>> reg = SASPARegressor(n_bases=20, random_state=0).fit(X, y)
    >>> bool(reg.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        **SASPABase._parameter_constraints,
        "likelihood": [StrOptions({"gaussian", "student_t", "poisson"})],
        "noise_variance": [Interval(Real, 0, None, closed="neither"), None],
        "dof": [Interval(Real, 0, None, closed="neither")],
        "scale": [Interval(Real, 0, None, closed="neither"), None],
        "center_y": ["boolean"],
    }

    def __init__(self, n_bases=64, *, blur="full", likelihood="gaussian",
                 noise_variance=None, dof=4.0, scale=None, lengthscale=None,
                 signal_variance=None, ep_mode="parallel", damping=None, max_sweeps=100,
                 tol=1e-6, bases=None, jitter=1e-8, block_rows=8192, center_y=True,
                 random_state=None, verbose=0, cache="memory", work_dir=None,
                 optimize_hyperparameters=True, max_hyper_iter=20, n_restarts_optimizer=0,
                 learn_blur_scale=False, learn_bases="auto", hyper_subsample=20000,
                 dtc=False, coarse_start=True, anderson_memory=3):
        self.n_bases = n_bases
        self.blur = blur
        self.likelihood = likelihood
        self.noise_variance = noise_variance
        self.dof = dof
        self.scale = scale
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.ep_mode = ep_mode
        self.damping = damping
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.bases = bases
        self.jitter = jitter
        self.block_rows = block_rows
        self.center_y = center_y
        self.random_state = random_state
        self.verbose = verbose
        self.cache = cache
        self.work_dir = work_dir
        self.optimize_hyperparameters = optimize_hyperparameters
        self.max_hyper_iter = max_hyper_iter
        self.n_restarts_optimizer = n_restarts_optimizer
        self.learn_blur_scale = learn_blur_scale
        self.learn_bases = learn_bases
        self.hyper_subsample = hyper_subsample
        self.dtc = dtc
        self.coarse_start = coarse_start
        self.anderson_memory = anderson_memory

    y_mean_ = property(lambda self: self._posterior().offset,
                       doc="Offset added to the latent function.")
    noise_variance_ = property(
        lambda self: self._likelihood_parameter("gaussian", "noise_variance"),
        doc="Fitted noise variance (gaussian only).")
    dof_ = property(lambda self: self._likelihood_parameter("student_t", "dof"),
                    doc="Fitted degrees of freedom (student_t only).")
    scale_ = property(lambda self: self._likelihood_parameter("student_t", "scale"),
                      doc="Fitted scale (student_t only).")

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, *, progress=None, init_sites=None):
        """Fit the regressor.

        Parameters
        ----------
        X : array-like, dask array or zarr array of shape (n_samples, n_features)
            Dask and zarr inputs are trained on chunk by chunk on Dask.
        y : array-like of shape (n_samples,)
            Real targets; non-negative integer counts for ``poisson``.
        progress : callable, optional
            Called with each EP sweep's record (dict).
        init_sites : tuple (tau, nu) of arrays of length n_samples, optional
            Warm start for EP, e.g. ``old.warm_start_sites(X_new, y_new)`` (an
            earlier fit's sites, then sites for the appended rows).  EP reaches the same
            fixed point; a good start needs fewer sweeps.

        Returns
        -------
        self : SASPARegressor
        """
        self._reset()
        X, y, stats = validate_training_input(self, X, y, classification=False, reset=True)
        column_std, mean, spread = stats["std"], float(stats["mean"]), float(stats["var"])
        y_min, non_integer = float(stats["min"]), int(stats["non_integer"])
        damping = 1.0 if self.damping is None else self.damping
        if self.likelihood == "poisson":
            if y_min < 0 or non_integer:
                raise ValueError("likelihood='poisson' needs non-negative integer counts; "
                                 f"y has minimum {y_min:g} and {non_integer} non-integer "
                                 "values")
            if mean <= 0:
                raise ValueError("likelihood='poisson' needs some positive counts; "
                                 "every y is 0")
            # the latent log-rate is offset by log(mean count): the GP models the rest
            offset = float(np.log(mean))
            targets = y
            s2 = 1.0 if self.signal_variance is None else self.signal_variance
            likelihood = Poisson(offset=offset)
        else:
            offset = mean if self.center_y else 0.0
            targets = y - offset
            if not self.center_y:
                spread += mean * mean
            spread = spread if spread > 0 else 1.0
            s2 = spread if self.signal_variance is None else self.signal_variance
            if self.likelihood == "gaussian":
                noise = 0.1 * spread if self.noise_variance is None else self.noise_variance
                likelihood = Gaussian(noise)
            else:
                scale = np.sqrt(0.1 * spread) if self.scale is None else self.scale
                likelihood = StudentT(self.dof, scale)
                if self.damping is None:
                    damping = 0.5  # not log-concave: undamped EP can oscillate
        self._fit_posterior(X, targets, likelihood, s2, damping, column_std,
                            progress=progress, init_sites=init_sites, offset=offset)
        # references, not copies: what augmented prediction reads back chunk by chunk
        self._training_rows = [(X, targets)]
        return self

    def partial_fit(self, X, y):
        """Add rows by one assumed-density-filtering pass, without revisiting old rows.

        With the Gaussian likelihood this is exact: the result equals a batch fit on
        all rows with the same bases and hyperparameters (``y_mean_`` is kept from the
        first fit).  ``log_evidence_`` becomes NaN (it needs every row).  On an unfitted
        estimator this is ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : SASPARegressor
        """
        if not hasattr(self, "fitted_posterior_"):
            return self.fit(X, y)
        return self._partial_fit_rows(X, y)

    def _rows_added(self, X, targets):
        rows = getattr(self, "_training_rows", None)
        if rows is not None:
            self._training_rows = [*rows, (X, targets)]

    def _new_rows(self, X, y):
        """Checked new rows and their EP targets: (X, targets, None)."""
        X, y, _ = validate_training_input(self, X, y, classification=False, reset=False)
        if self.likelihood == "poisson":
            return X, y, None
        return X, y - self.y_mean_, None

    def predict(self, X, return_std=False, *, augment=False):
        """Predictive mean of y, and optionally its standard deviation.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        return_std : bool, default=False
            Also return the standard deviation of a new observation y* (the latent
            variance plus the noise's: ``noise_variance_`` for gaussian,
            scale^2 dof / (dof - 2) for student_t (infinite for dof <= 2), and for
            poisson the count's, E[rate] + Var[rate]); ``predict_latent`` gives the
            latent one.
        augment : bool or tuple (X_train, y_train), default=False
            Augmented prediction (Gaussian likelihood only; Quiñonero-Candela &
            Rasmussen): each test row joins the bases for its own prediction, so the
            predictive variance no longer collapses to the bases' span away from
            them.  ``True`` reads the training rows of ``fit`` and ``partial_fit``
            again (NumPy, or chunk by chunk from the dask or zarr arrays they came
            from); a tuple gives them, e.g. for a model loaded from a store.  Costs
            O(N M) a test row for a DTC model (``dtc=True``) and O(N M^2) for FITC,
            whose residual variances every test row changes.  Returns NumPy arrays.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
            For poisson the expected count E[exp(f)] = exp(mean + var / 2).
        std : ndarray of shape (n_samples,), only if ``return_std``
        """
        if augment is not False:
            mean, var = self._augmented_latent(X, augment)
            mean = mean + self.y_mean_
            return (mean, np.sqrt(var + self.noise_variance_)) if return_std else mean
        if not return_std:
            return self._predict(X, _mean)
        both = self._predict(X, _mean_and_std, columns=2)
        return both[:, 0], both[:, 1]

    def _augmented_latent(self, X, augment):
        """Latent mean (offset not added) and variance by augmented prediction."""
        fitted = self._posterior()
        if fitted.likelihood != "gaussian":
            raise ValueError("augment=True needs the Gaussian likelihood; this model's is "
                             f"{fitted.likelihood!r}")
        if augment is True:
            rows = getattr(self, "_training_rows", None)
            if rows is None:
                raise ValueError("augment=True needs the training rows, which this "
                                 "estimator does not hold (a model loaded from a store): "
                                 "pass augment=(X_train, y_train)")
        else:
            if not isinstance(augment, tuple) or len(augment) != 2:
                raise ValueError("augment must be False, True or a tuple (X_train, "
                                 f"y_train); got {type(augment).__name__}")
            X_train, targets, _ = self._new_rows(*augment)
            rows = [(X_train, targets)]
        # the rows are kept with their EP targets (y centred by y_mean_)
        return augmented_latent(fitted, self._checked_rows(X), rows, self.noise_variance_,
                                bool(self.dtc), self.block_rows)


def _noise_variance(fitted):
    params = fitted.likelihood_params
    if fitted.likelihood == "gaussian":
        return params["noise_variance"]
    if params["dof"] <= 2:
        return np.inf
    return params["scale"] ** 2 * params["dof"] / (params["dof"] - 2.0)


def _mean(fitted, Xb, rows):
    """Predictive mean of y (the expected count for Poisson)."""
    return fitted.point_prediction(*fitted.latent(Xb, rows))[:, 0]


def _mean_and_std(fitted, Xb, rows):
    """Predictive mean of y and the standard deviation of a new observation."""
    mean, var = fitted.latent(Xb, rows)
    point, var = fitted.point_prediction(mean, var)[:, 0], var[:, 0]
    if fitted.likelihood == "poisson":
        rate_var = (np.exp(var) - 1.0) * point * point
        return np.column_stack([point, np.sqrt(point + rate_var)])
    return np.column_stack([point, np.sqrt(var + _noise_variance(fitted))])
