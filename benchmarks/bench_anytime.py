"""How many sweeps of EP on all rows an anytime fit needs after learning on a subsample.

``max_fit_time`` keeps room for the block build and two sweeps of EP on all rows
(:mod:`saspa_dask.fitting.budget`): EP on all rows starts from the learning
subsample's posterior scaled to all rows, and its first sweeps already give the
converged model's held-out accuracy.  This measures that claim.  Data:
``bench_race``'s (``--task``; d = 8, 10^6 training rows of seed 0, 10^5 test rows of
seed 1), in memory in this process.  Learning: ``SASPAClassifier`` (or
``SASPARegressor``) with M bases and the defaults on a random subsample of
``--subsample`` rows, ``--max-hyper-iter`` iterations (a count, not a time: every run
learns the same values).  Then EP on all rows at the learnt values: for each k of
``--sweeps``, a run capped at k sweeps from the scaled start; a run to ``tol`` from the
scaled start; and one from the default cold start (EP on every 10th block first, the
coarse start).  Each: sweeps, seconds and the held-out metrics (error and NLP, or RMSE
and NLPD).  Writes results/anytime.json.

    python benchmarks/bench_anytime.py                    # classification, M = 256
"""

from __future__ import annotations

import argparse
import time
import warnings
from dataclasses import replace

import numpy as np

from bench_race import labelled_rows
from lib import machine, output
from lib.commands import add_data_options
from lib.machine import matmul_rate
from lib.metrics import error_and_nlp, regression_scores
from lib.output import save


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_options(parser, cluster=False)
    parser.add_argument("--subsample", type=int, default=20_000)
    parser.add_argument("--max-hyper-iter", type=int, default=20)
    parser.add_argument("--sweeps", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--task", choices=["regression", "classification"],
                        default="classification")
    parser.add_argument("--out", default="anytime.json", help="file under results/")
    output.add_quick_option(parser, rows=30_000, test_rows=2_000, bases=16,
                            subsample=2_000, max_hyper_iter=3, sweeps=[1, 2])
    args = output.parse(parser)
    report = machine.start_report(args, matmul_rate, runs=[])
    X, y = labelled_rows(args, args.rows, seed=0)
    Xt, yt = labelled_rows(args, args.test_rows, seed=1)
    model, learnt = _learn(args, X, y)
    report["learning"] = learnt
    print(learnt, flush=True)
    blocks = _blocks(model, X, y, args)  # shared by the runs (each has its own engine)
    for label, ep, start in _runs(args):
        row = {"run": label, **_final_ep(model, blocks, len(X), Xt, yt, ep, start, args)}
        report["runs"].append(row)
        print(row, flush=True)
        save(report, args.out)
    save(report, args.out)


def _learn(args, X, y):
    """The learnt values, from a fit on a random subsample (its posterior is the
    scaled start's)."""
    from saspa_dask import SASPAClassifier, SASPARegressor

    rows = np.sort(np.random.default_rng(0).choice(len(X), args.subsample, replace=False))
    cls = SASPAClassifier if args.task == "classification" else SASPARegressor
    model = cls(args.bases, random_state=0, hyper_subsample=None,
                max_hyper_iter=args.max_hyper_iter)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the iteration cap is the protocol
        model.fit(X[rows], y[rows])
    return model, {"rows": int(rows.size), "seconds": time.perf_counter() - start,
                   "iterations": model.hyperparameter_info_["n_iterations"]}


def _runs(args):
    """(label, EP schedule fields, start) of each run: capped ones from the scaled
    start, then to tol from it, then the default cold (coarse) start."""
    for k in args.sweeps:
        yield f"scaled start, {k} sweep(s)", {"max_sweeps": k}, "scaled"
    yield "scaled start, to tol", {}, "scaled"
    yield "coarse start (the default cold start), to tol", {}, "coarse"


def _blocks(model, X, y, args):
    """The whitened blocks of all rows at the model's learnt values."""
    from saspa_dask.ep import make_block

    fitted = model.fitted_posterior_
    targets = (np.where(y, 1.0, -1.0) if args.task == "classification"
               else y - fitted.offset)
    return [make_block(X[a:a + 8192], targets[a:a + 8192], fitted.means, fitted.covs,
                       fitted.lengthscale, fitted.signal_variance, fitted.whitening)
            for a in range(0, len(X), 8192)]


def _final_ep(model, blocks, n_rows, Xt, yt, ep, start, args):
    """EP on all rows at the model's learnt values; the model's posterior replaced by
    its result for the held-out metrics."""
    from saspa_dask.core.likelihoods import make_likelihood
    from saspa_dask.engines.memory import InMemoryEngine
    from saspa_dask.ep import EPSchedule, run_ep

    fitted = model.fitted_posterior_
    likelihood = make_likelihood(fitted.likelihood, **fitted.likelihood_params)
    schedule = EPSchedule(**{**vars(EPSchedule()), **ep, "coarse_start": start == "coarse"}
                          ).with_damping(fitted.likelihood)
    scaled = fitted.posteriors[0].scaled(n_rows / model.hyperparameter_info_["n_rows_learnt"])
    began = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the capped runs are not converged, on purpose
        engine = InMemoryEngine(blocks, anderson_memory=schedule.anderson_memory)
        result = run_ep(engine, likelihood, fitted.signal_variance, schedule,
                        start=scaled if start == "scaled" else None)
    seconds = time.perf_counter() - began
    model.fitted_posterior_ = replace(fitted, posteriors=(result.posterior,))
    try:
        if args.task == "classification":
            error, nlp = error_and_nlp(model.predict_proba(Xt)[:, 1], yt)
            scores = {"error": error, "nlp": nlp}
        else:
            mean, std = model.predict(Xt, return_std=True)
            scores = regression_scores(mean, std ** 2, yt)
    finally:
        model.fitted_posterior_ = fitted
    return {"sweeps": result.n_sweeps, "converged": bool(result.converged),
            "last_change": result.history[-1]["change"], "seconds": seconds,
            "coarse_rows": [level["rows"] for level in result.coarse_start], **scores}


if __name__ == "__main__":
    main()
