"""The benchmark scripts run (``--quick``) so that they cannot rot: the cluster,
scaling and speed benchmarks (the learning ones: ``test_benchmarks_learning.py``)."""

import json

import pytest

from bench_runs import _quick, _quick_results, _run

pytestmark = pytest.mark.slow  # smoke runs of the benchmark scripts


def test_bench_train_quick(tmp_path):
    report = _quick("bench_train.py", "\n| quantity", "--workdir", str(tmp_path))
    assert report["N"] == 20_000 and report["converged"]
    assert len(report["worker_peak_rss_mib"]) == 2
    assert report["matmul_gflops"] > 1 and report["sweep_ratio_to_limit"] > 1
    assert 0 < report["median_sweep_s"] < report["train_end_to_end_s"]


def test_bench_retrain_quick():
    report = _quick("bench_retrain.py", "\n| mode")
    assert [(r["mode"], r["anderson_memory"]) for r in report["results"]] == [
        ("parallel", 0)] * 2 + [("parallel", 3)] * 2 + [("sequential", 0)] * 2
    for row in report["results"]:
        assert row["update_sweeps"] <= row["empty_sweeps"] <= row["cold_sweeps"]
        assert row["adf_sweeps"] <= row["empty_sweeps"]
        assert row["max_rel_alpha_diff"] < 100 * row["tol"]


def test_bench_score_quick(tmp_path):
    report = _quick("bench_score.py", "\n| quantity", "--workdir", str(tmp_path))
    assert report["N"] == 100_000 and len(report["worker_peak_rss_mib"]) == 2
    assert "100000 rows, 5 of 5 chunks written this run" in report["cli_output"]
    assert report["ratio_to_limit"] > 1


def test_bench_scale_quick(tmp_path):
    report = _quick("bench_scale.py", "\n| N |", "--workdir", str(tmp_path), "--plot",
                    str(tmp_path / "scale.png"))
    assert [r["N"] for r in report["rows"]] == [20_000, 40_000]
    assert all(r["converged"] and len(r["train_worker_peak_mib"]) == 2 for r in report["rows"])
    assert (tmp_path / "scale.png").stat().st_size > 1000


def test_bench_threads_quick(tmp_path):
    """Every case is timed under the policy and with SciPy's pool given back; the
    report names the pools the policy set (none where NumPy and SciPy share a BLAS)."""
    from saspa_dask.core.threads import scipy_blas_pools

    out = tmp_path / "threads.json"
    _run("bench_threads.py", "--quick", "--out", str(out))
    report = json.loads(out.read_text())
    assert [c["case"].split()[0] for c in report["cases"]] == ["online", "IVM", "SASPA",
                                                               "SASPA"]
    assert all(c["policy_cpu"] > 0 and c["full_cpu"] > 0 for c in report["cases"])
    assert len(report["scipy_pools"]) == len(scipy_blas_pools())


def test_bench_race_defaults_on_the_overlap_signal_quick(tmp_path):
    """``--signal overlap --defaults``: one default ``saspa train`` against SVGP at its
    wall time and its own budget; the reported Bayes error is the generator's, as the
    docstring writes it, recomputed here."""
    import numpy as np
    from scipy.stats import norm

    report = _quick_results("bench_race.py", tmp_path, "race.json", "--task",
                            "classification", "--signal", "overlap", "--defaults")

    def latent(rows, seed):
        X = np.random.default_rng(seed).normal(size=(rows, 8))
        return (np.sin(1.5 * X[:, 0]) * np.cos(1.5 * X[:, 1]) + 0.5 * X[:, 2] * X[:, 3]
                + 0.3 * X[:, 4])

    f_train, f_test = latent(4000, 0), latent(1000, 1)
    threshold, sd = np.median(f_train), 0.8 * f_train.std()
    bayes = norm.cdf(-abs(f_test - threshold) / sd).mean()
    assert report["bayes_error"] == pytest.approx(bayes, rel=1e-12)
    assert 0.15 < bayes < 0.3  # harder overlap than the multiscale labels' 0.10
    defaults = report["defaults"]
    assert "saspa" not in report or report["saspa"] == []
    assert [r["budget"] for r in report["svgp"]] == sorted([defaults["seconds"], 3.0])
    for run in (defaults, *report["svgp"]):
        assert bayes - 0.05 < run["error"] < 0.45


def test_bench_race_quick(tmp_path):
    """The race's parts on generated stores: a fixed fit, a learnt fit whose fit gets
    the budget less the job's time outside the fit (measured by the fixed run), SVGP
    scored at SASPA's times and its own budget (one learning rate: no sweep)."""
    report = _quick_results("bench_race.py", tmp_path, "race.json")
    (learnt,) = report["saspa"]
    fixed = report["fixed"]
    assert learnt["budget"] == 10
    assert 0 < fixed["fit_seconds"] < fixed["seconds"]
    assert report["job_overhead"] == pytest.approx(fixed["seconds"] - fixed["fit_seconds"])
    assert learnt["max_fit_time"] == pytest.approx(10 - report["job_overhead"])
    assert report["svgp_lr"] == 0.01
    assert [r["budget"] for r in report["svgp"]] == sorted([learnt["seconds"], 3.0])
    for run in (report["fixed"], learnt, *report["svgp"]):
        assert run["rmse"] > 0.5 * report["noise_sd"]
    assert (tmp_path / "figures" / "race.png").stat().st_size > 0


def test_bench_ep_sweeps_quick(tmp_path):
    """One small run: the sweeps it reports are the history's, each with a change."""
    _run("bench_ep_sweeps.py", "--quick", "--outdir", str(tmp_path))
    run, = json.loads((tmp_path / "results" / "ep_sweeps.json").read_text())["runs"]
    assert run["rows"] == 6000 and run["n_bases"] == 8
    assert run["sweeps"] == len(run["change"]) >= 1 and 0 <= run["error"] < 0.5


def test_bench_sweep_chunk_quick(tmp_path):
    """One small chunk: both times measured, each ratio its time over the limit."""
    _run("bench_sweep_chunk.py", "--quick", "--outdir", str(tmp_path))
    r = json.loads((tmp_path / "results" / "sweep_chunk.json").read_text())
    assert r["rows"] == 2000 and r["n_bases"] == 8 and r["build_seconds"] > 0
    assert r["pass_over_limit"] == r["pass_seconds"] / r["matmul_limit_seconds"]


def test_bench_scaling_quick(tmp_path):
    """One and two workers on 8 chunks: the sweep costs more than its empty graph, the
    model's one-worker prediction is its own input (no error), and the projection picks
    at least one chunk per worker and says a sweep is no faster than its compute."""
    out = _run("bench_scaling.py", "--quick", "--outdir", str(tmp_path))
    r = json.loads((tmp_path / "results" / "scaling.json").read_text())
    one, two = r["runs"]
    assert (one["workers"], two["workers"]) == (1, 2) and one["chunks"] == 8
    assert all(run["sweep_s"] > run["empty_s"] > 0 for run in r["runs"])
    assert abs(one["error"]) < 1e-9
    assert all(p["chunks"] >= p["workers"] and p["sweep_s"] >= p["compute_only_s"]
               for p in r["projection"])
    assert "| 2 | 8 |" in out

