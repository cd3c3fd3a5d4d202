"""A training job's embedded cluster starts in a thread while the job imports its
estimators and checks its options, and is given up when the job fails before its fit;
signals stay held as in a foreground start; the ``saspa`` program freezes its objects
before the interpreter's exit."""

import os
import signal
import subprocess
import sys
import time

import dask
import numpy as np
import psutil
import pytest

from saspa_dask import jobs
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.jobs.cluster import StartingCluster, n_workers, start_embedded


def _python_children():
    """This process's child interpreters (Dask's workers), not multiprocessing's
    resource tracker or fork server (they live as long as this process)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:  # gone already
            continue
        # (the CLI's quiet settings put "resource_tracker" in every child's -W option)
        if "python" in cmdline and not ("from multiprocessing.resource_tracker" in cmdline
                                        or "from multiprocessing.forkserver" in cmdline):
            found.append(child)
    return found


def _until_gone(timeout=30):
    end = time.perf_counter() + timeout
    while _python_children() and time.perf_counter() < end:
        time.sleep(0.1)
    return [" ".join(p.cmdline()) for p in _python_children()]


@pytest.fixture
def store(tmp_path):
    X, y = synthetic_two_class(1500, 2, seed=2)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    jobs.ingest(tmp_path / "d.npy", tmp_path / "d.zarr", chunk_rows=500)
    return tmp_path / "d.zarr"


def test_no_cluster_starts_ahead_where_the_job_would_not_start_one():
    assert start_embedded(values=10) is None  # a small job: in this process
    assert start_embedded(scheduler="tcp://127.0.0.1:1", values=10**9) is None
    assert start_embedded(client=object(), values=10**9) is None


def test_a_job_whose_options_fail_gives_up_the_cluster_it_began(store, tmp_path):
    """The cluster starts before the options are checked (its workers start while the
    estimators are imported); a bad option ends the job with its own error, and the
    cluster's worker processes are gone."""
    assert _python_children() == []
    with pytest.raises(jobs.JobError, match="learn_bases must be"):
        jobs.train(store, tmp_path / "m.zarr", workers=1, learn_bases="everything")
    assert _until_gone() == []
    assert not (tmp_path / "m.zarr").exists()


def test_a_job_fits_on_the_cluster_it_began(store, tmp_path):
    said = []
    result = jobs.train(store, tmp_path / "m.zarr", workers=2, n_bases=6,
                        optimize_hyperparameters=False, echo=said.append)
    assert result["converged"]
    assert any(line.startswith("dask: embedded LocalCluster at tls://127.0.0.1:")
               and line.endswith("2 workers") for line in said)
    assert _until_gone() == []


def test_a_sigterm_during_the_start_is_held_then_acted_on_and_the_cluster_given_up():
    """SIGTERM while the cluster starts is held (a spawn cut between its fork and its
    pipe printed a traceback) and delivered when the cluster is taken; the job's
    handler then raises, and the started cluster is given up, not leaked."""
    delivered = []

    class Stopped(Exception):
        pass

    def handler(signum, frame):
        delivered.append(signum)
        raise Stopped

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        starting = StartingCluster(1, dashboard=False)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.2)
        assert delivered == []  # held
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # as in a foreground start
        with pytest.raises(Stopped):
            starting.result()
        assert delivered == [signal.SIGTERM]
        assert signal.getsignal(signal.SIGTERM) is handler  # restored
        assert _until_gone() == []
        starting.close()  # nothing left to give up
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_started_cluster_is_taken_once_and_closing_after_is_nothing():
    starting = StartingCluster(1, dashboard=False)
    cluster, client = starting.result()
    try:
        client.wait_for_workers(1, timeout=60)
        assert n_workers(client) == 1
        assert client.submit(sum, [1, 2, 3]).result(timeout=60) == 6
        starting.close()  # taken: the cluster is the caller's
        assert client.submit(sum, [4]).result(timeout=60) == 4
    finally:
        client.close()
        cluster.close()
    assert _until_gone() == []


def test_the_saspa_program_freezes_its_objects_before_the_exit():
    """``gc.freeze`` after the command: the interpreter's last collections then skip
    the job's objects (0.6 s after a training job)."""
    code = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
            "sys.argv = ['saspa', '--help']\n"
            "from saspa_dask.cli import run\n"
            "print('before', gc.get_freeze_count())\n"
            "run()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "before 0" in res.stdout and "frozen True" in res.stdout



def _faults_and_kept_bytes(n=100, nbytes=2 << 20):
    """Minor page faults of this process while the calling thread allocates, fills and
    frees a ``nbytes`` buffer ``n`` times (as chunk tasks do with their temporaries),
    and how much more resident memory it has after."""
    import resource

    rss = psutil.Process().memory_info().rss
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(n):
        np.ones(nbytes // 8).sum()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return faults, psutil.Process().memory_info().rss - rss


@pytest.mark.skipif(sys.platform != "linux", reason="the malloc settings are glibc's")
def test_embedded_workers_keep_a_tasks_temporaries_for_the_next_task(monkeypatch):
    """A worker of the embedded cluster reuses a freed 2 MB buffer: 100 of them in a
    task take a few pages' faults, where under Dask's own malloc setting (a fresh
    mapping for each) they take 512 a buffer; a 64 MB buffer (a block's size) is still
    given back."""
    from distributed import Client, LocalCluster

    from saspa_dask.jobs.cluster import WORKER_MALLOC, dask_client

    # Dask's default first (nannies copy their settings into this process's
    # environment, which later workers inherit); workers spawned as the jobs' are (the
    # suite's forkserver has the environment it started with)
    for name in WORKER_MALLOC:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(dask.config.config["distributed"]["worker"],
                        "multiprocessing-method", "spawn")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        default_faults, _ = client.submit(_faults_and_kept_bytes, pure=False).result()
    assert default_faults > 100 * 512 / 2
    with dask_client(workers=1) as client:
        (address,) = client.scheduler_info()["workers"]
        env = client.run(lambda: {k: os.environ.get(k) for k in WORKER_MALLOC})[address]
        assert env == {k: str(v) for k, v in WORKER_MALLOC.items()}
        kept_faults, _ = client.submit(_faults_and_kept_bytes, pure=False).result()
        _, kept_bytes = client.submit(_faults_and_kept_bytes, 10, 64 << 20,
                                      pure=False).result()
    assert kept_faults < 100 * 512 / 20
    assert kept_bytes < 16 << 20
