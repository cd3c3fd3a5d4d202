"""Learning from an exact GP's start against the data-driven start.

``SASPARegressor(M, random_state=0, exact_start=..., learning_start="data")`` with
``False`` (lengthscales std * sqrt(d), the target variance as signal, a tenth of it as
noise) and ``True`` (an
exact SE-ARD GP on 512 seeded rows first: ``saspa_dask.fitting.exact_start``), learning
to convergence (the defaults otherwise).  Data: the SPGP and IDGP papers' own splits
(Kin-40k, Pumadyn-32nm, Pole Telecomm) and ``bench_defaults``' shared regression sets
(3 splits, 20% test).  Two modes:

* ``all`` (default): learning on every training row (at most ``--train-rows``, 10,000
  by default: below ``hyper_subsample``);
* ``--sample-rows K``: every training row of the shared sets (``--train-rows`` 0) and
  learning on a K-row sample (``hyper_subsample=K``), then EP on all rows: the regime
  where ``exact_start="auto"`` applies with a budget.

Reported per fit: test RMSE / NLPD (the targets' units for the papers' sets,
standardised for the others), the fit's process CPU seconds, learning's iterations, and
the start's record (``hyperparameter_info_["start"]``).  Writes results/exact_start.json.

    python benchmarks/bench_exact_start.py
    python benchmarks/bench_exact_start.py --sets california_housing house_16h \\
        --sample-rows 4000 --train-rows 0 --out exact_start_sample.json
"""

from __future__ import annotations

import argparse
import time
import warnings

from bench_defaults import split_of
from lib import data, machine, output
from lib.machine import matmul_rate
from lib.metrics import regression_scores
from lib.output import record

PAPER_SETS = ("kin40k", "pumadyn32nm", "pol")
SHARED_SETS = ("california_housing", "cpu_act", "house_16h", "ailerons")


def splits(name, args):
    """(split, (Xtr, ytr, Xte, yte, y scale)) of a set."""
    if name in PAPER_SETS:
        yield 0, data.paper_split(name)
        return
    for seed in range(args.splits):
        Xtr, ytr, Xte, yte = split_of(name, seed, args.train_rows or 10**12)
        yield seed, (Xtr, ytr, Xte, yte, 1.0)


def fit(split, M, exact_start, sample_rows):
    from saspa_dask import SASPARegressor

    Xtr, ytr, Xte, yte, scale = split
    settings = {} if sample_rows is None else {"hyper_subsample": sample_rows}
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bound warnings: at_bounds is recorded
        # the data-driven start's exact start, which is what this measures
        model = SASPARegressor(M, random_state=0, exact_start=exact_start,
                               learning_start="data", **settings).fit(Xtr, ytr)
    cpu = time.process_time() - start
    mean, var = model.predict_latent(Xte)
    scores = regression_scores(mean * scale, (var + model.noise_variance_) * scale**2,
                               yte * scale)
    info = model.hyperparameter_info_
    return {"exact_start": exact_start, "cpu_seconds": cpu,
            "iterations": info["n_iterations"], "stop_reason": info["stop_reason"],
            "start": info.get("start"), "n_train": len(ytr), **scores}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(PAPER_SETS + SHARED_SETS))
    parser.add_argument("--bases", type=int, default=64)
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--train-rows", type=int, default=10000,
                        help="shared sets: training rows at most (0: all)")
    parser.add_argument("--sample-rows", type=int, default=None,
                        help="learn on a sample of this many rows (hyper_subsample)")
    parser.add_argument("--out", default="exact_start.json", help="file under results/")
    output.add_quick_option(parser, sets=["cpu_act"], bases=8, splits=1, train_rows=600)
    args = output.parse(parser)
    report = machine.start_report(args, matmul_rate, runs=[])
    for name in args.sets:
        for seed, split in splits(name, args):
            for exact in (False, True):
                run = {"set": name, "split": seed, "M": args.bases,
                       **fit(split, args.bases, exact, args.sample_rows)}
                record(report, run, args.out)
    print("\n| set | split | data-driven start: RMSE / NLPD (CPU s, iterations) | "
          "exact GP's start |")
    print("|---|---|---|---|")
    runs = report["runs"]
    for a, b in zip(runs[::2], runs[1::2]):
        cells = [f"{r['rmse']:.4g} / {r['nlpd']:.4g} ({r['cpu_seconds']:.1f} s, "
                 f"{r['iterations']} it)" for r in (a, b)]
        if b["start"] and b["start"]["method"] != "exact-gp":
            cells[1] += " (kept the data-driven start)"
        print(f"| {a['set']} | {a['split']} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
