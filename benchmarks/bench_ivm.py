"""The IVM as a usable baseline: Ionosphere error over random splits.

200 training / 151 test rows per split (inputs standardised on the training rows),
``IVMClassifier(n_bases=M, **variant)`` for each M of ``--budgets`` and each variant:
the defaults (bias kernel, kernel learnt by the IVM's evidence, one lengthscale factor,
fixed box), ARD lengthscales, no bias kernel, and a fixed kernel (the data's starting
values, nothing learnt).  Reported per (M, variant): the mean test error, its standard
deviation and range over the splits, the mean NLP and the fit's process CPU seconds
(the machine may be shared).  The majority class's error is printed for reference.
Writes ``results/ivm.json``.

    python benchmarks/bench_ivm.py                 # 20 splits, M = 16, 32, 64
    python benchmarks/bench_ivm.py --quick         # smoke: 2 splits, M = 16
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
from lib import data, machine, metrics, output
from lib.machine import matmul_rate


VARIANTS = {
    "defaults": {},
    "ARD": {"ard": True},
    "no bias kernel": {"fit_bias": False},
    "fixed kernel": {"optimize_hyperparameters": False},
}


def run(X, y, M, variant, n_splits):
    from saspa_dask import IVMClassifier

    errors, nlps, cpu = [], [], 0.0
    for seed in range(n_splits):
        Xtr, ytr, Xte, yte = data.random_split(X, y, 200, seed)
        start = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = IVMClassifier(n_bases=M, **VARIANTS[variant]).fit(Xtr, ytr)
        cpu += time.process_time() - start
        error, nlp = metrics.error_and_nlp(model.predict_proba(Xte)[:, 1], yte)
        errors.append(error)
        nlps.append(nlp)
    e = np.array(errors)
    return {"M": M, "variant": variant, "error": float(e.mean()), "error_sd": float(e.std()),
            "error_min": float(e.min()), "error_max": float(e.max()),
            "nlp": float(np.mean(nlps)), "cpu_s": cpu, "errors": errors}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--budgets", default="16,32,64")
    parser.add_argument("--quick", action="store_true")
    args = output.parse(parser)
    if args.quick:
        args.splits, args.budgets = 2, "16"
    report = machine.start_report(args, matmul_rate)
    X, y = data.ionosphere()
    majority = max(np.mean(y), 1 - np.mean(y))
    print(f"Ionosphere: {len(y)} rows; always the majority class: error {1 - majority:.3f}")
    rows = []
    for M in map(int, args.budgets.split(",")):
        for variant in VARIANTS:
            row = run(X, y, M, variant, args.splits)
            rows.append(row)
            print(f"| {M} | {variant} | {row['error']:.3f} +- {row['error_sd']:.3f} "
                  f"({row['error_min']:.3f}-{row['error_max']:.3f}) | {row['nlp']:.3f} | "
                  f"{row['cpu_s']:.1f} |", flush=True)
    output.RESULTS.mkdir(parents=True, exist_ok=True)
    report.update(majority_error=float(1 - majority), runs=rows)
    (output.RESULTS / "ivm.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
