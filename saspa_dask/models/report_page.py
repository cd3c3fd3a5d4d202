"""The report page's parts: HTML (sections, tables, notes) and matplotlib figures
embedded as PNG data URIs, with axes a reader can trust (no offset notation, ranges
that do not blow round-off up into a trend, whole-number ticks for counts).

Figures use matplotlib's object interface (no global pyplot state, so reports can be
made from threads); the page loads nothing from anywhere.
"""

from __future__ import annotations

import base64
import html
import io
from datetime import datetime, timezone

import numpy as np

__all__ = ["figure", "image", "integer_ticks", "note", "page", "readable_range",
           "section", "table", "text"]

# a plotted series spans at least this share of its typical value: a curve that moves
# by 0.1% is drawn nearly flat, not stretched over the whole axis
MIN_RELATIVE_SPAN = 0.05

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;color:#222}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.2em .8em;text-align:left;
border-bottom:1px solid #eee}td.n{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;height:auto}p.note{color:#555;font-size:.9em}
"""


def page(title, sections):
    """A complete HTML document of ``sections`` (HTML strings) under ``title``."""
    made = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"generator\" content=\"saspa_dask\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "img-src data:; style-src 'unsafe-inline'\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p class=\"note\">made {made} by saspa_dask</p>"
            + "".join(sections) + "</body></html>\n")


def section(heading, *parts):
    return f"<h2>{html.escape(heading)}</h2>" + "".join(parts)


def table(rows):
    cells = "".join(
        f"<tr><th>{html.escape(str(k))}</th>"
        f"<td class=\"n\">{html.escape(text(v))}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def note(words):
    return f"<p class=\"note\">{html.escape(words)}</p>"


def text(value):
    if isinstance(value, (float, np.floating)):
        return f"{value:.6g}"
    return str(value)


def image(fig, alt):
    """``fig`` as an <img> with a PNG data URI."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"<img alt=\"{html.escape(alt)}\" src=\"data:image/png;base64,{data}\">"


def figure(width=7.0, height=3.6, columns=1, rows=1):
    """A figure and its ``rows`` x ``columns`` axes, flattened (plain values on every
    y axis: no offset notation that a reader must undo)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, columns)).ravel()
    for ax in axes:
        ax.ticklabel_format(useOffset=False, style="plain", axis="y")
    return fig, axes


def readable_range(ax, values):
    """Set the y range to the values', widened to at least :data:`MIN_RELATIVE_SPAN`
    of their typical size about their middle."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return
    low, high = float(values.min()), float(values.max())
    span = max(high - low, MIN_RELATIVE_SPAN * float(np.median(np.abs(values))), 1e-12)
    middle = 0.5 * (low + high)
    ax.set_ylim(middle - 0.55 * span, middle + 0.55 * span)


def integer_ticks(axis):
    """Whole-number ticks on ``axis`` (sweeps, iterations, counts)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))
