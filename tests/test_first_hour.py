"""The first hour with a real table (issue 58), replayed on generated tables of the two
shapes a new user brought: a crash-occupant classification (text columns with a real
category written "none", labels "alive" / "dead", about 5% positives) and a wage
regression fitted on log(y).  Each goes ingest, split, train, evaluate, score, report
and info through the ``saspa`` commands, and the numbers are checked against
scikit-learn's metrics computed here from the scored probabilities and predictions."""

import csv
import json

import numpy as np
import pytest
from sklearn.metrics import brier_score_loss, roc_auc_score

import browser
import in_process
from report_page import ReportPage


def _crash_table(path, n=2400, seed=0):
    rng = np.random.default_rng(seed)
    airbag = rng.choice(["none", "front", "front+side"], n, p=[0.45, 0.35, 0.2])
    belt = rng.choice(["none", "lap", "lap+shoulder"], n, p=[0.3, 0.2, 0.5])
    speed = rng.gamma(4.0, 12.0, n)
    age = rng.integers(16, 90, n)
    risk = (0.045 * speed + 0.03 * age - 1.2 * (belt != "none") - 0.6 * (airbag != "none")
            - 5.4 + rng.normal(0, 0.5, n))
    label = np.where(risk > 0, "dead", "alive")
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["speed", "age", "airbag", "belt", "outcome"])
        out.writerows(zip(np.round(speed, 2), age, airbag, belt, label))
    return label


def _wage_table(path, n=2400, seed=1):
    rng = np.random.default_rng(seed)
    sector = rng.choice(["public", "private", "none"], n)
    hours = rng.uniform(10, 60, n)
    years = rng.uniform(0, 40, n)
    log_wage = (5.0 + 0.02 * hours + 0.03 * years - 0.0004 * years ** 2
                + 0.2 * (sector == "public") + rng.normal(0, 0.25, n))
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["hours", "years", "sector", "wage"])
        out.writerows(zip(np.round(hours, 2), np.round(years, 2), sector,
                          np.round(np.exp(log_wage), 2)))


def _ok(*args):
    result = in_process.saspa(*args)
    assert result.returncode == 0, result.stderr
    return result


def _scores(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_rare_event_classification_keeps_none_and_agrees_with_scikit_learn(tmp_path):
    labels = _crash_table(tmp_path / "crash.csv")
    assert 0.02 < np.mean(labels == "dead") < 0.08
    _ok("ingest", tmp_path / "crash.csv", "--out", tmp_path / "c.zarr", "--text", "onehot")
    info = json.loads(_ok("info", tmp_path / "c.zarr", "--json").stdout)
    # "none" is a category of airbag and belt, not a missing value
    assert {"airbag=none", "belt=none"} <= set(info["columns"])
    _ok("split", tmp_path / "c.zarr", "--test-fraction", "0.3", "--seed", "2")
    train, test = tmp_path / "c-train.zarr", tmp_path / "c-test.zarr"
    _ok("train", train, "--out", tmp_path / "m.zarr", "--n-bases", "16",
        "--max-hyper-iter", "6", "--random-state", "0")
    metrics = json.loads(_ok("evaluate", tmp_path / "m.zarr", test, "--json").stdout)
    _ok("score", tmp_path / "m.zarr", test, "--out", tmp_path / "s.csv")
    rows = _scores(tmp_path / "s.csv")
    import zarr

    y = zarr.open_group(str(test), mode="r")["y"][...]
    assert len(rows) == metrics["rows"] == len(y)
    dead = info["target_classes"].index("dead")
    p_dead = np.array([float(r["proba[dead]"]) for r in rows])  # named by its label
    assert {r["label"] for r in rows} <= {"alive", "dead"}
    assert metrics["brier"] == pytest.approx(brier_score_loss(y == dead, p_dead), rel=1e-12)
    assert metrics["auc"] == pytest.approx(roc_auc_score(y == dead, p_dead), rel=1e-12)
    # the report, on every test row: the user's labels, AUC and Brier as evaluate says
    page_path = tmp_path / "r.html"
    _ok("report", tmp_path / "m.zarr", test, "--out", page_path)
    cells = ReportPage(page_path.read_text()).cells
    assert cells["classes"] == "alive, dead"
    assert cells["positive class"].startswith("dead ")
    assert cells["AUC"] == f"{metrics['auc']:.6g}"
    assert cells["Brier score"] == f"{metrics['brier']:.6g}"
    assert "P(dead) against the share of rows that are dead" in page_path.read_text()
    shown = json.loads(_ok("info", tmp_path / "m.zarr", "--json").stdout)
    assert shown["class_labels"] == ["alive", "dead"]
    if browser.CHROMIUM is not None:  # CI installs it; every picture decodes there
        problems, images = browser.load(
            page_path.as_uri(), "Array.from(document.images).map(i => i.naturalWidth)")
        assert problems == [] and len(images) >= 5 and min(images) > 100


def test_a_log_target_regression_reports_the_coverage_evaluate_measures(tmp_path):
    _wage_table(tmp_path / "wage.csv")
    _ok("ingest", tmp_path / "wage.csv", "--out", tmp_path / "w.zarr", "--text", "onehot")
    _ok("split", tmp_path / "w.zarr", "--test-fraction", "0.3", "--seed", "3")
    train, test = tmp_path / "w-train.zarr", tmp_path / "w-test.zarr"
    _ok("train", train, "--out", tmp_path / "m.zarr", "--n-bases", "12", "--log-target",
        "--max-hyper-iter", "8", "--random-state", "0")
    metrics = json.loads(_ok("evaluate", tmp_path / "m.zarr", test, "--json").stdout)
    page_path = tmp_path / "r.html"
    _ok("report", tmp_path / "m.zarr", test, "--out", page_path)
    cells = ReportPage(page_path.read_text()).cells
    # the page's 95% coverage is evaluate's: log-normal intervals, not mean +- z std
    assert cells["95% interval"] == f"{metrics['coverage_95']:.3f} of rows"
    assert cells["rmse"] == f"{metrics['rmse']:.6g}"
    assert cells["target"].startswith("log(y)")
    assert "noise variance (of log y)" in cells
    # the intervals scored are the ones counted
    _ok("score", tmp_path / "m.zarr", test, "--out", tmp_path / "s.csv")
    import zarr

    y = zarr.open_group(str(test), mode="r")["y"][...]
    rows = _scores(tmp_path / "s.csv")
    lower = np.array([float(r["lower"]) for r in rows])
    upper = np.array([float(r["upper"]) for r in rows])
    assert np.mean((y >= lower) & (y <= upper)) == pytest.approx(metrics["coverage_95"],
                                                                 abs=1e-12)
    assert 0.85 < metrics["coverage_95"] < 0.99
    text = _ok("info", tmp_path / "m.zarr").stdout
    assert "target scale: log(y): the model fits log(y)" in text
    assert json.loads(_ok("info", tmp_path / "m.zarr", "--json").stdout)["log_target"]


def test_na_values_set_the_missing_tokens_and_like_reapplies_them(tmp_path):
    (tmp_path / "t.csv").write_text(
        "size,airbag,label\n1.5,none,a\n-,front,b\n3.5,n/a,a\n2.0,front,b\n4.0,none,a\n")
    default = in_process.saspa("ingest", tmp_path / "t.csv", "--out", tmp_path / "d.zarr",
                               "--text", "onehot")
    # by default "-" is text, and a column of numbers and words is refused (one-hot
    # over its words would encode every number as no category), naming the way out
    assert default.returncode == 1 and not (tmp_path / "d.zarr").exists()
    assert ("column 'size' holds numbers (4 rows) and text (1 row, e.g. '-'): if the text "
            "means a missing value, name it with na_values (--na-values TOKEN)"
            in default.stderr)
    given = _ok("ingest", tmp_path / "t.csv", "--out", tmp_path / "g.zarr", "--text",
                "onehot", "--missing", "impute", "--na-values", "-", "--na-values", "N/A")
    assert "missing values: column 'size': '-' in 1 row" in given.stderr
    assert "missing values: column 'airbag': 'n/a' in 1 row" in given.stderr
    info = json.loads(_ok("info", tmp_path / "g.zarr", "--json").stdout)
    assert info["columns"][0] == "size" and "airbag=none" in info["columns"]
    import zarr

    stored = zarr.open_group(str(tmp_path / "g.zarr"), mode="r")
    assert stored["X"][1, 0] == pytest.approx(np.median([1.5, 3.5, 2.0, 4.0]))
    pre = dict(stored.attrs)["preprocessing"]
    assert pre["na_values"] == ["-", "n/a"]
    assert pre["missing_tokens"] == {"size": {"-": 1}, "airbag": {"n/a": 1}}
    # --like reads the new file with the same tokens; giving them again is refused
    (tmp_path / "new.csv").write_text("size,airbag,label\n-,front,a\n2.5,none,b\n")
    _ok("ingest", tmp_path / "new.csv", "--out", tmp_path / "n.zarr", "--like",
        tmp_path / "g.zarr")
    again = zarr.open_group(str(tmp_path / "n.zarr"), mode="r")
    assert again["X"][0, 0] == stored["X"][1, 0]
    both = in_process.saspa("ingest", tmp_path / "new.csv", "--out", tmp_path / "x.zarr",
                            "--like", tmp_path / "g.zarr", "--na-values", "-")
    assert both.returncode != 0 and "na_values" in both.stderr
    # the job file's key is the same parameter
    (tmp_path / "job.toml").write_text(
        '[[steps]]\nkind = "ingest"\nsource = "t.csv"\nout = "j.zarr"\ntext = "onehot"\n'
        'missing = "impute"\nna_values = ["-", "n/a"]\n')
    _ok("run", tmp_path / "job.toml")
    job = dict(zarr.open_group(str(tmp_path / "j.zarr"), mode="r").attrs)
    assert job["preprocessing"]["missing_tokens"] == pre["missing_tokens"]


def test_export_gives_a_stores_rows_back_as_ingested_and_as_written(tmp_path):
    """A store's rows out, for a baseline on the same split: the encoded inputs equal
    the store's X; decoded, the text, date and number cells equal the source's (the
    rows the split kept, by their row numbers); CSV and Parquet alike."""
    rng = np.random.default_rng(4)
    n = 300
    kinds = rng.choice(["none", "flat", "house", "=cmd"], n)
    days = rng.integers(0, 3000, n)
    dates = [(np.datetime64("2015-01-01") + int(d)).astype(str) for d in days]
    size = np.round(rng.uniform(20, 200, n), 3)
    label = np.where(size + 30 * (kinds == "house") > 110, "big", "small")
    ids = [f"k{i:04d}" for i in range(n)]
    with open(tmp_path / "t.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["key", "size", "kind", "since", "label"])
        out.writerows(zip(ids, size, kinds, dates, label))
    _ok("ingest", tmp_path / "t.csv", "--out", tmp_path / "t.zarr", "--text", "onehot",
        "--id-column", "key")
    _ok("split", tmp_path / "t.zarr", "--test-fraction", "0.4", "--seed", "5")
    test = tmp_path / "t-test.zarr"
    import zarr

    store = zarr.open_group(str(test), mode="r")
    X, rows = store["X"][...], store["row"][...]
    columns = list(dict(store.attrs)["columns"])
    said = _ok("export", test, "--out", tmp_path / "enc.csv")
    assert f"exported {len(rows)} rows x {len(columns) + 3} columns" in said.stdout
    encoded = _scores(tmp_path / "enc.csv")
    assert list(encoded[0]) == ["key", "row", *columns, "label"]
    np.testing.assert_array_equal([[float(r[c]) for c in columns] for r in encoded], X)
    _ok("export", test, "--out", tmp_path / "dec.csv", "--decode", "--no-escape-formulas")
    decoded = _scores(tmp_path / "dec.csv")
    assert list(decoded[0]) == ["key", "row", "size", "kind", "since", "label"]
    for r in decoded:
        k = int(r["row"])
        assert (r["key"], float(r["size"]), r["kind"], r["since"], r["label"]) == (
            ids[k], size[k], kinds[k], dates[k], label[k])
    # the CSV default escapes a cell a spreadsheet would run
    _ok("export", test, "--out", tmp_path / "e.csv", "--decode")
    escaped = {r["kind"] for r in _scores(tmp_path / "e.csv")}
    assert "'=cmd" in escaped and "=cmd" not in escaped
    pq = pytest.importorskip("pyarrow.parquet")
    _ok("export", test, "--out", tmp_path / "dec.parquet", "--decode")
    table = pq.read_table(tmp_path / "dec.parquet").to_pydict()
    assert table["kind"] == [r["kind"] for r in decoded]
    assert table["size"] == [float(r["size"]) for r in decoded]
    # nothing of the user's replaced; a changed store refused before the file appears
    (tmp_path / "mine.csv").write_text("my notes\n")
    refused = in_process.saspa("export", test, "--out", tmp_path / "mine.csv", "--overwrite")
    assert refused.returncode == 1 and (tmp_path / "mine.csv").read_text() == "my notes\n"
    changed = zarr.open_group(str(test), mode="r+")
    first = changed["X"][0, 0]
    changed["X"][0, 0] = first + 1.0
    bad = in_process.saspa("export", test, "--out", tmp_path / "bad.csv")
    assert bad.returncode == 1 and "differs from the fingerprint" in bad.stderr
    assert not (tmp_path / "bad.csv").exists()
    assert not list(tmp_path.glob(".bad.csv*"))
    # a job file's export step is the same job
    changed["X"][0, 0] = first  # back as it was
    (tmp_path / "job.toml").write_text(
        '[[steps]]\nkind = "export"\nstore = "t-test.zarr"\nout = "job.parquet"\n'
        'decode = true\n')
    ran = _ok("run", tmp_path / "job.toml")
    assert f"exported {len(rows)} rows -> {tmp_path / 'job.parquet'}" in ran.stdout
    assert pq.read_table(tmp_path / "job.parquet").to_pydict() == table


def test_cv_measures_each_fold_on_rows_its_model_never_saw(tmp_path):
    """``train --cv 3``: the folds partition the rows (split's draws); each fold's
    metrics are those of a model trained with the same options on the other folds and
    evaluated on it, here redone by hand; the model on every row is the one plain
    ``train`` makes, and it records the folds."""
    from saspa_dask import jobs, load_model
    from saspa_dask.jobs.cross_validation import cv_lines
    from saspa_dask.storage.split import split_store

    rng = np.random.default_rng(6)
    X = rng.normal(size=(900, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=900)
    np.save(tmp_path / "d.npy", np.column_stack([X, y]))
    _ok("ingest", tmp_path / "d.npy", "--out", tmp_path / "d.zarr", "--chunk-rows", "200")
    options = ["--n-bases", "8", "--max-hyper-iter", "4", "--random-state", "3"]
    said = _ok("train", tmp_path / "d.zarr", "--out", tmp_path / "cv.zarr", "--cv", "3",
               *options, "--json")
    cv = json.loads(said.stdout)["cv"]
    assert "cv fold 2/3 (" in said.stderr  # each fold's line as it ends
    # what the model keeps and saspa info shows; the text mode's closing line
    assert json.loads(_ok("info", tmp_path / "cv.zarr", "--json").stdout)["cv_metrics"] == cv
    assert cv_lines(cv)[-1].startswith("cv mean over 3 folds: rmse ")
    assert cv["k"] == 3 and cv["seed"] == 3 and len(cv["folds"]) == 3
    import zarr

    rows = []
    for k in range(3):
        split_store(tmp_path / "d.zarr", tmp_path / f"tr{k}.zarr", tmp_path / f"te{k}.zarr",
                    fold=(k, 3), seed=3)
        test_rows = zarr.open_group(str(tmp_path / f"te{k}.zarr"), mode="r")["row"][...]
        train_rows = zarr.open_group(str(tmp_path / f"tr{k}.zarr"), mode="r")["row"][...]
        assert not set(test_rows) & set(train_rows)
        assert len(test_rows) + len(train_rows) == 900
        rows.extend(test_rows)
        jobs.train(tmp_path / f"tr{k}.zarr", tmp_path / f"m{k}.zarr", n_bases=8,
                   max_hyper_iter=4, random_state=3, task="regression")
        by_hand = jobs.evaluate(tmp_path / f"m{k}.zarr", tmp_path / f"te{k}.zarr")
        assert cv["folds"][k]["rows"] == by_hand["rows"]
        # named by its fold, not by the scratch store the job removed
        assert cv["folds"][k]["data"] == f"fold {k + 1} of 3 of {tmp_path / 'd.zarr'}"
        for key in ("rmse", "mae", "nlpd"):  # the same sums, maybe in another order
            assert cv["folds"][k][key] == pytest.approx(by_hand[key], rel=1e-9), key
    assert sorted(rows) == list(range(900))  # the folds partition the rows
    rmse = [f["rmse"] for f in cv["folds"]]
    assert cv["mean"]["rmse"] == pytest.approx(np.mean(rmse), rel=1e-12)
    assert cv["std"]["rmse"] == pytest.approx(np.std(rmse, ddof=1), rel=1e-12)
    assert 0.05 < cv["mean"]["rmse"] < 0.5
    # the model on every row: plain train's, recording the folds
    _ok("train", tmp_path / "d.zarr", "--out", tmp_path / "plain.zarr", *options)
    np.testing.assert_allclose(load_model(tmp_path / "cv.zarr").predict(X[:50]),
                               load_model(tmp_path / "plain.zarr").predict(X[:50]),
                               rtol=1e-9, atol=1e-12)  # the same fit, up to sum order
    text = _ok("info", tmp_path / "cv.zarr").stdout
    assert f"cross-validation: 3 folds (seed 3): rmse {cv['mean']['rmse']:.5g}" in text
