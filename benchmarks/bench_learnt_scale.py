"""Learnt bases at scale: 10^6 rows, d = 8, M = 256, end to end through the ``saspa``
command, against a fixed-hyperparameter fit and GPyTorch's SVGP (issue 14).

The data are ``saspa make-data --kind multiscale-regression`` (structure at several
length scales, input 8 irrelevant, noise standard deviation 0.1 of the signal's): a
training store of ``--rows`` rows (seed 0) and a test store of ``--test-rows`` (seed 1).
Timed, each as its own process on the embedded cluster of ``--workers`` workers:

* ``saspa train --task regression --bases M`` (fixed hyperparameters: the data-driven
  defaults, noise variance from the targets);
* ``saspa train --learn-bases means`` (hyperparameters and basis means learnt on the
  default 20,000-row subsample, then EP on all rows);

then ``saspa evaluate`` of each on the test store.  SVGP (ARD RBF, M inducing inputs
from the same K-means start, Adam lr 0.01, batch 1024, float32, targets standardised)
trains on all rows and is scored after the wall time of the learnt fit and after
``--svgp-minutes``.  The float64 matmul rate is measured at the start, in the same run.
Writes results/learnt_scale.json.

    python benchmarks/bench_learnt_scale.py                     # 10^6 rows, M = 256
    python benchmarks/bench_learnt_scale.py --rows 20000 --test-rows 5000 --bases 16 \\
        --svgp-minutes 0.2                                      # a smoke run
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

import common
from bench_train import BIN, matmul_rate, run
from common import machine, versions


def _timed(cmd):
    start = time.perf_counter()
    res = run(cmd)
    return res, time.perf_counter() - start


def _evaluate(model, test):
    res = run([BIN / "saspa", "evaluate", model, test, "--json"])
    return json.loads(res.stdout)


def _info(model):
    return json.loads(run([BIN / "saspa", "info", model, "--json"]).stdout)


def saspa_fits(work, args):
    """The fixed and the learnt fit, timed end to end, and their test metrics."""
    train, test = work / "train.zarr", work / "test.zarr"
    common_args = ["--task", "regression", "--bases", args.bases, "--blur", args.blur,
                   "--workers", args.workers, "--overwrite"]
    fits = {}
    for name, extra in (("fixed", []), ("learnt_means", ["--learn-bases", "means"])):
        model = work / f"{name}.zarr"
        res, seconds = _timed([BIN / "saspa", "train", train, "--out", model,
                               *common_args, *extra])
        info = _info(model)
        fits[name] = {"seconds": seconds, **_evaluate(model, test),
                      "noise_variance": info["likelihood"].get("noise_variance"),
                      "hyperparameters": info["hyperparameters"]["info"],
                      "sweeps": info["ep"]["n_sweeps"],
                      "warnings": [ln for ln in res.stderr.splitlines()
                                   if ln.startswith("warning")]}
        print(json.dumps({name: fits[name]}), flush=True)
    return fits


def svgp_run(work, args, budgets, lr=0.01, regression=True, test="test.zarr"):
    """SVGP on all training rows, scored on the test rows at each wall-time budget
    (seconds of its optimiser steps); classification (``regression=False``) uses the
    Bernoulli (probit) likelihood on 0/1 labels."""
    import gpytorch
    import torch
    import zarr

    from bench_peers import svgp_model
    from saspa_dask import kmeans_bases

    torch.set_num_threads(args.workers)
    tr = zarr.open_group(str(work / "train.zarr"), mode="r")
    te = zarr.open_group(str(work / test), mode="r")
    Xtr, ytr = tr["X"][...], tr["y"][...]
    Xte, yte = te["X"][...], te["y"][...]
    my, sy = (ytr.mean(), ytr.std()) if regression else (0.0, 1.0)
    centres = kmeans_bases(Xtr, args.bases, random_state=0).means
    X = torch.tensor(Xtr, dtype=torch.float32)
    y = torch.tensor((ytr - my) / sy, dtype=torch.float32)
    model, likelihood = svgp_model(centres, Xtr.shape[1], regression=regression)
    model.train()
    likelihood.train()
    optimizer = torch.optim.Adam([*model.parameters(), *likelihood.parameters()], lr=lr)
    mll = gpytorch.mlls.VariationalELBO(likelihood, model, num_data=len(y))
    generator = torch.Generator().manual_seed(0)
    seconds, out, epochs, steps = 0.0, [], 0, 0
    budgets = sorted(budgets)
    while budgets:
        order = torch.randperm(len(y), generator=generator)
        for i in range(0, len(y), args.batch):
            start = time.perf_counter()
            idx = order[i:i + args.batch]
            optimizer.zero_grad()
            loss = -mll(model(X[idx]), y[idx])
            loss.backward()
            optimizer.step()
            seconds += time.perf_counter() - start
            steps += 1
            if budgets and seconds >= budgets[0]:
                out.append({"budget": budgets.pop(0), "seconds": seconds, "steps": steps,
                            "epochs": epochs + i / len(y),
                            **_svgp_scores(model, likelihood, Xte, yte, my, sy,
                                           regression)})
                print(json.dumps({"svgp": out[-1]}), flush=True)
                if not budgets:
                    break
        epochs += 1
    return out


def _svgp_scores(model, likelihood, Xte, yte, my, sy, regression=True):
    import torch
    from scipy.stats import norm

    model.eval()
    likelihood.eval()
    means, variances = [], []
    with torch.no_grad():
        for a in range(0, len(yte), 10_000):
            pred = likelihood(model(torch.tensor(Xte[a:a + 10_000], dtype=torch.float32)))
            means.append(pred.mean.double().numpy())
            variances.append(pred.variance.double().numpy())
    model.train()
    likelihood.train()
    if not regression:  # the Bernoulli likelihood's mean is P(y = 1)
        p = np.clip(np.concatenate(means), 1e-12, 1 - 1e-12)
        return {"error": float(np.mean((p > 0.5) != (yte > 0.5))),
                "nlp": float(-np.mean(np.where(yte > 0.5, np.log(p), np.log1p(-p))))}
    mean = np.concatenate(means) * sy + my
    sd = np.sqrt(np.concatenate(variances)) * sy
    return {"rmse": float(np.sqrt(np.mean((mean - yte) ** 2))),
            "nlpd": float(-norm.logpdf(yte, mean, sd).mean())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_options(parser)
    parser.add_argument("--blur", default="full")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--svgp-minutes", type=float, default=20.0)
    parser.add_argument("--no-svgp", action="store_true")
    parser.add_argument("--out", default="learnt_scale.json", help="file under results/")
    common.add_outdir_option(parser)
    args = parser.parse_args()
    common.use_outdir(args)
    report = {"machine": machine(), "versions": versions("torch", "gpytorch"),
              "matmul_gflops": matmul_rate() / 1e9, "args": vars(args)}
    print(f"float64 matmul: {report['matmul_gflops']:.1f} GFLOP/s", flush=True)
    with tempfile.TemporaryDirectory(prefix="saspa-learnt-scale-") as tmp:
        work = Path(tmp)
        report["noise_sd"] = make_data(work, args)
        fits = saspa_fits(work, args)
        report["saspa"] = fits
        report["learning_cost"] = fits["learnt_means"]["seconds"] / fits["fixed"]["seconds"]
        if not args.no_svgp:
            budgets = [fits["learnt_means"]["seconds"], 60 * args.svgp_minutes]
            report["svgp"] = svgp_run(work, args, budgets)
    common.RESULTS.mkdir(parents=True, exist_ok=True)
    (common.RESULTS / args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps({k: report[k] for k in ("matmul_gflops", "noise_sd", "learning_cost")}))


def add_data_options(parser):
    """The generated data's and the cluster's options (shared with bench_race)."""
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--test-rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--bases", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunk-rows", type=int, default=65536)


def make_data(work, args):
    """train.zarr (``args.rows``, seed 0) and test.zarr (``args.test_rows``, seed 1) of
    generated multiscale regression rows in ``work``; returns the test noise sd."""
    for name, rows, seed in (("train", args.rows, 0), ("test", args.test_rows, 1)):
        run([BIN / "saspa", "make-data", work / f"{name}.npy", "--rows", rows,
             "--features", args.features, "--seed", seed, "--kind", "multiscale-regression"])
        run([BIN / "saspa", "ingest", work / f"{name}.npy", "--out", work / f"{name}.zarr",
             "--chunk-rows", args.chunk_rows])
    return _noise_sd(work / "test.npy", seed=1)


def _noise_sd(test_npy, seed):
    """The noise standard deviation of the generated test rows: the RMSE floor."""
    from saspa_dask.datasets import multiscale_regression

    data = np.load(test_npy)
    _, y, f = multiscale_regression(len(data), data.shape[1] - 1, seed)
    assert np.array_equal(y, data[:, -1])
    return float(np.std(y - f))


if __name__ == "__main__":
    main()
