"""Where regression's learning starts: from the data, from near the variational fit,
or from both with the higher EP evidence kept.

Learning FITC-EP's evidence from the data-driven start (K-means bases, the data's
scales) can end on a poor optimum: on Pole Telecomm, with delta bases, the noise on its
floor, the residual taken by FITC's per-row variance and the test RMSE 0.23, beside an
optimum of about the same evidence at 0.13 (reached from SGPR's values).  Power EP at a
small alpha is near Titsias' variational fit, whose objective does not reward a
collapsed noise: learning there first (delta bases), then on at the plan's alpha from
its bases and values, ends near the better optimum.  Elsewhere the data-driven start's
optimum is the better one.
Both end at the plan's alpha, so their EP evidences compare: the higher picked the
better held-out NLPD in every pair measured (``benchmarks/RESULTS.md``, "Two learning
starts, the higher evidence kept"), and, where they are far apart, already after a
few dozen iterations of each:
``"race"`` learns the variational start that far, then the data's start, which stops
at that iteration if it is behind by more than a margin; the leader learns on (both,
where the data's start was behind by less).

:func:`run_plan` is what the estimators call: :meth:`FitPlan.run` itself for
``learning_start="data"``, else the fits above, one after the other.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np

from ..core.bases import Basis
from . import policy
from .progress import phase_printer

__all__ = ["run_plan"]


def run_plan(plan, X, targets, likelihood, **kwargs):
    """``plan.run(X, targets, likelihood, **kwargs)`` from the plan's learning start
    (``"auto"``: :meth:`FitPlan.chosen_learning_start`).

    ``"variational"``: learning at ``policy.POLICY.variational_alpha`` with delta bases
    (every other choice the plan's), then on at the plan's alpha from its bases (kept
    where they are), lengthscales, signal and noise variances.  ``"both"``: that, and
    the plan from the data-driven start; the fit with the higher EP evidence is kept.
    ``"race"``: the variational start cut short (its first fit's learning capped at
    ``policy.POLICY.race_iterations`` iterations, without the exact GP's check, its
    second at ``race_second_iterations``), then the data's start as ``"data"`` learns,
    stopped at that iteration if its energy per row is below the variational
    start's by more than ``race_margin``; where that start leads, its first fit
    learns on from where its cap stopped it (its learnt constant mean too), then its
    second, each within the plan's ``max_hyper_iter``, and the higher evidence of the
    two starts is kept (the data's, learnt on, where it was behind by less).
    The kept fit's warnings are raised; the report's ``hyperparameter_info_["start"]``
    says which start was kept, with each fit's evidence, iterations and seconds, and
    ``timings_["other_starts"]`` the seconds of the fits not kept.
    """
    asked = plan.learning_start
    plan = replace(plan, learning_start=plan.chosen_learning_start(likelihood, X.shape[0]))
    if plan.learning_start == "data" or not plan.optimize_hyperparameters:
        return plan.run(X, targets, likelihood, **kwargs)
    say = phase_printer(plan.verbose, X.shape[0])
    if plan.learning_start == "race":
        fits, kept = _race(plan, X, targets, likelihood, say, **kwargs)
    else:
        first = _near_fit(_near_plan(plan, None), X, targets, likelihood, say, **kwargs)
        fits = {"variational": _at_alpha(plan, first, None, X, targets, likelihood, say,
                                         **kwargs)}
        if plan.learning_start == "both":
            say("learning from the data-driven start, to compare")
            fits["data"] = _quietly(lambda: plan.run(X, targets, likelihood, **kwargs))
        kept = _leader(fits)
        if len(fits) > 1:
            say(f"kept the {kept} start: " + _evidences(fits))
    result, caught, record = fits[kept]
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename,
                               warning.lineno)
    info = result.report.setdefault("hyperparameter_info_", {})
    info["start"] = {**info.get("start", {}), "learning_start": plan.learning_start,
                     "asked": asked, "kept": kept,
                     "fits": {name: fit[2] for name, fit in fits.items()}}
    timings = result.report.setdefault("timings_", {})
    # the kept fit's own timings cover its last run: the rest is the other runs'
    timings["other_starts"] = (sum(fit[2]["seconds"] for fit in fits.values())
                               - record["last_seconds"])
    return result


def _race(plan, X, targets, likelihood, say, **kwargs):
    """The variational start cut short, then the data's start checked against it at
    the same iteration, then the leader learnt on (:func:`run_plan`): (name ->
    (result, warnings, record), the leader's name)."""
    cap = min(policy.POLICY.race_iterations, plan.max_hyper_iter)
    second_cap = min(policy.POLICY.race_second_iterations, plan.max_hyper_iter)
    short = {**kwargs, "held_out": None}  # the kept fit's held-out trace only
    say(f"a race of two learning starts, the variational one cut at {cap} iterations")
    near = replace(_near_plan(plan, cap), exact_start=False)
    first = _near_fit(near, X, targets, likelihood, say, **short)
    fits = {"variational": _at_alpha(plan, first, second_cap, X, targets, likelihood, say,
                                     **short)}
    # the data's start learns as "data" does, unless its energy per row is behind at
    # the same iteration by more than the margin (the variational start's is over the
    # same rows where learning sees them all, a sample's per row otherwise)
    variational_per_row = _evidence(fits["variational"][0]) / X.shape[0]
    say(f"learning from the data-driven start (stopped at iteration {cap} if behind by "
        f"more than {policy.POLICY.race_margin:g} a row)")
    checked = replace(plan, learning_start="data",
                      race_checkpoint=(cap, variational_per_row - policy.POLICY.race_margin))
    fits["data"] = _quietly(lambda: checked.run(X, targets, likelihood, **kwargs))
    kept = _leader(fits)
    say(f"the {kept} start leads: " + _evidences(fits))
    if kept == "variational" or _behind_at(fits["data"][0], cap, variational_per_row):
        race = fits["variational"][2]
        first = _learn_on(near, first, plan.max_hyper_iter, X, targets, likelihood, say,
                          **{**kwargs, "init_sites": None, "held_out": None})
        going = _at_alpha(plan, first, None, X, targets, likelihood, say, **kwargs)
        going[2].update({f"race_{key}": race[key] for key in
                         ("seconds", "n_iterations", "log_evidence", "first_log_evidence")},
                        continued=True)
        going[2]["seconds"] += race["seconds"] - race["first_seconds"]  # its capped second
        fits["variational"] = going
        kept = _leader(fits)  # both learnt on where the data's start was near behind
    return fits, kept


def _behind_at(result, iteration, per_row):
    """Whether the fit's energy per row at ``iteration`` of its learning was below
    ``per_row``, as the race's checkpoint compares it: over the rows it learnt on
    there (a sample's, where learning ran on one), at the first stage that got that far
    (False where none did)."""
    info = result.report.get("hyperparameter_info_") or {}
    stages = info.get("stages") or [{"rows": info.get("n_rows_learnt")}]
    for record in result.report.get("hyperparameter_trace_") or []:
        if record["iteration"] == iteration:
            rows = stages[record.get("stage", 0)]["rows"]
            return record["log_evidence"] / rows < per_row
    return False


def _near_plan(plan, cap):
    """The plan of learning near the variational fit (``cap``: its ``max_hyper_iter``,
    None: the plan's)."""
    return replace(plan, alpha=policy.POLICY.variational_alpha, blur="delta",
                   learning_start="data", max_hyper_iter=cap or plan.max_hyper_iter)


def _near_fit(near, X, targets, likelihood, say, **kwargs):
    """Learning by the plan ``near`` (:func:`_near_plan`), cold and unwatched:
    (result, warnings, record)."""
    say(f"learning near the variational fit first (alpha "
        f"{policy.POLICY.variational_alpha:g}, delta bases)")
    return _quietly(lambda: near.run(
        X, targets, likelihood, **{**kwargs, "init_sites": None, "held_out": None}))


def _at_alpha(plan, first, cap, X, targets, likelihood, say, **kwargs):
    """Learning at the plan's alpha from the ``first`` fit's values (its bases kept
    where they are; ``cap``: the ``max_hyper_iter``, None: the plan's): (result,
    warnings, the record of both)."""
    first, _, first_record = first
    fitted = first.posterior
    say(f"learning on at alpha {plan.alpha:g} from its values")
    on = replace(plan, blur="delta", bases=Basis(fitted.means, None),
                 lengthscale=np.array(fitted.lengthscale), exact_start=False,
                 learning_start="data", max_hyper_iter=cap or plan.max_hyper_iter)
    result, caught, record = _quietly(lambda: on.run(
        X, targets, likelihood.with_hyperparameters(fitted.likelihood_params),
        **{**kwargs, "signal_variance": float(fitted.signal_variance)}))
    _keep_kmeans_info(result, first)
    record.update(seconds=record["seconds"] + first_record["seconds"],
                  **{f"first_{key}": first_record[key] for key in
                     ("seconds", "n_iterations", "log_evidence", "n_invalid_cavities",
                      "resumed_log_evidence") if key in first_record})
    return result, caught, record


def _learn_on(capped, fit, max_iterations, X, targets, likelihood, say, **kwargs):
    """The ``capped`` plan's ``fit`` learnt on from its values where the cap stopped
    it (bases learnt as that plan learnt them, its blur family kept), within
    ``max_iterations`` over both runs; its record counts both."""
    result, caught, record = fit
    if not _capped(fit):
        return fit  # it converged within the race
    fitted, used = result.posterior, int(record["n_iterations"] or 0)
    say("learning on from its values")
    on = replace(capped, blur=result.report["blur_"], bases=Basis(fitted.means, fitted.covs),
                 learn_bases=capped.learnt_bases, lengthscale=np.array(fitted.lengthscale),
                 exact_start=False, max_hyper_iter=max(max_iterations - used, 1))
    # the learnt constant mean goes on from its value: the targets' centre moves to it
    offset = kwargs.get("offset", 0.0)
    shift = float(fitted.offset) - offset
    going = _quietly(lambda: on.run(
        X, targets - shift, likelihood.with_hyperparameters(fitted.likelihood_params),
        **{**kwargs, "signal_variance": float(fitted.signal_variance),
           "offset": offset + shift}))
    _keep_kmeans_info(going[0], result)
    going[2].update(seconds=record["seconds"] + going[2]["seconds"],
                    n_iterations=used + (going[2]["n_iterations"] or 0),
                    resumed_log_evidence=going[0].report.get("hyperparameter_info_", {})
                    .get("log_evidence_start"))
    return going


def _keep_kmeans_info(result, earlier):
    """``result`` reports the K-means of the ``earlier`` fit its bases came from."""
    if "kmeans_info_" in earlier.report:
        result.report["kmeans_info_"] = earlier.report["kmeans_info_"]


def _capped(fit):
    """Whether ``fit`` (result, warnings, record) was stopped by its iteration cap."""
    return bool(fit[0].report.get("hyperparameter_info_", {}).get("hit_iteration_cap"))


def _leader(fits):
    return max(fits, key=lambda name: _evidence(fits[name][0]))


def _evidences(fits):
    return "log evidence " + ", ".join(f"{name} {_evidence(fit[0]):.6g}"
                                       for name, fit in fits.items())


def _quietly(fit):
    """``fit()``'s result, the warnings it raised (held back until the kept fit is
    known) and its record: evidence, iterations, EP's invalid cavities (a fit not
    kept reports its EP problems here), seconds (``last_seconds``: this run's, which
    the kept fit's own timings cover, where ``seconds`` adds its earlier runs)."""
    began = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit()
    seconds = time.perf_counter() - began
    info = result.report.get("hyperparameter_info_", {})
    return result, list(caught), {"log_evidence": _recorded(_evidence(result)),
                                  "n_iterations": info.get("n_iterations"),
                                  "n_invalid_cavities": result.report.get(
                                      "n_invalid_cavities_"),
                                  "seconds": seconds, "last_seconds": seconds}


def _recorded(evidence):
    """An evidence as the report keeps it (JSON: None where there is none)."""
    return evidence if np.isfinite(evidence) else None


def _evidence(result):
    """The fit's EP log evidence (NaN, where it has none, never kept over a number)."""
    value = float(result.report.get("log_evidence_", np.nan))
    return -np.inf if np.isnan(value) else value
