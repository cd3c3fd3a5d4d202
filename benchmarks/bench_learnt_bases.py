"""Learnt bases against K-means bases and GPyTorch's SVGP, side by side in one run.

For each regression set of ``../shared/datasets/`` (ailerons, house_16h with a log
target, cpu_act, california_housing without its text column and with the rows that
miss ``total_bedrooms`` dropped): 20% test, the rest subsampled to at most
``--train-rows`` training rows, inputs and target standardised on the training rows.
Per split and M:

* SASPA-full (Gaussian likelihood, hyperparameters by the EP evidence) with K-means
  bases (``learn_bases=False``), with learnt means, and with learnt means and blur;
* SVGP (GPyTorch: ARD RBF, Gaussian likelihood, inducing inputs learnt from the same
  K-means start, minibatch Adam, lr 0.01, batch 256, float32) stopped at the wall time
  of SASPA with learnt means and at 5 times it (equal wall time on this machine, which
  runs nothing else).

Reported: test RMSE and NLPD (in the standardised target's units, NLPD of y with the
noise), train NLPD (overfitting), seconds.  Writes results/learnt_bases.json.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from lib import data, output, svgp
from lib.machine import machine, matmul_rate, versions
from lib.metrics import regression_scores
from lib.output import add_outdir_option, use_outdir


def fit_saspa(Xtr, ytr, Xte, yte, M, learn, max_iter):
    from saspa_dask import SASPARegressor

    t0, c0 = time.perf_counter(), time.process_time()
    model = SASPARegressor(M, blur="full", learn_bases=learn, max_hyper_iter=max_iter,
                           random_state=0, hyper_subsample=None).fit(Xtr, ytr)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    out = {"seconds": seconds, "cpu_seconds": cpu, "noise_variance": model.noise_variance_,
           "iterations": model.hyperparameter_info_["n_iterations"],
           "hit_cap": model.hyperparameter_info_["hit_iteration_cap"]}
    for tag, X, y in (("test", Xte, yte), ("train", Xtr, ytr)):
        mean, var = model.predict_latent(X)
        s = regression_scores(mean, var + model.noise_variance_, y)
        out.update({f"{tag}_{k}": v for k, v in s.items()})
    return out


def fit_exact(Xtr, ytr, Xte, yte, warm_rows, max_iter):
    """The exact GP in closed form (``exact_gp.ExactGP``, written apart from the
    package): hyperparameters learnt by its evidence, first on ``warm_rows`` of the
    training rows (up to 100 L-BFGS-B iterations), then ``max_iter`` more on all of
    them, then the exact posterior on all training rows."""
    from exact_gp import ExactGP

    t0, c0 = time.perf_counter(), time.process_time()
    rows = np.random.default_rng(0).permutation(len(ytr))[:warm_rows]
    warm = ExactGP(max_iter=100).fit(Xtr[rows], ytr[rows])
    model = ExactGP(max_iter=max_iter, theta0=warm.theta_).fit(Xtr, ytr)
    out = {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
           "warm_rows": len(rows), "iterations_all_rows": int(model.result_.nit),
           "noise_variance": float(model.noise_variance_)}
    mean, var = model.predict_latent(Xte)
    test = regression_scores(mean, var + model.noise_variance_, yte)
    out.update({f"test_{k}": v for k, v in test.items()})
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(data.SETS))
    parser.add_argument("--bases", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--first-split", type=int, default=0,
                        help="seed of the first split (runs seeds first .. first+splits-1)")
    parser.add_argument("--train-rows", type=int, default=10_000)
    parser.add_argument("--max-hyper-iter", type=int, default=20,
                        help="SASPA's evidence iterations (the estimators' default: 20)")
    parser.add_argument("--blur-too", action="store_true",
                        help="also learn each basis's blur (means+blur)")
    parser.add_argument("--only-learn", nargs="+", choices=["kmeans", "means", "means+blur"],
                        help="run only these SASPA variants (and no SVGP, which is timed "
                             "against learnt means): a rerun of some columns")
    parser.add_argument("--exact", action="store_true",
                        help="also fit the exact GP (closed form) on the training rows")
    parser.add_argument("--exact-splits", type=int, default=1,
                        help="splits (from the first) that get the exact GP")
    parser.add_argument("--exact-warm-rows", type=int, default=4000)
    parser.add_argument("--exact-max-iter", type=int, default=15,
                        help="evidence iterations on all training rows after the warm start")
    parser.add_argument("--out", default="learnt_bases.json", help="file under results/")
    add_outdir_option(parser)
    output.add_quick_option(parser, sets=["cpu_act"], bases=[8], splits=1, train_rows=500,
                            max_hyper_iter=5, exact=True, exact_warm_rows=200,
                            exact_max_iter=2)
    args = parser.parse_args()
    use_outdir(args)
    from saspa_dask import kmeans_bases

    report = {"machine": machine(), "versions": versions("torch", "gpytorch"),
              "matmul_gflops": matmul_rate() / 1e9, "args": vars(args), "runs": []}
    print(f"float64 matmul: {report['matmul_gflops']:.1f} GFLOP/s", flush=True)
    for name in args.sets:
        X, y = data.load_regression(name)
        for seed in range(args.first_split, args.first_split + args.splits):
            Xtr, ytr, Xte, yte = data.held_out_split(X, y, seed, args.train_rows)
            if args.exact and seed < args.exact_splits:
                exact = fit_exact(Xtr, ytr, Xte, yte, args.exact_warm_rows,
                                  args.exact_max_iter)
                report["runs"].append({"set": name, "split": seed, "exact": exact,
                                       "n_train": len(ytr)})
                print(json.dumps(report["runs"][-1]), flush=True)
                output.save(report, args.out)
            for M in args.bases:
                run = {"set": name, "split": seed, "M": M, "n_train": len(ytr),
                       "d": X.shape[1]}
                learns = [False, "means"] + (["means+blur"] if args.blur_too else [])
                if args.only_learn:
                    learns = [False if v == "kmeans" else v for v in args.only_learn]
                for learn in learns:
                    run[f"saspa_{learn or 'kmeans'}"] = fit_saspa(
                        Xtr, ytr, Xte, yte, M, learn, args.max_hyper_iter)
                    print(json.dumps({"set": name, "M": M, "learn": learn or "kmeans",
                                      **run[f"saspa_{learn or 'kmeans'}"]}), flush=True)
                if not args.only_learn:
                    t = run["saspa_means"]["seconds"]
                    centres = kmeans_bases(Xtr, M, random_state=0).means
                    run["svgp"] = svgp.run_budgets(Xtr, ytr, Xte, yte, centres, [t, 5 * t])
                report["runs"].append(run)
                print(json.dumps(run), flush=True)
                output.save(report, args.out)
    output.save(report, args.out)


if __name__ == "__main__":
    main()
