"""Fitting: whitening, EP for one or more targets, evidence maximisation.

A :class:`Trainer` owns the data (in memory or on Dask), the bases and the EP settings.
For given hyperparameters it builds the whitened blocks once and runs EP for every
*problem* on them: one for regression and binary classification, one per class for
one-vs-rest, all sharing the bases and a chunk's Kt and whitened Phi.  :func:`fit`
runs it at fixed hyperparameters or maximises the summed EP evidence over them
(:mod:`saspa_dask.fitting.optimizer`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from ..core.blur_families import blur_family
from ..core.bases import Basis, is_diagonal
from ..core.kernels import basis_covariance
from ..core.row_features import PreparedRows
from ..engines.chunks import is_lazy
from ..engines.dask_engine import DaskEngine
from ..engines.kept_sites import kept_copy
from ..engines.memory import InMemoryEngine
from ..ep.approximation import FITC
from ..ep import EPConvergenceWarning, ep_evidence, run_ep, settled_by_one_sweep
from ..ep.posterior import Posterior, predict_latent
from ..ep.whitening import make_block, relabel_block, whiten
from .gradient import assemble_gradient, gradient_chunk, kernel_terms
from . import policy
from .basis_start import restart_points
from .hyperparameters import Hyperparameters
from .optimizer import StopRule, optimize

__all__ = ["Trainer", "FitOutcome", "fit"]


@dataclass
class FitOutcome:
    """What :func:`fit` produced at the chosen hyperparameters."""

    hyper: Hyperparameters
    basis: Basis
    L: np.ndarray
    jitter: float
    results: list
    log_evidence: float
    trace: list | None = None
    info: dict | None = None


class Trainer:
    """EP on shared whitened blocks for one or more problems.

    Parameters
    ----------
    X : ndarray or dask array of shape (N, d)
    y : ndarray or dask array of shape (N,)
        Encoded targets: +-1 labels, centred regression targets, or class codes when
        ``labels`` is given.
    labels : sequence of float or None
        One-vs-rest: one problem per label, "y == label" against the rest.
    means, base_covs : ndarray
        Basis means (M, d) and blur covariances before the blur scale (M, d, d).
    settings : saspa_dask.ep.EPSchedule
    jitter : float
        Starting jitter relative to s2.
    block_rows : int
        Rows per in-memory block.
    cache : {"memory", "none"}, work_dir : Path or None
        Dask inputs only (see :class:`saspa_dask.engines.dask_engine.DaskEngine`).
    callback : callable, optional
        Called with every EP sweep record (plus ``problem`` and ``n_problems``).
    on_build : callable, optional
        Called with the seconds each build of in-memory blocks took.
    approximation : Approximation, default=FITC
        Where the rows' residual variance is kept (:mod:`saspa_dask.ep.approximation`).
    frequencies, phases : ndarray, optional
        Frequency inducing features (fixed ones; learnt ones are in the
        hyperparameters' ``bases``).
    learning : bool, default=True
        For learning's many evaluations: in-memory rows keep their features (up to M).
    """

    def __init__(self, X, y, labels, means, base_covs, settings, *, jitter, block_rows,
                 cache="memory", work_dir=None, callback=None, on_build=None,
                 approximation=FITC, frequencies=None, phases=None, learning=True):
        self.X, self.y, self.labels = X, y, labels
        self.means, self.base_covs = means, base_covs
        self.frequencies, self.phases = frequencies, phases
        self.settings, self.jitter = settings, jitter
        self.block_rows, self.cache, self.work_dir = block_rows, cache, work_dir
        self.callback, self.on_build = callback, on_build
        self.approximation = approximation
        self.is_lazy = is_lazy(X)
        self.full_blur = not is_diagonal(base_covs)
        self.n_problems = 1 if labels is None else len(labels)
        # in-memory rows prepared once for every evaluation's products
        keep = means.shape[0] if learning else 0
        self.inputs = None if self.is_lazy else [PreparedRows.of(
            X[s:s + block_rows], keep) for s in range(0, X.shape[0], block_rows)]
        self._engines = None

    # -- building ------------------------------------------------------------------

    def whitening(self, hyper):
        """(basis, L, jitter) at ``hyper`` (its learnt bases, if it has them)."""
        basis = (hyper.bases.basis(hyper.blur_scale) if hyper.bases is not None
                 else Basis.scaled(self.means, self.base_covs, hyper.blur_scale,
                                   self.frequencies, self.phases))
        Kh = basis_covariance(basis.means, basis.blur, hyper.lengthscale,
                              hyper.signal_variance, basis.frequencies, basis.phases,
                              hyper.kernel_spec)
        L, jitter = whiten(Kh, hyper.signal_variance, self.jitter)
        return basis, L, jitter

    def build(self, hyper, sites=None, for_gradient=False):
        """Whitened blocks (once) and one engine per problem, warm-started by ``sites``
        (a list of (tau, nu) arrays of length N per problem, or None).  ``for_gradient``:
        in-memory blocks keep their Kt for :meth:`gradient` (twice their memory)."""
        self._engines = None  # release the previous blocks first
        self.basis, self.L, self.jitter_used = self.whitening(hyper)
        self.hyper = hyper
        sites = sites or [None] * self.n_problems
        labels = self.labels or [None]
        if not self.is_lazy:
            began = time.perf_counter()
            shared = list(self._memory_blocks(hyper, for_gradient))
            if self.on_build is not None:
                self.on_build(time.perf_counter() - began)
            engines = []
            for label, warm in zip(labels, sites):
                blocks = shared if label is None else [relabel_block(b, label) for b in shared]
                engines.append(InMemoryEngine(blocks, sites=_split(warm, blocks),
                                              anderson_memory=self.settings.anderson_memory,
                                              inputs=self.inputs))
        else:
            engines, blocks = [], None
            for k, (label, warm) in enumerate(zip(labels, sites)):
                engine = DaskEngine(
                    self.X, self.y, self.basis, hyper.lengthscale, hyper.signal_variance,
                    self.L, self.work_dir / f"problem-{k}", cache=self.cache, sites=warm,
                    blocks=blocks, label=label, approximation=self.approximation,
                    anderson_memory=self.settings.anderson_memory,
                    groups=self.settings.groups, kernel=hyper.kernel_spec)
                blocks = engine.blocks
                engines.append(engine)
        self._engines = engines

    def _memory_blocks(self, hyper, keep_kt):
        for rows, start in zip(self.inputs, range(0, self.X.shape[0], self.block_rows)):
            yield make_block(rows, self.y[start:start + self.block_rows], self.basis.means,
                             self.basis.blur, hyper.lengthscale, hyper.signal_variance, self.L,
                             self.approximation, self.basis.frequencies, self.basis.phases,
                             hyper.kernel_spec, keep_kt=keep_kt)

    # -- EP and the gradient ---------------------------------------------------------

    def run(self, likelihood, starts=None, deadline=None, probe_rows=None, confirm=True):
        """EP for every problem; returns the EPResults, their sites NumPy arrays (Dask
        arrays on a kept copy for Dask rows: :mod:`saspa_dask.engines.kept_sites`).
        ``starts``: per problem, the posterior a cold run's first sweep takes its
        cavities from; ``deadline``: when the runs stop unconverged; ``probe_rows``:
        input rows on whose predictions the runs may also converge; ``confirm``: False
        ends a cold run of cavity-free sites after its first sweep (see
        :func:`saspa_dask.ep.driver.run_ep`)."""
        results = []
        starts = starts or [None] * len(self._engines)
        probe = None if probe_rows is None else self.predictions_at(probe_rows)
        for k, (engine, start) in enumerate(zip(self._engines, starts)):
            callback = None if self.callback is None else partial(self._tell, k)
            result = run_ep(engine, likelihood, self.hyper.signal_variance, self.settings,
                            callback=callback, start=start, deadline=deadline, probe=probe,
                            confirm=confirm)
            if self.is_lazy:  # a copy the workers write: the next run overwrites these
                result.tau, result.nu = kept_copy([result.tau, result.nu],
                                                  Path(self.work_dir).parent)
            else:
                result.tau, result.nu = np.concatenate(result.tau), np.concatenate(result.nu)
            results.append(result)
        return results

    def predictions_at(self, X):
        """``predictions(posterior)``: the latent predictive means and variances of the
        rows ``X`` (in memory) under a posterior of the built bases and kernel."""
        basis, hyper = self.basis, self.hyper
        block = make_block(X, np.zeros(X.shape[0]), basis.means, basis.blur,
                           hyper.lengthscale, hyper.signal_variance, self.L,
                           self.approximation, basis.frequencies, basis.phases, hyper.kernel_spec)
        return partial(predict_latent, block.phi, signal_variance=hyper.signal_variance,
                       approximation=self.approximation)

    def _tell(self, problem, record):
        self.callback({**record, "problem": problem, "n_problems": self.n_problems})

    def evidence(self, likelihood):
        """The summed log Z_EP of the current sites, without an EP sweep (the evidence
        at fixed sites, whose derivative :meth:`gradient` is)."""
        total = 0.0
        for engine in self._engines:
            posterior = Posterior.from_statistics(*engine.statistics())
            total += ep_evidence(posterior, engine.evaluate(posterior, likelihood).evidence_terms)
        return total

    def gradient(self, results, likelihood):
        """d (sum of the problems' log Z_EP) / d log(theta) at the current sites, for
        the values ``self.hyper`` learns.  A result without its evidence (NaN: a run
        not confirmed, :meth:`run`) gets it from the same pass over the rows."""
        total = None
        for engine, result in zip(self._engines, results):
            summary = engine.reduce_chunks(gradient_chunk, result.posterior, likelihood, self.L,
                                           self.basis.means, self.hyper.lengthscale,
                                           self.full_moments(self.hyper), self._fourier(),
                                           kernel_terms(self.basis, self.hyper))
            if np.isnan(result.log_evidence) and summary.n_invalid == 0:
                result.log_evidence = result.history[-1]["log_evidence"] = ep_evidence(
                    result.posterior, summary.evidence_terms)
            total = summary if total is None else total.merge(summary)
        return assemble_gradient(total, self.basis, self.hyper, self.L)

    def _fourier(self):
        """What the gradient chunks need of frequency features, or None."""
        basis = self.basis
        if not basis.is_fourier:
            return None
        return (basis.frequencies, basis.phases, basis.window_variance,
                self.hyper.signal_variance)

    def full_moments(self, hyper):
        """Whether the gradient at ``hyper`` needs off-diagonal second moments: full
        blur covariances, in use or being learnt."""
        bases = hyper.bases
        learning_full = bases is not None and bases.blur and blur_family(bases.family).dense
        return self.full_blur or learning_full


def _split(sites, blocks):
    if sites is None:
        return None
    # rows in memory: their sites too (a Dask fit's are lazy, engines.kept_sites)
    sites = [np.asarray(s, dtype=np.float64) for s in sites]
    edges = np.cumsum([0] + [b.y.shape[0] for b in blocks])
    return ([sites[0][a:b] for a, b in zip(edges[:-1], edges[1:])],
            [sites[1][a:b] for a, b in zip(edges[:-1], edges[1:])])


def fit(trainer, likelihood, start, *, optimize_hyperparameters, rule=None,
        init_sites=None, callback=None, n_restarts=0, positions=None, start_posteriors=None,
        ep_deadline=None, watch=None, probe_rows=None, evidence=True):
    """Fit at ``start`` or maximise the summed EP evidence from it (and, with
    ``n_restarts``, from the further starts of
    :func:`~saspa_dask.fitting.basis_start.restart_points`, keeping the
    highest evidence).

    Parameters
    ----------
    trainer : Trainer
    likelihood : likelihood object; its learnable parameters are in ``start``
    start : Hyperparameters
        The starting point; it says which values are learnt.
    optimize_hyperparameters : bool
    rule : StopRule, optional
        When each maximisation stops (its ``scale_rows`` is set from the trainer's
        rows and problems); the deadline is shared by all starts.
    init_sites : list of (tau, nu) per problem, optional
    callback : callable, optional
        Called with each accepted optimiser iteration's record.
    watch : callable, optional
        ``watch(make_outcome, iteration=k)`` after each accepted iteration; ``make_outcome()``
        is the best outcome so far (:class:`~saspa_dask.fitting.held_out.HeldOutWatch`).
    n_restarts : int
        Further maximisations from shorter starting lengthscales (and other basis
        positions: :func:`~saspa_dask.fitting.basis_start.restart_points`).
    positions : callable, optional
        ``positions(k, X)``: learnt bases for restart k on the learning rows X.
    start_posteriors : list of Posterior per problem, optional
        At fixed hyperparameters without ``init_sites``: where EP's first sweep takes its
        cavities from (e.g. a row sample's posterior, scaled) instead of a coarse start.
    ep_deadline : float, optional
        At fixed hyperparameters, and for the polish of the learnt values' EP: the
        ``time.perf_counter()`` value by which EP stops (:func:`~saspa_dask.ep.run_ep`).
    probe_rows : ndarray, optional
        At fixed hyperparameters: input rows on whose predictions EP may converge
        (``EPSchedule.prediction_tol``; e.g. some of a learning sample's rows).
    evidence : bool, default=True
        At fixed hyperparameters: False spares cavity-free sites' confirming sweep
        (``log_evidence`` then NaN).

    Returns
    -------
    FitOutcome
    """
    if not optimize_hyperparameters:
        return _fit_at(trainer, likelihood, start, init_sites, start_posteriors, ep_deadline,
                       probe_rows, confirm=evidence)
    rule = replace(rule or StopRule(), scale_rows=trainer.X.shape[0] * trainer.n_problems)
    settings = trainer.settings
    trainer.settings = replace(settings, tol=max(settings.tol, policy.POLICY.learning_ep_tol))
    try:
        chosen = _best_start(trainer, likelihood, start, rule, init_sites, callback,
                             n_restarts, None if positions is None
                             else (lambda k: positions(k, trainer.X)), watch)
    finally:
        trainer.settings = settings
    if (settings.tol < policy.POLICY.learning_ep_tol
            and not settled_by_one_sweep(likelihood, settings)):
        # EP at the chosen values polished to the asked tolerance, from its sites
        polished = _fit_at(trainer, likelihood, chosen.hyper,
                           [(r.tau, r.nu) for r in chosen.results], deadline=ep_deadline)
        polished.trace, polished.info = chosen.trace, chosen.info
        chosen = polished
    if not all(r.converged or r.stopped_by_time for r in chosen.results):
        # a run the budget stopped has said so itself (ep.driver); max_sweeps is not why
        warnings.warn("EP did not converge at the chosen hyperparameters "
                      f"(max_sweeps={trainer.settings.max_sweeps}); raise max_sweeps or "
                      "lower damping", EPConvergenceWarning, stacklevel=3)
    return chosen


def _best_start(trainer, likelihood, start, rule, init_sites, callback, n_restarts,
                positions=None, watch=None):
    if n_restarts == 0:
        return _maximise(trainer, likelihood, start, rule, init_sites, callback, watch)
    points, outcomes = restart_points(start, n_restarts, positions), []
    for k, point in enumerate(points):
        step = None if callback is None else (lambda rec, k=k: callback({**rec, "start": k}))
        if k > 0 and rule.time_is_up():
            break  # the budget is spent: the starts run so far compete
        outcome = _maximise(trainer, likelihood, point, rule, init_sites, step, watch)
        outcomes.append(outcome)
    best = max(range(len(outcomes)), key=lambda k: outcomes[k].log_evidence)
    chosen = outcomes[best]
    if best != len(outcomes) - 1:
        # the trainer (and on Dask its site store) holds the last start's state: run EP
        # again at the chosen point so that everything returned belongs to it
        final = _fit_at(trainer, likelihood, chosen.hyper, init_sites)
        final.trace, final.info = chosen.trace, chosen.info
        chosen = final
    chosen.trace = [{**rec, "start": k} for k, o in enumerate(outcomes) for rec in o.trace]
    chosen.info = {**chosen.info, "chosen_start": best,
                   "starts": [{"start": k, "log_evidence": o.log_evidence,
                               "n_evaluations": o.info["n_evaluations"],
                               "lengthscale_start": [float(v) for v in p.lengthscale],
                               "bases_moved": p.bases is not start.bases}
                              for k, (o, p) in enumerate(zip(outcomes, points))]}
    return chosen


def _fit_at(trainer, likelihood, hyper, init_sites, starts=None, deadline=None,
            probe_rows=None, confirm=True):
    trainer.build(hyper, init_sites)
    results = trainer.run(hyper.bind(likelihood), starts, deadline, probe_rows, confirm)
    return FitOutcome(hyper, trainer.basis, trainer.L, trainer.jitter_used, results,
                      float(sum(r.log_evidence for r in results)))


def _maximise(trainer, likelihood, start, rule, init_sites, callback, watch=None):
    best = {"sites": init_sites, "value": -np.inf, "outcome": None}

    def evaluate(hyper):
        lik = hyper.bind(likelihood)
        t0 = time.perf_counter()
        # one sweep from the prior sets such sites, without a posterior product (a warm
        # start took a statistics pass over the last sites and two sweeps)
        cold = settled_by_one_sweep(lik, trainer.settings)
        trainer.build(hyper, None if cold else best["sites"], for_gradient=True)
        with warnings.catch_warnings():
            # trial points of the line search may not converge; they are counted in
            # the outcome, and only the chosen point's convergence is reported
            warnings.simplefilter("ignore", EPConvergenceWarning)
            # such sites are set by one sweep from the prior: the gradient's pass over
            # the rows gives the evidence a confirming sweep would
            results = trainer.run(lik, confirm=not cold)
        grad = trainer.gradient(results, lik) if cold else None
        value = float(sum(r.log_evidence for r in results))
        if not np.isfinite(value):
            return value, None, None
        if grad is None:
            grad = trainer.gradient(results, lik)
        outcome = FitOutcome(hyper, trainer.basis, trainer.L, trainer.jitter_used, results, value)
        outcome.info = {"sweeps": sum(r.n_sweeps for r in results),
                        "converged": all(r.converged for r in results),
                        "seconds": time.perf_counter() - t0}
        if value > best["value"]:
            best.update(value=value, sites=[(r.tau, r.nu) for r in results], outcome=outcome)
        return value, grad, outcome

    def step(record):  # the optimiser's best point is the best evaluation's outcome
        if callback is not None:
            callback(record)
        if watch is not None:
            watch(lambda: best["outcome"], iteration=record["iteration"])

    hyper, outcome, trace, info = optimize(evaluate, start, rule, callback=step)
    outcome.trace, outcome.info = trace, {**info, "best_evaluation": outcome.info}
    return outcome
