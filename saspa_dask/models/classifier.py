"""``SASPAClassifier``: binary and one-vs-rest Gaussian-process classification."""

from __future__ import annotations

from numbers import Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions

from ..core.likelihoods import make_likelihood
from ..engines.chunks import is_lazy
from ..parameters import CLASSIFICATION_LIKELIHOODS
from .augmented import as_numpy, augmented_ep_latent, check_augment
from .base import SASPABase
from .docs import _CLASSIFIER_PARAMS_DOC, _SHARED_ATTRS_DOC
from .predictor import PosteriorClassifierMixin
from .validation import validate_training_input

__all__ = ["SASPAClassifier", "classification_likelihood"]



def classification_likelihood(name, label_noise):
    """The likelihood object of a classifier's ``likelihood`` parameter."""
    return make_likelihood(name, label_noise=label_noise)


def _codes_of(y, classes):
    return np.searchsorted(classes, y).astype(np.float64)


def _class_codes(y, classes):
    """Class index (0..K-1, as float) of every label; NumPy or dask."""
    if is_lazy(y):
        return y.map_blocks(_codes_of, classes, dtype=np.float64)
    return _codes_of(y, classes)


class SASPAClassifier(PosteriorClassifierMixin, SASPABase):
    __doc__ = f"""Gaussian-process classifier by SASPA expectation propagation.

    The latent function's posterior is summarised by M blurred basis points
    N(a_j, C_j) from K-means; EP fits one Gaussian site per training row at
    O(N M^2) per sweep.  More than two classes are handled one-vs-rest: one binary
    EP problem per class, all sharing the bases, the kernel hyperparameters and each
    chunk's kernel block (computed once, not once per class); the classes'
    probabilities are normalised to sum to one, and their summed evidence is what
    hyperparameter learning maximises.

    Parameters
    ----------{_CLASSIFIER_PARAMS_DOC}    likelihood : {{"probit", "logistic", "step", "noisy_probit"}}, default="probit"
        ``step`` is the step function with label noise ``label_noise``,
        eps + (1 - 2 eps) H(y f); ``noisy_probit`` the probit with label noise,
        eps + (1 - 2 eps) Phi(y f); ``logistic`` uses Gauss-Hermite quadrature
        (256 points) for its tilted moments.
    label_noise : float in [0, 0.5), default=0.01
        Label flip probability eps of the step and noisy-probit likelihoods (learnt
        with the other hyperparameters when ``optimize_hyperparameters``).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Labels; for two classes ``classes_[1]`` is the positive class.{_SHARED_ATTRS_DOC}    label_noise_ : float
        (step and noisy-probit likelihoods only)

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import SASPAClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2))
    >>> y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> clf = SASPAClassifier(n_bases=16, random_state=0).fit(X, y)
    >>> bool(clf.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        **SASPABase._parameter_constraints,
        "likelihood": [StrOptions(set(CLASSIFICATION_LIKELIHOODS))],
        "label_noise": [Interval(Real, 0, 0.5, closed="left")],
    }

    def __init__(self, n_bases="auto", *, blur="auto", kernel="se", feature_groups="auto",
                 additive_groups=None, term_weights=None,
                 approximation="fitc", alpha=1.0,
                 likelihood="probit", label_noise=0.01, lengthscale=None, signal_variance=None, bases=None,
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
        self.label_noise = label_noise
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
        """Fit the classifier.

        Parameters
        ----------
        X : array-like, dask array or zarr array of shape (n_samples, n_features)
            Dask and zarr inputs are trained on chunk by chunk on Dask (the active
            ``distributed.Client`` if there is one).
        y : array-like of shape (n_samples,)
            At least two distinct labels (more than two: one-vs-rest).
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
        init_sites : tuple (tau, nu) of arrays of shape (n_samples,), optional
            Warm start for EP, e.g. ``old.warm_start_sites(X_new, y_new)`` (an
            earlier fit's sites, then sites for the appended rows); shape
            (n_classes, n_samples) for more than two classes.  EP reaches the same
            fixed point; a good start needs fewer sweeps.
        column_names : sequence of str, optional
            Names of X's columns when X is an array (a data store's columns): kept in
            ``fitted_posterior_`` so that scoring and retraining match columns by
            name.  A DataFrame's own names need not be given.
        data_fingerprint : str, optional
            A fingerprint of the training data, kept as ``data_fingerprint_``.

        Returns
        -------
        self : SASPAClassifier
        """
        self._reset()
        X, y, stats = validate_training_input(self, X, y, classification=True, reset=True)
        classes, column_std = np.asarray(stats["classes"]), stats["std"]
        if classes.size < 2:
            raise ValueError(
                f"SASPAClassifier needs samples of 2 classes; got 1 class ({classes[0]!r})")
        s2 = 1.0 if self.signal_variance is None else self.signal_variance
        damping = self._ep.with_damping(self.likelihood).damping
        held_out = self._held_out(X_val, y_val, classes)
        targets, labels = _ep_targets(y, classes)
        return self._fit_posterior(
            X, targets, classification_likelihood(self.likelihood, self.label_noise), s2,
            damping, column_std, progress=progress, init_sites=init_sites, labels=labels,
            classes=classes, column_names=column_names, data_fingerprint=data_fingerprint,
            held_out=held_out,
            # what the data alone would start from: the centre of the learning box
            centre=(1.0, classification_likelihood(self.likelihood, 0.01)))

    def partial_fit(self, X, y, classes=None):
        """Add rows by one assumed-density-filtering pass, without revisiting old rows.

        The new rows' sites are fitted one at a time against the current posterior
        (rank-one updates, the paper's online mode and Csato & Opper's sparse online
        GP); bases, kernel and likelihood stay as fitted.  With the Gaussian likelihood
        this equals the batch fit exactly; otherwise it is the first sweep of EP on the
        new rows.  ``log_evidence_`` becomes NaN (it needs every row).  On an unfitted
        estimator this is ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Labels from ``classes_``.
        classes : array-like of shape (2,), optional
            All labels (scikit-learn's partial_fit convention); checked against
            ``classes_``.

        Returns
        -------
        self : SASPAClassifier
        """
        if not hasattr(self, "fitted_posterior_"):
            self.fit(X, y)
            self._check_classes(classes)
            return self
        self._check_classes(classes)
        return self._partial_fit_rows(X, y)

    def predict_proba(self, X, *, augment=False):
        """Class probabilities, columns ordered as ``classes_``.

        For more than two classes the one-vs-rest probabilities P(y = k | x) of the
        classes' binary models are normalised to sum to one.

        Parameters
        ----------
        X : array-like, dask or zarr array of shape (n_samples, n_features)
        augment : False or tuple (X_train, y_train), default=False
            Augmented prediction: each test row joins the bases as a delta basis and
            EP is run again on the training rows with that support (warm-started
            from the fitted sites: give the rows in their fitting order), so the
            latent variance no longer collapses to the bases' span away from them.
            A (warm) EP run per test row; returns a NumPy array.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        if augment is False:
            return super().predict_proba(X)
        check_augment(augment)
        mean, var = augmented_ep_latent(self, as_numpy(self._checked_rows(X)), *augment)
        return self._posterior().class_probabilities(mean, var)

    def _new_rows(self, X, y):
        """Checked new rows and their EP targets: (X, targets, one-vs-rest labels)."""
        X, y, stats = validate_training_input(self, X, y, classification=True, reset=False)
        self._check_known_labels(stats["classes"])
        return (X, *_ep_targets(y, self.classes_))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


def _ep_targets(y, classes):
    """EP targets of labels y (NumPy or dask) and the one-vs-rest labels: class codes
    0..K-1 with one problem "code == k" per class, or, for two classes, +1 for
    ``classes[1]`` and -1 otherwise with ``labels=None``."""
    if classes.size > 2:
        return _class_codes(y, classes), [float(k) for k in range(classes.size)]
    return (y == classes[1]) * 2.0 - 1.0, None

