"""The settings of a fit a user rarely touches, one type each: the EP schedule (from
:mod:`saspa_dask.ep.schedule`), where the work runs (:class:`Execution`), and how
stochastic learning runs (:class:`StochasticLearning`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from ..ep.schedule import EPSchedule, check_field, is_whole
from . import policy

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
    cache : {"auto", "memory", "none"}, default="auto"
        Dask inputs only: keep each chunk's whitened block (N M floats over the
        cluster) in worker memory between sweeps, or rebuild it in every sweep;
        ``auto`` keeps them where they fit within a share of the workers' memory limits
        (:mod:`saspa_dask.engines.cache_policy`) and says which it chose.
    work_dir : str, default=None
        Dask inputs only: where the per-row site arrays live during training (a
        directory every worker can reach; default: the system temporary directory).
    """

    block_rows: int = 8192
    cache: str = "auto"
    work_dir: str | None = None

    def __post_init__(self):
        name = type(self).__name__
        check_field(is_whole(self.block_rows, 1), name, "block_rows", "an integer >= 1",
               self.block_rows)
        check_field(self.cache in ("auto", "memory", "none"), name, "cache",
                    "'auto', 'memory' or 'none'", self.cache)
        check_field(self.work_dir is None or isinstance(self.work_dir, (str, os.PathLike)), name,
               "work_dir", "None or a path", self.work_dir)
        if self.work_dir is not None:
            object.__setattr__(self, "work_dir", os.fspath(self.work_dir))


@dataclass(frozen=True)
class StochasticLearning:
    """How stochastic learning runs (the estimators' ``stochastic`` parameter: this,
    a dict of some of its fields, or None).

    Parameters
    ----------
    batch_rows : int, default=2048
        Rows per minibatch; at most a ``min_steps_per_epoch``-th of the rows (fit
        policy: 8), so that an epoch of few rows still takes that many steps.
    learning_rate : float, default=0.05
        Adam's step: in log space for lengthscales, variances and likelihood
        parameters; a basis mean moves the fit policy's ``mean_step`` of its input's lengthscale
        per unit.
    max_epochs : float, default=100
        Passes over the rows at most (on large data ``max_fit_time`` usually ends
        learning first).
    tol : float, default=1e-3
        Stop when the energy per row of the epochs' anchors rose by less than this
        over the last epochs holding the fit policy's ``window_steps`` steps
        (:mod:`saspa_dask.fitting.policy`).

    Examples
    --------
    >>> from saspa_dask import SASPARegressor
    >>> reg = SASPARegressor(learning="stochastic", stochastic={"batch_rows": 4096})
    """

    batch_rows: int = 2048
    learning_rate: float = 0.05
    max_epochs: float = 100.0
    tol: float = 1e-3

    def for_rows(self, n_rows):
        """These settings for ``n_rows`` rows: minibatches of at most a
        ``min_steps_per_epoch``-th of them (:mod:`saspa_dask.fitting.policy`)."""
        steps = policy.POLICY.min_steps_per_epoch
        return replace(self, batch_rows=max(min(self.batch_rows, -(-n_rows // steps)), 1))

    def __post_init__(self):
        name = type(self).__name__
        if not (isinstance(self.batch_rows, int) and not isinstance(self.batch_rows, bool)
                and self.batch_rows >= 1):
            raise ValueError(f"{name}.batch_rows must be an integer >= 1, got "
                             f"{self.batch_rows!r}")
        for field_name in ("learning_rate", "max_epochs", "tol"):
            value = getattr(self, field_name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool)
                    and value > 0):
                raise ValueError(f"{name}.{field_name} must be a float > 0, got {value!r}")
