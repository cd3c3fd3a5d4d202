"""What a fit says while it runs: EP sweeps, optimiser iterations and phase lines,
on stderr."""

from __future__ import annotations

import sys

__all__ = ["LOUD_ROWS", "phase_printer", "prediction_change_text", "print_hyper",
           "print_sweep", "stop_rule_text"]

# fits of at least this many rows say what they are doing (phase lines on stderr) even
# at verbose=0; verbose=False silences them
LOUD_ROWS = 50_000


def print_sweep(record):
    problem = f"problem {record['problem'] + 1}  " if "problem" in record else ""
    print(f"[saspa] {problem}sweep {record['sweep']:3d}  change {record['change']:.3e}  "
          f"{prediction_change_text(record)}invalid {record['n_invalid']}  "
          f"{record['seconds']:.3f}s", file=sys.stderr, flush=True)


def prediction_change_text(record):
    """The sweep's prediction change (``EPSchedule.prediction_tol``), if measured."""
    change = record.get("prediction_change")
    return "" if change is None else f"predictions {change:.2e}  "


def print_hyper(record):
    start = f"start {record['start']}  " if "start" in record else ""
    change = record.get("relative_change")
    change = "" if change is None else f"  change {change:+.2e}"
    print(f"[saspa] hyperparameter {start}iteration {record['iteration']:3d}  "
          f"energy {record['log_evidence']:.8g}{change}  "
          f"gradient {record['projected_gradient']:.2e}  {stop_rule_text(record)}"
          f"evaluations {record['n_evaluations']}  {record['seconds']:.1f}s",
          file=sys.stderr, flush=True)


def stop_rule_text(record):
    """How far learning's stop rule is: the energy's mean gain per row over the last
    iterations against the tolerance it stops below (``window_gain``, ``tol``)."""
    gain, tol = record.get("window_gain"), record.get("tol")
    if gain is None or not tol:
        return ""
    return f"(gain {gain:.1e}/row, stops below {tol:.0e})  "


def phase_printer(verbose, n_samples):
    """``say(message)``: prints a phase line to stderr when ``verbose`` is on, or for
    fits of at least ``LOUD_ROWS`` rows unless ``verbose=False``; ``say.loud`` says
    whether it prints (optimiser iterations are reported with the phases)."""
    loud = bool(verbose) or (verbose is not False and n_samples >= LOUD_ROWS)

    def say(message):
        if loud:
            print(f"[saspa] {message}", file=sys.stderr, flush=True)

    say.loud = loud
    return say
