"""Which task a target calls for, and how many classes a classification would fit.

The rule (stated in ``saspa train --help`` and the README):

- a target ingested from text labels (the store records ``target_classes``) is
  classification;
- a numeric target whose values are all integers, with at most
  :data:`MAX_INFERRED_CLASSES` distinct values, is classification;
- anything else is regression.

An explicit classification with more than ``max_classes`` distinct values (default
:data:`DEFAULT_MAX_CLASSES`) is refused: each class is an EP problem of its own
(one-vs-rest), so a forgotten ``--task regression`` on prices would start thousands.
The distinct values are counted chunk by chunk, locally, before any cluster starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import dask
import numpy as np
from dask import delayed

from .errors import JobError

__all__ = ["DEFAULT_MAX_CLASSES", "MAX_INFERRED_CLASSES", "TargetSummary", "choose_task",
           "summarise_target"]

MAX_INFERRED_CLASSES = 20
DEFAULT_MAX_CLASSES = 100
# distinct values kept per chunk: enough to tell "over the limit" from "within it"
_KEEP = 1001


@dataclass(frozen=True)
class TargetSummary:
    """Distinct values (up to ``_KEEP``; ``capped`` when there are more), whether all
    are integers, the count of non-finite values, and the text labels recorded at
    ingest (if any)."""

    values: np.ndarray
    capped: bool
    all_integer: bool
    n_nonfinite: int
    text_labels: list | None

    @property
    def n_distinct(self):
        return len(self.values)

    def describe_count(self):
        return f"over {_KEEP - 1}" if self.capped else str(self.n_distinct)


def _chunk_summary(yb):
    yb = np.asarray(yb, dtype=np.float64)
    finite = np.isfinite(yb)
    values = np.unique(yb[finite])
    integer = bool(np.all(values == np.round(values)))
    return values[:_KEEP], len(values) > _KEEP, integer, int((~finite).sum())


def summarise_target(y, text_labels=None):
    """A :class:`TargetSummary` of a (dask) target, computed chunk by chunk with the
    local threaded scheduler (no cluster needed: y is one column)."""
    blocks = y.to_delayed().ravel() if hasattr(y, "to_delayed") else [y]
    parts = dask.compute(*[delayed(_chunk_summary)(b) for b in blocks], scheduler="threads")
    values = np.unique(np.concatenate([p[0] for p in parts]))
    capped = any(p[1] for p in parts) or len(values) > _KEEP - 1
    return TargetSummary(values[:_KEEP], capped, all(p[2] for p in parts),
                         sum(p[3] for p in parts), text_labels)


def choose_task(summary, task=None, max_classes=DEFAULT_MAX_CLASSES):
    """The task to fit and a line saying why.

    Parameters
    ----------
    summary : TargetSummary
    task : {"classification", "regression"} or None
        None infers it (module docstring).
    max_classes : int
        Most classes a classification may have.

    Returns
    -------
    task : str
    reason : str

    Raises
    ------
    JobError
        Non-finite targets, a classification with more than ``max_classes``, or a
        regression on text labels (it would fit their codes, which mean nothing).
    """
    if summary.n_nonfinite:
        raise JobError(f"the target has {summary.n_nonfinite} NaN or infinite values")
    if task == "regression" and summary.text_labels:
        raise JobError(f"the target holds text labels (e.g. {summary.text_labels[0]!r}): a "
                       "regression would fit their codes 0, 1, ..., which mean nothing; use "
                       "--task classification, or ingest a numeric target")
    if task is None:
        task, why = _inferred(summary)
        reason = f"task: {task} (inferred: {why}; pass --task to choose)"
    else:
        reason = f"task: {task} (as given)"
    if task == "classification" and (summary.capped or summary.n_distinct > max_classes):
        raise JobError(f"the target has {summary.describe_count()} distinct values: as a "
                       f"classification that is one EP problem per class; use --task "
                       f"regression, or raise --max-classes (now {max_classes}) to fit "
                       "them all")
    if task == "classification" and summary.n_distinct < 2:
        raise JobError(f"the target has {summary.n_distinct} distinct value(s); a "
                       "classification needs at least 2")
    return task, reason


def _inferred(summary):
    if summary.text_labels:
        return "classification", f"{len(summary.text_labels)} text labels"
    count = summary.describe_count()
    if summary.all_integer and not summary.capped \
            and summary.n_distinct <= MAX_INFERRED_CLASSES:
        return "classification", (f"{count} distinct integer values, at most "
                                  f"{MAX_INFERRED_CLASSES}")
    if not summary.all_integer:
        return "regression", f"{count} distinct values, not all integers"
    return "regression", f"{count} distinct integer values, over {MAX_INFERRED_CLASSES}"
