"""Paths resolved on the client, before any task is built.

A task carries the paths it opens (a data store, the score store it writes into, the
site stores).  On a cluster each worker would resolve a relative path against its own
working directory, and so could read or overwrite a different store of the same name;
every job therefore makes its paths absolute here, in the client's directory.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["absolute"]


def absolute(path):
    """``path`` as an absolute :class:`~pathlib.Path` (``~`` expanded), or None."""
    if path is None:
        return None
    return Path(path).expanduser().absolute()
