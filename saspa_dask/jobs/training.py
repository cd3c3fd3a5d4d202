"""Training jobs: ``train`` a model on a data store (``retrain`` warm-starts one:
:mod:`saspa_dask.jobs.retraining`).

The fit runs on a Dask cluster (:mod:`saspa_dask.jobs.cluster`) or, for a small job,
in this process; the data's fingerprint is recorded, the model store written aside and
renamed into place, and a ``latest`` pointer optionally moved to it.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from pathlib import Path

import dask
import dask.array as da

from ..engines.chunks import spread_rows
from ..fitting.held_out import HeldOutError
from ..fitting.learning_advice import LearntBoundWarning, bound_advice
from ..files.atomic import check_destination, check_pointer, reading, write_latest
from ..files.outputs import MODEL
from ..files.errors import StoreError
from ..files.groups import zarr_array
from ..parameters import bases_for_rows
from ..storage.data_store import (check_identity, input_arrays, open_data_store,
                                  store_identity)
from ..storage.encoding import like_encoding
from ..storage.scores import evaluate as evaluate_store
from ..storage import save_model
from .cluster import dask_client, input_values, n_workers, runs_in_process, start_embedded
from .cross_validation import cross_validate
from .errors import JobError, locked, reported
from .paths import absolute
from .task import DEFAULT_MAX_CLASSES, choose_task, summarise_target
from .estimators import build_estimator, canonical_options
from .row_probes import check_data
from .scratch import scratch_directory, working_in

__all__ = ["fit_and_save", "not_converged_advice", "optimiser_warnings", "train",
           "training_data"]


def train(data, out, *, task=None, max_classes=DEFAULT_MAX_CLASSES, overwrite=False,
          latest=None, test=None, cv=None, client=None, scheduler=None, workers=None,
          timeout=10, security=None, progress=None, echo=None, dashboard=False, **options):
    """Train a SASPA model on a zarr data store, on a Dask cluster.

    Parameters
    ----------
    data, out : str or Path
        Data store (``saspa ingest``) with ``X`` and ``y``; the model store to write
        (aside, then renamed into place; ``overwrite`` to replace one).
    task : {"classification", "regression"}, optional
        More than two classes are one-vs-rest on shared bases.  Default: inferred from
        the target (:mod:`saspa_dask.jobs.task`), and said through ``echo``; more than
        ``max_classes`` classes are refused.
    latest : str or Path, optional
        Pointer file to move to the new model.
    test : str or Path, optional
        A held-out data store (``saspa split``'s test part): the model's metrics on it
        (as :func:`~saspa_dask.jobs.scoring.evaluate` gives them) are returned and
        recorded in the model store (``saspa info`` shows them).
    cv : int, optional
        K-fold cross-validation first, seeded by ``random_state``, then the model on
        every row, which records the folds' metrics (``cv_metrics``;
        :mod:`saspa_dask.jobs.cross_validation`).
    client, scheduler, workers, timeout, security, dashboard
        Where to run (:func:`saspa_dask.jobs.cluster.dask_client`).
    progress, echo : callable, optional
        Called with each EP sweep's record, and with progress messages (strings).
    **options
        The estimator's options, named as ``saspa train``'s flags
        (:func:`build_estimator`): ``n_bases``, ``blur``, ``likelihood``,
        ``random_state``, ``optimize_hyperparameters``, ``n_restarts_optimizer`` ...

    Returns
    -------
    dict
        ``model`` (the fitted estimator), ``out``, ``seconds`` (float), ``converged``
        (bool), ``metrics`` (dict on ``test``, or None), ``cv`` (with ``cv``: the
        folds' metrics, ``mean``, ``std``).

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from saspa_dask import jobs
    >>> from saspa_dask.datasets import synthetic_two_class
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> X, y = synthetic_two_class(2000, 3, seed=0)
    >>> np.save(d / "data.npy", np.column_stack([X, y]))
    >>> _ = jobs.ingest(d / "data.npy", d / "data.zarr", chunk_rows=500)
    >>> result = jobs.train(d / "data.zarr", d / "model.zarr", n_bases=8)  # small: in process
    >>> result["converged"], jobs.describe(d / "model.zarr")["n_training_rows"]
    (True, 2000)
    """
    data, out, latest = absolute(data), absolute(out), absolute(latest)
    options = canonical_options(options)
    options["work_dir"] = absolute(options.get("work_dir")) or out.parent
    check_latest(latest, data)
    X, y, attrs = _options_then_store(data, out, overwrite, task, options)
    cluster = dict(client=client, scheduler=scheduler, workers=workers, timeout=timeout,
                   security=security, dashboard=dashboard)
    # its workers start while the estimators are imported and the options checked
    starting = start_embedded(**cluster, values=_held_values(X, options.get("n_bases")))
    try:
        build_estimator(task, **options)  # bad options fail before the data is read
        # (a valid store's cluster, started above, is then given up)
        with reported(f"{data}: "):
            task, reason = choose_task(summarise_target(y, attrs.get("target_classes")),
                                       task, max_classes)
        _say(echo, reason)
        model = build_estimator(task, **options)
        run = dict(overwrite=overwrite, latest=latest, progress=progress, echo=echo,
                   test=absolute(test))
        if cv is None:
            return fit_and_save(model, X, y, attrs, data, out,
                                cluster={**cluster, "started": starting}, **run)
        return _with_cv(cv, model, (X, y, attrs, data, out), task, max_classes,
                        {**cluster, "started": starting}, run, options)
    finally:
        if starting is not None:  # given up unless the fit took it
            starting.close()


def _with_cv(cv, model, store, task, max_classes, cluster, run, options):
    """``cv`` folds cross-validated, then the model on every row fitted and saved with
    their metrics, on one cluster (:mod:`~saspa_dask.jobs.cross_validation`)."""
    X, y, attrs, data, out = store
    with dask_client(**cluster, echo=run["echo"],
                     values=_held_values(X, options.get("n_bases"))) as running:
        folds = cross_validate(train, data, cv, seed=options.get("random_state") or 0,
                               task=task, max_classes=max_classes, echo=run["echo"],
                               client=running, **options)
        result = fit_and_save(model, X, y, attrs, data, out, cluster={"client": running},
                              extra={"cv_metrics": folds}, **run)
    return {**result, "cv": folds}


def _options_then_store(data, out, overwrite, task, options):
    """The training store (:func:`training_data`), opened before the options are
    checked (its size decides where the job runs), but a bad option is said before a
    missing or refused store."""
    try:
        return training_data(data, out, overwrite)
    except Exception:
        build_estimator(task, **options)
        raise


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


def not_converged_advice(model):
    """What to do about a model whose EP on all rows did not converge."""
    if getattr(model, "ep_stop_reason_", None) == "time":
        return ("EP on all rows was stopped by the --max-fit-time budget before it "
                "converged (the model is saved; raise --max-fit-time for a converged one)")
    return "EP did not converge (raise --max-sweeps or lower the damping)"


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


def training_data(data, out, overwrite):
    """The data store to train on, after checking the destination is free."""
    with reported():
        check_destination(out, overwrite, MODEL, {"data store": data})
        return open_data_store(data)


def check_latest(latest, data):
    """A ``latest`` pointer path is free or a pointer already (never a user's file),
    checked before any work."""
    if latest is not None:
        with reported():
            check_pointer(latest, {"data store": data})


def fit_and_save(model, X, y, attrs, data, out, *, overwrite, latest, cluster, progress,
                  echo, init_sites=None, extra=None, reordered=False, old_probes=None,
                  test=None):
    """Fit on the cluster, write the model aside and rename it, update ``latest``; the
    writer lock of ``out`` is held throughout (:func:`~saspa_dask.jobs.errors.locked`)."""
    start = time.perf_counter()
    with locked(out, "model store"), reported(), reading(data), \
            (reading(test, "test store") if test is not None else contextlib.nullcontext()):
        pin = store_identity(data)
        test_pin = None if test is None else store_identity(test)
        # the scratch folder outlives the cluster (see scratch_directory) and the save:
        # a Dask fit's per-row sites are kept there until the model store has them
        with scratch_directory(model) as folder:
            with working_in(model, folder):
                probes, metrics = _fit_on_cluster(model, X, y, attrs, data, cluster,
                                                  progress, echo, init_sites, reordered,
                                                  old_probes, test)
            check_identity(data, pin)  # every read of the data came from one store
            if test is not None:  # and every measurement on the test store likewise
                check_identity(test, test_pin)
            seconds = time.perf_counter() - start
            attributes = {"data_store": str(Path(data).resolve()),
                          "data_columns": attrs.get("columns"),
                          "data_encoding": encoding_record(attrs, data), "row_probes": probes,
                          "target": attrs.get("target"),
                          "target_classes": attrs.get("target_classes"),
                          "train_seconds": seconds, "test_metrics": metrics, **(extra or {})}
            with reported():
                save_model(model, out, overwrite=overwrite, extra_attrs=attributes)
            _sites_read_from(model, out)
        if latest:
            _point_latest(latest, out)
    for level in getattr(model, "coarse_start_", []):
        _say(echo, f"coarse start: {level['rows']} rows, {level['sweeps']} sweeps, "
                   f"{level['seconds']:.1f}s")
    for line in optimiser_warnings(model.hyperparameter_info_):
        _say(echo, line)
    return {"model": model, "out": Path(out), "seconds": float(seconds),
            "converged": bool(model.converged_), "metrics": metrics}


def _sites_read_from(model, out):
    """A Dask fit's per-row sites, kept in the job's scratch folder, go with it: the
    model the job returns reads them from the store it saved."""
    for name in model._REPORT_ARRAYS:
        if isinstance(getattr(model, name, None), da.Array):
            setattr(model, name, da.from_zarr(zarr_array(out, name.rstrip("_"))))


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


def _held_out_rows(test, attrs):
    """The test store's X and y (lazy; columns matched to the training store's by
    name) that the fit is measured on as it learns, or () without a test store."""
    if test is None:
        return ()
    with reported(f"{test}: "):
        X, y, _ = input_arrays(test, attrs.get("columns"))
    if y is None:
        raise JobError(f"{test}: the test store has no array 'y' with one value per row "
                       "to measure the model against")
    return X, y


def _held_values(X, n_bases):
    """What a fit of X holds in memory (:func:`~saspa_dask.jobs.cluster.input_values`),
    with the bases ``n_bases`` means for its rows."""
    n_bases = n_bases if isinstance(n_bases, int) else "auto"
    return input_values(X, bases_for_rows(n_bases, X.shape[0]))


def _fit_on_cluster(model, X, y, attrs, data, cluster, progress, echo, init_sites,
                    reordered, old_probes, test):
    """The fit itself (and its held-out metrics): ``(row probes, metrics or None)``."""
    size = _held_values(X, model.n_bases)
    with dask_client(**cluster, echo=echo, values=size) as client:
        _say(echo, f"data: {data} ({X.shape[0]} rows x {X.shape[1]} inputs); checking its "
                   "fingerprint")
        probes = check_data(X, y, attrs, data, reordered, old_probes)
        data_fingerprint = probes.pop("fingerprint")
        workers = n_workers(client)
        held_out = _held_out_rows(test, attrs)
        if runs_in_process(**cluster, values=size):
            # a small job: fitted in memory, no task per sweep
            X, y, *held_out = dask.compute(X, y, *held_out)
            _say(echo, "data: read into this process; fitted in memory")
        else:
            X, y = spread_rows(workers, X, y)
            if held_out:
                held_out = spread_rows(workers, *held_out)
            _say(echo, f"data: {len(X.chunks[0])} chunks (one task each) over {workers} "
                       "workers")
        if callable(init_sites):  # computed on the cluster (reads the appended rows)
            init_sites = init_sites()
        with reported(), warnings.catch_warnings():
            # said as the job's own warning line (optimiser_warnings), not twice
            warnings.simplefilter("ignore", LearntBoundWarning)
            try:
                model.fit(X, y, progress=progress, init_sites=init_sites,
                          column_names=attrs.get("columns"),
                          data_fingerprint=data_fingerprint,
                          **dict(zip(("X_val", "y_val"), held_out)))
            except HeldOutError as err:  # the test store's rows, not the training data
                raise JobError(f"{test}: {err}") from None
        if test is None:
            return probes, None
        with reported(f"{test}: "):
            return probes, {"data": str(test), **evaluate_store(
                model, test, columns=attrs.get("columns"), n_workers=workers)}
