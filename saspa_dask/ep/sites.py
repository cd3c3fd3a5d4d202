"""EP site updates on one whitened block: cavities, tilted moments, new sites.

Everything here works on one in-memory :class:`~saspa_dask.ep.whitening.Block` against
a fixed posterior; an engine applies it to every block (in this process or as one
Dask task per chunk), so there is one implementation of the mathematics.

Convergence is judged on the *undamped* site change (docs/design.md, section 7: with damping d the
damped change shrinks by d as well), in units that do not depend on the scale of f::

    change = max_i max(|tau'_i - tau_i| s2 / (1 + |tau_i| s2),
                       |nu'_i - nu_i| sqrt(s2) / (1 + |nu_i| sqrt(s2)))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import blas

from .acceleration import record_step
from .whitening import Block

__all__ = ["PassSummary", "block_statistics", "cavities", "evaluate_chunk",
           "evidence_site_terms", "merge_summaries", "parallel_chunk", "sequential_chunk",
           "site_change", "site_proposals"]

# Rows per sub-block inside a chunk task: the (rows x M) buffers of the marginals
# product and of the scaled rows stay in cache instead of streaming through memory.
SUB_ROWS = 2048
# A rank-one update whose 1 + dtau * s falls below this would leave P (nearly) singular.
_MIN_UPDATE_DENOMINATOR = 1e-10


def cavities(m, s, tau, nu, alpha=1.0):
    """Cavity N(mc, sc) of phi^T v for marginals N(m, s) and sites (tau, nu), with
    ``alpha`` of each site removed (power EP; 1 is EP).

    Returns ``(mc, sc, valid)``; ``valid`` is False where 1/s <= alpha tau (no cavity).
    """
    one_minus = 1.0 - alpha * tau * s
    valid = one_minus > 0
    safe = np.where(valid, one_minus, 1.0)
    sc = s / safe
    mc = (m - alpha * nu * s) / safe
    return mc, sc, valid


def site_proposals(likelihood, y, mc, sc, lam):
    """Undamped new sites (the paper's eqs. 19-20) and log Z at the cavities.

    For power EP (``likelihood.alpha`` < 1, the tilted moments of p^alpha) the
    projected update is raised to 1/alpha: tau' = c / (alpha D), nu' = (a + c mc) /
    (alpha D) with D = 1 - c sc (docs/design.md, "Power EP").  Returns
    ``(tau_new, nu_new, log_z, ok)``; ``ok`` is False where D <= 0 (the tilted
    distribution has no valid Gaussian site).
    """
    log_z, a, c = likelihood.tilted(y, mc, sc + lam)
    denom = 1.0 - c * sc
    ok = (denom > 0) & np.isfinite(log_z) & np.isfinite(a) & np.isfinite(c)
    denom = likelihood.alpha * np.where(ok, denom, 1.0)
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


def evidence_site_terms(log_z, m, s, tau, nu, alpha=1.0):
    """Per-site terms of log Z_EP (of the power-EP energy for ``alpha`` < 1), written
    with the posterior marginals N(m, s) and the sites (tau, nu).

    Power EP: (log Z + logA(cavity) - logA(marginal)) / alpha, which with
    c = 1 - alpha tau s is (log Z - 1/2 log c) / alpha + (tau m^2 - 2 nu m +
    alpha nu^2 s) / (2 c); at alpha = 1 it is the EP term below.

    Equal to log Z + 1/2 log(1 + tau sc) - 1/2 ((mc/sc + nu)^2 / (1/sc + tau) - mc^2/sc)
    of docs/design.md, since 1/s = 1/sc + tau and m/s = mc/sc + nu; with c = 1 - tau s
    (> 0 for a valid cavity) that is

        log Z - 1/2 log c - (2 m nu - tau m^2 - nu^2 s) / (2 c),

    which has no division by s: a row the bases do not reach (phi_i so small that s
    underflows to 0) contributes its log Z, where the cavity form gave 0 / 0.
    Invalid cavities (c <= 0) give NaN; the callers leave them out or report NaN.
    """
    if alpha != 1.0:
        c = 1.0 - alpha * tau * s
        with np.errstate(divide="ignore", invalid="ignore"):
            return ((log_z - 0.5 * np.log(c)) / alpha
                    + 0.5 * (tau * m * m - 2.0 * nu * m + alpha * nu * nu * s) / c)
    c = 1.0 - tau * s
    with np.errstate(divide="ignore", invalid="ignore"):
        return log_z - 0.5 * np.log(c) - 0.5 * (2.0 * m * nu - tau * m * m - nu * nu * s) / c


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
    alpha = likelihood.alpha
    mc, sc, valid = cavities(m, s, tau, nu, alpha)
    tau_p, nu_p, log_z, ok = site_proposals(likelihood, block.y, mc, sc, block.lam)
    updatable = valid & ok
    terms = evidence_site_terms(log_z, m, s, tau, nu, alpha)
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

    Dask's nannies start workers with ``MALLOC_TRIM_THRESHOLD_`` at 64 KiB (docs/design.md,
    section 7), which makes every multi-megabyte temporary a fresh mapping with page
    faults (the embedded cluster's workers keep them: ``jobs/cluster.py``); reusing
    these buffers within a task avoids that.  ``A`` accumulates Phi^T diag(tau) Phi.

    Every product here goes through NumPy's BLAS, none through SciPy's: the two are
    separate OpenBLAS builds with separate thread pools, and alternating between them
    made the pools spin against each other (the measured costs of both are in
    ``benchmarks/RESULTS.md``, "Design measurements").  The exception is a
    ``triangular`` workspace, for a chunk task where both run on one thread: its
    marginals are SciPy's TRMM (:func:`~saspa_dask.ep.posterior.triangular_rows`).
    """

    def __init__(self, n_bases, rows, triangular=False):
        self.triangular = triangular
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
    workspace = Workspace(phi.shape[1], max(1, min(phi.shape[0], SUB_ROWS)))
    for start in range(0, phi.shape[0], SUB_ROWS):
        rows = slice(start, start + SUB_ROWS)
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
        mc, sc, valid = cavities(m, s, t_old, n_old, likelihood.alpha)
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




def _workspace_for(block, triangular=False):
    return Workspace(block.phi.shape[1], max(1, min(block.y.shape[0], SUB_ROWS)), triangular)


def _sub_blocks(block, *arrays):
    """(sub-block, slice, arrays sliced) over consecutive row ranges of a block."""
    n = block.y.shape[0]
    for start in range(0, max(n, 1), SUB_ROWS):
        rows = slice(start, min(start + SUB_ROWS, n))
        sub = Block(block.phi[rows], block.lam[rows], block.y[rows], block.approximation)
        yield sub, rows, [a[rows] for a in arrays]

def parallel_chunk(block, tau, nu, posterior, likelihood, damping, signal_variance,
                   ring=None, ring_slot=None, triangular=False):
    """One block of a parallel sweep: damped new sites and their statistics.

    Returns ``(tau_new, nu_new, PassSummary)``; the evidence terms in the summary
    belong to the posterior that was passed in.  With a ``ring`` (Anderson storage of
    this block) the new sites are recorded in ``ring_slot`` and the summary carries
    the inner products (:func:`record_step`).  ``triangular``: the marginals as
    triangular products (:func:`~saspa_dask.ep.posterior.triangular_rows`; for one
    BLAS thread).
    """
    tau_new, nu_new = np.empty_like(tau), np.empty_like(nu)
    workspace = _workspace_for(block, triangular)
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


def evaluate_chunk(block, tau, nu, posterior, likelihood, triangular=False):
    """Evidence terms and invalid-cavity count of one block at a posterior
    (``triangular`` as in :func:`parallel_chunk`)."""
    summary = PassSummary()
    workspace = _workspace_for(block, triangular)
    for sub, _, (t, n) in _sub_blocks(block, tau, nu):
        p = block_pass(sub, t, n, posterior, likelihood, workspace)
        summary = summary.merge(PassSummary(n_invalid=p.n_invalid,
                                            evidence_terms=p.evidence_terms))
    return summary

