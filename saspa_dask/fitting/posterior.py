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

from ..core.threads import single_scipy_thread
from ..core.bases import Basis, blur_diagonals, is_diagonal, saved_blur
from ..core.kernel_sums import AdditiveKernel
from ..core.likelihoods import make_likelihood
from ..engines.chunks import as_dask, is_lazy
from ..ep.approximation import FITC, Approximation
from ..ep.posterior import Posterior, predict_latent
from ..ep.whitening import make_block
from .observations import ObservationViews, check_interval_level, label_text

__all__ = ["FittedPosterior", "check_interval_level", "label_text", "offset_value",
           "stacked", "unstacked"]

# rows predicted at a time: the n x M whitened block of a whole chunk is never formed
_PREDICT_ROWS = 16384


@dataclass(eq=False)
class FittedPosterior(ObservationViews):
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
