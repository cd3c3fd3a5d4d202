"""The informative vector machine as a scikit-learn classifier (a baseline).

:func:`saspa_dask.engines.ivm.ivm_select` chooses the active rows and their ADF sites;
the fitted model is the GP posterior given those sites, written as a SASPA posterior
on delta bases at the active rows (f at a basis is its whitened projection, up to the
jitter), so predictions are those of every other estimator's fitted posterior
(:mod:`saspa_dask.models.predictor`).  Hyperparameters are fixed (given, or SASPA's
data-driven starting values).  Binary only.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval

from ..core.kernels import basis_covariance
from ..engines.ivm import ivm_select
from ..ep.posterior import Posterior
from ..ep.whitening import make_block, whiten
from .classifier import SASPAClassifier, _ep_targets, classification_likelihood
from .posterior import FittedPosterior
from .predictor import PosteriorClassifierMixin, PosteriorModel
from .validation import resolve_lengthscale, validate_training_input

__all__ = ["IVMClassifier"]


class IVMClassifier(PosteriorClassifierMixin, PosteriorModel):
    """Informative vector machine (Lawrence, Seeger & Herbrich): two classes, in memory.

    Parameters
    ----------
    n_bases : int, default=64
        Size of the active set (rows chosen by entropy reduction under ADF).
    likelihood : {"probit", "logistic", "step", "noisy_probit"}, default="probit"
    label_noise : float in [0, 0.5), default=0.01
    lengthscale : float or array-like of shape (n_features,), default=None
        SE-ARD lengthscales (default: the column standard deviations).
    signal_variance : float, default=None
        Default 1.
    jitter : float, default=1e-8
        Relative jitter on the active rows' kernel matrix.
    block_rows : int, default=8192
    verbose : int, default=0

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
    bases_ : Basis
        The active rows (delta bases), in the order they joined.
    active_indices_ : ndarray of int
        Their row indices.
    entropy_reductions_ : ndarray
        Each one's entropy reduction when it joined.

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import IVMClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2))
    >>> y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> clf = IVMClassifier(n_bases=40, signal_variance=10.0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        **{k: SASPAClassifier._parameter_constraints[k] for k in (
            "likelihood", "label_noise", "lengthscale", "signal_variance", "jitter",
            "verbose")},
        "block_rows": [Interval(Integral, 1, None, closed="left")],
        "n_bases": [Interval(Integral, 1, None, closed="left")],
    }

    _REPORT_ATTRIBUTES = ("log_evidence_",)
    _REPORT_ARRAYS = ("active_indices_", "entropy_reductions_")

    def __init__(self, n_bases=64, *, likelihood="probit", label_noise=0.01,
                 lengthscale=None, signal_variance=None, jitter=1e-8, block_rows=8192,
                 verbose=0):
        self.n_bases = n_bases
        self.likelihood = likelihood
        self.label_noise = label_noise
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.jitter = jitter
        self.block_rows = block_rows
        self.verbose = verbose

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Select the active set and form the IVM posterior.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Two distinct labels.

        Returns
        -------
        self : IVMClassifier
        """
        self._reset()
        X, y, stats = validate_training_input(self, X, y, classification=True, reset=True)
        classes = np.asarray(stats["classes"])
        if classes.size != 2:
            raise ValueError(f"Only binary classification is supported. The type of the "
                             f"target is multiclass ({classes.size} classes); IVMClassifier "
                             "selects the active set of one binary problem")
        X = np.asarray(X, dtype=np.float64)
        targets = np.asarray(_ep_targets(y, classes)[0], dtype=np.float64)
        s2 = 1.0 if self.signal_variance is None else float(self.signal_variance)
        lengthscale = resolve_lengthscale(self.lengthscale, X.shape[1], stats["std"])
        likelihood = classification_likelihood(self.likelihood, self.label_noise)
        selection = ivm_select(X, targets, self.n_bases, likelihood, lengthscale, s2)
        active = X[selection.indices]
        zeros = np.zeros((len(active), X.shape[1], X.shape[1]))
        L, jitter = whiten(basis_covariance(active, zeros, lengthscale, s2), s2, self.jitter)
        phi = make_block(active, targets[selection.indices], active, zeros, lengthscale, s2,
                         L).phi
        posterior = Posterior.from_statistics(phi.T @ (selection.tau[:, None] * phi),
                                              phi.T @ selection.nu)
        self.fitted_posterior_ = FittedPosterior(
            active, zeros, lengthscale, s2, jitter, L, [posterior], likelihood.name,
            likelihood.params(), classes=classes,
            feature_names=getattr(self, "feature_names_in_", None))
        self.active_indices_ = selection.indices
        self.entropy_reductions_ = selection.entropy_reductions
        self.log_evidence_ = float("nan")
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # ADF selection of one binary problem
        return tags
