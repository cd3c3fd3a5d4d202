"""A learning sample's sites are kept on its rows only (``RowSites``), and read as the
arrays of every row that a dense scatter, written here, gives."""

from types import SimpleNamespace

import numpy as np

from saspa_dask.fitting.stages import RowSites, every_row, sites_at, sites_on_all


def _outcome(rng, rows, problems):
    return SimpleNamespace(results=[SimpleNamespace(tau=rng.random(rows.size),
                                                    nu=rng.normal(size=rows.size))
                                    for _ in range(problems)])


def _dense(stages, n):
    """Every row's sites after the stages, each stage's values over the last's."""
    out = None
    for rows, outcome in stages:
        if out is None:
            out = [(np.zeros(n), np.zeros(n)) for _ in outcome.results]
        for (tau, nu), r in zip(out, outcome.results):
            tau[rows], nu[rows] = r.tau, r.nu
    return out


def test_two_stages_of_unsorted_rows_read_as_the_dense_scatter():
    rng = np.random.default_rng(0)
    n = 1000
    first = rng.choice(n, 120, replace=False)  # unsorted, as any caller may give
    second = np.concatenate([first[:50], rng.choice(np.setdiff1d(np.arange(n), first),
                                                    200, replace=False)])
    stages = [(first, _outcome(rng, first, 2)), (second, _outcome(rng, second, 2))]
    sites = None
    for rows, outcome in stages:
        sites = sites_on_all(outcome, rows, n, sites)
    assert isinstance(sites, RowSites) and sites.rows.size == np.union1d(first, second).size
    dense = _dense(stages, n)
    for (t, v), (tau, nu) in zip(every_row(sites), dense):
        np.testing.assert_array_equal(t, tau)
        np.testing.assert_array_equal(v, nu)
    probe = rng.choice(n, 300, replace=False)
    for (t, v), (tau, nu) in zip(sites_at(sites, probe), dense):
        np.testing.assert_array_equal(t, tau[probe])
        np.testing.assert_array_equal(v, nu[probe])


def test_given_arrays_of_every_row_stay_arrays():
    rng = np.random.default_rng(1)
    n, rows = 50, np.array([3, 7, 11])
    given = [(rng.random(n), rng.random(n))]
    outcome = _outcome(rng, rows, 1)
    (tau, nu), = sites_on_all(outcome, rows, n, given)
    expected_tau = given[0][0].copy()
    expected_tau[rows] = outcome.results[0].tau
    np.testing.assert_array_equal(tau, expected_tau)
    assert every_row(None) is None and sites_at(None, rows) is None


def test_stages_of_many_rows_are_drawn_in_the_samples_memory(monkeypatch):
    """Past PERMUTED_ROWS_MAX rows the stages are nested seeded samples drawn without
    a permutation of every row: 10^9 rows, stages of 2,000 and 20,000, traced under
    a megabyte; the same seed draws the same rows; below it, a permutation's prefixes
    as before."""
    import tracemalloc

    from saspa_dask.fitting import stages

    tracemalloc.start()
    try:
        small, large = stages._stage_rows([2_000, 20_000], 10**9, 4)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2**20
    assert np.unique(large).size == 20_000 and set(small) <= set(large)
    assert large.min() >= 0 and large.max() < 10**9
    again = stages._stage_rows([2_000, 20_000], 10**9, 4)
    np.testing.assert_array_equal(again[1], large)
    order = np.random.RandomState(4).permutation(1000)
    np.testing.assert_array_equal(stages._stage_rows([10], 1000, 4)[0], np.sort(order[:10]))
