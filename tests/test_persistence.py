"""Every public estimator saves and loads from ``import saspa_dask`` alone, in fresh
processes, and predicts exactly as before; parameters are named once."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from dataclasses import fields

import numpy as np
import pytest

import saspa_dask
from saspa_dask import EPSchedule, Execution, SASPAClassifier, SASPARegressor, StochasticLearning
from saspa_dask.parameters import RETRAIN_PARAMETERS, TRAIN_PARAMETERS

# (estimator expression, task): each is fitted, saved and loaded in its own processes
ESTIMATORS = [
    ("saspa_dask.SASPAClassifier(n_bases=6, random_state=0, max_hyper_iter=3)", "binary"),
    ("saspa_dask.SASPAClassifier(n_bases=6, blur='spherical', random_state=0, "
     "optimize_hyperparameters=False)", "three"),
    ("saspa_dask.SASPARegressor(n_bases=6, random_state=0, max_hyper_iter=3, "
     "approximation='dtc', ep=saspa_dask.EPSchedule(mode='sequential'))", "regression"),
    ("saspa_dask.SASPAClassifier(n_bases=6, random_state=0, alpha=0.5, "
     "optimize_hyperparameters=False)", "binary"),
    ("saspa_dask.FullGPClassifier(optimize_hyperparameters=False)", "binary"),
    ("saspa_dask.FullGPRegressor(max_hyper_iter=3)", "regression"),
    ("saspa_dask.SparseOnlineGPClassifier(max_bases=10)", "three"),
    ("saspa_dask.SparseOnlineGPRegressor(max_bases=10)", "regression"),
    ("saspa_dask.IVMClassifier(n_bases=10, signal_variance=5.0)", "binary"),
]

_DATA = """
import json
import sys
import numpy as np
import saspa_dask
rng = np.random.default_rng(0)
X = rng.normal(size=(80, 2))
TARGETS = {"binary": (X[:, 0] * X[:, 1] > 0).astype(int),
           "three": np.digitize(X[:, 0], [-0.5, 0.5]),
           "regression": np.sin(X[:, 0]) + 0.1 * rng.normal(size=80)}
Xt = rng.normal(size=(30, 2))


def outputs(model):
    if hasattr(model, "predict_proba"):
        return np.column_stack([model.predict(Xt), model.predict_proba(Xt)])
    return np.column_stack(model.predict(Xt, return_std=True))


def only_saspa_dask_imported():
    # nothing but the package's own lazy imports: no storage layer filled a registry
    return "saspa_dask.storage" not in sys.modules and "saspa_dask.jobs" not in sys.modules
"""

# one process fits and saves every estimator, another loads them: each starts from
# ``import saspa_dask`` alone
_SAVE = _DATA + """
report = []
for k, (expression, task) in enumerate(ESTIMATORS):
    model = eval(expression).fit(X, TARGETS[task])
    model.save(DIR + f"/{k}.zarr")
    np.save(DIR + f"/{k}.npy", outputs(model))
    report.append({"fingerprint": model.model_fingerprint()})
print(json.dumps({"clean": only_saspa_dask_imported(), "models": report}))
"""

_LOAD = _DATA + """
report = []
for k, (expression, task) in enumerate(ESTIMATORS):
    model = saspa_dask.load_model(DIR + f"/{k}.zarr")
    np.save(DIR + f"/{k}.loaded.npy", outputs(model))
    report.append({"type": type(model).__name__, "fingerprint": model.model_fingerprint()})
print(json.dumps({"clean": only_saspa_dask_imported(), "models": report}))
"""


def _run(script, directory):
    code = (textwrap.dedent(script).replace("ESTIMATORS", repr(ESTIMATORS))
            .replace("DIR", repr(str(directory))))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_estimator_saves_and_loads_in_fresh_processes(tmp_path):
    saved = _run(_SAVE, tmp_path)
    loaded = _run(_LOAD, tmp_path)
    assert saved["clean"] and loaded["clean"]
    for k, (expression, _) in enumerate(ESTIMATORS):
        name = expression.split("(")[0].split(".")[1]
        assert loaded["models"][k]["type"] == name
        assert loaded["models"][k]["fingerprint"] == saved["models"][k]["fingerprint"], name
        before = np.load(tmp_path / f"{k}.npy")
        after = np.load(tmp_path / f"{k}.loaded.npy")
        assert before.shape[0] == 30 and np.all(np.isfinite(before)), name
        np.testing.assert_array_equal(after, before, err_msg=name)
    assert {e.split("(")[0] for e, _ in ESTIMATORS} >= {
        f"saspa_dask.{n}" for n in ("SASPAClassifier", "SASPARegressor", "FullGPClassifier",
                                    "FullGPRegressor", "SparseOnlineGPClassifier",
                                    "SparseOnlineGPRegressor", "IVMClassifier")}


def test_the_store_readers_estimator_names_are_the_loadable_classes():
    """Scoring reads a store's posterior without importing the estimators: the names
    it accepts are the loader's classes, and a name ending in "Classifier" is what
    marks a classifier's store."""
    from sklearn.base import is_classifier

    from saspa_dask.models.loading import ESTIMATORS
    from saspa_dask.models.model_reader import ESTIMATOR_NAMES

    assert sorted(ESTIMATOR_NAMES) == sorted(ESTIMATORS)
    kinds = {name: is_classifier(cls()) for name, cls in ESTIMATORS.items()}
    assert kinds == {name: name.endswith("Classifier") for name in ESTIMATORS}
    assert sum(kinds.values()) == 4


def test_a_loaded_online_gp_continues_its_pass(tmp_path):
    """partial_fit on a loaded online GP continues from the stored posterior: the same
    model as continuing the original (the state is rebuilt from P's factor)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=300)
    y[:150] -= y[:150].mean()
    model = saspa_dask.SparseOnlineGPRegressor(max_bases=12, lengthscale=1.0).fit(
        X[:150], y[:150])
    loaded = saspa_dask.load_model(model.save(tmp_path / "online.zarr"))
    model.partial_fit(X[150:], y[150:])
    loaded.partial_fit(X[150:], y[150:])
    np.testing.assert_allclose(loaded.predict(X, return_std=True),
                               model.predict(X, return_std=True), rtol=1e-9, atol=1e-12)
    assert loaded.n_rows_seen_ == model.n_rows_seen_ == 300


def test_the_old_flat_names_are_gone():
    """Nothing was released: the grouped settings' old flat names are no parameters."""
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_sweeps'"):
        SASPAClassifier(max_sweeps=3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'block_rows'"):
        saspa_dask.SparseOnlineGPRegressor(block_rows=7)


def _defaults(cls):
    return {name: p.default for name, p in inspect.signature(cls).parameters.items()}


def test_the_parameter_table_matches_the_estimators_and_the_settings():
    """Each row of saspa_dask.parameters names an estimator parameter or a field of a
    grouped setting, with the estimator's own default (independent truth: the
    signatures and dataclasses themselves)."""
    estimators = {**_defaults(SASPAClassifier), **_defaults(SASPARegressor)}
    groups = {"ep": {f.name: f.default for f in fields(EPSchedule)},
              "execution": {f.name: f.default for f in fields(Execution)},
              "stochastic": {f.name: f.default for f in fields(StochasticLearning)}}
    for p in TRAIN_PARAMETERS:
        if p.name == "likelihood":  # by task: each estimator's default is among its own
            assert p.default is None and {_defaults(SASPAClassifier)["likelihood"],
                                          _defaults(SASPARegressor)["likelihood"]} <= set(
                p.choices)
        elif p.group is None:
            assert p.name in estimators, p.name
            assert p.default == estimators[p.name], p.name
        else:
            assert p.default == groups[p.group][p.field], p.name
    covered = {p.name for p in TRAIN_PARAMETERS if p.group is None} | {"ep", "execution",
                                                                         "stochastic"}
    # every estimator parameter is in the table but explicit bases, an additive kernel's
    # starting weights, the jitter, centring and verbosity (Python only: a job sets them
    # itself; retrain passes a model's term weights)
    assert set(estimators) - covered == {"bases", "center_y", "jitter", "term_weights",
                                         "verbose"}
    grouped = {(p.group, p.field) for p in TRAIN_PARAMETERS if p.group}
    assert grouped == {(g, f) for g, names in groups.items() for f in names}
    assert {p.name for p in RETRAIN_PARAMETERS} <= {p.name for p in TRAIN_PARAMETERS}


def test_the_cli_and_the_toml_schema_come_from_the_table():
    from click.testing import CliRunner

    from saspa_dask.cli import main
    from saspa_dask.pipelines import STEP_OPTIONS

    command = main.commands["train"]
    flags = {opt for param in command.params for opt in param.opts + param.secondary_opts}
    for p in TRAIN_PARAMETERS:
        assert p.flag in flags, p.flag
        assert p.name in STEP_OPTIONS["train"], p.name
    help_text = CliRunner().invoke(main, ["train", "--help"]).output
    assert "--n-bases" in help_text and "--bases " not in help_text
    assert "--no-optimize-hyperparameters" in help_text


def test_one_table_drives_every_command_its_job_function_and_its_toml_step():
    """For every one of the thirteen commands: the click command's parameters are the
    table's rows (plus the cluster's), the job function takes each row that is not
    the CLI's own (``--json``) as a keyword (its signature is the independent truth),
    and a job file's step schema is the table's, with its required keys and positional
    arguments."""
    import click

    from saspa_dask import jobs
    from saspa_dask.cli import main
    from saspa_dask.parameters import (CLI_COMMANDS, CLUSTER_COMMANDS, CLUSTER_PARAMETERS,
                                       COMMANDS)
    from saspa_dask.jobs.estimators import canonical_options
    from saspa_dask.pipelines import STEP_OPTIONS

    cluster = {p.name for p in CLUSTER_PARAMETERS}
    assert set(main.commands) == set(COMMANDS) | set(CLI_COMMANDS)  # all thirteen
    for kind, table in {**COMMANDS, **CLI_COMMANDS}.items():
        command = main.commands[kind]
        given = {param.name for param in command.params}
        expected = {p.name for p in table} | (cluster if kind in CLUSTER_COMMANDS else set())
        assert given == expected, kind
        arguments = [param.name for param in command.params
                     if isinstance(param, click.Argument)]
        assert arguments == [p.name for p in table if p.positional], kind
    jobs_named = {"make-data": "make_data", "info": "describe"}
    for kind, table in {**COMMANDS, **CLI_COMMANDS}.items():
        if kind == "run":  # the job file itself: saspa_dask.pipelines.run_job
            continue
        names = {p.name for p in table if not p.cli_only}
        signature = inspect.signature(getattr(jobs, jobs_named.get(kind, kind))).parameters
        if kind in CLI_COMMANDS:
            positional = [p.name for p in table if p.positional]
            assert set(names) - set(positional) - {p.name for p in TRAIN_PARAMETERS} <= set(
                signature), kind
    for kind, table in COMMANDS.items():
        names = {p.name for p in table if not p.cli_only}
        command = main.commands[kind]
        arguments = [param.name for param in command.params
                     if isinstance(param, click.Argument)]
        assert arguments == [p.name for p in table if p.positional], kind
        signature = inspect.signature(getattr(jobs, kind)).parameters
        rest = names - set(signature)
        if rest:  # train's estimator parameters arrive as **options
            assert any(q.kind == q.VAR_KEYWORD for q in signature.values()), kind
            assert rest <= {p.name for p in TRAIN_PARAMETERS}, (kind, rest)
            canonical_options({name: None for name in rest})  # each a known name
        if kind in CLUSTER_COMMANDS:  # the TLS files become one security object
            assert {"scheduler", "workers", "timeout", "dashboard", "security"} <= set(
                signature), kind
        schema = STEP_OPTIONS[kind]
        assert {k for k in schema} == names
        assert {k for k, (_, required) in schema.items() if required} == {
            p.name for p in table if p.required}, kind
    # a rule of a job holds for the Python call and a job file alike, not only the CLI
    from saspa_dask.jobs import JobError

    with pytest.raises(JobError, match="like takes the target"):
        jobs.ingest("a.csv", "a.zarr", like="b.zarr", target="y")


def test_a_bad_grouped_option_is_refused_before_any_data_or_cluster(tmp_path):
    from click.testing import CliRunner

    from saspa_dask.cli import main

    for flag, value, message in (("--tol", "-1", "EPSchedule.tol must be a float > 0"),
                                 ("--block-rows", "0", "Execution.block_rows must be"),
                                 ("--alpha", "1.5", "'alpha' parameter")):
        res = CliRunner().invoke(main, ["train", str(tmp_path / "missing.zarr"), "--out",
                                        str(tmp_path / "m.zarr"), flag, value])
        assert res.exit_code == 1 and message in res.output, res.output
        assert "missing.zarr" not in res.output  # the options fail first
