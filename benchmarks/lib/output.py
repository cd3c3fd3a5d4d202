"""Where a benchmark writes: ``benchmarks/results`` and ``benchmarks/figures``, or
``--outdir`` (the tests' quick runs)."""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
FIGURES = HERE / "figures"
RESULTS = HERE / "results"


def add_outdir_option(parser):
    parser.add_argument("--outdir", help="write results/ and figures/ here "
                                         "(default: benchmarks/)")


def add_quick_option(parser, **small):
    """``--quick``: the tests' smoke run, with these arguments made ``small`` (applied
    by :func:`use_outdir`)."""
    shown = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in small.items())
    parser.add_argument("--quick", action="store_true", help=f"smoke run: {shown}")
    parser.set_defaults(quick_values=small)


def use_outdir(args):
    """Point FIGURES and RESULTS at ``args.outdir`` if given; with ``--quick``, the
    small arguments of :func:`add_quick_option`."""
    global FIGURES, RESULTS
    small = vars(args).pop("quick_values", {})
    if getattr(args, "quick", False):
        for key, value in small.items():
            setattr(args, key, value)
    if args.outdir:
        FIGURES, RESULTS = Path(args.outdir) / "figures", Path(args.outdir) / "results"


def parse(parser):
    """The arguments, with ``--outdir`` added and applied (:func:`use_outdir`)."""
    add_outdir_option(parser)
    args = parser.parse_args()
    use_outdir(args)
    return args


def save(report, name):
    """Write ``report`` to RESULTS/``name`` (after every run, so a stopped benchmark
    keeps what it measured)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / name).write_text(json.dumps(report, indent=1))


def record(report, run, name):
    """Add one run to ``report["runs"]``, print it as a JSON line and save the report
    to RESULTS/``name`` (a stopped benchmark keeps what it measured)."""
    report["runs"].append(run)
    print(json.dumps(run), flush=True)
    save(report, name)
