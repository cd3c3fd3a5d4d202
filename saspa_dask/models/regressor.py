"""``SASPARegressor``: Gaussian-process regression, robust regression and counts."""

from __future__ import annotations

from numbers import Real

import dask
import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from ..core.likelihoods import LIKELIHOODS, make_likelihood
from ..engines.chunks import is_lazy
from ..ep.approximation import approximation_named
from ..parameters import LEARNING_STARTS, REGRESSION_LIKELIHOODS
from .augmented import as_numpy, augmented_ep_latent, augmented_latent, check_augment
from .base import SASPABase
from .docs import _REGRESSOR_PARAMS_DOC, _SHARED_ATTRS_DOC
from .predictor import PosteriorRegressorMixin, mean_and_std_at
from .validation import validate_training_input

__all__ = ["SASPARegressor", "regression_likelihood"]



def regression_likelihood(name, spread, *, noise_variance=None, dof=4.0, scale=None,
                          offset=0.0):
    """The likelihood object of a regressor's ``likelihood`` parameter, with the
    defaults scaled to the targets' variance ``spread``."""
    return make_likelihood(
        name, noise_variance=0.1 * spread if noise_variance is None else noise_variance,
        dof=dof, scale=np.sqrt(0.1 * spread) if scale is None else scale, offset=offset)


class SASPARegressor(PosteriorRegressorMixin, SASPABase):
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
    learn_offset : bool, default=True
        Learn a constant prior mean of the latent with the kernel, by the same EP
        energy (GPflow's ``Constant`` mean function, GPyTorch's ``ConstantMean``),
        starting from the centre above; only when the hyperparameters are learnt.
        Where y's mean is not where the function rests (targets mostly at one value,
        as Pole Telecomm's 62% zeros), the kernel otherwise spends its variance on
        the gap (benchmarks/RESULTS.md, "A learnt constant mean").
    min_noise_variance : float, default=None
        A floor under the learnt Gaussian noise variance, in the target's squared
        units (learning starts at or above it; a noise on it is not warned about).  The
        IDGP paper's protocol for targets quantised in steps q is q**2 / 12 (Pole
        Telecomm: 10**2 / 12); ``None``: the learning box's own floor.
    log_target : bool, default=False
        Fit log(y) (positive targets spread over decades: prices, incomes, counts of
        money) and predict y itself: ``predict`` gives the log-normal mean exp(m +
        s^2 / 2) (s^2 the latent variance plus the noise), ``return_std`` its standard
        deviation, scores and metrics are of y; ``predict_latent`` stays on the log
        scale.  Gaussian and student_t likelihoods; every y must be positive.
    exact_start : {"auto"} or bool, default="auto"
        Gaussian likelihood, hyperparameters learnt, none of ``lengthscale``,
        ``signal_variance`` and ``noise_variance`` given: start learning where an
        exact SE-ARD GP on 512 seeded rows puts the three (the SPGP and IDGP papers'
        practice; at least 8 of those rows per value, so at most 62 inputs; kept
        only when it explains the sample better than independent noise does).
        ``"auto"`` does so for a fit with a time budget (``max_fit_time``: the best
        model by then) whose learning runs on a row sample of larger data
        (``hyper_subsample``): at 10^6 rows its first model had about the accuracy
        of 20 iterations from the data-driven start.  Learning run to convergence from
        it ended at a worse held-out NLPD on most real sets measured
        (``benchmarks/RESULTS.md``, "An exact GP's start"), so without a budget
        ``"auto"`` checks instead: after learning on every row in memory (ended by its
        stop rule, not a cap, and with at least the exact GP's most work: not on small
        fits, which it would double), where the exact GP's start has a higher energy
        than where learning ended, learning stopped on a plateau and goes on from that
        start, and the higher end is kept.  ``True``: whenever the conditions hold;
        ``False``: never.  ``hyperparameter_info_["start"]`` records the start (and a
        check's two energies).
    learning_start : {"auto", "data", "variational", "both", "race"}, default="auto"
        Where learning starts (the starts other than ``"data"``: Gaussian likelihood,
        full-batch learning, delta bases, ``blur`` "auto" or "delta", no
        ``max_fit_time``).  ``"data"``: K-means bases and the data's scales.
        ``"variational"``: learning first at Power EP's alpha 0.001 (near Titsias'
        variational fit) with delta bases, then on at ``alpha`` from its bases (kept
        where they are) and values.  ``"both"``: each of the two, keeping the fit with
        the higher EP evidence (the better held-out NLPD in every pair measured; 1.1
        to 2.7 times the CPU of ``"data"``).  ``"race"``: the variational start cut
        short (30 learning iterations, then 10), then the data's start, stopped at its
        30th iteration if its evidence is behind by more than 0.05 nats a row; the
        leader learns on (both, the higher evidence kept, where it was behind by
        less: "The race's margin").  ``"auto"``:
        ``"race"`` for a plain Gaussian regression whose learning sees every row (SE
        kernel, learnt K-means bases, no given lengthscales, no restarts), else
        ``"data"``.  On Pole Telecomm, where learning from K-means ends on a poor
        optimum, the race's test RMSE is 32-37% below the data start's in 0.81-1.03
        times its CPU; where the data's start wins, the race costs 0.93-1.31 times its
        CPU for the same model (``benchmarks/RESULTS.md``, "The defaults race the two
        learning starts").  On data larger than the learning sample each of these
        fits ends with EP on all rows (a sweep or two each, the Gaussian likelihood's
        sites being exact).  ``hyperparameter_info_["start"]`` says which was kept;
        a retrain goes on from the kept fit's values.

    Attributes
    ----------
    y_mean_ : float
        Offset added to the latent function: the mean of y (gaussian, student_t;
        0 if ``center_y`` is False) or log(mean(y)) (poisson), plus the learnt
        constant mean (``learn_offset``).
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
        "likelihood": [StrOptions(set(REGRESSION_LIKELIHOODS))],
        "noise_variance": [Interval(Real, 0, None, closed="neither"), None],
        "dof": [Interval(Real, 0, None, closed="neither")],
        "scale": [Interval(Real, 0, None, closed="neither"), None],
        "center_y": ["boolean"],
        "learn_offset": ["boolean"],
        "min_noise_variance": [Interval(Real, 0, None, closed="neither"), None],
        "log_target": ["boolean"],
        "exact_start": [StrOptions({"auto"}), "boolean"],
        "learning_start": [StrOptions(set(LEARNING_STARTS))],
    }

    def __init__(self, n_bases="auto", *, blur="auto", kernel="se", feature_groups="auto",
                 additive_groups=None, term_weights=None,
                 approximation="fitc", alpha=1.0,
                 likelihood="gaussian", noise_variance=None, dof=4.0, scale=None,
                 center_y=True, learn_offset=True, min_noise_variance=None, log_target=False,
                 exact_start="auto", learning_start="auto", lengthscale=None,
                 signal_variance=None, bases=None,
                 jitter=1e-8, optimize_hyperparameters=True, max_hyper_iter=500,
                 hyper_tol=1e-4, max_fit_time=None,
                 n_restarts_optimizer=0, learn_blur_scale=False, learn_bases="auto",
                 hyper_subsample=20000, learning="full-batch", stochastic=None, ep=None,
                 execution=None, random_state=None,
                 verbose=0):
        self.n_bases = n_bases
        self.blur = blur
        self.kernel = kernel
        self.feature_groups = feature_groups
        self.additive_groups = additive_groups
        self.term_weights = term_weights
        self.approximation = approximation
        self.alpha = alpha
        self.likelihood = likelihood
        self.noise_variance = noise_variance
        self.dof = dof
        self.scale = scale
        self.center_y = center_y
        self.learn_offset = learn_offset
        self.min_noise_variance = min_noise_variance
        self.log_target = log_target
        self.exact_start = exact_start
        self.learning_start = learning_start
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.bases = bases
        self.jitter = jitter
        self.optimize_hyperparameters = optimize_hyperparameters
        self.max_hyper_iter = max_hyper_iter
        self.hyper_tol = hyper_tol
        self.max_fit_time = max_fit_time
        self.n_restarts_optimizer = n_restarts_optimizer
        self.learn_blur_scale = learn_blur_scale
        self.learn_bases = learn_bases
        self.hyper_subsample = hyper_subsample
        self.learning = learning
        self.stochastic = stochastic
        self.ep = ep
        self.execution = execution
        self.random_state = random_state
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, *, X_val=None, y_val=None, progress=None, init_sites=None,
            column_names=None, data_fingerprint=None):
        """Fit the regressor.

        Parameters
        ----------
        X : array-like, dask array or zarr array of shape (n_samples, n_features)
            Dask and zarr inputs are trained on chunk by chunk on Dask.
        y : array-like of shape (n_samples,)
            Real targets; non-negative integer counts for ``poisson``.
        X_val, y_val : array-like, dask or zarr arrays, optional
            Held-out rows (both or neither): the model is measured on them as it
            learns (at its start, then at growing gaps of time, at each learning
            stage's end and at the end), each measurement said with the phase lines
            and kept in ``held_out_trace_``: a metric against time.  They take no
            part in the fit.
        progress : callable, optional
            Called with each EP sweep's record (dict: ``sweep``, ``change``,
            ``n_invalid``, ``seconds``, ...; ``all_rows`` False for the EP runs inside
            learning on a row subsample, ``learning`` True for every EP run inside
            learning).
        init_sites : tuple (tau, nu) of arrays of length n_samples, optional
            Warm start for EP, e.g. ``old.warm_start_sites(X_new, y_new)`` (an
            earlier fit's sites, then sites for the appended rows).  EP reaches the same
            fixed point; a good start needs fewer sweeps.
        column_names : sequence of str, optional
            Names of X's columns when X is an array (a data store's columns): kept in
            ``fitted_posterior_`` so that scoring and retraining match columns by
            name.  A DataFrame's own names need not be given.
        data_fingerprint : str, optional
            A fingerprint of the training data, kept as ``data_fingerprint_``.

        Returns
        -------
        self : SASPARegressor
        """
        self._reset()
        X, y, stats = validate_training_input(self, X, y, classification=False, reset=True)
        column_std, mean, spread = stats["std"], float(stats["mean"]), float(stats["var"])
        y_min, non_integer = float(stats["min"]), int(stats["non_integer"])
        if self.log_target:
            y, mean, spread = self._log_of(y, y_min)
        damping = self._ep.with_damping(self.likelihood).damping
        held_out = self._held_out(X_val, y_val)
        family = LIKELIHOODS[self.likelihood]
        family.check_targets(y_min, non_integer, mean)
        if not family.offset_in_link and not self.center_y:
            spread += mean * mean  # y's second moment about zero
        spread = spread if spread > 0 else 1.0
        # the latent's offset, and the signal variance the data alone would start from
        offset, start_s2 = family.offset_and_signal(mean, spread, self.center_y)
        targets = y if family.offset_in_link else y - offset
        s2 = start_s2 if self.signal_variance is None else self.signal_variance
        likelihood = regression_likelihood(self.likelihood, spread,
                                           noise_variance=self.noise_variance, dof=self.dof,
                                           scale=self.scale, offset=offset)
        # what the data alone would start from: the centre of the learning box
        centre = (start_s2, regression_likelihood(self.likelihood, spread, offset=offset))
        return self._fit_posterior(X, targets, likelihood, s2, damping, column_std,
                                   progress=progress, init_sites=init_sites, offset=offset,
                                   column_names=column_names,
                                   data_fingerprint=data_fingerprint, centre=centre,
                                   held_out=held_out)

    def _task_plan_parameters(self):
        return {"learn_offset": self.learn_offset,
                "min_noise_variance": self.min_noise_variance,
                "log_target": self.log_target, "exact_start": self.exact_start,
                "learning_start": self.learning_start}

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

    def _new_rows(self, X, y):
        """Checked new rows and their EP targets: (X, targets, None)."""
        X, y, stats = validate_training_input(self, X, y, classification=False, reset=False)
        if LIKELIHOODS[self.likelihood].offset_in_link:  # counts: the offset is in the link
            return X, y, None
        if self.log_target:
            y = self._log_of(y, float(stats["min"]))[0]
        return X, y - self.y_mean_, None

    def _log_of(self, y, y_min):
        """``log_target``: log(y) (NumPy or dask, as y), and its mean and variance."""
        if LIKELIHOODS[self.likelihood].offset_in_link:
            raise ValueError(f"log_target=True fits log(y) with a gaussian or student_t "
                             f"likelihood; {self.likelihood} already has a log link")
        if not y_min > 0:
            raise ValueError(f"log_target=True needs every y > 0; y has minimum {y_min:g} "
                             f"({int((y <= 0).sum())} values <= 0)")
        log_y = np.log(y)
        mean, var = (dask.compute(log_y.mean(), log_y.var()) if is_lazy(log_y)
                     else (log_y.mean(), log_y.var()))
        return log_y, float(mean), float(var)

    def predict(self, X, return_std=False, *, augment=False):
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
        augment : False or tuple (X_train, y_train), default=False
            Augmented prediction (Quiñonero-Candela & Rasmussen): each test row joins
            the bases for its own prediction, so the predictive variance no longer
            collapses to the bases' span away from them.  The tuple gives the
            training rows (NumPy, or dask or zarr arrays read chunk by chunk): the
            estimator does not keep its training data.  Gaussian likelihood: closed
            form, O(N M) a test row for DTC and O(N M^2) for FITC, whose residual
            variances every test row changes.  Student-t and Poisson: EP is run
            again for each test row on the augmented support, warm-started from
            the fitted sites (give the training rows in their fitting order).
            Returns NumPy arrays.

        Returns
        -------
        mean : ndarray of shape (n_samples,)
            For poisson the expected count E[exp(f)] = exp(mean + var / 2).
        std : ndarray of shape (n_samples,), only if ``return_std``
        """
        if augment is False:
            return super().predict(X, return_std=return_std)
        mean, var = self._augmented_latent(X, augment)
        both = mean_and_std_at(self._posterior(), mean[:, None], var[:, None])
        return (both[:, 0], both[:, 1]) if return_std else both[:, 0]

    def _augmented_latent(self, X, augment):
        """Latent mean (offset not added) and variance by augmented prediction."""
        fitted = self._posterior()
        check_augment(augment)
        if not fitted.likelihood_object.gaussian_observations:  # EP, not a closed form
            mean, var = augmented_ep_latent(self, as_numpy(self._checked_rows(X)), *augment)
            return mean[:, 0], var[:, 0]
        X_train, targets, _ = self._new_rows(*augment)
        # the rows go in with their EP targets (y centred by y_mean_)
        return augmented_latent(fitted, self._checked_rows(X), [(X_train, targets)],
                                self.noise_variance_, approximation_named(self.approximation),
                                self._execution.block_rows)
