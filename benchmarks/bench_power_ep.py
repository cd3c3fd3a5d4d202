"""Power EP's alpha on learnt bases: learnt noise and held-out RMSE / NLPD against alpha.

For each regression set of ``../shared/datasets/`` (as ``bench_learnt_bases.py`` loads
and splits them: 20% test, at most ``--train-rows`` training rows, standardised) and a
generated set with known noise (``saspa_dask.datasets.multiscale_regression``: the
noise variance in the standardised target's units is known exactly), per split and M:
SASPA (Gaussian likelihood, learnt means and hyperparameters by the power-EP energy,
up to ``--max-hyper-iter`` optimiser iterations) for each alpha.

Reported per fit: test RMSE and NLPD (standardised units, NLPD of y with the noise),
learnt noise variance (and the truth for the generated set), iterations, seconds.
Writes results/power_ep.json; ``--report`` prints the table and draws
figures/power_ep.png (error against alpha) from a saved run.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import common
from bench_learnt_bases import SETS, load_regression, save, split
from common import add_outdir_option, machine, regression_scores, use_outdir, versions

ALPHAS = (1.0, 0.5, 0.1, 1e-3)


def generated(seed, n=25_000):
    """multiscale_regression rows and the noise variance that generated them."""
    from saspa_dask.datasets import multiscale_regression

    X, y, f = multiscale_regression(n, 8, seed=100 + seed)
    return X, y, float((0.1 * f.std()) ** 2)


def fit(Xtr, ytr, Xte, yte, M, alpha, max_iter, blur):
    from saspa_dask import SASPARegressor

    t0, c0 = time.perf_counter(), time.process_time()
    model = SASPARegressor(M, blur=blur, alpha=alpha, learn_bases="means",
                           max_hyper_iter=max_iter, random_state=0,
                           hyper_subsample=None).fit(Xtr, ytr)
    out = {"alpha": alpha, "seconds": time.perf_counter() - t0,
           "cpu_seconds": time.process_time() - c0,
           "noise_variance": model.noise_variance_,
           "iterations": model.hyperparameter_info_["n_iterations"],
           "hit_cap": model.hyperparameter_info_["hit_iteration_cap"],
           "energy": model.log_evidence_}
    for tag, X, y in (("test", Xte, yte), ("train", Xtr, ytr)):
        mean, var = model.predict_latent(X)
        scores = regression_scores(mean, var + model.noise_variance_, y)
        out.update({f"{tag}_{k}": v for k, v in scores.items()})
    return out


def run(args):
    runs = []
    for name in args.sets:
        for s in range(args.first_split, args.first_split + args.splits):
            truth = None
            if name == "generated":
                X, y, noise = generated(s)
                Xtr, ytr, Xte, yte = split(X, y, s, args.train_rows)
                # the split standardises y by the training rows' sd
                truth = noise / float(np.std(y[np.random.default_rng(s).permutation(
                    len(y))[len(y) // 5:][:args.train_rows]])) ** 2
            else:
                Xtr, ytr, Xte, yte = split(*load_regression(name), s, args.train_rows)
            for M in args.bases:
                row = {"set": name, "split": s, "M": M, "n_train": len(ytr),
                       "d": Xtr.shape[1], "noise_truth": truth, "fits": []}
                for alpha in args.alphas:
                    row["fits"].append(fit(Xtr, ytr, Xte, yte, M, alpha,
                                           args.max_hyper_iter, args.blur))
                    last = row["fits"][-1]
                    print(f"[power_ep] {name} split {s} M={M} alpha={alpha:g}: "
                          f"RMSE {last['test_rmse']:.4f} NLPD {last['test_nlpd']:.3f} "
                          f"noise {last['noise_variance']:.4g}"
                          + (f" (truth {truth:.4g})" if truth else "")
                          + f" {last['iterations']} it {last['seconds']:.1f}s", flush=True)
                runs.append(row)
                save({"machine": machine(), "versions": versions(), "args": vars(args),
                      "runs": runs}, args.out)
    return runs


def report(runs, alphas):
    """Mean (and spread over splits) of test RMSE / NLPD and learnt noise per set, M
    and alpha, as a Markdown table; the plot of NLPD against alpha."""
    keys = sorted({(r["set"], r["M"]) for r in runs})
    print("| set, M | " + " | ".join(f"alpha = {a:g}" for a in alphas) + " |")
    print("|---|" + "---|" * len(alphas))
    table = {}
    for key in keys:
        cells = []
        for a in alphas:
            fits = [f for r in runs if (r["set"], r["M"]) == key for f in r["fits"]
                    if f["alpha"] == a]
            rmse = np.array([f["test_rmse"] for f in fits])
            nlpd = np.array([f["test_nlpd"] for f in fits])
            noise = np.array([f["noise_variance"] for f in fits])
            table[key + (a,)] = nlpd.mean()
            cells.append(f"{rmse.mean():.4f} / {nlpd.mean():.3f} ± {nlpd.std():.3f} / "
                         f"{noise.mean():.3g}")
        truth = [r["noise_truth"] for r in runs if (r["set"], r["M"]) == key][0]
        label = f"{key[0]}{' (noise ' + format(truth, '.3g') + ')' if truth else ''}, {key[1]}"
        print(f"| {label} | " + " | ".join(cells) + " |")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for key in keys:
        ax.plot(alphas, [table[key + (a,)] for a in alphas], marker="o",
                label=f"{key[0]}, M={key[1]}")
    ax.set_xscale("log")
    ax.set_xlabel("alpha (power EP; 1 = FITC-EP / SASPA, -> 0 = VFE)")
    ax.set_ylabel("held-out NLPD (mean over splits)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    common.FIGURES.mkdir(parents=True, exist_ok=True)
    fig.savefig(common.FIGURES / "power_ep.png", dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["generated", *SETS])
    parser.add_argument("--bases", nargs="+", type=int, default=[64])
    parser.add_argument("--alphas", nargs="+", type=float, default=list(ALPHAS))
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--first-split", type=int, default=0)
    parser.add_argument("--train-rows", type=int, default=5_000)
    parser.add_argument("--max-hyper-iter", type=int, default=100)
    parser.add_argument("--blur", default="full")
    parser.add_argument("--report", help="print the table of a saved run (results/...)")
    parser.add_argument("--out", default="power_ep.json", help="file under results/")
    add_outdir_option(parser)
    args = parser.parse_args()
    use_outdir(args)
    if args.report:
        saved = json.loads((common.RESULTS / args.report).read_text())
        report(saved["runs"], saved["args"]["alphas"])
        return
    report(run(args), args.alphas)


if __name__ == "__main__":
    main()
