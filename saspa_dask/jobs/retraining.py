"""``retrain``: a model retrained on a data store (rows appended), warm-started from
the old model's sites, bases and hyperparameters; :func:`retraining_parameters` holds
the rules of what carries over."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path


from ..models import SASPAClassifier, SASPARegressor
from ..models.settings import settings_of
from ..files.atomic import resolve_model_path
from ..storage.columns import match_columns
from ..storage import load_model_and_attrs
from .errors import JobError, reported
from .paths import absolute
from .training import _say, check_latest, fit_and_save, training_data

__all__ = ["retrain", "retraining_parameters"]


# the old model's fitted likelihood values a retrained model starts from (and keeps)
_CARRIED_LIKELIHOOD = (("noise_variance_", "noise_variance"), ("label_noise_", "label_noise"),
                       ("dof_", "dof"), ("scale_", "scale"))


def retraining_parameters(old, *, max_sweeps=100, tol=None, anderson_memory=None,
                          cache="auto", work_dir=None, block_rows=None, refit_bases=False,
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
              "term_weights": old.term_weights_,
              "optimize_hyperparameters": bool(optimize_hyperparameters),
              "learn_bases": (learnt_bases or False) if optimize_hyperparameters else False,
              "verbose": 1, **stopping}  # phase and iteration lines, as train prints
    if "learning_start" in params:  # learning goes on from the old values, not anew
        params["learning_start"] = "data"
    if params.get("blur") == "auto":  # the family the old fit chose (delta after a
        params["blur"] = old.blur_    # variational start), not the inputs' default
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
            tol=None, anderson_memory=None, cache="auto", work_dir=None, block_rows=None,
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
    check_latest(latest, data)
    old_path, old, old_attrs = _retrainable(model, out)
    X, y, attrs = training_data(data, out, overwrite)
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
    result = fit_and_save(
        type(old)(**params), X, y, attrs, data, out, overwrite=overwrite, latest=latest,
        cluster=dict(client=client, scheduler=scheduler, workers=workers, timeout=timeout,
                     security=security, dashboard=dashboard),
        progress=progress, echo=echo, init_sites=init_sites, reordered=match.reordered,
        old_probes=old_attrs.get("row_probes"), test=absolute(test),
        extra={"retrained_from": str(old_path.resolve()),
               "warm_started_rows": n_old if warm else 0,
               "new_rows_start": new_rows if warm else "empty"})
    return {**result, "warm_started_rows": n_old if warm else 0}


def _column_names(model):
    names = model.fitted_posterior_.feature_names
    return None if names is None else [str(c) for c in names]


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
