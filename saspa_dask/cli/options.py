"""What the ``saspa`` commands share: options generated from the parameter table,
the cluster options, one-line errors and signal handling, the sweep progress reporter.
"""

from __future__ import annotations

import functools
import os
import signal
import sys

import click

__all__ = ["SweepReporter", "cluster_options", "echo", "job_errors", "parameter_options",
           "quiet_shutdown", "take_old_flags"]


def parameter_options(parameters, defaults=None):
    """click options for training parameters, from their one table
    (:mod:`saspa_dask.parameters`): ``--name`` (``--name/--no-name`` for a flag, with
    any further off-flags), the job default, the table's help; old flags as hidden
    deprecated options (:func:`take_old_flags` folds them in).  ``defaults``
    overrides a command's defaults (None: the help says what None means)."""
    defaults = defaults or {}

    def decorate(command):
        for p in reversed(parameters):
            default = defaults.get(p.name, p.default_in_jobs)
            kind = click.Choice(p.choices) if p.choices else (str if p.parse else p.kind)
            for flag, dest in p.old_flag_names:
                command = click.option(flag, dest, type=kind, hidden=True,
                                       deprecated=f"use {p.flag}")(command)
            if p.kind is bool:
                decls = [f"{p.flag}/--no-{p.flag[2:]}"] + [f" /{off}" for off in p.off_flags]
                command = click.option(*decls, p.name, default=default, show_default=True,
                                       help=p.help)(command)
            else:
                command = click.option(p.flag, p.name, type=kind, default=default,
                                       show_default=default is not None,
                                       help=p.help)(command)
        return command

    return decorate


def take_old_flags(parameters, options):
    """Fold values given by old flags (``--bases``, ``--seed`` ...) into the current
    names; click has already warned that they are deprecated."""
    for p in parameters:
        for flag, dest in p.old_flag_names:
            value = options.pop(dest, None)
            if value is not None:
                options[p.name] = value
    return options


def job_errors(command):
    """A job's errors (bad options, stores, an unreachable cluster) as one clear line;
    SIGINT and SIGTERM unwind the job (its cleanup runs) and end in one line and exit
    130 / 143."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        from ..jobs.errors import Interrupted, JobError
        from ..files.errors import StoreError

        def interrupt(signum, frame):
            quiet_shutdown()
            raise Interrupted(signal.Signals(signum).name, signum)

        previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT,
                                                                   signal.SIGTERM)}
        try:
            return command(*args, **kwargs)
        except (JobError, StoreError) as err:
            raise click.ClickException(str(err)) from None
        except OSError as err:  # read-only output, disk full, a missing directory ...
            where = f"{err.filename}: " if err.filename else ""
            raise click.ClickException(f"{where}{err.strerror or err}") from None
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
            raise click.ClickException(
                f"unexpected {type(err).__name__}: {err} (run again with SASPA_DEBUG=1 for "
                "the traceback, and please report it)") from None
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    return run


def quiet_shutdown():
    """While an interrupted job unwinds, Dask's client and the event loop log the
    cancelled work (tracebacks of AllExit, closed comms): not the user's concern."""
    import logging

    for name in ("asyncio", "distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def echo(message):
    click.echo(message, err=True)


_CLUSTER_OPTIONS = ("scheduler", "workers", "timeout", "dashboard", "tls_ca_file", "tls_cert",
                    "tls_key")


def cluster_options(command):
    """Where a command runs: --scheduler (or an embedded cluster of --workers,
    --dashboard), --timeout, and --tls-ca-file / --tls-cert / --tls-key for a tls://
    scheduler; the command receives them as one argument, ``cluster`` (the job
    functions' keyword arguments)."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        from ..jobs.errors import JobError

        try:
            cluster = _cluster(*(kwargs.pop(k) for k in _CLUSTER_OPTIONS))
        except JobError as err:
            raise click.ClickException(str(err)) from None
        return inner(*args, cluster=cluster, **kwargs)

    inner, command = command, run
    command = click.option("--dashboard", is_flag=True,
                           help="Serve the embedded cluster's dashboard on 127.0.0.1 (any "
                                "local user can read it; off by default).")(command)
    for name, text in (("--tls-key", "Client private key (PEM) for a tls:// scheduler."),
                       ("--tls-cert", "Client certificate (PEM) for a tls:// scheduler."),
                       ("--tls-ca-file", "CA certificate(s) (PEM) for a tls:// scheduler.")):
        command = click.option(name, type=click.Path(exists=True, dir_okay=False),
                               help=text)(command)
    command = click.option("--timeout", default=10, show_default=True,
                           type=click.IntRange(1),
                           help="Seconds to wait for --scheduler to connect; a scheduler "
                                "that gives no answer for 3 times this while the job runs "
                                "is lost.")(command)
    command = click.option("--workers", type=click.IntRange(1),
                           help="Worker processes of an embedded LocalCluster (without "
                                "--scheduler). Default: 2, except that a job of at most "
                                "2,000,000 input values (rows x inputs) runs in this "
                                "process, without a cluster.")(command)
    return click.option("--scheduler",
                        help="Address of a running Dask scheduler, tcp://HOST:PORT.")(command)


def _cluster(scheduler, workers, timeout, dashboard, tls_ca_file, tls_cert, tls_key):
    from .. import jobs

    return dict(scheduler=scheduler, workers=workers, timeout=timeout, dashboard=dashboard,
                security=jobs.tls_security(tls_ca_file, tls_cert, tls_key), echo=echo)


class SweepReporter:
    """Per-sweep progress: a tqdm bar on a terminal, one log line a sweep otherwise.

    Shown per sweep: the undamped site change against the tolerance it must reach,
    invalid cavities, seconds, and for one-vs-rest which class's problem it is.  The
    bar counts sweeps without a total (EP stops when the change is below ``tol``, not
    at ``--max-sweeps``).  No evidence is shown per sweep: EP's evidence means
    something only at a fixed point (at the sites of an unfinished sweep it is not a
    bound of anything, and can be large and positive); the final line gives it.
    """

    def __init__(self, tol, stream=None):
        self.stream = stream or sys.stderr
        self.tol = tol
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
            click.echo(f"{where}sweep {record['sweep']:4d}  change {record['change']:.3e} "
                       f"(tol {self.tol:.0e})  invalid {record['n_invalid']}  "
                       f"{record['seconds']:.2f}s", file=self.stream)

    def close(self):
        if self.bar is not None:
            self.bar.close()
