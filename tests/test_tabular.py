"""The data a user brings, through real ``saspa`` processes and stores on disk: row ids
and source row numbers from ingest to the exported scores, imputation reapplied by
``--like``, drift counts, delimiters, compressed and malformed files, direct scoring
of a file, held-out metrics and AUC.  Every expected value is computed here from the
CSV text itself (the test's own encoding), or by scikit-learn."""

import csv
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import in_process
from saspa_dask import SASPAClassifier, jobs, load_model

BIN = Path(sys.executable).parent


def saspa(*args, check=True):
    res = in_process.saspa(*args)
    if check:
        assert res.returncode == 0, res.stderr
    return res


def write_table(path, rows, delimiter=","):
    with open(path, "w", newline="") as fh:
        csv.writer(fh, delimiter=delimiter).writerows(rows)


def people(n=240, seed=0):
    """A table with an id, a number with gaps, a text column with gaps and a text
    label; returns its rows (header first)."""
    rng = np.random.default_rng(seed)
    rows = [["key", "age", "city", "score", "label"]]
    for i in range(n):
        age = rng.normal(40, 10)
        city = rng.choice(["paris", "rome", "oslo"])
        score = rng.normal()
        label = "good" if score + (city == "oslo") > 0.3 else "bad"
        rows.append([f"id{i:04d}", "" if i % 7 == 3 else f"{age:.3f}",
                     "" if i % 11 == 5 else city, f"{score:.4f}", label])
    return rows


def own_encoding(rows, medians):
    """The test's own encoding of ``rows`` (header first): age (median-imputed),
    city one-hot over oslo, paris, rome, (missing) when present, score."""
    body = rows[1:]
    cities = sorted({r[2] for r in body if r[2]})
    if any(r[2] == "" for r in body):
        cities.append("(missing)")
    X = [[float(r[1]) if r[1] else medians["age"],
          *[1.0 if (r[2] or "(missing)") == c else 0.0 for c in cities],
          float(r[3])] for r in body]
    return np.array(X), cities


@pytest.fixture(scope="module")
def people_store(tmp_path_factory):
    """people() ingested by the command line (ids, imputation, one-hot), its split and
    a model trained on the training part: shared by the tests that read them."""
    d = tmp_path_factory.mktemp("people")
    write_table(d / "t.csv", people())
    saspa("ingest", d / "t.csv", "--out", d / "t.zarr", "--id-column", "key", "--missing",
          "impute", "--text", "onehot")
    saspa("split", d / "t.zarr", "--test-fraction", "0.3")
    saspa("train", d / "t-train.zarr", "--out", d / "m.zarr", "--n-bases", "8",
          "--fixed-hyperparameters")
    return d


def test_ids_imputation_and_row_numbers_reach_the_exported_scores(people_store, tmp_path):
    rows, d = people(), people_store
    group = zarr.open_group(str(d / "t.zarr"), mode="r")
    ages = np.array([float(r[1]) for r in rows[1:] if r[1]])
    scores = np.array([float(r[3]) for r in rows[1:]])
    assert group.attrs["preprocessing"]["impute"] == {"age": float(np.median(ages)),
                                                      "score": float(np.median(scores))}
    X, cities = own_encoding(rows, {"age": np.median(ages)})
    assert group.attrs["columns"] == ["age", *[f"city={c}" for c in cities], "score"]
    np.testing.assert_array_equal(group["X"][...], X)
    np.testing.assert_array_equal(group["id"][...], [r[0] for r in rows[1:]])
    np.testing.assert_array_equal(group["row"][...], np.arange(len(rows) - 1))

    saspa("score", d / "m.zarr", d / "t-test.zarr", "--out", tmp_path / "s.csv", "--format",
          "csv")
    with open(tmp_path / "s.csv") as fh:
        out = list(csv.DictReader(fh))
    model = load_model(d / "m.zarr")
    source_rows = [int(r["row"]) for r in out]
    assert [r["key"] for r in out] == [rows[1 + k][0] for k in source_rows]
    proba = model.predict_proba(X[source_rows])[:, list(model.classes_).index(1.0)]
    np.testing.assert_allclose([float(r["proba[good]"]) for r in out], proba, rtol=1e-10)
    assert {r["label"] for r in out} <= {"good", "bad"}


def test_ids_are_kept_exactly_and_formulas_escaped_in_csv(tmp_path, threads_client):
    """The hostile pass's cases: ingest stripped the spaces around ids (' lead8' became
    'lead8', which no longer joins back), and ids beginning with =, +, -, @ went into
    CSV exports as they were (a formula when opened in a spreadsheet)."""
    ids = [" lead8", "tail ", "=HYPERLINK(\"http://x\")", "+1+1", "-2-2", "@SUM(A1)",
           "\tTAB", "-5", "+7.5", "plain"]
    rng = np.random.default_rng(2)
    rows = [["key", "a", "label"]] + [[k, f"{v:.3f}", str(int(v > 0))]
                                      for k, v in zip(ids * 20, rng.normal(size=200))]
    write_table(tmp_path / "t.csv", rows)
    jobs.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", id_column="key")
    stored = zarr.open_group(str(tmp_path / "t.zarr"), mode="r")["id"][...]
    assert stored.tolist() == [r[0] for r in rows[1:]]
    jobs.train(tmp_path / "t.zarr", tmp_path / "m.zarr", n_bases=4,
               optimize_hyperparameters=False, client=threads_client)
    escaped = {" lead8": " lead8", "tail ": "tail ", "-5": "-5", "+7.5": "+7.5",
               "plain": "plain"}
    for escape in (True, False):
        out = tmp_path / f"s-{escape}.csv"
        jobs.score(tmp_path / "m.zarr", tmp_path / "t.zarr", out, format="csv",
                   escape_formulas=escape, client=threads_client)
        with open(out, newline="") as fh:
            written = [r["key"] for r in csv.DictReader(fh)]
        expected = [(escaped.get(k, "'" + k) if escape else k) for k in ids * 20]
        assert written == expected


def test_like_reapplies_imputation_and_counts_drift(tmp_path):
    rows = people()
    write_table(tmp_path / "t.csv", rows)
    saspa("ingest", tmp_path / "t.csv", "--out", tmp_path / "t.zarr", "--id-column", "key",
          "--missing", "impute", "--text", "onehot")
    ages = [float(r[1]) for r in rows[1:] if r[1]]
    new = [["key", "age", "city", "score"],
           ["n1", "", "paris", "0.1"],                  # missing age: the training median
           ["n2", f"{max(ages) + 5}", "lima", "0.2"],  # above range, unseen city
           ["n3", f"{min(ages) - 1}", "", "0.3"],      # below range, missing city
           ["n4", "41", "rome", "9.5"]]                 # score above range
    write_table(tmp_path / "new.csv", new, delimiter=";")
    res = saspa("ingest", tmp_path / "new.csv", "--out", tmp_path / "new.zarr", "--like",
                tmp_path / "t.zarr", "--unknown", "ignore")
    group = zarr.open_group(str(tmp_path / "new.zarr"), mode="r")
    drift = group.attrs["drift"]
    assert drift["age"]["below_range"] == 1 and drift["age"]["above_range"] == 1
    assert drift["age"]["missing"] == 1
    assert drift["age"]["training_missing_rate"] == pytest.approx(
        sum(r[1] == "" for r in rows[1:]) / (len(rows) - 1))
    assert drift["city"]["unseen_categories"] == 1 and drift["city"]["missing"] == 1
    assert drift["score"] == {"below_range": 0, "above_range": 1}
    assert "drift: column 'age'" in res.stderr
    names = ["oslo", "paris", "rome", "(missing)"]  # lima, unseen: all zeros
    expected = [[float(r[1]) if r[1] else float(np.median(ages)),
                 *[1.0 if (r[2] or "(missing)") == c else 0.0 for c in names], float(r[3])]
                for r in new[1:]]
    np.testing.assert_array_equal(group["X"][...], expected)
    np.testing.assert_array_equal(group["id"][...], ["n1", "n2", "n3", "n4"])


def test_delimiters_are_found_from_the_header(tmp_path):
    rows = [["a", "b", "y"]] + [[f"{i}", f"{i * 0.5}", f"{i % 2}"] for i in range(30)]
    write_table(tmp_path / "comma.csv", rows)
    jobs.ingest(tmp_path / "comma.csv", tmp_path / "c.zarr")
    X = zarr.open_group(str(tmp_path / "c.zarr"), mode="r")["X"][...]
    np.testing.assert_array_equal(X, [[float(r[0]), float(r[1])] for r in rows[1:]])
    for k, delimiter in enumerate([";", "\t", "|"]):
        write_table(tmp_path / f"{k}.csv", rows, delimiter=delimiter)
        attrs = jobs.ingest(tmp_path / f"{k}.csv", tmp_path / f"{k}.zarr")
        assert attrs["preprocessing"]["delimiter"] == delimiter
        np.testing.assert_array_equal(
            zarr.open_group(str(tmp_path / f"{k}.zarr"), mode="r")["X"][...], X)


def test_a_given_delimiter_is_used_and_a_wrong_one_named(tmp_path):
    (tmp_path / "pipe.csv").write_text("a|b\n1|2\n3|4\n")
    saspa("ingest", tmp_path / "pipe.csv", "--out", tmp_path / "p.zarr", "--delimiter", "|")
    group = zarr.open_group(str(tmp_path / "p.zarr"), mode="r")
    np.testing.assert_array_equal(group["X"][...], [[1.0], [3.0]])
    (tmp_path / "one.csv").write_text("a|b\n1,2|3\n")
    res = saspa("ingest", tmp_path / "one.csv", "--out", tmp_path / "y.zarr", "--delimiter",
                ",", check=False)
    assert res.returncode == 1 and "one.csv:2" in res.stderr and "--delimiter" in res.stderr


def test_gzip_named_csv_is_read_and_bad_bytes_are_named(tmp_path):
    rows = [["a", "y"]] + [[f"{i}", f"{i % 2}"] for i in range(20)]
    write_table(tmp_path / "plain.csv", rows)
    (tmp_path / "packed.csv").write_bytes(gzip.compress((tmp_path / "plain.csv").read_bytes()))
    saspa("ingest", tmp_path / "packed.csv", "--out", tmp_path / "p.zarr")
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "p.zarr"), mode="r")["X"][:, 0],
                                  np.arange(20.0))
    (tmp_path / "latin.csv").write_bytes(b"a,y\n1,0\n\xe9t\xe9,1\n")
    res = saspa("ingest", tmp_path / "latin.csv", "--out", tmp_path / "l.zarr", check=False)
    assert res.returncode == 1 and "latin.csv" in res.stderr and "UTF-8" in res.stderr
    (tmp_path / "huge.csv").write_text("a,y\n1,0\n" + "x" * (2 << 20) + ",1\n")
    res = saspa("ingest", tmp_path / "huge.csv", "--out", tmp_path / "h.zarr", check=False)
    assert res.returncode == 1 and "huge.csv:3" in res.stderr and "unexpected" not in res.stderr


def test_chunk_rows_are_bounded_by_the_rows(tmp_path):
    write_table(tmp_path / "t.csv", [["a", "y"]] + [[f"{i}", "1"] for i in range(20)])
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    res = subprocess.run([sys.executable, "-c", probe, str(BIN / "saspa"), "ingest",
                          str(tmp_path / "t.csv"), "--out", str(tmp_path / "t.zarr"),
                          "--chunk-rows", "200000000"], capture_output=True, text=True,
                         check=True)
    assert int(res.stdout.split()[-1]) < 1_000_000  # kB: under 1 GB (was 6.6 GB)
    group = zarr.open_group(str(tmp_path / "t.zarr"), mode="r")
    assert group["X"].chunks[0] == 20 and group.attrs["chunk_rows"] == 20


def test_text_target_is_refused_as_a_regression(tmp_path):
    write_table(tmp_path / "t.csv", people(60))
    saspa("ingest", tmp_path / "t.csv", "--out", tmp_path / "t.zarr", "--id-column", "key",
          "--missing", "drop-rows", "--text", "onehot")
    res = saspa("train", tmp_path / "t.zarr", "--out", tmp_path / "m.zarr", "--task",
                "regression", check=False)
    assert res.returncode == 1 and "text labels" in res.stderr
    assert not (tmp_path / "m.zarr").exists()


def test_predict_scores_a_file_directly_and_resumes(people_store, tmp_path):
    rows, d = people(), people_store
    new = [r[:4] for r in people(50, seed=1)]
    write_table(tmp_path / "new.csv", new)
    saspa("predict", d / "m.zarr", tmp_path / "new.csv", "--out", tmp_path / "p.parquet",
          "--workers", "1")
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "p.parquet").to_pydict()
    assert table["key"] == [r[0] for r in new[1:]] and table["row"] == list(range(50))
    ages = np.array([float(r[1]) for r in rows[1:] if r[1]])
    X, _ = own_encoding([r + ["bad"] for r in new], {"age": float(np.median(ages))})
    model = load_model(d / "m.zarr")
    np.testing.assert_allclose(table["proba[good]"], model.predict_proba(X)[:, 1],
                               rtol=1e-10)
    # a run interrupted while it exported left its encoded rows and scores: the next
    # run with the same model, file and options reuses them
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jobs.scoring, "export_scores", _interrupted)
        with pytest.raises(KeyboardInterrupt):
            jobs.predict(d / "m.zarr", tmp_path / "new.csv", tmp_path / "again.csv",
                         workers=1)
    work = tmp_path / ".again.csv.predict"
    assert (work / "scores.zarr").is_dir() and not (tmp_path / "again.csv").exists()
    result = jobs.predict(d / "m.zarr", tmp_path / "new.csv", tmp_path / "again.csv",
                          workers=1)
    assert result["reused"] and result["chunks_written"] == 0 and not work.exists()
    with open(tmp_path / "again.csv") as fh:
        again = list(csv.DictReader(fh))
    np.testing.assert_allclose([float(r["proba[good]"]) for r in again],
                               table["proba[good]"], rtol=1e-12)


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt("stopped by the test")


def test_held_out_metrics_and_auc(tmp_path, capsys):
    from sklearn.metrics import roc_auc_score

    rows = [r for r in people(300) if "" not in r[1:3]]
    write_table(tmp_path / "t.csv", rows)
    jobs.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", id_column="key", text="onehot")
    jobs.split(tmp_path / "t.zarr", test_fraction=0.3)
    result = jobs.train(tmp_path / "t-train.zarr", tmp_path / "m.zarr", n_bases=8,
                        optimize_hyperparameters=False,
                        test=tmp_path / "t-test.zarr")
    test = zarr.open_group(str(tmp_path / "t-test.zarr"), mode="r")
    X, y = test["X"][...], test["y"][...]
    model = load_model(tmp_path / "m.zarr")
    proba = model.predict_proba(X)[:, 1]
    metrics = result["metrics"]
    assert metrics["auc"] == pytest.approx(roc_auc_score(y == 1, proba), abs=1e-12)
    assert metrics["error"] == pytest.approx(np.mean((proba > 0.5) != (y == 1)), abs=1e-12)
    assert isinstance(metrics["rows"], int) and isinstance(metrics["nlp"], float)
    # measured as it learnt too: the final record is the same model on the same rows
    assert model.held_out_trace_[-1]["error"] == pytest.approx(metrics["error"], abs=1e-12)
    assert model.held_out_trace_[-1]["nlp"] == pytest.approx(metrics["nlp"], rel=1e-12)
    assert f"held-out ({len(y)} rows): error" in capsys.readouterr().err
    shown = json.loads(saspa("evaluate", tmp_path / "m.zarr", tmp_path / "t-test.zarr",
                             "--json").stdout)
    assert shown["auc"] == pytest.approx(metrics["auc"], abs=1e-12)
    info = json.loads(saspa("info", tmp_path / "m.zarr", "--json").stdout)
    assert info["class_labels"] == ["bad", "good"]
    assert info["test_metrics"]["auc"] == pytest.approx(metrics["auc"], abs=1e-12)
    assert info["held_out_trace"][-1]["error"] == pytest.approx(metrics["error"], abs=1e-12)
    shown = saspa("info", tmp_path / "m.zarr").stdout
    assert f"error {metrics['error']:.5g}, nlp {metrics['nlp']:.5g} (final, " in shown


def test_info_shows_numeric_labels_as_given(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    np.save(tmp_path / "d.npy", np.column_stack([X, X[:, 0] > 0]))
    jobs.ingest(tmp_path / "d.npy", tmp_path / "d.zarr")
    jobs.train(tmp_path / "d.zarr", tmp_path / "m.zarr", n_bases=4,
               optimize_hyperparameters=False)
    assert jobs.describe(tmp_path / "m.zarr")["class_labels"] == ["0", "1"]


def test_sparse_input_is_densified_per_row_block():
    import scipy.sparse
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    from saspa_dask.models.validation import dense_rows

    rng = np.random.default_rng(0)
    codes = rng.integers(0, 5, size=(300, 2))
    x = rng.normal(size=300)
    y = (x + (codes[:, 0] == 2) > 0.2).astype(int)
    table = np.column_stack([codes, x])
    encoder = ColumnTransformer([("hot", OneHotEncoder(sparse_output=True), [0, 1])],
                                remainder="passthrough", sparse_threshold=1.0)
    sparse = encoder.fit_transform(table)
    assert scipy.sparse.issparse(sparse)
    dense = sparse.toarray()
    blocks = dense_rows(sparse, max_bytes=8 * dense.shape[1] * 7)  # 7-row blocks
    assert blocks.chunks[0][0] == 7
    np.testing.assert_array_equal(blocks.compute(), dense)
    params = dict(n_bases=8, optimize_hyperparameters=False, random_state=0)
    reference = SASPAClassifier(**params).fit(dense, y).predict_proba(dense)
    from_sparse = SASPAClassifier(**params).fit(sparse, y)
    np.testing.assert_allclose(from_sparse.predict_proba(sparse), reference, rtol=1e-12,
                               atol=1e-14)
    pipe = make_pipeline(encoder, SASPAClassifier(**params)).fit(table, y)
    np.testing.assert_allclose(pipe.predict_proba(table), reference, rtol=1e-12, atol=1e-14)


def test_a_loop_of_symbolic_links_is_named(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    write_table(tmp_path / "t.csv", [["x", "y"], ["1", "0"], ["2", "1"]])
    res = saspa("ingest", tmp_path / "t.csv", "--out", tmp_path / "a", check=False)
    assert res.returncode == 1 and "loop of symbolic links" in res.stderr
    assert "unexpected" not in res.stderr


def test_a_chunk_replaced_by_another_dtype_is_named(tmp_path):
    import shutil

    rows = [["a", "b", "y"]] + [[f"{i}", f"{i % 3}", f"{i % 2}"] for i in range(40)]
    write_table(tmp_path / "t.csv", rows)
    jobs.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", chunk_rows=10)
    group = zarr.open_group(str(tmp_path / "t.zarr"), mode="r")
    SASPAClassifier(n_bases=4, optimize_hyperparameters=False, random_state=0).fit(
        group["X"][...], group["y"][...], column_names=group.attrs["columns"]).save(
        tmp_path / "m.zarr")
    # chunk 2 of X replaced by the int64 row numbers' chunk file
    shutil.copy(tmp_path / "t.zarr" / "row" / "c" / "2", tmp_path / "t.zarr" / "X" / "c" / "2" / "0")
    message = "chunk 2 of 'X' (rows 20 to 29) cannot be read as stored"
    with pytest.raises(jobs.JobError, match=re.escape(message)):
        jobs.evaluate(tmp_path / "m.zarr", tmp_path / "t.zarr")
    with pytest.raises(jobs.JobError, match=re.escape(message)):
        jobs.train(tmp_path / "t.zarr", tmp_path / "m2.zarr")


def test_a_hand_made_store_with_unstored_fill_value_chunks_is_read(tmp_path):
    """zarr does not store a chunk equal to its fill value: in a store made by hand
    (fill value 0) an all-zero chunk of X is data, not a lost file."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    X[10:20] = 0.0  # chunk 1: all zeros, never written to disk
    y = (X[:, 0] > 0).astype(float)
    group = zarr.open_group(str(tmp_path / "hand.zarr"), mode="w")
    group.create_array("X", shape=X.shape, chunks=(10, 2), dtype="f8", fill_value=0.0)[...] = X
    group.create_array("y", shape=y.shape, chunks=(10,), dtype="f8", fill_value=0.0)[...] = y
    assert group["X"].nchunks_initialized == 3
    jobs.train(tmp_path / "hand.zarr", tmp_path / "m.zarr", n_bases=4,
               optimize_hyperparameters=False)
    metrics = jobs.evaluate(tmp_path / "m.zarr", tmp_path / "hand.zarr")
    proba = load_model(tmp_path / "m.zarr").predict_proba(X)[:, 1]
    assert metrics["error"] == pytest.approx(np.mean((proba > 0.5) != (y == 1)), abs=1e-12)


def test_over_a_thousand_text_labels_and_huge_values_are_named(tmp_path):
    rows = [["a", "label"]] + [[f"{i}", f"label{i}"] for i in range(1_100)]
    write_table(tmp_path / "many.csv", rows)
    res = saspa("ingest", tmp_path / "many.csv", "--out", tmp_path / "m.zarr", check=False)
    assert res.returncode == 1 and "over 1000 distinct text labels" in res.stderr
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    X[:, 1] *= 1e300
    np.save(tmp_path / "big.npy", np.column_stack([X, X[:, 0] > 0]))
    jobs.ingest(tmp_path / "big.npy", tmp_path / "big.zarr")
    with pytest.raises(jobs.JobError, match=r"input columns \[1\] hold values up to"):
        jobs.train(tmp_path / "big.zarr", tmp_path / "b.zarr")


def test_like_a_model_encodes_a_grown_file_as_its_training_data(people_store, tmp_path):
    """The nightly case: the file grew, with a city the training rows never had, and the
    store the model was trained on is being replaced.  --like MODEL (or its latest
    pointer) encodes the file as the model's training data was (the columns, the
    imputed medians and one-hot categories recorded in the model store); the unseen
    city is an error naming it, or with --unknown ignore all zeros, counted as drift."""
    d = people_store
    rows = people()
    grown = rows + [["id9999", "50.0", "lima", "0.5", "good"]]
    write_table(tmp_path / "grown.csv", grown)
    (tmp_path / "latest").write_text(str(d / "m.zarr") + "\n")
    refused = saspa("ingest", tmp_path / "grown.csv", "--out", tmp_path / "g.zarr",
                    "--like", tmp_path / "latest", check=False)
    assert refused.returncode != 0 and "lima" in refused.stderr
    res = saspa("ingest", tmp_path / "grown.csv", "--out", tmp_path / "g.zarr", "--like",
                tmp_path / "latest", "--unknown", "ignore")
    assert res.returncode == 0, res.stderr
    old = zarr.open_group(str(d / "t.zarr"), mode="r")
    new = zarr.open_group(str(tmp_path / "g.zarr"), mode="r")
    assert new.attrs["columns"] == old.attrs["columns"]
    # the old rows exactly as the training store has them; the new one by the test's
    # own encoding: age 50, no known city, score 0.5
    np.testing.assert_array_equal(new["X"][:len(rows) - 1], old["X"][...])
    cities = len(old.attrs["columns"]) - 2
    np.testing.assert_array_equal(new["X"][len(rows) - 1], [50.0, *[0.0] * cities, 0.5])
    assert new.attrs["drift"]["city"]["unseen_categories"] == 1
    assert new.attrs["like"] == str((d / "t-train.zarr").resolve())  # whose encoding


def _days(text):
    """Days since 1970-01-01 of an ISO date or date-time (with an offset: UTC), by
    NumPy's datetime64, written apart from the package's parser."""
    if text[-6] in "+-" and text[-3] == ":":  # an offset: back to UTC
        sign = 1 if text[-6] == "+" else -1
        shift = np.timedelta64(int(text[-5:-3]) * 60 + int(text[-2:]), "m") * sign
        moment = np.datetime64(text[:-6]) - shift
    else:
        moment = np.datetime64(text)
    return (moment - np.datetime64("1970-01-01T00:00")) / np.timedelta64(1, "D")


def test_date_columns_become_days_and_new_dates_count_as_drift(tmp_path):
    """An ISO date column is one number (days since 1970-01-01), not one-hot columns
    of dates; the encoding is reapplied by --like, where later dates are drift above
    the training range and a value that is not a date is an error naming the column.
    A text column with one value that is not a date stays text."""
    dates = ["2024-01-05", "2024-02-10 12:00:00", "2023-12-31", "", "2024-03-05T14:30+02:00"]
    rows = [["when", "size", "note", "price"]] + [
        [d, f"{k + 1.5}", "2024-01-01" if k else "soon", f"{100 + k}"]
        for k, d in enumerate(dates)]
    write_table(tmp_path / "t.csv", rows)
    saspa("ingest", tmp_path / "t.csv", "--out", tmp_path / "t.zarr", "--missing", "impute",
          "--text", "onehot")
    group = zarr.open_group(str(tmp_path / "t.zarr"), mode="r")
    assert group.attrs["columns"] == ["when", "size", "note=2024-01-01", "note=soon"]
    known = [_days(d) for d in dates if d]
    when = group["X"][:, 0]
    np.testing.assert_allclose(when[[0, 1, 2, 4]], known, rtol=0, atol=1e-9)
    assert when[3] == float(np.median(known))  # imputed: the dates' median
    assert group.attrs["preprocessing"]["date_columns"] == ["when"]
    new = [["when", "size", "note", "price"], ["2024-06-01", "2", "soon", "1"]]
    write_table(tmp_path / "new.csv", new)
    res = saspa("ingest", tmp_path / "new.csv", "--out", tmp_path / "new.zarr", "--like",
                tmp_path / "t.zarr")
    again = zarr.open_group(str(tmp_path / "new.zarr"), mode="r")
    assert again["X"][0, 0] == _days("2024-06-01")
    assert again.attrs["drift"]["when"]["above_range"] == 1
    assert "drift: column 'when'" in res.stderr
    write_table(tmp_path / "bad.csv", new + [["next week", "2", "soon", "1"]])
    bad = saspa("ingest", tmp_path / "bad.csv", "--out", tmp_path / "bad.zarr", "--like",
                tmp_path / "t.zarr", check=False)
    assert bad.returncode == 1 and "column 'when' holds dates" in bad.stderr


def test_max_categories_keeps_the_commonest_and_groups_the_rest(tmp_path):
    """--max-categories N: a text column's N commonest categories (ties by name) are
    one-hot columns and the rest one '(other)' column; --like puts an unseen category
    there too, without --unknown ignore."""
    from collections import Counter

    rng = np.random.default_rng(8)
    suburbs = [f"s{k:02d}" for k in range(30)]
    picks = rng.choice(suburbs, size=400, p=np.arange(30, 0, -1) / np.arange(30, 0, -1).sum())
    rows = [["suburb", "area", "price"]] + [[s, f"{a:.2f}", f"{100 + a:.1f}"]
                                             for s, a in zip(picks, rng.uniform(1, 9, 400))]
    write_table(tmp_path / "t.csv", rows)
    res = saspa("ingest", tmp_path / "t.csv", "--out", tmp_path / "t.zarr", "--text", "onehot",
                "--max-categories", 5)
    counts = Counter(picks)
    top = sorted(sorted(counts, key=lambda c: (-counts[c], c))[:5])
    group = zarr.open_group(str(tmp_path / "t.zarr"), mode="r")
    assert group.attrs["columns"] == [f"suburb={c}" for c in top] + ["suburb=(other)", "area"]
    expected = np.array([[float(s == c) for c in top] + [float(s not in top)] for s in picks])
    np.testing.assert_array_equal(group["X"][:, :6], expected)
    rare = len(counts) - 5
    assert (f"column 'suburb': 5 commonest of {len(counts)} categories kept; {rare} rarer "
            f"ones ({int(expected[:, 5].sum())} rows) are '(other)'") in res.stderr
    write_table(tmp_path / "new.csv", [["suburb", "area", "price"], ["s99", "2.0", "1"],
                                       [top[0], "3.0", "1"]])
    saspa("ingest", tmp_path / "new.csv", "--out", tmp_path / "new.zarr", "--like",
          tmp_path / "t.zarr")
    new = zarr.open_group(str(tmp_path / "new.zarr"), mode="r")["X"][:, :6]
    np.testing.assert_array_equal(new, [[0, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0]])


def test_the_ids_header_is_the_sources_name_when_asked(tmp_path, threads_client):
    """The id column keeps the source's name (``key``) with ``id_header="source"`` (the
    default), in CSV and Parquet (as text), without a warning; ``id_header="id"``
    chooses ``id``."""
    import warnings

    pq = pytest.importorskip("pyarrow.parquet")
    rng = np.random.default_rng(5)
    rows = [["key", "a", "label"]] + [[f"k{i:03d}", f"{v:.3f}", str(int(v > 0))]
                                      for i, v in enumerate(rng.normal(size=60))]
    write_table(tmp_path / "t.csv", rows)
    jobs.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", id_column="key")
    jobs.train(tmp_path / "t.zarr", tmp_path / "m.zarr", n_bases=4,
               optimize_hyperparameters=False, client=threads_client)
    ids = [r[0] for r in rows[1:]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no FutureWarning when asked
        jobs.score(tmp_path / "m.zarr", tmp_path / "t.zarr", tmp_path / "s.csv",
                   format="csv", id_header="source", client=threads_client)
        jobs.score(tmp_path / "m.zarr", tmp_path / "t.zarr", tmp_path / "s.parquet",
                   format="parquet", id_header="source", client=threads_client)
        jobs.score(tmp_path / "m.zarr", tmp_path / "t.zarr", tmp_path / "i.csv",
                   format="csv", id_header="id", client=threads_client)
    with open(tmp_path / "s.csv", newline="") as fh:
        written = list(csv.DictReader(fh))
    assert [r["key"] for r in written] == ids and "id" not in written[0]
    table = pq.read_table(tmp_path / "s.parquet")
    assert table.column_names[:2] == ["key", "row"]
    assert str(table.schema.field("key").type) == "string"
    assert table.column("key").to_pylist() == ids
    with open(tmp_path / "i.csv", newline="") as fh:
        assert [r["id"] for r in csv.DictReader(fh)] == ids
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the default warns nothing
        jobs.score(tmp_path / "m.zarr", tmp_path / "t.zarr", tmp_path / "d.csv",
                   format="csv", client=threads_client)
    with open(tmp_path / "d.csv", newline="") as fh:
        assert [r["key"] for r in csv.DictReader(fh)] == ids
    shown = in_process.saspa("score", tmp_path / "m.zarr", tmp_path / "t.zarr",
                             "--out", tmp_path / "c.csv", "--format", "csv",
                             "--id-header", "source")
    assert shown.returncode == 0, shown.stderr
    with open(tmp_path / "c.csv", newline="") as fh:
        assert [r["key"] for r in csv.DictReader(fh)] == ids
