"""A newcomer's first fit: ``saspa train`` with its defaults on generated tables of the
two shapes issue 55 names (a 22,558-row wage regression with 12 columns, 5 of them
text; a 21,004-row rare-event classification with 22 columns, 6 of them text), each
written as a CSV and taken through ``ingest --text onehot``, ``split``, ``train`` and
``evaluate`` as a user would.  Records each command's wall and CPU seconds (the command
and every process it started), learning's iterations, the stop reason, the progress
lines and the held-out metrics.

    python benchmarks/bench_newcomer.py                        # both tables, defaults
    python benchmarks/bench_newcomer.py --train-args "--hyper-tol 1e-5"   # a variant
    python benchmarks/bench_newcomer.py --quick    # smoke: 2,000 rows, 15 iterations
"""

from __future__ import annotations

import argparse
import csv
import json
import shlex
import tempfile
from pathlib import Path

import numpy as np
from lib.commands import BIN, cpu_timed, run
from lib.output import add_quick_option, parse, record
from lib.machine import start_report

SHAPES = {
    # name: (rows, numeric columns, text columns' categories, task)
    # (a state, an industry, an occupation, sex, a schooling level: 716 inputs one-hot)
    "wage": (22_558, 7, (51, 250, 400, 2, 6), "regression"),
    # (454 inputs one-hot)
    "rare-event": (21_004, 16, (3, 5, 8, 120, 2, 300), "classification"),
}


def table(name, rows, seed=0):
    """Columns of one generated table: numeric inputs, text inputs, the target."""
    _, n_numeric, categories, task = SHAPES[name]
    rng = np.random.default_rng(seed)
    numeric = rng.normal(size=(rows, n_numeric))
    f = np.sin(numeric[:, 0]) + 0.5 * numeric[:, 1] * numeric[:, 2] + 0.3 * numeric[:, 3]
    text = []
    for k, cardinality in enumerate(categories):
        # Zipf-distributed categories, the rarest folded into the last
        codes = np.minimum(rng.zipf(1.3, rows) - 1, cardinality - 1)
        f = f + 0.4 * rng.normal(size=cardinality)[codes]
        text.append(np.array([f"c{k}_{c}" for c in range(cardinality)])[codes])
    if task == "regression":  # a wage: log-normal around exp(f), in currency units
        target = np.round(60.0 * np.exp(0.4 * f + 0.35 * rng.normal(size=rows)), 2)
    else:  # about 6% positives
        target = (rng.random(rows) < 1 / (1 + np.exp(-(1.5 * f - 3.5)))).astype(int)
    return numeric, text, target


def write_csv(path, name, rows, seed=0):
    numeric, text, target = table(name, rows, seed)
    header = ([f"x{j}" for j in range(numeric.shape[1])]
              + [f"t{k}" for k in range(len(text))] + ["target"])
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        for i in range(len(target)):
            writer.writerow([f"{v:.6g}" for v in numeric[i]] + [t[i] for t in text]
                            + [target[i]])


def one_table(name, rows, train_args, work, watch=False, split_seed=0):
    source, data = work / f"{name}.csv", work / f"{name}.zarr"
    write_csv(source, name, rows)
    run([BIN / "saspa", "ingest", source, "--out", data, "--text", "onehot",
         "--target", "target"])
    run([BIN / "saspa", "split", data, "--test-fraction", "0.2", "--seed", split_seed])
    train, test, model = work / f"{name}-train.zarr", work / f"{name}-test.zarr", work / "m"
    cmd = [BIN / "saspa", "train", train, "--out", model / f"{name}.zarr",
           *shlex.split(train_args), *(["--test", test] if watch else [])]
    res, wall, cpu = cpu_timed(cmd, ok_codes=(0, 3))
    output = res.stdout + res.stderr
    metrics = json.loads(run([BIN / "saspa", "evaluate", model / f"{name}.zarr", test,
                              "--json"]).stdout)
    info = json.loads(run([BIN / "saspa", "info", model / f"{name}.zarr", "--json"]).stdout)
    lines = output.splitlines()
    learning = [line for line in lines if "learning:" in line]
    held_out = [line for line in lines if "held-out (" in line]
    print(f"{name}: train {wall:.1f} s wall, {cpu:.1f} CPU-s; {json.dumps(metrics)}")
    return {"table": name, "rows": rows, "split_seed": split_seed, "train_args": train_args,
            "wall_seconds": wall, "cpu_seconds": cpu, "metrics": metrics,
            "info": {"n_bases": info["n_bases"], "blur": info["blur"],
                     "sweeps_on_all_rows": len(info["sweeps"])},
            "learning": learning[-1:], "held_out": held_out, "progress_tail": lines[-6:]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", nargs="+", default=list(SHAPES))
    parser.add_argument("--rows", type=int, default=None, help="default: each shape's")
    parser.add_argument("--train-args", default="", help="extra `saspa train` options")
    parser.add_argument("--split-seeds", type=int, nargs="+", default=[0],
                        help="saspa split --seed: one test split per seed")
    parser.add_argument("--watch", action="store_true",
                        help="train with --test: held-out metrics as the fit learns")
    parser.add_argument("--out", default="newcomer.json")
    add_quick_option(parser, rows=2000, train_args="--max-hyper-iter 15")
    args = parse(parser)
    report = start_report(args, runs=[])
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.split_seeds:
            for name in args.tables:
                rows = args.rows or SHAPES[name][0]
                work = Path(tmp) / f"split-{seed}"  # a fresh folder per split
                work.mkdir(exist_ok=True)
                record(report, one_table(name, rows, args.train_args, work, args.watch,
                                         seed), args.out)


if __name__ == "__main__":
    main()
