"""The README's example runs and prints the accuracy the README states."""

import contextlib
import io
import pathlib
import re

import pytest
from conftest import needs_dataset

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets" / "ionosphere.csv"


@needs_dataset(DATA)
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
