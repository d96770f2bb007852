"""Tables of many methods as faceted dot plots: one panel per partition (and data set), methods in one fixed order.

Each method's row shows the reproduced mean as a filled marker with a whisker of ± one standard deviation over
seeds (the same spread the papers' ``±`` reports, drawn only from at least :data:`figures.plots.style.MIN_BAND` seeds),
every seed's own value as a small dot, and the paper's value as a hollow diamond with its ``±`` whisker, offset
vertically so that neither hides the other.  Whiskers are clipped to the metric's range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .style import (
    MIN_BAND,
    algo_colour,
    drawing,
    method_order,
    new_figure,
    save,
    stand_in_name,
    stands_in,
    suptitle,
    wrap,
)

__all__ = ["Dot", "dot_plot"]

WIDE = 9.5  # inches from which the legend's three entries fit side by side (7.5-pt text at 150 dpi)
_OFFSET = 0.2  # vertical offset of the reproduced (below) and published (above) marker within a method's row


@dataclass
class Dot:
    """One method in one panel: per-seed values and the paper's value ± (all in the plotted units)."""

    panel: str
    method: str
    values: list[float] = field(default_factory=list)
    published: float | None = None
    published_pm: float | None = None


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)


def dot_plot(folder: Path, stem: str, dots: list[Dot], *, xlabel: str | dict[str, str], title: str,
             bounds: tuple[float, float] = (-math.inf, math.inf), ncols: int | None = None,
             paper_label: str = "paper: value ± its reported spread", sharex: bool = True,
             notes: dict[str, str] | None = None) -> list[str]:
    """Draw ``dots`` (one panel per distinct ``panel``, in order of appearance) and save ``stem``.png/.pdf in
    ``folder``; returns the two file names.  ``title`` is the figure's face (:func:`figures.plots.style.face`);
    ``xlabel`` is one label, or one per panel (panels that measure different things get ``sharex=False``).
    Where the face says the data are a stand-in, a panel named after the real set says what ran ("MNIST (rotated)"
    is titled "digits (rotated), for MNIST").  ``notes``: a line written across a panel without reproduced values,
    saying why (e.g. the runs ended before the plotted stages)."""
    if not drawing():
        return [f"{stem}.png", f"{stem}.pdf"]
    panels = list(dict.fromkeys(d.panel for d in dots))
    methods = method_order(d.method for d in dots)
    ncols = min(ncols or 4, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    label_in = 0.075 * max(len(m) for m in methods) + 0.3  # room for the longest method name
    height = 0.27 * len(methods) + 0.9
    legend_in = 0.4 if 2.5 * ncols + label_in >= WIDE else 0.75
    fig, axes = new_figure(nrows, ncols, width=2.5, height=height, sharey=True, sharex=sharex)
    fig.set_size_inches(2.5 * ncols + label_in, height * nrows + 0.9 + legend_in)
    row_of = {m: i for i, m in enumerate(methods)}
    spread = False
    stand_in = stands_in(title)
    for pi, panel in enumerate(panels):
        ax = axes[pi // ncols][pi % ncols]
        for d in (d for d in dots if d.panel == panel):
            y = row_of[d.method]
            colour = algo_colour(d.method)
            vals = np.asarray([v for v in d.values if _finite(v)], dtype=np.float64)
            if vals.size:
                mean = float(vals.mean())
                if vals.size >= MIN_BAND:
                    sd = float(vals.std(ddof=1))
                    lo, hi = max(mean - sd, bounds[0]), min(mean + sd, bounds[1])
                    bars = ax.errorbar([mean], [y + _OFFSET], xerr=[[mean - lo], [hi - mean]], fmt="none",
                                       ecolor=colour, elinewidth=1.6, capsize=2.5, zorder=3)
                    bars.lines[2][0].set_gid(f"band n={vals.size}")  # checked by figures.plots.figcheck
                    spread = True
                ax.scatter(vals, np.full(vals.size, y + _OFFSET), s=9, color=colour, alpha=0.45, linewidths=0,
                           zorder=2)
                ax.scatter([mean], [y + _OFFSET], s=34, color=colour, edgecolors="black", linewidths=0.5, zorder=4)
            if _finite(d.published):
                pm = d.published_pm if _finite(d.published_pm) else 0.0
                lo, hi = max(d.published - pm, bounds[0]), min(d.published + pm, bounds[1])
                if pm > 0:
                    ax.errorbar([d.published], [y - _OFFSET], xerr=[[d.published - lo], [hi - d.published]],
                                fmt="none", ecolor="0.25", elinewidth=1.0, capsize=2.5, zorder=3)
                ax.scatter([d.published], [y - _OFFSET], s=30, marker="D", facecolors="white", edgecolors="black",
                           linewidths=1.0, zorder=4)
        if notes and panel in notes and not any(_finite(v) for d in dots if d.panel == panel for v in d.values):
            ax.text(0.5, 0.5, wrap(notes[panel], 2.2), transform=ax.transAxes, ha="center", va="center",
                    fontsize=7.5, color="0.2", zorder=1,  # under the paper's markers, which stay visible
                    bbox={"facecolor": "white", "edgecolor": "0.6", "boxstyle": "round,pad=0.3", "alpha": 0.9})
        ax.set_title(wrap(stand_in_name(panel) if stand_in else panel, 2.4), fontsize=9)
        ax.set_yticks(range(len(methods)))
        ax.set_yticklabels(methods, fontsize=8)
        ax.set_ylim(len(methods) - 0.5, -0.5)  # first method on top
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(True, axis="y", linewidth=0.4, alpha=0.5)
        if not sharex or pi // ncols == nrows - 1 or pi + ncols >= len(panels):
            ax.set_xlabel(xlabel if isinstance(xlabel, str) else xlabel[panel], fontsize=8.5)
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    _legend(fig, spread, paper_label)
    suptitle(fig, title)
    return save(fig, folder, stem)


def _legend(fig, spread: bool, paper_label: str) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", color="0.3", markeredgecolor="black", linestyle="-" if spread else "none",
                      label="reproduced: mean" + (f" ± std over seeds (from {MIN_BAND}+ seeds)" if spread else "")),
               Line2D([], [], marker="o", color="0.3", alpha=0.45, markersize=3.5, linestyle="none",
                      label="each seed"),
               Line2D([], [], marker="D", markerfacecolor="white", markeredgecolor="black", color="0.25",
                      linestyle="-", label=paper_label)]
    # three entries side by side need about 8 inches; a narrow figure stacks them
    fig.legend(handles=handles, loc="outside lower center", ncol=3 if fig.get_figwidth() >= WIDE else 1, fontsize=7.5,
               frameon=False)
