"""Power EP's alpha on learnt bases: learnt noise and held-out RMSE / NLPD against alpha.

For each regression set of ``../shared/datasets/`` (as ``bench_learnt_bases.py`` loads
and splits them: 20% test, at most ``--train-rows`` training rows, standardised) and two
generated sets with known noise (``smooth``: a 3-input signal that 64 bases resolve;
``generated``: ``saspa_dask.datasets.multiscale_regression``, which they do not; the
noise variance in the standardised target's units is known exactly), per split and M:
SASPA (Gaussian likelihood, learnt means and hyperparameters by the power-EP energy,
up to ``--max-hyper-iter`` optimiser iterations) for each alpha.

Reported per fit: test RMSE and NLPD (standardised units, NLPD of y with the noise),
learnt noise variance (and the truth for the generated set), iterations, seconds.
Writes results/power_ep.json; ``--report`` prints the table and draws
figures/power_ep.png (error against alpha) from a saved run.

``--svgp-from RUN.json`` adds GPyTorch's SVGP (``bench_learnt_bases.svgp``: the same
K-means start, minibatch Adam) to a saved run, on the same splits, stopped at the mean
CPU time of that row's SASPA fits and at 5 times it (CPU time: the machine may run
other work).  ``--classification`` runs Ionosphere (20 splits of 200 training rows,
M = 16) and Spambase (5 splits of 2761 / 1840, log1p, M = 32) instead: test error and
NLP for each alpha (probit likelihood).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from lib import data, metrics, output
from lib.data import SETS, held_out_split, load_regression
from lib.machine import machine, versions
from lib.metrics import regression_scores
from lib.output import add_outdir_option, save, use_outdir
from lib.svgp import run_budgets


ALPHAS = (1.0, 0.5, 0.1, 1e-3)


GENERATED = {"generated": data.multiscale_rows, "smooth": data.smooth_rows}


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


def classification(args):
    """Ionosphere and Spambase (the SASPA paper's sets) for each alpha."""
    from saspa_dask import SASPAClassifier

    runs = []
    cases = (("ionosphere", data.ionosphere, 200, None, 20, 16),
             ("spambase", data.spambase, 2761, 1840, 5, 32))
    for name, load, n_train, n_test, splits, M in cases:
        X, y = load()
        for s in range(splits):
            Xtr, ytr, Xte, yte = data.random_split(X, y, n_train, s, n_test)
            row = {"set": name, "split": s, "M": M, "n_train": n_train, "fits": []}
            for alpha in args.alphas:
                t0, c0 = time.perf_counter(), time.process_time()
                model = SASPAClassifier(M, alpha=alpha, random_state=s,
                                        max_hyper_iter=args.max_hyper_iter).fit(Xtr, ytr)
                error, nlp = metrics.error_and_nlp(model.predict_proba(Xte)[:, 1], yte)
                row["fits"].append({"alpha": alpha, "test_error": error, "test_nlp": nlp,
                                    "seconds": time.perf_counter() - t0,
                                    "cpu_seconds": time.process_time() - c0,
                                    "iterations": model.hyperparameter_info_["n_iterations"],
                                    "energy": model.log_evidence_})
                print(f"[power_ep] {name} split {s} M={M} alpha={alpha:g}: error "
                      f"{error:.4f} NLP {nlp:.4f}", flush=True)
            runs.append(row)
            save({"machine": machine(), "versions": versions(), "args": vars(args),
                  "runs": runs}, args.out)
    return runs


def add_svgp(args):
    """SVGP at 1x and 5x the CPU time of each row's SASPA fits of a saved run."""

    from saspa_dask import kmeans_bases

    saved = json.loads((output.RESULTS / args.svgp_from).read_text())
    train_rows = saved["args"]["train_rows"]
    for row in saved["runs"]:
        if row["split"] >= args.svgp_splits:
            continue
        if row["set"] in GENERATED:
            X, y, _ = GENERATED[row["set"]](row["split"])
        else:
            X, y = load_regression(row["set"])
        Xtr, ytr, Xte, yte = held_out_split(X, y, row["split"], train_rows)
        cpu = float(np.mean([f["cpu_seconds"] for f in row["fits"]]))
        centres = kmeans_bases(Xtr, row["M"], random_state=0).means
        row["svgp"] = run_budgets(Xtr, ytr, Xte, yte, centres, [cpu, 5 * cpu], by_cpu=True)
        print(f"[power_ep] SVGP {row['set']} split {row['split']} M={row['M']}: "
              + ", ".join(f"{r['budget']:.0f} cpu-s RMSE {r['rmse']:.4f} NLPD {r['nlpd']:.3f}"
                          for r in row["svgp"]), flush=True)
        save(saved, args.svgp_from)
    return saved["runs"]


def run(args):
    runs = []
    for name in args.sets:
        for s in range(args.first_split, args.first_split + args.splits):
            truth = None
            if name in GENERATED:
                X, y, noise = GENERATED[name](s)
                Xtr, ytr, Xte, yte = held_out_split(X, y, s, args.train_rows)
                # the split standardises y by the training rows' sd
                truth = noise / float(np.std(y[np.random.default_rng(s).permutation(
                    len(y))[len(y) // 5:][:args.train_rows]])) ** 2
            else:
                Xtr, ytr, Xte, yte = held_out_split(*load_regression(name), s, args.train_rows)
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


def _cell(fits, regression):
    """Mean over splits (and the NLPD's or NLP's spread) of one column's fits."""
    def mean(key):
        return float(np.mean([f[key] for f in fits]))

    if regression:
        nlpd = np.array([f["test_nlpd"] for f in fits])
        noise = f" / {mean('noise_variance'):.3g}" if "noise_variance" in fits[0] else ""
        return f"{mean('test_rmse'):.4f} / {nlpd.mean():.3f} ± {nlpd.std():.3f}{noise}", \
            nlpd.mean()
    nlp = np.array([f["test_nlp"] for f in fits])
    return f"{mean('test_error'):.4f} / {nlp.mean():.4f} ± {nlp.std():.4f}", nlp.mean()


def report(runs, alphas):
    """A Markdown table of each set and M: the mean over splits of test RMSE / NLPD
    (± its sd) / learnt noise for each alpha (error / NLP for classification), and
    SVGP at 1x and 5x CPU when the run has it; the plot of NLPD against alpha."""
    keys = sorted({(r["set"], r["M"]) for r in runs})
    with_svgp = any("svgp" in r for r in runs)
    print("| set, M | " + " | ".join(f"alpha = {a:g}" for a in alphas)
          + (" | SVGP, 1x CPU | SVGP, 5x CPU" if with_svgp else "") + " |")
    print("|---|" + "---|" * (len(alphas) + 2 * with_svgp))
    curves = {}
    for key in keys:
        rows = [r for r in runs if (r["set"], r["M"]) == key]
        regression = "test_rmse" in rows[0]["fits"][0]
        cells = []
        for a in alphas:
            text, curves[key + (a,)] = _cell([f for r in rows for f in r["fits"]
                                              if f["alpha"] == a], regression)
            cells.append(text)
        if with_svgp:
            for k in (0, 1):
                run_budgets = [{f"test_{m}": r["svgp"][k][m] for m in ("rmse", "nlpd")}
                        for r in rows if "svgp" in r]
                cells.append(_cell(run_budgets, True)[0] if run_budgets else "")
        truth = rows[0].get("noise_truth")
        label = f"{key[0]}{' (noise ' + format(truth, '.3g') + ')' if truth else ''}, {key[1]}"
        print(f"| {label} ({len(rows)} splits) | " + " | ".join(cells) + " |")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for key in keys:
        ax.plot(alphas, [curves[key + (a,)] for a in alphas], marker="o",
                label=f"{key[0]}, M={key[1]}")
    ax.set_xscale("log")
    ax.set_xlabel("alpha (power EP; 1 = FITC-EP / SASPA, -> 0 = VFE)")
    ax.set_ylabel("held-out NLPD (NLP) , mean over splits")
    ax.legend(fontsize=7)
    fig.tight_layout()
    output.FIGURES.mkdir(parents=True, exist_ok=True)
    fig.savefig(output.FIGURES / "power_ep.png", dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["smooth", "generated", *SETS])
    parser.add_argument("--bases", nargs="+", type=int, default=[64])
    parser.add_argument("--alphas", nargs="+", type=float, default=list(ALPHAS))
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--first-split", type=int, default=0)
    parser.add_argument("--train-rows", type=int, default=5_000)
    parser.add_argument("--max-hyper-iter", type=int, default=100)
    parser.add_argument("--blur", default="full")
    parser.add_argument("--report", nargs="+",
                        help="print the table of saved runs (results/...), pooled")
    parser.add_argument("--svgp-from", help="add SVGP to a saved run (results/...)")
    parser.add_argument("--svgp-splits", type=int, default=3,
                        help="with --svgp-from: the first this many splits only")
    parser.add_argument("--classification", action="store_true")
    parser.add_argument("--out", default="power_ep.json", help="file under results/")
    add_outdir_option(parser)
    args = parser.parse_args()
    use_outdir(args)
    if args.report:
        saved = [json.loads((output.RESULTS / name).read_text()) for name in args.report]
        report([run for s in saved for run in s["runs"]], saved[0]["args"]["alphas"])
        return
    if args.svgp_from:
        runs = add_svgp(args)
        report(runs, json.loads((output.RESULTS / args.svgp_from).read_text())["args"]["alphas"])
        return
    report(classification(args) if args.classification else run(args), args.alphas)


if __name__ == "__main__":
    main()
