"""A Dask fit's per-row sites stay where the workers wrote them (issue 59): lazy arrays
on a store of their own, saved a slab at a time, read from the model store after the
save, and removed with the last array that reads them."""

import gc
import warnings

import dask
import dask.array as da
import numpy as np
import pytest

from saspa_dask import SASPAClassifier, load_model
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.models import model_store


def _fits(tmp_path, classes=2):
    X, y = synthetic_two_class(6_000, 3, seed=4)
    if classes == 3:
        y = np.where(X[:, 1] > 0.5, 2, y)
    settings = dict(n_bases=8, optimize_hyperparameters=False, random_state=0,
                    ep={"tol": 1e-10, "max_sweeps": 500},
                    execution={"work_dir": str(tmp_path / "work"), "block_rows": 1_000})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lazy = SASPAClassifier(**settings).fit(da.from_array(X, chunks=(1_000, 3)),
                                               da.from_array(y, chunks=1_000))
        memory = SASPAClassifier(**settings).fit(X, y)
    return lazy, memory


def _kept_folders(tmp_path):
    return sorted((tmp_path / "work").glob("saspa-kept-sites-*"))


@pytest.mark.parametrize("classes", [2, 3])
def test_a_dask_fits_sites_are_lazy_saved_in_slabs_and_equal_the_in_memory_fits(
        tmp_path, monkeypatch, classes):
    """The Dask fit's sites (one problem; three one-vs-rest) are Dask arrays on a kept
    store, equal to the in-memory fit's at EP's fixed point; saved in slabs of 1,000
    rows (six per problem), they load as they were; the kept store stays while the
    model reads it and is removed with the model."""
    lazy, memory = _fits(tmp_path, classes)
    assert isinstance(lazy.sites_tau_, da.Array) and len(_kept_folders(tmp_path)) >= 1
    before = np.asarray(lazy.sites_tau_), np.asarray(lazy.sites_nu_)
    assert before[0].shape == memory.sites_tau_.shape
    np.testing.assert_allclose(before[0], memory.sites_tau_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(before[1], memory.sites_nu_, rtol=1e-6, atol=1e-9)
    monkeypatch.setattr(model_store, "ROW_CHUNK", 1_000)
    lazy.save(tmp_path / "m.zarr")
    saved = load_model(tmp_path / "m.zarr")
    np.testing.assert_array_equal(saved.sites_tau_, before[0])
    np.testing.assert_array_equal(saved.sites_nu_, before[1])
    gc.collect()
    np.testing.assert_array_equal(lazy.sites_tau_, before[0])  # still there
    np.testing.assert_array_equal(lazy.sites_nu_, before[1])
    del lazy
    gc.collect()
    assert _kept_folders(tmp_path) == []


def test_a_removed_kept_store_is_an_error_not_missing_values(tmp_path):
    """zarr reads a chunk that is not there as its fill value: reading the sites of a
    fit whose kept folder was removed raises, naming the folder."""
    import shutil

    lazy, _ = _fits(tmp_path)
    folders = _kept_folders(tmp_path)
    for folder in folders:
        shutil.rmtree(folder)
    with pytest.raises(FileNotFoundError, match="saspa-kept-sites-.*folder is gone"):
        with dask.config.set(scheduler="sync"):
            np.asarray(lazy.sites_tau_)


def test_the_model_a_training_job_returns_reads_its_saved_store(tmp_path, threads_client):
    """``jobs.train`` removes its scratch folder (the kept sites with it) after the save:
    the model it returns reads its sites from the model store, equal to what loads."""
    from saspa_dask import jobs
    from saspa_dask.storage import ingest

    X, y = synthetic_two_class(6_000, 3, seed=5)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    ingest(tmp_path / "d.npy", tmp_path / "d.zarr", chunk_rows=1_000)
    result = jobs.train(tmp_path / "d.zarr", tmp_path / "m.zarr", n_bases=8,
                        optimize_hyperparameters=False, client=threads_client)
    model = result["model"]
    assert isinstance(model.sites_tau_, da.Array)
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".saspa-job-")] == []
    saved = load_model(tmp_path / "m.zarr")
    np.testing.assert_array_equal(model.sites_tau_, saved.sites_tau_)
    np.testing.assert_array_equal(model.sites_nu_, saved.sites_nu_)
