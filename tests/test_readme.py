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
