"""Settings a user rarely touches, grouped: the EP schedule and where the work runs.

The SASPA estimators take them as two parameters, ``ep`` and ``execution``: an
:class:`EPSchedule` / :class:`Execution`, a dict of some of their fields, or None for
the defaults.  The parameters these replace (``ep_mode``, ``damping``, ``max_sweeps``,
``tol``, ``anderson_memory``, ``coarse_start``, ``block_rows``, ``cache``,
``work_dir``, and ``dtc`` for ``approximation="dtc"``) keep working for one release
with a ``FutureWarning`` (:func:`legacy_parameters`).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import asdict, dataclass, fields
from numbers import Integral, Real

# the sparse approximation of the prior: FITC (the paper's SASPA; per-row residual
# variances) or DTC (projected process, no residual variances); named once, in the
# parameter table
from ..parameters import APPROXIMATIONS
from ..fitting.stochastic import StochasticLearning

__all__ = ["APPROXIMATIONS", "EPSchedule", "Execution", "LEGACY_NAMES", "LEARNING_METHODS",
           "SETTINGS_CLASSES", "StochasticLearning", "legacy_parameters", "settings_of"]

# how hyperparameters are learnt: full-batch L-BFGS-B over EP (on a subsample when the
# data has more rows), or stochastically on minibatches of every row
LEARNING_METHODS = ("full-batch", "stochastic")



def _check(ok, owner, name, need, value):
    if not ok:
        raise ValueError(f"{owner}.{name} must be {need}, got {value!r}")


@dataclass(frozen=True)
class EPSchedule:
    """How EP runs: the sweep schedule, its stopping rule and its accelerations.

    Parameters
    ----------
    mode : {"parallel", "sequential"}, default="parallel"
        ``sequential`` is the paper's Algorithm 1 (rank-one updates, refreshed every
        sweep); ``parallel`` updates all sites from one posterior (one map-reduce a
        sweep on Dask).
    damping : float in (0, 1], default=None
        Site damping; ``None`` picks it by likelihood (0.8 for the step and noisy-probit
        likelihoods, 0.5 for Student-t: not log-concave, undamped EP can oscillate on
        them; 1.0 otherwise).
    max_sweeps : int, default=100
    tol : float, default=1e-6
        Convergence threshold on the undamped, scale-free site change.
    anderson_memory : int, default=3
        Parallel EP only: the next sites are the Anderson combination of the last
        ``anderson_memory + 1`` sweeps' outputs that best cancels their steps
        (Walker & Ni 2011), once the site change is below 1; the history restarts when
        the change grows or the mixed posterior is not positive definite, and a change
        that grew after mixing defers mixing to a 10 times smaller change.  It speeds
        up slow linear convergence and cycles and keeps the fixed point.  Costs
        4 (memory + 1) floats a row (in worker memory, or in the Dask site store).
        0 turns it off.
    coarse_start : bool, default=True
        Start a cold parallel EP run from EP on every 10th row block (recursively
        started the same way), its site sums scaled to all rows.  This skips most of
        a cold start's transient on large N; the fixed point is unchanged.  Needs at
        least 4 blocks (``block_rows`` in memory, chunks on Dask); never for the
        Gaussian likelihood or sequential EP.

    Examples
    --------
    >>> from saspa_dask import EPSchedule, SASPAClassifier
    >>> clf = SASPAClassifier(ep=EPSchedule(mode="sequential", max_sweeps=200))
    >>> SASPAClassifier(ep={"tol": 1e-8}).get_params()["ep"]
    {'tol': 1e-08}
    """

    mode: str = "parallel"
    damping: float | None = None
    max_sweeps: int = 100
    tol: float = 1e-6
    anderson_memory: int = 3
    coarse_start: bool = True

    def __post_init__(self):
        name = type(self).__name__
        _check(self.mode in ("parallel", "sequential"), name, "mode",
               "'parallel' or 'sequential'", self.mode)
        _check(self.damping is None or (isinstance(self.damping, Real)
                                        and not isinstance(self.damping, bool)
                                        and 0 < self.damping <= 1),
               name, "damping", "None or a float in (0, 1]", self.damping)
        _check(_whole(self.max_sweeps, 1), name, "max_sweeps", "an integer >= 1",
               self.max_sweeps)
        _check(isinstance(self.tol, Real) and not isinstance(self.tol, bool) and self.tol > 0,
               name, "tol", "a float > 0", self.tol)
        _check(_whole(self.anderson_memory, 0), name, "anderson_memory", "an integer >= 0",
               self.anderson_memory)
        _check(isinstance(self.coarse_start, bool), name, "coarse_start", "a bool",
               self.coarse_start)


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
        _check(_whole(self.block_rows, 1), name, "block_rows", "an integer >= 1",
               self.block_rows)
        _check(self.cache in ("memory", "none"), name, "cache", "'memory' or 'none'",
               self.cache)
        _check(self.work_dir is None or isinstance(self.work_dir, (str, os.PathLike)), name,
               "work_dir", "None or a path", self.work_dir)
        if self.work_dir is not None:
            object.__setattr__(self, "work_dir", os.fspath(self.work_dir))


def _whole(value, low):
    return isinstance(value, Integral) and not isinstance(value, bool) and value >= low


SETTINGS_CLASSES = {"ep": EPSchedule, "execution": Execution,
                    "stochastic": StochasticLearning}

# the old flat parameters: name -> (group, field)
LEGACY_NAMES = {
    "ep_mode": ("ep", "mode"), "damping": ("ep", "damping"),
    "max_sweeps": ("ep", "max_sweeps"), "tol": ("ep", "tol"),
    "anderson_memory": ("ep", "anderson_memory"), "coarse_start": ("ep", "coarse_start"),
    "block_rows": ("execution", "block_rows"), "cache": ("execution", "cache"),
    "work_dir": ("execution", "work_dir"), "dtc": ("approximation", None),
}


def settings_of(group, value):
    """The group's settings object from ``value``: an instance, a dict of some of its
    fields (the rest default), or None (all defaults)."""
    cls = SETTINGS_CLASSES[group]
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"{group}: unknown field(s) {unknown}; {cls.__name__} has "
                             f"{[f.name for f in fields(cls)]}")
        return cls(**value)
    raise ValueError(f"{group} must be a {cls.__name__}, a dict of its fields or None; got "
                     f"{type(value).__name__}")


def legacy_parameters(params, legacy, *, owner, warn=True, stacklevel=3):
    """``params`` (the new parameters' values) with the old flat parameters in
    ``legacy`` folded into them: ``ep``/``execution`` fields, ``dtc`` as
    ``approximation``.  With ``warn``, one FutureWarning names the replacements."""
    unknown = sorted(set(legacy) - set(LEGACY_NAMES))
    if unknown:
        raise TypeError(f"{owner}.__init__() got unexpected keyword argument(s) "
                        f"{', '.join(map(repr, unknown))}")
    params = dict(params)
    groups = {}
    for name, value in legacy.items():
        group, field = LEGACY_NAMES[name]
        if group == "approximation":
            params["approximation"] = "dtc" if value else "fitc"
        else:
            groups.setdefault(group, {})[field] = value
    for group, changes in groups.items():
        # a dict, checked when the estimator is fitted (never in __init__)
        current = params.get(group)
        if isinstance(current, SETTINGS_CLASSES[group]):
            current = asdict(current)
        params[group] = {**(current if isinstance(current, dict) else {}), **changes}
    if warn and legacy:
        where = ", ".join(f"{name} -> " + ("approximation='dtc'" if name == "dtc" else
                                           f"{LEGACY_NAMES[name][0]}="
                                           f"{{'{LEGACY_NAMES[name][1]}': ...}}")
                          for name in legacy)
        warnings.warn(f"{owner}: parameter(s) {', '.join(legacy)} are grouped now and the "
                      f"old names will be removed in the next release: {where}",
                      FutureWarning, stacklevel=stacklevel)
    return params
