"""One run of a :class:`~saspa_dask.fitting.plan.FitPlan`: its phases in order.

:class:`FitRun` holds what a run learns on the way (its clock, phase lines, budget,
stop rule and the report's ``blur_``, ``damping_``, ``timings_``, ``kmeans_info_``,
``cost_estimate_``), makes the starting bases and hyperparameters, and runs the plan's
phases (:mod:`saspa_dask.fitting.phases`) over one fit state.
"""

from __future__ import annotations

import math
import time
import warnings
from functools import partial

import numpy as np

from ..core.blur_families import blur_family
from ..core.kernel_profiles import kernel_named
from ..engines.cache_policy import choose_cache
from ..engines.chunks import as_dask, is_lazy
from ..ep.approximation import approximation_named
from ..parameters import bases_for_rows
from .basis_start import learnt_start, restart_positions, start_bases
from .budget import FitBudget
from .phases import FitState
from . import policy
from .costs import choose_blur, evaluation_cost
from .hyperparameters import Hyperparameters
from .input_groups import additive_lengthscale, resolve_lengthscale, tied_lengthscale
from .optimizer import StopRule
from .progress import phase_printer, print_hyper, print_sweep
from .stages import learning_stages
from .trainer import Trainer
from .trainer import fit as fit_hyperparameters

__all__ = ["FitRun"]



class FitRun:
    """One run of a plan: its data, its phase lines, its clock and what it learns on
    the way (the report's ``blur_``, ``damping_``, ``timings_``, ``kmeans_info_``,
    ``cost_estimate_``)."""

    def __init__(self, plan, X, labels, progress):
        self.plan, self.X, self.labels, self.progress = plan, X, labels, progress
        self.lazy = is_lazy(X)
        self.say = phase_printer(plan.verbose, X.shape[0])
        self.began = time.perf_counter()
        # the budget counts from the fit's start; learning leaves room for EP on all rows
        self.budget = (None if plan.max_fit_time is None else
                       FitBudget(plan.max_fit_time, self.began, X.shape[0],
                                 1 if labels is None else len(labels)))
        self.rule = StopRule(tol=float(plan.hyper_tol), max_iter=int(plan.max_hyper_iter),
                             deadline=None if self.budget is None
                             else self.budget.learning_deadline,
                             checkpoint=plan.race_checkpoint)
        self.report = {"blur_": choose_blur(plan.blur, X.shape[1]),
                       "damping_": float(plan.ep.step)}
        self.watch = None  # a HeldOutWatch when held-out rows are given
        # Dask inputs: whether the chunks' blocks stay in worker memory (fit() decides)
        self.cache = "memory"

    # -- the starting point --------------------------------------------------------

    def start(self, likelihood, signal_variance, column_std, centre, groups=None,
              terms=None):
        """The starting bases and hyperparameters (``groups``: inputs sharing a
        lengthscale, :func:`~saspa_dask.fitting.hyperparameters.feature_groups_of`;
        ``terms``: an additive kernel's, :func:`~saspa_dask.fitting.hyperparameters.
        additive_terms_of`)."""
        plan, X, blur = self.plan, self.X, self.report["blur_"]
        if plan.lengthscale is not None:  # one value per input: refused before K-means
            resolve_lengthscale(plan.lengthscale, X.shape[1], column_std)
        n_bases = bases_for_rows(plan.n_bases, X.shape[0])
        self.say(f"{plan.owner}: {X.shape[0]} rows x {X.shape[1]} inputs"
                 + (f", one-vs-rest over {len(self.labels)} classes" if self.labels else "")
                 + "; " + ("bases given" if plan.bases is not None else
                           f"K-means for {n_bases} bases"
                           + (" (auto)" if plan.n_bases == "auto" else "")))
        basis, kmeans_info = start_bases(
            X, n_bases=n_bases, blur=blur, bases=plan.bases,
            lengthscale=plan.lengthscale, column_std=column_std,
            random_state=plan.random_state, lazy=self.lazy,
            lloyd_rows=None if self.budget is None
            else self.budget.lloyd_rows(n_bases, X.shape[1]))
        if kmeans_info is not None:
            self.report["kmeans_info_"] = kmeans_info
        hyper = self._start_hyperparameters(likelihood, signal_variance, column_std, basis,
                                            centre, groups, terms)
        self.report["timings_"] = {"bases": time.perf_counter() - self.began}
        self.say(f"bases ready ({self.report['timings_']['bases']:.1f}s"
                 + (f", K-means converged {kmeans_info.get('converged')} on "
                    f"{kmeans_info['lloyd_rows']} rows" if kmeans_info else "") + ")")
        return basis, hyper

    def _start_hyperparameters(self, likelihood, signal_variance, column_std, basis,
                               centre, groups=None, terms=None):
        """The optimiser's starting point; it says what is learnt.  With ``centre``,
        the box the values are learnt in is centred where the data alone would start
        them."""
        plan, d = self.plan, self.X.shape[1]
        learn = plan.learnt_bases  # the plan's combinations were checked (FitPlan.validate)
        lengthscale = resolve_lengthscale(plan.lengthscale, d, column_std)
        if plan.lengthscale is None:  # each term's inputs as one kernel's would start
            lengthscale = additive_lengthscale(lengthscale, terms)
        lengthscale = tied_lengthscale(lengthscale, groups)
        learn_offset = bool(plan.learn_offset and plan.optimize_hyperparameters)
        middle = None
        if centre is not None:
            middle = Hyperparameters(tied_lengthscale(additive_lengthscale(
                resolve_lengthscale(None, d, column_std), terms), groups),
                                     float(centre[0]), centre[1].hyperparameters())
        learnt = likelihood.hyperparameters() if plan.optimize_hyperparameters else {}
        if plan.min_noise_variance is not None and learnt:  # start on or above the floor
            learnt["noise_variance"] = max(learnt["noise_variance"], plan.min_noise_variance)
        return Hyperparameters(
            lengthscale, float(signal_variance), learnt,
            learn_blur_scale=(bool(plan.learn_blur_scale)
                              and blur_family(self.report["blur_"]).blurred),
            bases=learnt_start(basis, learn, self.report["blur_"], lengthscale),
            mean_offset=0.0 if learn_offset else None, noise_floor=plan.min_noise_variance,
            offset_scale=math.sqrt(float(centre[0] if centre is not None
                                         else signal_variance)),
            centre=middle, kernel=plan.kernel, groups=groups, additive=terms,
            term_weights=start_term_weights(plan.term_weights, terms))

    # -- learning and EP -----------------------------------------------------------

    def fit(self, targets, likelihood, basis, hyper, sites):
        """The plan's phases (:meth:`FitPlan.phases`: learning, then EP on all rows or
        the sample's model) over one :class:`~saspa_dask.fitting.phases.FitState`;
        the state after them (its ``outcome`` with the stages' report merged in, the
        rows learnt on in ``learnt_rows``, None: all)."""
        plan = self.plan
        if self.lazy:
            self.cache, why = choose_cache(plan.execution.cache, self.X.shape[0],
                                           basis.means.shape[0], max(as_dask(self.X).chunks[0]))
            if why:
                self.say(f"cache: {why}")
        fit = self._fitter(likelihood, restart_positions(
            hyper.bases, plan.n_restarts_optimizer, self.report["blur_"], plan.random_state))
        state = FitState(targets, likelihood, basis, hyper, sites,
                         self._trainer_factory(basis), fit)
        for phase in plan.phases():
            phase.run(self, state)
        return state

    def _fitter(self, likelihood, positions):
        """``fit(trainer, hyper, sites, optimize, restarts)``: the trainer's fit with
        this run's stop rule and restarts."""
        plan, loud = self.plan, self.say.loud

        def fit(trainer, hyper, sites, optimize, restarts=True, starts=None, rows=None,
                probe_rows=None, watched=True, evidence=True):
            return fit_hyperparameters(
                trainer, likelihood, hyper, optimize_hyperparameters=optimize,
                rule=self.rule, init_sites=sites,
                n_restarts=int(plan.n_restarts_optimizer) if restarts else 0,
                positions=positions, callback=print_hyper if loud else None,
                start_posteriors=starts,
                ep_deadline=None if self.budget is None else self.budget.end,
                watch=self.watch_of(rows) if watched else None, probe_rows=probe_rows,
                evidence=evidence)
        return fit

    def watch_of(self, rows):
        """The held-out watch (if any) of learning on ``rows`` rows."""
        if self.watch is None:
            return None
        return lambda make_outcome, **where: self.watch(make_outcome, rows=rows, **where)

    def _trainer_factory(self, basis):
        """``trainer_for(X, targets, work_dir, learning)``: a Trainer of these bases and settings
        on some rows."""
        plan, execution = self.plan, self.plan.execution
        callback = self.progress or (print_sweep if plan.verbose else None)

        def trainer_for(X, targets, work_dir, learning):
            return Trainer(X, targets, self.labels, basis.means, basis.blur, plan.ep,
                           frequencies=basis.frequencies, phases=basis.phases,
                           jitter=plan.jitter, block_rows=execution.block_rows,
                           cache=self.cache, work_dir=work_dir,
                           callback=self._timing_sweeps(callback, X.shape[0], learning),
                           on_build=None if self.budget is None else partial(
                               self.budget.observe_build, X.shape[0]),
                           approximation=approximation_named(plan.approximation),
                           learning=learning)
        return trainer_for

    def _timing_sweeps(self, callback, rows, learning):
        """``callback`` told whether each sweep is of EP on all rows (``all_rows``)
        and of an EP run inside learning (``learning``: the optimiser's evaluations
        and stochastic learning's), and the budget (if any) told what each sweep of
        EP on ``rows`` rows cost."""
        budget, every_row = self.budget, rows == self.X.shape[0]
        if budget is None and callback is None:
            return None

        def observe(record):
            if budget is not None:
                budget.observe(rows, record["seconds"])
            if callback is not None:
                callback({**record, "all_rows": every_row, "learning": learning})
        return observe

    # -- what the run says ---------------------------------------------------------

    def budget_text(self):
        budget = self.plan.max_fit_time
        return "" if budget is None else f", budget {budget:g}s"

    def stop_description(self):
        plan = self.plan
        return (f"tol {plan.hyper_tol:g}, at most {plan.max_hyper_iter} iterations"
                + self.budget_text())

    def budgeted_stages(self, stages, learn_on_all, basis):
        """The stages, or with a budget too short for the first stage a stage on half
        its rows before it (:meth:`~saspa_dask.fitting.budget.FitBudget.
        first_stage_rows`; the stages stay prefixes of one permutation)."""
        if self.budget is None or not stages or stages[0].size >= self.X.shape[0]:
            return stages
        first = stages[0].size
        rows = self.budget.first_stage_rows(
            first, self._evaluation_cost(first, basis)["seconds_per_evaluation"],
            basis.means.shape[0])
        if rows == first:
            return stages
        sizes = [rows] + [s.size for s in stages] + ([None] if learn_on_all else [])
        self.say(f"learning: first on {rows} rows (half of {first}: the time budget is "
                 "short)")
        return learning_stages(sizes, self.X.shape[0], self.plan.random_state,
                               self.lazy)[0]

    def _evaluation_cost(self, n_rows, basis):
        """The estimated cost of one optimiser evaluation on ``n_rows`` rows
        (:func:`~saspa_dask.fitting.costs.evaluation_cost`)."""
        return evaluation_cost(*self.cost_terms(n_rows, basis))

    def cost_terms(self, n_rows, basis):
        """The arguments of :mod:`~saspa_dask.fitting.costs`' estimates for these
        bases on ``n_rows`` rows: (n, M, d, blur, learnt bases, kernel terms)."""
        blur = self.report["blur_"]
        M, d = basis.means.shape
        terms = kernel_named(self.plan.kernel).n_terms(blurred=blur_family(blur).blurred)
        return n_rows, M, d, blur, self.plan.learnt_bases, terms

    def announce_cost(self, n_rows, basis):
        """Say what one optimiser evaluation will cost, and warn when that is slow."""
        plan, blur = self.plan, self.report["blur_"]
        M, d = basis.means.shape
        learn = plan.learnt_bases
        cost = self.report["cost_estimate_"] = self._evaluation_cost(n_rows, basis)
        seconds = cost["seconds_per_evaluation"]
        what = (f"{M} bases x {d} inputs, blur {blur}"
                + (" (auto)" if plan.blur == "auto" else "")
                + f", bases learnt: {learn or 'no'}, {n_rows} rows")
        self.say(f"learning: about {seconds:.2g}s per optimiser evaluation on one core "
                 f"({what})")
        if seconds > policy.POLICY.slow_evaluation_seconds:
            warnings.warn(
                f"learning is expected to take about {seconds:.0f}s per optimiser "
                f"evaluation ({what}), and a fit needs tens to hundreds of them; for "
                "less, use blur='diagonal' (or 'auto'), fewer bases, a smaller "
                "hyper_subsample, or max_fit_time", UserWarning, stacklevel=7)

    def say_done(self, report):
        """The fit's last phase lines: how learning stopped, and EP."""
        info, timings = report["hyperparameter_info_"], report["timings_"]
        if "stop_reason" in info:
            self.say(f"learning: {info['message']} after {info['n_iterations']} iterations "
                     f"(tol {info['tol']:g}), energy {info['log_evidence_start']:.8g} -> "
                     f"{info['log_evidence_end']:.8g}")
        settled = (" (predictions settled)" if report["ep_stop_reason_"] == "predictions"
                   else "")
        self.say(f"done: {report['n_sweeps_']} sweeps, converged {report['converged_']}"
                 f"{settled}, {timings['bases'] + timings['ep']:.1f}s")


def start_term_weights(term_weights, terms):
    """An additive kernel's starting weights: ``term_weights`` normalised (checked
    against the terms), or equal ones; None without an additive kernel."""
    if terms is None:
        return None
    n_terms = int(terms.max()) + 1
    if term_weights is None:
        return np.full(n_terms, 1.0 / n_terms)
    weights = np.asarray(term_weights, dtype=np.float64)
    if weights.shape != (n_terms,) or not np.all(np.isfinite(weights) & (weights > 0)):
        raise ValueError(f"term_weights must be {n_terms} positive numbers (one per term "
                         f"of additive_groups), got {term_weights!r}")
    return weights / weights.sum()
