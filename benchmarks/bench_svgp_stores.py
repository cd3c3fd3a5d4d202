"""GPyTorch's SVGP on a training and a test data store (as `saspa ingest` / `split`
wrote them), for comparison with `saspa train --test` on the same stores.

M inducing points started at K-means centres of the first 200,000 rows and learnt,
ARD RBF kernel, a probit Bernoulli likelihood (0/1 targets) or a Gaussian one
(``--regression``), Adam on minibatches; scored on the test store at each budget of
wall seconds of optimiser steps (scoring is outside the clock), 2 threads.

    python benchmarks/bench_svgp_stores.py all-train.zarr all-test.zarr \\
        --budgets 30 60 150 300 600 1200 --out svgp_make_data_20min.json

Writes results/OUT (a list of rows: budget, seconds, cpu_seconds, steps, epochs and
the test error and NLP, or RMSE and NLPD).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import zarr
from lib import svgp
from lib.output import add_outdir_option, save, use_outdir


def _store(path):
    group = zarr.open_group(path, mode="r")
    return np.asarray(group["X"][:]), np.asarray(group["y"][:]).astype(float)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("train")
    parser.add_argument("test")
    parser.add_argument("--n-bases", type=int, default=256)
    parser.add_argument("--budgets", type=float, nargs="+", default=[60, 300, 1200])
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--regression", action="store_true")
    parser.add_argument("--out", default="svgp_stores.json")
    add_outdir_option(parser)
    args = parser.parse_args()
    use_outdir(args)
    from saspa_dask import kmeans_bases

    Xtr, ytr = _store(args.train)
    Xte, yte = _store(args.test)
    start = time.perf_counter()
    centres = kmeans_bases(Xtr[:200_000], args.n_bases, random_state=0)
    print(f"[svgp] K-means {time.perf_counter() - start:.1f}s", flush=True)
    rows = []

    def report(row):
        rows.append(row)
        print(json.dumps(row), flush=True)
        save(rows, args.out)

    svgp.train(Xtr, ytr, centres.means, args.budgets, regression=args.regression,
               batch=args.batch, lr=args.lr, clock="wall",
               score=lambda m, lik: svgp.scores(m, lik, Xte, yte, args.regression),
               report=report)


if __name__ == "__main__":
    main()
