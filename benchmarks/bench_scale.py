"""Scaling benchmark: training and scoring time and memory against N (issue 6).

For each N: generate N rows of the synthetic two-class problem (d inputs), ingest them
into a zarr store, ``saspa train`` (SASPA-full probit, M bases, 2 local workers,
fixed hyperparameters) and ``saspa score`` the same store, each as its own process
whose peak RSS (and that of its worker processes) is sampled every 0.2 s.  Reports
seconds per sweep, sweeps to converge, K-means, end-to-end train and score seconds,
peak memory per process and the ratio of a sweep to the arithmetic limit 2 N M^2
flops at the float64 matmul rate measured at the start of the run.

Training uses ``--cache none`` at every N: each sweep rebuilds its chunk's whitened
block instead of keeping N M floats in worker memory (20 GB at N = 10^7, M = 256), so
worker memory is bounded by the chunk size and does not grow with N.  The block costs
about another N M^2 flops a sweep (the triangular solve) plus N M d^2 (the kernel).

``--defaults`` instead runs the README's pipeline with every default: ``saspa
make-data``, ``ingest`` (its own chunking), ``split --test-fraction 0.01``, ``saspa
train`` with no option but ``--workers``, ``saspa retrain`` of that model on the same
rows (warm-started from its stored sites), then ``score`` and ``evaluate`` on the
held-out part, each timed with its peaks (driver and every worker), the sweeps and EP's
stop reason, and the held-out error.

    python benchmarks/bench_scale.py                 # N = 10^5, 10^6, 10^7; d = 8, M = 256
    python benchmarks/bench_scale.py --defaults --rows 100000000   # the defaults at 10^8
    python benchmarks/bench_scale.py --quick         # N = 2*10^4, 4*10^4; M = 32 (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import zarr
from saspa_dask import load_model
from lib.commands import BIN, run, run_monitored
from lib.machine import matmul_rate


HERE = Path(__file__).resolve().parent


def _peaks(monitor, proc):
    workers = [rss / 2**20 for pid, rss in sorted(monitor.peaks.items())
               if monitor.names.get(pid) == "worker"]
    return monitor.peaks.get(proc.pid, 0) / 2**20, workers


def _timed_step(cmd, ok_codes=(0,)):
    out, seconds, monitor, proc = run_monitored(cmd, ok_codes=ok_codes)
    driver, workers = _peaks(monitor, proc)
    return out, {"seconds": seconds, "driver_peak_mib": round(driver),
                 "worker_peak_mib": [round(w) for w in workers]}


def with_defaults(work, N, args, rate):
    """The README's pipeline with every default at N rows: each step's time and
    peaks, the sweeps (each against the 2 n M^2 limit of its n training rows at the
    matmul ``rate``), EP's stop reason and the held-out error."""
    data_npy, store = work / "data.npy", work / "data.zarr"
    train, test = work / "data-train.zarr", work / "data-test.zarr"
    model, scores = work / "model.zarr", work / "scores.zarr"
    steps = {}
    for name, cmd in (
            ("make-data", ["make-data", data_npy, "--rows", N, "--features", args.features,
                           "--overwrite"]),
            ("ingest", ["ingest", data_npy, "--out", store, "--overwrite"]),
            ("split", ["split", store, "--test-fraction", "0.01", "--seed", "0",
                       "--overwrite"]),
            ("train", ["train", train, "--out", model, "--workers", args.workers,
                       "--overwrite"]),
            # the model retrained on its own rows: warm-started from its stored sites
            ("retrain", ["retrain", model, train, "--out", work / "retrained.zarr",
                         "--workers", args.workers, "--overwrite"]),
            ("score", ["score", model, test, "--out", scores, "--workers", args.workers,
                       "--overwrite"]),
            ("evaluate", ["evaluate", model, test, "--workers", args.workers, "--json"])):
        out, steps[name] = _timed_step([BIN / "saspa", *cmd], ok_codes=(0, 3))
        print(f"[bench_scale] {name}: {json.dumps(steps[name])}", file=sys.stderr,
              flush=True)
    fitted = load_model(model)
    n_train = zarr.open_group(str(train), mode="r")["X"].shape[0]
    limit = 2 * n_train * fitted.bases_.n_bases**2 / rate
    return {"N": N, "steps": steps, "sweeps": fitted.n_sweeps_,
            "matmul_gflops": rate / 1e9, "sweep_limit_s": limit,
            "sweep_over_limit": [r["seconds"] / limit for r in fitted.history_],
            "stop": fitted.ep_stop_reason_, "converged": bool(fitted.converged_),
            "coarse_start": fitted.coarse_start_, "M": fitted.bases_.n_bases,
            "sweep_s": [r["seconds"] for r in fitted.history_],
            "held_out": json.loads(out)}


def one_size(work, N, args, rate):
    """Ingest, train and score N rows; the measured quantities."""
    chunk_rows = min(args.chunk_rows, max(N // 8, 1000))
    data_npy, store = work / "data.npy", work / "data.zarr"
    model, scores = work / "model.zarr", work / "scores.zarr"
    t = time.perf_counter()
    run([BIN / "saspa", "make-data", data_npy, "--rows", N, "--features", args.features])
    run([BIN / "saspa", "ingest", data_npy, "--out", store, "--chunk-rows", chunk_rows,
         "--overwrite"])
    ingest = time.perf_counter() - t
    data_npy.unlink()
    train_cmd = [BIN / "saspa", "train", store, "--out", model, "--n-bases", args.bases,
                 "--blur", "full", "--likelihood", "probit", "--workers", args.workers,
                 "--cache", "none", "--overwrite"]
    _, train_s, mon, proc = run_monitored(train_cmd, ok_codes=(0, 3))
    train_driver, train_workers = _peaks(mon, proc)
    score_cmd = [BIN / "saspa", "score", model, store, "--out", scores, "--workers",
                 args.workers, "--overwrite"]
    _, score_s, mon, proc = run_monitored(score_cmd)
    score_driver, score_workers = _peaks(mon, proc)
    attrs = json.loads((model / "zarr.json").read_text())["attributes"]
    fitted = load_model(model)
    sweeps = [r["seconds"] for r in fitted.history_]
    median = float(np.median(sweeps[1:] if len(sweeps) > 1 else sweeps))
    limit = 2 * N * args.bases**2 / rate
    row = {"N": N, "chunk_rows": chunk_rows, "sweeps": len(sweeps),
           "converged": bool(fitted.converged_), "median_sweep_s": median,
           "coarse_start": fitted.coarse_start_,
           "sweep_ratio_to_limit": median / limit, "kmeans_s": fitted.timings_["bases"],
           "ep_s": fitted.timings_["ep"], "train_s": train_s, "score_s": score_s,
           "ingest_s": ingest,
           "train_driver_peak_mib": round(train_driver),
           "train_worker_peak_mib": [round(w) for w in train_workers],
           "score_driver_peak_mib": round(score_driver),
           "score_worker_peak_mib": [round(w) for w in score_workers],
           "versions": attrs["versions"]}
    for path in (store, model, scores):
        shutil.rmtree(path)
    return row


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    N = np.array([r["N"] for r in rows], float)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for key, label in (("train_s", "train (end to end)"), ("score_s", "score (end to end)"),
                       ("median_sweep_s", "one EP sweep")):
        ax.loglog(N, [r[key] for r in rows], "o-", label=label)
    ref = N / N[0] * rows[0]["train_s"]
    ax.loglog(N, ref, "k:", label="linear in N")
    ax.set_xlabel("training rows N")
    ax.set_ylabel("seconds")
    ax.set_title(f"SASPA-full, M = {rows[0]['M']}, d = {rows[0]['d']}, 2 workers")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", default="100000,1000000,10000000")
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--bases", type=int, default=256)
    ap.add_argument("--chunk-rows", type=int, default=125_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="small run for CI")
    ap.add_argument("--defaults", action="store_true",
                    help="the README's pipeline with every default (module docstring)")
    ap.add_argument("--workdir", help="stores go here (default: a temp dir)")
    ap.add_argument("--plot", default=str(HERE / "figures" / "scale.png"))
    args = ap.parse_args()
    sizes = [int(n) for n in args.rows.split(",")]
    if args.quick:
        sizes, args.bases = [20_000, 40_000], 32
    rate = matmul_rate()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="saspa-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    if args.defaults:
        for N in sizes:
            print(json.dumps(with_defaults(work, N, args, rate), indent=1), flush=True)
        return 0
    rows = []
    for N in sizes:
        row = one_size(work, N, args, rate)
        row.update(M=args.bases, d=args.features)
        rows.append(row)
        # each size's row as soon as it is measured: a long run stopped later keeps it
        print(f"[bench_scale] {json.dumps(row)}", file=sys.stderr, flush=True)
    report = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                         f"{psutil.virtual_memory().total / 2**30:.0f} GiB",
              "python": platform.python_version(), "matmul_gflops": rate / 1e9,
              "M": args.bases, "d": args.features, "workers": args.workers,
              "cache": "none", "rows": rows}
    if len(rows) > 1:
        report["train_time_ratio_last_two"] = rows[-1]["train_s"] / rows[-2]["train_s"]
        report["rows_ratio_last_two"] = rows[-1]["N"] / rows[-2]["N"]
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot(rows, args.plot)
        report["plot"] = args.plot
    print(json.dumps(report, indent=2))
    print("\n| N | sweeps (+ coarse: rows x sweeps) | s/sweep | sweep / limit | K-means s | train s | score s "
          "| train worker peak MiB | score worker peak MiB | driver peak MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        coarse = " ".join(f"+ {c['rows']:.0e} x {c['sweeps']}" for c in r["coarse_start"])
        print(f"| {r['N']:.0e} | {r['sweeps']} {coarse} | {r['median_sweep_s']:.3g} | "
              f"{r['sweep_ratio_to_limit']:.2f} | {r['kmeans_s']:.1f} | {r['train_s']:.1f} | "
              f"{r['score_s']:.1f} | {r['train_worker_peak_mib']} | "
              f"{r['score_worker_peak_mib']} | {r['train_driver_peak_mib']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
