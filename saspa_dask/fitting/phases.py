"""A fit's phases: what :meth:`FitPlan.phases` lists and :class:`FitRun` runs in order
over one :class:`FitState`.

1. **Learning**: none (:class:`FixedValues`), full-batch on subsample stages in memory
   (:class:`StagedLearning`, each stage warm-started from the last, the time budget
   shortening the first), or stochastic on every row (:class:`LearningOnMinibatches`).
   An exact GP's start (:mod:`saspa_dask.fitting.exact_start`) is taken at its
   beginning where it applies.
2. **The model** (:class:`FinalModel`): EP on all rows at the learnt values (learning
   there too when the stages end on every row, then checked against an exact GP's
   start where that applies), or, when the budget leaves no room, EP at the learnt
   values on a larger sample (or the learning sample's own EP) as the model.

What a phase leaves for the next is in the state, under names that say what it is.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field

from sklearn.utils import check_random_state

from ..core.blur_families import blur_family
from ..engines.dask_engine import WorkDir
from . import policy
from .costs import evaluation_flops
from .exact_start import (exact_check_applies, exact_gp_flops, exact_gp_start,
                          exact_start_applies, start_rows)
from .sample_model import (budget_leaves_the_sample_model, rows_of, sample_model,
                           sample_shares, scaled_starts)
from .stages import (every_row, gather_rows, learning_stages, merge_stages, sites_at,
                     sites_on_all, stages_end)
from .stochastic import learn_stochastic

__all__ = ["FinalModel", "FitState", "FixedValues", "StagedLearning",
           "LearningOnMinibatches"]


@dataclass
class FitState:
    """What a fit's phases share: the problem, the point, and what learning left."""

    targets: object
    likelihood: object
    basis: object
    hyper: object
    #: warm-start sites the caller gave (None: a cold start)
    given_sites: object
    #: ``trainer_for(X, targets, work_dir, learning)`` and ``fit(trainer, ...)``
    trainer_for: object
    fit: object
    #: learning's last outcome (None: nothing learnt before the final phase)
    learnt: object = None
    #: the rows learning saw (None: every row)
    learnt_rows: object = None
    #: the sites learning left on every row (None: none)
    learnt_sites: object = None
    #: learning's stages as (outcome, rows, where), for the report
    stages_run: list = field(default_factory=list)
    #: learning ended before its last stage (no gain, or the budget)
    ended_early: bool = False
    #: learning goes on, on every row, in EP on all rows
    learns_on_all: bool = False
    #: learning's sites cover every row (EP on all rows starts from them)
    sites_cover_all: bool = False
    #: learning's stages, when it had any (EP on all rows then makes no restarts)
    staged: bool = False
    #: when learning (or, without it, EP on all rows) began: its time and EP's are one
    #: span in the report's ``timings_["ep"]``
    began: float = 0.0
    #: learning starts from an exact GP on a sample (:func:`decide_exact_start`)
    starts_exact: bool = False
    #: learning on every row from the data-driven start is checked against an exact
    #: GP's start afterwards (:func:`decide_exact_start`, :func:`_exact_check_due`)
    checked_against_exact: bool = False
    #: how learning started, for ``hyperparameter_info_["start"]`` (None: not recorded)
    start_record: dict = None
    #: rows of the last learning sample on whose predictions EP on all rows may
    #: converge (``EPSchedule.prediction_tol``); None when learning saw every row
    probe_rows: object = None
    #: the model is EP on a sample only (the budget left no room for all rows) ...
    sample_model: bool = False
    #: ... on these rows
    sample_rows: object = None
    #: the fit's outcome, once the final phase has run
    outcome: object = None


class FixedValues:
    """No learning: EP on all rows at the given values."""

    def run(self, run, state):
        state.began = time.perf_counter()


class StagedLearning:
    """Full-batch learning on subsample stages in memory on the driver, each
    warm-started from the last (its values and its sites on its rows); learning goes
    on in EP on all rows when the stages end with every row and the budget allows."""

    def run(self, run, state):
        plan, X = run.plan, run.X
        stages, on_all = learning_stages(plan.hyper_subsample, X.shape[0],
                                         plan.random_state, run.lazy)
        stages = run.budgeted_stages(stages, on_all, state.basis)
        if run.budget is not None:
            run.budget.sample_shares = sample_shares(stages, X.shape[0],
                                                     state.basis.means.shape[0])
        run.announce_cost(stages[0].size if stages else X.shape[0], state.basis)
        decide_exact_start(run, state, on_sample=bool(stages) and stages[0].size < X.shape[0])
        start = state.began = time.perf_counter()
        state.staged = bool(stages)
        learnt, rows, sites, ended = _learn_in_stages(run, state, stages)
        state.learns_on_all = on_all
        state.sites_cover_all = bool(stages) and stages[-1].size == X.shape[0]
        if learnt is not None:
            _keep_learnt(run, state, learnt, rows, sites, ended, start)
            state.learns_on_all = (on_all and not ended
                                   and _budget_affords_learning_on_all(run))


class LearningOnMinibatches:
    """Stochastic learning on every row (:mod:`saspa_dask.fitting.stochastic`); EP on
    all rows then polishes, from the sites it leaves on every row."""

    def run(self, run, state):
        run.announce_cost(run.X.shape[0], state.basis)
        decide_exact_start(run, state, on_sample=False)
        start = state.began = time.perf_counter()
        state.hyper = exact_started(run, state, state.hyper, run.X, state.targets)
        schedule = run.plan.stochastic.for_rows(run.X.shape[0])
        run.say(f"learning stochastically on all {run.X.shape[0]} rows (minibatches of "
                f"{schedule.batch_rows}, learning rate {schedule.learning_rate:g}, at most "
                f"{schedule.max_epochs:g} epochs{run.budget_text()})")

        def tell(record):
            run.say(f"epoch {record['epoch']}: energy {record['energy_per_row']:.6g} per "
                    f"row, {record['steps']} steps, {record['seconds']:.1f}s")

        seed = check_random_state(run.plan.random_state).randint(2**31 - 1)
        # on Dask the minibatches are read chunk by chunk; no site store is needed
        learnt = learn_stochastic(state.trainer_for(run.X, state.targets, None, True),
                                  state.likelihood, state.hyper, schedule, seed=seed,
                                  time_is_up=run.rule.time_is_up, callback=tell,
                                  watch=run.watch_of(run.X.shape[0]))
        sites = [(result.tau, result.nu) for result in learnt.results]
        state.sites_cover_all = True
        _keep_learnt(run, state, learnt, None, sites, learnt.info["stop_reason"] == "time",
                     start)


def _keep_learnt(run, state, learnt, rows, sites, ended, start):
    """Keep what a learning phase found, and the time it took."""
    state.learnt, state.learnt_rows, state.learnt_sites = learnt, rows, sites
    state.ended_early, state.hyper = ended, learnt.hyper
    run.report["timings_"]["hyperparameters"] = time.perf_counter() - start


class FinalModel:
    """EP on all rows at the learnt values, learning there too when learning goes on
    on every row (and then checked against an exact GP's start where that applies),
    or a sample's model when the time budget leaves no room."""

    def run(self, run, state):
        X = run.X
        learn_here = bool(run.plan.optimize_hyperparameters) and state.learns_on_all
        if state.learnt is not None and budget_leaves_the_sample_model(run, state):
            state.sample_model, learn_here = True, False
            state.outcome, state.sample_rows = sample_model(run, state)
        else:
            state.outcome = _ep_on_all_rows(run, state, learn_here)
        run.report["timings_"]["ep"] = time.perf_counter() - state.began
        if learn_here:
            state.stages_run.append((state.outcome, X.shape[0],
                                     "workers" if run.lazy else "driver (in memory)"))
            state.learnt_rows = None
        merge_stages(state.outcome, state.learnt if not learn_here else None,
                     state.stages_run)
        if state.start_record is not None:
            state.outcome.info = {**(state.outcome.info or {}), "start": state.start_record}


def _ep_on_all_rows(run, state, learn_here):
    """EP on every row (learning there when ``learn_here``), in a scratch store of
    sites for Dask inputs, from learning's sites or its posterior scaled to all rows."""
    X, hyper = run.X, state.hyper
    if learn_here and state.learnt is None:  # learning starts here, on all rows
        hyper = exact_started(run, state, hyper, X, state.targets)
    run.say(f"EP on {X.shape[0]} rows" + (", learning hyperparameters" if learn_here else ""))
    sites = (every_row(state.learnt_sites) if learn_here or state.sites_cover_all
             else state.given_sites)
    with WorkDir(run.plan.execution.work_dir) if run.lazy else nullcontext() as work:
        outcome = state.fit(state.trainer_for(X, state.targets, work, learn_here), hyper,
                            sites, learn_here, restarts=not state.staged, rows=X.shape[0],
                            starts=scaled_starts(state.learnt, state.learnt_rows,
                                                  X.shape[0], sites, learn_here),
                            probe_rows=None if learn_here else state.probe_rows)
    if learn_here and state.learnt is None and _exact_check_due(run, state, outcome):
        outcome = _compared_with_exact_start(run, state, outcome, hyper, X, state.targets)
    return outcome


# -- the learning sample, and what EP on all rows starts from ----------------------------

def _learn_in_stages(run, state, stages):
    """Learn on each subsample stage in memory on the driver, each warm-started from
    the last (its values, and its sites on its rows).  Returns the last stage's
    outcome (None without stages), its rows, the sites on all rows, and whether a
    stage ended the stages early; the stages run are added to the state."""
    X, say, hyper, sites = run.X, run.say, state.hyper, state.given_sites
    learnt, rows = None, None
    for k, rows in enumerate(stages):
        X_sub, y_sub = rows_of(run, state, rows)
        if k == 0:
            hyper = exact_started(run, state, hyper, X_sub, y_sub)
        what = "all" if rows.size == X.shape[0] else "a subsample of"
        say(f"learning hyperparameters{' and bases' if run.plan.learnt_bases else ''} "
            f"on {what} {rows.size} rows, in memory on the driver "
            f"({run.stop_description()})")
        learnt = state.fit(state.trainer_for(X_sub, y_sub, None, True), hyper,
                           sites_at(sites, rows), True, restarts=k == 0, rows=rows.size)
        if (len(stages) == 1 and rows.size == X.shape[0]
                and _exact_check_due(run, state, learnt)):
            learnt = _compared_with_exact_start(run, state, learnt, hyper, X_sub, y_sub)
        if run.watch is not None:  # the stage's end, if not measured already
            run.watch(lambda: learnt, rows=rows.size, always=True,
                      iteration=learnt.info.get("n_iterations"))
        hyper, probe = learnt.hyper, policy.POLICY.probe_rows
        state.probe_rows = (None if rows.size == X.shape[0] else
                            X_sub[::max(1, rows.size // probe)][:probe])
        sites = sites_on_all(learnt, rows, X.shape[0], sites)
        state.stages_run.append((learnt, rows.size, "driver (in memory)"))
        if stages_end(state.stages_run, say) or (
                k + 1 < len(stages)
                and not _next_stage_fits(run, learnt, rows.size, stages[k + 1].size)):
            return learnt, rows, sites, True
    return learnt, rows, sites, False


def _next_stage_fits(run, learnt, rows, next_rows):
    """Whether the budget (if any) leaves learning time for one evaluation on the next
    stage's ``next_rows`` rows, at the cost per row of the evaluations of the last
    stage (``learnt``, on ``rows`` rows); says so when it does not."""
    trace = learnt.trace
    if run.budget is None or not trace or not trace[-1]["n_evaluations"]:
        return True
    evaluation = trace[-1]["seconds"] / trace[-1]["n_evaluations"] * next_rows / rows
    if time.perf_counter() + evaluation < run.budget.learning_deadline():
        return True
    run.say(f"learning: the time budget leaves no room for an evaluation on {next_rows} "
            "rows; no further stages")
    return False


def _budget_affords_learning_on_all(run):
    """After the in-memory stages: whether the budget (if any) leaves room for
    learning on all rows; says so when it does not."""
    if run.budget is None or run.budget.affords_learning_on_all():
        return True
    run.say("learning: the time budget leaves no room for learning on all rows; EP on "
            "all rows at the stages' values")
    return False


# -- an exact GP's start, and the check after learning -----------------------------------

def decide_exact_start(run, state, on_sample):
    """Whether learning starts from an exact GP on a sample, or (learning on every row
    from the data-driven start) is checked against one after
    (:mod:`saspa_dask.fitting.exact_start`)."""
    plan, n = run.plan, run.X.shape[0]
    state.starts_exact = not blur_family(run.report["blur_"]).frequency and \
        exact_start_applies(plan, state.likelihood, state.hyper, n, on_sample)
    state.checked_against_exact = not state.starts_exact and exact_check_applies(
        plan, state.likelihood, state.hyper, n)


def exact_gp(run, hyper, X, targets, max_iter=None):
    """``hyper`` at an exact GP's values on the seeded sample of (``X``, ``targets``),
    and the record (:func:`~saspa_dask.fitting.exact_start.exact_gp_start`)."""
    rows = start_rows(X.shape[0], run.plan.random_state)
    X_s, y_s = gather_rows(X, targets, rows)
    return exact_gp_start(hyper, hyper.bounds(), X_s, y_s, max_iter)


def exact_started(run, state, hyper, X, targets):
    """``hyper`` moved to an exact GP's values on a seeded sample of (``X``,
    ``targets``) when the fit starts that way (``state.starts_exact``); said, and
    recorded for ``hyperparameter_info_["start"]``."""
    if not state.starts_exact:
        return hyper
    hyper, state.start_record = exact_gp(run, hyper, X, targets)
    record = state.start_record
    if record["method"] == "exact-gp":
        run.say(f"start: an exact GP on {record['rows']} rows, {record['iterations']} "
                f"iterations ({record['seconds']:.1f}s): noise "
                f"{hyper.likelihood['noise_variance']:.3g}, signal "
                f"{hyper.signal_variance:.3g}")
    else:
        run.say(f"start: the data-driven values ({record['reason']})")
    return hyper


def _exact_check_due(run, state, outcome):
    """Whether learning on every row from the data-driven start (where the fit is
    checked at all: ``state.checked_against_exact``), which ended by its stop rule in
    ``outcome``
    (not by a cap or a budget) after work of at least the policy's
    ``exact_check_work_ratio`` times the exact GP's most, is checked against an exact
    GP's start (:func:`_compared_with_exact_start`)."""
    info, n_rows = outcome.info, run.X.shape[0]
    if not state.checked_against_exact or info is None or info.get("stop_reason") not in (
            "energy", "gradient"):
        return False
    work = info["n_evaluations"] * evaluation_flops(*run.cost_terms(n_rows, outcome.basis))
    d = outcome.basis.means.shape[1]
    return work >= policy.POLICY.exact_check_work_ratio * exact_gp_flops(n_rows, d)


def _compared_with_exact_start(run, state, outcome, hyper, X, targets):
    """After learning on every row (``X``, ``targets`` in memory) from the data-driven
    start ``hyper``: where an exact GP's start on a sample has a higher energy than
    where that learning ended, it stopped short (on a plateau before irrelevant inputs
    were switched off), and learning goes on from the exact start; the higher end is
    kept.  Otherwise the outcome stays as it is (the cost: the exact GP and one EP
    run).  Recorded for ``hyperparameter_info_["start"]``."""
    exact, record = exact_gp(run, hyper, X, targets, policy.POLICY.exact_check_max_iter)
    if record["method"] != "exact-gp":
        return outcome
    fit, trainer_for = state.fit, state.trainer_for
    at_exact = fit(trainer_for(X, targets, None, False), exact, None, False,
                   restarts=False, rows=X.shape[0], watched=False)
    record = {**record, "checked_after_learning": True,
              "energy_learnt": float(outcome.log_evidence),
              "energy_at_exact_start": float(at_exact.log_evidence)}
    if not at_exact.log_evidence > outcome.log_evidence:
        state.start_record = {**record, "method": "data", "reason": (
            "learning from the data-driven start ended above the exact GP's start")}
        return outcome
    run.say(f"start: learning ended at energy {outcome.log_evidence:.6g}, below an exact "
            f"GP's start ({at_exact.log_evidence:.6g}); learning from there")
    again = fit(trainer_for(X, targets, None, True), exact, None, True, restarts=False,
                rows=X.shape[0])
    kept = again if again.log_evidence > outcome.log_evidence else outcome
    state.start_record = {**record, "method": "exact-gp" if kept is again else "data"}
    return kept
