"""Hyperparameter restarts on Ionosphere: does a second evidence maximisation help?

    python benchmarks/bench_restarts.py            # 20 splits of 200 train, M = 16
    python benchmarks/bench_restarts.py --first-split 20   # 20 further splits
    python benchmarks/bench_restarts.py --quick    # 2 splits, M = 4, 3 iterations

SASPA-full on the paper-reproduction splits of ``bench_paper.py`` (same split function,
seeds and K-means seeds), four ways:

* ``default``: one maximisation from the default lengthscales, std * sqrt(d);
* ``start at std``: one maximisation from lengthscales of one standard deviation (1 on
  the standardised inputs; scikit-learn's and GPy's usual start), for diagnosis;
* ``n_restarts_optimizer=1`` and ``=2``: the default start plus restarts spread
  geometrically down to std; the start of highest evidence is kept.

Prints test error, NLP, the log evidence of the chosen hyperparameters (mean over
splits), fit seconds, and how often each start was chosen.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from lib import output
from lib.data import ionosphere, random_split
from lib.machine import machine
from lib.metrics import error_and_nlp, mean_se


CONFIGS = {"default": {}, "start at std": {"lengthscale": 1.0},
           "n_restarts_optimizer=1": {"n_restarts_optimizer": 1},
           "n_restarts_optimizer=2": {"n_restarts_optimizer": 2}}


def one_split(seed, M, max_hyper_iter):
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)  # two processes on two cores, as bench_paper.py runs
    warnings.simplefilter("ignore")  # non-convergence is counted in the rows
    from saspa_dask import SASPAClassifier

    X, y = ionosphere()
    Xtr, ytr, Xte, yte = random_split(X, y, 200, seed)
    rows = []
    for name, kw in CONFIGS.items():
        start = time.perf_counter()
        model = SASPAClassifier(n_bases=M, random_state=seed, max_hyper_iter=max_hyper_iter,
                                **kw).fit(Xtr, ytr)
        seconds = time.perf_counter() - start
        err, nlp = error_and_nlp(model.predict_proba(Xte)[:, 1], yte)
        rows.append({"config": name, "split": seed, "error": err, "nlp": nlp,
                     "log_evidence": model.log_evidence_, "fit_s": seconds,
                     "chosen_start": model.hyperparameter_info_.get("chosen_start", 0),
                     "converged": bool(model.converged_)})
    print(f"[bench_restarts] split {seed} done", file=sys.stderr, flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--first-split", type=int, default=0,
                    help="Seed of the first split (20: splits the restarts were not "
                         "designed on).")
    ap.add_argument("--outdir", default=None, help="Write results/restarts.json here.")
    args = ap.parse_args()
    n_splits, M, iters = (2, 4, 3) if args.quick else (args.splits, 16, 20)
    with ProcessPoolExecutor(2) as pool:
        seeds = range(args.first_split, args.first_split + n_splits)
        rows = [r for part in pool.map(one_split, seeds, [M] * n_splits,
                                       [iters] * n_splits) for r in part]
    summary = []
    for name in CONFIGS:
        sel = [r for r in rows if r["config"] == name]
        err, nlp = mean_se([r["error"] for r in sel]), mean_se([r["nlp"] for r in sel])
        summary.append({"config": name, "n_splits": len(sel), "error_mean": err[0],
                        "error_se": err[1], "nlp_mean": nlp[0], "nlp_se": nlp[1],
                        "log_evidence_mean": float(np.mean([r["log_evidence"] for r in sel])),
                        "fit_s_mean": float(np.mean([r["fit_s"] for r in sel])),
                        "chosen_start_counts": np.bincount(
                            [r["chosen_start"] for r in sel], minlength=3).tolist(),
                        "not_converged": sum(not r["converged"] for r in sel)})
    report = {"dataset": "ionosphere", "M": M, "n_train": 200, "max_hyper_iter": iters,
              "split_seeds": [args.first_split, args.first_split + n_splits - 1],
              "machine": machine(), "summary": summary, "rows": rows}
    if args.outdir or not args.quick:
        out = (output.RESULTS if args.outdir is None else
               __import__("pathlib").Path(args.outdir)) / (
            "restarts-quick.json" if args.quick else
            f"restarts{'' if args.first_split == 0 else f'-from{args.first_split}'}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=1))
    print(json.dumps({k: v for k, v in report.items() if k != "rows"}, indent=2))
    print(f"\n| SASPA-full, Ionosphere M = {M}, splits {args.first_split}-"
          f"{args.first_split + n_splits - 1} | test error | NLP | "
          "log evidence | fit s | chosen start (0, 1, 2) |")
    print("|---|---|---|---|---|---|")
    for r in summary:
        print(f"| {r['config']} | {r['error_mean']:.4f} ± {r['error_se']:.4f} | "
              f"{r['nlp_mean']:.3f} ± {r['nlp_se']:.3f} | {r['log_evidence_mean']:.2f} | "
              f"{r['fit_s_mean']:.2f} | {r['chosen_start_counts']} |")


if __name__ == "__main__":
    main()
