"""A resumed job never mixes runs: an interrupted ``predict`` or ``score`` followed by a
run with another model, file or options gives exactly what an uninterrupted run of the
second gives (or, for a zarr score store without --overwrite, a refusal naming what
differs).  Interruptions are real kills of ``saspa`` processes where the timing matters
(during the export; after the score store was made), and otherwise exceptions raised
by the test at a random stage of an in-process run.  Expected outputs come from
uninterrupted runs in fresh folders."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from saspa_dask import jobs
from saspa_dask.storage import scores as score_module

BIN = Path(sys.executable).parent
IDS = ["=HYPERLINK(x)", "+1+2", "-lead", "@sum", "plain", " padded "]


def _table(path, n, seed):
    """A CSV with an id column (some ids formula-like), two numbers, a category and a
    0/1 label."""
    rng = np.random.default_rng(seed)
    lines = ["key,a,b,city,label"]
    for i in range(n):
        a, b = rng.normal(size=2)
        city = ["paris", "rome", "oslo"][i % 3]
        lines.append(f"{IDS[i % len(IDS)]}{i},{a:.4f},{b:.4f},{city},"
                     f"{int(a + (city == 'oslo') > b)}")
    Path(path).write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def case(tmp_path_factory, threads_client):
    """Two models of one training store (different bases), two files to score."""
    d = tmp_path_factory.mktemp("resume")
    _table(d / "train.csv", 300, seed=0)
    _table(d / "f1.csv", 400, seed=1)
    _table(d / "f2.csv", 400, seed=2)
    jobs.ingest(d / "train.csv", d / "train.zarr", id_column="key", text="onehot")
    for name, m in (("A", 4), ("B", 6)):
        jobs.train(d / "train.zarr", d / f"{name}.zarr", n_bases=m,
                   optimize_hyperparameters=False, client=threads_client)
    for name in ("f1", "f2"):  # several chunks: a run can stop between them
        jobs.ingest(d / f"{name}.csv", d / f"{name}.zarr", like=d / "train.zarr",
                    chunk_rows=64)
    return d


class Stop(KeyboardInterrupt):
    """The test's interruption (as Ctrl-C unwinds a job)."""


class StopTask(Exception):
    """The test's interruption inside a chunk task (a worker thread)."""


_expected = {}


def _uninterrupted(case, client, kind, run):
    """An uninterrupted run's output in a fresh folder (cached per run)."""
    key = (kind, run)
    if key not in _expected:
        d = case / f"expected-{kind}-{len(_expected)}"
        d.mkdir()
        out = d / "out.csv"
        _job(case, client, kind, run, out)
        _expected[key] = out.read_text() if kind != "zarr" else _zarr_scores(out)
    return _expected[key]


def _zarr_scores(path):
    group = zarr.open_group(str(path), mode="r")
    assert group.attrs["complete"]
    return {name: group[name][...].tolist() for name in ("mean", "variance", "proba", "row")}


def _job(case, client, kind, run, out, overwrite=False):
    model, source, chunk_rows, escape = run
    if kind == "predict":
        return jobs.predict(case / f"{model}.zarr", case / f"{source}.csv", out,
                            chunk_rows=chunk_rows, escape_formulas=escape,
                            overwrite=overwrite, client=client)
    fmt = "csv" if kind == "csv" else "zarr"
    return jobs.score(case / f"{model}.zarr", case / f"{source}.zarr", out, format=fmt,
                      escape_formulas=escape, overwrite=overwrite, client=client)


def _interrupt(monkeypatch, stage, kill_after):
    """Make the next run stop at ``stage``: before scoring, after ``kill_after`` chunk
    tasks wrote their scores, or in the middle of the export."""
    if stage == "before scoring":
        def stop(*args, **kwargs):
            raise Stop()
        monkeypatch.setattr(score_module, "verify_fingerprint", stop)
    elif stage == "while scoring":
        real, count = score_module._score_chunk, []

        def partly(*args):
            if len(count) >= kill_after:
                raise StopTask()
            count.append(1)
            return real(*args)
        monkeypatch.setattr(score_module, "_score_chunk", partly)
    else:
        import saspa_dask.storage.table_writers as export_module

        real_write = export_module._CsvWriter.write

        def write_then_stop(self, columns):
            real_write(self, columns)
            self.handle.flush()
            raise Stop()
        monkeypatch.setattr(export_module._CsvWriter, "write", write_then_stop)


runs = st.tuples(st.sampled_from(["A", "B"]), st.sampled_from(["f1", "f2"]),
                 st.sampled_from([64, 100]), st.booleans())
stages = st.sampled_from(["before scoring", "while scoring", "while exporting"])


def _interrupted_run(case, client, kind, run, out, stage, kill_after):
    with pytest.MonkeyPatch.context() as patch:
        _interrupt(patch, stage, kill_after)
        try:
            _job(case, client, kind, run, out)
        except (Stop, StopTask):
            pass  # else the run was too short to be stopped there: it completed


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=runs, second=runs, stage=stages, kill_after=st.integers(0, 3),
       kind=st.sampled_from(["predict", "csv"]))
def test_a_resumed_predict_or_csv_score_equals_an_uninterrupted_run(
        case, threads_client, tmp_path_factory, first, second, stage, kill_after, kind):
    d = tmp_path_factory.mktemp("run")
    out = d / "out.csv"
    if kind == "csv":  # score reads an ingested store: the chunking is the store's
        first, second = first[:2] + (64, first[3]), second[:2] + (64, second[3])
    _interrupted_run(case, threads_client, kind, first, out, stage, kill_after)
    _job(case, threads_client, kind, second, out, overwrite=True)
    assert out.read_text() == _uninterrupted(case, threads_client, kind, second)
    assert [p.name for p in d.iterdir()] == ["out.csv"]  # no work left behind


@settings(max_examples=8, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=runs, second=runs, kill_after=st.integers(0, 3))
def test_a_zarr_score_store_resumes_only_its_own_run(case, threads_client, tmp_path_factory,
                                                      first, second, kill_after):
    """An incomplete zarr score store is resumed by the same model and data; another
    model or data is refused, naming what differs, and --overwrite starts over."""
    first, second = first[:2] + (64, True), second[:2] + (64, True)
    out = tmp_path_factory.mktemp("run") / "s.zarr"
    _interrupted_run(case, threads_client, "zarr", first, out, "while scoring", kill_after)
    if out.exists() and zarr.open_group(str(out), mode="r").attrs["complete"]:
        with pytest.raises(jobs.JobError, match="complete; use --overwrite"):
            _job(case, threads_client, "zarr", second, out)
        _job(case, threads_client, "zarr", second, out, overwrite=True)
    elif out.exists() and first[:2] != second[:2]:
        what = "model_fingerprint" if first[0] != second[0] else "input_fingerprint"
        with pytest.raises(jobs.JobError, match=f"different {what}"):
            _job(case, threads_client, "zarr", second, out)
        _job(case, threads_client, "zarr", second, out, overwrite=True)
    else:
        _job(case, threads_client, "zarr", second, out)
    assert _zarr_scores(out) == _uninterrupted(case, threads_client, "zarr", second)


def _wait_for(path_test, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if path_test():
            return True
        time.sleep(0.005)
    return False


@pytest.mark.parametrize("when", ["after the score store was made", "while exporting"])
def test_a_killed_predict_rerun_with_another_model_writes_that_models_scores(
        case, threads_client, tmp_path, when):
    """The hostile pass's case: kill `saspa predict A`, run predict B on the same --out:
    exit 0 with A's scores ("resumed"), or "use --overwrite" even with --overwrite.
    Now B's run starts over and writes exactly B's scores."""
    _table(tmp_path / "big.csv", 30_000, seed=3)
    out = tmp_path / "p.csv"
    work = tmp_path / ".p.csv.predict"
    first = subprocess.Popen([str(BIN / "saspa"), "predict", str(case / "A.zarr"),
                              str(tmp_path / "big.csv"), "--out", str(out), "--workers",
                              "1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    if when == "while exporting":
        def ready():
            return any(p.name.startswith(".p.csv.partial-") and p.stat().st_size > 0
                       for p in tmp_path.iterdir())
    else:
        def ready():
            return (work / "scores.zarr" / "done").is_dir()
    caught = _wait_for(ready, first)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert caught, f"the first run ended before it was {when}: {first.stderr.read()}"
    assert work.is_dir() and not out.exists()
    result = jobs.predict(case / "B.zarr", tmp_path / "big.csv", out, overwrite=True,
                          client=threads_client)
    assert not result["reused"] and "model_fingerprint" in result["restarted"]
    expected = tmp_path / "expected" / "p.csv"
    expected.parent.mkdir()
    jobs.predict(case / "B.zarr", tmp_path / "big.csv", expected, client=threads_client)
    assert out.read_bytes() == expected.read_bytes()
    assert not work.exists()
    assert not [p for p in os.listdir(tmp_path) if ".partial-" in p or p.endswith(".lock")]
