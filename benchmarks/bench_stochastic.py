"""Stochastic against full-batch learning on the SPGP and IDGP papers' own splits.

On ``../shared/datasets/`` Kin-40k (10,000 / 30,000), Pumadyn-32nm (7,168 / 1,024) and
Pole Telecomm (10,000 / 5,000), inputs standardised on the training rows, targets
standardised likewise, ``SASPARegressor(M, random_state=seed)`` learns its kernel,
noise and basis means (``learn_bases="auto"``) by the EP energy, either

* full-batch (the default: L-BFGS-B over full EP runs, on every row: the sets are
  smaller than ``hyper_subsample``), or
* stochastic (``learning="stochastic"``, the defaults of
  :class:`saspa_dask.StochasticLearning`),

for each blur of ``--blurs`` and Power EP alpha of ``--alphas``.  Reported per run:
test RMSE and NLPD in the target's own units, the energy per row at the learnt values
(full-batch EP on every row, for both), learning's iterations (steps for stochastic),
the fit's process CPU seconds (the machine may be shared: CPU, not wall time), and
where the model puts what its mean does not explain: the training RMSE, the noise
variance and the mean of the rows' residual variances s2 - |phi_i|^2.  The float64 matmul rate is measured at
the start.  Writes ``results/stochastic.json`` (``--out``).

    python benchmarks/bench_stochastic.py                       # M = 64, 3 sets
    python benchmarks/bench_stochastic.py --quick                # smoke: Kin-40k, M = 8
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import warnings

import numpy as np
from lib import data, machine, metrics, output
from lib.machine import matmul_rate
from lib.svgp import run_budgets


SETS = ("kin40k", "pumadyn32nm", "pol")


def run(split, M, blur, learning, seed, rows=None, alpha=1.0, learn_offset=True,
        batch_rows=None):
    from saspa_dask import SASPARegressor

    Xtr, ytr, Xte, yte, scale = split
    if rows is not None:
        Xtr, ytr = Xtr[:rows], ytr[:rows]
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bound warnings: recorded below
        model = SASPARegressor(M, blur=blur, learning=learning, random_state=seed,
                               hyper_subsample=None, alpha=alpha,
                               learn_offset=learn_offset,
                               stochastic=batch_rows and {"batch_rows": batch_rows},
                               ).fit(Xtr, ytr)
    cpu = time.process_time() - start
    mean, var = model.predict_latent(Xte)
    scores = metrics.regression_scores(mean * scale, (var + model.noise_variance_) * scale**2,
                                      yte * scale)
    info = model.hyperparameter_info_
    # where the model puts what its mean does not explain: the noise, or each training
    # row's residual variance (FITC's s2 - |phi_i|^2; power EP sees alpha of it)
    lam = model.fitted_posterior_.block(Xtr).lam
    train_rmse = float(np.sqrt(np.mean((model.predict(Xtr) - ytr) ** 2)) * scale)
    return {"blur": blur, "learning": learning, "alpha": alpha, "seed": seed,
            "learn_offset": learn_offset, "y_mean": float(model.y_mean_),
            "cpu_seconds": cpu, "energy_per_row": model.log_evidence_ / len(ytr),
            "iterations": info.get("n_iterations"), "stop_reason": info.get("stop_reason"),
            "at_bounds": info.get("at_bounds"), "train_rmse": train_rmse,
            "noise_variance": float(model.noise_variance_ * scale**2),
            "mean_residual_variance": float(lam.mean() * scale**2), **scores}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--bases", type=int, default=64)
    parser.add_argument("--blurs", nargs="+", default=["auto", "delta"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--alphas", type=float, nargs="+", default=[1.0],
                        help="Power EP's alphas (1 is EP)")
    parser.add_argument("--learnings", nargs="+", default=["full-batch", "stochastic"],
                        choices=["full-batch", "stochastic"])
    parser.add_argument("--learn-offset", nargs="+", default=["on"], choices=["on", "off"],
                        help="learn the constant prior mean (the estimators' learn_offset)")
    parser.add_argument("--svgp-cpu", type=float, nargs="*", default=[],
                        help="also GPyTorch's SVGP (K-means start, lr 0.01, batch 256) "
                             "scored at these CPU seconds of training")
    parser.add_argument("--rows", type=int, nargs="+", default=[None],
                        help="learn on the first ROWS training rows (default: all)")
    parser.add_argument("--batch-rows", type=int,
                        help="stochastic learning's minibatch rows (default: the library's)")
    parser.add_argument("--quick", action="store_true",
                        help="Kin-40k's first 1,000 training rows, M = 8: a smoke run")
    parser.add_argument("--out", default="stochastic.json", help="file under results/")
    args = output.parse(parser)
    if args.quick:
        args.sets, args.bases, args.blurs = ["kin40k"], 8, ["delta"]
        args.svgp_cpu = [0.5] if args.svgp_cpu else []
    report = machine.start_report(args, matmul_rate, runs=[])
    if args.quick:
        args.rows = [1000]
    for name in args.sets:
        split = data.paper_split(name)
        for rows, blur, alpha, seed, offset, learning in itertools.product(
                args.rows, args.blurs, args.alphas, args.seeds, args.learn_offset,
                args.learnings):
            result = {"set": name, "M": args.bases, "rows": rows,
                      **run(split, args.bases, blur, learning, seed, rows, alpha,
                            offset == "on", args.batch_rows)}
            report["runs"].append(result)
            print(json.dumps(result), flush=True)
        if args.svgp_cpu:
            report.setdefault("svgp", []).extend(
                {"set": name, "M": args.bases, **r}
                for r in run_svgp(split, args.bases, args.svgp_cpu, args.rows[0]))
            print(json.dumps(report["svgp"]), flush=True)
    output.RESULTS.mkdir(parents=True, exist_ok=True)
    (output.RESULTS / args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    print("\n| set | rows | blur | alpha | offset | learning | RMSE | NLPD | energy / row | "
          "iterations | CPU s | train RMSE | noise | mean residual variance |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in report["runs"]:
        # targets are standardised: the learnt mean in standard deviations from y's mean
        offset = f"learnt, {r['y_mean']:+.3f} sd" if r["learn_offset"] else "y's mean"
        print(f"| {r['set']} | {r['rows'] or 'all'} | {r['blur']} | {r['alpha']:g} | "
              f"{offset} | {r['learning']} | "
              f"{r['rmse']:.4g} | {r['nlpd']:.4g} | {r['energy_per_row']:.4f} | "
              f"{r['iterations']} | {r['cpu_seconds']:.0f} | {r['train_rmse']:.4g} | "
              f"{r['noise_variance']:.3g} | {r['mean_residual_variance']:.3g} |")


def run_svgp(split, M, budgets, rows=None):
    """GPyTorch's SVGP from the same K-means start, scored at CPU-second budgets
    (RMSE and NLPD in the target's units)."""
    from saspa_dask import kmeans_bases

    Xtr, ytr, Xte, yte, scale = split
    if rows is not None:
        Xtr, ytr = Xtr[:rows], ytr[:rows]
    centres = kmeans_bases(Xtr, M, random_state=0).means
    out = []
    for r in run_budgets(Xtr, ytr, Xte, yte, centres, budgets, by_cpu=True):
        r["rmse"] *= scale
        r["nlpd"] += float(np.log(scale))
        out.append(r)
    for r in out:
        print(f"| SVGP | {r['budget']:g} CPU-s | {r['epochs']} epochs | RMSE {r['rmse']:.4g} "
              f"| NLPD {r['nlpd']:.4g} |")
    return out


if __name__ == "__main__":
    main()
