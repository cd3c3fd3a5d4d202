"""Data ingest and the model store, on real zarr stores on disk."""

import shutil

import dask
import numpy as np
import pytest
import zarr

from saspa_dask import SASPAClassifier, SASPARegressor, load_model
from saspa_dask.storage.fingerprint import fingerprint
from saspa_dask.storage import StoreError, ingest, open_data_store


def _leftovers(directory, name):
    return [p.name for p in directory.iterdir() if name in p.name]


def _write_csv(path, header, rows):
    path.write_text("\n".join([",".join(header)] + [",".join(map(str, r)) for r in rows]) + "\n")
    return path


def test_csv_ingest_round_trip_and_fingerprint(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3))
    labels = np.where(X[:, 0] > 0, "pos", "neg")
    src = _write_csv(tmp_path / "d.csv", ["a", "b", "c", "label"],
                     [[*(repr(float(v)) for v in x), l] for x, l in zip(X, labels)])
    attrs = ingest(src, tmp_path / "d.zarr", target="label", chunk_rows=300)
    assert attrs["columns"] == ["a", "b", "c"] and attrs["target_classes"] == ["neg", "pos"]
    Xd, yd, stored = open_data_store(tmp_path / "d.zarr")
    assert Xd.chunks[0] == (300, 300, 300, 100)
    np.testing.assert_array_equal(Xd.compute(), X)  # repr round-trips float64 exactly
    np.testing.assert_array_equal(yd.compute(), (labels == "pos").astype(float))
    assert stored["complete"] is True
    with dask.config.set(scheduler="threads"):
        assert fingerprint(Xd, yd) == attrs["fingerprint"]
    # the fingerprint sees a one-value change
    zarr.open_array(str(tmp_path / "d.zarr" / "X"), mode="r+")[5, 1] += 1e-12
    Xd, yd, _ = open_data_store(tmp_path / "d.zarr")
    assert fingerprint(Xd, yd) != attrs["fingerprint"]


def test_the_fingerprint_pass_reads_the_probe_rows_in_their_order(tmp_path):
    """One task per chunk gives the digest and the rows at an unsorted index with
    repeats and chunk edges: the rows equal NumPy's indexing, the fingerprint the one
    ingest recorded."""
    from saspa_dask.storage.fingerprint import fingerprint_and_rows

    data = np.random.default_rng(4).normal(size=(1000, 4))
    np.save(tmp_path / "d.npy", data)
    attrs = ingest(tmp_path / "d.npy", tmp_path / "d.zarr", chunk_rows=300)
    X, y, _ = open_data_store(tmp_path / "d.zarr")
    index = np.array([999, 0, 299, 300, 5, 299, 601, 0, 899, 900])
    with dask.config.set(scheduler="threads"):
        digest, X_rows, y_rows = fingerprint_and_rows(X, y, index, attrs["chunk_rows"])
        assert fingerprint_and_rows(X, y, [], attrs["chunk_rows"])[0] == digest
    assert digest == attrs["fingerprint"]
    np.testing.assert_array_equal(X_rows, data[index, :3])
    np.testing.assert_array_equal(y_rows, data[index, 3])


def test_text_and_missing_policies(tmp_path):
    rows = [[1.0, "NEAR BAY", 3.0], [2.0, "INLAND", ""], [3.0, "NEAR BAY", 1.0],
            [4.0, "ISLAND", 2.0]]
    src = _write_csv(tmp_path / "h.csv", ["x", "where", "value"], rows)
    with pytest.raises(StoreError, match=r"column 'where' is text \(3 distinct values"):
        ingest(src, tmp_path / "a.zarr", target="value", missing="drop-rows")
    with pytest.raises(StoreError, match="target column 'value' has 1 missing value"):
        ingest(src, tmp_path / "a.zarr", target="value", text="onehot")
    attrs = ingest(src, tmp_path / "a.zarr", target="value", text="onehot", missing="drop-rows")
    assert attrs["columns"] == ["x", "where=INLAND", "where=ISLAND", "where=NEAR BAY"]
    assert attrs["preprocessing"]["rows_dropped_for_missing"] == 1
    X, y, _ = open_data_store(tmp_path / "a.zarr")
    np.testing.assert_array_equal(X.compute(), [[1, 0, 0, 1], [3, 0, 0, 1], [4, 0, 1, 0]])
    np.testing.assert_array_equal(y.compute(), [3.0, 1.0, 2.0])
    attrs = ingest(src, tmp_path / "b.zarr", target="value", text="drop", missing="drop-rows")
    assert attrs["columns"] == ["x"] and attrs["preprocessing"]["dropped_text_columns"] == ["where"]


@pytest.mark.parametrize("content,match", [
    ("a,b,y\n1,,0\n2,3,1\n", "column 'b' has 1 missing value in 2 rows"),
    ("a,b,y\n1,2,0\n2,3\n", ":3: 2 fields, the header has 3"),
    ("", "empty file"),
    ("a,b,y\n", "no data rows"),
    ("a,b,y\n1,x,0\n2,z,1\n", "column 'b' is text"),
    # numbers and words in one column: one-hot over the words would lose the numbers
    ("a,b,y\n1,x,0\n2,3,1\n", r"column 'b' holds numbers \(1 row\) and text \(1 row, e.g. 'x'\)"),
])
def test_ingest_errors_leave_nothing_behind(tmp_path, content, match):
    src = tmp_path / "bad.csv"
    src.write_text(content)
    with pytest.raises(StoreError, match=match):
        ingest(src, tmp_path / "out.zarr", chunk_rows=1)
    assert _leftovers(tmp_path, "out.zarr") == []


def test_ingest_npy_and_destination_rules(tmp_path):
    data = np.arange(40.0).reshape(10, 4)
    data[3, 1] = np.nan
    np.save(tmp_path / "d.npy", data)
    with pytest.raises(StoreError, match="1 rows hold NaN or inf"):
        ingest(tmp_path / "d.npy", tmp_path / "d.zarr")
    attrs = ingest(tmp_path / "d.npy", tmp_path / "d.zarr", missing="drop-rows", chunk_rows=4)
    X, y, _ = open_data_store(tmp_path / "d.zarr")
    np.testing.assert_array_equal(X.compute(), np.delete(data, 3, axis=0)[:, :3])
    np.testing.assert_array_equal(y.compute(), np.delete(data, 3, axis=0)[:, 3])
    assert attrs["n_rows"] == 9 and X.chunks[0] == (4, 4, 1)
    with pytest.raises(StoreError, match="exists; pass --overwrite"):
        ingest(tmp_path / "d.npy", tmp_path / "d.zarr", missing="drop-rows")
    ingest(tmp_path / "d.npy", tmp_path / "d.zarr", missing="drop-rows", target=0,
           overwrite=True)
    assert open_data_store(tmp_path / "d.zarr")[2]["target"] == "x0"
    assert _leftovers(tmp_path, ".d.zarr") == []


def test_open_data_store_errors(tmp_path):
    with pytest.raises(StoreError, match="no such data store"):
        open_data_store(tmp_path / "missing.zarr")
    g = zarr.open_group(str(tmp_path / "foreign.zarr"), mode="w")
    g.create_array("features", shape=(3, 2), dtype="f8")
    with pytest.raises(StoreError, match="needs arrays 'X' and 'y'"):
        open_data_store(tmp_path / "foreign.zarr")
    g = zarr.open_group(str(tmp_path / "half.zarr"), mode="w")
    g.create_array("X", shape=(3, 2), dtype="f8")
    g.create_array("y", shape=(3,), dtype="f8")
    g.attrs.update(format="saspa-data", complete=False)
    with pytest.raises(StoreError, match="incomplete"):
        open_data_store(tmp_path / "half.zarr")
    (tmp_path / "file.zarr").write_text("not a store")
    with pytest.raises(StoreError, match="not a zarr group"):
        open_data_store(tmp_path / "file.zarr")


@pytest.mark.parametrize("Estimator,likelihood", [(SASPAClassifier, "probit"),
                                                  (SASPAClassifier, "step"),
                                                  (SASPARegressor, "gaussian")])
def test_model_round_trip(tmp_path, Estimator, likelihood):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    y = (np.where(X[:, 0] > 0, "a", "b") if Estimator is SASPAClassifier
         else X[:, 0] + 0.1 * rng.normal(size=300))
    model = Estimator(n_bases=12, likelihood=likelihood, random_state=0).fit(X, y)
    model.save(tmp_path / "m.zarr")
    loaded = load_model(tmp_path / "m.zarr")
    assert type(loaded) is Estimator
    Xs = rng.normal(size=(50, 3))
    for a, b in zip(model.predict_latent(Xs), loaded.predict_latent(Xs)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.predict(Xs), loaded.predict(Xs))
    np.testing.assert_array_equal(loaded.sites_tau_, model.sites_tau_)
    assert loaded.get_params() == {**model.get_params(), "bases": None}
    assert loaded.history_[-1]["change"] == model.history_[-1]["change"]
    if Estimator is SASPAClassifier:
        np.testing.assert_array_equal(loaded.classes_, model.classes_)
    # no pickle anywhere in the store: every file is zarr JSON metadata or chunk data
    for path in (tmp_path / "m.zarr").rglob("*"):
        if path.is_file():
            assert not path.read_bytes().startswith(b"\x80"), path


def test_model_store_errors(tmp_path):
    X = np.random.default_rng(2).normal(size=(60, 2))
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=5, random_state=0).fit(X, X[:, 0] > 0)
    model.save(tmp_path / "m.zarr")
    with pytest.raises(StoreError, match="exists; pass --overwrite"):
        model.save(tmp_path / "m.zarr")
    model.save(tmp_path / "m.zarr", overwrite=True)
    with pytest.raises(StoreError, match="no such model store"):
        load_model(tmp_path / "nope.zarr")
    shutil.copytree(tmp_path / "m.zarr", tmp_path / "trunc.zarr")
    shutil.rmtree(tmp_path / "trunc.zarr" / "alpha")
    with pytest.raises(StoreError, match="array 'alpha' is missing or unreadable"):
        load_model(tmp_path / "trunc.zarr")
    shutil.copytree(tmp_path / "m.zarr", tmp_path / "chunk.zarr")
    chunks = [c for c in (tmp_path / "chunk.zarr" / "beta" / "c").rglob("*") if c.is_file()]
    assert chunks
    for chunk in chunks:
        chunk.unlink()  # data lost: refused from the metadata, before anything is read
    with pytest.raises(StoreError, match=r"'beta' claims shape \(5, 5\) but only 0 of its 1 "
                                         "chunks are stored"):
        load_model(tmp_path / "chunk.zarr")
    g = zarr.open_group(str(tmp_path / "foreign.zarr"), mode="w")
    g.attrs["format"] = "something-else"
    with pytest.raises(StoreError, match="not a saspa model store"):
        load_model(tmp_path / "foreign.zarr")
    shutil.copytree(tmp_path / "m.zarr", tmp_path / "old.zarr")
    zarr.open_group(str(tmp_path / "old.zarr"), mode="r+").attrs["format_version"] = 99
    with pytest.raises(StoreError, match="format version 99"):
        load_model(tmp_path / "old.zarr")
    shutil.copytree(tmp_path / "m.zarr", tmp_path / "half.zarr")
    zarr.open_group(str(tmp_path / "half.zarr"), mode="r+").attrs["complete"] = False
    with pytest.raises(StoreError, match="incomplete"):
        load_model(tmp_path / "half.zarr")


def _same(a, b, where="model"):
    """Deep equality of fitted values: arrays (values and dtype), bases, posteriors,
    lists, dicts, floats with NaN equal to NaN."""
    from saspa_dask import Basis, FittedPosterior
    from saspa_dask.ep import Posterior

    if isinstance(a, (Basis, Posterior, FittedPosterior)):
        assert type(a) is type(b), where
        for key, value in vars(a).items():
            if not key.startswith("_") and key not in ("likelihood_object", "alpha_beta"):
                _same(value, getattr(b, key), f"{where}.{key}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            _same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for k, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{k}]")
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b), where
    else:
        assert a == b and type(a) is type(b), f"{where}: {a!r} != {b!r}"


def _fitted_attributes(model):
    names = [k for k in dir(type(model)) + list(vars(model))
             if k.endswith("_") and not k.startswith("_")]
    out = {}
    for name in sorted(set(names)):
        try:
            out[name] = getattr(model, name)
        except AttributeError:  # e.g. label_noise_ of a probit model
            continue
    return out


@pytest.mark.parametrize("case", ["multiclass-dataframe", "step-explicit-bases", "regressor"])
def test_every_fitted_attribute_and_parameter_round_trips(tmp_path, case):
    import pandas as pd

    from saspa_dask import Basis

    rng = np.random.default_rng(3)
    X = rng.normal(size=(240, 3))
    if case == "multiclass-dataframe":
        X = pd.DataFrame(X, columns=["height", "width", "depth"])
        y = np.array(["low", "mid", "high"])[np.digitize(X["height"], [-0.4, 0.4])]
        model = SASPAClassifier(n_bases=9, random_state=0, lengthscale=np.array([1.0, 2.0, 3.0]),
                                max_hyper_iter=3)
    elif case == "step-explicit-bases":
        y = X[:, 0] + X[:, 1] > 0
        bases = Basis(X[:7], np.stack([0.1 * np.eye(3)] * 7))
        model = SASPAClassifier(bases=bases, likelihood="step", lengthscale=1.5,
                                learn_blur_scale=True, max_hyper_iter=3)
    else:
        y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=240)
        model = SASPARegressor(n_bases=10, random_state=0, blur="spherical", max_hyper_iter=3,
                               lengthscale=np.array([1.0, 1.0, 2.0], dtype=np.float32))
    model.fit(X, y)
    model.save(tmp_path / "m.zarr")
    loaded = load_model(tmp_path / "m.zarr")
    assert type(loaded) is type(model)
    before, after = _fitted_attributes(model), _fitted_attributes(loaded)
    assert before.keys() == after.keys()
    assert {"fitted_posterior_", "sites_tau_", "history_", "n_features_in_"} <= before.keys()
    if case == "multiclass-dataframe":
        assert list(after["feature_names_in_"]) == ["height", "width", "depth"]
        assert list(after["classes_"]) == ["high", "low", "mid"]
    for name in before:
        _same(before[name], after[name], name)
    _same(model.get_params(), loaded.get_params(), "get_params()")
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_a_format_2_store_still_loads(tmp_path):
    """A store as format 2 wrote it (the fit report in separate attributes, parameters as
    plain JSON): its attributes are rewritten here by hand from the old writer's layout
    (the arrays kept their names), and the loaded model predicts and reports the same."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 2))
    y = np.where(X[:, 0] > 0, "a", "b")
    model = SASPAClassifier(n_bases=8, random_state=0, max_hyper_iter=3).fit(X, y)
    model.save(tmp_path / "m.zarr")
    group = zarr.open_group(str(tmp_path / "m.zarr"), mode="r+")
    new = dict(group.attrs)
    old = {k: new[k] for k in ("format", "estimator", "task", "n_features_in", "n_bases",
                               "n_problems", "kernel", "likelihood", "classes",
                               "classes_dtype", "y_mean", "versions", "complete")}
    old.update(
        # format 2 had the EP schedule as flat parameters (folded in on loading)
        format_version=2, params={**{k: v for k, v in new["params"].items()
                                     if k not in ("ep", "execution", "approximation")},
                                  "bases": None, "ep_mode": "parallel", "max_sweeps": 100,
                                  "tol": 1e-6, "dtc": False, "block_rows": 8192},
        blur=model.blur,
        ep={"mode": "parallel", "damping": model.damping_, "max_sweeps": 100,
            "tol": 1e-6, "n_sweeps": model.n_sweeps_, "converged": model.converged_,
            "n_invalid_cavities": model.n_invalid_cavities_,
            "n_skipped_updates": model.n_skipped_updates_,
            "n_damping_halvings": model.n_damping_halvings_,
            "n_damping_reductions": model.n_damping_reductions_,
            "n_anderson_steps": model.n_anderson_steps_,
            "n_anderson_restarts": model.n_anderson_restarts_,
            "coarse_start": model.coarse_start_},
        log_evidence=model.log_evidence_, history=new["report"]["history_"],
        hyperparameters={"optimized": True, "blur_scale": model.blur_scale_,
                         "trace": new["report"]["hyperparameter_trace_"],
                         "info": new["report"]["hyperparameter_info_"]},
        data_fingerprint=None, timings=model.timings_, kmeans=model.kmeans_info_)
    group.attrs.clear()
    group.attrs.update(old)
    loaded = load_model(tmp_path / "m.zarr")
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(loaded.classes_, model.classes_)
    assert loaded.log_evidence_ == model.log_evidence_
    assert loaded.n_sweeps_ == model.n_sweeps_ and loaded.history_ == new["report"]["history_"]
    assert loaded.hyperparameter_info_ == new["report"]["hyperparameter_info_"]
    assert loaded.kmeans_info_ == model.kmeans_info_ and loaded.timings_ == model.timings_
    # the old flat parameters are folded into the groups, silently (nothing was asked)
    assert loaded.get_params()["ep"] == {"mode": "parallel", "max_sweeps": 100, "tol": 1e-6}
    assert loaded.get_params()["execution"] == {"block_rows": 8192}
    assert loaded.get_params()["approximation"] == "fitc"
    from saspa_dask.storage import describe_model

    summary = describe_model(tmp_path / "m.zarr")
    assert summary["n_training_rows"] == 200 and summary["ep"]["mode"] == "parallel"


def test_a_huge_claimed_site_array_is_refused_before_it_is_read(tmp_path):
    """A model store whose metadata claims 10^12 sites: refused from the metadata (its
    chunks are not there), without allocating 8 TB."""
    import json
    import resource
    import shutil

    X = np.random.default_rng(3).normal(size=(60, 2))
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=5, random_state=0)
    model.fit(X, X[:, 0] > 0).save(tmp_path / "m.zarr")
    shutil.copytree(tmp_path / "m.zarr", tmp_path / "huge.zarr")
    meta_path = tmp_path / "huge.zarr" / "sites_tau" / "zarr.json"
    meta = json.loads(meta_path.read_text())
    meta["shape"] = [10**12]
    meta_path.write_text(json.dumps(meta))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(StoreError, match=r"'sites_tau' has shape \(1000000000000,\), "
                                         r"expected \(60,\)"):
        load_model(tmp_path / "huge.zarr")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 500_000  # kB
