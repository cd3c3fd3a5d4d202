"""One row chunk's work outside Dask: its whitened block under a fitted model, and the
EP pass a chunk task runs on it."""

from __future__ import annotations

from saspa_dask.core.likelihoods import Probit
from saspa_dask.ep.sites import parallel_chunk
from saspa_dask.ep.whitening import make_block


def fitted_block(fitted, X, labels):
    """The chunk's block (``make_block``) under ``fitted``'s bases, kernel and whitening
    (a ``fitted_posterior_``); ``labels`` +-1."""
    basis = fitted.basis
    return make_block(X, labels, basis.means, basis.blur, fitted.lengthscale,
                      fitted.signal_variance, fitted.whitening, fitted.approximation,
                      basis.frequencies, basis.phases, fitted.kernel)


def task_pass(block, fitted, tau, nu):
    """One parallel EP pass over the block at ``fitted``'s first posterior, probit, as a
    Dask chunk task runs it (one BLAS thread: the marginals as a triangular product)."""
    return parallel_chunk(block, tau, nu, fitted.posteriors[0], Probit(), 1.0,
                          fitted.signal_variance, triangular=True)
