"""How many sweeps EP on all rows needs as N grows (issue 59), in this process.

The README's generator (``saspa make-data``: two Gaussian classes with full
covariances, 8 inputs, nearly separable), ``SASPAClassifier`` with its defaults (learning
on a 20,000-row sample, then parallel EP on all rows, stopped when its predictions
settle) and ``random_state=0``, for each N of ``--rows`` and each ``--bases`` (``auto``:
the estimator's own M), each EP schedule of ``--schedules`` (JSON objects passed as
``ep=``) and each generator seed of ``--seeds`` (a data set each).  Reported per run: the sweeps on all rows and why they stopped, each sweep's
scale-free site change (a max over rows) and prediction residual (mean KL over the probe
rows), damping and Anderson per sweep, the coarse-start levels, the error on 20,000
held-out rows of the generator, and EP's seconds a sweep against the 2 N M^2 float64
matmul limit measured at the start.  Writes ``results/ep_sweeps.json``.

    python benchmarks/bench_ep_sweeps.py                           # 10^5, 3x10^5, 10^6
    python benchmarks/bench_ep_sweeps.py --rows 1e6 --bases 128 --schedules '{}' '{"damping": 0.5}'
    python benchmarks/bench_ep_sweeps.py --quick                   # smoke: 6,000 rows
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import warnings

import numpy as np
from lib.machine import matmul_rate, start_report
from lib.output import add_quick_option, parse, save

from saspa_dask import SASPAClassifier
from saspa_dask.datasets import synthetic_two_class

HELD_OUT = 20_000


def one_run(n_rows, n_bases, schedule, rate, seed=0):
    X, y = synthetic_two_class(n_rows + HELD_OUT, 8, seed)
    X_test, y_test, X, y = X[:HELD_OUT], y[:HELD_OUT], X[HELD_OUT:], y[HELD_OUT:]
    extra = {} if n_bases == "auto" else {"n_bases": int(n_bases)}
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = SASPAClassifier(random_state=0, verbose=0, ep=schedule or None,
                                **extra).fit(X, y)
    seconds = time.perf_counter() - began
    history = model.history_
    M = model.bases_.n_bases
    sweep_seconds = [r["seconds"] for r in history]
    limit = 2 * n_rows * M * M / rate
    return {"rows": n_rows, "seed": seed, "n_bases": M, "schedule": schedule,
            "sweeps": model.n_sweeps_, "stop": model.ep_stop_reason_,
            "change": [r["change"] for r in history],
            "prediction_change": [r.get("prediction_change") for r in history],
            "damping": [r["damping"] for r in history],
            "anderson": [bool(r.get("anderson")) for r in history],
            "coarse_start": model.coarse_start_,
            "error": float(np.mean(model.predict(X_test) != y_test)),
            "signal_variance": float(model.signal_variance_),
            "seconds": seconds,
            "sweep_over_matmul_limit": float(np.median(sweep_seconds) / limit)}


def table(runs):
    lines = ["| N | seed | M | ep | sweeps | stop | damping at end | Anderson steps | coarse "
             "levels (rows: sweeps) | held-out error | sweep / matmul limit |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        coarse = ", ".join(f"{c['rows']}: {c['sweeps']}" for c in r["coarse_start"]) or "-"
        lines.append(f"| {r['rows']:,} | {r['seed']} | {r['n_bases']} | "
                     f"{json.dumps(r['schedule'])} | "
                     f"{r['sweeps']} | {r['stop']} | {r['damping'][-1]:g} | "
                     f"{sum(r['anderson'])} | {coarse} | {r['error']:.5f} | "
                     f"{r['sweep_over_matmul_limit']:.1f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", nargs="+", type=float, default=[1e5, 3e5, 1e6])
    parser.add_argument("--bases", nargs="+", default=["auto"])
    parser.add_argument("--schedules", nargs="+", default=["{}"],
                        help="EP schedules as JSON objects (ep=)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0],
                        help="the generator's seeds (each a data set)")
    parser.add_argument("--out", default="ep_sweeps.json")
    add_quick_option(parser, rows=[6000], bases=["8"])
    args = parse(parser)
    rate = matmul_rate()
    report = start_report(args, rate=lambda: rate, runs=[])
    for n_rows, n_bases, schedule, seed in itertools.product(args.rows, args.bases,
                                                            args.schedules, args.seeds):
        report["runs"].append(one_run(int(n_rows), n_bases, json.loads(schedule), rate,
                                      seed))
        save(report, args.out)
    print(json.dumps(report["runs"], indent=1))
    print(table(report["runs"]))


if __name__ == "__main__":
    main()
