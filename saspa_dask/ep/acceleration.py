"""Faster and safer EP iterations: Anderson acceleration and the cycle rule.

Anderson acceleration (parallel EP): the next sites are the combination
sum_j a_j g_j of the last few sweeps' outputs g_j = G(x_j) (G: one damped parallel
sweep), with sum_j a_j = 1 and a minimising |sum_j a_j (g_j - x_j)| (Walker & Ni
2011).  The statistics are linear in the sites, so the mixed posterior costs no extra
pass.  The per-row side (a ring of recent sweeps' sites and steps) lives with the
sites; :class:`Anderson` is the driver's side.  Mixing starts once the site change is
below ``_ANDERSON_START``, and the ring records a sweep only once the last change is
below ``_ANDERSON_RECORDING`` times the start: a slot written at a larger change is
dropped before it is mixed, and writing it costs every row a ring update (on Dask a
read and write of the chunk's ring in the site store).  A change that grows by
``_ANDERSON_GROWTH``, a mixed posterior that is not positive definite, a change of
damping or a sweep that wrote no slot restarts the history.  A change that grew after
mixing also lowers the start to ``_ANDERSON_BACKOFF`` times that change: a cold
start's transient is not linear enough to extrapolate.

The cycle rule: EP caught in a cycle (typically of period two, with a large signal
variance) shows a site change that alternates up and down without progress.  After
``_CYCLE_SWEEPS`` consecutive alternating sweeps in which the best change did not
improve by a factor ``_CYCLE_GAIN``, the damping is halved (down to
``_MIN_DAMPING``).  A cold start's transient, where the change drifts without
alternating, is left alone: damping it would slow the tail.  Each reduction is
counted and reported.  (Measured effects: ``benchmarks/RESULTS.md``.)
"""

from __future__ import annotations

import numpy as np

__all__ = ["Anderson", "CycleGuard", "anderson_ring", "mix_steps", "record_step"]

_CYCLE_SWEEPS = 4
_CYCLE_GAIN = 0.9
_MIN_DAMPING = 1.0 / 64
_ANDERSON_START = 1.0
_ANDERSON_GROWTH = 2.0
_ANDERSON_BACKOFF = 0.1
_ANDERSON_REGULARISATION = 1e-10
_ANDERSON_RECORDING = 2.0


def anderson_ring(memory, n_rows):
    """Zeroed Anderson storage for ``n_rows`` rows: slots of (g_tau, g_nu, f_tau, f_nu)."""
    return np.zeros((4, memory + 1, n_rows))


def record_step(ring, slot, tau, nu, tau_new, nu_new, signal_variance):
    """Store one sweep's output g = (tau_new, nu_new) and its step f = g - x (in the
    scale-free units of the site change) in ring ``slot``; return the inner products
    of f with the steps in every slot (stale slots included: the driver picks)."""
    ring[0, slot] = tau_new
    ring[1, slot] = nu_new
    np.multiply(tau_new - tau, signal_variance, out=ring[2, slot])
    np.multiply(nu_new - nu, np.sqrt(signal_variance), out=ring[3, slot])
    return ring[2] @ ring[2, slot] + ring[3] @ ring[3, slot]


def mix_steps(ring, weights):
    """The Anderson combination (sum_j w_j g_tau_j, sum_j w_j g_nu_j) of a ring."""
    return weights @ ring[0], weights @ ring[1]


class CycleGuard:
    """The cycle rule (module constants): feed it each sweep's site change; it returns
    the damping for the next sweep and counts its reductions."""

    def __init__(self, damping):
        self.damping, self.reductions = damping, 0
        self._best, self._in_cycle, self._changes = np.inf, 0, []

    def update(self, change):
        c = self._changes
        c.append(change)
        if change < _CYCLE_GAIN * self._best:
            self._best, self._in_cycle = change, 0
        elif len(c) >= 3 and (c[-1] - c[-2]) * (c[-2] - c[-3]) < 0:
            self._in_cycle += 1
        else:
            self._in_cycle = 0
        if self._in_cycle >= _CYCLE_SWEEPS and self.damping > _MIN_DAMPING:
            self.damping = max(0.5 * self.damping, _MIN_DAMPING)
            self._in_cycle, self.reductions = 0, self.reductions + 1
        return self.damping


class Anderson:
    """Anderson acceleration's driver side (module constants): the Gram matrix of the
    remembered steps and their statistics, ring slots in age order, the weights."""

    def __init__(self, memory, start=None):
        size = memory + 1
        self.gram = np.zeros((size, size))
        self.stats = [None] * size
        self.window = []
        self.slot = 0
        self.last_change = np.inf
        self.start = _ANDERSON_START if start is None else start
        self.damping = None
        self.steps = self.restarts = 0
        self.last_weights = None

    def record(self, summary, damping, parts=None):
        """Take in the pass that wrote ring slot ``self.slot`` (``parts``: the
        statistics of each group of blocks, for a grouped sweep)."""
        s = self.slot
        if self.damping is not None and damping != self.damping:
            self.restart()  # G changed with the damping: old steps do not belong to it
        self.damping = damping
        self.gram[s, :] = self.gram[:, s] = summary.dots
        self.stats[s] = (summary.A, summary.b, parts)
        if s in self.window:
            self.window.remove(s)
        self.window.append(s)
        self.slot = (s + 1) % len(self.stats)

    @property
    def recording(self):
        """Whether the next pass should write its sites into ring slot ``slot``."""
        return self.last_change <= _ANDERSON_RECORDING * self.start

    def skip(self, change):
        """Take in a pass that wrote no ring slot: the history no longer runs
        through consecutive sweeps, so it is dropped."""
        self.restart()
        self.window = []
        self.last_change = change

    def restart(self):
        if len(self.window) > 1:
            self.restarts += 1
        self.window = self.window[-1:]

    def weights(self, change):
        """Ring weights of the next sites, or None for the plain step (kept as
        ``last_weights``)."""
        self.last_weights = self._weights(change)
        return self.last_weights

    def _weights(self, change):
        grew = change > _ANDERSON_GROWTH * self.last_change
        if grew and len(self.window) > 1:
            # mixing made things worse: EP is not linear enough here yet
            self.start = min(self.start, _ANDERSON_BACKOFF * change)
        if change > self.start or grew:
            self.restart()
        self.last_change = change
        if len(self.window) < 2:
            return None
        idx = np.array(self.window)
        G = self.gram[np.ix_(idx, idx)]
        G = G + _ANDERSON_REGULARISATION * np.trace(G) * np.eye(idx.size)
        try:
            z = np.linalg.solve(G, np.ones(idx.size))
        except np.linalg.LinAlgError:
            z = np.full(idx.size, np.nan)
        if not np.isfinite(z).all() or z.sum() == 0:
            self.restart()
            return None
        w = np.zeros(len(self.stats))
        w[idx] = z / z.sum()
        return w

    def mixed_statistics(self, weights):
        used = np.flatnonzero(weights)
        A = sum(weights[j] * self.stats[j][0] for j in used)
        b = sum(weights[j] * self.stats[j][1] for j in used)
        return A, b

    def mixed_parts(self, weights):
        """Each group's statistics of the mixed sites (grouped sweeps)."""
        used = np.flatnonzero(weights)
        groups = len(self.stats[used[0]][2])
        return [(sum(weights[j] * self.stats[j][2][g][0] for j in used),
                 sum(weights[j] * self.stats[j][2][g][1] for j in used))
                for g in range(groups)]

