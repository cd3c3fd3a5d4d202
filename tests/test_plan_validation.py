"""A bad combination of parameters is refused before any data is read (issue 56).

Before, ``SASPAClassifier(n_bases=256, kernel="matern32", blur="fourier")`` on 200,000
rows ran K-means for 88.7 s before saying frequency features need the SE kernel.  Each
rule of :meth:`~saspa_dask.fitting.plan.FitPlan.validate` is tried here from Python on
data that cannot be read (a dask array whose every chunk raises when computed) and
from ``saspa train`` on a store whose chunks are damaged: the refusal must name the
parameters, not the data.
"""

import time

import dask
import dask.array as da
import numpy as np
import pytest
from sklearn.utils._param_validation import InvalidParameterError

import in_process
from saspa_dask import SASPAClassifier, SASPARegressor, jobs


class DataWasRead(Exception):
    pass


def _unreadable(rows=200_000, cols=8):
    """A dask array of ``rows`` x ``cols`` whose chunks raise when computed."""
    def chunk(_):
        raise DataWasRead("a chunk was read")

    blocks = [da.from_delayed(dask.delayed(chunk)(k), shape=(50_000, cols), dtype=float)
              for k in range(rows // 50_000)]
    return da.concatenate(blocks)


RULES = [  # (estimator, parameters, what the refusal says)
    (SASPAClassifier, dict(n_bases=256, kernel="matern32", blur="fourier"),
     "frequency features (blur='fourier') are built on the SE kernel"),
    (SASPAClassifier, dict(learn_bases="means+blur", learn_blur_scale=True),
     "learn_blur_scale=True is redundant"),
    (SASPAClassifier, dict(learn_bases="means", optimize_hyperparameters=False),
     "needs optimize_hyperparameters=True"),
    (SASPARegressor, dict(kernel="matern52", blur="delta", learn_bases="means+blur"),
     "blur='delta' has none (learn_bases='means')"),
    (SASPARegressor, dict(additive_groups=[[0, 1], [2, 3]], blur="fourier"),
     "additive_groups sums kernels over blurred bases"),
    (SASPARegressor, dict(term_weights=[1.0, 2.0]), "set additive_groups too"),
    (SASPARegressor, dict(likelihood="student_t", min_noise_variance=0.1),
     "the student_t likelihood has none"),
    (SASPARegressor, dict(hyper_subsample=[20000, 10000]),
     "hyper_subsample must be increasing row counts"),
    (SASPAClassifier, dict(hyper_subsample=["all", 20000]),
     "hyper_subsample must be increasing row counts"),
    (SASPAClassifier, dict(hyper_subsample="20000,lots"),
     "hyper_subsample must be increasing row counts"),
    (SASPARegressor, dict(learning_start="both", blur="full"),
     "learning_start='both' learns near the variational fit first, which needs delta"),
    (SASPARegressor, dict(learning_start="variational", likelihood="poisson"),
     "which needs the gaussian likelihood (not 'poisson')"),
    (SASPARegressor, dict(learning_start="both", learning="stochastic"),
     "which needs full-batch learning"),
    (SASPARegressor, dict(learning_start="both", optimize_hyperparameters=False),
     "which needs learning (optimize_hyperparameters=True)"),
    (SASPARegressor, dict(learning_start="variational", max_fit_time=60),
     "makes two or three fits, each within max_fit_time"),
    (SASPARegressor, dict(learning_start="race", blur="diagonal"),
     "learning_start='race' learns near the variational fit first, which needs delta"),
]


@pytest.mark.parametrize("cls, params, message", RULES,
                         ids=[r[2][:30] for r in RULES])
def test_python_refuses_before_reading_any_row(cls, params, message):
    X = _unreadable()
    y = da.zeros(X.shape[0], chunks=50_000)
    start = time.perf_counter()
    with pytest.raises(InvalidParameterError, match=message.replace("(", r"\(").replace(
            ")", r"\)")):
        cls(**params).fit(X, y)
    assert time.perf_counter() - start < 1.0


def test_learn_offset_is_refused_for_one_vs_rest_before_k_means():
    """How many EP problems a fit has is known only from y: the plan's rule with the
    count (the run checks it before K-means)."""
    from saspa_dask.fitting.plan import FitPlan

    with pytest.raises(ValueError, match="learn_offset needs one EP problem"):
        FitPlan(learn_offset=True).validate(n_problems=3)
    # the regressor learns the offset by default: its plan passes with one problem
    SASPARegressor()._fit_plan().validate(n_problems=1)


@pytest.fixture(scope="module")
def damaged_store(tmp_path_factory):
    """A store with every X chunk damaged: any read of the rows fails."""
    d = tmp_path_factory.mktemp("damaged")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4_000, 4))
    np.save(d / "d.npy", np.column_stack([X, X[:, 0] + 0.1 * rng.normal(size=4_000)]))
    jobs.ingest(d / "d.npy", d / "d.zarr", chunk_rows=1_000)
    for chunk in (d / "d.zarr" / "X" / "c").rglob("*"):
        if chunk.is_file():
            chunk.write_bytes(b"damaged")
    return d / "d.zarr"


CLI_RULES = [
    (("--kernel", "matern32", "--blur", "fourier"), "built on the SE kernel"),
    (("--learn-bases", "means+blur", "--learn-blur-scale"), "is redundant"),
    (("--learn-bases", "means+blur", "--blur", "delta"), "has none"),
    (("--additive-groups", "one-hot", "--blur", "fourier"), "additive_groups sums kernels"),
    (("--task", "regression", "--likelihood", "student_t", "--min-noise-variance", "0.1"),
     "the student_t likelihood has none"),
    (("--hyper-subsample", "2000,1000"), "hyper_subsample must be increasing"),
    (("--task", "regression", "--learning-start", "both", "--blur", "diagonal"),
     "learns near the variational fit first"),
]


@pytest.mark.parametrize("flags, message", CLI_RULES, ids=[r[1][:25] for r in CLI_RULES])
def test_saspa_train_refuses_before_reading_any_row(damaged_store, tmp_path, flags, message):
    start = time.perf_counter()
    res = in_process.saspa("train", damaged_store, "--out", tmp_path / "m.zarr", *flags)
    took = time.perf_counter() - start
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert message in res.stderr and "damaged" not in res.stderr, res.stderr
    assert "chunk" not in res.stderr, res.stderr
    assert took < 1.0, took
    assert not (tmp_path / "m.zarr").exists()


def test_python_spells_stages_as_the_command_line_does():
    """``"1000,all"`` and ``[1000, "all"]`` are the stages ``[1000, None]`` (learning on
    1,000 of the 3,000 rows, then on all of them): the same fit to the last digit."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3_000, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=3_000)
    fits = [SASPARegressor(n_bases=8, max_hyper_iter=3, random_state=0,
                           hyper_subsample=stages).fit(X, y)
            for stages in ([1000, None], "1000,all", [1000, "all"])]
    for fit in fits:
        assert [s["rows"] for s in fit.hyperparameter_info_["stages"]] == [1000, 3000]
    assert fits[1].log_evidence_ == fits[0].log_evidence_ == fits[2].log_evidence_


def test_a_lengthscale_of_the_wrong_length_is_refused_before_k_means(capsys):
    """Two lengthscales for eight inputs: refused before K-means starts (it was refused
    after K-means had run on every row)."""
    rng = np.random.default_rng(4)
    X = da.from_array(rng.normal(size=(40_000, 8)), chunks=10_000)
    y = X[:, 0] + 0.1
    with pytest.raises(ValueError, match=r"one value per feature \(8\), got shape \(2,\)"):
        SASPARegressor(n_bases=16, lengthscale=[1.0, 2.0], verbose=1).fit(X, y)
    assert "K-means" not in capsys.readouterr().err
