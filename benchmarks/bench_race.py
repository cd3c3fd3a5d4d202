"""Time to accuracy at 10^6 rows: SASPA under wall-time budgets against GPyTorch's SVGP.

The data are ``bench_learnt_scale``'s (``saspa make-data --kind multiscale-regression``,
d = 8, 10^6 training rows with seed 0, 10^5 test rows with seed 1, 65,536-row chunks).
For each budget of ``--budgets`` (seconds of wall time) one ``saspa train`` process, timed
end to end on the embedded cluster of ``--workers`` workers (cluster start, K-means,
learning, EP on all rows, save), with ``--max-fit-time`` set to the budget less the
overhead a fixed-hyperparameter fit of the same data measured first in this run, and
learning in stages (``--hyper-subsample 20000,100000,all``, the defaults otherwise: learnt
means, hyper_tol 1e-4).  Then ``saspa evaluate`` on the test store.

SVGP (ARD RBF, M inducing inputs from the same K-means start, Adam lr 0.01, batch 1024,
float32, standardised targets; ``bench_learnt_scale.svgp_run``) trains on all rows in
one process and is scored at each SASPA run's measured wall time (equal wall time: its
clock counts optimiser steps only) and after ``--svgp-minutes``.  The float64 matmul
rate is measured at the start.  Writes results/race.json.

    python benchmarks/bench_race.py                       # 10^6 rows, M = 256
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import common
from bench_learnt_bases import save
from bench_learnt_scale import (_evaluate, _info, _timed, add_data_options, make_data,
                                svgp_run)
from bench_train import BIN, matmul_rate
from common import machine, versions


def saspa_run(work, args, extra):
    model = work / "model.zarr"
    res, seconds = _timed([BIN / "saspa", "train", work / "train.zarr", "--out", model,
                           "--task", "regression", "--n-bases", args.bases, "--workers",
                           args.workers, "--overwrite", *extra])
    info = _info(model)
    hyper = info["hyperparameters"]["info"] or {}
    return {"seconds": seconds, **_evaluate(model, work / "test.zarr"),
            "stop_reason": hyper.get("stop_reason"), "iterations": hyper.get("n_iterations"),
            "stages": [{k: s[k] for k in ("rows", "where", "n_iterations", "gain_per_row",
                                          "seconds")} for s in hyper.get("stages", [])],
            "warnings": [ln for ln in res.stderr.splitlines() if ln.startswith("warning")]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_options(parser)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--budgets", type=float, nargs="+", default=[30, 60, 150, 600])
    parser.add_argument("--stages", default="20000,100000,all")
    parser.add_argument("--svgp-minutes", type=float, default=20.0)
    parser.add_argument("--out", default="race.json", help="file under results/")
    common.add_outdir_option(parser)
    args = parser.parse_args()
    common.use_outdir(args)
    report = {"machine": machine(), "versions": versions("torch", "gpytorch"),
              "matmul_gflops": matmul_rate() / 1e9, "args": vars(args), "saspa": []}
    print(f"float64 matmul: {report['matmul_gflops']:.1f} GFLOP/s", flush=True)
    with tempfile.TemporaryDirectory(prefix="saspa-race-") as tmp:
        work = Path(tmp)
        report["noise_sd"] = make_data(work, args)
        fixed = saspa_run(work, args, ["--fixed-hyperparameters"])
        report["fixed"] = fixed
        print(json.dumps({"fixed": fixed}), flush=True)
        for budget in args.budgets:
            learn = max(budget - fixed["seconds"], 1.0)
            row = {"budget": budget, "max_fit_time": learn,
                   **saspa_run(work, args, ["--hyper-subsample", args.stages,
                                            "--max-fit-time", f"{learn:.1f}"])}
            report["saspa"].append(row)
            print(json.dumps({"saspa": row}), flush=True)
            save(report, args.out)
        budgets = [r["seconds"] for r in report["saspa"]] + [60 * args.svgp_minutes]
        report["svgp"] = svgp_run(work, args, budgets)
    save(report, args.out)


if __name__ == "__main__":
    main()
