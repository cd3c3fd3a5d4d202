"""Learning the EP energy stochastically, on minibatches of all rows.

Full-batch learning (:mod:`saspa_dask.fitting.trainer`) runs EP to convergence for every
optimiser evaluation, so it learns on a subsample.  Here, after Hernandez-Lobato &
Hernandez-Lobato (AISTATS 2016), one step looks at a minibatch of rows only:

1. **Per-row sites and one global approximation.**  Every row keeps its own site
   (tau_i, nu_i) on its projection phi_i^T v, as full-batch EP does (arrays of N, in
   the driver's memory: 16 bytes a row and problem).  The global approximation is
   P = I + sum_i tau_i phi_i phi_i^T, h = sum_i nu_i phi_i over *every* row, held in
   the whitened coordinates of the last kernel and carried to the next by
   T = L^{-1} L' (so it keeps its meaning on u while the kernel moves).  Each epoch
   it is summed again from every row's site at the current kernel (one pass of
   statistics, the cost of one EP sweep), which clears what the moves left behind.
2. **A gradient from the global approximation.**  The energy's gradient at fixed
   sites is a sum over rows given the posterior (:mod:`~saspa_dask.fitting.gradient`;
   at EP's fixed point it is the gradient of the converged energy, the terms through
   the sites cancelling).  N/b times the minibatch's sum, at the global posterior and
   the minibatch's own sites, has that sum as its expectation: unbiased, where a
   posterior made from the minibatch itself (tied sites, stochastic EP) correlates
   with the sum it weights and is not.
3. **EP on the minibatch.**  The minibatch's sites are updated by one damped parallel
   EP step against the global approximation (cavities remove each row's own site),
   and the global sums take the difference.  The first epoch only updates sites (each
   row gets one from the starting kernel), so that no gradient is taken from rows
   without information.
4. **Less noise.**  Each epoch the point and sites become the anchor of the next
   epoch's estimates (SVRG, Johnson & Zhang 2013): a minibatch's sum at the anchor is
   subtracted and the anchor's sum over every row (computed in the same pass as the
   global sums) added, which keeps the expectation and takes away the spread the
   point shares with the anchor.  Near the optimum the estimate's noise falls with
   the distance moved, where plain minibatch estimates keep theirs.
5. **A step.**  Adam in the optimiser's coordinates (logs, and basis means scaled by
   their input's lengthscale), its rate shrinking with the epochs (the policy's ``rate_decay``),
   clipped to the box.

Every likelihood, blur family, frequency feature and Power EP's alpha go through the
same code as full-batch EP.  The learnt values are then polished by exact full-batch EP
on all rows, warm-started from the learnt sites.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import dask
import numpy as np
from numpy.linalg import LinAlgError

from ..engines.chunks import is_lazy
from ..ep.result import ep_evidence
from ..ep.posterior import Posterior
from ..ep.sites import block_pass
from ..ep.whitening import make_block, relabel_block
from . import policy
from .adam import Adam
from .anchors import GlobalSums, PointState
from .learning_records import Progress, epoch_record, learning_info
from .minibatches import Minibatches
from .settings import StochasticLearning
from .trainer import FitOutcome

__all__ = ["StochasticLearning", "learn_stochastic"]





def _step_scale(hyper, basis):
    """Adam's step per coordinate of ``hyper.to_log()``: 1 for logs, a tenth of a basis
    mean's input lengthscale for that mean (the policy's ``mean_step``)."""
    scale = np.ones(hyper.to_log().size)
    bases = hyper.bases
    if bases is not None and hasattr(bases, "means") and not basis.is_fourier:
        start = hyper._bases_offset()
        M, d = bases.means.shape
        scale[start:start + M * d] = policy.POLICY.mean_step * np.tile(hyper.lengthscale, M)
    return scale


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
        gives the point and the global posteriors so far, a model to measure
        (:class:`~saspa_dask.fitting.held_out.HeldOutWatch`).

    Returns
    -------
    FitOutcome
        The learnt point; ``results`` hold each problem's global posterior and per-row
        sites (an anytime model, and EP's warm start), ``trace`` the per-epoch records,
        ``info`` how it stopped.
    """
    learner = _Learner(trainer, likelihood, start, schedule)
    stream = Minibatches(trainer.X, trainer.y, schedule.batch_rows, seed)
    N, t0 = trainer.X.shape[0], time.perf_counter()
    stop_reason, epoch, trace = "cap", 0, []
    while epoch < math.ceil(schedule.max_epochs):
        learning = epoch > 0  # the first epoch gives every row its site
        for rows, X_B, y_B in stream.epoch():
            learner.step(rows, X_B, y_B, learning)
            if watch is not None:
                watch(learner.current, iteration=learner.steps)
            if time_is_up is not None and time_is_up():
                stop_reason = "time"
                break
            if learner.rows_seen >= schedule.max_epochs * N:
                break
        epoch += 1
        learner.progress.end_epoch()
        ended = stop_reason == "time" or learner.rows_seen >= schedule.max_epochs * N
        if not ended:  # the next epoch's global sums and anchor (and this one's check)
            learner.refresh(sweep=True)
            learner.anchor()
        trace.append(learner.epoch_record(epoch, t0))
        if callback is not None:
            callback(trace[-1])
        if ended:
            break
        if learning and learner.progress.converged(schedule.tol, learner.steps_per_epoch):
            stop_reason = "energy"
            break
    return learner.outcome(stop_reason, trace, epoch, t0)


class _Learner:
    """The state of stochastic learning: the point, its kernel, every row's sites, the
    global approximations, Adam."""

    def __init__(self, trainer, likelihood, start, schedule):
        self.trainer, self.likelihood, self.schedule = trainer, likelihood, schedule
        self.hyper = start
        self.basis, self.L, self.jitter = trainer.whitening(start)
        M, self.N = self.basis.means.shape[0], trainer.X.shape[0]
        self.labels = trainer.labels or [None]
        self.tau = [np.zeros(self.N) for _ in self.labels]
        self.nu = [np.zeros(self.N) for _ in self.labels]
        self.globals = [GlobalSums(np.zeros((M, M)), np.zeros(M), self.L) for _ in self.labels]
        self.damping = float(trainer.settings.step)
        self.adam = Adam(schedule.learning_rate)
        self.progress = Progress()
        self.bounds = np.array([(-np.inf if lo is None else lo, np.inf if hi is None else hi)
                                for lo, hi in start.bounds()], dtype=np.float64)
        self.steps = self.rows_seen = self.n_rejected = self.n_invalid = 0
        self.n_refreshes = 0  # sums made again within an epoch (an indefinite I + A)
        self._anchor = None  # the gradient's control variate (gradient_estimate)
        self.rate_scale, self.n_reverts = 1.0, 0  # halved by each epoch undone
        self.steps_per_epoch = math.ceil(self.N / schedule.batch_rows)

    def _block(self, X, y):
        hyper, basis = self.hyper, self.basis
        return make_block(X, y, basis.means, basis.blur, hyper.lengthscale,
                          hyper.signal_variance, self.L, self.trainer.approximation,
                          basis.frequencies, basis.phases, hyper.kernel_spec)

    def step(self, rows, X_B, y_B, learning=True):
        """For every problem: the gradient's minibatch estimate at the global
        approximation (when ``learning``), then EP on the minibatch's sites; then one
        Adam step."""
        lik = self.hyper.bind(self.likelihood)
        block = self._block(X_B, y_B)
        grad = self.gradient_estimate(rows, X_B, y_B, block) if learning else None
        energy = 0.0
        for k, problem in enumerate(self._problems(block)):
            A_v, b_v, posterior = self._global_posterior(k)
            tau, nu = self.tau[k][rows], self.nu[k][rows]
            proposal = block_pass(problem, tau, nu, posterior, lik)
            energy += ep_evidence(posterior, proposal.evidence_terms * self.N / rows.size)
            self.n_invalid += proposal.n_invalid
            self._update_sites(k, rows, problem.phi, tau, nu, proposal, A_v, b_v)
        self.progress.add(energy / self.N)
        if learning:
            self._move(grad)
        self.steps += 1
        self.rows_seen += rows.size

    def _problems(self, block):
        return [block if label is None else relabel_block(block, label)
                for label in self.labels]

    def gradient_estimate(self, rows, X_B, y_B, block=None):
        """The energy gradient's estimate (in the optimiser's coordinates) from the
        minibatch ``rows`` (its rows ``X_B``, ``y_B``; ``block`` their whitened block at
        the current kernel, made when not given): N/b times its rows' sum at the global
        posterior and their own sites, whose expectation over minibatches is the sum
        over every row (module docstring); with an anchor (:meth:`anchor`), less the
        same minibatch's sum at the anchor plus the anchor's sum over every row, whose
        expectation is the same and whose spread shrinks as the point nears the anchor
        (SVRG, Johnson & Zhang 2013)."""
        state = self._state()
        estimate = state.minibatch_gradient(rows, X_B, y_B, block)
        if self._anchor is not None:
            estimate = (estimate - self._anchor.minibatch_gradient(rows, X_B, y_B)
                        + self._anchor.full_gradient)
        return estimate

    def _state(self):
        """The current point as a :class:`~saspa_dask.fitting.anchors.PointState` (its
        global posteriors)."""
        posteriors = [self._global_posterior(k)[2] for k in range(len(self.labels))]
        return PointState(self, self.hyper, self.basis, self.L, posteriors,
                           self.tau, self.nu)

    def anchor(self):
        """Make the current point and sites the anchor of the gradient estimates: its
        gradient and its energy summed over every row (one pass, after
        :meth:`refresh`).  An epoch whose anchor lost more than the policy's ``revert_drop``
        nats per row on the last anchor stepped too far: it is undone (the point and
        sites back to the last anchor's) and Adam starts again at half the rate, so
        learning cannot run down the energy."""
        state = self._state()
        state.tau = [t.copy() for t in self.tau]
        state.nu = [n.copy() for n in self.nu]
        total, terms = None, np.zeros(len(self.labels))
        for start, stop, X, y in self._row_blocks():
            summary = state.summary(np.arange(start, stop), X, y, None, 1.0, terms)
            total = summary if total is None else total.merge(summary)
        state.full_gradient = state.vector(total)
        state.energy = sum(ep_evidence(p, t) for p, t in zip(state.posteriors, terms))
        previous = self._anchor
        if previous is not None and np.isfinite(previous.energy) and not (
                state.energy >= previous.energy - policy.POLICY.revert_drop * self.N):
            self._restore(previous)
            return
        if previous is not None:  # an epoch that gained: the rate may grow again
            self.rate_scale = min(policy.POLICY.rate_growth * self.rate_scale, 1.0)
        self._anchor = state
        self.progress.anchors.append(state.energy / self.N)

    def _restore(self, state):
        """Back to an anchor's point and sites (its copies kept), the rate halved."""
        self.hyper, self.basis, self.L = state.hyper, state.basis, state.L
        self.jitter = self.trainer.whitening(state.hyper)[2]
        self.tau = [t.copy() for t in state.tau]
        self.nu = [n.copy() for n in state.nu]
        self.refresh()
        self.rate_scale *= 0.5
        self.adam = Adam(self.schedule.learning_rate)
        self.n_reverts += 1

    def _global_posterior(self, k):
        """Problem ``k``'s global sums at the current kernel and their posterior.  The
        running sums move sites along their rows' current directions, which a kernel
        step since has turned: where that left I + A indefinite, they are summed
        again from every row (:meth:`refresh`)."""
        for _ in range(2):
            A_v, b_v = self.globals[k].moved_to(self.L)
            try:
                return A_v, b_v, Posterior.from_statistics(A_v, b_v)
            except LinAlgError:
                self.n_refreshes += 1
                self.refresh()
        raise FloatingPointError("stochastic learning: the global approximation is not "
                                 "positive definite even summed again from every row")

    def _update_sites(self, k, rows, phi, tau, nu, proposal, A_v, b_v):
        """The minibatch's sites moved by a damped EP step, and the global sums by the
        difference; the step halved while the global precision is not positive
        definite (negative site precisions), and dropped (counted) after 4 halvings."""
        step = self.damping
        for _ in range(5):
            tau_new = tau + step * (proposal.tau_prop - tau)
            nu_new = nu + step * (proposal.nu_prop - nu)
            dt = tau_new - tau
            A_new = A_v + (phi * dt[:, None]).T @ phi
            b_new = b_v + phi.T @ (nu_new - nu)
            A_new = 0.5 * (A_new + A_new.T)
            try:
                Posterior.from_statistics(A_new, b_new)
            except LinAlgError:
                step *= 0.5
                continue
            self.tau[k][rows], self.nu[k][rows] = tau_new, nu_new
            self.globals[k] = GlobalSums(A_new, b_new, self.L)
            return
        self.n_rejected += 1
        self.globals[k] = GlobalSums(A_v, b_v, self.L)

    def refresh(self, sweep=False):
        """The global sums summed again from every row's site at the current kernel
        (one pass of statistics over the rows); with ``sweep``, then one damped
        parallel EP sweep of every row's site against them at the current kernel and
        likelihood, and the sums of the new sites (a second pass): the anchor's sites
        are then of its own point, not of the points the epoch passed."""
        self._sum_sites()
        if sweep:
            self._sum_sites(self.hyper.bind(self.likelihood))

    def _sum_sites(self, likelihood=None):
        """One pass: the global sums of every row's site, each site first moved by one
        damped EP step against the current sums when a ``likelihood`` is given."""
        M = self.basis.means.shape[0]
        sums = [[np.zeros((M, M)), np.zeros(M)] for _ in self.labels]
        posteriors = None
        if likelihood is not None:
            posteriors = [self._global_posterior(k)[2] for k in range(len(self.labels))]
        for start, stop, X, y in self._row_blocks():
            block = self._block(X, y)
            phi = block.phi
            for k, problem in enumerate(self._problems(block)):
                tau, nu = self.tau[k][start:stop], self.nu[k][start:stop]
                if posteriors is not None:
                    p = block_pass(problem, tau, nu, posteriors[k], likelihood)
                    tau = tau + self.damping * (p.tau_prop - tau)
                    nu = nu + self.damping * (p.nu_prop - nu)
                    self.tau[k][start:stop], self.nu[k][start:stop] = tau, nu
                sums[k][0] += (phi * tau[:, None]).T @ phi
                sums[k][1] += phi.T @ nu
        for k, (A, b) in enumerate(sums):
            A = 0.5 * (A + A.T)
            try:
                Posterior.from_statistics(A, b)
            except LinAlgError:  # keep the running sums (negative sites at a new kernel)
                continue
            self.globals[k] = GlobalSums(A, b, self.L)

    def _row_blocks(self):
        """``(start, stop, X, y)`` of every row, a block (or a chunk) at a time."""
        X, y = self.trainer.X, self.trainer.y
        if is_lazy(X):
            edges = np.concatenate([[0], np.cumsum(X.chunks[0])])
            for k, (xb, yb) in enumerate(zip(X.to_delayed().ravel(), y.to_delayed().ravel())):
                Xc, yc = dask.compute(xb, yb)
                yield edges[k], edges[k + 1], np.asarray(Xc, dtype=np.float64), np.asarray(yc)
            return
        step = self.trainer.block_rows
        for start in range(0, self.N, step):
            yield start, min(start + step, self.N), X[start:start + step], y[start:start + step]

    def _move(self, grad):
        """Adam's step from the current point (its rate divided by the learning epochs
        so far to the power the policy's ``rate_decay``), clipped to the box; a point whose basis
        covariance cannot be factorised is skipped (counted)."""
        if not np.all(np.isfinite(grad)):
            self.n_rejected += 1
            return
        epochs = max(1.0, self.rows_seen / self.N)  # the first epoch learns nothing
        decay = epochs ** policy.POLICY.rate_decay
        self.adam.rate = self.rate_scale * self.schedule.learning_rate / decay
        x = self.hyper.to_log() + self.adam.step(grad, _step_scale(self.hyper, self.basis))
        trial = self.hyper.from_log(np.clip(x, self.bounds[:, 0], self.bounds[:, 1]))
        try:
            self.basis, self.L, self.jitter = self.trainer.whitening(trial)
            self.hyper = trial
        except (LinAlgError, FloatingPointError, ValueError):
            self.n_rejected += 1

    def epoch_record(self, epoch, t0):
        return {**epoch_record(epoch, self.steps, self.rows_seen, self.progress, self.N,
                                self.hyper, t0), "reverts": self.n_reverts}

    def current(self):
        """The point, its global posteriors and every row's sites so far (an anytime
        model)."""
        results = [_LearntResult(Posterior.from_statistics(*g.moved_to(self.L)),
                                 self.tau[k].copy(), self.nu[k].copy())
                   for k, g in enumerate(self.globals)]
        return FitOutcome(self.hyper, self.basis, self.L, self.jitter, results,
                          float("nan"))

    def outcome(self, stop_reason, trace, epochs, t0):
        outcome = self.current()
        outcome.trace = trace
        outcome.info = learning_info(stop_reason, self.schedule, trace, self.steps, epochs,
                             self.rows_seen, self.n_rejected + self.n_reverts, self.n_invalid,
                             self.hyper, self.bounds, t0)
        return outcome


@dataclass
class _LearntResult:
    """What the caller reads of a problem after stochastic learning: its global
    posterior and every row's sites (EP on all rows starts from them)."""

    posterior: Posterior
    tau: np.ndarray
    nu: np.ndarray
    converged: bool = False
    n_sweeps: int = 0
    log_evidence: float = float("nan")
