"""Inter-domain features against pseudo-inputs at equal M (the IDGP paper's comparison).

On ``../shared/datasets/`` ailerons and house_16h (log target), split as in
``bench_learnt_bases.py`` (20% test, the rest subsampled to ``--train-rows``,
standardised on the training rows), each method learns its features and the kernel
and noise by the EP evidence (Gaussian likelihood, ``--max-hyper-iter`` L-BFGS-B
iterations, seed 0):

* SPGP / FITC: delta bases, learnt pseudo-inputs (``blur="delta", learn_bases="means"``);
* TFIFGP: frequency features with learnt centres, frequencies, phases and window
  (``blur="fourier", learn_bases="means+blur"``);
* FIFGP: frequency features on one centre (the inputs' mean), learnt frequencies,
  phases and window (``blur="fourier-global", learn_bases="means+blur"``);
* SASPA-full with K-means bases (no bases learnt), for reference.

Reported against M: test RMSE and NLPD (of y, in standardised units), the evidence
and seconds, averaged over ``--splits`` splits (seeds from ``--first-split``);
``figures/idgp.png``; ``results/idgp.json`` (``--out``).  ``--report A.json B.json``
pools earlier runs (for instance split 0 and splits 1-2 run apart).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from lib import output
from lib.data import held_out_split, load_regression
from lib.machine import machine, matmul_rate, versions
from lib.metrics import regression_scores
from lib.output import add_outdir_option, use_outdir


METHODS = {"SPGP (learnt pseudo-inputs)": dict(blur="delta", learn_bases="means"),
           "TFIFGP (learnt frequency features)": dict(blur="fourier",
                                                      learn_bases="means+blur"),
           "FIFGP (learnt frequency features, one centre)": dict(
               blur="fourier-global", learn_bases="means+blur"),
           "SASPA-full, K-means bases": dict(blur="full", learn_bases=False)}


def fit(Xtr, ytr, Xte, yte, M, options, max_iter):
    from saspa_dask import SASPARegressor

    t0 = time.perf_counter()
    model = SASPARegressor(M, random_state=0, max_hyper_iter=max_iter, hyper_subsample=None,
                           **options).fit(Xtr, ytr)
    mean, var = model.predict_latent(Xte)
    return {"seconds": time.perf_counter() - t0, "log_evidence": model.log_evidence_,
            "hit_cap": model.hyperparameter_info_["hit_iteration_cap"],
            **regression_scores(mean, var + model.noise_variance_, yte)}


def _mean_runs(runs):
    """One row per (set, M, method): the means over splits, with ``n_splits``."""
    groups = {}
    for r in runs:
        groups.setdefault((r["set"], r["M"], r["method"]), []).append(r)
    out = []
    for (name, M, method), rs in groups.items():
        row = {"set": name, "M": M, "method": method, "n_splits": len(rs),
               "hit_cap": all(r["hit_cap"] for r in rs)}
        for key in ("rmse", "nlpd", "log_evidence", "seconds"):
            row[key] = float(np.mean([r[key] for r in rs]))
        out.append(row)
    return out


def plot(runs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = _mean_runs(runs)
    sets = sorted({r["set"] for r in runs})
    fig, axes = plt.subplots(2, len(sets), figsize=(5 * len(sets), 6), squeeze=False)
    for col, name in enumerate(sets):
        for method in METHODS:
            sel = sorted((r for r in runs if r["set"] == name and r["method"] == method),
                         key=lambda r: r["M"])
            for row, key in enumerate(("rmse", "nlpd")):
                axes[row, col].plot([r["M"] for r in sel], [r[key] for r in sel], "o-",
                                    label=method)
                axes[row, col].set_xscale("log", base=2)
                axes[row, col].set_ylabel(f"test {key.upper()}")
        axes[0, col].set_title(name)
        axes[1, col].set_xlabel("M")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    output.FIGURES.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def table(runs):
    """The RESULTS.md table: test RMSE / NLPD (log evidence; seconds; * where the
    optimiser stopped before the iteration cap), averaged over the splits run."""
    runs = _mean_runs(runs)
    methods = list(dict.fromkeys(r["method"] for r in runs))
    lines = ["| set | M | " + " | ".join(methods) + " |",
             "|---|---|" + "---|" * len(methods)]
    for name in dict.fromkeys(r["set"] for r in runs):
        for M in sorted({r["M"] for r in runs if r["set"] == name}):
            cells = []
            for method in methods:
                r = next((r for r in runs if (r["set"], r["M"], r["method"])
                          == (name, M, method)), None)
                cells.append("" if r is None else
                             f"{r['rmse']:.4f} / {r['nlpd']:.3f} ({r['log_evidence']:.0f}; "
                             f"{r['seconds']:.1f} s{'' if r['hit_cap'] else ' *'})")
            lines.append(f"| {name} | {M} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["ailerons", "house_16h"])
    parser.add_argument("--bases", nargs="+", type=int, default=[8, 16, 32, 64, 128])
    parser.add_argument("--train-rows", type=int, default=5000)
    parser.add_argument("--max-hyper-iter", type=int, default=100)
    parser.add_argument("--splits", type=int, default=1)
    parser.add_argument("--first-split", type=int, default=0,
                        help="seed of the first split (runs first .. first+splits-1)")
    parser.add_argument("--out", default="idgp.json", help="file under results/")
    parser.add_argument("--report", metavar="JSON", nargs="+",
                        help="only print the table and redraw the plot of earlier runs "
                             "(their runs pooled: the mean over their splits)")
    add_outdir_option(parser)
    args = parser.parse_args()
    use_outdir(args)
    if args.report:
        runs = [r for path in args.report for r in json.loads(open(path).read())["runs"]]
        print(table(runs))
        plot(runs, output.FIGURES / "idgp.png")
        return
    report = {"machine": machine(), "versions": versions(), "args": vars(args),
              "matmul_gflops": matmul_rate() / 1e9, "runs": []}
    print(f"float64 matmul: {report['matmul_gflops']:.1f} GFLOP/s", flush=True)
    output.RESULTS.mkdir(parents=True, exist_ok=True)
    out = output.RESULTS / args.out
    for name in args.sets:
        X, y = load_regression(name)
        for seed in range(args.first_split, args.first_split + args.splits):
            Xtr, ytr, Xte, yte = held_out_split(X, y, seed, args.train_rows)
            for M in args.bases:
                for method, options in METHODS.items():
                    run = {"set": name, "split": seed, "M": M, "method": method,
                           **fit(Xtr, ytr, Xte, yte, M, options, args.max_hyper_iter)}
                    report["runs"].append(run)
                    print(json.dumps(run), flush=True)
                    out.write_text(json.dumps(report, indent=1))  # a stopped run keeps its rows
    plot(report["runs"], output.FIGURES / "idgp.png")
    print(table(report["runs"]))


if __name__ == "__main__":
    main()
