"""Every tuned number of a fit's policies, in one place.

A fit's phases decide by measured rules: how much of a time budget to keep for EP on
all rows, what an optimiser evaluation costs, when an exact GP's start is worth its
price, when learning's stages end, how stochastic learning steps.  Each number below
says in a line why it has its value; the measurements behind it are in the results
section named (``benchmarks/RESULTS.md`` and its dated records), never in the code.
The modules read them as ``policy.POLICY.name`` when they use them, so a test may put
another :class:`FitPolicy` in its place (``monkeypatch.setattr(policy, "POLICY", ...)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["FitPolicy", "POLICY"]


def _term_costs():
    # one-core matmul flops per unit of each term of an evaluation ("The cost estimate,
    # rechecked"): EP's n M^2 passes, the rows' features (n M d), the basis pairs
    # (M^2 d: logarithms and divisions), L-BFGS-B's own work per learnt value, and
    # delta bases' pairs (a product from the means' Gram matrix)
    return {"ep": 13.7, "rows": 10.0, "pairs": 2100.0, "delta_pairs": 100.0,
            "learnt": 124_000.0}


@dataclass(frozen=True)
class FitPolicy:
    """The tuned numbers of a fit's policies (module docstring)."""

    # -- the time budget (fitting.budget; "The budget's reserve for EP on all rows") --
    #: sweeps of EP on all rows the budget keeps room for, beside the build and the
    #: closing evidence pass ("An anytime fit": the first sweep's model is nearly the
    #: converged one's)
    final_sweeps: int = 1
    #: the block build counted as this many sweeps until a build is timed (it
    #: measured 1.2-2.2; learning's in-memory builds then give its cost per row)
    build_sweeps: int = 2
    #: learning on all rows after the stages needs room for this many evaluations ...
    evaluations_on_all: int = 3
    #: ... of this many sweeps each ("An anytime fit")
    evaluation_sweeps: int = 16
    #: EP on all rows only when the time left holds its reserve this many times; else
    #: the model is the learning sample's ("Held-out metrics as a fit learns")
    sample_model_ratio: float = 2.0
    #: ... and then EP at the learnt values on a sample as large as the time left holds
    #: it as many times, up to the largest learning stage or the rows whose basis
    #: features take this many bytes on the driver, if more ("Classification ahead
    #: of SVGP from 10 s")
    sample_model_bytes: int = 2**28
    #: the budget's share K-means' Lloyd rows may take ("A first model by 10 s") ...
    kmeans_share: float = 0.05
    #: ... at this many one-core matmul flops per row, basis and input
    kmeans_row_cost: float = 240.0
    #: a budget shorter than this many first-stage evaluations learns first on half
    #: the stage's rows ("A first model by 10 s", "Classification ahead of SVGP from
    #: 10 s") ...
    half_stage_evaluations: float = 4.5
    #: ... when that half keeps this many rows a basis
    half_stage_rows_per_basis: int = 20

    # -- what learning costs (fitting.costs; "What learning costs") --------------------
    #: EP passes an evaluation makes, in the cost model
    ep_passes: int = 8
    #: full blurs: the share of the matmul rate an evaluation's flops reach ("The cost
    #: estimate of full blurs, rechecked")
    full_blur_efficiency: float = 0.28
    #: the other families, per term (:func:`_term_costs`)
    term_costs: dict = field(default_factory=_term_costs)
    #: blur="auto": full covariances up to this many inputs, diagonal above (a full
    #: evaluation costs 1.4-1.7 times a diagonal one up to 16, 20 times at 64)
    full_blur_max_dims: int = 16
    #: warn when one evaluation is expected to take longer than this (seconds)
    slow_evaluation_seconds: float = 60.0
    #: EP inside learning's evaluations stops at this site change (or the asked
    #: tolerance, if looser); the chosen values' EP is then polished to the asked one
    #: ("Cheaper learning evaluations": the same held-out numbers in less CPU)
    learning_ep_tol: float = 1e-4

    # -- learning near the variational fit first (fitting.learning_start) --------------
    #: Power EP's alpha of that first learning (near Titsias' bound at alpha -> 0)
    variational_alpha: float = 1e-3
    #: learning_start="race": the learning iterations after which the higher evidence
    #: picks the start that goes on (the fewest that picked the full fits' winner with
    #: a margin: "The defaults race the two learning starts") ...
    race_iterations: int = 30
    #: ... and the variational start's second fit's
    race_second_iterations: int = 10
    #: the data's start stops there only when its energy per row is this far behind
    #: the variational start's; nearer, both learn on and the higher evidence is kept
    #: (on Kin-40k a data start a little behind there ended far ahead: "The race's
    #: margin")
    race_margin: float = 0.05

    # -- an exact GP's start (fitting.exact_start; "An exact GP's start") --------------
    #: rows of the seeded sample the exact GP is fitted on
    exact_start_rows: int = 512
    #: its L-BFGS-B iterations at most
    exact_start_max_iter: int = 100
    #: ... and in the check after learning, which asks only whether the exact GP's
    #: start is above where learning ended, not for its optimum ("The defaults race
    #: the two learning starts")
    exact_check_max_iter: int = 30
    #: nats per row beyond independent noise for "the exact GP found structure"
    exact_structure_per_row: float = 0.05
    #: learning from the data's start is checked against the exact start only after
    #: at least this many times the exact GP's work ("Learning that stopped on a
    #: plateau")
    exact_check_work_ratio: float = 1.0
    #: the exact start applies with at least this many rows per learnt value
    exact_rows_per_value: int = 8

    # -- learning in stages (fitting.stages; "When learning stops") --------------------
    #: a stage that gains less than this many nats per row ends the stages
    stage_gain_per_row: float = 1e-3
    #: rows of the learning sample whose predictions may settle EP on all rows
    #: ("EP on all rows stops when its predictions settle")
    probe_rows: int = 4096

    # -- stochastic learning (fitting.stochastic; "Stochastic learning with per-row
    # sites") ---------------------------------------------------------------------------
    #: the stop rule compares the anchors' energy over the epochs of this many steps
    window_steps: int = 250
    #: an epoch that lost more than this many nats per row is undone, the rate halved
    revert_drop: float = 1e-3
    #: after an epoch that gained, the rate grows back by this factor (to its own)
    rate_growth: float = 1.5
    #: a basis mean's step, in its input's lengthscales per unit of the rate (Pole
    #: does best small, Kin-40k large: between)
    mean_step: float = 0.01
    #: Adam's rate is divided by the learning epochs to this power (Robbins-Monro)
    rate_decay: float = 0.25
    #: an epoch takes at least this many minibatch steps (smaller minibatches on few
    #: rows: one 2,048-row step an epoch learnt little in the epoch cap; "Stochastic
    #: learning on few rows")
    min_steps_per_epoch: int = 8


POLICY = FitPolicy()
