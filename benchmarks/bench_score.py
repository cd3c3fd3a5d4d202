"""Batch scoring benchmark (issue: batch scoring).

Scores N generated rows (d inputs) with a SASPA-full model of M bases via ``saspa
score`` on an embedded LocalCluster of 2 workers, and reports rows per second, the
ratio to the arithmetic limit (M d^2 + M^2 multiply-adds a row, at the float64 matmul
rate measured in the same run) and the peak RSS of the driver and each worker.

    python benchmarks/bench_score.py              # N = 10^7, d = 8, M = 256
    python benchmarks/bench_score.py --quick      # N = 10^5, M = 32
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from saspa_dask import SASPAClassifier  # noqa: E402
from saspa_dask.datasets import synthetic_two_class  # noqa: E402
from lib.commands import BIN, run, run_monitored
from lib.machine import matmul_rate


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--bases", type=int, default=256)
    ap.add_argument("--chunk-rows", type=int, default=250_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--workdir")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.bases, args.chunk_rows = 100_000, 32, 20_000
    work = Path(args.workdir or tempfile.mkdtemp(prefix="saspa-score-"))
    work.mkdir(parents=True, exist_ok=True)
    rate = matmul_rate()
    X, y = synthetic_two_class(args.rows, args.features, seed=0)
    np.save(work / "data.npy", np.column_stack([X, y]))
    del X, y
    run([BIN / "saspa", "ingest", work / "data.npy", "--out", work / "data.zarr",
         "--chunk-rows", args.chunk_rows, "--overwrite"])
    Xt, yt = synthetic_two_class(50_000, args.features, seed=0)
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=args.bases,
                            random_state=0, ep={"max_sweeps": 200}).fit(Xt, yt)
    model.save(work / "model.zarr", overwrite=True)

    cmd = [BIN / "saspa", "score", work / "model.zarr", work / "data.zarr", "--out",
           work / "scores.zarr", "--workers", args.workers, "--overwrite"]
    out, seconds, monitor, proc = run_monitored(cmd)
    M, d = args.bases, args.features
    flops_per_row = 2 * (M * d * d + M * M)
    limit_rows_per_s = rate / flops_per_row
    workers = [round(r / 2**20) for pid, r in sorted(monitor.peaks.items())
               if monitor.names.get(pid) == "worker"]
    report = {"N": args.rows, "d": d, "M": M, "chunk_rows": args.chunk_rows,
              "workers": args.workers, "matmul_gflops": rate / 1e9,
              "score_seconds_end_to_end": seconds, "rows_per_second": args.rows / seconds,
              "limit_rows_per_second": limit_rows_per_s,
              "ratio_to_limit": limit_rows_per_s / (args.rows / seconds),
              "driver_peak_rss_mib": monitor.peaks.get(proc.pid, 0) / 2**20,
              "worker_peak_rss_mib": workers, "cli_output": out.strip()}
    print(json.dumps(report, indent=2))
    print("\n| quantity | value |\n|---|---|")
    for key in ("N", "M", "matmul_gflops", "score_seconds_end_to_end", "rows_per_second",
                "limit_rows_per_second", "ratio_to_limit", "driver_peak_rss_mib",
                "worker_peak_rss_mib"):
        value = report[key]
        print(f"| {key} | {value:.3g} |" if isinstance(value, float) else f"| {key} | {value} |")
    # a worker restarted by its nanny shows as one more process: still a complete run
    return 0 if len(workers) >= args.workers else 1


if __name__ == "__main__":
    sys.exit(main())
