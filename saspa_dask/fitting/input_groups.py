"""The inputs' starting lengthscales and their groups: data-driven lengthscales, the
inputs that share one (``feature_groups``), and the terms of an additive kernel
(``additive_groups``)."""

from __future__ import annotations

import numpy as np

__all__ = ["FEATURE_GROUP_RULES", "FEATURE_GROUPS_AUTO", "additive_lengthscale",
           "additive_terms_of", "default_lengthscale", "feature_groups_of", "resolve_lengthscale",
           "tied_lengthscale"]


def default_lengthscale(column_std):
    """Data-driven ARD lengthscales: ``std(X[:, k]) * sqrt(d)`` per input.

    With these, the expected scaled squared distance between two random rows is about
    2, so the kernel between typical rows is about exp(-1): neither flat nor diagonal.
    A constant input gets lengthscale 1 (it does not change the kernel).

    Examples
    --------
    >>> default_lengthscale([1.0, 0.0, 2.0]).round(3).tolist()
    [1.732, 1.732, 3.464]
    """
    std = np.asarray(column_std, dtype=np.float64)
    return np.where(std > 0, std, 1.0) * np.sqrt(std.size)


FEATURE_GROUP_RULES = ("one-hot",)
# feature_groups="auto" (the default): "one-hot" when the inputs' names mark one-hot
# columns, else a lengthscale per input ("Tied lengthscales by default on one-hot
# tables": better held-out numbers in less CPU on four tables, level on a fifth)
FEATURE_GROUPS_AUTO = "auto"


def feature_groups_of(feature_groups, feature_names, d):
    """The inputs' lengthscale groups (:attr:`Hyperparameters.groups`) from the
    ``feature_groups`` parameter, or None when every input has its own.

    ``"one-hot"``: the inputs ``saspa ingest`` named ``column=category`` share one
    lengthscale per source column (an exchangeable kernel over its categories: two
    rows of different categories are 2 / l^2 apart in the scaled squared distance,
    rows of the same category 0); other inputs keep their own.  ``"auto"``: the same
    when some inputs are named so, else None (no names, or none one-hot).  A sequence
    of ``d`` labels: inputs with equal labels share one.

    Examples
    --------
    >>> feature_groups_of("one-hot", ["age", "city=Oslo", "city=Rome", "kind=a"], 4)
    array([0, 1, 1, 2])
    >>> feature_groups_of("auto", None, 3) is None
    True
    >>> feature_groups_of(["a", "b", "a"], None, 3)
    array([0, 1, 0])
    """
    if feature_groups == FEATURE_GROUPS_AUTO:
        one_hot = feature_names is not None and any("=" in str(n) for n in feature_names)
        feature_groups = "one-hot" if one_hot else None
    if feature_groups is None:
        return None
    if isinstance(feature_groups, str):
        labels = _one_hot_labels(feature_groups, feature_names, "feature_groups")
    else:
        labels = [str(label) for label in feature_groups]
    if len(labels) != d:
        raise ValueError(f"feature_groups has {len(labels)} labels for {d} inputs")
    groups = _first_appearance(labels)
    return None if groups.max() + 1 == d else groups


def _one_hot_labels(rule, feature_names, name):
    """Per input, its text column's name (``column=category`` inputs) or a label no
    column name can have (a NUL and its position) for any other input."""
    if rule not in FEATURE_GROUP_RULES:
        raise ValueError(f"{name} must be one of {FEATURE_GROUP_RULES}, a sequence of "
                         f"labels or None, got {rule!r}")
    if feature_names is None:
        raise ValueError(f"{name}='one-hot' reads the inputs' names ('column=category', "
                         "as saspa ingest writes them): fit on a data store or a "
                         "DataFrame, or pass one label per input")
    return [str(name_).split("=", 1)[0] if "=" in str(name_) else f"\0{k}"
            for k, name_ in enumerate(feature_names)]


def additive_terms_of(additive_groups, feature_names, d):
    """The additive kernel's term of each input (:attr:`Hyperparameters.additive`) from
    the ``additive_groups`` parameter, or None for one kernel over every input.

    ``"one-hot"``: one term over the inputs that are not one-hot (numbered first) and
    one per text column over its ``column=category`` inputs.  A sequence of ``d``
    labels: inputs with equal labels form one term.

    Examples
    --------
    >>> additive_terms_of("one-hot", ["age", "city=Oslo", "city=Rome", "kind=a", "x"], 5)
    array([0, 1, 1, 2, 0])
    >>> additive_terms_of(["a", "b", "a"], None, 3)
    array([0, 1, 0])
    """
    if additive_groups is None:
        return None
    if isinstance(additive_groups, str):
        labels = _one_hot_labels(additive_groups, feature_names, "additive_groups")
        # every input that is not one-hot in one term, the first
        labels = ["\0" if label.startswith("\0") else label for label in labels]
        if "\0" in labels:
            labels = ["\0"] + labels  # numbered first
            terms = _first_appearance(labels)[1:]
        else:
            terms = _first_appearance(labels)
    else:
        if any(isinstance(label, (list, tuple, np.ndarray)) for label in additive_groups):
            raise ValueError("additive_groups takes one label per input, not lists of "
                             "input indices: e.g. [0, 0, 1] puts inputs 0 and 1 in one "
                             "term and input 2 in another")
        terms = _first_appearance([str(label) for label in additive_groups])
    if terms.size != d:
        raise ValueError(f"additive_groups has {terms.size} labels for {d} inputs: give "
                         "one label per input (inputs with equal labels form one term)")
    if terms.max() == 0:
        raise ValueError("additive_groups puts every input in one term: that is one "
                         "kernel (leave additive_groups at None)")
    return terms


def _first_appearance(labels):
    first = {}
    return np.array([first.setdefault(label, len(first)) for label in labels])


def additive_lengthscale(lengthscale, terms):
    """The data-driven start (std sqrt(d)) scaled to each input's term: std sqrt(d_g),
    so each term's kernel is about exp(-1) between typical rows, as one kernel is."""
    if terms is None:
        return lengthscale
    sizes = np.bincount(terms)[terms]
    return lengthscale * np.sqrt(sizes / terms.size)


def tied_lengthscale(lengthscale, groups):
    """``lengthscale`` with each group's inputs at the group's geometric mean (a
    start the tied learning can take); a group already tied keeps its value exactly
    (exp(mean(log l)) of equal values can differ from them in the last bit)."""
    if groups is None:
        return lengthscale
    lengthscale = np.asarray(lengthscale, dtype=np.float64)
    logs = np.bincount(groups, np.log(lengthscale)) / np.bincount(groups)
    lowest = np.full(len(logs), np.inf)
    highest = np.full(len(logs), -np.inf)
    np.minimum.at(lowest, groups, lengthscale)
    np.maximum.at(highest, groups, lengthscale)
    return np.where((lowest == highest)[groups], lengthscale, np.exp(logs)[groups])


def resolve_lengthscale(lengthscale, d, column_std):
    """The starting lengthscales: the parameter (scalar or one per input) or the
    data-driven default."""
    if lengthscale is None:
        return default_lengthscale(column_std)
    ls = np.asarray(lengthscale, dtype=np.float64)
    if ls.ndim == 0:
        ls = np.full(d, float(ls))
    if ls.shape != (d,):
        raise ValueError(f"lengthscale must be a scalar or have one value per feature ({d}), "
                         f"got shape {ls.shape}")
    if not np.all(np.isfinite(ls)) or np.any(ls <= 0):
        raise ValueError(f"lengthscale must be finite and > 0, got {ls}")
    return ls
