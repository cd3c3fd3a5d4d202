"""A synthetic wide one-hot table of the house-price table's shape (issue 38: 9,745 rows,
676 inputs): 20 numeric columns and 10 text columns of 3-308 categories (Zipf-distributed,
one-hot), the target a smooth function of two numeric columns plus a random effect per
category and noise.  ``SASPARegressor(64, random_state=0, verbose=1)`` (blur auto:
diagonal; means learnt) with at most ``ITERATIONS`` optimiser iterations; prints the
phase lines (K-means, each iteration's time) and the fit's wall and process CPU seconds.

    python benchmarks/bench_wide_synthetic.py 10
"""

import sys
import time
import warnings

import numpy as np

from saspa_dask import SASPARegressor


def table(seed=0, n=9745):
    rng = np.random.default_rng(seed)
    numeric = rng.normal(size=(n, 20))
    y = np.sin(numeric[:, 0]) + numeric[:, 1]
    blocks = [numeric]
    for cardinality in (308, 120, 80, 60, 40, 20, 12, 8, 5, 3):
        codes = np.minimum(rng.zipf(1.5, n) - 1, cardinality - 1)
        blocks.append(np.eye(cardinality)[codes])
        y += rng.normal(size=cardinality)[codes] * 0.3
    return np.hstack(blocks), y + 0.2 * rng.normal(size=n)


def main():
    warnings.simplefilter("ignore")
    X, y = table()
    print(X.shape, flush=True)
    t0, c0 = time.perf_counter(), time.process_time()
    model = SASPARegressor(64, random_state=0, max_hyper_iter=int(sys.argv[1]),
                           verbose=1).fit(X, y)
    print("wall", time.perf_counter() - t0, "cpu", time.process_time() - c0,
          model.cost_estimate_)


if __name__ == "__main__":
    main()
