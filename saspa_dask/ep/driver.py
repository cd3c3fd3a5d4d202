"""The EP driver: sweeps to convergence on any engine, the evidence, a coarse start.

:func:`run_ep` holds the posterior (O(M^2) numbers) and asks an engine
(:class:`saspa_dask.engines.protocol.EPEngine`: blocks and sites in this process or in
Dask tasks) for one pass at a time.  Parallel sweeps are damped and accepted only if
the new posterior is positive definite (else the step is halved); sequential sweeps
are the paper's Algorithm 1, refreshed from all sites at the end of every sweep.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np
from scipy.linalg import LinAlgError

from .acceleration import Anderson, CycleGuard
from .engine import EPEngine
from .posterior import Posterior
from .result import EPConvergenceWarning, EPResult, ep_evidence
from .sites import merge_summaries

__all__ = ["PredictionWatch", "coarse_start", "run_ep", "settled_by_one_sweep"]

_MAX_DAMPING_HALVINGS = 20
_TINY = np.finfo(float).tiny
# Coarse start (parallel EP, cold, likelihoods whose sites depend on the cavity): EP on
# every k-th block (k = min(_COARSE_STRIDE, blocks // 2), only with at least
# _COARSE_MIN_BLOCKS blocks), itself started the same way, run to _COARSE_TOL; its
# site sums scaled to all rows give the first sweep's cavities (measured effect:
# benchmarks/RESULTS.md).
_COARSE_STRIDE = 10
_COARSE_MIN_BLOCKS = 4
_COARSE_TOL = 1e-2
_GROUPED_ANDERSON_START = 1e-2


def _accept(engine, A_new, b_new, A_old, b_old):
    """Posterior of the pending sites; halves the step while P is indefinite.

    Negative site precisions (non-log-concave likelihoods) can make P indefinite.
    The statistics are linear in the damping, so the step is halved without another
    statistics pass; the engine halves its pending sites to match.
    """
    halvings = 0
    while True:
        try:
            return Posterior.from_statistics(A_new, b_new), A_new, b_new, halvings
        except LinAlgError:
            halvings += 1
            if halvings > _MAX_DAMPING_HALVINGS:
                raise FloatingPointError(
                    "EP posterior stayed indefinite after halving the damping "
                    f"{_MAX_DAMPING_HALVINGS} times"
                ) from None
            engine.halve_pending()
            A_new, b_new = 0.5 * (A_new + A_old), 0.5 * (b_new + b_old)


def _next_posterior(engine, summary, anderson, damping, A_old, b_old, parts=None):
    """Posterior of the next sweep: the Anderson combination where it applies and is
    positive definite, else the plain step (:func:`_accept`).  Returns ``(posterior,
    A, b, halvings, mixed)``; ``parts``: a grouped sweep's statistics by group."""
    if anderson is not None and summary.dots is None:
        anderson.skip(summary.change)
    elif anderson is not None:
        anderson.record(summary, damping, parts)
        weights = anderson.weights(summary.change)
        if weights is not None:
            A, b = anderson.mixed_statistics(weights)
            try:
                posterior = Posterior.from_statistics(A, b)
            except LinAlgError:
                anderson.restart()
            else:
                engine.mix_pending(weights)
                anderson.steps += 1
                return posterior, A, b, 0, True
    return (*_accept(engine, summary.A, summary.b, A_old, b_old), False)


def coarse_start(engine, likelihood, signal_variance, settings, seed=None, probe=None):
    """A starting posterior for a cold parallel run: EP on a block subset, scaled.

    EP runs on every k-th block (recursively started the same way) to a loose
    tolerance; with P_s = I + A_s and h_s from its sites on n_s of the N rows, the
    start is P = I + (N / n_s) A_s, h = (N / n_s) h_s: each sampled row stands for
    N / n_s rows.  Parallel EP's first sweep then takes its cavities from this
    posterior instead of the prior, which skips most of the cold start's transient.

    ``seed``: a posterior already standing for all rows (``Posterior.scale`` times
    the rows it was fitted on, e.g. the learning sample's); the levels then stop where
    a level has at most 10 times the seed's rows, and the coarsest starts from the seed.
    Each level is a tenth of the next, so each level's first sweep starts at the same
    distance from its fixed point whatever N is.  ``probe``: the levels also stop when
    their predictions settle (:class:`PredictionWatch`).

    Returns
    -------
    start : Posterior or None
        None when the engine has too few blocks to subsample.
    levels : list of dict
        ``rows``, ``sweeps``, ``converged`` and ``seconds`` of each coarse run, the
        coarsest first.
    """
    n_blocks = len(engine.blocks)
    if n_blocks < _COARSE_MIN_BLOCKS or (seed is not None and seed.scale <= _COARSE_STRIDE):
        return seed, []
    began = time.perf_counter()
    sub = engine.subset(min(_COARSE_STRIDE, n_blocks // 2))
    inner_seed = None if seed is None else seed.scaled(sub.n_rows / engine.n_rows)
    inner, levels = coarse_start(sub, likelihood, signal_variance, settings, inner_seed, probe)
    loose = replace(settings, tol=max(settings.tol, _COARSE_TOL), coarse_start=False)
    with warnings.catch_warnings():
        # a coarse run that stops early is still a starting point; it is reported
        warnings.simplefilter("ignore", EPConvergenceWarning)
        result = run_ep(sub, likelihood, signal_variance, loose, start=inner, probe=probe)
    start = result.posterior.scaled(engine.n_rows / sub.n_rows)
    levels.append({"rows": int(sub.n_rows), "sweeps": result.n_sweeps,
                   "converged": bool(result.converged),
                   "seconds": time.perf_counter() - began})
    return start, levels


def run_ep(engine: EPEngine, likelihood, signal_variance, settings, callback=None, start=None,
           deadline=None, probe=None, confirm=True):
    """Run EP to convergence; the engine holds the data blocks and the sites.

    Parameters
    ----------
    engine : EPEngine
        :class:`saspa_dask.engines.memory.InMemoryEngine` or
        :class:`saspa_dask.engines.dask_engine.DaskEngine`
    likelihood : likelihood object (see :mod:`saspa_dask.core.likelihoods`)
    signal_variance : float
    settings : EPSchedule
        Its ``damping`` None is no damping (resolve it by likelihood first:
        :meth:`EPSchedule.with_damping`).
    callback : callable, optional
        Called with each sweep's record (a dict).
    start : Posterior, optional
        For a cold engine: the posterior whose marginals the first sweep uses as
        cavities (all sites are zero), e.g. a fit on a row sample with its statistics
        scaled to all rows.  The sites, and so the fixed point, are EP's own from the
        first sweep on; only the starting point changes.  Without it, a cold parallel
        run with ``settings.coarse_start`` makes one with :func:`coarse_start` (not for
        the Gaussian likelihood, whose sites do not depend on the cavity); with it,
        when it stands for more than 10 times the rows it was fitted on, it seeds
        :func:`coarse_start`'s levels.  Not used for the Gaussian likelihood: its
        first sweep from the prior sets the same sites without a product.
    deadline : float, optional
        A ``time.perf_counter()`` value: after each sweep from the first on, the run
        stops unconverged (with a warning) when another sweep and the evidence pass
        that closes a stopped run, each as long as the last sweep, would end after
        it.  The posterior is then the one of the last sweep's sites.  The Gaussian's
        first sweep from the prior (cold, undamped, parallel) sets the fixed point: the
        run then ends converged, ``log_evidence`` NaN (a warning).
    probe : callable, optional
        ``probe(posterior)`` gives the latent predictive means and variances of some
        rows; with ``settings.prediction_tol`` > 0 a parallel run is also converged at
        the posterior a sweep started from when that sweep's plain step would move the
        predictions there by a mean KL divergence (over the damping squared) below it
        (:class:`PredictionWatch`).  The result is then that posterior with its sites
        and the evidence the sweep computed, as when the site change decides.
    confirm : bool, default=True
        False: a cold, undamped parallel run of cavity-free sites (the Gaussian's)
        ends converged after the first sweep, which sets them, without the sweep that
        confirms them (``log_evidence`` NaN: a pass of the caller's computes it).

    Returns
    -------
    EPResult
        ``tau`` and ``nu`` are what ``engine.sites()`` returns.
    """
    if settings.mode not in ("parallel", "sequential"):
        raise ValueError(f"ep_mode must be 'parallel' or 'sequential', got {settings.mode!r}")
    groups = _group_count(engine, likelihood, settings)
    posterior, site_stats, levels = _starting_point(engine, likelihood, signal_variance,
                                                    settings, start, probe, groups)
    watch = (PredictionWatch(probe, settings.prediction_tol)
             if probe is not None and settings.prediction_tol > 0
             and settings.mode == "parallel" else None)
    sweeps = _Sweeps(engine, likelihood, signal_variance, settings, posterior, site_stats,
                     groups, watch)
    # a first sweep from the prior sets the fixed point; a second confirms it (evidence)
    exact_at_once = (engine.is_cold and groups == 1 and settings.mode == "parallel"
                     and settled_by_one_sweep(likelihood, settings))
    if _sites_exact_in_one_sweep(likelihood) and not exact_at_once:
        deadline = None  # stopping would save no time: the closing evidence pass is a sweep
    settled_at_once = not confirm and exact_at_once
    for sweep in range(1, settings.max_sweeps + 1):
        record = sweeps.sweep(sweep)
        if settled_at_once:  # the first sweep set the sites; the caller's evidence
            sweeps.converged, sweeps.final = True, float("nan")
        if callback is not None:
            callback(record)
        if sweeps.converged:
            break
        # another sweep and, should it not converge, the evidence pass that closes a
        # stopped run (each about as long as this sweep) must end by the deadline
        if deadline is not None and time.perf_counter() + 2 * record["seconds"] > deadline:
            sweeps.stop_for_time(sweep, exact_at_once)
            break
    return sweeps.result(levels)


class PredictionWatch:
    """How far one EP update moves the predictions at some probe rows.

    ``residual(summary, posterior, damping)``: the mean over the probe rows of
    KL(step || posterior) between the latent predictive Gaussians of the posterior
    a parallel sweep started from and of the plain (damped, not Anderson-mixed) step
    the sweep proposes, over ``damping**2`` (a damped step moves the means d times less,
    and the divergence goes as the square of the move): EP's fixed-point residual,
    measured where it matters for predictions.  Infinite when the step's posterior is
    not positive definite.
    """

    def __init__(self, probe, tol):
        self.probe, self.tol = probe, float(tol)

    def residual(self, summary, posterior, damping):
        try:
            step = Posterior.from_statistics(summary.A, summary.b)
        except LinAlgError:
            return float("inf")
        mean, var = self.probe(step)
        mean0, var0 = self.probe(posterior)
        var, var0 = np.maximum(var, _TINY), np.maximum(var0, _TINY)
        ratio = var / var0
        divergence = 0.5 * (ratio - 1.0 - np.log(ratio) + (mean - mean0) ** 2 / var0)
        return float(np.mean(divergence)) / float(damping) ** 2


def _sites_exact_in_one_sweep(likelihood):
    """Whether the likelihood's sites do not depend on the cavity (the Gaussian's)."""
    return bool(getattr(likelihood, "exact_sites", False))


def settled_by_one_sweep(likelihood, settings):
    """Whether one undamped sweep from the prior is EP's fixed point: cavity-free sites
    (the Gaussian's) that no damping mixes with older ones.  Such a run needs no warm
    start; its confirming sweep only computes the evidence (``run_ep``'s ``confirm``)."""
    return _sites_exact_in_one_sweep(likelihood) and settings.step == 1.0


def _group_count(engine, likelihood, settings):
    """The groups a parallel sweep updates the blocks in (``EPSchedule.groups`` where
    there are enough blocks; sites that do not depend on the cavity, the Gaussian's,
    gain nothing from groups)."""
    if (settings.mode != "parallel" or len(engine.blocks) < settings.groups
            or _sites_exact_in_one_sweep(likelihood)):
        return 1
    return settings.groups


def _starting_point(engine, likelihood, signal_variance, settings, start, probe, groups):
    """(posterior, statistics of the current sites per group, coarse levels) the first
    sweep starts from; one statistics pass over a warm engine's sites."""
    M = engine.n_bases
    if engine.is_cold:
        site_stats = [(np.zeros((M, M)), np.zeros(M)) for _ in range(groups)]
    elif groups == 1:
        site_stats = [engine.statistics()]
    else:
        site_stats = [engine.statistics((g, groups)) for g in range(groups)]
    posterior = (Posterior.prior(M) if engine.is_cold else
                 Posterior.from_statistics(sum(a for a, _ in site_stats),
                                           sum(h for _, h in site_stats)))
    levels = []
    if ((start is None or start.scale > _COARSE_STRIDE) and settings.coarse_start
            and settings.mode == "parallel" and engine.is_cold
            and not _sites_exact_in_one_sweep(likelihood)):
        start, levels = coarse_start(engine, likelihood, signal_variance, settings, start,
                                     probe)
    if start is not None and engine.is_cold and not _sites_exact_in_one_sweep(likelihood):
        posterior = start  # cavity-free sites: the prior's marginals need no product
    return posterior, site_stats, levels


def _group_shares(engine, posterior, site_stats):
    """Per group of blocks, what it adds to the starting posterior's statistics: a
    warm engine's sites' own; a cold engine's groups share the starting posterior's
    statistics by their rows (each row stands for its share of all rows)."""
    if not engine.is_cold:
        return list(site_stats)
    groups = len(site_stats)
    A = posterior.chol @ posterior.chol.T - np.eye(engine.n_bases)
    fractions = [engine.rows_in((g, groups)) / engine.n_rows for g in range(groups)]
    return [(f * A, f * posterior.h) for f in fractions]


class _Sweeps:
    """The state of one EP run between sweeps: posterior, its site sums, damping (and
    the cycle rule), Anderson's driver side, the per-sweep history."""

    def __init__(self, engine, likelihood, signal_variance, settings, posterior, site_stats,
                 groups, watch=None):
        self.engine, self.likelihood, self.s2 = engine, likelihood, signal_variance
        self.watch, self.converged_on = watch, "sites"
        self.settings = settings
        self.posterior = posterior
        # the statistics of the engine's current sites
        self.A, self.b = sum(a for a, _ in site_stats), sum(h for _, h in site_stats)
        self.guard = CycleGuard(settings.step)
        self.damping = self.guard.damping
        self.groups = groups
        # over grouped sweeps Anderson waits for the linear tail (a site change below
        # 1e-2): mixing earlier cost sweeps (benchmarks/RESULTS.md)
        self.anderson = (Anderson(settings.anderson_memory,
                                  None if self.groups == 1 else _GROUPED_ANDERSON_START)
                         if settings.mode == "parallel" and settings.anderson_memory > 0
                         else None)
        if self.groups > 1:
            self.shares = _group_shares(engine, posterior, site_stats)
            self.site_shares = site_stats
        self.history, self.converged, self.final = [], False, None
        self.stopped_by_time = False

    def stop_for_time(self, number, exact):
        """End the run at a deadline after sweep ``number``: converged with the evidence
        left out when its sites are the fixed point (``exact``), else unconverged."""
        if not exact:
            self.stopped_by_time = number < self.settings.max_sweeps
            return
        self.converged, self.final = True, float("nan")
        warnings.warn("the time budget left no room for the sweep that computes EP's "
                      "evidence: the sites are its fixed point after one sweep, the log "
                      "evidence is NaN; raise max_fit_time for it", EPConvergenceWarning,
                      stacklevel=3)

    def sweep(self, number):
        """One sweep; returns its record (also appended to the history)."""
        start = time.perf_counter()
        residual = None  # the prediction rule's measure (parallel runs with a probe)
        if self.settings.mode == "parallel":
            summary, halvings, mixed, evidence, residual = self._parallel()
        else:
            summary, halvings, mixed, evidence = self._sequential()
        record = {"sweep": number, "change": summary.change, "n_invalid": summary.n_invalid,
                  "n_skipped": summary.n_skipped, "damping_halvings": halvings,
                  "damping": self.damping, "anderson": mixed,
                  "seconds": time.perf_counter() - start}
        if evidence is not None:
            # the evidence of the posterior this sweep started from (free in this mode)
            record["log_evidence_start"] = evidence
        if residual is not None:
            record["prediction_change"] = residual
        self.history.append(record)
        if not self.converged and not mixed:
            # Anderson's own steps need not shrink the change monotonically; its
            # history restarts when the change grows, so only plain steps feed the
            # cycle rule
            self.damping = self.guard.update(summary.change)
        return record

    def _parallel(self):
        if self.groups > 1:
            return self._grouped()
        slot = self._ring_slot()
        summary = self.engine.parallel_pass(self.posterior, self.likelihood, self.damping,
                                            self.s2, ring_slot=slot)
        # This pass evaluated the posterior left by the previous sweep.
        evidence = ep_evidence(self.posterior, summary.evidence_terms)
        if self.history:
            self.history[-1]["log_evidence"] = evidence
        residual = self._check_convergence(summary)
        if self.converged:
            self.final = evidence
            return summary, 0, False, evidence, residual
        self.posterior, self.A, self.b, halvings, mixed = _next_posterior(
            self.engine, summary, self.anderson, self.damping, self.A, self.b)
        self.engine.commit()
        return summary, halvings, mixed, evidence, residual

    def _ring_slot(self):
        """The Anderson ring slot the next pass writes (None: no ring write)."""
        if self.anderson is None or not self.anderson.recording:
            return None
        return self.anderson.slot

    def _check_convergence(self, summary):
        """Sets ``converged`` (and what decided it); returns the prediction rule's
        residual (None without a probe)."""
        self.converged = summary.change < self.settings.tol
        residual = None
        if self.watch is not None and not self.converged:
            residual = self.watch.residual(summary, self.posterior, self.damping)
            # from the second sweep on: the first may start from a given posterior
            # (a sample's, scaled) that is not the posterior of the engine's sites
            if residual < self.watch.tol and self.history:
                # the posterior this sweep started from is EP's fixed point to the
                # tolerance, where predictions are concerned: it is the result
                self.converged, self.converged_on = True, "predictions"
        return residual

    def _grouped(self):
        """A parallel sweep in groups of blocks (block Gauss-Seidel): each group's
        sites from the posterior that holds the groups updated before it.  Its
        evidence terms belong to several posteriors: the run's evidence comes from an
        evaluation pass at the end."""
        groups, A, b = self.groups, sum(a for a, _ in self.shares), sum(h for _, h in self.shares)
        current, parts = self.posterior, []
        slot = self._ring_slot()
        for g in range(groups):
            part = self.engine.parallel_pass(current, self.likelihood, self.damping, self.s2,
                                             ring_slot=slot, part=(g, groups))
            parts.append(part)
            A, b = A + part.A - self.shares[g][0], b + part.b - self.shares[g][1]
            if g < groups - 1:
                try:
                    current = Posterior.from_statistics(A, b)
                except LinAlgError:
                    pass  # the rest of this sweep from the last positive definite one
        summary = merge_summaries(parts)
        residual = self._check_convergence(summary)
        if self.converged:
            return summary, 0, False, None, residual
        pending = [(part.A, part.b) for part in parts]
        self.posterior, self.A, self.b, halvings, mixed = _next_posterior(
            self.engine, summary, self.anderson, self.damping, self.A, self.b, pending)
        if mixed:
            pending = self.anderson.mixed_parts(self.anderson.last_weights)
        for _ in range(halvings):  # as the engine halved the pending sites
            pending = [(0.5 * (a + a0), 0.5 * (h + h0))
                       for (a, h), (a0, h0) in zip(pending, self.site_shares)]
        self.shares = self.site_shares = pending
        self.engine.commit()
        return summary, halvings, mixed, None, residual

    def _sequential(self):
        summary = self.engine.sequential_pass(self.posterior, self.likelihood, self.damping,
                                              self.s2)
        # Refresh from all sites: repeated rank-one updates drift (GPML; docs/design.md, section 7).
        self.posterior, self.A, self.b, halvings = _accept(self.engine, summary.A, summary.b,
                                                           self.A, self.b)
        self.engine.commit()
        self.converged = summary.change < self.settings.tol
        return summary, halvings, False, None

    def result(self, levels):
        """The run's :class:`EPResult` (warns if it did not converge)."""
        history, anderson = self.history, self.anderson
        if self.final is None:
            self.final = ep_evidence(self.posterior, self.engine.evaluate(
                self.posterior, self.likelihood).evidence_terms)
        history[-1]["log_evidence"] = self.final
        if self.stopped_by_time:
            warnings.warn(
                f"EP stopped by the time budget after {len(history)} sweep(s), before it "
                f"converged (last undamped site change {history[-1]['change']:.3g} >= tol "
                f"{self.settings.tol:g}); the model is the posterior of the last sweep's "
                "sites; raise max_fit_time for a converged fit",
                EPConvergenceWarning, stacklevel=3)
        elif not self.converged:
            warnings.warn(
                f"EP did not converge in {self.settings.max_sweeps} sweeps (last undamped "
                f"site change {history[-1]['change']:.3g} >= tol {self.settings.tol:g}); "
                f"raise max_sweeps or lower damping (damping ended at {self.damping:g} after "
                f"{self.guard.reductions} cycle reduction(s))",
                EPConvergenceWarning, stacklevel=3)
        tau, nu = self.engine.sites()
        return EPResult(
            posterior=self.posterior, tau=tau, nu=nu, n_sweeps=len(history),
            converged=self.converged, log_evidence=self.final,
            n_invalid_cavities=sum(r["n_invalid"] for r in history),
            n_skipped_updates=sum(r["n_skipped"] for r in history),
            n_damping_halvings=sum(r["damping_halvings"] for r in history),
            history=history, n_damping_reductions=self.guard.reductions,
            damping=self.damping, coarse_start=levels,
            n_anderson_steps=0 if anderson is None else anderson.steps,
            n_anderson_restarts=0 if anderson is None else anderson.restarts,
            stopped_by_time=self.stopped_by_time, converged_on=self.converged_on)
