import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dask
import pytest

sys.path.insert(0, str(Path(__file__).parent))

# The worker processes of the clusters this test process starts (a job's embedded
# cluster when the job runs in process, a test's LocalCluster) are forked from one
# forkserver that has imported Dask and NumPy once, not each spawned afresh: a cluster
# of two then starts in about 0.2 s instead of 1.1 s and 2.4 CPU-seconds (the first
# one in a process waits about 1 s more, for the forkserver itself).  A
# ``saspa`` process keeps Dask's default (spawn): its one cluster would gain nothing.
dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})

# With -n 2 two test processes share the two cores: each runs its BLAS on one thread,
# and so do the processes its tests start (jobs, Dask workers).  Two pools of two
# threads each spin against each other, and the numerical files took twice as long.
# The package's own thread policy is checked in fresh processes (tests/test_threads.py).
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_name] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)

BIN = Path(sys.executable).parent


def _startup():
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import saspa_dask.jobs, saspa_dask.cli"],
                   check=True)
    return time.perf_counter() - start


@pytest.fixture(scope="session")
def threads_client():
    """A Dask client of one in-process worker (threads), for tests that run a job
    function in the test process where the command line adds nothing to what they
    check: it saves each job the start of an embedded cluster.  Not the default
    client: other tests in the same process keep dask's own schedulers."""
    from distributed import Client, LocalCluster

    # in-process transport; its HTTP servers on loopback (None would mean 0.0.0.0)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address="127.0.0.1:0",
                      worker_dashboard_address="127.0.0.1:0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


@pytest.fixture(scope="session")
def startup_seconds():
    """What a ``saspa`` process spends before its work: interpreter start-up and the
    job layer's imports (the slower of two runs, measured now, on this machine as
    loaded as it is).  A test that times a command asserts on the time beyond this,
    never on a total that includes it."""
    return max(_startup(), _startup())


def _wait_for_file(path, timeout=60):
    deadline = time.time() + timeout
    while not path.exists():
        if time.time() > deadline:
            raise TimeoutError(f"{path} did not appear")
        time.sleep(0.1)


ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"


def needs_dataset(path):
    """Skip a test whose ``../shared/datasets`` file is missing, except under CI
    (``CI=true``), where the folder is always there: the test then runs and fails."""
    import pytest

    under_ci = os.environ.get("CI", "").lower() == "true"
    return pytest.mark.skipif(not Path(path).exists() and not under_ci,
                              reason=f"dataset not found at {path}")


class Cluster:
    """A cluster started by ``cluster/start-local.sh`` (its own process group)."""

    def __init__(self, process, address):
        self.process = process
        self.address = address

    def stop(self):
        stop_cluster(self)


def start_cluster(directory, n_workers=2, tls=None, client_security=None,
                  memory_limit="4GB"):
    """Start ``cluster/start-local.sh``: ``dask scheduler`` and ``n_workers`` ``dask
    worker`` processes (nannies, one thread each, ``memory_limit`` each) on 127.0.0.1.
    ``tls`` is a dict of ``--tls-*`` options.  Returns a Cluster (``.address``,
    ``.stop()``)."""
    from distributed import Client

    sched_file = Path(directory) / "scheduler.json"
    args = ["bash", str(ROOT / "cluster" / "start-local.sh"), "--workers", str(n_workers),
            "--port", "0", "--memory-limit", str(memory_limit), "--scheduler-file",
            str(sched_file)]
    for key, value in (tls or {}).items():
        args += [f"--{key}", str(value)]
    env = {**os.environ, "DASK": str(BIN / "dask")}
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=env, start_new_session=True)
    cluster = Cluster(proc, None)
    try:
        _wait_for_file(sched_file)
        for _ in range(100):  # the file is written before its content is complete
            try:
                cluster.address = json.loads(sched_file.read_text())["address"]
                break
            except (ValueError, KeyError):
                time.sleep(0.1)
        with Client(cluster.address, timeout=30, security=client_security) as client:
            client.wait_for_workers(n_workers, timeout=60)
    except BaseException:
        stop_cluster(cluster)
        raise
    return cluster


def stop_cluster(cluster):
    import signal

    try:
        os.killpg(cluster.process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        cluster.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(cluster.process.pid, signal.SIGKILL)
        cluster.process.wait(timeout=30)


def scoring_problem(directory, rows, fit_rows, seed, chunk_rows=4_000):
    """A data store of ``rows`` generated rows in ``chunk_rows``-row chunks and a saved
    M = 128 model fitted (3 sweeps: speed, not accuracy) on the first ``fit_rows``.

    Returns (X, model path, data path)."""
    import numpy as np
    import pytest

    from saspa_dask import SASPAClassifier
    from saspa_dask.datasets import synthetic_two_class
    from saspa_dask.storage import ingest

    d = Path(directory)
    X, y = synthetic_two_class(rows, 6, seed=seed)
    np.save(d / "d.npy", np.column_stack([X, y]))
    ingest(d / "d.npy", d / "d.zarr", chunk_rows=chunk_rows)
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=128, random_state=0,
                            ep={"max_sweeps": 3, "tol": 1e-3})
    with pytest.warns(Warning):
        model.fit(X[:fit_rows], y[:fit_rows])
    model.save(d / "m.zarr")
    return X, d / "m.zarr", d / "d.zarr"


def wait_for_done_flags(out, proc, at_least, timeout=120):
    """Poll a score store's done flags until ``at_least`` are set or ``proc`` ends;
    returns how many were set (0 while the store or a flag is still being written)."""
    import zarr

    deadline = time.time() + timeout
    n_done = 0
    while time.time() < deadline and proc.poll() is None:
        try:
            n_done = int(zarr.open_group(str(out), mode="r")["done"][...].sum())
        except Exception:
            n_done = 0
        if n_done >= at_least:
            break
        time.sleep(0.02)
    return n_done


# The suite runs file by file on both cores (--dist loadfile: a file's module fixtures,
# such as a real cluster, are set up once), the longest files first, so that no long
# file starts last and leaves the other core idle: longest-processing-time-first list
# scheduling.  Each file's time is the sum of its tests' in tests/durations.json, which
# a run with SASPA_RECORD_DURATIONS=tests/durations.json rewrites (setup, call and
# teardown of each test, as measured on that machine).
DURATIONS_FILE = Path(__file__).with_name("durations.json")


def _recorded_durations():
    try:
        return json.loads(DURATIONS_FILE.read_text())
    except (OSError, ValueError):
        return {}


_UNKNOWN_DURATION = set()


def pytest_runtest_setup(item):
    if item.nodeid in _UNKNOWN_DURATION:
        pytest.fail(f"{item.nodeid} has no recorded duration in {DURATIONS_FILE.name}; run "
                    "it with SASPA_RECORD_DURATIONS=/tmp/d.json and add the entry",
                    pytrace=False)


def pytest_collection_modifyitems(config, items):
    seconds = _recorded_durations()
    if os.environ.get("CI") == "true" and not os.environ.get("SASPA_RECORD_DURATIONS"):
        # the schedule keeps the suite's budget only if it knows every test: a test
        # added without its duration fails CI (record with SASPA_RECORD_DURATIONS)
        unknown = [item.nodeid for item in items
                   if item.nodeid not in seconds and item.get_closest_marker("slow") is None]
        if config.getoption("markexpr") == "not slow":
            # failed one by one when they run: an error raised here would stop an xdist
            # worker before it says why
            _UNKNOWN_DURATION.update(unknown)
    per_file = {}
    for item in items:
        name = item.nodeid.split("::")[0]
        per_file[name] = per_file.get(name, 0.0) + float(seconds.get(item.nodeid, 0.0))
    order = {item.nodeid: k for k, item in enumerate(items)}
    # stable within a file: its tests keep their order (and share their fixtures)
    items.sort(key=lambda item: (-per_file[item.nodeid.split("::")[0]],
                                 item.nodeid.split("::")[0], order[item.nodeid]))


_MEASURED = {}


def pytest_runtest_logreport(report):
    if os.environ.get("SASPA_RECORD_DURATIONS"):
        _MEASURED[report.nodeid] = _MEASURED.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session):
    target = os.environ.get("SASPA_RECORD_DURATIONS")
    if target and not hasattr(session.config, "workerinput") and _MEASURED:
        Path(target).write_text(json.dumps({k: round(v, 2) for k, v in
                                            sorted(_MEASURED.items())}, indent=0) + "\n")
