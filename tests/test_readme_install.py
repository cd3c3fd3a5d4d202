"""The README's main command, as a new user runs it: a fresh virtual environment, ``pip
install .`` (no extra), the job as written and its printed metrics; then ``saspa
report`` on its held-out store, opened in headless Chromium.  Marked slow (`.ci/run`
runs it after the suite): the install takes about half a minute from pip's cache, the
job as long."""

import json
import pathlib
import re
import shutil
import subprocess

import pytest

import browser
from report_page import ReportPage

ROOT = pathlib.Path(__file__).resolve().parents[1]
_SKIP = shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "build", "dist",
                               ".pytest_cache", ".ruff_cache", "*.zarr", "*.npy")


def _main_job_steps():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"Run the main job end to end.*?```bash\n(.*?)\n```", text, re.S)
    return block.group(1)


@pytest.mark.slow
@pytest.mark.skipif(browser.CHROMIUM is None, reason="no chromium on this machine "
                    "(Debian: apt-get install chromium)")
def test_the_readmes_install_runs_the_main_job_and_the_report(tmp_path):
    """From a copy of the source tree: the README's command as written (its install
    included), then ``saspa report`` with that environment's own ``saspa``: the page's
    error and NLP are those ``saspa evaluate --json`` prints, and in Chromium it logs
    nothing and every image decodes (matplotlib came with ``pip install .``)."""
    clone = tmp_path / "saspa_dask"
    shutil.copytree(ROOT, clone, ignore=_SKIP)
    command = _main_job_steps()
    assert command.startswith("python3 -m venv .venv && .venv/bin/pip install . && ")
    job = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True,
                         timeout=1800)
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-4000:]
    _check_the_printed_metrics(clone, job)
    saspa = str(clone / ".venv" / "bin" / "saspa")
    # only the package's own dependencies came in: no test or benchmark library
    pip = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-m", "pip", "list",
                          "--format", "json"], capture_output=True, text=True, check=True)
    installed = {p["name"].lower() for p in json.loads(pip.stdout)}
    assert "matplotlib" in installed and not installed & {"pytest", "torch", "gpytorch"}
    evaluated = subprocess.run([saspa, "evaluate", "model.zarr", "demo-test.zarr", "--json"],
                               cwd=clone, capture_output=True, text=True, timeout=600)
    assert evaluated.returncode == 0, evaluated.stderr
    metrics = json.loads(evaluated.stdout)
    report = subprocess.run([saspa, "report", "model.zarr", "demo-test.zarr", "--out",
                             "report.html"], cwd=clone, capture_output=True, text=True,
                            timeout=900)
    assert report.returncode == 0, report.stderr
    page = clone / "report.html"
    cells = ReportPage(page.read_text()).cells
    assert cells["error"] == f"{metrics['error']:.6g}"
    assert cells["AUC"] == f"{metrics['auc']:.6g}"
    problems, images = browser.load(
        page.as_uri(), "Array.from(document.images).map(i => i.naturalWidth)")
    assert problems == [] and len(images) >= 5 and min(images) > 100


def _check_the_printed_metrics(folder, job):
    """The job holds out a test part and its printed metrics are that part's, equal to
    what the model gives on it."""
    import numpy as np
    import zarr

    from saspa_dask import load_model

    assert "task: classification (inferred" in job.stderr
    line = job.stdout.strip().splitlines()[-1]
    assert line.startswith("on demo-test.zarr (")
    metrics = line.split(": ", 1)[1].split()
    printed = dict(zip(metrics[::2], map(float, metrics[1::2])))
    store = zarr.open_group(str(folder / "demo-test.zarr"), mode="r")
    X, y = store["X"][...], store["y"][...]
    assert abs(len(y) - 40_000) < 4 * 179  # 20% of 200,000 rows, binomial sd 179
    assert f"({len(y)} rows" in line
    model = load_model(folder / "model.zarr")
    assert model.sites_tau_.shape[-1] == 200_000 - len(y)  # trained on the other part
    errors = np.mean(model.predict(X) != y)
    assert printed["error"] == pytest.approx(errors, abs=1e-6)
    assert printed["error"] < 0.05
