"""What EP's tolerance inside learning's evaluations costs in classification.

Each optimiser evaluation runs EP warm-started from the last one's sites to a site
change below a tolerance; the model's EP is then polished to the asked tolerance
(``ep={"tol": 1e-6}`` by default).  For each value of ``--learning-ep-tols`` (put in
``saspa_dask.fitting.policy.POLICY.learning_ep_tol``; 1e-6 is EP at the asked tolerance
throughout, as before the policy), ``SASPAClassifier(random_state=seed)`` with every
other default on seeded random splits of Spambase (log1p), Waveform (3 classes,
one-vs-rest) and a generated two-class set (24,000 x 8): test error and log loss, the
fit's CPU seconds (one BLAS thread), learning's iterations and the model's energy.
Writes ``results/learning_ep.json``.

    python benchmarks/bench_learning_ep.py                 # 3 sets x 3 seeds x 2 tolerances
    python benchmarks/bench_learning_ep.py --quick         # smoke: Spambase, 600 rows, M = 8
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import replace

import numpy as np
from lib import data
from lib.machine import matmul_rate, start_report
from lib.output import add_quick_option, parse, record
from sklearn.metrics import log_loss
from threadpoolctl import threadpool_limits

from saspa_dask import SASPAClassifier
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.fitting import policy


def load(name, seed, rows):
    """(X_train, y_train, X_test, y_test): 70% of the rows (at most ``rows``) to train."""
    if name == "synthetic":
        X, y = synthetic_two_class(24_000, 8, seed=seed)
    elif name == "waveform":
        X, y = data.load_csv("waveform")
        y = y.astype(float).astype(int)
    else:
        X, y = data.spambase()
    n_train = int(0.7 * len(y)) if rows is None else rows
    return data.random_split(X, y, n_train, seed, n_test=None if rows is None else rows)


def one_fit(split, learning_ep_tol, seed, n_bases):
    Xtr, ytr, Xte, yte = split
    extra = {} if n_bases is None else {"n_bases": n_bases}
    default = policy.POLICY
    policy.POLICY = replace(default, learning_ep_tol=learning_ep_tol)
    try:
        with warnings.catch_warnings(), threadpool_limits(1):
            warnings.simplefilter("ignore")  # cap warnings: the stop reason is recorded
            began = time.process_time()
            model = SASPAClassifier(random_state=seed, **extra).fit(Xtr, ytr)
            cpu = time.process_time() - began
            proba = model.predict_proba(Xte)
    finally:
        policy.POLICY = default
    info = model.hyperparameter_info_
    return {"learning_ep_tol": learning_ep_tol, "seed": seed, "cpu_seconds": cpu,
            "error": float(np.mean(model.classes_[proba.argmax(1)] != yte)),
            "log_loss": float(log_loss(yte, proba, labels=model.classes_)),
            "iterations": info.get("n_iterations"), "energy": float(model.log_evidence_)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["spambase", "waveform", "synthetic"])
    parser.add_argument("--learning-ep-tols", type=float, nargs="+", default=[1e-6, 1e-4])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--bases", type=int, default=None, help="default: the estimator's")
    parser.add_argument("--rows", type=int, default=None, help="training (and test) rows")
    parser.add_argument("--out", default="learning_ep.json")
    add_quick_option(parser, sets=["spambase"], seeds=[0], bases=8, rows=600)
    args = parse(parser)
    report = start_report(args, rate=lambda: matmul_rate(threads=1), runs=[])
    for name in args.sets:
        for seed in args.seeds:
            split = load(name, seed, args.rows)
            for tol in args.learning_ep_tols:
                run = {"set": name, **one_fit(split, tol, seed, args.bases)}
                record(report, run, args.out)
    print("\n| set | seed | learning EP tol | error | log loss | CPU s | iterations | energy |")
    print("|---|---|---|---|---|---|---|---|")
    for r in report["runs"]:
        print(f"| {r['set']} | {r['seed']} | {r['learning_ep_tol']:g} | {r['error']:.4f} | "
              f"{r['log_loss']:.4f} | {r['cpu_seconds']:.1f} | {r['iterations']} | "
              f"{r['energy']:.2f} |")


if __name__ == "__main__":
    main()
