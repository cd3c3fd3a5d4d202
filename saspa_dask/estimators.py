"""scikit-learn estimators: ``SASPAClassifier`` and ``SASPARegressor``."""

from __future__ import annotations

import numbers
import sys
import time
import warnings

import numpy as np
from scipy.linalg import solve_triangular
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from . import distributed as dist
from .bases import Basis, kmeans_bases
from .ep import EPSettings, make_block, predict_latent
from .hyper import Hyperparameters
from .kernels import BLUR_FAMILIES, blur_covariances
from .likelihoods import Gaussian, Logistic, Poisson, Probit, Step, StudentT, make_likelihood
from .training import Trainer
from .training import fit as fit_hyperparameters

__all__ = ["SASPAClassifier", "SASPARegressor"]


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


def _check_number(name, value, low=None, high=None, low_open=False, integer=False,
                  allow_none=False):
    if value is None and allow_none:
        return
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite {'integer' if integer else 'number'}, "
                         f"got {value!r}")
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low}, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be <= {high}, got {value!r}")


def default_lengthscale(column_std):
    """Data-driven ARD lengthscales: ``std(X[:, k]) * sqrt(d)`` per input.

    With these, the expected scaled squared distance between two random rows is about
    2, so the kernel between typical rows is about exp(-1): neither flat nor diagonal.
    A constant input gets lengthscale 1 (it does not change the kernel).
    """
    std = np.asarray(column_std, dtype=np.float64)
    return np.where(std > 0, std, 1.0) * np.sqrt(std.size)


def _print_sweep(record):
    print(
        f"[saspa] sweep {record['sweep']:3d}  change {record['change']:.3e}  "
        f"invalid {record['n_invalid']}  {record['seconds']:.3f}s",
        file=sys.stderr,
        flush=True,
    )


def _check_init_sites(init_sites, n_samples, n_problems=1):
    """Warm-start sites as a list of (tau, nu) per EP problem (or None)."""
    if init_sites is None:
        return None
    tau, nu = (np.asarray(s, dtype=np.float64) for s in init_sites)
    shape = (n_samples,) if n_problems == 1 else (n_problems, n_samples)
    if tau.shape != shape or nu.shape != shape:
        raise ValueError(f"init_sites must be two arrays of shape {shape} "
                         f"(n_samples={n_samples}), got shapes {tau.shape} and {nu.shape}")
    if not (np.all(np.isfinite(tau)) and np.all(np.isfinite(nu))):
        raise ValueError("init_sites contain NaN or infinity")
    if n_problems == 1:
        return [(tau, nu)]
    return list(zip(tau, nu))


def _stack_sites(per_problem):
    return per_problem[0] if len(per_problem) == 1 else np.stack(per_problem)


class _work_dir:
    """The Dask inputs' site directory (removed afterwards); nothing in memory."""

    def __init__(self, is_lazy, parent):
        self.inner = dist.WorkDir(parent) if is_lazy else None

    def __enter__(self):
        return None if self.inner is None else self.inner.__enter__()

    def __exit__(self, *exc):
        if self.inner is not None:
            self.inner.__exit__(*exc)


def _print_hyper(record):
    start = f"start {record['start']}  " if "start" in record else ""
    print(f"[saspa] hyperparameter {start}iteration {record['iteration']:3d}  "
          f"log evidence {record['log_evidence']:.6g}  "
          f"evaluations {record['n_evaluations']}  {record['seconds']:.1f}s",
          file=sys.stderr, flush=True)


def _codes_of(y, classes):
    return np.searchsorted(classes, y).astype(np.float64)


def _class_codes(y, classes):
    """Class index (0..K-1, as float) of every label; numpy or dask."""
    if dist.is_lazy(y):
        return y.map_blocks(_codes_of, classes, dtype=np.float64)
    return _codes_of(y, classes)


def _check_lazy_features(estimator, X):
    if X.ndim == 2 and X.shape[1] != estimator.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} is "
                         f"expecting {estimator.n_features_in_} features as input.")


def _normalised(p):
    """One-vs-rest class probabilities scaled to sum to one per row."""
    total = p.sum(axis=1, keepdims=True)
    return p / np.where(total > 0, total, 1.0)


def _label_of(margin, classes):
    return classes[(margin > 0).astype(int)]


class _SASPABase(BaseEstimator):
    """Shared fitting and latent prediction of the SASPA estimators."""

    def _check_common_params(self):
        _check_number("n_bases", self.n_bases, low=1, integer=True)
        _check_choice("blur", self.blur, BLUR_FAMILIES)
        _check_number("signal_variance", self.signal_variance, low=0, low_open=True,
                      allow_none=True)
        _check_choice("ep_mode", self.ep_mode, ("parallel", "sequential"))
        _check_number("damping", self.damping, low=0, low_open=True, high=1, allow_none=True)
        _check_number("max_sweeps", self.max_sweeps, low=1, integer=True)
        _check_number("tol", self.tol, low=0, low_open=True)
        _check_number("anderson_memory", self.anderson_memory, low=0, integer=True)
        _check_number("jitter", self.jitter, low=0, low_open=True)
        _check_number("block_rows", self.block_rows, low=1, integer=True)
        _check_number("verbose", self.verbose, low=0, integer=True)
        _check_choice("cache", self.cache, ("memory", "none"))
        if self.bases is not None and not isinstance(self.bases, Basis):
            raise ValueError(f"bases must be a saspa_dask.Basis or None, got {type(self.bases)}")

    def _resolve_lengthscale(self, d, column_std):
        if self.lengthscale is None:
            return default_lengthscale(column_std)
        ls = np.asarray(self.lengthscale, dtype=np.float64)
        if ls.ndim == 0:
            ls = np.full(d, float(ls))
        if ls.shape != (d,):
            raise ValueError(
                f"lengthscale must be a scalar or have one value per feature ({d}), "
                f"got shape {ls.shape}"
            )
        if not np.all(np.isfinite(ls)) or np.any(ls <= 0):
            raise ValueError(f"lengthscale must be finite and > 0, got {ls}")
        return ls

    def _resolve_bases(self, X, is_lazy):
        n_samples, d = X.shape
        if self.bases is not None:
            if self.bases.means.shape[1] != d:
                raise ValueError(
                    f"bases have {self.bases.means.shape[1]} features but X has {d}"
                )
            basis = self.bases
        else:
            if self.n_bases > n_samples:
                raise ValueError(
                    f"n_bases={self.n_bases} exceeds n_samples={n_samples}: "
                    "use at most one basis per training row"
                )
            if is_lazy:
                seed = dist.seed_from(self.random_state)
                basis, self.kmeans_info_ = dist.kmeans(X, self.n_bases, random_state=seed)
            else:
                basis = kmeans_bases(X, self.n_bases, random_state=self.random_state)
        return Basis(basis.means, blur_covariances(basis.covs, self.blur))

    def _blocks(self, X, targets=None):
        L = self.whitening_
        for start in range(0, X.shape[0], self.block_rows):
            stop = min(start + self.block_rows, X.shape[0])
            y = None if targets is None else targets[start:stop]
            yield make_block(X[start:stop], y if y is not None else np.zeros(stop - start),
                             self.bases_.means, self.bases_.covs, self.lengthscale_,
                             self.signal_variance_, L)

    def _check_hyper_params(self):
        if not isinstance(self.optimize_hyperparameters, (bool, np.bool_)):
            raise ValueError("optimize_hyperparameters must be True or False, got "
                             f"{self.optimize_hyperparameters!r}")
        _check_number("max_hyper_iter", self.max_hyper_iter, low=1, integer=True)
        _check_number("n_restarts_optimizer", self.n_restarts_optimizer, low=0, integer=True)
        for name in ("dtc", "coarse_start"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not isinstance(self.learn_blur_scale, (bool, np.bool_)):
            raise ValueError(f"learn_blur_scale must be True or False, got "
                             f"{self.learn_blur_scale!r}")

    def _fit_latent(self, X, targets, likelihood, signal_variance, damping, column_std,
                    progress=None, init_sites=None, labels=None):
        """Bases, whitening, EP (in memory or on Dask) and, if asked, evidence
        maximisation over the hyperparameters; sets the fitted attributes.

        ``labels`` (one-vs-rest) makes one EP problem per class on shared blocks.
        """
        self._check_hyper_params()
        is_lazy = dist.is_lazy(X)
        start_hyper = Hyperparameters(
            self._resolve_lengthscale(X.shape[1], column_std), float(signal_variance),
            likelihood.hyperparameters() if self.optimize_hyperparameters else {}, 1.0)
        start = time.perf_counter()
        basis = self._resolve_bases(X, is_lazy)
        self.timings_ = {"bases": time.perf_counter() - start}
        self.damping_ = float(damping)
        settings = EPSettings(self.ep_mode, self.damping_, self.max_sweeps, self.tol,
                              coarse_start=bool(self.coarse_start),
                              anderson_memory=int(self.anderson_memory))
        callback = progress or (_print_sweep if self.verbose else None)
        learn_blur = bool(self.learn_blur_scale) and self.blur != "delta"
        n_problems = 1 if labels is None else len(labels)
        sites = _check_init_sites(init_sites, X.shape[0], n_problems)
        start = time.perf_counter()
        with _work_dir(is_lazy, self.work_dir) as work_dir:
            trainer = Trainer(X, targets, labels, basis.means, basis.covs, settings,
                              jitter=self.jitter, block_rows=self.block_rows, cache=self.cache,
                              work_dir=work_dir, callback=callback,
                              projected_only=bool(self.dtc))
            outcome = fit_hyperparameters(
                trainer, likelihood, start_hyper,
                optimize_hyperparameters=bool(self.optimize_hyperparameters),
                max_iter=self.max_hyper_iter, learn_blur_scale=learn_blur, init_sites=sites,
                n_restarts=int(self.n_restarts_optimizer),
                callback=_print_hyper if self.verbose else None)
        self.timings_["ep"] = time.perf_counter() - start
        hyper = outcome.hyper
        self.lengthscale_ = hyper.lengthscale
        self.signal_variance_ = hyper.signal_variance
        self.blur_scale_ = hyper.blur_scale
        self.bases_ = outcome.basis
        self.whitening_, self.jitter_ = outcome.L, outcome.jitter
        if self.jitter_ > self.jitter * self.signal_variance_ * (1 + 1e-12):
            warnings.warn(
                f"basis covariance needed jitter {self.jitter_:.3g} "
                f"(asked {self.jitter * self.signal_variance_:.3g}): bases nearly coincide",
                UserWarning,
                stacklevel=3,
            )
        self.likelihood_params_ = likelihood.with_hyperparameters(hyper.likelihood).params()
        self.hyperparameter_trace_ = outcome.trace or []
        self.hyperparameter_info_ = outcome.info or {}
        self._set_ep_results(outcome.results)
        return self

    def _fitted_likelihood(self):
        return make_likelihood(self._likelihood_name(), **self.likelihood_params_)

    @property
    def _is_multiclass(self):
        return False

    def _set_ep_results(self, results):
        def total(name):
            return sum(getattr(r, name) for r in results)

        self.sites_tau_ = _stack_sites([r.tau for r in results])
        self.sites_nu_ = _stack_sites([r.nu for r in results])
        self.n_sweeps_ = max(r.n_sweeps for r in results)
        self.converged_ = all(r.converged for r in results)
        self.log_evidence_ = float(total("log_evidence"))
        self.n_invalid_cavities_ = total("n_invalid_cavities")
        self.n_skipped_updates_ = total("n_skipped_updates")
        self.n_damping_halvings_ = total("n_damping_halvings")
        self.n_damping_reductions_ = total("n_damping_reductions")
        self.n_anderson_steps_ = total("n_anderson_steps")
        self.n_anderson_restarts_ = total("n_anderson_restarts")
        self.coarse_start_ = [{**level, "problem": k} if len(results) > 1 else level
                              for k, r in enumerate(results) for level in r.coarse_start]
        if len(results) == 1:
            self.history_ = results[0].history
        else:
            self.history_ = [{**rec, "problem": k} for k, r in enumerate(results)
                             for rec in r.history]
        self._set_posteriors([r.posterior for r in results])

    def _set_posteriors(self, posteriors):
        """posteriors_ (one per EP problem), posterior_ and alpha_ / beta_ for one."""
        self.posteriors_ = list(posteriors)
        alphas, betas = zip(*(self._alpha_beta(p) for p in posteriors))
        if len(posteriors) == 1:
            self.posterior_ = posteriors[0]
            self.alpha_, self.beta_ = alphas[0], betas[0]
        else:
            self.alpha_, self.beta_ = np.stack(alphas), np.stack(betas)

    def _alpha_beta(self, post):
        """The paper's alpha and beta from a whitened posterior."""
        L = self.whitening_
        alpha = solve_triangular(L, post.mean, lower=True, trans="T")
        # beta = L^{-T} (I - Sigma_v) L^{-1}: the paper's beta, for users; predictions
        # use the whitened factors instead.
        W = solve_triangular(post.chol, np.eye(L.shape[0]), lower=True)  # R^{-1}
        inner = np.eye(L.shape[0]) - W.T @ W
        left = solve_triangular(L, inner, lower=True, trans="T")
        beta = solve_triangular(L, left.T, lower=True, trans="T").T
        return alpha, 0.5 * (beta + beta.T)

    def predict_latent(self, X):
        """Latent predictive mean and variance of f at X.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        mean : ndarray of shape (n_samples,) or (n_samples, n_classes)
        variance : ndarray of shape (n_samples,) or (n_samples, n_classes)
            s2 - |phi|^2 + phi^T Sigma_v phi: returns to the signal variance far from
            the data.  One column per class for a one-vs-rest multi-class model.
        """
        check_is_fitted(self)
        if dist.is_lazy(X):
            return dist.predict_latent(self, X)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        means, variances = [], []
        for block in self._blocks(X):
            # one kernel block serves every problem (one-vs-rest classes)
            parts = [predict_latent(block.phi, post, self.signal_variance_)
                     for post in self.posteriors_]
            means.append(np.column_stack([m for m, _ in parts]))
            variances.append(np.column_stack([v for _, v in parts]))
        mean, var = np.concatenate(means), np.concatenate(variances)
        if len(self.posteriors_) == 1:
            return mean[:, 0], var[:, 0]
        return mean, var

    def _row_slices(self, X, targets):
        """(X, targets) in pieces the driver can hold: dask and zarr inputs one row
        chunk at a time (each computed once), NumPy input whole."""
        if not dist.is_lazy(X):
            yield np.asarray(X, dtype=np.float64), np.asarray(targets, dtype=np.float64)
            return
        import dask

        X = dist.as_dask(X)
        start = 0
        for rows in X.chunks[0]:
            yield dask.compute(X[start:start + rows], targets[start:start + rows])
            start += rows

    def _adf_pass(self, X, targets, labels=None):
        """One assumed-density-filtering pass over rows X against the current posterior.

        Returns ``(posteriors, tau, nu, n_invalid, n_skipped)``: the posteriors with the
        rows added and the rows' sites; the estimator is not changed.  ``labels``:
        one-vs-rest, one pass per class on the same kernel blocks.
        """
        from .ep import Posterior, relabel_block, sequential_chunk

        likelihood = self._fitted_likelihood()
        states = [(post.covariance(), post.mean, np.zeros_like(post.chol),
                   np.zeros_like(post.mean), [], []) for post in self.posteriors_]
        n_invalid = n_skipped = 0
        for X_part, t_part in self._row_slices(X, targets):
            for block in self._blocks(X_part, t_part):
                for k, (sigma, mean, A_new, b_new, tau_k, nu_k) in enumerate(states):
                    block_k = block if labels is None else relabel_block(block, labels[k])
                    zeros = np.zeros(block_k.y.shape[0])
                    tau, nu, sigma, mean, summary = sequential_chunk(
                        block_k, zeros, zeros, sigma, mean, likelihood, 1.0,
                        self.signal_variance_)
                    tau_k.append(tau)
                    nu_k.append(nu)
                    states[k] = (sigma, mean, A_new + summary.A, b_new + summary.b, tau_k, nu_k)
                    n_invalid += summary.n_invalid
                    n_skipped += summary.n_skipped
        posteriors, taus, nus = [], [], []
        for post, (_, _, A_new, b_new, tau_k, nu_k) in zip(self.posteriors_, states):
            # Old sites are unchanged, so P and h simply gain the new rows' sums (exact,
            # no drift from the rank-one updates).
            P_minus_I = post.chol @ post.chol.T - np.eye(A_new.shape[0])
            posteriors.append(Posterior.from_statistics(P_minus_I + A_new, post.h + b_new))
            taus.append(np.concatenate(tau_k))
            nus.append(np.concatenate(nu_k))
        return posteriors, _stack_sites(taus), _stack_sites(nus), n_invalid, n_skipped

    def _partial_fit_latent(self, X, targets, labels=None):
        """One assumed-density-filtering pass over new rows (see ``partial_fit``)."""
        posteriors, tau, nu, n_invalid, n_skipped = self._adf_pass(X, targets, labels)
        self.sites_tau_ = np.concatenate([self.sites_tau_, tau], axis=-1)
        self.sites_nu_ = np.concatenate([self.sites_nu_, nu], axis=-1)
        self.n_invalid_cavities_ += n_invalid
        self.n_skipped_updates_ += n_skipped
        self.history_ = [*self.history_, {"partial_fit_rows": int(X.shape[0]),
                                          "n_invalid": n_invalid, "n_skipped": n_skipped}]
        self._set_posteriors(posteriors)
        # the evidence needs every row's cavity; partial_fit does not revisit old rows
        self.log_evidence_ = float("nan")
        return self

    def _site_update_pass(self, X, targets, labels=None):
        """One undamped parallel EP update of rows X, from zero sites, against the
        current posterior: ``(tau, nu, n_invalid)``; the estimator is not changed."""
        from .ep import parallel_chunk, relabel_block

        likelihood = self._fitted_likelihood()
        taus = [[] for _ in self.posteriors_]
        nus = [[] for _ in self.posteriors_]
        n_invalid = 0
        for X_part, t_part in self._row_slices(X, targets):
            for block in self._blocks(X_part, t_part):
                zeros = np.zeros(block.y.shape[0])
                for k, post in enumerate(self.posteriors_):
                    block_k = block if labels is None else relabel_block(block, labels[k])
                    tau, nu, summary = parallel_chunk(block_k, zeros, zeros, post, likelihood,
                                                      1.0, self.signal_variance_)
                    taus[k].append(tau)
                    nus[k].append(nu)
                    n_invalid += summary.n_invalid
        return (_stack_sites([np.concatenate(t) for t in taus]),
                _stack_sites([np.concatenate(n) for n in nus]), n_invalid)

    def warm_start_sites(self, X_new, y_new, *, new_rows="update"):
        """Sites to warm-start a refit on the training rows followed by ``X_new``.

        The training rows keep their fitted sites.  The new rows' sites remove the
        first, largest sweep of a start from zero sites; ``new_rows`` says how:

        - ``"update"``: one EP site update of every new row against the current
          posterior, all at once (a parallel EP step restricted to the new rows; costs
          a sweep over the new rows only);
        - ``"adf"``: one assumed-density-filtering pass, as ``partial_fit`` gives them
          (each row also sees the rows before it; sequential, about 15x slower per row
          and, measured in ``benchmarks/bench_retrain.py``, no fewer sweeps after);
        - ``"empty"``: zero sites.

        The model is not changed.  Pass the result as ``init_sites`` to ``fit`` on all
        rows, with this model's bases and hyperparameters, as ``saspa retrain`` does.

        Parameters
        ----------
        X_new : array-like of shape (n_new, n_features)
            NumPy, dask or zarr; lazy inputs are read one row chunk at a time.
        y_new : array-like of shape (n_new,)
        new_rows : {"update", "adf", "empty"}, default="update"

        Returns
        -------
        tau, nu : ndarray of shape (n_train + n_new,), or (n_problems, n_train + n_new)
            for one-vs-rest.  Invalid cavities and skipped updates met on the new rows
            are reported as a warning (their sites stay zero).
        """
        check_is_fitted(self, "posteriors_")
        _check_choice("new_rows", new_rows, ("update", "adf", "empty"))
        X_new, targets, labels = self._adf_targets(X_new, y_new)
        n_skipped = 0
        if new_rows == "update":
            tau, nu, n_invalid = self._site_update_pass(X_new, targets, labels)
        elif new_rows == "adf":
            _, tau, nu, n_invalid, n_skipped = self._adf_pass(X_new, targets, labels)
        else:
            tau = nu = np.zeros(self.sites_tau_.shape[:-1] + (X_new.shape[0],))
            n_invalid = 0
        if n_invalid or n_skipped:
            warnings.warn(f"new rows' starting sites ({new_rows}): {n_invalid} invalid "
                          f"cavities, {n_skipped} skipped updates", UserWarning, stacklevel=2)
        return (np.concatenate([self.sites_tau_, tau], axis=-1),
                np.concatenate([self.sites_nu_, nu], axis=-1))

    def model_fingerprint(self):
        """sha256 of everything predictions depend on (bases, kernel, factors,
        posterior, likelihood, label mapping); equal for a model and its saved copy."""
        import hashlib
        import json

        check_is_fitted(self)
        h = hashlib.sha256()
        arrays = [self.bases_.means, self.bases_.covs, self.lengthscale_, self.whitening_]
        for post in self.posteriors_:
            arrays += [post.chol, post.mean]
        for arr in arrays:
            h.update(np.ascontiguousarray(arr, dtype="<f8").tobytes())
        meta = {"s2": self.signal_variance_, "likelihood": self._fitted_likelihood().params(),
                "name": self._fitted_likelihood().name,
                "classes": [str(c) for c in getattr(self, "classes_", [])],
                "y_mean": getattr(self, "y_mean_", 0.0)}
        h.update(json.dumps(meta, sort_keys=True).encode())
        return h.hexdigest()

    def save(self, path, *, overwrite=False):
        """Write the fitted model to a zarr model store (see :func:`saspa_dask.load_model`).

        Parameters
        ----------
        path : str or Path
        overwrite : bool, default=False
            Replace an existing store.
        """
        from .store import save_model

        return save_model(self, path, overwrite=overwrite)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


_SHARED_PARAMS_DOC = """
    n_bases : int, default=64
        Number of basis points M found by K-means (ignored when ``bases`` is given).
    blur : {"full", "diagonal", "spherical", "delta"}, default="full"
        Blur family of the bases: ``delta`` is FITC-EP / SPGP, ``spherical`` the
        multiscale GP, ``full`` SASPA-full (K-means cluster covariances).
    lengthscale : float or array-like of shape (n_features,), default=None
        ARD lengthscales; ``None`` uses ``std(X[:, k]) * sqrt(n_features)``.
    signal_variance : float, default=None
        Kernel amplitude s2; ``None`` uses {s2_default}.
    ep_mode : {"parallel", "sequential"}, default="parallel"
        ``sequential`` is the paper's Algorithm 1 (rank-one updates, refreshed every
        sweep); ``parallel`` updates all sites from one posterior (damped).
    damping : float in (0, 1], default=None
        Site damping; ``None`` picks 0.8 for the step likelihood (not log-concave;
        undamped EP can oscillate on it) and 1.0 otherwise.
    max_sweeps : int, default=100
    tol : float, default=1e-6
        Convergence threshold on the undamped, scale-free site change.
    bases : saspa_dask.Basis, default=None
        Explicit bases (means and covariances); skips K-means.
    jitter : float, default=1e-8
        Diagonal jitter added to the basis covariance, relative to s2; raised tenfold
        until the Cholesky factorisation succeeds.  The value used is ``jitter_``.
    block_rows : int, default=8192
        Rows per in-memory block (bounds memory).  The sweeps do not depend on it;
        with ``coarse_start`` the coarse run's rows do, and so the path, not the fixed
        point.
    random_state : int, RandomState or None, default=None
        Seed of K-means.
    verbose : int, default=0
        If > 0, print one line per EP sweep to standard error.
    cache : {"memory", "none"}, default="memory"
        Dask inputs only: keep each chunk's whitened block (N M floats over the
        cluster) in worker memory between sweeps, or rebuild it in every sweep.
    work_dir : str, default=None
        Dask inputs only: where the per-row site arrays live during training (a
        directory every worker can reach; default: the system temporary directory).
    optimize_hyperparameters : bool, default=True
        Maximise the EP evidence over the ARD lengthscales, the signal variance and
        the likelihood's parameters (L-BFGS-B in log space; each evaluation is an EP
        run warm-started from the best sites so far, plus one gradient pass that
        costs about three sweeps).  The given values are the starting point.
    max_hyper_iter : int, default=20
        Cap on the optimiser's iterations (about 1-2 EP runs each).
    n_restarts_optimizer : int, default=0
        Further evidence maximisations, from the starting lengthscales shortened by
        factors spread geometrically from 1 to 1/sqrt(n_features) (so the last starts
        at one standard deviation per input when ``lengthscale`` is the default); the
        hyperparameters with the highest evidence are kept.  In many dimensions the
        evidence has several maxima (on Ionosphere, d = 34, the default start and the
        short one find different ones).  Each restart costs a whole maximisation.
    learn_blur_scale : bool, default=False
        Also learn one multiplier of the K-means blur covariances (not for delta).
    dtc : bool, default=False
        DTC-EP: the likelihood sees only the projection of f onto the bases (the
        residual variance s2 - k^T Kh^{-1} k is dropped in training; predictions keep
        it).  A baseline for comparison; the default keeps the residual (FITC-EP for
        delta blur, SASPA otherwise).
    coarse_start : bool, default=True
        Start a cold parallel EP run from EP on every 10th row block (recursively
        started the same way), its site sums scaled to all rows.  This skips most of
        a cold start's transient on large N (3e5 rows, M = 256: 39 sweeps cold, 21
        plus about 2 sweeps' worth of coarse work); the fixed point is unchanged.
        Needs at least 4 blocks (``block_rows`` in memory, chunks on Dask); never
        for the Gaussian likelihood or sequential EP.
    anderson_memory : int, default=3
        Parallel EP only: the next sites are the Anderson combination of the last
        ``anderson_memory + 1`` sweeps' outputs that best cancels their steps
        (Walker & Ni 2011), once the site change is below 1; the history restarts when
        the change grows or the mixed posterior is not positive definite, and a
        change that grew after mixing defers mixing to a 10 times smaller change.  It
        speeds up slow linear convergence and cycles and keeps the fixed point; sweeps
        to tol 1e-6, plain / memory 3, measured: 1e5 rows, M = 256, probit with a large
        signal variance, 88 / 57; a warm start after 10% new rows, 15 / 10; 400
        Spambase rows caught in a period-two cycle, 54 / 14.
        Costs 4 (memory + 1) floats a row (in worker memory, or in the Dask site
        store).  0 turns it off.
"""

_SHARED_ATTRS_DOC = """
    bases_ : Basis
        Basis means (M, d) and the blur covariances used (M, d, d).
    alpha_ : ndarray of shape (M,)
        The paper's alpha: predictive mean = Kt(x, B) @ alpha_.
    beta_ : ndarray of shape (M, M)
        The paper's beta: latent variance = s2 - k^T beta_ k.
    sites_tau_, sites_nu_ : ndarray of shape (n_samples,) or (n_classes, n_samples)
        Site precisions and shifts on the projected values (one row per class for a
        one-vs-rest multi-class model).
    n_sweeps_ : int
        Sweeps made, including the one that found the sites converged.
    converged_ : bool
    log_evidence_ : float
        EP approximation of log p(y) (NaN if a cavity is invalid at the end); for
        one-vs-rest, the sum over the classes' binary problems.
    n_invalid_cavities_ : int
        Site updates skipped over all sweeps because the cavity was invalid.
    n_skipped_updates_ : int
        Sequential updates rejected because they would make the posterior singular.
    n_damping_halvings_ : int
        Parallel sweeps' damping halvings forced by an indefinite posterior.
    n_damping_reductions_ : int
        Times EP halved its damping because the site change was cycling (alternating
        up and down for 4 sweeps without progress); each sweep's damping is in
        ``history_``.
    n_anderson_steps_ : int
        Sweeps whose sites were an Anderson combination (``anderson`` in
        ``history_``).
    n_anderson_restarts_ : int
        Times the Anderson history was dropped (growing change, indefinite mix or a
        change of damping).
    history_ : list of dict
        Per sweep: ``sweep``, ``change``, ``n_invalid``, ``damping``, ``anderson``
        (the sites were an Anderson combination), ``log_evidence``, ``seconds``.
    coarse_start_ : list of dict
        The coarse-start runs of the last EP fit (see ``coarse_start``), coarsest
        first: ``rows``, ``sweeps``, ``converged``, ``seconds`` (including the
        coarser levels); with ``problem`` for one-vs-rest.  Empty if there were none.
    lengthscale_ : ndarray of shape (n_features,)
    signal_variance_ : float
    jitter_ : float
        Absolute diagonal jitter used.
    damping_ : float
    whitening_ : ndarray of shape (M, M)
        L, lower Cholesky factor of Kh + jitter_ I.
    posterior_ : saspa_dask.ep.Posterior
        Whitened posterior (Cholesky of P, h, mu_v); not set for one-vs-rest.
    posteriors_ : list of saspa_dask.ep.Posterior
        One per EP problem (one per class for one-vs-rest, else ``[posterior_]``).
    blur_scale_ : float
        Multiplier applied to the K-means blur covariances (1 unless learnt).
    likelihood_params_ : dict
        The likelihood's fitted parameters.
    hyperparameter_trace_ : list of dict
        Per optimiser iteration: ``log_evidence``, ``hyperparameters``,
        ``n_evaluations``, ``seconds`` (empty without ``optimize_hyperparameters``).
    hyperparameter_info_ : dict
        Optimiser summary: iterations, evaluations, failed evaluations, message; with
        restarts also ``starts`` (each start's best evidence) and ``chosen_start``.
    timings_ : dict
        Seconds spent on ``bases`` (K-means) and ``ep`` (blocks and sweeps).
    kmeans_info_ : dict
        Dask inputs with K-means bases only: iterations, inertia, convergence.
    n_features_in_ : int
"""


_CLASSIFIER_PARAMS_DOC = _SHARED_PARAMS_DOC.replace("{s2_default}", "1.0")
_REGRESSOR_PARAMS_DOC = _SHARED_PARAMS_DOC.replace(
    "{s2_default}", "the variance of the (centred) targets"
)


class SASPAClassifier(ClassifierMixin, _SASPABase):
    __doc__ = f"""Gaussian-process classifier by SASPA expectation propagation.

    The latent function's posterior is summarised by M blurred basis points
    N(a_j, C_j) from K-means; EP fits one Gaussian site per training row at
    O(N M^2) per sweep.  More than two classes are handled one-vs-rest: one binary
    EP problem per class, all sharing the bases, the kernel hyperparameters and each
    chunk's kernel block (computed once, not once per class); the classes'
    probabilities are normalised to sum to one, and their summed evidence is what
    hyperparameter learning maximises.

    Parameters
    ----------{_CLASSIFIER_PARAMS_DOC}    likelihood : {{"probit", "logistic", "step"}}, default="probit"
        ``step`` is the step function with label noise ``label_noise``; ``logistic``
        uses Gauss-Hermite quadrature (256 points) for its tilted moments.
    label_noise : float in [0, 0.5), default=0.01
        Label flip probability of the step likelihood (learnt with the other
        hyperparameters when ``optimize_hyperparameters``).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Labels; for two classes ``classes_[1]`` is the positive class.{_SHARED_ATTRS_DOC}    label_noise_ : float
        (step likelihood only)

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

    def __init__(self, n_bases=64, *, blur="full", likelihood="probit", label_noise=0.01,
                 lengthscale=None, signal_variance=None, ep_mode="parallel", damping=None,
                 max_sweeps=100, tol=1e-6, bases=None, jitter=1e-8, block_rows=8192,
                 random_state=None, verbose=0, cache="memory", work_dir=None,
                 optimize_hyperparameters=True, max_hyper_iter=20, n_restarts_optimizer=0,
                 learn_blur_scale=False,
                 dtc=False, coarse_start=True, anderson_memory=3):
        self.n_bases = n_bases
        self.blur = blur
        self.likelihood = likelihood
        self.label_noise = label_noise
        self.lengthscale = lengthscale
        self.signal_variance = signal_variance
        self.ep_mode = ep_mode
        self.damping = damping
        self.max_sweeps = max_sweeps
        self.tol = tol
        self.bases = bases
        self.jitter = jitter
        self.block_rows = block_rows
        self.random_state = random_state
        self.verbose = verbose
        self.cache = cache
        self.work_dir = work_dir
        self.optimize_hyperparameters = optimize_hyperparameters
        self.max_hyper_iter = max_hyper_iter
        self.n_restarts_optimizer = n_restarts_optimizer
        self.learn_blur_scale = learn_blur_scale
        self.dtc = dtc
        self.coarse_start = coarse_start
        self.anderson_memory = anderson_memory

    def _likelihood(self):
        if self.likelihood == "probit":
            return Probit()
        if self.likelihood == "logistic":
            return Logistic()
        return Step(self.label_noise)

    def _likelihood_name(self):
        return self.likelihood

    @property
    def _is_multiclass(self):
        check_is_fitted(self)
        return len(self.classes_) > 2

    def fit(self, X, y, *, progress=None, init_sites=None):
        """Fit the classifier.

        Parameters
        ----------
        X : array-like, dask array or zarr array of shape (n_samples, n_features)
            Dask and zarr inputs are trained on chunk by chunk on Dask (the active
            ``distributed.Client`` if there is one); see :class:`DaskEngine`.
        y : array-like of shape (n_samples,)
            At least two distinct labels (more than two: one-vs-rest).
        progress : callable, optional
            Called with each EP sweep's record (dict).
        init_sites : tuple (tau, nu) of arrays of shape (n_samples,), optional
            Warm start for EP, e.g. ``old.warm_start_sites(X_new, y_new)`` (an
            earlier fit's sites, then sites for the appended rows); shape
            (n_classes, n_samples) for more than two classes.  EP reaches the same
            fixed point; a good start needs fewer sweeps.

        Returns
        -------
        self : SASPAClassifier
        """
        self._check_common_params()
        _check_choice("likelihood", self.likelihood, ("probit", "logistic", "step"))
        _check_number("label_noise", self.label_noise, low=0, high=0.5)
        if self.label_noise >= 0.5:
            raise ValueError(f"label_noise must be < 0.5, got {self.label_noise!r}")
        if dist.is_lazy(X) or dist.is_lazy(y):
            X, y, stats = dist.check_training_data(self, X, y, classification=True)
            self.classes_, column_std = np.asarray(stats["classes"]), stats["std"]
        else:
            X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2)
            check_classification_targets(y)
            self.classes_, column_std = np.unique(y), X.std(axis=0)
        if self.classes_.size < 2:
            raise ValueError(
                f"SASPAClassifier needs samples of 2 classes; got 1 class ({self.classes_[0]!r})"
            )
        s2 = 1.0 if self.signal_variance is None else self.signal_variance
        likelihood = self._likelihood()
        damping = self.damping
        if damping is None:
            damping = 0.8 if self.likelihood == "step" else 1.0
        targets, labels = self._ep_targets(y)
        self._fit_latent(X, targets, likelihood, s2, damping, column_std, progress,
                         init_sites, labels=labels)
        if self.likelihood == "step":
            self.label_noise_ = float(self.likelihood_params_["label_noise"])
        return self

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
        if not hasattr(self, "posteriors_"):
            self.fit(X, y)
            self._check_classes(classes)
            return self
        self._check_classes(classes)
        X, targets, labels = self._adf_targets(X, y)
        return self._partial_fit_latent(X, targets, labels)

    def _adf_targets(self, X, y):
        """Checked new rows and their EP targets: (X, targets, one-vs-rest labels)."""
        if dist.is_lazy(X) or dist.is_lazy(y):
            _check_lazy_features(self, X)
            X, y, stats = dist.check_training_data(self, X, y, classification=True)
            found = np.asarray(stats["classes"])
        else:
            X, y = validate_data(self, X, y, reset=False, dtype=np.float64)
            found = np.unique(y)
        unknown = np.setdiff1d(found, self.classes_)
        if unknown.size:
            raise ValueError(f"labels {unknown.tolist()} are not among classes_ "
                             f"{self.classes_.tolist()}")
        return (X, *self._ep_targets(y))

    def _ep_targets(self, y):
        """EP targets of labels y (numpy or dask) and the one-vs-rest labels: class
        codes 0..K-1 with one problem "code == k" per class, or, for two classes,
        +1 for ``classes_[1]`` and -1 otherwise with ``labels=None``."""
        if self.classes_.size > 2:
            return _class_codes(y, self.classes_), [float(k) for k in range(self.classes_.size)]
        return (y == self.classes_[1]) * 2.0 - 1.0, None

    def _check_classes(self, classes):
        if classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes {np.unique(classes).tolist()} differ from the fitted "
                             f"classes_ {self.classes_.tolist()}")

    def decision_function(self, X):
        """Standardised latent margin; positive values favour ``classes_[1]``.

        ``mean / sqrt(1 + var)`` for probit, ``mean / sqrt(var)`` for step and
        ``mean / sqrt(1 + pi var / 8)`` for logistic: the probability of the class is an
        increasing function of it.  For more than two classes, one column per class
        (its one-vs-rest margin).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        mean, var = self.predict_latent(X)
        return self._fitted_likelihood().margin(mean, var)

    def predict_proba(self, X):
        """Class probabilities, columns ordered as ``classes_``.

        For more than two classes the one-vs-rest probabilities P(y = k | x) of the
        classes' binary models are normalised to sum to one.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
        """
        mean, var = self.predict_latent(X)
        p = self._fitted_likelihood().proba(mean, var).clip(0.0, 1.0)
        if self._is_multiclass:
            if dist.is_lazy(p):
                return p.map_blocks(_normalised, dtype=np.float64)
            return _normalised(p)
        if dist.is_lazy(p):
            return dist.da.stack([1.0 - p, p], axis=1).rechunk({1: 2})
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        """Most probable label.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        if self._is_multiclass:
            proba = self.predict_proba(X)
            if dist.is_lazy(proba):
                return proba.map_blocks(lambda p: self.classes_[p.argmax(axis=1)],
                                        drop_axis=1, dtype=self.classes_.dtype)
            return self.classes_[proba.argmax(axis=1)]
        margin = self.decision_function(X)
        if dist.is_lazy(margin):
            return margin.map_blocks(_label_of, self.classes_, dtype=self.classes_.dtype)
        return _label_of(margin, self.classes_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


class SASPARegressor(RegressorMixin, _SASPABase):
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

    def __init__(self, n_bases=64, *, blur="full", likelihood="gaussian",
                 noise_variance=None, dof=4.0, scale=None, lengthscale=None,
                 signal_variance=None, ep_mode="parallel", damping=None, max_sweeps=100,
                 tol=1e-6, bases=None, jitter=1e-8, block_rows=8192, center_y=True,
                 random_state=None, verbose=0, cache="memory", work_dir=None,
                 optimize_hyperparameters=True, max_hyper_iter=20, n_restarts_optimizer=0,
                 learn_blur_scale=False,
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
        self.dtc = dtc
        self.coarse_start = coarse_start
        self.anderson_memory = anderson_memory

    def _likelihood_name(self):
        return self.likelihood

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
        self._check_common_params()
        _check_choice("likelihood", self.likelihood, ("gaussian", "student_t", "poisson"))
        _check_number("noise_variance", self.noise_variance, low=0, low_open=True,
                      allow_none=True)
        _check_number("dof", self.dof, low=0, low_open=True)
        _check_number("scale", self.scale, low=0, low_open=True, allow_none=True)
        if dist.is_lazy(X) or dist.is_lazy(y):
            X, y, stats = dist.check_training_data(self, X, y, classification=False)
            column_std, mean, spread = stats["std"], float(stats["mean"]), float(stats["var"])
            y_min = float(stats["min"])
            non_integer = int(stats["non_integer"])
        else:
            X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2,
                                 y_numeric=True)
            column_std, mean, spread = X.std(axis=0), float(y.mean()), float(y.var())
            y_min, non_integer = float(y.min()), int((y != np.round(y)).sum())
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
            self.y_mean_ = float(np.log(mean))
            targets = y
            s2 = 1.0 if self.signal_variance is None else self.signal_variance
            likelihood = Poisson(offset=self.y_mean_)
        else:
            self.y_mean_ = mean if self.center_y else 0.0
            targets = y - self.y_mean_
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
        self._fit_latent(X, targets, likelihood, s2, damping, column_std, progress,
                         init_sites)
        params = self.likelihood_params_
        if self.likelihood == "gaussian":
            self.noise_variance_ = float(params["noise_variance"])
        elif self.likelihood == "student_t":
            self.dof_, self.scale_ = float(params["dof"]), float(params["scale"])
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
        if not hasattr(self, "posteriors_"):
            return self.fit(X, y)
        return self._partial_fit_latent(*self._adf_targets(X, y))

    def _adf_targets(self, X, y):
        """Checked new rows and their EP targets: (X, targets, None)."""
        if dist.is_lazy(X) or dist.is_lazy(y):
            _check_lazy_features(self, X)
            X, y, _ = dist.check_training_data(self, X, y, classification=False)
        else:
            X, y = validate_data(self, X, y, reset=False, dtype=np.float64, y_numeric=True)
        if self.likelihood == "poisson":
            return X, y, None
        return X, y - self.y_mean_, None

    def predict_latent(self, X):
        mean, var = super().predict_latent(X)
        return mean + self.y_mean_, var

    predict_latent.__doc__ = _SASPABase.predict_latent.__doc__

    def predict(self, X, return_std=False):
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

        Returns
        -------
        mean : ndarray of shape (n_samples,)
            For poisson the expected count E[exp(f)] = exp(mean + var / 2).
        std : ndarray of shape (n_samples,), only if ``return_std``
        """
        mean, var = self.predict_latent(X)
        if self.likelihood == "poisson":
            rate = np.exp(mean + 0.5 * var)
            if return_std:
                rate_var = (np.exp(var) - 1.0) * rate * rate
                return rate, np.sqrt(rate + rate_var)
            return rate
        if return_std:
            return mean, np.sqrt(var + self._noise_variance())
        return mean

    def _noise_variance(self):
        if self.likelihood == "gaussian":
            return self.noise_variance_
        if self.dof_ <= 2:
            return np.inf
        return self.scale_**2 * self.dof_ / (self.dof_ - 2.0)
