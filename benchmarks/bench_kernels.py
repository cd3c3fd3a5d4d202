"""Matérn kernels against SE with the estimators' defaults on the shared data sets,
side by side in one run, with HistGradientBoosting beside them.

Per set and split (``bench_defaults``' splits: regression 20% test and at most
``--train-rows`` training rows, standardised; Ionosphere 200 training rows, Spambase
2761 / 1840 with log1p), M bases (default 64): ``SASPARegressor(M, kernel=K,
random_state=0)`` / ``SASPAClassifier(...)`` for each kernel K, scored by RMSE and
NLPD (regression) or error and NLP (classification), with the fit's CPU seconds
(``time.process_time``: all threads of the process, so the comparison holds on a
shared machine).  Writes results/kernels.json after every split.

``california_housing+text`` keeps the set's text column (``ocean_proximity``, 5
categories) as one-hot inputs named ``ocean_proximity=CATEGORY`` (0/1, not
standardised; the numeric inputs and the target standardised on the training rows,
the same 20% test rows), and fits each kernel twice: a lengthscale per input, and
``feature_groups="one-hot"`` (one for the text column's group); also the
additive kernel of that shape (``additive_groups``: a term over the numeric inputs plus
one over the text column's), alone and with the text column's lengthscale shared.

The papers' splits (``kin40k``, ``pumadyn32nm``, ``pol``: one split each, inputs and
targets standardised on the training rows; RMSE and NLPD in the original target's
units) take ``--alpha`` as well (Pole's advice: 0.5).

    python benchmarks/bench_kernels.py                     # 6 sets, 3 splits, M = 64
    python benchmarks/bench_kernels.py --sets california_housing+text --out kernels-text.json
"""

from __future__ import annotations


import csv

import numpy as np
from bench_defaults import fit_hgb, fit_saspa, run_splits, split_of, split_parser
from lib.data import DATASETS, PAPER_SETS, paper_split

KERNELS = ("se", "matern52", "matern32", "matern12")


TEXT = "california_housing+text"


def california_with_text(seed, train_rows):
    """(Xtr, ytr, Xte, yte, feature names) of :data:`TEXT` (module docstring)."""
    with open(DATASETS / "california_housing.csv") as fh:
        rows = list(csv.reader(fh))
    header, body = rows[0], [r for r in rows[1:] if "" not in r]
    text = header.index("ocean_proximity")
    numeric = [k for k in range(len(header) - 1) if k != text]
    categories = sorted({r[text] for r in body})
    X = np.array([[float(r[k]) for k in numeric] for r in body])
    onehot = np.array([[float(r[text] == c) for c in categories] for r in body])
    y = np.array([float(r[-1]) for r in body])
    order = np.random.default_rng(seed).permutation(len(y))
    test, train = order[:len(y) // 5], order[len(y) // 5:][:train_rows]
    mx, sx, my, sy = X[train].mean(0), X[train].std(0), y[train].mean(), y[train].std()
    parts = [np.hstack([(X[rows] - mx) / sx, onehot[rows]]) for rows in (train, test)]
    names = [header[k] for k in numeric] + [f"ocean_proximity={c}" for c in categories]
    return parts[0], (y[train] - my) / sy, parts[1], (y[test] - my) / sy, names


def one_split(name, seed, args):
    settings = {} if args.alpha == 1.0 else {"alpha": args.alpha}
    if name == TEXT:
        Xtr, ytr, Xte, yte, names = california_with_text(seed, args.train_rows)
        groups = [n.split("=")[0] for n in names]
    elif name in PAPER_SETS:
        Xtr, ytr, Xte, yte, y_sd = paper_split(name)
    else:
        Xtr, ytr, Xte, yte = split_of(name, seed, args.train_rows)
    run = {"set": name, "split": seed, "M": args.bases, "n_train": len(ytr),
           "d": Xtr.shape[1]}
    for kernel in args.kernels:
        run[kernel] = fit_saspa(name, Xtr, ytr, Xte, yte, args.bases,
                                {"kernel": kernel, **settings})
        if name == TEXT:
            run[f"{kernel}+groups"] = fit_saspa(name, Xtr, ytr, Xte, yte, args.bases,
                                                {"kernel": kernel, "feature_groups": groups,
                                                 **settings})
        if name == TEXT:
            terms = ["numeric" if "=" not in n else n.split("=")[0] for n in names]
            prefix = "" if kernel == "se" else f"{kernel}+"
            for label, extra in (("additive", {}), ("additive+groups",
                                                    {"feature_groups": groups})):
                run[prefix + label] = fit_saspa(
                    name, Xtr, ytr, Xte, yte, args.bases,
                    {"kernel": kernel, "additive_groups": terms, **extra, **settings})
        if name in PAPER_SETS:  # in the target's own units
            run[kernel].update(rmse=run[kernel]["rmse"] * y_sd,
                               nlpd=run[kernel]["nlpd"] + float(np.log(y_sd)))
    run["hgb"] = fit_hgb(name, Xtr, ytr, Xte, yte)
    if name in PAPER_SETS:
        run["hgb"]["rmse"] *= y_sd
    return run


def main():
    parser = split_parser(__doc__.splitlines()[0], "kernels.json")
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--alpha", type=float, default=1.0)
    run_splits(parser, one_split)


if __name__ == "__main__":
    main()
