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
    """400,000 rows in chunks of 20,000: the file is np.save's of the whole draw, and
    the memory Python allocated at its peak is under four chunks' (the generator's
    draws, the chunk's inputs, their rows as written: 4.3 MB measured, the same at 4
    million rows, against the rows' 29 MB)."""
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
    np.save(tmp_path / "whole.npy", whole)
    assert (tmp_path / "d.npy").read_bytes() == (tmp_path / "whole.npy").read_bytes()
    assert peak < 4 * 20_000 * 9 * 8, (peak, whole.nbytes)
