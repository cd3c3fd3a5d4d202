"""Model stores: a fitted model as a zarr group of small arrays and JSON attributes.

Nothing here pickles.  A store holds the estimator's class name and ``get_params()``,
its :class:`~saspa_dask.fitting.posterior.FittedPosterior` and its fit report (the
JSON attributes named by the class's ``_REPORT_ATTRIBUTES``, the arrays named by its
``_REPORT_ARRAYS``: EP diagnostics, per-row sites, an IVM's active set).  Writing
needs no estimator class, so every estimator's ``save`` calls :func:`save_model`
directly; reading is given the class (:mod:`saspa_dask.models.loading` knows them by
name).  A store is written aside and renamed into place, so an interrupted save never
leaves a half-written model at the destination.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path

import dask.array as da
import numpy as np
import zarr

from ..files.groups import zarr_group
from .._version import __version__
from ..core.bases import Basis, saved_blur
from ..files.atomic import aside_directory, check_destination, move_into_place
from ..files.outputs import MODEL
from ..files.errors import StoreError
from ..fitting.posterior import offset_value, stacked
from .settings import SETTINGS_CLASSES

__all__ = ["FLOAT_REPORT", "FORMAT_VERSION", "FOURIER_SCALING", "MODEL_FORMAT",
           "READABLE_VERSIONS", "CHECKSUM_SINCE", "content_checksum", "decode_params", "save_model"]

MODEL_FORMAT = "saspa-model"
# frequency features' definition (saspa_dask.core.fourier: scaled by kappa); a store
# of features without it would predict wrongly here, so it is refused
FOURIER_SCALING = "kappa"
FORMAT_VERSION = 5
# versions this code reads: 5 always carries its checksum (a store without one is
# refused); 4 carried it from some point on; 3 had the EP schedule and execution
# settings as flat parameters (folded into ``ep``/``execution`` on reading) and always
# per-row sites; 2 kept the fit report in separate attributes (read by
# _report_of_version_2); 1 had no multi-class and no hyperparameter trace
READABLE_VERSIONS = (2, 3, 4, 5)
CHECKSUM_SINCE = 5  # the first version whose stores cannot be read without a checksum

# the fitted posterior's arrays (a leading problem axis for one-vs-rest); beside them a
# store holds the paper's alpha and beta (for other tools) and the per-row sites
_POSTERIOR_ARRAYS = ("bases_means", "bases_covs", "lengthscale", "whitening",
                     "posterior_chol", "posterior_h", "posterior_mean")
# frequency features' arrays (attribute ``fourier_features``)
_FOURIER_ARRAYS = ("bases_frequencies", "bases_phases")
# report attributes that are floats and may be NaN (stored as null)
FLOAT_REPORT = ("log_evidence_", "damping_", "blur_scale_")


def _versions():
    import dask
    import scipy
    import sklearn

    return {"saspa_dask": __version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "dask": dask.__version__, "zarr": zarr.__version__,
            "scikit-learn": sklearn.__version__}


def _jsonable(value):
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None  # JSON has no NaN / inf
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


# -- estimator parameters: JSON with typed arrays ------------------------------------


def _encode_params(params):
    """``get_params()`` as JSON plus arrays: ndarray values keep their dtype, an
    explicit ``bases`` goes to arrays, a RandomState (not storable) becomes None."""
    encoded, arrays = {}, {}
    for name, value in params.items():
        if isinstance(value, Basis):
            arrays[f"param_{name}_means"] = value.means
            arrays[f"param_{name}_covs"] = saved_blur(value.blur)
            encoded[name] = {"__basis__": name, "fourier": value.is_fourier}
            if value.is_fourier:
                arrays[f"param_{name}_frequencies"] = value.frequencies
                arrays[f"param_{name}_phases"] = value.phases
        elif isinstance(value, np.ndarray):
            encoded[name] = {"__ndarray__": _jsonable(value), "dtype": value.dtype.str}
        elif isinstance(value, np.random.RandomState):
            encoded[name] = None
        elif isinstance(value, tuple(SETTINGS_CLASSES.values())):
            encoded[name] = {"__settings__": type(value).__name__,
                             "fields": _jsonable(asdict(value))}
        else:
            encoded[name] = _jsonable(value)
    return encoded, arrays


def decode_params(encoded, read, path):
    params = {}
    for name, value in encoded.items():
        if isinstance(value, dict) and "__basis__" in value:
            parts = ("means", "covs") + (("frequencies", "phases") if value.get("fourier")
                                         else ())
            try:
                params[name] = Basis(*(read(f"param_{name}_{part}") for part in parts))
            except ValueError as err:
                raise StoreError(f"{path}: parameter {name!r}: {err}") from None
        elif isinstance(value, dict) and "__ndarray__" in value:
            params[name] = np.array(value["__ndarray__"], dtype=np.dtype(value["dtype"]))
        elif isinstance(value, dict) and "__settings__" in value:
            params[name] = _decode_settings(name, value, path)
        else:
            params[name] = value
    return _grouped(params)


# a format-3 store kept the grouped settings as flat parameters: name -> (group, field)
_FLAT_NAMES = {
    "ep_mode": ("ep", "mode"), "damping": ("ep", "damping"),
    "max_sweeps": ("ep", "max_sweeps"), "tol": ("ep", "tol"),
    "anderson_memory": ("ep", "anderson_memory"), "coarse_start": ("ep", "coarse_start"),
    "block_rows": ("execution", "block_rows"), "cache": ("execution", "cache"),
    "work_dir": ("execution", "work_dir"), "dtc": ("approximation", None)}
# what an online GP's or IVM's store held for a block_rows it was not given
_UNSET = "deprecated"


def _grouped(params):
    """A store's parameters with a format-3 store's flat names folded into ``ep``,
    ``execution`` and ``approximation``."""
    flat = {k: params.pop(k) for k in list(params) if k in _FLAT_NAMES}
    groups = {}
    for name, value in flat.items():
        group, field = _FLAT_NAMES[name]
        if group == "approximation":
            params["approximation"] = "dtc" if value else "fitc"
        elif value != _UNSET:
            groups.setdefault(group, {})[field] = value
    for group, changes in groups.items():
        current = params.get(group)
        params[group] = {**(current if isinstance(current, dict) else {}), **changes}
    return params


def _decode_settings(name, value, path):
    cls = SETTINGS_CLASSES.get(name)
    if cls is None or value["__settings__"] != cls.__name__ or \
            not isinstance(value.get("fields"), dict):
        raise StoreError(f"{path}: parameter {name!r} is not a valid settings record")
    try:
        return cls(**value["fields"])
    except (TypeError, ValueError) as err:
        raise StoreError(f"{path}: parameter {name!r}: {err}") from None


# -- saving ------------------------------------------------------------------------


def _posterior_arrays(fitted):
    alpha, beta = fitted.alpha_beta
    fourier = ({} if fitted.frequencies is None else
               {"bases_frequencies": fitted.frequencies, "bases_phases": fitted.phases})
    return {"bases_means": fitted.means, "bases_covs": saved_blur(fitted.covs), **fourier,
            "lengthscale": fitted.lengthscale, "whitening": fitted.whitening,
            "posterior_chol": stacked([p.chol for p in fitted.posteriors]),
            "posterior_h": stacked([p.h for p in fitted.posteriors]),
            "posterior_mean": stacked([p.mean for p in fitted.posteriors]),
            "alpha": alpha, "beta": beta,
            **({} if fitted.offset_covariance is None
               else {"offset_covariance": fitted.offset_covariance})}


# a model store's ``kernel.type`` for each kernel shape (``se``: what every store
# before the Matérn kernels says)
KERNEL_TYPES = {"se": "squared_exponential_ard", "matern12": "matern12_ard",
                "matern32": "matern32_ard", "matern52": "matern52_ard"}
# an additive kernel's type (a sum of kernels of one shape over groups of inputs): its
# shape's type after this prefix, which readers before it refuse rather than read as
# one kernel
ADDITIVE_PREFIX = "additive_"


def _kernel_attrs(fitted):
    """The ``kernel`` attribute: type, lengthscales, s2, jitter (and an additive
    kernel's terms and weights)."""
    out = {"type": KERNEL_TYPES[fitted.kernel],
           "lengthscale": _jsonable(fitted.lengthscale),
           "signal_variance": float(fitted.signal_variance),
           "jitter": float(fitted.jitter)}
    if fitted.additive is not None:
        out.update(type=ADDITIVE_PREFIX + out["type"],
                   additive_terms=_jsonable(fitted.additive),
                   term_weights=_jsonable(fitted.term_weights))
    return out


def _posterior_attrs(fitted):
    classes = fitted.classes
    return {
        "task": "classification" if classes is not None else "regression",
        "n_features_in": int(fitted.n_features), "n_bases": int(fitted.n_bases),
        "n_problems": int(fitted.n_problems),
        "kernel": _kernel_attrs(fitted),
        "likelihood": _jsonable({**fitted.likelihood_params, "name": fitted.likelihood}),
        "classes": None if classes is None else _jsonable(classes),
        "classes_dtype": None if classes is None else classes.dtype.str,
        "y_mean": offset_value(fitted.offset),
        "feature_names": (None if fitted.feature_names is None
                          else [str(c) for c in fitted.feature_names]),
        "fourier_features": fitted.frequencies is not None,
        "approximation": fitted.approximation.name,
        "log_target": bool(fitted.log_target),
        # what readers before the approximation attribute look at
        "projected_prediction": not fitted.approximation.residual_in_prediction,
        **({"fourier_scaling": FOURIER_SCALING} if fitted.frequencies is not None else {}),
        # the offset is uncertain (the IVM's bias kernel): array offset_covariance
        "uncertain_offset": fitted.offset_covariance is not None,
    }


def save_model(model, path, *, overwrite=False, extra_attrs=None):
    """Write a fitted estimator to a zarr model store (no pickle).

    Parameters
    ----------
    model : fitted estimator with ``fitted_posterior_`` (e.g. SASPAClassifier)
    path : str or Path
    overwrite : bool
        Replace an existing store.
    extra_attrs : dict, optional
        More JSON attributes (the jobs record the data store, timings ...).

    The store is written aside and renamed into place.
    """
    if not hasattr(model, "fitted_posterior_"):
        raise StoreError(f"{type(model).__name__} is not fitted: nothing to save")
    check_destination(path, overwrite, MODEL)
    fitted = model.fitted_posterior_
    params, param_arrays = _encode_params(model.get_params(deep=False))
    report = {name: getattr(model, name) for name in model._REPORT_ATTRIBUTES
              if hasattr(model, name)}
    report_arrays = {name.rstrip("_"): getattr(model, name) for name in model._REPORT_ARRAYS}
    attrs = {"format": MODEL_FORMAT, "format_version": FORMAT_VERSION,
             "estimator": type(model).__name__, "params": params,
             **_posterior_attrs(fitted), "report": _jsonable(report),
             "report_arrays": sorted(report_arrays),
             # a DataFrame's names (scikit-learn's feature_names_in_), not only column
             # names given to fit
             "feature_names_in": hasattr(model, "feature_names_in_"),
             "versions": _versions(), "complete": False}
    if extra_attrs:
        attrs.update(_jsonable(extra_attrs))
    arrays = {**_posterior_arrays(fitted), **param_arrays}
    sites = getattr(model, "sites_tau_", None)
    if sites is not None:  # what bounds the per-row arrays when the store is read
        attrs["n_training_rows"] = int(np.shape(sites)[-1])
    tmp = aside_directory(path)
    try:
        group = zarr_group(tmp, "w")
        for name, value in arrays.items():
            _write_array(group, name, value)
        for name, value in report_arrays.items():  # their own dtype (indices stay int)
            _write_array(group, name, value, dtype=_dtype_of(value))
        attrs["complete"] = True
        group.attrs.update(attrs)
        # over what a reader will read back (JSON and arrays as stored)
        stored = zarr_group(tmp, "r")
        group.attrs["checksum"] = content_checksum(
            dict(stored.attrs), {name: stored[name] for name in stored.array_keys()})
        move_into_place(tmp, path, overwrite, MODEL)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Path(path)


def _dtype_of(value):
    return value.dtype if hasattr(value, "dtype") else np.asarray(value).dtype


def _write_array(group, name, value, dtype=np.float64):
    """``value`` stored as ``name``, per-row arrays in chunks of ROW_CHUNK rows; a Dask
    fit's sites (lazy: :mod:`saspa_dask.engines.kept_sites`) read and written a chunk at
    a time, never whole on the driver."""
    lazy = isinstance(value, da.Array)
    value = value.astype(dtype) if lazy else np.asarray(value, dtype=dtype)
    rows = value.shape[-1] if value.ndim else 0
    chunks = value.shape[:-1] + (ROW_CHUNK,) if rows > ROW_CHUNK else value.shape
    fill = np.nan if value.dtype.kind == "f" else 0
    arr = group.create_array(name, shape=value.shape, chunks=chunks or (1,),
                             dtype=value.dtype, fill_value=fill)
    if not lazy:
        arr[...] = value
        return
    for start in range(0, rows, ROW_CHUNK):
        part = (Ellipsis, slice(start, start + ROW_CHUNK))
        arr[part] = value[part].compute()


# -- loading -----------------------------------------------------------------------


# per-row arrays are stored in chunks of this many elements (8 MB of float64) and
# hashed a chunk at a time: a model's sites need not be in memory to be checked
ROW_CHUNK = 1 << 20


def content_checksum(attrs, arrays):
    """sha256 over a model store's attributes (all but ``checksum``) and arrays (name,
    type, shape and bytes of each), as a reader reads them back.  ``arrays`` values are
    NumPy arrays or stored (zarr) arrays, the latter read a stored chunk at a time."""
    import hashlib

    h = hashlib.sha256()
    meta = {k: v for k, v in attrs.items() if k != "checksum"}
    h.update(json.dumps(meta, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        value = arrays[name]
        if not hasattr(value, "dtype"):
            value = np.asarray(value)
        shape = tuple(int(n) for n in value.shape)
        h.update(f"\0{name}\0{np.dtype(value.dtype).str}\0{shape}\0".encode())
        if isinstance(value, np.ndarray) or not shape:
            h.update(np.ascontiguousarray(value[...]).tobytes())
            continue
        step = int(value.chunks[-1])  # C order: the last axis a stored chunk at a time
        if shape[-1] <= step:
            # one chunk across the last axis: a chunk's leading rows at once, so each
            # chunk is decoded once (a row at a time decoded a (M, d, d) stack's one
            # chunk M d times), at most ROW_CHUNK x 16 values a read; the same bytes
            # in the same order
            per_row = int(np.prod(shape[1:], dtype=np.int64))
            rows = max(1, min(int(value.chunks[0]), (ROW_CHUNK << 4) // max(per_row, 1)))
            for start in range(0, shape[0], rows):
                h.update(np.ascontiguousarray(value[start:start + rows]).tobytes())
            continue
        for lead in np.ndindex(*shape[:-1]):
            for start in range(0, shape[-1], step):
                h.update(np.ascontiguousarray(
                    value[lead + (slice(start, start + step),)]).tobytes())
    return h.hexdigest()
