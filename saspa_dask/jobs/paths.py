"""Paths resolved on the client, before any task is built.

A task carries the paths it opens (a data store, the score store it writes into, the
site stores).  On a cluster each worker would resolve a relative path against its own
working directory, and so could read or overwrite a different store of the same name;
every job therefore makes its paths absolute here, in the client's directory.
"""

from __future__ import annotations

import errno
from pathlib import Path

from .errors import JobError

__all__ = ["absolute", "table_format"]


def absolute(path):
    """``path`` as an absolute :class:`~pathlib.Path` (``~`` expanded), or None; a loop
    of symbolic links is an error naming the path (every later open would fail on it
    with a less helpful one)."""
    if path is None:
        return None
    path = Path(path).expanduser().absolute()
    try:
        path.resolve()
    except RuntimeError:  # Python before 3.13 reports a loop so
        raise JobError(f"{path}: a loop of symbolic links") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise JobError(f"{path}: a loop of symbolic links") from None
    return path


def table_format(out, default=None):
    """The table format ``out``'s suffix names: ``csv`` for .csv, ``parquet`` for
    .parquet or .pq, else ``default``, or without one an error saying to give
    ``--format``."""
    suffix = Path(out).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if default is not None:
        return default
    raise JobError(f"{out}: say --format csv or parquet (the name ends in neither .csv "
                   "nor .parquet)")
