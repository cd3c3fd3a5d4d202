"""Invariants of the EP engine itself (saspa_dask.ep)."""

import warnings

import numpy as np
import pytest
from scipy.linalg import LinAlgError

from saspa_dask.ep import (
    Block,
    EPConvergenceWarning,
    EPSchedule,
    Posterior,
    block_pass,
    block_statistics,
    cavities,
    make_block,
    run_ep,
    sequential_block,
    whiten,
)
from saspa_dask.core.kernels import basis_covariance
from saspa_dask.engines.memory import InMemoryEngine
from saspa_dask.core.likelihoods import Probit, Step
from conftest import needs_dataset

# the EP schedule of the Ionosphere comparisons below
SCHEDULE = {"tol": 1e-8, "max_sweeps": 300}


def _blocks(seed=0, n=200, d=2, n_bases=10, sizes=(80, 120)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    means = X[:n_bases] + 0.01
    covs = np.zeros((n_bases, d, d))
    ls = np.ones(d)
    L, _ = whiten(basis_covariance(means, covs, ls, 1.5), 1.5, 1e-8)
    edges = np.cumsum((0,) + sizes)
    return [make_block(X[a:b], y[a:b], means, covs, ls, 1.5, L)
            for a, b in zip(edges[:-1], edges[1:])]


@pytest.mark.parametrize("likelihood", [Probit(), Step(0.1)], ids=["probit", "step"])
def test_rank_one_updates_track_the_posterior_of_the_sites(likelihood):
    blocks = _blocks()
    M = blocks[0].phi.shape[1]
    sigma = np.asfortranarray(np.eye(M))
    mean = np.zeros(M)
    tau = [np.zeros(len(b.y)) for b in blocks]
    nu = [np.zeros(len(b.y)) for b in blocks]
    for _ in range(2):
        for b, t, n in zip(blocks, tau, nu):
            sequential_block(b, t, n, sigma, mean, likelihood, 0.7, 1.5)
    A = sum(block_statistics(b.phi, t, n)[0] for b, t, n in zip(blocks, tau, nu))
    h = sum(block_statistics(b.phi, t, n)[1] for b, t, n in zip(blocks, tau, nu))
    post = Posterior.from_statistics(A, h)
    np.testing.assert_allclose(mean, post.mean, rtol=1e-9, atol=1e-11)
    upper = np.triu_indices(M)
    np.testing.assert_allclose(sigma[upper], post.covariance()[upper], rtol=1e-9, atol=1e-11)


def test_invalid_cavities_are_skipped_and_counted():
    blocks = _blocks(sizes=(200,))
    block = blocks[0]
    post = Posterior.prior(block.phi.shape[1])
    m, s = post.marginals(block.phi)
    tau = np.zeros_like(m)
    tau[:5] = 2.0 / s[:5]  # 1/s < tau: no cavity
    nu = np.zeros_like(m)
    _, _, valid = cavities(m, s, tau, nu)
    assert valid.sum() == len(m) - 5
    res = block_pass(block, tau, nu, post, Probit())
    assert res.n_invalid == 5
    assert np.isnan(res.evidence_terms)  # undefined evidence, not a silent number
    np.testing.assert_array_equal(res.tau_prop[:5], tau[:5])  # left as they were


def test_whiten_raises_jitter_and_reports_it():
    x = np.zeros((3, 2))  # three identical bases: Kh has rank one
    Kh = basis_covariance(x, np.zeros((3, 2, 2)), np.ones(2), 2.0)
    with pytest.raises(LinAlgError):
        np.linalg.cholesky(Kh)
    L, jitter = whiten(Kh, 2.0, 0.0)
    assert jitter >= 1e-12 * 2.0
    np.testing.assert_allclose(L @ L.T, Kh + jitter * np.eye(3), rtol=1e-14, atol=1e-14)


def test_warm_start_from_converged_sites_is_a_fixed_point():
    blocks = _blocks()
    settings = EPSchedule("parallel", 0.7, 500, 1e-10, anderson_memory=0, coarse_start=False)
    cold = run_ep(InMemoryEngine(blocks), Probit(), 1.5, settings)
    warm = run_ep(InMemoryEngine(blocks, sites=(cold.tau, cold.nu)), Probit(), 1.5, settings)
    assert cold.converged and warm.converged and warm.n_sweeps == 1
    np.testing.assert_allclose(warm.posterior.mean, cold.posterior.mean, rtol=1e-8)
    assert warm.log_evidence == pytest.approx(cold.log_evidence, rel=1e-10)
    with pytest.raises(ValueError, match="do not match a block"):
        InMemoryEngine(blocks, sites=(cold.tau[::-1], cold.nu[::-1]))


def test_non_convergence_is_reported():
    blocks = _blocks()
    with pytest.warns(EPConvergenceWarning, match="did not converge in 2 sweeps"):
        res = run_ep(InMemoryEngine(blocks), Probit(), 1.5, EPSchedule("parallel", 0.1, 2, 1e-12, anderson_memory=0, coarse_start=False))
    assert not res.converged and res.n_sweeps == 2
    assert np.isfinite(res.log_evidence)
    assert [r["sweep"] for r in res.history] == [1, 2]
    assert all(np.isfinite(r["log_evidence"]) for r in res.history)


def test_evidence_history_is_that_of_each_posterior():
    """The evidence recorded after sweep k is the one of the posterior after sweep k."""
    blocks = _blocks()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EPConvergenceWarning)
        short = run_ep(InMemoryEngine(blocks), Probit(), 1.5, EPSchedule("parallel", 0.5, 3, 1e-12, anderson_memory=0, coarse_start=False))
        longer = run_ep(InMemoryEngine(blocks), Probit(), 1.5, EPSchedule("parallel", 0.5, 4, 1e-12, anderson_memory=0, coarse_start=False))
    assert longer.history[2]["log_evidence"] == pytest.approx(short.log_evidence, rel=1e-12)
    assert longer.history[3]["log_evidence_start"] == pytest.approx(short.log_evidence,
                                                                    rel=1e-12)


def test_block_from_empty_rows():
    blk = Block(np.zeros((0, 3)), np.zeros(0), np.zeros(0))
    A, b = block_statistics(blk.phi, np.zeros(0), np.zeros(0))
    assert A.shape == (3, 3) and not A.any() and not b.any()


SPAMBASE = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "datasets" / "spambase.csv"


def _sklearn_kmeans_bases(X, n_bases, seed):
    """Bases from scikit-learn's KMeans labels with the shrunk cluster covariances:
    fixes the case below independently of the package's own K-means."""
    from sklearn.cluster import KMeans

    from saspa_dask import Basis
    from saspa_dask.core.bases import shrunk_covariances

    labels = KMeans(n_clusters=n_bases, n_init=1, random_state=seed).fit(X).labels_
    groups = [X[labels == j] for j in range(n_bases)]
    means = np.array([g.mean(0) for g in groups])
    scatter = np.array([(g - g.mean(0)).T @ (g - g.mean(0)) for g in groups])
    counts = np.array([len(g) for g in groups], dtype=float)
    return Basis(means, shrunk_covariances(counts, scatter, X.var(0)))


def _spambase_cycle_case():
    """400 standardised log1p Spambase rows and the settings under which undamped
    parallel EP cycles (s2 = 100, 32 bases)."""
    data = np.loadtxt(SPAMBASE, delimiter=",", skiprows=1)
    X, y = np.log1p(data[:, :-1]), data[:, -1].astype(int)
    X = (X - X.mean(0)) / X.std(0)
    rows = np.random.default_rng(0).permutation(len(y))[:400]
    kw = dict(bases=_sklearn_kmeans_bases(X[rows], 32, 0), signal_variance=100.0,
              lengthscale=3.0, optimize_hyperparameters=False)
    return X[rows], y[rows], kw


@needs_dataset(SPAMBASE)
def test_cycle_rule_breaks_a_period_two_cycle_and_keeps_the_fixed_point():
    """Undamped parallel probit EP on 400 Spambase rows with s2 = 100 cycles with
    period two (site change 0.40 / 0.64 for ever, measured); the cycle rule halves
    the damping once and EP converges to the fixed point that sequential EP reaches."""
    from saspa_dask import SASPAClassifier

    X, y, kw = _spambase_cycle_case()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # the cycle rule acts on plain EP (Anderson steps do not feed it)
        par = SASPAClassifier(**kw, ep={"anderson_memory": 0, **SCHEDULE}).fit(X, y)
        seq = SASPAClassifier(**kw, ep={"mode": "sequential", **SCHEDULE}).fit(X, y)
    assert par.n_damping_reductions_ >= 1
    damped = [r["damping"] for r in par.history_]
    assert damped[0] == 1.0 and damped[-1] <= 0.5
    # before the reduction the change was cycling, not converging
    first = damped.index(damped[-1]) if damped[-1] < 1.0 else len(damped)
    assert min(r["change"] for r in par.history_[:first]) > 0.1
    assert par.log_evidence_ == pytest.approx(seq.log_evidence_, rel=1e-8)
    np.testing.assert_allclose(par.alpha_, seq.alpha_, rtol=1e-5,
                               atol=1e-6 * np.abs(seq.alpha_).max())


@needs_dataset(SPAMBASE)
def test_anderson_acceleration_reaches_the_sequential_fixed_point_in_fewer_sweeps():
    """The period-two cycle above: plain parallel EP needs the cycle rule and 54
    sweeps (measured); Anderson mixing of the last sweeps breaks the cycle with the
    damping left at 1 and reaches the fixed point of sequential EP in 14."""
    from saspa_dask import SASPAClassifier

    X, y, kw = _spambase_cycle_case()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plain = SASPAClassifier(**kw, ep={"anderson_memory": 0, **SCHEDULE}).fit(X, y)
        fast = SASPAClassifier(**kw, ep={"anderson_memory": 3, **SCHEDULE}).fit(X, y)
        seq = SASPAClassifier(**kw, ep={"mode": "sequential", **SCHEDULE}).fit(X, y)
    assert fast.converged_ and fast.n_anderson_steps_ > 0
    assert sum(r["anderson"] for r in fast.history_) == fast.n_anderson_steps_
    assert 2 * fast.n_sweeps_ <= plain.n_sweeps_
    assert all(r["damping"] == 1.0 for r in fast.history_)
    assert fast.log_evidence_ == pytest.approx(seq.log_evidence_, rel=1e-8)
    np.testing.assert_allclose(fast.alpha_, seq.alpha_, rtol=1e-5,
                               atol=1e-6 * np.abs(seq.alpha_).max())


def _probit_blocks(X, y, means, s2, rows):
    """Whitened blocks of ``rows`` rows on spherical bases at ``means`` (unit
    lengthscales, blur 0.05)."""
    covs = np.repeat(0.05 * np.eye(X.shape[1])[None], len(means), axis=0)
    ls = np.ones(X.shape[1])
    L, _ = whiten(basis_covariance(means, covs, ls, s2), s2, 1e-8)
    return [make_block(X[i:i + rows], y[i:i + rows], means, covs, ls, s2, L)
            for i in range(0, X.shape[0], rows)]


def _assert_posterior_of_sites(engine, posterior):
    """P - I and h equal the sums over the engine's sites, recomputed from scratch."""
    A, b = engine.statistics()
    np.testing.assert_allclose(A, posterior.chol @ posterior.chol.T - np.eye(A.shape[0]),
                               rtol=0, atol=1e-9 * np.abs(A).max())
    np.testing.assert_allclose(b, posterior.h, rtol=0, atol=1e-9 * np.abs(b).max())


def test_grouped_sweeps_hold_the_posterior_of_their_sites_and_ep_fixed_point():
    """Block Gauss-Seidel (groups of blocks, each from the posterior holding the groups
    before it): after every sweep P - I and h are the sums over the engine's sites
    recomputed from scratch, whether the run starts cold, from a given posterior or
    from sites, Anderson-mixed sweeps included; and it ends at the fixed point of
    sweeps that update every block from one posterior."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(700, 2))
    y = np.where(X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=700) > 0, 1.0, -1.0)
    s2 = 20.0
    blocks = _probit_blocks(X, y, X[::35], s2, 100)
    exact = run_ep(InMemoryEngine(blocks), Probit(), s2,
                   EPSchedule(tol=1e-12, max_sweeps=500, groups=1, coarse_start=False,
                              anderson_memory=0))
    start = exact.posterior.scaled(0.5)
    mixed = []
    for how in ("cold", "start", "sites"):
        for sweeps in (1, 2, 3, 5, 8, 12):
            sites = None if how != "sites" else ([0.5 * t for t in exact.tau],
                                                [0.5 * n for n in exact.nu])
            engine = InMemoryEngine(blocks, sites=sites, anderson_memory=2)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = run_ep(engine, Probit(), s2,
                                EPSchedule(max_sweeps=sweeps, tol=1e-12, groups=3,
                                           coarse_start=False, anderson_memory=2),
                                start=start if how == "start" else None)
            _assert_posterior_of_sites(engine, result.posterior)
            mixed.append(result.history[-1]["anderson"])
        grouped = run_ep(InMemoryEngine(blocks, sites=sites, anderson_memory=2), Probit(), s2,
                         EPSchedule(tol=1e-12, max_sweeps=500, groups=3, coarse_start=False,
                                    anderson_memory=2),
                         start=start if how == "start" else None)
        assert grouped.converged
        # Anderson mixes only in the linear tail of grouped sweeps
        assert all(record["change"] < 1e-2 for record in grouped.history
                   if record["anderson"])
        np.testing.assert_allclose(np.concatenate(grouped.tau), np.concatenate(exact.tau),
                                   rtol=1e-8, atol=1e-10)
        assert grouped.log_evidence == pytest.approx(exact.log_evidence, rel=1e-10)
    assert any(mixed)  # some runs ended on a mixed sweep: each group's share mixed too


def test_triangular_rows_is_the_product_with_the_upper_triangle():
    """The marginals' TRMM (Dask chunk tasks) against NumPy's dense product with the
    upper triangle, for C-ordered rows, in place in the given buffer; and the
    posterior's marginals equal either way."""
    from saspa_dask.ep.posterior import Posterior, triangular_rows
    from saspa_dask.ep.sites import Workspace

    rng = np.random.default_rng(3)
    phi = rng.normal(size=(301, 17))
    upper = np.triu(rng.normal(size=(17, 17)))
    out = np.empty_like(phi)
    product = triangular_rows(phi, upper, out)
    np.testing.assert_allclose(product, phi @ upper, rtol=1e-13, atol=1e-13)
    assert np.shares_memory(product, out) and product.flags.c_contiguous
    A = phi[:40].T @ (rng.uniform(0.1, 2.0, 40)[:, None] * phi[:40])
    posterior = Posterior.from_statistics(A, phi[:40].T @ rng.normal(size=40))
    dense = posterior.marginals(phi)
    for triangular in (False, True):
        m, v = posterior.marginals(phi, Workspace(17, 301, triangular))
        np.testing.assert_allclose(m, dense[0], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(v, dense[1], rtol=1e-12, atol=1e-15)
        # var_i = phi_i^T P^{-1} phi_i, by solves with P itself
        P = np.eye(17) + A
        np.testing.assert_allclose(v, np.einsum("ij,ji->i", phi, np.linalg.solve(P, phi.T)),
                                   rtol=1e-10)


class _RingSpy(InMemoryEngine):
    """An in-memory engine that notes the ring slot of every pass."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.slots = []

    def parallel_pass(self, *args, ring_slot=None, part=None, **kwargs):
        self.slots.append(ring_slot)
        return super().parallel_pass(*args, ring_slot=ring_slot, part=part, **kwargs)


@pytest.mark.parametrize("groups, start", [(1, 1.0), (3, 1e-2)])
def test_anderson_ring_is_written_only_near_where_mixing_starts(groups, start):
    """A ring slot written while the site change is far above Anderson's start is
    dropped before it is mixed: a pass writes the ring only after a sweep whose
    change was within twice the start (1 with one group, 1e-2 in groups), and
    such runs still mix and still end at the fixed point of plain sweeps."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(700, 2))
    y = np.where(X[:, 0] - X[:, 1] + 0.3 * rng.normal(size=700) > 0, 1.0, -1.0)
    s2 = 20.0
    blocks = _probit_blocks(X, y, X[::35], s2, 100)
    schedule = dict(tol=1e-12, max_sweeps=500, groups=groups, coarse_start=False)
    plain = run_ep(InMemoryEngine(blocks), Probit(), s2,
                   EPSchedule(**schedule, anderson_memory=0))
    spy = _RingSpy(blocks, anderson_memory=2)
    fast = run_ep(spy, Probit(), s2, EPSchedule(**schedule, anderson_memory=2))
    assert fast.converged and fast.n_anderson_steps > 0
    changes = [r["change"] for r in fast.history]
    written = [slot is not None for slot in spy.slots[::groups]]
    assert len(written) == len(changes)
    assert written == [False] + [c <= 2 * start for c in changes[:-1]]
    assert not all(written) and any(written)
    np.testing.assert_allclose(np.concatenate(fast.tau), np.concatenate(plain.tau),
                               rtol=1e-8, atol=1e-10)


def test_anderson_posterior_is_the_posterior_of_its_mixed_sites():
    """Anderson mixes the statistics on the driver and the sites in the engine; they
    must stay one state: after every mixed sweep, P - I and h equal the sums over the
    engine's sites recomputed from scratch."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(600, 2))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=600) > 0, 1.0, -1.0)
    s2 = 50.0
    blocks = _probit_blocks(X, y, X[::40], s2, 150)
    # run_ep hands back the posterior it carried: stop it after 2, 3, ... sweeps and
    # compare with the statistics of the sites the engine holds
    checked = []
    for sweeps in range(2, 12):
        engine = InMemoryEngine(blocks, anderson_memory=2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = run_ep(engine, Probit(), s2, EPSchedule(max_sweeps=sweeps, tol=1e-12,
                                                             anderson_memory=2, coarse_start=False,
                                                             groups=1))
        _assert_posterior_of_sites(engine, result.posterior)
        checked.append(result.history[-1]["anderson"])
    assert any(checked)  # some runs ended on a mixed sweep


def test_coarse_start_reaches_the_cold_fixed_point_in_fewer_sweeps():
    """EP on every 7th of 15 blocks, scaled to all rows, as the first sweep's cavities:
    the same sites and evidence as a start from the prior, with fewer full sweeps."""
    from saspa_dask import SASPAClassifier
    from saspa_dask.datasets import synthetic_two_class

    X, y = synthetic_two_class(60_000, 4, seed=3)
    params = dict(n_bases=32, random_state=0, optimize_hyperparameters=False,
                  execution={"block_rows": 4096})
    cold = SASPAClassifier(**params, ep={"tol": 1e-8, "coarse_start": False}).fit(X, y)
    coarse = SASPAClassifier(**params, ep={"tol": 1e-8}).fit(X, y)
    assert cold.coarse_start_ == []
    [level] = coarse.coarse_start_
    assert level["rows"] == 2 * 4096 + (60_000 - 14 * 4096) and level["converged"]
    assert coarse.n_sweeps_ <= cold.n_sweeps_ - 3, (coarse.n_sweeps_, cold.n_sweeps_)
    assert coarse.log_evidence_ == pytest.approx(cold.log_evidence_, rel=1e-12)
    np.testing.assert_allclose(coarse.alpha_, cold.alpha_, rtol=1e-6,
                               atol=1e-6 * np.abs(cold.alpha_).max())
    np.testing.assert_allclose(coarse.sites_tau_, cold.sites_tau_, rtol=1e-5, atol=1e-9)


def _site_posterior(blocks, tau, nu):
    """The posterior of sites (tau, nu), one array over all blocks' rows."""
    edges = np.cumsum([0] + [len(b.y) for b in blocks])
    stats = [block_statistics(b.phi, tau[a:z], nu[a:z])
             for b, a, z in zip(blocks, edges[:-1], edges[1:])]
    return Posterior.from_statistics(sum(s[0] for s in stats), sum(s[1] for s in stats))


def test_a_deadline_stops_ep_between_sweeps_with_the_posterior_of_its_sites():
    """A passed deadline: one sweep, reported as stopped by the budget and not
    converged; what it returns is the posterior of the sites it returns, the same as
    a run capped at one sweep.  A far deadline changes nothing.  The Gaussian
    likelihood's first sweep from the prior sets the fixed point: it ends converged
    after it, only the evidence left out (NaN, a warning); warm-started, it is not
    stopped."""
    import time
    from dataclasses import replace

    from saspa_dask.core.likelihoods import Gaussian

    blocks = _blocks()
    schedule = EPSchedule("parallel", 1.0, 100, 1e-10, anderson_memory=0, coarse_start=False)
    with pytest.warns(EPConvergenceWarning, match="stopped by the time budget after 1 sweep"):
        stopped = run_ep(InMemoryEngine(blocks), Probit(), 1.5, schedule,
                         deadline=time.perf_counter() - 1.0)
    assert stopped.stopped_by_time and not stopped.converged and stopped.n_sweeps == 1
    own = _site_posterior(blocks, np.concatenate(stopped.tau), np.concatenate(stopped.nu))
    np.testing.assert_allclose(stopped.posterior.mean, own.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(stopped.posterior.chol, own.chol, rtol=1e-10, atol=1e-12)
    with pytest.warns(EPConvergenceWarning, match="did not converge in 1 sweeps"):
        capped = run_ep(InMemoryEngine(blocks), Probit(), 1.5,
                        EPSchedule("parallel", 1.0, 1, 1e-10, anderson_memory=0,
                                   coarse_start=False))
    np.testing.assert_array_equal(stopped.posterior.mean, capped.posterior.mean)
    assert not capped.stopped_by_time
    free = run_ep(InMemoryEngine(blocks), Probit(), 1.5, schedule)
    far = run_ep(InMemoryEngine(blocks), Probit(), 1.5, schedule,
                 deadline=time.perf_counter() + 3600.0)
    assert far.converged and far.n_sweeps == free.n_sweeps > 2
    np.testing.assert_array_equal(far.posterior.mean, free.posterior.mean)
    gaussian_blocks = [replace(b, y=0.5 * b.y) for b in blocks]
    with pytest.warns(EPConvergenceWarning, match="no room for the sweep that computes"):
        exact = run_ep(InMemoryEngine(gaussian_blocks), Gaussian(0.1), 1.5, schedule,
                       deadline=time.perf_counter() - 1.0)
    assert exact.converged and not exact.stopped_by_time and exact.n_sweeps == 1
    assert np.isnan(exact.log_evidence)
    confirmed = run_ep(InMemoryEngine(gaussian_blocks), Gaussian(0.1), 1.5, schedule)
    assert confirmed.n_sweeps == 2 and np.isfinite(confirmed.log_evidence)
    np.testing.assert_allclose(exact.posterior.mean, confirmed.posterior.mean, rtol=1e-10)
    warm = run_ep(InMemoryEngine(gaussian_blocks, sites=(confirmed.tau, confirmed.nu)),
                  Gaussian(0.1), 1.5, schedule, deadline=time.perf_counter() - 1.0)
    assert warm.converged and not warm.stopped_by_time and np.isfinite(warm.log_evidence)


def test_ep_on_all_rows_after_a_subsample_starts_from_its_scaled_posterior():
    """Learning on a subsample, then EP on all rows: the subsample's posterior scaled to
    all rows seeds the coarse start (40,000 rows stand for more than 10 times the 3,000
    learnt on: one level, every 10th 2,048-row block, 4,096 rows, started from it), and
    the run reaches the fixed point that a cold fit at the learnt values (with its own
    coarse start) reaches: EP's fixed point does not depend on where it starts."""
    from saspa_dask import SASPAClassifier
    from saspa_dask.core.bases import Basis
    from saspa_dask.datasets import synthetic_two_class

    X, y = synthetic_two_class(40_000, 3, seed=5)
    # (the fixed point itself, not the earlier stop on settled predictions)
    common = dict(n_bases=16, blur="delta", random_state=0,
                  ep={"tol": 1e-9, "prediction_tol": 0.0}, execution={"block_rows": 2048})
    staged = SASPAClassifier(**common, hyper_subsample=3000, max_hyper_iter=4).fit(X, y)
    assert staged.hyperparameter_info_["n_rows_learnt"] == 3000
    assert [level["rows"] for level in staged.coarse_start_] == [4096] and staged.converged_
    fitted = staged.fitted_posterior_
    cold = SASPAClassifier(**common, bases=Basis(fitted.means), lengthscale=fitted.lengthscale,
                           signal_variance=fitted.signal_variance,
                           optimize_hyperparameters=False, learn_bases=False).fit(X, y)
    assert len(cold.coarse_start_) == 1 and cold.converged_
    assert staged.log_evidence_ == pytest.approx(cold.log_evidence_, rel=1e-10)
    np.testing.assert_allclose(staged.sites_tau_, cold.sites_tau_, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(staged.alpha_, cold.alpha_, rtol=1e-6,
                               atol=1e-6 * np.abs(cold.alpha_).max())


def _latent_predictions(phi, posterior, s2):
    """Latent means and variances at whitened rows phi, from the posterior covariance
    (written here apart from Posterior.marginals)."""
    cov = posterior.covariance()
    return phi @ posterior.mean, s2 - (phi**2).sum(1) + np.einsum("ij,jk,ik->i", phi, cov, phi)


def _mean_kl(new, old):
    (m1, v1), (m0, v0) = new, old
    return float(np.mean(0.5 * (v1 / v0 - 1 - np.log(v1 / v0) + (m1 - m0) ** 2 / v0)))


@pytest.mark.parametrize("damping", [1.0, 0.5])
def test_a_run_converges_where_its_predictions_settle(damping):
    """With a probe, parallel EP stops at the first sweep k whose step (here plain:
    no Anderson mixing) moves the probe rows' predictions by a mean KL divergence,
    over damping^2, below prediction_tol: computed here from runs capped at k and
    k - 1 sweeps.  The result is then the posterior sweep k started from (the capped
    run at k - 1 sweeps), evidence included, converged on its predictions.  Without
    a probe, or with prediction_tol 0, the site change alone decides."""
    blocks = _blocks(seed=4, n=300, sizes=(100, 100, 100))
    rng = np.random.default_rng(9)
    probe_phi = blocks[1].phi[rng.choice(100, 40, replace=False)]
    s2, tol = 1.5, 1e-4

    def probe(posterior):
        return _latent_predictions(probe_phi, posterior, s2)

    def schedule(max_sweeps, prediction_tol):
        return EPSchedule("parallel", damping, max_sweeps, 1e-12, anderson_memory=0,
                          coarse_start=False, prediction_tol=prediction_tol)

    def capped(k):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EPConvergenceWarning)
            return run_ep(InMemoryEngine(blocks), Probit(), s2, schedule(k, 0.0))

    settled = run_ep(InMemoryEngine(blocks), Probit(), s2, schedule(100, tol), probe=probe)
    before = capped(1)
    for k in range(2, 101):
        after = capped(k)
        change = _mean_kl(probe(after.posterior), probe(before.posterior)) / damping**2
        if change < tol:
            break
        before = after
    assert 3 < k < 100
    assert all(r["damping"] == damping for r in settled.history)  # no cycle rule here
    assert settled.converged and settled.converged_on == "predictions"
    assert settled.n_sweeps == k and not settled.stopped_by_time
    assert settled.history[-1]["prediction_change"] == pytest.approx(change, rel=1e-6)
    assert all(r["prediction_change"] >= tol for r in settled.history[1:-1])
    np.testing.assert_allclose(settled.posterior.mean, before.posterior.mean, rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(np.concatenate(settled.tau), np.concatenate(before.tau),
                               rtol=1e-12, atol=1e-14)
    assert settled.log_evidence == pytest.approx(before.log_evidence, rel=1e-12)
    # the site change alone: more sweeps, to tol
    for sites_only in (run_ep(InMemoryEngine(blocks), Probit(), s2, schedule(300, tol)),
                       run_ep(InMemoryEngine(blocks), Probit(), s2, schedule(300, 0.0),
                              probe=probe)):
        assert sites_only.converged and sites_only.converged_on == "sites"
        assert sites_only.n_sweeps > k
        assert "prediction_change" not in sites_only.history[-1]


def test_ep_on_all_rows_after_a_subsample_stops_when_its_predictions_settle():
    """The fit's EP on all rows after learning on a subsample: converged on its
    predictions on the sample's rows (fewer sweeps than to tol), every sweep before
    the last above prediction_tol; at the same learnt values, its predictions at new
    rows are within a mean divergence of prediction_tol of EP run to tol (on this
    problem: the rule bounds the last step, not the distance left)."""
    from saspa_dask import SASPAClassifier
    from saspa_dask.datasets import synthetic_two_class

    X, y = synthetic_two_class(40_000, 3, seed=5)
    common = dict(n_bases=16, random_state=0, hyper_subsample=3000, max_hyper_iter=4,
                  execution={"block_rows": 4096})
    settled = SASPAClassifier(**common).fit(X, y)
    to_tol = SASPAClassifier(**common, ep={"prediction_tol": 0.0}).fit(X, y)
    assert settled.ep_stop_reason_ == "predictions" and settled.converged_
    assert to_tol.ep_stop_reason_ == "converged"
    assert settled.n_sweeps_ < to_tol.n_sweeps_
    changes = [r["prediction_change"] for r in settled.history_]
    assert changes[-1] < 1e-4 <= min(changes[:-1])
    assert len(changes) == settled.n_sweeps_
    np.testing.assert_array_equal(settled.lengthscale_, to_tol.lengthscale_)
    Xn = synthetic_two_class(2_000, 3, seed=6)[0]
    assert _mean_kl(settled.predict_latent(Xn), to_tol.predict_latent(Xn)) < 1e-4


def test_a_run_from_a_given_posterior_settles_on_its_own_sites():
    """A cold run started from a given posterior (here the fixed point itself) never
    stops on its first sweep by the prediction rule, whose starting posterior is not
    that of the engine's (zero) sites: it stops at the second, and what it returns is
    the posterior of the sites it returns."""
    blocks = _blocks(seed=4, n=300, sizes=(100, 100, 100))
    probe_phi = blocks[0].phi[:30]

    def probe(posterior):
        return _latent_predictions(probe_phi, posterior, 1.5)

    fixed = run_ep(InMemoryEngine(blocks), Probit(), 1.5,
                   EPSchedule(tol=1e-10, anderson_memory=0, coarse_start=False,
                              prediction_tol=0.0))
    loose = EPSchedule(tol=1e-10, anderson_memory=0, coarse_start=False, prediction_tol=1.0)
    result = run_ep(InMemoryEngine(blocks), Probit(), 1.5, loose, start=fixed.posterior,
                    probe=probe)
    assert result.converged_on == "predictions" and result.n_sweeps == 2
    own = _site_posterior(blocks, np.concatenate(result.tau), np.concatenate(result.nu))
    np.testing.assert_allclose(result.posterior.mean, own.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(result.posterior.chol, own.chol, rtol=1e-10, atol=1e-12)


def test_the_priors_marginals_are_those_of_the_identity_factor():
    """A cold run's first sweep takes its cavities from the prior N(0, I): its
    marginals without a product (mean 0, variance |phi_i|^2) equal, bit for bit, the
    general path's through R = I."""
    phi = np.random.default_rng(3).normal(size=(300, 7))
    prior = Posterior.prior(7)
    general = Posterior(np.eye(7), np.zeros(7), np.zeros(7))  # not marked: the GEMM
    assert prior.is_prior and not general.is_prior
    for got, want in zip(prior.marginals(phi), general.marginals(phi)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(prior.marginals(phi)[1], (phi ** 2).sum(axis=1), rtol=1e-14)
