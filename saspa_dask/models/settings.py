"""Settings a user rarely touches, grouped: the EP schedule and where the work runs.

The SASPA estimators take them as two parameters, ``ep`` and ``execution``: an
:class:`EPSchedule` / :class:`Execution`, a dict of some of their fields, or None for
the defaults.  The parameters these replace (``ep_mode``, ``damping``, ``max_sweeps``,
``tol``, ``anderson_memory``, ``coarse_start``, ``block_rows``, ``cache``,
``work_dir``, and ``dtc`` for ``approximation="dtc"``) keep working for one release
with a ``FutureWarning`` (:func:`legacy_parameters`).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, fields, replace

# the sparse approximation of the prior: FITC (the paper's SASPA; per-row residual
# variances) or DTC (projected process, no residual variances); named once, in the
# parameter table
from ..parameters import APPROXIMATIONS
from ..fitting.settings import (LEARNING_METHODS, EPSchedule, Execution,
                                StochasticLearning)

__all__ = ["APPROXIMATIONS", "EPSchedule", "Execution", "LEGACY_NAMES", "LEARNING_METHODS",
           "SETTINGS_CLASSES", "StochasticLearning", "execution_of", "legacy_parameters",
           "settings_of"]


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


# the online GPs' and the IVM's flat ``block_rows`` is ``execution`` now; a value other
# than this one is the old parameter, used with a FutureWarning for one release
DEPRECATED = "deprecated"


def execution_of(estimator, warn=True):
    """The ``execution`` settings of an online GP or IVM, with the old ``block_rows``
    folded in (and, with ``warn``, a FutureWarning)."""
    execution = settings_of("execution", estimator.execution)
    block_rows = getattr(estimator, "block_rows", DEPRECATED)
    if isinstance(block_rows, str) and block_rows == DEPRECATED:
        return execution
    if warn:
        warnings.warn(f"{type(estimator).__name__}: block_rows is "
                      "execution={'block_rows': ...} now; the old name will be removed in "
                      "the next release", FutureWarning, stacklevel=3)
    return replace(execution, block_rows=int(block_rows))
