"""A TLS-secured scheduler and worker on 127.0.0.1 (certificates made here with
openssl): the CLI connects with the certificate; without it, or with a certificate
from another CA, it is refused with a clear error in bounded time."""

import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from distributed.security import Security

from conftest import start_cluster, stop_cluster
import in_process
from saspa_dask import SASPAClassifier
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.storage import ingest

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None,
                                reason="openssl is needed to make test certificates")


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _authority(directory, name):
    """A CA and one certificate it signed (for the scheduler, workers and clients)."""
    d = Path(directory)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-keyout", f"{name}-ca.key", "-out", f"{name}-ca.pem", "-subj",
             f"/CN={name}-ca", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
             f"{name}.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{name}-ca.pem", "-CAkey",
             f"{name}-ca.key", "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", cwd=d)
    return {"tls-ca-file": d / f"{name}-ca.pem", "tls-cert": d / f"{name}.pem",
            "tls-key": d / f"{name}.key"}


def _saspa(*args):
    return in_process.saspa(*args)


def test_tls_cluster_accepts_only_certified_clients(tmp_path):
    good = _authority(tmp_path, "saspa")
    rogue = _authority(tmp_path, "rogue")
    security = Security(tls_ca_file=str(good["tls-ca-file"]),
                        tls_client_cert=str(good["tls-cert"]),
                        tls_client_key=str(good["tls-key"]), require_encryption=True)
    cluster = start_cluster(tmp_path, n_workers=1, tls=good, client_security=security)
    try:
        assert cluster.address.startswith("tls://127.0.0.1:")
        X, y = synthetic_two_class(3_000, 3, seed=0)
        np.save(tmp_path / "d.npy", np.column_stack([X, y]))
        ingest(tmp_path / "d.npy", tmp_path / "d.zarr", chunk_rows=1_000)
        model = SASPAClassifier(optimize_hyperparameters=False, n_bases=8, random_state=0).fit(X, y)
        model.save(tmp_path / "m.zarr")
        tls_args = [arg for key, value in good.items() for arg in (f"--{key}", value)]
        res = _saspa("evaluate", tmp_path / "m.zarr", tmp_path / "d.zarr", "--json",
                     "--scheduler", cluster.address, *tls_args)
        assert res.returncode == 0, res.stderr
        assert f"dask: {cluster.address}" in res.stderr

        for name, args in (("no certificate", []),
                           ("another CA", [arg for key, value in rogue.items()
                                           for arg in (f"--{key}", value)])):
            start = time.time()
            res = _saspa("evaluate", tmp_path / "m.zarr", tmp_path / "d.zarr", "--scheduler",
                         cluster.address, "--timeout", 5, *args)
            assert res.returncode != 0, name
            assert f"cannot reach the Dask scheduler at {cluster.address}" in res.stderr, name
            assert time.time() - start < 60, name
        res = _saspa("evaluate", tmp_path / "m.zarr", tmp_path / "d.zarr", "--scheduler",
                     cluster.address, "--tls-ca-file", good["tls-ca-file"])
        assert res.returncode != 0
        assert "TLS needs all of --tls-ca-file, --tls-cert and --tls-key" in res.stderr
    finally:
        stop_cluster(cluster)
