"""zarr (v3) stores: training data, models.  Nothing here pickles.

Data store: a group with ``X`` (N x d float64, row chunks), ``y`` (N), attributes
``format = "saspa-data"``, ``format_version``, ``columns``, ``target``, ``preprocessing``,
``fingerprint`` and ``complete``.  Any group with compatible ``X`` and ``y`` arrays can
be used for training too (its fingerprint is then computed on the cluster).

Model store: a group with small arrays (bases, factors, posterior, sites) and JSON
attributes (format version, task, kernel, likelihood, blur, EP settings, per-sweep
history, data fingerprint, library versions), written aside and renamed into place, so
an interrupted save never leaves a half-written model at the destination.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np
import zarr

__all__ = [
    "StoreError",
    "ingest",
    "open_data_store",
    "save_model",
    "load_model",
]

DATA_FORMAT = "saspa-data"
MODEL_FORMAT = "saspa-model"
FORMAT_VERSION = 2
# versions this code reads (1 had no multi-class and no hyperparameter trace)
_READABLE_VERSIONS = (1, 2)
MISSING_TOKENS = frozenset({"", "na", "nan", "null", "none", "?"})
_MAX_CATEGORIES = 1000


class StoreError(ValueError):
    """A store is missing, incomplete, corrupt, foreign or incompatible."""


# ----------------------------------------------------------------------------------
# Writing aside and moving into place
# ----------------------------------------------------------------------------------


def _aside(path):
    path = Path(path)
    return path.with_name(f".{path.name}.partial-{uuid.uuid4().hex[:8]}")


def _move_into_place(tmp, path, overwrite):
    """Rename a finished store into place; an existing one is replaced only if asked."""
    path = Path(path)
    if path.exists():
        if not overwrite:
            shutil.rmtree(tmp, ignore_errors=True)
            raise StoreError(f"{path} exists; pass overwrite to replace it")
        old = _aside(path)
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)


def _check_destination(path, overwrite):
    if Path(path).exists() and not overwrite:
        raise StoreError(f"{path} exists; pass overwrite to replace it")


# ----------------------------------------------------------------------------------
# Ingest
# ----------------------------------------------------------------------------------


def _is_missing(token):
    return token.strip().lower() in MISSING_TOKENS


def _as_float(token):
    try:
        return float(token)
    except ValueError:
        return None


class _ColumnSurvey:
    """First pass over a CSV: counts, missing values and text values per column."""

    def __init__(self, header):
        self.header = header
        self.n_rows = 0
        self.missing = [0] * len(header)
        self.categories = [dict() for _ in header]
        self.numeric_seen = [0] * len(header)

    def add(self, row):
        self.n_rows += 1
        for j, token in enumerate(row):
            if _is_missing(token):
                self.missing[j] += 1
            elif _as_float(token) is not None:
                self.numeric_seen[j] += 1
            else:
                cats = self.categories[j]
                if len(cats) <= _MAX_CATEGORIES:
                    cats.setdefault(token.strip(), len(cats))

    def text_columns(self):
        return [j for j, cats in enumerate(self.categories) if cats]


def _read_rows(path):
    """Yield (line number, fields) of a CSV after its header; checks field counts."""
    with open(path, newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if not header:
            raise StoreError(f"{path}: empty file (no header row)")
        yield 1, header
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise StoreError(
                    f"{path}: line {reader.line_num} has {len(row)} fields, "
                    f"the header has {len(header)}"
                )
            yield reader.line_num, row


def _survey_csv(path):
    rows = _read_rows(path)
    _, header = next(rows)
    survey = _ColumnSurvey(header)
    for _, row in rows:
        survey.add(row)
    if survey.n_rows == 0:
        raise StoreError(f"{path}: no data rows after the header")
    return survey


def _plan_columns(survey, target_index, missing, text, path):
    """Decide what happens to each column, or raise naming the offending ones."""
    header = survey.header
    plan = []  # (column index, kind, categories)
    problems = []
    for j, name in enumerate(header):
        if j == target_index:
            continue
        cats = survey.categories[j]
        if cats:
            if len(cats) > _MAX_CATEGORIES:
                problems.append(f"column {name!r} is text with over {_MAX_CATEGORIES} "
                                "distinct values; it cannot be one-hot encoded")
                continue
            if text == "error":
                example = next(iter(cats))
                problems.append(
                    f"column {name!r} is text ({len(cats)} distinct values, e.g. "
                    f"{example!r}); use text='onehot' (--text onehot) or text='drop'"
                )
                continue
            if text == "drop":
                continue
            plan.append((j, "onehot", sorted(cats)))
        else:
            plan.append((j, "numeric", None))
        if survey.missing[j] and missing == "error":
            problems.append(
                f"column {name!r} has {survey.missing[j]} missing values in "
                f"{survey.n_rows} rows; use missing='drop-rows' (--missing drop-rows)"
            )
    if survey.missing[target_index] and missing == "error":
        problems.append(f"target column {header[target_index]!r} has "
                        f"{survey.missing[target_index]} missing values")
    if problems:
        raise StoreError(f"{path}: " + "; ".join(problems))
    if not plan:
        raise StoreError(f"{path}: no input columns left after the text policy")
    return plan


def _feature_names(header, plan):
    names = []
    for j, kind, cats in plan:
        if kind == "numeric":
            names.append(header[j])
        else:
            names.extend(f"{header[j]}={c}" for c in cats)
    return names


def _encode_row(row, plan, target_index, target_classes):
    """One CSV row -> (features, target) or None if it has a missing value."""
    out = []
    for j, kind, cats in plan:
        token = row[j]
        if _is_missing(token):
            return None
        if kind == "numeric":
            out.append(float(token))
        else:
            hot = [0.0] * len(cats)
            hot[cats.index(token.strip())] = 1.0
            out.extend(hot)
    token = row[target_index]
    if _is_missing(token):
        return None
    value = _as_float(token) if target_classes is None else target_classes.index(token.strip())
    return out, float(value)


class _ChunkWriter:
    """Appends rows to X and y, writing only whole chunks (writes stay chunk-aligned)."""

    def __init__(self, group, n_features, chunk_rows):
        self.X = group.create_array("X", shape=(0, n_features), chunks=(chunk_rows, n_features),
                                    dtype="f8", fill_value=np.nan)
        self.y = group.create_array("y", shape=(0,), chunks=(chunk_rows,), dtype="f8",
                                    fill_value=np.nan)
        self.chunk_rows = chunk_rows
        self.rows, self.targets = [], []  # single rows (CSV)
        self.pending_X = np.empty((0, n_features))
        self.pending_y = np.empty(0)
        self.n = 0
        self.hasher = _Fingerprint(n_features, chunk_rows)

    def add(self, features, target):
        self.rows.append(features)
        self.targets.append(target)
        if len(self.rows) == self.chunk_rows:
            self._flush_rows()

    def _flush_rows(self):
        rows, targets = self.rows, self.targets
        self.rows, self.targets = [], []
        self.add_block(np.array(rows, dtype=np.float64), np.array(targets, dtype=np.float64))

    def add_block(self, X, y):
        X = np.concatenate([self.pending_X, X])
        y = np.concatenate([self.pending_y, y])
        full = (len(y) // self.chunk_rows) * self.chunk_rows
        for start in range(0, full, self.chunk_rows):
            self._write(X[start:start + self.chunk_rows], y[start:start + self.chunk_rows])
        self.pending_X, self.pending_y = X[full:], y[full:]

    def flush(self):
        """Write what is left (the last, partial chunk)."""
        if self.rows:
            self._flush_rows()
        if len(self.pending_y):
            self._write(self.pending_X, self.pending_y)
            self.pending_X, self.pending_y = self.pending_X[:0], self.pending_y[:0]

    def _write(self, X, y):
        start, stop = self.n, self.n + len(y)
        self.X.resize((stop, self.X.shape[1]))
        self.y.resize((stop,))
        self.X[start:stop] = X
        self.y[start:stop] = y
        self.hasher.add(X, y)
        self.n = stop


class _Fingerprint:
    """sha256 over (shape, chunking, then each chunk's X and y bytes in order)."""

    def __init__(self, n_features, chunk_rows):
        self.chunk_hashes = []
        self.n_features = n_features
        self.chunk_rows = chunk_rows

    def add(self, X, y):
        self.chunk_hashes.append(chunk_digest(X, y))

    def hexdigest(self, n_rows):
        return combine_digests(self.chunk_hashes, n_rows, self.n_features, self.chunk_rows)


def chunk_digest(X, y):
    """Digest of one row chunk (what the fingerprint is made of)."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(X, dtype="<f8").tobytes())
    h.update(np.ascontiguousarray(y, dtype="<f8").tobytes())
    return h.hexdigest()


def combine_digests(digests, n_rows, n_features, chunk_rows):
    h = hashlib.sha256(f"{n_rows}x{n_features}/{chunk_rows}".encode())
    for d in digests:
        h.update(d.encode())
    return h.hexdigest()


def ingest(source, out, *, target=None, chunk_rows=65536, missing="error", text="error",
           overwrite=False):
    """Stream a CSV or ``.npy`` file into a zarr data store.

    Parameters
    ----------
    source : str or Path
        ``.csv`` with a header row, or ``.npy`` holding a 2-D numeric array.
    out : str or Path
        Destination directory (a zarr v3 group).
    target : str or int, optional
        Target column: a CSV column name, or a column index (``.npy`` and CSV).
        Default: the last column.
    chunk_rows : int
        Rows per zarr chunk.
    missing : {"error", "drop-rows"}
        Missing values (empty, NA, NaN, null, None, ?) raise an error naming the
        columns and counts, or the rows holding them are dropped (and counted).
    text : {"error", "onehot", "drop"}
        Non-numeric input columns raise an error naming them, are one-hot encoded
        (one 0/1 column per value, recorded in the attributes) or are dropped.
        A text *target* is always encoded as 0, 1, ... with its labels recorded.
    overwrite : bool
        Replace an existing store at ``out``.

    Returns
    -------
    dict
        The store's attributes.
    """
    source = Path(source)
    if not source.is_file():
        raise StoreError(f"{source}: no such file")
    if missing not in ("error", "drop-rows"):
        raise ValueError(f"missing must be 'error' or 'drop-rows', got {missing!r}")
    if text not in ("error", "onehot", "drop"):
        raise ValueError(f"text must be 'error', 'onehot' or 'drop', got {text!r}")
    if int(chunk_rows) < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows!r}")
    _check_destination(out, overwrite)
    tmp = _aside(out)
    try:
        group = zarr.open_group(str(tmp), mode="w")
        if source.suffix.lower() == ".npy":
            attrs = _ingest_npy(source, group, target, int(chunk_rows), missing)
        else:
            attrs = _ingest_csv(source, group, target, int(chunk_rows), missing, text)
        attrs.update(format=DATA_FORMAT, format_version=FORMAT_VERSION,
                     source=str(source), chunk_rows=int(chunk_rows), complete=True)
        group.attrs.update(attrs)
        _move_into_place(tmp, out, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return attrs


def _target_index(header, target, path):
    if target is None:
        return len(header) - 1
    if isinstance(target, int) or (isinstance(target, str) and target.lstrip("-").isdigit()):
        index = int(target)
        if not -len(header) <= index < len(header):
            raise StoreError(f"{path}: target column {index} out of range ({len(header)} columns)")
        return index % len(header)
    if target not in header:
        raise StoreError(f"{path}: no column {target!r} (columns: {', '.join(header)})")
    return header.index(target)


def _ingest_csv(path, group, target, chunk_rows, missing, text):
    survey = _survey_csv(path)
    header = survey.header
    t = _target_index(header, target, path)
    plan = _plan_columns(survey, t, missing, text, path)
    target_classes = sorted(survey.categories[t]) if survey.categories[t] else None
    names = _feature_names(header, plan)
    writer = _ChunkWriter(group, len(names), chunk_rows)
    dropped = 0
    rows = _read_rows(path)
    next(rows)
    for _, row in rows:
        encoded = _encode_row(row, plan, t, target_classes)
        if encoded is None:
            dropped += 1
            continue
        writer.add(*encoded)
    writer.flush()
    if writer.n == 0:
        raise StoreError(f"{path}: every row has a missing value")
    preprocessing = {
        "missing": missing,
        "rows_dropped_for_missing": dropped,
        "text": text,
        "onehot": {header[j]: cats for j, kind, cats in plan if kind == "onehot"},
        "dropped_text_columns": [header[j] for j in survey.text_columns()
                                 if j != t and all(j != p[0] for p in plan)],
    }
    return {"columns": names, "target": header[t], "target_classes": target_classes,
            "n_rows": writer.n, "preprocessing": preprocessing,
            "fingerprint": writer.hasher.hexdigest(writer.n)}


def _ingest_npy(path, group, target, chunk_rows, missing):
    try:
        data = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as err:
        raise StoreError(f"{path}: not a numeric .npy array ({err})") from None
    if data.ndim != 2 or data.shape[1] < 2:
        raise StoreError(f"{path}: need a 2-D array with at least 2 columns, got {data.shape}")
    if data.shape[0] == 0:
        raise StoreError(f"{path}: no rows")
    if not np.issubdtype(data.dtype, np.number):
        raise StoreError(f"{path}: dtype {data.dtype} is not numeric")
    header = [f"x{j}" for j in range(data.shape[1])]
    t = _target_index(header, target, path)
    keep = [j for j in range(data.shape[1]) if j != t]
    n_missing = 0
    for start in range(0, data.shape[0], chunk_rows):  # first pass: missing values
        n_missing += int((~np.isfinite(np.asarray(data[start:start + chunk_rows], float))
                          ).any(axis=1).sum())
    if n_missing and missing == "error":
        raise StoreError(f"{path}: {n_missing} rows hold NaN or inf; "
                         "use missing='drop-rows' (--missing drop-rows)")
    writer = _ChunkWriter(group, len(keep), chunk_rows)
    for start in range(0, data.shape[0], chunk_rows):
        block = np.asarray(data[start:start + chunk_rows], dtype=np.float64)
        block = block[np.isfinite(block).all(axis=1)]
        writer.add_block(block[:, keep], block[:, t])
    writer.flush()
    if writer.n == 0:
        raise StoreError(f"{path}: every row holds NaN or inf")
    return {"columns": [header[j] for j in keep], "target": header[t], "target_classes": None,
            "n_rows": writer.n,
            "preprocessing": {"missing": missing, "rows_dropped_for_missing": n_missing},
            "fingerprint": writer.hasher.hexdigest(writer.n)}


# ----------------------------------------------------------------------------------
# Opening a data store
# ----------------------------------------------------------------------------------


def open_group(path, what, mode="r"):
    """Open a zarr group, or raise a StoreError naming ``what`` is missing or wrong."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: no such {what}")
    try:
        return zarr.open_group(str(path), mode=mode)
    except Exception as err:  # zarr raises several types for non-groups
        raise StoreError(f"{path}: not a zarr group ({type(err).__name__}: {err})") from None


def check_data_complete(path, attrs):
    """An ingest that did not finish left ``complete`` false."""
    if attrs.get("format") == DATA_FORMAT and not attrs.get("complete", False):
        raise StoreError(f"{path}: data store is incomplete (an ingest did not finish)")


def open_data_store(path):
    """Open a data store lazily: ``(X, y, attrs)`` with X, y as dask arrays.

    Raises
    ------
    StoreError
        Missing path, not a zarr group, no ``X`` / ``y``, an ingest that did not
        finish, or shapes and chunks that do not fit together.
    """
    import dask.array as da

    group = open_group(path, "data store")
    attrs = dict(group.attrs)
    check_data_complete(path, attrs)
    keys = set(group.array_keys())
    if not {"X", "y"} <= keys:
        raise StoreError(f"{path}: a data store needs arrays 'X' and 'y'; found {sorted(keys)}")
    Xz, yz = group["X"], group["y"]
    if Xz.ndim != 2 or yz.ndim != 1 or Xz.shape[0] != yz.shape[0]:
        raise StoreError(f"{path}: X must be (N, d) and y (N,); got {Xz.shape} and {yz.shape}")
    if Xz.shape[0] == 0:
        raise StoreError(f"{path}: no rows")
    X = da.from_zarr(str(path), component="X")
    y = da.from_zarr(str(path), component="y")
    rows = Xz.chunks[0]
    X = X.rechunk({0: rows, 1: -1})
    y = y.rechunk({0: rows})
    return X.astype(np.float64), y, attrs


# ----------------------------------------------------------------------------------
# Model store
# ----------------------------------------------------------------------------------

_MODEL_ARRAYS = ("bases_means", "bases_covs", "lengthscale", "whitening", "posterior_chol",
                 "posterior_h", "posterior_mean", "alpha", "beta", "sites_tau", "sites_nu")


def _versions():
    import dask
    import scipy
    import sklearn

    from . import __version__

    return {"saspa_dask": __version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "dask": dask.__version__, "zarr": zarr.__version__, "scikit-learn": sklearn.__version__}


def _jsonable(value):
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None  # JSON has no NaN / inf
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _stacked(model, name):
    """A posterior field, with a leading class axis for one-vs-rest models."""
    values = [getattr(p, name) for p in model.posteriors_]
    return values[0] if len(values) == 1 else np.stack(values)


def save_model(model, path, *, overwrite=False, extra_attrs=None):
    """Write a fitted estimator to a zarr model store (no pickle).

    The store is written aside and renamed into place; an existing store is replaced
    only with ``overwrite=True``.
    """
    from sklearn.utils.validation import check_is_fitted

    check_is_fitted(model)
    _check_destination(path, overwrite)
    params = {k: v for k, v in model.get_params().items() if k != "bases"}
    classes = getattr(model, "classes_", None)
    attrs = {
        "format": MODEL_FORMAT,
        "format_version": FORMAT_VERSION,
        "estimator": type(model).__name__,
        "task": "classification" if classes is not None else "regression",
        "params": _jsonable(params),
        "n_features_in": int(model.n_features_in_),
        "n_bases": int(model.bases_.n_bases),
        "kernel": {"type": "squared_exponential_ard",
                   "lengthscale": _jsonable(model.lengthscale_),
                   "signal_variance": model.signal_variance_, "jitter": model.jitter_},
        "likelihood": _jsonable(model._fitted_likelihood().params()
                                | {"name": model._fitted_likelihood().name}),
        "blur": model.blur,
        "ep": {"mode": model.ep_mode, "damping": model.damping_, "max_sweeps": model.max_sweeps,
               "tol": model.tol, "n_sweeps": model.n_sweeps_, "converged": bool(model.converged_),
               "n_invalid_cavities": model.n_invalid_cavities_,
               "n_skipped_updates": model.n_skipped_updates_,
               "n_damping_halvings": model.n_damping_halvings_,
               "n_damping_reductions": model.n_damping_reductions_,
               "n_anderson_steps": getattr(model, "n_anderson_steps_", 0),
               "n_anderson_restarts": getattr(model, "n_anderson_restarts_", 0),
               "coarse_start": _jsonable(getattr(model, "coarse_start_", []))},
        "log_evidence": _jsonable(model.log_evidence_),
        "history": _jsonable(model.history_),
        "n_problems": len(model.posteriors_),
        "hyperparameters": _jsonable({
            "optimized": bool(getattr(model, "hyperparameter_trace_", [])),
            "blur_scale": getattr(model, "blur_scale_", 1.0),
            "trace": getattr(model, "hyperparameter_trace_", []),
            "info": getattr(model, "hyperparameter_info_", {})}),
        "classes": None if classes is None else _jsonable(classes),
        "classes_dtype": None if classes is None else classes.dtype.str,
        "y_mean": getattr(model, "y_mean_", None),
        "data_fingerprint": getattr(model, "data_fingerprint_", None),
        "versions": _versions(),
        "complete": False,
    }
    if extra_attrs:
        attrs.update(_jsonable(extra_attrs))
    arrays = {
        "bases_means": model.bases_.means, "bases_covs": model.bases_.covs,
        "lengthscale": model.lengthscale_, "whitening": model.whitening_,
        "posterior_chol": _stacked(model, "chol"), "posterior_h": _stacked(model, "h"),
        "posterior_mean": _stacked(model, "mean"), "alpha": model.alpha_, "beta": model.beta_,
        "sites_tau": model.sites_tau_, "sites_nu": model.sites_nu_,
    }
    tmp = _aside(path)
    try:
        group = zarr.open_group(str(tmp), mode="w")
        for name, value in arrays.items():
            value = np.asarray(value, dtype=np.float64)
            chunks = value.shape if value.ndim != 1 or value.size <= 1 << 20 else (1 << 20,)
            arr = group.create_array(name, shape=value.shape, chunks=chunks or (1,),
                                     dtype="f8", fill_value=np.nan)
            arr[...] = value
        attrs["complete"] = True
        group.attrs.update(attrs)
        _move_into_place(tmp, path, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Path(path)


def write_latest(pointer, model_path):
    """Point the ``latest`` file at a model store, atomically (write aside, rename).

    The pointer holds the model's path relative to the pointer's folder when the
    model lies inside it, so a folder of models can be moved as a whole.
    """
    pointer, model_path = Path(pointer), Path(model_path).resolve()
    try:
        target = model_path.relative_to(pointer.resolve().parent)
    except ValueError:
        target = model_path
    tmp = pointer.with_name(f".{pointer.name}.{uuid.uuid4().hex[:8]}")
    tmp.write_text(f"{target}\n")
    os.replace(tmp, pointer)


def resolve_model_path(path):
    """A model store path, following a ``latest`` pointer file if given one."""
    path = Path(path)
    if path.is_file():
        target = Path(path.read_text().strip())
        return target if target.is_absolute() else path.parent / target
    return path


def read_model_attrs(path):
    """Attributes of a model store, checked for format, version and completeness."""
    path = Path(path)
    group = open_group(path, "model store")
    attrs = dict(group.attrs)
    if attrs.get("format") != MODEL_FORMAT:
        raise StoreError(f"{path}: not a saspa model store (format {attrs.get('format')!r})")
    if attrs.get("format_version") not in _READABLE_VERSIONS:
        raise StoreError(f"{path}: model format version {attrs.get('format_version')!r}; "
                         f"this saspa_dask reads version {FORMAT_VERSION}")
    if not attrs.get("complete"):
        raise StoreError(f"{path}: model store is incomplete (a save did not finish)")
    return group, attrs


def load_model(path):
    """Load a model written by :func:`save_model` (``model.save``).

    Raises
    ------
    StoreError
        Missing, foreign, incomplete, truncated or inconsistent store.
    """
    from .bases import Basis
    from .ep import Posterior
    from .estimators import SASPAClassifier, SASPARegressor
    from .exact import FullGPClassifier, FullGPRegressor

    path = resolve_model_path(path)
    group, attrs = read_model_attrs(path)
    arrays = {}
    for name in _MODEL_ARRAYS:
        try:
            arrays[name] = np.asarray(group[name][...], dtype=np.float64)
        except Exception as err:
            raise StoreError(f"{path}: array {name!r} is missing or unreadable "
                             f"({type(err).__name__}: {err})") from None
    M, d = attrs["n_bases"], attrs["n_features_in"]
    K = int(attrs.get("n_problems", 1))
    lead = () if K == 1 else (K,)
    expected = {"bases_means": (M, d), "bases_covs": (M, d, d), "lengthscale": (d,),
                "whitening": (M, M), "posterior_chol": lead + (M, M),
                "posterior_h": lead + (M,), "posterior_mean": lead + (M,),
                "alpha": lead + (M,), "beta": lead + (M, M)}
    for name, shape in expected.items():
        if arrays[name].shape != shape:
            raise StoreError(f"{path}: array {name!r} has shape {arrays[name].shape}, "
                             f"expected {shape}")
        if not np.all(np.isfinite(arrays[name])):
            raise StoreError(f"{path}: array {name!r} holds NaN or inf (truncated write?)")
    if arrays["sites_tau"].shape != arrays["sites_nu"].shape:
        raise StoreError(f"{path}: site arrays differ in shape")
    if arrays["sites_tau"].shape[:-1] != lead:
        raise StoreError(f"{path}: site arrays have shape {arrays['sites_tau'].shape}, "
                         f"expected {K} problem(s)")
    cls = {"SASPAClassifier": SASPAClassifier, "SASPARegressor": SASPARegressor,
           "FullGPClassifier": FullGPClassifier, "FullGPRegressor": FullGPRegressor}.get(
        attrs.get("estimator"))
    if cls is None:
        raise StoreError(f"{path}: unknown estimator {attrs.get('estimator')!r}")
    params = dict(attrs["params"])
    valid = cls().get_params()
    model = cls(**{k: v for k, v in params.items() if k in valid})
    model.n_features_in_ = d
    model.bases_ = Basis(arrays["bases_means"], arrays["bases_covs"])
    model.lengthscale_ = arrays["lengthscale"]
    kernel = attrs["kernel"]
    model.signal_variance_ = float(kernel["signal_variance"])
    model.jitter_ = float(kernel["jitter"])
    model.whitening_ = arrays["whitening"]
    fields = [arrays["posterior_chol"], arrays["posterior_h"], arrays["posterior_mean"]]
    if K == 1:
        model.posteriors_ = [Posterior(*fields)]
        model.posterior_ = model.posteriors_[0]
    else:
        model.posteriors_ = [Posterior(*(f[k] for f in fields)) for k in range(K)]
    model.alpha_, model.beta_ = arrays["alpha"], arrays["beta"]
    hyper = attrs.get("hyperparameters", {})
    model.blur_scale_ = float(hyper.get("blur_scale", 1.0))
    model.hyperparameter_trace_ = hyper.get("trace", [])
    model.hyperparameter_info_ = hyper.get("info", {})
    model.sites_tau_, model.sites_nu_ = arrays["sites_tau"], arrays["sites_nu"]
    ep = attrs["ep"]
    model.damping_ = float(ep["damping"])
    model.n_sweeps_, model.converged_ = int(ep["n_sweeps"]), bool(ep["converged"])
    model.n_invalid_cavities_ = int(ep["n_invalid_cavities"])
    model.n_skipped_updates_ = int(ep["n_skipped_updates"])
    model.n_damping_halvings_ = int(ep["n_damping_halvings"])
    model.n_damping_reductions_ = int(ep.get("n_damping_reductions", 0))  # format 1
    model.coarse_start_ = list(ep.get("coarse_start", []))  # not in older stores
    model.n_anderson_steps_ = int(ep.get("n_anderson_steps", 0))  # not in older stores
    model.n_anderson_restarts_ = int(ep.get("n_anderson_restarts", 0))
    evidence = attrs["log_evidence"]
    model.log_evidence_ = float("nan") if evidence is None else float(evidence)
    model.history_ = attrs["history"]
    model.data_fingerprint_ = attrs.get("data_fingerprint")
    lik = dict(attrs["likelihood"])
    name = lik.pop("name")
    if name != model.likelihood:
        raise StoreError(f"{path}: likelihood {name!r} differs from the estimator's "
                         f"parameter {model.likelihood!r}")
    model.likelihood_params_ = lik
    if attrs["task"] == "classification":
        model.classes_ = np.array(attrs["classes"], dtype=np.dtype(attrs["classes_dtype"]))
        if name == "step":
            model.label_noise_ = float(lik["label_noise"])
    else:
        model.y_mean_ = float(attrs["y_mean"])
        if name == "gaussian":
            model.noise_variance_ = float(lik["noise_variance"])
        elif name == "student_t":
            model.dof_, model.scale_ = float(lik["dof"]), float(lik["scale"])
    try:
        model._fitted_likelihood()
    except (KeyError, TypeError, ValueError) as err:
        raise StoreError(f"{path}: likelihood parameters {lik} are invalid ({err})") from None
    return model


def describe_model(path):
    """A JSON-able summary of a model store (for ``saspa info``)."""
    group, attrs = read_model_attrs(path)
    summary = {k: attrs[k] for k in ("estimator", "task", "n_features_in", "n_bases", "blur",
                                     "kernel", "likelihood", "ep", "log_evidence",
                                     "classes", "data_fingerprint", "versions")}
    hyper = attrs.get("hyperparameters", {})
    summary["hyperparameters"] = {
        "optimized": hyper.get("optimized", False), "blur_scale": hyper.get("blur_scale", 1.0),
        "log_evidence_per_iteration": [r["log_evidence"] for r in hyper.get("trace", [])],
        "info": hyper.get("info", {})}
    summary["n_training_rows"] = int(group["sites_tau"].shape[0])
    summary["sweeps"] = [{k: r.get(k) for k in ("sweep", "change", "log_evidence", "seconds")}
                         for r in attrs["history"]]
    return json.loads(json.dumps(summary, default=str))
