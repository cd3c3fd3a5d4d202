"""Training jobs: ``train`` a model on a data store, ``retrain`` it warm-started.

Both fit on a Dask cluster (:mod:`saspa_dask.jobs.cluster`), record the data's
fingerprint, write the model store aside and rename it into place, and optionally move
a ``latest`` pointer to it.  :func:`retraining_parameters` holds the retraining rules:
what carries over from the old model.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import time
import warnings
from dataclasses import replace
from pathlib import Path

import dask
import numpy as np

from ..engines.chunks import spread_rows
from ..fitting.basis_parameters import LEARN_BASES
from ..fitting.hyperparameters import LearntBoundWarning, bound_advice
from ..models import SASPAClassifier, SASPARegressor
from ..models.settings import settings_of
from ..parameters import (CLASSIFICATION_LIKELIHOODS, REGRESSION_LIKELIHOODS,
                          TRAIN_PARAMETERS, by_name, old_names)
from ..files.atomic import check_not_an_input, reading, resolve_model_path, write_latest
from ..storage.columns import match_columns
from ..files.errors import StoreError
from ..storage.data_store import (check_identity, open_data_store, store_identity,
                                  unreadable_chunk)
from ..storage.encoding import like_encoding
from ..storage.scores import evaluate as evaluate_store
from ..storage.fingerprint import check_recorded, fingerprint_and_rows
from ..storage import load_model_and_attrs, save_model
from .cluster import dask_client, input_values, n_workers, runs_in_process
from .errors import JobError, locked, reported
from .paths import absolute
from .task import DEFAULT_MAX_CLASSES, choose_task, summarise_target

__all__ = ["LIKELIHOODS", "build_estimator", "canonical_options", "estimator_parameters",
           "optimiser_warnings", "retrain", "retraining_parameters", "train"]

LIKELIHOODS = {"classification": CLASSIFICATION_LIKELIHOODS,
               "regression": REGRESSION_LIKELIHOODS}
# likelihood parameters of one task only
_TASK_ONLY = {"classification": ("label_noise",),
              "regression": ("noise_variance", "dof", "scale")}
# the old model's fitted likelihood values a retrained model starts from (and keeps)
_CARRIED_LIKELIHOOD = (("noise_variance_", "noise_variance"), ("label_noise_", "label_noise"),
                       ("dof_", "dof"), ("scale_", "scale"))


def canonical_options(options, parameters=TRAIN_PARAMETERS, where="option"):
    """Job options under their current names: old names (``seed``, ``bases``,
    ``hyper_restarts``) are renamed with a FutureWarning; unknown names are a
    JobError listing the known ones."""
    renamed = old_names(parameters)
    known = by_name(parameters)
    out = {}
    for key, value in options.items():
        if key in renamed:
            warnings.warn(f"{where} {key!r} is now called {renamed[key]!r}; the old name "
                          "will be removed in the next release", FutureWarning, stacklevel=3)
            key = renamed[key]
        if key not in known:
            raise JobError(f"unknown {where} {key!r}; known: {', '.join(sorted(known))}")
        out[key] = value
    return out


def estimator_parameters(options, parameters=TRAIN_PARAMETERS):
    """Estimator keyword arguments from job options named as in
    :mod:`saspa_dask.parameters`: grouped fields gathered into ``ep`` and
    ``execution`` dicts, the rest as they are."""
    table = by_name(parameters)
    params, groups = {}, {}
    for key, value in options.items():
        entry = table[key]
        if entry.group is None:
            params[key] = value
        else:
            groups.setdefault(entry.group, {})[entry.field or key] = value
    return {**params, **groups}


def build_estimator(task=None, **options):
    """The estimator ``saspa train`` fits, from its options (named as in
    :mod:`saspa_dask.parameters`; the estimator's defaults where not given, except
    the jobs' own: ``random_state=0`` so that a job is reproducible).

    ``learn_bases`` may be "none" (False); "means" and "means+blur" need the
    hyperparameters learnt and turn their learning on."""
    options = canonical_options(options)
    for p in by_name().values():
        if p.job_default is not None:
            options.setdefault(p.name, p.job_default)
        if p.parse is not None and options.get(p.name) is not None:
            try:
                options[p.name] = p.parse(options[p.name])
            except ValueError as err:
                raise JobError(str(err)) from None
    learn_bases = options.get("learn_bases", "auto")
    learn_bases = False if learn_bases in (None, "none", False) else learn_bases
    if learn_bases not in (False, "auto", *LEARN_BASES):
        raise JobError(f"learn_bases must be 'none', 'auto' or one of "
                       f"{', '.join(LEARN_BASES)}, got {learn_bases!r}")
    if learn_bases == "means+blur" and options.get("blur", "full") == "delta":
        raise JobError("--learn-bases means+blur needs a blur family with covariances; "
                       "blur 'delta' has none (use --learn-bases means)")
    options["learn_bases"] = learn_bases
    if learn_bases in LEARN_BASES:
        options["optimize_hyperparameters"] = True
    likelihood = options.pop("likelihood", None)
    if task is None:  # not known yet (inferred from the data): check what can be
        task = "regression" if likelihood in REGRESSION_LIKELIHOODS else "classification"
        for key in _TASK_ONLY["classification" if task == "regression" else "regression"]:
            options.pop(key, None)
    if task not in LIKELIHOODS:
        raise JobError(f"task must be 'classification' or 'regression', got {task!r}")
    allowed = LIKELIHOODS[task]
    if likelihood is not None and likelihood not in allowed:
        raise JobError(f"{likelihood!r} is not a {task} likelihood; use one of "
                       f"{', '.join(allowed)}")
    other = _TASK_ONLY["regression" if task == "classification" else "classification"]
    given = sorted(k for k in other if options.get(k) not in (None, by_name()[k].default))
    if given:
        raise JobError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for "
                       f"{'regression' if task == 'classification' else 'classification'}"
                       f" only; this is {task}")
    for key in other:
        options.pop(key, None)
    if options.get("work_dir") is not None:
        options["work_dir"] = str(options["work_dir"])
    params = estimator_parameters(options)
    cls = SASPAClassifier if task == "classification" else SASPARegressor
    estimator = cls(likelihood=likelihood or allowed[0], verbose=1, **params)
    try:  # every parameter and settings field checked now, before a cluster starts
        estimator._validate_params()
    except ValueError as err:
        raise JobError(str(err)) from None
    return estimator


def train(data, out, *, task=None, max_classes=DEFAULT_MAX_CLASSES, overwrite=False,
          latest=None, test=None, client=None, scheduler=None, workers=None, timeout=10,
          security=None, progress=None, echo=None, dashboard=False, **options):
    """Train a SASPA model on a zarr data store, on a Dask cluster.

    Parameters
    ----------
    data : str or Path
        Data store (``saspa ingest``) with ``X`` and ``y``.
    out : str or Path
        Model store to write (written aside, renamed into place).
    task : {"classification", "regression"}, optional
        More than two classes are one-vs-rest on shared bases.  Default: inferred from
        the target (:mod:`saspa_dask.jobs.task`: text labels, or at most 20 distinct
        integer values, are classification), and said through ``echo``.
    max_classes : int, default=100
        A classification with more distinct target values is refused.
    overwrite : bool
        Replace an existing store at ``out``.
    latest : str or Path, optional
        Pointer file to move to the new model.
    test : str or Path, optional
        A held-out data store (``saspa split``'s test part): the model's metrics on it
        (as :func:`~saspa_dask.jobs.scoring.evaluate` gives them) are returned and
        recorded in the model store (``saspa info`` shows them).
    client, scheduler, workers, timeout, security, dashboard
        Where to run (:func:`saspa_dask.jobs.cluster.dask_client`).
    progress : callable, optional
        Called with each EP sweep's record.
    echo : callable, optional
        Called with progress messages (strings).
    **options
        The estimator's options, named as ``saspa train``'s flags
        (:func:`build_estimator`): ``n_bases``, ``blur``, ``likelihood``, ``seed``,
        ``optimize_hyperparameters``, ``hyper_restarts`` ...

    Returns
    -------
    dict
        ``model`` (the fitted estimator), ``out``, ``seconds`` (float), ``converged``
        (bool), ``metrics`` (dict on ``test``, or None).

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from saspa_dask import jobs
    >>> from saspa_dask.datasets import synthetic_two_class
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> X, y = synthetic_two_class(2000, 3, seed=0)
    >>> np.save(d / "data.npy", np.column_stack([X, y]))
    >>> _ = jobs.ingest(d / "data.npy", d / "data.zarr", chunk_rows=500)
    >>> result = jobs.train(d / "data.zarr", d / "model.zarr", n_bases=8, workers=1)
    >>> result["converged"], jobs.describe(d / "model.zarr")["n_training_rows"]
    (True, 2000)
    """
    data, out, latest = absolute(data), absolute(out), absolute(latest)
    options = canonical_options(options)
    options["work_dir"] = absolute(options.get("work_dir")) or out.parent
    build_estimator(task, **options)  # bad options fail first
    X, y, attrs = _training_data(data, out, overwrite)
    with reported(f"{data}: "):
        task, reason = choose_task(summarise_target(y, attrs.get("target_classes")), task,
                                   max_classes)
    _say(echo, reason)
    model = build_estimator(task, **options)
    return _fit_and_save(model, X, y, attrs, data, out, overwrite=overwrite, latest=latest,
                         cluster=dict(client=client, scheduler=scheduler, workers=workers,
                                      timeout=timeout, security=security,
                                      dashboard=dashboard),
                         progress=progress, echo=echo, test=absolute(test))


def retraining_parameters(old, *, max_sweeps=100, tol=None, anderson_memory=None,
                          cache="memory", work_dir=None, block_rows=None, refit_bases=False,
                          optimize_hyperparameters=True, max_hyper_iter=None, hyper_tol=None,
                          max_fit_time=None):
    """The retrained model's parameters: the old model's, with its (possibly learnt)
    hyperparameters as the start, and its bases unless ``refit_bases``; the EP
    schedule and execution settings as given (None: the old model's).

    With ``optimize_hyperparameters`` the hyperparameters are learnt again from that
    start, and so are the bases where the old fit learnt them (its resolved
    ``learn_bases``); otherwise they are kept as they are."""
    given = {"tol": tol, "anderson_memory": anderson_memory}
    ep = replace(settings_of("ep", old.ep), max_sweeps=max_sweeps,
                 **{k: v for k, v in given.items() if v is not None})
    execution = replace(settings_of("execution", old.execution), cache=cache,
                        work_dir=None if work_dir is None else str(work_dir),
                        **({} if block_rows is None else {"block_rows": block_rows}))
    learnt_bases = (getattr(old, "hyperparameter_info_", {}) or {}).get("learn_bases")
    stopping = {k: v for k, v in (("max_hyper_iter", max_hyper_iter),
                                  ("hyper_tol", hyper_tol), ("max_fit_time", max_fit_time))
                if v is not None}
    params = {**old.get_params(), "ep": ep, "execution": execution,
              "lengthscale": old.lengthscale_, "signal_variance": old.signal_variance_,
              "optimize_hyperparameters": bool(optimize_hyperparameters),
              "learn_bases": (learnt_bases or False) if optimize_hyperparameters else False,
              "verbose": 0, **stopping}
    for attr, param in _CARRIED_LIKELIHOOD:
        if hasattr(old, attr):
            params[param] = getattr(old, attr)
    if not refit_bases:
        params["bases"] = old.bases_
    return params


def _retrainable(model, out):
    """The old model's path, the model and its store's attributes, checked: a SASPA
    model, and not the store ``out`` would write."""
    with reported():
        old_path = resolve_model_path(absolute(model))
        old, old_attrs = load_model_and_attrs(old_path)
    if not isinstance(old, (SASPAClassifier, SASPARegressor)):
        raise JobError(f"{old_path}: a {type(old).__name__} cannot be retrained (retraining "
                       "warm-starts the per-row sites of a SASPA model); train a new one")
    if Path(out).resolve() == old_path.resolve():
        raise JobError("--out must differ from MODEL (the old model is kept)")
    return old_path, old, old_attrs


def retrain(model, data, out, *, refit_bases=False, new_rows="update", max_sweeps=100,
            tol=None, anderson_memory=None, cache="memory", work_dir=None, block_rows=None,
            optimize_hyperparameters=True, max_hyper_iter=None, hyper_tol=None,
            max_fit_time=None, overwrite=False,
            latest=None, test=None, client=None, scheduler=None, workers=None, timeout=10,
            security=None, progress=None, echo=None, dashboard=False):
    """Retrain a model on a data store (rows appended, labels possibly corrected).

    Starts from the old model's bases and hyperparameters (bases refitted with
    ``refit_bases``, then EP starts cold) and learns them again from there unless
    ``optimize_hyperparameters=False`` (then they are kept); the old rows start from
    their stored sites, the appended rows from one EP update against the old posterior
    (``new_rows``: ``"adf"`` for an assumed-density-filtering pass, ``"empty"`` for
    zero sites).  The new model is written aside and renamed into place; the old one is never touched.

    Parameters
    ----------
    model : str or Path
        The old model store, or a ``latest`` pointer to it.
    data, out, overwrite, latest, test, client, scheduler, workers, timeout, security, dashboard,
    progress, echo
        As for :func:`train`.
    refit_bases : bool
    new_rows : {"update", "adf", "empty"}
    max_sweeps : int
    tol : float, optional
        Default: the old model's.
    anderson_memory : int, optional
        Default: the old model's.
    cache : {"memory", "none"}
    work_dir : str or Path, optional
        Default: beside ``out``.
    block_rows : int, optional
        Default: the old model's.
    optimize_hyperparameters : bool
        Learn the hyperparameters (and the bases, where the old fit learnt them) again,
        starting from the old model's.
    max_hyper_iter, hyper_tol, max_fit_time : optional
        When that learning stops (default: the old model's settings).

    Returns
    -------
    dict
        As :func:`train`, plus ``warm_started_rows``.
    """
    data, out, latest = absolute(data), absolute(out), absolute(latest)
    work_dir = absolute(work_dir)
    old_path, old, old_attrs = _retrainable(model, out)
    X, y, attrs = _training_data(data, out, overwrite)
    with reported():
        match = match_columns(_column_names(old), attrs.get("columns"), str(data),
                              n_store=X.shape[1])
    X = match.apply(X)
    n_old, n_new = old.sites_tau_.shape[-1], X.shape[0]
    if n_new < n_old:
        raise JobError(f"{data} has {n_new} rows but the model was trained on {n_old}: "
                       "retraining expects the old rows first, with new rows appended")
    params = retraining_parameters(old, max_sweeps=max_sweeps, tol=tol,
                                   anderson_memory=anderson_memory, cache=cache,
                                   work_dir=work_dir or Path(out).resolve().parent,
                                   block_rows=block_rows, refit_bases=refit_bases,
                                   optimize_hyperparameters=optimize_hyperparameters,
                                   max_hyper_iter=max_hyper_iter, hyper_tol=hyper_tol,
                                   max_fit_time=max_fit_time)
    warm = not refit_bases
    init_sites = (lambda: _warm_start_sites(old, X, y, new_rows, echo)) if warm else None
    _say(echo, f"retrain: {n_old} old rows warm-started, {n_new - n_old} new rows "
               f"({new_rows})" if warm else "retrain: bases refitted, cold start")
    result = _fit_and_save(
        type(old)(**params), X, y, attrs, data, out, overwrite=overwrite, latest=latest,
        cluster=dict(client=client, scheduler=scheduler, workers=workers, timeout=timeout,
                     security=security, dashboard=dashboard),
        progress=progress, echo=echo, init_sites=init_sites, reordered=match.reordered,
        old_probes=old_attrs.get("row_probes"), test=absolute(test),
        extra={"retrained_from": str(old_path.resolve()),
               "warm_started_rows": n_old if warm else 0,
               "new_rows_start": new_rows if warm else "empty"})
    return {**result, "warm_started_rows": n_old if warm else 0}


def optimiser_warnings(info):
    """Lines warning that the evidence maximisation stopped at its iteration cap or
    with learnt values on a bound (empty when neither, or when nothing was learnt)."""
    lines = []
    if info.get("method") == "stochastic" and info.get("hit_iteration_cap"):
        lines.append(f"warning: stochastic learning stopped at --max-epochs after "
                     f"{info['n_iterations']} steps, before its energy settled (raise "
                     "--max-epochs)")
    elif info.get("hit_iteration_cap"):
        lines.append(f"warning: the hyperparameter optimiser stopped at its cap of "
                     f"{info['n_iterations']} iterations before converging (raise "
                     "--max-hyper-iter)")
    if info.get("hit_time_budget"):
        lines.append(f"warning: the time budget stopped the hyperparameter optimiser after "
                     f"{info['n_iterations']} iterations, before it converged (raise "
                     "--max-fit-time)")
    if info.get("stop_reason") == "line search":
        lines.append(f"warning: the hyperparameter optimiser's line search stopped after "
                     f"{info['n_iterations']} iterations: {info['message']}")
    names = info.get("at_bounds")
    if names:
        lines.append(f"warning: {bound_advice(names)}")
    return lines


@contextlib.contextmanager
def scratch_directory(model):
    """A folder of the job's own for the model's scratch site stores, inside its
    ``work_dir``, removed after the cluster is closed: on an interrupt, tasks still
    running on the workers could otherwise write into a site store after the model
    removed it, leaving a ``saspa-sites-*`` folder behind."""
    execution = settings_of("execution", model.execution)
    parent = Path(execution.work_dir or tempfile.gettempdir())
    parent.mkdir(parents=True, exist_ok=True)
    remove_stale_scratch(parent)
    folder = Path(tempfile.mkdtemp(prefix=".saspa-job-", dir=parent))
    (folder / "owner").write_text(f"{socket.gethostname()} {os.getpid()}\n")
    model.set_params(execution=replace(execution, work_dir=str(folder)))
    try:
        yield folder
    finally:
        model.set_params(execution=replace(execution, work_dir=str(parent)))
        for _ in range(3):  # a cancelled task may still be finishing a write
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                break
            time.sleep(0.5)


# rows of the training data a model keeps, to check that a retraining store starts with
# them (its sites belong to those rows)
_N_PROBES = 32


def probe_index(n_rows):
    """The rows a model keeps (first, last and evenly spaced) to recognise its training
    data when it is retrained."""
    return np.unique(np.linspace(0, n_rows - 1, min(_N_PROBES, n_rows)).round().astype(int))


def check_row_probes(probes, X_rows, y_rows, data):
    """The retraining data's rows at the old probes' places are the rows the model was
    trained on: the old sites are row by row, so a store whose rows were reordered,
    filtered or split differently would warm-start every row from another row's site."""
    index = np.asarray(probes["index"], dtype=int)
    differ = ~(np.all(X_rows == np.asarray(probes["X"]), axis=1)
               & (y_rows == np.asarray(probes["y"])))
    if differ.any():
        raise JobError(f"{data}: row {int(index[differ][0])} differs from the row the model "
                       f"was trained on ({int(differ.sum())} of {len(index)} checked rows "
                       "differ); retraining expects the old rows first, unchanged, with new "
                       "rows appended")


def remove_stale_scratch(parent):
    """Remove scratch folders that jobs killed with SIGKILL (or a lost machine) left in
    ``parent``: a ``.saspa-job-*`` folder whose owner process, on this host, is gone.
    Folders of other hosts, or of live processes, are left alone."""
    host = socket.gethostname()
    for folder in parent.glob(".saspa-job-*"):
        try:
            owner_host, pid = (folder / "owner").read_text().split()
            pid = int(pid)
        except (OSError, ValueError):
            continue
        if owner_host != host or _alive(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _column_names(model):
    names = model.fitted_posterior_.feature_names
    return None if names is None else [str(c) for c in names]


def _say(echo, message):
    if echo is not None:
        echo(message)


def encoding_record(attrs, data):
    """How the training store was encoded (``saspa predict`` encodes a file the same
    way), or None for a store not written by ingest."""
    try:
        return like_encoding(attrs, Path(data).resolve())
    except StoreError:
        return None


def _training_data(data, out, overwrite):
    """The data store to train on, after checking the destination is free."""
    with reported():
        check_not_an_input(out, {"data store": data})
    if Path(out).exists() and not overwrite:
        raise JobError(f"{out} exists; pass --overwrite to replace it")
    with reported():
        return open_data_store(data)


def _warm_start_sites(old, X, y, new_rows, echo):
    """The old rows' stored sites, then the appended rows' (``warm_start_sites``)."""
    n_old = old.sites_tau_.shape[-1]
    if X.shape[0] == n_old:
        return old.sites_tau_, old.sites_nu_
    start = time.perf_counter()
    with reported("appended rows: "):  # problems met on the new rows are warnings
        sites = old.warm_start_sites(X[n_old:], y[n_old:], new_rows=new_rows)
    if new_rows != "empty":
        _say(echo, f"retrain: starting sites of {X.shape[0] - n_old} new rows ({new_rows}) "
                   f"{time.perf_counter() - start:.1f}s")
    return sites


def _check_data(X, y, attrs, data, reordered, old_probes):
    """One pass over the training data, on the store's own chunks: its fingerprint
    (checked against the one recorded at ingest), the rows the new model keeps as probes
    and, when retraining, the rows at the old model's probes (checked against them)."""
    index = probe_index(X.shape[0])
    old_index = np.zeros(0, dtype=int) if not old_probes else np.asarray(old_probes["index"])
    try:
        computed, X_rows, y_rows = fingerprint_and_rows(
            X, y, np.concatenate([index, old_index]).astype(int), attrs.get("chunk_rows"))
    except ValueError as err:
        raise JobError(str(unreadable_chunk(data, err) or err)) from None
    if not reordered:  # a reordered store is not the content that was fingerprinted
        with reported():
            check_recorded(data, attrs.get("fingerprint"), computed)
    n = len(index)
    if old_probes:
        check_row_probes(old_probes, X_rows[n:], y_rows[n:], data)
    return {"fingerprint": computed, "index": index.tolist(), "X": X_rows[:n].tolist(),
            "y": y_rows[:n].tolist()}


def _fit_and_save(model, X, y, attrs, data, out, *, overwrite, latest, cluster, progress,
                  echo, init_sites=None, extra=None, reordered=False, old_probes=None,
                  test=None):
    """Fit on the cluster, write the model aside and rename it, update ``latest``; the
    writer lock of ``out`` is held throughout (:func:`~saspa_dask.jobs.errors.locked`)."""
    start = time.perf_counter()
    with locked(out, "model store"), reported(), reading(data):
        pin = store_identity(data)
        probes, metrics = _fit_on_cluster(model, X, y, attrs, data, cluster, progress, echo,
                                          init_sites, reordered, old_probes, test)
        check_identity(data, pin)  # every read of the data came from one store
        seconds = time.perf_counter() - start
        attributes = {"data_store": str(Path(data).resolve()),
                      "data_columns": attrs.get("columns"),
                      "data_encoding": encoding_record(attrs, data), "row_probes": probes,
                      "target": attrs.get("target"),
                      "target_classes": attrs.get("target_classes"), "train_seconds": seconds,
                      "test_metrics": metrics, **(extra or {})}
        with reported():
            save_model(model, out, overwrite=overwrite, extra_attrs=attributes)
        if latest:
            _point_latest(latest, out)
    for level in getattr(model, "coarse_start_", []):
        _say(echo, f"coarse start: {level['rows']} rows, {level['sweeps']} sweeps, "
                   f"{level['seconds']:.1f}s")
    for line in optimiser_warnings(model.hyperparameter_info_):
        _say(echo, line)
    return {"model": model, "out": Path(out), "seconds": float(seconds),
            "converged": bool(model.converged_), "metrics": metrics}


def _point_latest(latest, out):
    """Move the ``latest`` pointer to the saved model; a failure says the model is
    saved (only the pointer is behind)."""
    try:
        write_latest(latest, out)
    except (OSError, StoreError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise JobError(f"the model was saved to {out}, but the pointer {latest} could not "
                       f"be moved to it ({reason}); the pointer still names the previous "
                       "model: fix that, then run the job again with --overwrite, or write "
                       "the model's path into the pointer file by hand") from None


def _fit_on_cluster(model, X, y, attrs, data, cluster, progress, echo, init_sites,
                    reordered, old_probes, test):
    """The fit itself (and its held-out metrics): ``(row probes, metrics or None)``."""
    size = input_values(X)
    with scratch_directory(model), dask_client(**cluster, echo=echo, values=size) as client:
        _say(echo, f"data: {data} ({X.shape[0]} rows x {X.shape[1]} inputs); checking its "
                   "fingerprint")
        probes = _check_data(X, y, attrs, data, reordered, old_probes)
        data_fingerprint = probes.pop("fingerprint")
        workers = n_workers(client)
        if runs_in_process(**cluster, values=size):
            X, y = dask.compute(X, y)  # a small job: fitted in memory, no task per sweep
            _say(echo, "data: read into this process; fitted in memory")
        else:
            X, y = spread_rows(workers, X, y)
            _say(echo, f"data: {len(X.chunks[0])} chunks (one task each) over {workers} "
                       "workers")
        if callable(init_sites):  # computed on the cluster (reads the appended rows)
            init_sites = init_sites()
        with reported(), warnings.catch_warnings():
            # said as the job's own warning line (optimiser_warnings), not twice
            warnings.simplefilter("ignore", LearntBoundWarning)
            model.fit(X, y, progress=progress, init_sites=init_sites,
                      column_names=attrs.get("columns"), data_fingerprint=data_fingerprint)
        if test is None:
            return probes, None
        with reported(f"{test}: "):
            return probes, {"data": str(test), **evaluate_store(
                model, test, columns=attrs.get("columns"), n_workers=workers)}
