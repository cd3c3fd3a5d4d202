"""Settings a user rarely touches, grouped: the EP schedule and where the work runs.

The SASPA estimators take them as parameters ``ep``, ``execution`` and ``stochastic``:
an :class:`EPSchedule` / :class:`Execution` / :class:`StochasticLearning`, a dict of
some of their fields, or None for the defaults.
"""

from __future__ import annotations

from dataclasses import fields

# the sparse approximation of the prior: FITC (the paper's SASPA; per-row residual
# variances) or DTC (projected process, no residual variances); named once, in the
# parameter table
from ..parameters import APPROXIMATIONS
from ..fitting.settings import (LEARNING_METHODS, EPSchedule, Execution,
                                StochasticLearning)

__all__ = ["APPROXIMATIONS", "EPSchedule", "Execution", "LEARNING_METHODS",
           "SETTINGS_CLASSES", "StochasticLearning", "execution_of", "settings_of"]


SETTINGS_CLASSES = {"ep": EPSchedule, "execution": Execution,
                    "stochastic": StochasticLearning}

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


def execution_of(estimator):
    """The ``execution`` settings of an online GP or IVM."""
    return settings_of("execution", estimator.execution)
