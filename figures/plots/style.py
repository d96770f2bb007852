"""One figure style for every target: seaborn "whitegrid", the colour-blind-safe palette, PNG + PDF output.

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot state), so targets can run
in worker processes and tests without a display.
"""

from __future__ import annotations

import contextlib
import contextvars
import textwrap
from pathlib import Path

import numpy as np

from synth.store import save_figure_atomic

__all__ = ["ALGO_ORDER", "BOUND_LABELS", "MIN_BAND", "PALETTE", "SAVE_DPI", "SEPARATE_SCALE", "algo_colour",
           "algo_hatch", "band", "constant_note", "face", "figure_legend", "integer_ticks", "marker", "method_order",
           "new_figure", "palette", "plain_log", "plain_maths", "save", "seed_curves", "seeds_text", "separate_scale",
           "small_print", "stand_in_name", "stands_in", "styled", "suptitle", "value_ticks", "wrap"]

# no interval (band or whisker) is drawn from fewer values than this: a t-interval from 2 seeds spans most of
# a bounded metric's range and says nothing (the ordering verdicts need as many, figures.verdicts.rules.MIN_SEEDS)
MIN_BAND = 3

# every algorithm keeps its colour and marker across all figures
ALGO_ORDER = ("IFCA", "SR-FCA", "CLoVE", "Global", "Local", "CFL", "Local-KMeans", "one-shot", "ONE_SHOT-IFCA",
              "one-shot k-means", "FeSEM", "FlexCFL", "PACFL", "k-FED", "FedSoft", "Per-FedAvg", "FedProto", "FedALA",
              "FedPAC")
_MARKERS = "osD^vP*X<>hd"


# ten colours of distinguishable hues (no two alike by figures.plots.figcheck.colours_alike: seaborn's colorblind
# palette has three orange/tan hues, its 2nd and 4th both orange): blue, orange, green, red, purple, grey, pink,
# cyan, yellow-green, black
PALETTE = ("#0173B2", "#E69F00", "#029E73", "#CC3311", "#7B4FB0", "#666666", "#CC78BC", "#17BECF", "#9ACD32",
           "#000000")


def palette(n: int = 10) -> list[tuple[float, float, float]]:
    """The project's palette (:data:`PALETTE`: distinguishable hues for up to ten series; cycled beyond)."""
    from matplotlib.colors import to_rgb

    return [to_rgb(PALETTE[i % len(PALETTE)]) for i in range(n)]


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

    return palette(10) + list(sns.color_palette("dark", 10))


def method_order(names) -> list[str]:
    """``names`` in the project's one order of methods (:data:`ALGO_ORDER`; variants of one method, such as
    IFCA (k=2) and (k=3), keep their given order; names outside the list come last)."""
    return sorted(dict.fromkeys(names), key=_algo_index)


def marker(i: int) -> str:
    """The i-th marker of the common cycle."""
    return _MARKERS[i % len(_MARKERS)]


@contextlib.contextmanager
def styled():
    """The common style: seaborn whitegrid, paper context, the project's palette (:data:`PALETTE`)."""
    import seaborn as sns

    with sns.axes_style("whitegrid"), sns.plotting_context("paper", font_scale=1.1), \
            sns.color_palette(list(PALETTE)):
        yield


def new_figure(nrows: int = 1, ncols: int = 1, width: float = 6.4, height: float = 4.2, **kw):
    """A :class:`~matplotlib.figure.Figure` and its axes array (always 2-D) in the common style."""
    from matplotlib.figure import Figure

    with styled():
        fig = Figure(figsize=(width * ncols, height * nrows), layout="constrained")
        axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def integer_ticks(axis) -> None:
    """Ticks of a counting axis (rounds, iterations) at whole numbers only."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def value_ticks(axis, values) -> None:
    """Ticks at the swept values themselves, as plain numbers, no minor ticks (a log axis would otherwise label
    its minor ticks, which print over each other on a short range)."""
    from matplotlib.ticker import FixedLocator, NullLocator

    values = sorted({float(v) for v in values})
    if len(values) <= 8:
        axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(lambda v, pos: f"{v:g}")
    axis.set_minor_locator(NullLocator())


def plain_log(axis) -> None:
    """A log axis labelled at its decades only (no minor tick labels), in plain notation where short."""
    from matplotlib.ticker import LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, numticks=6))
    axis.set_minor_formatter(NullFormatter())


def _tag(artist, n: int) -> None:
    """Mark a band with the number of values behind its narrowest point (checked by :mod:`figures.plots.figcheck`)."""
    artist.set_gid(f"band n={int(n)}")


def band(ax, x, mean, lo, hi, colour, label: str, mk: str = "o", linestyle: str = "-", *, n,
         bounds: tuple[float, float] = (-np.inf, np.inf), stagger: tuple[int, int] | None = None) -> None:
    """A line with markers and error bars (the interval) where it rests on at least :data:`MIN_BAND` values.

    Error bars, not a shaded band: translucent bands of several series stack and blend into colours of no series
    (:mod:`figures.plots.figcheck` fails such a figure).  ``n`` is the number of values (seeds, trials) behind each
    point (an int or one per point); a point with fewer gets no bar.  The bars are clipped to ``bounds``, the range
    of the metric.  ``stagger`` = (i, k) puts the markers and bars of the i-th of k curves at every k-th point,
    shifted by i, so that curves that coincide (say all at 1.0) still show each one's markers and bars; a long
    curve has a bar at about every twelfth point.
    """
    x, mean, lo, hi = (np.asarray(v, dtype=np.float64) for v in (x, mean, lo, hi))
    counts = np.broadcast_to(np.asarray(n, dtype=np.int64), x.shape)
    every = None if stagger is None or len(x) < 2 * stagger[1] else (stagger[0] % stagger[1], stagger[1])
    ax.plot(x, mean, marker=mk, color=colour, label=label, linestyle=linestyle, markersize=4.5, linewidth=1.5,
            markevery=every)
    ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(mean) & (counts >= MIN_BAND)
    if ok.any():
        idx = np.flatnonzero(ok)
        step = max(1, len(idx) // 12)
        if every is not None:
            step = max(step, every[1])
            idx = idx[(idx % step) == (every[0] % step)] if len(idx) > step else idx
        else:
            idx = idx[::step]
        if len(idx):
            low, high = np.clip(lo[idx], *bounds), np.clip(hi[idx], *bounds)
            err = [np.maximum(0, mean[idx] - low), np.maximum(0, high - mean[idx])]
            bars = ax.errorbar(x[idx], mean[idx], yerr=err, fmt="none", ecolor=colour, elinewidth=0.9, capsize=2.0,
                               alpha=0.85)
            for c in bars.lines[2]:
                _tag(c, counts[idx].min())


def seed_curves(ax, x, values, colour, label: str, mk: str = "o", linestyle: str = "-", *,
                bounds: tuple[float, float] = (-np.inf, np.inf), stagger: tuple[int, int] | None = None) -> int:
    """The mean of per-seed series ``values`` (seeds x points, NaN where missing) with its seed spread: with at
    least :data:`MIN_BAND` seeds a 95 % t-band (clipped to ``bounds``); with two, each seed as a thin line under
    the mean (no band from two values); one seed is its own line.  Never one marked line per seed: several
    methods' seeds drawn alike tangle.  Returns the number of seeds drawn."""
    from synth.intervals import column_mean_intervals

    A = np.asarray(values, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    if A.size == 0:
        return 0
    seeds = A.shape[0]
    if seeds >= MIN_BAND:
        mean, lo, hi, n = column_mean_intervals(A, 0.95)
        band(ax, x, mean, lo, hi, colour, f"{label} (mean, 95% bars)", mk, linestyle, n=n, bounds=bounds,
             stagger=stagger)
        return seeds
    every = None if stagger is None or len(x) < 2 * stagger[1] else (stagger[0] % stagger[1], stagger[1])
    if seeds > 1:
        for s in range(seeds):
            ax.plot(x, A[s], color=colour, linestyle=linestyle, linewidth=0.8, alpha=0.4)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a round no seed reached: NaN, not drawn
        mean = np.nanmean(A, axis=0) if seeds > 1 else A[0]
    ax.plot(x, mean, marker=mk, color=colour, linestyle=linestyle, markersize=4.5, linewidth=1.5, markevery=every,
            label=f"{label} (mean of {seeds} seeds; thin: each)" if seeds > 1 else f"{label} (1 seed)")
    return seeds


def constant_note(ax, what: str = "") -> bool:
    """Say on the panel when every labelled curve of ``ax`` is one constant (a method that never moved, a panel of
    zeros): ``every curve at 0`` (``what`` names the quantity).  Returns whether it wrote the note
    (:mod:`figures.plots.figcheck` fails a constant panel without one)."""
    vals = []
    for ln in ax.lines:
        if not ln.get_visible() or ln.get_transform() != ax.transData:  # a threshold (axhline) is no curve
            continue
        y = np.asarray(ln.get_ydata(), dtype=np.float64)
        vals.append(y[np.isfinite(y)])
    vals = np.concatenate(vals) if vals else np.array([])
    if vals.size < 2 or np.ptp(vals) != 0:
        return False
    ax.text(0.5, 0.5, f"every curve at {what + ' ' if what else ''}{vals[0]:.4g} throughout",
            transform=ax.transAxes, ha="center", va="center", fontsize=8, color="0.3",
            bbox={"facecolor": "white", "edgecolor": "0.8", "alpha": 0.9, "pad": 2})
    return True


def figure_legend(fig, axes, ncol: int = 3, fontsize: float = 7.5) -> None:
    """One legend for all of ``axes`` (labels deduplicated), below the panels, where it covers no curve."""
    seen: dict[str, object] = {}
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, h)
    if seen:
        # as many columns as fit the figure's width (a legend wider than the figure is cut at both ends)
        column_in = max(len(label) for label in seen) * 0.62 * fontsize / 72 + 0.6
        fit = max(1, int((fig.get_figwidth() - 0.2) // column_in))
        fig.legend(list(seen.values()), list(seen), loc="outside lower center", ncol=min(ncol, len(seen), fit),
                   fontsize=fontsize, frameon=False)


def face(what: str, data: str, size: str, seeds: str) -> str:
    """A figure's title: the paper and its table or figure (``what``), then the data actually used, the size
    (clients, samples, rounds; m, n, R, sigma) and the seeds or trials (:func:`suptitle` wraps it)."""
    return f"{what}\ndata: {data}; size: {size}; {seeds}"


def wrap(text: str, width_in: float, fontsize: float = 9.0) -> str:
    """``text`` wrapped line by line to ``width_in`` inches of ``fontsize``-point text, never inside a mathtext
    ``$...$`` segment (a line break there would break the maths), a short set ("m ∈ {4, 8}") or at a hyphen ("SR-" /
    "FCA"), in lines as even as they can be (:func:`balanced_lines`: no lone word such as "seeds" on a last line)."""
    import re

    chars = max(20, int(width_in * 72 / (0.56 * fontsize)))
    keep = "\x00"  # stands for a space inside maths (and a short set such as "{4, 8}") while wrapping
    text = re.sub(r"\$[^$]*\$|\{[^{}$\n]{1,30}\}", lambda m: m.group(0).replace(" ", keep), text)
    lines = [w for line in text.split("\n") for w in balanced_lines(line, chars)]
    return "\n".join(lines).replace(keep, " ")


def balanced_lines(line: str, chars: int) -> list[str]:
    """``line`` in as few lines of at most ``chars`` characters as it needs, each as long as the others as far as
    the words allow: the narrowest width that needs no more lines than ``chars`` does.  Greedy wrapping at ``chars``
    fills the first lines and leaves the rest, often one word ("seeds", "point"), to the last.  A lone last word
    that balancing cannot avoid takes the previous line's last word along when that fits."""
    lines = _greedy(line, chars)
    words = line.split()
    if len(lines) < 2 or not words:
        return lines
    # the fewest lines is non-increasing in the width, so the narrowest width with as few lines is found going down
    for width in range(chars - 1, max(len(w) for w in words) - 1, -1):
        narrower = _greedy(line, width)
        if len(narrower) > len(lines):
            break
        lines = narrower
    *head, prev, last = lines
    kept, _, moved = prev.rpartition(" ")
    if " " not in last and kept and len(moved) + 1 + len(last) <= chars:
        lines = [*head, kept, f"{moved} {last}"]
    return lines


def _greedy(line: str, width: int) -> list[str]:
    """Greedy wrapping (``textwrap``) without breaks at hyphens; ``[""]`` for an empty line."""
    return textwrap.wrap(line, width, break_on_hyphens=False) or [""]


def suptitle(fig, text: str, fontsize: float = 9.0) -> None:
    """The figure's title (its face), wrapped to the figure's width."""
    fig.suptitle(wrap(text, fig.get_figwidth() - 0.2, fontsize), fontsize=fontsize)


def seeds_text(n: int, word: str = "seed") -> str:
    """``'3 seeds'``, ``'1 seed'``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def small_print(fig, text: str, fontsize: float = 7.0) -> None:
    """A note in small print at the figure's lower left, in the layout's bottom margin (what a reader may want but
    need not see first: a spec's file name, the public code's name of a grid)."""
    fig.supxlabel(wrap(text, fig.get_figwidth() - 0.2, fontsize), x=0.005, ha="left", fontsize=fontsize,
                  color="0.35")


def stand_in_name(name: str, real_sets: tuple[str, ...] = ("MNIST", "CIFAR-10", "FMNIST"),
                  stand_in: str = "digits") -> str:
    """A panel or legend name for data run on a stand-in: ``'MNIST (rotated)'`` -> ``'digits (rotated), for
    MNIST'`` (a figure must not name the real set as what ran; :func:`figures.plots.figcheck.stand_in_problems`)."""
    import re

    for real in real_sets:
        m = re.search(rf"(?<![\w-]){re.escape(real)}(?![\w-])", name)
        if m:
            return f"{name[:m.start()]}{stand_in}{name[m.end():]}, for {real}"
    return name


def stands_in(title: str) -> bool:
    """Whether a figure's face (:func:`face`) says its data are a stand-in (``data: 8x8 digits standing in for
    MNIST``, :func:`figures.targets.netcommon.data_used`): its panels and legends must then not name the real set as
    run."""
    import re

    m = re.search(r"\bdata: (.*?)(; size:|$)", " ".join(title.split()))
    return bool(m and "standing in for" in m.group(1))


# one colour scale per comparison (figures.plots.figcheck): an image on a scale of its own says so in its gid
SEPARATE_SCALE = "separate colour scale"


def separate_scale(artist, why: str) -> None:
    """Mark a colour-mapped image as intentionally on its own colour scale (panels that are not one comparison,
    e.g. different quantities); ``why`` says why, for whoever reads the figure's code."""
    artist.set_gid(f"{SEPARATE_SCALE}: {why}")


# the paper's bound in a legend says on which side of it the value must lie (Result.direction)
BOUND_LABELS = {"upper": "paper's upper bound (value ≤ bound)", "lower": "paper's lower bound (value ≥ bound)",
                "equal": "paper's stated value (identity: value = stated)"}

_GREEK = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "Delta": "Δ", "eps": "ε", "epsilon": "ε",
          "eta": "η", "theta": "θ", "lambda": "λ", "mu": "μ", "rho": "ρ", "sigma": "σ", "omega": "ω", "pi": "π"}


def plain_maths(text: str) -> str:
    """ASCII maths made readable without mathtext (for text whose structure is unknown): Greek names as letters,
    ``<=``/``>=``/``!=`` as ≤/≥/≠, ``||x||`` as ‖x‖, ``sqrt`` as √, ``^2`` as ², ``*`` after a letter kept."""
    import re

    out = re.sub(r"(?<![A-Za-z])(" + "|".join(sorted(_GREEK, key=len, reverse=True)) + r")(?![a-zA-Z])",
                 lambda m: _GREEK[m.group(1)], text)
    for a, b in (("<=", "≤"), (">=", "≥"), ("!=", "≠"), ("||", "‖"), ("sqrt", "√"), ("^2", "²"), (" - ", " − ")):
        out = out.replace(a, b)
    return out


SAVE_DPI = 150  # the PNGs' resolution; figures.plots.figcheck draws at it (text widths do not scale exactly with dpi)


_DRAW = contextvars.ContextVar("cflab_draw_figures", default=True)


@contextlib.contextmanager
def figures_off():
    """Within it :func:`save` (and :func:`figures.plots.dotplot.dot_plot`) draw and write nothing and return the names
    they would write: for callers that need only the targets' rows (the campaign reads every target's rows from
    its stored runs, where drawing was most of the time)."""
    token = _DRAW.set(False)
    try:
        yield
    finally:
        _DRAW.reset(token)


def drawing() -> bool:
    """Whether figures are drawn (see :func:`figures_off`)."""
    return _DRAW.get()


def save(fig, folder: Path, stem: str) -> list[str]:
    """Write ``stem.png`` (:data:`SAVE_DPI`) and ``stem.pdf`` into ``folder``; returns the two file names."""
    if not drawing():
        return [f"{stem}.png", f"{stem}.pdf"]
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for ext in ("png", "pdf"):
        path = folder / f"{stem}.{ext}"
        save_figure_atomic(fig, path, dpi=SAVE_DPI)
        names.append(path.name)
    return names
