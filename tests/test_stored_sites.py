"""A loaded model's per-row sites left in its store when they are large
(:mod:`saspa_dask.models.stored_sites`), and the fit's warm-start path that keeps
them lazy.  Truths: the same store read whole, NumPy's own assignment, and a retrain
from the sites read whole."""

import shutil

import dask.array as da
import numpy as np
import pytest

from saspa_dask import SASPAClassifier, jobs, load_model
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.fitting.stages import check_init_sites, with_rows_set
from saspa_dask.models import stored_sites
from saspa_dask.storage import ingest


def test_a_large_models_sites_are_read_from_its_store_and_retrain_alike(
        tmp_path, monkeypatch, threads_client):
    X, y = synthetic_two_class(6_600, 4, seed=3)
    np.save(tmp_path / "all.npy", np.column_stack([X, y]))
    ingest(tmp_path / "all.npy", tmp_path / "all.zarr", chunk_rows=1_500)
    model = SASPAClassifier(n_bases=16, optimize_hyperparameters=False, random_state=0,
                            ep={"tol": 1e-8, "max_sweeps": 200})
    model.fit(X[:6_000], y[:6_000]).save(tmp_path / "m.zarr")
    whole = load_model(tmp_path / "m.zarr")
    assert isinstance(whole.sites_tau_, np.ndarray)

    monkeypatch.setattr(stored_sites, "SITES_READ_WHOLE_ROWS", 1_000)
    lazy = load_model(tmp_path / "m.zarr")
    assert isinstance(lazy.sites_tau_, da.Array) and isinstance(lazy.sites_nu_, da.Array)
    np.testing.assert_array_equal(lazy.sites_tau_.compute(), whole.sites_tau_)
    np.testing.assert_array_equal(lazy.sites_nu_.compute(), whole.sites_nu_)
    np.testing.assert_array_equal(lazy.predict_proba(X[:50]), whole.predict_proba(X[:50]))

    # retraining on 600 appended rows: from the stored sites, and from them read whole
    options = dict(optimize_hyperparameters=False, tol=1e-8, max_sweeps=200,
                   client=threads_client)
    jobs.retrain(tmp_path / "m.zarr", tmp_path / "all.zarr", tmp_path / "lazy.zarr",
                 **options)
    monkeypatch.setattr(stored_sites, "SITES_READ_WHOLE_ROWS", 1 << 24)
    jobs.retrain(tmp_path / "m.zarr", tmp_path / "all.zarr", tmp_path / "whole.zarr",
                 **options)
    from_lazy, from_whole = (load_model(tmp_path / n) for n in ("lazy.zarr", "whole.zarr"))
    np.testing.assert_allclose(from_lazy.alpha_, from_whole.alpha_, rtol=1e-12,
                               atol=1e-12 * np.abs(from_whole.alpha_).max())
    assert len(from_lazy.history_) == len(from_whole.history_)

    shutil.rmtree(tmp_path / "m.zarr")  # read after its store is gone: said, not zeros
    with pytest.raises(FileNotFoundError, match="m.zarr"):
        lazy.sites_tau_.compute()


def test_rows_set_in_lazy_sites_as_numpy_sets_them():
    rng = np.random.default_rng(0)
    values = rng.normal(size=1_000)
    original = values.copy()
    rows = np.sort(rng.choice(1_000, size=137, replace=False))
    new = rng.normal(size=rows.size)
    expected = values.copy()
    expected[rows] = new
    lazy = with_rows_set(da.from_array(values, chunks=128), rows, new)
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(), expected)
    np.testing.assert_array_equal(with_rows_set(values, rows, new), expected)
    np.testing.assert_array_equal(values, original)  # the given array is not changed


def test_lazy_warm_start_sites_are_checked_without_being_read_whole():
    tau = da.from_array(np.ones(500), chunks=100)
    nu = da.from_array(np.r_[np.zeros(499), np.nan], chunks=100)
    with pytest.raises(ValueError, match="NaN or infinity"):
        check_init_sites((tau, nu), 500)
    with pytest.raises(ValueError, match="shape"):
        check_init_sites((tau, tau), 400)
    (checked_tau, checked_nu), = check_init_sites((tau, tau), 500)
    assert isinstance(checked_tau, da.Array)
    np.testing.assert_array_equal(checked_nu.compute(), np.ones(500))
