"""A synthetic wide one-hot table of the house-price table's shape (issue 38: 9,745 rows,
676 inputs): 20 numeric columns and 10 text columns of 3-308 categories (Zipf-distributed,
one-hot), the target a smooth function of two numeric columns plus a random effect per
category and noise.  ``SASPARegressor(64, random_state=0, verbose=1)`` (blur auto:
diagonal; means learnt) with at most ``ITERATIONS`` optimiser iterations; prints the
phase lines (K-means, each iteration's time) and the fit's wall and process CPU seconds.

    python benchmarks/bench_wide_synthetic.py 10

``--compare`` instead fits the same shape with 2,000 more rows held out (the table
drawn with 11,745 rows; its last 2,000 are the test rows) with each kernel structure
to convergence: one SE kernel over every input (the default), ``feature_groups`` (a
lengthscale per text column), ``additive_groups`` (a term over the numeric inputs and
one per text column, the target's own structure) and both; prints the test RMSE
against y and against the noise-free target, the NLPD, CPU seconds and iterations,
and HistGradientBoosting's RMSE beside them.

    python benchmarks/bench_wide_synthetic.py --compare
"""

import sys
import time
import warnings

import numpy as np

from saspa_dask import SASPARegressor


CARDINALITIES = (308, 120, 80, 60, 40, 20, 12, 8, 5, 3)


def table(seed=0, n=9745, noise_free=False):
    rng = np.random.default_rng(seed)
    numeric = rng.normal(size=(n, 20))
    y = np.sin(numeric[:, 0]) + numeric[:, 1]
    blocks = [numeric]
    for cardinality in CARDINALITIES:
        codes = np.minimum(rng.zipf(1.5, n) - 1, cardinality - 1)
        blocks.append(np.eye(cardinality)[codes])
        y += rng.normal(size=cardinality)[codes] * 0.3
    noisy = y + 0.2 * rng.normal(size=n)
    return (np.hstack(blocks), noisy, y) if noise_free else (np.hstack(blocks), noisy)


def column_labels():
    """Each input's column: the numeric ones, then each text column's categories."""
    return ["numeric"] * 20 + [f"text{k}" for k, c in enumerate(CARDINALITIES)
                               for _ in range(c)]


def compare():
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y, f = table(n=11745, noise_free=True)
    train, test = slice(0, 9745), slice(9745, None)
    text = column_labels()
    # a lengthscale per numeric input, one per text column
    groups = [f"n{k}" for k in range(20)] + text[20:]
    variants = {"one kernel": {}, "feature_groups": {"feature_groups": groups},
                "additive_groups": {"additive_groups": text},
                "both": {"additive_groups": text, "feature_groups": groups}}
    for label, settings in variants.items():
        c0 = time.process_time()
        model = SASPARegressor(64, random_state=0, **settings).fit(X[train], y[train])
        mean, std = model.predict(X[test], return_std=True)
        nlpd = np.mean(0.5 * np.log(2 * np.pi * std**2) + 0.5 * ((y[test] - mean) / std) ** 2)
        print(f"| {label} | {np.sqrt(np.mean((mean - y[test]) ** 2)):.4f} | "
              f"{np.sqrt(np.mean((mean - f[test]) ** 2)):.4f} | {nlpd:.4f} | "
              f"{time.process_time() - c0:.0f} | "
              f"{model.hyperparameter_info_['n_iterations']} |", flush=True)
    c0 = time.process_time()
    hgb = HistGradientBoostingRegressor(random_state=0).fit(X[train], y[train])
    mean = hgb.predict(X[test])
    print(f"| HistGradientBoosting | {np.sqrt(np.mean((mean - y[test]) ** 2)):.4f} | "
          f"{np.sqrt(np.mean((mean - f[test]) ** 2)):.4f} | | "
          f"{time.process_time() - c0:.0f} | |", flush=True)


def main():
    warnings.simplefilter("ignore")
    if sys.argv[1] == "--compare":
        return compare()
    X, y = table()
    print(X.shape, flush=True)
    t0, c0 = time.perf_counter(), time.process_time()
    model = SASPARegressor(64, random_state=0, max_hyper_iter=int(sys.argv[1]),
                           verbose=1).fit(X, y)
    print("wall", time.perf_counter() - t0, "cpu", time.process_time() - c0,
          model.cost_estimate_)


if __name__ == "__main__":
    main()
