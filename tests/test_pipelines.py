"""``saspa run JOB.toml`` on the example jobs in pipelines/, and job validation."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import in_process

from saspa_dask import load_model
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.pipelines import JobError, load_job
from saspa_dask.files.atomic import resolve_model_path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _run(job, *extra):
    """``saspa run`` in this process (tests/in_process.py): what it does, not how a
    process starts, is under test here; the first run of the example job is the
    command's end-to-end test in a real process."""
    return in_process.saspa("run", job, *extra)


def _run_in_a_process(job, *extra):
    return subprocess.run([str(BIN / "saspa"), "run", str(job), *extra], capture_output=True,
                          text=True, timeout=900)


@pytest.fixture
def project(tmp_path):
    """The example jobs with a small demo.npy beside them, as the README lays them out."""
    shutil.copytree(ROOT / "pipelines", tmp_path / "pipelines")
    X, y = synthetic_two_class(6_000, 4, seed=1)
    np.save(tmp_path / "demo.npy", np.column_stack([X, y]))
    for job in (tmp_path / "pipelines").glob("*.toml"):  # small models for the test
        job.write_text(job.read_text().replace("bases = 64", "bases = 12"))
    return tmp_path


def test_example_jobs_run_and_rerun_is_a_no_op(project):
    jobs = project / "pipelines"
    res = _run_in_a_process(jobs / "first_training.toml")
    assert res.returncode == 0, res.stderr
    assert "step 5/5: saspa evaluate" in res.stderr
    first = resolve_model_path(project / "work" / "models" / "latest")
    assert first.exists() and (project / "work" / "scores.zarr").exists()
    # the printed metrics are of the held-out part, and are what the model gives there
    test_part = project / "work" / "test-part.zarr"
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("on ")][-1]
    assert line.startswith(f"on {test_part} (")
    printed = dict(zip(line.split(": ", 1)[1].split()[::2],
                       map(float, line.split(": ", 1)[1].split()[1::2])))
    store = zarr.open_group(str(test_part), mode="r")
    X, y = store["X"][...], store["y"][...]
    train_rows = zarr.open_group(str(project / "work" / "train-part.zarr"), mode="r")["y"]
    assert len(y) + train_rows.shape[0] == 6_000 and 900 < len(y) < 1500
    model = load_model(first)
    assert printed["error"] == pytest.approx(np.mean(model.predict(X) != y), abs=1e-6)
    p_true = model.predict_proba(X)[np.arange(len(y)), y.astype(int)]
    assert printed["nlp"] == pytest.approx(-np.mean(np.log(p_true)), rel=1e-5)
    assert printed["error"] < 0.2  # 4 inputs, 12 bases: a sanity bound only

    res = _run(jobs / "first_training.toml")
    assert res.returncode == 0 and "nothing to do" in res.stderr

    # the source grows: the nightly job splits it again (the old training rows stay
    # first in the training part) and retrains warm into a new version
    n_old = train_rows.shape[0]
    X, y = synthetic_two_class(6_000, 4, seed=1)
    X_new, y_new = synthetic_two_class(600, 4, seed=2)  # appended: the old rows stay first
    np.save(project / "demo.npy", np.column_stack([np.vstack([X, X_new]),
                                                   np.concatenate([y, y_new])]))
    res = _run(jobs / "nightly_retrain.toml")
    assert res.returncode == 0, res.stderr
    grown = zarr.open_group(str(project / "work" / "train-part.zarr"), mode="r")
    n_new = grown["y"].shape[0] - n_old
    assert 0 < n_new < 600
    assert f"{n_old} old rows warm-started, {n_new} new rows (update)" in res.stderr
    assert f"starting sites of {n_new} new rows (update)" in res.stderr
    second = resolve_model_path(project / "work" / "models" / "latest")
    assert second != first and first.exists()
    assert load_model(second).sites_tau_.shape == (n_old + n_new,)
    assert [ln for ln in res.stdout.splitlines() if ln.startswith("on ")]
    res = _run(jobs / "nightly_retrain.toml")
    assert "nothing to do" in res.stderr
    res = _run(jobs / "score_only.toml")
    assert res.returncode == 0, res.stderr
    assert list((project / "work").glob("scores-*.zarr"))


@pytest.mark.parametrize("text,match", [
    ('[[steps]]\nkind = "train"\ndata = "d.zarr"\nout = "m.zarr"\nbasis = 3\n',
     r"unknown key\(s\) basis; allowed: additive_groups, alpha, anderson_memory, approximation"),
    ('[[steps]]\nkind = "train"\ndata = "d.zarr"\nout = "m.zarr"\nn_bases = "many"\n',
     "n_bases: 'many' is neither a positive count nor 'auto'"),
    ('[[steps]]\nkind = "train"\ndata = "d.zarr"\nout = "m.zarr"\nn_bases = true\n',
     "n_bases must be an integer or a string, got a boolean"),
    ('[[steps]]\nkind = "train"\ndata = "d.zarr"\nout = "m.zarr"\nbases = 8\n',
     r"unknown key\(s\) bases"),
    ('[[steps]]\nkind = "train"\nout = "m.zarr"\n', "missing required key 'data'"),
    ('[[steps]]\nkind = "fit"\n', "unknown kind 'fit'"),
    ('steps = []\n', "the job has no steps"),
    ('[cluster]\nworkers = 2\nscheduler = "tcp://x:1"\n[[steps]]\nkind = "evaluate"\n'
     'model = "m"\ndata = "d"\n', "scheduler or workers, not both"),
    ('[[steps]\n', "not valid TOML"),
    ('steps = 5\n', "steps must be a list, got int 5"),
    ('[cluster]\ntimeout = 1e20\n[[steps]]\nkind = "evaluate"\nmodel = "m"\ndata = "d"\n',
     "timeout must be an integer, got float"),
    ('[cluster]\ntimeout = 100000000000000000\n[[steps]]\nkind = "evaluate"\nmodel = "m"\n'
     'data = "d"\n', "timeout = 100000000000000000 is outside 1..86400"),
    ('x = ' + '[' * 5000 + ']' * 5000 + '\n', "nested too deeply|not valid TOML"),
    ('name = "a\x00b"\n', "not valid TOML"),
    ('[[steps]]\nkind = "ingest"\nsource = "a.csv"\nout = "a.zarr"\nexclude = [1]\n',
     "exclude must be a list of column names"),
])
def test_job_validation_errors(tmp_path, text, match):
    job = tmp_path / "job.toml"
    job.write_bytes(text.encode())
    with pytest.raises(JobError, match=match):
        load_job(job)
    res = _run(job)
    assert res.returncode != 0 and "Error:" in res.stderr


def test_failing_step_names_itself(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text('[cluster]\nworkers = 1\n[[steps]]\nkind = "evaluate"\n'
                   'model = "missing.zarr"\ndata = "missing-data.zarr"\n')
    res = _run(job)
    assert res.returncode != 0 and "failed: " in res.stderr and "no such model store" in res.stderr
    assert not (tmp_path / ".job.state.json").exists()


def test_a_completed_job_whose_outputs_are_gone_runs_again(tmp_path):
    X, y = synthetic_two_class(200, 2, seed=3)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    job = tmp_path / "job.toml"
    job.write_text('[[steps]]\nkind = "ingest"\nsource = "d.npy"\nout = "d.zarr"\n'
                   'overwrite = true\n')
    assert _run(job).returncode == 0
    assert "nothing to do" in _run(job).stderr
    shutil.rmtree(tmp_path / "d.zarr")
    res = _run(job)
    assert res.returncode == 0, res.stderr
    assert f"its output {tmp_path / 'd.zarr'} is gone: running it again" in res.stderr
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "d.zarr"), mode="r")["X"][...],
                                  X)


def test_a_job_whose_state_cannot_be_written_runs_nothing(tmp_path):
    """The hostile pass's case: a read-only job folder was found only after every step
    ran, and the rerun was then blocked by the outputs.  Now it is found before the
    first step (here a folder stands where the state file goes: the same failure for
    any user, root included, whom permissions do not stop)."""
    from saspa_dask.jobs import JobError
    from saspa_dask.pipelines import run_job

    X, y = synthetic_two_class(200, 2, seed=4)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    job = tmp_path / "job.toml"
    job.write_text('[[steps]]\nkind = "ingest"\nsource = "d.npy"\nout = "d.zarr"\n')
    (tmp_path / ".job.state.json").mkdir()
    with pytest.raises(JobError, match=r"state file cannot be written there .*nothing "
                                       r"was run"):
        run_job(job, echo=lambda *_: None, out=lambda *_: None)
    assert not (tmp_path / "d.zarr").exists()
    (tmp_path / ".job.state.json").rmdir()
    assert run_job(job, echo=lambda *_: None, out=lambda *_: None)["ran"] == ["ingest"]
