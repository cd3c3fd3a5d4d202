"""Declarative jobs: ``saspa run JOB.toml``.

A job is a list of steps (``ingest``, ``split``, ``export``, ``train``, ``retrain``,
``score``, ``predict``, ``evaluate``, ``report``)
run in order, each the job function of the same name (:mod:`saspa_dask.jobs`, what the
CLI command of that name calls) with the step's keys as its options.
Relative paths are relative to the job file.  ``{date}`` and ``{timestamp}`` in an
``out`` path are replaced by the run's UTC date (YYYYMMDD) and time (YYYYMMDDTHHMMSS),
so a nightly job can write a new model version each night and move ``latest``.

Example::

    [job]
    name = "nightly"

    [cluster]
    workers = 2                  # or: scheduler = "tcp://HOST:8786"

    [[steps]]
    kind = "retrain"
    model = "models/latest"
    data = "data/train.zarr"
    out = "models/{date}.zarr"
    latest = "models/latest"

Re-running: when a job completes it records, in ``.JOBNAME.state.json`` beside the job
file, a signature of each step: its settings and the state of its inputs as the job
left them (size and modification time of files, the metadata of zarr stores, the target
of a ``latest`` pointer).  While nothing has changed since, running the job again is a
no-op; ``--force`` runs it anyway.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
import string
import tomllib
import time
import uuid
from pathlib import Path

from . import jobs
from .files.errors import StoreError
from .files.atomic import write_text_file
from .files.outputs import JSON, check_not_protected, protecting
from .files.safe import write_new_text
from .files.store import read_regular
from .jobs import JobError
from .parameters import CLUSTER_PARAMETERS, COMMANDS

__all__ = ["JobError", "load_job", "run_job", "STEP_OPTIONS"]


_NUM = (int, float)


def _toml_kind(p):
    """The TOML types a parameter takes: a float key takes integers too, a repeated
    option a list."""
    if p.multiple:
        return list
    return _NUM if p.kind is float else p.kind


def _table_keys(parameters):
    """TOML keys of a command's parameters (:mod:`saspa_dask.parameters`): each name,
    as key -> (types, required)."""
    return {p.name: (_toml_kind(p), p.required) for p in parameters if not p.cli_only}


def _table_parsers(parameters):
    """key -> the parser of each parameter that has one."""
    return {p.name: p.parse for p in parameters if p.parse is not None}


_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")
# Per step kind: key -> (type or tuple of types, required), from the parameter table
STEP_OPTIONS = {kind: _table_keys(parameters) for kind, parameters in COMMANDS.items()}
_STEP_PARSERS = {kind: _table_parsers(parameters) for kind, parameters in COMMANDS.items()}
_POSITIONAL = {kind: [p.name for p in parameters if p.positional]
               for kind, parameters in COMMANDS.items()}
_PATH_KEYS = {p.name for parameters in (*COMMANDS.values(), CLUSTER_PARAMETERS)
              for p in parameters if p.path is not None}
_CLUSTER_KEYS = _table_keys(CLUSTER_PARAMETERS)


def _check_table(table, schema, where, parsers=None):
    if not isinstance(table, dict):
        raise JobError(f"{where} must be a table")
    unknown = sorted(set(table) - set(schema))
    if unknown:
        raise JobError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                       f"allowed: {', '.join(sorted(schema))}")
    for key, (kind, required) in schema.items():
        if key not in table:
            if required:
                raise JobError(f"{where}: missing required key {key!r}")
            continue
        value = table[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            raise JobError(f"{where}: {key} must be {_names(kinds)}, got a boolean")
        if not isinstance(value, kinds):
            raise JobError(f"{where}: {key} must be {_names(kinds)}, "
                           f"got {type(value).__name__} {value!r}")
        if parsers and key in parsers:  # a value its type admits but its parser does not
            try:
                parsers[key](value)
            except ValueError as err:
                raise JobError(f"{where}: {err}") from None


def _names(kinds):
    return " or ".join({int: "an integer", float: "a number", str: "a string",
                        bool: "true/false", list: "a list", dict: "a table"}[k]
                       for k in kinds)


# Ranges of the [cluster] numbers (a TOML integer may be as large as 2**63 - 1)
_RANGES = {p.name: (p.low, p.high) for p in CLUSTER_PARAMETERS if p.high is not None}


def _check_ranges(table, where):
    for key, (low, high) in _RANGES.items():
        if key in table and not low <= table[key] <= high:
            raise JobError(f"{where}: {key} = {table[key]} is outside {low}..{high}")


_JOB_FILE_BYTES = 1 << 20  # a job file is a page of TOML; anything larger is not one


def _parse(path):
    """The job file's TOML document, or a JobError naming the file and the fault."""
    try:
        text = read_regular(path, limit=_JOB_FILE_BYTES, what="a job file").decode("utf-8")
    except UnicodeDecodeError as err:
        raise JobError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except OSError as err:
        raise JobError(f"{path}: cannot read it ({err.strerror})") from None
    except StoreError as err:  # not a regular file, or larger than any job file
        raise JobError(str(err)) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise JobError(f"{path}: not valid TOML ({err})") from None
    except RecursionError:
        raise JobError(f"{path}: not a job file (nested too deeply to read)") from None


def load_job(path):
    """Read and validate a job file; returns ``(job, cluster, steps)``."""
    path = Path(path)
    if not path.is_file():
        raise JobError(f"{path}: no such job file")
    doc = _parse(path)
    _check_table(doc, {"job": (dict, False), "cluster": (dict, False),
                       "steps": (list, True)}, str(path))
    job = doc.get("job", {})
    _check_table(job, {"name": (str, False)}, f"{path} [job]")
    name = job.get("name", path.stem)
    if not _NAME.fullmatch(name):
        raise JobError(f"{path} [job]: name {name!r} must be letters, digits, '.', '_' or "
                       "'-', not starting with '.' (it names the state file beside the job)")
    cluster = doc.get("cluster", {})
    _check_table(cluster, _CLUSTER_KEYS, f"{path} [cluster]")
    _check_ranges(cluster, f"{path} [cluster]")
    if "scheduler" in cluster and "workers" in cluster:
        raise JobError(f"{path} [cluster]: give scheduler or workers, not both")
    steps = doc["steps"]
    if not steps:
        raise JobError(f"{path}: the job has no steps")
    for i, step in enumerate(steps, start=1):
        where = f"{path} step {i}"
        if not isinstance(step, dict) or "kind" not in step:
            raise JobError(f"{where}: every step needs a kind "
                           f"({', '.join(STEP_OPTIONS)})")
        kind = step["kind"]
        if kind not in STEP_OPTIONS:
            raise JobError(f"{where}: unknown kind {kind!r}; one of {', '.join(STEP_OPTIONS)}")
        _check_table({k: v for k, v in step.items() if k != "kind"}, STEP_OPTIONS[kind],
                     f"{where} ({kind})", _STEP_PARSERS[kind])
        if not all(isinstance(v, str) for v in step.get("exclude", [])):
            raise JobError(f"{where} ({kind}): exclude must be a list of column names")
        _check_templates(step, f"{where} ({kind})")
    return {"name": name}, cluster, steps


def _check_templates(step, where):
    """``{date}`` and ``{timestamp}`` are the only templates, only in ``out``, and
    plain: no format spec or conversion (``{date:>2000000000}`` would ask for a string
    of two billion characters)."""
    for key, value in step.items():
        if not isinstance(value, str) or key == "kind":
            continue
        if "\0" in value:
            raise JobError(f"{where}: {key} holds a NUL character")
        try:
            parts = [(f, spec, conv) for _, f, spec, conv in string.Formatter().parse(value)
                     if f is not None]
        except ValueError as err:
            raise JobError(f"{where}: {key} = {value!r}: {err} (write {{{{ and }}}} for "
                           "literal braces)") from None
        if parts and key != "out":
            raise JobError(f"{where}: {key}: templates are allowed in out only")
        unknown = sorted({f for f, _, _ in parts} - {"date", "timestamp"})
        if unknown:
            raise JobError(f"{where}: {key}: unknown template key(s) {unknown}; use {{date}} "
                           "or {timestamp}")
        shaped = [f"{{{f}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}"
                  for f, spec, conv in parts if spec or conv]
        if shaped:
            raise JobError(f"{where}: {key}: {shaped[0][:40]} has a format spec or "
                           "conversion; write {date} or {timestamp} as they are")


def _resolve(step, base, now):
    """The step's settings with paths made absolute and out templates filled in."""
    out = {}
    for key, value in step.items():
        if key in _PATH_KEYS and isinstance(value, str):
            if key == "out":
                value = value.format(date=now.strftime("%Y%m%d"),
                                     timestamp=now.strftime("%Y%m%dT%H%M%S"))
            value = str((base / value).resolve()) if not Path(value).is_absolute() else value
        out[key] = value
    return out


def _state_of(path):
    """What a step's input looks like now (for the re-run signature)."""
    p = Path(path)
    if p.is_file():
        # a pointer file is replaced (os.replace) when it moves: its mtime changes too
        stat = p.stat()
        return f"file:{stat.st_size}:{stat.st_mtime_ns}"
    meta = p / "zarr.json"
    if meta.is_file():
        return "zarr:" + hashlib.sha256(read_regular(meta, limit=1 << 24)).hexdigest()
    return "missing"


def _signature(kind, settings, template):
    inputs = [settings[k] for k in ("source", "data", "model", "store", "like")
              if k in settings]
    payload = {"kind": kind, "step": template, "inputs": [_state_of(p) for p in inputs]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _command_line(kind, settings):
    """The ``saspa`` command equivalent to a step (for the log)."""
    args = [kind] + [str(settings[k]) for k in _POSITIONAL[kind]]
    for key, value in settings.items():
        if key not in _POSITIONAL[kind]:
            flag = "--" + key.replace("_", "-")
            args += [flag] if value is True else [] if value is False else [flag, str(value)]
    return " ".join(args)


def _run_step(kind, settings, cluster, echo, out):
    """Call the step's job function (its keys are the function's keywords, as the
    parameter table names them); print what the command would print."""
    options = dict(settings)
    if kind == "ingest":
        attrs = jobs.ingest(**options)
        out(f"ingested {attrs['n_rows']} rows x {len(attrs['columns'])} inputs")
        return
    if kind == "export":
        result = jobs.export(**options)
        out(f"exported {result['rows']} rows -> {result['out']}")
        return
    if kind == "split":
        result = jobs.split(**options)
        out(f"split: {result['train_rows']} training rows -> {result['train']}, "
            f"{result['test_rows']} test rows -> {result['test']}")
        return
    where = {**cluster, "echo": echo}
    if kind in ("train", "retrain"):
        result = (jobs.train if kind == "train" else jobs.retrain)(**options, **where)
        model = result["model"]
        out(f"model: {result['out']}  sweeps {model.n_sweeps_}  EP converged "
            f"{model.converged_}  log evidence {model.log_evidence_:.6g}")
        if not result["converged"]:
            raise JobError(jobs.not_converged_advice(model))
    elif kind == "predict":
        result = jobs.predict(**options, **where)
        out(f"predictions: {result['rows']} rows -> {result['out']}")
    elif kind == "score":
        result = jobs.score(**options, **where)
        out(f"scores: {result['rows']} rows, {result['chunks_written']} of "
            f"{result['chunks_total']} chunks written, {result['columns']}")
    elif kind == "report":
        out(f"report: {jobs.report(**options)['out']}")
    else:
        out(jobs.metrics_line(jobs.evaluate(**options, **where)))


def _cluster_options(cluster):
    """A [cluster] table as the jobs' ``scheduler``/``workers``/``timeout``/``security``."""
    options = {k: cluster[k] for k in ("scheduler", "workers", "timeout", "dashboard")
               if k in cluster}
    options["security"] = jobs.tls_security(cluster.get("tls_ca_file"),
                                            cluster.get("tls_cert"), cluster.get("tls_key"))
    return options


def _check_state_writable(state_path):
    """The job's state file can be written beside it, found before any step runs: a
    job whose state cannot be recorded would run every step, fail at the end, and
    find its own outputs in the way when run again."""
    probe = state_path.with_name(f"{state_path.name}.{uuid.uuid4().hex[:8]}")
    try:
        if state_path.is_dir():
            raise IsADirectoryError(21, "a folder is in the way", str(state_path))
        write_new_text(probe, "", "a probe of the job's folder")
        probe.unlink()
    except (OSError, StoreError) as err:
        reason = getattr(err, "strerror", None) or str(err)
        raise JobError(f"{state_path}: the job's state file cannot be written there "
                       f"({reason}); nothing was run: make the job's folder writable "
                       "(or copy the job file to a folder that is)") from None


def _previous_state(state_path):
    """The last completed run's record; an unreadable one counts as none (the job runs)."""
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


# a step's settings that name what it writes (the job's outputs)
_OUTPUT_KEYS = ("out", "train_out", "test_out", "latest")


def run_job(path, *, force=False, echo=print, out=print):
    """Run a job file's steps in order (see the module docstring).

    ``echo`` gets progress messages, ``out`` each step's result line.  A failing step
    raises :class:`JobError` naming the job and the step.

    Returns
    -------
    dict
        ``ran`` (list of step kinds run) and ``skipped`` (True when the job was a
        no-op because it had already completed with the same inputs).
    """
    path = Path(path).resolve()
    job, cluster, steps = load_job(path)
    base = path.parent
    cluster = {k: (str((base / v).resolve()) if k.startswith("tls_") else v)
               for k, v in cluster.items()}
    state_path = base / f".{job['name']}.state.json"
    previous = _previous_state(state_path)
    now = _dt.datetime.now(_dt.timezone.utc)
    templates = [{k: v for k, v in s.items() if k != "kind"} for s in steps]
    current = [_signature(s["kind"], _resolve(t, base, now), t)
               for s, t in zip(steps, templates)]
    lost = [p for p in previous.get("outputs", []) if not Path(p).exists()]
    if not force and previous.get("completed") and previous.get("signatures") == current:
        if not lost:
            echo(f"job {job['name']}: already completed with these inputs; nothing to "
                 "do (--force to run again)")
            return {"ran": [], "skipped": True}
        echo(f"job {job['name']}: completed before, but its output {lost[0]} is gone: "
             "running it again")
    _check_state_writable(state_path)
    options = _cluster_options(cluster)
    with protecting(path, base):
        _check_outputs(path, steps, templates, base, now)
        done = _run_steps(path, job, steps, templates, base, now, options, echo, out)
    for line in step_table(job["name"], done):
        echo(line)
    # Inputs as the job left them (it may move `latest` or rewrite a store it reads):
    # the next run is a no-op while they stay so.
    signatures = [_signature(s["kind"], _resolve(t, base, now), t)
                  for s, t in zip(steps, templates)]
    outputs = [settings[k] for settings in (_resolve(t, base, now) for t in templates)
               for k in _OUTPUT_KEYS if k in settings]
    state = {"completed": True, "signatures": signatures, "outputs": outputs,
             "finished": now.isoformat()}
    write_text_file(state_path, json.dumps(state, indent=2), JSON, overwrite=True)
    return {"ran": [s["kind"] for s in steps], "skipped": False, "steps": done}


def _check_outputs(path, steps, templates, base, now):
    """Before any step runs: no step's output is the job file, its folder, the working
    directory or another place no output may be
    (:func:`~saspa_dask.files.outputs.check_not_protected`)."""
    for i, (step, template) in enumerate(zip(steps, templates), start=1):
        settings = _resolve(template, base, now)
        for key in _OUTPUT_KEYS:
            if settings.get(key) is not None:
                try:
                    check_not_protected(settings[key])
                except StoreError as err:
                    raise JobError(f"job {path}: step {i} ({step['kind']}): {key}: "
                                   f"{err}") from None


def _run_steps(path, job, steps, templates, base, now, options, echo, out):
    done = []
    for i, (step, template) in enumerate(zip(steps, templates), start=1):
        kind = step["kind"]
        settings = _resolve(template, base, now)
        echo(f"job {job['name']}: step {i}/{len(steps)}: saspa {_command_line(kind, settings)}")
        began = time.perf_counter()
        try:
            _run_step(kind, settings, options, echo, out)
        except (ValueError, OSError) as err:  # JobError, StoreError, a file system error
            raise JobError(f"job {path} failed: step {i} ({kind}): {err}") from None
        done.append({"step": i, "kind": kind, "seconds": time.perf_counter() - began,
                     "output": next((str(settings[k]) for k in _OUTPUT_KEYS
                                     if settings.get(k)), None)})
    return done


def step_table(name, done):
    """The lines said at the end of a job: each step's kind, seconds and output."""
    total = sum(d["seconds"] for d in done)
    width = max([len(d["kind"]) for d in done] + [4])
    lines = [f"job {name}: {len(done)} step(s) done in {total:.1f}s",
             f"  step  {'kind':<{width}}  seconds  output"]
    lines += [f"  {d['step']:>4}  {d['kind']:<{width}}  {d['seconds']:7.1f}  "
              f"{d['output'] or '-'}" for d in done]
    return lines
