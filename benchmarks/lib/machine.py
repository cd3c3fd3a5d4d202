"""Machine facts, package versions, the float64 matmul rate, a report's header."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import time

import numpy as np


def machine():
    import psutil

    return (f"{platform.machine()}, {os.cpu_count()} cores, "
            f"{psutil.virtual_memory().total / 2**30:.0f} GiB, {platform.system()}")


def versions(*names):
    out = {"python": platform.python_version()}
    for name in ("saspa-dask", "numpy", "scipy", "dask", "scikit-learn", *names):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def matmul_rate(n=2000, repeats=5, threads=None):
    """float64 GEMM rate, FLOP/s: the best of ``repeats`` n x n products, on every
    core (``threads=None``) or on ``threads`` BLAS threads."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(n, n)), rng.normal(size=(n, n))
    best = np.inf
    with threadpool_limits(threads):
        A @ B
        for _ in range(repeats):
            t = time.perf_counter()
            A @ B
            best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def start_report(args, rate=matmul_rate, *packages, **fields):
    """A benchmark's report: the machine, the versions of the package and of
    ``packages``, the float64 matmul rate measured now (``rate()``, FLOP/s, said on
    stdout) and the arguments, plus ``fields``."""
    report = {"machine": machine(), "versions": versions(*packages),
              "matmul_gflops": rate() / 1e9, "args": vars(args), **fields}
    print(f"float64 matmul: {report['matmul_gflops']:.1f} GFLOP/s", flush=True)
    return report
