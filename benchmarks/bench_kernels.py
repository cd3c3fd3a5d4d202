"""Matérn kernels against SE with the estimators' defaults on the shared data sets,
side by side in one run, with HistGradientBoosting beside them.

Per set and split (``bench_defaults``' splits: regression 20% test and at most
``--train-rows`` training rows, standardised; Ionosphere 200 training rows, Spambase
2761 / 1840 with log1p), M bases (default 64): ``SASPARegressor(M, kernel=K,
random_state=0)`` / ``SASPAClassifier(...)`` for each kernel K, scored by RMSE and
NLPD (regression) or error and NLP (classification), with the fit's CPU seconds
(``time.process_time``: all threads of the process, so the comparison holds on a
shared machine).  Writes results/kernels.json after every split.

    python benchmarks/bench_kernels.py                     # 6 sets, 3 splits, M = 64
"""

from __future__ import annotations

import argparse
import json

from bench_defaults import CLASSIFICATION, fit_hgb, fit_saspa, split_of
from lib import machine, output
from lib.data import SETS
from lib.machine import matmul_rate
from lib.output import save

KERNELS = ("se", "matern52", "matern32", "matern12")


def one_split(name, seed, args):
    Xtr, ytr, Xte, yte = split_of(name, seed, args.train_rows)
    run = {"set": name, "split": seed, "M": args.bases, "n_train": len(ytr),
           "d": Xtr.shape[1]}
    for kernel in args.kernels:
        run[kernel] = fit_saspa(name, Xtr, ytr, Xte, yte, args.bases, {"kernel": kernel})
    run["hgb"] = fit_hgb(name, Xtr, ytr, Xte, yte)
    return run


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=[*SETS, *CLASSIFICATION])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--bases", type=int, default=64)
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--first-split", type=int, default=0)
    parser.add_argument("--train-rows", type=int, default=10_000)
    parser.add_argument("--out", default="kernels.json", help="file under results/")
    output.add_quick_option(parser, sets=["cpu_act", "ionosphere"], bases=8, splits=1,
                            train_rows=500)
    args = output.parse(parser)
    report = machine.start_report(args, matmul_rate, runs=[])
    for name in args.sets:
        for seed in range(args.first_split, args.first_split + args.splits):
            report["runs"].append(one_split(name, seed, args))
            print(json.dumps(report["runs"][-1]), flush=True)
            save(report, args.out)


if __name__ == "__main__":
    main()
