"""Learnt bases at scale: 10^6 rows, d = 8, M = 256, end to end through the ``saspa``
command, against a fixed-hyperparameter fit and GPyTorch's SVGP (issue 14).

The data are ``saspa make-data --kind multiscale-regression`` (structure at several
length scales, input 8 irrelevant, noise standard deviation 0.1 of the signal's): a
training store of ``--rows`` rows (seed 0) and a test store of ``--test-rows`` (seed 1).
Timed, each as its own process on the embedded cluster of ``--workers`` workers:

* ``saspa train --task regression --n-bases M`` (fixed hyperparameters: the data-driven
  defaults, noise variance from the targets);
* ``saspa train --learn-bases means`` (hyperparameters and basis means learnt on the
  default 20,000-row subsample, then EP on all rows);

then ``saspa evaluate`` of each on the test store.  SVGP (ARD RBF, M inducing inputs
from the same K-means start, Adam lr 0.01, batch 1024, float32, targets standardised)
trains on all rows and is scored after the wall time of the learnt fit and after
``--svgp-minutes``.  The float64 matmul rate is measured at the start, in the same run.
Writes results/learnt_scale.json.

    python benchmarks/bench_learnt_scale.py                     # 10^6 rows, M = 256
    python benchmarks/bench_learnt_scale.py --rows 20000 --test-rows 5000 --bases 16 \\
        --svgp-minutes 0.2                                      # a smoke run
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from lib import commands, output, svgp
from lib.commands import BIN
from lib.machine import machine, matmul_rate, versions



def saspa_fits(work, args):
    """The fixed and the learnt fit, timed end to end, and their test metrics."""
    train, test = work / "train.zarr", work / "test.zarr"
    common_args = ["--task", "regression", "--n-bases", args.bases, "--blur", args.blur,
                   "--workers", args.workers, "--overwrite", *args.train_args]
    fits = {}
    for name, extra in (("fixed", []), ("learnt_means", ["--learn-bases", "means"])):
        model = work / f"{name}.zarr"
        res, seconds = commands.timed([BIN / "saspa", "train", train, "--out", model,
                               *common_args, *extra])
        info = commands.info(model)
        fits[name] = {"seconds": seconds, **commands.evaluate(model, test),
                      "noise_variance": info["likelihood"].get("noise_variance"),
                      "hyperparameters": info["hyperparameters"]["info"],
                      "sweeps": info["ep"]["n_sweeps"],
                      "warnings": [ln for ln in res.stderr.splitlines()
                                   if ln.startswith("warning")]}
        print(json.dumps({name: fits[name]}), flush=True)
    return fits


def svgp_run(work, args, budgets, lr=0.01, regression=True, test="test.zarr"):
    """SVGP on all training rows, scored on the test rows at each wall-time budget
    (seconds of its optimiser steps); classification (``regression=False``) uses the
    Bernoulli (probit) likelihood on 0/1 labels."""
    import zarr

    from saspa_dask import kmeans_bases

    tr = zarr.open_group(str(work / "train.zarr"), mode="r")
    te = zarr.open_group(str(work / test), mode="r")
    Xtr, ytr = tr["X"][...], tr["y"][...]
    Xte, yte = te["X"][...], te["y"][...]
    my, sy = (ytr.mean(), ytr.std()) if regression else (0.0, 1.0)
    centres = kmeans_bases(Xtr, args.bases, random_state=0).means
    rows, _, _ = svgp.train(
        Xtr, (ytr - my) / sy, centres, budgets, regression=regression, batch=args.batch,
        lr=lr, threads=args.workers,
        score=lambda m, lik: svgp.scores(m, lik, Xte, yte, regression, my, sy),
        report=lambda row: print(json.dumps({"svgp": row}), flush=True))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands.add_data_options(parser)
    parser.add_argument("--blur", default="full")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--svgp-minutes", type=float, default=20.0)
    parser.add_argument("--no-svgp", action="store_true")
    parser.add_argument("--train-args", nargs="*", default=[],
                        help="further `saspa train` options for both fits")
    parser.add_argument("--out", default="learnt_scale.json", help="file under results/")
    output.add_outdir_option(parser)
    output.add_quick_option(parser, rows=4000, test_rows=1000, bases=8, svgp_minutes=0.05,
                            chunk_rows=1000, train_args=["--max-hyper-iter", "10"])
    args = parser.parse_args()
    output.use_outdir(args)
    report = {"machine": machine(), "versions": versions("torch", "gpytorch"),
              "matmul_gflops": matmul_rate() / 1e9, "args": vars(args)}
    print(f"float64 matmul: {report['matmul_gflops']:.1f} GFLOP/s", flush=True)
    with tempfile.TemporaryDirectory(prefix="saspa-learnt-scale-") as tmp:
        work = Path(tmp)
        report["noise_sd"] = commands.make_data(work, args)
        fits = saspa_fits(work, args)
        report["saspa"] = fits
        report["learning_cost"] = fits["learnt_means"]["seconds"] / fits["fixed"]["seconds"]
        if not args.no_svgp:
            budgets = [fits["learnt_means"]["seconds"], 60 * args.svgp_minutes]
            report["svgp"] = svgp_run(work, args, budgets)
    output.RESULTS.mkdir(parents=True, exist_ok=True)
    (output.RESULTS / args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps({k: report[k] for k in ("matmul_gflops", "noise_sd", "learning_cost")}))


if __name__ == "__main__":
    main()
