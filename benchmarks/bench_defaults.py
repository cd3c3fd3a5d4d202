"""The estimators' defaults on the shared data sets: the new ones (learning to
convergence, ``blur="auto"``) against the old ones (20 L-BFGS-B iterations, full blur),
GPyTorch's SVGP at 1x and 5x the new fit's CPU time, and scikit-learn's
HistGradientBoosting, side by side in one run.

Per set and split, M bases (default 64):

* SASPA, new defaults: ``SASPARegressor(M, random_state=0)`` /
  ``SASPAClassifier(M, random_state=0)``;
* SASPA, old defaults: the same with ``blur="full", max_hyper_iter=20, hyper_tol=0``
  (the cap of 20 iterations was the only stop before issue 26);
* SVGP (ARD RBF, M inducing inputs learnt from the same K-means start, minibatch Adam,
  lr 0.01, batch 256, float32; Gaussian or Bernoulli likelihood) scored at 1x and 5x the
  new fit's CPU seconds (its clock counts optimiser steps only, which favours it);
* HistGradientBoosting with its defaults (``random_state=0``): RMSE or error and, for
  classification, NLP from ``predict_proba``; it has no predictive density for
  regression.

Regression sets (``bench_learnt_bases``' loading): 20% test, at most ``--train-rows``
training rows, inputs and target standardised on the training rows.  Classification:
Ionosphere (200 training rows, the rest test) and Spambase (2761 / 1840, log1p), inputs
standardised.  CPU time (``time.process_time``, all threads of the process) is the
budget, so the comparison holds when the machine runs other work too.  Writes
results/defaults.json after every split.

    python benchmarks/bench_defaults.py                    # 3 splits, M = 64
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from lib import data, machine, output
from lib.data import SETS, held_out_split, load_regression
from lib.machine import matmul_rate
from lib.metrics import error_and_nlp, regression_scores
from lib.output import save
from lib.svgp import run_budgets


CLASSIFICATION = {"ionosphere": (data.ionosphere, 200, None),
                  "spambase": (data.spambase, 2761, 1840)}
OLD = {"blur": "full", "max_hyper_iter": 20, "hyper_tol": 0.0}


def split_of(name, seed, train_rows):
    if name in CLASSIFICATION:
        loader, n_train, n_test = CLASSIFICATION[name]
        X, y = loader()
        return data.random_split(X, y, n_train, seed, n_test)
    X, y = load_regression(name)
    return held_out_split(X, y, seed, train_rows)


def fit_saspa(name, Xtr, ytr, Xte, yte, M, settings):
    from saspa_dask import SASPAClassifier, SASPARegressor

    cls = SASPAClassifier if name in CLASSIFICATION else SASPARegressor
    t0, c0 = time.perf_counter(), time.process_time()
    model = cls(M, random_state=0, **settings).fit(Xtr, ytr)
    info = model.hyperparameter_info_
    out = {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
           "blur": model.blur_, "iterations": info["n_iterations"],
           "stop_reason": info.get("stop_reason")}
    if name in CLASSIFICATION:
        out["error"], out["nlp"] = error_and_nlp(model.predict_proba(Xte)[:, 1], yte)
    else:
        mean, var = model.predict_latent(Xte)
        out.update(regression_scores(mean, var + model.noise_variance_, yte))
    return out


def fit_hgb(name, Xtr, ytr, Xte, yte):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    t0, c0 = time.perf_counter(), time.process_time()
    if name in CLASSIFICATION:
        model = HistGradientBoostingClassifier(random_state=0).fit(Xtr, ytr)
        error, nlp = error_and_nlp(model.predict_proba(Xte)[:, 1], yte)
        scores = {"error": error, "nlp": nlp}
    else:
        model = HistGradientBoostingRegressor(random_state=0).fit(Xtr, ytr)
        scores = {"rmse": float(np.sqrt(np.mean((model.predict(Xte) - yte) ** 2)))}
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
            **scores}


def one_split(name, seed, args):
    from saspa_dask import kmeans_bases

    Xtr, ytr, Xte, yte = split_of(name, seed, args.train_rows)
    run = {"set": name, "split": seed, "M": args.bases, "n_train": len(ytr),
           "d": Xtr.shape[1]}
    run["new"] = fit_saspa(name, Xtr, ytr, Xte, yte, args.bases, {})
    run["old"] = fit_saspa(name, Xtr, ytr, Xte, yte, args.bases, OLD)
    cpu = run["new"]["cpu_seconds"]
    centres = kmeans_bases(Xtr, args.bases, random_state=0).means
    run["svgp"] = run_budgets(Xtr, ytr.astype(float), Xte, yte, centres, [cpu, 5 * cpu],
                       by_cpu=True, regression=name not in CLASSIFICATION)
    run["hgb"] = fit_hgb(name, Xtr, ytr, Xte, yte)
    return run


def split_parser(description, out):
    """The arguments of a benchmark over the shared sets' splits (this one's and
    ``bench_kernels``'); more can be added before :func:`run_splits` parses them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sets", nargs="+", default=[*SETS, *CLASSIFICATION])
    parser.add_argument("--bases", type=int, default=64)
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--first-split", type=int, default=0)
    parser.add_argument("--train-rows", type=int, default=10_000)
    parser.add_argument("--out", default=out, help="file under results/")
    output.add_quick_option(parser, sets=["cpu_act", "ionosphere"], bases=8, splits=1,
                            train_rows=500)
    return parser


def run_splits(parser, one_split, *packages):
    """Parse, then ``one_split(set, seed, args)`` for every set and split, the report
    saved after each."""
    args = output.parse(parser)
    report = machine.start_report(args, matmul_rate, *packages, runs=[])
    for name in args.sets:
        for seed in range(args.first_split, args.first_split + args.splits):
            report["runs"].append(one_split(name, seed, args))
            print(json.dumps(report["runs"][-1]), flush=True)
            save(report, args.out)


def main():
    run_splits(split_parser(__doc__.splitlines()[0], "defaults.json"), one_split,
               "torch", "gpytorch")


if __name__ == "__main__":
    main()
