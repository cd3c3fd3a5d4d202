"""Learnt bases on the SASPA paper's classification sets: SASPA-full with K-means
bases against learnt means and learnt means + blur (probit, hyperparameters by the EP
evidence), on the same splits as ``bench_peers.py`` (Ionosphere: 200 training rows,
the rest test; Spambase: 2761 / 1840, log1p counts).  Writes
results/learnt_classification.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from lib.data import ionosphere, random_split, spambase
from lib.machine import machine, versions
from lib.metrics import error_and_nlp, mean_se
from lib import output



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ionosphere-splits", type=int, default=20)
    parser.add_argument("--spambase-splits", type=int, default=5)
    parser.add_argument("--max-hyper-iter", type=int, default=50)
    parser.add_argument("--restarts", type=int, default=0,
                        help="n_restarts_optimizer: further evidence maximisations from "
                             "shorter starting lengthscales, the highest evidence kept")
    parser.add_argument("--variants", default="kmeans,means,means+blur",
                        help="comma-separated subset of kmeans, means, means+blur")
    parser.add_argument("--out", default="learnt_classification.json",
                        help="file name under results/")
    output.add_quick_option(parser, ionosphere_splits=1, spambase_splits=1,
                            max_hyper_iter=3, variants="kmeans,means")
    args = output.parse(parser)
    variants = [False if v == "kmeans" else v for v in args.variants.split(",")]
    from saspa_dask import SASPAClassifier

    plans = [("ionosphere", ionosphere, 200, None, args.ionosphere_splits, 16),
             ("spambase", spambase, 2761, 1840, args.spambase_splits, 32)]
    rows = []
    for name, loader, n_train, n_test, n_splits, M in plans:
        X, y = loader()
        for seed in range(n_splits):
            Xtr, ytr, Xte, yte = random_split(X, y, n_train, seed, n_test)
            for learn in variants:
                t0 = time.perf_counter()
                model = SASPAClassifier(M, blur="full", learn_bases=learn, random_state=0,
                                        max_hyper_iter=args.max_hyper_iter,
                                        n_restarts_optimizer=args.restarts).fit(Xtr, ytr)
                seconds = time.perf_counter() - t0
                err, nlp = error_and_nlp(model.predict_proba(Xte)[:, 1], yte)
                tr_err, tr_nlp = error_and_nlp(model.predict_proba(Xtr)[:, 1], ytr)
                rows.append({"dataset": name, "split": seed, "M": M,
                             "learn_bases": learn or "kmeans", "restarts": args.restarts, "error": err, "nlp": nlp,
                             "train_nlp": tr_nlp, "seconds": seconds})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    summary = []
    for key in sorted({(r["dataset"], r["learn_bases"]) for r in rows}):
        sel = [r for r in rows if (r["dataset"], r["learn_bases"]) == key]
        summary.append({"dataset": key[0], "learn_bases": key[1], "n_splits": len(sel),
                        "error": mean_se([r["error"] for r in sel]),
                        "nlp": mean_se([r["nlp"] for r in sel]),
                        "train_nlp": mean_se([r["train_nlp"] for r in sel]),
                        "seconds": mean_se([r["seconds"] for r in sel])})
        print(json.dumps(summary[-1]), flush=True)
    output.RESULTS.mkdir(parents=True, exist_ok=True)
    (output.RESULTS / args.out).write_text(json.dumps(
        {"machine": machine(), "versions": versions(), "args": vars(args), "rows": rows,
         "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
