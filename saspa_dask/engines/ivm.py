"""The informative vector machine (Lawrence, Seeger & Herbrich, 2003) as a basis selector.

IVM builds a sparse GP posterior by assumed-density filtering on an active set chosen
greedily: at each step every remaining row's ADF update is scored by the entropy
reduction of its own marginal,

    dH_i = -1/2 log(1 - c_i s_i),

(s_i its current marginal variance, c_i = -d^2 log Z_i / d m^2 of its tilted moments,
so that the variance after the update is s_i (1 - c_i s_i)), and the row with the
largest reduction joins.  The posterior over all N latents is kept as
Sigma = K - M^T M with one row of M per active row, so a step costs O(N k) and the
selection of d rows O(N d^2), plus one kernel column per step.

The active rows are the bases of the IVM posterior (delta bases); their ADF sites
give it.  :func:`ivm_select` returns both; :func:`ivm_bases` the bases alone, e.g. to
start a SASPA fit (``SASPAClassifier(bases=ivm_bases(...), blur="delta")``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.bases import Basis
from ..core.kernels import se_kernel

__all__ = ["IVMSelection", "ivm_bases", "ivm_select"]


@dataclass
class IVMSelection:
    """What :func:`ivm_select` chose.

    Attributes
    ----------
    indices : ndarray of int, shape (k,)
        Active rows in the order they joined.
    tau, nu : ndarray of shape (k,)
        Their ADF sites (natural parameters) at the time they joined.
    entropy_reductions : ndarray of shape (k,)
        dH of each chosen row when it joined.
    """

    indices: np.ndarray
    tau: np.ndarray
    nu: np.ndarray
    entropy_reductions: np.ndarray


def ivm_select(X, y, n_active, likelihood, lengthscale, signal_variance):
    """Greedy IVM selection of ``n_active`` rows (module docstring).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    y : ndarray of shape (n,)
        EP targets (labels +-1, or centred regression targets).
    n_active : int
    likelihood : likelihood object (``tilted``)
    lengthscale : ndarray of shape (d,)
    signal_variance : float

    Returns
    -------
    IVMSelection
        Fewer than ``n_active`` rows when no remaining row reduces the entropy (all
        rows explained, or only non-log-concave updates that would widen it).
    """
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = X.shape[0]
    n_active = min(int(n_active), n)
    mean = np.zeros(n)
    var = np.full(n, float(signal_variance))
    rows_M = np.zeros((n_active, n))
    free = np.ones(n, dtype=bool)
    chosen, taus, nus, gains = [], [], [], []
    for k in range(n_active):
        _, a, c = likelihood.tilted(y, mean, var)
        shrink = c * var
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = np.where(free & (shrink > 0) & (shrink < 1), -0.5 * np.log1p(-shrink),
                            -np.inf)
        j = int(np.argmax(gain))
        if not np.isfinite(gain[j]):
            break
        # column j of Sigma = K - M^T M: one kernel column, O(N k)
        column = (se_kernel(X, X[j:j + 1], lengthscale, signal_variance)[:, 0]
                  - rows_M[:k].T @ rows_M[:k, j])
        denom = 1.0 - c[j] * var[j]
        taus.append(c[j] / denom)
        nus.append((a[j] + c[j] * mean[j]) / denom)
        mean = mean + a[j] * column
        rows_M[k] = np.sqrt(c[j]) * column
        var = np.maximum(var - c[j] * column * column, 0.0)
        free[j] = False
        chosen.append(j)
        gains.append(gain[j])
    return IVMSelection(np.array(chosen, dtype=np.intp), np.array(taus), np.array(nus),
                        np.array(gains))


def ivm_bases(X, y, n_bases, likelihood, lengthscale, signal_variance):
    """The rows IVM selects, as delta bases (see :func:`ivm_select`)."""
    selection = ivm_select(X, y, n_bases, likelihood, lengthscale, signal_variance)
    return Basis(np.asarray(X, dtype=np.float64)[selection.indices])
