"""The EP evidence's gradient with respect to the hyperparameters, as per-chunk sums.

Gradient at converged sites
---------------------------
log Z_EP = F + sum_i log C_i with F = -1/2 log|P| + 1/2 h^T mu_v (the Gaussian sites'
normaliser) and C_i = Z_i / (Gaussian site against the cavity).  At an EP fixed point
the site parameters are stationary points of log Z_EP, so its total derivative with
respect to a hyperparameter theta is the partial one with (tau, nu) held fixed; and
there, because the tilted and the approximate marginal share their first two moments,
the terms through the cavities cancel.  What is left (with G_i the row below):

    d log Z_EP = sum_i G_i^T d phi_i  +  sum_i g_i d s2  +  sum_i d log Z_i / d theta_lik

    G_i = (nu_i - tau_i m_i) mu_v - tau_i Sigma_v phi_i - 2 g_i phi_i,
    g_i = d log Z_i / d v = (a_i^2 - c_i) / 2     (heat equation: Z is smoothed by N)

where the -2 g_i phi_i and g_i d s2 parts come from the residual lam_i = s2 - |phi_i|^2
that the likelihood sees.  With Phi = Kt L^{-T}:

    sum_i G_i^T d phi_i = <G L^{-1}, dKt> - <L^{-T} sym(G^T Phi) L^{-1}, dKh>

(sym: strictly-lower part mirrored plus half the diagonal, from d L = L tril_half(...)).
Every piece is a per-chunk sum: the weights E = (G L^{-1}) o Kt reduce to weighted
moments of the inputs (M d^2 floats a chunk), and G^T Phi is M x M, so a gradient pass
costs about three sweeps and the driver's share is O(M^2 d^2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular

from ..core.bases import Basis
from ..core.fourier import (fourier_covariance_gradient, fourier_cross_gradient,
                            fourier_moments, fourier_parts)
from ..core.kernel_gradients import (basis_covariance_gradient, cross_covariance_gradient,
                                     cross_moments, mixture_covariance_gradient, summed)
from ..core.kernel_profiles import kernel_named
from ..core.kernel_sums import AdditiveKernel, restrict_blur
from ..core.kernels import (basis_covariance, cross_covariance_terms, kernel_form,
                            mixture_factors, scaled_sq_distances)
from ..core.row_features import raw_rows
from ..ep.sites import SUB_ROWS, cavities, evidence_site_terms

__all__ = ["GradientSummary", "KernelTerms", "assemble_gradient", "gradient_chunk",
           "kernel_terms"]


@dataclass
class GradientSummary:
    """Per-chunk sums for the evidence gradient; ``merge`` makes a tree reduction.

    For blurred bases the moments have a leading axis of kernel terms
    (:func:`_kernel_terms`: one for SE); ``kt_sum`` is sum E = <G L^{-1}, Kt>, the
    signal variance's share (Kt is proportional to s2)."""

    m0: np.ndarray
    m1: np.ndarray
    m2: np.ndarray
    A: np.ndarray
    g_sum: float
    likelihood: dict
    evidence_terms: float
    n_invalid: int
    kt_sum: float
    # frequency features: the sine-weighted moments (None for blurred bases)
    s0: np.ndarray | None = None
    s1: np.ndarray | None = None

    def merge(self, other):
        return GradientSummary(
            self.m0 + other.m0, self.m1 + other.m1, self.m2 + other.m2, self.A + other.A,
            self.g_sum + other.g_sum,
            {k: self.likelihood[k] + other.likelihood[k] for k in self.likelihood},
            self.evidence_terms + other.evidence_terms, self.n_invalid + other.n_invalid,
            self.kt_sum + other.kt_sum,
            None if self.s0 is None else self.s0 + other.s0,
            None if self.s1 is None else self.s1 + other.s1)


class KernelTerms(NamedTuple):
    """What the chunks need of a kernel other than SE, prepared once per gradient pass
    on the driver: its profile, its form at these bases
    (:func:`~saspa_dask.core.kernels.kernel_form`), the signal variance, and for a
    mixture its :func:`~saspa_dask.core.kernels.mixture_factors` (each term's Kt
    coefficients; None for the exact form)."""

    profile: object
    form: str
    signal_variance: float
    factors: object = None


def kernel_terms(basis, hyper):
    """The ``kernel`` argument of :func:`gradient_chunk` at ``hyper``: None for SE.
    For an additive kernel, form ``"additive"`` with, per term, its inputs and its own
    :class:`KernelTerms` on them (signal variance s2 w_g; SE as a one-node mixture, so
    that each term's Kt is at hand for its moments)."""
    spec = hyper.kernel_spec
    if isinstance(spec, AdditiveKernel):
        return KernelTerms(kernel_named(spec.shape), "additive", hyper.signal_variance, [
            (inputs, _term_kernel(basis.means[:, inputs], restrict_blur(basis.blur, inputs),
                                  hyper.lengthscale[inputs], hyper.signal_variance * w,
                                  spec.shape))
            for inputs, w in spec.parts()])
    return _term_kernel(basis.means, basis.blur, hyper.lengthscale, hyper.signal_variance,
                        hyper.kernel, se_as_mixture=False)


def _term_kernel(means, blur, lengthscale, signal_variance, kernel, se_as_mixture=True):
    """:class:`KernelTerms` of one kernel on these bases (None for SE unless
    ``se_as_mixture``: then SE is the one-node mixture whose factors give its Kt)."""
    profile = kernel_named(kernel)
    form = kernel_form(profile, blur)
    if form == "se" and not se_as_mixture:
        return None
    scales, weights = ([1.0], [1.0]) if form == "se" else profile.mixture
    factors = (None if form == "exact" else
               mixture_factors(means, blur, lengthscale, signal_variance, scales, weights))
    return KernelTerms(profile, form, signal_variance, factors)


def gradient_chunk(X, block, tau, nu, posterior, likelihood, L, means, lengthscale, full,
                   fourier=None, kernel=None):
    """Gradient sums of one row chunk at fixed sites (module docstring).

    Parameters
    ----------
    X : ndarray of shape (n, d), or PreparedRows
        The chunk's inputs (for the moments of dKt).
    block : saspa_dask.ep.Block
        Its whitened block (phi, lam, y) built with the same kernel and ``L``.
    tau, nu : ndarray of shape (n,)
    posterior : saspa_dask.ep.Posterior
    likelihood : likelihood object with ``log_z_gradient``
    L : ndarray of shape (M, M)
    means : ndarray of shape (M, d)
    lengthscale : ndarray of shape (d,)
    full : bool
        Blur covariances are full (not diagonal).
    fourier : tuple (frequencies, phases, window_variance, signal_variance), optional
        The bases are frequency inducing features: their moments instead.
    kernel : KernelTerms, optional
        A kernel other than SE (None: SE).

    Returns
    -------
    GradientSummary
    """
    M, d = means.shape
    mu = posterior.mean
    # Sigma_v = P^{-1} (P >= I, so well conditioned): phi_i^T Sigma_v is one GEMM, and
    # the marginal variances its row products with phi_i
    sigma = posterior.covariance()
    summary, alpha = None, likelihood.alpha
    for start in range(0, max(block.y.shape[0], 1), SUB_ROWS):
        rows = slice(start, start + SUB_ROWS)
        phi, lam, y, t, n = block.phi[rows], block.lam[rows], block.y[rows], tau[rows], nu[rows]
        G = phi @ sigma  # rows Sigma_v phi_i, then G in place
        m, s = phi @ mu, np.einsum("ij,ij->i", phi, G)
        mc, sc, valid = cavities(m, s, t, n, alpha)
        log_z, a, c = likelihood.tilted(y, mc, sc + lam)
        # d log Z_i / d lam_i (heat equation), over alpha for the power-EP energy; where
        # the rows see their projection only, lam is fixed at 0, so it drops
        g = (0.5 * (a * a - c) / alpha if block.approximation.residual_in_training
             else np.zeros_like(a))
        G *= -t[:, None]
        G -= (2.0 * g)[:, None] * phi
        G += np.outer(n - t * m, mu)
        Bt = solve_triangular(L, G.T, lower=True, trans="T", check_finite=False).T
        # (G L^{-1}) o Kt, Kt from the block where it kept it
        E = Bt * (phi @ L.T if block.kt is None else block.kt[rows])
        lik = {k: float(v.sum()) / alpha
               for k, v in likelihood.log_z_gradient(y, mc, sc + lam).items()}
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = float(evidence_site_terms(log_z, m, s, t, n, alpha).sum())
        kt_sum = float(E.sum())
        if kernel is not None and kernel.form == "additive":
            moments, kt_sum = _additive_moments(raw_rows(X)[rows], Bt, means, lengthscale,
                                                full, kernel.factors)
            sines = ()
        elif fourier is None:
            moments = [cross_moments(X[rows], weights, means, scale, full) for scale, weights
                       in _kernel_terms(X[rows], Bt, E, means, lengthscale, kernel)]
            moments, sines = [np.stack(m) for m in zip(*moments)], ()
        else:
            moments, sines = _fourier_moments(raw_rows(X)[rows], Bt, E, means, lengthscale, fourier)
        part = GradientSummary(*moments, G.T @ phi, float(g.sum()), lik, terms,
                               int((~valid).sum()), kt_sum, *sines)
        summary = part if summary is None else summary.merge(part)
    return summary


def _kernel_terms(X, Bt, E, means, lengthscale, kernel):
    """(lengthscale, weights) per term of the kernel: the SE formulas of
    :mod:`saspa_dask.core.kernel_gradients` at that lengthscale, weighted so, give its
    gradient.  SE: E itself.  A profile at delta blur: -2 dk/du in place of k
    (:meth:`~saspa_dask.core.kernel_profiles.KernelProfile.weight`).  A blurred
    profile: each SE term of its mixture with its own Kt."""
    if kernel is None:
        return [(lengthscale, E)]
    if kernel.form == "se":  # an additive term's SE: its own Kt, a one-node mixture
        return [(lengthscale, Bt * next(cross_covariance_terms(X, kernel.factors)))]
    if kernel.form == "exact":
        return [_exact_node(Bt, scaled_sq_distances(X, means, lengthscale), lengthscale,
                            kernel)]
    return [(lengthscale * scale, np.multiply(Bt, kt, out=kt)) for scale, kt in
            zip(kernel.profile.mixture[0], cross_covariance_terms(X, kernel.factors))]


def _exact_node(Bt, u, lengthscale, kernel):
    """The exact delta-blur form's one node at scaled squared distances u: its weight
    is -2 dk/du in k's place."""
    return lengthscale, Bt * (kernel.signal_variance * kernel.profile.weight(u))


def _additive_moments(X, Bt, means, lengthscale, full, terms):
    """((m0, m1, m2), kt sums) of an additive kernel for rows X: per term and per node
    q of its kernel (:func:`_kernel_terms`: one for SE and the exact form), the
    moments of its own inputs, written into those inputs' columns (the terms partition
    the inputs, so m1 and m2 keep one kernel's shapes per node, m2 block diagonal when
    full): m0 (G, Q, M), m1 (Q, M, d), m2 (Q, M, d[, d]), and <Bt, Kt_g> per term (G,)."""
    M, d = means.shape
    n_nodes = len(_node_scales(terms[0][1].profile, terms[0][1].form))
    m0 = np.empty((len(terms), n_nodes, M))
    m1 = np.zeros((n_nodes, M, d))
    m2 = np.zeros((n_nodes, M, d, d) if full else (n_nodes, M, d))
    sums = np.empty(len(terms))
    for g, (inputs, term) in enumerate(terms):
        Xg, mg, lg = X[:, inputs], means[:, inputs], lengthscale[inputs]
        if term.form == "exact":
            # <Bt, Kt_g> needs k itself, at the node's scaled distances
            u = scaled_sq_distances(Xg, mg, lg)
            nodes = [_exact_node(Bt, u, lg, term)]
            sums[g] = float(np.sum(Bt * (term.signal_variance * term.profile.value(u))))
        else:  # the nodes' weights are Bt o Kt_q themselves
            nodes = _kernel_terms(Xg, Bt, None, mg, lg, term)
            sums[g] = sum(float(weights.sum()) for _, weights in nodes)
        for q, (scale, weights) in enumerate(nodes):
            m0[g, q], m1[q][:, inputs], block = cross_moments(Xg, weights, mg, scale, full)
            if full:
                m2[q][:, inputs[:, None], inputs[None, :]] = block
            else:
                m2[q][:, inputs] = block
    return (m0, m1, m2), sums


def _node_scales(kernel, form):
    """The lengthscale multipliers of a kernel's nodes in the gradient's moments: the
    scale mixture's for form ``"mixture"``, one otherwise (SE, the exact form)."""
    return kernel_named(kernel).mixture[0] if form == "mixture" else [1.0]


def _fourier_moments(X, Bt, E, means, lengthscale, fourier):
    """((m0, m1, m2), (s0, s1)) of frequency features for rows X (centred as in
    :func:`~saspa_dask.core.fourier.fourier_cross_covariance`)."""
    frequencies, phases, window, signal_variance = fourier
    Xc, _, envelope, phase = fourier_parts(X, means, frequencies, phases, window,
                                           lengthscale, signal_variance)
    m0, m1, m2, s0, s1 = fourier_moments(Xc, E, Bt * envelope * np.sin(phase))
    return (m0, m1, m2), (s0, s1)


def assemble_gradient(summary, basis, hyper, L):
    """Gradient of log Z_EP in log space from the merged per-chunk sums.

    Parameters
    ----------
    summary : GradientSummary
    basis : Basis
        Means and the blur covariances in use.
    hyper : saspa_dask.fitting.hyperparameters.Hyperparameters
        The point (and which values are learnt).
    L : ndarray of shape (M, M)

    Returns
    -------
    dict
        ``lengthscale`` (d,), ``signal_variance``, ``blur_scale`` (if learnt) and one
        entry per likelihood hyperparameter, each d log Z_EP / d log(theta); with
        learnt bases also ``means`` (M, d) and ``covs`` (M, d, d), the derivatives
        with respect to the basis means and blur covariances themselves.
    """
    signal_variance = hyper.signal_variance
    # the symmetric S with <A, tril_half(X)> = <S, X> for symmetric X
    low = np.tril(summary.A, -1)
    S = 0.5 * (low + low.T) + 0.5 * np.diag(np.diag(summary.A))
    # Ah = L^{-T} S L^{-1}, the weights of dKh; Kh + jitter is proportional to s2
    # (the jitter is relative), so <Ah, dKh / dlog s2> = <Ah, L L^T> = tr(S).
    left = solve_triangular(L, S, lower=True, trans="T")
    Ah = solve_triangular(L, left.T, lower=True, trans="T").T
    Ah = 0.5 * (Ah + Ah.T)
    # the kernel and basis terms, then the ones every basis family shares
    terms = _fourier_terms if basis.is_fourier else _blurred_terms
    grad = terms(summary, basis, hyper, Ah)
    grad["signal_variance"] = float(np.sum(summary.kt_sum) + signal_variance * summary.g_sum
                                    - np.trace(S))
    grad.update(summary.likelihood)
    return grad


def _blurred_terms(summary, basis, hyper, Ah):
    """Lengthscale, blur-scale and basis entries for blurred bases: d Kt - d Kh."""
    # the blur covariances' gradient (M^2 d^2 work for the basis pairs) only when they
    # are learnt: learning the means alone (the default) does not use it
    with_covs = hyper.bases is not None and bool(hyper.bases.blur)
    if hyper.additive is not None:
        return _additive_terms(summary, basis, hyper, Ah, with_covs)
    scales = _term_lengthscales(basis, hyper)
    kt = summed([cross_covariance_gradient((summary.m0[t], summary.m1[t], summary.m2[t]),
                                           basis.means, basis.blur, scale, with_covs)
                 for t, scale in enumerate(scales)])
    kh = _basis_gradient(Ah, basis, hyper, with_covs)
    grad = {"lengthscale": kt.lengthscale - kh.lengthscale}
    if hyper.learn_blur_scale:
        grad["blur_scale"] = kt.blur_scale - kh.blur_scale
    if hyper.bases is not None:
        grad["means"] = kt.means - kh.means
        grad["covs"] = kt.covs - kh.covs if with_covs else None
    return grad


def _additive_terms(summary, basis, hyper, Ah, with_covs):
    """:func:`_blurred_terms` of an additive kernel: each term's one-kernel gradients
    on its own inputs (its blurs' marginals, its nodes summed), scattered back, and
    d/dlog w_g per term: <G L^-1, Kt_g> + s2 w_g sum g_i (the residual
    s2 - |phi|^2) - <Ah, Kh_g>."""
    M, d = basis.means.shape
    s2, full, shape = hyper.signal_variance, summary.m2.ndim == 4, hyper.kernel
    grad = {"lengthscale": np.zeros(d), "blur_scale": 0.0, "means": np.zeros((M, d)),
            "covs": np.zeros_like(basis.blur) if with_covs else None,
            "term_weights": np.empty(len(hyper.term_weights))}
    for g, (inputs, w) in enumerate(hyper.kernel_spec.parts()):
        means, blur = basis.means[:, inputs], restrict_blur(basis.blur, inputs)
        ls = hyper.lengthscale[inputs]
        nodes = _node_scales(shape, kernel_form(shape, blur))
        kt = summed([cross_covariance_gradient(
            (summary.m0[g, q], summary.m1[q][:, inputs],
             summary.m2[q][:, inputs][:, :, inputs] if full else summary.m2[q][:, inputs]),
            means, blur, ls * c, with_covs) for q, c in enumerate(nodes)])
        kh = _basis_gradient(Ah, Basis.scaled(means, blur), replace(
            hyper, lengthscale=ls, signal_variance=s2 * w, additive=None), with_covs)
        grad["lengthscale"][inputs] = kt.lengthscale - kh.lengthscale
        grad["blur_scale"] += kt.blur_scale - kh.blur_scale
        grad["means"][:, inputs] = kt.means - kh.means
        if with_covs and blur.ndim == 2:
            grad["covs"][:, inputs] = kt.covs - kh.covs
        elif with_covs:
            grad["covs"][:, inputs[:, None], inputs[None, :]] = kt.covs - kh.covs
        Kh = basis_covariance(means, blur, ls, s2 * w, kernel=shape)
        grad["term_weights"][g] = (summary.kt_sum[g] + s2 * w * summary.g_sum
                                   - float(np.sum(Ah * Kh)))
    if not hyper.learn_blur_scale:
        del grad["blur_scale"]
    if hyper.bases is None:
        del grad["means"], grad["covs"]
    return grad


def _term_lengthscales(basis, hyper):
    """The lengthscale of each kernel term, in the order of :func:`_kernel_terms`."""
    form = kernel_form(hyper.kernel, basis.blur)
    return [hyper.lengthscale * scale for scale in _node_scales(hyper.kernel, form)]


def _basis_gradient(Ah, basis, hyper, with_covs):
    """sum Ah dKh for the kernel: SE's, a profile's exact delta-blur form, or a
    blurred profile's mixture."""
    profile, form = kernel_named(hyper.kernel), kernel_form(hyper.kernel, basis.blur)
    args = (Ah, basis.means, basis.blur, hyper.lengthscale, hyper.signal_variance)
    if form == "se":
        return basis_covariance_gradient(*args, with_covs)
    if form == "exact":
        return basis_covariance_gradient(*args, with_covs, kernel=profile)
    return mixture_covariance_gradient(*args, *profile.mixture, with_covs)


def _fourier_terms(summary, basis, hyper, Ah):
    """The same for frequency inducing features."""
    lengthscale = hyper.lengthscale
    window = basis.window_variance
    centres = basis.means - basis.means.mean(axis=0)  # as the moments' rows were
    kt = fourier_cross_gradient((summary.m0, summary.m1, summary.m2, summary.s0, summary.s1),
                                centres, basis.frequencies, window, lengthscale)
    kh = fourier_covariance_gradient(Ah, basis.means, basis.frequencies, basis.phases, window,
                                     lengthscale, hyper.signal_variance)
    grad = {"lengthscale": kt.lengthscale - kh.lengthscale}
    d_window = kt.window - kh.window
    if hyper.learn_blur_scale:  # the window scaled by g: d/dlog g = sum c^2 d/dc^2
        grad["blur_scale"] = float((window * d_window).sum())
    if hyper.bases is not None:
        grad.update(centres=kt.centres - kh.centres,
                    frequencies=kt.frequencies - kh.frequencies,
                    phases=kt.phases - kh.phases, window=d_window)
    return grad
