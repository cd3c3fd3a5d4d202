"""Writing stores aside and moving them into place; ``latest`` pointer files.

A store is written under a hidden name beside its destination and renamed into place
only when complete, so an interrupted write never leaves a half-written store at the
destination.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
import warnings
from pathlib import Path

from .errors import StoreError
from .locks import reader_lock, writer_lock, writer_lock_if_free
from .names import aside, partial_copies, replaced, waiting_stores
from .outputs import check_not_protected, check_output, describe_path
from .safe import write_new_text
from .store import open_regular, read_regular

__all__ = ["aside", "aside_directory", "check_destination", "check_pointer", "move_into_place",
           "partial_copies", "reading", "recover_swap", "resolve_model_path", "tidy",
           "write_latest", "write_text_file"]


def aside_directory(path):
    """A new folder where a store for ``path`` is written until it is complete
    (:func:`~saspa_dask.files.names.aside`); made here, so nothing planted under its
    name (a link) is followed."""
    tmp = aside(path)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.mkdir()
    return tmp


def move_into_place(tmp, path, overwrite, kind):
    """Rename a finished store of ``kind`` into place; an existing one is replaced only
    if asked, and only when it is this tool's own
    (:func:`~saspa_dask.files.outputs.check_output`, checked again under the lock).

    Replacing a directory takes two renames (old store aside, new one in).  A crash
    between them leaves nothing at ``path`` and the old store under
    ``.NAME.replaced-*``: :func:`recover_swap`, run whenever a store is opened or
    written, moves it back.  A symbolic link at ``path`` is replaced as a link.
    """
    path = Path(path)
    try:
        with writer_lock(path, "store", keep=tmp):  # re-entrant: a job may hold it
            recover_swap(path)
            if os.path.lexists(path):
                check_output(path, kind, overwrite=overwrite)
            if os.path.islink(path):
                os.unlink(path)
                os.replace(tmp, path)
            elif os.path.lexists(path):
                old = replaced(path)
                os.replace(path, old)
                os.replace(tmp, path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text_file(path, text, kind, *, overwrite=False, inputs=None):
    """Write a text file of ``kind`` whole or not at all: a new hidden file beside
    ``path`` (never through a link), renamed over it.  An existing file is replaced only
    if asked, and only when it is a file of ``kind``
    (:func:`~saspa_dask.files.outputs.check_output`)."""
    path = Path(path)
    check_output(path, kind, overwrite=overwrite, inputs=inputs)
    _replace_with_text(path, text, kind.name)
    return path


def _replace_with_text(path, text, what):
    """``text`` written to a new file ``.NAME.XXXXXXXX`` beside ``path`` (never through
    a link), then renamed over ``path``: a reader sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
    try:
        write_new_text(tmp, text, what)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def recover_swap(path):
    """Undo a replacement that a crash cut between its two renames: with nothing at
    ``path`` and an old store waiting beside it, move the old store back (the latest
    swap's; older ones are dead).  Only for a caller that holds the writer lock of
    ``path`` (else a live writer's swap could be undone between its renames):
    readers call :func:`tidy`."""
    path = Path(path)
    if path.exists() or not path.parent.is_dir():
        return False
    waiting = waiting_stores(path)
    if not waiting:
        return False
    os.replace(waiting[-1], path)
    kept = [_keep_aside(stale, path) for stale in waiting[:-1]]
    if kept:
        warnings.warn(f"{path}: restored the store of the latest replacement that a crash "
                      f"cut short; {len(kept)} older store(s) waiting beside it kept as "
                      f"{', '.join(str(k) for k in kept)} (remove them when not needed)",
                      UserWarning, stacklevel=2)
    return True


def _keep_aside(stale, path):
    """Move a waiting store that recovery did not choose to a visible name beside
    ``path`` (``NAME.older-K``), so nothing is deleted unseen."""
    for k in range(1, 10_000):
        target = path.with_name(f"{path.name}.older-{k}")
        if not os.path.lexists(target):
            os.replace(stale, target)
            return target
    return stale


def tidy(path):
    """What dead jobs left beside ``path``, put right when no live job holds a lock on
    it: a swap cut between its renames is undone, aside-copies and the lock file are
    removed.  Done whenever a store is opened; a store being written or read by a live
    job is left alone (its writer finishes the swap)."""
    with writer_lock_if_free(path) as free:
        if free:
            recover_swap(path)


@contextlib.contextmanager
def reading(path, what="data store"):
    """Read ``path`` for the ``with`` block under a shared lock
    (:func:`~saspa_dask.files.locks.reader_lock`): no job on this machine replaces it
    meanwhile."""
    tidy(path)
    with reader_lock(path, what):
        yield


def check_destination(path, overwrite, kind, inputs=None):
    """Before any work: what a dead job left at ``path`` put right (:func:`tidy`), then
    ``path`` checked as an output of ``kind``
    (:func:`~saspa_dask.files.outputs.check_output`)."""
    tidy(Path(path))
    check_output(path, kind, overwrite=overwrite, inputs=inputs)


def write_latest(pointer, model_path):
    """Point the ``latest`` file at a model store, atomically (write aside, rename).

    The pointer holds the model's path relative to the pointer's folder when the
    model lies inside it, so a folder of models can be moved as a whole.
    """
    pointer, model_path = Path(pointer), Path(model_path).resolve()
    check_pointer(pointer)
    try:
        target = model_path.relative_to(pointer.resolve().parent)
    except ValueError:
        target = model_path
    _remove_dead_pointer_copies(pointer)
    _replace_with_text(pointer, f"{target}\n", "the latest pointer's copy")


# a pointer's copy lives for the milliseconds between its write and its rename: one
# older than this belongs to a process that died there
_DEAD_COPY_SECONDS = 600


def _remove_dead_pointer_copies(pointer):
    import re
    import time

    pattern = re.compile(rf"\.{re.escape(pointer.name)}\.[0-9a-f]{{8}}")
    now = time.time()
    for copy in pointer.parent.glob(f".{pointer.name}.*"):
        try:
            if (pattern.fullmatch(copy.name) and copy.is_file()
                    and now - copy.stat().st_mtime > _DEAD_COPY_SECONDS):
                copy.unlink()
        except OSError:  # gone meanwhile, or not ours to remove
            pass


# a pointer holds one path on one line; anything larger is not a pointer
_POINTER_BYTES = 4096


def check_pointer(pointer, inputs=None):
    """Refuse a ``latest`` pointer path where something other than a pointer file
    (nothing, a link, or a small one-line text file) is: a user's file is never
    replaced by a pointer."""
    check_not_protected(pointer, inputs)
    holds = describe_path(pointer)
    if holds in (None, "a symbolic link"):
        return
    if holds.startswith("something that cannot be examined"):
        raise StoreError(f"{pointer}: the pointer cannot be written there "
                         f"({holds.split('(', 1)[-1].rstrip(')')}); choose another --latest")
    try:
        raw = read_regular(pointer, limit=_POINTER_BYTES, what="a model pointer")
        lines = raw.decode("utf-8").strip().splitlines()
    except (StoreError, OSError, UnicodeDecodeError):
        lines = None
    if holds != "a file" or not lines or len(lines) != 1 or "\0" in lines[0]:
        raise StoreError(f"{pointer}: {holds} that is not a model pointer (one line naming "
                         "a model store); refusing to replace it: choose another --latest")


def resolve_model_path(path):
    """A model store path, following a ``latest`` pointer file if given one.

    Only a small one-line text file is read as a pointer; any other file is refused
    without showing its contents (a model path is not a way to print a file).
    """
    path = Path(path)
    tidy(path)
    if not path.is_file():
        return path
    try:
        with open_regular(path, "a model pointer") as handle:
            raw = handle.read(_POINTER_BYTES + 1)
    except OSError as err:
        raise StoreError(f"{path}: cannot be read ({err.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    lines = None if text is None else text.strip().splitlines()
    if len(raw) > _POINTER_BYTES or not lines or len(lines) != 1 or "\0" in text:
        raise StoreError(f"{path}: a file, but not a model pointer (one line naming a "
                         "model store); a model is a store directory")
    target = Path(lines[0].strip())
    target = target if target.is_absolute() else path.parent / target
    tidy(target)
    if not target.is_dir():  # its line is not shown: the file may be anything
        raise StoreError(f"{path}: a pointer to a model store that does not exist")
    return target

