"""What stochastic learning records as it goes: the energy per row of its steps and
of each epoch's anchor (the stop rule reads them), each epoch's record for the trace,
and ``hyperparameter_info_`` in the full-batch optimiser's keys."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from . import policy

__all__ = ["Progress", "epoch_record", "learning_info"]


@dataclass
class Progress:
    """Energy estimates per row: every step's, and their means per epoch; and the
    energy per row of each epoch's anchor (exact at its sites, :meth:`_Learner.anchor`)."""

    steps: list = field(default_factory=list)
    per_epoch: list = field(default_factory=list)
    anchors: list = field(default_factory=list)
    epoch_start: int = 0

    def add(self, value):
        self.steps.append(float(value) if np.isfinite(value) else np.nan)

    def end_epoch(self):
        values = np.array(self.steps[self.epoch_start:])
        finite = values[np.isfinite(values)]
        self.per_epoch.append(float(finite.mean()) if finite.size else -np.inf)
        self.epoch_start = len(self.steps)

    def converged(self, tol, steps_per_epoch=1):
        """The anchors' energy per row gained less than ``tol`` over the last epochs
        that hold policy.POLICY.window_steps steps (two at least)."""
        window = max(2, math.ceil(policy.POLICY.window_steps / max(steps_per_epoch, 1)))
        if len(self.anchors) <= window:
            return False
        return bool(self.anchors[-1] - self.anchors[-1 - window] < tol)





_MESSAGES = {"energy": f"converged: the energy per row rose by less than tol over the "
                       f"last epochs of {policy.POLICY.window_steps} steps",
             "cap": "stopped at max_epochs", "time": "stopped by the time budget"}


def epoch_record(epoch, steps, rows_seen, progress, N, hyper, t0):
    """An epoch's record, shaped as the full-batch optimiser's iterations (the energy
    is the last anchor's, exact at its sites; the epoch's mean minibatch estimate when
    the epoch made none)."""
    per_row = progress.anchors[-1] if progress.anchors else progress.per_epoch[-1]
    energy = per_row * N
    previous = progress.per_epoch[-2] * N if len(progress.per_epoch) > 1 else None
    if len(progress.anchors) > 1:
        previous = progress.anchors[-2] * N
    return {"iteration": epoch, "epoch": epoch, "steps": steps, "rows": rows_seen,
            "log_evidence": float(energy), "energy_per_row": per_row,
            "relative_change": None if previous is None else float((energy - previous) / N),
            "projected_gradient": None, "hyperparameters": hyper.as_dict(),
            "n_evaluations": steps, "seconds": time.perf_counter() - t0}


def learning_info(stop_reason, schedule, trace, steps, epochs, rows_seen, n_rejected, n_invalid,
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
