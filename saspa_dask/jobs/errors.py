"""The error a job raises for a problem the user can fix (it names the problem)."""

from __future__ import annotations

import contextlib

from ..files.locks import writer_lock

__all__ = ["Interrupted", "JobError", "locked", "reported"]


class JobError(ValueError):
    """A job cannot run as asked: a bad option, an unreachable cluster, an invalid job
    file, a destination that exists ..."""


class Interrupted(KeyboardInterrupt):
    """A job stopped by a signal (SIGINT or SIGTERM).  It unwinds like Ctrl-C, so every
    ``finally`` and cleanup handler runs: stores being written aside are removed, the
    scratch site stores too, and nothing is moved into place.

    Attributes
    ----------
    signal_name : str
    exit_code : int
        128 + the signal number, as shells report a process ended by that signal.
    """

    def __init__(self, signal_name, signal_number):
        super().__init__(signal_name)
        self.signal_name = signal_name
        self.exit_code = 128 + int(signal_number)


@contextlib.contextmanager
def locked(path, what):
    """Hold the writer lock of the output ``path``
    (:func:`~saspa_dask.files.locks.writer_lock`) for the ``with`` block; a lock
    another job holds is a :class:`JobError` naming it."""
    with contextlib.ExitStack() as stack:
        with reported():
            stack.enter_context(writer_lock(path, what))
        yield


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
