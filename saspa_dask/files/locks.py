"""One writer per output: an exclusive lock held for a whole job.

Two jobs writing one output (two ``saspa score`` runs on one ``--out``, one with
``--overwrite``; two trainings to one model store) must not both succeed: their chunks
would mix, and whichever finishes last would mark a store complete that it did not
wholly write.  :func:`writer_lock` takes an advisory ``flock`` on a lock file beside the
output (``.NAME.lock``) for as long as the job runs; a second job finds it held and
stops at once with a message naming the holder.  The kernel drops the lock when its
process dies however it dies, so a killed job never leaves a stale lock.  The holder
removes the file before it lets go; a job that locked a file no longer at the path (it
was removed meanwhile) tries again on the new one, so two jobs never hold locks on two
different files for one output.

While the lock is held no other job on this machine writes the output, so aside-copies
(``.NAME.partial-*``) found beside it are a dead job's and are removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import time
from pathlib import Path

from .atomic import partial_copies
from .errors import StoreError

__all__ = ["lock_path", "writer_lock"]


def lock_path(path):
    path = Path(path)
    return path.with_name(f".{path.name}.lock")


@contextlib.contextmanager
def writer_lock(path, what="output"):
    """Hold the writer lock of ``path`` for the ``with`` block (its parent directory is
    made if missing).

    Raises
    ------
    StoreError
        Another process holds it: names the process, host and start time it recorded.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(f"{path.parent}: cannot make the directory for {what} "
                         f"{path.name} ({err.strerror})") from None
    lock = lock_path(path)
    fd = _locked_fd(lock, path, what)
    try:
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                  "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode(), 0)
        _remove_dead_partials(path)
        yield lock
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock)  # while still holding it: see the module docstring
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _locked_fd(lock, path, what):
    """An open descriptor of the lock file at ``lock``, locked by us."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise StoreError(f"{path}: another saspa job is writing this {what} "
                             f"({holder}); wait for it to finish, or choose another "
                             "output") from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed this file as we opened it: try the new one


def _holder(fd):
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        record = {}
    if not record:
        return "holder not recorded yet"
    return f"process {record.get('pid')} on {record.get('host')} since {record.get('since')}"


def _remove_dead_partials(path):
    """Aside-copies of ``path`` left by a job that died (none can be live: the lock is
    ours)."""
    for partial in partial_copies(path):
        if partial.is_dir() and not partial.is_symlink():
            shutil.rmtree(partial, ignore_errors=True)
        else:
            partial.unlink(missing_ok=True)
