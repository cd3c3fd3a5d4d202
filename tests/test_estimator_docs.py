"""The estimators' documentation and constraints against the parameter table and their
own signatures: a parameter added, renamed, given a new default or a new choice in one
place and not in the others fails here.

The truths are independent of the docstrings: ``inspect.signature`` (what the
constructor takes), scikit-learn's ``_parameter_constraints`` (what it accepts) and
:mod:`saspa_dask.parameters` (what the CLI and TOML offer)."""

import ast
import inspect
import re

import pytest
from sklearn.utils._param_validation import StrOptions

from saspa_dask import SASPAClassifier, SASPARegressor
from saspa_dask.jobs.estimators import build_estimator
from saspa_dask.models.loading import ESTIMATORS
from saspa_dask.parameters import (CLASSIFICATION_LIKELIHOODS, REGRESSION_LIKELIHOODS,
                                   TRAIN_PARAMETERS)


def _documented(cls):
    """{name: type line} of the docstring's Parameters section (numpydoc), and the
    names documented more than once."""
    doc = inspect.getdoc(cls).replace("\\\n", "")
    section = doc.split("Parameters\n----------\n", 1)[1]
    section = re.split(r"\n[A-Z][\w ]*\n-{3,}\n", section)[0]
    found, repeated = {}, []
    for line in section.splitlines():
        match = re.match(r"^(\w+(?:, \w+)*) : (.*)$", line)  # "a, b : type" too
        for name in match.group(1).split(", ") if match else ():
            if name in found:
                repeated.append(name)
            found[name] = match.group(2)
    return found, repeated


def _literal(text):
    text = text.strip()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a name, as in default=np.inf


def _string_options(constraints):
    options = [c.options for c in constraints if isinstance(c, StrOptions)]
    return set().union(*options) if options else None


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_parameter_is_documented_once_with_its_default_and_choices(name):
    cls = ESTIMATORS[name]
    documented, repeated = _documented(cls)
    signature = inspect.signature(cls).parameters
    assert repeated == [], repeated
    assert sorted(documented) == sorted(signature)
    constraints = getattr(cls, "_parameter_constraints", {})
    for param, spec in signature.items():
        line = documented[param]
        if line == "deprecated":  # an old name that warns: its sentinel default
            assert spec.default == "deprecated", param
            continue
        default = re.search(r"default=(.*)$", line)
        assert default is not None, (param, line)
        assert _literal(default.group(1)) == spec.default, (param, line, spec.default)
        strings = _string_options(constraints.get(param, []))
        choices = re.match(r"^\{(.*)\}", line)
        if strings is not None and choices is not None:
            listed = {_literal(c) for c in choices.group(1).split(",")}
            assert {c for c in listed if isinstance(c, str)} == strings, (param, line)


# the Python value of the CLI's and TOML's word "none", where a table row offers it
NONE_MEANS = {"learn_bases": False, "feature_groups": None}


@pytest.mark.parametrize("cls, task, likelihoods", [
    (SASPAClassifier, "classification", CLASSIFICATION_LIKELIHOODS),
    (SASPARegressor, "regression", REGRESSION_LIKELIHOODS)])
def test_the_estimators_accept_what_the_parameter_table_offers(cls, task, likelihoods):
    """Each ungrouped row of the table with choices: the estimator accepts exactly those
    strings (the likelihood: its task's share of them; learn_bases' "none" is the
    CLI's word for False, feature_groups' for None)."""
    constraints = cls._parameter_constraints
    for p in TRAIN_PARAMETERS:
        if p.group is not None or not p.choices or p.name not in inspect.signature(
                cls).parameters:
            continue
        accepted = _string_options(constraints[p.name])
        offered = set(p.choices)
        if p.name == "likelihood":
            assert accepted == set(likelihoods) and accepted <= offered
        elif p.name in NONE_MEANS:  # the job maps the CLI's "none" to a Python value
            meant = NONE_MEANS[p.name]
            assert getattr(build_estimator(task, **{p.name: "none"}), p.name) is meant
            assert accepted == offered - {"none"}
            cls(**{p.name: meant})._validate_params()  # the value itself is accepted
        else:
            assert accepted == offered, p.name
    assert set(CLASSIFICATION_LIKELIHOODS) | set(REGRESSION_LIKELIHOODS) == set(
        next(p.choices for p in TRAIN_PARAMETERS if p.name == "likelihood"))
