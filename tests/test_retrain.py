"""Warm-start retraining after rows were appended, and the ``latest`` pointer."""

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import in_process
from saspa_dask import SASPAClassifier, jobs, load_model
from saspa_dask.datasets import synthetic_two_class
from saspa_dask.storage import ingest
from saspa_dask.files.atomic import resolve_model_path

BIN = Path(sys.executable).parent


def _saspa(*args):
    return in_process.saspa(*args)


def _digest(directory):
    h = hashlib.sha256()
    for path in sorted(Path(directory).rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(directory)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("retrain")
    X, y = synthetic_two_class(11_000, 5, seed=8)
    np.save(tmp / "old.npy", np.column_stack([X[:10_000], y[:10_000]]))
    np.save(tmp / "all.npy", np.column_stack([X, y]))  # 10% more rows
    ingest(tmp / "old.npy", tmp / "old.zarr", chunk_rows=2_500)
    ingest(tmp / "all.npy", tmp / "all.zarr", chunk_rows=2_500)
    return tmp, X, y


def _sweeps_to(model, tol):
    """Sweeps until the site change first fell below ``tol``."""
    return next(k for k, record in enumerate(model.history_, 1) if record["change"] < tol)


def test_retrain_warm_starts_and_keeps_the_old_model(stores, threads_client):
    tmp, X, y = stores
    models = tmp / "models"
    res = _saspa("train", "--fixed-hyperparameters", tmp / "old.zarr", "--out", models / "v1.zarr", "--n-bases", 24,
                 "--tol", 1e-10, "--max-sweeps", 500,
                 "--latest", models / "latest")
    assert res.returncode == 0, res.stderr
    assert resolve_model_path(models / "latest") == models / "v1.zarr"
    before = _digest(models / "v1.zarr")
    res = _saspa("retrain", models / "latest", tmp / "all.zarr", "--out", models / "v2.zarr",
                 "--fixed-hyperparameters", "--tol", 1e-10, "--max-sweeps", 500,
                 "--latest", models / "latest")
    assert res.returncode == 0, res.stderr
    assert "10000 old rows warm-started, 1000 new rows" in res.stderr
    assert _digest(models / "v1.zarr") == before  # the old model is never touched
    assert resolve_model_path(models / "latest") == models / "v2.zarr"
    old, new = load_model(models / "v1.zarr"), load_model(models / "latest")
    np.testing.assert_array_equal(new.bases_.means, old.bases_.means)
    # in memory with blocks of the stores' chunk rows: the sweeps retraining makes
    cold = SASPAClassifier(optimize_hyperparameters=False, bases=old.bases_, lengthscale=old.lengthscale_,
                           signal_variance=old.signal_variance_, ep={"tol": 1e-10, "max_sweeps": 500},
                           execution={"block_rows": 2_500}).fit(X, y)
    np.testing.assert_allclose(new.alpha_, cold.alpha_, rtol=1e-7,
                               atol=1e-7 * np.abs(cold.alpha_).max())
    # the warm start shortens the transient (the tail to 1e-10 is EP's own rate)
    assert new.converged_ and _sweeps_to(new, 1e-4) < _sweeps_to(cold, 1e-4)
    assert "starting sites of 1000 new rows (update)" in res.stderr
    # new_rows="empty" (the job function behind --new-rows, in this process): the same
    # fixed point, from zero sites for the new rows
    said = []
    jobs.retrain(models / "v1.zarr", tmp / "all.zarr", models / "v3.zarr",
                 optimize_hyperparameters=False, tol=1e-10, max_sweeps=500,
                 new_rows="empty", client=threads_client, echo=said.append)
    said = "\n".join(map(str, said))
    assert "1000 new rows (empty)" in said and "starting sites" not in said
    empty = load_model(models / "v3.zarr")
    np.testing.assert_allclose(empty.alpha_, cold.alpha_, rtol=1e-7,
                               atol=1e-7 * np.abs(cold.alpha_).max())
    # the updated sites start nearer the fixed point than zero sites; both warm starts
    # reach 1e-4 before the cold run
    assert new.history_[0]["change"] < empty.history_[0]["change"]
    assert max(_sweeps_to(new, 1e-4), _sweeps_to(empty, 1e-4)) < _sweeps_to(cold, 1e-4)
    assert zarr.open_group(models / "v3.zarr", mode="r").attrs["new_rows_start"] == "empty"
    assert zarr.open_group(models / "v2.zarr", mode="r").attrs["new_rows_start"] == "update"
    jobs.score(models / "latest", tmp / "all.zarr", tmp / "s.zarr", client=threads_client)
    scored = zarr.open_group(str(tmp / "s.zarr"), mode="r")["proba"][...]
    np.testing.assert_allclose(scored, new.predict_proba(X)[:, 1], rtol=1e-10, atol=1e-12)


def test_retrain_learns_from_the_old_hyperparameters_by_default(stores, threads_client):
    """Without --fixed-hyperparameters, retrain learns the hyperparameters again,
    starting where the old model stopped: the trace starts at the old values, and the
    energy it reaches is at least that of keeping them (a fixed retrain)."""
    tmp, X, y = stores
    old = SASPAClassifier(n_bases=10, random_state=0, optimize_hyperparameters=False,
                          lengthscale=5.0).fit(X[:10_000], y[:10_000])
    old.save(tmp / "o.zarr")
    res = _saspa("retrain", tmp / "o.zarr", tmp / "all.zarr", "--out", tmp / "l.zarr",
                 "--max-hyper-iter", 4, "--optimize-hyperparameters")
    assert res.returncode == 0, res.stderr
    # the fixed retrain by the job function behind --fixed-hyperparameters
    jobs.retrain(tmp / "o.zarr", tmp / "all.zarr", tmp / "f.zarr",
                 optimize_hyperparameters=False, client=threads_client)
    default = _saspa("retrain", tmp / "o.zarr", tmp / "all.zarr", "--out", tmp / "d.zarr",
                     "--max-hyper-iter", 4)
    assert default.returncode == 0, default.stderr
    learnt, fixed, by_default = (load_model(tmp / n) for n in ("l.zarr", "f.zarr", "d.zarr"))
    np.testing.assert_allclose(fixed.lengthscale_, old.lengthscale_, rtol=0)
    start = learnt.hyperparameter_trace_[0]["hyperparameters"]
    np.testing.assert_allclose(start["lengthscale"], old.lengthscale_, rtol=1e-12)
    assert learnt.log_evidence_ > fixed.log_evidence_
    assert learnt.hyperparameter_info_["n_iterations"] >= 1
    np.testing.assert_allclose(by_default.lengthscale_, learnt.lengthscale_, rtol=1e-9)


def test_retrain_rejects_what_it_cannot_do(stores):
    tmp, X, y = stores
    model = SASPAClassifier(optimize_hyperparameters=False, n_bases=8, random_state=0).fit(X, y)
    model.save(tmp / "big.zarr")
    res = _saspa("retrain", tmp / "big.zarr", tmp / "old.zarr", "--out", tmp / "x.zarr")
    assert res.returncode != 0
    assert "has 10000 rows but the model was trained on 11000" in res.stderr
    res = _saspa("retrain", tmp / "big.zarr", tmp / "all.zarr", "--out", tmp / "big.zarr")
    assert res.returncode != 0 and "--out must differ from MODEL" in res.stderr
    res = _saspa("retrain", tmp / "nope.zarr", tmp / "all.zarr", "--out", tmp / "y.zarr")
    assert res.returncode != 0 and "no such model store" in res.stderr
    assert not (tmp / "x.zarr").exists() and not (tmp / "y.zarr").exists()


def test_warm_start_sites_for_new_rows_reach_the_cold_fixed_point():
    import dask.array as da

    X, y = synthetic_two_class(3_000, 4, seed=21)
    old = SASPAClassifier(optimize_hyperparameters=False, n_bases=16, random_state=0, ep={"tol": 1e-10, "max_sweeps": 500}).fit(X[:2_700], y[:2_700])
    alpha_before = old.alpha_.copy()
    starts = {how: old.warm_start_sites(X[2_700:], y[2_700:], new_rows=how)
              for how in ("update", "adf", "empty")}
    np.testing.assert_array_equal(old.alpha_, alpha_before)  # the model is not changed
    for tau, nu in starts.values():
        np.testing.assert_array_equal(tau[:2_700], old.sites_tau_)
        np.testing.assert_array_equal(nu[:2_700], old.sites_nu_)
    assert not starts["empty"][0][2_700:].any()
    # ADF equals partial_fit's pass; the update differs from it (no row sees another)
    online = SASPAClassifier(**old.get_params()).fit(X[:2_700], y[:2_700])
    online.partial_fit(X[2_700:], y[2_700:])
    np.testing.assert_allclose(starts["adf"][1], online.sites_nu_, rtol=1e-12, atol=1e-15)
    assert not np.allclose(starts["update"][1], starts["adf"][1], rtol=1e-3)
    # dask input is read chunk by chunk (uneven chunks, across block boundaries)
    for how in ("update", "adf"):
        lazy = old.warm_start_sites(da.from_array(X[2_700:], chunks=(77, 4)),
                                    da.from_array(y[2_700:], chunks=77), new_rows=how)
        np.testing.assert_allclose(lazy[0], starts[how][0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(lazy[1], starts[how][1], rtol=1e-12, atol=1e-15)
    # every start reaches a cold start's fixed point; the new rows' sites shrink the
    # first step and save sweeps
    kw = dict(optimize_hyperparameters=False, bases=old.bases_, lengthscale=old.lengthscale_,
              signal_variance=old.signal_variance_)
    schedule = {"tol": 1e-10, "max_sweeps": 500}
    cold = SASPAClassifier(**kw, ep={**schedule, "coarse_start": False}).fit(X, y)
    fits = {how: SASPAClassifier(**kw, ep=schedule).fit(X, y, init_sites=sites)
            for how, sites in starts.items()}
    scale = np.abs(cold.alpha_).max()
    for fit in fits.values():
        np.testing.assert_allclose(fit.alpha_, cold.alpha_, atol=1e-7 * scale)
    for how in ("update", "adf"):
        assert fits[how].history_[0]["change"] < 0.2 * fits["empty"].history_[0]["change"]
        assert fits[how].n_sweeps_ < fits["empty"].n_sweeps_ < cold.n_sweeps_
    with pytest.raises(ValueError, match="not among classes_"):
        old.warm_start_sites(X[:5], np.full(5, 7))
    with pytest.raises(ValueError, match="X has 3 features"):
        old.warm_start_sites(da.from_array(X[:50, :3]), da.from_array(y[:50]))
    with pytest.raises(ValueError, match="Input X contains NaN"):
        old.warm_start_sites(np.full((5, 4), np.nan), y[:5])
    with pytest.raises(ValueError, match="NaN or infinity in 5 rows"):
        old.warm_start_sites(da.full((5, 4), np.nan), da.from_array(y[:5]))
    with pytest.raises(ValueError, match="new_rows must be one of"):
        old.warm_start_sites(X[:5], y[:5], new_rows="zero")


def test_warm_start_sites_one_vs_rest():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(900, 2))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=900), [-0.5, 0.5])
    old = SASPAClassifier(optimize_hyperparameters=False, n_bases=10, random_state=0, ep={"tol": 1e-9, "max_sweeps": 500}).fit(X[:800], y[:800])
    tau, nu = old.warm_start_sites(X[800:], y[800:])
    assert tau.shape == nu.shape == (3, 900)
    kw = dict(optimize_hyperparameters=False, bases=old.bases_, lengthscale=old.lengthscale_,
              signal_variance=old.signal_variance_)
    schedule = {"tol": 1e-9, "max_sweeps": 500}
    cold = SASPAClassifier(**kw, ep={**schedule, "coarse_start": False}).fit(X, y)
    warm = SASPAClassifier(**kw, ep=schedule).fit(X, y, init_sites=(tau, nu))
    np.testing.assert_allclose(warm.predict_proba(X), cold.predict_proba(X), atol=1e-6)
