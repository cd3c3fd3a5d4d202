"""A wide table with text columns, as a user runs it: ``saspa ingest --text onehot``,
``saspa split``, default ``saspa train``, ``saspa evaluate``, against logistic regression
and HistGradientBoosting on the same stores.

The table is UCI Adult's training file (32,561 rows; 6 numeric columns, 7 text columns
and a 0/1 ``sex``; ``?`` marks a missing value in 7% of the rows; target ``income``),
as republished ``;``-separated with leading spaces in GitHub's ``Miguel-Luis/adult``
(``adult.csv``; the path is ``--csv``).  It is not in ``../shared/datasets``, so this
benchmark records the file's SHA-256.  The file is rewritten comma-separated, fields
stripped, ``?`` as an empty field and the target as 0/1 (``>50K`` = 1); then, each a
timed process on the embedded cluster of ``--workers`` workers:

    saspa ingest adult.csv --out all.zarr --text onehot --missing drop-rows
    saspa split all.zarr --test-fraction 0.25 --seed 0
    saspa train all-train.zarr --out model.zarr          # the defaults
    saspa evaluate model.zarr all-test.zarr --json

Logistic regression (inputs standardised, ``max_iter=2000``) and HistGradientBoosting
(defaults) fit the training store's X and y and are scored on the test store's.  Writes
results/wide.json.

    python benchmarks/bench_wide.py --csv /path/to/adult.csv
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import tempfile
import time
from pathlib import Path

from lib import output
from lib.commands import BIN, evaluate, info, timed
from lib.machine import machine, matmul_rate, versions
from lib.metrics import error_and_nlp
from lib.output import save



def clean_copy(source, out):
    """``source`` (``;``-separated, padded, ``?`` for missing) as a plain CSV at ``out``;
    returns the number of rows and of rows with a missing value."""
    rows = missing = 0
    with open(source, newline="") as fh, open(out, "w", newline="") as dst:
        reader, writer = csv.reader(fh, delimiter=";"), csv.writer(dst)
        writer.writerow([h.strip() for h in next(reader)])
        for row in reader:
            fields = ["" if f.strip() == "?" else f.strip() for f in row]
            fields[-1] = "1" if fields[-1].startswith(">50K") else "0"
            missing += "" in fields
            rows += 1
            writer.writerow(fields)
    return rows, missing


def saspa_steps(work, args):
    steps = {}
    commands = {
        "ingest": ["ingest", work / "adult.csv", "--out", work / "all.zarr", "--text",
                   "onehot", "--missing", "drop-rows"],
        "split": ["split", work / "all.zarr", "--test-fraction", "0.25", "--seed", "0"],
        "train": ["train", work / "all-train.zarr", "--out", work / "model.zarr",
                  "--workers", args.workers, *args.train_args],
    }
    for name, cmd in commands.items():
        res, seconds = timed([BIN / "saspa", *cmd])
        steps[name] = {"seconds": seconds,
                       "stderr": [ln for ln in res.stderr.splitlines() if ln.strip()][-12:]}
        print(json.dumps({name: steps[name]}), flush=True)
    described = info(work / "model.zarr")
    hyper = described["hyperparameters"]["info"] or {}
    steps["train"].update({key: hyper.get(key) for key in
                           ("stop_reason", "n_iterations", "stages", "cost_estimate")})
    steps["info"] = {k: described.get(k) for k in ("blur", "n_bases", "n_features", "ep")}
    steps["evaluate"] = evaluate(work / "model.zarr", work / "all-test.zarr")
    return steps


def peers(work):
    import zarr
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    tr = zarr.open_group(str(work / "all-train.zarr"), mode="r")
    te = zarr.open_group(str(work / "all-test.zarr"), mode="r")
    Xtr, ytr, Xte, yte = tr["X"][...], tr["y"][...], te["X"][...], te["y"][...]
    out = {"n_features": Xtr.shape[1], "train_rows": len(ytr), "test_rows": len(yte)}
    for name, model in (
            ("logistic", make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))),
            ("hgb", HistGradientBoostingClassifier(random_state=0))):
        t0 = time.perf_counter()
        model.fit(Xtr, ytr)
        error, nlp = error_and_nlp(model.predict_proba(Xte)[:, 1], yte)
        out[name] = {"seconds": time.perf_counter() - t0, "error": error, "nlp": nlp}
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--train-args", nargs=argparse.REMAINDER, default=[],
                        help="further `saspa train` options (after everything else)")
    parser.add_argument("--out", default="wide.json", help="file under results/")
    args = output.parse(parser)
    report = {"machine": machine(), "versions": versions(),
              "matmul_gflops": matmul_rate() / 1e9, "args": {**vars(args), "csv": str(args.csv)},
              "sha256": hashlib.sha256(args.csv.read_bytes()).hexdigest()}
    print(f"float64 matmul: {report['matmul_gflops']:.1f} GFLOP/s", flush=True)
    with tempfile.TemporaryDirectory(prefix="saspa-wide-") as tmp:
        work = Path(tmp)
        report["rows"], report["rows_with_missing"] = clean_copy(args.csv, work / "adult.csv")
        report["saspa"] = saspa_steps(work, args)
        report["peers"] = peers(work)
    save(report, args.out)
    print(json.dumps({"saspa": report["saspa"]["evaluate"], **report["peers"]}, indent=1))


if __name__ == "__main__":
    main()
