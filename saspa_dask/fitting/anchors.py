"""The state stochastic learning keeps of a point: the global approximation of every
row's sites (:class:`GlobalSums`), and a point with its posteriors and sites whose
gradient terms a minibatch's can be taken against (:class:`PointState`: the current
point, or an epoch's anchor, :mod:`saspa_dask.fitting.stochastic`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.linalg import solve_triangular

from ..ep.whitening import make_block
from .gradient import assemble_gradient, gradient_chunk, kernel_terms

__all__ = ["GlobalSums", "PointState", "fourier_terms", "scaled_summary"]


@dataclass
class GlobalSums:
    """One problem's global approximation: the site sums A = sum tau_i phi_i phi_i^T
    and b = sum nu_i phi_i of every row, in the whitened coordinates v = L^{-1} u of
    the kernel they were last used with (``L``).  When the kernel moves to L', the
    same sums on u read T^T A T and T^T b with T = L^{-1} L' (close to I for a small
    step, so nothing is lost to the conditioning of L; a round trip through u would
    multiply round-off by cond(L))."""

    A: np.ndarray
    b: np.ndarray
    L: np.ndarray

    def moved_to(self, L):
        """(A, b) in the coordinates of ``L``."""
        if L is self.L:
            return self.A, self.b
        T = solve_triangular(self.L, L, lower=True, check_finite=False)
        return T.T @ self.A @ T, T.T @ self.b


class PointState:
    """A point of learning with what its gradient terms need: the kernel, the global
    posteriors, every row's sites (the current ones, or an anchor's copies)."""

    def __init__(self, learner, hyper, basis, L, posteriors, tau, nu):
        self.learner, self.hyper, self.basis, self.L = learner, hyper, basis, L
        self.posteriors, self.tau, self.nu = posteriors, tau, nu
        self.full_gradient, self.energy = None, float("nan")

    def summary(self, rows, X, y, block, scale, terms=None):
        """``scale`` times the rows' gradient sums at this point, every problem merged;
        each problem's evidence terms added to ``terms`` (its energy's row sums)."""
        hyper, basis, L = self.hyper, self.basis, self.L
        if block is None:
            block = make_block(X, y, basis.means, basis.blur, hyper.lengthscale,
                               hyper.signal_variance, L, self.learner.trainer.approximation,
                               basis.frequencies, basis.phases, hyper.kernel_spec)
        lik = hyper.bind(self.learner.likelihood)
        full, total = self.learner.trainer.full_moments(hyper), None
        for k, problem in enumerate(self.learner._problems(block)):
            summary = gradient_chunk(
                X, problem, self.tau[k][rows], self.nu[k][rows], self.posteriors[k], lik, L,
                basis.means, hyper.lengthscale, full, fourier_terms(basis, hyper),
                kernel_terms(basis, hyper))
            if terms is not None:
                terms[k] += summary.evidence_terms
            summary = scaled_summary(summary, scale)
            total = summary if total is None else total.merge(summary)
        return total

    def vector(self, summary):
        return self.hyper.gradient_vector(assemble_gradient(summary, self.basis, self.hyper,
                                                            self.L))

    def minibatch_gradient(self, rows, X_B, y_B, block=None):
        """N/b times the minibatch's gradient sum at this point, as a vector."""
        return self.vector(self.summary(rows, X_B, y_B, block,
                                        self.learner.N / rows.size))


def scaled_summary(summary, factor):
    """A gradient summary of a minibatch as an estimate of all rows' sums."""
    return replace(summary, m0=summary.m0 * factor, m1=summary.m1 * factor,
                   m2=summary.m2 * factor, A=summary.A * factor,
                   g_sum=summary.g_sum * factor,
                   likelihood={k: v * factor for k, v in summary.likelihood.items()},
                   evidence_terms=summary.evidence_terms * factor,
                   kt_sum=summary.kt_sum * factor,
                   s0=None if summary.s0 is None else summary.s0 * factor,
                   s1=None if summary.s1 is None else summary.s1 * factor)


def fourier_terms(basis, hyper):
    """What the gradient chunks need of frequency features (None for blurred bases)."""
    if not basis.is_fourier:
        return None
    return (basis.frequencies, basis.phases, basis.window_variance, hyper.signal_variance)
