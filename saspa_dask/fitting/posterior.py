"""The fitted posterior: everything a fitted SASPA model predicts from, as one value.

:class:`FittedPosterior` holds the bases, the kernel hyperparameters, the whitening
factor L, one whitened posterior per EP problem (one per class for one-vs-rest), the
likelihood and its parameters, the latent offset, the classes and the feature names.
It is all that prediction, batch scoring, the model store and the fingerprint need:
no per-row sites, no estimator.  Every prediction is a function of one row block
(NumPy); :meth:`FittedPosterior.map_rows` applies such a function to NumPy input
directly or to dask/zarr input by ``map_blocks``, with the posterior shipped to the
workers once as one graph key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from dask import delayed
from scipy.linalg import solve_triangular
from scipy.special import ndtri

from ..core.threads import single_scipy_thread
from ..core.bases import Basis, blur_diagonals, is_diagonal, saved_blur
from ..core.kernel_sums import AdditiveKernel
from ..core.likelihoods import make_likelihood
from ..engines.chunks import as_dask, is_lazy
from ..ep.approximation import FITC, Approximation
from ..ep.posterior import Posterior, predict_latent
from ..ep.whitening import make_block

__all__ = ["FittedPosterior", "check_interval_level", "label_text", "offset_value",
           "stacked", "unstacked"]

# rows predicted at a time: the n x M whitened block of a whole chunk is never formed
_PREDICT_ROWS = 16384


def check_interval_level(level, name="interval_level"):
    """Raise a ValueError naming ``name`` unless ``level`` is a probability strictly
    between 0 and 1 (a central interval's)."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) \
            or not 0.0 < level < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {level!r}")


@dataclass(eq=False)
class FittedPosterior:
    """A fitted SASPA posterior (the value behind every prediction).

    Parameters
    ----------
    means, covs : ndarray of shape (M, d) and (M, d, d) or (M, d)
        Basis means and the blur covariances in use (matrices, or the diagonals of
        diagonal blurs: :attr:`saspa_dask.Basis.blur`).
    lengthscale : ndarray of shape (d,)
    signal_variance : float
    jitter : float
        Absolute jitter on the diagonal of the basis covariance.
    whitening : ndarray of shape (M, M)
        L, the lower Cholesky factor of Kh + jitter I.
    posteriors : tuple of saspa_dask.ep.posterior.Posterior
        One whitened posterior per EP problem.
    likelihood : str
        Likelihood name (:func:`saspa_dask.core.likelihoods.make_likelihood`).
    likelihood_params : dict
    offset : float or ndarray of shape (n_problems,), default=0.0
        Added to the latent mean: the mean of y, log(mean count) for Poisson, or a
        classifier's bias (the likelihood sees f + offset; one per one-vs-rest
        problem).
    classes : ndarray of shape (n_classes,), optional
        Class labels (classification); ``classes[1]`` is the positive class of a
        binary model, and a one-vs-rest model has one problem per class.
    feature_names : ndarray of str, optional
        Names of the input columns, when they were known at fit time.
    frequencies, phases : ndarray of shape (M, d) and (M,), optional
        The bases are frequency inducing features (:mod:`saspa_dask.core.fourier`).
    approximation : Approximation, default=FITC
        The sparse approximation it was fitted with
        (:mod:`saspa_dask.ep.approximation`); for the subset of regressors
        predictions come from the degenerate (projected) prior, without the
        residual variance s2 - |phi|^2.
    log_target : bool, default=False
        A regressor fitted to log(y): its point prediction, predictive standard
        deviation and predictive density are y's own (log-normal when the likelihood
        is Gaussian: E[y] = exp(m + s^2 / 2), s^2 the latent variance plus the noise).
    kernel : str, default="se"
        The kernel's shape (:data:`saspa_dask.core.kernel_profiles.KERNELS`).
    additive, term_weights : ndarray of shape (d,) and (G,), optional
        An additive kernel (:mod:`saspa_dask.core.kernel_sums`): each input's term and
        the terms' weights.
    offset_covariance : ndarray of shape (n_problems, M + 1), optional
        An offset that is itself uncertain (the IVM's bias kernel, whose offset c is
        integrated out): per problem Var[c], then Cov(v, c) in the whitened
        coordinates; the latent variance then includes Var[c] + 2 phi^T Cov(v, c)
        (:func:`saspa_dask.engines.ivm.ivm_offset_moments`).
    """

    means: np.ndarray
    covs: np.ndarray
    lengthscale: np.ndarray
    signal_variance: float
    jitter: float
    whitening: np.ndarray
    posteriors: tuple
    likelihood: str
    likelihood_params: dict = field(default_factory=dict)
    offset: float | np.ndarray = 0.0
    classes: np.ndarray | None = None
    feature_names: np.ndarray | None = None
    frequencies: np.ndarray | None = None
    phases: np.ndarray | None = None
    approximation: Approximation = FITC
    log_target: bool = False
    kernel: str = "se"
    additive: np.ndarray | None = None
    term_weights: np.ndarray | None = None
    offset_covariance: np.ndarray | None = None

    @property
    def kernel_spec(self):
        """The kernel the covariances take (its name, or the additive kernel)."""
        if self.additive is None:
            return self.kernel
        return AdditiveKernel(self.additive, self.term_weights, self.kernel)

    def __post_init__(self):
        # one memory layout (C order, float64) for a fitted model and its saved copy:
        # BLAS takes other paths for other layouts, and the two would then differ in
        # the last bits
        def c_array(a):
            return np.ascontiguousarray(a, dtype=np.float64)

        self.means, self.covs = c_array(self.means), c_array(self.covs)
        if self.covs.ndim == 3 and is_diagonal(self.covs):
            # one form for a fitted model and its saved copy (saved_blur)
            self.covs = c_array(blur_diagonals(self.covs))
        self.lengthscale, self.whitening = c_array(self.lengthscale), c_array(self.whitening)
        if self.frequencies is not None:
            self.frequencies, self.phases = c_array(self.frequencies), c_array(self.phases)
        if self.additive is not None:
            self.additive = np.asarray(self.additive, dtype=np.int64)
            self.term_weights = c_array(self.term_weights)
            if self.additive.shape != np.shape(self.lengthscale):
                raise ValueError(f"additive has shape {self.additive.shape}, expected "
                                 f"{np.shape(self.lengthscale)}")
            self.kernel_spec  # noqa: B018 - checks the terms and weights now
        self.posteriors = tuple(Posterior(c_array(p.chol), c_array(p.h), c_array(p.mean))
                                for p in self.posteriors)
        if np.ndim(self.offset) == 0:
            self.offset = float(self.offset)
        elif np.shape(self.offset) != (len(self.posteriors),):
            raise ValueError(f"offset has shape {np.shape(self.offset)}, expected a number "
                             f"or one per problem ({len(self.posteriors)})")
        else:
            self.offset = c_array(self.offset)
        M, d = np.shape(self.means)
        if (np.shape(self.covs) not in ((M, d, d), (M, d))
                or np.shape(self.lengthscale) != (d,)):
            raise ValueError(f"inconsistent shapes: means {np.shape(self.means)}, covs "
                             f"{np.shape(self.covs)}, lengthscale {np.shape(self.lengthscale)}")
        if np.shape(self.whitening) != (M, M):
            raise ValueError(f"whitening has shape {np.shape(self.whitening)}, expected "
                             f"{(M, M)}")
        for post in self.posteriors:
            if post.chol.shape != (M, M) or post.h.shape != (M,) or post.mean.shape != (M,):
                raise ValueError("a posterior's shapes do not match the bases")
        if self.offset_covariance is not None:
            self.offset_covariance = c_array(self.offset_covariance)
            if self.offset_covariance.shape != (self.n_problems, M + 1):
                raise ValueError(f"offset_covariance has shape "
                                 f"{self.offset_covariance.shape}, expected "
                                 f"{(self.n_problems, M + 1)}")

    # -- what it is ------------------------------------------------------------------

    @property
    def n_bases(self):
        return self.means.shape[0]

    @property
    def n_features(self):
        return self.means.shape[1]

    @property
    def n_problems(self):
        return len(self.posteriors)

    @property
    def is_classifier(self):
        return self.classes is not None

    def block(self, X, y=None, approximation=FITC):
        """The whitened block (phi, lam, y) of rows X under these bases and kernel
        (:func:`~saspa_dask.ep.whitening.make_block`); ``y`` defaults to zeros."""
        y = np.zeros(len(X)) if y is None else y
        return make_block(X, y, self.means, self.covs, self.lengthscale,
                          self.signal_variance, self.whitening, approximation,
                          self.frequencies, self.phases, self.kernel_spec)

    @cached_property
    def basis(self):
        """The bases as a :class:`~saspa_dask.core.bases.Basis` (validated once)."""
        return Basis(self.means, self.covs, self.frequencies, self.phases)

    @property
    def estimator_likelihood_params(self):
        """The fitted likelihood parameters an estimator takes as arguments
        (``noise_variance``, ``dof``, ``scale``, ``label_noise``): a fit that must keep
        this likelihood passes them on; quadrature settings stay out."""
        return {k: v for k, v in self.likelihood_params.items()
                if k in ("noise_variance", "dof", "scale", "label_noise")}

    @cached_property
    def likelihood_object(self):
        """The likelihood with its fitted parameters."""
        return make_likelihood(self.likelihood, **self.likelihood_params)

    @cached_property
    def alpha_beta(self):
        """The paper's (alpha, beta): predictive mean Kt(x, B) alpha, latent variance
        s2 - k^T beta k; stacked over the problems of a one-vs-rest model."""
        pairs = [self._alpha_beta(post) for post in self.posteriors]
        if len(pairs) == 1:
            return pairs[0]
        return np.stack([a for a, _ in pairs]), np.stack([b for _, b in pairs])

    def _alpha_beta(self, post):
        L = self.whitening
        alpha = solve_triangular(L, post.mean, lower=True, trans="T")
        # beta = L^{-T} (I - Sigma_v) L^{-1}, for users; predictions use the whitened
        # factors instead
        W = solve_triangular(post.chol, np.eye(L.shape[0]), lower=True)  # R^{-1}
        inner = np.eye(L.shape[0]) - W.T @ W
        left = solve_triangular(L, inner, lower=True, trans="T")
        beta = solve_triangular(L, left.T, lower=True, trans="T").T
        return alpha, 0.5 * (beta + beta.T)

    def fingerprint(self):
        """sha256 of everything predictions depend on (bases, kernel, factors,
        posteriors, likelihood, offset, classes); equal for a model and its saved copy."""
        h = hashlib.sha256()
        arrays = [self.means, saved_blur(self.covs), self.lengthscale, self.whitening]
        if self.frequencies is not None:
            arrays += [self.frequencies, self.phases]
        if self.additive is not None:  # absent otherwise: older fingerprints stay valid
            arrays += [self.additive.astype(np.float64), self.term_weights]
        for post in self.posteriors:
            arrays += [post.chol, post.mean]
        if self.offset_covariance is not None:  # absent otherwise: fingerprints stay valid
            arrays.append(self.offset_covariance)
        for arr in arrays:
            h.update(np.ascontiguousarray(arr, dtype="<f8").tobytes())
        meta = {"s2": float(self.signal_variance), "likelihood": self.likelihood_params,
                "name": self.likelihood,
                "classes": [] if self.classes is None else [str(c) for c in self.classes],
                "y_mean": offset_value(self.offset)}
        if not self.approximation.residual_in_prediction:
            # absent otherwise: older fingerprints stay valid
            meta["projected_prediction"] = True
        if self.log_target:
            meta["log_target"] = True
        if self.kernel != "se":  # absent for SE: older fingerprints stay valid
            meta["kernel"] = self.kernel
        h.update(json.dumps(meta, sort_keys=True).encode())
        return h.hexdigest()

    # -- predictions on one NumPy block --------------------------------------------

    @single_scipy_thread
    def latent(self, X, rows=_PREDICT_ROWS):
        """Latent mean (offset not added) and variance, one column per EP problem.

        Parameters
        ----------
        X : ndarray of shape (n, d)
        rows : int
            Rows per kernel block (bounds the n x M temporaries).

        Returns
        -------
        mean, variance : ndarray of shape (n, n_problems)
            variance = s2 - |phi|^2 + phi^T Sigma_v phi: the signal variance far from
            the bases (phi^T Sigma_v phi alone for subset of regressors); with an
            uncertain offset (``offset_covariance``) that of the latent plus the
            offset, Var[c] + 2 phi^T Cov(v, c) added.
        """
        X = np.asarray(X, dtype=np.float64)
        if not np.all(np.isfinite(X)):
            raise ValueError("Input X contains NaN or infinity")
        n, K = X.shape[0], self.n_problems
        mean, var = np.empty((n, K)), np.empty((n, K))
        for a in range(0, n, rows):
            part = slice(a, min(a + rows, n))
            block = self.block(X[part])
            # one kernel block serves every problem (one-vs-rest classes)
            for k, post in enumerate(self.posteriors):
                mean[part, k], var[part, k] = predict_latent(
                    block.phi, post, self.signal_variance, self.approximation)
                if self.offset_covariance is not None:
                    moments = self.offset_covariance[k]
                    # >= 0 exactly; the maximum only takes round-off
                    var[part, k] = np.maximum(
                        var[part, k] + moments[0] + 2.0 * (block.phi @ moments[1:]), 0.0)
        return mean, var

    def class_probabilities(self, mean, var):
        """Class probabilities (n, n_classes) from latent moments (offset not added):
        [1 - p, p] for two classes, the one-vs-rest p normalised to sum to one."""
        p = np.clip(self.likelihood_object.proba(mean + self.offset, var), 0.0, 1.0)
        if p.shape[1] == 1:
            return np.column_stack([1.0 - p[:, 0], p[:, 0]])
        total = p.sum(axis=1, keepdims=True)
        return p / np.where(total > 0, total, 1.0)

    def point_prediction(self, mean, var):
        """The regressor's prediction of y from latent moments (offset not added): the
        mean plus the offset, or for Poisson the expected count exp(mean + var / 2)
        with the offset in the mean."""
        if self.log_target:  # the log-normal mean: y = exp(f + noise)
            return np.exp(mean + self.offset + 0.5 * self._fitted_scale_variance(var)[:, None])
        return self.likelihood_object.point_prediction(mean + self.offset, var)

    def predictive_std(self, mean, var):
        """The standard deviation of a new observation y* of a regressor from latent
        moments (n, 1) (offset not added): the latent variance plus the noise's
        (``noise_variance`` for gaussian, scale^2 dof / (dof - 2) for student_t,
        infinite for dof <= 2), and for poisson the count's, E[rate] + Var[rate]."""
        if self.log_target:  # the log-normal's: sqrt(exp(s^2) - 1) E[y]
            spread = self._fitted_scale_variance(var)
            return np.sqrt(np.expm1(spread)) * self.point_prediction(mean, var)[:, 0]
        return self.likelihood_object.observation_std((mean + self.offset)[:, 0], var[:, 0])

    @property
    def has_intervals(self):
        """Whether :meth:`predictive_interval` is exact for this model: a regressor with
        the gaussian likelihood (its new observations are Gaussian, or log-normal with
        ``log_target``)."""
        return not self.is_classifier and self.likelihood_object.gaussian_observations

    def interval_quantile(self, level, name="interval_level"):
        """The standard normal quantile of a central interval at ``level``; a
        ValueError for a model without exact intervals (:attr:`has_intervals`) or a
        level outside (0, 1), naming ``name``."""
        if not self.has_intervals:
            raise ValueError("predictive intervals need the gaussian likelihood (they are "
                             f"exact for it only); this model's is {self.likelihood}")
        check_interval_level(level, name)
        return float(ndtri(0.5 + 0.5 * float(level)))

    def predictive_interval(self, mean, var, level):
        """The central interval holding a new observation y* with probability
        ``level``, from latent moments (n, 1) (offset not added): the mean plus or minus
        the normal quantile times the standard deviation with the noise, and for a
        ``log_target`` model the exponential of those bounds (the log-normal's own
        quantiles).  Returns ``(lower, upper)``, each of shape (n,)."""
        centre = (mean + self.offset)[:, 0]
        half = self.interval_quantile(level) * np.sqrt(self._fitted_scale_variance(var))
        lower, upper = centre - half, centre + half
        if self.log_target:
            return np.exp(lower), np.exp(upper)
        return lower, upper

    def _fitted_scale_variance(self, var):
        """The variance of a new observation on the fitted scale (log y for a
        ``log_target`` model): the latent variance plus the noise's."""
        return self.likelihood_object.observation_variance(var[:, 0])

    def outputs(self, X, names, interval_level=0.95):
        """The named outputs at rows X: ``mean`` (offset added) and ``variance`` of
        the latent function, ``proba`` (classification; P(classes_[1]) for two
        classes, one normalised column per class otherwise), ``label`` (the most
        probable class, :meth:`predicted_labels`), ``rate`` (Poisson:
        exp(mean + variance / 2)), ``value`` (a ``log_target`` regressor's prediction
        of y itself), ``std`` (a regressor's: the standard deviation of a new
        observation, :meth:`predictive_std`), ``lower`` and ``upper`` (a gaussian
        regressor's central interval of a new observation at ``interval_level``,
        :meth:`predictive_interval`).  One column per problem, squeezed for one."""
        return self.outputs_at(*self.latent(X), names, interval_level)

    def outputs_at(self, mean, var, names, interval_level=0.95):
        """:meth:`outputs` from latent moments (offset not added) already computed."""
        values = {}
        if "mean" in names:
            values["mean"] = mean + self.offset
        if "variance" in names:
            values["variance"] = var
        # the class probabilities once, for proba and label alike
        p = self.class_probabilities(mean, var) if {"proba", "label"} & set(names) else None
        if "proba" in names:
            values["proba"] = p[:, 1:] if p.shape[1] == 2 and self.n_problems == 1 else p
        if "rate" in names or "value" in names:  # poisson's rate, a log target's value
            values["rate" if "rate" in names else "value"] = self.point_prediction(mean, var)
        if "std" in names:
            values["std"] = self.predictive_std(mean, var)[:, None]
        if "lower" in names or "upper" in names:
            lower, upper = self.predictive_interval(mean, var, interval_level)
            values["lower"], values["upper"] = lower[:, None], upper[:, None]
        if self.n_problems == 1:
            values = {k: v[:, 0] for k, v in values.items()}
        if "label" in names:  # one column whatever the number of problems
            values["label"] = self.predicted_labels(p)
        return values

    def predicted_labels(self, proba):
        """The most probable class of each row (``proba``: :meth:`class_probabilities`),
        as a float: the class label itself when the classes are numbers (a data store's
        ``y`` encoding), else its index into ``classes``."""
        best = proba.argmax(axis=1)
        if np.issubdtype(self.classes.dtype, np.number):
            return self.classes[best].astype(np.float64)
        return best.astype(np.float64)

    def log_predictive(self, X, y):
        """log p(y_i | x_i) of each row: the true label's probability for a classifier
        (labels from ``classes``), the predictive density of y with the noise for a
        regressor."""
        return self.log_predictive_at(*self.latent(X), y)

    def log_predictive_at(self, mean, var, y):
        """:meth:`log_predictive` from latent moments (offset not added)."""
        if self.is_classifier:
            codes = self.class_codes(y)
            if self.n_problems == 1:
                sign = np.where(codes == 1, 1.0, -1.0)
                return self.likelihood_object.log_predictive(
                    sign, (mean + self.offset)[:, 0], var[:, 0])
            p = self.class_probabilities(mean, var)
            return np.log(np.maximum(p[np.arange(len(codes)), codes], 1e-300))
        y = np.asarray(y, dtype=np.float64)
        if self.likelihood_object.offset_in_link:  # the offset is inside the likelihood
            return self.likelihood_object.log_predictive(y, mean[:, 0], var[:, 0])
        if self.log_target:  # the density of y: of log y, over y (the change of variable)
            with np.errstate(divide="ignore", invalid="ignore"):
                log_y = np.log(y)
            fitted = self.likelihood_object.log_predictive(log_y - self.offset, mean[:, 0],
                                                           var[:, 0])
            return np.where(y > 0, fitted - log_y, -np.inf)
        return self.likelihood_object.log_predictive(y - self.offset, mean[:, 0], var[:, 0])

    def class_codes(self, y):
        """Index into ``classes`` of each label; labels not among them are an error."""
        y = np.asarray(y)
        codes = np.searchsorted(self.classes, y)
        codes = np.minimum(codes, len(self.classes) - 1)
        unknown = self.classes[codes] != y
        if unknown.any():
            raise ValueError(f"labels {_few(np.unique(y[unknown]))} are not among the "
                             f"model's classes {_few(self.classes)}")
        return codes

    # -- NumPy or Dask: the one dispatch ---------------------------------------------

    def map_rows(self, X, func, *, columns=None, dtype=np.float64, rows=_PREDICT_ROWS):
        """``func(self, X_block, rows)`` over the rows of X (``rows``: the kernel block
        size, passed on to :meth:`latent`).

        NumPy input is computed here; dask and zarr input give a dask array chunked like
        X's rows (``columns``: the width of a 2-D result, None for 1-D), computed by
        one task per row chunk with this posterior as one shared graph key.
        """
        if not is_lazy(X):
            return func(self, X, rows)
        X = as_dask(X)
        if X.ndim != 2:
            raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
        X = X.astype(np.float64).rechunk({1: -1})
        shared = delayed(self, pure=True)
        if columns is None:
            return X.map_blocks(_apply, func, shared, rows, drop_axis=1, dtype=dtype,
                                meta=np.empty((0,), dtype=dtype))
        return X.map_blocks(_apply, func, shared, rows, chunks=(X.chunks[0], (columns,)),
                            dtype=dtype, meta=np.empty((0, columns), dtype=dtype))


def offset_value(offset):
    """The offset as JSON: a number, or a list of one per problem."""
    return offset if isinstance(offset, float) else [float(v) for v in offset]


def _apply(Xb, func, posterior, rows):
    return func(posterior, Xb, rows)


def stacked(arrays):
    """A list of per-problem arrays as one array (no leading axis for one problem)."""
    return arrays[0] if len(arrays) == 1 else np.stack(arrays)


def unstacked(array, n_problems):
    """The inverse of :func:`stacked`."""
    return [array] if n_problems == 1 else list(array)



def _few(values, shown=8):
    """Values for a message: the first ``shown`` (each cut to 40 characters) and how
    many more there are, so a message stays one readable line."""
    values = [str(v)[:40] for v in np.asarray(values).tolist()]
    more = len(values) - shown
    return "[" + ", ".join(values[:shown]) + (f" and {more} more" if more > 0 else "") + "]"


def label_text(value):
    """A class as the user wrote it: a whole number without the ``.0`` a float64 target
    gives it (``1``, not ``1.0``), anything else as ``str`` does."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)
