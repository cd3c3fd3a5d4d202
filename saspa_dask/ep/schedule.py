"""How EP runs: the one schedule type, from the estimators' ``ep`` parameter to the
driver (:func:`~saspa_dask.ep.driver.run_ep`).

``damping=None`` is resolved by likelihood (:func:`default_damping`) before a run;
the driver needs a number.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from numbers import Integral, Real

from ..core.likelihoods import LIKELIHOODS

__all__ = ["EPSchedule", "check_field", "default_damping", "is_whole"]


def check_field(ok, owner, name, need, value):
    if not ok:
        raise ValueError(f"{owner}.{name} must be {need}, got {value!r}")


@dataclass(frozen=True)
class EPSchedule:
    """How EP runs: the sweep schedule, its stopping rule and its accelerations.

    Parameters
    ----------
    mode : {"parallel", "sequential"}, default="parallel"
        ``sequential`` is the paper's Algorithm 1 (rank-one updates, refreshed every
        sweep); ``parallel`` updates all sites from one posterior (one map-reduce a
        sweep on Dask).
    damping : float in (0, 1], default=None
        Site damping; ``None`` picks it by likelihood (0.8 for the step and noisy-probit
        likelihoods, 0.5 for Student-t: not log-concave, undamped EP can oscillate on
        them; 1.0 otherwise).
    max_sweeps : int, default=100
    tol : float, default=1e-6
        Convergence threshold on the undamped, scale-free site change.
    anderson_memory : int, default=3
        Parallel EP only: the next sites are the Anderson combination of the last
        ``anderson_memory + 1`` sweeps' outputs that best cancels their steps
        (Walker & Ni 2011), once the site change is below 1; the history restarts when
        the change grows or the mixed posterior is not positive definite, and a change
        that grew after mixing defers mixing to a 10 times smaller change.  It speeds
        up slow linear convergence and cycles and keeps the fixed point (with
        ``groups`` > 1, from a change below 1e-2).  Costs
        4 (memory + 1) floats a row (in worker memory, or in the Dask site store).
        0 turns it off.
    prediction_tol : float, default=1e-4
        Parallel EP on all rows after learning on a row sample (``hyper_subsample``)
        also stops when its predictions have settled: when a sweep's plain step
        (damped, not Anderson-mixed) would move the latent predictive distributions
        of up to 4,096 rows of the learning sample by a mean Kullback-Leibler
        divergence, over the damping squared, below ``prediction_tol``, from the
        second sweep on.  The result is the posterior that sweep started from, with
        its sites and evidence.  On many rows the posterior settles sweeps before
        every row's site does (each site is one of N); the fit is then converged with
        ``ep_stop_reason_ == "predictions"``.  0 leaves the decision to ``tol``
        alone.  EP inside learning (where the gradient needs the sites' fixed point)
        is never stopped this way.
    groups : int, default=4
        Parallel EP only: the row blocks (``block_rows`` in memory, chunks on Dask) are
        updated in ``groups`` interleaved groups (blocks g, g + groups, ...), one after
        another, each from the posterior that already holds the groups before it
        (block Gauss-Seidel); a sweep is still one pass over the rows, in ``groups``
        map-reduce rounds.  Updating every block from one posterior (``groups=1``)
        overshoots on many rows: all sites move together.  Used with at least
        ``groups`` blocks and sites that depend on the cavity (not the Gaussian
        likelihood's), else one group; with more than one group the sweep's
        evidence is not free (one evaluation pass at the end) and Anderson
        acceleration waits for the linear tail (a site change below 1e-2: mixing
        grouped sweeps earlier cost sweeps).  The fixed point is the same.
    coarse_start : bool, default=True
        Start a cold parallel EP run from EP on every 10th row block (recursively
        started the same way), its site sums scaled to all rows.  This skips most of
        a cold start's transient on large N; the fixed point is unchanged.  Needs at
        least 4 blocks (``block_rows`` in memory, chunks on Dask); never for the
        Gaussian likelihood or sequential EP.

    Examples
    --------
    >>> from saspa_dask import EPSchedule, SASPAClassifier
    >>> clf = SASPAClassifier(ep=EPSchedule(mode="sequential", max_sweeps=200))
    >>> SASPAClassifier(ep={"tol": 1e-8}).get_params()["ep"]
    {'tol': 1e-08}
    """

    mode: str = "parallel"
    damping: float | None = None
    max_sweeps: int = 100
    tol: float = 1e-6
    anderson_memory: int = 3
    coarse_start: bool = True
    prediction_tol: float = 1e-4
    groups: int = 4

    def __post_init__(self):
        name = type(self).__name__
        check_field(self.mode in ("parallel", "sequential"), name, "mode",
               "'parallel' or 'sequential'", self.mode)
        check_field(self.damping is None or (isinstance(self.damping, Real)
                                        and not isinstance(self.damping, bool)
                                        and 0 < self.damping <= 1),
               name, "damping", "None or a float in (0, 1]", self.damping)
        check_field(is_whole(self.max_sweeps, 1), name, "max_sweeps", "an integer >= 1",
               self.max_sweeps)
        check_field(isinstance(self.tol, Real) and not isinstance(self.tol, bool)
                    and self.tol > 0, name, "tol", "a float > 0", self.tol)
        check_field(is_whole(self.anderson_memory, 0), name, "anderson_memory",
                    "an integer >= 0", self.anderson_memory)
        check_field(is_whole(self.groups, 1), name, "groups", "an integer >= 1", self.groups)
        check_field(isinstance(self.coarse_start, bool), name, "coarse_start", "a bool",
               self.coarse_start)
        check_field(isinstance(self.prediction_tol, Real)
                    and not isinstance(self.prediction_tol, bool)
                    and self.prediction_tol >= 0, name, "prediction_tol", "a float >= 0",
                    self.prediction_tol)

    def with_damping(self, likelihood):
        """This schedule with ``damping`` resolved for ``likelihood`` (a name) when
        it is None."""
        if self.damping is not None:
            return self
        return replace(self, damping=default_damping(likelihood))

    @property
    def step(self):
        """The damping as a number (1.0, no damping, while unresolved)."""
        return 1.0 if self.damping is None else float(self.damping)


def is_whole(value, low):
    return isinstance(value, Integral) and not isinstance(value, bool) and value >= low


def default_damping(likelihood):
    """Damping when ``EPSchedule.damping`` is None: the named likelihood's own
    (``Likelihood.default_damping``; 1 for a name it does not know)."""
    cls = LIKELIHOODS.get(likelihood)
    return 1.0 if cls is None else float(cls.default_damping)
