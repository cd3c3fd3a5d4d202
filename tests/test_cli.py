"""The ``saspa`` command, run as users run it (in this process by click's runner:
``in_process``)."""

import json

import numpy as np
import pytest

import in_process
from saspa_dask import SASPAClassifier, jobs
from saspa_dask.datasets import synthetic_two_class


def _saspa(*args):
    return in_process.saspa(*args)


def _ingested(tmp_path, X, y):
    """X and y written as a .npy table and ingested by the CLI in 1000-row chunks."""
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    data = tmp_path / "d.zarr"
    jobs.ingest(str(tmp_path / "d.npy"), str(data), chunk_rows=1000)
    return data


def test_demo_reports_what_the_library_computes():
    res = _saspa("demo", "--rows", "3000", "--n-bases", "16", "--json", "--random-state", "4",
                 "--fixed-hyperparameters", "--blur", "full")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    # the same fit by hand: same split, scaling and seed
    X, y = synthetic_two_class(3000, 8, 4)
    order = np.random.default_rng(4).permutation(3000)
    test, train = order[:900], order[900:]
    Xs = (X - X[train].mean(0)) / X[train].std(0)
    clf = SASPAClassifier(optimize_hyperparameters=False, n_bases=16, random_state=4).fit(Xs[train], y[train])
    assert report["test_error"] == pytest.approx(np.mean(clf.predict(Xs[test]) != y[test]))
    assert report["log_evidence"] == pytest.approx(clf.log_evidence_, rel=1e-10)
    assert report["converged"] and report["sweeps"] == clf.n_sweeps_
    assert report["test_error"] < 0.1


def test_demo_on_csv_and_clear_errors(tmp_path):
    good = tmp_path / "d.csv"
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    lines = ["a,b,c,label"] + [f"{r[0]},{r[1]},{r[2]},{'u' if r[0] > 0 else 'v'}" for r in X]
    good.write_text("\n".join(lines) + "\n")
    res = _saspa("demo", "--csv", str(good), "--n-bases", "8", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["test_error"] < 0.1
    res = _saspa("demo", "--csv", str(good), "--target", "nope")
    assert res.returncode != 0 and "no column 'nope'" in res.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b,label\n1,2,x\n3,oops,y\n")
    res = _saspa("demo", "--csv", str(bad))
    assert res.returncode != 0 and "bad.csv:3: not numeric" in res.stderr
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a,b,label\n1,2,x\n3,y\n")
    res = _saspa("demo", "--csv", str(ragged))
    assert res.returncode != 0 and "ragged.csv:3: 2 fields, the header has 3" in res.stderr
    # the hostile pass's cases (in-process: the command's own handling is the subject):
    # a header-only CSV gave a TypeError, a single-class target an unexpected ValueError
    from click.testing import CliRunner

    from saspa_dask.cli import main

    (tmp_path / "header.csv").write_text("a,b,label\n")
    (tmp_path / "one.csv").write_text("a,b,label\n" + "1,2,x\n3,4,x\n" * 20)
    for name, message in (("header", "no data rows after the header"),
                          ("one", "needs samples of 2 classes; got 1 class")):
        res = CliRunner().invoke(main, ["demo", "--csv", str(tmp_path / f"{name}.csv")])
        assert res.exit_code == 1 and message in res.output, res.output
        assert "unexpected" not in res.output


def test_train_poisson_with_learnt_hyperparameters(tmp_path, threads_client):
    """saspa train --likelihood poisson --optimize-hyperparameters on the embedded
    cluster: the trace reaches the model store, scoring writes the expected counts."""
    import zarr

    from saspa_dask import load_model

    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(3000, 2))
    rate = np.exp(1.0 + np.sin(1.5 * X[:, 0]))
    data = _ingested(tmp_path, X, rng.poisson(rate))
    model, scores = tmp_path / "m.zarr", tmp_path / "s.zarr"
    res = _saspa("train", str(data), "--out", str(model), "--task", "regression",
                 "--likelihood", "poisson", "--n-bases", "12", "--optimize-hyperparameters",
                 "--max-hyper-iter", "8")
    assert res.returncode == 0, res.stderr
    info = json.loads(_saspa("info", str(model), "--json").stdout)
    trace = info["hyperparameters"]["log_evidence_per_iteration"]
    assert info["hyperparameters"]["optimized"] and len(trace) >= 2 and trace[-1] > trace[0]
    assert info["likelihood"]["name"] == "poisson"
    jobs.score(model, data, scores, client=threads_client)  # the job behind `saspa score`
    expected = zarr.open_group(str(scores), mode="r")["rate"][...]
    np.testing.assert_allclose(expected, load_model(model).predict(X), rtol=1e-10)
    assert np.mean(np.abs(expected - rate) / rate) < 0.08
    res = _saspa("train", "--fixed-hyperparameters", str(data), "--out", str(tmp_path / "x.zarr"), "--likelihood",
                 "poisson")
    assert res.returncode != 0 and "not a classification likelihood" in res.stderr


def test_train_anderson_memory_flag_reaches_the_model(tmp_path, threads_client):
    """--anderson-memory 0 trains plain EP; the default mixes sweeps (with every chunk
    updated from one posterior, --ep-groups 1: Anderson is not used over grouped
    sweeps); both reach the same fixed point (same tolerance) and the store records the
    setting and counts."""
    from saspa_dask import load_model
    from saspa_dask.datasets import synthetic_two_class

    X, y = synthetic_two_class(4000, 3, seed=2)
    data = _ingested(tmp_path, X, y)
    res = _saspa("train", "--fixed-hyperparameters", str(data), "--out",
                 str(tmp_path / "m0.zarr"), "--n-bases", "16", "--signal-variance", "30",
                 "--tol", "1e-9", "--cold-start", "--anderson-memory", "0", "--ep-groups", "1")
    assert res.returncode == 0, res.stderr
    # the default memory, by the job function the command calls (in this process)
    jobs.train(data, tmp_path / "m3.zarr", n_bases=16, signal_variance=30.0, tol=1e-9,
               anderson_memory=3, ep_groups=1,
               coarse_start=False, optimize_hyperparameters=False, client=threads_client)
    plain, fast = load_model(tmp_path / "m0.zarr"), load_model(tmp_path / "m3.zarr")
    assert plain.ep["anderson_memory"] == 0 and plain.n_anderson_steps_ == 0
    assert fast.ep["anderson_memory"] == 3 and fast.n_anderson_steps_ > 0
    assert fast.n_sweeps_ < plain.n_sweeps_
    np.testing.assert_allclose(fast.alpha_, plain.alpha_, rtol=1e-6,
                               atol=1e-7 * np.abs(plain.alpha_).max())
    assert fast.log_evidence_ == pytest.approx(plain.log_evidence_, rel=1e-9)


def test_train_hyper_restarts_on_the_cluster_match_in_memory(tmp_path):
    """--hyper-restarts 1 on the embedded cluster: both starts are maximised, the one
    of higher evidence is kept, and the model equals the in-memory estimator's."""
    from saspa_dask import SASPAClassifier, load_model
    from saspa_dask.datasets import synthetic_two_class

    X, y = synthetic_two_class(2000, 6, seed=5)
    data, model = _ingested(tmp_path, X, y), tmp_path / "m.zarr"
    res = _saspa("train", str(data), "--out", str(model), "--n-bases", "10",
                 "--optimize-hyperparameters", "--max-hyper-iter", "3", "--n-restarts-optimizer", "1",
                 "--tol", "1e-9", "--learn-bases", "none")
    assert res.returncode == 0, res.stderr
    assert "hyperparameter start 1  iteration" in res.stderr
    fitted = load_model(model)
    starts = fitted.hyperparameter_info_["starts"]
    assert len(starts) == 2
    chosen = fitted.hyperparameter_info_["chosen_start"]
    assert chosen == int(np.argmax([s["log_evidence"] for s in starts]))
    ref = SASPAClassifier(bases=fitted.bases_, max_hyper_iter=3, n_restarts_optimizer=1,
                          learn_bases=False, ep={"tol": 1e-9}).fit(X, y)
    assert ref.hyperparameter_info_["chosen_start"] == chosen
    assert fitted.log_evidence_ == pytest.approx(ref.log_evidence_, rel=1e-6)
    np.testing.assert_allclose(fitted.lengthscale_, ref.lengthscale_, rtol=1e-4)


def test_info_counts_training_rows_of_a_one_vs_rest_model(tmp_path):
    """The rows axis of the stored sites is the last one (one-vs-rest adds a class axis)."""
    from saspa_dask import SASPAClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(180, 2))
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    SASPAClassifier(n_bases=6, random_state=0, optimize_hyperparameters=False).fit(X, y).save(
        tmp_path / "m.zarr")
    res = _saspa("info", str(tmp_path / "m.zarr"), "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["n_training_rows"] == 180 and summary["classes"] == [0, 1, 2]


def test_evaluate_regression_computes_no_rate(tmp_path):
    """Targets of order 1e5 (house prices): a Poisson rate exp(mean) would overflow;
    a Gaussian model's evaluation neither computes nor warns about it, and its RMSE is
    the one of the model's predictions."""
    from saspa_dask import SASPARegressor

    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 2))
    y = 2e5 + 5e4 * np.sin(X[:, 0]) + 1e4 * rng.normal(size=3000)
    data = _ingested(tmp_path, X, y)
    model = SASPARegressor(n_bases=12, random_state=0, optimize_hyperparameters=False).fit(X, y)
    model.save(tmp_path / "m.zarr")
    res = _saspa("evaluate", str(tmp_path / "m.zarr"), str(data), "--json")
    assert res.returncode == 0, res.stderr
    assert "overflow" not in res.stderr and "RuntimeWarning" not in res.stderr
    metrics = json.loads(res.stdout)
    rmse = np.sqrt(np.mean((model.predict(X) - y) ** 2))
    assert metrics["rmse"] == pytest.approx(rmse, rel=1e-9)


def test_demo_reports_the_multiclass_nlp_of_the_true_class(tmp_path):
    """Three classes: the reported NLP is the mean -log probability of each test row's
    own class, as computed here by hand from the same fit."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 2))
    labels = np.array(["a", "b", "c"])[np.digitize(X[:, 0] + 0.3 * rng.normal(size=300),
                                                   [-0.5, 0.5])]
    path = tmp_path / "three.csv"
    path.write_text("x0,x1,label\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, labels)))
    res = _saspa("demo", "--csv", str(path), "--n-bases", "8", "--json", "--random-state",
                 "3", "--fixed-hyperparameters", "--blur", "full")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    order = np.random.default_rng(3).permutation(300)
    test, train = order[:90], order[90:]
    Xs = (X - X[train].mean(0)) / X[train].std(0)
    clf = SASPAClassifier(optimize_hyperparameters=False, n_bases=8, random_state=3).fit(
        Xs[train], labels[train])
    proba = clf.predict_proba(Xs[test])
    own = proba[np.arange(90), np.searchsorted(clf.classes_, labels[test])]
    assert report["test_nlp"] == pytest.approx(-np.mean(np.log(own)), rel=1e-9)
    assert report["test_nlp"] < 1.0  # a two-class formula on three classes gave > 1.5


def test_blur_choices_are_the_basis_families(tmp_path, threads_client):
    """The CLI's written-out --blur choices are "auto" and the estimators' families, and
    frequency features train and score end to end on the embedded cluster."""
    import zarr

    from saspa_dask import load_model
    from saspa_dask.parameters import BLUR_CHOICES
    from saspa_dask.core.kernels import BASIS_FAMILIES

    assert BLUR_CHOICES == ("auto", *BASIS_FAMILIES)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=2000)
    data = _ingested(tmp_path, X, y)
    model, scores = tmp_path / "m.zarr", tmp_path / "s.zarr"
    res = _saspa("train", str(data), "--out", str(model), "--task", "regression",
                 "--blur", "fourier-global", "--n-bases", "10", "--optimize-hyperparameters",
                 "--max-hyper-iter", "10")
    assert res.returncode == 0, res.stderr
    fitted = load_model(model)
    assert fitted.bases_.is_fourier and np.ptp(fitted.bases_.means, axis=0).max() == 0.0
    info = _saspa("info", str(model)).stdout
    assert "not run (features on the inputs' mean)" in info
    assert "bases learnt: means (frequencies, phases)" in info
    jobs.score(model, data, scores, client=threads_client)  # the job behind `saspa score`
    mean = zarr.open_group(str(scores), mode="r")["mean"][...]
    np.testing.assert_allclose(mean, fitted.predict(X), rtol=1e-10, atol=1e-12)
    assert np.sqrt(np.mean((mean - np.sin(2 * X[:, 0])) ** 2)) < 0.15


def test_train_logs_the_sweeps_of_ep_on_all_rows_and_learnings_only_when_verbose(tmp_path):
    """Outside a terminal a sweep is a line: by default those of EP on all rows after
    learning only (as many as the model's n_sweeps_), with --verbose also the EP runs
    inside learning, on the row subsample or (a table under hyper_subsample) on all
    rows."""
    from saspa_dask import load_model

    X, y = synthetic_two_class(3000, 2, 7)
    data = _ingested(tmp_path, X, y)
    common = ["--n-bases", "6", "--hyper-subsample", "500", "--max-hyper-iter", "3"]
    quiet = _saspa("train", data, "--out", tmp_path / "q.zarr", *common)
    loud = _saspa("-v", "train", data, "--out", tmp_path / "v.zarr", *common)
    assert quiet.returncode == 0 and loud.returncode == 0, quiet.stderr + loud.stderr

    def sweep_lines(res):
        return [ln for ln in res.stderr.splitlines() if ln.lstrip().startswith("sweep ")]

    assert len(sweep_lines(quiet)) == load_model(tmp_path / "q.zarr").n_sweeps_
    assert "iteration   1" in quiet.stderr  # learning is said by its iterations
    assert len(sweep_lines(loud)) > load_model(tmp_path / "v.zarr").n_sweeps_ + 3
    # learning on all 3,000 rows, the model its last evaluation's EP: every sweep is
    # learning's (there were a line each, most of a wide table's log)
    on_all = _saspa("train", data, "--out", tmp_path / "a.zarr", "--n-bases", "6",
                    "--max-hyper-iter", "3")
    assert on_all.returncode == 0, on_all.stderr
    assert "EP on 3000 rows, learning hyperparameters" in on_all.stderr
    assert "iteration   3" in on_all.stderr and sweep_lines(on_all) == []


def test_info_describes_a_data_store(tmp_path):
    """saspa info on a data store: rows, inputs, chunks, columns, target and classes,
    where it came from, as ingest and split wrote them (counted here from the file)."""
    rng = np.random.default_rng(4)
    lines = ["key,height,weight,kind"] + [
        f"k{i},{h:.3f},{w:.3f},{'cat' if h > w else 'dog'}"
        for i, (h, w) in enumerate(rng.normal(size=(500, 2)))]
    (tmp_path / "pets.csv").write_text("\n".join(lines) + "\n")
    jobs.ingest(tmp_path / "pets.csv", tmp_path / "pets.zarr", id_column="key",
                chunk_rows=128)
    shown = _saspa("info", tmp_path / "pets.zarr")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "rows: 500 x 2 inputs in 4 chunk(s) of up to 128 rows, ids kept" in text
    assert "columns: height, weight" in text and "target: kind (classes cat, dog)" in text
    assert f"source: {tmp_path / 'pets.csv'}" in text
    summary = json.loads(_saspa("info", tmp_path / "pets.zarr", "--json").stdout)
    assert summary["kind"] == "data store" and summary["complete"] is True
    assert summary["rows"] == 500 and summary["columns"] == ["height", "weight"]
    missing = _saspa("info", tmp_path / "nowhere.zarr")
    assert missing.returncode == 1 and "nowhere.zarr" in missing.stderr


def test_info_abridges_a_wide_stores_columns_and_json_lists_them_all(tmp_path):
    """A wide table's info line names the first 20 and the last 4 columns and says how
    many there are; --json gives every name."""
    names = [f"c{k}" for k in range(40)]
    rows = [",".join(names + ["y"])] + [",".join(["1.5"] * 40 + [str(i % 2)])
                                         for i in range(30)]
    (tmp_path / "wide.csv").write_text("\n".join(rows) + "\n")
    jobs.ingest(tmp_path / "wide.csv", tmp_path / "wide.zarr")
    text = _saspa("info", tmp_path / "wide.zarr").stdout
    shown = ", ".join(names[:20] + ["..."] + names[-4:])
    assert f"columns: {shown} (40 in all; --json lists all)" in text
    summary = json.loads(_saspa("info", tmp_path / "wide.zarr", "--json").stdout)
    assert summary["columns"] == names


def test_train_and_run_print_json_when_asked(tmp_path):
    """--json: one JSON object on stdout, whose numbers are the saved model's."""
    from saspa_dask import load_model

    X, y = synthetic_two_class(600, 2, seed=5)
    data = _ingested(tmp_path, X, y)
    res = _saspa("train", str(data), "--out", str(tmp_path / "m.zarr"), "--n-bases", "8",
                 "--max-hyper-iter", "3", "--json")
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    model = load_model(tmp_path / "m.zarr")
    assert result["out"] == str(tmp_path / "m.zarr") and result["converged"] is True
    assert result["n_sweeps"] == model.n_sweeps_
    assert result["log_evidence"] == model.log_evidence_
    job = tmp_path / "job.toml"
    job.write_text(f'[[steps]]\nkind = "evaluate"\nmodel = "m.zarr"\ndata = "{data.name}"\n')
    ran = _saspa("run", str(job), "--json")
    assert ran.returncode == 0, ran.stderr
    summary = json.loads(ran.stdout)
    assert summary["skipped"] is False and [s["kind"] for s in summary["steps"]] == ["evaluate"]
    assert "on " in ran.stderr  # the step's own line moved to stderr
