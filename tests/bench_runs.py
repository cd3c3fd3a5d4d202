"""What the benchmark scripts' smoke tests share: running a script (``--quick``) as
its own process and reading the report it writes."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _quick(script, table_header, *args):
    """Run a benchmark with --quick; its JSON report (printed before the table)."""
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--quick", *args],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads(res.stdout[: res.stdout.index(table_header)])


def _report(path):
    return json.loads(Path(path).read_text())


def _run(script, *args):
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def common_datasets():
    return ROOT.parent / "shared" / "datasets"


def _quick_results(script, tmp_path, name, *args):
    """Run ``script --quick --outdir tmp_path``; its results/NAME report."""
    _run(script, "--quick", "--outdir", str(tmp_path), *args)
    return _report(tmp_path / "results" / name)

