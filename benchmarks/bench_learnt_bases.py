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

import common
from bench_peers import svgp_model
from bench_train import matmul_rate
from common import (DATASETS, add_outdir_option, error_and_nlp, machine, regression_scores,
                    use_outdir, versions)

SETS = ("ailerons", "house_16h", "cpu_act", "california_housing")


def load_regression(name):
    import csv

    with open(DATASETS / f"{name}.csv") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], rows[1:]
    keep = [k for k, h in enumerate(header[:-1]) if h != "ocean_proximity"]
    X = np.array([[float(r[k]) if r[k] != "" else np.nan for k in keep] for r in body])
    y = np.array([float(r[-1]) for r in body])
    ok = np.all(np.isfinite(X), axis=1)
    X, y = X[ok], y[ok]
    if name == "house_16h":
        y = np.log1p(y)
    return X, y


def split(X, y, seed, train_rows):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    n_test = len(y) // 5
    test, train = order[:n_test], order[n_test:][:train_rows]
    mx, sx = X[train].mean(0), X[train].std(0)
    sx[sx == 0] = 1.0
    my, sy = y[train].mean(), y[train].std()
    return ((X[train] - mx) / sx, (y[train] - my) / sy, (X[test] - mx) / sx,
            (y[test] - my) / sy)


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


def svgp(Xtr, ytr, Xte, yte, centres, budgets, batch=256, lr=0.01, by_cpu=False,
         regression=True):
    """SVGP trained by minibatch Adam; scores at each wall-time budget (seconds of
    training, evaluation outside the clock), or CPU-time budget with ``by_cpu`` (for a
    machine that runs other work too).  ``regression=False``: the Bernoulli (probit)
    likelihood on 0/1 labels, scored by test error and NLP."""
    import gpytorch
    import torch

    torch.set_num_threads(2)
    X = torch.tensor(Xtr, dtype=torch.float32)
    y = torch.tensor(ytr, dtype=torch.float32)
    model, likelihood = svgp_model(centres, Xtr.shape[1], regression=regression)
    model.train()
    likelihood.train()
    optimizer = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=lr)
    mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(y))
    generator = torch.Generator().manual_seed(0)
    seconds, cpu, out, epochs = 0.0, 0.0, [], 0
    budgets = sorted(budgets)
    while budgets:
        order = torch.randperm(len(y), generator=generator)
        for i in range(0, len(y), batch):
            start, cpu_start = time.perf_counter(), time.process_time()
            idx = order[i:i + batch]
            optimizer.zero_grad()
            loss = -mll(model(X[idx]), y[idx])
            loss.backward()
            optimizer.step()
            seconds += time.perf_counter() - start
            cpu += time.process_time() - cpu_start
            if budgets and (cpu if by_cpu else seconds) >= budgets[0]:
                model.eval()
                likelihood.eval()
                with torch.no_grad():
                    pred = likelihood(model(torch.tensor(Xte, dtype=torch.float32)))
                    mean, var = pred.mean.double().numpy(), pred.variance.double().numpy()
                model.train()
                likelihood.train()
                scores = (regression_scores(mean, var, yte) if regression else
                          dict(zip(("error", "nlp"), error_and_nlp(mean, yte))))
                out.append({"budget": budgets.pop(0), "seconds": seconds, "cpu_seconds": cpu,
                            "epochs": epochs, **scores})
        epochs += 1
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS))
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
    args = parser.parse_args()
    use_outdir(args)
    from saspa_dask import kmeans_bases

    report = {"machine": machine(), "versions": versions("torch", "gpytorch"),
              "matmul_gflops": matmul_rate() / 1e9, "args": vars(args), "runs": []}
    print(f"float64 matmul: {report['matmul_gflops']:.1f} GFLOP/s", flush=True)
    for name in args.sets:
        X, y = load_regression(name)
        for seed in range(args.first_split, args.first_split + args.splits):
            Xtr, ytr, Xte, yte = split(X, y, seed, args.train_rows)
            if args.exact and seed < args.exact_splits:
                exact = fit_exact(Xtr, ytr, Xte, yte, args.exact_warm_rows,
                                  args.exact_max_iter)
                report["runs"].append({"set": name, "split": seed, "exact": exact,
                                       "n_train": len(ytr)})
                print(json.dumps(report["runs"][-1]), flush=True)
                save(report, args.out)
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
                    run["svgp"] = svgp(Xtr, ytr, Xte, yte, centres, [t, 5 * t])
                report["runs"].append(run)
                print(json.dumps(run), flush=True)
                save(report, args.out)
    save(report, args.out)


def save(report, name):
    """Written after every run, so a stopped benchmark keeps what it measured."""
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    (common.RESULTS / name).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
