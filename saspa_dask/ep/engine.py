"""What the EP driver needs from an engine: the :class:`EPEngine` protocol.

It lives in the EP layer because it is the driver's requirement; the engines layer
implements it.

An engine owns the whitened row blocks and the per-row sites (current and, during a
sweep, pending).  :func:`saspa_dask.ep.driver.run_ep` holds the posterior and drives
any object with these members; :class:`~saspa_dask.engines.memory.InMemoryEngine`
(this process) and :class:`~saspa_dask.engines.dask_engine.DaskEngine` (one task per
row chunk, sites in zarr) are the two implementations.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np

from .posterior import Posterior
from .sites import PassSummary

__all__ = ["EPEngine"]


@runtime_checkable
class EPEngine(Protocol):
    """The engine side of an EP run.

    ``is_cold`` is True when every site starts at zero.  A pass returns a
    :class:`~saspa_dask.ep.sites.PassSummary` (site statistics, undamped change,
    evidence terms, counters) merged over all blocks; the pending sites it wrote become
    current only on :meth:`commit`.
    """

    is_cold: bool

    @property
    def n_bases(self) -> int: ...

    @property
    def n_rows(self) -> int: ...

    @property
    def blocks(self) -> list: ...

    def statistics(self, part: tuple[int, int] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(A, b) = (Phi^T T Phi, Phi^T nu) of the current sites (of the blocks of
        ``part``, see :meth:`parallel_pass`)."""

    def parallel_pass(self, posterior: Posterior, likelihood: Any, damping: float,
                      signal_variance: float, ring_slot: int | None = None,
                      part: tuple[int, int] | None = None) -> PassSummary:
        """Every block's damped new sites against one posterior (written as pending);
        with ``part = (g, G)`` only blocks ``g, g + G, g + 2G, ...`` (the other blocks'
        pending sites are left as they are)."""

    def rows_in(self, part: tuple[int, int]) -> int:
        """The number of rows in the blocks of ``part``."""

    def sequential_pass(self, posterior: Posterior, likelihood: Any, damping: float,
                        signal_variance: float) -> PassSummary:
        """Algorithm 1 over the blocks in order, the posterior carried along."""

    def mix_pending(self, weights: np.ndarray) -> None:
        """Pending sites := the Anderson combination of the remembered sweeps."""

    def halve_pending(self) -> None:
        """Pending sites := the midpoint of pending and current (a halved step)."""

    def commit(self) -> None:
        """Make the pending sites current."""

    def evaluate(self, posterior: Posterior, likelihood: Any) -> PassSummary:
        """Evidence terms and invalid cavities of the current sites at a posterior."""

    def sites(self) -> tuple[Any, Any]:
        """The current sites (per-block lists in memory, lazy arrays on Dask)."""

    def subset(self, stride: int) -> EPEngine:
        """A cold engine on every ``stride``-th block (for the coarse start)."""

    def reduce_chunks(self, func, *args) -> Any:
        """``func(X_block, block, tau, nu, *args)`` over the blocks, merged."""
