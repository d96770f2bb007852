"""The tightness atlas as figures (one per paper) and as a ``paper_repro.py`` target (``theory-atlas``).

Each panel is one result of :mod:`theory`: a heatmap of ``log10(slack)`` over the result's two grid
parameters (:data:`theory.atlas.GRIDS`), where slack = bound ÷ value for upper bounds and value ÷ bound for lower
bounds, so that blue = the bound holds with room to spare, white = tight, red = beyond the bound.  An identity
(stated = exact) is coloured by ``-|log10(stated ÷ exact)|``: any departure is red.  Cells whose assumptions fail
are hatched and greyed; violated cells (assumptions met, exact value or whole interval beyond the bound) are red
with a thick black frame; every mark a cell can print ("vac", "?", "≥", "no event", "∞", "n/a", "—") is defined in
the figure's legend.  A paper with more than :data:`PER_FIGURE` results gets several figures
(``atlas_<paper>.png``, ``atlas_<paper>_2.png``, ...), so that none is taller than three rows of panels.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..plots.style import face, new_figure, save, suptitle, wrap
from ..registry import Context, Section, register
from .theory_figs import statement_label

__all__ = ["PARAM_LABELS", "PER_FIGURE", "plot_atlas"]

PARAM_LABELS = {
    "n": "n (samples per client)", "alpha": "α (closeness)", "sigma": "σ (noise)", "m": "m (clients)",
    "sep": "separation of the optima", "d": "d (dimension)", "cov_condition": "feature covariance condition no.",
    "eps2": "ε₂ (separation)", "eps1": "ε₁ (intra-cluster diameter)",
    "clients_per_cluster": "clients per cluster", "R": "R (REFINE steps)",
    "T": "T (rounds)", "delta": "Δ (separation)", "k": "k (clusters)", "K": "K (clusters)",
}
CLIP = 4.0  # colour range of log10(slack): [-CLIP, CLIP]; the printed numbers are not clipped
PER_FIGURE = 9  # panels per figure (three rows of three): a paper with more results gets a second figure
VIOLATED_AT_LEAST = 0.3  # a violated cell is coloured at least this far into the red (|log10| of a factor 2)


def _tick(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _cell_text(c: dict) -> str:
    s = c["slack_shown"]
    if c["status"] != "ok" or (isinstance(s, float) and math.isnan(s)):
        return "—"
    if math.isinf(s):
        return "∞" if s > 0 else "0"
    if c["lower_only"] and s < 1:  # no event, and too few trials to resolve a bound this small
        return "no\nevent"
    pre = "≥" if c["lower_only"] else ""
    if s == 0:
        return pre + "0"
    if 0.01 <= s < 100:
        return pre + f"{s:.2g}"
    return pre + f"1e{math.log10(s):.0f}"


def _colour(c: dict) -> float:
    """The colour value of an evaluated cell: log10(slack) clipped to ±CLIP; an identity's departure either way and
    a violated cell on the red (negative) side; a Monte Carlo that saw no event never beyond the bound."""
    s = c["slack_shown"]
    if s == 0:
        return -CLIP
    if math.isnan(s):
        return math.nan
    z = float(np.clip(math.log10(s) if math.isfinite(s) else CLIP, -CLIP, CLIP))
    if c.get("direction") == "equal":  # stated ÷ exact: 1 is right, any factor either way is off
        z = -abs(z)
    if c["violated"]:
        return -max(abs(z), VIOLATED_AT_LEAST)
    # no event seen: the point estimate holds (slack infinite); a conservative slack below 1 is no evidence against
    # the bound, so such a cell is never coloured as beyond it
    return max(z, 0.0) if c["lower_only"] else z


def _title(summary: dict) -> str:
    """A panel's title in full (never cut): the result, its statement in mathtext, what the value is and how the
    slack is taken."""
    import re

    from theory.atlas import result_of

    # a slice's fixed parameters in the papers' symbols ("Lemma 1 (n = 200, Δ = 1.0, k = 2)")
    label = re.sub(r"\b(delta|sigma|alpha)\b", lambda m: {"delta": "Δ", "sigma": "σ", "alpha": "α"}[m.group(1)],
                   summary["label"])
    head = f"{label}: " + statement_label(result_of(summary["result"]), summary["title"])
    value = "exact" if summary["source"] == "exact" else f"Monte Carlo, {summary['trials']} trials"
    rel = {"upper": "bound ÷ value", "lower": "value ÷ bound", "equal": "stated ÷ exact"}[summary["direction"]]
    return wrap(head, 4.2, 8.5) + f"\n[{value}; slack = {rel}]"


def _panel(ax, summary: dict, cells: list[dict], cmap, norm):
    from matplotlib.patches import Rectangle

    xs, ys = summary["x_values"], summary["y_values"]
    Z = np.full((len(ys), len(xs)), np.nan)
    for c in cells:
        if c["status"] == "ok":
            Z[c["iy"], c["ix"]] = _colour(c)
    ax.imshow(Z, cmap=cmap, norm=norm, origin="lower", aspect="auto", interpolation="nearest",
              extent=(-0.5, len(xs) - 0.5, -0.5, len(ys) - 0.5))
    small = len(xs) * len(ys) > 40
    for c in cells:
        i, j = c["ix"], c["iy"]
        if c["status"] != "ok":
            ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, facecolor="0.85", edgecolor="0.6", lw=0.5))
            ax.text(i, j, "n/a", ha="center", va="center", fontsize=7, color="0.3")
            continue
        if not c["assumptions_met"]:
            ax.add_patch(Rectangle((i - 0.5, j - 0.5), 1, 1, facecolor=(0.55, 0.55, 0.55, 0.45), hatch="///",
                                   edgecolor="0.35", lw=0.0))
        if c["violated"]:
            ax.add_patch(Rectangle((i - 0.46, j - 0.46), 0.92, 0.92, fill=False, edgecolor="black", lw=2.2))
        txt = _cell_text(c)
        if c["vacuous"]:
            txt += "\nvac"
        elif c["inconclusive"]:
            txt += "\n?"
        z = Z[j, i]
        dark = not math.isnan(z) and abs(z) > 0.6 * CLIP
        ax.text(i, j, txt, ha="center", va="center", fontsize=6.5 if small else 7.5,
                color="white" if dark else "black", fontweight="bold" if c["violated"] else "normal")
    ax.set_xticks(range(len(xs)))
    ax.set_xticklabels([_tick(v) for v in xs], fontsize=8)
    ax.set_yticks(range(len(ys)))
    ax.set_yticklabels([_tick(v) for v in ys], fontsize=8)
    ax.set_xlabel(PARAM_LABELS.get(summary["x_param"], summary["x_param"]), fontsize=9)
    ax.set_ylabel(PARAM_LABELS.get(summary["y_param"], summary["y_param"]), fontsize=9)
    ax.grid(False)
    ax.set_title(_title(summary), fontsize=8.5)


def _legend_handles():
    """Every mark a panel can show, each defined (the colours are the colour bar's)."""
    from matplotlib.patches import Patch, Rectangle

    blank = {"facecolor": "white", "edgecolor": "0.6"}
    return [Patch(facecolor=(0.55, 0.55, 0.55, 0.45), hatch="///", edgecolor="0.35",
                  label="hatched: the statement's assumptions fail at this cell"),
            Rectangle((0, 0), 1, 1, facecolor=_cmap()(0.1), edgecolor="black", lw=2.2,
                      label="red, framed, bold: violated (assumptions met, value beyond the bound)"),
            Patch(**blank, label="vac: vacuous bound (at least the trivial value: says nothing)"),
            Patch(**blank, label="?: inconclusive (the Monte Carlo 95% interval straddles the bound)"),
            Patch(**blank, label="≥x: Monte Carlo saw no event (slack from the upper end of its 95% interval)"),
            Patch(**blank, label="no event: too few trials to resolve a bound this small"),
            Patch(**blank, label="∞: the value is 0 (infinite room); 0: no room at all (slack 0)"),
            Patch(facecolor="0.85", edgecolor="0.6", label="n/a: grid point outside the result's domain; —: no value"),
            Patch(facecolor=_cmap()(0.3), edgecolor="0.6",
                  label="identity (stated = exact): red by how far stated and exact differ, either way")]


def plot_atlas(out: str | Path, summaries: list[dict], records: list[dict]) -> list[str]:
    """The figures of each paper (``atlas_<paper>.png`` and ``.pdf`` in ``out``, and ``atlas_<paper>_2.png`` ...
    beyond :data:`PER_FIGURE` results); returns the file names."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import FuncNorm

    from theory.atlas import PAPERS

    files = []
    cmap = _cmap()
    # signed square root: a slack of 0.9 or 1.2 (|log10| ~ 0.05) is already visibly coloured
    norm = FuncNorm((lambda z: np.sign(z) * np.sqrt(np.abs(z)), lambda u: np.sign(u) * u * u), vmin=-CLIP, vmax=CLIP)
    for paper, paper_name in PAPERS.items():
        every = [s for s in summaries if s["result"].startswith(paper + "-")]
        chunks = [every[i:i + PER_FIGURE] for i in range(0, len(every), PER_FIGURE)]
        for ci, sums in enumerate(chunks):
            ncol = min(3, len(sums))
            nrow = math.ceil(len(sums) / ncol)
            fig, axes = new_figure(nrow, ncol, width=4.6, height=4.1)
            for k, s in enumerate(sums):
                _panel(axes[k // ncol][k % ncol], s, [r for r in records if r["result"] == s["result"]], cmap, norm)
            for k in range(len(sums), nrow * ncol):
                axes[k // ncol][k % ncol].set_visible(False)
            bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=axes, shrink=0.6, aspect=30, pad=0.01)
            bar.set_label(r"$\log_{10}$(slack): blue = the bound holds with room, white = tight, red = beyond it",
                          fontsize=8.5)
            bar.set_ticks(np.arange(-CLIP, CLIP + 1))  # evenly valued (figures.plots.figcheck)
            bar.ax.tick_params(labelsize=8)
            fig.legend(handles=_legend_handles(), loc="outside lower center", ncol=2, fontsize=8, frameon=False)
            trials = sorted({int(s["trials"]) for s in sums if s.get("source") != "exact" and s.get("trials")})
            span = f"{trials[0]}" + (f"-{trials[-1]}" if len(trials) > 1 else "") if trials else ""
            count = ("0 Monte Carlo trials (exact laws only)" if not trials else span
                     + " Monte Carlo trials per cell where no exact law exists")
            cells = sum(len(s["x_values"]) * len(s["y_values"]) for s in sums)
            part = f" (figure {ci + 1} of {len(chunks)})" if len(chunks) > 1 else ""
            suptitle(fig, face(f"Tightness atlas, beyond the papers: slack of every {paper_name} bound over two "
                               f"parameters (cell text = slack){part}", "synthetic instances of each result's model",
                               f"{len(sums)} results, {cells} grid cells", count), fontsize=10)
            files += save(fig, out, f"atlas_{paper}" + (f"_{ci + 1}" if ci else ""))
    return files


def _cmap():
    import matplotlib

    return matplotlib.colormaps["RdBu"]


# ------------------------------------------------------------------------------------- paper_repro target
def _theory_missing(ctx: Context) -> str | None:
    try:
        import theory.atlas  # noqa: F401
    except Exception as exc:
        return f"the theory package is not importable ({type(exc).__name__}: {exc})"
    return None


@register("theory-atlas", "beyond papers", "tightness atlas: slack of every theory bound over a 2-D grid",
          kind="theory", available=_theory_missing)
def _run(ctx: Context) -> Section:
    from theory.atlas import GRIDS, build_cells, json_safe, unjson, write_atlas

    from ..runs import run_points
    from ..trials import atlas_cell_trial
    from ..verdicts.compare import build_section

    size = ctx.pick("quick", "medium", "default")
    folder = ctx.folder("theory-atlas")
    names = list(GRIDS)
    cells = [json_safe(c) for c in build_cells(names, size)]
    # one trial per cell through the sweep engine: resumable, and re-plotted from its store by `synth report`
    recs = run_points(ctx, "theory-atlas", atlas_cell_trial, cells, 1, seed=0)
    records = []
    for cell, r in zip(cells, recs, strict=True):
        if r["status"] == "ok":
            records.append(unjson(r["result"]))
        else:
            records.append({**{k: unjson(cell[k]) for k in ("result", "x_param", "y_param", "x", "y", "ix", "iy")},
                            "status": "invalid", "reason": r["reason"]})
    seconds = sum(float(r.get("seconds", 0.0)) for r in recs)  # compute time of the cells, the same on a re-plot
    out = write_atlas(folder, size, 0, names, records, seconds, plot=plot_atlas)
    table = (folder / "atlas.md").read_text().split("\n", 2)[2]
    figs = [(f, f"tightness atlas: {f[len('atlas_'):-4].replace('_', ', figure ')}") for f in out["files"]
            if f.endswith(".png")]
    intro = ("How loose is each bound of the three papers, and where does it break: `python -m theory atlas` "
             f"at the {size} size (paper_repro --tiny/--quick/--full = atlas quick/medium/default; one trial seed "
             "per cell from the target's seed).")
    return build_section("Tightness atlas of every theory bound", intro, "theory-atlas", figs, [], out["files"],
                         extra=table)
