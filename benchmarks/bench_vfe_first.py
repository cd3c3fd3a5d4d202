"""Learning at a small Power EP alpha first (near the variational fit), then at alpha = 1.

On the papers' splits of ``../shared/datasets/`` and on its regression tables
(ailerons, house_16h, cpu_act, california_housing: a seeded fifth held out, at most
10,000 training rows, as ``bench_defaults.py`` splits them; inputs and targets
standardised on the training rows), for each seed: ``SASPARegressor(n_bases=M,
random_state=seed)`` with its defaults; then two fits through the public API, one after
the other, whose CPU is added: learning with ``alpha=--first-alpha`` (``blur=--blur``,
delta by default; ``exact_start=--first-exact-start``; every other default), and
learning on from its bases, lengthscales, signal and noise at ``alpha=1`` (FITC-EP, the
model that is scored).  Why: on Pole Telecomm learning from K-means stops on an
optimum whose mean trails SGPR's (with delta bases, its noise on the floor and the
residual taken by FITC's per-row variance); the variational fit does not reward a
collapsed noise, and from its optimum FITC-EP's learning stays near the mean it found.
The estimator's ``learning_start="variational"`` makes the same two fits
(``--start variational``; ``tests/test_learning_start.py``).  One BLAS thread; test RMSE and NLPD in
standardised units.  Writes ``results/vfe_first.json``.

    python benchmarks/bench_vfe_first.py                       # 3 sets, seeds 0-2, M = 64
    python benchmarks/bench_vfe_first.py --sets pol --bases 256 --seeds 0
    python benchmarks/bench_vfe_first.py --quick               # smoke: 1,000 rows, M = 8
    python benchmarks/bench_vfe_first.py --sets pol --seeds 0 --from-sgpr 300 \
        --out vfe_first_diagnosis.json      # also: SGPR to convergence, SASPA from it

``--evidence FILE ...``: no fits; for each run of the given reports (under results/),
which of the two alpha = 1 fits has the higher evidence, and which the better test
NLPD.

``--from-sgpr SECONDS``: the diagnosis first, for each set and seed: GPyTorch's SGPR
from the K-means centres until it converges (or its CPU reaches SECONDS), then SASPA
(delta bases, alpha = 1) learning from SGPR's inducing inputs, lengthscales, signal and
noise variances, against SASPA with delta bases from K-means.
"""

from __future__ import annotations

import argparse

from lib import data, fits, sgpr
from lib.machine import matmul_rate, start_report
from lib.output import add_quick_option, parse, record

from saspa_dask.parameters import parse_exact_start


def vfe_first(Xtr, ytr, Xte, yte, M, seed, first_alpha, exact_start="auto", blur="delta",
              first=None, second=None):
    """The two fits; the second's scores, with both fits' CPU and records (``first``
    and ``second``: further parameters of each fit)."""
    fitted = fits.regressor_fit(Xtr, ytr, Xte, yte, n_bases=M, random_state=seed,
                                blur=blur, alpha=first_alpha, exact_start=exact_start,
                                keep_model=True, **(first or {}))
    model = fitted.pop("model")
    then = fits.regressor_fit(
        Xtr, ytr, Xte, yte, n_bases=M, random_state=seed, blur=blur,
        bases=model.bases_, lengthscale=model.lengthscale_,
        signal_variance=model.signal_variance_, noise_variance=model.noise_variance_,
        exact_start=False, **(second or {}))
    return {**then, "cpu_seconds": fitted["cpu_seconds"] + then["cpu_seconds"],
            "first": fitted, "second_cpu_seconds": then["cpu_seconds"]}


def short_race(Xtr, ytr, Xte, yte, M, seed, iterations, second_iterations):
    """Both starts cut short: the defaults capped at ``iterations`` learning
    iterations, the recipe's first fit at ``iterations`` and its second at
    ``second_iterations``; their evidences per row, the pick, and each start's CPU."""
    data = fits.regressor_fit(Xtr, ytr, Xte, yte, n_bases=M, random_state=seed,
                              max_hyper_iter=iterations)
    recipe = vfe_first(Xtr, ytr, Xte, yte, M, seed, 1e-3,
                       first={"max_hyper_iter": iterations},
                       second={"max_hyper_iter": second_iterations})
    pick = ("variational" if recipe["energy_per_row"] > data["energy_per_row"]
            else "data")
    return {"data": data, "variational": recipe, "pick": pick}


def from_sgpr(Xtr, ytr, Xte, yte, M, seed, seconds):
    """SGPR to convergence, SASPA learning from its values, SASPA from K-means."""
    from saspa_dask import Basis, kmeans_bases

    learnt = {}

    def score(model, likelihood):  # called where SGPR is scored: at its end here
        learnt.update(sgpr.learnt_values(model, likelihood))
        return sgpr.scores(model, likelihood, Xte, yte)

    centres = kmeans_bases(Xtr, M, random_state=seed).means
    (peer,) = sgpr.train(Xtr, ytr, centres, [seconds], score=score)
    start = dict(bases=Basis(learnt["inputs"], None), lengthscale=learnt["lengthscale"],
                 signal_variance=learnt["signal_variance"],
                 noise_variance=learnt["noise_variance"], exact_start=False)
    common = dict(n_bases=M, random_state=seed, blur="delta")
    return {"sgpr": peer, "sgpr_noise_variance": learnt["noise_variance"],
            "from_sgpr": fits.regressor_fit(Xtr, ytr, Xte, yte, **common, **start),
            "from_kmeans": fits.regressor_fit(Xtr, ytr, Xte, yte, **common)}


def evidence_picks(names):
    """Print, per run of the reports ``names``, the fit the evidence picks and the one
    with the better test NLPD."""
    import json

    from lib.output import RESULTS

    print("| report | set | seed | energy per row: defaults, recipe | test NLPD: defaults, "
          "recipe | higher evidence | better NLPD |")
    print("|---|---|---|---|---|---|---|")
    for name in names:
        for run in json.loads((RESULTS / name).read_text())["runs"]:
            a, b = run["defaults"], run["vfe_first"]
            pick = "recipe" if b["energy_per_row"] > a["energy_per_row"] else "defaults"
            best = "recipe" if b["nlpd"] < a["nlpd"] else "defaults"
            print(f"| {name} | {run['set']} | {run['seed']} | {a['energy_per_row']:.3f}, "
                  f"{b['energy_per_row']:.3f} | {a['nlpd']:.3f}, {b['nlpd']:.3f} | {pick} | "
                  f"{best} |")


def split(name, seed, rows):
    """(Xtr, ytr, Xte, yte) of a papers' split or of a regression table's seeded one."""
    if name in data.SETS:
        return data.held_out_split(*data.load_regression(name), seed, rows or 10_000)
    return data.paper_split(name, rows)[:4]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    data.add_paper_set_options(parser)
    parser.add_argument("--first-alpha", type=float, default=1e-3)
    parser.add_argument("--first-exact-start", default="auto",
                        help="the first fit's exact_start (auto, on or off)")
    parser.add_argument("--blur", default="delta", help="both fits' blur (delta, auto, ...)")
    parser.add_argument("--start", default="two-fits",
                        choices=("two-fits", "variational", "both", "race", "data"),
                        help="the recipe as two fits of this script, or the estimator's "
                             "learning_start (variational: the same fits; both: the higher "
                             "evidence of it and the defaults; race: a short race of both, the leader's fit continued)")
    parser.add_argument("--race", type=int, nargs=2, metavar=("K", "K2"),
                        help="only a short race: each start capped at K learning "
                             "iterations (the recipe's second fit at K2), the pick by "
                             "the evidence")
    parser.add_argument("--first-rows", type=int, default=None,
                        help="the first fit learns on a sample of this many rows")
    parser.add_argument("--no-defaults", action="store_true",
                        help="skip the defaults' fit (compare with an earlier report's)")
    parser.add_argument("--defaults-only", action="store_true",
                        help="the defaults' fit alone (e.g. of an earlier version of the "
                             "package, installed in another environment)")
    parser.add_argument("--from-sgpr", type=float, default=None, metavar="SECONDS",
                        help="the diagnosis first (SGPR's CPU budget)")
    parser.add_argument("--evidence", nargs="+", metavar="FILE",
                        help="no fits: the evidence's picks in these reports")
    parser.add_argument("--out", default="vfe_first.json")
    add_quick_option(parser, sets=["kin40k"], seeds=[0], bases=8, rows=1000)
    args = parse(parser)
    if args.evidence:
        return evidence_picks(args.evidence)
    report = start_report(args, lambda: matmul_rate(threads=1), "torch", "gpytorch", runs=[])
    if args.race:
        return race_only(args, report)
    for name in args.sets:
        for seed in args.seeds:
            Xtr, ytr, Xte, yte = split(name, seed, args.rows)
            diagnosis = {} if args.from_sgpr is None else {"diagnosis": from_sgpr(
                Xtr, ytr, Xte, yte, args.bases, seed, args.from_sgpr)}
            defaults = None if args.no_defaults else fits.regressor_fit(
                Xtr, ytr, Xte, yte, n_bases=args.bases, random_state=seed)
            if args.defaults_only:
                two = None
            elif args.start == "two-fits":
                two = vfe_first(Xtr, ytr, Xte, yte, args.bases, seed, args.first_alpha,
                                parse_exact_start(args.first_exact_start), args.blur,
                                first=None if args.first_rows is None
                                else {"hyper_subsample": args.first_rows})
            else:
                two = fits.regressor_fit(
                    Xtr, ytr, Xte, yte, n_bases=args.bases, random_state=seed,
                    learning_start=args.start,
                    exact_start=parse_exact_start(args.first_exact_start))
            record(report, {"set": name, "seed": seed, "M": args.bases,
                            "defaults": defaults, "vfe_first": two, **diagnosis}, args.out)
    print("\n| set | seed | defaults: RMSE / NLPD (CPU s) | alpha first, then 1 | "
          "the first fit alone (or the start kept) |")
    print("|---|---|---|---|---|")
    for r in report["runs"]:
        nan = dict.fromkeys(("rmse", "nlpd", "cpu_seconds"), float("nan"))
        d, v = r["defaults"] or nan, r["vfe_first"] or nan
        f = v.get("first")
        last = (v.get("start", {}).get("kept", "-") if f is None else
                f"{f['rmse']:.4f} / {f['nlpd']:.3f} ({f['cpu_seconds']:.1f})")
        print(f"| {r['set']} | {r['seed']} | {d['rmse']:.4f} / {d['nlpd']:.3f} "
              f"({d['cpu_seconds']:.1f}) | {v['rmse']:.4f} / {v['nlpd']:.3f} "
              f"({v['cpu_seconds']:.1f}) | {last} |")


def race_only(args, report):
    """``--race K K2``: the short race on each set and seed, a line each."""
    print("| set | seed | energy per row: defaults, recipe (cut short) | pick | CPU s |")
    print("|---|---|---|---|---|")
    for name in args.sets:
        for seed in args.seeds:
            Xtr, ytr, Xte, yte = split(name, seed, args.rows)
            race = short_race(Xtr, ytr, Xte, yte, args.bases, seed, *args.race)
            record(report, {"set": name, "seed": seed, "M": args.bases, **race}, args.out)
            d, v = race["data"], race["variational"]
            print(f"| {name} | {seed} | {d['energy_per_row']:.4f}, "
                  f"{v['energy_per_row']:.4f} | {race['pick']} | "
                  f"{d['cpu_seconds']:.1f}, {v['cpu_seconds']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
