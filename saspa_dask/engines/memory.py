"""The in-memory EP engine: blocks and sites held in this process."""

from __future__ import annotations

import numpy as np

from ..ep.acceleration import anderson_ring, mix_steps
from ..ep.sites import (block_statistics, evaluate_chunk, merge_summaries, parallel_chunk,
                        sequential_chunk)

__all__ = ["InMemoryEngine"]


class InMemoryEngine:
    """Blocks and sites held in this process (the in-memory estimators' engine).

    An engine keeps the *current* sites and, during a sweep, *pending* ones; the
    driver commits pending sites once their posterior is accepted.
    """

    def __init__(self, blocks, sites=None, anderson_memory=0, inputs=None):
        self.blocks = list(blocks)
        # each block's input rows, for per-chunk reductions that need X (the gradient)
        self.inputs = None if inputs is None else list(inputs)
        self.rings = ([anderson_ring(anderson_memory, b.y.shape[0]) for b in self.blocks]
                      if anderson_memory > 0 else None)
        if sites is None:
            self.tau = [np.zeros(b.y.shape[0]) for b in self.blocks]
            self.nu = [np.zeros(b.y.shape[0]) for b in self.blocks]
            self.is_cold = True
        else:
            self.tau, self.nu = _check_sites(self.blocks, sites)
            self.is_cold = False
        self._pending = None

    @property
    def n_bases(self):
        return self.blocks[0].phi.shape[1]

    @property
    def n_rows(self):
        return sum(b.y.shape[0] for b in self.blocks)

    def subset(self, stride):
        """A cold engine on every ``stride``-th block (the blocks are shared)."""
        memory = 0 if self.rings is None else self.rings[0].shape[1] - 1
        return InMemoryEngine(self.blocks[::stride], anderson_memory=memory)

    def _indices(self, part):
        if part is None:
            return range(len(self.blocks))
        return range(part[0], len(self.blocks), part[1])  # blocks g, g + G, ...

    def rows_in(self, part):
        return sum(self.blocks[i].y.shape[0] for i in self._indices(part))

    def statistics(self, part=None):
        A = np.zeros((self.n_bases, self.n_bases))
        b = np.zeros(self.n_bases)
        for i in self._indices(part):
            dA, db = block_statistics(self.blocks[i].phi, self.tau[i], self.nu[i])
            A += dA
            b += db
        return A, b

    def parallel_pass(self, posterior, likelihood, damping, signal_variance, ring_slot=None,
                      part=None):
        rings = self.rings if ring_slot is not None else [None] * len(self.blocks)
        if self._pending is None:
            self._pending = (list(self.tau), list(self.nu))
        summaries = []
        for i in self._indices(part):
            tau, nu, summary = parallel_chunk(self.blocks[i], self.tau[i], self.nu[i],
                                              posterior, likelihood, damping,
                                              signal_variance, rings[i], ring_slot)
            self._pending[0][i], self._pending[1][i] = tau, nu
            summaries.append(summary)
        return merge_summaries(summaries)

    def mix_pending(self, weights):
        """Pending sites := the Anderson combination of the ring slots."""
        mixed = [mix_steps(ring, weights) for ring in self.rings]
        self._pending = ([m[0] for m in mixed], [m[1] for m in mixed])

    def halve_pending(self):
        tau_p, nu_p = self._pending
        self._pending = ([0.5 * (p + c) for p, c in zip(tau_p, self.tau)],
                         [0.5 * (p + c) for p, c in zip(nu_p, self.nu)])

    def sequential_pass(self, posterior, likelihood, damping, signal_variance):
        sigma, mean = posterior.covariance(), posterior.mean
        tau_p, nu_p, summaries = [], [], []
        for block, t, n in zip(self.blocks, self.tau, self.nu):
            t, n, sigma, mean, summary = sequential_chunk(block, t, n, sigma, mean, likelihood,
                                                          damping, signal_variance)
            tau_p.append(t)
            nu_p.append(n)
            summaries.append(summary)
        self._pending = (tau_p, nu_p)
        return merge_summaries(summaries)

    def commit(self):
        self.tau, self.nu = self._pending
        self._pending = None

    def evaluate(self, posterior, likelihood):
        return merge_summaries(evaluate_chunk(b, t, n, posterior, likelihood)
                               for b, t, n in zip(self.blocks, self.tau, self.nu))

    def sites(self):
        return self.tau, self.nu

    def reduce_chunks(self, func, *args):
        """``func(X_block, block, tau, nu, *args)`` at the current sites of every
        block, merged (``.merge``) in order."""
        if self.inputs is None:
            raise ValueError("this engine was built without its input rows")
        total = None
        for x, block, t, n in zip(self.inputs, self.blocks, self.tau, self.nu):
            part = func(x, block, t, n, *args)
            total = part if total is None else total.merge(part)
        return total


def _check_sites(blocks, sites):
    tau, nu = sites
    if len(tau) != len(blocks) or len(nu) != len(blocks):
        raise ValueError("warm-start sites must have one array per block")
    for block, t, n in zip(blocks, tau, nu):
        if t.shape != block.y.shape or n.shape != block.y.shape:
            raise ValueError(
                f"warm-start sites of shape {t.shape} do not match a block of "
                f"{block.y.shape[0]} rows"
            )
    return [np.array(t, dtype=float) for t in tau], [np.array(n, dtype=float) for n in nu]

