"""Table and figure of ``bench_learnt_bases.py`` runs (one or more result files).

    python report_learnt_bases.py results/learnt_bases_split0.json [more.json ...]

Prints a Markdown table per M (mean over the splits present, with the number of
splits) of test RMSE and NLPD for K-means bases, learnt means, learnt means and blur,
SVGP at SASPA's wall time and at 5x it, and the exact GP where it was run; writes
``figures/learnt_bases.png`` (RMSE and NLPD relative to the exact GP, per set).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
from lib import output


METHODS = (("saspa_kmeans", "SASPA, K-means bases"), ("saspa_means", "SASPA, learnt means"),
           ("saspa_means+blur", "SASPA, learnt means+blur"), ("svgp_1x", "SVGP at 1x"),
           ("svgp_5x", "SVGP at 5x"))


def collect(paths):
    """{(set, M): {method: [(rmse, nlpd, seconds), ...]}} and {set: exact run}."""
    cells, exact, machine_notes = defaultdict(lambda: defaultdict(list)), {}, []
    for path in paths:
        report = json.loads(Path(path).read_text())
        machine_notes.append(f"{path}: matmul {report['matmul_gflops']:.1f} GFLOP/s")
        for run in report["runs"]:
            if "exact" in run:
                exact[run["set"]] = run["exact"]
                continue
            cell = cells[(run["set"], run["M"])]
            for key, _ in METHODS[:3]:
                if key in run:
                    r = run[key]
                    cell[key].append((r["test_rmse"], r["test_nlpd"], r["seconds"]))
            for budget, key in zip(run["svgp"], ("svgp_1x", "svgp_5x")):
                cell[key].append((budget["rmse"], budget["nlpd"], budget["seconds"]))
    return cells, exact, machine_notes


def table(cells, exact):
    lines = []
    for M in sorted({m for _, m in cells}):
        lines += [f"M = {M}: test RMSE / test NLPD (mean over splits; seconds)", "",
                  "| set (splits) | " + " | ".join(name for _, name in METHODS)
                  + " | exact GP (split 0) |", "|---" * (len(METHODS) + 2) + "|"]
        for (name, m), cell in sorted(cells.items()):
            if m != M:
                continue
            row = [f"{name} ({len(cell['saspa_means'])})"]
            for key, _ in METHODS:
                vals = np.array(cell.get(key, []))
                row.append("-" if vals.size == 0 else
                           f"{vals[:, 0].mean():.4f} / {vals[:, 1].mean():.3f} "
                           f"({vals[:, 2].mean():.0f} s)")
            e = exact.get(name)
            row.append("-" if e is None else
                       f"{e['test_rmse']:.4f} / {e['test_nlpd']:.3f} ({e['seconds']:.0f} s)")
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def figure(cells, exact):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = sorted({s for s, _ in cells})
    Ms = sorted({m for _, m in cells})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / (len(METHODS) * len(Ms))
    for panel, (ax, col, label) in enumerate(zip(axes, (0, 1), ("test RMSE", "test NLPD"))):
        for a, M in enumerate(Ms):
            for b, (key, name) in enumerate(METHODS):
                xs, ys = [], []
                for s_i, s in enumerate(sets):
                    vals = np.array(cells[(s, M)].get(key, []))
                    if vals.size:
                        xs.append(s_i + (a * len(METHODS) + b) * width)
                        ys.append(vals[:, col].mean())
                ax.bar(xs, ys, width, label=f"{name}, M={M}", alpha=0.5 + 0.5 * a / max(1, len(Ms) - 1))
        for s_i, s in enumerate(sets):
            if s in exact:
                v = exact[s]["test_rmse" if col == 0 else "test_nlpd"]
                ax.hlines(v, s_i - 0.05, s_i + 0.85, colors="k", linestyles="--",
                          label="exact GP" if s_i == 0 else None)
        ax.set_xticks([i + 0.4 for i in range(len(sets))], sets, fontsize=8)
        ax.set_ylabel(label)
    axes[0].legend(fontsize=6, ncol=2)
    fig.suptitle("Learnt bases against K-means, SVGP at equal and 5x wall time, exact GP")
    fig.tight_layout()
    output.FIGURES.mkdir(parents=True, exist_ok=True)
    path = output.FIGURES / "learnt_bases.png"
    fig.savefig(path, dpi=100)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="bench_learnt_bases.py result files")
    args = output.parse(parser)
    cells, exact, notes = collect(args.results)
    print("\n".join(notes), "\n")
    print(table(cells, exact))
    print("figure:", figure(cells, exact))


if __name__ == "__main__":
    main()
