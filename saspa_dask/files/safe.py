"""Files and folders the package makes for itself, opened without following links.

Outputs often live in shared directories, where another local user can plant a
symbolic link (or a file of their own) under a name the package is about to use: a
lock file ``.NAME.lock``, a pointer's copy, a job's work folder.  Opening such a name
the ordinary way would follow the link and overwrite whatever it points at, or write
into the other user's file.  Every file and folder the package makes for its own use is
therefore opened here: never through a link (``O_NOFOLLOW``), new files with
``O_EXCL``, and an existing one only when it is a plain file or folder of this user.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import StoreError

__all__ = ["create_file", "open_own_file", "own_directory", "write_new_text"]

_NO_LINK = os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _refusal(path, what, reason):
    return StoreError(f"{path}: {reason}; refusing to use it as {what} (remove it, or "
                      "choose another output)")


def _check_owned(path, info, what, kind):
    if stat.S_ISLNK(info.st_mode):
        raise _refusal(path, what, "a symbolic link")
    if not kind(info.st_mode):
        raise _refusal(path, what, "not a plain " + ("folder" if kind is stat.S_ISDIR
                                                    else "file"))
    if info.st_uid != os.geteuid():
        raise _refusal(path, what, f"owned by another user (uid {info.st_uid})")


def create_file(path, what="a file of this job", mode=0o666):
    """A new file at ``path``, opened for writing (a descriptor): fails when anything,
    a link included, is already there."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_LINK, mode)
    except FileExistsError:
        raise _refusal(path, what, "already exists") from None


def write_new_text(path, text, what="a file of this job", mode=0o666):
    """Write ``text`` to a new file at ``path`` (:func:`create_file`)."""
    fd = create_file(path, what, mode)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def open_own_file(path, what, mode=0o600):
    """A descriptor (read and write) of the file at ``path``, made if missing: an
    existing one must be a plain file of this user, and a link is never followed."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | _NO_LINK
    try:
        fd = os.open(path, flags, mode)
    except OSError as err:
        if err.errno == errno.ELOOP:  # O_NOFOLLOW met a link
            raise _refusal(path, what, "a symbolic link") from None
        raise
    try:
        _check_owned(path, os.fstat(fd), what, stat.S_ISREG)
    except BaseException:
        os.close(fd)
        raise
    return fd


def own_directory(path, what):
    """Make the folder ``path`` (mode 0700) for this job's own files, or accept one
    already there when it is a plain folder of this user (not a link).  Returns it."""
    path = Path(path)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        _check_owned(path, os.lstat(path), what, stat.S_ISDIR)
    return path
