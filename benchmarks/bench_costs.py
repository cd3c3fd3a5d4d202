"""What one optimiser evaluation costs, by blur family, learnt bases, rows, M and d.

An *evaluation* is what L-BFGS-B pays per trial point: the whitened blocks rebuilt
at the point, EP warm-started from the best sites so far, and one gradient pass.  For
each case this times a classifier fit with three evaluations after its start
(``max_hyper_iter=2, hyper_tol=0``; K-means excluded) on one-hot-like inputs (a few
Gaussian columns, the rest 0/1 with 10% ones, as a wide encoded table), and divides
by the evaluations.  The float64 matmul rate of this machine is measured in the same
run (one core: the fits run with single-threaded BLAS), and
:func:`saspa_dask.fitting.costs.evaluation_flops` is compared with the times, which
calibrates the fit policy's ``full_blur_efficiency`` (:mod:`saspa_dask.fitting.policy`).

Writes results/costs.json.
"""

from __future__ import annotations

import argparse

import numpy as np
from lib import output
from lib.machine import machine, matmul_rate, versions
from lib.output import add_outdir_option, save, use_outdir



def table(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.random((n, d)) < 0.1).astype(float)
    k = min(5, d)
    X[:, :k] = rng.normal(size=(n, k))
    y = (X[:, 0] + X[:, -1] + 0.5 * rng.normal(size=n) > 0.1).astype(int)
    return X, y


def one(n, d, M, blur, learn):
    from saspa_dask import SASPAClassifier
    from saspa_dask.fitting.costs import evaluation_flops

    X, y = table(n, d)
    model = SASPAClassifier(M, blur=blur, learn_bases=learn, random_state=0,
                            max_hyper_iter=2, hyper_tol=0.0,
                            hyper_subsample=None).fit(X, y)
    evaluations = model.hyperparameter_info_["n_evaluations"]
    seconds = model.timings_["ep"] / evaluations
    return {"n": n, "d": d, "M": M, "blur": blur, "learn_bases": learn or "none",
            "evaluations": evaluations, "seconds_per_evaluation": seconds,
            "flops": evaluation_flops(n, M, d, blur, learn)}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8, 16, 32, 64, 105])
    parser.add_argument("--rows", type=int, nargs="+", default=[2000, 8000])
    parser.add_argument("--M", type=int, nargs="+", default=[64])
    parser.add_argument("--blurs", nargs="+", default=["delta", "diagonal", "full"])
    parser.add_argument("--out", default="costs.json")
    add_outdir_option(parser)
    output.add_quick_option(parser, dims=[2, 8], rows=[300], M=[8])
    args = parser.parse_args()
    use_outdir(args)
    report = {"machine": machine(), "versions": versions(), "args": vars(args),
              "matmul_flops_per_second": matmul_rate(n=1024, threads=1), "runs": []}
    for n in args.rows:
        for M in args.M:
            for d in args.dims:
                for blur in args.blurs:
                    for learn in (False, "means"):
                        row = one(n, d, M, blur, learn)
                        row["efficiency"] = row["flops"] / (
                            row["seconds_per_evaluation"] * report["matmul_flops_per_second"])
                        report["runs"].append(row)
                        print(f"[costs] n={n} M={M} d={d} {blur} {row['learn_bases']}: "
                              f"{row['seconds_per_evaluation']:.3f}s/evaluation, "
                              f"{row['flops']:.3g} flops, efficiency "
                              f"{row['efficiency']:.3f}", flush=True)
                        save(report, args.out)
    report["matmul_flops_per_second_end"] = matmul_rate(n=1024, threads=1)
    save(report, args.out)


if __name__ == "__main__":
    main()
