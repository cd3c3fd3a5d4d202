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

__all__ = ["owned_folder", "remove_stale_scratch", "scratch_directory", "working_in"]


@contextlib.contextmanager
def scratch_directory(model):
    """A folder of the job's own for the model's scratch site stores, inside its
    ``work_dir``, removed after the cluster is closed (on an interrupt, tasks still
    running on the workers could otherwise write into a site store after the model
    removed it, leaving a ``saspa-sites-*`` folder behind) and after the model is saved
    (a Dask fit keeps its per-row sites there until then).  Fit within
    :func:`working_in` the folder."""
    execution = settings_of("execution", model.execution)
    with owned_folder(Path(execution.work_dir or tempfile.gettempdir())) as folder:
        yield folder


@contextlib.contextmanager
def working_in(model, folder):
    """The model's ``work_dir`` set to ``folder`` for the ``with`` block (what it was
    after, so the saved model's parameters are the user's)."""
    execution = settings_of("execution", model.execution)
    model.set_params(execution=replace(execution, work_dir=str(folder)))
    try:
        yield
    finally:
        model.set_params(execution=execution)


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
