"""The informative vector machine as a scikit-learn classifier (a baseline).

:func:`saspa_dask.engines.ivm.ivm_select` chooses the active rows and their ADF sites;
the fitted model is the GP posterior given those sites, written as a SASPA posterior
on delta bases at the active rows (f at a basis is its whitened projection, up to the
jitter), so predictions are those of every other estimator's fitted posterior
(:mod:`saspa_dask.models.predictor`).

As Lawrence et al. do, the kernel is learnt by the IVM's approximate evidence
(:func:`~saspa_dask.engines.ivm.ivm_evidence`) alternating with selection, within a
box fixed about its start; an alternation whose kernel predicts the training rows
worse (their predictive log likelihood under the new selection's marginals) is
undone and ends learning: with few sites the evidence can prefer lengthscales at
which each site explains only itself.  The class balance is a **bias kernel**: a constant b2
added to the kernel, learnt by the same evidence, so that the offset of the latent is
integrated out rather than left to a likelihood bias that the evidence cannot see
(with a likelihood bias the defaults classified Ionosphere worse than the majority
class: ``benchmarks/RESULTS.md``, "A usable IVM").  The fitted posterior is the exact
posterior of the SE part given the sites (:func:`~saspa_dask.engines.ivm.
ivm_site_statistics`); the offset enters predictions by its posterior mean
(``bias_``), and its posterior variance (``bias_posterior_variance_``) and covariance
with the SE part enter the latent variance: the predictive is exactly that of the
kernel SE + b2 given the sites.
More than two classes are one-vs-rest problems, each with its own active set and
offset, sharing the kernel (learnt by the sum of their evidences); the bases are the
union of the active sets, and each problem's posterior has sites on its own rows only.

At small budgets the IVM is weak by construction: its sites are one ADF pass over the
M rows it keeps, the rest of the data seen only through their choice (Ionosphere at
M = 16: error 0.18 with a spread of 0.06-0.52 over splits, where EP on the same 16 rows
gives 0.20 by an independent measurement, and at M = 32 and 64 the IVM reaches
0.086).  SASPA's EP on every row is the remedy.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.optimize import minimize
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval

from ..core.threads import single_scipy_thread
from ..core.kernels import basis_covariance
from ..engines.ivm import (ivm_evidence, ivm_offset_moments, ivm_select,
                           ivm_site_statistics)
from ..ep.posterior import Posterior
from ..ep.whitening import make_block, whiten
from .classifier import SASPAClassifier, _ep_targets, classification_likelihood
from .online import _one_vs_rest
from ..fitting.posterior import FittedPosterior
from .predictor import PosteriorClassifierMixin, PosteriorModel
from ..fitting.input_groups import resolve_lengthscale
from .settings import Execution
from .validation import validate_training_input

__all__ = ["IVMClassifier"]

# log-hyperparameters are kept within this distance of their starting values
_LOG_RANGE = 7.0
# the bias kernel's variance starts at the latent scale of a probit (its offsets are
# within a few units)
_BIAS_START = 1.0


class _Kernel:
    """The learnt kernel's parameters as one log vector z: the lengthscales (all d, or
    one factor on the starting lengthscales when not ARD), the signal variance and,
    with a bias kernel, its variance; the learning box is fixed about the start."""

    def __init__(self, lengthscale, signal_variance, bias_variance, ard):
        self.lengthscale0 = np.asarray(lengthscale, dtype=np.float64)
        self.ard = bool(ard)
        scales = np.log(self.lengthscale0) if self.ard else [0.0]
        extra = [] if bias_variance is None else [np.log(bias_variance)]
        self.start = np.concatenate([scales, [np.log(signal_variance)], extra])
        self.bounds = [(v - _LOG_RANGE, v + _LOG_RANGE) for v in self.start]
        self.has_bias = bias_variance is not None

    def values(self, z):
        """(lengthscale array, signal variance, bias variance or None) at z."""
        n = len(self.lengthscale0) if self.ard else 1
        lengthscale = (np.exp(z[:n]) if self.ard else self.lengthscale0 * np.exp(z[0]))
        b2 = float(np.exp(z[n + 1])) if self.has_bias else None
        return lengthscale, float(np.exp(z[n])), b2

    def chain(self, gradient):
        """The evidence's gradient (per log lengthscale, log s2, log b2) in z."""
        gradient = np.asarray(gradient, dtype=np.float64)
        if self.ard:
            return gradient
        d = len(self.lengthscale0)
        return np.concatenate([[gradient[:d].sum()], gradient[d:]])


def _training_fit(likelihood, targets, selections):
    """The training rows' predictive log likelihood under the selections' marginals
    (summed over the problems)."""
    return float(sum(np.sum(likelihood.log_predictive(t, sel.mean, sel.var))
                     for t, sel in zip(targets.T, selections)))


class IVMClassifier(PosteriorClassifierMixin, PosteriorModel):
    """Informative vector machine (Lawrence, Seeger & Herbrich), in memory.

    Parameters
    ----------
    n_bases : int, default=64
        Size of each problem's active set (rows chosen by entropy reduction under ADF).
    likelihood : {"probit", "logistic", "step", "noisy_probit"}, default="probit"
    label_noise : float in [0, 0.5), default=0.01
    lengthscale : float or array-like of shape (n_features,), default=None
        SE-ARD lengthscales, or their starting values (default: the column standard
        deviations times sqrt(n_features)).
    signal_variance : float, default=None
        Signal variance or its starting value (default 1).
    fit_bias : bool, default=True
        Add a bias kernel (a constant b2, started at 1 and learnt with the kernel) for
        the latent's offset (module docstring).
    optimize_hyperparameters : bool, default=True
        Learn the kernel (lengthscales, signal variance, bias variance) by the
        approximate evidence of the active set, alternating with selection, within
        e^7 of the starting values.
    ard : bool, default=False
        Learn one lengthscale per input.  Off by default: M sites are few for d + 2
        parameters; one factor on the starting lengthscales (isotropic on
        standardised inputs) is learnt instead.
    n_iterations : int, default=4
        Alternations of selection and learning (Lawrence et al. use a few).
    max_hyper_iter : int, default=100
        Optimiser iterations per alternation.
    jitter : float, default=1e-8
        Relative jitter on the active rows' kernel matrix.
    execution : Execution, dict or None, default=None
        Where and in what pieces the work runs (:class:`~saspa_dask.Execution`; only
        ``block_rows``, the rows per prediction block, applies here).
    verbose : int, default=0

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    bases_ : Basis
        The active rows (delta bases): in the order they joined for two classes, the
        union of the problems' active sets otherwise.
    active_indices_ : ndarray of int
        Their row indices.
    entropy_reductions_ : ndarray of shape (n_bases,) or (n_problems, n_bases)
        Each active row's entropy reduction when it joined (NaN pads a problem whose
        selection stopped early).
    bias_ : float or ndarray of shape (n_classes,)
        The latent's offset, the bias kernel's posterior mean (one per one-vs-rest
        problem; 0 without ``fit_bias``).
    bias_variance_ : float or None
        The bias kernel's variance b2 (None without ``fit_bias``).
    bias_posterior_variance_ : float or list of float
        The offset's posterior variance (in the latent variance of every prediction,
        with the offset's covariance with the SE part).
    log_evidence_ : float
        The approximate evidence of the final active sets (summed over the problems).

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import IVMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2))
    >>> y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> clf = IVMClassifier(n_bases=40).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        **{k: SASPAClassifier._parameter_constraints[k] for k in (
            "likelihood", "label_noise", "lengthscale", "signal_variance", "jitter",
            "optimize_hyperparameters", "verbose")},
        "execution": [Execution, dict, None],
        "n_bases": [Interval(Integral, 1, None, closed="left")],
        "fit_bias": ["boolean"],
        "ard": ["boolean"],
        "n_iterations": [Interval(Integral, 1, None, closed="left")],
        "max_hyper_iter": [Interval(Integral, 1, None, closed="left")],
    }

    _REPORT_ATTRIBUTES = ("log_evidence_", "hyperparameter_trace_", "bias_variance_",
                          "bias_posterior_variance_")
    _REPORT_ARRAYS = ("active_indices_", "entropy_reductions_")

    def __init__(self, n_bases=64, *, likelihood="probit", label_noise=0.01,
                 lengthscale=None, signal_variance=None, fit_bias=True,
                 optimize_hyperparameters=True, ard=False, n_iterations=4,
                 max_hyper_iter=100, jitter=1e-8, execution=None, verbose=0):
        self.n_bases = n_bases
        self.likelihood = likelihood
        self.label_noise = label_noise
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.fit_bias = fit_bias
        self.optimize_hyperparameters = optimize_hyperparameters
        self.ard = ard
        self.n_iterations = n_iterations
        self.max_hyper_iter = max_hyper_iter
        self.jitter = jitter
        self.execution = execution
        self.verbose = verbose

    @single_scipy_thread
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Select the active sets (learning the kernel) and form the posterior.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            At least two distinct labels.

        Returns
        -------
        self : IVMClassifier
        """
        self._reset()
        X, y, stats = validate_training_input(self, X, y, classification=True, reset=True)
        classes = np.asarray(stats["classes"])
        if classes.size < 2:
            raise ValueError(f"IVMClassifier needs samples of 2 classes; got 1 class "
                             f"({classes[0]!r})")
        X = np.asarray(X, dtype=np.float64)
        codes, labels = _ep_targets(y, classes)
        targets = np.asarray(codes, dtype=np.float64)[:, None]
        if labels is not None:
            targets = _one_vs_rest(codes, len(labels))
        likelihood = classification_likelihood(self.likelihood, self.label_noise)
        kernel = _Kernel(resolve_lengthscale(self.lengthscale, X.shape[1], stats["std"]),
                         1.0 if self.signal_variance is None else float(self.signal_variance),
                         _BIAS_START if self.fit_bias else None, self.ard)
        z = kernel.start
        self.hyperparameter_trace_ = []
        selections = self._select(X, targets, likelihood, kernel, z)
        fit = _training_fit(likelihood, targets, selections)
        for _ in range(self.n_iterations if self.optimize_hyperparameters else 0):
            learnt = self._learn(X, selections, kernel, z)
            again = self._select(X, targets, likelihood, kernel, learnt)
            learnt_fit = _training_fit(likelihood, targets, again)
            self.hyperparameter_trace_[-1]["training_log_predictive"] = learnt_fit
            if not learnt_fit >= fit:
                # the evidence of M sites can prefer lengthscales at which each site
                # explains only itself; the training rows then say so
                self.hyperparameter_trace_[-1]["kept"] = False
                break
            z, selections, fit = learnt, again, learnt_fit
        return self._publish(X, selections, kernel, z, likelihood, classes)

    def _select(self, X, targets, likelihood, kernel, z):
        lengthscale, s2, b2 = kernel.values(z)
        return [ivm_select(X, t, self.n_bases, likelihood, lengthscale, s2,
                           bias_variance=b2 or 0.0) for t in targets.T]

    def _evidence(self, X, selections, kernel, z):
        """The problems' summed approximate evidence and its gradient in ``z``."""
        lengthscale, s2, b2 = kernel.values(z)
        value, gradient = 0.0, 0.0
        for sel in selections:
            v, g = ivm_evidence(X[sel.indices], sel.tau, sel.nu, lengthscale, s2,
                                self.jitter, b2)
            value, gradient = value + v, gradient + g
        return value, kernel.chain(gradient)

    def _learn(self, X, selections, kernel, z):
        """Maximise the evidence over the kernel with the active sets and sites fixed,
        within the box about the kernel's start (the same box at every alternation)."""
        def negative(z):
            value, gradient = self._evidence(X, selections, kernel, z)
            return -value, -gradient

        result = minimize(negative, z, jac=True, method="L-BFGS-B", bounds=kernel.bounds,
                          options={"maxiter": self.max_hyper_iter})
        lengthscale, s2, b2 = kernel.values(result.x)
        self.hyperparameter_trace_.append(
            {"log_evidence": float(-result.fun), "n_iterations": int(result.nit),
             "lengthscale": lengthscale.tolist(), "signal_variance": s2,
             "bias_variance": b2})
        if self.verbose:
            print(f"IVM: evidence {-result.fun:.6g} after {result.nit} iterations")
        return result.x

    def _publish(self, X, selections, kernel, z, likelihood, classes):
        """The posterior on the union of the active sets, one problem per selection:
        each the exact posterior of the SE part g given its sites, the bias kernel's
        offset c integrated out; c enters predictions by its posterior mean."""
        lengthscale, s2, b2 = kernel.values(z)
        union = list(dict.fromkeys(int(i) for sel in selections for i in sel.indices))
        active = X[union]
        zeros = np.zeros((len(active), X.shape[1], X.shape[1]))
        L, jitter = whiten(basis_covariance(active, zeros, lengthscale, s2), s2, self.jitter)
        phi = make_block(active, np.zeros(len(active)), active, zeros, lengthscale, s2,
                         L).phi
        where = {row: k for k, row in enumerate(union)}
        posteriors, offsets, offset_covariance = [], [], []
        for sel in selections:
            rows = phi[[where[int(i)] for i in sel.indices]]
            posterior = Posterior.from_statistics(
                *ivm_site_statistics(rows, sel.tau, sel.nu, b2 or 0.0))
            posteriors.append(posterior)
            if b2:
                mean, var, cov = ivm_offset_moments(rows, sel.tau, sel.nu, b2, posterior)
                offsets.append(mean)
                offset_covariance.append(np.concatenate([[var], cov]))
            else:
                offsets.append(0.0)
        offset = offsets[0] if len(offsets) == 1 else np.array(offsets)
        self.fitted_posterior_ = FittedPosterior(
            active, zeros, lengthscale, s2, jitter, L, posteriors, likelihood.name,
            likelihood.params(), offset=offset, classes=classes,
            feature_names=getattr(self, "feature_names_in_", None),
            offset_covariance=np.array(offset_covariance) if b2 else None)
        offset_variances = [float(c[0]) for c in offset_covariance] if b2 else \
            [0.0] * len(selections)
        self.active_indices_ = np.array(union, dtype=np.intp)
        gains = np.full((len(selections), self.n_bases), np.nan)
        for k, sel in enumerate(selections):
            gains[k, :len(sel.entropy_reductions)] = sel.entropy_reductions
        self.entropy_reductions_ = gains[0] if len(selections) == 1 else gains
        self.bias_variance_ = b2
        self.bias_posterior_variance_ = (offset_variances[0] if len(selections) == 1
                                         else offset_variances)
        self.log_evidence_ = float(self._evidence(X, selections, kernel, z)[0])
        return self

    @property
    def bias_(self):
        """The likelihood's bias (one per one-vs-rest problem)."""
        return self._posterior().offset

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags
