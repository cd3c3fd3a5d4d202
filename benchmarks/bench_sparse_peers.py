"""The defaults against GPyTorch's SVGP and SGPR at equal CPU on the papers' splits.

On the papers' splits of ``../shared/datasets/`` (Pole Telecomm, Kin-40k, Pumadyn-32nm;
inputs and targets standardised on the training rows), for each seed of ``--seeds``:
``SASPARegressor(n_bases=M, random_state=seed, **params)`` (``--params``; every other
parameter its default), one BLAS thread, its fit's process CPU seconds T; then, from the
same K-means centres (``kmeans_bases(..., random_state=seed)``), one torch thread each,
scored when their optimisers' CPU reaches each multiple of T in ``--multiples`` (1 and
5):

* SVGP (``lib/svgp.py``: minibatch Adam at lr 0.01, batch 256, float32);
* SGPR (``lib/sgpr.py``: Titsias' collapsed bound, full-batch L-BFGS, float64), which
  may stop before its budget (then scored where it stopped).

Test RMSE and NLPD in standardised units.  Writes ``results/sparse_peers.json``.

    python benchmarks/bench_sparse_peers.py                       # 3 sets, seeds 0-2, M = 64
    python benchmarks/bench_sparse_peers.py --sets pol --bases 256 --seeds 0
    python benchmarks/bench_sparse_peers.py --quick               # smoke: 1,000 rows, M = 8
    python benchmarks/bench_sparse_peers.py --sets kin40k --bases 256 --resplit 36000 \
        --multiples 1                       # Kin-40k's 40,000 rows dealt 36,000 / 4,000
    python benchmarks/bench_sparse_peers.py --sets kin40k --params '{"alpha": 0.5}'
"""

from __future__ import annotations

import argparse
import json

from lib import data, fits, sgpr, svgp
from lib.machine import matmul_rate, start_report
from lib.output import add_quick_option, parse, record

from saspa_dask import kmeans_bases


def peers(Xtr, ytr, Xte, yte, M, seed, budgets):
    """SVGP and SGPR from the same K-means centres, scored at the CPU ``budgets``."""
    centres = kmeans_bases(Xtr, M, random_state=seed).means
    svgp_rows, _, _ = svgp.train(
        Xtr, ytr, centres, budgets, regression=True, batch=256, lr=0.01, clock="cpu",
        threads=1, score=lambda m, lik: svgp.scores(m, lik, Xte, yte, True))
    sgpr_rows = sgpr.train(Xtr, ytr, centres, budgets,
                           score=lambda m, lik: sgpr.scores(m, lik, Xte, yte))
    return {"svgp": svgp_rows, "sgpr": sgpr_rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data.add_paper_set_options(parser, resplit=True)
    parser.add_argument("--multiples", type=float, nargs="+", default=[1, 5],
                        help="the peers are scored at these multiples of the defaults' CPU")
    parser.add_argument("--params", type=json.loads, default={},
                        help="SASPARegressor parameters other than the defaults, as JSON")
    parser.add_argument("--out", default="sparse_peers.json")
    add_quick_option(parser, sets=["kin40k"], seeds=[0], bases=8, rows=1000)
    args = parse(parser)
    report = start_report(args, lambda: matmul_rate(threads=1), "torch", "gpytorch",
                          runs=[])
    for name in args.sets:
        Xtr, ytr, Xte, yte, _ = data.paper_split(name, args.rows, args.resplit,
                                                 args.resplit_seed)
        for seed in args.seeds:
            saspa = fits.regressor_fit(Xtr, ytr, Xte, yte, n_bases=args.bases,
                                       random_state=seed, **args.params)
            budgets = [k * saspa["cpu_seconds"] for k in args.multiples]
            record(report, {"set": name, "seed": seed, "M": args.bases, "saspa": saspa,
                            **peers(Xtr, ytr, Xte, yte, args.bases, seed, budgets)},
                   args.out)
    at = ", ".join(f"{k:g} T" for k in args.multiples)
    saspa = json.dumps(args.params) if args.params else "defaults"
    print(f"\n| set | seed | SASPA {saspa} (CPU s) | SVGP at {at} | SGPR at {at} |")
    print("|---|---|---|---|---|")
    for r in report["runs"]:
        s = r["saspa"]
        cells = [", ".join(f"{p['rmse']:.4f} / {p['nlpd']:.3f}" for p in r[k])
                 for k in ("svgp", "sgpr")]
        print(f"| {r['set']} | {r['seed']} | {s['rmse']:.4f} / {s['nlpd']:.3f} "
              f"({s['cpu_seconds']:.1f}) | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
