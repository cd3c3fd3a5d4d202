"""The training parameters: every estimator option a training job takes, grouped
settings (``ep``, ``execution``, ``stochastic``) under flat names, and what
retraining may change."""

from __future__ import annotations

from .schema import (APPROXIMATIONS, AUTO_BASES, AUTO_BASES_LARGE, AUTO_LARGE_ROWS,
                     BLUR_CHOICES, CLASSIFICATION_LIKELIHOODS, KERNEL_CHOICES,
                     LEARN_BASES_CHOICES, LEARNING_STARTS, REGRESSION_LIKELIHOODS, Parameter,
                     parse_exact_start, parse_n_bases, parse_none, parse_stages)

__all__ = ["RETRAIN_PARAMETERS", "TRAIN_PARAMETERS", "by_name"]

_EP_FIELDS = (
    Parameter("ep_mode", str, "parallel", "Parallel (all sites per sweep, one map-reduce on "
              "the cluster) or sequential EP.", "ep", "mode", ("parallel", "sequential")),
    Parameter("damping", float, None, "Site damping in (0, 1] (default: by likelihood).",
              "ep", "damping"),
    Parameter("max_sweeps", int, 100, "Most EP sweeps (exit code 3 if EP has not converged "
              "by then).", "ep", "max_sweeps"),
    Parameter("tol", float, 1e-6, "EP stops when the largest undamped site change is below "
              "this.", "ep", "tol"),
    Parameter("anderson_memory", int, 3, "Sweeps remembered by Anderson acceleration of "
              "parallel EP (0: off).", "ep", "anderson_memory"),
    Parameter("prediction_tol", float, 1e-4, "EP on all rows after learning on a row "
              "sample also stops when its predictions have settled: the mean KL "
              "divergence between two sweeps' latent predictions on 4,096 sample rows "
              "below this (0: the site change alone decides).", "ep", "prediction_tol"),
    Parameter("ep_groups", int, 4, "Parallel EP updates the chunks in this many "
              "interleaved groups, each from the posterior holding the groups before it "
              "(1: every chunk from one posterior); the fixed point is the same.", "ep",
              "groups"),
    Parameter("coarse_start", bool, True, "Start parallel EP from EP on every 10th chunk "
              "(recursively), scaled to all rows; the fixed point is the same.", "ep",
              "coarse_start", off_flags=("--cold-start",)),
)

_STOCHASTIC_FIELDS = (
    Parameter("minibatch_rows", int, 2048, "Stochastic learning: rows per minibatch (at "
              "most an eighth of the rows: an epoch of at least 8 steps).",
              "stochastic", "batch_rows"),
    Parameter("learning_rate", float, 0.05, "Stochastic learning: Adam's step (log space; "
              "a basis mean moves a tenth of its input's lengthscale per unit).",
              "stochastic", "learning_rate"),
    Parameter("max_epochs", float, 100.0, "Stochastic learning: passes over the rows at "
              "most (--max-fit-time usually ends it first on large data).", "stochastic",
              "max_epochs"),
    Parameter("stochastic_tol", float, 1e-3, "Stochastic learning stops when the energy per "
              "row, averaged over 250 steps, rose by less than this over the 250 before.",
              "stochastic", "tol"),
)

_EXECUTION_FIELDS = (
    Parameter("cache", str, "auto", "Keep whitened chunk blocks in worker memory between "
              "sweeps (memory), rebuild them every sweep (none), or cache them where they "
              "fit within a share of the workers' memory limits (auto).", "execution",
              "cache", ("auto", "memory", "none")),
    Parameter("work_dir", str, None, "Directory for site arrays during training (default: "
              "beside --out).", "execution", "work_dir"),
    Parameter("block_rows", int, 8192, "Rows per in-memory block and per prediction block "
              "(bounds memory).", "execution", "block_rows"),
)


TRAIN_PARAMETERS = (
    Parameter("n_bases", (int, str), "auto", "Basis points M (cost O(N M^2) a sweep); "
              f"auto: {AUTO_BASES}, and {AUTO_BASES_LARGE} from {AUTO_LARGE_ROWS:,} rows "
              "(never more than the rows).", parse=parse_n_bases),
    Parameter("blur", str, "auto", "Basis blur: auto (full up to 16 inputs, diagonal "
              "above: a full blur's cost grows as d^2 per row and d^3 per pair of bases), "
              "delta (FITC/SPGP), spherical (multiscale), "
              "diagonal or full (SASPA-full, the K-means cluster covariances); or frequency "
              "inducing features: fourier (TFIFGP, a centre per feature) or fourier-global "
              "(FIFGP, one centre).", choices=BLUR_CHOICES),
    Parameter("kernel", str, "se", "Kernel shape with ARD lengthscales: se (squared "
              "exponential) or Matern with nu 1/2, 3/2, 5/2 (exact for delta blur, a "
              "7-11 term mixture of SE kernels for the other blurs, within 0.5% of it).",
              choices=KERNEL_CHOICES),
    Parameter("feature_groups", str, "auto", "one-hot: the one-hot columns of each text "
              "column (column=category) share one learnt lengthscale, an exchangeable "
              "kernel over its categories; none: a lengthscale per input; auto: one-hot "
              "when the data has one-hot columns.", choices=("auto", "one-hot", "none"),
              parse=parse_none),
    Parameter("additive_groups", str, None, "one-hot: a sum of kernels, one over the "
              "inputs that are not one-hot and one over each text column's one-hot "
              "columns, each with a learnt share of the signal variance (an additive "
              "model: a smooth function plus an effect per category); default one "
              "kernel over every input.", choices=("one-hot",)),
    Parameter("approximation", str, "fitc", "The sparse prior: fitc (the paper's SASPA, "
              "per-row residual variances), dtc (projected process) or sor (subset of "
              "regressors: dtc whose predictions also drop the residual, a comparison "
              "mode whose variance falls to zero away from the bases).",
              choices=APPROXIMATIONS),
    Parameter("alpha", float, 1.0, "Power EP's power in (0, 1]: 1 is EP as published "
              "(FITC-EP / SASPA); towards 0 the fit tends to the variational (VFE) one, "
              "which does not shrink the noise to fit learnt bases: below 1, FITC's per-row "
              "residual variance is scaled by alpha, for a mean nearer VFE's and often a "
              "worse NLPD."),
    Parameter("likelihood", str, None, "Classification: probit (default), logistic, step or "
              "noisy_probit (probit with label noise).  Regression: gaussian (default), "
              "student_t (robust) or poisson (counts).",
              choices=CLASSIFICATION_LIKELIHOODS + REGRESSION_LIKELIHOODS),
    Parameter("label_noise", float, 0.01, "Label noise of the step and noisy_probit "
              "likelihoods."),
    Parameter("noise_variance", float, None, "Regression noise variance (default: a tenth "
              "of the target variance)."),
    Parameter("min_noise_variance", float, None, "Regression (gaussian): a floor under "
              "the learnt noise variance, in the target's squared units (q**2/12 for "
              "targets quantised in steps q)."),
    Parameter("log_target", bool, False, "Regression: fit log(y) (positive targets spread over decades, "
          "such as prices) and predict y itself (the log-normal mean; std, scores and "
          "metrics of y)."),
    Parameter("dof", float, 4.0, "Student-t degrees of freedom."),
    Parameter("scale", float, None, "Student-t scale (default from the targets)."),
    Parameter("lengthscale", float, None, "One starting lengthscale for every input "
              "(default: from the data)."),
    Parameter("signal_variance", float, None, "Starting signal variance (default: from the "
              "targets)."),
    Parameter("optimize_hyperparameters", bool, True, "Maximise the EP evidence over "
              "lengthscales, signal variance and the likelihood's parameters (each optimiser "
              "step is an EP run plus a gradient pass on the cluster).",
              off_flags=("--fixed-hyperparameters",)),
    Parameter("max_hyper_iter", int, 500, "Safety cap on optimiser iterations (a fit that "
              "reaches it is reported as not converged)."),
    Parameter("hyper_tol", float, 1e-4, "The optimiser stops when the energy rises by less "
              "than this many nats per row per iteration (over 5 iterations), or the "
              "projected gradient per row and the last change are below it."),
    Parameter("max_fit_time", float, None, "Wall-clock budget in seconds for the fit: "
              "learning stops early enough (at its best point) for EP on all rows to end "
              "by then, and EP on all rows stops between sweeps at the budget (reported as "
              "not converged, exit code 3); a budget too short for EP on all rows ends "
              "with EP at the learnt values on a row sample."),
    Parameter("n_restarts_optimizer", int, 0, "Further evidence maximisations from shorter "
              "starting lengthscales; the highest evidence is kept."),
    Parameter("learn_blur_scale", bool, False, "Also learn a multiplier of the blur "
              "covariances."),
    Parameter("learn_bases", str, "auto", "Also learn the basis means (and each basis's "
              "blur) by the EP evidence; for frequency features the frequencies and phases "
              "(and centres for fourier; the window with means+blur); auto learns the means "
              "whenever the hyperparameters are learnt and the bases come from K-means.",
              choices=LEARN_BASES_CHOICES),
    Parameter("learn_offset", bool, True, "Regression: learn a constant prior mean with the "
              "kernel (the targets' mean is its start); it matters where most targets "
              "rest at one value."),
    Parameter("exact_start", (bool, str), "auto", "Regression (gaussian): start learning "
              "where an exact GP on 512 seeded rows puts the lengthscales, signal and noise "
              "variance (unless given); auto: with max_fit_time when learning runs on a row "
              "sample of larger data (hyper_subsample), and without a budget as a check "
              "after learning on every row (where the exact GP's start has the higher "
              "energy, learning goes on from it); on / off: always / never.",
              parse=parse_exact_start),
    Parameter("learning_start", str, "auto", "Regression (gaussian, full-batch, delta "
              "bases, no max_fit_time): where learning starts: data (K-means and the "
              "data's scales), variational (learning first near the variational fit, at "
              "Power EP's alpha 0.001, then on at alpha from its values: better where "
              "learning from K-means ends on a poor optimum, as on Pole Telecomm), both "
              "(each; the higher EP evidence is kept, at 1.1-2.7 times the CPU), race "
              "(the variational start cut short, the data's stopped where it is behind, "
              "the leader learns on: 0.8-1.3 times the CPU) or auto (race for a plain "
              "regression learnt on every row, else data).",
              choices=LEARNING_STARTS),
    Parameter("hyper_subsample", (int, str, list), 20000, "Learn hyperparameters and bases "
              "on a seeded uniform subsample of this many rows when the data has more, then "
              "run EP on all rows.  Stages: sizes separated by commas, 'all' last to finish "
              "on every row (e.g. 20000,100000,all), each warm-started from the last; "
              "'all' alone learns on every row.", parse=parse_stages),
    Parameter("learning", str, "full-batch", "How hyperparameters and bases are learnt: "
              "full-batch (L-BFGS-B over EP, on a subsample of --hyper-subsample rows when "
              "the data has more) or stochastic (Adam on minibatches of every row, by an "
              "unbiased estimate of the EP energy's gradient; every row keeps its site, "
              "16 bytes a row).",
              choices=("full-batch", "stochastic")),
    *_STOCHASTIC_FIELDS,
    Parameter("random_state", int, None, "Seed of K-means, the subsample and the spectral "
              "start.", job_default=0),
    *_EP_FIELDS,
    *_EXECUTION_FIELDS,
)

# what retraining may change: whether (and how long) it learns, the EP schedule and where
# it runs (the model's kernel, likelihood and bases are its starting point)
RETRAIN_PARAMETERS = tuple(p for p in TRAIN_PARAMETERS
                           if p.name in ("optimize_hyperparameters", "max_hyper_iter",
                                         "hyper_tol", "max_fit_time", "max_sweeps", "tol",
                                         "anderson_memory", "cache", "work_dir", "block_rows"))


def by_name(parameters=TRAIN_PARAMETERS):
    """The parameters by their Python name."""
    return {p.name: p for p in parameters}
