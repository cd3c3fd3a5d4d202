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
from pathlib import Path

from .errors import StoreError
from .locks import reader_lock, writer_lock, writer_lock_if_free
from .names import aside, partial_copies, replaced, waiting_stores
from .safe import write_new_text

__all__ = ["aside", "aside_directory", "check_destination", "check_not_an_input", "move_into_place",
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


def move_into_place(tmp, path, overwrite):
    """Rename a finished store into place; an existing one is replaced only if asked.

    Replacing a directory takes two renames (old store aside, new one in).  A crash
    between them leaves nothing at ``path`` and the old store under
    ``.NAME.replaced-*``: :func:`recover_swap`, run whenever a store is opened or
    written, moves it back.
    """
    path = Path(path)
    try:
        with writer_lock(path, "store", keep=tmp):  # re-entrant: a job may hold it
            recover_swap(path)
            if path.exists():
                if not overwrite:
                    raise StoreError(f"{path} exists; pass overwrite to replace it")
                old = replaced(path)
                os.replace(path, old)
                os.replace(tmp, path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text_file(path, text, *, overwrite=False, what="a file"):
    """Write a text file whole or not at all: a new hidden file beside ``path`` (never
    through a link), renamed over it.  An existing file is replaced only if asked."""
    path = Path(path)
    if path.is_dir():
        raise StoreError(f"{path}: a folder is in the way of {what}")
    if path.exists() and not overwrite:
        raise StoreError(f"{path} exists; pass overwrite to replace it")
    _replace_with_text(path, text, what)
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
    for stale in waiting[:-1]:
        shutil.rmtree(stale, ignore_errors=True)
    return True


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


def check_not_an_input(out, inputs):
    """Refuse an output that resolves to one of the command's inputs: overwriting it
    would delete the input before anything is written (``inputs`` maps what each input
    is, for the message, to its path; None entries are skipped)."""
    target = Path(out).resolve()
    for what, path in inputs.items():
        if path is not None and target == Path(path).resolve():
            raise StoreError(f"--out {out} is the {what}; refusing to overwrite an input")


def check_destination(path, overwrite):
    tidy(Path(path))
    if Path(path).exists() and not overwrite:
        raise StoreError(f"{path} exists; pass overwrite to replace it")



def write_latest(pointer, model_path):
    """Point the ``latest`` file at a model store, atomically (write aside, rename).

    The pointer holds the model's path relative to the pointer's folder when the
    model lies inside it, so a folder of models can be moved as a whole.
    """
    pointer, model_path = Path(pointer), Path(model_path).resolve()
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
        with open(path, "rb") as handle:
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

