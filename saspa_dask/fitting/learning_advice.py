"""What learning tells the user when it ended short of its stop rule or on a bound:
the warnings, and the advice each says."""

from __future__ import annotations

from .hyperparameters import OFFSET_SPAN

__all__ = ["LearningStoppedWarning", "LearntBoundWarning", "bound_advice", "by_input_name",
           "learning_state", "learning_stopped_advice"]


class LearningStoppedWarning(UserWarning):
    """Learning stopped at its iteration or epoch cap, or by ``max_fit_time``, before
    its stop rule said the energy had settled (``hyperparameter_info_`` says which)."""


def learning_state(info):
    """How learning ended, in a word or two, from a fit's ``hyperparameter_info_``:
    ``converged``, ``stopped-by-budget`` (the time budget), ``stopped-at-cap`` (an
    iteration or epoch cap), ``fixed`` (no learning), or the optimiser's stop reason."""
    info = info or {}
    if "stop_reason" not in info:
        return "fixed"
    if info.get("hit_time_budget"):
        return "stopped-by-budget"
    if info.get("hit_iteration_cap"):
        return "stopped-at-cap"
    return "converged" if info.get("converged", True) else info["stop_reason"]


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
