"""Distributed training with real ``dask scheduler`` / ``dask worker`` processes on
127.0.0.1 and real zarr stores on disk."""

import json
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from distributed import Client, LocalCluster

import in_process
from saspa_dask import Basis, EPConvergenceWarning, SASPAClassifier, SASPARegressor, load_model
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.engines.kmeans import kmeans
from saspa_dask.storage import ingest, open_data_store

from conftest import needs_dataset, start_cluster, stop_cluster



@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A real scheduler and two single-thread workers, as separate processes."""
    cluster = start_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield cluster.address
    finally:
        stop_cluster(cluster)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """8,000 x 5 generated two-class rows, ingested with 3,000-row chunks."""
    tmp = tmp_path_factory.mktemp("data")
    X, y = synthetic_two_class(8_000, 5, seed=3)
    np.save(tmp / "d.npy", np.column_stack([X, y]))
    ingest(tmp / "d.npy", tmp / "d.zarr", chunk_rows=3000)
    return tmp / "d.zarr", X, y


def _saspa(*args, timeout=600):
    return in_process.saspa(*args)


def test_cli_train_on_a_real_cluster_equals_in_memory_fit(scheduler, store, tmp_path):
    path, X, y = store
    res = _saspa("train", "--fixed-hyperparameters", path, "--out", tmp_path / "m.zarr", "--n-bases", 24, "--blur", "full",
                 "--likelihood", "probit", "--tol", 1e-10, "--max-sweeps", 400,
                 "--scheduler", scheduler)
    assert res.returncode == 0, res.stderr
    assert f"dask: {scheduler}" in res.stderr and "sweep    1" in res.stderr
    model = load_model(tmp_path / "m.zarr")
    assert model.converged_ and model.bases_.n_bases == 24
    ref = SASPAClassifier(optimize_hyperparameters=False, bases=model.bases_, lengthscale=model.lengthscale_, ep={"tol": 1e-10, "max_sweeps": 400}).fit(X, y)
    np.testing.assert_allclose(model.alpha_, ref.alpha_, rtol=1e-8,
                               atol=1e-8 * np.abs(ref.alpha_).max())
    Xs = X[:500] * 1.3
    np.testing.assert_allclose(model.predict_proba(Xs), ref.predict_proba(Xs), atol=1e-8)
    np.testing.assert_allclose(model.sites_tau_, ref.sites_tau_, rtol=1e-7, atol=1e-9)
    assert model.log_evidence_ == pytest.approx(ref.log_evidence_, rel=1e-9)
    info = json.loads(_saspa("info", tmp_path / "m.zarr", "--json").stdout)
    assert info["n_training_rows"] == 8_000 and info["ep"]["converged"]
    # the job's scratch folder (its site stores, the sites kept until the save) is gone
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".saspa-job-")] == []
    assert info["data_fingerprint"] == open_data_store(path)[2]["fingerprint"]


def _fit_on(X, y, bases, ls, client_address=None, ep=None, execution=None):
    with Client(client_address, timeout=30):
        model = SASPAClassifier(optimize_hyperparameters=False, bases=bases, lengthscale=ls,
                                ep={"tol": 1e-10, "max_sweeps": 400, **(ep or {})},
                                execution=execution)
        return model.fit(X, y)


def test_chunk_size_invariance(scheduler, store):
    _, X, y = store
    rng = np.random.default_rng(0)
    bases = Basis(X[rng.choice(len(X), 16, replace=False)], None)
    ls = np.full(5, 2.0)
    # from the prior, with every chunk updated from one posterior (groups=1), the sweeps
    # are the same sums split differently: every iterate is the same to round-off
    # (compared after four sweeps, before EP has converged)
    with pytest.warns(EPConvergenceWarning):
        fits = [_fit_on(da.from_array(X, chunks=(rows, 5)), da.from_array(y, chunks=rows),
                        bases, ls, scheduler, ep={"coarse_start": False, "max_sweeps": 4,
                                                  "groups": 1})
                for rows in (8_000, 3_111, 1_000)]
    assert [fit.n_sweeps_ for fit in fits] == [4, 4, 4]
    for other in fits[1:]:
        np.testing.assert_allclose(other.alpha_, fits[0].alpha_, rtol=1e-9,
                                   atol=1e-9 * np.abs(fits[0].alpha_).max())
        np.testing.assert_allclose(other.sites_nu_, fits[0].sites_nu_, rtol=1e-8, atol=1e-10)
    # a coarse start (8 chunks: EP on 2 of them first) reaches the fixed point of EP
    # from the prior
    cold = _fit_on(da.from_array(X, chunks=(8_000, 5)), da.from_array(y, chunks=8_000),
                   bases, ls, scheduler, ep={"coarse_start": False})
    coarse = _fit_on(da.from_array(X, chunks=(1_000, 5)), da.from_array(y, chunks=1_000),
                     bases, ls, scheduler)
    assert [level["rows"] for level in coarse.coarse_start_] == [2_000]
    assert cold.coarse_start_ == [] and cold.converged_ and coarse.converged_
    np.testing.assert_allclose(coarse.alpha_, cold.alpha_, rtol=1e-7,
                               atol=1e-7 * np.abs(cold.alpha_).max())
    np.testing.assert_allclose(coarse.log_evidence_, cold.log_evidence_, rtol=1e-10)


def test_worker_count_and_mode_invariance(scheduler, store):
    _, X, y = store
    X, y = X[:2000], y[:2000]  # four chunks: enough to split over workers and modes
    bases = Basis(X[:12], None)
    ls = np.full(5, 2.0)
    Xd, yd = da.from_array(X, chunks=(500, 5)), da.from_array(y, chunks=500)
    # the same sums whatever the workers: equal to round-off at any tolerance; the
    # sequential fixed point agrees to 1e-6 when both stop at a change of 1e-8
    ep = {"tol": 1e-8}
    two = _fit_on(Xd, yd, bases, ls, scheduler, ep=ep)
    # one worker in this process (no process to start): the sums do not depend on
    # where a worker runs either
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address="127.0.0.1:0") as one_worker:
        one = _fit_on(Xd, yd, bases, ls, one_worker.scheduler_address, ep=ep)
    np.testing.assert_allclose(one.alpha_, two.alpha_, rtol=1e-12, atol=0)
    seq = _fit_on(Xd, yd, bases, ls, scheduler, ep={**ep, "mode": "sequential"})
    np.testing.assert_allclose(seq.alpha_, two.alpha_, rtol=1e-6,
                               atol=1e-6 * np.abs(two.alpha_).max())
    recomputed = _fit_on(Xd, yd, bases, ls, scheduler, ep=ep, execution={"cache": "none"})
    np.testing.assert_allclose(recomputed.alpha_, two.alpha_, rtol=1e-12, atol=0)


def test_kmeans_is_deterministic_for_a_seed_whatever_the_chunking(scheduler, store):
    _, X, _ = store
    with Client(scheduler, timeout=30):
        # enough Lloyd passes to converge (17 here), so convergence can be asserted
        runs = [kmeans(da.from_array(X, chunks=(rows, 5)), 20, random_state=7, max_iter=50)
                for rows in (8_000, 3_000, 1_234)]
    for basis, info in runs[1:]:
        np.testing.assert_allclose(basis.means, runs[0][0].means, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(basis.covs, runs[0][0].covs, rtol=1e-9, atol=1e-12)
        assert info["n_iter"] == runs[0][1]["n_iter"]
    assert runs[0][1]["converged"]
    # the Lloyd fixed point: with a tight tolerance every mean is the mean of the rows
    # nearest to it (at the default tol it is so within sqrt(tol * variance) only)
    with Client(scheduler, timeout=30):
        tight, info = kmeans(da.from_array(X, chunks=(3_000, 5)), 20, random_state=7,
                             max_iter=200, tol=1e-8)
    assert info["converged"]
    labels = ((X[:, None, :] - tight.means[None]) ** 2).sum(-1).argmin(1)
    for j in range(len(tight.means)):
        np.testing.assert_allclose(X[labels == j].mean(0), tight.means[j], atol=1e-9)


def test_driver_never_receives_x_or_n_by_m(scheduler, store):
    """Every result the driver gathers while fitting is O(M^2 + N) numbers, never O(N d)
    or O(N M): checked by recording what each compute returns to this process."""
    _, X, y = store
    N, d, M = X.shape[0], X.shape[1], 32
    received = []

    with Client(scheduler, timeout=30) as client:
        gather = client.gather

        def recording_gather(futures, *args, **kwargs):
            result = gather(futures, *args, **kwargs)
            received.append(_nbytes(result))
            return result

        # every compute on a distributed Client returns its results through gather;
        # persist (the cached phi blocks) leaves them on the workers
        client.gather = recording_gather
        model = SASPAClassifier(optimize_hyperparameters=False, n_bases=M, random_state=0).fit(
            da.from_array(X, chunks=(2000, d)), da.from_array(y, chunks=2000))
    assert model.converged_ and len(received) > model.n_sweeps_
    per_compute_limit = max(2 * 8 * N, 8 * 20_000 * d)  # the sites, or the K-means sample
    assert max(received) <= per_compute_limit, max(received)
    assert max(received) < 8 * N * M / 4


def _nbytes(obj):
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, (list, tuple)):
        return sum(_nbytes(o) for o in obj)
    if isinstance(obj, dict):
        return sum(_nbytes(o) for o in obj.values())
    if hasattr(obj, "__dataclass_fields__"):
        return sum(_nbytes(getattr(obj, f)) for f in obj.__dataclass_fields__)
    return 8


def test_regression_on_dask_equals_in_memory(scheduler):
    rng = np.random.default_rng(4)
    X = rng.uniform(-3, 3, size=(6000, 2))
    y = np.sin(X[:, 0]) * X[:, 1] + 0.1 * rng.normal(size=6000)
    ref = SASPARegressor(optimize_hyperparameters=False, n_bases=20, random_state=0).fit(X, y)
    with Client(scheduler, timeout=30):
        model = SASPARegressor(optimize_hyperparameters=False, bases=ref.bases_, lengthscale=ref.lengthscale_).fit(
            da.from_array(X, chunks=(1500, 2)), da.from_array(y, chunks=1500))
        mean = model.predict(da.from_array(X[:1000], chunks=(250, 2)))
        assert isinstance(mean, da.Array) and mean.chunks == ((250,) * 4,)
        mean = mean.compute()
    np.testing.assert_allclose(model.alpha_, ref.alpha_, rtol=1e-9,
                               atol=1e-9 * np.abs(ref.alpha_).max())
    np.testing.assert_allclose(mean, ref.predict(X[:1000]), rtol=1e-9, atol=1e-9)
    assert model.log_evidence_ == pytest.approx(ref.log_evidence_, rel=1e-10)


def test_unreachable_scheduler_fails_fast(store, tmp_path, startup_seconds):
    path, _, _ = store
    start = time.time()
    res = _saspa("train", "--fixed-hyperparameters", path, "--out", tmp_path / "m.zarr", "--scheduler",
                 "tcp://127.0.0.1:1", "--timeout", 3, timeout=120)
    assert res.returncode != 0
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:1" in res.stderr
    assert time.time() - start - startup_seconds < 50  # --timeout 3, then one message
    assert not (tmp_path / "m.zarr").exists()


def test_train_rejects_bad_stores(tmp_path):
    res = _saspa("train", "--fixed-hyperparameters", tmp_path / "none.zarr", "--out", tmp_path / "m.zarr")
    assert res.returncode != 0 and "no such data store" in res.stderr
    np.save(tmp_path / "d.npy", np.column_stack([np.ones((10, 2)), np.arange(10) % 2]))
    ingest(tmp_path / "d.npy", tmp_path / "d.zarr")
    (tmp_path / "m.zarr").mkdir()
    res = _saspa("train", "--fixed-hyperparameters", tmp_path / "d.zarr", "--out", tmp_path / "m.zarr")
    assert res.returncode != 0 and "exists; pass --overwrite" in res.stderr


def test_estimator_accepts_zarr_arrays(scheduler, store):
    import zarr

    path, X, y = store
    group = zarr.open_group(str(path), mode="r")
    bases = Basis(X[:10], None)
    ls = np.full(5, 2.0)
    ref = SASPAClassifier(optimize_hyperparameters=False, bases=bases, lengthscale=ls, ep={"coarse_start": False}).fit(X, y)
    with Client(scheduler, timeout=30):
        model = SASPAClassifier(optimize_hyperparameters=False, bases=bases, lengthscale=ls, ep={"coarse_start": False}).fit(group["X"], group["y"])
        proba = model.predict_proba(group["X"])
        assert isinstance(proba, da.Array) and proba.chunks[0] == (3000, 3000, 2000)
        proba = proba.compute()
    np.testing.assert_allclose(model.alpha_, ref.alpha_, rtol=1e-9,
                               atol=1e-9 * np.abs(ref.alpha_).max())
    np.testing.assert_allclose(proba, ref.predict_proba(X), atol=1e-9)
    with pytest.raises(ValueError, match="X has 4 features, but SASPAClassifier is expecting 5"):
        model.predict(da.zeros((10, 4)))
    bad = X.copy()
    bad[[5, 17, 18]] = np.nan
    with Client(scheduler, timeout=30), pytest.raises(ValueError, match="NaN or infinity in 3 rows"):
        SASPAClassifier(optimize_hyperparameters=False, n_bases=4).fit(da.from_array(bad, chunks=(5000, 5)), da.from_array(y))


WAVEFORM = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "waveform.csv"


@needs_dataset(WAVEFORM)
def test_multiclass_hyperparameter_learning_on_the_cluster_equals_in_memory(scheduler):
    """One-vs-rest on shared blocks and evidence maximisation, on real workers: the
    same optimiser path (same evidence, same probabilities) as in memory."""
    data = np.loadtxt(WAVEFORM, delimiter=",", skiprows=1, max_rows=800)
    X, y = data[:, :-1], data[:, -1].astype(int)
    params = dict(n_bases=12, blur="spherical", random_state=0, max_hyper_iter=4,
                  ep={"coarse_start": False},  # the same path, not just the same fixed point
                  learn_bases=False)  # the remote fit is given the local bases
    local = SASPAClassifier(**params).fit(X, y)
    with Client(scheduler):
        Xd, yd = da.from_array(X, chunks=(200, -1)), da.from_array(y, chunks=200)
        remote = SASPAClassifier(**{**params, "bases": local.bases_}).fit(Xd, yd)
        proba = remote.predict_proba(Xd).compute()
    assert remote.log_evidence_ == pytest.approx(local.log_evidence_, rel=1e-10)
    assert len(remote.hyperparameter_trace_) == len(local.hyperparameter_trace_)
    np.testing.assert_allclose(proba, local.predict_proba(X), atol=1e-10)


def test_a_failed_connection_leaves_dask_settings_as_they_were():
    """distributed's Client sets dask's global scheduler setting as it starts; a
    connection that fails or never answers must not leave it set (a later
    dask.compute in the same process would ask for a client that does not exist: the
    suite met this when test_writers' refused connections ran before a file of
    in-process jobs on the same core)."""
    import socket

    import dask
    from saspa_dask.jobs import JobError, dask_client

    before = dask.config.get("scheduler", None)
    silent = socket.socket()  # accepts connections (the kernel's backlog), never speaks
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        for address in ("tcp://127.0.0.1:1", f"tcp://127.0.0.1:{silent.getsockname()[1]}"):
            with pytest.raises(JobError, match="cannot reach the Dask scheduler"):
                with dask_client(scheduler=address, timeout=1):
                    pass
            assert dask.config.get("scheduler", None) == before, address
    finally:
        silent.close()


def test_a_refused_connection_leaves_no_client_for_the_collector():
    """A client that failed to connect was garbage in a cycle; the collector ran its
    __del__ later in whatever thread it ran in, and in a thread starting another
    client's loop (holding distributed's class-wide LoopRunner lock) that deadlocked:
    the suite hung in ``test_a_lost_scheduler_is_said_plainly``'s Client().  With the
    collector off, no Client may be left after the refusal (other tests' clients, alive
    or not, were there before it)."""
    import gc

    from distributed import Client
    from saspa_dask.jobs import JobError, dask_client

    gc.collect()
    gc.disable()
    try:
        before = [o for o in gc.get_objects() if isinstance(o, Client)]
        with pytest.raises(JobError, match="cannot reach the Dask scheduler"):
            with dask_client(scheduler="tcp://127.0.0.1:1", timeout=1):
                pass
        left = [o for o in gc.get_objects()
                if isinstance(o, Client) and not any(o is b for b in before)]
    finally:
        gc.enable()
    assert left == []


def test_a_sweeps_chunk_task_depends_on_its_cached_block_alone(scheduler):
    """Each chunk task of an EP sweep (and of the closing evidence pass) has one key
    among its dependencies, its chunk's cached block: the posterior and likelihood
    travel as arguments.  A shared key held by one worker made that worker a candidate
    for every task, and the scheduler copied whole blocks to it.  Checked on the
    graphs the scheduler receives, on a real cluster."""
    from dask.core import get_dependencies

    from saspa_dask.engines import dask_engine

    X, y = synthetic_two_class(6_000, 3, seed=5)
    graphs = []
    with Client(scheduler, timeout=30) as client:
        get = client.get

        def recording_get(dsk, *args, **kwargs):  # every compute goes through it
            graphs.append(dsk)
            return get(dsk, *args, **kwargs)

        client.get = recording_get
        model = SASPAClassifier(optimize_hyperparameters=False, n_bases=16, random_state=0,
                                execution={"cache": "memory"}).fit(
            da.from_array(X, chunks=(1_000, 3)), da.from_array(y, chunks=1_000))
    assert model.n_sweeps_ >= 2
    names = {dask_engine._parallel_task.__name__: 0, dask_engine._evaluate_task.__name__: 0}
    for graph in graphs:
        dsk = dict(graph.__dask_graph__() if hasattr(graph, "__dask_graph__") else graph)
        for key, task in dsk.items():
            func = getattr(task, "func", None)
            name = getattr(getattr(func, "__wrapped__", func), "__name__", None)
            if name in names:
                names[name] += 1
                deps = get_dependencies(dsk, key)
                assert len(deps) == 1 and "make_block" in str(next(iter(deps))), deps
    assert names["_parallel_task"] >= 6 * model.n_sweeps_ - 6, names


def test_cached_blocks_are_built_group_by_group(scheduler, tmp_path):
    """A grouped sweep's round runs each of its blocks' tasks where the block is, so a
    round whose blocks sit unevenly waits for the worker with more: the blocks of each
    group (g, g + 4, ...) are built and persisted before the next group's start, so the
    scheduler deals each group over the workers as they free up.  Read from the
    scheduler's task stream: every build of group g ends before any of group g + 1
    begins, and every block is in a worker's memory."""
    from distributed import futures_of, get_task_stream

    from saspa_dask.core.kernels import basis_covariance
    from saspa_dask.engines.dask_engine import DaskEngine
    from saspa_dask.ep.whitening import whiten

    X, y = synthetic_two_class(8_000, 3, seed=2)
    basis = Basis(X[:6].copy(), np.zeros((6, 3, 3)))
    L, _ = whiten(basis_covariance(basis.means, basis.blur, np.ones(3), 1.0), 1.0, 1e-8)
    with Client(scheduler, timeout=30) as client, get_task_stream(client) as stream:
        engine = DaskEngine(da.from_array(X, chunks=(500, 3)), da.from_array(y, chunks=500),
                            basis, np.ones(3), 1.0, L, tmp_path / "sites", cache="memory",
                            groups=4)
        futures = [futures_of(block)[0] for block in engine.blocks]
        who = client.who_has(futures)
        assert all(who[future.key] for future in futures)
    spans = {}
    for record in stream.data:
        compute = [s for s in record["startstops"] if s["action"] == "compute"]
        if compute:
            spans[record["key"]] = (compute[0]["start"], compute[-1]["stop"])
    builds = [spans[future.key] for future in futures]  # chunk order: group i % 4
    for g in range(3):
        assert max(end for _, end in builds[g::4]) <= min(begin for begin, _ in builds[g + 1::4])
