"""What the ``saspa`` commands share: options generated from the parameter table,
the cluster options, one-line errors (and interrupts, :mod:`.signals`), the sweep
progress reporter.
"""

from __future__ import annotations

import errno
import functools
import os
import signal
import sys
from pathlib import Path

import click

from ..parameters import CLUSTER_PARAMETERS
from .signals import InterruptHandlers

__all__ = ["SweepReporter", "cluster_options", "command_options", "echo", "job_errors",
           "quiet_shutdown"]


def command_options(parameters):
    """click arguments and options from a command's rows of the parameter table
    (:mod:`saspa_dask.parameters`): positional arguments, ``--name`` options
    (``--name/--no-name`` for a negatable flag, with any further off-flags), paths,
    choices, ranges, repeats, the job default and the table's help."""

    def decorate(command):
        for p in reversed(parameters):
            command = _declared(p)(command)
        return command

    return decorate


def _declared(p):
    """One parameter's click declaration."""
    if p.positional:
        return click.argument(p.name, metavar=p.metavar, type=_click_type(p),
                              required=p.required)
    default = p.default_in_jobs
    if p.kind is bool:
        if not p.negatable:
            return click.option(p.flag, p.name, is_flag=True, default=default, help=p.help)
        decls = [f"{p.flag}/--no-{p.flag[2:]}"] + [f" /{off}" for off in p.off_flags]
        return click.option(*decls, p.name, default=default, show_default=True, help=p.help)
    if p.multiple:
        return click.option(p.flag, p.name, multiple=True, metavar=p.metavar, help=p.help)
    return click.option(p.flag, p.name, type=_click_type(p), required=p.required,
                        default=default, show_default=default is not None, help=p.help)


def _click_type(p):
    if p.path is not None:
        return click.Path(exists=p.exists, file_okay=p.path != "dir",
                          dir_okay=p.path != "file")
    if p.choices:
        return click.Choice(p.choices)
    if p.parse is not None or isinstance(p.kind, tuple):
        return str
    if p.kind is int and (p.low is not None or p.high is not None):
        return click.IntRange(p.low, p.high)
    if p.kind is float and (p.low is not None or p.high is not None):
        return click.FloatRange(p.low, p.high, min_open=True, max_open=True)
    return p.kind


def job_errors(command):
    """A job's errors (bad options, stores, an unreachable cluster) as one clear line;
    SIGINT and SIGTERM unwind the job (its cleanup runs) and end in one line and exit
    130 / 143."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        from ..jobs.errors import Interrupted, JobError
        from ..files.errors import StoreError

        def interrupt(signum):
            quiet_shutdown()
            raise Interrupted(signal.Signals(signum).name, signum)

        try:
            with InterruptHandlers(interrupt):
                return command(*args, **kwargs)
        except (JobError, StoreError) as err:
            raise click.ClickException(bounded(str(err))) from None
        except OSError as err:  # read-only output, disk full, a missing directory ...
            raise click.ClickException(bounded(os_error_text(err))) from None
        except KeyboardInterrupt as err:
            name, code = ((err.signal_name, err.exit_code) if isinstance(err, Interrupted)
                          else ("SIGINT", 130))
            click.echo(f"saspa: interrupted ({name}); temporary stores removed, existing "
                       "stores left as they were", err=True)
            sys.exit(code)
        except (click.ClickException, click.exceptions.Exit, SystemExit):
            raise
        except Exception as err:  # noqa: BLE001 - the last line of defence: one line
            if os.environ.get("SASPA_DEBUG"):
                raise
            raise click.ClickException(bounded(
                f"unexpected {type(err).__name__}: {err} (run again with SASPA_DEBUG=1 for "
                "the traceback, and please report it)")) from None

    return run


MESSAGE_CHARACTERS = 2000  # an error line a terminal and a log can hold


def bounded(text, limit=MESSAGE_CHARACTERS):
    """``text`` cut to at most about ``limit`` characters (its head and tail kept, the
    count of what was left out said): a 100,000-character path or a list of 300,000
    unknown keys is not printed whole."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]} ... ({len(text) - 2 * keep} characters left out) ... {text[-keep:]}"


def os_error_text(err):
    """An operating-system error as one line naming what the user named: a file inside
    a store being written aside is reported as that store's output path
    (:func:`~saspa_dask.files.names.output_of`), with the system's words for the
    fault (no space left on device, permission denied ...)."""
    from ..files.names import output_of

    reason = err.strerror or str(err)
    if err.errno == errno.ENOSPC:
        reason = "no space left on the device while writing it"
    elif err.errno == getattr(errno, "EDQUOT", None):
        reason = "the disk quota is exceeded while writing it"
    if not err.filename:
        return reason
    output = output_of(err.filename)
    if output != Path(err.filename):  # one of the package's own files beside it
        return f"{output}: cannot be written there ({reason})"
    return f"{output}: {reason}"


def quiet_shutdown():
    """While an interrupted job unwinds, Dask's client and the event loop log the
    cancelled work (tracebacks of AllExit, closed comms): not the user's concern."""
    import logging

    for name in ("asyncio", "distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def echo(message):
    click.echo(message, err=True)


def cluster_options(command):
    """Where a command runs (:data:`~saspa_dask.parameters.CLUSTER_PARAMETERS`:
    --scheduler, or an embedded cluster of --workers, --dashboard, --timeout, and the
    TLS files of a tls:// scheduler); the command receives them as one argument,
    ``cluster`` (the job functions' keyword arguments)."""
    names = [p.name for p in CLUSTER_PARAMETERS]

    @functools.wraps(command)
    def run(*args, **kwargs):
        from .. import jobs
        from ..jobs.errors import JobError

        given = {name: kwargs.pop(name) for name in names}
        try:
            security = jobs.tls_security(*(given.pop(k) for k in
                                           ("tls_ca_file", "tls_cert", "tls_key")))
        except JobError as err:
            raise click.ClickException(str(err)) from None
        return command(*args, cluster=dict(given, security=security, echo=echo), **kwargs)

    return command_options(CLUSTER_PARAMETERS)(run)


class SweepReporter:
    """Per-sweep progress: a tqdm bar on a terminal, one log line a sweep otherwise.

    Shown: the sweeps of EP on all rows after learning (with ``every_sweep``, ``saspa
    --verbose``, also those of the EP runs inside learning, one per optimiser
    evaluation, whether on a row subsample or on all rows); per sweep the
    undamped site change against the tolerance it must reach, invalid cavities,
    seconds, and for one-vs-rest which class's problem it is.  The
    bar counts sweeps without a total (EP stops when the change is below ``tol``, not
    at ``--max-sweeps``).  No evidence is shown per sweep: EP's evidence means
    something only at a fixed point (at the sites of an unfinished sweep it is not a
    bound of anything, and can be large and positive); the final line gives it.
    """

    def __init__(self, tol, stream=None, every_sweep=False):
        self.stream = stream or sys.stderr
        self.tol = tol
        # the sweeps of EP runs inside learning (each optimiser evaluation runs one)
        # are shown only when asked: the iteration lines say what learning does, and
        # they were most of a job's log
        self.every_sweep = every_sweep
        self.bar = None
        self.problem = None
        self.interactive = self.stream.isatty()

    def _open(self, problem):
        from tqdm import tqdm

        if self.bar is not None:
            self.bar.close()
        desc = "EP sweeps" if problem is None else f"EP sweeps, {problem}"
        self.bar = tqdm(total=None, desc=desc, unit="sweep", file=self.stream)
        self.problem = problem

    def __call__(self, record):
        if record.get("learning", False) and not self.every_sweep:
            return
        problem = record.get("problem") if record.get("n_problems", 1) > 1 else None
        if problem is not None:  # one-vs-rest: one EP problem per class, in turn
            problem = f"class {problem + 1} of {record.get('n_problems', '?')}"
        where = "" if problem is None else f"{problem}  "
        if self.interactive:
            if self.bar is None or problem != self.problem:
                self._open(problem)
            self.bar.update(1)
            self.bar.set_postfix(change=f"{record['change']:.2e}", tol=f"{self.tol:.0e}",
                                 invalid=record["n_invalid"])
        else:
            from ..fitting.progress import prediction_change_text

            click.echo(f"{where}sweep {record['sweep']:4d}  change {record['change']:.3e} "
                       f"(tol {self.tol:.0e})  {prediction_change_text(record)}invalid "
                       f"{record['n_invalid']}  "
                       f"{record['seconds']:.2f}s", file=self.stream)

    def close(self):
        if self.bar is not None:
            self.bar.close()
