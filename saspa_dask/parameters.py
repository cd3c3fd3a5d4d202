"""The one table of training parameters: Python names, CLI flags and TOML keys.

Each parameter of ``saspa train`` (and of a ``train`` step of a job file, and of
:func:`saspa_dask.jobs.train`) is declared here once, under the estimator's Python
name.  The CLI option is ``--`` + the name with dashes, the TOML key and the job
function's keyword are the name itself; a field of a grouped setting (``ep``,
``execution``) has a flat name (``ep_mode``, ``max_sweeps``, ``block_rows`` ...) and
says which group and field it fills.  Old spellings (``--bases``, ``--seed``,
``hyper_restarts`` ...) keep working for one release with a FutureWarning.

Plain Python with no imports from the package: the command line reads it before
anything numerical is loaded, and every layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["APPROXIMATIONS", "BLUR_CHOICES", "CLASSIFICATION_LIKELIHOODS",
           "LEARN_BASES_CHOICES", "Parameter", "REGRESSION_LIKELIHOODS", "RETRAIN_PARAMETERS",
           "TRAIN_PARAMETERS", "by_name", "old_names", "parse_stages"]

# the blur families: delta, spherical, diagonal and full blurs; frequency features
BLUR_CHOICES = ("auto", "delta", "spherical", "diagonal", "full", "fourier",
                "fourier-global")
APPROXIMATIONS = ("fitc", "dtc", "sor")
CLASSIFICATION_LIKELIHOODS = ("probit", "logistic", "step", "noisy_probit")
REGRESSION_LIKELIHOODS = ("gaussian", "student_t", "poisson")
LEARN_BASES_CHOICES = ("auto", "none", "means", "means+blur")


@dataclass(frozen=True)
class Parameter:
    """One training parameter.

    Attributes
    ----------
    name : str
        The Python name: the estimator's parameter, or for a grouped setting its flat
        name; the TOML key and the job function's keyword.
    kind : type
        ``int``, ``float``, ``str`` or ``bool``.
    default : object
        The estimator's default (None: chosen from the data).
    help : str
    group, field : str, optional
        A field of the ``ep``, ``execution`` or ``stochastic`` settings.
    choices : tuple, optional
    job_default : object, optional
        Where a job (CLI, TOML) differs from the estimator: a fixed seed, so a job is
        reproducible.
    parse : callable, optional
        Turns a CLI string or TOML value into the estimator's value (``kind`` is then
        the TOML types accepted).
    old_flags, old_keys : tuple of str
        Old CLI flags and TOML / keyword names that still work, with a FutureWarning.
    off_flags : tuple of str
        For a bool: more flags that turn it off, besides ``--no-NAME``.
    """

    name: str
    kind: type
    default: object
    help: str
    group: str | None = None
    field: str | None = None
    choices: tuple | None = None
    job_default: object = None
    old_flags: tuple = ()
    old_keys: tuple = ()
    off_flags: tuple = ()
    parse: object = None

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")

    @property
    def default_in_jobs(self):
        return self.default if self.job_default is None else self.job_default

    @property
    def old_flag_names(self):
        """Old flags with the dest each gets in a click command."""
        return [(flag, "old_" + flag.lstrip("-").replace("-", "_")) for flag in self.old_flags]


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
    Parameter("coarse_start", bool, True, "Start parallel EP from EP on every 10th chunk "
              "(recursively), scaled to all rows; the fixed point is the same.", "ep",
              "coarse_start", off_flags=("--cold-start",)),
)

_STOCHASTIC_FIELDS = (
    Parameter("minibatch_rows", int, 2048, "Stochastic learning: rows per minibatch.",
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
    Parameter("cache", str, "memory", "Keep whitened chunk blocks in worker memory between "
              "sweeps.", "execution", "cache", ("memory", "none")),
    Parameter("work_dir", str, None, "Directory for site arrays during training (default: "
              "beside --out).", "execution", "work_dir"),
    Parameter("block_rows", int, 8192, "Rows per in-memory block and per prediction block "
              "(bounds memory).", "execution", "block_rows"),
)

def parse_stages(value):
    """``hyper_subsample`` from a CLI string or TOML value: an int, None ("all", "none"),
    or a tuple of stage sizes with None ("all") for every row."""
    if value is None or isinstance(value, int) and not isinstance(value, bool):
        return value
    items = value.split(",") if isinstance(value, str) else list(value)
    stages = []
    for item in items:
        text = str(item).strip().lower()
        if text in ("all", "none"):
            stages.append(None)
        elif text.isdigit() and int(text) > 0:
            stages.append(int(text))
        else:
            raise ValueError(f"hyper_subsample: {item!r} is neither a positive row count "
                             "nor 'all'")
    return stages[0] if len(stages) == 1 else tuple(stages)


TRAIN_PARAMETERS = (
    Parameter("n_bases", int, 64, "Basis points M (cost O(N M^2) a sweep).",
              old_flags=("--bases",), old_keys=("bases",)),
    Parameter("blur", str, "auto", "Basis blur: auto (full up to 16 inputs, diagonal "
              "above: a full blur's cost grows as d^2 per row and d^3 per pair of bases), "
              "delta (FITC/SPGP), spherical (multiscale), "
              "diagonal or full (SASPA-full, the K-means cluster covariances); or frequency "
              "inducing features: fourier (TFIFGP, a centre per feature) or fourier-global "
              "(FIFGP, one centre).", choices=BLUR_CHOICES),
    Parameter("approximation", str, "fitc", "The sparse prior: fitc (the paper's SASPA, "
              "per-row residual variances), dtc (projected process) or sor (subset of "
              "regressors: dtc whose predictions also drop the residual, a comparison "
              "mode whose variance falls to zero away from the bases).",
              choices=APPROXIMATIONS),
    Parameter("alpha", float, 1.0, "Power EP's power in (0, 1]: 1 is EP as published "
              "(FITC-EP / SASPA); towards 0 the fit tends to the variational (VFE) one, "
              "which does not shrink the noise to fit learnt bases."),
    Parameter("likelihood", str, None, "Classification: probit (default), logistic, step or "
              "noisy_probit (probit with label noise).  Regression: gaussian (default), "
              "student_t (robust) or poisson (counts).",
              choices=CLASSIFICATION_LIKELIHOODS + REGRESSION_LIKELIHOODS),
    Parameter("label_noise", float, 0.01, "Label noise of the step and noisy_probit "
              "likelihoods."),
    Parameter("noise_variance", float, None, "Regression noise variance (default: a tenth "
              "of the target variance)."),
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
    Parameter("max_fit_time", float, None, "Wall-clock budget in seconds for learning; when "
              "spent, the best point so far is kept and EP runs once on all rows."),
    Parameter("n_restarts_optimizer", int, 0, "Further evidence maximisations from shorter "
              "starting lengthscales; the highest evidence is kept.",
              old_flags=("--hyper-restarts",), old_keys=("hyper_restarts",)),
    Parameter("learn_blur_scale", bool, False, "Also learn a multiplier of the blur "
              "covariances."),
    Parameter("learn_bases", str, "auto", "Also learn the basis means (and each basis's "
              "blur) by the EP evidence; for frequency features the frequencies and phases "
              "(and centres for fourier; the window with means+blur); auto learns the means "
              "whenever the hyperparameters are learnt and the bases come from K-means.",
              choices=LEARN_BASES_CHOICES),
    Parameter("hyper_subsample", (int, str, list), 20000, "Learn hyperparameters and bases "
              "on a seeded uniform subsample of this many rows when the data has more, then "
              "run EP on all rows.  Stages: sizes separated by commas, 'all' last to finish "
              "on every row (e.g. 20000,100000,all), each warm-started from the last; "
              "'all' alone learns on every row.", parse=parse_stages),
    Parameter("learning", str, "full-batch", "How hyperparameters and bases are learnt: "
              "full-batch (L-BFGS-B over EP, on a subsample of --hyper-subsample rows when "
              "the data has more) or stochastic (Adam on minibatches of every row, EP's "
              "sites tied; memory does not grow with the rows).",
              choices=("full-batch", "stochastic")),
    *_STOCHASTIC_FIELDS,
    Parameter("random_state", int, None, "Seed of K-means, the subsample and the spectral "
              "start.", job_default=0, old_flags=("--seed",), old_keys=("seed",)),
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


def old_names(parameters=TRAIN_PARAMETERS):
    """Old keyword / TOML names -> the current name."""
    return {old: p.name for p in parameters for old in p.old_keys}
