"""Time to accuracy at 10^6 rows: SASPA under wall-time budgets against GPyTorch's SVGP.

The data are generated (``saspa make-data --kind multiscale-regression``:
structure at several length scales, input 8 irrelevant; d = 8, 10^6 training rows with
seed 0, 10^5 test rows with seed 1, 65,536-row chunks).
For each budget of ``--budgets`` (seconds of wall time) one ``saspa train`` process, timed
end to end on the embedded cluster of ``--workers`` workers (cluster start, K-means,
learning, EP on all rows, save), with ``--max-fit-time`` (the fit's budget: K-means,
learning and EP on all rows) set to the budget less the job's time outside the fit
(cluster start, reading, saving) that a fixed-hyperparameter run of the same data
measured first in this run, and
learning in stages (``--hyper-subsample 20000,100000,all``, the defaults otherwise: learnt
means, hyper_tol 1e-4).  Then ``saspa evaluate`` on the test store.

SVGP (ARD RBF, M inducing inputs from the same K-means start, Adam lr 0.01, batch 1024,
float32, standardised targets; ``svgp_run``) trains on all rows in
one process and is scored at each SASPA run's measured wall time (equal wall time: its
clock counts optimiser steps only) and after ``--svgp-minutes``.  The float64 matmul
rate is measured at the start.  Writes results/race.json.

``--task classification`` labels the same signal 0/1 through latent Gaussian noise
(:func:`to_classification`; the test rows' Bayes error is reported), and SVGP uses the
Bernoulli likelihood.  ``--signal overlap`` labels another signal instead, with more
latent noise (:func:`overlap_signal`: a Bayes error near 0.22 against 0.10).  Several
``--svgp-lrs`` are swept first on validation rows (:func:`best_lr`) and the best one
runs the race.

``--defaults`` runs one ``saspa train`` with its defaults instead of the budgets (no
``--n-bases``, stages or budget: what a user types), and SVGP (``--bases`` inducing
inputs) is scored at its wall time and after ``--svgp-minutes``.

    python benchmarks/bench_race.py                       # 10^6 rows, M = 256
    python benchmarks/bench_race.py --task classification --svgp-lrs 0.003 0.01 0.03 \\
        --out race_classification.json
    python benchmarks/bench_race.py --task classification --signal overlap --defaults \\
        --svgp-lrs 0.01 0.03 --svgp-minutes 20 --out race_overlap_defaults.json
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import tempfile
from pathlib import Path

import numpy as np

from lib import machine, output, svgp
from lib.commands import BIN, add_data_options, evaluate, info, make_data, run, timed
from lib.machine import matmul_rate
from lib.output import save


def saspa_run(work, args, extra, bases=True):
    model = work / "model.zarr"
    res, seconds = timed([BIN / "saspa", "train", work / "train.zarr", "--out", model,
                           "--task", args.task, *(["--n-bases", args.bases] if bases else []),
                           "--workers", args.workers, "--overwrite", *extra],
                          ok_codes=(0, 3))  # 3: EP stopped by the budget, model saved
    described = info(model)
    hyper = described["hyperparameters"]["info"] or {}
    return {"seconds": seconds, "fit_seconds": _fit_seconds(res.stderr),
            "converged": res.returncode == 0, "sweeps": len(described["sweeps"]),
            **evaluate(model, work / "test.zarr"),
            "stop_reason": hyper.get("stop_reason"), "iterations": hyper.get("n_iterations"),
            "stages": [{k: s[k] for k in ("rows", "where", "n_iterations", "gain_per_row",
                                          "seconds")} for s in hyper.get("stages", [])],
            "warnings": [ln for ln in res.stderr.splitlines() if ln.startswith("warning")]}


def svgp_run(work, args, budgets, lr=0.01, regression=True, test="test.zarr"):
    """SVGP on all training rows, scored on the test rows at each wall-time budget
    (seconds of its optimiser steps); classification (``regression=False``) uses the
    Bernoulli (probit) likelihood on 0/1 labels."""
    import zarr

    from saspa_dask import kmeans_bases

    tr = zarr.open_group(str(work / "train.zarr"), mode="r")
    te = zarr.open_group(str(work / test), mode="r")
    Xtr, ytr = tr["X"][...], tr["y"][...]
    Xte, yte = te["X"][...], te["y"][...]
    my, sy = (ytr.mean(), ytr.std()) if regression else (0.0, 1.0)
    centres = kmeans_bases(Xtr, args.bases, random_state=0).means
    rows, _, _ = svgp.train(
        Xtr, (ytr - my) / sy, centres, budgets, regression=regression, batch=args.batch,
        lr=lr, threads=args.workers,
        score=lambda m, lik: svgp.scores(m, lik, Xte, yte, regression, my, sy),
        report=lambda row: print(json.dumps({"svgp": row}), flush=True))
    return rows


def _fit_seconds(log):
    """The fit's own seconds (bases, learning, EP on all rows), from its last phase
    line: what ``--max-fit-time`` budgets (the rest of the job's time is cluster
    start, reading and saving)."""
    found = re.findall(r"\[saspa\] done: .*?([0-9.]+)s$", log, flags=re.M)
    return float(found[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_options(parser)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--budgets", type=float, nargs="+", default=[30, 60, 150, 600])
    parser.add_argument("--stages", default="20000,100000,all")
    parser.add_argument("--svgp-minutes", type=float, default=20.0)
    parser.add_argument("--task", choices=["regression", "classification"],
                        default="regression")
    parser.add_argument("--svgp-lrs", type=float, nargs="+", default=[0.01],
                        help="Adam learning rates tried for SVGP; several: each trains "
                             "--sweep-seconds and is scored on validation rows (seed 2), "
                             "and the best runs the race")
    parser.add_argument("--sweep-seconds", type=float, default=60.0)
    parser.add_argument("--signal", choices=["multiscale", "overlap"], default="multiscale",
                        help="classification's latent signal (module docstring)")
    parser.add_argument("--defaults", action="store_true",
                        help="one saspa train with its defaults instead of the budgets")
    parser.add_argument("--out", default="race.json", help="file under results/")
    parser.add_argument("--plot-from", help="only draw the figure of a saved results file")
    output.add_quick_option(parser, rows=4000, test_rows=1000, bases=8, chunk_rows=1000,
                            budgets=[10], stages="1000,all", svgp_minutes=0.05,
                            sweep_seconds=1.0)
    args = output.parse(parser)
    if args.signal != "multiscale" and args.task != "classification":
        parser.error("--signal overlap labels classes: it needs --task classification")
    if args.plot_from:
        report = json.loads((output.RESULTS / args.plot_from).read_text())
        return plot_race(report, output.FIGURES / f"{Path(args.plot_from).stem}.png")
    report = machine.start_report(args, matmul_rate, "torch", "gpytorch", saspa=[])
    with tempfile.TemporaryDirectory(prefix="saspa-race-") as tmp:
        work = Path(tmp)
        if args.task == "classification":  # its own stores: the regression ones unused
            report["bayes_error"] = to_classification(work, args)
        else:
            report["noise_sd"] = make_data(work, args)
        if args.defaults:
            return _defaults_race(work, args, report)
        fixed = saspa_run(work, args, ["--fixed-hyperparameters"])
        report["fixed"] = fixed
        # the job's time outside the fit, which --max-fit-time does not cover
        overhead = report["job_overhead"] = fixed["seconds"] - fixed["fit_seconds"]
        print(json.dumps({"fixed": fixed}), flush=True)
        for budget in args.budgets:
            if budget <= overhead:  # no job ends in that time
                report["saspa"].append({"budget": budget, "infeasible": True})
                continue
            learn = budget - overhead
            row = {"budget": budget, "max_fit_time": learn,
                   **saspa_run(work, args, ["--hyper-subsample", args.stages,
                                            "--max-fit-time", f"{learn:.1f}"])}
            report["saspa"].append(row)
            print(json.dumps({"saspa": row}), flush=True)
            save(report, args.out)
        lr = report["svgp_lr"] = best_lr(work, args, report)
        budgets = ([r.get("seconds", r["budget"]) for r in report["saspa"]]
                   + [60 * args.svgp_minutes])
        report["svgp"] = svgp_run(work, args, budgets, lr=lr,
                                  regression=args.task == "regression")
    save(report, args.out)
    plot_race(report, output.FIGURES / f"{Path(args.out).stem}.png")


def _defaults_race(work, args, report):
    """``saspa train`` with its defaults, timed end to end, against SVGP at that wall
    time and after ``--svgp-minutes``."""
    row = report["defaults"] = saspa_run(work, args, [], bases=False)
    print(json.dumps({"defaults": row}), flush=True)
    lr = report["svgp_lr"] = best_lr(work, args, report)
    report["svgp"] = svgp_run(work, args, [row["seconds"], 60 * args.svgp_minutes], lr=lr,
                              regression=args.task == "regression")
    save(report, args.out)


def plot_race(report, path):
    """The held-out metrics against wall time: each budgeted ``saspa train`` job
    (its whole time, cluster start and save included) and SVGP's training time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ("rmse", "nlpd") if report["args"]["task"] == "regression" else ("error", "nlp")
    saspa = [r for r in report["saspa"] if not r.get("infeasible")]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key in zip(axes, keys):
        ax.plot([r["seconds"] for r in saspa], [r[key] for r in saspa], "o-",
                label="SASPA: saspa train --max-fit-time (whole job)")
        ax.plot([r["seconds"] for r in report["svgp"]], [r[key] for r in report["svgp"]],
                "s--", label=f"GPyTorch SVGP, lr {report['svgp_lr']:g} (training)")
        ax.set_xscale("log")
        ax.set_xlabel("wall seconds")
        ax.set_ylabel(f"held-out {key}")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{report['args']['rows']} rows, M = {report['args']['bases']}, "
                 f"{report['args']['task']}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def best_lr(work, args, report):
    """SVGP's learning rate: each of ``--svgp-lrs`` trained ``--sweep-seconds`` and
    scored on validation rows drawn with seed 2 (not the test rows)."""
    if len(args.svgp_lrs) == 1:
        return args.svgp_lrs[0]
    _store(work, args, "valid", args.test_rows, seed=2)
    key = "rmse" if args.task == "regression" else "error"
    sweep = {lr: svgp_run(work, args, [args.sweep_seconds], lr=lr, test="valid.zarr",
                          regression=args.task == "regression")[0]
             for lr in args.svgp_lrs}
    report["svgp_sweep"] = {str(lr): row for lr, row in sweep.items()}
    return min(sweep, key=lambda lr: (sweep[lr][key], sweep[lr]["nlp" if key == "error"
                                                                 else "nlpd"]))


# latent noise sd / signal sd: a Bayes error near 0.1 (multiscale), 0.22 (overlap)
LABEL_NOISE = {"multiscale": 0.35, "overlap": 0.8}


def overlap_signal(X):
    """``--signal overlap``'s latent function: a product of waves in inputs 0 and 1, an
    interaction of 2 and 3, a linear trend in 4; the other inputs irrelevant."""
    return (np.sin(1.5 * X[:, 0]) * np.cos(1.5 * X[:, 1]) + 0.5 * X[:, 2] * X[:, 3]
            + 0.3 * X[:, 4])


def _signal_rows(signal, features, rows, seed):
    """(X, y, f) of ``rows`` generated rows: the multiscale generator's, or standard
    normal inputs and :func:`overlap_signal` (``y`` unused in classification)."""
    from saspa_dask.datasets import multiscale_regression

    if signal == "multiscale":
        return multiscale_regression(rows, features, seed)
    X = np.random.default_rng(seed).normal(size=(rows, features))
    f = overlap_signal(X)
    return X, f, f


def _signal(args):
    # bench_anytime's options have no --signal: the multiscale one
    return getattr(args, "signal", "multiscale")


def to_classification(work, args):
    """The train and test stores of generated rows labelled 0/1 (:func:`_store`).
    Returns the test rows' Bayes error, the floor of any classifier's:
    mean Phi(-|f - t| / sd)."""
    from scipy.stats import norm

    _store(work, args, "train", args.rows, seed=0)
    _store(work, args, "test", args.test_rows, seed=1)
    threshold, sd = _latent_scale(args)
    f_test = _signal_rows(_signal(args), args.features, args.test_rows, 1)[2]
    return float(norm.cdf(-abs(f_test - threshold) / sd).mean())


def _latent_scale(args):
    """The labels' threshold (the training rows' median signal: balanced classes) and
    latent noise sd."""
    return _scale_of(_signal(args), args.rows, args.features)


@functools.lru_cache
def _scale_of(signal, rows, features):
    # once per run: it regenerates the training rows
    f_train = _signal_rows(signal, features, rows, 0)[2]
    return float(np.median(f_train)), LABEL_NOISE[signal] * float(f_train.std())


def labelled_rows(args, rows, seed):
    """(X, y) of ``rows`` generated rows; for classification the label is 1 where the
    signal plus latent Gaussian noise exceeds the threshold."""
    X, y, f = _signal_rows(_signal(args), args.features, rows, seed)
    if args.task == "classification":
        threshold, sd = _latent_scale(args)
        y = f + sd * np.random.default_rng(100 + seed).normal(size=rows) > threshold
    return X, y


def _store(work, args, name, rows, seed):
    """Store ``name`` of ``rows`` generated rows (:func:`labelled_rows`)."""
    X, y = labelled_rows(args, rows, seed)
    np.save(work / f"{name}.npy", np.column_stack([X, y]))
    run([BIN / "saspa", "ingest", work / f"{name}.npy", "--out", work / f"{name}.zarr",
         "--chunk-rows", args.chunk_rows, "--overwrite"])


if __name__ == "__main__":
    main()
