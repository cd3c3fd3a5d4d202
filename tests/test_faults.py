"""A worker killed (SIGKILL) in the middle of training and of scoring: the job
completes and its result equals the undisturbed run.  Real processes throughout."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from distributed import Client

from conftest import start_cluster, stop_cluster
from saspa_dask import Basis, SASPAClassifier, load_model
from saspa_dask.cli import synthetic_two_class
from saspa_dask.store import ingest

BIN = Path(sys.executable).parent


@pytest.fixture
def cluster(tmp_path):
    started = start_cluster(tmp_path)
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
    X, y = synthetic_two_class(16_000, 4, seed=2)
    bases = Basis(X[:20], None)
    Xd, yd = da.from_array(X, chunks=(2_000, 4)), da.from_array(y, chunks=2_000)
    reference = SASPAClassifier(bases=bases, lengthscale=2.0, tol=1e-10, max_sweeps=300).fit(X, y)
    killed = []
    with Client(cluster, timeout=30) as client:
        def kill_at_sweep_3(record):
            if record["sweep"] == 3:
                killed.append(_kill_one_worker(client))

        model = SASPAClassifier(bases=bases, lengthscale=2.0, tol=1e-10, max_sweeps=300)
        model.fit(Xd, yd, progress=kill_at_sweep_3)
        client.wait_for_workers(2, timeout=60)
    assert killed and model.converged_
    np.testing.assert_allclose(model.alpha_, reference.alpha_, rtol=1e-9,
                               atol=1e-9 * np.abs(reference.alpha_).max())
    np.testing.assert_allclose(model.sites_tau_, reference.sites_tau_, rtol=1e-8, atol=1e-10)
    assert model.n_sweeps_ == reference.n_sweeps_


def test_worker_killed_during_scoring(cluster, tmp_path):
    X, y = synthetic_two_class(200_000, 6, seed=4)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    ingest(tmp_path / "d.npy", tmp_path / "d.zarr", chunk_rows=4_000)  # 50 chunks
    model = SASPAClassifier(n_bases=128, random_state=0, max_sweeps=3, tol=1e-3)
    with pytest.warns(Warning):
        model.fit(X[:4000], y[:4000])
    model.save(tmp_path / "m.zarr")
    model = load_model(tmp_path / "m.zarr")
    out = tmp_path / "s.zarr"
    proc = subprocess.Popen([str(BIN / "saspa"), "score", str(tmp_path / "m.zarr"),
                             str(tmp_path / "d.zarr"), "--out", str(out), "--scheduler",
                             cluster], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    killed = None
    deadline = time.time() + 120
    with Client(cluster, timeout=30) as client:
        while time.time() < deadline and proc.poll() is None:
            try:
                n_done = int(zarr.open_group(str(out), mode="r")["done"][...].sum())
            except Exception:
                n_done = 0
            if n_done >= 2:
                killed = _kill_one_worker(client)
                break
            time.sleep(0.02)
        stdout, stderr = proc.communicate(timeout=300)
    assert killed is not None, "the scorer finished before a worker could be killed"
    assert proc.returncode == 0, stderr
    g = zarr.open_group(str(out), mode="r")
    assert g.attrs["complete"] is True and g["done"][...].all()
    mean, var = model.predict_latent(X)
    np.testing.assert_allclose(g["mean"][...], mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g["variance"][...], var, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(g["proba"][...], model.predict_proba(X)[:, 1], rtol=1e-12)
