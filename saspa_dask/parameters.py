"""The one table of the jobs' parameters: Python names, CLI flags and TOML keys.

Each parameter of a ``saspa`` command (and of a step of that kind in a job file, and of
the :mod:`saspa_dask.jobs` function of that name) is declared here once
(:data:`COMMANDS`); a training parameter under the estimator's Python name.  The CLI
option is ``--`` + the name with dashes, the TOML key and the job function's keyword
are the name itself; a field of a grouped setting (``ep``, ``execution``,
``stochastic``) has a flat name (``ep_mode``, ``max_sweeps``, ``block_rows`` ...) and
says which group and field it fills.

Plain Python with no imports from the package: the command line reads it before
anything numerical is loaded, and every layer may use it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["APPROXIMATIONS", "BLUR_CHOICES", "CLASSIFICATION_LIKELIHOODS", "CLI_COMMANDS",
           "CLUSTER_PARAMETERS", "COMMANDS", "KERNEL_CHOICES", "LEARN_BASES_CHOICES", "Parameter",
           "REGRESSION_LIKELIHOODS",
           "RETRAIN_PARAMETERS", "TRAIN_PARAMETERS", "by_name", "parse_stages"]

# the blur families: delta, spherical, diagonal and full blurs; frequency features
BLUR_CHOICES = ("auto", "delta", "spherical", "diagonal", "full", "fourier",
                "fourier-global")
APPROXIMATIONS = ("fitc", "dtc", "sor")
# the kernel shapes (saspa_dask.core.kernel_profiles)
KERNEL_CHOICES = ("se", "matern12", "matern32", "matern52")
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
    off_flags : tuple of str
        For a bool: more flags that turn it off, besides ``--no-NAME``.
    required : bool
        The job cannot run without it.
    positional : bool
        A positional argument of the command (``metavar`` names it in ``--help``).
    path : {"file", "dir", "any"}, optional
        A path (relative paths in a job file are relative to the file); ``exists``
        says whether it must exist when the command starts.
    multiple : bool
        The option may be repeated (a list in TOML).
    low, high : number, optional
        The value's range (inclusive).
    flag_name : str, optional
        The CLI flag when it is not ``--`` + the name with dashes.
    negatable : bool
        For a bool: ``--NAME/--no-NAME`` (else ``--NAME`` alone turns it on).
    cli_only : bool
        How the command prints its result (``--json``): no key of a job file, no
        argument of the job function.
    """

    name: str
    kind: type
    default: object
    help: str
    group: str | None = None
    field: str | None = None
    choices: tuple | None = None
    job_default: object = None
    off_flags: tuple = ()
    parse: object = None
    required: bool = False
    positional: bool = False
    path: str | None = None
    exists: bool = False
    multiple: bool = False
    low: object = None
    high: object = None
    metavar: str | None = None
    flag_name: str | None = None
    negatable: bool = True
    cli_only: bool = False

    @property
    def flag(self):
        return self.flag_name or "--" + self.name.replace("_", "-")

    @property
    def default_in_jobs(self):
        return self.default if self.job_default is None else self.job_default



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
    Parameter("cache", str, "auto", "Keep whitened chunk blocks in worker memory between "
              "sweeps (memory), rebuild them every sweep (none), or cache them where they "
              "fit within a share of the workers' memory limits (auto).", "execution",
              "cache", ("auto", "memory", "none")),
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


# n_bases="auto": AUTO_BASES bases, AUTO_BASES_LARGE from AUTO_LARGE_ROWS training rows
# (at 10^6 rows 128 bases gave a lower error than 64 in both benchmarks' two-class
# problems, within a minute end to end on 2 cores; benchmarks/RESULTS.md, "How many
# bases by default")
AUTO_BASES, AUTO_BASES_LARGE, AUTO_LARGE_ROWS = 64, 128, 500_000


def parse_n_bases(value):
    """``n_bases`` from a CLI string or TOML value: a positive count or "auto"."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "auto":
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise ValueError(f"n_bases: {value!r} is neither a positive count nor 'auto'")


def parse_exact_start(value):
    """``exact_start`` from a CLI string or TOML value: "auto", or on / off."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text == "auto":
        return text
    if text in ("on", "true", "yes", "1"):
        return True
    if text in ("off", "false", "no", "0"):
        return False
    raise ValueError(f"exact_start: {value!r} is none of auto, on, off")


def bases_for_rows(n_bases, n_rows):
    """The number of bases ``n_bases`` means for ``n_rows`` training rows ("auto": see
    :data:`AUTO_BASES`; never more than the rows)."""
    if n_bases != "auto":
        return n_bases
    return min(n_rows, AUTO_BASES_LARGE if n_rows >= AUTO_LARGE_ROWS else AUTO_BASES)


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
    Parameter("feature_groups", str, None, "one-hot: the one-hot columns of each text "
              "column (column=category) share one learnt lengthscale, an exchangeable "
              "kernel over its categories (default: a lengthscale per input).",
              choices=("one-hot",)),
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
              "which does not shrink the noise to fit learnt bases."),
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
              "not converged, exit code 3)."),
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


# -- the other commands ---------------------------------------------------------------

def _path(name, help, kind="any", *, exists=False, required=False, positional=False,
          metavar=None):
    return Parameter(name, str, None, help, path=kind, exists=exists, required=required,
                     positional=positional, metavar=metavar)


def _flag(name, help, default=False):
    return Parameter(name, bool, default, help, negatable=default is not False)


_OVERWRITE = _flag("overwrite", "Replace an existing store.")
_JSON = Parameter("json", bool, False, "Print the result as one JSON object (progress "
                  "lines stay on stderr).", negatable=False, cli_only=True)
_ESCAPE = _flag("escape_formulas", "CSV: write text cells a spreadsheet would run as "
                "formulas (=, +, -, @ ...) with a leading ' (CSV injection).", True)
_UNKNOWN = Parameter("unknown", str, "error", "A category the training rows never had: an "
                     "error, or all zeros (counted as drift).", choices=("error", "ignore"))
_DELIMITER = Parameter("delimiter", str, None, "CSV field delimiter (default: the most "
                       "frequent of , ; tab | in the header line).")
_CHUNK_ROWS = Parameter("chunk_rows", int, 65536, "Rows per zarr chunk (one task per chunk "
                        "on the cluster).", low=1)
_MODEL = _path("model", "The model store (or a latest pointer to it).", required=True,
               positional=True, metavar="MODEL")
_DATA = _path("data", "A data store.", "dir", required=True, positional=True, metavar="DATA")
_LATEST = _path("latest", "Pointer file to update to the new model (e.g. models/latest).",
                "file")
_TEST = _path("test", "A held-out data store: measure the model on it as it learns and "
              "at the end, print the metrics and record them in the model store.", "dir",
              exists=True)

INGEST_PARAMETERS = (
    _path("source", "A CSV, Parquet or .npy file.", "file", exists=True, required=True,
          positional=True, metavar="SOURCE"),
    _path("out", "Data store to create.", required=True),
    Parameter("target", (str, int), None, "Target column: its name (an exact name wins), "
              "else its index (default: the last column)."),
    _CHUNK_ROWS,
    Parameter("missing", str, "error", "Missing or non-finite values: an error naming the "
              "columns, drop the rows holding them, or impute (a number column's median, a "
              "text column's '(missing)' category; recorded and reapplied by --like).",
              choices=("error", "drop-rows", "impute")),
    Parameter("na_values", list, None, "A token read as a missing value in every column "
              "(repeat for several; compared ignoring case and surrounding spaces; recorded "
              "and reapplied by --like).  Default: empty, NA, NaN, null and ? everywhere, "
              "and None where a column holds numbers (a category where it holds text).",
              multiple=True, metavar="TOKEN"),
    Parameter("text", str, "error", "Text input columns: an error naming them, one-hot "
              "encode, or drop.", choices=("error", "onehot", "drop")),
    Parameter("max_categories", int, None, "One-hot: keep each text column's N commonest "
              "categories (of its first 1,000 distinct values) and put the rest in one "
              "'(other)' category, said at ingest. Default: every category.", low=1),
    Parameter("id_column", str, None, "A column of row ids: kept out of the inputs, stored "
              "with each row and carried by split, score, predict and export."),
    Parameter("exclude", list, (), "A column to leave out (repeat for several).",
              multiple=True, metavar="NAME"),
    _DELIMITER,
    _path("like", "Encode SOURCE exactly as this data store was encoded (same columns, "
          "categories, target labels, id column, missing-value rule and imputation values) "
          "and count the drift from it: new data to score or evaluate with a model trained "
          "on it.  A model store (or latest pointer) gives its training data's encoding.",
          exists=True),
    Parameter("unknown", str, "error", "With --like: a category the --like store never saw "
              "is an error, or (ignore) all zeros, counted as drift.",
              choices=("error", "ignore")),
    _OVERWRITE,
)

SPLIT_PARAMETERS = (
    _path("store", "The data store to split.", "dir", exists=True, required=True,
          positional=True, metavar="STORE"),
    _path("train_out", "Training store to write (default: STORE-train.zarr beside STORE)."),
    _path("test_out", "Test store to write (default: STORE-test.zarr beside STORE)."),
    Parameter("test_fraction", float, 0.2, "Probability that a row goes to the test store.",
              low=0, high=1),
    Parameter("seed", int, 0, "Seed of the row assignment."),
    _flag("overwrite", "Replace existing stores."),
)

TRAIN_JOB_PARAMETERS = (
    _path("data", "The training data store.", "dir", required=True, positional=True,
          metavar="DATA"),
    _path("out", "Model store to write.", required=True),
    Parameter("task", str, None, "Default: inferred from the target and printed (text "
              "labels, or at most 20 distinct integer values: classification; otherwise "
              "regression).", choices=("classification", "regression")),
    Parameter("max_classes", int, 100, "Refuse a classification with more classes (each is "
              "an EP problem).", low=2),
    *TRAIN_PARAMETERS,
    _flag("overwrite", "Replace an existing model store."),
    _LATEST, _TEST,
    Parameter("cv", int, None, "K-fold cross-validation first: K models with these options, "
              "each trained on the other folds and measured on its own (folds drawn as "
              "saspa split draws, seeded by --random-state); prints each fold's and the "
              "mean metrics, then trains the model on every row, which records them.",
              low=2),
    _JSON,
)

# what retraining may change; None: the old model's value
_RETRAIN_FROM_OLD = ("tol", "anderson_memory", "block_rows", "max_hyper_iter", "hyper_tol")
RETRAIN_JOB_PARAMETERS = (
    _MODEL,
    _path("data", "The data store: the old rows first, new rows appended.", "dir",
          required=True, positional=True, metavar="DATA"),
    _path("out", "New model store to write.", required=True),
    _flag("refit_bases", "Run K-means again (then EP starts cold: sites act on the old "
          "bases)."),
    Parameter("new_rows", str, "update", "Start the appended rows' sites from one EP update "
              "against the old posterior (update), one assumed-density-filtering pass (adf, "
              "sequential), or zero (empty).", choices=("update", "adf", "empty")),
    *(replace(p, default=None) if p.name in _RETRAIN_FROM_OLD else p
      for p in RETRAIN_PARAMETERS),
    _flag("overwrite", "Replace an existing store at --out."),
    _LATEST, _TEST, _JSON,
)

_ID_HEADER = Parameter("id_header", str, "source", "CSV / Parquet: the ids' column header: "
                       "the source's own id column name (source; id where that name is "
                       "also an output's), or id.", choices=("id", "source"))
_INTERVAL = Parameter("interval_level", float, 0.95, "A gaussian regressor's lower and "
                      "upper: the central interval holding a new observation with this "
                      "probability (the noise included).")

SCORE_PARAMETERS = (
    _MODEL, _DATA,
    _path("out", "Score store to write (zarr), or the CSV / Parquet file (by its suffix, "
          "or --format).", required=True),
    Parameter("format", str, None, "zarr: a resumable score store; csv or parquet: one "
              "file (Parquet needs pyarrow).  Default: from --out's suffix (.csv, "
              ".parquet or .pq; zarr otherwise).", choices=("zarr", "csv", "parquet")),
    _flag("overwrite", "Replace a complete or foreign store."),
    _ESCAPE, _INTERVAL, _ID_HEADER,
)

PREDICT_PARAMETERS = (
    _MODEL,
    _path("source", "A CSV or Parquet file to score.", "file", exists=True, required=True,
          positional=True, metavar="FILE"),
    _path("out", "CSV or Parquet file to write: id, row, then the scores.", required=True),
    Parameter("format", str, None, "Default: from --out's suffix.",
              choices=("csv", "parquet")),
    _UNKNOWN, _DELIMITER, _CHUNK_ROWS,
    _flag("overwrite", "Replace an existing --out file."),
    _ESCAPE, _INTERVAL, _ID_HEADER,
)

EVALUATE_PARAMETERS = (_MODEL, _DATA, _JSON)

EXPORT_PARAMETERS = (
    _path("store", "The data store to export.", "dir", exists=True, required=True,
          positional=True, metavar="STORE"),
    _path("out", "CSV or Parquet file to write: id, row, the inputs, the target.",
          required=True),
    Parameter("format", str, None, "Default: from --out's suffix.",
              choices=("csv", "parquet")),
    _flag("decode", "The source's columns back (a one-hot group as its category, a date "
          "as an ISO date) instead of the encoded inputs the model sees."),
    _flag("overwrite", "Replace an existing --out file."),
    _ESCAPE,
)

REPORT_PARAMETERS = (
    _MODEL,
    _path("data", "A data store with targets (say a held-out store from saspa split): "
          "metrics, calibration and residuals on a sample of its rows.", "dir",
          positional=True, metavar="[DATA]"),
    _path("out", "The HTML file to write.", "file", required=True),
    Parameter("max_rows", int, 20_000, "At most this many of DATA's rows (a seeded "
              "sample) are used.", low=1),
    Parameter("seed", int, 0, "Seed of the row sample."),
    _flag("overwrite", "Replace an existing --out file."),
)

# where a job runs: every command that uses a cluster takes these (a job file's
# [cluster] table)
CLUSTER_PARAMETERS = (
    Parameter("scheduler", str, None, "Address of a running Dask scheduler, "
              "tcp://HOST:PORT."),
    Parameter("workers", int, None, "Worker processes of an embedded LocalCluster (without "
              "--scheduler). Default: 2, except that a job of at most 2,000,000 input "
              "values (rows x inputs) runs in this process, without a cluster.",
              low=1, high=4096),
    Parameter("timeout", int, 10, "Seconds to wait for --scheduler to connect; a scheduler "
              "that gives no answer for 3 times this while the job runs is lost.",
              low=1, high=86_400),
    _path("tls_ca_file", "CA certificate(s) (PEM) for a tls:// scheduler.", "file",
          exists=True),
    _path("tls_cert", "Client certificate (PEM) for a tls:// scheduler.", "file",
          exists=True),
    _path("tls_key", "Client private key (PEM) for a tls:// scheduler.", "file",
          exists=True),
    _flag("dashboard", "Serve the embedded cluster's dashboard on 127.0.0.1 (any local "
          "user can read it; off by default)."),
)

DEMO_PARAMETERS = (
    _path("csv", "Numeric CSV with a header (default: generated data).", "file",
          exists=True),
    Parameter("target", str, None, "Label column of --csv (default: the last)."),
    Parameter("rows", int, 20_000, "Generated rows.", low=2),
    Parameter("features", int, 8, "Generated inputs.", low=1),
    Parameter("test_fraction", float, 0.3, "Share of the rows held out for the reported "
              "test metrics.", low=0, high=1),
    *TRAIN_PARAMETERS,
    _JSON,
)

MAKE_DATA_PARAMETERS = (
    _path("out", "The .npy file to write.", "file", required=True, positional=True,
          metavar="OUT"),
    Parameter("rows", int, 200_000, "Rows to generate.", low=1),
    Parameter("features", int, 8, "Input columns.", low=1),
    Parameter("seed", int, 0, "Generator seed."),
    Parameter("kind", str, "two-class", "two-class: two Gaussian classes with full "
              "covariances (0/1 label); multiscale-regression: structure at several length "
              "scales, inputs 7 and beyond irrelevant, noise std 0.1 of the signal's "
              "(needs --features >= 8).", choices=("two-class", "multiscale-regression")),
    _flag("overwrite", "Replace an existing .npy file this command wrote."),
)

RUN_PARAMETERS = (
    _path("job", "The job file (TOML).", "file", required=True, positional=True,
          metavar="JOB"),
    _flag("force", "Run even if the job already completed with the same inputs."),
    _JSON,
)

INFO_PARAMETERS = (
    _path("store", "A model store (or a latest pointer to one), or a data store.",
          required=True, positional=True, metavar="STORE"),
    _JSON,
)

# each command's (and job step kind's) parameters; the commands of this table that use
# a cluster take CLUSTER_PARAMETERS too
COMMANDS = {"ingest": INGEST_PARAMETERS, "split": SPLIT_PARAMETERS,
            "train": TRAIN_JOB_PARAMETERS, "retrain": RETRAIN_JOB_PARAMETERS,
            "score": SCORE_PARAMETERS, "predict": PREDICT_PARAMETERS,
            "evaluate": EVALUATE_PARAMETERS, "report": REPORT_PARAMETERS,
            "export": EXPORT_PARAMETERS}
# the commands no job file has a step of: every command is in one of the two tables
CLI_COMMANDS = {"demo": DEMO_PARAMETERS, "make-data": MAKE_DATA_PARAMETERS,
                "run": RUN_PARAMETERS, "info": INFO_PARAMETERS}
CLUSTER_COMMANDS = ("train", "retrain", "score", "predict", "evaluate")
