"""Files the package makes for itself are never opened through a link or written into
another user's file; a store being read is never replaced under its reader; leftovers of
dead jobs are tidied without disturbing live ones.  Real ``saspa`` processes and real
stores on disk; "another user" is a file given another owner (the tests run as a user
that may ``chown``, else those cases are skipped with the reason)."""

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

import in_process
from conftest import scoring_problem, wait_for_done_flags
from saspa_dask import load_model
from saspa_dask.files import atomic
from saspa_dask.files.errors import StoreError
from saspa_dask.files.locks import reader_lock, writer_lock
from saspa_dask.files.safe import own_directory, write_new_text

BIN = Path(sys.executable).parent
OTHER_UID = 54_321  # a uid no process of the tests runs as


def saspa(*args):
    """``saspa ARGS`` in this process (what these tests check is the files a command
    touches, not the process; the other side of each race is a real process)."""
    return in_process.saspa(*args)


def _can_chown(tmp_path):
    probe = tmp_path / ".probe"
    probe.write_text("")
    try:
        os.chown(probe, OTHER_UID, -1)
        return True
    except PermissionError:
        return False
    finally:
        probe.unlink()


def test_a_planted_lock_link_is_refused_and_its_target_untouched(tmp_path):
    """The hostile pass's case: another user plants .x.zarr.lock as a link to a file of
    yours; saspa score must refuse it, not overwrite the file with the lock's JSON."""
    _, model, data = scoring_problem(tmp_path, 2_000, 500, seed=11)
    precious = tmp_path / "precious.txt"
    precious.write_text("my thesis\n")
    (tmp_path / ".x.zarr.lock").symlink_to(precious)
    res = saspa("score", model, data, "--out", tmp_path / "x.zarr")
    assert res.returncode == 1, res.stderr
    assert "symbolic link" in res.stderr and ".x.zarr.lock" in res.stderr
    assert precious.read_text() == "my thesis\n"
    assert not (tmp_path / "x.zarr").exists()


def test_a_lock_file_of_another_user_is_never_written(tmp_path):
    if not _can_chown(tmp_path):
        pytest.skip("this user cannot give a file another owner")
    lock = tmp_path / ".m.zarr.lock"
    lock.write_text("theirs")
    os.chown(lock, OTHER_UID, -1)
    with writer_lock(tmp_path / "m.zarr"):  # locked (shared file), nothing written
        assert lock.read_text() == "theirs"
    assert lock.read_text() == "theirs"


def test_own_files_refuse_links_and_other_owners(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(StoreError, match="symbolic link"):
        own_directory(tmp_path / "link", "a work directory")
    (tmp_path / "file-link").symlink_to(tmp_path / "victim")
    with pytest.raises(StoreError, match="already exists"):
        write_new_text(tmp_path / "file-link", "x")
    assert not (tmp_path / "victim").exists()
    if _can_chown(tmp_path):
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, OTHER_UID, -1)
        with pytest.raises(StoreError, match="another user"):
            own_directory(theirs, "a work directory")


def test_planted_work_directories_are_refused(tmp_path, threads_client):
    """predict's work directory and score's hidden store have names another user can
    guess: a link planted there is refused, and what it points at is left alone."""
    from saspa_dask import jobs

    _, model, data = scoring_problem(tmp_path, 2_000, 500, seed=12)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    (tmp_path / ".s.csv.scores.zarr").symlink_to(elsewhere)
    with pytest.raises(jobs.JobError, match="symbolic link"):
        jobs.score(model, data, tmp_path / "s.csv", format="csv", client=threads_client)
    rng = np.random.default_rng(0)
    rows = ["a,b,label"] + [f"{a:.3f},{b:.3f},{int(a > b)}"
                            for a, b in rng.normal(size=(200, 2))]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    jobs.ingest(tmp_path / "t.csv", tmp_path / "t.zarr")
    jobs.train(tmp_path / "t.zarr", tmp_path / "csv-model.zarr", n_bases=4,
               optimize_hyperparameters=False, client=threads_client)
    (tmp_path / ".p.csv.predict").symlink_to(elsewhere)
    with pytest.raises(jobs.JobError, match="symbolic link"):
        jobs.predict(tmp_path / "csv-model.zarr", tmp_path / "t.csv", tmp_path / "p.csv",
                     client=threads_client)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]


def test_ingest_cannot_replace_a_store_that_score_is_reading(tmp_path):
    """The hostile pass's case: ingest --overwrite of a data store while score reads it
    gave a complete score store of two contents.  Now the ingest is refused while the
    score runs, and the scores equal the model's predictions on the data it read."""
    X, model, data = scoring_problem(tmp_path, 60_000, 1_000, seed=13)
    np.save(tmp_path / "other.npy", np.column_stack([X + 1.0, np.zeros(len(X))]))
    out = tmp_path / "s.zarr"
    job = subprocess.Popen([str(BIN / "saspa"), "score", str(model), str(data), "--out",
                            str(out)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert wait_for_done_flags(out, job, at_least=1) >= 1
    os.kill(job.pid, 19)  # SIGSTOP: still reading, however fast this machine is
    try:
        res = saspa("ingest", tmp_path / "other.npy", "--out", data, "--overwrite",
                    "--chunk-rows", "4000")
    finally:
        os.kill(job.pid, 18)  # SIGCONT
    assert res.returncode == 1 and "another saspa job is reading it" in res.stderr, res.stderr
    _, err = job.communicate(timeout=300)
    assert job.returncode == 0, err
    group = zarr.open_group(str(out), mode="r")
    assert group.attrs["complete"]
    proba = load_model(model).predict_proba(X)[:, 1]
    np.testing.assert_allclose(group["proba"][...], proba, rtol=1e-10)


def test_a_store_replaced_under_a_reader_is_never_marked_complete(tmp_path, threads_client):
    """A writer that takes no lock (another machine, another tool) swaps the data store
    while score reads it: the chunk tasks see the store is no longer the one they
    pinned and the run fails, its store incomplete, naming what happened."""
    from saspa_dask import jobs
    from saspa_dask.storage import ingest, scores

    X, model, data = scoring_problem(tmp_path, 40_000, 1_000, seed=14)
    np.save(tmp_path / "other.npy", np.column_stack([X + 1.0, np.zeros(len(X))]))
    ingest(tmp_path / "other.npy", tmp_path / "other.zarr", chunk_rows=4_000)
    real = scores._score_chunk
    swapped = []

    def swap_then_score(*args):
        if not swapped:  # the first chunk task swaps the store under the run
            swapped.append(True)
            os.rename(data, tmp_path / "old.zarr")
            os.rename(tmp_path / "other.zarr", data)
        return real(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scores, "_score_chunk", swap_then_score)
        with pytest.raises(jobs.JobError, match="replaced while this job read it"):
            jobs.score(model, data, tmp_path / "s.zarr", client=threads_client)
    group = zarr.open_group(str(tmp_path / "s.zarr"), mode="r")
    assert not group.attrs["complete"] and not group["done"][...].any()


def test_a_reader_lock_keeps_writers_out_and_is_shared(tmp_path):
    store = tmp_path / "d.zarr"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from saspa_dask.files.locks import "
         "reader_lock\nwith reader_lock(sys.argv[1]):\n print('held', flush=True); "
         "time.sleep(600)", str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with reader_lock(store):  # readers share it
            pass
        with pytest.raises(StoreError, match="another saspa job is reading it"):
            with writer_lock(store):
                pass
    finally:
        holder.kill()
        holder.wait()
    with writer_lock(store):  # released with its killed holder
        pass
    assert not (tmp_path / ".d.zarr.lock").exists()


def test_leftovers_of_dead_jobs_are_tidied_when_a_store_is_opened(tmp_path):
    """A killed writer left its lock file and an aside-copy: opening the store (a
    reader) removes both; a held lock (a live writer) keeps its copy."""
    from saspa_dask.files.groups import open_group

    zarr.open_group(str(tmp_path / "d.zarr"), mode="w")
    lock, partial = tmp_path / ".d.zarr.lock", tmp_path / ".d.zarr.partial-0badf00d"
    lock.write_text('{"pid": 1}')
    partial.mkdir()
    open_group(tmp_path / "d.zarr", "data store")
    assert not lock.exists() and not partial.exists()
    partial.mkdir()
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a live writer (this test, on another descriptor)
    try:
        open_group(tmp_path / "d.zarr", "data store")
        assert partial.exists()
    finally:
        os.close(fd)


def test_a_reader_never_undoes_a_live_writers_swap(tmp_path):
    """Between a writer's two renames the path is empty and the old store waits
    beside it; a reader's tidy must not move it back (the writer's second rename then
    failed).  With the writer's lock held, tidy leaves the swap alone."""
    store = tmp_path / "m.zarr"
    zarr.open_group(str(store), mode="w").attrs["which"] = "old"
    with writer_lock(store):
        waiting = tmp_path / f".m.zarr.replaced-{time.time_ns():020d}-0badf00d"
        os.rename(store, waiting)  # the writer's first rename
        child = subprocess.run([sys.executable, "-c", "import sys; from saspa_dask.files."
                                "atomic import tidy; tidy(sys.argv[1])", str(store)],
                               capture_output=True, text=True, timeout=60)
        assert child.returncode == 0, child.stderr
        assert not store.exists() and waiting.exists()
        new = atomic.aside_directory(store)
        zarr.open_group(str(new), mode="w").attrs["which"] = "new"
        os.rename(new, store)  # the writer's second rename
    assert zarr.open_group(str(store), mode="r").attrs["which"] == "new"


def test_a_pointer_that_cannot_be_written_is_refused_before_training(tmp_path,
                                                                      threads_client):
    """The hostile pass's case: a failed --latest update exited 1 with a bare "No space
    left on device" though the model was saved.  A pointer path that cannot be written
    (under a file) is now refused before any work, naming it."""
    from saspa_dask import jobs

    _, _, data = scoring_problem(tmp_path, 2_000, 500, seed=15)
    (tmp_path / "not-a-folder").write_text("")
    with pytest.raises(jobs.JobError, match=r"not-a-folder/latest: the pointer cannot be "
                                            r"written there \(Not a directory\)"):
        jobs.train(data, tmp_path / "t.zarr", n_bases=4, optimize_hyperparameters=False,
                   latest=tmp_path / "not-a-folder" / "latest", client=threads_client)
    assert not (tmp_path / "t.zarr").exists()


def test_a_missing_data_store_is_named_not_its_lock_file(tmp_path):
    """A reader's lock file goes beside the store: where the folder itself is missing
    the job names the store, not the lock file it could not make."""
    from saspa_dask import jobs

    _, model, _ = scoring_problem(tmp_path, 1_000, 500, seed=17)
    with pytest.raises(jobs.JobError, match=r"nowhere/d.zarr: no such data store"):
        jobs.score(model, tmp_path / "nowhere" / "d.zarr", tmp_path / "s.zarr")
