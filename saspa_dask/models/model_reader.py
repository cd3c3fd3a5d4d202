"""Reading a model store back (:mod:`saspa_dask.models.model_store` writes it): every
attribute checked before use, arrays read with their sizes bounded, the content
checksum verified, the fitted posterior and the fit report rebuilt."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.kernel_sums import AdditiveKernel
from ..core.kernels import basis_covariance
from ..ep.approximation import approximation_named
from ..ep.posterior import Posterior
from ..files.errors import StoreError
from ..files.groups import open_group
from ..fitting.posterior import FittedPosterior, unstacked
from ..parameters import APPROXIMATIONS

from . import stored_sites
from .array_reader import ArrayReader
from .model_store import (ADDITIVE_PREFIX, FLOAT_REPORT, FOURIER_SCALING, KERNEL_TYPES,
                          MODEL_FORMAT, READABLE_VERSIONS, decode_params)

__all__ = ["ESTIMATOR_NAMES", "read_fitted_posterior", "read_model", "read_model_attrs",
           "report_of"]

# The estimator classes a store may name (``models.loading.ESTIMATORS`` maps them to
# the classes; a test checks the two agree).  A classifier's name ends in "Classifier",
# scikit-learn's convention and this package's: the posterior can be checked against
# its estimator's kind without importing the estimators.
ESTIMATOR_NAMES = ("SASPAClassifier", "SASPARegressor", "FullGPClassifier",
                   "FullGPRegressor", "SparseOnlineGPClassifier", "SparseOnlineGPRegressor",
                   "IVMClassifier")


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
    known = (*KERNEL_TYPES.values(),
             *(ADDITIVE_PREFIX + kind for kind in KERNEL_TYPES.values()))
    if kernel.get("type", KERNEL_TYPES["se"]) not in known:
        raise StoreError(f"{path}: attribute 'kernel.type' must be one of "
                         f"{', '.join(known)}, not {kernel['type']!r}")
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
    for flag in ("fourier_features", "projected_prediction", "log_target"):
        if not isinstance(attrs.get(flag, False), bool):
            raise StoreError(f"{path}: attribute {flag!r} has the wrong type "
                             f"({type(attrs[flag]).__name__})")
    if attrs.get("approximation", "fitc") not in APPROXIMATIONS:
        raise StoreError(f"{path}: attribute 'approximation' must be one of "
                         f"{', '.join(APPROXIMATIONS)}, not {attrs['approximation']!r}")
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
    if attrs.get("format_version") not in READABLE_VERSIONS:
        raise StoreError(f"{path}: model format version {attrs.get('format_version')!r}; "
                         f"this saspa_dask reads versions {list(READABLE_VERSIONS)}")
    if not attrs.get("complete"):
        raise StoreError(f"{path}: model store is incomplete (a save did not finish)")
    _check_attrs(attrs, path)
    return group, attrs


def training_encoding(path, attrs):
    """The encoding record a model store keeps of its training data (what ``saspa
    predict`` and ``saspa ingest --like MODEL`` reapply); ``attrs`` from
    :func:`read_model_attrs`."""
    encoding = attrs.get("data_encoding")
    if not encoding:
        raise StoreError(f"{path}: the model records no encoding of its training data "
                         "(trained on a store not written by saspa ingest, or by an older "
                         "saspa): ingest the file with --like TRAINING_STORE (the data "
                         "store it was trained on) instead")
    return encoding


def _approximation(attrs):
    """The store's sparse approximation; stores written before it was recorded say
    only whether predictions leave the residual out (the subset of regressors), and
    DTC predicts as FITC does."""
    name = attrs.get("approximation")
    if name is None:
        name = "sor" if attrs.get("projected_prediction") else "fitc"
    return approximation_named(name)


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
    # the blur covariances as matrices, or as a wide table's diagonals (saved_blur)
    expected = {"bases_means": (M, d), "bases_covs": [(M, d, d), (M, d)], "lengthscale": (d,),
                "whitening": (M, M), "posterior_chol": lead + (M, M),
                "posterior_h": lead + (M,), "posterior_mean": lead + (M,),
                "alpha": lead + (M,), "beta": lead + (M, M),
                **({"bases_frequencies": (M, d), "bases_phases": (M,)} if fourier else {}),
                **({"offset_covariance": (K, M + 1)} if attrs.get("uncertain_offset")
                   else {})}
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
            approximation=_approximation(attrs), log_target=bool(attrs.get("log_target")),
            kernel=_kernel_name(kernel), **_additive(kernel, path),
            offset_covariance=arrays.get("offset_covariance"))
        fitted.basis  # noqa: B018 - checks the features (one shared diagonal window)
        fitted.likelihood_object  # noqa: B018 - checks the likelihood parameters now
    except (KeyError, TypeError, ValueError) as err:
        raise StoreError(f"{path}: likelihood {name!r} with parameters {likelihood} is "
                         f"invalid ({err})") from None
    return fitted


def _check_classes(name, fitted, path):
    """A classifier has its classes, one problem for two, one per class for more; a
    regressor has none."""
    if not name.endswith("Classifier"):
        if fitted.classes is not None:
            raise StoreError(f"{path}: a {name} store with classes")
        return
    K = fitted.n_problems
    n = None if fitted.classes is None else len(fitted.classes)
    if n is None or n < 2 or (K == 1 and n != 2) or (K > 1 and n != K) or \
            len(set(fitted.classes.tolist())) != n:
        raise StoreError(f"{path}: attribute 'classes' does not fit a {name} with "
                         f"{K} EP problem(s) (got {n if n is not None else 'none'})")


def _additive(kernel, path):
    """An additive kernel's ``additive`` and ``term_weights`` (empty otherwise)."""
    if not kernel.get("type", "").startswith(ADDITIVE_PREFIX):
        return {}
    try:
        return {"additive": np.array(kernel["additive_terms"], dtype=np.int64),
                "term_weights": np.array(kernel["term_weights"], dtype=np.float64)}
    except (KeyError, TypeError, ValueError) as err:
        raise StoreError(f"{path}: attribute 'kernel' of an additive kernel lacks valid "
                         f"terms and weights ({err})") from None


def _kernel_spec(kernel, path):
    """The kernel the stored covariances were computed with."""
    parts = _additive(kernel, path)
    if not parts:
        return _kernel_name(kernel)
    try:
        return AdditiveKernel(parts["additive"], parts["term_weights"],
                              _kernel_name(kernel))
    except ValueError as err:
        raise StoreError(f"{path}: attribute 'kernel': {err}") from None


def _kernel_name(kernel):
    """The kernel shape a store's checked ``kernel`` attribute names."""
    kind = kernel.get("type", KERNEL_TYPES["se"]).removeprefix(ADDITIVE_PREFIX)
    return next(name for name, value in KERNEL_TYPES.items() if value == kind)


def _check_whitening(arrays, kernel, path):
    """The stored factor L must be the Cholesky factor of the basis covariance that the
    stored bases, lengthscales, signal variance and jitter give: a store whose kernel
    attributes were changed after saving would otherwise predict nonsense."""
    s2, jitter = float(kernel["signal_variance"]), float(kernel["jitter"])
    with np.errstate(all="ignore"):
        Kh = basis_covariance(arrays["bases_means"], arrays["bases_covs"],
                              arrays["lengthscale"], s2, arrays.get("bases_frequencies"),
                              arrays.get("bases_phases"), _kernel_spec(kernel, path))
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


def report_of(attrs):
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
    return _refusing_invalid(path, lambda: _load(Path(path), classes))


def read_fitted_posterior(path):
    """The fitted posterior a model store holds and the store's attributes, checked as
    :func:`read_model` checks them (checksum included), without building the estimator:
    what scoring needs, and it does not import the estimators or scikit-learn.

    Raises
    ------
    StoreError
        Missing, foreign, incomplete, truncated or inconsistent store.
    """
    def read():
        attrs, reader, fitted = _read_posterior_checked(Path(path))
        # the per-row sites are checked (their shapes, and by the checksum) but not read
        _read_report_arrays(reader, attrs, fitted, path, keep=False)
        reader.verify_checksum(attrs)
        return fitted, attrs

    return _refusing_invalid(path, read)


def _refusing_invalid(path, read):
    try:
        return read()
    except StoreError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        # a tampered store that passed the attribute checks some other way
        raise StoreError(f"{path}: not a valid model store ({type(err).__name__}: "
                         f"{err})") from None


def _read_posterior_checked(path):
    group, attrs = read_model_attrs(path)
    name = attrs.get("estimator")
    if name not in ESTIMATOR_NAMES:
        raise StoreError(f"{path}: unknown estimator {name!r}")
    read = ArrayReader(group, attrs, path)
    fitted = _read_posterior(read, attrs, path)
    _check_classes(name, fitted, path)
    return attrs, read, fitted


def _load(path, classes):
    attrs, read, fitted = _read_posterior_checked(path)
    cls = classes[attrs["estimator"]]
    params = decode_params(attrs["params"], read, path)
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
    for name, value in report_of(attrs).items():
        if name in FLOAT_REPORT:
            value = float("nan") if value is None else float(value)
        setattr(model, name, value)
    for name, value in _read_report_arrays(read, attrs, fitted, path).items():
        setattr(model, f"{name}_", value)
    read.verify_checksum(attrs)
    return model, attrs


def _read_report_arrays(read, attrs, fitted, path, keep=True):
    """The fit report's arrays; per-row sites checked against the problems (and the
    training rows the store records) before they are read.  ``keep=False``: their
    metadata only (the stored arrays are returned, not read)."""
    names = attrs.get("report_arrays", ["sites_nu", "sites_tau"])  # format 3: sites
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise StoreError(f"{path}: attribute 'report_arrays' must be a list of names")
    rows = attrs.get("n_training_rows")
    lead = () if fitted.n_problems == 1 else (fitted.n_problems,)
    sites_shape = lead + (rows,) if read.rows_known else None
    arrays = {}
    for name in names:
        per_row = name in ("sites_tau", "sites_nu")
        shape = sites_shape if per_row else None
        stored = read.metadata(name, shape=shape)
        if not keep:
            arrays[name] = stored
        elif per_row and stored.shape[-1] > stored_sites.SITES_READ_WHOLE_ROWS:
            arrays[name] = stored_sites.stored_sites(stored, path)  # read lazily
        else:
            arrays[name] = read.values(name, stored, dtype=None)
    if "sites_tau" in arrays:
        tau, nu = arrays["sites_tau"], arrays.get("sites_nu")
        if nu is None or tau.shape != nu.shape:
            raise StoreError(f"{path}: site arrays differ in shape")
        if tau.shape[:-1] != (() if fitted.n_problems == 1 else (fitted.n_problems,)):
            raise StoreError(f"{path}: site arrays have shape {tau.shape}, expected "
                             f"{fitted.n_problems} problem(s)")
    return arrays
