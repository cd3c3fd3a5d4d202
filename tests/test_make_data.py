"""``saspa make-data`` writes the two-class generator's rows chunk by chunk: the same
values as the whole draw, in the memory of a chunk."""

import tracemalloc

import numpy as np
import pytest

from saspa_dask import jobs
from saspa_dask.datasets import synthetic_two_class, synthetic_two_class_chunks
from saspa_dask.jobs import in_memory_demo


@pytest.mark.parametrize("n_rows, chunk_rows", [(1000, 300), (1001, 7), (64, 64), (5, 9)])
def test_the_chunks_are_the_whole_draws_rows(n_rows, chunk_rows):
    X, y = synthetic_two_class(n_rows, 3, seed=2)
    parts = list(synthetic_two_class_chunks(n_rows, 3, 2, chunk_rows))
    assert [len(p[1]) for p in parts] == [min(chunk_rows, n_rows - s)
                                         for s in range(0, n_rows, chunk_rows)]
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), y)
    np.testing.assert_allclose(np.vstack([p[0] for p in parts]), X, rtol=1e-15, atol=1e-15)


def test_make_data_holds_a_chunk_not_the_rows(tmp_path, monkeypatch):
    """400,000 rows in chunks of 20,000: the file holds the whole draw (the same labels,
    the same values up to the matmul's rounding: OpenBLAS may take another kernel for a
    chunk's rows than for all of them, machine by machine), and the memory Python
    allocated at its peak is under four chunks' (the generator's draws, the chunk's
    inputs, their rows as written: 4.3 MB measured, the same at 4 million rows, against
    the rows' 29 MB)."""
    jobs.make_data(tmp_path / "warm.npy", rows=10)  # first calls' imports traced apart
    monkeypatch.setattr(in_memory_demo, "MAKE_DATA_CHUNK_ROWS", 20_000)
    tracemalloc.start()
    try:
        jobs.make_data(tmp_path / "d.npy", rows=400_000, features=8, seed=5)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    X, y = synthetic_two_class(400_000, 8, 5)
    whole = np.column_stack([X, y])
    written = np.load(tmp_path / "d.npy")
    assert written.shape == whole.shape and written.dtype == whole.dtype
    np.testing.assert_array_equal(written[:, -1], y)
    # the same draws: a wrong stream position would differ by O(1), rounding by 1e-16
    np.testing.assert_allclose(written[:, :-1], X, rtol=1e-13, atol=1e-13)
    assert peak < 4 * 20_000 * 9 * 8, (peak, whole.nbytes)
