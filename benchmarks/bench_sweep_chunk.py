"""What one chunk of a parallel EP sweep costs, against the float64 matmul limit.

One chunk of ``--rows`` rows of the README's generator (8 inputs), ``M`` bases of the
default SASPA-full model (``SASPAClassifier(n_bases=M)`` with fixed hyperparameters on
20,000 rows: K-means bases, full blurs), on one thread: the block build (``make_block``:
the cross-covariances Kt and the whitening solve, what ``--cache none`` or a
rebuilt cache repeats every sweep) and the sweep's pass over a built block
(``parallel_chunk`` as a chunk task calls it: marginals, site updates, statistics),
each the best of
``--repeats``, against 2 n M^2 / (the one-thread float64 matmul rate measured here).
Writes ``results/sweep_chunk.json``.

    python benchmarks/bench_sweep_chunk.py                 # 62,500 rows, M = 128
    python benchmarks/bench_sweep_chunk.py --quick         # smoke: 2,000 rows, M = 8
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from lib.chunk import fitted_block, task_pass
from lib.machine import matmul_rate, start_report
from lib.output import add_quick_option, parse, save
from threadpoolctl import threadpool_limits

from saspa_dask import SASPAClassifier
from saspa_dask.datasets import synthetic_two_class


def best_of(repeats, func):
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        func()
        times.append(time.perf_counter() - began)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=62_500)
    parser.add_argument("--bases", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="sweep_chunk.json")
    add_quick_option(parser, rows=2000, bases=8, repeats=1)
    args = parse(parser)
    with threadpool_limits(1):
        rate = matmul_rate(threads=1)
        report = start_report(args, rate=lambda: rate)
        X, y = synthetic_two_class(20_000 + args.rows, 8, 0)
        model = SASPAClassifier(n_bases=args.bases, optimize_hyperparameters=False,
                                random_state=0).fit(X[:20_000], y[:20_000])
        fitted = model.fitted_posterior_
        X, labels = X[20_000:], np.where(y[20_000:] == 1, 1.0, -1.0)
        block = fitted_block(fitted, X, labels)
        tau, nu = np.zeros(args.rows), np.zeros(args.rows)
        build_s = best_of(args.repeats, lambda: fitted_block(fitted, X, labels))
        pass_s = best_of(args.repeats, lambda: task_pass(block, fitted, tau, nu))
    limit = 2 * args.rows * args.bases**2 / rate
    report.update(rows=args.rows, n_bases=args.bases, blur=str(model.blur_),
                  build_seconds=build_s, pass_seconds=pass_s, matmul_limit_seconds=limit,
                  pass_over_limit=pass_s / limit,
                  pass_and_build_over_limit=(pass_s + build_s) / limit)
    save(report, args.out)
    print(json.dumps({k: report[k] for k in ("rows", "n_bases", "blur", "build_seconds",
                                              "pass_seconds", "matmul_limit_seconds",
                                              "pass_over_limit",
                                              "pass_and_build_over_limit")}, indent=1))


if __name__ == "__main__":
    main()
