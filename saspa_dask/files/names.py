"""The hidden names the package gives its own files beside an output ``NAME``.

- ``.NAME.lock``: the lock file (:mod:`~saspa_dask.files.locks`);
- ``.NAME.partial-XXXXXXXX``: a store or file being written aside
  (:mod:`~saspa_dask.files.atomic`);
- ``.NAME.replaced-TIME-XXXXXXXX``: an old store waiting while its replacement is
  renamed in.
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

__all__ = ["aside", "lock_path", "output_of", "partial_copies", "replaced", "swap_time",
           "waiting_stores"]


def lock_path(path):
    """The lock file of the output ``path``."""
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


def aside(path):
    """Where a store for ``path`` is written until it is complete."""
    path = Path(path)
    return path.with_name(f".{path.name}.partial-{uuid.uuid4().hex[:8]}")


def partial_copies(path):
    """The :func:`aside` copies of ``path`` that exist now."""
    path = Path(path)
    return path.parent.glob(f".{path.name}.partial-*")


def replaced(path):
    """Where an existing store waits while its replacement is renamed in; the name
    carries the time of the swap (nanoseconds), so recovery can order the waiting
    stores without trusting file times (which a copy or a restore changes)."""
    path = Path(path)
    return path.with_name(f".{path.name}.replaced-{time.time_ns():020d}-"
                          f"{uuid.uuid4().hex[:8]}")


_HIDDEN = re.compile(r"\.(?P<name>.+)\.(?:partial-[0-9a-f]{8}|replaced-[0-9-]+[0-9a-f]{8}"
                     r"|scores\.zarr|predict|lock|[0-9a-f]{8})")


def output_of(path):
    """The output a file of this package's belongs to: a path inside a store being
    written aside (``.NAME.partial-*/...``), a waiting old store or a job's hidden work
    beside ``NAME`` is reported as ``NAME`` (what the user named); any other path as
    it is."""
    path = Path(path)
    for depth, part in enumerate(path.parts):
        match = _HIDDEN.fullmatch(part)
        if match:
            return Path(*path.parts[:depth]) / match["name"]
    return path


def swap_time(waiting):
    """The swap time a waiting store's name records; 0 for a name from before it was
    recorded (such a store is the oldest)."""
    stamp = waiting.name.rsplit(".replaced-", 1)[-1].split("-")[0]
    return int(stamp) if len(stamp) == 20 and stamp.isdigit() else 0


def waiting_stores(path):
    """The old stores of ``path`` waiting beside it, oldest swap first."""
    path = Path(path)
    return sorted(path.parent.glob(f".{path.name}.replaced-*"),
                  key=lambda p: (swap_time(p), p.name))
