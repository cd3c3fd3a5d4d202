"""What learning will cost, said before it starts.

One optimiser *evaluation* rebuilds the whitened blocks at the trial point, runs EP
warm-started from the best sites so far, and makes one gradient pass.  Its floating
point work, by term (n rows learnt on, M bases, d inputs):

- EP and whitening: about ``ep_passes * 2 n M^2`` (a few warm sweeps, the whitening
  solve and the gradient's products are all n x M x M);
- rows against bases: the blurred kernel and the gradient's input moments,
  ``n M d^2`` for full blur covariances (a d x d quadratic form per pair), ``n M d``
  for delta, spherical and diagonal;
- bases against bases: the M x M blurred covariance and its gradient need, per pair
  of bases, a d x d factorisation and inverse when the blurs are full
  (``M^2 d^3``), ``M^2 d`` otherwise.

A Matérn kernel with a blur repeats the last two for each term of its SE mixture
(:mod:`saspa_dask.core.kernel_profiles`: ``kernel_terms``, 7-11).

The flops are turned into seconds with the machine's float64 matmul rate on one core
(measured once per process, a few milliseconds) and, for full blurs,
``full_blur_efficiency``, the fraction of that rate they reach; for the other families
each term has its own measured cost (``term_costs``: the pairs' elementwise work and the
optimiser's own work per learnt value are far dearer than a flop of a product), both in
:mod:`saspa_dask.fitting.policy` and measured by ``benchmarks/bench_costs.py``
(``benchmarks/RESULTS.md``, "What learning costs" and "Wide one-hot tables, a third
time").
"""

from __future__ import annotations

import functools
import time

import numpy as np

from ..core.blur_families import blur_family
from . import policy

__all__ = ["evaluation_flops", "evaluation_cost", "matmul_rate", "choose_blur"]

def evaluation_flops(n, M, d, blur, learn_bases=False, kernel_terms=1):
    """Floating-point work of one optimiser evaluation (see the module docstring)."""
    full = blur_family(blur).dense
    rows = n * M * (d * d if full else d) * kernel_terms
    pairs = M * M * (d ** 3 if full else d) * kernel_terms
    extra = 2.0 if learn_bases == "means+blur" and full else 1.0
    return float(policy.POLICY.ep_passes * 2 * n * M * M + 6 * rows * extra
                 + 8 * pairs * extra)


def _matmul_equivalent(n, M, d, blur, learn_bases, kernel_terms):
    """One evaluation's cost in one-core matmul flops for a blur other than full
    (the policy's ``term_costs``)."""
    rules = policy.POLICY
    costs = rules.term_costs
    learnt = {"means": 1, "means+blur": 2}.get(learn_bases, 0) * M * d
    pairs = costs["pairs" if blur_family(blur).blurred else "delta_pairs"]
    return (costs["ep"] * rules.ep_passes * 2 * n * M * M
            + (costs["rows"] * n * M * d + pairs * M * M * d) * kernel_terms
            + costs["learnt"] * learnt)


@functools.lru_cache(maxsize=1)
def matmul_rate():
    """This machine's float64 matmul rate in flop/s on one core (best of 5 products of
    256 x 256 matrices, measured once per process)."""
    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(256, 256)), rng.normal(size=(256, 256))
    best = np.inf
    with threadpool_limits(1):
        for _ in range(5):
            start = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - start)
    return 2 * 256 ** 3 / max(best, 1e-9)


def evaluation_cost(n, M, d, blur, learn_bases=False, kernel_terms=1):
    """``flops_per_evaluation`` and the expected ``seconds_per_evaluation`` on one core
    of this machine."""
    flops = evaluation_flops(n, M, d, blur, learn_bases, kernel_terms)
    if blur_family(blur).dense:
        seconds = flops / (matmul_rate() * policy.POLICY.full_blur_efficiency)
    else:
        seconds = _matmul_equivalent(n, M, d, blur, learn_bases, kernel_terms) / matmul_rate()
    return {"flops_per_evaluation": flops, "seconds_per_evaluation": seconds}


def choose_blur(blur, d):
    """``blur="auto"``: full covariances while d is at most the policy's
    ``full_blur_max_dims``, diagonal above; any other value as given."""
    if blur != "auto":
        return blur
    return "full" if d <= policy.POLICY.full_blur_max_dims else "diagonal"
