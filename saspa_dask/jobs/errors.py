"""The error a job raises for a problem the user can fix (it names the problem)."""

from __future__ import annotations

import contextlib

__all__ = ["JobError", "reported"]


class JobError(ValueError):
    """A job cannot run as asked: a bad option, an unreachable cluster, an invalid job
    file, a destination that exists ..."""


@contextlib.contextmanager
def reported(prefix=""):
    """Bad input met inside a job as a :class:`JobError` with the same message (and
    ``prefix``), without a traceback: a ``ValueError``, which includes the storage
    layer's ``StoreError`` and scikit-learn's ``InvalidParameterError``."""
    try:
        yield
    except JobError:
        raise
    except ValueError as err:
        raise JobError(f"{prefix}{err}") from None
