"""Expectation propagation for SASPA in the whitened form (DESIGN.md section 2).

With L L^T = Kh (+ jitter) and v = L^{-1} u ~ N(0, I), every training point i sees the
projection phi_i^T v, phi_i = L^{-1} k_i, plus an independent residual of variance
lam_i = s2 - |phi_i|^2.  Gaussian sites (tau_i, nu_i) act on phi_i^T v, so

    P = I + sum_i tau_i phi_i phi_i^T,   h = sum_i nu_i phi_i,   mu_v = P^{-1} h.

Both sums run over row blocks, which is what lets the distributed engine do a sweep as
a map-reduce.  Everything here works on one in-memory :class:`Block` at a time; a Dask
chunk task is the same function applied to one chunk.

Convergence is judged on the *undamped* site change (LESSONS.md: with damping d the
damped change shrinks by d as well), in units that do not depend on the scale of f::

    change = max_i max(|tau'_i - tau_i| s2 / (1 + |tau_i| s2),
                       |nu'_i - nu_i| sqrt(s2) / (1 + |nu_i| sqrt(s2)))
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from scipy.linalg import LinAlgError, blas, cho_solve, cholesky, lapack

from .kernels import blurred_cross_covariance

__all__ = [
    "Block",
    "InMemoryEngine",
    "EPResult",
    "EPSettings",
    "Posterior",
    "make_block",
    "predict_latent",
    "run_ep",
    "whiten",
]

# Rows per sub-block inside a chunk task: the (rows x M) buffers of the marginals
# product and of the scaled rows stay in cache instead of streaming through memory.
_SUB_ROWS = 4096
# Residual variances more negative than this (relative to s2) are not round-off.
_NEGATIVE_RESIDUAL_TOLERANCE = 1e-6
# A rank-one update whose 1 + dtau * s falls below this would leave P (nearly) singular.
_MIN_UPDATE_DENOMINATOR = 1e-10
_MAX_JITTER = 1e-2
_MAX_DAMPING_HALVINGS = 20
# Cycle rule: EP caught in a cycle (typically of period two, with a large signal
# variance) shows a site change that alternates up and down without progress.  After
# _CYCLE_SWEEPS consecutive alternating sweeps in which the best change did not improve
# by a factor _CYCLE_GAIN, the damping is halved (down to _MIN_DAMPING).  A cold
# start's transient, where the change drifts without alternating, is left alone:
# damping it would slow the tail.  Each reduction is counted and reported.
_CYCLE_SWEEPS = 4
_CYCLE_GAIN = 0.9
_MIN_DAMPING = 1.0 / 64
# Coarse start (parallel EP, cold, likelihoods whose sites depend on the cavity): EP on
# every k-th block (k = min(_COARSE_STRIDE, blocks // 2), only with at least
# _COARSE_MIN_BLOCKS blocks), itself started the same way, run to _COARSE_TOL; its
# site sums scaled to all rows give the first sweep's cavities.  Measured on 3e5 rows,
# M = 256: 39 sweeps cold, 21 after a coarse start costing 2 sweeps' time, the same
# fixed point (evidence equal to 1e-12).
_COARSE_STRIDE = 10
_COARSE_MIN_BLOCKS = 4
_COARSE_TOL = 1e-2
# Anderson acceleration (parallel EP): the next sites are the combination sum_j a_j g_j
# of the last few sweeps' outputs g_j = G(x_j) (G: one damped parallel sweep), with
# sum_j a_j = 1 and a minimising |sum_j a_j (g_j - x_j)| (Walker & Ni 2011).  The
# statistics are linear in the sites, so the mixed posterior costs no extra pass.
# Mixing starts once the site change is below _ANDERSON_START; a change that grows by
# _ANDERSON_GROWTH, a mixed posterior that is not positive definite or a change of
# damping restarts the history.  A change that grew after mixing also lowers the start
# to _ANDERSON_BACKOFF times that change: a cold start's transient is not linear enough
# to extrapolate (1.1e5 rows, M = 64: 38 sweeps to 1e-6 without this rule, 19 with it
# and 19 plain).  Measured, sweeps to 1e-6 plain / with memory 3: 1e5 rows, M = 256,
# probit with a large signal variance, 88 / 57; a warm start after 10% new rows, 15 /
# 10; 400 Spambase rows caught in a period-two cycle, 54 / 14.
_ANDERSON_START = 1.0
_ANDERSON_GROWTH = 2.0
_ANDERSON_BACKOFF = 0.1
_ANDERSON_REGULARISATION = 1e-10


class EPConvergenceWarning(UserWarning):
    """EP stopped at ``max_sweeps`` without meeting the tolerance."""


def whiten(Kh, signal_variance, jitter):
    """Lower Cholesky factor of ``Kh + jitter_used * I``.

    Parameters
    ----------
    Kh : ndarray of shape (M, M)
    signal_variance : float
    jitter : float
        Starting jitter relative to ``signal_variance``.  It is raised tenfold until
        the factorisation succeeds (up to 1e-2) and the value used is returned.

    Returns
    -------
    L : ndarray of shape (M, M)
    jitter_used : float
        Absolute jitter added to the diagonal.
    """
    relative = float(jitter)
    n = Kh.shape[0]
    while True:
        try:
            absolute = relative * signal_variance
            L = cholesky(Kh + absolute * np.eye(n), lower=True)
            return L, absolute
        except LinAlgError:
            if relative >= _MAX_JITTER:
                raise LinAlgError(
                    f"basis covariance is not positive definite even with jitter "
                    f"{relative:g} x signal_variance; bases are degenerate"
                ) from None
            relative = max(relative * 10.0, 1e-12)


@dataclass
class Block:
    """One row block in whitened form.

    Attributes
    ----------
    phi : ndarray of shape (n, M)
        Rows phi_i = L^{-1} k_i.
    lam : ndarray of shape (n,)
        Residual (FITC) variances s2 - |phi_i|^2, clipped at 0.
    y : ndarray of shape (n,)
        Targets (regression) or labels in {-1, +1}.
    projected_only : bool
        DTC: the likelihood sees phi_i^T v only; ``lam`` is zero and does not vary
        with the hyperparameters.
    """

    phi: np.ndarray
    lam: np.ndarray
    y: np.ndarray
    projected_only: bool = False

    def __sizeof__(self):
        # Dask sizes task results with sys.getsizeof: without this a block would count
        # as ~56 bytes, so the scheduler would move it freely and workers would
        # misjudge their memory.
        return object.__sizeof__(self) + self.phi.nbytes + self.lam.nbytes + self.y.nbytes


def relabel_block(block, label):
    """The block's rows as the binary problem "y == label" (+1) against the rest (-1).

    phi and lam are shared, not copied: one-vs-rest classes reuse one kernel block.
    """
    return Block(block.phi, block.lam, np.where(block.y == label, 1.0, -1.0),
                 block.projected_only)


def make_block(X, y, means, covs, lengthscale, signal_variance, L, projected_only=False):
    """Whitened block for rows X: Kt (n x M), then phi = (L^{-1} Kt^T)^T and lam.

    With ``projected_only`` (DTC) the residual variances are checked, then set to 0:
    the likelihood sees the projection phi^T v only.

    Raises
    ------
    FloatingPointError
        When a residual variance is negative beyond round-off: the bases and the
        kernel are inconsistent (this cannot happen for valid blur covariances).
    """
    phi = blurred_cross_covariance(X, means, covs, lengthscale, signal_variance)
    if phi.size:
        # phi = (L^{-1} Kt^T)^T, solved in place on the F-ordered view Kt^T: no
        # M x n temporary and no copy (the rows stay C-ordered for the sweeps).
        blas.dtrsm(1.0, L, phi.T, lower=1, overwrite_b=1)
    lam = signal_variance - np.einsum("ij,ij->i", phi, phi)
    worst = lam.min() if lam.size else 0.0
    if worst < -_NEGATIVE_RESIDUAL_TOLERANCE * signal_variance:
        raise FloatingPointError(
            f"residual variance {worst:.3g} < 0 beyond round-off "
            f"(signal variance {signal_variance:.3g}): bases or kernel are inconsistent"
        )
    lam = np.zeros_like(lam) if projected_only else np.maximum(lam, 0.0)
    return Block(phi, lam, np.asarray(y, float), projected_only)


@dataclass
class Posterior:
    """Whitened Gaussian posterior N(mu_v, P^{-1}) over v = L^{-1} u.

    Attributes
    ----------
    chol : ndarray of shape (M, M)
        Lower Cholesky factor R of P.
    h : ndarray of shape (M,)
    mean : ndarray of shape (M,)
        mu_v = P^{-1} h.
    """

    chol: np.ndarray
    h: np.ndarray
    mean: np.ndarray

    @classmethod
    def prior(cls, n_bases):
        eye = np.eye(n_bases)
        return cls(eye, np.zeros(n_bases), np.zeros(n_bases))

    @classmethod
    def from_statistics(cls, A, b):
        """Posterior from the site sums A = Phi^T T Phi and b = Phi^T nu.

        Raises ``LinAlgError`` when I + A is not positive definite.
        """
        P = np.eye(A.shape[0]) + 0.5 * (A + A.T)
        R = cholesky(P, lower=True, check_finite=False)
        return cls(R, b.copy(), cho_solve((R, True), b, check_finite=False))

    @cached_property
    def inverse_chol_t(self):
        """R^{-T} (upper triangular), C-contiguous for the GEMM of :meth:`marginals`.

        Since P = I + A >= I, every singular value of R^{-1} is at most 1: forming it
        is well conditioned (unlike an inverse of a kernel matrix), and it turns the
        per-row triangular solves into one GEMM, which OpenBLAS runs about 3x faster
        than TRSM here (one core, 125,000 x 256: TRSM 14 GFLOP/s, GEMM 43 GFLOP/s;
        GEMM with the transposed, Fortran-ordered view ran at 23 GFLOP/s).
        """
        inverse, info = lapack.dtrtri(self.chol, lower=1)
        if info != 0:
            raise LinAlgError(f"posterior Cholesky factor is singular (dtrtri info {info})")
        return np.ascontiguousarray(np.tril(inverse).T)

    def marginals(self, phi, workspace=None):
        """Means and variances of phi_i^T v for the rows of phi.

        var_i = |R^{-1} phi_i|^2, computed as the rows of phi R^{-T} (one GEMM).  With
        a :class:`Workspace` the product goes into its buffer (no n x M temporary).
        """
        out = None if workspace is None else workspace.rows(phi.shape[0])
        W = np.matmul(phi, self.inverse_chol_t, out=out)
        return phi @ self.mean, np.einsum("ij,ij->i", W, W)

    def covariance(self):
        """Sigma_v = P^{-1} (an M x M whitened covariance, not a kernel inverse)."""
        return cho_solve((self.chol, True), np.eye(self.chol.shape[0]), check_finite=False)

    def log_det(self):
        return 2.0 * np.log(np.diag(self.chol)).sum()


def predict_latent(phi, posterior, signal_variance):
    """Latent predictive mean and variance at rows with whitened features phi.

    variance = s2 - |phi|^2 + phi^T Sigma_v phi, clipped at 0 against round-off.
    """
    mean, var_v = posterior.marginals(phi)
    prior_part = signal_variance - np.einsum("ij,ij->i", phi, phi)
    return mean, np.maximum(prior_part, 0.0) + var_v


@dataclass
class EPSettings:
    """EP schedule.

    Attributes
    ----------
    mode : {"parallel", "sequential"}
    damping : float in (0, 1]
    max_sweeps : int
    tol : float
        Threshold on the undamped site change (module docstring).
    coarse_start : bool
        Start a cold parallel run from a fit on a block subset (:func:`coarse_start`).
    anderson_memory : int
        Sweeps remembered by Anderson acceleration of parallel EP (module constants);
        0 turns it off.
    """

    mode: str = "parallel"
    damping: float = 1.0
    max_sweeps: int = 100
    tol: float = 1e-6
    coarse_start: bool = False
    anderson_memory: int = 0


@dataclass
class EPResult:
    """What an EP run produced (sites per block, posterior, diagnostics).

    ``n_invalid_cavities`` counts, over all sweeps, rows left unchanged because their
    cavity (or tilted site) was invalid; if any row's cavity is invalid at the final
    posterior the evidence is NaN (it is undefined there).
    ``n_skipped_updates`` counts sequential rank-one updates rejected because they
    would have made P singular.  ``n_damping_reductions`` counts the cycle rule's
    halvings of the damping (module constants); ``damping`` is the value at the end.
    ``n_anderson_steps`` counts sweeps whose sites were an Anderson combination and
    ``n_anderson_restarts`` the times its history was dropped.
    """

    posterior: Posterior
    tau: list
    nu: list
    n_sweeps: int
    converged: bool
    log_evidence: float
    n_invalid_cavities: int
    n_skipped_updates: int
    n_damping_halvings: int
    history: list = field(default_factory=list)
    n_damping_reductions: int = 0
    damping: float = 1.0
    coarse_start: list = field(default_factory=list)
    n_anderson_steps: int = 0
    n_anderson_restarts: int = 0


# ----------------------------------------------------------------------------------
# Per-block pieces (shared with the distributed engine)
# ----------------------------------------------------------------------------------


def cavities(m, s, tau, nu):
    """Cavity N(mc, sc) of phi^T v for marginals N(m, s) and sites (tau, nu).

    Returns ``(mc, sc, valid)``; ``valid`` is False where 1/s <= tau (no cavity).
    """
    one_minus = 1.0 - tau * s
    valid = one_minus > 0
    safe = np.where(valid, one_minus, 1.0)
    sc = s / safe
    mc = (m - nu * s) / safe
    return mc, sc, valid


def site_proposals(likelihood, y, mc, sc, lam):
    """Undamped new sites (the paper's eqs. 19-20) and log Z at the cavities.

    Returns ``(tau_new, nu_new, log_z, ok)``; ``ok`` is False where 1 - c sc <= 0
    (the tilted distribution has no valid Gaussian site).
    """
    log_z, a, c = likelihood.tilted(y, mc, sc + lam)
    denom = 1.0 - c * sc
    ok = (denom > 0) & np.isfinite(log_z) & np.isfinite(a) & np.isfinite(c)
    denom = np.where(ok, denom, 1.0)
    return c / denom, (a + c * mc) / denom, log_z, ok


def site_change(tau_old, nu_old, tau_new, nu_new, signal_variance):
    """The scaled undamped site change of the module docstring (max over rows)."""
    if tau_old.size == 0:
        return 0.0
    st = signal_variance
    sn = np.sqrt(signal_variance)
    dt = np.abs(tau_new - tau_old) * st / (1.0 + np.abs(tau_old) * st)
    dn = np.abs(nu_new - nu_old) * sn / (1.0 + np.abs(nu_old) * sn)
    return float(max(dt.max(), dn.max()))


def evidence_site_terms(log_z, m, s, mc, sc):
    """Per-site terms of log Z_EP, written with the posterior marginals N(m, s).

    Equal to log Z + 1/2 log(1 + tau sc) - 1/2 ((mc/sc + nu)^2 / (1/sc + tau) - mc^2/sc)
    of DESIGN.md, since 1/s = 1/sc + tau and m/s = mc/sc + nu.
    """
    # rows with s = 0 (invalid cavities, left out by the callers) would warn 0 / 0
    with np.errstate(divide="ignore", invalid="ignore"):
        return log_z + 0.5 * np.log(sc / s) - 0.5 * (m * m / s - mc * mc / sc)


@dataclass
class BlockPass:
    """What one pass over a block computes against a fixed posterior."""

    tau_prop: np.ndarray
    nu_prop: np.ndarray
    updatable: np.ndarray
    n_invalid: int
    evidence_terms: float


def block_pass(block, tau, nu, posterior, likelihood, workspace=None):
    """Cavities, undamped proposals and evidence terms for one block.

    Rows with an invalid cavity or no valid site keep their old sites
    (``updatable`` False) and are counted in ``n_invalid``.
    """
    m, s = posterior.marginals(block.phi, workspace)
    mc, sc, valid = cavities(m, s, tau, nu)
    tau_p, nu_p, log_z, ok = site_proposals(likelihood, block.y, mc, sc, block.lam)
    updatable = valid & ok
    terms = evidence_site_terms(log_z, m, s, mc, sc)
    evidence = float(terms[updatable].sum()) if updatable.all() else np.nan
    return BlockPass(
        np.where(updatable, tau_p, tau),
        np.where(updatable, nu_p, nu),
        updatable,
        int((~updatable).sum()),
        evidence,
    )


class Workspace:
    """Buffers reused across the row sub-blocks of one chunk task.

    Worker processes run with ``MALLOC_TRIM_THRESHOLD_`` set (LESSONS.md), which
    makes every multi-megabyte temporary a fresh mmap with page faults: measured, a
    sub-blocked chunk task went from 0.69 s to 1.18 s.  Reusing these buffers avoids
    that.  ``A`` accumulates Phi^T diag(tau) Phi.

    Every product here goes through NumPy's BLAS, none through SciPy's: the two are
    separate OpenBLAS builds with separate thread pools, and alternating between them
    with 2 threads each made the pools spin against each other (measured on 2 cores:
    the marginals-plus-statistics loop ran at 19 GFLOP/s mixed, 52 GFLOP/s NumPy only).
    """

    def __init__(self, n_bases, rows):
        self.buffer = np.empty((rows, n_bases))
        self.scaled = np.empty((rows, n_bases))
        self.product = np.empty((n_bases, n_bases))
        self.A = np.zeros((n_bases, n_bases))
        self.b = np.zeros(n_bases)

    def rows(self, n):
        return self.buffer[:n]

    def add_statistics(self, phi, tau, nu):
        """A += Phi^T diag(tau) Phi, b += Phi^T nu.

        ``Z^T Z`` of the scaled rows is a SYRK inside NumPy (half the flops of a
        general product, exactly symmetric).  Negative site precisions (non-log-concave
        likelihoods) are few: their rows are subtracted with a second product.
        """
        n = phi.shape[0]
        negative = tau < 0
        Z = self.scaled[:n]
        np.multiply(phi, np.sqrt(np.where(negative, 0.0, tau))[:, None], out=Z)
        self.A += np.matmul(Z.T, Z, out=self.product)
        if negative.any():
            Zn = phi[negative] * np.sqrt(-tau[negative])[:, None]
            self.A -= Zn.T @ Zn
        self.b += phi.T @ nu

    def statistics(self):
        """(A, b) accumulated so far."""
        return self.A.copy(), self.b.copy()


def block_statistics(phi, tau, nu):
    """A = Phi^T diag(tau) Phi and b = Phi^T nu for one block."""
    workspace = Workspace(phi.shape[1], max(1, min(phi.shape[0], _SUB_ROWS)))
    for start in range(0, phi.shape[0], _SUB_ROWS):
        rows = slice(start, start + _SUB_ROWS)
        workspace.add_statistics(phi[rows], tau[rows], nu[rows])
    return workspace.statistics()


def sequential_block(block, tau, nu, sigma, mean, likelihood, damping, signal_variance):
    """Algorithm 1 of the paper over one block, updating everything in place.

    ``sigma`` (Fortran-ordered, upper triangle used) and ``mean`` hold Sigma_v and
    mu_v; each accepted site changes them by a rank-one (Sherman-Morrison) update in
    O(M^2).  Returns ``(change, n_invalid, n_skipped)``.
    """
    change = 0.0
    n_invalid = n_skipped = 0
    phi_rows, lam, y = block.phi, block.lam, block.y
    for i in range(phi_rows.shape[0]):
        phi = phi_rows[i]
        sp = blas.dsymv(1.0, sigma, phi)
        s = float(phi @ sp)
        m = float(phi @ mean)
        t_old, n_old = tau[i], nu[i]
        mc, sc, valid = cavities(m, s, t_old, n_old)
        if not valid:
            n_invalid += 1
            continue
        t_p, n_p, _, ok = site_proposals(
            likelihood, y[i : i + 1], np.array([mc]), np.array([sc]), lam[i : i + 1]
        )
        if not ok[0]:
            n_invalid += 1
            continue
        t_p, n_p = float(t_p[0]), float(n_p[0])
        change = max(change, site_change(np.array([t_old]), np.array([n_old]),
                                         np.array([t_p]), np.array([n_p]),
                                         signal_variance))
        dt = damping * (t_p - t_old)
        dn = damping * (n_p - n_old)
        denom = 1.0 + dt * s
        if denom <= _MIN_UPDATE_DENOMINATOR:
            n_skipped += 1
            continue
        k = dt / denom
        mean += sp * (dn - k * (m + dn * s))
        blas.dsyr(-k, sp, a=sigma, overwrite_a=1)
        tau[i] = t_old + dt
        nu[i] = n_old + dn
    return change, n_invalid, n_skipped


@dataclass
class PassSummary:
    """Sums over the blocks of one pass; ``merge`` makes it a tree reduction.

    ``A``, ``b``: site statistics of the sites the pass produced (None for an
    evaluation pass); ``change``: max undamped site change; ``evidence_terms``: sum
    of per-site evidence terms at the posterior the pass used (NaN if a cavity was
    invalid); counters as in :class:`EPResult`; ``dots``: inner products of this
    pass's Anderson residual with each slot of the Anderson ring (:func:`record_step`).
    """

    A: np.ndarray | None = None
    b: np.ndarray | None = None
    change: float = 0.0
    n_invalid: int = 0
    n_skipped: int = 0
    evidence_terms: float = 0.0
    dots: np.ndarray | None = None

    def merge(self, other):
        def add(x, y):
            return y if x is None else (x if y is None else x + y)

        return PassSummary(add(self.A, other.A), add(self.b, other.b),
                           max(self.change, other.change), self.n_invalid + other.n_invalid,
                           self.n_skipped + other.n_skipped,
                           self.evidence_terms + other.evidence_terms,
                           add(self.dots, other.dots))


def merge_summaries(summaries):
    """Pairwise (tree) merge of a list of PassSummary, in order."""
    items = list(summaries)
    if not items:
        return PassSummary()
    while len(items) > 1:
        items = [items[i].merge(items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), 2)]
    return items[0]




def _workspace_for(block):
    return Workspace(block.phi.shape[1], max(1, min(block.y.shape[0], _SUB_ROWS)))


def _sub_blocks(block, *arrays):
    """(sub-block, slice, arrays sliced) over consecutive row ranges of a block."""
    n = block.y.shape[0]
    for start in range(0, max(n, 1), _SUB_ROWS):
        rows = slice(start, min(start + _SUB_ROWS, n))
        sub = Block(block.phi[rows], block.lam[rows], block.y[rows], block.projected_only)
        yield sub, rows, [a[rows] for a in arrays]


def anderson_ring(memory, n_rows):
    """Zeroed Anderson storage for ``n_rows`` rows: slots of (g_tau, g_nu, f_tau, f_nu)."""
    return np.zeros((4, memory + 1, n_rows))


def record_step(ring, slot, tau, nu, tau_new, nu_new, signal_variance):
    """Store one sweep's output g = (tau_new, nu_new) and its step f = g - x (in the
    scale-free units of the site change) in ring ``slot``; return the inner products
    of f with the steps in every slot (stale slots included: the driver picks)."""
    ring[0, slot] = tau_new
    ring[1, slot] = nu_new
    np.multiply(tau_new - tau, signal_variance, out=ring[2, slot])
    np.multiply(nu_new - nu, np.sqrt(signal_variance), out=ring[3, slot])
    return ring[2] @ ring[2, slot] + ring[3] @ ring[3, slot]


def mix_steps(ring, weights):
    """The Anderson combination (sum_j w_j g_tau_j, sum_j w_j g_nu_j) of a ring."""
    return weights @ ring[0], weights @ ring[1]


def parallel_chunk(block, tau, nu, posterior, likelihood, damping, signal_variance,
                   ring=None, ring_slot=None):
    """One block of a parallel sweep: damped new sites and their statistics.

    Returns ``(tau_new, nu_new, PassSummary)``; the evidence terms in the summary
    belong to the posterior that was passed in.  With a ``ring`` (Anderson storage of
    this block) the new sites are recorded in ``ring_slot`` and the summary carries
    the inner products (:func:`record_step`).
    """
    tau_new, nu_new = np.empty_like(tau), np.empty_like(nu)
    workspace = _workspace_for(block)
    summary = PassSummary()
    for sub, rows, (t, n) in _sub_blocks(block, tau, nu):
        p = block_pass(sub, t, n, posterior, likelihood, workspace)
        change = site_change(t, n, p.tau_prop, p.nu_prop, signal_variance)
        tau_new[rows] = t + damping * (p.tau_prop - t)
        nu_new[rows] = n + damping * (p.nu_prop - n)
        workspace.add_statistics(sub.phi, tau_new[rows], nu_new[rows])
        summary = summary.merge(PassSummary(None, None, change, p.n_invalid, 0,
                                            p.evidence_terms))
    summary.A, summary.b = workspace.statistics()
    if ring is not None:
        summary.dots = record_step(ring, ring_slot, tau, nu, tau_new, nu_new,
                                   signal_variance)
    return tau_new, nu_new, summary


def sequential_chunk(block, tau, nu, sigma, mean, likelihood, damping, signal_variance):
    """One block of a sequential sweep, on copies: returns the new sites and state.

    Returns ``(tau_new, nu_new, sigma, mean, PassSummary)`` where the summary holds
    the statistics of the block's new sites.
    """
    tau, nu = tau.copy(), nu.copy()
    sigma, mean = np.array(sigma, order="F", copy=True), mean.copy()
    change, n_invalid, n_skipped = sequential_block(block, tau, nu, sigma, mean, likelihood,
                                                    damping, signal_variance)
    A, b = block_statistics(block.phi, tau, nu)
    return tau, nu, sigma, mean, PassSummary(A, b, change, n_invalid, n_skipped, 0.0)


def evaluate_chunk(block, tau, nu, posterior, likelihood):
    """Evidence terms and invalid-cavity count of one block at a posterior."""
    summary = PassSummary()
    workspace = _workspace_for(block)
    for sub, _, (t, n) in _sub_blocks(block, tau, nu):
        p = block_pass(sub, t, n, posterior, likelihood, workspace)
        summary = summary.merge(PassSummary(n_invalid=p.n_invalid,
                                            evidence_terms=p.evidence_terms))
    return summary


# ----------------------------------------------------------------------------------
# Engines: where the blocks and sites live.  run_ep drives either one.
# ----------------------------------------------------------------------------------


class InMemoryEngine:
    """Blocks and sites held in this process (the in-memory estimators' engine).

    An engine keeps the *current* sites and, during a sweep, *pending* ones; the
    driver commits pending sites once their posterior is accepted.
    """

    def __init__(self, blocks, sites=None, anderson_memory=0):
        self.blocks = list(blocks)
        self.rings = ([anderson_ring(anderson_memory, b.y.shape[0]) for b in self.blocks]
                      if anderson_memory > 0 else None)
        if sites is None:
            self.tau = [np.zeros(b.y.shape[0]) for b in self.blocks]
            self.nu = [np.zeros(b.y.shape[0]) for b in self.blocks]
            self.is_cold = True
        else:
            self.tau, self.nu = _check_sites(self.blocks, sites)
            self.is_cold = False
        self._pending = None

    @property
    def n_bases(self):
        return self.blocks[0].phi.shape[1]

    @property
    def n_rows(self):
        return sum(b.y.shape[0] for b in self.blocks)

    def subset(self, stride):
        """A cold engine on every ``stride``-th block (the blocks are shared)."""
        memory = 0 if self.rings is None else self.rings[0].shape[1] - 1
        return InMemoryEngine(self.blocks[::stride], anderson_memory=memory)

    def statistics(self):
        A = np.zeros((self.n_bases, self.n_bases))
        b = np.zeros(self.n_bases)
        for block, t, n in zip(self.blocks, self.tau, self.nu):
            dA, db = block_statistics(block.phi, t, n)
            A += dA
            b += db
        return A, b

    def parallel_pass(self, posterior, likelihood, damping, signal_variance, ring_slot=None):
        rings = self.rings if ring_slot is not None else [None] * len(self.blocks)
        results = [parallel_chunk(b, t, n, posterior, likelihood, damping, signal_variance,
                                  ring, ring_slot)
                   for b, t, n, ring in zip(self.blocks, self.tau, self.nu, rings)]
        self._pending = ([r[0] for r in results], [r[1] for r in results])
        return merge_summaries(r[2] for r in results)

    def mix_pending(self, weights):
        """Pending sites := the Anderson combination of the ring slots."""
        mixed = [mix_steps(ring, weights) for ring in self.rings]
        self._pending = ([m[0] for m in mixed], [m[1] for m in mixed])

    def halve_pending(self):
        tau_p, nu_p = self._pending
        self._pending = ([0.5 * (p + c) for p, c in zip(tau_p, self.tau)],
                         [0.5 * (p + c) for p, c in zip(nu_p, self.nu)])

    def sequential_pass(self, posterior, likelihood, damping, signal_variance):
        sigma, mean = posterior.covariance(), posterior.mean
        tau_p, nu_p, summaries = [], [], []
        for block, t, n in zip(self.blocks, self.tau, self.nu):
            t, n, sigma, mean, summary = sequential_chunk(block, t, n, sigma, mean, likelihood,
                                                          damping, signal_variance)
            tau_p.append(t)
            nu_p.append(n)
            summaries.append(summary)
        self._pending = (tau_p, nu_p)
        return merge_summaries(summaries)

    def commit(self):
        self.tau, self.nu = self._pending
        self._pending = None

    def evaluate(self, posterior, likelihood):
        return merge_summaries(evaluate_chunk(b, t, n, posterior, likelihood)
                               for b, t, n in zip(self.blocks, self.tau, self.nu))

    def sites(self):
        return self.tau, self.nu


def _check_sites(blocks, sites):
    tau, nu = sites
    if len(tau) != len(blocks) or len(nu) != len(blocks):
        raise ValueError("warm-start sites must have one array per block")
    for block, t, n in zip(blocks, tau, nu):
        if t.shape != block.y.shape or n.shape != block.y.shape:
            raise ValueError(
                f"warm-start sites of shape {t.shape} do not match a block of "
                f"{block.y.shape[0]} rows"
            )
    return [np.array(t, dtype=float) for t in tau], [np.array(n, dtype=float) for n in nu]


def _evidence(posterior, site_sum):
    return -0.5 * posterior.log_det() + 0.5 * posterior.h @ posterior.mean + site_sum


def _accept(engine, A_new, b_new, A_old, b_old):
    """Posterior of the pending sites; halves the step while P is indefinite.

    Negative site precisions (non-log-concave likelihoods) can make P indefinite.
    The statistics are linear in the damping, so the step is halved without another
    statistics pass; the engine halves its pending sites to match.
    """
    halvings = 0
    while True:
        try:
            return Posterior.from_statistics(A_new, b_new), A_new, b_new, halvings
        except LinAlgError:
            halvings += 1
            if halvings > _MAX_DAMPING_HALVINGS:
                raise FloatingPointError(
                    "EP posterior stayed indefinite after halving the damping "
                    f"{_MAX_DAMPING_HALVINGS} times"
                ) from None
            engine.halve_pending()
            A_new, b_new = 0.5 * (A_new + A_old), 0.5 * (b_new + b_old)


class _CycleGuard:
    """The cycle rule (module constants): feed it each sweep's site change; it returns
    the damping for the next sweep and counts its reductions."""

    def __init__(self, damping):
        self.damping, self.reductions = damping, 0
        self._best, self._in_cycle, self._changes = np.inf, 0, []

    def update(self, change):
        c = self._changes
        c.append(change)
        if change < _CYCLE_GAIN * self._best:
            self._best, self._in_cycle = change, 0
        elif len(c) >= 3 and (c[-1] - c[-2]) * (c[-2] - c[-3]) < 0:
            self._in_cycle += 1
        else:
            self._in_cycle = 0
        if self._in_cycle >= _CYCLE_SWEEPS and self.damping > _MIN_DAMPING:
            self.damping = max(0.5 * self.damping, _MIN_DAMPING)
            self._in_cycle, self.reductions = 0, self.reductions + 1
        return self.damping


class _Anderson:
    """Anderson acceleration's driver side (module constants): the Gram matrix of the
    remembered steps and their statistics, ring slots in age order, the weights."""

    def __init__(self, memory):
        size = memory + 1
        self.gram = np.zeros((size, size))
        self.stats = [None] * size
        self.window = []
        self.slot = 0
        self.last_change = np.inf
        self.start = _ANDERSON_START
        self.damping = None
        self.steps = self.restarts = 0

    def record(self, summary, damping):
        """Take in the pass that wrote ring slot ``self.slot``."""
        s = self.slot
        if self.damping is not None and damping != self.damping:
            self.restart()  # G changed with the damping: old steps do not belong to it
        self.damping = damping
        self.gram[s, :] = self.gram[:, s] = summary.dots
        self.stats[s] = (summary.A, summary.b)
        if s in self.window:
            self.window.remove(s)
        self.window.append(s)
        self.slot = (s + 1) % len(self.stats)

    def restart(self):
        if len(self.window) > 1:
            self.restarts += 1
        self.window = self.window[-1:]

    def weights(self, change):
        """Ring weights of the next sites, or None for the plain step."""
        grew = change > _ANDERSON_GROWTH * self.last_change
        if grew and len(self.window) > 1:
            # mixing made things worse: EP is not linear enough here yet
            self.start = min(self.start, _ANDERSON_BACKOFF * change)
        if change > self.start or grew:
            self.restart()
        self.last_change = change
        if len(self.window) < 2:
            return None
        idx = np.array(self.window)
        G = self.gram[np.ix_(idx, idx)]
        G = G + _ANDERSON_REGULARISATION * np.trace(G) * np.eye(idx.size)
        try:
            z = np.linalg.solve(G, np.ones(idx.size))
        except np.linalg.LinAlgError:
            z = np.full(idx.size, np.nan)
        if not np.isfinite(z).all() or z.sum() == 0:
            self.restart()
            return None
        w = np.zeros(len(self.stats))
        w[idx] = z / z.sum()
        return w

    def mixed_statistics(self, weights):
        used = np.flatnonzero(weights)
        A = sum(weights[j] * self.stats[j][0] for j in used)
        b = sum(weights[j] * self.stats[j][1] for j in used)
        return A, b


def _next_posterior(engine, summary, anderson, damping, A_old, b_old):
    """Posterior of the next sweep: the Anderson combination where it applies and is
    positive definite, else the plain step (:func:`_accept`).  Returns ``(posterior,
    A, b, halvings, mixed)``."""
    if anderson is not None:
        anderson.record(summary, damping)
        weights = anderson.weights(summary.change)
        if weights is not None:
            A, b = anderson.mixed_statistics(weights)
            try:
                posterior = Posterior.from_statistics(A, b)
            except LinAlgError:
                anderson.restart()
            else:
                engine.mix_pending(weights)
                anderson.steps += 1
                return posterior, A, b, 0, True
    return (*_accept(engine, summary.A, summary.b, A_old, b_old), False)


def coarse_start(engine, likelihood, signal_variance, settings, callback=None):
    """A starting posterior for a cold parallel run: EP on a block subset, scaled.

    EP runs on every k-th block (recursively started the same way) to a loose
    tolerance; with P_s = I + A_s and h_s from its sites on n_s of the N rows, the
    start is P = I + (N / n_s) A_s, h = (N / n_s) h_s: each sampled row stands for
    N / n_s rows.  Parallel EP's first sweep then takes its cavities from this
    posterior instead of the prior, which skips most of the cold start's transient.

    Returns
    -------
    start : Posterior or None
        None when the engine has too few blocks to subsample.
    levels : list of dict
        ``rows``, ``sweeps``, ``converged`` and ``seconds`` of each coarse run, the
        coarsest first.
    """
    n_blocks = len(engine.blocks)
    if n_blocks < _COARSE_MIN_BLOCKS:
        return None, []
    began = time.perf_counter()
    sub = engine.subset(min(_COARSE_STRIDE, n_blocks // 2))
    inner, levels = coarse_start(sub, likelihood, signal_variance, settings)
    loose = EPSettings(settings.mode, settings.damping, settings.max_sweeps,
                       max(settings.tol, _COARSE_TOL), coarse_start=False,
                       anderson_memory=settings.anderson_memory)
    with warnings.catch_warnings():
        # a coarse run that stops early is still a starting point; it is reported
        warnings.simplefilter("ignore", EPConvergenceWarning)
        result = run_ep(sub, likelihood, signal_variance, loose, start=inner)
    post = result.posterior
    scale = engine.n_rows / sub.n_rows
    A = post.chol @ post.chol.T - np.eye(post.chol.shape[0])
    start = Posterior.from_statistics(scale * A, scale * post.h)
    levels.append({"rows": int(sub.n_rows), "sweeps": result.n_sweeps,
                   "converged": bool(result.converged),
                   "seconds": time.perf_counter() - began})
    return start, levels


def run_ep(engine, likelihood, signal_variance, settings, callback=None, start=None):
    """Run EP to convergence; the engine holds the data blocks and the sites.

    Parameters
    ----------
    engine : InMemoryEngine or saspa_dask.distributed.DaskEngine
    likelihood : likelihood object (see :mod:`saspa_dask.likelihoods`)
    signal_variance : float
    settings : EPSettings
    callback : callable, optional
        Called with each sweep's record (a dict).
    start : Posterior, optional
        For a cold engine: the posterior whose marginals the first sweep uses as
        cavities (all sites are zero), e.g. a fit on a row sample with its statistics
        scaled to all rows.  The sites, and so the fixed point, are EP's own from the
        first sweep on; only the starting point changes.  Without it, a cold parallel
        run with ``settings.coarse_start`` makes one with :func:`coarse_start` (not for
        the Gaussian likelihood, whose sites do not depend on the cavity).

    Returns
    -------
    EPResult
        ``tau`` and ``nu`` are what ``engine.sites()`` returns.
    """
    if settings.mode not in ("parallel", "sequential"):
        raise ValueError(f"ep_mode must be 'parallel' or 'sequential', got {settings.mode!r}")
    M = engine.n_bases
    if engine.is_cold:
        A, b = np.zeros((M, M)), np.zeros(M)
    else:
        A, b = engine.statistics()
    posterior = Posterior.from_statistics(A, b)
    levels = []
    if (start is None and settings.coarse_start and settings.mode == "parallel"
            and engine.is_cold and getattr(likelihood, "name", None) != "gaussian"):
        start, levels = coarse_start(engine, likelihood, signal_variance, settings)
    if start is not None and engine.is_cold:
        posterior = start
    s2 = signal_variance
    history = []
    converged = False
    final = None
    guard = _CycleGuard(settings.damping)
    damping = guard.damping
    anderson = (_Anderson(settings.anderson_memory)
                if settings.mode == "parallel" and settings.anderson_memory > 0 else None)
    for sweep in range(1, settings.max_sweeps + 1):
        start = time.perf_counter()
        mixed = False
        if settings.mode == "parallel":
            slot = None if anderson is None else anderson.slot
            summary = engine.parallel_pass(posterior, likelihood, damping, s2, ring_slot=slot)
            # This pass evaluated the posterior left by the previous sweep.
            evidence = _evidence(posterior, summary.evidence_terms)
            if history:
                history[-1]["log_evidence"] = evidence
            converged = summary.change < settings.tol
            halvings = 0
            if converged:
                final = evidence
            else:
                posterior, A, b, halvings, mixed = _next_posterior(engine, summary, anderson,
                                                                   damping, A, b)
                engine.commit()
        else:
            summary = engine.sequential_pass(posterior, likelihood, damping, s2)
            # Refresh from all sites: repeated rank-one updates drift (LESSONS.md, GPML).
            posterior, A, b, halvings = _accept(engine, summary.A, summary.b, A, b)
            engine.commit()
            converged = summary.change < settings.tol
        record = {"sweep": sweep, "change": summary.change, "n_invalid": summary.n_invalid,
                  "n_skipped": summary.n_skipped, "damping_halvings": halvings,
                  "damping": damping, "anderson": mixed,
                  "seconds": time.perf_counter() - start}
        if settings.mode == "parallel":
            # the evidence of the posterior this sweep started from (free in this mode)
            record["log_evidence_start"] = evidence
        history.append(record)
        if callback is not None:
            callback(record)
        if converged:
            break
        if not mixed:
            # Anderson's own steps need not shrink the change monotonically; its
            # history restarts when the change grows, so only plain steps feed the
            # cycle rule
            damping = guard.update(summary.change)

    if final is None:
        final = _evidence(posterior, engine.evaluate(posterior, likelihood).evidence_terms)
    log_evidence = final
    history[-1]["log_evidence"] = log_evidence
    if not converged:
        warnings.warn(
            f"EP did not converge in {settings.max_sweeps} sweeps "
            f"(last undamped site change {history[-1]['change']:.3g} >= tol {settings.tol:g}); "
            f"raise max_sweeps or lower damping (damping ended at {damping:g} after "
            f"{guard.reductions} cycle reduction(s))",
            EPConvergenceWarning,
            stacklevel=2,
        )
    tau, nu = engine.sites()
    return EPResult(
        posterior=posterior,
        tau=tau,
        nu=nu,
        n_sweeps=len(history),
        converged=converged,
        log_evidence=log_evidence,
        n_invalid_cavities=sum(r["n_invalid"] for r in history),
        n_skipped_updates=sum(r["n_skipped"] for r in history),
        n_damping_halvings=sum(r["damping_halvings"] for r in history),
        history=history,
        n_damping_reductions=guard.reductions,
        damping=damping,
        coarse_start=levels,
        n_anderson_steps=0 if anderson is None else anderson.steps,
        n_anderson_restarts=0 if anderson is None else anderson.restarts,
    )
