"""Csató & Opper's sparse online GP in whitened form: one ADF pass, a growing basis set.

The state is the whitened posterior N(mu, Sigma) over v = L^{-1} u, u the latent values
at the basis vectors (delta bases at past inputs) and L L^T = K(B, B) + jitter, as in
the rest of the engine.  A row x with whitened features phi = L^{-1} k(B, x) sees the
projection phi^T v plus an independent residual of variance gamma = s2 - |phi|^2 (its
novelty: zero when x lies in the span of the bases).  For each row, in order:

1. **Grow.**  If gamma > ``novelty_threshold`` x s2, x joins the bases: L gains the row
   [phi^T, delta] with delta^2 = gamma + jitter, v gains a coordinate with prior
   N(0, 1), and the row's features become [phi; gamma / delta] (its residual drops to
   the jitter's share).
2. **Update.**  One assumed-density-filtering step: the tilted moments of the row's
   likelihood against the current marginal N(phi^T mu, phi^T Sigma phi + gamma) give
   a rank-one update of (mu, Sigma) along Sigma phi (``ep.sites.sequential_block``,
   the engine's own sequential update with zero old sites).  This is Csató & Opper's
   update with the residual kept in the marginal and the update projected onto the
   bases.
3. **Prune.**  Past ``max_bases`` the basis with the smallest Csató-Opper score
   alpha_j^2 / (Q_jj + C_jj) is removed (alpha = L^{-T} mu, Q + C = L^{-T} Sigma
   L^{-1}: the mean weight against the posterior spread at that basis).  The removal
   is the update that minimises KL(old posterior || new) over processes on the
   remaining bases: rotate the whitened coordinates so the basis is the last one
   (refactorising K(B, B) with it moved last), then marginalise that coordinate out.
   Its mean function is Csató & Opper's closed form (``tests/test_online.py``).

With ``max_bases`` >= N and threshold 0 every row joins and the result is the exact
ADF posterior of the full GP (up to the jitter).

Several EP problems (one-vs-rest classes) share the bases: novelty depends on the
inputs only, each problem keeps its own (mu, Sigma), and a basis is pruned when its
largest score over the problems is the smallest.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cholesky, solve_triangular

from ..core.kernels import se_kernel
from .sites import sequential_block
from .whitening import Block

__all__ = ["OnlineSparseGP"]

# rows whose features are formed at once (and kept up to date as the bases change)
_SUB_ROWS = 256


class OnlineSparseGP:
    """Sparse online GP state (see the module docstring).

    Parameters
    ----------
    likelihood : likelihood object
    lengthscale : ndarray of shape (d,)
    signal_variance : float
    jitter : float
        Absolute jitter of the basis covariance.
    novelty_threshold : float
        A row joins the bases when its residual variance exceeds this times s2.
    max_bases : int
        Budget of basis vectors.
    n_problems : int, default=1
        EP problems sharing the bases (targets get one column each).
    record_sites : bool, default=False
        Keep each row's ADF site (tau, nu), the update it made against its marginal:
        the first sweep of EP, from which EP at the pass's bases can continue
        (:meth:`site_arrays`; 2 numbers per row and problem).
    """

    def __init__(self, likelihood, lengthscale, signal_variance, jitter, novelty_threshold,
                 max_bases, n_problems=1, record_sites=False):
        self.likelihood = likelihood
        self.lengthscale = np.asarray(lengthscale, dtype=np.float64)
        self.signal_variance = float(signal_variance)
        self.jitter = float(jitter)
        self.novelty_threshold = float(novelty_threshold)
        self.max_bases = int(max_bases)
        d = self.lengthscale.size
        self.bases = np.zeros((0, d))
        self.L = np.zeros((0, 0))
        # per problem: Sigma_v (Fortran order, upper triangle maintained) and mu_v
        self.sigmas = [np.zeros((0, 0), order="F") for _ in range(n_problems)]
        self.means = [np.zeros(0) for _ in range(n_problems)]
        self.counts = {"rows": 0, "added": 0, "removed": 0, "invalid": 0, "skipped": 0}
        self._sites = [] if record_sites else None

    def site_arrays(self):
        """The recorded ADF sites: (tau, nu), each of shape (n_problems, rows seen)."""
        if self._sites is None:
            raise ValueError("this pass was started without record_sites=True")
        sites = np.array(self._sites).reshape(-1, len(self.means), 2)
        return sites[:, :, 0].T.copy(), sites[:, :, 1].T.copy()

    @classmethod
    def resume(cls, likelihood, lengthscale, signal_variance, jitter, novelty_threshold,
               max_bases, bases, L, means, sigmas, counts):
        """The state a pass left (bases, their factor L, each problem's whitened mean
        and covariance, the counts), to continue it with more rows."""
        state = cls(likelihood, lengthscale, signal_variance, jitter, novelty_threshold,
                    max_bases, len(means))
        state.bases = np.array(bases, dtype=np.float64)
        state.L = np.array(L, dtype=np.float64)
        state.means = [np.array(m, dtype=np.float64) for m in means]
        state.sigmas = [np.asfortranarray(_symmetric(np.asarray(s, dtype=np.float64)))
                        for s in sigmas]
        state.counts = dict(counts)
        return state

    # -- the pass --------------------------------------------------------------------

    def add_rows(self, X, y):
        """Process rows X (n, d) with EP targets y, (n,) or (n, n_problems), in order."""
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        y = y.reshape(len(y), -1)
        for start in range(0, X.shape[0], _SUB_ROWS):
            rows = slice(start, start + _SUB_ROWS)
            self._add_block(X[rows], y[rows])

    def _add_block(self, X, y):
        phi = self._features(X)
        for i in range(X.shape[0]):
            gamma = self.signal_variance - phi[i] @ phi[i]
            if gamma > self.novelty_threshold * self.signal_variance:
                phi = self._grow(X, i, phi, gamma)
            self.counts["rows"] += 1
            sites = np.zeros((len(self.means), 2))
            if self.bases.shape[0] > 0:  # else nothing to update yet (threshold near 1)
                self._update(phi[i], y[i], sites)
            if self._sites is not None:
                self._sites.append(sites)
            if self.bases.shape[0] > self.max_bases:
                phi = self._prune(phi)

    def _update(self, phi, y, sites):
        """The ADF update of one row (features phi) in every problem; its sites are
        written into ``sites`` (problems x (tau, nu))."""
        lam = np.array([max(self.signal_variance - phi @ phi, 0.0)])
        for k, (sigma, mean) in enumerate(zip(self.sigmas, self.means)):
            tau, nu = np.zeros(1), np.zeros(1)
            _, n_invalid, n_skipped = sequential_block(
                Block(phi[None, :], lam, y[k:k + 1]), tau, nu, sigma, mean,
                self.likelihood, 1.0, self.signal_variance)
            sites[k] = tau[0], nu[0]
            self.counts["invalid"] += n_invalid
            self.counts["skipped"] += n_skipped

    def _features(self, X):
        if self.bases.shape[0] == 0:
            return np.zeros((X.shape[0], 0))
        k = se_kernel(X, self.bases, self.lengthscale, self.signal_variance)
        return solve_triangular(self.L, k.T, lower=True, check_finite=False).T

    def _grow(self, X, i, phi, gamma):
        """Row i of X joins the bases; the block's features gain its coordinate."""
        m = self.bases.shape[0]
        delta = np.sqrt(gamma + self.jitter)
        L = np.zeros((m + 1, m + 1))
        L[:m, :m], L[m, :m], L[m, m] = self.L, phi[i], delta
        self.L = L
        for k, sigma in enumerate(self.sigmas):
            grown = np.zeros((m + 1, m + 1), order="F")
            grown[:m, :m] = _symmetric(sigma)
            grown[m, m] = 1.0  # the new whitened coordinate's prior
            self.sigmas[k], self.means[k] = grown, np.append(self.means[k], 0.0)
        self.bases = np.vstack([self.bases, X[i]])
        k_new = se_kernel(X, X[i:i + 1], self.lengthscale, self.signal_variance)[:, 0]
        self.counts["added"] += 1
        return np.column_stack([phi, (k_new - phi @ phi[i]) / delta])

    def scores(self):
        """Csató-Opper scores alpha_j^2 / (Q_jj + C_jj) of the bases, the largest over
        the problems."""
        best = None
        for sigma, mean in zip(self.sigmas, self.means):
            alpha = solve_triangular(self.L, mean, lower=True, trans="T", check_finite=False)
            # diag(L^{-T} Sigma L^{-1}) by two triangular solves
            left = solve_triangular(self.L, _symmetric(sigma), lower=True, trans="T",
                                    check_finite=False)
            spread = solve_triangular(self.L, left.T, lower=True, trans="T",
                                      check_finite=False)
            score = alpha * alpha / np.diag(spread)
            best = score if best is None else np.maximum(best, score)
        return best

    def _prune(self, phi):
        """Remove the lowest-scoring basis (KL-optimal); returns the block's features
        in the new coordinates."""
        j = int(np.argmin(self.scores()))
        m = self.bases.shape[0]
        order = np.r_[np.arange(j), np.arange(j + 1, m), j]
        K = (self.L @ self.L.T)[np.ix_(order, order)]  # K(B, B) + jitter, j moved last
        L_new = cholesky(K, lower=True, check_finite=False)
        # v' = T v with T = L_new^{-1} P L orthogonal: the same posterior, rotated
        T = solve_triangular(L_new, self.L[order], lower=True, check_finite=False)
        for k, (sigma, mean) in enumerate(zip(self.sigmas, self.means)):
            self.means[k] = (T @ mean)[:-1]
            self.sigmas[k] = np.asfortranarray((T @ _symmetric(sigma) @ T.T)[:-1, :-1])
        self.L = np.ascontiguousarray(L_new[:-1, :-1])
        self.bases = self.bases[order[:-1]]
        self.counts["removed"] += 1
        return (phi @ T.T)[:, :-1]

    def posterior_covariance(self, problem=0):
        """Sigma_v of a problem, symmetric."""
        return _symmetric(self.sigmas[problem])

    @property
    def mean(self):
        """mu_v of a one-problem state."""
        return self.means[0]


def _symmetric(sigma):
    """The full matrix from the upper triangle ``sequential_block`` maintains."""
    upper = np.triu(sigma)
    return upper + np.triu(upper, 1).T
