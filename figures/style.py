"""One figure style for every target: seaborn "whitegrid", the colour-blind-safe palette, PNG + PDF output.

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot state), so targets can run
in worker processes and tests without a display.
"""

from __future__ import annotations

import contextlib
import textwrap
from pathlib import Path

import numpy as np

from synth.store import save_figure_atomic

__all__ = ["ALGO_ORDER", "algo_colour", "algo_hatch", "band", "marker", "new_figure", "palette", "save", "styled"]

# every algorithm keeps its colour and marker across all figures
ALGO_ORDER = ("IFCA", "SR-FCA", "CLoVE", "Global", "Local", "CFL", "Local-KMeans", "one-shot", "ONE_SHOT-IFCA",
              "one-shot k-means", "FeSEM", "FlexCFL", "PACFL", "k-FED", "FedSoft", "Per-FedAvg", "FedProto", "FedALA",
              "FedPAC")
_MARKERS = "osD^vP*X<>hd"


def palette(n: int = 10) -> list[tuple[float, float, float]]:
    """seaborn's colour-blind-safe palette (cycled beyond its 10 colours)."""
    import seaborn as sns

    base = sns.color_palette("colorblind", 10)
    return [base[i % len(base)] for i in range(n)]


# the papers' other names for the same baselines
_ALIASES = {"fedavg": "Global", "global model": "Global", "local-only": "Local", "local model": "Local",
            "original": "CLoVE"}


def algo_colour(name: str) -> tuple[float, float, float]:
    """The colour of an algorithm (by its label's leading name; FedAvg = Global, Local-only = Local), the same in
    every figure; :func:`algo_hatch` tells the second ten apart)."""
    return _algo_colours()[_algo_index(name) % 20]


def algo_hatch(name: str) -> str:
    """A bar's hatch: none for the first ten algorithms, ``//`` for the rest, whose colours are the darker
    shades of the first ten's hues (so that no two algorithms of one figure look alike)."""
    return "" if _algo_index(name) % 20 < 10 else "//"


def _algo_index(name: str) -> int:
    low = name.lower()
    head = next((v for k, v in _ALIASES.items() if low.startswith(k)), name.split(" ")[0].split("(")[0])
    idx = next((i for i, a in enumerate(ALGO_ORDER) if head.lower() == a.lower()), None)
    return len(ALGO_ORDER) if idx is None else idx  # an unlisted name: the one spare colour


def _algo_colours() -> list[tuple[float, float, float]]:
    import seaborn as sns

    return list(sns.color_palette("colorblind", 10)) + list(sns.color_palette("dark", 10))


def marker(i: int) -> str:
    """The i-th marker of the common cycle."""
    return _MARKERS[i % len(_MARKERS)]


@contextlib.contextmanager
def styled():
    """The common style: seaborn whitegrid, paper context, colour-blind palette."""
    import seaborn as sns

    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.1), \
            sns.color_palette("colorblind"):
        yield


def new_figure(nrows: int = 1, ncols: int = 1, width: float = 6.4, height: float = 4.2, **kw):
    """A :class:`~matplotlib.figure.Figure` and its axes array (always 2-D) in the common style."""
    from matplotlib.figure import Figure

    with styled():
        fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def band(ax, x, mean, lo, hi, colour, label: str, mk: str = "o", linestyle: str = "-") -> None:
    """A line with markers and a shaded confidence band."""
    x, mean, lo, hi = (np.asarray(v, dtype=np.float64) for v in (x, mean, lo, hi))
    ax.plot(x, mean, marker=mk, color=colour, label=label, linestyle=linestyle, markersize=4.5, linewidth=1.5)
    ok = np.isfinite(lo) & np.isfinite(hi)
    if ok.any():
        ax.fill_between(x[ok], lo[ok], hi[ok], color=colour, alpha=0.18, linewidth=0)


def save(fig, folder: Path, stem: str) -> list[str]:
    """Write ``stem.png`` (150 dpi) and ``stem.pdf`` into ``folder``; returns the two file names."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for ext in ("png", "pdf"):
        path = folder / f"{stem}.{ext}"
        save_figure_atomic(fig, path, dpi=150)
        names.append(path.name)
    return names


def grouped_bars(folder: Path, rows: list[dict], stem: str, *, group: str, value: str, err: str, ylabel: str,
                 title: str, scale: float = 1.0, paper_label: str = "paper", tick=str, width: float = 7.0,
                 legend: dict | None = None, headroom: float = 0.0) -> list[str]:
    """Bars of ``scale * row[value]`` (± ``row[err]`` where more than one seed ran) per algorithm, grouped by
    ``row[group]``, with the paper's ``row["published"]`` as black ticks; returns the two file names."""
    groups = list(dict.fromkeys(r[group] for r in rows))
    algos = list(dict.fromkeys(r["algorithm"] for r in rows))
    fig, axes = new_figure(1, 1, width=width, height=4.0)
    ax = axes[0][0]
    bar = 0.8 / max(1, len(algos))
    # variants of one algorithm (IFCA (k=2) and (k=3)) share its colour: each later one gets its own hatch
    looks, seen = {}, set()
    for algo in algos:
        look = (algo_colour(algo), algo_hatch(algo))
        extra = iter(("..", "xx", "\\\\", "++", "oo"))
        while look in seen:
            look = (look[0], look[1] + next(extra, "-"))
        seen.add(look)
        looks[algo] = look
    for ai, algo in enumerate(algos):
        pts = [(gi + (ai - (len(algos) - 1) / 2) * bar, r) for gi, g in enumerate(groups) for r in rows
               if r[group] == g and r["algorithm"] == algo]
        if not pts:
            continue
        # a std of NaN (one finished seed) draws no error bar
        ax.bar([x for x, _ in pts], [scale * r[value] for _, r in pts], width=bar,
               yerr=[scale * r[err] if r["seeds"] > 1 and r[err] == r[err] else 0.0 for _, r in pts], capsize=3,
               color=looks[algo][0], label=algo, edgecolor="black", linewidth=0.4, hatch=looks[algo][1])
        # a zero-height bar (e.g. an ARI of 0) has no area: a marker on its top keeps it visible
        ax.scatter([x for x, _ in pts], [scale * r[value] for _, r in pts], marker=marker(ai), s=22, zorder=4,
                   color=algo_colour(algo), edgecolor="black", linewidth=0.5)
        pubs = [(x, r["published"]) for x, r in pts if r.get("published") is not None]
        if pubs:
            ax.scatter(*zip(*pubs, strict=True), marker="_", s=150, color="black", zorder=3,
                       label=paper_label if ai == 0 else None)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([tick(g) for g in groups], fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(textwrap.fill(title, int(13 * width)), fontsize=9)  # long titles (data, size, seeds) wrap
    if headroom:  # room for a legend above the bars
        lo, hi = ax.get_ylim()
        ax.set_ylim(min(0.0, lo), hi + headroom * (hi - min(0.0, lo)))
    ax.legend(fontsize=7, **(legend or {}))
    return save(fig, folder, stem)
