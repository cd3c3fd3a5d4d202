"""One run of a :class:`~saspa_dask.fitting.plan.FitPlan`: its phases in order.

:class:`FitRun` holds what a run learns on the way (its clock, phase lines, budget,
stop rule and the report's ``blur_``, ``damping_``, ``timings_``, ``kmeans_info_``,
``cost_estimate_``) and does the phases: starting bases and hyperparameters, learning
(subsample stages in memory or stochastic on every row), then EP on all rows, or the
learning sample's model when a time budget leaves no room for it.
"""

from __future__ import annotations

import math
import time
import warnings
from contextlib import nullcontext
from dataclasses import replace

import dask
import numpy as np
from sklearn.utils import check_random_state

from ..core.kernel_profiles import kernel_named
from ..core.kernels import FOURIER_FAMILIES
from ..engines.cache_policy import choose_cache
from ..engines.chunks import is_lazy
from ..engines.dask_engine import WorkDir
from ..ep.approximation import approximation_named
from ..ep.driver import EPConvergenceWarning
from ..parameters import bases_for_rows
from .basis_start import learnt_start, restart_positions, start_bases
from .budget import FitBudget
from . import policy
from .costs import choose_blur, evaluation_cost, evaluation_flops
from .exact_start import (exact_check_applies, exact_gp_flops, exact_gp_start,
                          exact_start_applies, start_rows)
from .hyperparameters import (Hyperparameters, additive_lengthscale, resolve_lengthscale,
                              tied_lengthscale)
from .optimizer import StopRule
from .progress import phase_printer, print_hyper, print_sweep
from .stages import learning_stages, merge_stages, sites_at, sites_on_all, stages_end
from .stochastic import learn_stochastic
from .trainer import FitOutcome, Trainer
from .trainer import fit as fit_hyperparameters

__all__ = ["FitRun"]



def _sample_model(learnt, rows, n_samples):
    """The outcome of learning on ``rows`` as a model of all ``n_samples`` rows: its
    sites on ``rows`` and zero elsewhere (no information; the posterior is the same),
    no sweep on all rows, not converged (stopped by the time budget), and no evidence
    (it needs every row)."""
    results = []
    for result, (tau, nu) in zip(learnt.results, sites_on_all(learnt, rows, n_samples,
                                                             None)):
        results.append(replace(result, tau=tau, nu=nu, n_sweeps=0, converged=False,
                               stopped_by_time=True, log_evidence=float("nan"),
                               history=[], coarse_start=[]))
    return FitOutcome(learnt.hyper, learnt.basis, learnt.L, learnt.jitter, results,
                      float("nan"), learnt.trace, learnt.info)


def _scaled_starts(learnt, rows, n_samples, sites, learn_here):
    """Where EP on all rows after learning starts: the last stage's posterior at the
    learnt values, its sites on ``rows`` standing for all ``n_samples`` rows (what
    :func:`saspa_dask.ep.driver.coarse_start` builds from every 10th chunk, here from
    a random sample EP has already converged on, at no cost).  None when EP on all
    rows is warm-started by sites (stochastic learning's, every row's) or learns
    itself."""
    if learnt is None or sites is not None or learn_here:
        return None
    factor = 1.0 if rows is None else n_samples / rows.size
    return [result.posterior.scaled(factor) for result in learnt.results]


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
                       FitBudget(plan.max_fit_time, self.began,
                                 X.shape[0] * (1 if labels is None else len(labels))))
        self.rule = StopRule(tol=float(plan.hyper_tol), max_iter=int(plan.max_hyper_iter),
                             deadline=None if self.budget is None
                             else self.budget.learning_deadline)
        self.report = {"blur_": choose_blur(plan.blur, X.shape[1]),
                       "damping_": float(plan.ep.step)}
        self.watch = None  # a HeldOutWatch when held-out rows are given
        self.sample_model = False  # the model is EP on the learning sample only
        # rows of the last learning sample on whose predictions EP on all rows may
        # converge (EPSchedule.prediction_tol); None when learning saw every row
        self.probe_rows = None
        # learning starts from an exact GP on a sample (decided by fit(); its record
        # joins hyperparameter_info_ as "start")
        self.exact_start, self.start_record = False, None
        # learning on every row from the data-driven start is checked against an exact
        # GP's start afterwards (decided by fit(): _exact_check)
        self.exact_check = False
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
            learn_blur_scale=bool(plan.learn_blur_scale) and self.report["blur_"] != "delta",
            bases=learnt_start(basis, learn, self.report["blur_"], lengthscale),
            mean_offset=0.0 if learn_offset else None, noise_floor=plan.min_noise_variance,
            offset_scale=math.sqrt(float(centre[0] if centre is not None
                                         else signal_variance)),
            centre=middle, kernel=plan.kernel, groups=groups, additive=terms,
            term_weights=start_term_weights(plan.term_weights, terms))

    # -- learning and EP -----------------------------------------------------------

    def fit(self, targets, likelihood, basis, hyper, sites):
        """Learning (if asked), then EP on all rows; the trainer's outcome with the
        stages' report merged in, and the rows learnt on (None: all)."""
        plan, X, say = self.plan, self.X, self.say
        if self.lazy:
            self.cache, why = choose_cache(plan.execution.cache, X.shape[0],
                                           basis.means.shape[0])
            if why:
                say(f"cache: {why}")
        trainer_for = self._trainer_factory(basis)
        fit = self._fitter(likelihood, restart_positions(
            hyper.bases, plan.n_restarts_optimizer, self.report["blur_"], plan.random_state))
        stages, learn_on_all = [], False
        if plan.optimize_hyperparameters and not plan.stochastic_learning:
            stages, learn_on_all = learning_stages(plan.hyper_subsample, X.shape[0],
                                                   plan.random_state, self.lazy)
            stages = self._budgeted_stages(stages, learn_on_all, basis)
        if plan.optimize_hyperparameters:
            self._announce_cost(stages[0].size if stages else X.shape[0], basis)
        on_sample = bool(stages) and stages[0].size < X.shape[0]
        self.exact_start = self.report["blur_"] not in FOURIER_FAMILIES and \
            exact_start_applies(plan, likelihood, hyper, X.shape[0], on_sample)
        self.exact_check = not self.exact_start and exact_check_applies(
            plan, likelihood, hyper, X.shape[0])
        start = time.perf_counter()
        if plan.stochastic_learning:
            hyper = self._exact_started(hyper, self.X, targets)
            learnt, rows, stage_sites, done, ended = self._learn_stochastically(
                targets, hyper, likelihood, trainer_for)
        else:
            learnt, rows, stage_sites, done, ended = self._learn_in_stages(
                targets, stages, hyper, sites, trainer_for, fit)
        learn_here = False
        if learnt is not None:
            hyper = learnt.hyper
            self.report["timings_"]["hyperparameters"] = time.perf_counter() - start
            learn_on_all = learn_on_all and not ended and self._room_to_learn_on_all()
        if learnt is not None and self._sample_model_only(rows, sites, learn_on_all):
            self.sample_model = True
            outcome = _sample_model(learnt, rows, X.shape[0])
        else:
            learn_here = bool(plan.optimize_hyperparameters) and learn_on_all
            if learn_here and learnt is None:  # learning starts here, on all rows
                hyper = self._exact_started(hyper, X, targets)
            say(f"EP on {X.shape[0]} rows"
                + (", learning hyperparameters" if learn_here else ""))
            # the stages' sites on every row, or stochastic learning's (it keeps one per
            # row): EP on all rows starts from them
            covered = (bool(stages) and stages[-1].size == X.shape[0]) or \
                plan.stochastic_learning
            final_sites = stage_sites if learn_here or covered else sites
            # Dask inputs keep their sites in a scratch store (removed afterwards)
            with WorkDir(plan.execution.work_dir) if self.lazy else nullcontext() as work:
                outcome = fit(trainer_for(X, targets, work, learn_here), hyper, final_sites,
                              learn_here,
                              restarts=not stages, rows=X.shape[0],
                              starts=_scaled_starts(learnt, rows, X.shape[0], final_sites,
                                                    learn_here),
                              probe_rows=None if learn_here else self.probe_rows)
            if learn_here and learnt is None and self._exact_check(outcome):
                outcome = self._checked_against_exact(outcome, fit, trainer_for, hyper,
                                                      X, targets)
        self.report["timings_"]["ep"] = time.perf_counter() - start
        if learn_here:
            done.append((outcome, X.shape[0], "workers" if self.lazy else "driver (in memory)"))
            rows = None
        merge_stages(outcome, learnt if not learn_here else None, done)
        if self.start_record is not None:
            outcome.info = {**(outcome.info or {}), "start": self.start_record}
        return outcome, rows

    def _exact_check(self, outcome):
        """Whether learning on every row from the data-driven start (where the fit is
        checked at all: ``exact_check``), which ended by its stop rule in ``outcome``
        (not by a cap or a budget) after work of at least
        the policy's ``exact_check_work_ratio`` times the exact GP's
        most, is checked against an exact GP's start (:func:`_checked_against_exact`)."""
        info, n_rows = outcome.info, self.X.shape[0]
        if not self.exact_check or info is None or info.get("stop_reason") not in (
                "energy", "gradient"):
            return False
        work = info["n_evaluations"] * evaluation_flops(*self._cost_terms(n_rows,
                                                                          outcome.basis))
        d = outcome.basis.means.shape[1]
        return work >= policy.POLICY.exact_check_work_ratio * exact_gp_flops(n_rows, d)

    def _checked_against_exact(self, outcome, fit, trainer_for, hyper, X, targets):
        """After learning on every row (``X``, ``targets`` in memory) from the
        data-driven start ``hyper``: where an exact GP's start on a sample
        (:mod:`saspa_dask.fitting.exact_start`) has a higher energy than where that
        learning ended, it stopped short (on Pumadyn-32nm, one seed of three stopped on
        the plateau before its irrelevant inputs were switched off), and learning goes
        on from the exact start; the higher end is kept.  Otherwise the outcome stays
        as it is (the cost: the exact GP and one EP run).  Recorded for
        ``hyperparameter_info_["start"]``."""
        exact, record = self._exact_gp(hyper, X, targets)
        if record["method"] != "exact-gp":
            return outcome
        at_exact = fit(trainer_for(X, targets, None, False), exact, None, False,
                       restarts=False, rows=X.shape[0], watched=False)
        record = {**record, "checked_after_learning": True,
                  "energy_learnt": float(outcome.log_evidence),
                  "energy_at_exact_start": float(at_exact.log_evidence)}
        if not at_exact.log_evidence > outcome.log_evidence:
            self.start_record = {**record, "method": "data", "reason": (
                "learning from the data-driven start ended above the exact GP's start")}
            return outcome
        self.say(f"start: learning ended at energy {outcome.log_evidence:.6g}, below an "
                 f"exact GP's start ({at_exact.log_evidence:.6g}); learning from there")
        again = fit(trainer_for(X, targets, None, True), exact, None, True,
                    restarts=False, rows=X.shape[0])
        kept = again if again.log_evidence > outcome.log_evidence else outcome
        self.start_record = {**record, "method": "exact-gp" if kept is again else "data"}
        return kept

    def _sample_model_only(self, rows, sites, learn_on_all):
        """Whether the model is EP on the learning sample: the budget (if any) left
        no room for EP on all rows (the policy's ``sample_model_ratio``), learning ran
        on a sample, and no warm-start sites give the other rows information EP on the
        sample would not use.  Said and warned."""
        if (self.budget is None or not self.budget.sample_model or rows is None
                or sites is not None or learn_on_all or rows.size == self.X.shape[0]):
            return False
        self.say(f"EP on {self.X.shape[0]} rows: the time budget leaves no room; the model "
                 f"is EP on the {rows.size}-row learning sample")
        warnings.warn(f"the max_fit_time budget left no room for EP on all "
                      f"{self.X.shape[0]} rows: the model is EP on the learning sample's "
                      f"{rows.size} rows (its sites on the other rows are zero); raise "
                      "max_fit_time for EP on all rows", EPConvergenceWarning, stacklevel=6)
        return True

    def _room_to_learn_on_all(self):
        """After the in-memory stages: whether the budget (if any) leaves room for
        learning on all rows; says so when it does not."""
        if self.budget is None or self.budget.affords_learning_on_all():
            return True
        self.say("learning: the time budget leaves no room for learning on all rows; EP "
                 "on all rows at the stages' values")
        return False

    def _fitter(self, likelihood, positions):
        """``fit(trainer, hyper, sites, optimize, restarts)``: the trainer's fit with
        this run's stop rule and restarts."""
        plan, loud = self.plan, self.say.loud

        def fit(trainer, hyper, sites, optimize, restarts=True, starts=None, rows=None,
                probe_rows=None, watched=True):
            return fit_hyperparameters(
                trainer, likelihood, hyper, optimize_hyperparameters=optimize,
                rule=self.rule, init_sites=sites,
                n_restarts=int(plan.n_restarts_optimizer) if restarts else 0,
                positions=positions, callback=print_hyper if loud else None,
                start_posteriors=starts,
                ep_deadline=None if self.budget is None else self.budget.end,
                watch=self._watch_of(rows) if watched else None, probe_rows=probe_rows)
        return fit

    def _watch_of(self, rows):
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
                           approximation=approximation_named(plan.approximation))
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

    def _learn_in_stages(self, targets, stages, hyper, sites, trainer_for, fit):
        """Learn on each subsample stage in memory on the driver, each warm-started
        from the last (its values, and its sites on its rows).  Returns the last
        stage's outcome (None without stages), its rows, the sites on all rows, the
        stages run as (outcome, rows, where), and whether a stage ended the stages
        early."""
        X, say = self.X, self.say
        learnt, rows, done = None, None, []
        for k, rows in enumerate(stages):
            # one pass over the chunks for both (lazy inputs); NumPy indexes in memory
            X_sub, y_sub = (dask.compute(X[rows], targets[rows]) if self.lazy
                            else (X[rows], targets[rows]))
            if k == 0:
                hyper = self._exact_started(hyper, X_sub, y_sub)
            what = "all" if rows.size == X.shape[0] else "a subsample of"
            say(f"learning hyperparameters{' and bases' if self.plan.learnt_bases else ''} "
                f"on {what} {rows.size} rows, in memory on the driver "
                f"({self._stop_description()})")
            learnt = fit(trainer_for(X_sub, y_sub, None, True), hyper, sites_at(sites, rows),
                         True, restarts=k == 0, rows=rows.size)
            if len(stages) == 1 and rows.size == X.shape[0] and \
                    self._exact_check(learnt):
                learnt = self._checked_against_exact(learnt, fit, trainer_for, hyper, X_sub,
                                                     y_sub)
            if self.watch is not None:  # the stage's end, if not measured already
                self.watch(lambda: learnt, rows=rows.size, always=True,
                           iteration=learnt.info.get("n_iterations"))
            hyper, probe = learnt.hyper, policy.POLICY.probe_rows
            self.probe_rows = (None if rows.size == X.shape[0] else
                               X_sub[::max(1, rows.size // probe)][:probe])
            sites = sites_on_all(learnt, rows, X.shape[0], sites)
            done.append((learnt, rows.size, "driver (in memory)"))
            if stages_end(done, say):
                return learnt, rows, sites, done, True
        return learnt, rows, sites, done, False

    def _exact_gp(self, hyper, X, targets):
        """``hyper`` at an exact GP's values on the seeded sample of (``X``,
        ``targets``), and the record (:func:`~saspa_dask.fitting.exact_start.
        exact_gp_start`)."""
        rows = start_rows(X.shape[0], self.plan.random_state)
        X_s, y_s = (dask.compute(X[rows], targets[rows]) if is_lazy(X)
                    else (X[rows], targets[rows]))
        return exact_gp_start(hyper, hyper.bounds(), X_s, y_s)

    def _exact_started(self, hyper, X, targets):
        """``hyper`` moved to an exact GP's values on a seeded sample of (``X``,
        ``targets``) when the fit starts that way (:mod:`saspa_dask.fitting.exact_start`);
        said, and recorded for ``hyperparameter_info_["start"]``."""
        if not self.exact_start:
            return hyper
        hyper, self.start_record = self._exact_gp(hyper, X, targets)
        record = self.start_record
        if record["method"] == "exact-gp":
            self.say(f"start: an exact GP on {record['rows']} rows, {record['iterations']} "
                     f"iterations ({record['seconds']:.1f}s): noise "
                     f"{hyper.likelihood['noise_variance']:.3g}, signal "
                     f"{hyper.signal_variance:.3g}")
        else:
            self.say(f"start: the data-driven values ({record['reason']})")
        return hyper

    def _learn_stochastically(self, targets, hyper, likelihood, trainer_for):
        """Learn on every row by stochastic EP (:mod:`saspa_dask.fitting.stochastic`);
        returns what :meth:`_learn_in_stages` does.  EP on all rows then polishes."""
        schedule, say = self.plan.stochastic, self.say
        say(f"learning stochastically on all {self.X.shape[0]} rows (minibatches of "
            f"{schedule.batch_rows}, learning rate {schedule.learning_rate:g}, at most "
            f"{schedule.max_epochs:g} epochs{self._budget_text()})")

        def tell(record):
            say(f"epoch {record['epoch']}: energy {record['energy_per_row']:.6g} per row "
                f"(minibatch estimate), {record['steps']} steps, {record['seconds']:.1f}s")

        seed = check_random_state(self.plan.random_state).randint(2**31 - 1)
        # on Dask the minibatches are read chunk by chunk; no site store is needed
        learnt = learn_stochastic(trainer_for(self.X, targets, None, True), likelihood, hyper,
                                  schedule, seed=seed, time_is_up=self.rule.time_is_up,
                                  callback=tell, watch=self._watch_of(self.X.shape[0]))
        sites = [(result.tau, result.nu) for result in learnt.results]
        return learnt, None, sites, [], learnt.info["stop_reason"] == "time"

    # -- what the run says ---------------------------------------------------------

    def _budget_text(self):
        budget = self.plan.max_fit_time
        return "" if budget is None else f", budget {budget:g}s"

    def _stop_description(self):
        plan = self.plan
        return (f"tol {plan.hyper_tol:g}, at most {plan.max_hyper_iter} iterations"
                + self._budget_text())

    def _budgeted_stages(self, stages, learn_on_all, basis):
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
        return evaluation_cost(*self._cost_terms(n_rows, basis))

    def _cost_terms(self, n_rows, basis):
        """The arguments of :mod:`~saspa_dask.fitting.costs`' estimates for these
        bases on ``n_rows`` rows: (n, M, d, blur, learnt bases, kernel terms)."""
        blur = self.report["blur_"]
        M, d = basis.means.shape
        terms = kernel_named(self.plan.kernel).n_terms(blurred=blur != "delta")
        return n_rows, M, d, blur, self.plan.learnt_bases, terms

    def _announce_cost(self, n_rows, basis):
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
