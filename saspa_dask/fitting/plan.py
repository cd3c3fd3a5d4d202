"""A fit as a thing of the fitting layer: what a SASPA fit does, in order.

A :class:`FitPlan` holds every choice of a fit (basis start, hyperparameter start,
learning stages, stop rule, EP schedule, execution); :meth:`FitPlan.run` takes the
training rows, their EP targets and the likelihood and returns a :class:`FitResult`:
the :class:`~saspa_dask.fitting.posterior.FittedPosterior` every prediction uses and
the fit report (EP and optimiser diagnostics, per-row sites).  The estimators build a
plan from their parameters and keep the result; they do no fitting of their own.

The phases: bases (given, K-means or frequency features), the starting
hyperparameters, learning (full-batch on subsample stages in memory, or stochastic on
every row), then EP on all rows at the learnt values (learning there too when the
stages cover every row on all rows).
"""

from __future__ import annotations

import math
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import dask
from sklearn.utils import check_random_state

from ..core.bases import Basis
from ..core.likelihoods import powered
from ..engines.chunks import is_lazy
from ..engines.dask_engine import WorkDir
from ..ep.driver import EPConvergenceWarning
from ..ep.schedule import EPSchedule
from .basis_start import learnt_start, restart_positions, start_bases
from .budget import FitBudget
from .costs import SLOW_EVALUATION_SECONDS, choose_blur, evaluation_cost
from .held_out import HeldOutWatch
from .hyperparameters import (Hyperparameters, LearntBoundWarning, bound_advice,
                              resolve_lengthscale)
from .optimizer import StopRule
from .posterior import FittedPosterior, stacked
from .progress import phase_printer, print_hyper, print_sweep
from .settings import Execution, StochasticLearning
from .stages import (check_init_sites, learning_stages, merge_stages, sites_at,
                     sites_on_all, stages_end)
from .stochastic import learn_stochastic
from .trainer import FitOutcome, Trainer
from .trainer import fit as fit_hyperparameters

__all__ = ["FitPlan", "FitResult", "REPORT_ATTRIBUTES", "REPORT_ARRAYS"]

# the fit report: diagnostics a model store keeps beside the fitted posterior (the
# estimators' attributes of these names)
REPORT_ATTRIBUTES = (
    "n_sweeps_", "converged_", "ep_stop_reason_", "log_evidence_", "n_invalid_cavities_",
    "n_skipped_updates_", "n_damping_halvings_", "n_damping_reductions_",
    "n_anderson_steps_", "n_anderson_restarts_", "coarse_start_", "history_",
    "damping_", "blur_", "blur_scale_", "cost_estimate_", "hyperparameter_trace_",
    "hyperparameter_info_", "timings_", "kmeans_info_", "data_fingerprint_",
    "held_out_trace_")
REPORT_ARRAYS = ("sites_tau_", "sites_nu_")

_EP_COUNTS = ("n_invalid_cavities", "n_skipped_updates", "n_damping_halvings",
              "n_damping_reductions", "n_anderson_steps", "n_anderson_restarts")


@dataclass
class FitResult:
    """What :meth:`FitPlan.run` produced: the fitted posterior and the fit report
    (attribute name -> value, the names of :data:`REPORT_ATTRIBUTES` and
    :data:`REPORT_ARRAYS` that the fit set)."""

    posterior: FittedPosterior
    report: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FitPlan:
    """Every choice of a SASPA fit; the estimators' parameters of the same names
    (see :class:`~saspa_dask.SASPAClassifier`) say what each means.

    ``blur`` may be ``"auto"`` (chosen by input width when the plan runs),
    ``learn_bases`` ``"auto"`` (see :attr:`learnt_bases`); ``ep.damping`` must be
    resolved (a number: :meth:`EPSchedule.with_damping`).  ``owner`` names the
    estimator in messages.
    """

    owner: str = "SASPA"
    n_bases: int = 32
    blur: str = "auto"
    bases: Basis | None = None
    lengthscale: object = None
    jitter: float = 1e-6
    alpha: float = 1.0
    approximation: str = "fitc"
    random_state: object = None
    optimize_hyperparameters: bool = True
    learn_bases: object = "auto"
    learn_blur_scale: bool = False
    learn_offset: bool = False
    min_noise_variance: float | None = None
    n_restarts_optimizer: int = 0
    hyper_subsample: object = None
    learning: str = "full-batch"
    stochastic: StochasticLearning = field(default_factory=StochasticLearning)
    hyper_tol: float = 1e-4
    max_hyper_iter: int = 500
    max_fit_time: float | None = None
    ep: EPSchedule = field(default_factory=EPSchedule)
    execution: Execution = field(default_factory=Execution)
    verbose: object = 0

    @property
    def learnt_bases(self):
        """What ``learn_bases`` means for this fit: ``"auto"`` learns the means of
        K-means bases whenever the hyperparameters are learnt (better held-out NLPD
        in every measured case, ``benchmarks/RESULTS.md``), and keeps given ``bases``
        as they are."""
        if self.learn_bases == "auto":
            learn = self.optimize_hyperparameters and self.bases is None
            return "means" if learn else False
        return self.learn_bases or False

    @property
    def stochastic_learning(self):
        return self.learning == "stochastic" and bool(self.optimize_hyperparameters)

    def run(self, X, targets, likelihood, *, signal_variance, column_std, labels=None,
            init_sites=None, centre=None, progress=None, offset=0.0, classes=None,
            feature_names=None, held_out=None):
        """Fit: bases, starting values, learning, EP on all rows.

        Parameters
        ----------
        X : ndarray or dask array of shape (n_samples, n_features)
            Checked rows (lazy inputs are trained on chunk by chunk on Dask).
        targets : ndarray or dask array of shape (n_samples,)
            EP's targets (labels as +-1, centred values, counts).
        likelihood : likelihood object at its starting values
        signal_variance : float
            The starting signal variance.
        column_std : ndarray of shape (n_features,)
            The inputs' standard deviations (the data-driven lengthscales).
        labels : sequence, optional
            One-vs-rest: one EP problem per label on shared blocks (``targets`` are
            then the class labels).
        init_sites : (tau, nu), optional
            Warm-start sites (shape (n_samples,) or (n_problems, n_samples)).
        centre : (float, likelihood), optional
            Signal variance and likelihood as the data alone would start them: the
            centre of the box the values are learnt in.
        progress : callable, optional
            Called with each EP sweep's record.
        offset, classes, feature_names
            Kept in the fitted posterior (the latent offset, the class labels, the
            input columns' names).
        held_out : HeldOut, optional
            Rows the model is measured on as it learns and at the end
            (:mod:`saspa_dask.fitting.held_out`); the report's ``held_out_trace_``.

        Returns
        -------
        FitResult
        """
        run = _Run(self, X, labels, progress)

        def posterior_of(outcome):
            return self._posterior(outcome, likelihood, offset, classes, feature_names)
        if held_out is not None:
            run.watch = HeldOutWatch(held_out, run.began, posterior_of, run.say)
        basis, start = run.start(likelihood, signal_variance, column_std, centre)
        sites = check_init_sites(init_sites, X.shape[0], 1 if labels is None else len(labels))
        outcome, rows = run.fit(targets, powered(likelihood, float(self.alpha)), basis,
                                start, sites)
        self._check_jitter(outcome)
        result = FitResult(posterior_of(outcome))
        result.report = {**run.report, **self._report(outcome, X.shape[0], rows)}
        if run.watch is not None:  # the rows whose sites make the final model
            run.watch.measure(result.posterior,
                              rows=rows.size if run.sample_model else X.shape[0])
            result.report["held_out_trace_"] = run.watch.trace
        run.say_done(result.report)
        return result

    def _check_jitter(self, outcome):
        asked = self.jitter * outcome.hyper.signal_variance
        if outcome.jitter > asked * (1 + 1e-12):
            warnings.warn(f"basis covariance needed jitter {outcome.jitter:.3g} (asked "
                          f"{asked:.3g}): bases nearly coincide", UserWarning, stacklevel=6)

    def _posterior(self, outcome, likelihood, offset, classes, feature_names):
        hyper = outcome.hyper
        fitted = likelihood.with_hyperparameters(hyper.likelihood)
        if hyper.mean_offset is not None:
            # EP's sites are functions of f; the learnt constant mean joins the offset
            # every prediction adds (a shift of f that the likelihood saw)
            offset = offset + hyper.mean_offset
        return FittedPosterior(
            outcome.basis.means, outcome.basis.covs, hyper.lengthscale, hyper.signal_variance,
            outcome.jitter, outcome.L, [r.posterior for r in outcome.results], fitted.name,
            fitted.params(), offset=offset, classes=classes, feature_names=feature_names,
            frequencies=outcome.basis.frequencies, phases=outcome.basis.phases,
            projected_prediction=self.approximation == "sor")

    def _report(self, outcome, n_samples, rows):
        """The learning and EP report of a fit (attribute name -> value)."""
        info = dict(outcome.info or {})
        if self.optimize_hyperparameters:
            info.update(learn_bases=self.learnt_bases,
                        n_rows_learnt=int(n_samples if rows is None else rows.size))
        if info.get("at_bounds"):
            warnings.warn(bound_advice(info["at_bounds"]), LearntBoundWarning, stacklevel=6)
        results = outcome.results
        one = len(results) == 1
        report = {
            "blur_scale_": outcome.hyper.blur_scale,
            "hyperparameter_trace_": outcome.trace or [], "hyperparameter_info_": info,
            "sites_tau_": stacked([r.tau for r in results]),
            "sites_nu_": stacked([r.nu for r in results]),
            "n_sweeps_": max(r.n_sweeps for r in results),
            "converged_": all(r.converged for r in results),
            "ep_stop_reason_": _ep_stop_reason(results),
            "log_evidence_": float(sum(r.log_evidence for r in results)),
            "coarse_start_": [level if one else {**level, "problem": k}
                              for k, r in enumerate(results) for level in r.coarse_start],
            "history_": results[0].history if one else [
                {**rec, "problem": k} for k, r in enumerate(results) for rec in r.history]}
        for name in _EP_COUNTS:
            report[f"{name}_"] = int(sum(getattr(r, name) for r in results))
        return report


def _ep_stop_reason(results):
    """Why EP on all rows stopped (the first problem that did not converge says)."""
    for result in results:
        if not result.converged:
            return "time" if result.stopped_by_time else "max_sweeps"
    return "converged"


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
    a random sample EP has already converged on, at no cost), or stochastic
    learning's tied posterior (``rows`` None: its one site already stands for every
    row).  None when EP on all rows is warm-started by sites or learns itself."""
    if learnt is None or sites is not None or learn_here:
        return None
    factor = 1.0 if rows is None else n_samples / rows.size
    return [result.posterior.scaled(factor) for result in learnt.results]


class _Run:
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

    # -- the starting point --------------------------------------------------------

    def start(self, likelihood, signal_variance, column_std, centre):
        """The starting bases and hyperparameters."""
        plan, X, blur = self.plan, self.X, self.report["blur_"]
        self.say(f"{plan.owner}: {X.shape[0]} rows x {X.shape[1]} inputs"
                 + (f", one-vs-rest over {len(self.labels)} classes" if self.labels else "")
                 + "; " + ("bases given" if plan.bases is not None else
                           f"K-means for {plan.n_bases} bases"))
        basis, kmeans_info = start_bases(
            X, n_bases=plan.n_bases, blur=blur, bases=plan.bases,
            lengthscale=plan.lengthscale, column_std=column_std,
            random_state=plan.random_state, lazy=self.lazy)
        if kmeans_info is not None:
            self.report["kmeans_info_"] = kmeans_info
        hyper = self._start_hyperparameters(likelihood, signal_variance, column_std, basis,
                                            centre)
        self.report["timings_"] = {"bases": time.perf_counter() - self.began}
        self.say(f"bases ready ({self.report['timings_']['bases']:.1f}s"
                 + (f", K-means converged {kmeans_info.get('converged')}"
                    if kmeans_info else "") + ")")
        return basis, hyper

    def _start_hyperparameters(self, likelihood, signal_variance, column_std, basis,
                               centre):
        """The optimiser's starting point; it says what is learnt.  With ``centre``,
        the box the values are learnt in is centred where the data alone would start
        them."""
        plan, d = self.plan, self.X.shape[1]
        learn = plan.learnt_bases
        if learn and not plan.optimize_hyperparameters:
            raise ValueError(f"learn_bases={learn!r} needs optimize_hyperparameters=True "
                             "(the bases are learnt by the EP evidence)")
        if learn == "means+blur" and plan.learn_blur_scale:
            raise ValueError("learn_blur_scale=True is redundant with "
                             "learn_bases='means+blur' (each basis learns its own blur)")
        if plan.learn_offset and self.labels is not None:
            raise ValueError("learn_offset needs one EP problem (a regression or a "
                             "binary classification), not one per class")
        if plan.min_noise_variance is not None and \
                "noise_variance" not in likelihood.hyperparameters():
            raise ValueError("min_noise_variance is a floor of the gaussian likelihood's "
                             f"noise variance; the {likelihood.name} likelihood has none")
        lengthscale = resolve_lengthscale(plan.lengthscale, d, column_std)
        learn_offset = bool(plan.learn_offset and plan.optimize_hyperparameters)
        middle = None
        if centre is not None:
            middle = Hyperparameters(resolve_lengthscale(None, d, column_std),
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
            centre=middle)

    # -- learning and EP -----------------------------------------------------------

    def fit(self, targets, likelihood, basis, hyper, sites):
        """Learning (if asked), then EP on all rows; the trainer's outcome with the
        stages' report merged in, and the rows learnt on (None: all)."""
        plan, X, say = self.plan, self.X, self.say
        trainer_for = self._trainer_factory(basis)
        fit = self._fitter(likelihood, restart_positions(
            hyper.bases, plan.n_restarts_optimizer, self.report["blur_"], plan.random_state))
        stages, learn_on_all = [], False
        if plan.optimize_hyperparameters and not plan.stochastic_learning:
            stages, learn_on_all = learning_stages(plan.hyper_subsample, X.shape[0],
                                                   plan.random_state, self.lazy)
        if plan.optimize_hyperparameters:
            self._announce_cost(stages[0].size if stages else X.shape[0], basis)
        start = time.perf_counter()
        if plan.stochastic_learning:
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
            say(f"EP on {X.shape[0]} rows"
                + (", learning hyperparameters" if learn_here else ""))
            covered = bool(stages) and stages[-1].size == X.shape[0]
            final_sites = stage_sites if learn_here or covered else sites
            # Dask inputs keep their sites in a scratch store (removed afterwards)
            with WorkDir(plan.execution.work_dir) if self.lazy else nullcontext() as work:
                outcome = fit(trainer_for(X, targets, work), hyper, final_sites, learn_here,
                              restarts=not stages, rows=X.shape[0],
                              starts=_scaled_starts(learnt, rows, X.shape[0], final_sites,
                                                    learn_here))
        self.report["timings_"]["ep"] = time.perf_counter() - start
        if learn_here:
            done.append((outcome, X.shape[0], "workers" if self.lazy else "driver (in memory)"))
            rows = None
        merge_stages(outcome, learnt if not learn_here else None, done)
        return outcome, rows

    def _sample_model_only(self, rows, sites, learn_on_all):
        """Whether the model is EP on the learning sample: the budget (if any) left
        no room for EP on all rows (:data:`~saspa_dask.fitting.budget.
        SAMPLE_MODEL_RATIO`), learning ran on a sample, and no warm-start sites give
        the other rows information EP on the sample would not use.  Said and warned."""
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

        def fit(trainer, hyper, sites, optimize, restarts=True, starts=None, rows=None):
            return fit_hyperparameters(
                trainer, likelihood, hyper, optimize_hyperparameters=optimize,
                rule=self.rule, init_sites=sites,
                n_restarts=int(plan.n_restarts_optimizer) if restarts else 0,
                positions=positions, callback=print_hyper if loud else None,
                start_posteriors=starts,
                ep_deadline=None if self.budget is None else self.budget.end,
                watch=self._watch_of(rows))
        return fit

    def _watch_of(self, rows):
        """The held-out watch (if any) of learning on ``rows`` rows."""
        if self.watch is None:
            return None
        return lambda make_outcome, **where: self.watch(make_outcome, rows=rows, **where)

    def _trainer_factory(self, basis):
        """``trainer_for(X, targets, work_dir)``: a Trainer of these bases and settings
        on some rows."""
        plan, execution = self.plan, self.plan.execution
        callback = self.progress or (print_sweep if plan.verbose else None)

        def trainer_for(X, targets, work_dir):
            return Trainer(X, targets, self.labels, basis.means, basis.covs, plan.ep,
                           frequencies=basis.frequencies, phases=basis.phases,
                           jitter=plan.jitter, block_rows=execution.block_rows,
                           cache=execution.cache, work_dir=work_dir,
                           callback=self._timing_sweeps(callback, X.shape[0]),
                           projected_only=plan.approximation != "fitc")
        return trainer_for

    def _timing_sweeps(self, callback, rows):
        """``callback`` told whether each sweep is of EP on all rows (``all_rows``;
        False: an EP run inside learning on a row subsample), and the budget (if any)
        told what each sweep of EP on ``rows`` rows cost."""
        budget, every_row = self.budget, rows == self.X.shape[0]
        if budget is None and callback is None:
            return None

        def observe(record):
            if budget is not None:
                budget.observe(rows, record["seconds"])
            if callback is not None:
                callback({**record, "all_rows": every_row})
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
            what = "all" if rows.size == X.shape[0] else "a subsample of"
            say(f"learning hyperparameters{' and bases' if self.plan.learnt_bases else ''} "
                f"on {what} {rows.size} rows, in memory on the driver "
                f"({self._stop_description()})")
            learnt = fit(trainer_for(X_sub, y_sub, None), hyper, sites_at(sites, rows),
                         True, restarts=k == 0, rows=rows.size)
            if self.watch is not None:  # the stage's end, if not measured already
                self.watch(lambda: learnt, rows=rows.size, always=True,
                           iteration=learnt.info.get("n_iterations"))
            hyper = learnt.hyper
            sites = sites_on_all(learnt, rows, X.shape[0], sites)
            done.append((learnt, rows.size, "driver (in memory)"))
            if stages_end(done, say):
                return learnt, rows, sites, done, True
        return learnt, rows, sites, done, False

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
        learnt = learn_stochastic(trainer_for(self.X, targets, None), likelihood, hyper,
                                  schedule, seed=seed, time_is_up=self.rule.time_is_up,
                                  callback=tell, watch=self._watch_of(self.X.shape[0]))
        return learnt, None, None, [], learnt.info["stop_reason"] == "time"

    # -- what the run says ---------------------------------------------------------

    def _budget_text(self):
        budget = self.plan.max_fit_time
        return "" if budget is None else f", budget {budget:g}s"

    def _stop_description(self):
        plan = self.plan
        return (f"tol {plan.hyper_tol:g}, at most {plan.max_hyper_iter} iterations"
                + self._budget_text())

    def _announce_cost(self, n_rows, basis):
        """Say what one optimiser evaluation will cost, and warn when that is slow."""
        plan, blur = self.plan, self.report["blur_"]
        M, d = basis.means.shape
        learn = plan.learnt_bases
        cost = self.report["cost_estimate_"] = evaluation_cost(n_rows, M, d, blur, learn)
        seconds = cost["seconds_per_evaluation"]
        what = (f"{M} bases x {d} inputs, blur {blur}"
                + (" (auto)" if plan.blur == "auto" else "")
                + f", bases learnt: {learn or 'no'}, {n_rows} rows")
        self.say(f"learning: about {seconds:.2g}s per optimiser evaluation on one core "
                 f"({what})")
        if seconds > SLOW_EVALUATION_SECONDS:
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
        self.say(f"done: {report['n_sweeps_']} sweeps, converged {report['converged_']}, "
                 f"{timings['bases'] + timings['ep']:.1f}s")
