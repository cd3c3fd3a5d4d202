"""Every command's parameters (and each job step kind's): :data:`COMMANDS` and
:data:`CLI_COMMANDS`, the cluster options, and the helpers that declare paths and
flags."""

from __future__ import annotations

from dataclasses import replace

from .schema import Parameter
from .training import RETRAIN_PARAMETERS, TRAIN_PARAMETERS

__all__ = ["CLI_COMMANDS", "CLUSTER_COMMANDS", "CLUSTER_PARAMETERS", "COMMANDS",
           "DEMO_PARAMETERS", "EVALUATE_PARAMETERS", "EXPORT_PARAMETERS",
           "INFO_PARAMETERS", "INGEST_PARAMETERS", "MAKE_DATA_PARAMETERS",
           "PREDICT_PARAMETERS", "REPORT_PARAMETERS", "RETRAIN_JOB_PARAMETERS",
           "RUN_PARAMETERS", "SCORE_PARAMETERS", "SPLIT_PARAMETERS",
           "TRAIN_JOB_PARAMETERS"]


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
              "--scheduler). Default: 2, except that a job holding at most 33,554,432 "
              "values in memory (rows x (inputs + bases)) runs in this process, without "
              "a cluster.",
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
