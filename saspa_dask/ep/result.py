"""What an EP run produced: :class:`EPResult`, its evidence, and the warning of a run
that did not converge."""

from __future__ import annotations

from dataclasses import dataclass, field

from .posterior import Posterior

__all__ = ["EPConvergenceWarning", "EPResult", "ep_evidence"]


class EPConvergenceWarning(UserWarning):
    """EP stopped at ``max_sweeps`` without meeting the tolerance."""


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
    ``stopped_by_time``: a deadline ended the run before convergence (it is then
    not ``converged``).  ``converged_on``: "sites" (the site change fell below
    ``tol``) or "predictions" (the probe rows' predictions settled:
    ``prediction_tol``).
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
    stopped_by_time: bool = False
    converged_on: str = "sites"


def ep_evidence(posterior, site_sum):
    """The EP log evidence of a posterior whose sites' terms sum to ``site_sum``."""
    return float(-0.5 * posterior.log_det() + 0.5 * posterior.h @ posterior.mean + site_sum)
