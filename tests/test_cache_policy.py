"""``cache="auto"`` keeps the chunks' blocks in worker memory where each worker's share
fits below the fraction of its memory limit at which Dask spills (issue 59), on a real
cluster of two worker processes limited to 2 GB each."""

import dask
import pytest
from distributed import Client, LocalCluster

from saspa_dask.engines.cache_policy import choose_cache

LIMIT = 2e9
M = 125  # M + 3 = 128 floats a row: 1,024 bytes


def _share(rows, chunk_rows, workers=2):
    """Bytes a worker may hold, written out: its even share of the chunks plus one,
    and three chunks' blocks of a sweep's temporaries, at 1,024 bytes a row."""
    chunks = -(-rows // chunk_rows)
    return (-(-chunks // workers) + 1 + 3) * chunk_rows * 1024


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=LIMIT,
                      host="127.0.0.1", dashboard_address=None) as cluster, \
            Client(cluster) as client:
        yield client


def test_blocks_that_fit_below_the_spill_threshold_are_cached(client):
    assert _share(1_000_000, 50_000) == 14 * 50_000 * 1024  # 717 MB a worker
    assert 0.6 * LIMIT - 450e6 > _share(1_000_000, 50_000)  # a worker holds < 450 MB
    cache, why = choose_cache("auto", 1_000_000, M, 50_000)
    assert cache == "memory", why
    assert "below 0.6 of a worker's memory limit" in why and "0.954 GiB of blocks" in why


def test_blocks_over_the_spill_threshold_are_rebuilt(client):
    assert _share(2_000_000, 50_000) > 0.6 * LIMIT  # 1.23 GB a worker
    cache, why = choose_cache("auto", 2_000_000, M, 50_000)
    assert cache == "none" and why.startswith("blocks rebuilt every sweep"), why


def test_the_threshold_is_dasks_configured_one(client):
    """Where Dask is set to spill at 0.3 of the limit, the blocks that fit below 0.6
    are rebuilt; an explicit choice is kept as given."""
    assert _share(1_000_000, 50_000) > 0.3 * LIMIT
    with dask.config.set({"distributed.worker.memory.target": 0.3}):
        cache, why = choose_cache("auto", 1_000_000, M, 50_000)
    assert cache == "none" and "below 0.3 of a worker's memory limit" in why, why
    assert choose_cache("memory", 2_000_000, M, 50_000) == ("memory", None)
