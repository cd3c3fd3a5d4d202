"""When learning stops: held-out accuracy against the optimiser's tolerance.

Per regression set (``bench_learnt_bases.SETS`` plus the generated ``smooth`` set of
``bench_power_ep``), split and M: one long maximisation (``hyper_tol=0``, up to
``--long-iter`` iterations) records the energy and projected gradient of every
iteration.  From that trace we read the iteration at which each tolerance of
``--tols`` would stop (the stop rule of :mod:`saspa_dask.fitting.optimizer` depends on
the trace alone), and refit with exactly that many iterations (L-BFGS-B is
deterministic, so the refit is the long run's prefix), giving the test RMSE / NLPD,
CPU seconds and iterations each tolerance delivers, next to the old cap of 20
iterations and to the long run itself.  Classification: Ionosphere (``--ionosphere``
splits of 200 rows, M = 16) likewise, test error / NLP.

Writes results/stopping.json (after every fit, so a stopped run keeps its rows).
"""

from __future__ import annotations

import argparse
import time

from saspa_dask.fitting.optimizer import WINDOW, StopRule
from lib import data, metrics, output
from lib.data import SETS, held_out_split, load_regression, smooth_rows
from lib.machine import machine, versions
from lib.metrics import regression_scores
from lib.output import add_outdir_option, save, use_outdir

TOLS = (1e-4, 1e-5, 1e-6, 1e-7)


def stop_iteration(trace, tol, scale_rows):
    """The iteration at which the rule with ``tol`` stops on ``trace`` (or None)."""
    rule = StopRule(tol=tol, scale_rows=scale_rows)
    for k in range(1, len(trace)):
        if rule.converged(trace[:k + 1]):
            return k
    return None


def regression_fit(Xtr, ytr, Xte, yte, M, iterations, tol, seed):
    from saspa_dask import SASPARegressor

    t0, c0 = time.perf_counter(), time.process_time()
    model = SASPARegressor(M, learn_bases="means", max_hyper_iter=iterations, hyper_tol=tol,
                           random_state=seed, hyper_subsample=None).fit(Xtr, ytr)
    mean, var = model.predict_latent(Xte)
    scores = regression_scores(mean, var + model.noise_variance_, yte)
    return model, {"iterations": model.hyperparameter_info_["n_iterations"],
                   "stop_reason": model.hyperparameter_info_["stop_reason"],
                   "energy": model.log_evidence_, "seconds": time.perf_counter() - t0,
                   "cpu_seconds": time.process_time() - c0,
                   "test_rmse": scores["rmse"], "test_nlpd": scores["nlpd"]}


def classification_fit(Xtr, ytr, Xte, yte, M, iterations, tol, seed):
    from saspa_dask import SASPAClassifier

    t0, c0 = time.perf_counter(), time.process_time()
    model = SASPAClassifier(M, max_hyper_iter=iterations, hyper_tol=tol,
                            random_state=seed).fit(Xtr, ytr)
    error, nlp = metrics.error_and_nlp(model.predict_proba(Xte)[:, 1], yte)
    return model, {"iterations": model.hyperparameter_info_["n_iterations"],
                   "stop_reason": model.hyperparameter_info_["stop_reason"],
                   "energy": model.log_evidence_, "seconds": time.perf_counter() - t0,
                   "cpu_seconds": time.process_time() - c0,
                   "test_error": error, "test_nlp": nlp}


def one_case(fit, data, M, seed, args, label):
    """The long run, the old cap, and a refit at each tolerance's stop."""
    Xtr, ytr, Xte, yte = data
    model, long_run = fit(Xtr, ytr, Xte, yte, M, args.long_iter, 0.0, seed)
    trace = model.hyperparameter_trace_
    row = {"long": long_run, "n_train": int(len(ytr)), "M": M,
           "trace": [{k: r[k] for k in ("iteration", "log_evidence", "relative_change",
                                        "projected_gradient", "seconds")} for r in trace]}
    _, row["cap20"] = fit(Xtr, ytr, Xte, yte, M, 20, 0.0, seed)
    row["tols"] = {}
    for tol in args.tols:
        k = stop_iteration(trace, tol, len(ytr))
        if k is None:
            row["tols"][str(tol)] = None
            continue
        _, row["tols"][str(tol)] = fit(Xtr, ytr, Xte, yte, M, k, 0.0, seed)
        row["tols"][str(tol)]["stop_iteration"] = k
    print(f"[stopping] {label}: long {long_run['iterations']} its; " + ", ".join(
        f"tol {t}: {v and v['iterations']}" for t, v in row["tols"].items()), flush=True)
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sets", nargs="+", default=["smooth", *SETS])
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--train-rows", type=int, default=3000)
    parser.add_argument("--M", type=int, default=64)
    parser.add_argument("--long-iter", type=int, default=800)
    parser.add_argument("--tols", type=float, nargs="+", default=list(TOLS))
    parser.add_argument("--ionosphere", type=int, default=5, help="Ionosphere splits")
    parser.add_argument("--out", default="stopping.json")
    add_outdir_option(parser)
    output.add_quick_option(parser, sets=["smooth"], splits=1, train_rows=300, M=8,
                            long_iter=30, tols=[1e-4], ionosphere=1)
    args = parser.parse_args()
    use_outdir(args)
    report = {"machine": machine(), "versions": versions(), "args": vars(args),
              "window": WINDOW, "runs": []}
    for s in range(args.ionosphere):
        X, y = data.ionosphere()
        parts = data.random_split(X, y, 200, s)
        row = one_case(classification_fit, parts, 16, s, args, f"ionosphere split {s}")
        report["runs"].append({"set": "ionosphere", "split": s, **row})
        save(report, args.out)
    for name in args.sets:
        for s in range(args.splits):
            if name == "smooth":
                X, y, _ = smooth_rows(s)
            else:
                X, y = load_regression(name)
            parts = held_out_split(X, y, s, args.train_rows)
            row = one_case(regression_fit, parts, args.M, 0, args, f"{name} split {s}")
            report["runs"].append({"set": name, "split": s, **row})
            save(report, args.out)


if __name__ == "__main__":
    main()
