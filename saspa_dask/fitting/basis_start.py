"""Where a fit's bases start: given, K-means (blurred by family), or frequency
features (FIFGP's starts); the learnt-bases parameter object of a start; the
optimiser's restarts (their shorter lengthscales and other K-means positions).

The blur families are named in :data:`saspa_dask.core.kernels.BASIS_FAMILIES`; each
family's covariance is :func:`~saspa_dask.core.kernels.blur_covariances` and its
gradient lives with its learnt parameters (:mod:`saspa_dask.fitting.basis_parameters`).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
from sklearn.utils import check_random_state

from ..core.bases import Basis
from ..core.blur_families import blur_family
from ..core.kernels import blur_covariances
from ..engines.kmeans import kmeans
from .basis_parameters import LearntBases, LearntFeatures
from .input_groups import resolve_lengthscale

__all__ = ["check_covariance_memory", "learnt_start", "machine_memory", "restart_points",
           "restart_positions", "start_bases"]


def start_bases(X, *, n_bases, blur, bases, lengthscale, column_std, random_state,
                lazy=False, lloyd_rows=None):
    """The bases a fit starts from, and K-means' report (None when K-means did not run).

    ``blur`` is a family (already chosen when the parameter was ``"auto"``); ``bases``
    the estimator's given bases or None; ``lengthscale`` the parameter (frequencies are
    drawn at the starting lengthscales); ``lloyd_rows`` K-means' (None: its default;
    a time budget's :meth:`~saspa_dask.fitting.budget.FitBudget.lloyd_rows`)."""
    n_samples, d = X.shape
    check_covariance_memory(n_bases if bases is None else bases.means.shape[0], d, blur)
    spectral = _Spectral(lengthscale, column_std, random_state)
    if bases is not None:
        if bases.means.shape[1] != d:
            raise ValueError(f"bases have {bases.means.shape[1]} features but X has {d}")
        if bases.is_fourier:
            return _given_features(bases, blur), None
        basis, info = bases, None
    elif blur_family(blur).frequency and not blur_family(blur).centres_learnt:
        return _global_features(X, n_bases, column_std, spectral, lazy), None
    else:
        if n_bases > n_samples:
            raise ValueError(f"n_bases={n_bases} exceeds n_samples={n_samples}: use at "
                             "most one basis per training row")
        basis, info = kmeans(X, n_bases, random_state=random_state,
                             full_covariances=blur_family(blur).dense,
                             lloyd_rows=lloyd_rows)
        if basis.n_bases < n_bases:
            warnings.warn(f"K-means found {basis.n_bases} distinct clusters for "
                          f"n_bases={n_bases} (too few distinct points); using those",
                          UserWarning, stacklevel=6)
    covs = blur_covariances(basis.blur, blur)
    if not blur_family(blur).frequency:
        return Basis(basis.means, covs), info
    return spectral.features(basis.means, covs), info


class _Spectral:
    """Frequency features as FIFGP starts them: frequencies drawn from the kernel's
    spectral density at the starting lengthscales, phases uniform."""

    def __init__(self, lengthscale, column_std, random_state):
        self.lengthscale, self.column_std = lengthscale, column_std
        self.random_state = random_state

    def features(self, centres, covs):
        M, d = centres.shape
        rng = check_random_state(self.random_state)
        lengthscale = resolve_lengthscale(self.lengthscale, d, self.column_std)
        frequencies = rng.normal(size=(M, d)) / lengthscale
        return Basis(centres, covs, frequencies, rng.uniform(0, 2 * np.pi, M))


def _global_features(X, n_bases, column_std, spectral, lazy):
    """FIFGP's start: every feature centred on the inputs' mean, with one window as
    wide as the inputs' spread (the window is the features' reach: it must cover the
    data)."""
    d = X.shape[1]
    centre = np.asarray(X.mean(axis=0).compute() if lazy else X.mean(axis=0),
                        dtype=np.float64)
    spread = np.asarray(column_std, dtype=np.float64) ** 2
    # a constant input has no spread: its window is the starting lengthscale
    lengthscale = resolve_lengthscale(spectral.lengthscale, d, column_std)
    window = np.where(spread > 0, spread, lengthscale ** 2)
    covs = np.repeat(window[None], n_bases, axis=0)  # diagonals
    return spectral.features(np.repeat(centre[None], n_bases, axis=0), covs)


def _given_features(bases, blur):
    """``bases`` with frequencies, checked against ``blur``."""
    family = blur_family(blur)
    if not family.frequency:
        raise ValueError("bases with frequencies are frequency features: use "
                         "blur='fourier' or blur='fourier-global'")
    if not family.centres_learnt and np.ptp(bases.means, axis=0).max() > 0:
        raise ValueError("blur='fourier-global' features share one centre, but the "
                         "given bases' means differ: use blur='fourier'")
    return bases


def learnt_start(basis, learn, blur, lengthscale):
    """The learnt bases' parameter object at ``basis`` (None when ``learn`` is False):
    ``learn`` is ``"means"`` or ``"means+blur"``."""
    if not learn:
        return None
    if basis.is_fourier:
        return LearntFeatures(basis.means, basis.frequencies, basis.phases,
                              basis.window_variance, learn == "means+blur", lengthscale,
                              centres_learnt=blur_family(blur).centres_learnt)
    return LearntBases(basis.means, basis.blur, blur, learn == "means+blur", lengthscale)


def restart_positions(learnt, n_restarts, blur, random_state):
    """``positions(k, X)``: restart k's learnt bases, K-means on the learning rows with
    the k-th of a sequence of seeds drawn from ``random_state`` (None when the bases
    are not learnt, are frequency features, or there are no restarts)."""
    if not isinstance(learnt, LearntBases) or not n_restarts:
        return None
    seeds = check_random_state(random_state).randint(2**31 - 1, size=int(n_restarts))

    def positions(k, X):
        found, _ = kmeans(X, learnt.means.shape[0], random_state=int(seeds[k - 1]),
                          full_covariances=blur_family(blur).dense)
        if found.n_bases != learnt.means.shape[0]:  # too few distinct points
            return learnt
        return replace(learnt, means=found.means, covs=blur_covariances(found.blur, blur))
    return positions


def machine_memory():
    """This machine's memory in bytes (None where it cannot be read)."""
    import os

    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_covariance_memory(n_bases, d, blur, memory=None):
    """Refuse, before anything is allocated, a fit whose basis covariances cannot fit
    in memory: a full blur keeps M d x d matrices (and K-means as many scatter
    matrices); the other blurs keep (M, d) diagonals (:class:`~saspa_dask.core.bases.
    Basis`), so only a full blur is checked."""
    if not blur_family(blur).dense:
        return
    memory = machine_memory() if memory is None else memory
    need = 2 * int(n_bases) * int(d) ** 2 * 8
    if memory is not None and need > memory // 2:
        raise ValueError(
            f"n_bases={n_bases} with {d} inputs (blur={blur!r}): the bases' covariance "
            f"matrices take {need / 2**30:.3g} GiB ({n_bases} x {d} x {d} floats, twice), "
            f"more than half this machine's {memory / 2**30:.3g} GiB: use "
            "blur='diagonal' (kept as M x d diagonals; auto's choice above "
            "16 inputs), fewer inputs (drop or group rare one-hot columns) or fewer "
            "bases")


def restart_points(start, n_restarts, positions=None):
    """``start`` and ``n_restarts`` further starts with shorter lengthscales, spread
    geometrically from ``start.lengthscale`` down to ``start.lengthscale / sqrt(d)``,
    and, when ``positions`` is given (learnt bases), other basis positions: restart k
    starts its bases at ``positions(k)`` (K-means with another seed).

    The data-driven default start (``std * sqrt(d)``) is smooth on purpose; in many
    dimensions the evidence has other maxima at shorter lengthscales (one per input's
    standard deviation is the other usual start), which these restarts reach.  Learnt
    basis positions have maxima of their own: bases started in one corner of the data
    stay near it, so the restarts move them too.
    """
    d = start.lengthscale.size
    points = [start]
    for k in range(1, n_restarts + 1):
        factor = d ** (-0.5 * k / n_restarts)
        point = replace(start, lengthscale=start.lengthscale * factor)
        if positions is not None:
            point = replace(point, bases=positions(k))
        points.append(point)
    return points
