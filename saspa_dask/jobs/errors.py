"""The error a job raises for a problem the user can fix (it names the problem)."""

from __future__ import annotations

__all__ = ["JobError"]


class JobError(ValueError):
    """A job cannot run as asked: a bad option, an unreachable cluster, an invalid job
    file, a destination that exists ..."""
