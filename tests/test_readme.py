"""The README's example runs and prints the accuracy the README states."""

import contextlib
import io
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets" / "ionosphere.csv"


def test_the_shipped_ionosphere_is_the_uci_file():
    """The package's copy loads as the shared datasets' CSV reads (where it is here)."""
    import numpy as np

    from saspa_dask.datasets import load_ionosphere

    X, y = load_ionosphere()
    assert X.shape == (351, 33) and X.dtype == np.float64
    assert (y == "g").sum() == 225 and (y == "b").sum() == 126  # the UCI counts
    if DATA.exists():
        table = np.loadtxt(DATA, delimiter=",", skiprows=1, dtype=str)
        np.testing.assert_array_equal(X, table[:, :-1].astype(float))
        np.testing.assert_array_equal(y, table[:, -1])


def test_readme_example(monkeypatch):
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Example: the ionosphere data\s+```python\n(.*?)```", text, re.S)
    code = block.group(1)
    stated = float(re.search(r"# (0\.\d+)", code).group(1))
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert float(out.getvalue()) == pytest.approx(stated, abs=5e-4)


def test_readme_main_job_as_written(tmp_path):
    """The README's main command, run as written (after its install steps, which CI's
    own set-up has done): it holds out a test part and its printed metrics are that
    part's, equal to what the model gives on it."""
    import subprocess
    import sys

    import numpy as np
    import zarr

    from saspa_dask import load_model

    text = (ROOT / "README.md").read_text()
    block = re.search(r"Run the main job end to end.*?```bash\n(.*?)\n```", text, re.S)
    steps = block.group(1).split(" && ")
    assert steps[:2] == ["python3 -m venv .venv", ".venv/bin/pip install ."]
    saspa = str(pathlib.Path(sys.executable).parent / "saspa")
    outputs = []
    for step in steps[2:]:
        assert step.startswith(".venv/bin/saspa ")
        args = step.split()[1:]
        res = subprocess.run([saspa, *args], cwd=tmp_path, capture_output=True, text=True,
                             timeout=900)
        assert res.returncode == 0, (step, res.stderr)
        outputs.append(res)
    train_err = [r.stderr for r, s in zip(outputs, steps[2:]) if " train " in s][0]
    assert "task: classification (inferred" in train_err
    line = outputs[-1].stdout.strip().splitlines()[-1]
    assert line.startswith("on demo-test.zarr (")
    metrics = line.split(": ", 1)[1].split()
    printed = dict(zip(metrics[::2], map(float, metrics[1::2])))
    store = zarr.open_group(str(tmp_path / "demo-test.zarr"), mode="r")
    X, y = store["X"][...], store["y"][...]
    assert abs(len(y) - 40_000) < 4 * 179  # 20% of 200,000 rows, binomial sd 179
    assert f"({len(y)} rows" in line
    model = load_model(tmp_path / "model.zarr")
    assert model.sites_tau_.shape[-1] == 200_000 - len(y)  # trained on the other part
    errors = np.mean(model.predict(X) != y)
    assert printed["error"] == pytest.approx(errors, abs=1e-6)
    assert printed["error"] < 0.05
    scores = zarr.open_group(str(tmp_path / "scores.zarr"), mode="r")
    assert scores.attrs["complete"] and scores["label"].shape == (len(y),)
