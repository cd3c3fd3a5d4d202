"""The package's one BLAS thread policy, measured (``saspa_dask/core/threads.py``).

Importing ``saspa_dask.core`` sets SciPy's own OpenBLAS pool to one thread for the
process.  This times three fits (the online GP, the IVM, a SASPA classifier without
learning) and a prediction under that policy ("policy") and with SciPy's pool given
back its threads ("scipy pool at N", by ``threadpoolctl``), each the median of
``--repeats`` runs after a warm-up, in process CPU seconds and wall seconds.  Run it
on an idle machine and again beside a busy one (``--busy`` starts one process per
core spinning NumPy GEMMs, as the test suite's two workers do): the spinning pools
hurt most when the cores are shared.  The float64 matmul rate is measured at the start.

    python benchmarks/bench_threads.py [--busy] [--out results/threads.json]
    python benchmarks/bench_threads.py --quick       # smoke
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time

import numpy as np
from threadpoolctl import threadpool_limits
from lib.machine import matmul_rate



def _spin(stop):
    a = np.random.default_rng(0).normal(size=(400, 400))
    while not stop.is_set():
        a @ a


def _cases(n):
    from saspa_dask import IVMClassifier, SASPAClassifier, SparseOnlineGPClassifier
    from saspa_dask.datasets import synthetic_two_class

    X, y = synthetic_two_class(n, 3, seed=0)
    fitted = SASPAClassifier(32, blur="delta", optimize_hyperparameters=False,
                             random_state=0).fit(X, y)
    return {
        "online GP fit (max_bases=32)":
            lambda: SparseOnlineGPClassifier(max_bases=32).fit(X, y),
        "IVM fit (n_bases=32)": lambda: IVMClassifier(n_bases=32).fit(X, y),
        "SASPA fit (M=32, fixed kernel)":
            lambda: SASPAClassifier(32, optimize_hyperparameters=False,
                                    random_state=0).fit(X, y),
        "SASPA predict_proba": lambda: fitted.predict_proba(X),
    }


def _time(func, repeats):
    func()
    runs = []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        func()
        runs.append((time.process_time() - c0, time.perf_counter() - t0))
    return [float(v) for v in np.median(runs, axis=0)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.repeats = 300, 1
    from saspa_dask.core.threads import scipy_blas_pools

    rate = matmul_rate()
    print(f"float64 matmul: {rate / 1e9:.1f} GFLOP/s")
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
                for _ in range(os.cpu_count() if args.busy else 0)]
    for p in spinners:
        p.start()
    cores = os.cpu_count()
    rows = []
    try:
        for name, func in _cases(args.rows).items():
            policy = _time(func, args.repeats)
            pools = [lib.filepath for lib in scipy_blas_pools()]
            with threadpool_limits(cores, user_api="blas"):
                full = _time(func, args.repeats)
            rows.append({"case": name, "policy_cpu": policy[0], "policy_wall": policy[1],
                         "full_cpu": full[0], "full_wall": full[1]})
            print(f"{name:34s} policy {policy[0]:6.2f} CPU-s {policy[1]:6.2f} s | "
                  f"scipy pool at {cores}: {full[0]:6.2f} CPU-s {full[1]:6.2f} s")
    finally:
        stop.set()
        for p in spinners:
            p.join()
    if not pools:
        print("NumPy and SciPy share one BLAS here: the policy changes nothing")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"matmul_gflops": rate / 1e9, "busy": args.busy, "rows": args.rows,
                       "scipy_pools": pools, "cases": rows}, f, indent=1)


if __name__ == "__main__":
    main()
