"""Sites for rows a fitted model has not seen: one ADF pass or one EP update.

Both passes read the new rows in pieces the driver can hold (dask and zarr input one
row chunk at a time) against a fixed :class:`~saspa_dask.fitting.posterior.FittedPosterior`
and leave it unchanged: :func:`adf_pass` is ``partial_fit``'s assumed-density filtering
(rank-one updates, row after row), :func:`update_pass` one undamped parallel EP update
of every new row against the fitted posterior (the start ``saspa retrain`` uses).
"""

from __future__ import annotations

import dask
import numpy as np

from ..engines.chunks import as_dask, is_lazy
from ..core.likelihoods import powered
from ..ep.posterior import Posterior
from ..ep.sites import parallel_chunk, sequential_chunk
from ..ep.whitening import relabel_block
from .posterior import stacked

__all__ = ["adf_pass", "row_blocks", "row_slices", "update_pass"]


def row_slices(X, targets):
    """(X, targets) in pieces the driver can hold: dask and zarr inputs one row chunk
    at a time (each computed once), NumPy input whole."""
    if not is_lazy(X):
        yield np.asarray(X, dtype=np.float64), np.asarray(targets, dtype=np.float64)
        return
    X = as_dask(X)
    start = 0
    for rows in X.chunks[0]:
        yield dask.compute(X[start:start + rows], targets[start:start + rows])
        start += rows


def row_blocks(fitted, X, targets, block_rows):
    """Whitened blocks of rows X (with their EP targets) under a fitted posterior."""
    for X_part, t_part in row_slices(X, targets):
        for start in range(0, X_part.shape[0], block_rows):
            stop = min(start + block_rows, X_part.shape[0])
            yield fitted.block(X_part[start:stop], t_part[start:stop])


def _problem_block(block, labels, k):
    return block if labels is None else relabel_block(block, labels[k])


def adf_pass(fitted, X, targets, labels, block_rows, alpha=1.0):
    """One assumed-density-filtering pass over rows X against ``fitted``.

    Returns
    -------
    posteriors : list of Posterior
        The posteriors with the rows added (one per EP problem).
    tau, nu : ndarray
        The rows' sites (a leading problem axis for one-vs-rest).
    n_invalid, n_skipped : int
    """
    # the model's EP power: new rows' sites are power-EP sites like the others
    likelihood, s2 = powered(fitted.likelihood_object, alpha), fitted.signal_variance
    states = [(post.covariance(), post.mean, np.zeros_like(post.chol), np.zeros_like(post.mean),
               [], []) for post in fitted.posteriors]
    n_invalid = n_skipped = 0
    for block in row_blocks(fitted, X, targets, block_rows):
        for k, (sigma, mean, A_new, b_new, tau_k, nu_k) in enumerate(states):
            block_k = _problem_block(block, labels, k)
            zeros = np.zeros(block_k.y.shape[0])
            tau, nu, sigma, mean, summary = sequential_chunk(block_k, zeros, zeros, sigma, mean,
                                                             likelihood, 1.0, s2)
            tau_k.append(tau)
            nu_k.append(nu)
            states[k] = (sigma, mean, A_new + summary.A, b_new + summary.b, tau_k, nu_k)
            n_invalid += summary.n_invalid
            n_skipped += summary.n_skipped
    posteriors, taus, nus = [], [], []
    for post, (_, _, A_new, b_new, tau_k, nu_k) in zip(fitted.posteriors, states):
        # Old sites are unchanged, so P and h simply gain the new rows' sums (exact, no
        # drift from the rank-one updates).
        P_minus_I = post.chol @ post.chol.T - np.eye(A_new.shape[0])
        posteriors.append(Posterior.from_statistics(P_minus_I + A_new, post.h + b_new))
        taus.append(_concatenated(tau_k))
        nus.append(_concatenated(nu_k))
    return posteriors, stacked(taus), stacked(nus), n_invalid, n_skipped


def update_pass(fitted, X, targets, labels, block_rows, alpha=1.0):
    """One undamped parallel EP update of rows X, from zero sites, against ``fitted``:
    ``(tau, nu, n_invalid)`` (a leading problem axis for one-vs-rest)."""
    # the model's EP power: new rows' sites are power-EP sites like the others
    likelihood, s2 = powered(fitted.likelihood_object, alpha), fitted.signal_variance
    taus = [[] for _ in fitted.posteriors]
    nus = [[] for _ in fitted.posteriors]
    n_invalid = 0
    for block in row_blocks(fitted, X, targets, block_rows):
        zeros = np.zeros(block.y.shape[0])
        for k, post in enumerate(fitted.posteriors):
            tau, nu, summary = parallel_chunk(_problem_block(block, labels, k), zeros, zeros,
                                              post, likelihood, 1.0, s2)
            taus[k].append(tau)
            nus[k].append(nu)
            n_invalid += summary.n_invalid
    return (stacked([_concatenated(t) for t in taus]),
            stacked([_concatenated(n) for n in nus]), n_invalid)


def _concatenated(parts):
    return np.concatenate(parts) if parts else np.zeros(0)
