"""A parameter of the jobs' table (:class:`Parameter`), the choices several share,
and the parsers of values that the CLI and TOML give as text."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["APPROXIMATIONS", "BLUR_CHOICES", "CLASSIFICATION_LIKELIHOODS",
           "KERNEL_CHOICES", "LEARN_BASES_CHOICES", "LEARNING_STARTS", "Parameter",
           "REGRESSION_LIKELIHOODS", "bases_for_rows", "parse_exact_start",
           "parse_n_bases", "parse_stages"]

# the blur families: delta, spherical, diagonal and full blurs; frequency features
BLUR_CHOICES = ("auto", "delta", "spherical", "diagonal", "full", "fourier",
                "fourier-global")
APPROXIMATIONS = ("fitc", "dtc", "sor")
# the kernel shapes (saspa_dask.core.kernel_profiles)
KERNEL_CHOICES = ("se", "matern12", "matern32", "matern52")
CLASSIFICATION_LIKELIHOODS = ("probit", "logistic", "step", "noisy_probit")
REGRESSION_LIKELIHOODS = ("gaussian", "student_t", "poisson")
LEARN_BASES_CHOICES = ("auto", "none", "means", "means+blur")
# where regression's learning starts (saspa_dask.fitting.learning_start)
LEARNING_STARTS = ("auto", "data", "variational", "both", "race")


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


def parse_none(value):
    """A choice's CLI and TOML word "none" as Python's None."""
    return None if value == "none" else value


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
