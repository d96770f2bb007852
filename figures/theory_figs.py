"""Beyond the papers: bound versus exact/empirical value for every lemma and theorem of :mod:`theory`.

For each result of ``python -m theory list`` one parameter is swept (the one its statement is about: the
samples n, the noise sigma, the closeness alpha, ...); at every value :meth:`theory.results.base.Result.check`
gives the paper's bound, the exact value where an exact law exists, the Monte Carlo estimate with its 95%
interval, the verdict (holds / violated / vacuous / assumptions not met) and the comparison irrespective of
the assumptions.  One target per paper; every check runs through the sweep engine (resumable).
"""

from __future__ import annotations

import math
import re
import textwrap

from .compare import Row, build_section, write_rows, write_table
from .registry import Context, Section, register
from .runs import by_point, run_points
from .style import face, figure_legend, new_figure, palette, plain_log, save, suptitle, value_ticks
from .trials import theory_trial

_SIG = ([0.1, 0.5], [0.05, 0.1, 0.2, 0.5], [0.02, 0.05, 0.1, 0.2, 0.5, 1.0])
# result -> (swept parameter, values at tiny/quick/full, Monte Carlo trials at tiny/quick/full, fixed params)
SWEEPS: dict[str, tuple] = {
    "ifca-lemma1": ("n", ([10, 50], [10, 25, 50, 100, 200], [10, 25, 50, 100, 200, 400]), (2000, 4000, 20000), {}),
    "ifca-thm1": ("sigma", ([0.1, 0.3], [0.1, 0.2, 0.3, 0.5], [0.05, 0.1, 0.2, 0.3, 0.5, 0.8]), (10, 40, 200), {}),
    "ifca-cor1": ("n", ([50, 100], [50, 100, 200], [50, 100, 200, 400]), (5, 20, 100), {}),
    "ifca-assumption1": ("alpha", ([0.25, -0.1], [0.25, 0.1, 0.0, -0.1], [0.25, 0.1, 0.05, 0.0, -0.05, -0.1,
                                                                          -0.25]), (5, 20, 100), {}),
    "ifca-thm2": ("n", ([100, 200], [100, 200, 400], [100, 200, 400, 800]), (5, 20, 100), {}),
    "ifca-cor2": ("n", ([100, 200], [100, 200, 400], [100, 200, 400, 800]), (3, 10, 20), {}),
    "srfca-prop4.1": ("dist", ([0.5, 1.0], [0.5, 1.0, 2.0], [0.25, 0.5, 1.0, 2.0, 4.0]), (20, 50, 200), {}),
    "srfca-lemma4.6": ("n", ([25, 50], [25, 50, 100], [25, 50, 100, 200, 400]), (10, 40, 200), {}),
    "srfca-remark4.7": ("n", ([50, 200], [50, 200, 800], [50, 200, 800, 3200]), (5, 20, 100), {}),
    "srfca-thm4.8": ("clients_per_cluster", ([5, 10], [5, 10, 20], [5, 10, 20, 40]), (5, 30, 100), {}),
    "srfca-thm4.11": ("R", ([1, 2], [1, 2, 3], [1, 2, 3, 4]), (5, 20, 100), {}),
    "srfca-remark4.12": ("R", ([1, 2], [1, 2, 3], [1, 2, 3, 4]), (5, 20, 100), {}),
    "srfca-thm4.14": ("n", ([50, 100], [50, 100, 200], [50, 100, 200, 400]), (5, 20, 50), {}),
    "clove-lemma-a.1": ("sigma", _SIG, (5, 10, 50), {}),
    "clove-lemma-a.2": ("sigma", _SIG, (5, 10, 50), {}),
    "clove-lemma-a.4": ("n", ([20, 50], [20, 50, 100], [10, 20, 50, 100, 200]), (20, 100, 200), {}),
    "clove-lemma-a.6": ("n", ([20, 50], [20, 50, 100], [10, 20, 50, 100, 200]), (5, 10, 20), {}),
    "clove-lemma-a.7": ("m", ([20, 50], [20, 50, 100], [10, 20, 50, 100, 200]), (10, 50, 100), {}),
    "clove-thm-a.9": ("n", ([20, 50], [20, 50, 100], [10, 20, 50, 100, 200]), (10, 50, 100), {}),
    "clove-thm4.1": ("n", ([10, 50], [10, 50, 100], [5, 10, 50, 100, 200]), (10, 30, 100), {}),
    "clove-lemma-a.13": ("sigma", ([0.1, 0.2], [0.05, 0.1, 0.2], [0.02, 0.05, 0.1, 0.2, 0.4]), (100, 200, 500), {}),
    "clove-cor-a.14": ("sigma", ([0.1, 0.2], [0.05, 0.1, 0.2], [0.02, 0.05, 0.1, 0.2, 0.4]), (100, 200, 500), {}),
    "clove-lemma-a.16": ("n", ([2, 5], [2, 5, 10], [1, 2, 5, 10, 20]), (200, 500, 2000), {}),
    "clove-lemma-a.17": ("n", ([20, 50], [20, 50, 100], [10, 20, 50, 100, 200]), (5, 20, 50), {}),
    "clove-thm4.2": ("T", ([1, 3], [1, 3, 5], [1, 2, 3, 5, 8]), (3, 10, 20), {}),
}
PAPERS = {"ifca": "IFCA journal", "srfca": "SR-FCA", "clove": "CLoVE"}


def _num(v) -> float:
    if v is None:
        return math.nan
    if isinstance(v, str):
        return {"inf": math.inf, "-inf": -math.inf}.get(v, math.nan)
    return float(v)


def _with_margin(name: str, margin: dict | None) -> str:
    """An assumption with its margin (negative: by how much it fails), as :mod:`theory` reports it."""
    if not margin or not isinstance(margin.get("margin"), int | float):
        return name
    return f"{name} (margin {margin['margin']:+.3g})"


def _theory_missing(ctx: Context) -> str | None:
    try:
        from theory.results import get_result

        get_result("ifca-lemma1")
    except Exception as exc:
        return f"the theory package is not importable ({type(exc).__name__}: {exc})"
    return None


def _run(ctx: Context, paper: str) -> Section:
    from theory.results import REGISTRY, get_result

    get_result("ifca-lemma1")  # registers every result
    names = [n for n in REGISTRY if n.startswith(paper + "-")]
    missing = [n for n in names if n not in SWEEPS]
    points, meta = [], []
    for name in names:
        if name in missing:
            continue
        param, values, trials, fixed = SWEEPS[name]
        vals = values[["tiny", "quick", "full"].index(ctx.size)]
        T = trials[["tiny", "quick", "full"].index(ctx.size)]
        for v in vals:
            points.append({"result": name, "params": {**fixed, param: v}, "trials": T})
            meta.append((name, param, v))
    folder_name = f"theory-{paper}"
    recs = by_point(run_points(ctx, folder_name, theory_trial, points, 1, seed=77), len(points))
    folder = ctx.folder(folder_name)
    table, rows = [], []
    for (name, param, v), rs in zip(meta, recs, strict=True):
        r = rs[0]
        if r["status"] != "ok":
            rows.append(Row(f"{name} at {param}={v}", "bound", "—", "—", f"not run (failed: {r['reason']})"))
            continue
        c = r["result"]
        bound, exact, emp = _num(c["bound"]), _num(c["exact"]), _num(c["empirical"])
        lo, hi = _num(c["ci_low"]), _num(c["ci_high"])
        value = exact if math.isfinite(exact) else emp
        table.append({"result": name, "param": param, "value": v, "kind": c["kind"], "direction": c["direction"],
                      "bound": bound, "exact": exact, "empirical": emp, "ci_low": lo, "ci_high": hi,
                      "verdict": c["verdict"], "comparison": c["comparison"], "fitted_name": c["fitted_name"],
                      "fitted_constant": _num(c["fitted_constant"]), "trials": c["trials"],
                      "assumptions_failed": ";".join(_with_margin(k, (c.get("assumption_margins") or {}).get(k))
                                                     for k, okk in c["assumptions"].items() if not okk),
                      "cite": c["cite"], "quantity": c["quantity"]})
        rel = {"upper": "<=", "lower": ">=", "equal": "="}[c["direction"]]
        what = "exact" if math.isfinite(exact) else f"Monte Carlo ({c['trials']} trials)"
        rep = f"{what}: {value:.4g}" + (f" [{lo:.3g}, {hi:.3g}]" if math.isfinite(lo) and not math.isfinite(exact)
                                        else "")
        fitted = (f"; fitted {c['fitted_name']} = {_num(c['fitted_constant']):.3g}" if c["fitted_name"] else "")
        verdict = c["verdict"] + ("" if c["verdict"] in ("holds", "violated") else f" (numerically: {c['comparison']})")
        rows.append(Row(f"{name} at {param}={v}", f"{c['quantity'][:70]} {rel} {bound:.4g}", rep + fitted,
                        f"{value - bound:+.3g}" if math.isfinite(value - bound) else "—", verdict, c["cite"]))
    files = [write_table(folder / "checks.csv", list(table[0]) if table else ["result"], table)]
    figs, names_out = _plot(folder, paper, table, ctx.size)
    files += names_out + [write_rows(rows, folder / "comparison.csv")]
    intro = (f"{PAPERS[paper]}: every result of `python -m theory list` checked along one parameter. Each panel: "
             "the paper's bound (dashed, with the constants at their stated or default values), the exact value "
             "(solid) where an exact law exists, and the Monte Carlo estimate with its 95% interval (markers). "
             "The verdict is `theory`'s: 'assumptions not met' when a hypothesis of the statement fails at that "
             "point (the numeric comparison is then given in brackets), 'vacuous' when the bound says nothing.")
    notes = [f"not swept (no sweep defined): {', '.join(missing)}"] if missing else []
    return build_section(f"{PAPERS[paper]}: bounds versus exact and empirical values", intro, folder_name, figs, rows,
                         files, notes)


def _lemma(cite: str) -> str:
    """The paper and result name of a citation ("CLoVE App. A, Lemma A.1" -> "CLoVE Lemma A.1")."""
    m = re.search(r"(Lemma|Theorem|Corollary|Proposition|Remark|Assumption) [A-Z]?[\d.]*\d", cite)
    return f"{cite.split(',')[0].split(' App')[0].split(' Sec')[0]} {m.group(0)}" if m else cite


def _plain_linear(ax, values: list[float]) -> None:
    """A linear axis with plain tick values: a nearly constant curve (a bound that does not move along the swept
    parameter) gets a range of ± 5 % around it instead of an offset label such as '1e-5+1.4142'."""
    if not values:
        return
    lo, hi = min(values), max(values)
    centre = (lo + hi) / 2
    if hi - lo <= 1e-3 * max(abs(centre), 1e-12):
        half = 0.05 * abs(centre) if centre else 0.05
        ax.set_ylim(centre - half, centre + half)
    ax.ticklabel_format(axis="y", useOffset=False)


def _plot(folder, paper: str, table: list[dict], size: str = "quick"):
    results = list(dict.fromkeys(r["result"] for r in table))
    if not results:
        return [], []
    ncol = 4
    nrow = math.ceil(len(results) / ncol)
    fig, axes = new_figure(nrow, ncol, width=3.3, height=2.8)
    col = palette(3)
    for i, name in enumerate(results):
        ax = axes[i // ncol][i % ncol]
        rs = [r for r in table if r["result"] == name]
        x = [r["value"] for r in rs]
        b = [r["bound"] if math.isfinite(r["bound"]) else math.nan for r in rs]
        ax.plot(x, b, color="black", linestyle="--", marker="x", markersize=4, label="paper's bound")
        ex = [r["exact"] for r in rs]
        if any(math.isfinite(v) for v in ex):
            ax.plot(x, ex, color=col[0], linestyle="-", marker="o", markersize=3.5, label="exact")
        em = [r["empirical"] for r in rs]
        if any(math.isfinite(v) for v in em):
            lo = [max(0.0, r["empirical"] - r["ci_low"]) if math.isfinite(r["ci_low"]) else 0.0 for r in rs]
            hi = [max(0.0, r["ci_high"] - r["empirical"]) if math.isfinite(r["ci_high"]) else 0.0 for r in rs]
            ax.errorbar(x, em, yerr=[lo, hi], color=col[1], linestyle="none", marker="s", markersize=3.5,
                        capsize=2, label="Monte Carlo (95% CI)")
        vals = [v for v in b + ex + em + [r["ci_low"] for r in rs] if math.isfinite(v) and v > 0]
        allpos = all(v > 0 for v in b + ex + em if math.isfinite(v))
        if vals and allpos and max(vals) / min(vals) > 30:
            ax.set_yscale("log")
            plain_log(ax.yaxis)
        else:
            _plain_linear(ax, [v for v in b + ex + em if math.isfinite(v)])
        if min(x) > 0 and max(x) / min(x) >= 10:
            ax.set_xscale("log")
        value_ticks(ax.xaxis, x)  # the swept values themselves (a short log range labels its minor ticks)
        ax.set_xlabel(rs[0]["param"], fontsize=8)
        # the quantity the result bounds, and the result by the paper's own name (not the registry id)
        ax.set_ylabel(textwrap.fill(rs[0].get("quantity", ""), 38, max_lines=3, placeholder=" ..."), fontsize=6.5)
        verdicts = sorted(set(r["verdict"] for r in rs))
        ax.set_title(f"{_lemma(rs[0].get('cite', name))}\n({', '.join(verdicts)})", fontsize=7.5)
        ax.tick_params(labelsize=7)
    for j in range(len(results), nrow * ncol):
        axes[j // ncol][j % ncol].set_visible(False)
    figure_legend(fig, [ax for row in axes for ax in row], ncol=3, fontsize=8)
    trials = sorted({int(r["trials"]) for r in table if r["trials"] is not None}) or [0]
    span = f"{trials[0]}" if len(trials) == 1 else f"{trials[0]}-{trials[-1]}"
    suptitle(fig, face(f"beyond the papers: every {PAPERS[paper]} result, its bound against the exact value and a "
                       "Monte Carlo estimate, along one parameter", "synthetic instances of each result's model",
                       f"{size} sweep, one parameter per result (the panels' x axes)",
                       f"{span} Monte Carlo trials per point"), fontsize=10)
    names = save(fig, folder, f"theory_{paper}")
    return [(names[0], f"{PAPERS[paper]}: bounds vs exact and empirical values")], names


for _p in PAPERS:
    register(f"theory-{_p}", "beyond papers", f"bound vs exact/empirical for every {PAPERS[_p]} result of theory",
             kind="theory", available=_theory_missing)(lambda ctx, _p=_p: _run(ctx, _p))
