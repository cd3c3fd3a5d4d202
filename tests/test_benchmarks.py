"""The benchmark scripts run (``--quick``) so that they cannot rot."""

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


def test_bench_train_quick(tmp_path):
    report = _quick("bench_train.py", "\n| quantity", "--workdir", str(tmp_path))
    assert report["N"] == 20_000 and report["converged"]
    assert len(report["worker_peak_rss_mib"]) == 2
    assert report["matmul_gflops"] > 1 and report["sweep_ratio_to_limit"] > 1
    assert 0 < report["median_sweep_s"] < report["train_end_to_end_s"]


def test_bench_retrain_quick():
    report = _quick("bench_retrain.py", "\n| mode")
    assert len(report["results"]) == 4
    for row in report["results"]:
        assert row["warm_sweeps"] <= row["cold_sweeps"]
        assert row["max_rel_alpha_diff"] < 100 * row["tol"]


def test_bench_score_quick(tmp_path):
    report = _quick("bench_score.py", "\n| quantity", "--workdir", str(tmp_path))
    assert report["N"] == 100_000 and len(report["worker_peak_rss_mib"]) == 2
    assert "100000 rows, 5 of 5 chunks written this run" in report["cli_output"]
    assert report["ratio_to_limit"] > 1
