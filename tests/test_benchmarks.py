"""The benchmark scripts run (``--quick``) so that they cannot rot."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_train_quick(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_train.py"),
                          "--quick", "--workdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout[: res.stdout.index("\n| quantity")])
    assert report["N"] == 20_000 and report["converged"]
    assert len(report["worker_peak_rss_mib"]) == 2
    assert report["matmul_gflops"] > 1 and report["sweep_ratio_to_limit"] > 1
    assert 0 < report["median_sweep_s"] < report["train_end_to_end_s"]


def test_bench_retrain_quick():
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_retrain.py"),
                          "--quick"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout[: res.stdout.index("\n| mode")])
    assert len(report["results"]) == 4
    for row in report["results"]:
        assert row["warm_sweeps"] <= row["cold_sweeps"]
        assert row["max_rel_alpha_diff"] < 100 * row["tol"]


def test_bench_score_quick(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_score.py"),
                          "--quick", "--workdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout[: res.stdout.index("\n| quantity")])
    assert report["N"] == 100_000 and len(report["worker_peak_rss_mib"]) == 2
    assert "100000 rows, 5 of 5 chunks written this run" in report["cli_output"]
    assert report["ratio_to_limit"] > 1
