"""SASPA side by side with what users would pick instead (issue 6), in one run.

On the same data, splits and, where the method allows, the same bases (K-means
centres of the training inputs, as SASPA uses):

* SASPA-full (``SASPAClassifier``, defaults: hyperparameters learnt by evidence), and
  the same with ``n_restarts_optimizer=1`` (a second maximisation from lengthscales
  of one standard deviation; the higher evidence is kept);
* GPy's sparse EP classifier (``GPy.models.SparseGPClassification``: EP-DTC, ARD RBF
  started at SASPA's default lengthscales, std * sqrt(d), inducing inputs started at
  the same K-means centres, one ``optimize()`` round, which also moves them).  GPy's
  own start (lengthscale 1 on standardised inputs) left its first EP on Spambase
  unfinished after 10 minutes;
* scikit-learn's ``GaussianProcessClassifier`` (Laplace, full GP; isotropic RBF on
  Spambase, where ARD over 57 inputs and N = 2761 takes minutes a fit; ARD on
  Ionosphere);
* GPyTorch's SVGP (probit ``BernoulliLikelihood``, ARD RBF, inducing points started
  at the same centres and learnt, minibatch Adam as its documentation runs it);
* logistic regression, for scale.

Reports test error, mean negative log probability (NLP) and fit seconds on Ionosphere
(M = 16) and Spambase (M = 32, 64), and the time of EP at fixed hyperparameters, SASPA
against GPy, on the same model (DTC-EP, delta bases) at equal N and M.  Then the large
problem: 10^6 synthetic rows (d = 8), SVGP (M = 256) trained by minibatch Adam with
its test error on 10^5 test rows recorded after every epoch (evaluation not timed), and
SASPA-full (M = 64, 96, 128, 256, EP tolerance 1e-6 and 1e-3) in memory, hyperparameters
learnt once on a 20,000-row subsample (its time is added to every SASPA run) then EP
on all rows; wall times include K-means.  Quadratic discriminant analysis, which has
the Bayes-optimal form for these two Gaussian classes, gives the error floor.

    python benchmarks/bench_peers.py            # about 90 minutes on 2 cores
    python benchmarks/bench_peers.py --quick    # small version for CI
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np
from lib import output, svgp
from lib.data import ionosphere, random_split, spambase
from lib.machine import machine, versions
from lib.metrics import error_and_nlp, mean_se


# ----------------------------------------------------------------------------------
# the methods: each takes (Xtr, ytr, Xte, M, centres) and returns (P(y=1) on Xte, info)
# ----------------------------------------------------------------------------------


def fit_saspa(Xtr, ytr, Xte, M, centres, **kw):
    from saspa_dask import Basis, SASPAClassifier, kmeans_bases

    basis = kmeans_bases(Xtr, M, random_state=0) if centres is None else centres
    model = SASPAClassifier(bases=Basis(basis.means, basis.covs), blur="full", **kw)
    model.fit(Xtr, ytr)
    return model.predict_proba(Xte)[:, 1], {"converged": bool(model.converged_)}


def fit_gpy(Xtr, ytr, Xte, M, centres, max_iters=1000):
    import GPy

    from saspa_dask.fitting.input_groups import default_lengthscale

    kernel = GPy.kern.RBF(Xtr.shape[1], ARD=True,
                          lengthscale=default_lengthscale(Xtr.std(axis=0)))
    model = GPy.models.SparseGPClassification(Xtr, ytr[:, None].astype(float), kernel=kernel,
                                              Z=centres.means.copy())
    model.optimize(max_iters=max_iters)
    return model.predict(Xte)[0][:, 0], {}


def fit_sklearn(Xtr, ytr, Xte, M, centres, ard=True):
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    scale = np.ones(Xtr.shape[1]) if ard else 1.0
    model = GaussianProcessClassifier(ConstantKernel() * RBF(scale), random_state=0)
    model.fit(Xtr, ytr)
    return model.predict_proba(Xte)[:, 1], {"ard": ard}


def fit_logistic(Xtr, ytr, Xte, M, centres):
    from sklearn.linear_model import LogisticRegressionCV

    model = LogisticRegressionCV(max_iter=5000).fit(Xtr, ytr)
    return model.predict_proba(Xte)[:, 1], {}


def fit_svgp(Xtr, ytr, Xte, M, centres, epochs=200, batch=256):
    _, model, likelihood = svgp.train(Xtr, ytr, centres.means, [epochs], regression=False,
                                      batch=batch, clock="epochs")
    return svgp.predict(model, likelihood, Xte, fast=True)[0], {"epochs": epochs, "batch": batch}


# ----------------------------------------------------------------------------------
# part 1: Ionosphere and Spambase
# ----------------------------------------------------------------------------------


def uci(quick, ionosphere_splits=10, spambase_splits=5):
    from saspa_dask import kmeans_bases

    if quick:
        plans = [("ionosphere", ionosphere, 200, None, 1, [8])]
        svgp_epochs = 5
    else:
        plans = [("ionosphere", ionosphere, 200, None, ionosphere_splits, [16]),
                 ("spambase", spambase, 2761, 1840, spambase_splits, [32, 64])]
        plans = [plan for plan in plans if plan[4] > 0]
        svgp_epochs = 200
    # (name, fit, once per split): the full GP and logistic regression have no bases
    sparse = [("SASPA-full", fit_saspa),
              ("SASPA-full, 1 restart",
               lambda *a: fit_saspa(*a, n_restarts_optimizer=1)),
              ("GPy sparse EP (EP-DTC)",
               lambda *a: fit_gpy(*a, max_iters=5 if quick else 1000)),
              ("GPyTorch SVGP", lambda *a: fit_svgp(*a, epochs=svgp_epochs))]
    rows = []
    for dataset, loader, n_train, n_test, n_splits, bases_list in plans:
        X, y = loader()
        ard = dataset == "ionosphere" and not quick
        dense = [("sklearn GPC (Laplace, full GP)",
                  lambda *a, ard=ard: fit_sklearn(*a, ard=ard)),
                 ("logistic regression", fit_logistic)]
        for seed in range(n_splits):
            Xtr, ytr, Xte, yte = random_split(X, y, n_train, seed, n_test)
            for M in bases_list:
                centres = kmeans_bases(Xtr, M, random_state=0)
                for name, fit in sparse + (dense if M == bases_list[0] else []):
                    start = time.perf_counter()
                    p, info = fit(Xtr, ytr, Xte, M, centres)
                    seconds = time.perf_counter() - start
                    err, nlp = error_and_nlp(p, yte)
                    rows.append({"dataset": dataset, "split": seed, "M": M, "method": name,
                                 "error": err, "nlp": nlp, "fit_s": seconds, **info})
                    print(f"[bench_peers] {dataset} split {seed} M={M} {name}: error {err:.4f} "
                          f"nlp {nlp:.4f} {seconds:.1f}s", file=sys.stderr, flush=True)
    summary = []
    for key in sorted({(r["dataset"], r["method"], r["M"]) for r in rows},
                      key=lambda k: (k[0], k[2], k[1])):
        sel = [r for r in rows if (r["dataset"], r["method"], r["M"]) == key]
        err, nlp = mean_se([r["error"] for r in sel]), mean_se([r["nlp"] for r in sel])
        summary.append({"dataset": key[0], "method": key[1], "M": key[2],
                        "n_splits": len(sel), "error_mean": err[0], "error_se": err[1],
                        "nlp_mean": nlp[0], "nlp_se": nlp[1],
                        "fit_s_mean": float(np.mean([r["fit_s"] for r in sel]))})
    return {"rows": rows, "summary": summary}


# ----------------------------------------------------------------------------------
# part 2: one EP pass, SASPA vs GPy, equal N and M
# ----------------------------------------------------------------------------------


def ep_pass_speed(quick):
    """Seconds of EP at fixed hyperparameters: GPy's EP-DTC (its inference call, which
    runs EP to its own convergence) against SASPA's EP run (to tol 1e-6), at equal N
    and M on synthetic data, plus the seconds per sweep of each."""
    import GPy

    from saspa_dask import SASPAClassifier, kmeans_bases
    from saspa_dask.datasets import synthetic_two_class

    sizes = [(400, 16)] if quick else [(2761, 32), (2761, 64), (5_000, 64)]
    out = []
    for N, M in sizes:
        X, y = synthetic_two_class(N, 8, seed=0)
        centres = kmeans_bases(X, M, random_state=0)
        ls = X.std(0)
        kernel = GPy.kern.RBF(8, lengthscale=ls, ARD=True)
        model = GPy.models.SparseGPClassification(X, y[:, None].astype(float), kernel=kernel,
                                                  Z=centres.means.copy())
        model.inference_method.reset()
        start = time.perf_counter()
        model.parameters_changed()  # EP to convergence at fixed hyperparameters
        gpy_s = time.perf_counter() - start
        start = time.perf_counter()
        saspa = SASPAClassifier(bases=centres, blur="delta", lengthscale=ls,
                                signal_variance=1.0, optimize_hyperparameters=False, approximation="dtc", ep={"max_sweeps": 200}).fit(X, y)
        saspa_s = time.perf_counter() - start
        out.append({"N": N, "M": M, "gpy_ep_s": gpy_s, "saspa_ep_s": saspa_s,
                    "saspa_sweeps": saspa.n_sweeps_,
                    "speedup": gpy_s / saspa_s})
        print(f"[bench_peers] EP N={N} M={M}: GPy {gpy_s:.2f}s, SASPA {saspa_s:.3f}s",
              file=sys.stderr, flush=True)
    return out


# ----------------------------------------------------------------------------------
# part 3: 10^6 rows, SASPA vs SVGP time to SVGP's error
# ----------------------------------------------------------------------------------


def large(quick):
    from saspa_dask import SASPAClassifier, kmeans_bases
    from saspa_dask.datasets import synthetic_two_class

    N, M, epochs, batch, n_sub = ((10_000, 16, 3, 1000, 2_000) if quick else
                                  (1_000_000, 256, 8, 1024, 20_000))
    n_test = 5_000 if quick else 100_000
    X, y = synthetic_two_class(N + n_test, 8, seed=7)
    Xtr, ytr, Xte, yte = X[:N], y[:N], X[N:], y[N:]
    start = time.perf_counter()
    centres = kmeans_bases(Xtr[:200_000], M, random_state=0)  # the SVGP's starting points
    kmeans_s = time.perf_counter() - start
    curve = []

    def checkpoint(row):
        curve.append({"seconds": kmeans_s + row["seconds"], "error": row["error"],
                      "nlp": row["nlp"]})
        print(f"[bench_peers] SVGP epoch {len(curve)}: {curve[-1]['seconds']:.0f}s error "
              f"{row['error']:.4f}", file=sys.stderr, flush=True)

    svgp.train(Xtr, ytr, centres.means, range(1, epochs + 1), regression=False, batch=batch,
               clock="epochs", score=lambda m, lik: svgp.scores(m, lik, Xte, yte, False),
               report=checkpoint)
    target = curve[-1]["error"]
    # hyperparameters learnt once on a subsample (M = 64), then EP on all rows with them
    # fixed; the subsample fit's time is added to every SASPA run below
    start = time.perf_counter()
    sub = SASPAClassifier(n_bases=16 if quick else 64, blur="full", random_state=0).fit(
        Xtr[:n_sub], ytr[:n_sub])
    hyper_s = time.perf_counter() - start
    saspa = []
    for m in ((8, 16) if quick else (64, 96, 128, 256)):
        for tol in (1e-6, 1e-3):
            start = time.perf_counter()
            model = SASPAClassifier(n_bases=m, blur="full", random_state=0, lengthscale=sub.lengthscale_,
                                    signal_variance=sub.signal_variance_,
                                    optimize_hyperparameters=False, ep={"tol": tol}).fit(Xtr, ytr)
            seconds = hyper_s + time.perf_counter() - start
            err, nlp = error_and_nlp(model.predict_proba(Xte)[:, 1], yte)
            reached = [c["seconds"] for c in curve if c["error"] <= err]
            saspa.append({"M": m, "tol": tol, "seconds": seconds, "hyper_subsample_s": hyper_s,
                          "timings": model.timings_, "error": err, "nlp": nlp,
                          "sweeps": model.n_sweeps_, "coarse_start": model.coarse_start_,
                          "reaches_svgp_error": err <= target,
                          "svgp_total_over_saspa": curve[-1]["seconds"] / seconds,
                          "svgp_first_reaches_this_error_s": reached[0] if reached else None})
            print(f"[bench_peers] SASPA M={m} tol={tol:g}: {seconds:.0f}s error {err:.4f}",
                  file=sys.stderr, flush=True)
    # reference: the classes are Gaussians, so quadratic discriminant analysis has the
    # Bayes-optimal form; its error is about the lowest any method can reach here
    from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis

    qda = QuadraticDiscriminantAnalysis().fit(Xtr, ytr)
    qda_err, qda_nlp = error_and_nlp(qda.predict_proba(Xte)[:, 1], yte)
    return {"N": N, "test_rows": len(yte), "svgp_M": M, "svgp_epochs": epochs,
            "svgp_batch": batch, "svgp_curve": curve, "svgp_final_error": target,
            "svgp_total_s": curve[-1]["seconds"], "subsample_rows": n_sub, "saspa": saspa,
            "qda_reference": {"error": qda_err, "nlp": qda_nlp}}


def _print_tables(report):
    print("\n| dataset | M | method | splits | test error | NLP | fit s |")
    print("|---|---|---|---|---|---|---|")
    for r in report["uci"]["summary"]:
        print(f"| {r['dataset']} | {r['M']} | {r['method']} | {r['n_splits']} | "
              f"{r['error_mean']:.4f} ± {r['error_se']:.4f} | {r['nlp_mean']:.4f} ± "
              f"{r['nlp_se']:.4f} | {r['fit_s_mean']:.1f} |")
    print("\n| N | M | GPy EP-DTC s | SASPA DTC-EP s | speed-up |")
    print("|---|---|---|---|---|")
    for r in report["ep_speed"]:
        print(f"| {r['N']} | {r['M']} | {r['gpy_ep_s']:.2f} | {r['saspa_ep_s']:.3f} | "
              f"{r['speedup']:.0f}x |")
    big = report["large"]
    print(f"\n| {big['N']} rows | M | seconds | test error |\n|---|---|---|---|")
    print(f"| GPyTorch SVGP ({big['svgp_epochs']} epochs) | {big['svgp_M']} | "
          f"{big['svgp_total_s']:.0f} | {big['svgp_final_error']:.4f} |")
    for r in big["saspa"]:
        print(f"| SASPA-full (tol {r['tol']:g}) | {r['M']} | {r['seconds']:.0f} | "
              f"{r['error']:.4f} |")
    print(f"| QDA (Bayes-optimal form) | - | - | {big['qda_reference']['error']:.4f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small version for CI")
    ap.add_argument("--only", choices=["uci", "ep_speed", "large"], action="append")
    ap.add_argument("--ionosphere-splits", type=int, default=10)
    ap.add_argument("--spambase-splits", type=int, default=5,
                    help="GPy's fit takes minutes a split on Spambase")
    output.add_outdir_option(ap)
    args = ap.parse_args()
    output.use_outdir(args)
    parts = args.only or ["uci", "ep_speed", "large"]
    report = {"machine": machine(), "versions": versions("GPy", "gpytorch", "torch"),
              "command": " ".join(["python benchmarks/bench_peers.py", *sys.argv[1:]])}
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for part in parts:
            if part == "uci":
                report[part] = uci(args.quick, args.ionosphere_splits, args.spambase_splits)
            else:
                report[part] = {"ep_speed": ep_pass_speed, "large": large}[part](args.quick)
    report["seconds"] = time.perf_counter() - start
    output.RESULTS.mkdir(parents=True, exist_ok=True)
    splits = ("" if (args.ionosphere_splits, args.spambase_splits) == (10, 5) else
              f"-ion{args.ionosphere_splits}-spam{args.spambase_splits}")
    name = "peers-quick.json" if args.quick else f"peers-{'-'.join(parts)}{splits}.json"
    with open(output.RESULTS / name, "w") as fh:
        json.dump(report, fh, indent=1)
    print(json.dumps({k: report[k] for k in ("machine", "versions", "command", "seconds")},
                     indent=2))
    if set(parts) == {"uci", "ep_speed", "large"}:
        _print_tables(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
