"""Batch scoring to zarr and evaluation, chunk by chunk on Dask.

Score store layout: a zarr group with arrays ``mean`` and ``variance`` (latent) and,
for classification, ``proba`` (P(y = classes_[1])), all chunk-aligned with the input's
row chunks; ``row`` (each row's number in the file the data store was ingested from)
and, when the data store has ids, ``id``, so every score can be joined back to its
row; plus ``done`` (one flag per chunk).  A one-vs-rest multi-class model writes
(N, n_classes) arrays (one column per class; ``proba`` normalised over the classes); a
Poisson model also writes ``rate``, the expected count exp(mean + variance / 2), and
every regressor ``std``, the standard deviation of a new observation (the noise's
variance added: ``predict(X, return_std=True)``'s), and a gaussian regressor ``lower``
and ``upper``, the central interval of a new observation at the store's
``interval_level`` (``predict_interval``'s).  A
chunk task writes its rows, then its flag; the group's ``complete`` attribute is set
only after every flag is.  zarr 3 does not store chunks equal to the fill value
(``write_empty_chunks=False``), so "the chunk exists" would prove nothing: the flags
are the record of what was written.

A rerun on an incomplete store checks that it belongs to the same model and input (by
fingerprint and chunking) and computes only the chunks whose flag is not set.

The data store is pinned while it is read: each chunk task checks, after its reads and
before it writes, that the store at the path is still the one checked at the start
(the same folder and recorded fingerprint, :func:`~saspa_dask.storage.data_store.
store_identity`).  A store replaced meanwhile (another job's ``ingest --overwrite``)
stops the run before anything of it is written, so no store is marked complete with
scores of two contents.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import dask
import numpy as np
from dask import delayed

from ..files.groups import zarr_group
from ..engines.chunks import chunk_bounds, spread_rows
from ..fitting.held_out import (area_under_roc, class_metrics, metric_sums,
                                metrics_from_sums)
from ..fitting.posterior import check_interval_level, label_text
from .data_store import (check_identity, input_arrays, row_identity, store_identity,
                         unreadable_chunk)
from ..files.errors import StoreError
from ..files.outputs import SCORES, check_output, describe_path, discard
from ..files.seals import seal
from .fingerprint import check_recorded, chunk_digest, combine_digests

__all__ = ["score", "evaluate", "check_scoring_input"]

SCORES_FORMAT = "saspa-scores"
SCORES_VERSION = 2  # 2: a complete store's attributes sealed (files.seals)
REPLACED = "replaced"  # what a chunk task returns when the data store was replaced


def _chunk_check(Xb, yb=None):
    finite = np.isfinite(Xb).all(axis=1)
    return int((~finite).sum()), chunk_digest(Xb, np.zeros(0) if yb is None else yb)


def check_scoring_input(fitted, X, y=None, chunk_rows=None):
    """Feature count, dtype and NaN rows of X, in one pass; returns the fingerprint of
    X (and y, when given: then it is the data store's content fingerprint).

    ``fitted`` is a :class:`~saspa_dask.fitting.posterior.FittedPosterior`.

    Raises
    ------
    ValueError
        Wrong feature count, non-numeric dtype, or rows with NaN / inf (counted).
    """
    if X.shape[1] != fitted.n_features:
        raise ValueError(f"input has {X.shape[1]} features, the model expects "
                         f"{fitted.n_features}")
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError(f"input X has dtype {X.dtype}, not a number type")
    blocks = X.to_delayed().ravel()
    targets = [None] * len(blocks) if y is None else y.to_delayed().ravel()
    results = dask.compute(*[delayed(_chunk_check)(b, t) for b, t in zip(blocks, targets)])
    bad = sum(r[0] for r in results)
    if bad:
        raise ValueError(f"input X has {bad} rows with NaN or infinity; nothing was written")
    return combine_digests([r[1] for r in results], X.shape[0], X.shape[1],
                           chunk_rows or X.chunks[0][0])


def verify_fingerprint(path, fitted, X, y, match):
    """The content fingerprint recorded at ingest, checked against the data as read (in
    the same pass as the input checks): a chunk replaced, truncated or rewritten since
    is refused.  Returns the fingerprint of what was read (it names the input of a
    score store)."""
    attrs = zarr_group(path, "r").attrs
    recorded = attrs.get("fingerprint")
    try:
        if recorded is None or y is None or match.reordered:
            # nothing recorded, or not comparable (no y; columns reordered): check only
            return check_scoring_input(fitted, X)
        # the fingerprint is over the store's chunk size (the first chunk may be shorter)
        computed = check_scoring_input(fitted, X, y, chunk_rows=attrs.get("chunk_rows"))
    except ValueError as err:
        raise (unreadable_chunk(path, err) or err) from None
    check_recorded(path, recorded, computed)
    return computed


def _outputs(fitted):
    names = ["mean", "variance"]
    if fitted.is_classifier:
        return names + ["proba", "label"]
    if fitted.likelihood_object.point_output:  # a count model's expected count ("rate")
        names.append(fitted.likelihood_object.point_output)
    elif fitted.log_target:
        names.append("value")  # y itself, where mean and variance are of log y
    names.append("std")  # of a new observation: the latent variance plus the noise's
    if fitted.has_intervals:  # exact for gaussian noise: y* (or log y*) is Gaussian
        names += ["lower", "upper"]
    return names


def _score_chunk(Xb, path, data, index, start, stop, fitted, names, owner, pin,
                 interval_level=0.95):
    """Score one chunk, write its rows and their row numbers and ids, then its done
    flag (in that order); nothing when the store is no longer this run's (-1) or the
    data store was replaced since the run checked it (-2)."""
    values = fitted.outputs(Xb, names, interval_level)
    numbers, ids = row_identity(zarr_group(data, "r"))
    numbers = numbers(start, stop)
    ids = None if ids is None else np.asarray(ids[start:stop])
    if store_identity(data) != pin:  # after every read of the data store
        return -2
    group = zarr_group(path, "r+")
    if group.attrs.get("owner") != owner:
        return -1
    for name in names:
        group[name][start:stop] = values[name]
    group["row"][start:stop] = numbers
    if ids is not None:
        group["id"][start:stop] = ids
    group["done"][index] = 1
    return stop - start


def _read_done(group):
    """Done flags; a flag whose file was cut short by a kill counts as not done."""
    flags = group["done"]
    try:
        return flags[...].astype(bool)
    except Exception:
        out = np.zeros(flags.shape[0], dtype=bool)
        for i in range(flags.shape[0]):
            try:
                out[i] = bool(flags[i])
            except Exception:
                out[i] = False
        return out


def _open_existing(path, expected, overwrite, private=False):
    """An incomplete score store of the same model and input, or None to start anew.
    A ``private`` store (a job's own, hidden beside its output) is reused when it is of
    the same model and input, complete or not, and otherwise started anew."""
    path = Path(path)
    if not os.path.lexists(path):
        return None
    if private:
        try:
            group = zarr_group(path, "r+")
            same = all(group.attrs.get(k) == v for k, v in expected.items())
        except Exception:  # unreadable: start anew
            return None
        return group if same else None
    # only a score store of this tool's is resumed or replaced (never a folder of the
    # user's files, a device, ...): refused here with what it holds
    check_output(path, SCORES, overwrite=True)
    if overwrite:
        discard(path, SCORES)
        return None
    if describe_path(path) == "an empty folder":
        return None
    if path.is_symlink() and describe_path(path.resolve()) != "a score store":
        raise StoreError(f"{path} exists (a symbolic link to {describe_path(path.resolve())}"
                         "); pass --overwrite to replace the link (its target is left "
                         "alone)")
    try:
        group = zarr_group(path, "r+")
        attrs = dict(group.attrs)
    except Exception as err:
        raise StoreError(f"{path}: a score store that cannot be read ({err}); use "
                         "--overwrite to score again") from None
    if attrs.get("complete"):
        raise StoreError(f"{path}: scores are complete; use --overwrite to score again")
    for key, value in expected.items():
        if attrs.get(key) != value:
            raise StoreError(f"{path}: an incomplete score store for a different {key} "
                             f"({attrs.get(key)!r}, now {value!r}); use --overwrite")
    return group


def _create(path, fitted, X, attrs, with_ids):
    group = zarr_group(path, "w")
    rows = X.chunks[0][0]
    group.create_array("row", shape=(X.shape[0],), chunks=(rows,), dtype="i8", fill_value=-1)
    if with_ids:
        group.create_array("id", shape=(X.shape[0],), chunks=(rows,), dtype=str)
    K = fitted.n_problems
    shape, chunks = ((X.shape[0],), (rows,)) if K == 1 else ((X.shape[0], K), (rows, K))
    for name in _outputs(fitted):
        one = name == "label" or K == 1
        group.create_array(name, shape=(X.shape[0],) if one else shape,
                           chunks=(rows,) if one else chunks, dtype="f8", fill_value=np.nan)
    # one zarr chunk per flag: tasks never write into the same chunk file
    group.create_array("done", shape=(len(X.chunks[0]),), chunks=(1,), dtype="u1",
                       fill_value=0)
    group.attrs.update({**attrs, "complete": False})
    return group


def _model_columns(fitted, columns):
    if columns is not None:
        return list(columns)
    return None if fitted.feature_names is None else list(fitted.feature_names)


def class_metadata(fitted, class_labels=None):
    """What a classifier's score store records about its classes: ``class_labels``
    (the original label of each of the model's classes: the training store's text
    labels, or the classes themselves) and ``proba_columns`` (the class each column of
    ``proba`` is the probability of)."""
    if not fitted.is_classifier:
        return {}
    labels = ([label_text(c) for c in fitted.classes] if class_labels is None
              else [str(class_labels[int(c)]) for c in fitted.classes])
    columns = labels[1:] if len(labels) == 2 and fitted.n_problems == 1 else labels
    return {"classes": [c.item() if hasattr(c, "item") else c for c in fitted.classes],
            "class_labels": labels, "proba_columns": columns,
            # what the label array holds: the class itself (numbers, as in the data
            # store's y) or its index into classes (classes that are not numbers)
            "label_values": ("classes" if np.issubdtype(fitted.classes.dtype, np.number)
                             else "indices")}


def _opened(data, fitted, columns, inputs):
    return inputs if inputs is not None else input_arrays(data, _model_columns(fitted,
                                                                                columns))


def score(model, data, out, *, overwrite=False, progress=None, columns=None,
          class_labels=None, n_workers=1, inputs=None, private=False, interval_level=0.95):
    """Score a data store's X into a zarr score store, resumably.

    Parameters
    ----------
    model : fitted estimator or FittedPosterior
    data : str or Path
        Data store with an array ``X`` (``y`` is not needed).
    out : str or Path
        Score store; an incomplete one for the same model and input is resumed.
    overwrite : bool
        Replace an existing (complete or foreign) store.
    progress : callable, optional
        Called with the number of chunks written so far after each wave.
    columns : list of str, optional
        The model's column names (default: the posterior's ``feature_names``); the
        store's columns are matched to them by name
        (:func:`~saspa_dask.storage.columns.match_columns`).
    class_labels : list, optional
        The original labels of the training store's class codes, recorded in the score
        store (:func:`class_metadata`).
    n_workers : int
        A store of one chunk is scored in this many row chunks (one task each).
    inputs : tuple, optional
        ``(X, y, match)`` as :func:`~saspa_dask.storage.data_store.input_arrays` gave
        them for ``data`` and these columns (a caller that checked them already).
    private : bool
        ``out`` is the caller's own hidden store (``score --format csv``): reused when
        it is of this model and input, started anew when not.
    interval_level : float in (0, 1)
        The probability of a gaussian regressor's ``lower`` / ``upper`` interval of a
        new observation (recorded in the store; a rerun at another level does not
        resume the store).

    Returns
    -------
    dict
        ``chunks_total``, ``chunks_written`` (this run), ``rows``, ``columns`` (how
        the columns were matched).
    """
    fitted = getattr(model, "fitted_posterior_", model)
    check_interval_level(interval_level)
    X, y, match = _opened(data, fitted, columns, inputs)
    pin = store_identity(data)
    input_fingerprint = verify_fingerprint(data, fitted, X, y, match)  # the one check pass
    check_identity(data, pin)
    (X,) = spread_rows(n_workers, X)
    expected = _identity(fitted, X, input_fingerprint, interval_level)
    group = _open_existing(out, expected, overwrite, private)
    if group is None:
        group = _new_store(out, fitted, X, data, expected, class_labels)
    # the writer lock (jobs layer) keeps other jobs on this machine out; the owner token
    # makes a job elsewhere that took the store over visible to this one
    owner = uuid.uuid4().hex
    group.attrs["owner"] = owner
    done = _read_done(group)
    shared = delayed(fitted, pure=True)  # shipped once: no per-row state in it
    blocks = X.to_delayed().ravel()
    todo = [i for i in range(len(blocks)) if not done[i]]
    bounds = chunk_bounds(X)
    tasks = [delayed(_score_chunk)(blocks[i], str(out), str(data), i, *bounds[i], shared,
                                   _outputs(fitted), owner, pin, float(interval_level))
             for i in todo]
    results = dask.compute(*tasks)
    if -2 in results:
        check_identity(data, pin)  # raises, naming the store
    if -1 in results or _owner(out) != owner:
        raise StoreError(f"{out}: another job took this score store over while this one "
                         "ran; this run does not mark it complete")
    written = _read_done(group)
    if not written.all():
        raise RuntimeError(f"{out}: {int((written == 0).sum())} chunks were not written")
    seal(group, {"complete": True})  # the labels and outputs exports read, sealed
    return {"chunks_total": len(blocks), "chunks_written": len(todo), "rows": int(X.shape[0]),
            "columns": match.describe()}


def _new_store(out, fitted, X, data, expected, class_labels):
    """A new score store for ``data``'s rows, with ids when the data has them (and
    their column's name in the source file, for the exports' header)."""
    source = zarr_group(data, "r")
    has_ids = row_identity(source)[1] is not None
    named = {"id_column": (source.attrs.get("preprocessing") or {}).get("id_column")}
    return _create(out, fitted, X, {**expected, "input": str(Path(data).resolve()),
                                    **class_metadata(fitted, class_labels),
                                    **(named if has_ids else {})}, has_ids)


def _identity(fitted, X, input_fingerprint, interval_level):
    """What a score store records of its run, and a resumed run must match: the
    model, the input and its chunking, the outputs and (with intervals) their level."""
    expected = {"format": SCORES_FORMAT, "format_version": SCORES_VERSION,
                "model_fingerprint": fitted.fingerprint(),
                "input_fingerprint": input_fingerprint, "chunk_rows": int(X.chunks[0][0]),
                "n_rows": int(X.shape[0]), "outputs": _outputs(fitted)}
    if fitted.has_intervals:
        expected["interval_level"] = float(interval_level)
    return expected


def _owner(path):
    try:
        return zarr_group(path, "r").attrs.get("owner")
    except Exception:  # replaced or removed meanwhile
        return None


def _target_problem(yb, fitted):
    """What makes a chunk's targets unusable for evaluation, or None: targets that are
    not finite, labels that are not the model's classes (never counted as some class,
    never a NaN metric).  Reported by the task, raised on the client: an exception in
    a task would also be logged, traceback and all, by the worker."""
    if np.issubdtype(yb.dtype, np.number) and not np.all(np.isfinite(yb)):
        return (f"y holds {int((~np.isfinite(yb)).sum())} NaN or infinite targets; "
                "nothing to evaluate them against")
    if fitted.is_classifier:
        try:
            fitted.class_codes(yb)
        except ValueError as err:
            return str(err)
    return None


def _evaluate_chunk(Xb, yb, fitted, data, pin):
    """(rows, errors or squared residuals, sum of -log p, sum of |residual|) and, for a
    classifier, the rows' class probabilities and class codes (for the AUC); or the
    problem with the chunk's targets (:func:`_target_problem`), or with the data store
    (replaced since it was checked)."""
    if store_identity(data) != pin:
        return REPLACED
    yb = np.asarray(yb)
    problem = _target_problem(yb, fitted)
    if problem is not None:
        return problem
    return metric_sums(fitted, Xb, yb)


def evaluate(model, data, *, columns=None, n_workers=1, inputs=None):
    """Test metrics of a model on a data store with X and y, computed chunk by chunk.

    Returns
    -------
    dict
        Classification: ``error`` (rate), ``nlp`` (mean negative log probability of
        the true label), ``auc`` (:func:`area_under_roc`; None when the rows hold one
        class), ``brier`` and ``base_error`` (the error of always predicting the
        commonest class: :func:`~saspa_dask.fitting.held_out.class_metrics`).  Regression: ``rmse``, ``mae``, ``nlpd`` (mean negative log
        predictive density of y, noise included), ``base_rmse`` (of always predicting
        these rows' mean), ``r2`` and, for the gaussian likelihood, ``coverage_95``
        (the share of rows inside their central 95% predictive interval).  Always
        ``rows`` and ``columns``
        (how the store's columns were matched to the model's, by name when both
        record them; ``columns=`` and ``inputs=`` as for :func:`score`).
    """
    fitted = getattr(model, "fitted_posterior_", model)
    X, y, match = _opened(data, fitted, columns, inputs)
    if y is None:
        raise StoreError(f"{data}: evaluation needs an array 'y' with one value per row")
    pin = store_identity(data)
    verify_fingerprint(data, fitted, X, y, match)
    check_identity(data, pin)
    X, y = spread_rows(n_workers, X, y)
    check_scoring_input(fitted, X)
    shared = delayed(fitted, pure=True)
    parts = [delayed(_evaluate_chunk)(xb, yb, shared, str(data), pin)
             for xb, yb in zip(X.to_delayed().ravel(), y.to_delayed().ravel())]
    results = dask.compute(*parts)
    if any(isinstance(r, str) and r == REPLACED for r in results):
        check_identity(data, pin)
    problems = sorted({r for r in results if isinstance(r, str)})
    if problems:
        raise StoreError(f"{data}: " + "; ".join(problems[:3]))
    metrics = metrics_from_sums(np.sum([r[0] for r in results], axis=0),
                                fitted.is_classifier, context=True)
    if fitted.is_classifier:
        proba = np.concatenate([r[1] for r in results])
        codes = np.concatenate([r[2] for r in results])
        metrics["auc"] = area_under_roc(proba, codes)
        metrics.update(class_metrics(proba, codes))
    return {**metrics, "columns": match.describe()}
