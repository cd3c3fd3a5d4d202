"""Distributed training benchmark (issue: distributed training).

Generates N rows of two-class data (d inputs), ingests them into a zarr store, runs
``saspa train`` on an embedded LocalCluster with 2 workers and reports, from that run:
seconds per parallel sweep and its ratio to the arithmetic limit 2 N M^2 flops at the
float64 matmul rate measured here, K-means seconds, end-to-end train seconds, and the
peak RSS of the driver and of each worker process (sampled every 0.2 s).

    python benchmarks/bench_train.py                 # N = 10^6, d = 8, M = 256
    python benchmarks/bench_train.py --quick         # N = 2*10^4, M = 32 (CI smoke run)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from lib.commands import BIN, run, run_monitored
from lib.machine import matmul_rate
from saspa_dask import load_model

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--bases", type=int, default=256)
    ap.add_argument("--chunk-rows", type=int, default=125_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cache", default="memory", choices=["memory", "none"])
    ap.add_argument("--quick", action="store_true", help="small run for CI")
    ap.add_argument("--workdir", help="keep the stores here (default: a temp dir)")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.bases, args.chunk_rows = 20_000, 32, 5_000

    rate = matmul_rate()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="saspa-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    data_npy, store, model = work / "data.npy", work / "data.zarr", work / "model.zarr"
    t = time.perf_counter()
    run([BIN / "saspa", "make-data", data_npy, "--rows", args.rows, "--features",
         args.features])
    run([BIN / "saspa", "ingest", data_npy, "--out", store, "--chunk-rows", args.chunk_rows,
         "--overwrite"])
    ingest_seconds = time.perf_counter() - t

    cmd = [BIN / "saspa", "train", store, "--out", model, "--n-bases", args.bases,
           "--blur", "full", "--likelihood", "probit", "--workers", args.workers,
           "--cache", args.cache, "--overwrite"]
    _, train_seconds, monitor, proc = run_monitored(cmd, ok_codes=(0, 3))
    attrs = json.loads((model / "zarr.json").read_text())["attributes"]
    fitted = load_model(model)
    sweeps = [r["seconds"] for r in fitted.history_]
    N, M = args.rows, args.bases
    limit = 2 * N * M * M / rate
    driver = monitor.peaks.get(proc.pid, 0)
    workers = [rss / 2**20 for pid, rss in sorted(monitor.peaks.items())
               if monitor.names.get(pid) == "worker"]
    median_sweep = float(np.median(sweeps[1:] if len(sweeps) > 1 else sweeps))
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"{psutil.virtual_memory().total / 2**30:.0f} GiB",
        "python": platform.python_version(),
        "versions": attrs["versions"],
        "N": N, "d": args.features, "M": M, "chunk_rows": args.chunk_rows,
        "workers": args.workers, "cache": args.cache,
        "matmul_gflops": rate / 1e9,
        "sweeps": len(sweeps), "converged": bool(fitted.converged_),
        "first_sweep_s": sweeps[0],
        "median_sweep_s": median_sweep,
        "sweep_limit_s": limit,
        "sweep_ratio_to_limit": median_sweep / limit,
        "kmeans_s": fitted.timings_["bases"],
        "ep_s": fitted.timings_["ep"],
        "train_end_to_end_s": train_seconds,
        "ingest_s": ingest_seconds,
        "driver_peak_rss_mib": driver / 2**20,
        "worker_peak_rss_mib": [round(w) for w in workers],
    }
    print(json.dumps(report, indent=2))
    print("\n| quantity | value |\n|---|---|")
    for key in ("N", "M", "matmul_gflops", "sweeps", "median_sweep_s", "sweep_limit_s",
                "sweep_ratio_to_limit", "kmeans_s", "ep_s", "train_end_to_end_s",
                "driver_peak_rss_mib", "worker_peak_rss_mib"):
        value = report[key]
        print(f"| {key} | {value:.3g} |" if isinstance(value, float) else f"| {key} | {value} |")
    if len(workers) < args.workers:  # the monitor missed a worker: its peaks are not all
        print(f"warning: saw {len(workers)} worker processes, expected {args.workers}")
        return 1
    if len(workers) > args.workers:  # each pid counts: a restarted or extra spawn
        print(f"note: saw {len(workers)} spawned processes for {args.workers} workers (a "
              "worker restarted, or another spawn: each process is listed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
