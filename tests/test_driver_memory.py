"""The driver's memory does not grow with the rows (issue 59): a fit of Dask rows with
its defaults' phases (K-means on a sample, learning on a 2,000-row sample, EP on every
row from the sample's posterior), blocks rebuilt in each pass (``cache="none"``: cached
blocks live in the workers, which here are this process's threads), and the model's
save, its peak traced allocation at 10^5 and at 10^6 rows."""

import tracemalloc
import warnings

import dask
import dask.array as da

from saspa_dask import SASPAClassifier
from saspa_dask.datasets import synthetic_two_class


def _traced_peak(n_rows, path):
    X, y = synthetic_two_class(n_rows, 2, 0)
    # chunks of one size at both N: a chunk's work runs in this process here
    X, y = da.from_array(X, chunks=(12_500, 2)), da.from_array(y, chunks=12_500)
    model = SASPAClassifier(8, blur="delta", hyper_subsample=2000, max_hyper_iter=2,
                            random_state=0, execution={"cache": "none"})
    with dask.config.set(scheduler="threads", num_workers=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the iteration cap's warning
        tracemalloc.start()
        try:
            model.fit(X, y)
            model.save(path)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_the_drivers_peak_grows_by_less_than_the_models_sites(tmp_path, monkeypatch):
    """From 10^5 to 10^6 rows (chunks of 12,500 at both) the peak of the fit and the
    save grows by less than 16 bytes a row, the bytes of the model's per-row sites
    (tau and nu): the workers keep them on disk and the save copies them a slab at a
    time (here slabs of 2^16 rows).  What grows is the permutation that draws the
    learning sample (8 bytes a row, for a moment; Floyd's sampling past 2^24 rows).
    Sites gathered onto the driver exceed the bound (``benchmarks/RESULTS.md``, "The
    README's pipeline at 10^8 rows")."""
    from saspa_dask.models import model_store

    monkeypatch.setattr(model_store, "ROW_CHUNK", 1 << 16)
    _traced_peak(20_000, tmp_path / "first.zarr")  # the first fit's imports traced apart
    small = _traced_peak(100_000, tmp_path / "small.zarr")
    large = _traced_peak(1_000_000, tmp_path / "large.zarr")
    assert (large - small) / 900_000 < 16, (small, large)


def _traced_retrain_peak(n_rows, path):
    """A saved Dask fit of ``n_rows`` rows (untraced), then traced: its loading and a
    fit from its sites with learning on a 2,000-row sample, as ``saspa retrain`` does."""
    from saspa_dask import load_model

    X, y = synthetic_two_class(n_rows, 2, 0)
    X, y = da.from_array(X, chunks=(12_500, 2)), da.from_array(y, chunks=12_500)
    params = dict(blur="delta", hyper_subsample=2000, max_hyper_iter=2, random_state=0,
                  execution={"cache": "none"})
    with dask.config.set(scheduler="threads", num_workers=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the iteration cap's warning
        SASPAClassifier(8, **params).fit(X, y).save(path)
        tracemalloc.start()
        try:
            old = load_model(path)
            SASPAClassifier(8, bases=old.bases_, **params).fit(
                X, y, init_sites=(old.sites_tau_, old.sites_nu_))
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_a_retrains_driver_does_not_hold_the_old_models_sites(tmp_path, monkeypatch):
    """Loading a model whose sites are read from its store (more rows than
    ``SITES_READ_WHOLE_ROWS``, lowered here) and fitting from them: from 10^5 to
    4 x 10^5 rows the traced peak grows by less than 16 bytes a row (the old sites
    read whole, and merged with the sample's, add 16 bytes a row each: RESULTS, "A
    retrain's driver with the old model's sites left in its store")."""
    from saspa_dask.models import model_store, stored_sites

    monkeypatch.setattr(model_store, "ROW_CHUNK", 1 << 16)  # stored chunks, as at scale
    monkeypatch.setattr(stored_sites, "SITES_READ_WHOLE_ROWS", 50_000)
    _traced_retrain_peak(10_000, tmp_path / "first.zarr")
    small = _traced_retrain_peak(100_000, tmp_path / "small.zarr")
    large = _traced_retrain_peak(400_000, tmp_path / "large.zarr")
    assert (large - small) / 300_000 < 16, (small, large)


# the process's own peak resident memory (VmHWM: this program's, whereas ru_maxrss
# keeps the forking parent's from before exec)
_INGEST = """
import sys
from saspa_dask import jobs
jobs.ingest(sys.argv[1], sys.argv[2], chunk_rows=62_500)
print(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")))
"""


def test_a_npy_ingest_stays_resident_at_a_few_chunks(tmp_path):
    """The .npy source is memory-mapped and its read pages released chunk by chunk:
    ingesting 2,000,000 x 9 float64 (144 MB) peaks under 64 MB above ingesting one
    chunk's 62,500 rows (25-49 MB measured; the mapped file's pages made it 158)."""
    import subprocess
    import sys

    import numpy as np

    peaks = []
    for rows in (62_500, 2_000_000):
        source = tmp_path / f"d{rows}.npy"
        np.save(source, np.random.default_rng(0).normal(size=(rows, 9)))
        out = subprocess.run([sys.executable, "-c", _INGEST, str(source),
                              str(tmp_path / f"d{rows}.zarr")], capture_output=True,
                             text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        peaks.append(int(out.stdout.split()[-2]) * 1024)  # "VmHWM: N kB"
        source.unlink()
    assert peaks[1] - peaks[0] < 64 * 2**20, peaks


def test_scoring_checks_a_models_sites_without_reading_them(tmp_path, monkeypatch):
    """What scoring reads of a model store (``read_fitted_posterior``) checks the per-row
    sites by the store's checksum a stored chunk at a time instead of reading them:
    traced under a quarter of their bytes (400,000 rows in chunks of 10,000: 6.4 MB),
    where reading them took it all; ``load_model`` (the estimator keeps them) still
    returns them whole."""
    import numpy as np

    from saspa_dask import load_model
    from saspa_dask.models import model_store
    from saspa_dask.models.model_reader import read_fitted_posterior

    X, y = synthetic_two_class(400_000, 1, 1)
    model = SASPAClassifier(4, optimize_hyperparameters=False, random_state=0).fit(X, y)
    monkeypatch.setattr(model_store, "ROW_CHUNK", 10_000)  # stored in 40 chunks
    model.save(tmp_path / "m.zarr")
    sites_bytes = model.sites_tau_.nbytes + model.sites_nu_.nbytes
    read_fitted_posterior(tmp_path / "m.zarr")  # first calls' imports traced apart
    tracemalloc.start()
    try:
        fitted, _ = read_fitted_posterior(tmp_path / "m.zarr")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < sites_bytes / 4, (peak, sites_bytes)
    np.testing.assert_array_equal(fitted.posteriors[0].mean,
                                  model.fitted_posterior_.posteriors[0].mean)
    np.testing.assert_array_equal(load_model(tmp_path / "m.zarr").sites_tau_, model.sites_tau_)
