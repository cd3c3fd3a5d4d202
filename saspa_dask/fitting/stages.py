"""Learning in stages: the subsample stages of full-batch learning (prefixes of one
seeded permutation), the rule that ends them early, their sites, and the report a
model store keeps of them.
"""

from __future__ import annotations

from numbers import Integral

import dask
import dask.array as da
import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import InvalidParameterError

from ..engines.chunks import is_lazy
from ..parameters.schema import parse_stages
from . import policy

__all__ = ["RowSites", "check_init_sites", "every_row", "learning_stages", "gather_rows",
           "merge_stages", "sites_at", "sites_on_all", "stage_sizes", "stages_end"]


def stage_sizes(hyper_subsample):
    """``hyper_subsample`` as a list of stage sizes: increasing row counts, None (every
    row) last if at all.  Takes the CLI's and TOML's spellings too ("20000,all",
    ``[20000, "all"]``), so that Python accepts what the docs say; raises
    ``InvalidParameterError`` naming the value (the plan's check, before any work)."""
    if isinstance(hyper_subsample, Integral) and not isinstance(hyper_subsample, bool):
        parsed = int(hyper_subsample)
    else:
        try:
            parsed = parse_stages(hyper_subsample)
        except (ValueError, TypeError):
            parsed = ()
    sizes = [parsed] if parsed is None or isinstance(parsed, int) else list(parsed)
    counts = [size for size in sizes if size is not None]
    if (not sizes or None in sizes[:-1] or min(counts, default=1) < 1
            or any(b <= a for a, b in zip(counts, counts[1:]))):
        raise InvalidParameterError(
            f"hyper_subsample must be increasing row counts, optionally ending with "
            f"'all' (or None: every row); got {hyper_subsample!r}")
    return sizes


def gather_rows(X, targets, rows):
    """The inputs and targets of ``rows`` in memory: one pass over the chunks for both
    when ``X`` is lazy."""
    if is_lazy(X):
        return dask.compute(X[rows], targets[rows])
    return X[rows], targets[rows]


def learning_stages(hyper_subsample, n_samples, random_state, lazy=False):
    """The subsample stages of learning: a list of sorted row-index arrays, each
    containing the last, and whether learning then continues on all rows.  Dask data
    no larger than a stage's size is learnt on in memory on the driver (one stage of
    every row): an evaluation there costs a fraction of a distributed one."""
    stages = []
    for size in stage_sizes(hyper_subsample):
        if size is not None and size >= n_samples and lazy:
            return _stage_rows(stages + [n_samples], n_samples, random_state), False
        if size is None or size >= n_samples:
            return _stage_rows(stages, n_samples, random_state), True
        stages.append(int(size))
    return _stage_rows(stages, n_samples, random_state), False


# above this many rows the stages are not a permutation's prefixes: a permutation of
# every row is 8 bytes a row on the driver, Floyd's sampling (numpy's
# Generator.choice) takes the sample's memory (and draws other rows than the
# permutation would)
PERMUTED_ROWS_MAX = 2**24


def _stage_rows(sizes, n_samples, random_state):
    if not sizes:
        return []
    random_state = check_random_state(random_state)
    if n_samples > PERMUTED_ROWS_MAX:
        seed = random_state.randint(np.iinfo(np.int32).max)
        order = np.random.default_rng(seed).choice(n_samples, size=max(sizes),
                                                   replace=False)
    else:
        # RandomState.choice without replacement is a permutation's prefix: one
        # permutation gives every stage, each containing the last
        order = random_state.permutation(n_samples)
    return [np.sort(order[:size]) for size in sizes]


def stages_end(stages, say):
    """After a stage: True when later stages are not worth running (this stage's
    energy gain per row was below the policy's ``stage_gain_per_row``, or the time budget is
    spent).  ``stages`` are (outcome, rows, where)."""
    last = _stage_record(*stages[-1])
    if last["stop_reason"] == "time":
        say("learning: the time budget is spent; no further stages")
        return True
    if last["stop_reason"] == "overtaken":
        say("learning: another start leads; no further stages")
        return True
    if len(stages) > 1 and last["gain_per_row"] < policy.POLICY.stage_gain_per_row:
        say(f"learning: the stage on {last['rows']} rows gained "
            f"{last['gain_per_row']:.2g} nats per row (< {policy.POLICY.stage_gain_per_row:g}); no "
            "further stages")
        return True
    return False


class RowSites:
    """Per-problem sites (tau, nu) known on some of ``n_rows`` rows and zero (no
    information) on the others, held on those rows only: a learning sample's sites
    without arrays of every row (16 bytes a row and problem: 1.6 GB at 10^8 rows)."""

    def __init__(self, rows, sites, n_rows):
        order = np.argsort(rows, kind="stable")
        self.rows = np.asarray(rows)[order]
        self.sites = [(np.asarray(t, dtype=np.float64)[order],
                       np.asarray(v, dtype=np.float64)[order]) for t, v in sites]
        self.n_rows = n_rows

    def at(self, rows):
        """Per problem (tau, nu) on ``rows`` (zero where unknown)."""
        rows = np.asarray(rows)
        where = np.minimum(np.searchsorted(self.rows, rows), max(self.rows.size - 1, 0))
        known = (self.rows[where] == rows) if self.rows.size else np.zeros(rows.size, bool)
        out = []
        for tau, nu in self.sites:
            t, v = np.zeros(rows.size), np.zeros(rows.size)
            t[known], v[known] = tau[where[known]], nu[where[known]]
            out.append((t, v))
        return out

    def every_row(self):
        """Per problem (tau, nu) of length ``n_rows``."""
        out = []
        for tau, nu in self.sites:
            t, v = np.zeros(self.n_rows), np.zeros(self.n_rows)
            t[self.rows], v[self.rows] = tau, nu
            out.append((t, v))
        return out


def sites_at(sites, rows):
    """Per-problem (tau, nu) restricted to ``rows`` (None stays None)."""
    if sites is None:
        return None
    if isinstance(sites, RowSites):
        return sites.at(rows)
    return [(t[rows], v[rows]) for t, v in sites]


def every_row(sites):
    """Sites as arrays of every row (None stays None)."""
    return sites.every_row() if isinstance(sites, RowSites) else sites


def sites_on_all(outcome, rows, n_samples, sites):
    """Sites on all rows: the stage's fitted ones on its rows, the given ``sites`` (or
    zero: no information yet) elsewhere.  Without given arrays of every row, a
    :class:`RowSites` on the rows learnt on so far."""
    fitted = [(result.tau, result.nu) for result in outcome.results]
    if sites is None:
        return RowSites(rows, fitted, n_samples)
    if isinstance(sites, RowSites):
        union = np.union1d(sites.rows, rows)
        merged = sites.at(union)
        where = np.searchsorted(union, rows)
        for (tau, nu), (t, v) in zip(merged, fitted):
            tau[where], nu[where] = t, v
        return RowSites(union, merged, n_samples)
    return [(with_rows_set(given[0], rows, t), with_rows_set(given[1], rows, v))
            for (t, v), given in zip(fitted, sites)]


def with_rows_set(values, rows, new):
    """A copy of ``values`` with ``new`` at the sorted ``rows``; Dask ``values`` (a
    loaded model's stored sites, a kept copy) stay lazy, each chunk setting its own."""
    if not isinstance(values, da.Array):
        out = np.array(values, dtype=np.float64)
        out[rows] = new
        return out
    rows, new = np.asarray(rows), np.asarray(new, dtype=np.float64)

    def set_chunk(chunk, block_info=None):
        start, stop = block_info[0]["array-location"][0]
        lo, hi = np.searchsorted(rows, [start, stop])
        chunk = np.array(chunk, dtype=np.float64)
        chunk[rows[lo:hi] - start] = new[lo:hi]
        return chunk

    return values.map_blocks(set_chunk, dtype=np.float64, meta=np.empty(0, np.float64))


def _stage_record(outcome, n_rows, where):
    """What ``saspa info`` lists of one learning stage."""
    info = outcome.info
    return {"rows": int(n_rows), "where": where, "n_iterations": info["n_iterations"],
            "stop_reason": info["stop_reason"],
            "log_evidence_start": info["log_evidence_start"],
            "log_evidence_end": info["log_evidence_end"],
            "gain_per_row": (info["log_evidence_end"] - info["log_evidence_start"]) / n_rows,
            "seconds": outcome.trace[-1]["seconds"] if outcome.trace else 0.0}


def merge_stages(outcome, learnt, stages):
    """The learning report of a fit from its stages, a list of (outcome, rows, where):
    the stage that learnt last gives the info (``learnt``, when the final fit on all
    rows did not learn), with every stage's trace (tagged ``stage``) and record when
    there were several."""
    if learnt is not None:
        outcome.trace, outcome.info = learnt.trace, learnt.info
    if len(stages) > 1:
        outcome.trace = [{**rec, "stage": k} for k, (o, _, _) in enumerate(stages)
                         for rec in o.trace]
        outcome.info = {**outcome.info, "stages": [_stage_record(*s) for s in stages]}


def check_init_sites(init_sites, n_samples, n_problems=1):
    """Warm-start sites as a list of (tau, nu) per EP problem (or None)."""
    if init_sites is None:
        return None
    # Dask sites (a loaded model's stored ones) stay lazy: checked in one pass
    tau, nu = (s.astype(np.float64) if isinstance(s, da.Array)
               else np.asarray(s, dtype=np.float64) for s in init_sites)
    shape = (n_samples,) if n_problems == 1 else (n_problems, n_samples)
    if tau.shape != shape or nu.shape != shape:
        raise ValueError(f"init_sites must be two arrays of shape {shape} "
                         f"(n_samples={n_samples}), got shapes {tau.shape} and {nu.shape}")
    if not all(dask.compute(*[np.isfinite(s).all() for s in (tau, nu)])):
        raise ValueError("init_sites contain NaN or infinity")
    if n_problems == 1:
        return [(tau, nu)]
    return list(zip(tau, nu))
