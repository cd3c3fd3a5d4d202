"""Warm-start retraining benchmark: sweeps of a warm start vs a cold start after 10%
more rows, and whether every start reaches the same fixed point.

    python benchmarks/bench_retrain.py            # N = 10^5 old rows + 10^4 new, M = 64
    python benchmarks/bench_retrain.py --quick    # N = 5,000 + 500, M = 16

The old model is fitted on the old rows; the new fit keeps its bases and
hyperparameters and starts

- cold: from zero sites;
- warm: the old rows from their stored sites, the new rows (``saspa retrain
  --new-rows``) from zero sites (empty), from one EP update against the old
  posterior (update, the default), or from one assumed-density-filtering pass (adf);
  the update and ADF visit the new rows once, 0.1 sweep of row visits, shown in
  brackets and included in the seconds;
- coarse: the default start of a new fit (EP on every 10th block first), for reference.

Parallel EP runs with and without Anderson acceleration, and sequential EP.
"""

import argparse
import json
import time
import warnings

import numpy as np

from saspa_dask import SASPAClassifier
from saspa_dask.datasets import synthetic_two_class


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
    old = SASPAClassifier(optimize_hyperparameters=False, n_bases=args.bases, random_state=0, ep={"tol": 1e-8, "max_sweeps": 500}).fit(X[: args.rows], y[: args.rows])
    starts, start_s = {}, {}
    for how in ("empty", "update", "adf"):
        start = time.perf_counter()
        starts[how] = old.warm_start_sites(X[args.rows:], y[args.rows:], new_rows=how)
        start_s[how] = time.perf_counter() - start
    visits = n_new / (args.rows + n_new)  # one pass over the new rows, in sweeps
    rows = []
    for mode, memory in (("parallel", 0), ("parallel", 3), ("sequential", 0)):
        for tol in (1e-4, 1e-6):
            kw = dict(bases=old.bases_, lengthscale=old.lengthscale_,
                      signal_variance=old.signal_variance_, optimize_hyperparameters=False)
            schedule = dict(mode=mode, tol=tol, max_sweeps=500, anderson_memory=memory)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                # cold: zero sites, as the issue defines it; coarse: the default start of
                # a new parallel fit (EP on every 10th block first), for reference
                fits = {"cold": SASPAClassifier(**kw, ep={**schedule, "coarse_start": False})
                        .fit(X, y),
                        "coarse": SASPAClassifier(**kw, ep={**schedule, "coarse_start": True})
                        .fit(X, y)}
                for how, sites in starts.items():
                    fits[how] = SASPAClassifier(**kw, ep=schedule).fit(X, y,
                                                                       init_sites=sites)
            cold = fits["cold"]
            scale = np.abs(cold.alpha_).max()
            row = {"mode": mode, "anderson_memory": memory, "tol": tol,
                   "coarse_levels": fits["coarse"].coarse_start_,
                   "max_rel_alpha_diff": max(float(np.abs(f.alpha_ - cold.alpha_).max())
                                             for f in fits.values()) / scale,
                   "max_log_evidence_diff": max(abs(f.log_evidence_ - cold.log_evidence_)
                                                for f in fits.values())}
            for name, fit in fits.items():
                row[f"{name}_sweeps"] = fit.n_sweeps_
                row[f"{name}_ep_s"] = fit.timings_["ep"] + start_s.get(name, 0.0)
            for how in starts:
                row[f"{how}_over_cold"] = fits[how].n_sweeps_ / cold.n_sweeps_
                row[f"{how}_visits_over_cold"] = (fits[how].n_sweeps_
                                                  + (how != "empty") * visits) / cold.n_sweeps_
            rows.append(row)
    print(json.dumps({"old_rows": args.rows, "new_rows": n_new, "M": args.bases,
                      "old_fit_sweeps": old.n_sweeps_, "new_row_start_s": start_s,
                      "results": rows}, indent=2))
    print("\n| mode | Anderson memory | tol | cold | warm, empty | warm, update (default) "
          "| warm, ADF | coarse start | EP s cold / empty / update / ADF / coarse | "
          "max rel. alpha diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        warm = " | ".join(
            f"{r[f'{how}_sweeps']} ({r[f'{how}_over_cold']:.2f}"
            + ("" if how == "empty" else f"; {r[f'{how}_visits_over_cold']:.2f}") + ")"
            for how in ("empty", "update", "adf"))
        seconds = " / ".join(f"{r[f'{name}_ep_s']:.1f}"
                             for name in ("cold", "empty", "update", "adf", "coarse"))
        print(f"| {r['mode']} | {r['anderson_memory']} | {r['tol']:g} | {r['cold_sweeps']} | "
              f"{warm} | {r['coarse_sweeps']} | {seconds} | {r['max_rel_alpha_diff']:.1e} |")
    print("\nwarm cells: sweeps (sweeps / cold sweeps; with the pass over the new rows "
          "counted as 0.1 sweep)")

if __name__ == "__main__":
    main()
