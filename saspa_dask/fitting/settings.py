"""The settings of a fit a user rarely touches, one type each: the EP schedule (from
:mod:`saspa_dask.ep.schedule`), where the work runs (:class:`Execution`), and how
stochastic learning runs (from :mod:`saspa_dask.fitting.stochastic`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..ep.schedule import EPSchedule, check_field, is_whole
from .stochastic import StochasticLearning

__all__ = ["EPSchedule", "Execution", "LEARNING_METHODS", "StochasticLearning"]

# how hyperparameters are learnt: full-batch L-BFGS-B over EP (on a subsample when the
# data has more rows), or stochastically on minibatches of every row
LEARNING_METHODS = ("full-batch", "stochastic")


@dataclass(frozen=True)
class Execution:
    """Where and in what pieces the work runs (no effect on the fitted model).

    Parameters
    ----------
    block_rows : int, default=8192
        Rows per in-memory block (bounds memory) and per prediction block.  The sweeps
        do not depend on it; with ``coarse_start`` the coarse run's rows do, and so
        the path, not the fixed point.
    cache : {"memory", "none"}, default="memory"
        Dask inputs only: keep each chunk's whitened block (N M floats over the
        cluster) in worker memory between sweeps, or rebuild it in every sweep.
    work_dir : str, default=None
        Dask inputs only: where the per-row site arrays live during training (a
        directory every worker can reach; default: the system temporary directory).
    """

    block_rows: int = 8192
    cache: str = "memory"
    work_dir: str | None = None

    def __post_init__(self):
        name = type(self).__name__
        check_field(is_whole(self.block_rows, 1), name, "block_rows", "an integer >= 1",
               self.block_rows)
        check_field(self.cache in ("memory", "none"), name, "cache", "'memory' or 'none'",
               self.cache)
        check_field(self.work_dir is None or isinstance(self.work_dir, (str, os.PathLike)), name,
               "work_dir", "None or a path", self.work_dir)
        if self.work_dir is not None:
            object.__setattr__(self, "work_dir", os.fspath(self.work_dir))
