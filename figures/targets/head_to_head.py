"""Beyond the papers: SR-FCA, IFCA and CLoVE head to head on *identical* mixed-linear-regression instances.

Every trial samples one federation (``theta = sphere``: K unit-norm optima with pairwise distances in
[Delta, 5 Delta], CLoVE App. C.1.1) and runs all three algorithms on it (same data, see
:func:`figures.trials.shared_instance_trial`).  Three sweeps:

* misclustering against the separation Delta (IFCA and CLoVE from random Gaussian initialisations, IFCA with
  restarts as its paper recommends; SR-FCA with lambda = Delta / 2, Lemma 4.6's midpoint for eps1 = 0);
* misclustering against the initialisation quality: IFCA and CLoVE started inside IFCA's Assumption 1 ball of
  radius (1/2 - alpha) Delta around the truths, for several alpha, and from random initialisations (SR-FCA
  needs no initialisation: its line is the same instance's SR-FCA result);
* K unknown: SR-FCA (finds K itself), CLoVE choosing k by the silhouette score among up to 6 models, and IFCA
  given 6 models; the number of clusters found and the ARI.
"""

from __future__ import annotations

import math

import numpy as np

from ..plots.style import algo_colour, band, face, marker, new_figure, save, suptitle, wrap
from ..registry import Context, Section, register
from ..runs import by_point, run_points, summarise_values
from ..trials import shared_instance_trial
from ..verdicts.compare import Row, build_section, claim_row, write_rows, write_table
from ..verdicts.published import claim
from ..verdicts.rules import equal_claim, level_claim

ALGOS = ("SR-FCA", "IFCA", "CLoVE")


def _gen(ctx: Context, K: int = 3) -> dict:
    return dict(family="linear", K=K, clients_per_cluster=ctx.pick(4, 8, 20), n=ctx.pick(30, 50, 100), d=5,
                theta="sphere", sigma=0.5, rounds=ctx.pick(20, 50, 100))


def algo_grid(delta: float, init: str = "gaussian", alpha: float | None = None, unknown_k: bool = False) -> dict:
    common = dict(step_size=0.25, averaging="gradient", init=init, **({} if alpha is None else {"alpha": alpha}))
    ifca = dict(algo="ifca", n_init=1 if init == "ball" else 5, **common)
    clove = dict(algo="clove", **common)
    if unknown_k:
        ifca["n_clusters"] = 6
        clove.update(k_selection="silhouette", max_clusters=6)
    return {"SR-FCA": dict(algo="srfca", threshold=delta / 2, local="erm", dist="l2"), "IFCA": ifca, "CLoVE": clove}


def _summ(rs: list[dict], label: str, key: str):
    # misclustering is a fraction of clients and the ARI is at most 1: their intervals stay in range
    support = {"misclustering_matched": (0.0, 1.0), "ari": (-1.0, 1.0)}.get(key, (-math.inf, math.inf))
    return summarise_values([r["result"][label][key] if r["status"] == "ok" else None for r in rs], support=support)


D0 = 1.0  # the separation of the initialisation and K-unknown sweeps
TITLES = {"separation": ("separation Δ", "one-to-one misclustering"),
          "init": ("IFCA closeness α (ball radius (1/2 − α)Δ)", "one-to-one misclustering"),
          "unknown-k": ("true number of clusters K", "ARI")}


def settings(ctx: Context) -> dict:
    """The three sweeps' values and the trials per point at this context's size."""
    return {"trials": ctx.pick(2, 6, 40),
            "deltas": ctx.pick([0.2, 1.0], [0.2, 0.5, 1.0, 1.6], [0.1, 0.2, 0.4, 0.7, 1.0, 1.3, 1.6]),
            "alphas": ctx.pick([0.45, 0.05], [0.45, 0.25, 0.05], [0.45, 0.35, 0.25, 0.15, 0.05, 0.01]),
            "Ks": ctx.pick([2, 3], [2, 3, 4], [2, 3, 4, 5]), "gen": _gen(ctx), "size": ctx.size}


def _sweep_points(ctx: Context, s: dict) -> tuple[list[dict], list[tuple[str, float]]]:
    pts, where = [], []
    for dl in s["deltas"]:
        pts.append({"generator": dict(_gen(ctx), delta=dl), "algos": algo_grid(dl)})
        where.append(("separation", dl))
    for a in s["alphas"]:
        pts.append({"generator": dict(_gen(ctx), delta=D0), "algos": algo_grid(D0, "ball", a)})
        where.append(("init", a))
    for K in s["Ks"]:
        pts.append({"generator": dict(_gen(ctx, K), delta=D0), "algos": algo_grid(D0, unknown_k=True)})
        where.append(("unknown-k", K))
    return pts, where


def compute(ctx: Context, s: dict) -> list[tuple[str, float, list[dict]]]:
    """Run (or read back) the three sweeps; (sweep, x, records) per point."""
    pts, where = _sweep_points(ctx, s)
    recs = by_point(run_points(ctx, "head-to-head", shared_instance_trial, pts, s["trials"], seed=2060), len(pts))
    return [(sweep, x, rs) for (sweep, x), rs in zip(where, recs, strict=True)]


def summarise(runs: list[tuple[str, float, list[dict]]]) -> list[dict]:
    """One row per (sweep, x, algorithm): misclustering, ARI and clusters found (means, 95% t-intervals)."""
    out = []
    for sweep, x, rs in runs:
        for label in ALGOS:
            mis, ari, k = (_summ(rs, label, key) for key in ("misclustering_matched", "ari", "n_clusters"))
            out.append({"sweep": sweep, "x": x, "algorithm": label, "misclustering_mean": mis.mean,
                        "misclustering_lo": mis["lo"], "misclustering_hi": mis["hi"], "ari_mean": ari.mean,
                        "ari_lo": ari["lo"], "ari_hi": ari["hi"], "clusters_found_mean": k.mean, "trials": mis["n"]})
    return out


def plot(s: dict, out: list[dict], folder) -> list[str]:
    """The three panels (misclustering vs Delta, vs initialisation; ARI with K unknown); the files written."""
    fig, axes = new_figure(1, 3, width=4.4, height=4.4)
    for si, sweep in enumerate(TITLES):
        ax = axes[0][si]
        key = "ari" if sweep == "unknown-k" else "misclustering"
        flat = _flat(out, sweep, key)
        if flat is not None:
            _note(ax, sweep, key, flat, s["trials"])
            continue
        if sweep == "init" and _alpha_blind(out):
            _init_bars(ax, out)
            continue
        for ai, label in enumerate(ALGOS):
            rs = sorted((r for r in out if r["sweep"] == sweep and r["algorithm"] == label), key=lambda r: r["x"])
            lo_clip = -1.0 if key == "ari" else 0.0  # t-intervals of bounded metrics, clipped to their range
            # coinciding curves (all three at 0) would hide each other: a small offset per algorithm along x
            xs = sorted({r["x"] for r in out if r["sweep"] == sweep})
            step = 0.015 * ((xs[-1] - xs[0]) or 1.0) * (ai - (len(ALGOS) - 1) / 2)
            band(ax, [r["x"] + step for r in rs], [r[f"{key}_mean"] for r in rs],
                 [r[f"{key}_lo"] for r in rs], [r[f"{key}_hi"] for r in rs],
                 algo_colour(label), _label(label, sweep), marker(ai), n=[r["trials"] for r in rs],
                 bounds=(lo_clip, 1.0))
            if sweep == "init" and label != "SR-FCA":
                ref = next(r for r in out if r["sweep"] == "separation" and r["x"] == D0 and r["algorithm"] == label)
                ax.axhline(ref["misclustering_mean"], color=algo_colour(label), linestyle=":", linewidth=1.2,
                           label=f"{label}, random init (Δ = {D0})")
        ax.set_xticks(sorted({r["x"] for r in out if r["sweep"] == sweep}))
        ax.set_xlabel(TITLES[sweep][0])
        ax.set_ylabel(f"{TITLES[sweep][1]}\n(mean; 95% bars from 3+ trials)", fontsize=9)
        if sweep == "init":
            ax.invert_xaxis()  # worse initialisations to the right
        ax.legend(fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    g = s["gen"]
    suptitle(fig, face("Head to head, beyond the papers: SR-FCA vs IFCA vs CLoVE on the same instances (curves "
                       "offset slightly along x so that equal values stay visible)",
                       f"synthetic mixed linear regression ({s.get('size', '')} run)",
                       f"K = 3 clusters (sweeps 1-2) x {g['clients_per_cluster']} clients, n = {g['n']} samples each, "
                       f"d = {g['d']}, σ = {g['sigma']}, {g['rounds']} rounds", f"{s['trials']} trials per point"))
    return save(fig, folder, "head_to_head")


def _flat(out: list[dict], sweep: str, key: str) -> float | None:
    """The one value every algorithm has at every point of ``sweep`` (None when they differ anywhere): a panel of
    such a sweep is flat lines that carry no information."""
    vals = {r[f"{key}_mean"] for r in out if r["sweep"] == sweep}
    if sweep == "init":  # the panel's random-initialisation reference lines
        vals |= {r[f"{key}_mean"] for r in out if r["sweep"] == "separation" and r["x"] == D0}
    vals = {round(v, 12) for v in vals if v == v}
    return vals.pop() if len(vals) == 1 else None


def _alpha_blind(out: list[dict]) -> bool:
    """Whether every algorithm has the same misclustering at every α of the initialisation sweep: lines against α
    are then flat, and what the sweep shows is the ball against random initialisations (:func:`_init_bars`)."""
    return all(len({round(r["misclustering_mean"], 12) for r in out if r["sweep"] == "init" and r["algorithm"] == a})
               == 1 for a in ALGOS)


def _init_bars(ax, out: list[dict]) -> None:
    """The initialisation sweep where α changes nothing: misclustering at Δ = D0 from random initialisations
    against from inside IFCA's Assumption 1 ball (every α alike), per method, with 95% t-whiskers from 3+ trials."""
    alphas = sorted({r["x"] for r in out if r["sweep"] == "init"}, reverse=True)
    bars = []
    for label in ALGOS:
        ball = next(r for r in out if r["sweep"] == "init" and r["algorithm"] == label)
        rand = next(r for r in out if r["sweep"] == "separation" and r["x"] == D0 and r["algorithm"] == label)
        if label == "SR-FCA":  # no initialisation: one bar
            bars.append((f"{label} (no init)", rand, label))
        else:
            bars += [(f"{label}, random init", rand, label), (f"{label}, ball init", ball, label)]
    for i, (name, r, label) in enumerate(bars):
        ball = "ball" in name
        ax.barh(i, r["misclustering_mean"], color=algo_colour(label), alpha=0.45 if ball else 0.9,
                hatch="//" if ball else "", edgecolor=algo_colour(label), height=0.6)
        if r["trials"] >= 3 and r["misclustering_hi"] == r["misclustering_hi"]:
            err = ax.errorbar([r["misclustering_mean"]], [i], xerr=[[r["misclustering_mean"] - r["misclustering_lo"]],
                                                                     [r["misclustering_hi"] - r["misclustering_mean"]]],
                              fmt="none", ecolor="0.2", capsize=3)
            err.lines[2][0].set_gid(f"band n={r['trials']}")  # checked by figures.plots.figcheck
        end = r["misclustering_hi"] if r["trials"] >= 3 and r["misclustering_hi"] == r["misclustering_hi"] else \
            r["misclustering_mean"]
        ax.text(end, i, f"  {r['misclustering_mean']:.2f}", va="center", fontsize=8.5)  # beyond its whisker
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=8.5)
    ax.invert_yaxis()
    ax.set_xlim(0.0, max(0.1, 1.25 * max(r["misclustering_hi"] if r["misclustering_hi"] == r["misclustering_hi"]
                                          else r["misclustering_mean"] for _, r, _ in bars)))
    ax.set_xlabel(f"one-to-one misclustering at Δ = {D0:g}\n(mean; 95% whisker from 3+ trials)")
    ax.set_title(wrap("initialisation: random, or inside IFCA's Assumption 1 ball of radius (1/2 − α)Δ (the same at "
                      f"every α in {{{', '.join(f'{a:g}' for a in alphas)}}})", 4.0, 9), fontsize=9)


def _note(ax, sweep: str, key: str, value: float, trials: int) -> None:
    """In place of a panel whose every curve is the same constant: why it is not drawn."""
    what = {"misclustering": "misclustering", "ari": "ARI"}[key]
    # a mean at the metric's best value means every trial there has it
    best = (key, value) in (("misclustering", 0.0), ("ari", 1.0))
    ax.axis("off")
    ax.set_title(f"{TITLES[sweep][0]}: not drawn", fontsize=9)
    ax.text(0.5, 0.5, wrap(f"Every method has {what} {value:g} at every point of this sweep"
                           + (f", in each of its {trials} trials" if best else " (mean over its trials)")
                           + (f", as from random initialisations at Δ = {D0:g}" if sweep == "init" else "")
                           + ": flat lines would carry no information."
                           + (f" At this size and Δ = {D0:g} every method clusters every client right." if best else "")
                           + " The values are in the section's table.", 3.6, 9), transform=ax.transAxes,
            ha="center", va="center", fontsize=9, color="0.25")


@register("head-to-head", "beyond papers", "SR-FCA vs IFCA vs CLoVE on identical MLR instances: misclustering vs "
          "separation, vs initialisation quality, and with K unknown")
def head_to_head(ctx: Context) -> Section:
    """SR-FCA vs IFCA vs CLoVE on identical MLR instances (three sweeps, see the module docstring)."""
    s = settings(ctx)
    runs = compute(ctx, s)
    out = summarise(runs)
    folder = ctx.folder("head-to-head")
    names = plot(s, out, folder)
    rows = compare(out, runs)
    files = [write_table(folder / "head_to_head.csv", list(out[0]), out), *names,
             write_rows(rows, folder / "comparison.csv")]
    g = s["gen"]
    intro = (f"SR-FCA, IFCA and CLoVE on identical mixed-linear-regression instances (θ* on the unit sphere, "
             f"pairwise distances in [Δ, 5Δ]; {g['clients_per_cluster']} clients per cluster, n = {g['n']}, d = "
             f"{g['d']}, σ = {g['sigma']}, {g['rounds']} rounds of gradient averaging with step 0.25). IFCA: 5 random "
             "Gaussian restarts (best by loss) or one ball initialisation; CLoVE: Gaussian or ball initialisation; "
             f"SR-FCA: exact local ERM, ℓ2 distance, λ = Δ/2, t = 2, two REFINE steps. Initialisation and K-unknown "
             f"sweeps at Δ = {D0}.")
    return build_section("Head-to-head on identical MLR instances", intro, "head-to-head",
                         [(names[0], "misclustering vs separation, vs initialisation, and ARI with K unknown")], rows,
                         files)


def _label(label: str, sweep: str) -> str:
    if sweep == "unknown-k":
        return {"SR-FCA": "SR-FCA (finds K)", "IFCA": "IFCA with 6 models", "CLoVE": "CLoVE, silhouette k ≤ 6"}[label]
    if sweep == "init":
        return {"SR-FCA": "SR-FCA (no init)", "IFCA": "IFCA, ball init", "CLoVE": "CLoVE, ball init"}[label]
    return {"SR-FCA": "SR-FCA, λ = Δ/2", "IFCA": "IFCA, 5 Gaussian restarts", "CLoVE": "CLoVE, Gaussian init"}[label]


def _trials(runs, sweep: str, x: float, label: str, key: str) -> list[float]:
    """The per-trial values of ``key`` for algorithm ``label`` at point ``x`` of ``sweep`` (finished trials)."""
    rs = next(rs for sw, xx, rs in runs if sw == sweep and xx == x)
    return [float(r["result"][label][key]) for r in rs if r["status"] == "ok"]


# misclustering at or below this counts as clustering well (the claims "needs no initialisation", "restarts suffice")
WELL = 0.05


def compare(out: list[dict], runs: list[tuple[str, float, list[dict]]]) -> list[Row]:
    """The papers' claims this target can check (no initialisation needed, SR-FCA finds K, ...), judged over trials by
    the orderings' rule (:mod:`figures.verdicts.rules`), and findings."""
    rows = []
    sep = {a: sorted((r for r in out if r["sweep"] == "separation" and r["algorithm"] == a), key=lambda r: r["x"])
           for a in ALGOS}
    at = {a: next(r for r in sep[a] if r["x"] == 1.0) for a in ALGOS}
    for label, cid, what in (("SR-FCA", "no-init-needed", "no initialisation"),
                             ("CLoVE", "no-precise-init", "a random Gaussian initialisation")):
        r = at[label]
        rows.append(claim_row(f"{label} from {what} (Δ = 1): misclustering below {WELL}", claim(label, cid),
                              f"misclustering {r['misclustering_mean']:.3f} [{r['misclustering_lo']:.3f}, "
                              f"{r['misclustering_hi']:.3f}] (IFCA with 5 random restarts: "
                              f"{at['IFCA']['misclustering_mean']:.3f})",
                              level_claim({label: _trials(runs, "separation", 1.0, label, "misclustering_matched")},
                                          WELL, below=True)))
    init = {a: sorted((r for r in out if r["sweep"] == "init" and r["algorithm"] == a), key=lambda r: -r["x"])
            for a in ALGOS}
    rows.append(Row("misclustering from IFCA's Assumption 1 ball, α from large to small",
                    "n/a (IFCA Thm 1 assumes α > 0; the papers do not sweep it)",
                    "; ".join(f"{a}: " + ", ".join(f"α={r['x']}: {r['misclustering_mean']:.2f}" for r in init[a])
                              for a in ("IFCA", "CLoVE")), "—", "finding"))
    unk = {a: sorted((r for r in out if r["sweep"] == "unknown-k" and r["algorithm"] == a), key=lambda r: r["x"])
           for a in ALGOS}
    found = ", ".join(f"K={r['x']}: {r['clusters_found_mean']:.1f}" for r in unk["SR-FCA"])
    # clusters found minus the true K, per trial: the claim is that it is 0 for every K (Holm over the Ks)
    excess = {f"K={r['x']}": [v - r["x"] for v in _trials(runs, "unknown-k", r["x"], "SR-FCA", "n_clusters")]
              for r in unk["SR-FCA"]}
    rows.append(claim_row("SR-FCA finds K (clusters found minus K is 0)", claim("SR-FCA", "no-k-needed"),
                          f"clusters found (mean): {found}",
                          equal_claim(excess, 0.0, margin=0.5) if excess else "not run (no finished trial)"))
    rep = "; ".join(f"{a}: " + ", ".join(f"Δ={r['x']}: {r['misclustering_mean']:.2f}" for r in sep[a]) for a in ALGOS)
    best = {a: np.nanmean([r["misclustering_mean"] for r in sep[a]]) for a in ALGOS}
    rows.append(Row("misclustering vs Δ (who is best on average)", "n/a (no paper compares all three)", rep, "—",
                    f"finding (lowest mean: {min(best, key=best.get)})"))
    last = sep["IFCA"][-1]
    rows.append(claim_row(f"IFCA with 5 random restarts, largest Δ: misclustering below {WELL}",
                          claim("IFCA", "restarts-suffice"),
                          f"misclustering {last['misclustering_mean']:.2f} at Δ={last['x']}",
                          level_claim({"IFCA": _trials(runs, "separation", last["x"], "IFCA",
                                                       "misclustering_matched")}, WELL, below=True)))
    return rows
