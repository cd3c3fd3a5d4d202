"""A worker killed (SIGKILL) in the middle of training and of scoring: the job
completes and its result equals the undisturbed run.  Real processes throughout."""

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import dask.array as da
import numpy as np
from scipy.stats import norm
import pytest
import zarr
from distributed import Client

from conftest import scoring_problem, start_cluster, stop_cluster, wait_for_done_flags
from saspa_dask import Basis, EPConvergenceWarning, SASPAClassifier, load_model
from saspa_dask.datasets import synthetic_two_class

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One real cluster for the file: a killed worker's nanny starts a new one, and
    each test waits for both workers before it starts."""
    started = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield started.address
    finally:
        stop_cluster(started)


def _kill_one_worker(client):
    """SIGKILL the process of one worker; its nanny starts a new one."""
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    os.kill(pids[victim], signal.SIGKILL)
    return victim


def test_worker_killed_during_training(cluster):
    X, y = synthetic_two_class(8_000, 4, seed=2)
    bases = Basis(X[:20], None)
    Xd, yd = da.from_array(X, chunks=(2_000, 4)), da.from_array(y, chunks=2_000)
    # in memory with blocks of the chunks' rows: the same groups of blocks, the same path
    reference = SASPAClassifier(optimize_hyperparameters=False, bases=bases, lengthscale=2.0,
                                ep={"tol": 1e-10, "max_sweeps": 300, "coarse_start": False},
                                execution={"block_rows": 2_000}).fit(X, y)
    killed = []
    with Client(cluster, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)

        def kill_at_sweep_3(record):
            if record["sweep"] == 3:
                killed.append(_kill_one_worker(client))

        model = SASPAClassifier(optimize_hyperparameters=False, bases=bases, lengthscale=2.0,
                                ep={"tol": 1e-10, "max_sweeps": 300, "coarse_start": False})
        model.fit(Xd, yd, progress=kill_at_sweep_3)
        client.wait_for_workers(2, timeout=60)
    assert killed and model.converged_
    np.testing.assert_allclose(model.alpha_, reference.alpha_, rtol=1e-9,
                               atol=1e-9 * np.abs(reference.alpha_).max())
    np.testing.assert_allclose(model.sites_tau_, reference.sites_tau_, rtol=1e-8, atol=1e-10)
    assert model.n_sweeps_ == reference.n_sweeps_


def _kill_every_worker(client):
    """SIGKILL every worker process at once; the nannies start new ones (at new
    addresses)."""
    pids = client.run(os.getpid)
    for pid in pids.values():
        os.kill(pid, signal.SIGKILL)
    return sorted(pids)


def _thousand_row_chunks(seed):
    """8,000 rows in chunks of 1,000 as dask arrays, fixed-hyperparameter settings with
    a tight EP tolerance, and the in-memory fit of blocks of the chunks' rows (the same
    groups of blocks: the same path): (Xd, yd, settings, reference)."""
    X, y = synthetic_two_class(8_000, 4, seed=seed)
    settings = dict(optimize_hyperparameters=False, bases=Basis(X[:20], None),
                    lengthscale=2.0, ep={"tol": 1e-10, "max_sweeps": 300,
                                         "coarse_start": False})
    reference = SASPAClassifier(**settings, execution={"block_rows": 1_000}).fit(X, y)
    return (da.from_array(X, chunks=(1_000, 4)), da.from_array(y, chunks=1_000), settings,
            reference)


def test_every_worker_killed_at_once_during_training(cluster):
    """Every worker SIGKILLed at once mid-sweep: their nannies start new workers at new
    addresses, and the chunk blocks cached on the dead ones are rebuilt there (they were
    once pinned to the dead addresses, and the job waited for ever)."""
    Xd, yd, settings, reference = _thousand_row_chunks(seed=3)
    killed = []
    with Client(cluster, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)

        def kill_all_at_sweep_3(record):
            if record["sweep"] == 3 and not killed:
                killed.extend(_kill_every_worker(client))

        model = SASPAClassifier(**settings)
        model.fit(Xd, yd, progress=kill_all_at_sweep_3)
        client.wait_for_workers(2, timeout=60)
        assert not set(client.scheduler_info()["workers"]) & set(killed)
    assert len(killed) == 2 and model.converged_
    np.testing.assert_allclose(model.alpha_, reference.alpha_, rtol=1e-9,
                               atol=1e-9 * np.abs(reference.alpha_).max())
    assert model.n_sweeps_ == reference.n_sweeps_


def test_workers_restarted_by_their_nannies_memory_limit(tmp_path):
    """Two workers limited to 400 MB each take 600 MB each at sweep 3: their nannies'
    memory monitors stop them and start new ones (at new addresses), and the fit ends
    with the model the undisturbed run gives (the job once waited for ever here)."""
    Xd, yd, settings, reference = _thousand_row_chunks(seed=4)
    started, hogged = start_cluster(tmp_path, memory_limit="400MB"), []

    async def hog_memory(dask_worker):  # nested: sent by value (tests are not importable)
        import numpy

        dask_worker.saspa_test_hog = numpy.ones(75_000_000)  # 600 MB of touched pages

    try:
        with Client(started.address, timeout=30) as client:
            before = set(client.scheduler_info()["workers"])

            def hog_at_sweep_3(record):
                if record["sweep"] == 3 and not hogged:
                    hogged.append(client.run(hog_memory, wait=False))

            model = SASPAClassifier(**settings)
            model.fit(Xd, yd, progress=hog_at_sweep_3)
            client.wait_for_workers(2, timeout=60)
            after = set(client.scheduler_info()["workers"])
    finally:
        stop_cluster(started)
    assert hogged and not before & after  # both workers were replaced
    assert model.converged_
    np.testing.assert_allclose(model.alpha_, reference.alpha_, rtol=1e-9,
                               atol=1e-9 * np.abs(reference.alpha_).max())
    assert model.n_sweeps_ == reference.n_sweeps_


def test_a_python_fit_left_without_workers_raises_instead_of_waiting(cluster, tmp_path):
    """In Python the bound is the scheduler's: start-local.sh's scheduler fails a task
    that no worker is left to run after 60 s, and a fit whose only worker is killed
    (no nanny, never back) under a scheduler bounded at 3 s raises NoWorkerError a few
    seconds after the kill, instead of waiting for ever."""
    import time

    from distributed.scheduler import NoWorkerError

    with Client(cluster, timeout=30) as client:
        assert client.run_on_scheduler(lambda: __import__("dask").config.get(
            "distributed.scheduler.no-workers-timeout")) == "60s"
    killed = []
    with _lone_worker(tmp_path, no_workers_timeout="3s") as (address, worker):
        X, y = synthetic_two_class(20_000, 3, seed=1)

        def kill_at_sweep_2(record):
            if record.get("sweep") == 2 and not killed:
                worker.kill()
                killed.append(time.monotonic())

        with Client(address, timeout=30) as client:
            with pytest.raises(NoWorkerError, match="without any running workers"):
                SASPAClassifier(16, optimize_hyperparameters=False, random_state=0).fit(
                    da.from_array(X, chunks=2_000), da.from_array(y, chunks=2_000),
                    progress=kill_at_sweep_2)
            waited = time.monotonic() - killed[0]
    assert 3.0 <= waited < 60.0  # the scheduler's bound, not for ever


def test_a_worker_added_mid_job_leaves_the_model_as_it_was(cluster):
    """A third worker joins at sweep 3 (no nanny, one thread, on 127.0.0.1): the
    scheduler takes it in, and training ends in the undisturbed run's sweeps and
    sites."""
    Xd, yd, settings, reference = _thousand_row_chunks(seed=4)
    added, seen = [], []
    with Client(cluster, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)

        def add_at_sweep_3(record):
            if record["sweep"] == 3 and not added:
                added.append(subprocess.Popen(
                    [str(BIN / "dask"), "worker", cluster, "--nthreads", "1", "--no-nanny",
                     "--host", "127.0.0.1", "--no-dashboard"], stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True))
                client.wait_for_workers(3, timeout=60)
            seen.append(len(client.scheduler_info()["workers"]))

        try:
            model = SASPAClassifier(**settings).fit(Xd, yd, progress=add_at_sweep_3)
        finally:  # the job is over: the extra worker holds nothing it needs
            for proc in added:
                proc.kill()
                proc.wait()
    assert added and max(seen) == 3 and model.converged_
    np.testing.assert_allclose(model.alpha_, reference.alpha_, rtol=1e-9,
                               atol=1e-9 * np.abs(reference.alpha_).max())
    np.testing.assert_allclose(model.sites_tau_, reference.sites_tau_, rtol=1e-8, atol=1e-10)
    assert model.n_sweeps_ == reference.n_sweeps_


def _scoring_started(cluster, tmp_path, seed):
    """A 40,000-row store in 20 chunks, its model, and ``saspa score`` of it started on
    the cluster (both workers up): (X, model, out, process)."""
    X, model_path, data_path = scoring_problem(tmp_path, 40_000, 4_000, seed=seed,
                                               chunk_rows=2_000)
    out = tmp_path / "s.zarr"
    with Client(cluster, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
    proc = subprocess.Popen([str(BIN / "saspa"), "score", str(model_path), str(data_path),
                             "--out", str(out), "--scheduler", cluster],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return X, load_model(model_path), out, proc


def test_worker_killed_during_scoring(cluster, tmp_path):
    X, model, out, proc = _scoring_started(cluster, tmp_path, seed=4)
    killed = None
    with Client(cluster, timeout=30) as client:
        if wait_for_done_flags(out, proc, at_least=2) >= 2:
            killed = _kill_one_worker(client)
        stdout, stderr = proc.communicate(timeout=300)
    assert killed is not None, "the scorer finished before a worker could be killed"
    assert proc.returncode == 0, stderr
    g = zarr.open_group(str(out), mode="r")
    assert g.attrs["complete"] is True and g["done"][...].all()
    mean, var = model.predict_latent(X)
    np.testing.assert_allclose(g["mean"][...], mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g["variance"][...], var, rtol=1e-12, atol=1e-14)
    # the probit's predictive, in closed form
    np.testing.assert_allclose(g["proba"][...], norm.cdf(mean / np.sqrt(1.0 + var)),
                               rtol=1e-12)


def test_every_worker_killed_at_once_during_scoring(cluster, tmp_path):
    X, model, out, proc = _scoring_started(cluster, tmp_path, seed=5)
    killed = []
    with Client(cluster, timeout=30) as client:
        if wait_for_done_flags(out, proc, at_least=2) >= 2:
            killed = _kill_every_worker(client)
        stdout, stderr = proc.communicate(timeout=300)
        client.wait_for_workers(2, timeout=60)
    assert len(killed) == 2, "the scorer finished before the workers could be killed"
    assert proc.returncode == 0, stderr
    g = zarr.open_group(str(out), mode="r")
    assert g.attrs["complete"] is True and g["done"][...].all()
    mean, var = model.predict_latent(X)
    np.testing.assert_allclose(g["mean"][...], mean, rtol=1e-12, atol=1e-14)


@contextlib.contextmanager
def _lone_worker(directory, no_workers_timeout=None):
    """A ``dask scheduler`` and one ``dask worker`` without a nanny (a killed worker
    never comes back) on 127.0.0.1, the worker up: (address, worker process);
    ``no_workers_timeout`` is the scheduler's ``no-workers-timeout``."""
    import json
    import time

    from conftest import _wait_for_file

    sched_file = Path(directory) / "scheduler.json"
    env = dict(os.environ)
    if no_workers_timeout is not None:
        env["DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT"] = no_workers_timeout
    scheduler = subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--no-dashboard", "--scheduler-file",
                                  str(sched_file)], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    worker = None
    try:
        _wait_for_file(sched_file)
        time.sleep(0.5)
        address = json.loads(sched_file.read_text())["address"]
        worker = subprocess.Popen([str(BIN / "dask"), "worker", address, "--no-nanny",
                                   "--nthreads", "1", "--no-dashboard"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
        yield address, worker
    finally:
        for p in (worker, scheduler):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_a_cluster_left_without_workers_ends_the_job_in_one_line(tmp_path):
    """A scheduler whose only worker is killed and never comes back (no nanny): the
    job cannot progress, and ends within the watchdog's bound (6 x --timeout) with one
    line, instead of waiting for ever on a scheduler that still answers."""
    import time

    X, model_path, data_path = scoring_problem(tmp_path, 40_000, 4_000, seed=6,
                                               chunk_rows=2_000)
    with _lone_worker(tmp_path) as (address, worker):
        out = tmp_path / "s.zarr"
        proc = subprocess.Popen([str(BIN / "saspa"), "score", str(model_path),
                                 str(data_path), "--out", str(out), "--scheduler", address,
                                 "--timeout", "2"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert wait_for_done_flags(out, proc, at_least=1) >= 1
        worker.kill()
        killed_at = time.monotonic()
        stdout, stderr = proc.communicate(timeout=120)
        waited = time.monotonic() - killed_at
    assert proc.returncode == 1, (stdout, stderr)
    errors = [ln for ln in stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1 and "has had no worker for" in errors[0], stderr
    assert "Traceback" not in stderr
    assert waited < 60, waited  # 6 x 2 s, and the checks' own intervals
    assert not zarr.open_group(str(out), mode="r").attrs.get("complete")


def test_blocks_larger_than_the_workers_memory_are_rebuilt_not_cached(tmp_path):
    """Two workers limited to 300 MB each (Dask spills from 0.6 of it: 180 MB) and
    480,000 rows with M = 64 in 12 chunks (257 MB of blocks; a worker's share, one more
    chunk and a sweep's three chunks of temporaries: 214 MB): cache="auto" rebuilds the
    blocks every sweep, says so, and trains the model an in-memory fit gives, with no
    worker restarted (two sweeps, each of them rebuilt: not to convergence, which
    would take eleven and test nothing more)."""
    from saspa_dask.engines.cache_policy import block_bytes

    X, y = synthetic_two_class(480_000, 4, seed=7)
    bases = Basis(X[:64], None)
    settings = dict(optimize_hyperparameters=False, bases=bases, lengthscale=1.5,
                    ep={"tol": 1e-4, "max_sweeps": 2, "coarse_start": False})
    assert (6 + 1 + 3) * block_bytes(40_000, 64) > 0.6 * 300e6
    (tmp_path / "c").mkdir()
    started = start_cluster(tmp_path / "c", memory_limit="300MB")
    said = []
    try:
        with Client(started.address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
            pids = client.run(os.getpid)
            model = SASPAClassifier(**settings, verbose=1)
            import io

            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(err), \
                    pytest.warns(EPConvergenceWarning):
                model.fit(da.from_array(X, chunks=(40_000, 4)),
                          da.from_array(y, chunks=40_000))
            said.append(err.getvalue())
            assert client.run(os.getpid) == pids  # no worker was restarted
    finally:
        stop_cluster(started)
    assert "cache: blocks rebuilt every sweep" in said[0], said[0][-2000:]
    with pytest.warns(EPConvergenceWarning):
        reference = SASPAClassifier(**settings, execution={"block_rows": 40_000}).fit(X, y)
    assert model.n_sweeps_ == reference.n_sweeps_ == 2
    np.testing.assert_allclose(model.alpha_, reference.alpha_, rtol=1e-8,
                               atol=1e-8 * np.abs(reference.alpha_).max())
