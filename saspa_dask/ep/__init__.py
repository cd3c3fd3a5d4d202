"""Layer 2, expectation propagation in the whitened form (docs/design.md, section 2).

- :mod:`~saspa_dask.ep.whitening`: the basis covariance's Cholesky factor and whitened
  row blocks (phi, lam);
- :mod:`~saspa_dask.ep.posterior`: the whitened posterior N(mu_v, P^{-1});
- :mod:`~saspa_dask.ep.sites`: cavities, tilted moments and site updates on one block;
- :mod:`~saspa_dask.ep.acceleration`: Anderson acceleration and the cycle rule;
- :mod:`~saspa_dask.ep.engine`: the :class:`EPEngine` protocol an engine implements;
- :mod:`~saspa_dask.ep.driver`: :func:`run_ep`, sweeps to convergence on any engine;
- :mod:`~saspa_dask.ep.result`: what a run produced (:class:`EPResult`) and its evidence.
"""

from .engine import EPEngine
from .driver import run_ep, settled_by_one_sweep
from .result import EPConvergenceWarning, EPResult, ep_evidence
from .schedule import EPSchedule, default_damping
from .posterior import Posterior, predict_latent
from .sites import (PassSummary, block_pass, block_statistics, cavities, evaluate_chunk,
                    parallel_chunk, sequential_block, sequential_chunk)
from .whitening import Block, make_block, relabel_block, whiten

__all__ = ["Block", "EPEngine", "EPConvergenceWarning", "EPResult", "EPSchedule", "PassSummary",
           "default_damping", "ep_evidence", "settled_by_one_sweep",
           "Posterior", "block_pass", "block_statistics", "cavities", "evaluate_chunk",
           "make_block", "parallel_chunk", "predict_latent", "relabel_block", "run_ep",
           "sequential_block", "sequential_chunk", "whiten"]
