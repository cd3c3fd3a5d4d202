"""The hyperparameters: their values, which of them are learnt, bounds, log transform."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..core.kernel_sums import AdditiveKernel
from ..core.likelihoods import Shifted
from .basis_parameters import LearntBases, LearntFeatures

__all__ = ["Hyperparameters", "LIKELIHOOD_BOUNDS", "LearningStoppedWarning",
           "LearntBoundWarning", "OFFSET_SPAN", "learning_stopped_advice",
           "OFFSET_UNIT", "FEATURE_GROUP_RULES", "bound_advice", "by_input_name",
           "additive_lengthscale", "additive_terms_of", "default_lengthscale",
           "feature_groups_of", "resolve_lengthscale", "tied_lengthscale"]

# natural ranges of likelihood parameters (label noise below one half)
LIKELIHOOD_BOUNDS = {"label_noise": (1e-6, 0.45), "dof": (0.5, 1e3)}
# the log-space box spans this many decades either side of the start
_DECADES = 3.0
# a learnt mean offset stays within this many target standard deviations of the
# targets' centre (a constant prior mean further out explains nothing)
OFFSET_SPAN = 10.0
# the mean offset is learnt in tenths of the targets' standard deviation: in target
# units, a weakly identified offset (FITC's energy is nearly flat in it where the
# per-row residual variances absorb the level) took L-BFGS-B's early steps and led
# Kin-40k and Pumadyn-32nm to lower optima; in tenths it moves where the energy asks
# for it (benchmarks/RESULTS.md, "A learnt constant mean")
OFFSET_UNIT = 0.1


@dataclass
class Hyperparameters:
    """Kernel and likelihood hyperparameters (all positive; optimised in log space).

    The ARD lengthscales and the signal variance are always learnt; the likelihood's
    entries are those in ``likelihood`` (empty: none learnt); the blur scale (one
    multiplier of the K-means blur covariances) only with ``learn_blur_scale``; the
    basis means (and per-basis blur) when ``bases`` is set; a constant prior mean of
    the latent, ``mean_offset`` (added to the targets' centre; the only signed value,
    learnt in units of :data:`OFFSET_UNIT` times ``offset_scale``, the targets'
    standard deviation), unless it is None; an additive kernel's term weights
    (``additive``, ``term_weights``) as logits relative to the first term's.  The
    vector of :meth:`to_log` is: log lengthscales, log s2, [log blur scale], [term
    logits], [the bases'
    :meth:`~saspa_dask.fitting.basis_parameters.LearntBases.vector`], [mean offset in
    its unit], log likelihood parameters.

    Examples
    --------
    >>> import numpy as np
    >>> h = Hyperparameters(np.array([1.0, 2.0]), 0.5, {"noise_variance": 0.1})
    >>> h.names()
    ['lengthscale[0]', 'lengthscale[1]', 'signal_variance', 'likelihood.noise_variance']
    >>> bool(np.allclose(h.from_log(h.to_log()).lengthscale, [1.0, 2.0]))
    True
    """

    lengthscale: np.ndarray
    signal_variance: float
    likelihood: dict = field(default_factory=dict)
    blur_scale: float = 1.0
    learn_blur_scale: bool = False
    bases: LearntBases | LearntFeatures | None = None
    mean_offset: float | None = None
    offset_scale: float = 1.0
    # a floor the user set on the Gaussian noise variance (``min_noise_variance``):
    # the box's lower edge there, and a value on it is not reported as on a bound
    noise_floor: float | None = None
    # the data-driven values the box of :meth:`bounds` is centred on (None: this point)
    centre: "Hyperparameters | None" = None
    # the kernel's shape (:data:`saspa_dask.core.kernel_profiles.KERNELS`): fixed, not
    # learnt; the lengthscales and s2 above are its
    kernel: str = "se"
    # inputs that share one learnt lengthscale: group index per input, 0..G-1 in order
    # of first appearance (:func:`feature_groups_of`); None: one per input
    groups: np.ndarray | None = None
    # an additive kernel (:mod:`saspa_dask.core.kernel_sums`): the term of each input
    # and the terms' weights (learnt as logits of the first: :meth:`to_log`); None:
    # one kernel over every input
    additive: np.ndarray | None = None
    term_weights: np.ndarray | None = None

    @property
    def kernel_spec(self):
        """The kernel the covariances take: its shape's name, or the
        :class:`~saspa_dask.core.kernel_sums.AdditiveKernel` at these weights."""
        if self.additive is None:
            return self.kernel
        return AdditiveKernel(self.additive, self.term_weights, self.kernel)

    @property
    def _n_logits(self):
        """Learnt term logits: one per additive term after the first."""
        return 0 if self.additive is None else self.term_weights.size - 1

    @property
    def n_lengthscales(self):
        """How many lengthscales are learnt: one per input or per group."""
        return self.lengthscale.size if self.groups is None else int(self.groups.max()) + 1

    def _group_firsts(self):
        """Each group's first input (its lengthscale stands for the group's)."""
        return np.unique(self.groups, return_index=True)[1]

    def _learnt_lengthscales(self, lengthscale):
        return lengthscale if self.groups is None else lengthscale[self._group_firsts()]

    def _bases_offset(self):
        """Where the bases' entries (or, without them, the likelihood's) start in
        :meth:`to_log`."""
        return self.n_lengthscales + 1 + int(self.learn_blur_scale) + self._n_logits

    def names(self):
        """Names of the learnt values, in the order of :meth:`to_log` (a group's
        lengthscale by its first input)."""
        firsts = (range(self.lengthscale.size) if self.groups is None
                  else self._group_firsts())
        names = [f"lengthscale[{k}]" for k in firsts]
        names.append("signal_variance")
        if self.learn_blur_scale:
            names.append("blur_scale")
        names += [f"term_weight[{g}]" for g in range(1, self._n_logits + 1)]
        if self.bases is not None:
            names += self.bases.names()
        if self.mean_offset is not None:
            names.append("mean_offset")
        return names + [f"likelihood.{k}" for k in self.likelihood]

    def to_log(self):
        """The learnt values as one log-space vector."""
        values = [*self._learnt_lengthscales(self.lengthscale), self.signal_variance]
        if self.learn_blur_scale:
            values.append(self.blur_scale)
        head = np.log(np.array(values, dtype=np.float64))
        tail = np.log(np.array(list(self.likelihood.values()), dtype=np.float64))
        middle = [] if self.additive is None else [self._logits()]
        if self.bases is not None:
            middle.append(self.bases.vector())
        if self.mean_offset is not None:
            middle.append([self.mean_offset / self._offset_unit()])
        return np.concatenate([head, *middle, tail])

    def from_log(self, x):
        """A copy with the learnt values taken from a log-space vector."""
        x = np.asarray(x, dtype=np.float64)
        d = self.n_lengthscales
        lengthscale = np.exp(x[:d]) if self.groups is None else np.exp(x[:d])[self.groups]
        blur = math.exp(x[d + 1]) if self.learn_blur_scale else self.blur_scale
        pos = self._bases_offset()
        weights = self.term_weights
        if self.additive is not None:
            weights = _softmax(np.concatenate([[0.0], x[pos - self._n_logits:pos]]))
        bases = self.bases
        if bases is not None:
            n = bases.size
            bases, pos = bases.from_vector(x[pos:pos + n]), pos + n
        offset = self.mean_offset
        if offset is not None:
            offset, pos = float(x[pos]) * self._offset_unit(), pos + 1
        lik = {k: math.exp(val) for k, val in zip(self.likelihood, x[pos:])}
        return replace(self, lengthscale=lengthscale, signal_variance=math.exp(x[d]),
                       likelihood=lik, blur_scale=blur, bases=bases, mean_offset=offset,
                       term_weights=weights)

    def _logits(self):
        """The terms' weights as logits relative to the first term's."""
        logs = np.log(self.term_weights)
        return logs[1:] - logs[0]

    def gradient_vector(self, grad):
        """A gradient dict (:func:`~saspa_dask.fitting.gradient.assemble_gradient`)
        taken at this point, as a vector in the order of :meth:`to_log`.  Call it on
        the point the gradient was taken at: learnt blurs' parameters are logs and
        Cholesky factors of this point's blur covariances."""
        d_lengthscale = np.asarray(grad["lengthscale"])
        if self.groups is not None:  # a shared log-lengthscale: its inputs' sum
            d_lengthscale = np.bincount(self.groups, d_lengthscale, self.n_lengthscales)
        values = [*d_lengthscale, grad["signal_variance"]]
        if self.learn_blur_scale:
            values.append(grad["blur_scale"])
        if self.additive is not None:
            # d/d logit_g of w = softmax(0, logits): v_g - w_g sum_h v_h, v = d/dlog w
            v = np.asarray(grad["term_weights"])
            values += list((v - self.term_weights * v.sum())[1:])
        if self.bases is not None:
            values += list(self.bases.gradient(grad))
        if self.mean_offset is not None:
            values.append(grad["mean_offset"] * self._offset_unit())
        return np.array(values + [grad[k] for k in self.likelihood], dtype=np.float64)

    def _offset_unit(self):
        """The mean offset's unit in :meth:`to_log` (:data:`OFFSET_UNIT`)."""
        return OFFSET_UNIT * self.offset_scale

    def bind(self, likelihood):
        """``likelihood`` at these values: its learnt parameters set and, with a mean
        offset, seen through the shifted latent
        (:class:`~saspa_dask.core.likelihoods.Shifted`)."""
        bound = likelihood.with_hyperparameters(self.likelihood)
        return bound if self.mean_offset is None else Shifted(bound, self.mean_offset)

    def bounds(self):
        """Log-space box: three decades either side of the data-driven ``centre`` (the
        values a fit starts from when none are given: it does not move when a retrain
        starts from the last fit's values) or, without one, of this point; stretched to
        hold this point; tighter where a likelihood parameter has a natural range
        (:data:`LIKELIHOOD_BOUNDS`); the mean offset within :data:`OFFSET_SPAN`
        target standard deviations (``offset_scale``) of the targets' centre."""
        x0 = self.to_log()
        span = _DECADES * math.log(10.0)
        middle = x0 if self.centre is None else self._centred(x0)
        bounds = [(min(c - span, x), max(c + span, x)) for c, x in zip(middle, x0)]
        if self.bases is not None:
            start = self._bases_offset()
            box = self.bases.bounds()
            bounds[start:start + len(box)] = box
        offset = x0.size - len(self.likelihood)
        if self.mean_offset is not None:
            span = OFFSET_SPAN / OFFSET_UNIT
            bounds[offset - 1] = (min(-span, x0[offset - 1]), max(span, x0[offset - 1]))
        for k, name in enumerate(self.likelihood):
            lo, hi = LIKELIHOOD_BOUNDS.get(name, (None, None))
            if name == "noise_variance" and self.noise_floor is not None:
                lo = self.noise_floor
            a, b = bounds[offset + k]
            a = a if lo is None else max(a, math.log(lo))
            bounds[offset + k] = (a, max(a, b if hi is None else min(b, math.log(hi))))
        return bounds

    def on_bounds(self, bounds, tol=1e-8):
        """Names of the learnt values on a bound of ``bounds`` (log space), except the
        noise variance on the floor the user set (there by request, not by accident)."""
        floor = None if self.noise_floor is None else math.log(self.noise_floor)
        def on_floor(name, lo):
            return name == "likelihood.noise_variance" and floor is not None and \
                lo <= floor + tol

        return [name for name, v, (lo, hi) in zip(self.names(), self.to_log(), bounds)
                if (lo is not None and v <= lo + tol and not on_floor(name, lo))
                or (hi is not None and v >= hi - tol)]

    def _centred(self, x0):
        """``x0`` with the lengthscales, signal variance and likelihood entries
        replaced by the centre's."""
        centre, out = self.centre, x0.copy()
        d = self.n_lengthscales
        out[:d] = np.log(self._learnt_lengthscales(centre.lengthscale))
        out[d] = math.log(centre.signal_variance)
        offset = x0.size - len(self.likelihood)
        for k, name in enumerate(self.likelihood):
            if name in centre.likelihood:
                out[offset + k] = math.log(centre.likelihood[name])
        return out

    def as_dict(self):
        """The scalar values (the bases, M d numbers or more, are left out)."""
        return {"lengthscale": [float(x) for x in self.lengthscale],
                "signal_variance": float(self.signal_variance),
                **({} if self.additive is None else
                   {"term_weights": [float(w) for w in self.term_weights]}),
                "blur_scale": float(self.blur_scale), "likelihood": dict(self.likelihood),
                **({} if self.mean_offset is None else {"mean_offset": self.mean_offset})}


class LearningStoppedWarning(UserWarning):
    """Learning stopped at its iteration or epoch cap, or by ``max_fit_time``, before
    its stop rule said the energy had settled (``hyperparameter_info_`` says which)."""


def learning_stopped_advice(info):
    """The warning's text for a learning ``info`` stopped by a cap or the budget, or
    None when learning ended by its rule (or did not run)."""
    if info.get("hit_time_budget"):
        return (f"the max_fit_time budget stopped learning after {info['n_iterations']} "
                "iterations, before its energy settled: the model is the values reached "
                "(raise max_fit_time)")
    if info.get("hit_iteration_cap"):
        what = ("max_epochs (stochastic learning's cap)" if info.get("method") ==
                "stochastic" else "max_hyper_iter (the optimiser's cap)")
        return (f"learning stopped at {what} after {info['n_iterations']} iterations, "
                "before its energy settled (raise the cap)")
    return None


class LearntBoundWarning(UserWarning):
    """Learning left a value on a bound of its box (the message says what to try)."""


# what a value on a bound of its box means, and what to try
_ADVICE = {
    "likelihood.noise_variance": (
        "the noise variance ran to its floor: with learnt bases, FITC (alpha=1) can "
        "explain the data by each row's residual variance instead of noise, which "
        "over-fits the noise away; try alpha=0.5 (Power EP), fewer bases, "
        "learn_bases=None, or min_noise_variance (the noise you know the targets "
        "have), and check the held-out NLPD"),
    "lengthscale": (
        "lengthscales on the box's top are inputs the model found irrelevant (harmless; "
        "such inputs can be dropped); on its bottom, inputs varying faster than the "
        "bases resolve: try more bases or standardised inputs"),
    "signal_variance": (
        "the signal variance ran to its box: in a regression, the targets may be badly "
        "scaled (standardise them) or nearly constant; in a classification, its top "
        "means (nearly) separable classes and sharp probabilities (harmless when the "
        "held-out NLP is good)"),
    "likelihood.label_noise": (
        "the label noise reached its limit: the labels look random given these inputs"),
    "term_weight": (
        "an additive kernel's term weight ran to its box, a thousandth or a thousand times "
        "the first term's: that term (or the first) explains almost nothing of the "
        "targets; its inputs can be dropped from the sum"),
    "mean_offset": (
        f"the constant prior mean ran {OFFSET_SPAN:g} target standard deviations from the "
        "targets' mean: the targets may hold outliers or a sentinel value"),
}


def _softmax(logits):
    e = np.exp(logits - logits.max())
    return e / e.sum()


def by_input_name(names, feature_names):
    """Hyperparameter names with ``lengthscale[k]`` said as the lengthscale of input
    ``k``'s column name, where the inputs have names.

    Examples
    --------
    >>> by_input_name(["lengthscale[1]", "signal_variance"], ["age", "income"])
    ["lengthscale of 'income'", 'signal_variance']
    """
    if feature_names is None:
        return list(names)
    named = []
    for name in names:
        if name.startswith("lengthscale[") and name.endswith("]"):
            k = int(name[len("lengthscale["):-1])
            if k < len(feature_names):
                name = f"lengthscale of {str(feature_names[k])!r}"
        named.append(name)
    return named


def bound_advice(names):
    """The learnt values on a bound (``names`` as :meth:`Hyperparameters.names` gives
    them) and, for each kind, what it means and what to try: one message."""
    shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    kinds = []
    for name in names:
        kind = ("lengthscale" if name.startswith("lengthscale") else
                "term_weight" if name.startswith("term_weight") else name)
        if kind in _ADVICE and _ADVICE[kind] not in kinds:
            kinds.append(_ADVICE[kind])
    advice = "; ".join(kinds)
    return f"learnt values ended on a bound of their box: {shown}" + (
        f" ({advice})" if advice else "")


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


def feature_groups_of(feature_groups, feature_names, d):
    """The inputs' lengthscale groups (:attr:`Hyperparameters.groups`) from the
    ``feature_groups`` parameter, or None when every input has its own.

    ``"one-hot"``: the inputs ``saspa ingest`` named ``column=category`` share one
    lengthscale per source column (an exchangeable kernel over its categories: two
    rows of different categories are 2 / l^2 apart in the scaled squared distance,
    rows of the same category 0); other inputs keep their own.  A sequence of ``d``
    labels: inputs with equal labels share one.

    Examples
    --------
    >>> feature_groups_of("one-hot", ["age", "city=Oslo", "city=Rome", "kind=a"], 4)
    array([0, 1, 1, 2])
    >>> feature_groups_of(["a", "b", "a"], None, 3)
    array([0, 1, 0])
    """
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
        terms = _first_appearance([str(label) for label in additive_groups])
    if terms.size != d:
        raise ValueError(f"additive_groups has {terms.size} labels for {d} inputs")
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
    start the tied learning can take)."""
    if groups is None:
        return lengthscale
    logs = np.bincount(groups, np.log(lengthscale)) / np.bincount(groups)
    return np.exp(logs)[groups]


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
