"""The driver's memory does not grow with the rows beyond the model's own per-row
sites (issue 59): a fit of Dask rows with its defaults' phases (K-means on a sample,
learning on a 2,000-row sample, EP on every row from the sample's posterior), blocks
rebuilt in each pass (``cache="none"``: cached blocks live in the workers, which here
are this process's threads), its peak traced allocation at 10^5 and at 10^6 rows."""

import tracemalloc
import warnings

import dask
import dask.array as da

from saspa_dask import SASPAClassifier
from saspa_dask.datasets import synthetic_two_class


def _traced_peak(n_rows):
    X, y = synthetic_two_class(n_rows, 2, 0)
    X, y = da.from_array(X, chunks=(n_rows // 8, 2)), da.from_array(y, chunks=n_rows // 8)
    model = SASPAClassifier(8, blur="delta", hyper_subsample=2000, max_hyper_iter=2,
                            random_state=0, execution={"cache": "none"})
    with dask.config.set(scheduler="threads", num_workers=1), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the iteration cap's warning
        tracemalloc.start()
        try:
            model.fit(X, y)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


def test_the_drivers_peak_grows_by_the_models_sites_alone():
    """From 10^5 to 10^6 rows the peak grows by at most 24 bytes a row: the sites the
    model keeps (tau and nu, 16 bytes a row) and K-means' larger sample (at most 2
    bytes a row here).  The sample's sites scattered into arrays of every row, as
    before, made it 31."""
    small, large = _traced_peak(100_000), _traced_peak(1_000_000)
    assert (large - small) / 900_000 < 24, (small, large)


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
