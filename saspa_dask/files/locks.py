"""One writer per output, and no writer while a job reads it.

Two jobs writing one output (two ``saspa score`` runs on one ``--out``, one with
``--overwrite``; two trainings to one model store) must not both succeed: their chunks
would mix, and whichever finishes last would mark a store complete that it did not
wholly write.  Nor may a job replace a store another job is reading (``saspa ingest
--overwrite`` while ``saspa score`` reads the store would give scores of two contents).

:func:`writer_lock` takes an exclusive advisory ``flock`` on a lock file beside the
output (``.NAME.lock``) for as long as the job runs; :func:`reader_lock` takes a
shared one on the same file.  A job that finds the lock held stops at once with a
message naming the holder.  The kernel drops a lock when its process dies however it
dies, so a killed job never leaves a held lock; the last holder removes the file before
it lets go, and a job that locked a file no longer at the path (removed meanwhile)
tries again on the new one, so two jobs never hold locks on two different files for one
output.  A lock file is opened without following links and written only when it is this
user's own (:mod:`~saspa_dask.files.safe`).

Locks are re-entrant within a process (a job that holds an output's writer lock may
save into it through code that takes the lock again).  While the writer lock is held no
other job on this machine writes the output, so aside-copies (``.NAME.partial-*``) found
beside it are a dead job's and are removed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import socket
import stat
import threading
import time
from pathlib import Path

from .errors import StoreError
from .names import lock_path, partial_copies
from .safe import _NO_LINK

__all__ = ["lock_path", "reader_lock", "writer_lock", "writer_lock_if_free"]

_HELD = {}  # (lock file, thread) -> [descriptor, "ex" or "sh", depth]: our locks
_REGISTRY = threading.Lock()


class _Busy(Exception):
    """The lock is held by another process."""

    def __init__(self, holder):
        super().__init__(holder)
        self.holder = holder


@contextlib.contextmanager
def writer_lock(path, what="output", keep=None):
    """Hold the writer lock of ``path`` for the ``with`` block (its parent directory is
    made if missing); aside-copies of dead jobs are removed, all but ``keep`` (the
    caller's own, made before it took the lock).

    Raises
    ------
    StoreError
        Another process holds it (writing: names the process, host and start time it
        recorded; or reading), or the lock file is a link or another user's.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(f"{path.parent}: cannot make the directory for {what} "
                         f"{path.name} ({err.strerror})") from None
    try:
        with _locked(path, what, "ex", keep):
            yield lock_path(path)
    except _Busy as busy:
        raise StoreError(f"{path}: another saspa job is {busy.holder}; wait for it to "
                         "finish, or choose another output") from None


@contextlib.contextmanager
def writer_lock_if_free(path):
    """The writer lock of ``path`` when no other job holds any lock on it (True), else
    nothing (False): for tidying that must not race a live writer or reader.  Gives
    False, too, where no lock file can be made (a read-only folder)."""
    try:
        cm = _locked(Path(path), "output", "ex")
        cm.__enter__()
    except (_Busy, StoreError, OSError):
        yield False
        return
    try:
        yield True
    finally:
        cm.__exit__(None, None, None)


@contextlib.contextmanager
def reader_lock(path, what="data store"):
    """Hold a shared lock on ``path`` for the ``with`` block: other readers may share
    it, no writer can take it.  Where no lock file can be made (a folder this user
    cannot write), the block runs without one: a writer there cannot be this user's
    job either, and readers check what they read (the data's fingerprint).

    Raises
    ------
    StoreError
        A job is writing ``path`` (named), or the lock file is a link.
    """
    path = Path(path)
    try:
        with _locked(path, what, "sh"):
            yield
    except _Busy as busy:
        raise StoreError(f"{path}: another saspa job is {busy.holder}; wait for it to "
                         "finish") from None
    except _NoLockFile:
        yield


class _NoLockFile(Exception):
    """No lock file can be made beside the path (a read-only folder)."""


@contextlib.contextmanager
def _locked(path, what, kind, keep=None):
    lock = lock_path(path)
    # re-entrant in one thread only: two threads of one process are two jobs
    key = (str(lock.absolute()), threading.get_ident())
    with _REGISTRY:
        entry = _HELD.get(key)
        if entry is not None:
            if kind == "ex" and entry[1] == "sh":
                raise StoreError(f"{path}: this job reads it, and cannot write it too")
            entry[2] += 1
    if entry is not None:
        try:
            yield
        finally:
            with _REGISTRY:
                entry[2] -= 1
        return
    fd = _acquire(lock, path, what, kind)
    with _REGISTRY:
        _HELD[key] = entry = [fd, kind, 1]
    try:
        if kind == "ex":
            _record_holder(fd)
            _remove_dead_partials(path, keep)
        yield
    finally:
        with _REGISTRY:
            entry[2] -= 1
            last = entry[2] == 0
            if last:
                del _HELD[key]
        if last:
            _release(fd, lock, kind)


def _open_lock_file(lock, path, what, kind):
    """A descriptor of the lock file: read-write when it is ours (we record the holder
    in it), read-only when it is another user's plain file (a shared lock needs no
    more, and nothing is ever written into another user's file)."""
    flags = os.O_CREAT | os.O_NONBLOCK | _NO_LINK
    try:
        fd = os.open(lock, flags | os.O_RDWR, 0o644)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise StoreError(f"{lock}: the lock file of {path} is a symbolic link; "
                             "refusing to follow it (remove it)") from None
        if err.errno == errno.ENOENT and kind == "sh":
            raise _NoLockFile() from None  # no folder: the reader says what is missing
        if err.errno not in (errno.EACCES, errno.EROFS, errno.EPERM):
            raise
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_NONBLOCK | _NO_LINK)
        except FileNotFoundError:  # no lock file, and none can be made here
            if kind == "sh":
                raise _NoLockFile() from None
            raise StoreError(f"{path.parent}: cannot make the lock file for {what} "
                             f"{path.name} ({err.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise StoreError(f"{lock}: the lock file of {path} is not a plain file; "
                         "refusing to use it (remove it)")
    return fd


def _acquire(lock, path, what, kind):
    """An open descriptor of the lock file at ``lock``, locked by us."""
    operation = fcntl.LOCK_EX if kind == "ex" else fcntl.LOCK_SH
    for attempt in range(5):
        fd = _open_lock_file(lock, path, what, kind)
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            gone = not _still_at(lock, fd)
            os.close(fd)
            if gone or (holder is None and attempt < 4):
                # a holder letting go removes the file while it still holds it
                time.sleep(0.05)
                continue
            raise _Busy(holder or "reading it") from None
        if _still_at(lock, fd):
            return fd
        os.close(fd)  # the holder removed this file as we opened it: try the new one
    raise _Busy("holding it (its lock file keeps changing)")


def _still_at(lock, fd):
    try:
        return os.lstat(lock).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _record_holder(fd):
    """Who holds the writer lock, for a job that finds it held (only in our own
    file, opened read-write)."""
    if os.fstat(fd).st_uid != os.geteuid():
        return
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                         "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode()
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, record, 0)


def _holder(fd):
    """What the holder recorded ("writing it (process ...)"), or None (readers
    record nothing; a writer may not have written its record yet)."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        record = {}
    if not record:
        return None
    return (f"writing it (process {record.get('pid')} on {record.get('host')} since "
            f"{record.get('since')})")


def _release(fd, lock, kind):
    """Let go; the last holder removes the file first (a reader knows it is the last
    when it can take the lock exclusively), when the file is this user's."""
    try:
        if kind == "sh":
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # other readers remain: they remove it
        if _still_at(lock, fd) and os.fstat(fd).st_uid == os.geteuid():
            with contextlib.suppress(OSError):  # gone meanwhile
                os.unlink(lock)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _remove_dead_partials(path, keep=None):
    """Aside-copies of ``path`` left by a job that died (none can be live: the lock is
    ours), all but ``keep``."""
    keep = None if keep is None else Path(keep).name
    for partial in partial_copies(path):
        if partial.name == keep:
            continue
        if partial.is_dir() and not partial.is_symlink():
            shutil.rmtree(partial, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                partial.unlink()
