"""Beyond the papers: phase diagrams of SR-FCA, IFCA and CLoVE misclustering over (separation Delta, samples n).

Same instances for the three algorithms (:func:`figures.trials.shared_instance_trial`), the setting of the
head-to-head target.  The SR-FCA panel carries a derived boundary (not from the paper): ONE_SHOT with the l2
distance and lambda = Delta / 2 links two clients of one cluster when their local least-squares estimates are
within lambda; with Gaussian design the root-mean-square distance of two such estimates is
sigma sqrt(2 d / (n - d - 1)), so below Delta = 2 sigma sqrt(2 d / (n - d - 1)) the graph falls apart.
"""

from __future__ import annotations

import math

import numpy as np

from ..plots.style import face, new_figure, save, seeds_text, styled, suptitle
from ..registry import Context, Section, register
from ..runs import by_point, run_points, summarise_values
from ..trials import shared_instance_trial
from ..verdicts.compare import Row, build_section, write_rows, write_table

ALGOS = ("SR-FCA", "IFCA", "CLoVE")


def settings(ctx: Context) -> dict:
    """The grid (Delta x n), trials and generator of this context's size."""
    gen = dict(family="linear", K=3, clients_per_cluster=ctx.pick(4, 8, 20), d=5, theta="sphere", sigma=0.5,
               rounds=ctx.pick(20, 50, 100))
    return {"deltas": ctx.pick([0.3, 1.2], [0.2, 0.5, 1.0, 1.6], [0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.3, 1.6]),
            "ns": ctx.pick([20, 40], [15, 30, 60], [10, 15, 20, 30, 50, 80, 120]), "trials": ctx.pick(1, 3, 20),
            "sigma": gen["sigma"], "d": gen["d"], "K": gen["K"], "gen": gen, "size": ctx.size}


def compute(ctx: Context, s: dict) -> list[list[dict]]:
    """Run (or read back) one shared-instance trial set per (n, Delta) cell; the records grouped by cell."""
    from .head_to_head import algo_grid

    pts = [{"generator": dict(s["gen"], n=n, delta=dl), "algos": algo_grid(dl)} for n in s["ns"] for dl in s["deltas"]]
    return by_point(run_points(ctx, "phase-diagrams", shared_instance_trial, pts, s["trials"], seed=2070), len(pts))


def summarise(s: dict, recs: list[list[dict]]) -> list[dict]:
    """One row per (algorithm, n, Delta): mean one-to-one misclustering over the cell's trials, and how many of
    them clustered every client right (``perfect``)."""
    cells = [(n, dl) for n in s["ns"] for dl in s["deltas"]]
    out = []
    for (n, dl), rs in zip(cells, recs, strict=True):
        for a in ALGOS:
            vals = [r["result"][a]["misclustering_matched"] if r["status"] == "ok" else None for r in rs]
            m = summarise_values(vals)
            out.append({"algorithm": a, "n": n, "delta": dl, "misclustering_mean": m.mean, "ci_low": m["lo"],
                        "ci_high": m["hi"], "trials": m["n"], "perfect": sum(v == 0 for v in vals if v is not None)})
    return out


def plot(s: dict, out: list[dict], folder) -> list[str]:
    """The three phase diagrams (SR-FCA's with the derived ONE_SHOT boundary); the files written."""
    deltas, ns, sigma, d = s["deltas"], s["ns"], s["sigma"], s["d"]
    fig, axes = new_figure(1, 3, width=4.3, height=3.9)
    with styled():
        mesh = None
        for ai, a in enumerate(ALGOS):
            ax = axes[0][ai]
            grid = np.full((len(ns), len(deltas)), np.nan)
            # per cell: the trials that clustered every client right, of the trials run.  No "± half-width": a
            # t-interval from 3 trials of a bounded share prints "± 0.00" where all three agree, and says little
            # where they do not
            count = {}
            for r in out:
                if r["algorithm"] == a:
                    grid[ns.index(r["n"]), deltas.index(r["delta"])] = r["misclustering_mean"]
                    count[(ns.index(r["n"]), deltas.index(r["delta"]))] = (r.get("perfect"), r["trials"])
            mesh = ax.imshow(grid, origin="lower", cmap="cividis", vmin=0, vmax=1, aspect="auto")
            for (i, j), v in np.ndenumerate(grid):
                if np.isfinite(v):
                    perfect, n = count[(i, j)]
                    ax.text(j, i, f"{v:.2f}\n{perfect}/{n} all right", ha="center", va="center", fontsize=7.5,
                            color="black" if v > 0.55 else "white")
            ax.set_xticks(range(len(deltas)))
            ax.set_xticklabels([f"{x:g}" for x in deltas], fontsize=8.5)
            ax.set_yticks(range(len(ns)))
            ax.set_yticklabels([str(x) for x in ns], fontsize=8.5)
            ax.set_xlabel("separation Δ")
            ax.set_ylabel("samples per client n" if ai == 0 else "")
            ax.set_title(a, fontsize=9)
            ax.grid(False)
            if a == "SR-FCA":
                xs, ys = boundary_steps(deltas, ns, sigma, d)
                ax.plot(xs, ys, color="#d55e00", linestyle="--", linewidth=2,
                        label="cells right of it: Δ ≥ 2σ√(2d/(n−d−1))")
                ax.legend(fontsize=7.5, loc="upper right")
        fig.colorbar(mesh, ax=[axes[0][i] for i in range(3)], label="one-to-one misclustering (mean)", shrink=0.85)
    suptitle(fig, face("Phase diagrams, beyond the papers: one-to-one misclustering over (Δ, n), the same instances "
                       "for all three; cell: mean misclustering over its trials, below it how many trials clustered "
                       "every client right",
                       f"synthetic mixed linear regression ({s.get('size', '')} run)",
                       f"K = {s['K']} clusters x {s['gen']['clients_per_cluster']} clients, d = {d}, σ = {sigma}, "
                       f"{s['gen']['rounds']} rounds", seeds_text(s["trials"], "trial") + " per cell"))
    return save(fig, folder, "phase_diagrams")


def boundary_steps(deltas: list[float], ns: list[int], sigma: float, d: int) -> tuple[list[float], list[float]]:
    """SR-FCA's derived boundary Δ*(n) = 2σ√(2d/(n−d−1)) as a staircase along the cell edges of a categorical
    (Δ, n) grid (index coordinates): in each row it stands left of the first column with Δ ≥ Δ*(n) (right of every
    column where none is), so it separates cells without running through their labels; a row with n ≤ d + 1 has no
    boundary and stands right of every column."""
    xs: list[float] = []
    ys: list[float] = []
    for i, n in enumerate(ns):
        star = 2 * sigma * np.sqrt(2 * d / (n - d - 1)) if n > d + 1 else np.inf
        first = next((j for j, x in enumerate(deltas) if x >= star), len(deltas))
        xs += [first - 0.5, first - 0.5]
        ys += [i - 0.5, i + 0.5]
    return xs, ys


def compare(s: dict, out: list[dict]) -> list[Row]:
    """Findings rows: cells each algorithm clusters well, and SR-FCA above / below the derived boundary."""
    sigma, d = s["sigma"], s["d"]
    rows = []
    for a in ALGOS:
        good = [(r["n"], r["delta"]) for r in out if r["algorithm"] == a and r["misclustering_mean"] <= 0.05]
        rows.append(Row(f"{a}: cells with misclustering <= 0.05", "n/a (no paper draws this diagram)",
                        f"{len(good)} of {len(s['ns']) * len(s['deltas'])}", "—", "finding"))
    sr = [r for r in out if r["algorithm"] == "SR-FCA"]
    above = [r for r in sr if r["n"] > d + 1 and r["delta"] > 2 * sigma * math.sqrt(2 * d / (r["n"] - d - 1))]
    below = [r for r in sr if r not in above]
    rows.append(Row("SR-FCA: mean misclustering above / below the derived ONE_SHOT boundary",
                    "n/a (boundary derived here, not in the paper)",
                    f"above: {np.nanmean([r['misclustering_mean'] for r in above]) if above else float('nan'):.2f} "
                    f"({len(above)} cells); below: "
                    f"{np.nanmean([r['misclustering_mean'] for r in below]) if below else float('nan'):.2f} "
                    f"({len(below)} cells)", "—", "finding"))
    return rows


@register("phase-diagrams", "beyond papers", "phase diagrams: misclustering of SR-FCA, IFCA and CLoVE over "
          "(separation, samples per client), with SR-FCA's ONE_SHOT boundary")
def phase(ctx: Context) -> Section:
    """Misclustering phase diagrams of SR-FCA, IFCA and CLoVE over (Delta, n) on identical instances."""
    s = settings(ctx)
    out = summarise(s, compute(ctx, s))
    folder = ctx.folder("phase-diagrams")
    names = plot(s, out, folder)
    rows = compare(s, out)
    files = [write_table(folder / "phase.csv", list(out[0]), out), *names, write_rows(rows, folder / "comparison.csv")]
    intro = ("Phase diagrams of the one-to-one misclustering of SR-FCA (λ = Δ/2, exact local ERM), IFCA (5 random "
             "Gaussian restarts) and CLoVE (Gaussian initialisation) over the separation Δ and the samples per "
             "client n, on identical instances (see the head-to-head target for the settings).")
    return build_section("Phase diagrams", intro, "phase-diagrams", [(names[0], "misclustering over (Δ, n)")], rows,
                         files)
