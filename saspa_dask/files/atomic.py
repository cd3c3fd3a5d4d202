"""Writing stores aside and moving them into place; ``latest`` pointer files.

A store is written under a hidden name beside its destination and renamed into place
only when complete, so an interrupted write never leaves a half-written store at the
destination.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from .errors import StoreError

__all__ = ["aside", "check_destination", "check_not_an_input", "move_into_place",
           "partial_copies", "recover_swap", "resolve_model_path", "write_latest"]


def aside(path):
    """Where a store for ``path`` is written until it is complete."""
    path = Path(path)
    return path.with_name(f".{path.name}.partial-{uuid.uuid4().hex[:8]}")


def partial_copies(path):
    """The :func:`aside` copies of ``path`` that exist now."""
    path = Path(path)
    return path.parent.glob(f".{path.name}.partial-*")


def _replaced(path):
    """Where an existing store waits while its replacement is renamed in; the name
    carries the time of the swap (nanoseconds), so recovery can order the waiting
    stores without trusting file times (which a copy or a restore changes)."""
    return path.with_name(f".{path.name}.replaced-{time.time_ns():020d}-"
                          f"{uuid.uuid4().hex[:8]}")


def _swap_time(waiting):
    """The swap time a waiting store's name records; 0 for a name from before it was
    recorded (such a store is the oldest)."""
    stamp = waiting.name.rsplit(".replaced-", 1)[-1].split("-")[0]
    return int(stamp) if len(stamp) == 20 and stamp.isdigit() else 0


def move_into_place(tmp, path, overwrite):
    """Rename a finished store into place; an existing one is replaced only if asked.

    Replacing a directory takes two renames (old store aside, new one in).  A crash
    between them leaves nothing at ``path`` and the old store under
    ``.NAME.replaced-*``: :func:`recover_swap`, run whenever a store is opened or
    written, moves it back.
    """
    path = Path(path)
    recover_swap(path)
    if path.exists():
        if not overwrite:
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreError(f"{path} exists; pass overwrite to replace it")
        old = _replaced(path)
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


def recover_swap(path):
    """Undo a replacement that a crash cut between its two renames: with nothing at
    ``path`` and an old store waiting beside it, move the old store back."""
    path = Path(path)
    if path.exists() or not path.parent.is_dir():
        return False
    waiting = sorted(path.parent.glob(f".{path.name}.replaced-*"),
                     key=lambda p: (_swap_time(p), p.name))
    if not waiting:
        return False
    os.replace(waiting[-1], path)
    for stale in waiting[:-1]:
        shutil.rmtree(stale, ignore_errors=True)
    return True


def check_not_an_input(out, inputs):
    """Refuse an output that resolves to one of the command's inputs: overwriting it
    would delete the input before anything is written (``inputs`` maps what each input
    is, for the message, to its path; None entries are skipped)."""
    target = Path(out).resolve()
    for what, path in inputs.items():
        if path is not None and target == Path(path).resolve():
            raise StoreError(f"--out {out} is the {what}; refusing to overwrite an input")


def check_destination(path, overwrite):
    recover_swap(Path(path))
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
    tmp = pointer.with_name(f".{pointer.name}.{uuid.uuid4().hex[:8]}")
    try:
        tmp.write_text(f"{target}\n")
        os.replace(tmp, pointer)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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
    recover_swap(path)
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
    recover_swap(target)
    if not target.is_dir():  # its line is not shown: the file may be anything
        raise StoreError(f"{path}: a pointer to a model store that does not exist")
    return target

