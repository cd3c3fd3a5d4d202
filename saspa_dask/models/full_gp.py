"""Full (non-sparse) Gaussian-process EP: the exact method for N up to a few thousand.

A full GP is SASPA with one delta basis at every training input: then
Kh = K(X, X), phi_i = L^{-1} k_i spans the training latents exactly and the residual
variances s2 - |phi_i|^2 are zero up to the jitter.  EP, the evidence, its gradient,
hyperparameter learning, one-vs-rest classes and prediction are the tested SASPA
machinery; the cost is O(N^3) per sweep and N^2 floats of memory, like any dense GP.

The benchmarks use it as the reference of the paper's KL measure; users can use it
as the exact method on small data.  The jitter (relative to the signal variance,
default 1e-6) acts as a tiny extra latent noise and is reported as ``jitter_``.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils._param_validation import Interval
from sklearn.utils.metaestimators import available_if

from ..core.bases import Basis
from .classifier import SASPAClassifier
from .registry import register
from .regressor import SASPARegressor

__all__ = ["FullGPClassifier", "FullGPRegressor"]


class _FullGPMixin:
    """Bases at the training inputs, in memory, at most ``max_samples`` rows."""

    # fixed settings of the SASPA machinery (not parameters of a full GP)
    n_bases = 1
    blur = "delta"
    bases = None
    block_rows = 8192
    cache = "memory"
    work_dir = None
    learn_blur_scale = False
    learn_bases = False
    hyper_subsample = None  # max_samples bounds the rows already
    dtc = False
    coarse_start = False  # one block up to 8192 rows: nothing to subsample
    anderson_memory = 0  # the reference method stays plain EP
    random_state = None

    def _resolve_bases(self, X, lazy, column_std):
        if lazy:
            raise ValueError(f"{type(self).__name__} is a dense method: pass in-memory "
                             "arrays (use SASPAClassifier / SASPARegressor on Dask data)")
        n = X.shape[0]
        if n > self.max_samples:
            raise ValueError(
                f"{type(self).__name__} with {n} rows needs an {n} x {n} kernel matrix and "
                f"O(N^3) work per sweep; max_samples={self.max_samples}. Raise max_samples "
                "or use the sparse estimators"
            )
        return Basis(np.array(X, dtype=np.float64, copy=True))

    # a full GP would need a basis for every new row: no online mode, refit instead
    @available_if(lambda self: False)
    def partial_fit(self, X, y, *args, **kwargs):  # pragma: no cover - never available
        raise AttributeError("partial_fit")


def _constraints(sparse, names):
    """The sparse estimator's constraints of the parameters a full GP has."""
    return {**{k: sparse._parameter_constraints[k] for k in names},
            "max_samples": [Interval(Integral, 1, None, closed="left")]}


_FULL_PARAMS_DOC = """
    lengthscale : float or array-like of shape (n_features,), default=None
        Starting SE-ARD lengthscales (default: the column standard deviations).
    signal_variance : float, default=None
        Starting signal variance (classifier 1.0; regressor the variance of y).
    ep_mode : {"parallel", "sequential"}, default="parallel"
    damping : float in (0, 1], default=None
    max_sweeps : int, default=100
    tol : float, default=1e-6
        Threshold on the undamped site change.
    jitter : float, default=1e-6
        Jitter relative to the signal variance on the N x N kernel matrix (raised
        tenfold while the Cholesky factorisation fails; the value used is
        ``jitter_``).
    optimize_hyperparameters : bool, default=True
        Maximise the EP evidence over the kernel and likelihood hyperparameters.
    max_hyper_iter : int, default=20
    n_restarts_optimizer : int, default=0
        Further evidence maximisations from shorter starting lengthscales (see
        :class:`SASPAClassifier`).
    max_samples : int, default=5000
        Largest training set accepted (the kernel matrix has N^2 entries).
    verbose : int, default=0
"""


@register
class FullGPClassifier(_FullGPMixin, SASPAClassifier):
    __doc__ = f"""Full Gaussian-process classification by EP (dense, O(N^3) per sweep).

    The same kernel, likelihoods, evidence and hyperparameter learning as
    :class:`SASPAClassifier`, with every training input as a basis: the exact EP
    method the sparse approximations approximate.

    Parameters
    ----------
    likelihood : {{"probit", "logistic", "step", "noisy_probit"}}, default="probit"
    label_noise : float in [0, 0.5), default=0.01
{_FULL_PARAMS_DOC}
    Attributes
    ----------
    The fitted attributes of :class:`SASPAClassifier` (``bases_`` holds the
    training inputs).

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import FullGPClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 2))
    >>> y = (X[:, 0] * X[:, 1] > 0).astype(int)
    >>> bool(FullGPClassifier().fit(X, y).score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = _constraints(SASPAClassifier, (
        "likelihood", "label_noise", "lengthscale", "signal_variance", "ep_mode", "damping",
        "max_sweeps", "tol", "jitter", "optimize_hyperparameters", "max_hyper_iter",
        "n_restarts_optimizer", "verbose"))

    def __init__(self, *, likelihood="probit", label_noise=0.01, lengthscale=None,
                 signal_variance=None, ep_mode="parallel", damping=None, max_sweeps=100,
                 tol=1e-6, jitter=1e-6, optimize_hyperparameters=True, max_hyper_iter=20,
                 n_restarts_optimizer=0, max_samples=5000, verbose=0):
        self.likelihood = likelihood
        self.label_noise = label_noise
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.ep_mode = ep_mode
        self.damping = damping
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.jitter = jitter
        self.optimize_hyperparameters = optimize_hyperparameters
        self.max_hyper_iter = max_hyper_iter
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_samples = max_samples
        self.verbose = verbose


@register
class FullGPRegressor(_FullGPMixin, SASPARegressor):
    __doc__ = f"""Full Gaussian-process regression by EP (dense, O(N^3) per sweep).

    With the Gaussian likelihood this is exact GP regression; ``student_t`` and
    ``poisson`` use EP as in :class:`SASPARegressor`.

    Parameters
    ----------
    likelihood : {{"gaussian", "student_t", "poisson"}}, default="gaussian"
    noise_variance : float, default=None
    dof : float, default=4.0
    scale : float, default=None
    center_y : bool, default=True
{_FULL_PARAMS_DOC}
    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import FullGPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(80, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)
    >>> bool(np.abs(FullGPRegressor().fit(X, y).predict(X) - np.sin(X[:, 0])).max() < 0.2)
    True
    """

    _parameter_constraints: dict = _constraints(SASPARegressor, (
        "likelihood", "noise_variance", "dof", "scale", "center_y", "lengthscale",
        "signal_variance", "ep_mode", "damping", "max_sweeps", "tol", "jitter",
        "optimize_hyperparameters", "max_hyper_iter", "n_restarts_optimizer", "verbose"))

    def __init__(self, *, likelihood="gaussian", noise_variance=None, dof=4.0, scale=None,
                 center_y=True, lengthscale=None, signal_variance=None, ep_mode="parallel",
                 damping=None, max_sweeps=100, tol=1e-6, jitter=1e-6,
                 optimize_hyperparameters=True, max_hyper_iter=20, n_restarts_optimizer=0,
                 max_samples=5000,
                 verbose=0):
        self.likelihood = likelihood
        self.noise_variance = noise_variance
        self.dof = dof
        self.scale = scale
        self.center_y = center_y
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.ep_mode = ep_mode
        self.damping = damping
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.jitter = jitter
        self.optimize_hyperparameters = optimize_hyperparameters
        self.max_hyper_iter = max_hyper_iter
        self.n_restarts_optimizer = n_restarts_optimizer
        self.max_samples = max_samples
        self.verbose = verbose

