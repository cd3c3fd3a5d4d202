"""A training job's scratch folder for its site stores, and the removal of those
that killed jobs left behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
from dataclasses import replace
from pathlib import Path


from ..models.settings import settings_of

__all__ = ["owned_folder", "remove_stale_scratch", "scratch_directory"]


@contextlib.contextmanager
def scratch_directory(model):
    """A folder of the job's own for the model's scratch site stores, inside its
    ``work_dir``, removed after the cluster is closed: on an interrupt, tasks still
    running on the workers could otherwise write into a site store after the model
    removed it, leaving a ``saspa-sites-*`` folder behind."""
    execution = settings_of("execution", model.execution)
    parent = Path(execution.work_dir or tempfile.gettempdir())
    with owned_folder(parent) as folder:
        model.set_params(execution=replace(execution, work_dir=str(folder)))
        try:
            yield folder
        finally:
            model.set_params(execution=replace(execution, work_dir=str(parent)))


@contextlib.contextmanager
def owned_folder(parent):
    """A new ``.saspa-job-*`` folder in ``parent`` owned by this process (a killed
    job's is removed by the next job's :func:`remove_stale_scratch`), removed after."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(parent)
    folder = Path(tempfile.mkdtemp(prefix=".saspa-job-", dir=parent))
    (folder / "owner").write_text(f"{socket.gethostname()} {os.getpid()}\n")
    try:
        yield folder
    finally:
        for _ in range(3):  # a cancelled task may still be finishing a write
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                break
            time.sleep(0.5)


def remove_stale_scratch(parent):
    """Remove scratch folders that jobs killed with SIGKILL (or a lost machine) left in
    ``parent``: a ``.saspa-job-*`` folder whose owner process, on this host, is gone.
    Folders of other hosts, or of live processes, are left alone."""
    host = socket.gethostname()
    for folder in parent.glob(".saspa-job-*"):
        try:
            owner_host, pid = (folder / "owner").read_text().split()
            pid = int(pid)
        except (OSError, ValueError):
            continue
        if owner_host != host or _alive(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
