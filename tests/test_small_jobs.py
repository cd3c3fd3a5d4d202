"""Small jobs run in their own process: no cluster start, and training in memory."""

import os
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest

from saspa_dask import SASPAClassifier, jobs, load_model
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.jobs.cluster import IN_PROCESS_VALUES, runs_in_process


def _saspa_watched(*args):
    """Run ``saspa``; the most Dask worker processes (children other than
    multiprocessing's resource tracker) it had at any sampled moment."""
    return _watched([sys.executable, "-m", "saspa_dask.cli", *map(str, args)])


def _watched(command):
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    watched, most = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            children = watched.children(recursive=True)
            own = watched.cmdline()
        except psutil.NoSuchProcess:
            break
        most = max(most, sum(_is_worker(child, own) for child in children))
        time.sleep(0.05)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err, most


def _is_worker(process, parent_cmdline):
    """A child that could be a Dask worker: a Python interpreter of its own (Dask
    spawns its workers), not multiprocessing's resource tracker (the module it runs:
    under the CLI's quiet settings every child's -W option names the tracker, which
    made this check blind to workers), not a fork caught
    before its exec (it still shows the parent's command line), and not the short
    helpers libraries run on their own (``uname -p`` for distributed's version record,
    ``lscpu`` for a count of cores: one was counted so, once, on a loaded machine)."""
    try:
        cmdline = process.cmdline()
    except psutil.Error:  # gone already
        return False
    return (bool(cmdline) and cmdline != parent_cmdline
            and os.path.basename(cmdline[0]).startswith("python")
            and "from multiprocessing.resource_tracker" not in " ".join(cmdline))


def test_a_small_training_runs_in_its_process_and_equals_the_in_memory_fit(tmp_path):
    """``saspa train`` on 3,000 x 3 values with no --workers starts no worker process,
    says so, and saves the model that the estimator fitted on the same NumPy rows
    gives (``--workers`` starting a cluster, as asked, is what the cluster tests do:
    ``test_one_chunk_store_trains_on_both_workers`` and the writer tests)."""
    X, y = synthetic_two_class(3000, 3, seed=11)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    jobs.ingest(tmp_path / "d.npy", tmp_path / "d.zarr", chunk_rows=700)
    code, _, err, children = _saspa_watched(
        "train", tmp_path / "d.zarr", "--out", tmp_path / "m.zarr", "--n-bases", 12,
        "--fixed-hyperparameters", "--random-state", 3)
    assert code == 0, err
    assert children == 0
    # the watcher sees a Python child when there is one, and not a helper command
    assert _watched([sys.executable, "-c", "import subprocess, sys; subprocess.run("
                     "[sys.executable, '-c', 'import time; time.sleep(1)'])"])[3] == 1
    assert _watched([sys.executable, "-c",
                     "import subprocess; subprocess.run(['sleep', '1'])"])[3] == 0
    # and it sees the CLI's own worker when one is asked for (its -W options name the
    # resource tracker, which once hid every worker from this check)
    assert _saspa_watched("train", tmp_path / "d.zarr", "--out", tmp_path / "w.zarr",
                          "--n-bases", 12, "--fixed-hyperparameters", "--workers", 1)[3] == 1
    assert "dask: in this process (45,000 values in memory" in err  # 3,000 x (3 + 12)
    assert "fitted in memory" in err
    saved = load_model(tmp_path / "m.zarr")
    direct = SASPAClassifier(12, optimize_hyperparameters=False, random_state=3).fit(X, y)
    np.testing.assert_allclose(saved.predict_proba(X), direct.predict_proba(X),
                               rtol=1e-9, atol=1e-12)
    assert saved.log_evidence_ == pytest.approx(direct.log_evidence_, rel=1e-10)


def test_the_size_rule_and_its_help_text():
    """At most IN_PROCESS_VALUES values, with no --workers, --scheduler or client, run
    in the process; the help text states the same number."""
    assert runs_in_process(values=IN_PROCESS_VALUES)
    assert not runs_in_process(values=IN_PROCESS_VALUES + 1)
    assert not runs_in_process(workers=1, values=10)
    assert not runs_in_process(scheduler="tcp://127.0.0.1:1", values=10)
    assert not runs_in_process(values=None)
    res = subprocess.run([sys.executable, "-m", "saspa_dask.cli", "train", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert f"{IN_PROCESS_VALUES:,}" in " ".join(res.stdout.split())
