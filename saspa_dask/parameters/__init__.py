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

from .commands import (CLI_COMMANDS, CLUSTER_COMMANDS, CLUSTER_PARAMETERS, COMMANDS,
                       DEMO_PARAMETERS, EVALUATE_PARAMETERS, EXPORT_PARAMETERS,
                       INFO_PARAMETERS, INGEST_PARAMETERS, MAKE_DATA_PARAMETERS,
                       PREDICT_PARAMETERS, REPORT_PARAMETERS, RETRAIN_JOB_PARAMETERS,
                       RUN_PARAMETERS, SCORE_PARAMETERS, SPLIT_PARAMETERS,
                       TRAIN_JOB_PARAMETERS)
from .schema import (APPROXIMATIONS, BLUR_CHOICES, CLASSIFICATION_LIKELIHOODS,
                     KERNEL_CHOICES, LEARN_BASES_CHOICES, LEARNING_STARTS, Parameter,
                     REGRESSION_LIKELIHOODS, bases_for_rows, parse_exact_start,
                     parse_n_bases, parse_stages)
from .training import (RETRAIN_PARAMETERS, TRAIN_PARAMETERS, by_name)

__all__ = ["APPROXIMATIONS", "BLUR_CHOICES", "CLASSIFICATION_LIKELIHOODS",
           "CLI_COMMANDS", "CLUSTER_COMMANDS", "CLUSTER_PARAMETERS", "COMMANDS",
           "DEMO_PARAMETERS", "EVALUATE_PARAMETERS", "EXPORT_PARAMETERS",
           "INFO_PARAMETERS", "INGEST_PARAMETERS", "KERNEL_CHOICES",
           "LEARN_BASES_CHOICES", "LEARNING_STARTS", "MAKE_DATA_PARAMETERS", "PREDICT_PARAMETERS",
           "Parameter", "REGRESSION_LIKELIHOODS", "REPORT_PARAMETERS",
           "RETRAIN_JOB_PARAMETERS", "RETRAIN_PARAMETERS", "RUN_PARAMETERS",
           "SCORE_PARAMETERS", "SPLIT_PARAMETERS", "TRAIN_JOB_PARAMETERS",
           "TRAIN_PARAMETERS", "bases_for_rows", "by_name", "parse_exact_start",
           "parse_n_bases", "parse_stages"]
