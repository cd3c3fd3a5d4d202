"""Greedy support selection: by information gain (Seeger, Williams & Lawrence, 2003),
by the evidence, or by Smola & Bartlett's objective reduction (both y-aware).

Forward selection for the projected-process (DTC) regression posterior: bases are
added one at a time, each the candidate row whose own observation is most informative
about its latent value under the current posterior given all rows,

    gain_i = 1/2 log(1 + v_i / noise),   v_i = s2 - |phi_i|^2 + phi_i^T Sigma phi_i,

v_i the current predictive variance of f(x_i) (DTC keeps the residual s2 - |phi_i|^2
at prediction), phi_i = L^{-1} k(B, x_i) its whitened features and Sigma the whitened
DTC posterior covariance (I + Phi^T Phi / noise)^{-1} over all N rows.  As Smola &
Bartlett do, each step scores a random subset of ``n_candidates`` rows (59 finds one of
the best 5 % with probability 0.95); ``n_candidates=None`` scores every row.

Information gain ignores y: for the Gaussian likelihood it depends on the inputs
only, so on data with local structure it spreads bases as random rows would.
``criterion="evidence"`` scores a candidate by what it adds to the DTC log marginal
likelihood log N(y | 0, Phi Phi^T + noise I) of the centred targets (the objective
reduction Smola & Bartlett select by, in its evidence form).  With A = noise I +
Phi^T Phi and the candidate's new whitened column psi, the Schur complement
s = psi^T psi + noise - u^T A^-1 u (u = Phi^T psi) gives the gain in closed form,

    d log p(y) = -1/2 log(s / noise) + (psi^T y - u^T A^-1 Phi^T y)^2 / (2 s noise),

O(N m) per candidate, as information gain costs.  ``criterion="objective"`` is Smola &
Bartlett's own (2001): the fall of the minimum of their quadratic objective
Q(a) = 1/2 a^T (noise K_BB + K_BX K_XB) a - y^T K_XB a (the negative log posterior of
the subset-of-regressors mean's weights, up to constants) over the weights of the
chosen bases.  In whitened form its minimum is -1/2 y^T Phi A^-1 Phi^T y, and a
candidate lowers it by

    d Q = (psi^T y - u^T A^-1 Phi^T y)^2 / (2 s),

the evidence gain's data-fit term times the noise, without its -1/2 log(s / noise)
complexity term: the objective sees only how much of y the new column explains.

The whitened features of every row are kept as the Cholesky factor L of K(B, B) grows
(one new column per step, O(N m)), and Sigma is refactorised per step (O(N m^2) for
Phi^T Phi, O(m^3) for the factor): O(N M^3) for M bases, for M up to a few hundred.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from sklearn.utils import check_random_state

from ..core.threads import single_scipy_thread
from ..core.bases import Basis
from ..core.kernels import se_kernel

__all__ = ["CRITERIA", "greedy_bases", "greedy_select"]

#: What a greedy selection step scores candidates by
CRITERIA = ("information_gain", "evidence", "objective")


def greedy_select(X, n_bases, lengthscale, signal_variance, noise_variance, *,
                  n_candidates=59, jitter=1e-8, random_state=None, y=None,
                  criterion="information_gain"):
    """Rows chosen as bases by information gain or by the evidence (module docstring).

    Parameters
    ----------
    X : ndarray of shape (n, d)
    n_bases : int
    lengthscale : ndarray of shape (d,)
    signal_variance, noise_variance : float
    n_candidates : int or None, default=59
        Rows scored per step (None: all remaining rows).
    jitter : float, default=1e-8
        Relative to the signal variance, on K(B, B).
    random_state : int, RandomState or None
    y : ndarray of shape (n,), optional
        Centred regression targets (needed by the y-aware criteria).
    criterion : {"information_gain", "evidence", "objective"}, default="information_gain"
        ``"objective"``: Smola & Bartlett's objective reduction (module docstring).

    Returns
    -------
    indices : ndarray of int, shape (k,)
        In the order they joined (k < n_bases only when every row is chosen).
    gains : ndarray of shape (k,)
        Each one's information gain (or evidence gain) when it joined.
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {', '.join(map(repr, CRITERIA))}, "
                         f"got {criterion!r}")
    if criterion != "information_gain":
        if y is None:
            raise ValueError(f"criterion={criterion!r} needs the targets y")
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (n,):
            raise ValueError(f"y has shape {y.shape}, expected ({n},)")
    rng = check_random_state(random_state)
    s2, noise = float(signal_variance), float(noise_variance)
    phi = np.zeros((n, 0))
    free = np.ones(n, dtype=bool)
    chosen, gains = [], []
    for _ in range(min(int(n_bases), n)):
        pool = np.flatnonzero(free)
        if n_candidates is not None and pool.size > n_candidates:
            pool = rng.choice(pool, n_candidates, replace=False)
        if criterion != "information_gain":
            s, c = _schur_terms(X, y, phi, pool, lengthscale, s2, noise, jitter * s2)
            score = (0.5 * c * c / s if criterion == "objective"
                     else -0.5 * np.log(s / noise) + 0.5 * c * c / (s * noise))
        else:
            score = 0.5 * np.log1p(_predictive_variance(phi, pool, s2, noise) / noise)
        best = int(np.argmax(score))
        j = int(pool[best])
        chosen.append(j)
        gains.append(score[best])
        phi = _grow(X, j, phi, lengthscale, s2, jitter * s2)
        free[j] = False
    return np.array(chosen, dtype=np.intp), np.array(gains)


def _predictive_variance(phi, pool, s2, noise):
    """v_i of the candidate rows under the DTC posterior given all rows."""
    cand = phi[pool]
    residual = s2 - np.einsum("ij,ij->i", cand, cand)
    if phi.shape[1] == 0:
        return residual
    R = cholesky(np.eye(phi.shape[1]) + phi.T @ phi / noise, lower=True,
                 check_finite=False)
    W = solve_triangular(R, cand.T, lower=True, check_finite=False)
    return np.maximum(residual, 0.0) + np.einsum("ji,ji->i", W, W)


def _schur_terms(X, y, phi, pool, lengthscale, s2, noise, jitter):
    """(s, c) of each candidate row: the Schur complement of its column and the part
    of y it explains beyond the chosen bases (module docstring)."""
    cand = phi[pool]
    delta = np.sqrt(np.maximum(s2 - np.einsum("ij,ij->i", cand, cand), 0.0) + jitter)
    psi = (se_kernel(X, X[pool], lengthscale, s2) - phi @ cand.T) / delta  # (n, c)
    s = np.einsum("ij,ij->j", psi, psi) + noise
    c = psi.T @ y
    if phi.shape[1]:
        R = cholesky(noise * np.eye(phi.shape[1]) + phi.T @ phi, lower=True,
                     check_finite=False)
        w = solve_triangular(R, phi.T @ psi, lower=True, check_finite=False)
        z = solve_triangular(R, phi.T @ y, lower=True, check_finite=False)
        s = s - np.einsum("ij,ij->j", w, w)
        c = c - w.T @ z
    return s, c


def _grow(X, j, phi, lengthscale, s2, jitter):
    """Row j joins the bases: every row's whitened features gain the column the new
    row [phi_j^T, delta] of the Cholesky factor of K(B, B) gives them."""
    phi_j = phi[j].copy()
    delta = np.sqrt(max(s2 - phi_j @ phi_j, 0.0) + jitter)
    column = (se_kernel(X, X[j:j + 1], lengthscale, s2)[:, 0] - phi @ phi_j) / delta
    return np.column_stack([phi, column])


@single_scipy_thread
def greedy_bases(X, n_bases, lengthscale, signal_variance, noise_variance, *,
                 n_candidates=59, jitter=1e-8, random_state=None, y=None,
                 criterion="information_gain"):
    """The rows :func:`greedy_select` chooses, as delta bases (e.g. for
    ``SASPARegressor(bases=greedy_bases(...), blur="delta")``).

    Examples
    --------
    >>> import numpy as np
    >>> from saspa_dask import greedy_bases
    >>> X = np.random.default_rng(0).uniform(-3, 3, size=(300, 1))
    >>> greedy_bases(X, 8, np.ones(1), 1.0, 0.01, random_state=0).n_bases
    8
    """
    indices, _ = greedy_select(X, n_bases, lengthscale, signal_variance, noise_variance,
                               n_candidates=n_candidates, jitter=jitter,
                               random_state=random_state, y=y, criterion=criterion)
    return Basis(np.asarray(X, dtype=np.float64)[indices])

