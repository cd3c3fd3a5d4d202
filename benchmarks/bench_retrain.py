"""Warm-start retraining benchmark: sweeps of a warm start vs a cold start after 10%
more rows, and whether both reach the same fixed point.

    python benchmarks/bench_retrain.py            # N = 10^5 old rows + 10^4 new, M = 64
    python benchmarks/bench_retrain.py --quick    # N = 5,000 + 500, M = 16

The old model is fitted on the old rows; the new fit keeps its bases and
hyperparameters, once from zero sites (cold), once from the old sites padded with
zeros for the new rows (warm, empty new rows: ``saspa retrain --new-rows empty``), once
from the old sites and one assumed-density-filtering pass over the new rows (warm, ADF:
what ``saspa retrain`` does by default; the pass visits 10% of the rows once, counted as
0.1 sweep in the row-visit ratio), and once with the default start of a new fit (coarse
start, parallel only).  Parallel EP runs with and without
Anderson acceleration; EP seconds are printed beside the sweeps.
"""

import argparse
import json
import time
import warnings

import numpy as np

from saspa_dask import SASPAClassifier
from saspa_dask.cli import synthetic_two_class


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--bases", type=int, default=64)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.bases = 5_000, 16
    n_new = args.rows // 10
    X, y = synthetic_two_class(args.rows + n_new, 8, seed=11)
    old = SASPAClassifier(optimize_hyperparameters=False, n_bases=args.bases, random_state=0,
                          tol=1e-8,
                          max_sweeps=500).fit(X[: args.rows], y[: args.rows])
    pad = np.zeros(n_new)
    init = (np.r_[old.sites_tau_, pad], np.r_[old.sites_nu_, pad])
    start = time.perf_counter()
    init_adf = old.warm_start_sites(X[args.rows:], y[args.rows:])
    adf_s = time.perf_counter() - start
    adf_sweeps = n_new / (args.rows + n_new)  # row visits of the ADF pass, in sweeps
    rows = []
    for mode, memory in (("parallel", 0), ("parallel", 3), ("sequential", 0)):
        for tol in (1e-4, 1e-6):
            kw = dict(bases=old.bases_, lengthscale=old.lengthscale_,
                      signal_variance=old.signal_variance_, ep_mode=mode, tol=tol,
                      max_sweeps=500, anderson_memory=memory, optimize_hyperparameters=False)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                # cold: zero sites, as the issue defines it; coarse: the default start of
                # a new parallel fit (EP on every 10th block first), for reference
                cold = SASPAClassifier(coarse_start=False, **kw).fit(X, y)
                coarse = SASPAClassifier(coarse_start=True, **kw).fit(X, y)
                warm = SASPAClassifier(**kw).fit(X, y, init_sites=init)
                adf = SASPAClassifier(**kw).fit(X, y, init_sites=init_adf)
            scale = np.abs(cold.alpha_).max()
            rows.append({"mode": mode, "anderson_memory": memory, "tol": tol,
                         "cold_sweeps": cold.n_sweeps_, "warm_sweeps": warm.n_sweeps_,
                         "coarse_sweeps": coarse.n_sweeps_,
                         "coarse_levels": coarse.coarse_start_,
                         "warm_over_cold": warm.n_sweeps_ / cold.n_sweeps_,
                         "adf_sweeps": adf.n_sweeps_,
                         "adf_over_cold": adf.n_sweeps_ / cold.n_sweeps_,
                         "adf_row_visits_over_cold": (adf.n_sweeps_ + adf_sweeps)
                         / cold.n_sweeps_,
                         "adf_ep_s": adf.timings_["ep"] + adf_s,
                         "cold_ep_s": cold.timings_["ep"], "warm_ep_s": warm.timings_["ep"],
                         "coarse_ep_s": coarse.timings_["ep"],
                         "max_rel_alpha_diff": float(max(np.abs(warm.alpha_ - cold.alpha_).max(),
                                                         np.abs(adf.alpha_ - cold.alpha_).max())
                                                     / scale),
                         "log_evidence_diff": abs(warm.log_evidence_ - cold.log_evidence_)})
    print(json.dumps({"old_rows": args.rows, "new_rows": n_new, "M": args.bases,
                      "adf_pass_s": adf_s, "results": rows}, indent=2))
    print("\n| mode | Anderson memory | tol | cold sweeps | warm (empty) sweeps | warm/cold | "
          "warm (ADF) sweeps | ADF/cold (with the pass) | coarse-start sweeps | "
          "cold / warm / ADF / coarse EP s | max rel. alpha diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['anderson_memory']} | {r['tol']:g} | {r['cold_sweeps']} | "
              f"{r['warm_sweeps']} | {r['warm_over_cold']:.2f} | {r['adf_sweeps']} | "
              f"{r['adf_over_cold']:.2f} ({r['adf_row_visits_over_cold']:.2f}) | "
              f"{r['coarse_sweeps']} | {r['cold_ep_s']:.1f} / {r['warm_ep_s']:.1f} / "
              f"{r['adf_ep_s']:.1f} / {r['coarse_ep_s']:.1f} | "
              f"{r['max_rel_alpha_diff']:.1e} |")


if __name__ == "__main__":
    main()
