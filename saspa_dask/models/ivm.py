"""The informative vector machine as a scikit-learn classifier (a baseline).

:func:`saspa_dask.engines.ivm.ivm_select` chooses the active rows and their ADF sites;
the fitted model is the GP posterior given those sites, written as a SASPA posterior
on delta bases at the active rows (f at a basis is its whitened projection, up to the
jitter), so predictions are those of every other estimator's fitted posterior
(:mod:`saspa_dask.models.predictor`).

As Lawrence et al. do, the kernel is learnt by the IVM's approximate evidence
(:func:`~saspa_dask.engines.ivm.ivm_evidence`) alternating with selection, and the
likelihood has a bias (the latent it sees is f + b, b kept as the posterior's
offset), re-estimated after each selection (:func:`~saspa_dask.engines.ivm.ivm_bias`).
More than two classes are one-vs-rest problems, each with its own active set and
bias, sharing the kernel (learnt by the sum of their evidences); the bases are the
union of the active sets, and each problem's posterior has sites on its own rows only.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from scipy.optimize import minimize
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval

from ..core.kernels import basis_covariance
from ..engines.ivm import ivm_bias, ivm_evidence, ivm_select
from ..ep.posterior import Posterior
from ..ep.whitening import make_block, whiten
from .classifier import SASPAClassifier, _ep_targets, classification_likelihood
from .online import _one_vs_rest
from .posterior import FittedPosterior
from .predictor import PosteriorClassifierMixin, PosteriorModel
from .validation import resolve_lengthscale, validate_training_input

__all__ = ["IVMClassifier"]

# log-hyperparameters are kept within this distance of their starting values
_LOG_RANGE = 7.0


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
        deviations).
    signal_variance : float, default=None
        Signal variance or its starting value (default 1).
    fit_bias : bool, default=False
        Give the likelihood a bias b (it sees f + b), started at the class balance
        (P(y = 1) = Phi(b / sqrt(1 + s2)) for probit) and, while the kernel is learnt,
        re-estimated after each selection.
    optimize_hyperparameters : bool, default=False
        Learn the lengthscales and signal variance by the approximate evidence of
        the active set, alternating with selection.  Off by default: on the measured
        sets (``benchmarks/RESULTS.md``) this evidence of a few ADF sites often
        prefers a flat function (lengthscales to their bound) and raised the test
        error as often as it lowered it.
    n_iterations : int, default=4
        Alternations of selection and learning (Lawrence et al. use a few).
    max_hyper_iter : int, default=100
        Optimiser iterations per alternation.
    jitter : float, default=1e-8
        Relative jitter on the active rows' kernel matrix.
    block_rows : int, default=8192
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
        The likelihood's bias (one per one-vs-rest problem).
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
        "block_rows": [Interval(Integral, 1, None, closed="left")],
        "n_bases": [Interval(Integral, 1, None, closed="left")],
        "fit_bias": ["boolean"],
        "n_iterations": [Interval(Integral, 1, None, closed="left")],
        "max_hyper_iter": [Interval(Integral, 1, None, closed="left")],
    }

    _REPORT_ATTRIBUTES = ("log_evidence_", "hyperparameter_trace_")
    _REPORT_ARRAYS = ("active_indices_", "entropy_reductions_")

    def __init__(self, n_bases=64, *, likelihood="probit", label_noise=0.01,
                 lengthscale=None, signal_variance=None, fit_bias=False,
                 optimize_hyperparameters=False, n_iterations=4, max_hyper_iter=100,
                 jitter=1e-8, block_rows=8192, verbose=0):
        self.n_bases = n_bases
        self.likelihood = likelihood
        self.label_noise = label_noise
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.fit_bias = fit_bias
        self.optimize_hyperparameters = optimize_hyperparameters
        self.n_iterations = n_iterations
        self.max_hyper_iter = max_hyper_iter
        self.jitter = jitter
        self.block_rows = block_rows
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Select the active sets (learning the kernel and biases) and form the
        posterior.

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
        s2 = 1.0 if self.signal_variance is None else float(self.signal_variance)
        log_theta = np.log(np.append(
            resolve_lengthscale(self.lengthscale, X.shape[1], stats["std"]), s2))
        biases = [ivm_bias(likelihood, t, np.zeros(len(t)), np.full(len(t), s2))
                  if self.fit_bias else 0.0 for t in targets.T]
        self.hyperparameter_trace_ = []
        for _ in range(self.n_iterations if self.optimize_hyperparameters else 0):
            selections = self._select(X, targets, likelihood, log_theta, biases)
            log_theta = self._learn(X, selections, log_theta)
            if self.fit_bias:
                biases = [ivm_bias(likelihood, t, sel.mean, sel.var)
                          for t, sel in zip(targets.T, selections)]
        selections = self._select(X, targets, likelihood, log_theta, biases)
        return self._publish(X, selections, log_theta, biases, likelihood, classes)

    def _select(self, X, targets, likelihood, log_theta, biases):
        theta = np.exp(log_theta)
        return [ivm_select(X, t, self.n_bases, likelihood, theta[:-1], theta[-1], b)
                for t, b in zip(targets.T, biases)]

    def _evidence(self, X, selections, log_theta):
        """The problems' summed approximate evidence and its gradient in log space."""
        theta = np.exp(log_theta)
        value, gradient = 0.0, np.zeros_like(log_theta)
        for sel in selections:
            v, g = ivm_evidence(X[sel.indices], sel.tau, sel.nu, theta[:-1], theta[-1],
                                self.jitter)
            value, gradient = value + v, gradient + g
        return value, gradient

    def _learn(self, X, selections, log_theta):
        """Maximise the evidence over the kernel with the active sets and sites fixed."""
        def negative(z):
            value, gradient = self._evidence(X, selections, z)
            return -value, -gradient

        bounds = [(z - _LOG_RANGE, z + _LOG_RANGE) for z in log_theta]
        result = minimize(negative, log_theta, jac=True, method="L-BFGS-B", bounds=bounds,
                          options={"maxiter": self.max_hyper_iter})
        self.hyperparameter_trace_.append(
            {"log_evidence": float(-result.fun), "n_iterations": int(result.nit),
             "lengthscale": np.exp(result.x[:-1]).tolist(),
             "signal_variance": float(np.exp(result.x[-1]))})
        if self.verbose:
            print(f"IVM: evidence {-result.fun:.6g} after {result.nit} iterations")
        return result.x

    def _publish(self, X, selections, log_theta, biases, likelihood, classes):
        """The posterior on the union of the active sets, one problem per selection."""
        theta = np.exp(log_theta)
        lengthscale, s2 = theta[:-1], float(theta[-1])
        union = list(dict.fromkeys(int(i) for sel in selections for i in sel.indices))
        active = X[union]
        zeros = np.zeros((len(active), X.shape[1], X.shape[1]))
        L, jitter = whiten(basis_covariance(active, zeros, lengthscale, s2), s2, self.jitter)
        phi = make_block(active, np.zeros(len(active)), active, zeros, lengthscale, s2,
                         L).phi
        where = {row: k for k, row in enumerate(union)}
        posteriors = []
        for sel in selections:
            rows = phi[[where[int(i)] for i in sel.indices]]
            posteriors.append(Posterior.from_statistics(rows.T @ (sel.tau[:, None] * rows),
                                                        rows.T @ sel.nu))
        offset = biases[0] if len(biases) == 1 else np.array(biases)
        self.fitted_posterior_ = FittedPosterior(
            active, zeros, lengthscale, s2, jitter, L, posteriors, likelihood.name,
            likelihood.params(), offset=offset, classes=classes,
            feature_names=getattr(self, "feature_names_in_", None))
        self.active_indices_ = np.array(union, dtype=np.intp)
        gains = np.full((len(selections), self.n_bases), np.nan)
        for k, sel in enumerate(selections):
            gains[k, :len(sel.entropy_reductions)] = sel.entropy_reductions
        self.entropy_reductions_ = gains[0] if len(selections) == 1 else gains
        self.log_evidence_ = float(self._evidence(X, selections, log_theta)[0])
        return self

    @property
    def bias_(self):
        """The likelihood's bias (one per one-vs-rest problem)."""
        return self._posterior().offset

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags
