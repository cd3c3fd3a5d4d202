"""Learning the EP energy stochastically, on minibatches of all rows.

Full-batch learning (:mod:`saspa_dask.fitting.trainer`) runs EP to convergence for every
optimiser evaluation, so it learns on a subsample.  Here, after Hernández-Lobato &
Hernández-Lobato (AISTATS 2016) and stochastic EP (Li, Hernández-Lobato & Turner 2015),
one step looks at a minibatch of rows only:

1. **Tied sites.**  Every row shares one Gaussian site on the basis values u (M x M
   and M natural parameters: the sums of the rows' shares), so memory does not grow
   with N.  The site keeps its meaning on u (function values at the bases) while the
   kernel changes; it is held in the whitened coordinates of the last kernel and
   carried to the next by T = L^{-1} L' (near I for a small step: no precision is
   lost to the conditioning of L).
2. **EP on the minibatch.**  The cavity removes alpha of one row's share (power EP);
   each row's tilted distribution gives its projected site (tau_i, nu_i) as a sweep
   would (:func:`~saspa_dask.ep.sites.site_proposals`), and the tied site moves towards
   the minibatch's average, N times: A <- (1 - e) A + e N/b Phi^T diag(tau) Phi.
   The step e is the running average's 1/t at first (the first minibatch sets the
   site, so a usable model exists after one step), then b/N (every row's information
   is replaced once an epoch, as in stochastic EP).
3. **A gradient step.**  The energy's gradient is a sum over rows
   (:mod:`~saspa_dask.fitting.gradient`: at fixed sites, its terms through the
   cavities cancel), so N/b times the minibatch's sum, at the tied posterior and the
   minibatch's sites, estimates it; the kernel, likelihood and basis parameters move
   together by Adam in the optimiser's coordinates (logs, and basis means scaled by
   their input's lengthscale).

Every likelihood, blur family, frequency feature and Power EP's alpha go through the
same code as full-batch EP.  The learnt values are then polished by exact full-batch EP
on all rows (the caller's final fit), which is also the reference the tests compare
with: at the learnt point the full-batch evidence is close to full-batch learning's.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field, replace

import dask
import numpy as np
from numpy.linalg import LinAlgError
from scipy.linalg import solve_triangular

from ..engines.chunks import is_lazy
from ..ep.driver import ep_evidence
from ..ep.posterior import Posterior
from ..ep.sites import site_proposals
from ..ep.whitening import make_block, relabel_block
from .gradient import assemble_gradient, gradient_chunk, kernel_terms
from .trainer import FitOutcome

__all__ = ["MEAN_STEP", "StochasticLearning", "learn_stochastic"]


@dataclass(frozen=True)
class StochasticLearning:
    """How stochastic learning runs (the estimators' ``stochastic`` parameter: this,
    a dict of some of its fields, or None).

    Parameters
    ----------
    batch_rows : int, default=2048
        Rows per minibatch.
    learning_rate : float, default=0.05
        Adam's step: in log space for lengthscales, variances and likelihood
        parameters; a basis mean moves a tenth of its input's lengthscale per unit
        (:data:`MEAN_STEP`).
    max_epochs : float, default=100
        Passes over the rows at most (on large data ``max_fit_time`` usually ends
        learning first).
    tol : float, default=1e-3
        Stop when the energy per row, averaged over the last :data:`WINDOW_STEPS`
        steps, rose by less than this over the :data:`WINDOW_STEPS` steps before.

    Examples
    --------
    >>> from saspa_dask import SASPARegressor
    >>> reg = SASPARegressor(learning="stochastic", stochastic={"batch_rows": 4096})
    """

    batch_rows: int = 2048
    learning_rate: float = 0.05
    max_epochs: float = 100.0
    tol: float = 1e-3

    def __post_init__(self):
        name = type(self).__name__
        if not (isinstance(self.batch_rows, int) and not isinstance(self.batch_rows, bool)
                and self.batch_rows >= 1):
            raise ValueError(f"{name}.batch_rows must be an integer >= 1, got "
                             f"{self.batch_rows!r}")
        for field_name in ("learning_rate", "max_epochs", "tol"):
            value = getattr(self, field_name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                    and value > 0):
                raise ValueError(f"{name}.{field_name} must be a float > 0, got {value!r}")


# the stop rule compares the mean energy estimate of the last WINDOW_STEPS steps with
# that of the WINDOW_STEPS before: the estimate of one step is noisy, and early on (at a
# tied site that lags the moving kernel) it can fall while the fit improves
WINDOW_STEPS = 250


@dataclass
class _Adam:
    """Adam (Kingma & Ba) ascending an objective, step sizes per coordinate."""

    rate: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    t: int = 0
    m: np.ndarray | None = None
    v: np.ndarray | None = None

    def step(self, grad, scale):
        if self.m is None:
            self.m, self.v = np.zeros_like(grad), np.zeros_like(grad)
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        m_hat = self.m / (1 - self.beta1 ** self.t)
        v_hat = self.v / (1 - self.beta2 ** self.t)
        return self.rate * scale * m_hat / (np.sqrt(v_hat) + self.eps)


@dataclass
class _TiedSite:
    """One problem's tied site: the sums of every row's share, held in the whitened
    coordinates v = L^{-1} u of the kernel it was last used with (``L``).  When the
    kernel moves to L', the same site on u reads T^T A T and T^T b with T = L^{-1} L'
    (close to I for a small step, so nothing is lost to the conditioning of L; a round
    trip through u would multiply round-off by cond(L))."""

    A: np.ndarray
    b: np.ndarray
    L: np.ndarray
    n_seen: int = 0  # minibatches folded in so far (the running average's count)

    def moved_to(self, L):
        """(A, b) in the coordinates of ``L``."""
        if L is self.L:
            return self.A, self.b
        T = solve_triangular(self.L, L, lower=True, check_finite=False)
        return T.T @ self.A @ T, T.T @ self.b

    def fold_in(self, L, phi, tau, nu, weight, step):
        """(A, b) in the coordinates of ``L`` moved towards the minibatch's sites
        scaled by ``weight`` (N / b)."""
        A, b = self.moved_to(L)
        A_batch = (phi * tau[:, None]).T @ phi
        A_new = (1 - step) * A + step * weight * A_batch
        return 0.5 * (A_new + A_new.T), (1 - step) * b + step * weight * (phi.T @ nu)


@dataclass
class _Progress:
    """Energy estimates per row: every step's, and their means per epoch."""

    steps: list = field(default_factory=list)
    per_epoch: list = field(default_factory=list)
    epoch_start: int = 0

    def add(self, value):
        self.steps.append(float(value) if np.isfinite(value) else np.nan)

    def end_epoch(self):
        values = np.array(self.steps[self.epoch_start:])
        finite = values[np.isfinite(values)]
        self.per_epoch.append(float(finite.mean()) if finite.size else -np.inf)
        self.epoch_start = len(self.steps)

    def converged(self, tol):
        """The mean of the last WINDOW_STEPS estimates gained less than ``tol`` on the
        mean of the WINDOW_STEPS before them."""
        if len(self.steps) < 2 * WINDOW_STEPS:
            return False
        last = np.nanmean(self.steps[-WINDOW_STEPS:])
        before = np.nanmean(self.steps[-2 * WINDOW_STEPS:-WINDOW_STEPS])
        return bool(last - before < tol)


class _Minibatches:
    """Minibatches of rows in a random order, epoch after epoch: NumPy rows directly;
    dask (zarr) rows one row chunk at a time in a random chunk order, the next chunk
    read by a background thread while this one is used."""

    def __init__(self, X, y, batch_rows, seed):
        self.X, self.y, self.rows = X, y, int(batch_rows)
        self.rng = np.random.default_rng(seed)
        self.lazy = is_lazy(X)
        if self.lazy:
            self.x_parts = X.to_delayed().ravel()
            self.y_parts = y.to_delayed().ravel()

    def epoch(self):
        if not self.lazy:
            yield from self._batches(self.X, self.y)
            return
        order = self.rng.permutation(len(self.x_parts))
        pending = self._fetch(order[0])
        for k in range(len(order)):
            thread, box = pending
            thread.join()
            if "error" in box:
                raise box["error"]
            if k + 1 < len(order):
                pending = self._fetch(order[k + 1])
            yield from self._batches(*box["value"])

    def _fetch(self, index):
        box = {}

        def read():
            try:
                X, y = dask.compute(self.x_parts[index], self.y_parts[index])
                box["value"] = (np.asarray(X, dtype=np.float64), np.asarray(y))
            except Exception as err:  # raised in the learning thread
                box["error"] = err
        thread = threading.Thread(target=read, daemon=True)
        thread.start()
        return thread, box

    def _batches(self, X, y):
        n = X.shape[0]
        order = self.rng.permutation(n)
        for start in range(0, n, self.rows):
            rows = np.sort(order[start:start + self.rows])
            if rows.size:
                yield X[rows], y[rows]


# a basis mean's step, in units of its input's lengthscale, per unit of the learning
# rate: a tenth (measured on Kin-40k: one lengthscale per unit learnt an energy 0.23
# nats per row lower at the same steps; benchmarks/RESULTS.md, "Stochastic learning")
MEAN_STEP = 0.1


def _step_scale(hyper, basis):
    """Adam's step per coordinate of ``hyper.to_log()``: 1 for logs, a tenth of a basis
    mean's input lengthscale for that mean (:data:`MEAN_STEP`)."""
    scale = np.ones(hyper.to_log().size)
    bases = hyper.bases
    if bases is not None and hasattr(bases, "means") and not basis.is_fourier:
        start = hyper._bases_offset()
        M, d = bases.means.shape
        scale[start:start + M * d] = MEAN_STEP * np.tile(hyper.lengthscale, M)
    return scale


def _scaled(summary, factor):
    """A gradient summary of a minibatch as an estimate of all rows' sums."""
    return replace(summary, m0=summary.m0 * factor, m1=summary.m1 * factor,
                   m2=summary.m2 * factor, A=summary.A * factor,
                   g_sum=summary.g_sum * factor,
                   likelihood={k: v * factor for k, v in summary.likelihood.items()},
                   evidence_terms=summary.evidence_terms * factor,
                   kt_sum=summary.kt_sum * factor,
                   s0=None if summary.s0 is None else summary.s0 * factor,
                   s1=None if summary.s1 is None else summary.s1 * factor)


def learn_stochastic(trainer, likelihood, start, schedule, *, seed=None, time_is_up=None,
                     callback=None, watch=None):
    """Learn ``start``'s values stochastically on every row of ``trainer`` (module
    docstring).

    Parameters
    ----------
    trainer : saspa_dask.fitting.trainer.Trainer
        The rows, bases, settings and problems (its engines are not built).
    likelihood : likelihood object (powered: its ``alpha`` is power EP's)
    start : Hyperparameters
    schedule : StochasticLearning
    seed : int, optional
        The rows' order.
    time_is_up : callable, optional
        Says when to stop (e.g. :meth:`saspa_dask.fitting.optimizer.StopRule.time_is_up`).
    callback : callable, optional
        Called with a record after each epoch (and when the time is up).
    watch : callable, optional
        ``watch(make_outcome, iteration=steps)`` after each step: ``make_outcome()``
        gives the point and tied posteriors so far, a model to measure
        (:class:`~saspa_dask.fitting.held_out.HeldOutWatch`).

    Returns
    -------
    FitOutcome
        The learnt point; ``results`` hold each problem's tied posterior (an anytime
        model), ``trace`` the per-epoch records, ``info`` how it stopped.
    """
    learner = _Learner(trainer, likelihood, start, schedule)
    stream = _Minibatches(trainer.X, trainer.y, schedule.batch_rows, seed)
    N, t0 = trainer.X.shape[0], time.perf_counter()
    stop_reason, epoch, trace = "cap", 0, []
    while epoch < math.ceil(schedule.max_epochs):
        for X_B, y_B in stream.epoch():
            learner.step(X_B, y_B)
            if watch is not None:
                watch(learner.current, iteration=learner.steps)
            if time_is_up is not None and time_is_up():
                stop_reason = "time"
                break
            if learner.rows_seen >= schedule.max_epochs * N:
                break
        epoch += 1
        learner.progress.end_epoch()
        trace.append(learner.epoch_record(epoch, t0))
        if callback is not None:
            callback(trace[-1])
        if stop_reason == "time" or learner.rows_seen >= schedule.max_epochs * N:
            break
        if learner.progress.converged(schedule.tol):
            stop_reason = "energy"
            break
    return learner.outcome(stop_reason, trace, epoch, t0)


class _Learner:
    """The state of stochastic learning: the point, its kernel, the tied sites, Adam."""

    def __init__(self, trainer, likelihood, start, schedule):
        self.trainer, self.likelihood, self.schedule = trainer, likelihood, schedule
        self.hyper = start
        self.basis, self.L, self.jitter = trainer.whitening(start)
        M = self.basis.means.shape[0]
        self.labels = trainer.labels or [None]
        self.sites = [_TiedSite(np.zeros((M, M)), np.zeros(M), self.L) for _ in self.labels]
        self.adam = _Adam(schedule.learning_rate)
        self.progress = _Progress()
        self.bounds = np.array([(-np.inf if lo is None else lo, np.inf if hi is None else hi)
                                for lo, hi in start.bounds()], dtype=np.float64)
        self.N = trainer.X.shape[0]
        self.steps = self.rows_seen = self.n_rejected = self.n_invalid = 0

    def step(self, X_B, y_B):
        """EP on the minibatch's rows for every problem, then one Adam step."""
        hyper, basis, L, N, b = self.hyper, self.basis, self.L, self.N, X_B.shape[0]
        lik = hyper.bind(self.likelihood)
        block = make_block(X_B, y_B, basis.means, basis.blur, hyper.lengthscale,
                           hyper.signal_variance, L, self.trainer.approximation,
                           basis.frequencies, basis.phases, hyper.kernel_spec)
        total, energy = None, 0.0
        full = self.trainer.full_moments(hyper)
        for site, label in zip(self.sites, self.labels):
            problem = block if label is None else relabel_block(block, label)
            outcome = _site_step(site, problem, L, lik, N, b)
            self.n_rejected += outcome["rejected"]
            self.n_invalid += outcome["invalid"]
            summary = _scaled(gradient_chunk(
                X_B, problem, outcome["tau"], outcome["nu"], outcome["posterior"], lik, L,
                basis.means, hyper.lengthscale, full, _fourier(basis, hyper),
                kernel_terms(basis, hyper)), N / b)
            energy += ep_evidence(outcome["posterior"], summary.evidence_terms)
            total = summary if total is None else total.merge(summary)
        self.progress.add(energy / N)
        self._move(hyper.gradient_vector(assemble_gradient(total, basis, hyper, L)))
        self.steps += 1
        self.rows_seen += b

    def _move(self, grad):
        """Adam's step from the current point, clipped to the box; a point whose basis
        covariance cannot be factorised is skipped (counted)."""
        if not np.all(np.isfinite(grad)):
            self.n_rejected += 1
            return
        x = self.hyper.to_log() + self.adam.step(grad, _step_scale(self.hyper, self.basis))
        trial = self.hyper.from_log(np.clip(x, self.bounds[:, 0], self.bounds[:, 1]))
        try:
            self.basis, self.L, self.jitter = self.trainer.whitening(trial)
            self.hyper = trial
        except (LinAlgError, FloatingPointError, ValueError):
            self.n_rejected += 1

    def epoch_record(self, epoch, t0):
        return _epoch_record(epoch, self.steps, self.rows_seen, self.progress, self.N,
                             self.hyper, t0)

    def current(self):
        """The point and its tied posteriors so far (an anytime model)."""
        results = [_tied_result(site, self.L) for site in self.sites]
        return FitOutcome(self.hyper, self.basis, self.L, self.jitter, results,
                          float("nan"))

    def outcome(self, stop_reason, trace, epochs, t0):
        outcome = self.current()
        outcome.trace = trace
        outcome.info = _info(stop_reason, self.schedule, trace, self.steps, epochs,
                             self.rows_seen, self.n_rejected, self.n_invalid, self.hyper,
                             self.bounds, t0)
        return outcome


_MESSAGES = {"energy": f"converged: the energy per row rose by less than tol over "
                       f"{WINDOW_STEPS} steps",
             "cap": "stopped at max_epochs", "time": "stopped by the time budget"}


def _epoch_record(epoch, steps, rows_seen, progress, N, hyper, t0):
    """An epoch's record, shaped as the full-batch optimiser's iterations (the energy
    is the epoch's mean minibatch estimate)."""
    energy = progress.per_epoch[-1] * N
    previous = progress.per_epoch[-2] * N if len(progress.per_epoch) > 1 else None
    return {"iteration": epoch, "epoch": epoch, "steps": steps, "rows": rows_seen,
            "log_evidence": float(energy), "energy_per_row": progress.per_epoch[-1],
            "relative_change": None if previous is None else float((energy - previous) / N),
            "projected_gradient": None, "hyperparameters": hyper.as_dict(),
            "n_evaluations": steps, "seconds": time.perf_counter() - t0}


def _info(stop_reason, schedule, trace, steps, epochs, rows_seen, n_rejected, n_invalid,
          hyper, bounds, t0):
    """``hyperparameter_info_`` of stochastic learning, with the full-batch optimiser's
    keys (an iteration is a minibatch step)."""
    on_bound = hyper.on_bounds(bounds)
    return {"method": "stochastic", "stop_reason": stop_reason,
            "message": _MESSAGES[stop_reason], "converged": stop_reason == "energy",
            "n_iterations": steps, "n_evaluations": steps, "epochs": epochs,
            "rows_seen": rows_seen, "n_failed_evaluations": n_rejected,
            "n_invalid_cavities": n_invalid, "tol": float(schedule.tol),
            "batch_rows": schedule.batch_rows, "learning_rate": schedule.learning_rate,
            "hit_iteration_cap": stop_reason == "cap", "hit_time_budget": stop_reason == "time",
            "at_bounds": on_bound, "seconds": time.perf_counter() - t0,
            "log_evidence_start": trace[0]["log_evidence"] if trace else float("nan"),
            "log_evidence_end": trace[-1]["log_evidence"] if trace else float("nan")}


def _fourier(basis, hyper):
    if not basis.is_fourier:
        return None
    return (basis.frequencies, basis.phases, basis.window_variance, hyper.signal_variance)


def _site_step(site, block, L, likelihood, N, b):
    """One tied-site EP step of a problem on a minibatch: the minibatch's projected
    sites at the cavity, the tied site moved towards them, and the posterior after."""
    alpha = likelihood.alpha
    A_v, b_v = site.moved_to(L)
    share = alpha / N  # the cavity removes alpha of one row's share of the tied site
    try:
        cavity = Posterior.from_statistics((1 - share) * A_v, (1 - share) * b_v)
    except LinAlgError:
        cavity = Posterior.prior(A_v.shape[0])
    mc, sc = cavity.marginals(block.phi)
    tau, nu, _, ok = site_proposals(likelihood, block.y, mc, sc, block.lam)
    tau, nu = np.where(ok, tau, 0.0), np.where(ok, nu, 0.0)
    step = max(1.0 / (site.n_seen + 1), b / N)
    rejected = 0
    A_new, b_new = site.fold_in(L, block.phi, tau, nu, N / b, step)
    try:
        posterior = Posterior.from_statistics(A_new, b_new)
        site.A, site.b, site.L = A_new, b_new, L
        site.n_seen += 1
    except LinAlgError:  # negative site precisions made P indefinite: keep the old site
        rejected = 1
        posterior = Posterior.from_statistics(A_v, b_v)
        site.A, site.b, site.L = A_v, b_v, L
    return {"posterior": posterior, "tau": tau, "nu": nu, "rejected": rejected,
            "invalid": int((~ok).sum())}


@dataclass
class _TiedResult:
    """What the caller reads of a problem after stochastic learning: its posterior."""

    posterior: Posterior
    converged: bool = False
    n_sweeps: int = 0
    log_evidence: float = float("nan")


def _tied_result(site, L):
    return _TiedResult(Posterior.from_statistics(*site.moved_to(L)))
