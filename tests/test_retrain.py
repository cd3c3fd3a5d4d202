"""Warm-start retraining after rows were appended, and the ``latest`` pointer."""

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from saspa_dask import SASPAClassifier, load_model
from saspa_dask.cli import synthetic_two_class
from saspa_dask.store import ingest, resolve_model_path

BIN = Path(sys.executable).parent


def _saspa(*args):
    return subprocess.run([str(BIN / "saspa"), *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def _digest(directory):
    h = hashlib.sha256()
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(directory)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("retrain")
    X, y = synthetic_two_class(11_000, 5, seed=8)
    np.save(tmp / "old.npy", np.column_stack([X[:10_000], y[:10_000]]))
    np.save(tmp / "all.npy", np.column_stack([X, y]))  # 10% more rows
    ingest(tmp / "old.npy", tmp / "old.zarr", chunk_rows=2_500)
    ingest(tmp / "all.npy", tmp / "all.zarr", chunk_rows=2_500)
    return tmp, X, y


def test_retrain_warm_starts_and_keeps_the_old_model(stores):
    tmp, X, y = stores
    models = tmp / "models"
    res = _saspa("train", tmp / "old.zarr", "--out", models / "v1.zarr", "--bases", 24,
                 "--tol", 1e-10, "--max-sweeps", 500, "--workers", 1,
                 "--latest", models / "latest")
    assert res.returncode == 0, res.stderr
    assert resolve_model_path(models / "latest") == models / "v1.zarr"
    before = _digest(models / "v1.zarr")
    res = _saspa("retrain", models / "latest", tmp / "all.zarr", "--out", models / "v2.zarr",
                 "--tol", 1e-10, "--max-sweeps", 500, "--workers", 1,
                 "--latest", models / "latest")
    assert res.returncode == 0, res.stderr
    assert "10000 old rows warm-started, 1000 new rows" in res.stderr
    assert _digest(models / "v1.zarr") == before  # the old model is never touched
    assert resolve_model_path(models / "latest") == models / "v2.zarr"
    old, new = load_model(models / "v1.zarr"), load_model(models / "latest")
    np.testing.assert_array_equal(new.bases_.means, old.bases_.means)
    cold = SASPAClassifier(optimize_hyperparameters=False, bases=old.bases_, lengthscale=old.lengthscale_,
                           signal_variance=old.signal_variance_, tol=1e-10,
                           max_sweeps=500).fit(X, y)
    np.testing.assert_allclose(new.alpha_, cold.alpha_, rtol=1e-7,
                               atol=1e-7 * np.abs(cold.alpha_).max())
    assert new.converged_ and new.n_sweeps_ < cold.n_sweeps_
    res = _saspa("score", models / "latest", tmp / "all.zarr", "--out", tmp / "s.zarr",
                 "--workers", 1)
    assert res.returncode == 0, res.stderr


def test_retrain_rejects_what_it_cannot_do(stores):
    tmp, X, y = stores
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=8, random_state=0).fit(X, y)
    model.save(tmp / "big.zarr")
    res = _saspa("retrain", tmp / "big.zarr", tmp / "old.zarr", "--out", tmp / "x.zarr")
    assert res.returncode != 0
    assert "has 10000 rows but the model was trained on 11000" in res.stderr
    res = _saspa("retrain", tmp / "big.zarr", tmp / "all.zarr", "--out", tmp / "big.zarr")
    assert res.returncode != 0 and "--out must differ from MODEL" in res.stderr
    res = _saspa("retrain", tmp / "nope.zarr", tmp / "all.zarr", "--out", tmp / "y.zarr")
    assert res.returncode != 0 and "no such model store" in res.stderr
    assert not (tmp / "x.zarr").exists() and not (tmp / "y.zarr").exists()
