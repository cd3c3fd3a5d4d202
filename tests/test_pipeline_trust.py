"""Issue 15: the pipeline cannot give a wrong answer or waste an hour silently.

Each test reproduces one reported defect through the ``saspa`` command (a real
subprocess, real zarr stores) and checks the fix against an independent truth: the
model's own predictions on correctly ordered columns, encodings written out by hand,
exact row multisets, exit codes and the files left on disk.
"""

import csv
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr

import in_process
from saspa_dask import SASPARegressor, jobs, load_model

BIN = Path(sys.executable).parent
SASPA = str(BIN / "saspa")


def _saspa(*args, timeout=300, **kw):
    return in_process.saspa(*args, **kw)


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def _regression_table(n, seed):
    """Inputs with clearly different roles: latitude matters far more than longitude."""
    rng = np.random.default_rng(seed)
    lat, lon, rooms = rng.uniform(-2, 2, n), rng.uniform(-2, 2, n), rng.uniform(0, 1, n)
    y = 3 * np.sin(1.5 * lat) + 0.3 * lon + rooms + 0.05 * rng.normal(size=n)
    return np.column_stack([lat, lon, rooms]), y


@pytest.fixture(scope="module")
def trained(tmp_path_factory, threads_client):
    """A regression model trained by the job behind ``saspa train`` on columns (lat,
    lon, rooms)."""
    d = tmp_path_factory.mktemp("trained")
    X, y = _regression_table(3000, 0)
    _write_csv(d / "train.csv", ["lat", "lon", "rooms", "value"],
               np.column_stack([X, y]).tolist())
    jobs.ingest(d / "train.csv", d / "train.zarr", chunk_rows=1000)
    jobs.train(d / "train.zarr", d / "m.zarr", n_bases=24, blur="spherical",
               optimize_hyperparameters=False, client=threads_client)
    return d


# -- 1. columns matched by name ---------------------------------------------------------


def test_swapped_columns_are_reordered_by_name(trained):
    d = trained
    X, y = _regression_table(1000, 1)
    _write_csv(d / "test.csv", ["lat", "lon", "rooms", "value"],
               np.column_stack([X, y]).tolist())
    _write_csv(d / "swapped.csv", ["lon", "lat", "rooms", "value"],
               np.column_stack([X[:, 1], X[:, 0], X[:, 2], y]).tolist())
    for name in ("test", "swapped"):
        jobs.ingest(d / f"{name}.csv", d / f"{name}.zarr")
    right = _saspa("evaluate", d / "m.zarr", d / "test.zarr", "--json")
    swapped = _saspa("evaluate", d / "m.zarr", d / "swapped.zarr", "--json")
    assert right.returncode == 0 and swapped.returncode == 0, swapped.stderr
    right, swapped = json.loads(right.stdout), json.loads(swapped.stdout)
    # the independent truth: the model's own predictions on correctly ordered rows
    model = load_model(d / "m.zarr")
    assert list(model.fitted_posterior_.feature_names) == ["lat", "lon", "rooms"]
    # the names came from the data store, not a DataFrame: NumPy input predicts
    # without scikit-learn's feature-name warning
    assert not hasattr(model, "feature_names_in_")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rmse = float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))
    assert swapped["rmse"] == pytest.approx(rmse, rel=1e-9)
    assert right["rmse"] == pytest.approx(rmse, rel=1e-9)
    assert "reordered" in swapped["columns"] and "reordered" not in right["columns"]
    # what matching by count gave: a much worse, wrong answer
    # bare arrays are taken by position
    by_count = float(np.sqrt(np.mean((model.predict(X[:, [1, 0, 2]]) - y) ** 2)))
    assert by_count > 3 * rmse


def test_missing_or_extra_columns_are_named(trained, startup_seconds):
    d = trained
    X, y = _regression_table(200, 2)
    _write_csv(d / "extra.csv", ["lat", "lon", "bathrooms", "value"],
               np.column_stack([X, y]).tolist())
    jobs.ingest(d / "extra.csv", d / "extra.zarr")
    for command in (("evaluate", d / "m.zarr", d / "extra.zarr"),
                    ("score", d / "m.zarr", d / "extra.zarr", "--out", d / "s.zarr")):
        start = time.perf_counter()
        res = _saspa(*command)
        assert res.returncode == 1
        assert "missing ['rooms']" in res.stderr and "not in the model ['bathrooms']" in res.stderr
        assert "Traceback" not in res.stderr
        assert "dask:" not in res.stderr  # refused before a cluster started
        assert time.perf_counter() - start - startup_seconds < 15
    assert not (d / "s.zarr").exists()


def test_python_estimator_checks_dataframe_names(trained):
    pd = pytest.importorskip("pandas")
    X, y = _regression_table(300, 3)
    frame = pd.DataFrame(X, columns=["lat", "lon", "rooms"])
    model = SASPARegressor(n_bases=8, optimize_hyperparameters=False).fit(frame, y)
    with pytest.raises(ValueError, match="feature names"):
        model.predict(frame[["lon", "lat", "rooms"]])


# -- 2. ingest --like -------------------------------------------------------------------


def _housing_rows(n, seed, categories):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        rows.append([f"{rng.normal():.6f}", categories[i % len(categories)],
                     f"{rng.normal():.6f}", "yes" if rng.random() > 0.5 else "no"])
    return rows


def test_ingest_like_keeps_the_training_encoding(tmp_path):
    header = ["income", "ocean", "age", "label"]
    train = _housing_rows(400, 0, ["INLAND", "NEAR BAY", "ISLAND", "<1H OCEAN"])
    test = _housing_rows(50, 1, ["INLAND", "NEAR BAY", "<1H OCEAN"])  # no ISLAND
    _write_csv(tmp_path / "train.csv", header, train)
    _write_csv(tmp_path / "test.csv", header, test)
    jobs.ingest(tmp_path / "train.csv", tmp_path / "train.zarr", text="onehot")
    # the defect: each file's own categories give the test split one column fewer
    jobs.ingest(tmp_path / "test.csv", tmp_path / "own.zarr", text="onehot")
    own = zarr.open_group(str(tmp_path / "own.zarr"), mode="r")
    assert own["X"].shape[1] == 5
    res = _saspa("ingest", tmp_path / "test.csv", "--out", tmp_path / "test.zarr",
                 "--like", tmp_path / "train.zarr")
    assert res.returncode == 0, res.stderr
    train_store = zarr.open_group(str(tmp_path / "train.zarr"), mode="r")
    test_store = zarr.open_group(str(tmp_path / "test.zarr"), mode="r")
    assert test_store.attrs["columns"] == train_store.attrs["columns"]
    assert test_store.attrs["target_classes"] == ["no", "yes"]
    # the encoding written out by hand
    cats = ["<1H OCEAN", "INLAND", "ISLAND", "NEAR BAY"]
    expected = np.array([[float(r[0]), *[float(r[1] == c) for c in cats], float(r[2])]
                         for r in test])
    assert train_store.attrs["columns"] == ["income", *[f"ocean={c}" for c in cats], "age"]
    np.testing.assert_array_equal(test_store["X"][...], expected)
    np.testing.assert_array_equal(test_store["y"][...],
                                  [float(r[3] == "yes") for r in test])


def test_ingest_like_unseen_category(tmp_path):
    header = ["income", "ocean", "age", "label"]
    _write_csv(tmp_path / "train.csv", header, _housing_rows(100, 0, ["INLAND", "NEAR BAY"]))
    new = _housing_rows(10, 1, ["INLAND", "MARS"])
    _write_csv(tmp_path / "new.csv", header, new)
    jobs.ingest(tmp_path / "train.csv", tmp_path / "train.zarr", text="onehot")
    res = _saspa("ingest", tmp_path / "new.csv", "--out", tmp_path / "new.zarr",
                 "--like", tmp_path / "train.zarr")
    assert res.returncode == 1 and "categories not seen" in res.stderr and "MARS" in res.stderr
    assert not (tmp_path / "new.zarr").exists()
    res = _saspa("ingest", tmp_path / "new.csv", "--out", tmp_path / "new.zarr",
                 "--like", tmp_path / "train.zarr", "--unknown", "ignore")
    assert res.returncode == 0, res.stderr
    X = zarr.open_group(str(tmp_path / "new.zarr"), mode="r")["X"][...]
    mars = np.array([r[1] == "MARS" for r in new])
    np.testing.assert_array_equal(X[mars, 1:3], 0.0)  # all-zero one-hot
    np.testing.assert_array_equal(X[~mars, 1], 1.0)   # INLAND
    # a file without the target column: a store to score, without y
    _write_csv(tmp_path / "x.csv", header[:3], [r[:3] for r in new if r[1] != "MARS"])
    res = _saspa("ingest", tmp_path / "x.csv", "--out", tmp_path / "x.zarr",
                 "--like", tmp_path / "train.zarr")
    assert res.returncode == 0 and "no target column" in res.stdout
    assert "y" not in zarr.open_group(str(tmp_path / "x.zarr"), mode="r").array_keys()


def test_parquet_ingest_equals_csv_ingest(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = _housing_rows(300, 4, ["A", "B", "C"])
    _write_csv(tmp_path / "t.csv", ["income", "kind", "age", "label"], rows)
    table = pa.table({"income": [float(r[0]) for r in rows], "kind": [r[1] for r in rows],
                      "age": [float(r[2]) for r in rows], "label": [r[3] for r in rows]})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=64)
    for name in ("t.csv", "t.parquet"):
        res = _saspa("ingest", tmp_path / name, "--out", tmp_path / f"{name}.zarr",
                     "--text", "onehot", "--chunk-rows", 100)
        assert res.returncode == 0, res.stderr
    a = zarr.open_group(str(tmp_path / "t.csv.zarr"), mode="r")
    b = zarr.open_group(str(tmp_path / "t.parquet.zarr"), mode="r")
    np.testing.assert_array_equal(a["X"][...], b["X"][...])
    np.testing.assert_array_equal(a["y"][...], b["y"][...])
    assert a.attrs["columns"] == b.attrs["columns"]
    assert a.attrs["fingerprint"] == b.attrs["fingerprint"]


# -- 3. split ---------------------------------------------------------------------------


def test_split_is_seeded_chunkwise_and_exact(tmp_path):
    rng = np.random.default_rng(5)
    data = np.column_stack([np.arange(5000.0), rng.normal(size=5000), rng.integers(0, 2, 5000)])
    np.save(tmp_path / "d.npy", data)
    jobs.ingest(tmp_path / "d.npy", tmp_path / "d.zarr", chunk_rows=700)
    res = _saspa("split", tmp_path / "d.zarr", "--test-fraction", 0.25, "--seed", 3)
    assert res.returncode == 0, res.stderr
    train = zarr.open_group(str(tmp_path / "d-train.zarr"), mode="r")
    test = zarr.open_group(str(tmp_path / "d-test.zarr"), mode="r")
    ids_train, ids_test = train["X"][:, 0], test["X"][:, 0]
    # a partition of the rows, each part in the source order
    np.testing.assert_array_equal(np.sort(np.concatenate([ids_train, ids_test])),
                                  np.arange(5000.0))
    assert np.all(np.diff(ids_train) > 0) and np.all(np.diff(ids_test) > 0)
    np.testing.assert_array_equal(test["y"][...], data[ids_test.astype(int), 2])
    # the assignment, recomputed independently: uniform draws seeded by (seed, chunk)
    expected = np.concatenate([np.random.default_rng([3, i]).random(min(700, 5000 - s))
                               for i, s in enumerate(range(0, 5000, 700))]) < 0.25
    np.testing.assert_array_equal(ids_test, np.flatnonzero(expected).astype(float))
    # binomial: 1250 expected, sd 31
    assert abs(len(ids_test) - 1250) < 4 * 31
    assert test.attrs["split"]["seed"] == 3 and test.attrs["columns"] == ["x0", "x1"]
    assert test["X"].chunks[0] == 700
    again = _saspa("split", tmp_path / "d.zarr", "--test-fraction", 0.25, "--seed", 3)
    assert again.returncode == 1 and "exists" in again.stderr
    res = _saspa("split", tmp_path / "d.zarr", "--test-out", tmp_path / "d.zarr")
    assert res.returncode == 1 and "different paths" in res.stderr


def test_split_is_stable_when_rows_are_appended(tmp_path):
    """Split again after the source grew: old rows keep their part and order, new rows
    come after them (what a nightly retrain on the training part needs)."""
    rng = np.random.default_rng(8)
    data = np.column_stack([np.arange(2600.0), rng.normal(size=2600), rng.integers(0, 2, 2600)])
    for name, rows in (("small", 2000), ("grown", 2600)):
        np.save(tmp_path / f"{name}.npy", data[:rows])
        jobs.ingest(tmp_path / f"{name}.npy", tmp_path / f"{name}.zarr", chunk_rows=700)
        assert _saspa("split", tmp_path / f"{name}.zarr", "--seed", 4).returncode == 0
    for part in ("train", "test"):
        old = zarr.open_group(str(tmp_path / f"small-{part}.zarr"), mode="r")["X"][:, 0]
        new = zarr.open_group(str(tmp_path / f"grown-{part}.zarr"), mode="r")["X"][:, 0]
        np.testing.assert_array_equal(new[:len(old)], old)
        assert np.all(new[len(old):] >= 2000)


def test_retrain_refuses_rows_that_are_not_the_old_ones(trained, tmp_path):
    d = trained
    X, y = _regression_table(3000, 0)
    order = np.random.default_rng(1).permutation(3000)
    _write_csv(tmp_path / "shuffled.csv", ["lat", "lon", "rooms", "value"],
               np.column_stack([X, y])[order].tolist())
    jobs.ingest(tmp_path / "shuffled.csv", tmp_path / "s.zarr")
    res = _saspa("retrain", d / "m.zarr", tmp_path / "s.zarr", "--out", tmp_path / "m2.zarr",
                 "--workers", 1)
    assert res.returncode == 1 and "differs from the row the model was trained on" in res.stderr
    assert not (tmp_path / "m2.zarr").exists()
    # the same rows with more appended: accepted
    X2, y2 = _regression_table(200, 5)
    _write_csv(tmp_path / "grown.csv", ["lat", "lon", "rooms", "value"],
               np.column_stack([np.vstack([X, X2]), np.concatenate([y, y2])]).tolist())
    jobs.ingest(tmp_path / "grown.csv", tmp_path / "g.zarr", chunk_rows=1000)
    res = _saspa("retrain", d / "m.zarr", tmp_path / "g.zarr", "--out", tmp_path / "m3.zarr")
    assert res.returncode == 0, res.stderr
    assert "3000 old rows warm-started, 200 new rows" in res.stderr


# -- 4. the task ------------------------------------------------------------------------


def test_task_is_inferred_and_many_classes_refused(tmp_path, startup_seconds):
    rng = np.random.default_rng(6)
    X = rng.normal(size=(4000, 2))
    prices = np.round(rng.uniform(1e4, 5e5, 4000), -2)  # integer prices, 3000+ values
    np.save(tmp_path / "p.npy", np.column_stack([X, prices]))
    jobs.ingest(tmp_path / "p.npy", tmp_path / "p.zarr")
    start = time.perf_counter()
    res = _saspa("train", "--fixed-hyperparameters", tmp_path / "p.zarr", "--out", tmp_path / "m.zarr",
                 "--task", "classification")
    assert res.returncode == 1 and "distinct values" in res.stderr
    assert "--max-classes" in res.stderr and "dask:" not in res.stderr
    assert time.perf_counter() - start - startup_seconds < 15
    assert not (tmp_path / "m.zarr").exists()
    res = _saspa("train", "--fixed-hyperparameters", tmp_path / "p.zarr", "--out", tmp_path / "m.zarr", "--n-bases", 8,
                 "--max-sweeps", 50)
    assert res.returncode == 0, res.stderr
    assert "task: regression (inferred" in res.stderr
    assert load_model(tmp_path / "m.zarr").__class__.__name__ == "SASPARegressor"


def test_task_rule(tmp_path):
    """The stated rule, on targets built to sit on each side of it."""
    import dask.array as da

    from saspa_dask.jobs.errors import JobError
    from saspa_dask.jobs.task import choose_task, summarise_target

    def task_of(values, **kw):
        return choose_task(summarise_target(da.from_array(np.asarray(values, float),
                                                          chunks=7)), **kw)[0]

    assert task_of([0, 1] * 10) == "classification"
    assert task_of(np.arange(40) % 20) == "classification"      # 20 integer values
    assert task_of(np.arange(42) % 21) == "regression"          # 21
    assert task_of([0.5, 1.0, 2.0] * 5) == "regression"         # not integers
    assert task_of(np.arange(300) % 150, task="classification", max_classes=150) \
        == "classification"
    with pytest.raises(JobError, match="150 distinct values"):
        task_of(np.arange(300) % 150, task="classification")
    with pytest.raises(JobError, match="NaN or infinite"):
        task_of([0, 1, np.nan])
    text = summarise_target(da.from_array(np.array([0.0, 1.0, 2.0]), chunks=2),
                            text_labels=["a", "b", "c"])
    assert choose_task(text)[0] == "classification"


# -- 5. interrupts ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("big")
    # few rows: the job's EP never converges (--tol 1e-300), so it is still sweeping
    # whenever the signal comes
    assert _saspa("make-data", d / "b.npy", "--rows", 8_000).returncode == 0
    jobs.ingest(d / "b.npy", d / "b.zarr")
    return d


def _wait_for_sweep(proc, log, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if "sweep" in log.read_text():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_interrupt_cleans_up_and_keeps_the_old_model(big_store, tmp_path, how):
    from saspa_dask import SASPAClassifier

    d = big_store
    old = tmp_path / "m.zarr"  # an old model store at --out: replaced only on success
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    SASPAClassifier(n_bases=4, optimize_hyperparameters=False).fit(X, X[:, 0] > 0).save(old)
    before = {p.relative_to(old): p.read_bytes() for p in old.rglob("*") if p.is_file()}
    log = tmp_path / "err.log"
    work = tmp_path / "work"
    with open(log, "w") as err:
        proc = subprocess.Popen([SASPA, "train", "--fixed-hyperparameters", str(d / "b.zarr"), "--out", str(old),
                                 "--overwrite", "--n-bases", "64", "--work-dir", str(work),
                                 "--workers", "1", "--tol", "1e-300",
                                 "--max-sweeps", "1000000"],
                                stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
        assert _wait_for_sweep(proc, log), log.read_text()
        if how == "SIGTERM":  # what timeout, systemd and Airflow send: to the process
            proc.send_signal(signal.SIGTERM)
        else:  # Ctrl-C: the terminal signals the whole process group
            os.killpg(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=120)
    text = log.read_text()
    assert code == (143 if how == "SIGTERM" else 130), text
    assert "Traceback" not in text and "Error" not in text
    assert text.strip().splitlines()[-1].startswith(f"saspa: interrupted ({how})")
    assert {p.relative_to(old): p.read_bytes() for p in old.rglob("*") if p.is_file()} == before
    assert list(work.iterdir()) == []  # no saspa-sites-*, no scratch folder
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".m.zarr.partial")]


# -- 6. cluster/start-local.sh ----------------------------------------------------------

SCRIPT = Path(__file__).resolve().parents[1] / "cluster" / "start-local.sh"


def _children_of(pid):
    import psutil

    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _listening(process):
    """A process's listening TCP sockets; none when it has just exited (the start-up
    script's short-lived helpers come and go while we look)."""
    import psutil

    try:
        return [c for c in process.net_connections("tcp") if c.status == psutil.CONN_LISTEN]
    except psutil.NoSuchProcess:
        return []


def test_start_local_stops_cleanly_from_a_script(tmp_path):
    """Started and stopped with ``kill $!`` by a script: the script survives, the
    cluster's processes end, no crash, and the address was printed."""
    caller = tmp_path / "caller.sh"
    caller.write_text(f"""#!/bin/bash
bash {SCRIPT} --workers 1 --port 0 --scheduler-file {tmp_path}/s.json > {tmp_path}/out 2> {tmp_path}/err &
pid=$!
for i in $(seq 300); do grep -q '^scheduler:' {tmp_path}/out 2>/dev/null && break; sleep 0.1; done
echo "$pid" > {tmp_path}/pid
kill $pid
wait $pid
echo "caller survived, script exit $?"
""")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    res = subprocess.run(["bash", str(caller)], capture_output=True, text=True, timeout=120,
                         env=env)
    assert res.returncode == 0, res.stderr
    assert "caller survived, script exit 0" in res.stdout
    out = (tmp_path / "out").read_text()
    assert out.startswith("scheduler: tcp://127.0.0.1:") and "--scheduler tcp://" in out
    err = (tmp_path / "err").read_text()
    assert "Segmentation fault" not in err and "Segmentation fault" not in res.stderr
    import psutil

    time.sleep(1)
    leftover = [p for p in psutil.process_iter(["cmdline"])
                if str(tmp_path / "s.json") in " ".join(p.info["cmdline"] or [])]
    assert leftover == []
    assert not (tmp_path / "s.json").exists()


def test_start_local_listens_on_loopback_only(tmp_path):
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.Popen(["bash", str(SCRIPT), "--workers", "1", "--port", "0",
                             "--scheduler-file", str(tmp_path / "s.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env, start_new_session=True)
    try:
        assert proc.stdout.readline().startswith("scheduler: tcp://127.0.0.1:")
        deadline = time.time() + 60
        while time.time() < deadline:  # until the worker has started listening
            sockets = [c for p in _children_of(proc.pid) for c in _listening(p)]
            if len(sockets) >= 4:
                break
            time.sleep(0.5)
        assert sockets and {c.laddr.ip for c in sockets} == {"127.0.0.1"}, sockets
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def test_start_local_clear_failures(tmp_path):
    import socket

    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        start = time.perf_counter()
        res = subprocess.run(["bash", str(SCRIPT), "--port", str(port)], capture_output=True,
                             text=True, timeout=60, env=env)
    assert res.returncode == 1 and f"port {port} on 127.0.0.1 is taken" in res.stderr
    assert time.perf_counter() - start < 10
    # no dask on PATH, no venv beside the script: said at once
    bare = {k: v for k, v in os.environ.items() if k != "DASK"}
    bare["PATH"] = "/usr/bin:/bin"
    start = time.perf_counter()
    res = subprocess.run(["bash", str(SCRIPT), "--port", "0"], capture_output=True,
                         text=True, timeout=60, env={**bare, "DASK": str(tmp_path / "nodask")})
    assert res.returncode == 1 and "no 'dask' command" in res.stderr
    assert time.perf_counter() - start < 5


# -- what users expect ------------------------------------------------------------------


def test_help_is_fast_and_every_option_is_explained():
    res = subprocess.run([sys.executable, "-c", "import sys, saspa_dask.cli; "
                          "print(sorted(m for m in ('numpy', 'dask', 'sklearn', 'scipy') "
                          "if m in sys.modules))"], capture_output=True, text=True)
    assert res.stdout.strip() == "[]", res.stderr
    # fast because nothing numerical is imported (checked above), not by a clock
    assert _saspa("train", "--help").returncode == 0
    import click

    from saspa_dask.cli import main

    for name, command in main.commands.items():
        for param in command.params:
            if isinstance(param, click.Option) and param.name != "help":
                assert param.help, f"saspa {name} {param.opts[0]} has no help text"


def test_score_store_records_classes_and_labels(tmp_path, threads_client):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1500, 2))
    label = np.where(X[:, 0] > 0.3, "good", np.where(X[:, 1] > 0, "bad", "ugly"))
    _write_csv(tmp_path / "c.csv", ["a", "b", "label"],
               [[f"{x[0]:.6f}", f"{x[1]:.6f}", lab] for x, lab in zip(X, label)])
    jobs.ingest(tmp_path / "c.csv", tmp_path / "c.zarr")
    res = _saspa("train", "--fixed-hyperparameters", tmp_path / "c.zarr", "--out",
                 tmp_path / "m.zarr", "--n-bases", 12)  # a small job: in this process
    assert res.returncode == 0, res.stderr
    assert "one-vs-rest over 3 classes" in res.stderr and "class 3 of 3" in res.stderr
    info = _saspa("info", tmp_path / "m.zarr")
    assert "class_labels: ['bad', 'good', 'ugly']" in info.stdout
    assert "columns: a, b" in info.stdout and "target: label" in info.stdout
    assert "training time:" in info.stdout and "k-means: converged" in info.stdout
    res = _saspa("score", tmp_path / "m.zarr", tmp_path / "c.zarr", "--out",
                 tmp_path / "s.zarr", "--workers", 2)
    assert res.returncode == 0, res.stderr
    scores = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    assert scores.attrs["proba_columns"] == ["bad", "good", "ugly"]
    proba, predicted = scores["proba"][...], scores["label"][...]
    np.testing.assert_array_equal(predicted, proba.argmax(axis=1).astype(float))
    codes = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")["y"][...]
    assert np.mean(predicted == codes) > 0.9
    # one chunk in the input, two workers: scored in two tasks
    assert len(scores["done"][...]) == 2
    # the job function behind --format csv, in this process
    jobs.score(tmp_path / "m.zarr", tmp_path / "c.zarr", tmp_path / "s.csv", format="csv",
               client=threads_client)
    with open(tmp_path / "s.csv") as handle:
        rows = list(csv.reader(handle))
    assert rows[0][-4:] == ["proba[bad]", "proba[good]", "proba[ugly]", "label"]
    names = np.array(["bad", "good", "ugly"])
    assert [r[-1] for r in rows[1:]] == list(names[proba.argmax(axis=1)])
    # scored again in another chunking (one worker): equal to BLAS rounding
    np.testing.assert_allclose(np.array([r[-4:-1] for r in rows[1:]], float), proba,
                               rtol=1e-12)
    assert not list(tmp_path.glob(".s.csv*"))


def test_outputs_may_not_overwrite_inputs(trained):
    d = trained

    def files(store):
        return {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file()}

    before = {name: files(d / name) for name in ("m.zarr", "train.zarr")}
    for args in (("score", d / "m.zarr", d / "train.zarr", "--out", d / "train.zarr"),
                 ("score", d / "m.zarr", d / "train.zarr", "--out", d / "m.zarr"),
                 ("train", d / "train.zarr", "--out", d / "train.zarr")):
        res = _saspa(*args, "--overwrite")
        assert res.returncode == 1 and "refusing to overwrite an input" in res.stderr
    assert {name: files(d / name) for name in before} == before  # byte for byte
    assert load_model(d / "m.zarr").n_features_in_ == \
        zarr.open_group(str(d / "train.zarr"), mode="r")["X"].shape[1]


def test_long_python_fits_are_not_silent(capfd):
    """A fit of 50,000 rows or more prints its phases even at verbose=0 (a default
    200,000-row fit must not sit silent for minutes); verbose=False silences it."""
    from saspa_dask import SASPAClassifier
    from saspa_dask.datasets import synthetic_two_class

    X, y = synthetic_two_class(50_000, 3, seed=0)
    SASPAClassifier(n_bases=8, optimize_hyperparameters=False, random_state=0).fit(X, y)
    err = capfd.readouterr().err
    for phase in ("[saspa] SASPAClassifier: 50000 rows x 3 inputs; K-means for 8 bases",
                  "[saspa] bases ready", "[saspa] EP on 50000 rows", "[saspa] done:"):
        assert phase in err, err
    SASPAClassifier(n_bases=8, optimize_hyperparameters=False, random_state=0,
                    verbose=False).fit(X, y)
    assert "[saspa]" not in capfd.readouterr().err
    SASPAClassifier(n_bases=8, optimize_hyperparameters=False,
                    random_state=0).fit(X[:2000], y[:2000])
    assert "[saspa]" not in capfd.readouterr().err  # small fits stay quiet at verbose=0


def test_one_chunk_store_trains_on_both_workers(tmp_path):
    rng = np.random.default_rng(9)
    X = rng.normal(size=(3000, 2))
    np.save(tmp_path / "d.npy", np.column_stack([X, X[:, 0] > 0]))
    jobs.ingest(tmp_path / "d.npy", tmp_path / "d.zarr")
    assert zarr.open_group(str(tmp_path / "d.zarr"), mode="r")["X"].nchunks == 1
    res = _saspa("train", "--fixed-hyperparameters", tmp_path / "d.zarr", "--out",
                 tmp_path / "m.zarr", "--n-bases", 8, "--workers", 2)
    assert res.returncode == 0, res.stderr
    assert "data: 2 chunks (one task each) over 2 workers" in res.stderr
    # and the model records the store's fingerprint, not the spread chunks'
    model = load_model(tmp_path / "m.zarr")
    assert model.data_fingerprint_ == zarr.open_group(str(tmp_path / "d.zarr"),
                                                      mode="r").attrs["fingerprint"]


def test_parquet_export_equals_the_score_store(trained, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    d = trained
    res = _saspa("score", d / "m.zarr", d / "train.zarr", "--out", tmp_path / "s.zarr",
                 "--workers", 1)
    assert res.returncode == 0, res.stderr
    res = _saspa("score", d / "m.zarr", d / "train.zarr", "--out", tmp_path / "s.parquet",
                 "--format", "parquet")
    assert res.returncode == 0, res.stderr
    table = pq.read_table(tmp_path / "s.parquet")
    store = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    assert table.column_names == ["row", "mean", "variance", "std", "lower", "upper"]
    for name in ("std", "lower", "upper"):
        np.testing.assert_array_equal(table.column(name).to_numpy(), store[name][...])
    np.testing.assert_array_equal(table.column("row").to_numpy(), store["row"][...])
    np.testing.assert_array_equal(store["row"][...], np.arange(store["row"].shape[0]))
    np.testing.assert_array_equal(table.column("mean").to_numpy(), store["mean"][...])
    np.testing.assert_array_equal(table.column("variance").to_numpy(), store["variance"][...])
    np.testing.assert_array_equal(table.column("std").to_numpy(), store["std"][...])
    # a new observation's standard deviation: the latent variance plus the noise's
    noise = load_model(d / "m.zarr").noise_variance_
    np.testing.assert_allclose(store["std"][...], np.sqrt(store["variance"][...] + noise),
                               rtol=1e-12)
