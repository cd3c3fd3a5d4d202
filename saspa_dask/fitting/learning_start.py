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
starts, the higher evidence kept").

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
    """``plan.run(X, targets, likelihood, **kwargs)`` from the plan's learning start.

    ``"variational"``: learning at ``policy.POLICY.variational_alpha`` with delta bases
    (every other choice the plan's), then on at the plan's alpha from its bases (kept
    where they are), lengthscales, signal and noise variances.  ``"both"``: that, and
    the plan from the data-driven start; the fit with the higher EP evidence is kept.
    The kept fit's warnings are raised; the report's ``hyperparameter_info_["start"]``
    says which start was kept, with each fit's evidence, iterations and seconds, and
    ``timings_["other_starts"]`` the seconds of the fits not kept.
    """
    if plan.learning_start == "data" or not plan.optimize_hyperparameters:
        return plan.run(X, targets, likelihood, **kwargs)
    say = phase_printer(plan.verbose, X.shape[0])
    fits = {"variational": _variational(plan, X, targets, likelihood, say, **kwargs)}
    if plan.learning_start == "both":
        say("learning from the data-driven start, to compare")
        fits["data"] = _quietly(lambda: plan.run(X, targets, likelihood, **kwargs))
    kept = max(fits, key=lambda name: _evidence(fits[name][0]))
    result, caught, record = fits[kept]
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename,
                               warning.lineno)
    info = result.report.setdefault("hyperparameter_info_", {})
    info["start"] = {**info.get("start", {}), "learning_start": plan.learning_start,
                     "kept": kept, "fits": {name: fit[2] for name, fit in fits.items()}}
    timings = result.report.setdefault("timings_", {})
    # the kept fit's own timings cover its last run: the rest is the other runs'
    timings["other_starts"] = (sum(fit[2]["seconds"] for fit in fits.values())
                               - record["seconds"] + record.get("first_seconds", 0.0))
    if len(fits) > 1:
        say(f"kept the {kept} start: log evidence "
            + ", ".join(f"{name} {_evidence(fit[0]):.6g}" for name, fit in fits.items()))
    return result


def _variational(plan, X, targets, likelihood, say, **kwargs):
    """Learning near the variational fit, then at the plan's alpha from its values:
    (the second fit's result, its warnings, the record of both)."""
    say(f"learning near the variational fit first (alpha "
        f"{policy.POLICY.variational_alpha:g}, delta bases)")
    near = replace(plan, alpha=policy.POLICY.variational_alpha, blur="delta",
                   learning_start="data")
    first, _, first_record = _quietly(lambda: near.run(
        X, targets, likelihood, **{**kwargs, "init_sites": None, "held_out": None}))
    fitted = first.posterior
    say(f"learning on at alpha {plan.alpha:g} from its values")
    on = replace(plan, blur="delta", bases=Basis(fitted.means, None),
                 lengthscale=np.array(fitted.lengthscale), exact_start=False,
                 learning_start="data")
    result, caught, record = _quietly(lambda: on.run(
        X, targets, likelihood.with_hyperparameters(fitted.likelihood_params),
        **{**kwargs, "signal_variance": float(fitted.signal_variance)}))
    if "kmeans_info_" in first.report:  # the bases' K-means ran in the first fit
        result.report["kmeans_info_"] = first.report["kmeans_info_"]
    record.update(seconds=record["seconds"] + first_record["seconds"],
                  **{f"first_{key}": first_record[key] for key in
                     ("seconds", "n_iterations", "log_evidence", "n_invalid_cavities")})
    return result, caught, record


def _quietly(fit):
    """``fit()``'s result, the warnings it raised (held back until the kept fit is
    known) and its record: evidence, iterations, EP's invalid cavities (a fit not
    kept reports its EP problems here), seconds."""
    began = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit()
    info = result.report.get("hyperparameter_info_", {})
    return result, list(caught), {"log_evidence": _recorded(_evidence(result)),
                                  "n_iterations": info.get("n_iterations"),
                                  "n_invalid_cavities": result.report.get(
                                      "n_invalid_cavities_"),
                                  "seconds": time.perf_counter() - began}


def _recorded(evidence):
    """An evidence as the report keeps it (JSON: None where there is none)."""
    return evidence if np.isfinite(evidence) else None


def _evidence(result):
    """The fit's EP log evidence (NaN, where it has none, never kept over a number)."""
    value = float(result.report.get("log_evidence_", np.nan))
    return -np.inf if np.isnan(value) else value
