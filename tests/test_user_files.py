"""Nothing a user owns is replaced, opened as data or believed when edited (issue 57).

Each case was reproduced on the code before this test: ``--overwrite`` emptied the
working directory, a folder of the user's files, the job's own folder; a FIFO chunk
hung a shared cluster; a ``/dev/zero`` chunk was read without end; a model store
without its checksum and a data store with swapped column names were read and
believed; swap recovery deleted stores without a word.  Real ``saspa`` processes
where the issue asks for them (and where a process is what is tested: a hang, memory),
the rest in this process (``in_process``), all on real zarr stores on disk.
"""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

import in_process
from conftest import start_cluster, stop_cluster
from saspa_dask import jobs, load_model
from saspa_dask.files.atomic import reading
from saspa_dask.files.errors import StoreError
from saspa_dask.files.names import replaced

SASPA = str(Path(sys.executable).parent / "saspa")


def _run(*args, cwd=None, timeout=300):
    """A real ``saspa`` process."""
    return subprocess.run([SASPA, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


def _error_line(res, *fragments):
    """Exit 1 and the one ``Error:`` line naming the problem, no traceback."""
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1, res.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]
    return errors[0]


def _tree(folder):
    """Every file under ``folder`` with its bytes (what must survive)."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(Path(folder).rglob("*")) if p.is_file()}


def _photos(folder):
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    (folder / "notes.txt").write_text("keep me")
    return _tree(folder)


@pytest.fixture(scope="module")
def problem(tmp_path_factory, threads_client):
    """A two-class data store in 300-row chunks and a model trained on it."""
    d = tmp_path_factory.mktemp("owned")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 3))
    np.save(d / "d.npy", np.column_stack([X, (X[:, 0] > 0).astype(float)]))
    jobs.ingest(d / "d.npy", d / "d.zarr", chunk_rows=300)
    jobs.train(d / "d.zarr", d / "m.zarr", n_bases=6, optimize_hyperparameters=False,
               client=threads_client)
    return d


def _copy_store(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


# -- R1: --overwrite never replaces what saspa did not write ------------------------------

def test_score_to_the_working_directory_with_overwrite_keeps_every_file(problem, tmp_path):
    work = tmp_path / "x"
    before = _photos(work)
    _copy_store(problem / "m.zarr", work / "other-model.zarr")
    before = _tree(work)
    res = _run("score", problem / "m.zarr", problem / "d.zarr", "--out", ".", "--overwrite",
               cwd=work)
    line = _error_line(res, "the working directory", "choose another path")
    assert "--overwrite" not in line
    assert _tree(work) == before


@pytest.mark.parametrize("command", ["score", "train", "ingest"])
def test_overwrite_of_a_folder_of_the_users_files_is_refused(problem, tmp_path, command):
    photos = tmp_path / "photos"
    before = _photos(photos)
    args = {"score": ("score", problem / "m.zarr", problem / "d.zarr"),
            "train": ("train", problem / "d.zarr", "--n-bases", 4,
                      "--fixed-hyperparameters"),
            "ingest": ("ingest", problem / "d.npy")}[command]
    res = in_process.saspa(*args, "--out", photos, "--overwrite")
    line = _error_line(res, str(photos), "a folder", "choose another path")
    assert "--overwrite" not in line
    assert _tree(photos) == before
    # without --overwrite the answer is the same: it never advises the deletion
    res = in_process.saspa(*args, "--out", photos)
    assert "--overwrite" not in _error_line(res, "a folder")
    assert _tree(photos) == before


def test_a_store_of_another_kind_or_holding_other_files_is_not_replaced(problem, tmp_path):
    model = _copy_store(problem / "m.zarr", tmp_path / "m.zarr")
    before = _tree(model)
    res = in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out", model,
                           "--overwrite")
    _error_line(res, "a model store, not a score store")
    assert _tree(model) == before
    (model / "thesis.tex").write_text("years of work")  # a user's file put in a store
    before = _tree(model)
    res = in_process.saspa("train", problem / "d.zarr", "--out", model, "--overwrite",
                           "--n-bases", 4, "--fixed-hyperparameters")
    _error_line(res, "files that are not the store's", "thesis.tex")
    assert _tree(model) == before
    # a folder holding an input is refused too (the data store inside it)
    res = in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out",
                           problem, "--overwrite")
    _error_line(res, "a folder holding the data store")
    assert (problem / "d.zarr" / "zarr.json").is_file()


def test_saspa_run_never_replaces_the_job_file_or_its_folder(problem, tmp_path):
    """``out = "."``, ``out = ""`` (both the job's folder) and ``out`` = the job file
    itself, with ``overwrite = true``: refused, the folder and the job file as they
    were (one real ``saspa run``, the others in this process)."""
    folder = tmp_path / "jobs"
    _photos(folder)
    for k, out in enumerate((".", "", "job0.toml")):
        job = folder / f"job{k}.toml"
        job.write_text(f'[job]\nname = "j{k}"\n[[steps]]\nkind = "score"\n'
                       f'model = "{problem / "m.zarr"}"\ndata = "{problem / "d.zarr"}"\n'
                       f'out = "{out}"\noverwrite = true\n')
    before = _tree(folder)
    for k in range(3):
        run = _run if k == 0 else in_process.saspa
        res = run("run", folder / f"job{k}.toml", cwd=tmp_path)
        assert res.returncode != 0, (res.stdout, res.stderr)
        assert "job" in res.stderr and "choose another path" in res.stderr, res.stderr
        assert _tree(folder) == before
    # a job writing beside its file, to a new name, still runs
    (folder / "job3.toml").write_text(
        f'[job]\nname = "j3"\n[[steps]]\nkind = "score"\nmodel = "{problem / "m.zarr"}"\n'
        f'data = "{problem / "d.zarr"}"\nout = "s.zarr"\noverwrite = true\n')
    res = in_process.saspa("run", folder / "job3.toml")
    assert res.returncode == 0, res.stderr
    assert zarr.open_group(str(folder / "s.zarr"), mode="r").attrs["complete"] is True


def test_the_python_jobs_follow_the_same_rule(problem, tmp_path, threads_client):
    photos = tmp_path / "photos"
    before = _photos(photos)
    with pytest.raises(ValueError, match="a folder, not a score store"):
        jobs.score(problem / "m.zarr", problem / "d.zarr", photos, overwrite=True,
                   client=threads_client)
    with pytest.raises(ValueError, match="a folder, not a data store"):
        jobs.ingest(problem / "d.npy", photos, overwrite=True)
    assert _tree(photos) == before


# -- R2: devices, FIFOs and sockets are never outputs; links are replaced as links --------

def test_a_fifo_or_socket_output_is_refused_and_left_as_it_is(problem, tmp_path):
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    res = _run("score", problem / "m.zarr", problem / "d.zarr", "--out", fifo, "--format",
               "csv", "--overwrite", timeout=120)
    _error_line(res, "a FIFO", "choose another path")
    assert Path(fifo).is_fifo()
    sock_path = tmp_path / "sock.csv"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(sock_path))
        res = in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out",
                               sock_path, "--format", "csv", "--overwrite")
        _error_line(res, "a socket")
        assert sock_path.is_socket()


def test_a_linked_output_is_replaced_as_a_link_and_its_target_kept(problem, tmp_path):
    photos = tmp_path / "photos"
    before = _photos(photos)
    link = tmp_path / "scores.zarr"
    link.symlink_to(photos)
    res = in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out", link)
    assert "exists" in _error_line(res)
    res = in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out", link,
                           "--overwrite")
    assert res.returncode == 0, res.stderr
    assert not link.is_symlink() and (link / "zarr.json").is_file()
    assert _tree(photos) == before
    assert not list(tmp_path.glob(".scores.zarr.*"))  # no leftover of the swap
    # a link to a file, replaced by a CSV export: the link goes, the file stays
    kept = tmp_path / "kept.csv"
    kept.write_text("a,b\n1,2\n")
    out = tmp_path / "out.csv"
    out.symlink_to(kept)
    res = in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out", out,
                           "--format", "csv", "--overwrite")
    assert res.returncode == 0, res.stderr
    assert not out.is_symlink() and out.read_text().startswith("row,")
    assert kept.read_text() == "a,b\n1,2\n"


# -- R3, R4: a store's files are read only when regular, and bounded ----------------------

def _with_chunk(problem, tmp_path, make):
    data = _copy_store(problem / "d.zarr", tmp_path / "d.zarr")
    chunk = data / "X" / "c" / "1" / "0"
    chunk.unlink()
    make(chunk)
    return data, chunk


def test_a_fifo_chunk_ends_the_job_on_a_shared_cluster_and_the_next_job_runs(
        problem, tmp_path):
    data, chunk = _with_chunk(problem, tmp_path, os.mkfifo)
    (tmp_path / "cluster").mkdir()
    cluster = start_cluster(tmp_path / "cluster")
    try:
        start = time.monotonic()
        res = _run("score", problem / "m.zarr", data, "--out", tmp_path / "s.zarr",
                   "--scheduler", cluster.address, "--timeout", 10, timeout=120)
        took = time.monotonic() - start
        _error_line(res, str(chunk), "a FIFO")
        assert took < 60, took  # the job's own process start included
        # no worker thread is left blocked: the next job on the cluster runs
        res = _run("score", problem / "m.zarr", problem / "d.zarr", "--out",
                   tmp_path / "s2.zarr", "--scheduler", cluster.address, timeout=120)
        assert res.returncode == 0, res.stderr
    finally:
        stop_cluster(cluster)
    assert not (tmp_path / "s.zarr").exists() or not zarr.open_group(
        str(tmp_path / "s.zarr"), mode="r").attrs.get("complete")


def test_a_chunk_linked_to_dev_zero_is_refused_without_reading_it(problem, tmp_path):
    import psutil

    data, chunk = _with_chunk(problem, tmp_path, lambda c: c.symlink_to("/dev/zero"))
    proc = subprocess.Popen([SASPA, "score", str(problem / "m.zarr"), str(data), "--out",
                             str(tmp_path / "s.zarr")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    watched, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    out, err = proc.communicate(timeout=120)
    _error_line(subprocess.CompletedProcess([], proc.returncode, out, err), str(chunk),
                "a device")
    assert peak < 512 * 2**20, peak


def test_a_fifo_source_file_is_refused_before_it_is_opened(tmp_path):
    source = tmp_path / "rows.csv"
    os.mkfifo(source)
    res = in_process.saspa("ingest", source, "--out", tmp_path / "d.zarr")
    _error_line(res, str(source), "a FIFO")


# -- R6, R7: checksums that cannot be removed, attributes covered ------------------------

def test_a_model_store_without_its_checksum_is_refused_by_every_reader(problem, tmp_path):
    model = _copy_store(problem / "m.zarr", tmp_path / "m.zarr")
    group = zarr.open_group(str(model), mode="r+")
    del group.attrs["checksum"]
    group.attrs["y_mean"] = 1e308  # the edit the missing checksum would let through
    res = _run("info", model)
    _error_line(res, "checksum is missing")
    res = in_process.saspa("score", model, problem / "d.zarr", "--out", tmp_path / "s.zarr")
    _error_line(res, "checksum is missing")
    with pytest.raises(StoreError, match="checksum is missing"):
        load_model(model)
    # a store of a format from before checksums loads, and says it cannot be checked
    old = _copy_store(problem / "m.zarr", tmp_path / "old.zarr")
    group = zarr.open_group(str(old), mode="r+")
    del group.attrs["checksum"]
    group.attrs["format_version"] = 4
    with pytest.warns(UserWarning, match="without a checksum: its content cannot be checked"):
        assert load_model(old).n_features_in_ == 3


def _edited(problem, tmp_path, name, edit):
    data = _copy_store(problem / "d.zarr", tmp_path / name)
    group = zarr.open_group(str(data), mode="r+")
    attrs = dict(group.attrs)
    edit(group, attrs)
    return data


@pytest.mark.parametrize("case", ["swapped columns", "empty attributes", "format 9",
                                  "no fingerprint", "no checksum"])
def test_a_data_store_with_edited_attributes_is_refused(problem, tmp_path, case):
    def edit(group, attrs):
        if case == "swapped columns":
            group.attrs["columns"] = attrs["columns"][::-1]
        elif case == "empty attributes":
            for key in attrs:
                del group.attrs[key]
        elif case == "format 9":
            group.attrs["format_version"] = 9
        elif case == "no fingerprint":
            del group.attrs["fingerprint"]
        else:
            del group.attrs["checksum"]

    data = _edited(problem, tmp_path, "d.zarr", edit)
    expected = {"swapped columns": "differ from the checksum",
                "empty attributes": "attributes were removed or changed",
                "format 9": "format version 9", "no fingerprint": "fingerprint is missing",
                "no checksum": "checksum is missing"}[case]
    run = _run if case == "swapped columns" else in_process.saspa
    res = run("score", problem / "m.zarr", data, "--out", tmp_path / "s.zarr")
    _error_line(res, str(data), expected)
    assert not (tmp_path / "s.zarr").exists()
    res = in_process.saspa("info", data)
    _error_line(res, expected)


def test_a_complete_score_stores_labels_are_sealed(problem, tmp_path):
    scores = tmp_path / "s.zarr"
    assert in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out",
                            scores).returncode == 0
    zarr.open_group(str(scores), mode="r+").attrs["class_labels"] = ["no", "yes"]
    from saspa_dask.storage.export import export_scores

    with pytest.raises(StoreError, match="differ from the checksum"):
        export_scores(scores, tmp_path / "s.csv", "csv")
    assert not (tmp_path / "s.csv").exists()


# -- E14: swap recovery keeps every store it did not choose ------------------------------

def test_swap_recovery_keeps_the_stores_it_did_not_choose_and_names_them(problem, tmp_path):
    path = tmp_path / "v1.zarr"
    first = _copy_store(problem / "m.zarr", replaced(path))
    time.sleep(0.01)
    second = _copy_store(problem / "m.zarr", replaced(path))
    (first / "marker-first").write_text("1")
    (second / "marker-second").write_text("2")
    res = _run("info", path)  # the first reader recovers, and says what it kept
    assert (path / "marker-second").is_file()  # the latest swap's store restored
    kept = tmp_path / "v1.zarr.older-1"
    assert (kept / "marker-first").read_text() == "1"
    assert str(kept) in res.stderr, res.stderr
    assert not list(tmp_path.glob(".v1.zarr.replaced-*"))


def test_a_reader_of_a_recovered_store_in_python_is_warned(problem, tmp_path):
    path = tmp_path / "v2.zarr"
    for _ in range(2):
        _copy_store(problem / "d.zarr", replaced(path))
        time.sleep(0.01)
    with pytest.warns(UserWarning, match="v2.zarr.older-1"):
        with reading(path):
            pass
    assert json.loads((path / "zarr.json").read_text())["attributes"]["format"] == "saspa-data"


# -- the low items: tables read as written, messages that name what the user named ------

def _ingest_error(tmp_path, text, *args, name="t.csv"):
    source = tmp_path / name
    if isinstance(text, bytes):
        source.write_bytes(text)
    else:
        source.write_text(text)
    res = in_process.saspa("ingest", source, "--out", tmp_path / "t.zarr", *args)
    return _error_line(res, str(source))


def test_numbers_are_ascii_digits_only(tmp_path):
    """Python's float reads "1_000" as 1000 and "３" (a full-width digit) as 3; a table
    means them as text."""
    line = _ingest_error(tmp_path, "a,b,y\n1_000,2,0\n5,4,1\n5,6,0\n7,8,1\n")
    assert "column 'a' holds numbers (3 rows) and text (1 row, e.g. '1_000')" in line
    line = _ingest_error(tmp_path, "a,b,y\n\uff13,2,0\n5,4,1\n5,6,0\n7,8,1\n")
    assert "column 'a' holds numbers" in line
    from saspa_dask.storage.survey import NUMBER, parse_token

    for token, value in (("1e3", 1000.0), ("-.5", -0.5), ("+2.", 2.0), (" 7 ", 7.0)):
        assert parse_token(token) == (NUMBER, value)


def test_infinities_are_named_as_such(tmp_path):
    line = _ingest_error(tmp_path, "a,b,y\ninf,2,0\n3,-Infinity,1\n1e999,6,0\n7,8,1\n")
    assert "column 'a' has 2 infinite values" in line
    assert "column 'b' has 1 infinite value " in line
    assert "missing value" not in line
    line = _ingest_error(tmp_path, "a,b,y\ninf,2,0\nNA,4,1\n5,6,0\n7,8,1\n")
    assert "column 'a' has 2 missing values (1 of them infinite)" in line


def test_files_that_are_not_tables_are_named(tmp_path):
    import io
    import zipfile

    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("a.npy", b"\x93NUMPY")
    line = _ingest_error(tmp_path, archive.getvalue(), name="a.npz")
    assert "a zip archive" in line and "numpy.save" in line
    line = _ingest_error(tmp_path, b"a,b\n\x00\x01\x02", name="b.csv")
    assert "binary data" in line


def test_an_unterminated_quote_is_reported_where_it_opens(tmp_path):
    line = _ingest_error(tmp_path, 'a,b,y\n1,"x\n2,3,1\n3,4,0\n')
    assert "t.csv:2: a quote opened on this line is never closed" in line
    assert "runs on to line 4" in line
    line = _ingest_error(tmp_path, 'a,b,y\n1,2,0\n3,"4,1\n')
    assert "t.csv:3: a quote opened on this line is never closed" in line


def test_max_categories_above_the_survey_cap_is_not_advised_again(tmp_path):
    rows = "".join(f"v{k},{k % 2}\n" for k in range(1200))
    line = _ingest_error(tmp_path, "a,y\n" + rows, "--text", "onehot",
                         "--max-categories", "2000")
    assert "--max-categories 2000 is more than the 1000" in line
    line = _ingest_error(tmp_path, "a,y\n" + rows, "--text", "onehot")
    assert "--max-categories N keeps the commonest" in line


def test_os_errors_name_the_output_not_the_package_files_beside_it(tmp_path):
    import errno

    from saspa_dask.cli.options import bounded, os_error_text

    inside = tmp_path / ".m.zarr.partial-0123abcd" / "X" / "c" / "0" / (
        "0." + "ab" * 16 + ".partial")
    text = os_error_text(OSError(errno.ENOSPC, "No space left on device", str(inside)))
    assert text == f"{tmp_path / 'm.zarr'}: cannot be written there (no space left on the "\
        "device while writing it)"
    res = _run("ingest", problem_source(tmp_path), "--out", "/proc/self/x.zarr")
    assert _error_line(res) == ("Error: /proc/self/x.zarr: cannot be written there (No "
                                "such file or directory)")
    long = "x" * 100_000
    assert len(bounded(long)) < 2100 and "characters left out" in bounded(long)
    res = in_process.saspa("ingest", problem_source(tmp_path), "--out", tmp_path / long)
    assert res.returncode == 1 and len(res.stderr) < 2200, len(res.stderr)


def problem_source(tmp_path):
    source = tmp_path / "small.npy"
    if not source.exists():
        np.save(source, np.column_stack([np.arange(20.0), np.arange(20) % 2]))
    return source


def test_npy_ingest_does_no_work_per_row():
    """A .npy source is copied a chunk at a time, never row by row: the Python calls
    an ingest makes do not grow with the rows of a chunk (its speed, about 140 MB/s
    here, is in benchmarks/RESULTS.md)."""
    import tempfile

    from saspa_dask.storage.ingestion import ingest

    def calls(rows):
        with tempfile.TemporaryDirectory() as d:
            X = np.random.default_rng(0).normal(size=(rows, 6))
            np.save(f"{d}/s.npy", X)
            count = [0]

            def profile(frame, event, arg):
                if event in ("call", "c_call"):
                    count[0] += 1

            sys.setprofile(profile)
            try:
                ingest(f"{d}/s.npy", f"{d}/s.zarr", chunk_rows=rows)
            finally:
                sys.setprofile(None)
            return count[0]

    small, large = calls(2_000), calls(32_000)
    assert large < 1.05 * small, (small, large)


def test_a_latest_pointer_never_replaces_a_users_file(problem, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("line one\nline two\n")
    res = in_process.saspa("train", problem / "d.zarr", "--out", tmp_path / "m.zarr",
                           "--latest", notes, "--n-bases", 4, "--fixed-hyperparameters")
    _error_line(res, str(notes), "not a model pointer")
    assert notes.read_text() == "line one\nline two\n" and not (tmp_path / "m.zarr").exists()
    pointer = tmp_path / "latest"
    for k in range(2):  # a pointer is moved from one version to the next
        res = in_process.saspa("train", problem / "d.zarr", "--out", tmp_path / f"v{k}.zarr",
                               "--latest", pointer, "--n-bases", 4,
                               "--fixed-hyperparameters")
        assert res.returncode == 0, res.stderr
        assert pointer.read_text().strip() == f"v{k}.zarr"


def test_a_fit_stopped_by_its_cap_warns_in_python_and_says_so_on_the_command_line(
        problem, tmp_path):
    """Issue 58: a budget- or cap-stopped fit said "converged True" and, from Python,
    nothing at all."""
    from saspa_dask import LearningStoppedWarning, SASPAClassifier

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 2))
    with pytest.warns(LearningStoppedWarning, match="max_hyper_iter"):
        SASPAClassifier(n_bases=6, max_hyper_iter=2, random_state=0).fit(X, X[:, 0] > 0)
    res = in_process.saspa("train", problem / "d.zarr", "--out", tmp_path / "m.zarr",
                           "--n-bases", 4, "--max-hyper-iter", 2)
    assert res.returncode == 0, res.stderr
    assert "learning stopped-at-cap" in res.stdout and "EP converged True" in res.stdout


def test_none_is_a_category_in_text_columns_and_missing_in_numeric_ones(tmp_path):
    """Issue 58: "none" was always a missing value; airbag=none and seatbelt=none are
    categories.  In a column of numbers it is still missing, and the store says so."""
    rows = ["airbag,speed,dead"] + [f"{a},{s},{d}" for a, s, d in (
        ("none", "40", 0), ("front", "none", 1), ("side", "35", 0), ("none", "50", 1),
        ("front", "45", 0), ("None", "30", 1))]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    res = in_process.saspa("ingest", tmp_path / "t.csv", "--out", tmp_path / "e.zarr",
                           "--text", "onehot")
    line = _error_line(res, "column 'speed' has 1 missing value",
                       "counting 'none' in a column of numbers")
    assert "airbag" not in line
    res = in_process.saspa("ingest", tmp_path / "t.csv", "--out", tmp_path / "t.zarr",
                           "--text", "onehot", "--missing", "impute")
    assert res.returncode == 0, res.stderr
    attrs = zarr.open_group(str(tmp_path / "t.zarr"), mode="r").attrs
    assert attrs["preprocessing"]["onehot"]["airbag"] == ["None", "front", "none", "side"]
    assert attrs["preprocessing"]["missing_words"] == {"speed": ["none"]}
    X = zarr.open_group(str(tmp_path / "t.zarr"), mode="r")["X"][...]
    columns = attrs["columns"]
    none_col = columns.index("airbag=none")
    np.testing.assert_array_equal(X[:, none_col], [1, 0, 0, 1, 0, 0])
    speed = X[:, columns.index("speed")]
    assert speed[1] == np.median([40, 35, 50, 45, 30])  # imputed, the others as read


def test_a_users_own_file_of_the_format_is_not_replaced(problem, tmp_path):
    """--overwrite replaces a CSV, Parquet or HTML file only when saspa wrote it (an
    export's header, its columns, a report's generator mark), never a user's table or
    page of the same suffix."""
    import pandas as pd

    mine = tmp_path / "mine.csv"
    mine.write_text("name,amount\nann,3\n")
    res = in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out", mine,
                           "--overwrite")
    _error_line(res, "a file, not a CSV file this tool wrote")
    assert mine.read_text() == "name,amount\nann,3\n"
    table = tmp_path / "mine.parquet"
    pd.DataFrame({"name": ["ann"], "amount": [3]}).to_parquet(table)
    before = table.read_bytes()
    res = in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out", table,
                           "--overwrite")
    _error_line(res, "a file, not a Parquet file this tool wrote")
    assert table.read_bytes() == before
    page = tmp_path / "index.html"
    page.write_text("<html><body>my page</body></html>")
    res = in_process.saspa("report", problem / "m.zarr", "--out", page, "--overwrite")
    _error_line(res, "a file, not a HTML page this tool wrote")
    # what saspa wrote there is replaced
    ours = tmp_path / "s.csv"
    for _ in range(2):
        res = in_process.saspa("score", problem / "m.zarr", problem / "d.zarr", "--out",
                               ours, "--overwrite")
        assert res.returncode == 0, res.stderr
    for _ in range(2):
        res = in_process.saspa("report", problem / "m.zarr", "--out", tmp_path / "r.html",
                               "--overwrite")
        assert res.returncode == 0, res.stderr
