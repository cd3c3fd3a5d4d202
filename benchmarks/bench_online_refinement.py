"""Online refinement: the KL from the full GP to Csató & Opper's pass and its EP sweeps.

The SASPA paper's two-class problem (``bench_paper.py``'s two Gaussians: 200 training
rows, ``--test`` test rows, ``--seeds`` draws).  The full GP's EP classifier
(``FullGPClassifier``, hyperparameters learnt) gives the reference probabilities and
the kernel; ``SparseOnlineGPClassifier(max_bases=M, ep_passes=K)`` at that kernel is
fitted for each M of ``--budgets`` and K of ``--passes`` (K = 0: the single pass).
Reported: the KL summed over the test rows, averaged over the draws, and how many
draws have K = 1 no farther than the pass.  Writes ``results/online_refinement.json``.

    python benchmarks/bench_online_refinement.py              # 10 draws, M = 8, 16
    python benchmarks/bench_online_refinement.py --quick      # smoke
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
from lib import machine, output
from lib.data import two_gaussians
from lib.machine import matmul_rate
from lib.metrics import bernoulli_kl



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--budgets", default="8,16")
    parser.add_argument("--passes", default="0,1,2,3,5,500")
    parser.add_argument("--quick", action="store_true")
    args = output.parse(parser)
    if args.quick:
        args.seeds, args.test, args.budgets, args.passes = 1, 100, "8", "0,1,2"
    from saspa_dask import FullGPClassifier, SparseOnlineGPClassifier

    report = machine.start_report(args, matmul_rate)
    budgets = [int(v) for v in args.budgets.split(",")]
    passes = [int(v) for v in args.passes.split(",")]
    kl = {(M, K): [] for M in budgets for K in passes}
    warnings.simplefilter("ignore")
    for seed in range(args.seeds):
        X, y = two_gaussians(np.random.default_rng(1000 + seed), 200 + args.test)
        full = FullGPClassifier().fit(X[:200], y[:200])
        p = full.predict_proba(X[200:])[:, 1]
        kernel = dict(lengthscale=full.lengthscale_, signal_variance=full.signal_variance_)
        for M in budgets:
            for K in passes:
                model = SparseOnlineGPClassifier(max_bases=M, ep_passes=K, **kernel)
                q = model.fit(X[:200], y[:200]).predict_proba(X[200:])[:, 1]
                kl[(M, K)].append(float(bernoulli_kl(p, q).sum()))
    rows = []
    for M in budgets:
        row = {"M": M, "kl": {str(K): float(np.mean(kl[(M, K)])) for K in passes},
               "per_seed": {str(K): kl[(M, K)] for K in passes}}
        if 0 in passes and 1 in passes:
            row["one_sweep_no_farther"] = int(sum(
                a <= b for a, b in zip(kl[(M, 1)], kl[(M, 0)])))
        rows.append(row)
        print(f"| {M} | " + " | ".join(f"{row['kl'][str(K)]:.3g}" for K in passes)
              + f" | {row.get('one_sweep_no_farther', '-')} of {args.seeds} |", flush=True)
    output.RESULTS.mkdir(parents=True, exist_ok=True)
    report["runs"] = rows
    (output.RESULTS / "online_refinement.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
