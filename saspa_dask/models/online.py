"""Csató & Opper's sparse online GP as scikit-learn estimators.

One pass over the rows (NumPy in memory, dask and zarr one row chunk at a time), each
row an ADF update projected onto a basis set that grows with the novel rows and is
pruned to a budget (:mod:`saspa_dask.ep.online`).  The fitted model is a SASPA
posterior on delta bases, so predictions are every estimator's own
(:mod:`saspa_dask.models.predictor`), ``bases_`` can start a SASPA fit
(``SASPAClassifier(bases=online.bases_, blur="delta")``), and ``partial_fit``
continues the pass from the fitted posterior alone (also after loading a saved model).

Csató & Opper iterate the pass as EP: each row's update is then made against its
cavity (the posterior without that row's earlier contribution), with the basis set the
pass chose.  With the residual variance kept in each row's marginal, as the pass keeps
it, the fixed point of those sweeps is FITC-EP on those bases, so ``ep_passes``
refines the pass by the engine's own EP (a composed SASPA estimator on the kept delta
bases, parallel EP over the data's chunks on Dask), started from the sites the pass
made (each row's ADF update against its marginal): the pass is EP's first sweep.  ``optimize_hyperparameters``
maximises that EP's energy (the batch estimators' objective) at the kept bases, then
alternates once with selection: the pass is run again with the learnt kernel and
likelihood, and EP refines its bases.
"""

from __future__ import annotations

from dataclasses import replace
from numbers import Integral, Real

import numpy as np
from scipy.linalg import LinAlgError, cho_solve, cholesky
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from ..core.threads import single_scipy_thread
from ..core.bases import Basis
from ..ep.online import OnlineSparseGP
from ..ep.posterior import Posterior
from .classifier import SASPAClassifier, _ep_targets, classification_likelihood
from ..fitting.new_rows import row_slices
from ..fitting.posterior import FittedPosterior
from .predictor import PosteriorClassifierMixin, PosteriorModel, PosteriorRegressorMixin
from .regressor import SASPARegressor, regression_likelihood
from .settings import EPSchedule, Execution, execution_of
from ..fitting.input_groups import resolve_lengthscale
from .validation import column_names_of, validate_training_input

__all__ = ["SparseOnlineGPClassifier", "SparseOnlineGPRegressor"]


class _OnlineMixin:
    """The online pass, started by ``fit`` and continued by ``partial_fit`` from the
    fitted posterior."""

    _REPORT_ATTRIBUTES = ("n_rows_seen_", "n_bases_added_", "n_bases_removed_",
                          "n_invalid_cavities_", "n_skipped_updates_", "log_evidence_",
                          "n_sweeps_", "converged_", "hyperparameter_info_")
    # the SASPA estimator that refines the pass by EP
    _SPARSE: type

    def _start(self, X, likelihood, signal_variance, column_std, offset, classes,
               n_problems=1):
        lengthscale = resolve_lengthscale(self.lengthscale, X.shape[1], column_std)
        state = OnlineSparseGP(likelihood, lengthscale, signal_variance,
                               self.jitter * signal_variance, self.novelty_threshold,
                               self.max_bases, n_problems, record_sites=self.ep_passes > 0)
        return state, offset, classes

    def _resumed(self):
        """The pass's state from ``fitted_posterior_`` and the counts: the whitened
        means and covariances Sigma = P^{-1} (from P's Cholesky factor)."""
        fitted = self._posterior()
        sigmas = [post.covariance() for post in fitted.posteriors]
        counts = {"rows": self.n_rows_seen_, "added": self.n_bases_added_,
                  "removed": self.n_bases_removed_, "invalid": self.n_invalid_cavities_,
                  "skipped": self.n_skipped_updates_}
        state = OnlineSparseGP.resume(
            fitted.likelihood_object, fitted.lengthscale, fitted.signal_variance,
            fitted.jitter, self.novelty_threshold, self.max_bases, fitted.means,
            fitted.whitening, [p.mean for p in fitted.posteriors], sigmas, counts)
        return state, fitted.offset, fitted.classes

    def _run(self, start, X, targets):
        """Stream rows through the state, then publish the fitted posterior."""
        state, offset, classes = start
        for X_part, t_part in row_slices(X, targets):
            state.add_rows(X_part, t_part)
        return self._publish(state, offset, classes)

    def _refined(self, start, X, y, targets):
        """``fit``'s pass, then (``ep_passes``) EP at its bases; with
        ``optimize_hyperparameters`` the kernel and likelihood learnt by that EP's
        energy, the pass again under them, and EP at its bases."""
        self._run(start, X, targets)
        if not self.ep_passes:
            if self.optimize_hyperparameters:
                raise ValueError("optimize_hyperparameters=True learns by the EP energy "
                                 "at the pass's bases: set ep_passes >= 1")
            return self
        state, offset, classes = start
        sparse = self._ep_at_bases(X, y, self.optimize_hyperparameters, state)
        if self.optimize_hyperparameters:
            learnt = sparse.fitted_posterior_
            again = OnlineSparseGP(learnt.likelihood_object, learnt.lengthscale,
                                   learnt.signal_variance, learnt.jitter,
                                   self.novelty_threshold, self.max_bases,
                                   len(state.means), record_sites=True)
            self._run((again, offset, classes), X, targets)
            info = sparse.hyperparameter_info_
            sparse = self._ep_at_bases(X, y, False, again)
            sparse.hyperparameter_info_ = info
        for name in ("log_evidence_", "n_sweeps_", "converged_", "hyperparameter_info_",
                     "n_invalid_cavities_", "n_skipped_updates_"):
            setattr(self, name, getattr(sparse, name))
        self.fitted_posterior_ = replace(sparse.fitted_posterior_,
                                         feature_names=self.fitted_posterior_.feature_names)
        return self

    def _ep_at_bases(self, X, y, learn, state):
        """A SASPA fit on delta bases at the pass's bases, from its hyperparameters,
        its EP warm-started from the pass's ADF sites (the pass is EP's first sweep,
        so each further sweep refines it rather than starting from the prior)."""
        fitted = self.fitted_posterior_
        tau, nu = state.site_arrays()
        sites = (tau[0], nu[0]) if len(tau) == 1 else (tau, nu)
        sparse = self._SPARSE(
            n_bases=fitted.n_bases, bases=Basis(fitted.means), blur="delta",
            likelihood=self.likelihood,
            **fitted.estimator_likelihood_params, lengthscale=fitted.lengthscale,
            signal_variance=fitted.signal_variance, jitter=self.jitter,
            optimize_hyperparameters=learn, max_hyper_iter=self.max_hyper_iter,
            ep=EPSchedule(max_sweeps=self.ep_passes, mode="sequential", anderson_memory=0,
                          coarse_start=False),
            execution=execution_of(self), verbose=self.verbose)
        return sparse.fit(X, y, init_sites=sites)

    def _publish(self, state, offset, classes):
        if state.bases.shape[0] == 0:
            raise ValueError(f"no row was novel enough to become a basis "
                             f"(novelty_threshold={self.novelty_threshold}); lower it")
        likelihood = state.likelihood
        names = (self.fitted_posterior_.feature_names if hasattr(self, "fitted_posterior_")
                 else column_names_of(self, None))
        self.fitted_posterior_ = FittedPosterior(
            state.bases, np.zeros((state.bases.shape[0],) + (state.bases.shape[1],) * 2),
            state.lengthscale, state.signal_variance, state.jitter, state.L,
            [_posterior_from_moments(mean, state.posterior_covariance(k))
             for k, mean in enumerate(state.means)],
            likelihood.name, likelihood.params(), offset=offset,
            classes=classes, feature_names=names)
        counts = state.counts
        self.n_rows_seen_ = counts["rows"]
        self.n_bases_added_ = counts["added"]
        self.n_bases_removed_ = counts["removed"]
        self.n_invalid_cavities_ = counts["invalid"]
        self.n_skipped_updates_ = counts["skipped"]
        # one ADF pass has no EP evidence and makes no sweeps
        self.log_evidence_, self.n_sweeps_, self.converged_ = float("nan"), 0, False
        self.hyperparameter_info_ = {}
        return self


def _posterior_from_moments(mean, sigma):
    """The engine's Posterior (Cholesky factor of the precision) from (mu, Sigma).

    Sigma <= I (the prior's covariance), so its inverse P >= I is formed from the
    Cholesky factor of Sigma by triangular solves: well conditioned unless rows pinned
    the function to far below the prior's spread, which the check reports.
    """
    m = len(mean)
    try:
        S = cholesky(0.5 * (sigma + sigma.T), lower=True, check_finite=False)
    except LinAlgError:
        raise FloatingPointError("the online posterior covariance lost positive "
                                 "definiteness (round-off in the rank-one updates); "
                                 "raise jitter or lower max_bases") from None
    P = cho_solve((S, True), np.eye(m), check_finite=False)
    return Posterior(cholesky(0.5 * (P + P.T), lower=True, check_finite=False), P @ mean,
                     mean.copy())


_ONLINE_CONSTRAINTS = {
    "novelty_threshold": [Interval(Real, 0, 1, closed="left")],
    "max_bases": [Interval(Integral, 1, None, closed="left")],
    "ep_passes": [Interval(Integral, 0, None, closed="left")],
    "optimize_hyperparameters": ["boolean"],
    "max_hyper_iter": [Interval(Integral, 1, None, closed="left")],
}

_ONLINE_PARAMS_DOC = """
    max_bases : int, default=64
        Budget of basis vectors: past it the lowest-scoring basis is removed by the
        KL-optimal update.
    novelty_threshold : float in [0, 1), default=1e-3
        A row joins the bases when its residual variance s2 - |phi|^2 (the part of
        its prior variance the bases do not explain) exceeds this times s2.
    lengthscale : float or array-like of shape (n_features,), default=None
        SE-ARD lengthscales (default: ``std(X[:, k]) * sqrt(n_features)``).
    signal_variance : float, default=None
    jitter : float, default=1e-8
        Jitter relative to the signal variance on the basis covariance.
    ep_passes : int, default=0
        Csató & Opper's iterated sparse EP: after the pass, at most this many
        sequential EP sweeps over the data with the pass's bases, continuing from the
        sites the pass made (stopping earlier at convergence).  Its fixed point is
        FITC-EP on those bases; on the paper's two-class problem one sweep already
        comes closer to the full GP than the pass (``benchmarks/RESULTS.md``, "Online
        refinement").  0 keeps the single assumed-density pass.  ``partial_fit`` continues the pass without refining
        (refinement revisits every row: call ``fit``).
    optimize_hyperparameters : bool, default=False
        Learn the kernel and likelihood hyperparameters by the EP energy at the
        pass's bases (needs ``ep_passes >= 1``), then run the pass again under them
        and refine its bases by EP.
    max_hyper_iter : int, default=500
        Optimiser iterations of that learning.
    execution : Execution, dict or None, default=None
        Where and in what pieces the work runs (:class:`~saspa_dask.Execution`; only
        ``block_rows``, the rows per kernel block, applies here).
    verbose : int, default=0
"""


class SparseOnlineGPRegressor(_OnlineMixin, PosteriorRegressorMixin, PosteriorModel):
    __doc__ = f"""Csató & Opper's sparse online GP regression: one pass, a budget of bases.

    Parameters
    ----------
    likelihood : {{"gaussian", "student_t"}}, default="gaussian"
    noise_variance : float, default=None
        Gaussian noise variance (default: a tenth of the target variance).
    dof : float, default=4.0
    scale : float, default=None
{_ONLINE_PARAMS_DOC}
    Attributes
    ----------
    bases_ : Basis
        The basis vectors kept (delta bases), a start for a SASPA fit.
    n_rows_seen_, n_bases_added_, n_bases_removed_ : int
    n_invalid_cavities_, n_skipped_updates_ : int
        Rows whose update was refused (counted, never hidden).

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import SparseOnlineGPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(500, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=500)
    >>> reg = SparseOnlineGPRegressor(max_bases=15, lengthscale=1.0).fit(X, y)
    >>> bool(reg.bases_.n_bases <= 15 and reg.score(X, y) > 0.95)
    True
    """

    _parameter_constraints: dict = {
        **{k: SASPARegressor._parameter_constraints[k] for k in (
            "noise_variance", "dof", "scale", "lengthscale", "signal_variance", "jitter",
            "verbose")},
        "execution": [Execution, dict, None],
        "likelihood": [StrOptions({"gaussian", "student_t"})],
        **_ONLINE_CONSTRAINTS,
    }

    _SPARSE = SASPARegressor

    def __init__(self, *, likelihood="gaussian", noise_variance=None, dof=4.0, scale=None,
                 max_bases=64, novelty_threshold=1e-3, lengthscale=None,
                 signal_variance=None, jitter=1e-8, ep_passes=0,
                 optimize_hyperparameters=False, max_hyper_iter=500, execution=None,
                 verbose=0):
        self.likelihood = likelihood
        self.noise_variance = noise_variance
        self.dof = dof
        self.scale = scale
        self.max_bases = max_bases
        self.novelty_threshold = novelty_threshold
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.jitter = jitter
        self.ep_passes = ep_passes
        self.optimize_hyperparameters = optimize_hyperparameters
        self.max_hyper_iter = max_hyper_iter
        self.execution = execution
        self.verbose = verbose

    @single_scipy_thread
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """One online pass over the rows (in order).

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : SparseOnlineGPRegressor
        """
        self._reset()
        X, y, stats = validate_training_input(self, X, y, classification=False, reset=True)
        offset, spread = float(stats["mean"]), float(stats["var"]) or 1.0
        s2 = spread if self.signal_variance is None else self.signal_variance
        likelihood = regression_likelihood(self.likelihood, spread,
                                           noise_variance=self.noise_variance, dof=self.dof,
                                           scale=self.scale)
        return self._refined(self._start(X, likelihood, s2, stats["std"], offset, None), X,
                             y, y - offset)

    @single_scipy_thread
    def partial_fit(self, X, y):
        """Continue the pass with more rows (``fit`` on an unfitted estimator).

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)

        Returns
        -------
        self : SparseOnlineGPRegressor
        """
        if not hasattr(self, "fitted_posterior_"):
            return self.fit(X, y)
        X, y, _ = validate_training_input(self, X, y, classification=False, reset=False)
        return self._run(self._resumed(), X, y - self.y_mean_)


class SparseOnlineGPClassifier(_OnlineMixin, PosteriorClassifierMixin, PosteriorModel):
    __doc__ = f"""Csató & Opper's sparse online GP classification.

    More than two classes are one-vs-rest problems sharing one basis set (novelty
    depends on the inputs only; a basis is pruned when it matters least to every
    class), with probabilities normalised as :class:`SASPAClassifier` does.

    Parameters
    ----------
    likelihood : {{"probit", "logistic", "step", "noisy_probit"}}, default="probit"
    label_noise : float in [0, 0.5), default=0.01
        Label flip probability of the step and noisy-probit likelihoods.
{_ONLINE_PARAMS_DOC}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    bases_ : Basis
        The basis vectors kept (delta bases), a start for a SASPA fit.
    n_rows_seen_, n_bases_added_, n_bases_removed_ : int
    n_invalid_cavities_, n_skipped_updates_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import SparseOnlineGPClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(400, 2))
    >>> y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> clf = SparseOnlineGPClassifier(max_bases=40, signal_variance=10.0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        **{k: SASPAClassifier._parameter_constraints[k] for k in (
            "likelihood", "label_noise", "lengthscale", "signal_variance", "jitter",
            "verbose")},
        "execution": [Execution, dict, None],
        **_ONLINE_CONSTRAINTS,
    }

    _SPARSE = SASPAClassifier

    def __init__(self, *, likelihood="probit", label_noise=0.01, max_bases=64,
                 novelty_threshold=1e-3, lengthscale=None, signal_variance=None,
                 jitter=1e-8, ep_passes=0, optimize_hyperparameters=False,
                 max_hyper_iter=500, execution=None, verbose=0):
        self.likelihood = likelihood
        self.label_noise = label_noise
        self.max_bases = max_bases
        self.novelty_threshold = novelty_threshold
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.jitter = jitter
        self.ep_passes = ep_passes
        self.optimize_hyperparameters = optimize_hyperparameters
        self.max_hyper_iter = max_hyper_iter
        self.execution = execution
        self.verbose = verbose

    @single_scipy_thread
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """One online pass over the rows (in order).

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            At least two distinct labels.

        Returns
        -------
        self : SparseOnlineGPClassifier
        """
        self._reset()
        X, y, stats = validate_training_input(self, X, y, classification=True, reset=True)
        classes = np.asarray(stats["classes"])
        if classes.size < 2:
            raise ValueError(f"{type(self).__name__} needs samples of 2 classes; got 1 "
                             f"class ({classes[0]!r})")
        s2 = 1.0 if self.signal_variance is None else self.signal_variance
        n_problems = 1 if classes.size == 2 else classes.size
        likelihood = classification_likelihood(self.likelihood, self.label_noise)
        return self._refined(self._start(X, likelihood, s2, stats["std"], 0.0, classes,
                                         n_problems), X, y,
                             _problem_targets(*_ep_targets(y, classes)))

    @single_scipy_thread
    def partial_fit(self, X, y, classes=None):
        """Continue the pass with more rows (``fit`` on an unfitted estimator).

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        classes : array-like of shape (2,), optional
            Checked against ``classes_``.

        Returns
        -------
        self : SparseOnlineGPClassifier
        """
        if not hasattr(self, "fitted_posterior_"):
            self.fit(X, y)
            self._check_classes(classes)
            return self
        self._check_classes(classes)
        X, y, stats = validate_training_input(self, X, y, classification=True, reset=False)
        self._check_known_labels(stats["classes"])
        return self._run(self._resumed(), X, _problem_targets(*_ep_targets(y, self.classes_)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


def _problem_targets(targets, labels):
    """EP targets with one column per problem: +-1 for each one-vs-rest class."""
    if labels is None:
        return targets
    if hasattr(targets, "map_blocks"):  # dask: one column per class, chunk by chunk
        return targets.map_blocks(_one_vs_rest, len(labels), new_axis=1,
                                  chunks=(targets.chunks[0], (len(labels),)))
    return _one_vs_rest(targets, len(labels))


def _one_vs_rest(codes, n_classes):
    return np.where(np.asarray(codes)[:, None] == np.arange(n_classes), 1.0, -1.0)
