"""The benchmark scripts run (``--quick``) so that they cannot rot: the learning,
accuracy and peer benchmarks (a file of their own, so that the slow step runs it on
the second core beside ``test_benchmarks.py``)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from bench_runs import ROOT, _quick, _quick_results, _report, _run, common_datasets

pytestmark = pytest.mark.slow  # smoke runs of the benchmark scripts


def test_bench_paper_quick(tmp_path):
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_paper.py"),
                          "--quick", "--jobs", "2", "--outdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    report = _report(tmp_path / "results" / "paper-quick.json")
    circle = {r["method"]: r for r in report["circle"]["rows"]}
    # four bases on a circle with one output level per quadrant (+-1): every sparse
    # method is within the range of the outputs of the full GP, whose short
    # lengthscale follows the steps (RMS over the grid 0.39-0.42 measured, quick);
    # blurred bases come closer to it than FITC's points, in mean and in sd
    assert circle["full GP"]["rms_mean_diff"] == 0.0
    assert all(0 < r["rms_mean_diff"] < 0.6 for m, r in circle.items() if m != "full GP")
    for blurred in ("SASPA-full", "SASPA-spherical"):
        for key in ("rms_sd_diff", "rms_mean_diff"):
            assert circle[blurred][key] < circle["FITC (delta)"][key]
    spgp = {r["method"]: r for r in report["spgp1d"]["rows"]}
    # learnt pseudo-inputs raise the evidence above fixed K-means ones, from a K-means
    # start and from one bunched in a corner, and spread out from the corner
    fixed = spgp["K-means pseudo-inputs, fixed"]["log_evidence"]
    assert spgp["learnt from K-means"]["log_evidence"] > fixed
    assert spgp["learnt from one corner"]["log_evidence"] > fixed
    assert np.ptp(spgp["learnt from one corner"]["pseudo_inputs"]) > 3.0
    table = {(r["method"], r["M"]): r for r in report["twoclass"]["table"]}
    assert table[("full GP", 200)]["kl_mean"] == 0.0
    assert all(r["kl_mean"] > 0 for key, r in table.items() if key[0] != "full GP")
    assert 0 <= table[("SASPA-full", 8)]["error_mean"] < 0.5
    ion = [r for r in report["uci"]["ionosphere"]["summary"] if r["method"] == "SASPA-full"]
    assert ion and all(r["error_mean"] < 0.3 for r in ion)
    assert ("IVM", 8) in table and ("Online (Csató-Opper)", 8) in table
    # Figures 4-5 as the paper ran them: the methods at shared K-means locations
    assert report["uci"]["ionosphere"]["bases"] == "shared K-means"
    assert {r["method"] for r in report["uci"]["spambase"]["summary"]} == {
        "SASPA-full", "SASPA-spherical", "FITC-EP", "DTC-EP"}
    # the papers' regression experiments: every method on each split; Pole's noise
    # never below the quantisation floor the protocol sets
    for name, part in report["regression"].items():
        methods = {r["method"] for r in part["rows"]}
        assert methods == {"SPGP (FITC-EP)", "SASPA-spherical", "SASPA-full", "FIFGP",
                           "TFIFGP", "DTC", "full GP"}, (name, methods)
        assert all(0 < r["nmse"] < 2 and np.isfinite(r["mnlp"]) for r in part["rows"])
        assert (tmp_path / "figures" / f"regression_{name}.png").stat().st_size > 1000
    floor = report["regression"]["pol"]["protocol"]["min_noise_variance"]
    assert all(r["noise_variance"] >= floor * (1 - 1e-12)
               for r in report["regression"]["pol"]["rows"] if r["method"] != "full GP")
    assert len(report["regression"]["pumadyn32nm"]["protocol"]["lengthscale"]) == 32
    for name in ("circle", "spgp1d", "twoclass", "ionosphere_shared_kmeans",
                 "spambase_shared_kmeans"):
        assert (tmp_path / "figures" / f"{name}.png").stat().st_size > 1000


def test_bench_peers_quick(tmp_path):
    pytest.importorskip("GPy", reason="bench extra (GPy) not installed")
    pytest.importorskip("gpytorch", reason="bench extra (gpytorch) not installed")
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_peers.py"),
                          "--quick", "--outdir", str(tmp_path)], capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    report = _report(tmp_path / "results" / "peers-quick.json")
    methods = {r["method"] for r in report["uci"]["summary"]}
    assert {"SASPA-full", "SASPA-full, 1 restart", "GPy sparse EP (EP-DTC)", "GPyTorch SVGP",
            "sklearn GPC (Laplace, full GP)", "logistic regression"} <= methods
    assert all(0 <= r["error_mean"] < 0.5 for r in report["uci"]["summary"])
    assert report["ep_speed"][0]["speedup"] > 1
    big = report["large"]
    assert len(big["svgp_curve"]) == 3
    # two basis counts by two tolerances, each timed with the shared subsample fit
    assert sorted((r["M"], r["tol"]) for r in big["saspa"]) == [
        (8, 1e-6), (8, 1e-3), (16, 1e-6), (16, 1e-3)]
    assert all(r["seconds"] > r["hyper_subsample_s"] > 0 for r in big["saspa"])
    # the classes are Gaussians: QDA has the Bayes form, so nothing beats it by much
    floor = big["qda_reference"]["error"]
    assert all(r["error"] > floor - 0.02 for r in big["saspa"] + big["svgp_curve"])


def test_bench_restarts_quick():
    report = _quick("bench_restarts.py", "\n| SASPA-full")
    rows = {r["config"]: r for r in report["summary"]}
    assert set(rows) == {"default", "start at std", "n_restarts_optimizer=1",
                         "n_restarts_optimizer=2"}
    for r in rows.values():
        assert r["n_splits"] == 2 and 0 <= r["error_mean"] < 0.5
    # keeping the highest evidence can only raise the evidence over the default start
    assert rows["n_restarts_optimizer=1"]["log_evidence_mean"] >= (
        rows["default"]["log_evidence_mean"] - 1e-6)
    assert sum(rows["n_restarts_optimizer=2"]["chosen_start_counts"]) == 2


def test_bench_idgp_small(tmp_path):
    """Four feature families at M = 4 on 400 ailerons rows: each predicts the
    standardised target far better than its mean does (RMSE 1), and the table prints."""
    out = _run("bench_idgp.py", "--sets", "ailerons", "--bases", "4", "--train-rows", "400",
               "--max-hyper-iter", "20", "--outdir", str(tmp_path))
    runs = json.loads((tmp_path / "results" / "idgp.json").read_text())["runs"]
    assert len(runs) == 4 and "| ailerons | 4 |" in out
    for run in runs:
        assert run["rmse"] < 0.65, run
    assert (tmp_path / "figures" / "idgp.png").stat().st_size > 0


def test_bench_augment(tmp_path):
    """Away from the bases, augmented FITC prediction on the 1-D toy comes within
    0.1 nats of the exact GP (benchmarks/exact_gp.py) and well ahead of plain FITC."""
    _run("bench_augment.py", "--outdir", str(tmp_path))
    rows = json.loads((tmp_path / "results" / "augment.json").read_text())["rows"]
    away = {r["method"]: r["nlpd"] for r in rows
            if r["set"] == "1-D toy" and r["group"] == "away"}
    assert away["FITC, augmented"] < away["exact GP"] + 0.1
    assert away["FITC, augmented"] < away["FITC"] - 0.2


def test_bench_power_ep_small(tmp_path):
    """Every alpha predicts the generated set's standardised target far better than its
    mean does (RMSE 1); the truth of its noise is recorded; the table and plot come."""
    out = _run("bench_power_ep.py", "--sets", "generated", "--splits", "1",
               "--train-rows", "600", "--bases", "8", "--max-hyper-iter", "10",
               "--alphas", "1", "0.5", "--outdir", str(tmp_path))
    [run] = json.loads((tmp_path / "results" / "power_ep.json").read_text())["runs"]
    assert [f["alpha"] for f in run["fits"]] == [1.0, 0.5]
    assert all(f["test_rmse"] < 0.8 for f in run["fits"])
    # 0.1 of the signal's sd, in the units of y standardised (signal plus noise)
    assert run["noise_truth"] == pytest.approx(0.01 / 1.01, rel=0.05)
    assert "| generated (noise" in out
    assert (tmp_path / "figures" / "power_ep.png").stat().st_size > 0


def test_bench_stochastic_quick(tmp_path):
    """Both learnings run on Kin-40k's split and predict far better than the mean
    (test RMSE below the targets' sd, about 1 in standardised units: 0.61 and 0.74
    measured, stochastic in minibatches of 125 rows, an eighth of the rows: one 2,048-row
    step an epoch reached 0.91); the energies are those of full-batch EP at each learnt
    point."""
    out = _run("bench_stochastic.py", "--quick", "--svgp-cpu", "1", "--outdir",
               str(tmp_path))
    report = json.loads((tmp_path / "results" / "stochastic.json").read_text())
    runs = report["runs"]
    assert [r["learning"] for r in runs] == ["full-batch", "stochastic"]
    y_sd = np.loadtxt(common_datasets() / "kin40k_test.csv", delimiter=",",
                      skiprows=1)[:, -1].std()
    assert all(r["rmse"] < 0.9 * y_sd for r in runs)
    assert all(r["learn_offset"] and abs(r["y_mean"]) < 1.0 for r in runs)
    assert "| kin40k | 1000 | delta | 1 | learnt, " in out
    assert [r["rows"] for r in runs] == [1000, 1000]
    # SVGP beside them, scored once its training CPU reached the budget
    (svgp,) = report["svgp"]
    assert svgp["cpu_seconds"] >= 0.5 and np.isfinite(svgp["rmse"])


def test_bench_ivm_quick(tmp_path):
    """Every variant runs on two Ionosphere splits; errors are fractions of the 151
    test rows."""
    _run("bench_ivm.py", "--quick", "--outdir", str(tmp_path))
    runs = json.loads((tmp_path / "results" / "ivm.json").read_text())["runs"]
    assert [r["variant"] for r in runs] == ["defaults", "ARD", "no bias kernel",
                                            "fixed kernel"]
    for r in runs:
        assert all(round(e * 151) == pytest.approx(e * 151, abs=1e-9) for e in r["errors"])


def test_bench_online_refinement_quick(tmp_path):
    """The KL table runs; KLs are non-negative."""
    _run("bench_online_refinement.py", "--quick", "--outdir", str(tmp_path))
    runs = json.loads((tmp_path / "results" / "online_refinement.json").read_text())["runs"]
    assert runs[0]["M"] == 8 and all(v >= 0 for v in runs[0]["kl"].values())


def test_bench_costs_quick(tmp_path):
    """Every (input count, blur, learnt or fixed bases) cell is timed; the efficiency
    is the modelled flops over the time at the matmul rate measured in the run."""
    report = _quick_results("bench_costs.py", tmp_path, "costs.json")
    runs = report["runs"]
    assert {(r["d"], r["blur"], r["learn_bases"]) for r in runs} == {
        (d, b, learn) for d in (2, 8) for b in ("delta", "diagonal", "full")
        for learn in ("none", "means")}
    rate = report["matmul_flops_per_second"]
    for r in runs:
        assert r["flops"] > 0 and r["seconds_per_evaluation"] > 0
        assert r["efficiency"] == pytest.approx(
            r["flops"] / (r["seconds_per_evaluation"] * rate), rel=1e-12)


def test_bench_anytime_quick(tmp_path):
    """Capped runs stop at their cap unconverged; the runs to tol from the scaled and
    the coarse start reach one fixed point (the same held-out metrics); only the
    coarse one runs EP on a block subset first."""
    report = _quick_results("bench_anytime.py", tmp_path, "anytime.json")
    runs = {r["run"]: r for r in report["runs"]}
    assert [r["sweeps"] for r in report["runs"][:2]] == [1, 2]
    assert not any(r["converged"] for r in report["runs"][:2])
    scaled, coarse = runs["scaled start, to tol"], runs[
        "coarse start (the default cold start), to tol"]
    assert scaled["converged"] and coarse["converged"]
    assert scaled["coarse_rows"] == [] and len(coarse["coarse_rows"]) == 1
    assert scaled["nlp"] == pytest.approx(coarse["nlp"], rel=1e-6)
    assert report["learning"]["iterations"] == 3


def test_bench_stopping_quick(tmp_path):
    """The long run records one trace entry per iteration (and the start), and keeps
    at least the energy of the 20-iteration cap along the same path."""
    report = _quick_results("bench_stopping.py", tmp_path, "stopping.json")
    assert [r["set"] for r in report["runs"]] == ["ionosphere", "smooth"]
    for run in report["runs"]:
        assert len(run["trace"]) == run["long"]["iterations"] + 1
        assert run["long"]["energy"] >= run["cap20"]["energy"] - 1e-9


def test_bench_learnt_classification_quick(tmp_path):
    report = _quick_results("bench_learnt_classification.py", tmp_path,
                            "learnt_classification.json")
    rows = report["rows"]
    assert {(r["dataset"], r["learn_bases"]) for r in rows} == {
        (d, v) for d in ("ionosphere", "spambase") for v in ("kmeans", "means")}
    assert all(0 <= r["error"] < 0.4 and r["nlp"] > 0 for r in rows)
    for cell in report["summary"]:  # one split: the summary is that split's row
        row = next(r for r in rows if (r["dataset"], r["learn_bases"]) ==
                   (cell["dataset"], cell["learn_bases"]))
        assert cell["error"] == [row["error"], 0.0]


def test_bench_learnt_bases_quick_and_its_report(tmp_path):
    """A quick run (one set, one split, the exact GP too), then the report's table
    and figure from its results."""
    report = _quick_results("bench_learnt_bases.py", tmp_path, "learnt_bases.json")
    exact, run = report["runs"]
    assert exact["exact"]["test_rmse"] > 0
    assert run["M"] == 8 and {"saspa_kmeans", "saspa_means", "svgp"} <= set(run)
    budgets = [r["budget"] for r in run["svgp"]]
    assert budgets == sorted(budgets) and len(budgets) == 2
    assert all(r["seconds"] >= r["budget"] for r in run["svgp"])
    out = _run("report_learnt_bases.py", str(tmp_path / "results" / "learnt_bases.json"),
               "--outdir", str(tmp_path / "report"))
    assert "| cpu_act (1) |" in out
    assert (tmp_path / "report" / "figures" / "learnt_bases.png").stat().st_size > 1000


def test_bench_defaults_quick(tmp_path):
    """A regression and a classification set: today's defaults and the old ones,
    SVGP at SASPA's CPU time and 5x it (CPU clock), HistGradientBoosting."""
    report = _quick_results("bench_defaults.py", tmp_path, "defaults.json")
    regression, classification = report["runs"]
    assert (regression["set"], classification["set"]) == ("cpu_act", "ionosphere")
    assert regression["old"]["iterations"] == 20  # the old cap
    for run, key in ((regression, "rmse"), (classification, "error")):
        assert all(run[part][key] >= 0 for part in ("new", "old", "hgb"))
        budgets = [r["budget"] for r in run["svgp"]]
        assert budgets == pytest.approx([run["new"]["cpu_seconds"],
                                         5 * run["new"]["cpu_seconds"]])
        assert all(r["cpu_seconds"] >= r["budget"] for r in run["svgp"])


def test_bench_kernels_quick(tmp_path):
    """A regression and a classification set, two kernels, HistGradientBoosting."""
    report = _quick_results("bench_kernels.py", tmp_path, "kernels.json",
                            "--kernels", "se", "matern52")
    regression, classification = report["runs"]
    assert (regression["set"], classification["set"]) == ("cpu_act", "ionosphere")
    for run, key, smooth in ((regression, "rmse", "nlpd"), (classification, "error", "nlp")):
        assert all(run[part][key] >= 0 for part in ("se", "matern52", "hgb"))
        # the kernel reached the fit: a continuous score differs (151 test rows' error
        # is a count, and SE and Matern 5/2 once missed the same 16)
        assert run["se"][smooth] != run["matern52"][smooth]


def test_bench_log_target_quick(tmp_path):
    """Both fits run on both price tables; the scores are of y (RMSE in dollars: far
    above 1) and the coverages are shares."""
    out = tmp_path / "log_target.json"
    _run("bench_log_target.py", "--quick", "--out", str(out))
    runs = json.loads(out.read_text())["runs"]
    assert [(r["set"], r["log_target"]) for r in runs] == [
        ("house_16h", False), ("house_16h", True),
        ("california_housing", False), ("california_housing", True)]
    assert all(r["rmse"] > 1000 and 0 <= r["coverage_90"] <= 1 for r in runs)


def test_bench_exact_start_quick(tmp_path):
    """Both starts on cpu_act's first split predict far better than the mean
    (standardised targets: the mean's RMSE is about 1); the exact one records its
    start on 512 of the 600 rows."""
    report = _quick_results("bench_exact_start.py", tmp_path, "exact_start.json")
    runs = report["runs"]
    assert [r["exact_start"] for r in runs] == [False, True]
    assert runs[0]["start"] is None and runs[1]["start"]["rows"] == 512
    assert all(r["rmse"] < 0.6 and r["n_train"] == 600 for r in runs)


def test_bench_hyper_tol_quick(tmp_path):
    """Two tolerances on 1,000 Kin-40k rows at M = 8: the looser stops no later, each
    run's energy is finite and its test RMSE below the targets' sd (1, standardised),
    the default's well below (0.62 measured; 1e-3 stops at 0.80)."""
    _run("bench_hyper_tol.py", "--quick", "--outdir", str(tmp_path))
    runs = json.loads((tmp_path / "results" / "hyper_tol.json").read_text())["runs"]
    strict, loose = runs
    assert (strict["tol"], loose["tol"]) == (1e-4, 1e-3)
    assert loose["iterations"] <= strict["iterations"]
    assert all(np.isfinite(r["energy_per_row"]) and r["rmse"] < 0.9 for r in runs)
    assert strict["rmse"] < 0.7


def test_bench_learning_ep_quick(tmp_path):
    """Both tolerances inside learning on 600 Spambase rows at M = 8: each run's test
    error under a fifth (the classes are 40/60) and its log loss finite; the looser
    EP inside learning gives a model within 0.05 nats of the other's."""
    _run("bench_learning_ep.py", "--quick", "--outdir", str(tmp_path))
    runs = json.loads((tmp_path / "results" / "learning_ep.json").read_text())["runs"]
    strict, loose = runs
    assert (strict["learning_ep_tol"], loose["learning_ep_tol"]) == (1e-6, 1e-4)
    assert all(r["error"] < 0.2 and np.isfinite(r["log_loss"]) for r in runs)
    assert abs(strict["log_loss"] - loose["log_loss"]) < 0.05


def test_bench_newcomer_quick(tmp_path):
    """Both newcomer shapes on 2,000 rows through ingest, split, train (15 learning
    iterations) and evaluate: the regression explains part of the held-out variance
    with about 95% of the rows inside their 95% intervals, and the rare-event
    classifier ranks better than chance and errs no more than the majority class."""
    _run("bench_newcomer.py", "--quick", "--outdir", str(tmp_path))
    runs = json.loads((tmp_path / "results" / "newcomer.json").read_text())["runs"]
    wage, rare = (r["metrics"] for r in runs)
    assert [r["table"] for r in runs] == ["wage", "rare-event"]
    assert wage["r2"] > 0.2 and 0.85 < wage["coverage_95"] <= 1.0
    assert rare["auc"] > 0.6 and rare["error"] <= rare["base_error"]
    assert all(r["learning"] and r["cpu_seconds"] > 0 for r in runs)



def test_bench_sparse_peers_quick(tmp_path):
    """Kin-40k's first 1,000 rows, M = 8: the defaults predict better than the
    training mean (RMSE below the standardised targets' 1; 0.617 measured), and SVGP
    and SGPR are scored once their CPU reaches the defaults' and five times it (SGPR
    where it stopped, if earlier)."""
    report = _quick_results("bench_sparse_peers.py", tmp_path, "sparse_peers.json")
    (run,) = report["runs"]
    assert (run["set"], run["seed"], run["M"]) == ("kin40k", 0, 8)
    saspa = run["saspa"]
    assert 0 < saspa["rmse"] < 0.9 and np.isfinite(saspa["nlpd"])
    budgets = [saspa["cpu_seconds"], 5 * saspa["cpu_seconds"]]
    for peer in ("svgp", "sgpr"):
        assert [r["budget"] for r in run[peer]] == pytest.approx(budgets)
        assert all(np.isfinite(r["rmse"]) and np.isfinite(r["nlpd"]) for r in run[peer])
    assert all(r["cpu_seconds"] >= r["budget"] for r in run["svgp"])
    assert all(r["cpu_seconds"] >= r["budget"] or r["stopped"] for r in run["sgpr"])


def test_bench_vfe_first_quick(tmp_path):
    """Kin-40k's first 1,000 rows, M = 8: the defaults and the two fits (alpha = 0.001,
    then alpha = 1 from its values) predict better than the training mean (RMSE below
    the standardised targets' 1; 0.617 and 0.637 measured), the recipe's CPU is its two
    fits', and the first fit, which does not shrink the noise, learns more of it than
    FITC-EP from its values does (0.58 against 1e-4 measured).  The diagnosis: SGPR
    scored once its CPU reaches 5 s or where it stopped first, its learnt noise
    positive, and SASPA from its values and from K-means predicting."""
    report = _quick_results("bench_vfe_first.py", tmp_path, "vfe_first.json",
                            "--from-sgpr", "5")
    (run,) = report["runs"]
    assert (run["set"], run["seed"], run["M"]) == ("kin40k", 0, 8)
    two, first = run["vfe_first"], run["vfe_first"]["first"]
    for fit in (run["defaults"], two, first):
        assert 0 < fit["rmse"] < 0.9 and np.isfinite(fit["nlpd"])
    assert two["cpu_seconds"] == pytest.approx(first["cpu_seconds"]
                                               + two["second_cpu_seconds"], rel=1e-12)
    assert first["noise_variance"] > 10 * two["noise_variance"]
    diagnosis = run["diagnosis"]
    assert diagnosis["sgpr"]["cpu_seconds"] >= 5 or diagnosis["sgpr"]["stopped"]
    assert diagnosis["sgpr_noise_variance"] > 0
    for fit in (diagnosis["sgpr"], diagnosis["from_sgpr"], diagnosis["from_kmeans"]):
        assert 0 < fit["rmse"] < 0.9 and np.isfinite(fit["nlpd"])
    # --race: both starts cut short, the pick the higher evidence
    race = _quick_results("bench_vfe_first.py", tmp_path, "race.json", "--race", "5", "3",
                          "--out", "race.json")["runs"][0]
    data, variational = race["data"], race["variational"]
    assert data["iterations"] <= 5 and variational["iterations"] <= 3
    higher = "variational" if variational["energy_per_row"] > data["energy_per_row"] else "data"
    assert race["pick"] == higher
    for fit in (data, variational):
        assert 0 < fit["rmse"] < 1.1 and np.isfinite(fit["energy_per_row"])


def test_a_resplit_deals_the_pooled_rows_once_each(monkeypatch):
    """``paper_split(..., resplit=R)``: Kin-40k's 10,000 + 30,000 rows pooled and dealt
    R to training, the rest to test, none twice or lost; standardised on the new
    training rows (their inputs' means 0 and sds 1)."""
    import csv

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    from lib.data import paper_split

    raw = []
    for part in ("train", "test"):
        with open(common_datasets() / f"kin40k_{part}.csv") as f:
            raw += [[float(v) for v in row] for row in list(csv.reader(f))[1:]]
    raw = np.array(raw)
    Xtr, ytr, Xte, yte, y_sd = paper_split("kin40k", resplit=36_000, resplit_seed=3)
    assert (len(ytr), len(yte)) == (36_000, 4_000)
    np.testing.assert_allclose(Xtr.mean(0), 0.0, atol=1e-12)
    np.testing.assert_allclose(Xtr.std(0), 1.0, rtol=1e-12)
    # undo the standardisation with the training rows' own statistics of the raw pool
    train_rows = raw[np.random.default_rng(3).permutation(len(raw))[:36_000]]
    mean, sd = train_rows[:, :-1].mean(0), train_rows[:, :-1].std(0)
    y_mean = train_rows[:, -1].mean()
    dealt = np.vstack([np.column_stack([X * sd + mean, y * y_sd + y_mean])
                       for X, y in ((Xtr, ytr), (Xte, yte))])
    order = lambda a: a[np.lexsort(a.T[::-1])]  # noqa: E731
    np.testing.assert_allclose(order(dealt), order(raw), rtol=1e-10, atol=1e-10)
