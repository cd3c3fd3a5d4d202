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

import numpy as np
import zarr
from sklearn.base import is_classifier

from .._version import __version__
from ..core.bases import Basis
from ..core.kernels import basis_covariance
from ..ep.posterior import Posterior
from ..files.atomic import aside_directory, check_destination, move_into_place
from ..files.codecs import check_codecs
from ..files.errors import StoreError
from ..files.groups import chunk_counts, open_group
from ..fitting.posterior import FittedPosterior, offset_value, stacked, unstacked
from .settings import LEGACY_NAMES, SETTINGS_CLASSES, legacy_parameters

__all__ = ["describe_model", "read_model", "read_model_attrs", "save_model"]

MODEL_FORMAT = "saspa-model"
# frequency features' definition (saspa_dask.core.fourier: scaled by kappa); a store
# of features without it would predict wrongly here, so it is refused
FOURIER_SCALING = "kappa"
FORMAT_VERSION = 4
# versions this code reads: 3 had the EP schedule and execution settings as flat
# parameters (folded into ``ep``/``execution`` on reading) and always per-row sites;
# 2 kept the fit report in separate attributes (read by _report_of_version_2); 1 had no
# multi-class and no hyperparameter trace
_READABLE_VERSIONS = (2, 3, 4)

# the fitted posterior's arrays (a leading problem axis for one-vs-rest); beside them a
# store holds the paper's alpha and beta (for other tools) and the per-row sites
_POSTERIOR_ARRAYS = ("bases_means", "bases_covs", "lengthscale", "whitening",
                     "posterior_chol", "posterior_h", "posterior_mean")
# frequency features' arrays (attribute ``fourier_features``)
_FOURIER_ARRAYS = ("bases_frequencies", "bases_phases")
# report attributes that are floats and may be NaN (stored as null)
_FLOAT_REPORT = ("log_evidence_", "damping_", "blur_scale_")


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
            arrays[f"param_{name}_means"], arrays[f"param_{name}_covs"] = value.means, value.covs
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


def _decode_params(encoded, read, path):
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
    legacy = {k: params.pop(k) for k in list(params) if k in LEGACY_NAMES}
    if legacy:  # a format-3 store: the old flat names, folded in without a warning
        params = legacy_parameters({"ep": None, "execution": None, **params}, legacy,
                                   owner="model store", warn=False)
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
    return {"bases_means": fitted.means, "bases_covs": fitted.covs, **fourier,
            "lengthscale": fitted.lengthscale, "whitening": fitted.whitening,
            "posterior_chol": stacked([p.chol for p in fitted.posteriors]),
            "posterior_h": stacked([p.h for p in fitted.posteriors]),
            "posterior_mean": stacked([p.mean for p in fitted.posteriors]),
            "alpha": alpha, "beta": beta}


def _posterior_attrs(fitted):
    classes = fitted.classes
    return {
        "task": "classification" if classes is not None else "regression",
        "n_features_in": int(fitted.n_features), "n_bases": int(fitted.n_bases),
        "n_problems": int(fitted.n_problems),
        "kernel": {"type": "squared_exponential_ard",
                   "lengthscale": _jsonable(fitted.lengthscale),
                   "signal_variance": float(fitted.signal_variance),
                   "jitter": float(fitted.jitter)},
        "likelihood": _jsonable({**fitted.likelihood_params, "name": fitted.likelihood}),
        "classes": None if classes is None else _jsonable(classes),
        "classes_dtype": None if classes is None else classes.dtype.str,
        "y_mean": offset_value(fitted.offset),
        "feature_names": (None if fitted.feature_names is None
                          else [str(c) for c in fitted.feature_names]),
        "fourier_features": fitted.frequencies is not None,
        "projected_prediction": bool(fitted.projected_prediction),
        **({"fourier_scaling": FOURIER_SCALING} if fitted.frequencies is not None else {}),
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
    check_destination(path, overwrite)
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
        group = zarr.open_group(str(tmp), mode="w")
        for name, value in arrays.items():
            _write_array(group, name, value)
        for name, value in report_arrays.items():  # their own dtype (indices stay int)
            _write_array(group, name, value, dtype=np.asarray(value).dtype)
        attrs["complete"] = True
        group.attrs.update(attrs)
        # over what a reader will read back (JSON and arrays as stored)
        stored = zarr.open_group(str(tmp), mode="r")
        group.attrs["checksum"] = content_checksum(
            dict(stored.attrs), {name: stored[name][...] for name in stored.array_keys()})
        move_into_place(tmp, path, overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Path(path)


def _write_array(group, name, value, dtype=np.float64):
    value = np.asarray(value, dtype=dtype)
    chunks = value.shape if value.ndim != 1 or value.size <= 1 << 20 else (1 << 20,)
    fill = np.nan if value.dtype.kind == "f" else 0
    arr = group.create_array(name, shape=value.shape, chunks=chunks or (1,),
                             dtype=value.dtype, fill_value=fill)
    arr[...] = value


# -- loading -----------------------------------------------------------------------


def _number(value, key, path, *, low=None, positive=False, integer=False):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and integer:
        ok = float(value) == int(value)
    if ok:
        value = float(value)
        ok = np.isfinite(value) and (low is None or value >= low) and \
            (not positive or value > 0)
    if not ok:
        need = ("a positive integer" if integer else "a finite number > 0" if positive
                else f"a finite number >= {low}" if low is not None else "a finite number")
        raise StoreError(f"{path}: attribute {key!r} must be {need}, got {value!r}")
    return int(value) if integer else value


def _check_attrs(attrs, path):
    """Every attribute the loader uses: present, of its type, finite, in range; a
    tampered or truncated store is a StoreError naming the key."""
    def need(key, kind, where=attrs, name=None):
        name = name or key
        if key not in where:
            raise StoreError(f"{path}: attribute {name!r} is missing")
        if not isinstance(where[key], kind):
            raise StoreError(f"{path}: attribute {name!r} has the wrong type "
                             f"({type(where[key]).__name__})")
        return where[key]

    need("estimator", str)
    need("params", dict)
    for key in ("n_bases", "n_features_in"):
        _number(need(key, (int, float)), key, path, positive=True, integer=True)
    _number(attrs.get("n_problems", 1), "n_problems", path, positive=True, integer=True)
    kernel = need("kernel", dict)
    _number(need("signal_variance", (int, float), kernel, "kernel.signal_variance"),
            "kernel.signal_variance", path, positive=True)
    _number(need("jitter", (int, float), kernel, "kernel.jitter"), "kernel.jitter", path,
            low=0.0)
    likelihood = need("likelihood", dict)
    need("name", str, likelihood, "likelihood.name")
    for key, value in likelihood.items():
        if key != "name":
            _number(value, f"likelihood.{key}", path)
    offset = attrs.get("y_mean")
    if isinstance(offset, list):  # a classifier's bias per one-vs-rest problem
        if len(offset) != attrs.get("n_problems", 1):
            raise StoreError(f"{path}: attribute 'y_mean' has {len(offset)} values, "
                             f"expected one per problem")
        for value in offset:
            _number(value, "y_mean", path)
    elif offset is not None:
        _number(offset, "y_mean", path)
    if attrs.get("classes") is not None:
        need("classes", list)
        need("classes_dtype", str)
    names = attrs.get("feature_names")
    if names is not None and (not isinstance(names, list)
                              or not all(isinstance(n, str) for n in names)):
        raise StoreError(f"{path}: attribute 'feature_names' must be a list of strings")
    for flag in ("fourier_features", "projected_prediction"):
        if not isinstance(attrs.get(flag, False), bool):
            raise StoreError(f"{path}: attribute {flag!r} has the wrong type "
                             f"({type(attrs[flag]).__name__})")
    if attrs.get("fourier_features") and attrs.get("fourier_scaling") != FOURIER_SCALING:
        raise StoreError(f"{path}: its frequency features were saved unscaled (before "
                         "saspa_dask scaled them to variance s2); their predictions would "
                         "be wrong here: refit the model")
    if attrs["format_version"] >= 3:
        need("report", dict)


def read_model_attrs(path):
    """Attributes of a model store, checked for format, version, completeness and (each
    attribute the loader uses) type, finiteness and range."""
    path = Path(path)
    group = open_group(path, "model store")
    attrs = dict(group.attrs)
    if attrs.get("format") != MODEL_FORMAT:
        raise StoreError(f"{path}: not a saspa model store (format {attrs.get('format')!r})")
    if attrs.get("format_version") not in _READABLE_VERSIONS:
        raise StoreError(f"{path}: model format version {attrs.get('format_version')!r}; "
                         f"this saspa_dask reads versions {list(_READABLE_VERSIONS)}")
    if not attrs.get("complete"):
        raise StoreError(f"{path}: model store is incomplete (a save did not finish)")
    _check_attrs(attrs, path)
    return group, attrs


# a model's largest arrays are its sites (8 bytes per training row and problem): 16 GiB
# is 2 * 10^9 rows; a claim beyond it is a changed store, refused before any read
_MAX_ARRAY_BYTES = 1 << 34
# an array of an older store (which did not record its training rows) claiming more
# than this must have every chunk stored: a claim its files do not back is refused
_UNBACKED_BYTES = 1 << 26


def content_checksum(attrs, arrays):
    """sha256 over a model store's attributes (all but ``checksum``) and arrays (name,
    type, shape and bytes of each), as a reader reads them back."""
    import hashlib

    h = hashlib.sha256()
    meta = {k: v for k, v in attrs.items() if k != "checksum"}
    h.update(json.dumps(meta, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(arrays):
        value = np.asarray(arrays[name])
        h.update(f"\0{name}\0{value.dtype.str}\0{value.shape}\0".encode())
        h.update(np.ascontiguousarray(value).tobytes())
    return h.hexdigest()


class _ArrayReader:
    """Reads a model store's arrays, each checked from its metadata before anything is
    allocated: its codecs (:func:`~saspa_dask.files.codecs.check_codecs`), its shape
    against what the model's own dimensions allow, and (for older stores) that a large
    claim is backed by stored chunks.  Keeps what it read, for the checksum."""

    def __init__(self, group, attrs, path):
        self.group, self.path, self.read_arrays = group, path, {}
        M, d = int(attrs["n_bases"]), int(attrs["n_features_in"])
        K = int(attrs.get("n_problems", 1))
        rows = attrs.get("n_training_rows")
        self.rows_known = isinstance(rows, int) and not isinstance(rows, bool) and rows > 0
        # the largest any array of this model can be: the basis covariances, the
        # posterior factors, and per-row arrays (each problem's sites)
        self.max_elements = max(M * d * d, K * M * M, M * d + M) + \
            (K * rows if self.rows_known else 0)

    def __call__(self, name, dtype=np.float64, shape=None):
        """The array ``name`` (``dtype=None``: as stored), or a StoreError naming it."""
        try:
            array = self.group[name]
            self._check(array, name, shape)
            value = array[...]
        except StoreError:
            raise
        except Exception as err:
            raise StoreError(f"{self.path}: array {name!r} is missing or unreadable "
                             f"({type(err).__name__}: {err})") from None
        self.read_arrays[name] = value
        return np.asarray(value, dtype=dtype)

    def _check(self, array, name, shape):
        path = self.path
        check_codecs(array, path, name)
        if shape is not None and tuple(array.shape) != tuple(shape):
            raise StoreError(f"{path}: array {name!r} has shape {array.shape}, expected "
                             f"{tuple(shape)}")
        elements = int(np.prod(array.shape, dtype=object))
        claimed = elements * array.dtype.itemsize
        if claimed > _MAX_ARRAY_BYTES or (self.rows_known and elements > self.max_elements):
            raise StoreError(f"{path}: array {name!r} claims shape {array.shape} "
                             f"({claimed / 2**30:.3g} GiB): more than this model holds; "
                             "the store's metadata was changed")
        fill = np.asarray(array.fill_value)
        unbacked = (fill.dtype.kind == "f" and np.isnan(fill)) or (
            not self.rows_known and claimed > _UNBACKED_BYTES)
        if unbacked:
            stored, declared = chunk_counts(array)
            if stored < declared:
                raise StoreError(f"{path}: array {name!r} claims shape {array.shape} but "
                                 f"only {stored} of its {declared} chunks are stored")

    def verify_checksum(self, attrs):
        """The store's content against the checksum recorded when it was saved (stores
        saved before checksums pass unchecked)."""
        recorded = attrs.get("checksum")
        if recorded is None:
            return
        for name in self.group.array_keys():
            if name not in self.read_arrays:
                self(name, dtype=None)
        if content_checksum(attrs, self.read_arrays) != recorded:
            raise StoreError(f"{self.path}: its content differs from the checksum recorded "
                             "when it was saved (an attribute or array was changed "
                             "since); refusing to load it: save or train the model again")


def _offset(value):
    if isinstance(value, list):
        return np.array(value, dtype=np.float64)
    return float(value or 0.0)


def _read_posterior(read, attrs, path):
    """The stored :class:`FittedPosterior`, its arrays checked for shape (before they
    are read) and NaN."""
    fourier = bool(attrs.get("fourier_features", False))
    M, d = attrs["n_bases"], attrs["n_features_in"]
    K = int(attrs.get("n_problems", 1))
    lead = () if K == 1 else (K,)
    # alpha and beta are derived (for other tools); checked so that a truncated store
    # is refused whichever array lost its data
    expected = {"bases_means": (M, d), "bases_covs": (M, d, d), "lengthscale": (d,),
                "whitening": (M, M), "posterior_chol": lead + (M, M),
                "posterior_h": lead + (M,), "posterior_mean": lead + (M,),
                "alpha": lead + (M,), "beta": lead + (M, M),
                **({"bases_frequencies": (M, d), "bases_phases": (M,)} if fourier else {})}
    arrays = {name: read(name, shape=shape) for name, shape in expected.items()}
    for name in expected:
        if not np.all(np.isfinite(arrays[name])):
            raise StoreError(f"{path}: array {name!r} holds NaN or inf (truncated write?)")
    _check_whitening(arrays, attrs["kernel"], path)
    fields = [unstacked(arrays[f"posterior_{f}"], K) for f in ("chol", "h", "mean")]
    kernel, likelihood = attrs["kernel"], dict(attrs["likelihood"])
    name = likelihood.pop("name")
    classes = attrs.get("classes")
    if classes is not None:
        classes = np.array(classes, dtype=np.dtype(attrs["classes_dtype"]))
    names = attrs.get("feature_names")
    try:
        fitted = FittedPosterior(
            arrays["bases_means"], arrays["bases_covs"], arrays["lengthscale"],
            float(kernel["signal_variance"]), float(kernel["jitter"]), arrays["whitening"],
            [Posterior(*parts) for parts in zip(*fields)], name, likelihood,
            offset=_offset(attrs.get("y_mean")), classes=classes,
            feature_names=None if names is None else np.array(names, dtype=object),
            frequencies=arrays.get("bases_frequencies"), phases=arrays.get("bases_phases"),
            projected_prediction=bool(attrs.get("projected_prediction", False)))
        fitted.basis  # noqa: B018 - checks the features (one shared diagonal window)
        fitted.likelihood_object  # noqa: B018 - checks the likelihood parameters now
    except (KeyError, TypeError, ValueError) as err:
        raise StoreError(f"{path}: likelihood {name!r} with parameters {likelihood} is "
                         f"invalid ({err})") from None
    return fitted


def _check_classes(cls, fitted, path):
    """A classifier has its classes, one problem for two, one per class for more; a
    regressor has none."""
    if not is_classifier(cls()):
        if fitted.classes is not None:
            raise StoreError(f"{path}: a {cls.__name__} store with classes")
        return
    K = fitted.n_problems
    n = None if fitted.classes is None else len(fitted.classes)
    if n is None or n < 2 or (K == 1 and n != 2) or (K > 1 and n != K) or \
            len(set(fitted.classes.tolist())) != n:
        raise StoreError(f"{path}: attribute 'classes' does not fit a {cls.__name__} with "
                         f"{K} EP problem(s) (got {n if n is not None else 'none'})")


def _check_whitening(arrays, kernel, path):
    """The stored factor L must be the Cholesky factor of the basis covariance that the
    stored bases, lengthscales, signal variance and jitter give: a store whose kernel
    attributes were changed after saving would otherwise predict nonsense."""
    s2, jitter = float(kernel["signal_variance"]), float(kernel["jitter"])
    with np.errstate(all="ignore"):
        Kh = basis_covariance(arrays["bases_means"], arrays["bases_covs"],
                              arrays["lengthscale"], s2, arrays.get("bases_frequencies"),
                              arrays.get("bases_phases"))
        L = arrays["whitening"]
        gap = np.abs(L @ L.T - Kh - jitter * np.eye(L.shape[0]))
    if not np.all(np.isfinite(Kh)) or not np.all(gap <= 1e-8 * s2):
        raise StoreError(f"{path}: the stored whitening factor does not match the stored "
                         "kernel (signal variance, jitter, lengthscales or bases changed "
                         "after saving?)")


def _report_of_version_2(attrs):
    """The fit report of a format-2 store (kept in separate attributes then)."""
    ep, hyper = attrs["ep"], attrs.get("hyperparameters", {})
    report = {f"{k}_": ep.get(k, 0) for k in (
        "n_invalid_cavities", "n_skipped_updates", "n_damping_halvings",
        "n_damping_reductions", "n_anderson_steps", "n_anderson_restarts")}
    report.update(n_sweeps_=ep["n_sweeps"], converged_=ep["converged"],
                  damping_=ep["damping"], coarse_start_=ep.get("coarse_start", []),
                  log_evidence_=attrs["log_evidence"], history_=attrs["history"],
                  blur_scale_=hyper.get("blur_scale", 1.0),
                  hyperparameter_trace_=hyper.get("trace", []),
                  hyperparameter_info_=hyper.get("info", {}),
                  data_fingerprint_=attrs.get("data_fingerprint"))
    if attrs.get("timings") is not None:
        report["timings_"] = attrs["timings"]
    if attrs.get("kmeans") is not None:
        report["kmeans_info_"] = attrs["kmeans"]
    return report


def _report(attrs):
    return attrs["report"] if attrs["format_version"] >= 3 else _report_of_version_2(attrs)


def read_model(path, classes):
    """The estimator a model store holds, fitted, and the store's attributes.

    Parameters
    ----------
    path : str or Path
        A model store (``latest`` pointers are resolved by the caller).
    classes : dict
        Estimator classes by name (:mod:`saspa_dask.models.loading`).

    Returns
    -------
    model, attrs
        The estimator named in the store with ``fitted_posterior_``, the fit report and
        ``get_params()`` as saved; the store's attributes.

    Raises
    ------
    StoreError
        Missing, foreign, incomplete, truncated or inconsistent store.
    """
    try:
        return _load(Path(path), classes)
    except StoreError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        # a tampered store that passed the attribute checks some other way
        raise StoreError(f"{path}: not a valid model store ({type(err).__name__}: "
                         f"{err})") from None


def _load(path, classes):
    group, attrs = read_model_attrs(path)
    cls = classes.get(attrs.get("estimator"))
    if cls is None:
        raise StoreError(f"{path}: unknown estimator {attrs.get('estimator')!r}")
    read = _ArrayReader(group, attrs, path)
    fitted = _read_posterior(read, attrs, path)
    _check_classes(cls, fitted, path)
    params = _decode_params(attrs["params"], read, path)
    valid = cls().get_params(deep=False)
    model = cls(**{k: v for k, v in params.items() if k in valid})
    if getattr(model, "likelihood", fitted.likelihood) != fitted.likelihood:
        raise StoreError(f"{path}: likelihood {fitted.likelihood!r} differs from the "
                         f"estimator's parameter {model.likelihood!r}")
    model.fitted_posterior_ = fitted
    model.n_features_in_ = fitted.n_features
    # stores before format 4 did not say where the names came from: as they loaded then
    if fitted.feature_names is not None and attrs.get("feature_names_in", True):
        model.feature_names_in_ = fitted.feature_names
    for name, value in _report(attrs).items():
        if name in _FLOAT_REPORT:
            value = float("nan") if value is None else float(value)
        setattr(model, name, value)
    for name, value in _read_report_arrays(read, attrs, fitted, path).items():
        setattr(model, f"{name}_", value)
    read.verify_checksum(attrs)
    return model, attrs


def _read_report_arrays(read, attrs, fitted, path):
    """The fit report's arrays; per-row sites checked against the problems (and the
    training rows the store records) before they are read."""
    names = attrs.get("report_arrays", ["sites_nu", "sites_tau"])  # format 3: sites
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise StoreError(f"{path}: attribute 'report_arrays' must be a list of names")
    rows = attrs.get("n_training_rows")
    lead = () if fitted.n_problems == 1 else (fitted.n_problems,)
    sites_shape = lead + (rows,) if read.rows_known else None
    arrays = {name: read(name, dtype=None,
                         shape=sites_shape if name in ("sites_tau", "sites_nu") else None)
              for name in names}
    if "sites_tau" in arrays:
        tau, nu = arrays["sites_tau"], arrays.get("sites_nu")
        if nu is None or tau.shape != nu.shape:
            raise StoreError(f"{path}: site arrays differ in shape")
        if tau.shape[:-1] != (() if fitted.n_problems == 1 else (fitted.n_problems,)):
            raise StoreError(f"{path}: site arrays have shape {tau.shape}, expected "
                             f"{fitted.n_problems} problem(s)")
    return arrays


def label_text(value):
    """A class as the user wrote it: a whole number without the ``.0`` a float64 target
    gives it (``1``, not ``1.0``), anything else as ``str`` does."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value)


def _class_labels(attrs):
    """The original label of each class: the training store's text labels when the
    model's classes are their codes, else the classes themselves."""
    classes, labels = attrs.get("classes"), attrs.get("target_classes")
    if classes is None:
        return None
    if labels is None:
        return [label_text(c) for c in classes]
    try:
        return [str(labels[int(c)]) for c in classes]
    except (IndexError, TypeError, ValueError):
        return [label_text(c) for c in classes]


def _ep_mode(attrs):
    """How EP ran: the ``ep`` settings (format 4), the flat ``ep_mode`` (format 3),
    the ``ep`` record (format 2); "adf" for the one-pass estimators."""
    params = attrs["params"]
    if attrs["format_version"] < 3:
        return attrs["ep"].get("mode")
    if "ep" in params:  # a settings record, a dict of some fields, or None
        ep = params["ep"] if isinstance(params["ep"], dict) else {}
        return ep.get("fields", ep).get("mode", "parallel")
    return params.get("ep_mode")  # a full GP's; None for the one-pass estimators


def describe_model(path):
    """A JSON-able summary of a model store (for ``saspa info``)."""
    group, attrs = read_model_attrs(path)
    report = _report(attrs)
    summary = {k: attrs.get(k) for k in ("estimator", "task", "n_features_in", "n_bases",
                                         "kernel", "likelihood", "classes", "versions")}
    new = attrs["format_version"] >= 3
    params = attrs["params"]
    summary["blur"] = params.get("blur", "delta") if new else attrs.get("blur")
    if summary["blur"] == "auto":  # what the fit chose
        summary["blur"] = report.get("blur_", "auto")
    # the sparse prior and EP's power of a SASPA model (older stores: a dtc flag, no
    # alpha: EP); None for the estimators without them
    approximation = params.get("approximation")
    if approximation is None and ("dtc" in params or not new):
        approximation = "dtc" if params.get("dtc") else "fitc"
    summary["approximation"] = approximation
    summary["alpha"] = None if approximation is None else float(params.get("alpha", 1.0))
    summary["ep"] = {"mode": _ep_mode(attrs),
                     "damping": report.get("damping_"), "n_sweeps": report.get("n_sweeps_"),
                     "converged": report.get("converged_"),
                     "n_invalid_cavities": report.get("n_invalid_cavities_"),
                     "n_anderson_steps": report.get("n_anderson_steps_", 0)}
    summary["log_evidence"] = report.get("log_evidence_")
    summary["data_fingerprint"] = report.get("data_fingerprint_")
    trace = report.get("hyperparameter_trace_", [])
    summary["hyperparameters"] = {
        "optimized": bool(trace), "blur_scale": report.get("blur_scale_", 1.0),
        "log_evidence_per_iteration": [r["log_evidence"] for r in trace],
        "info": report.get("hyperparameter_info_", {})}
    # the rows axis is the last one: one-vs-rest sites have a leading class axis
    summary["n_training_rows"] = (int(group["sites_tau"].shape[-1]) if "sites_tau" in group
                                  else report.get("n_rows_seen_"))
    summary["columns"] = attrs.get("feature_names") or attrs.get("data_columns")
    summary["target"] = attrs.get("target")
    summary["class_labels"] = _class_labels(attrs)
    summary["lengthscale"] = attrs["kernel"].get("lengthscale")
    summary["train_seconds"] = attrs.get("train_seconds")
    summary["test_metrics"] = attrs.get("test_metrics")
    kmeans = report.get("kmeans_info_")
    summary["kmeans"] = None if not kmeans else {
        k: kmeans.get(k) for k in ("converged", "n_iter", "inertia")}
    summary["sweeps"] = [{k: r.get(k) for k in ("sweep", "change", "log_evidence", "seconds")}
                         for r in report.get("history_", [])]
    return json.loads(json.dumps(summary, default=str))
