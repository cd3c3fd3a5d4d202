"""``log_target`` on prices: the fit on y against the fit on log(y), both scored on y.

House prices (``house_16h``, ``california_housing``: positive, heavy-tailed) as given,
inputs standardised on the training rows, the target not touched.  Per set and split:
``SASPARegressor(M, random_state=0)`` on y, and the same with ``log_target=True``;
RMSE, MAE and NLPD of y on the held-out rows (the log target's NLPD is y's log-normal
density), the share of rows inside the central 90% predictive interval (mean +- 1.645
std for the fit on y; the log-normal's own 5-95% quantiles for the log target), and
process CPU seconds of the fit.  Writes results/log_target.json after every split.

    python benchmarks/bench_log_target.py               # 3 splits, 10,000 rows, M = 64
"""

from __future__ import annotations

import argparse
import csv
import time

import numpy as np
from lib.data import DATASETS, random_split
from lib.machine import matmul_rate, start_report
from lib.output import save

SETS = ("house_16h", "california_housing")


def load(name):
    """Inputs (the numeric columns; rows with a missing value dropped) and the raw
    prices (``load_regression`` takes house_16h's log1p)."""
    with open(DATASETS / f"{name}.csv") as handle:
        header, *body = list(csv.reader(handle))
    keep = [k for k, h in enumerate(header[:-1]) if h != "ocean_proximity"]
    X = np.array([[float(r[k]) if r[k] != "" else np.nan for k in keep] for r in body])
    y = np.array([float(r[-1]) for r in body])
    ok = np.all(np.isfinite(X), axis=1) & (y > 0)
    return X[ok], y[ok]


def score(model, Xte, yte, log_target):
    from scipy.stats import norm

    point, std = model.predict(Xte, return_std=True)
    log_p = model.fitted_posterior_.log_predictive(Xte, yte)
    if log_target:  # the log-normal's own interval: exp(m +- 1.645 s)
        m, v = model.predict_latent(Xte)
        s = np.sqrt(v + model.noise_variance_)
        inside = (yte >= np.exp(m - 1.645 * s)) & (yte <= np.exp(m + 1.645 * s))
    else:
        inside = np.abs(yte - point) <= norm.ppf(0.95) * std
    return {"rmse": float(np.sqrt(np.mean((yte - point) ** 2))),
            "mae": float(np.mean(np.abs(yte - point))), "nlpd": float(-log_p.mean()),
            "coverage_90": float(inside.mean())}


def one_split(name, seed, args):
    from saspa_dask import SASPARegressor

    X, y = load(name)
    n_train = min(args.train_rows, int(0.8 * len(y)))
    Xtr, ytr, Xte, yte = random_split(X, y, n_train, seed, n_test=args.test_rows)
    rows = []
    for log_target in (False, True):
        start = time.process_time()
        model = SASPARegressor(args.bases, random_state=0, log_target=log_target,
                               max_hyper_iter=args.max_hyper_iter).fit(Xtr, ytr)
        cpu = time.process_time() - start
        rows.append({"set": name, "split": seed, "log_target": log_target,
                     "train_rows": len(ytr), "test_rows": len(yte), "cpu": cpu,
                     **score(model, Xte, yte, log_target)})
        print(rows[-1], flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--bases", type=int, default=64)
    parser.add_argument("--train-rows", type=int, default=10_000)
    parser.add_argument("--test-rows", type=int, default=None)
    parser.add_argument("--max-hyper-iter", type=int, default=500)
    parser.add_argument("--out", default="log_target.json", help="file under results/")
    parser.add_argument("--quick", action="store_true",
                        help="one split of 400 rows, M = 8, 3 iterations (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.splits, args.train_rows, args.test_rows = 1, 400, 200
        args.bases, args.max_hyper_iter = 8, 3
    report = start_report(args, matmul_rate, "saspa_dask", runs=[])
    for name in args.sets:
        for seed in range(args.splits):
            report["runs"] += one_split(name, seed, args)
            save(report, args.out)


if __name__ == "__main__":
    main()
