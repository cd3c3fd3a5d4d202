"""The estimator a training job fits, from its options (named as in
:mod:`saspa_dask.parameters`): names checked, task-only options checked, grouped
fields gathered, every parameter validated before a cluster starts."""

from __future__ import annotations



from .. import models
from ..fitting.basis_parameters import LEARN_BASES
from ..parameters import (CLASSIFICATION_LIKELIHOODS, REGRESSION_LIKELIHOODS,
                          TRAIN_PARAMETERS, by_name)
from .errors import JobError

__all__ = ["LIKELIHOODS", "build_estimator", "canonical_options", "estimator_parameters"]


LIKELIHOODS = {"classification": CLASSIFICATION_LIKELIHOODS,
               "regression": REGRESSION_LIKELIHOODS}


# likelihood parameters of one task only
_TASK_ONLY = {"classification": ("label_noise",),
              "regression": ("noise_variance", "dof", "scale", "learn_offset",
                             "min_noise_variance", "log_target", "exact_start",
                             "learning_start")}


def canonical_options(options, parameters=TRAIN_PARAMETERS, where="option"):
    """Job options checked against the parameter table: unknown names are a JobError
    listing the known ones."""
    known = by_name(parameters)
    for key in options:
        if key not in known:
            raise JobError(f"unknown {where} {key!r}; known: {', '.join(sorted(known))}")
    return dict(options)


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
    # the estimators (and scikit-learn, 1.2 s of imports) load here, on first use, not
    # with this module: a training job starts its cluster first (cluster.start_embedded)
    cls = models.SASPAClassifier if task == "classification" else models.SASPARegressor
    estimator = cls(likelihood=likelihood or allowed[0], verbose=1, **params)
    try:  # every parameter and settings field checked now, before a cluster starts
        estimator._validate_params()
    except ValueError as err:
        raise JobError(str(err)) from None
    return estimator
