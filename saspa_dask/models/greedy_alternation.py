"""Greedy basis selection alternating with hyperparameter learning.

Seeger, Williams & Lawrence (2003) and Smola & Bartlett (2001) select a sparse GP's
support greedily at the current hyperparameters and learn the hyperparameters with the
support fixed, in turn.  :func:`greedy_fit` does so for regression: each round selects
``n_bases`` training rows by :func:`~saspa_dask.engines.greedy.greedy_select` (by the
DTC evidence of the targets, or by information gain) at the kernel and noise the last
round learnt, then fits a :class:`~saspa_dask.models.regressor.SASPARegressor` with
delta bases at those rows, learning its kernel, noise and constant mean by the EP
evidence from the last round's values (the rows stay where they were chosen).  A
selection scores ``n_candidates`` random rows a step: O(N M) per candidate and step,
so for M bases about N M^2 n_candidates operations; a fit costs what a fit with random
rows as bases costs.
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_array, check_random_state
from sklearn.utils.validation import column_or_1d

from ..core.threads import single_scipy_thread
from ..core.bases import Basis
from ..core.likelihoods import LIKELIHOODS
from ..engines.greedy import greedy_select
from ..fitting.input_groups import resolve_lengthscale
from .regressor import SASPARegressor

__all__ = ["greedy_fit"]


@single_scipy_thread
def greedy_fit(X, y, n_bases, *, rounds=3, criterion="evidence", n_candidates=59,
               random_state=None, **params):
    """Select bases greedily and learn the kernel, in turn; the best round's model.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
    y : array-like of shape (n_samples,)
    n_bases : int
        Rows selected as (delta) bases each round.
    rounds : int, default=3
        Selections, each followed by learning.
    criterion : {"evidence", "objective", "information_gain"}, default="evidence"
        ``"evidence"``: the rise of the DTC log marginal likelihood of the centred
        targets (y-aware); ``"objective"``: Smola & Bartlett's objective reduction
        (y-aware, without the evidence's complexity term); ``"information_gain"``:
        Seeger, Williams & Lawrence's (ignores y).  See
        :mod:`saspa_dask.engines.greedy`.
    n_candidates : int or None, default=59
        Rows scored per selection step (None: every remaining row).
    random_state : int, RandomState or None
        Seeds the candidates.
    **params
        Further :class:`SASPARegressor` parameters (gaussian likelihood).
        ``lengthscale``, ``signal_variance`` and ``noise_variance`` are the first
        selection's kernel (default: the estimator's data-driven starts).

    Returns
    -------
    model : SASPARegressor
        The fitted round with the highest EP log evidence (``log_evidence_``).
    history : list of dict
        Per round: its fitted ``model``, ``indices`` (rows chosen, in order),
        ``log_evidence``, the kernel
        and noise it selected at (``selected_at``) and learnt (``learnt``), the
        learnt ``y_mean`` (the next selection's centre), ``select_seconds``,
        ``fit_seconds``.

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import greedy_fit
    >>> X = np.random.default_rng(0).uniform(-3, 3, size=(200, 1))
    >>> y = np.sin(2 * X[:, 0]) + 0.1 * np.random.default_rng(1).normal(size=200)
    >>> model, history = greedy_fit(X, y, 8, rounds=2, random_state=0)
    >>> len(history), model.bases_.n_bases
    (2, 8)
    """
    X = check_array(X, dtype=np.float64)
    y = column_or_1d(y).astype(np.float64)
    family = LIKELIHOODS.get(params.get("likelihood", "gaussian"))
    if family is None or not family.gaussian_observations:
        raise ValueError("greedy_fit selects by the Gaussian likelihood's DTC evidence: "
                         f"likelihood must be gaussian, got {params['likelihood']!r}")
    if int(rounds) < 1:
        raise ValueError(f"rounds must be at least 1, got {rounds}")
    rng = check_random_state(random_state)
    kernel = _starting_kernel(X, y, params)
    template = SASPARegressor(n_bases=n_bases, blur="delta", learn_bases=False, **params)
    centre, history, best = float(y.mean()), [], None
    for _ in range(int(rounds)):
        start = time.perf_counter()
        indices, _ = greedy_select(X, n_bases, kernel["lengthscale"], kernel["signal_variance"],
                                   kernel["noise_variance"], n_candidates=n_candidates,
                                   random_state=rng, y=y - centre, criterion=criterion)
        selected = time.perf_counter()
        model = clone(template).set_params(bases=Basis(X[indices]), **kernel).fit(X, y)
        history.append({"model": model, "indices": indices,
                        "log_evidence": float(model.log_evidence_),
                        "selected_at": dict(kernel),
                        "select_seconds": selected - start,
                        "fit_seconds": time.perf_counter() - selected})
        kernel = {"lengthscale": model.lengthscale_,
                  "signal_variance": model.signal_variance_,
                  "noise_variance": model.noise_variance_}
        centre = float(model.y_mean_)
        history[-1].update(learnt=dict(kernel), y_mean=centre)
        if best is None or model.log_evidence_ > best.log_evidence_:
            best = model
    return best, history


def _starting_kernel(X, y, params):
    """The first selection's kernel and noise: those given in ``params`` (taken out of
    it), else the regressor's data-driven starts."""
    spread = float(np.var(y)) or 1.0
    return {"lengthscale": resolve_lengthscale(params.pop("lengthscale", None), X.shape[1],
                                               X.std(axis=0)),
            "signal_variance": params.pop("signal_variance", None) or spread,
            "noise_variance": params.pop("noise_variance", None) or 0.1 * spread}
