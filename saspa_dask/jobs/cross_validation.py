"""K-fold cross-validation of a training job's options: ``saspa train --cv K``.

The rows are dealt into K folds by the draws ``saspa split`` makes (seeded, chunk by
chunk: :func:`saspa_dask.storage.split.split_store` with ``fold``); for each fold a
model is trained on the other folds with the job's options and measured on it (the
metrics of ``evaluate``).  The folds' stores and models live in a scratch folder of the
job's own, removed at the end; one cluster serves every fit.  The model the job then
trains on every row records the folds' metrics, their means and standard deviations.
"""

from __future__ import annotations

import shutil

import numpy as np

from ..storage.split import split_store
from .errors import JobError, reported
from .scratch import owned_folder

__all__ = ["cross_validate", "cv_lines"]

# metrics that are counts or labels, not averaged over the folds
_NOT_AVERAGED = ("rows", "data", "columns", "training_data")


def cross_validate(train, data, folds, *, seed, task, work_dir, echo, **options):
    """Each fold's held-out metrics of ``train(fold_train, model, test=fold, ...)``.

    Parameters
    ----------
    train : callable
        :func:`saspa_dask.jobs.training.train` (with ``cv`` unset).
    data : Path
    folds : int
        K >= 2.
    seed : int
        Seed of the rows' fold draws.
    task : str
        The task, decided once on every row (a fold does not decide it again).
    work_dir : Path
        Where the scratch folder goes.
    echo : callable or None
    **options
        The rest of ``train``'s options (cluster included).

    Returns
    -------
    dict
        ``folds`` (each fold's metrics with its ``train_rows``), ``mean`` and ``std``
        (over the folds, of every metric they all have), ``k``, ``seed``.
    """
    if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)) or folds < 2:
        raise JobError(f"cv must be a number of folds of at least 2, got {folds!r}")
    results = []
    with owned_folder(work_dir) as folder:
        for k in range(folds):
            train_store, test_store = folder / f"train-{k}.zarr", folder / f"test-{k}.zarr"
            with reported(f"{data}: "):
                counts = split_store(data, train_store, test_store, fold=(k, folds),
                                     seed=seed)
            said = None if echo is None else (lambda m, k=k: echo(f"fold {k + 1}/{folds}: {m}"))
            result = train(train_store, folder / f"model-{k}.zarr", task=task,
                           test=test_store, echo=said, work_dir=folder, **options)
            # the fold's scratch store is removed below: the record names the fold
            results.append({**result["metrics"], "data": f"fold {k + 1} of {folds} of {data}",
                            "train_rows": counts["train_rows"]})
            if echo is not None:
                echo(cv_lines({"folds": results, "k": folds})[-1])
            for path in (train_store, test_store, folder / f"model-{k}.zarr"):
                shutil.rmtree(path, ignore_errors=True)
    return {"k": int(folds), "seed": int(seed), "folds": results, **_summary(results)}


def _summary(results):
    keys = [k for k, v in results[0].items() if k not in _NOT_AVERAGED and k != "train_rows"
            and all(isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)
                    for r in results)]
    values = {k: np.array([float(r[k]) for r in results]) for k in keys}
    return {"mean": {k: float(v.mean()) for k, v in values.items()},
            "std": {k: float(v.std(ddof=1)) for k, v in values.items()}}


def cv_lines(cv):
    """Lines for a person: one per fold done, then (when they are all done) the mean
    and standard deviation of each metric."""
    lines = []
    for k, fold in enumerate(cv["folds"]):
        shown = "  ".join(f"{key} {value:.6g}" for key, value in fold.items()
                          if key not in _NOT_AVERAGED and key != "train_rows"
                          and isinstance(value, (int, float)) and value is not None)
        lines.append(f"cv fold {k + 1}/{cv['k']} ({fold['train_rows']} training rows, "
                     f"{fold['rows']} held out): {shown}")
    if "mean" in cv:
        lines.append(f"cv mean over {cv['k']} folds: " + "  ".join(
            f"{key} {cv['mean'][key]:.6g} (sd {cv['std'][key]:.2g})" for key in cv["mean"]))
    return lines
