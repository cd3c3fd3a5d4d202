"""``saspa`` commands run in the test's own process, by click's ``CliRunner``.

A ``saspa`` subprocess spends about 3.5 CPU-seconds on interpreter start and imports
before any work; run in process, a command costs only its work.  The result is a
``subprocess.CompletedProcess`` like ``subprocess.run``'s: the exit code, stdout and
stderr, and an exception the command did not handle is written to stderr as a
traceback with exit code 1, as a real process would.  Tests about processes (signals,
kills, locks held by another process, what a fresh interpreter imports, the README's
commands as written) start real ``saspa`` processes instead; every command keeps at
least one such end-to-end test.
"""

import os
import subprocess
import traceback


def saspa(*args, cwd=None, timeout=None):
    """Run ``saspa ARGS`` in this process (``cwd``: the directory it runs in;
    ``timeout`` is accepted for the subprocess helpers' signature and not enforced)."""
    from click.testing import CliRunner

    from saspa_dask.cli import main

    argv = [str(a) for a in args]
    before, environment = os.getcwd(), dict(os.environ)
    try:
        if cwd is not None:
            os.chdir(cwd)
        result = CliRunner().invoke(main, argv, catch_exceptions=True)
    finally:
        os.chdir(before)
        os.environ.clear()
        os.environ.update(environment)  # the CLI sets DASK_LOGGING for its workers
    stderr, code = result.stderr, result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
        code = 1
    return subprocess.CompletedProcess(["saspa", *argv], code, result.stdout, stderr)
