"""Writing stores aside and moving them into place; ``latest`` pointer files.

A store is written under a hidden name beside its destination and renamed into place
only when complete, so an interrupted write never leaves a half-written store at the
destination.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from .errors import StoreError

__all__ = ["aside", "check_destination", "move_into_place", "resolve_model_path",
           "write_latest"]


def aside(path):
    path = Path(path)
    return path.with_name(f".{path.name}.partial-{uuid.uuid4().hex[:8]}")


def move_into_place(tmp, path, overwrite):
    """Rename a finished store into place; an existing one is replaced only if asked."""
    path = Path(path)
    if path.exists():
        if not overwrite:
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreError(f"{path} exists; pass overwrite to replace it")
        old = aside(path)
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


def check_destination(path, overwrite):
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
    tmp = pointer.with_name(f".{pointer.name}.{uuid.uuid4().hex[:8]}")
    tmp.write_text(f"{target}\n")
    os.replace(tmp, pointer)


def resolve_model_path(path):
    """A model store path, following a ``latest`` pointer file if given one."""
    path = Path(path)
    if path.is_file():
        target = Path(path.read_text().strip())
        return target if target.is_absolute() else path.parent / target
    return path

