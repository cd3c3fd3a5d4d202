"""What a looser stop rule for learning buys: the defaults at several ``hyper_tol``.

On the papers' splits of ``../shared/datasets/`` (Kin-40k, Pumadyn-32nm, Pole Telecomm;
inputs and targets standardised on the training rows), ``SASPARegressor(hyper_tol=tol,
random_state=seed)`` with every other default, one BLAS thread, for each tolerance of
``--tols`` (1e-4 is the default; ``--hyper-subsample`` sets learning's stages): test
RMSE and NLPD in standardised units, the fit's process CPU seconds, learning's
iterations and stop reason, and the energy per row.  Writes ``results/hyper_tol.json``.

    python benchmarks/bench_hyper_tol.py                 # 3 sets x 3 tolerances, seed 0
    python benchmarks/bench_hyper_tol.py --quick         # smoke: 1,000 Kin-40k rows, M = 8
"""

from __future__ import annotations

import argparse

from lib import data, fits
from lib.machine import matmul_rate, start_report
from lib.output import add_quick_option, parse, record


def one_fit(split, tol, seed, n_bases, stages=None):
    Xtr, ytr, Xte, yte, _ = split
    extra = {} if n_bases is None else {"n_bases": n_bases}
    if stages is not None:
        extra["hyper_subsample"] = stages
    return {"tol": tol, "seed": seed, **fits.regressor_fit(
        Xtr, ytr, Xte, yte, hyper_tol=tol, random_state=seed, **extra)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data.add_paper_set_options(parser, sets=("pumadyn32nm", "kin40k", "pol"), seeds=(0,),
                               bases=None)
    parser.add_argument("--tols", type=float, nargs="+", default=[1e-4, 1e-3, 3e-4])
    parser.add_argument("--hyper-subsample", default=None,
                        help="learning's stages, as saspa train takes them (default: the "
                             "estimator's)")
    parser.add_argument("--out", default="hyper_tol.json")
    add_quick_option(parser, sets=["kin40k"], tols=[1e-4, 1e-3], bases=8, rows=1000)
    args = parse(parser)
    report = start_report(args, rate=lambda: matmul_rate(threads=1), runs=[])
    for name in args.sets:
        split = data.paper_split(name, args.rows)
        for seed in args.seeds:
            for tol in args.tols:
                run = {"set": name, **one_fit(split, tol, seed, args.bases,
                                              args.hyper_subsample)}
                record(report, run, args.out)
    print("\n| set | hyper_tol | RMSE | NLPD | CPU s | iterations | energy / row |")
    print("|---|---|---|---|---|---|---|")
    for r in report["runs"]:
        print(f"| {r['set']} | {r['tol']:g} | {r['rmse']:.4f} | {r['nlpd']:.4f} | "
              f"{r['cpu_seconds']:.1f} | {r['iterations']} | {r['energy_per_row']:.4f} |")


if __name__ == "__main__":
    main()
