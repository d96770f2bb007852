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

from ..plots.style import (
    BOUND_LABELS,
    face,
    figure_legend,
    new_figure,
    palette,
    plain_log,
    plain_maths,
    save,
    suptitle,
    value_ticks,
)
from ..registry import Context, Section, register
from ..runs import by_point, run_points
from ..trials import theory_trial
from ..verdicts.compare import Row, build_section, write_rows, write_table

# Each result's quantity and statement in mathtext, short enough for a panel at a readable size (the full wording
# is theory's: `python -m theory show NAME`, and the checks.csv column `quantity`).  A result missing here falls
# back to its own text with the ASCII maths made readable (figures.plots.style.plain_maths).
QUANTITIES = {
    "ifca-lemma1": "P[a client of cluster 1 estimates\na wrong cluster identity]",
    "ifca-thm1": r"$\mathrm{max}_j \|\theta_j^+ - \theta_j^*\|$ after one step" "\n"
                 r"from $\|\theta_j - \theta_j^*\| = (1/2 - \alpha)\Delta$",
    "ifca-cor1": r"$\mathrm{max}_j \|\theta_j^{(T)} - \theta_j^*\|$ after $T$ rounds" "\n(fresh data each round)",
    "ifca-assumption1": r"P[$\mathrm{max}_j \|\theta_j^{(T)} - \theta_j^*\| > \epsilon$] from" "\n"
                        r"an initialisation at $(1/2 - \alpha)\Delta$",
    "ifca-thm2": r"$\mathrm{max}_j \|\theta_j^+ - \theta_j^*\|$ after one step" "\n" r"($\gamma = 1/L$)",
    "ifca-cor2": r"$\mathrm{max}_j \|\theta_j^{(T)} - \theta_j^*\|$ after $T$ rounds",
    "srfca-prop4.1": r"$\mathrm{KL}(p(x, y_i)\ \|\ p(x, y_j))$",
    "srfca-lemma4.6": r"P[$C_0 \neq C^*$] after ONE_SHOT",
    "srfca-remark4.7": r"smallest gap $\epsilon_2 - \epsilon_1$ with" "\n" r"observed P[$C_0 \neq C^*$] $\leq$ target",
    "srfca-thm4.8": r"P[$C_1 \neq C^*$] after ONE_SHOT" "\nand one REFINE",
    "srfca-thm4.11": r"P[$C_R \neq C^*$] after $R$ REFINE" "\nsteps, fresh samples each",
    "srfca-remark4.12": r"P[$C_R \neq C^*$] after $R$ REFINE" "\nsteps on the same data",
    "srfca-thm4.14": r"$\mathrm{max}_c \|\omega_c - \omega_c^*\|$" "\n(each true cluster's model)",
    "clove-lemma-a.1": r"$\mathrm{min}_{i \neq j} \|c_i - c_j\|$ (exact SLV" "\n" r"means, unit optima $\Delta$ apart)",
    "clove-lemma-a.2": r"$\mathrm{min}_{i \neq j} \|c_i - c_j\|$ (exact SLV" "\n" r"means, $\Delta$-proximal optima)",
    "clove-lemma-a.4": r"P[some client has $\|a_i - c_{s(i)}\|^2$" "\n" r"$> t \mathrm{max}_j \mathrm{Var}_j(a_i)$]",
    "clove-lemma-a.6": r"$\mathrm{max}_k \lambda_{\max}$(Cov of the SLV" "\nof a client of cluster k)",
    "clove-lemma-a.7": r"$\|A(\theta) - C(\theta)\|_{\mathrm{op}}$" "\n(exact means C)",
    "clove-thm-a.9": "P[the proximity condition\nfails for client 0]",
    "clove-thm4.1": "P[k-means on the SLVs misses\nthe true clustering]",
    "clove-lemma-a.13": r"P[$\|\theta_k - \theta_k^*\| > \Delta/c$]" "\nafter one gradient round",
    "clove-cor-a.14": r"$\|\theta_k - \theta_k^*\|$" "\nafter one gradient round",
    "clove-lemma-a.16": "P[the min-cost matching\nis not the identity]",
    "clove-lemma-a.17": r"$\min \|L_i - L_j\| \,/\, \min(\mathrm{gap}_i, \mathrm{gap}_j)$"
                        "\n(pairs with different best models)",
    "clove-thm4.2": r"$\mathrm{max}_k \|\theta_k^{(T)} - \theta_k^*\|$" "\nafter $T$ CLoVE rounds",
}
STATEMENTS = {
    "ifca-lemma1": "probability of a wrong cluster identity",
    "ifca-thm1": "one IFCA step contracts by 1/2 up to an error floor",
    "ifca-cor1": r"$T = 2 + \log(\Delta/4\epsilon)$ iterations reach the error floor $\epsilon$",
    "ifca-assumption1": r"does convergence break beyond the initial radius $(1/2 - \alpha)\Delta$?",
    "ifca-thm2": r"one step contracts by $1 - p\lambda/8L$ (strongly convex losses)",
    "ifca-cor2": r"$T = (8L/p\lambda)\,\log(2\Delta/\epsilon)$ iterations reach $\epsilon$ (strongly convex)",
    "srfca-prop4.1": "the KL divergence of two linear-Gaussian clients",
    "srfca-lemma4.6": "misclustering probability after ONE_SHOT",
    "srfca-remark4.7": r"a separation $\epsilon_2 - \epsilon_1$ of order $\log(m)/n$ suffices",
    "srfca-thm4.8": r"one REFINE step divides the error by about $m^{1 - \rho_2}$",
    "srfca-thm4.11": "R REFINE steps with resampling",
    "srfca-remark4.12": "resampling is not needed in practice",
    "srfca-thm4.14": "cluster-model error after R+1 REFINE steps",
    "clove-lemma-a.1": r"SLV means of different clusters are $\Delta/\sqrt{4 + \sigma^2}$ apart (orthonormal models)",
    "clove-lemma-a.2": r"SLV means are more than $\Delta/2$ apart for $\Delta$-proximal models",
    "clove-lemma-a.4": "SLVs concentrate around their cluster means",
    "clove-lemma-a.6": "directional variance of a centred SLV row",
    "clove-lemma-a.7": "operator norm of the centred SLV matrix",
    "clove-thm-a.9": "SLVs satisfy the Kumar-Kannan proximity condition",
    "clove-thm4.1": "one-shot k-means on SLVs recovers the clustering",
    "clove-lemma-a.13": r"one gradient round lands within $\Delta/c$ of $\theta_k^*$",
    "clove-cor-a.14": r"one gradient round shrinks $\|\theta - \theta_k^*\|$ by a constant factor",
    "clove-lemma-a.16": "the min-cost matching maps clusters to their own models",
    "clove-lemma-a.17": r"IFCA's loss gap $\delta$ puts loss vectors $\sqrt{2}\,\delta$ apart",
    "clove-thm4.2": r"after $T$ rounds $\|\theta_k - \theta_k^*\| \leq \Delta/c_1^T$",
}
# the swept parameters in the papers' symbols
PARAMS = {"n": "samples per client n", "sigma": r"noise $\sigma$", "alpha": r"closeness $\alpha$", "m": "clients m",
          "dist": r"$\|w_i - w_j\|$", "clients_per_cluster": "clients per cluster", "R": "REFINE steps R",
          "T": "rounds T", "d": "dimension d"}


def quantity_label(name: str, quantity: str) -> str:
    """The y label of result ``name``'s panel: its quantity in mathtext (:data:`QUANTITIES`), else its own text
    made readable."""
    return QUANTITIES.get(name) or textwrap.fill(plain_maths(quantity), 40)


def statement_label(name: str, title: str) -> str:
    """What result ``name`` states, in mathtext (:data:`STATEMENTS`), else its title's statement made readable."""
    return STATEMENTS.get(name) or plain_maths(title.split(":", 1)[1].strip() if ":" in title else title)

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
    from theory.results.base import json_float

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
        bound, exact, emp = json_float(c["bound"]), json_float(c["exact"]), json_float(c["empirical"])
        lo, hi = json_float(c["ci_low"]), json_float(c["ci_high"])
        value = exact if math.isfinite(exact) else emp
        table.append({"result": name, "param": param, "value": v, "kind": c["kind"], "direction": c["direction"],
                      "bound": bound, "exact": exact, "empirical": emp, "ci_low": lo, "ci_high": hi,
                      "verdict": c["verdict"], "comparison": c["comparison"], "fitted_name": c["fitted_name"],
                      "fitted_constant": json_float(c["fitted_constant"]), "trials": c["trials"],
                      "assumptions_failed": ";".join(_with_margin(k, (c.get("assumption_margins") or {}).get(k))
                                                     for k, okk in c["assumptions"].items() if not okk),
                      "cite": c["cite"], "quantity": c["quantity"]})
        rel = {"upper": "<=", "lower": ">=", "equal": "="}[c["direction"]]
        what = "exact" if math.isfinite(exact) else f"Monte Carlo ({c['trials']} trials)"
        rep = f"{what}: {value:.4g}" + (f" [{lo:.3g}, {hi:.3g}]" if math.isfinite(lo) and not math.isfinite(exact)
                                        else "")
        fitted = (f"; fitted {c['fitted_name']} = {json_float(c['fitted_constant']):.3g}" if c["fitted_name"] else "")
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


def _verdicts(rs: list[dict]) -> str:
    """A panel's verdicts in words.  An identity (direction "equal") that the exact value contradicts is not a bound
    that is "violated": its stated value is off, by the factor given (SR-FCA Prop. 4.1's is off by d)."""
    verdicts = sorted(set(r["verdict"] for r in rs))
    if rs[0]["direction"] == "equal" and "violated" in verdicts:
        value = [r["exact"] if math.isfinite(r["exact"]) else r["empirical"] for r in rs]
        ratio = [r["bound"] / v for r, v in zip(rs, value, strict=True) if math.isfinite(v) and v > 0]
        if ratio:
            lo, hi = min(ratio), max(ratio)
            factor = f"{lo:.3g}" if hi - lo <= 1e-6 * hi else f"{lo:.3g} to {hi:.3g}"
            verdicts = [v for v in verdicts if v != "violated"] + [f"identity fails: stated = {factor} × exact"]
    return ", ".join(verdicts)


# direction -> (colour, line style, marker) of the paper's reference: an upper bound (the value lies below: v), a
# lower bound (above: ^) and a stated value (an identity: a dotted grey line with diamonds)
_BOUND_STYLE = {"upper": ("black", "--", "v"), "lower": ("black", "-.", "^"), "equal": ("0.45", ":", "D")}


def _is_probability(label: str) -> bool:
    """Whether a quantity's label names a probability (``P[...]``, ``Pr(...)``, "probability")."""
    text = label.strip().lstrip("$").lstrip("\\")
    return text.startswith(("P[", "P(", "Pr[", "Pr(", "P_{", "mathbb{P}")) or "probabilit" in label.lower()


def _probability_view(ax, x, b) -> str:
    """A probability axis within [0, 1]: a bound above 1 says nothing; it is left out of view and the panel's title
    says so, with its values (returned: the title's extra line, or "")."""
    over = [bv for bv in b if math.isfinite(bv) and bv > 1]
    if ax.get_yscale() == "log":
        ax.set_ylim(min(ax.get_ylim()[0], 0.5), 1.0)
    else:
        ax.set_ylim(-0.02, 1.02)
    if not over:
        return ""
    shown = ", ".join(f"{v:.3g}" for v in over[:3]) + (", ..." if len(over) > 3 else "")
    return f"\nbound > 1 (vacuous) at {len(over)}/{len(b)} points: {shown}"


def _plot(folder, paper: str, table: list[dict], size: str = "quick"):
    results = list(dict.fromkeys(r["result"] for r in table))
    if not results:
        return [], []
    ncol = 3
    nrow = math.ceil(len(results) / ncol)
    fig, axes = new_figure(nrow, ncol, width=4.2, height=3.3)
    col = palette(3)
    for i, name in enumerate(results):
        ax = axes[i // ncol][i % ncol]
        rs = [r for r in table if r["result"] == name]
        x = [r["value"] for r in rs]
        b = [r["bound"] if math.isfinite(r["bound"]) else math.nan for r in rs]
        # the legend says on which side of the bound the value must lie (or that it is an identity); each kind of
        # reference has its own style (a stated value is not an upper bound)
        colour, dash, mk = _BOUND_STYLE[rs[0]["direction"]]
        ax.plot(x, b, color=colour, linestyle=dash, marker=mk, markersize=4.5, label=BOUND_LABELS[rs[0]["direction"]])
        ex = [r["exact"] for r in rs]
        if any(math.isfinite(v) for v in ex):
            ax.plot(x, ex, color=col[0], linestyle="-", marker="o", markersize=3.5, label="exact value")
        em = [r["empirical"] for r in rs]
        if any(math.isfinite(v) for v in em):
            lo = [max(0.0, r["empirical"] - r["ci_low"]) if math.isfinite(r["ci_low"]) else 0.0 for r in rs]
            hi = [max(0.0, r["ci_high"] - r["empirical"]) if math.isfinite(r["ci_high"]) else 0.0 for r in rs]
            ax.errorbar(x, em, yerr=[lo, hi], color=col[1], linestyle="none", marker="s", markersize=3.5,
                        capsize=2, label="Monte Carlo estimate (95% CI)")
        vals = [v for v in b + ex + em + [r["ci_low"] for r in rs] if math.isfinite(v) and v > 0]
        allpos = all(v > 0 for v in b + ex + em if math.isfinite(v))
        if vals and allpos and max(vals) / min(vals) > 30:
            ax.set_yscale("log")
            plain_log(ax.yaxis)
        else:
            _plain_linear(ax, [v for v in b + ex + em if math.isfinite(v)])
        ylabel = quantity_label(name, rs[0].get("quantity", ""))
        note = _probability_view(ax, x, b) if _is_probability(ylabel) else ""
        if min(x) > 0 and max(x) / min(x) >= 10:
            ax.set_xscale("log")
        value_ticks(ax.xaxis, x)  # the swept values themselves (a short log range labels its minor ticks)
        ax.set_xlabel(PARAMS.get(rs[0]["param"], rs[0]["param"]), fontsize=9)
        # the quantity the result bounds, and the result by the paper's own name (not the registry id)
        ax.set_ylabel(ylabel, fontsize=8.5)
        ax.set_title(f"{_lemma(rs[0].get('cite', name))}\n({_verdicts(rs)}){note}", fontsize=9)
        ax.tick_params(labelsize=8)
    for j in range(len(results), nrow * ncol):
        axes[j // ncol][j % ncol].set_visible(False)
    figure_legend(fig, [ax for row in axes for ax in row], ncol=3, fontsize=8.5)
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
