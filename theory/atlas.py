"""The tightness atlas: how loose is every bound of the three papers, and where does it break.

For every result of :data:`theory.results.REGISTRY` (IFCA, SR-FCA and CLoVE lemmas, theorems, propositions,
remarks) the atlas evaluates :meth:`theory.results.base.Result.check` on a documented two-parameter grid
(:data:`GRIDS`) and records, per cell, the paper's bound, the exact value where an exact law exists (else a
Monte Carlo estimate with its 95% interval), whether the statement's assumptions hold, whether the bound is
vacuous, and whether it is violated.

Tightness.  The *slack* of a cell is oriented so that ``slack >= 1`` means the bound holds:

* upper bounds (``quantity <= bound``) and identities: ``slack = bound / value``;
* lower bounds (``quantity >= bound``): ``slack = value / bound``.

``log10(slack)`` is what the heatmaps show: 0 is tight, 2 means a factor 100 to spare, negative means violated.
Where the Monte Carlo saw no event (value 0 under an upper bound) the slack is infinite; the atlas then shows
the conservative ``bound / ci_high`` (marked ``>=``).

Fitted constant.  ``c*`` is the factor by which the bound must be multiplied to hold on every cell whose
assumptions are met, tight at the worst cell: ``c* = max value/bound`` for upper bounds (the smallest ``c`` with
``c * bound >= value``), ``min value/bound`` for lower bounds (the largest ``c`` with ``c * bound <= value``).
``c* < 1`` (upper) means the bound could be tightened by that factor; ``c* > 1`` means it is violated.  With
Monte Carlo cells its interval is ``[max_i low_i/bound_i, max_i high_i/bound_i]`` (``min`` for lower bounds),
which covers whenever every cell's interval does (Bonferroni: probability ``>= 1 - 0.05 x cells``).  Beside it:
the worst value over the grid of the result's own named constant (``Check.fitted_constant``, e.g. ``c1`` of IFCA
Lemma 1), and the log-log slope of value on bound (1 = the bound has the right rate).

Usage::

    python -m theory atlas --out atlas_out            # default size (see ``MEASURED`` in the README)
    python -m theory atlas --out atlas_out --quick    # 2x2 grids, few trials: seconds
    python -m theory atlas --out atlas_out --only clove-lemma-a.1,ifca-lemma1

Outputs in ``--out``: ``atlas.md`` (one row per result), ``atlas.csv`` (one row per cell), ``atlas.json`` (the
summaries and the cells), ``atlas_<paper>.png/.pdf`` (one heatmap panel per result) and ``cells-<size>.jsonl``,
the per-cell cache that makes a rerun resume where an interruption left it.  Same seed, same numbers, for any
``--n-jobs``.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from synth.validation import check_choice, check_int, did_you_mean

__all__ = ["GRIDS", "SIZES", "AxisSpec", "GridSpec", "build_cells", "evaluate_cell", "json_safe", "result_of",
           "run_atlas", "summarise", "unjson", "write_atlas"]

SIZES = ("quick", "medium", "default")
PAPERS = {"ifca": "IFCA (journal)", "srfca": "SR-FCA", "clove": "CLoVE"}


@dataclass(frozen=True)
class AxisSpec:
    """One axis of a result's grid: the parameter and its values (the default size; smaller sizes subsample)."""

    param: str
    values: tuple


@dataclass(frozen=True)
class GridSpec:
    """A result's grid: two axes, the fixed parameters, Monte Carlo trials per cell at quick/medium/default."""

    x: AxisSpec
    y: AxisSpec
    fixed: dict[str, Any] = field(default_factory=dict)
    trials: tuple[int, int, int] = (0, 0, 0)
    why: str = ""


def _g(x, xs, y, ys, trials=(0, 0, 0), why="", **fixed) -> GridSpec:
    return GridSpec(AxisSpec(x, tuple(xs)), AxisSpec(y, tuple(ys)), dict(fixed), tuple(trials), why)


# The documented grids.  Results with an exact law get trials 0 (the exact value is used); the others get Monte
# Carlo trials.  Each grid crosses the parameter the statement is about with one that moves its assumptions.
GRIDS: dict[str, GridSpec] = {
    # ------------------------------------------------------------------ IFCA
    "ifca-lemma1": _g("n", (1, 2, 5, 10, 20, 50, 100, 200, 500), "alpha", (-0.1, 0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.45),
                      why="exact worst case over Assumption 1's placements (k = 2); alpha <= 0 is outside it",
                      delta=1.0, sigma=0.5, k=2),
    "ifca-thm1": _g("n", (25, 50, 100, 200), "sigma", (0.1, 0.3, 0.5, 1.0), trials=(5, 20, 60)),
    "ifca-cor1": _g("n", (50, 100, 200, 400), "m", (20, 40, 80), trials=(3, 10, 50)),
    "ifca-assumption1": _g("alpha", (-0.25, -0.1, 0.0, 0.1, 0.25), "n", (50, 100, 200), trials=(5, 20, 60)),
    "ifca-thm2": _g("n", (100, 400, 1600, 3200), "sep", (1.0, 2.0, 4.0), trials=(3, 10, 30), var_samples=20000,
                    why="Assumption 6 needs n' >~ k eta^2/(alpha^2 lambda^2 Delta^4): met only at large n"),
    "ifca-cor2": _g("n", (200, 800, 3200), "sep", (1.0, 2.0, 4.0), trials=(2, 5, 20), var_samples=20000),
    # ------------------------------------------------------------------ SR-FCA
    "srfca-prop4.1": _g("d", (1, 2, 5, 10, 20, 50), "cov_condition", (1.0, 2.0, 5.0, 10.0),
                        why="exact KL; an anisotropic covariance is outside the statement"),
    "srfca-lemma4.6": _g("n", (25, 50, 100, 400, 1600, 6400), "eps2", (0.5, 1.0, 2.0, 4.0), trials=(5, 20, 60),
                         why="the proviso n^(2/3) Delta^(4/3)/(D L_hat)^(2/3) >~ d is met only from n ~ 1600"),
    "srfca-remark4.7": _g("n", (50, 200, 800), "sigma", (0.5, 1.0, 2.0), trials=(3, 10, 30)),
    # REFINE needs Delta' = Delta - mu B/2 > 0 with B = sqrt(2 L_hat eps1/mu): eps1 near 0, a wide separation
    "srfca-thm4.8": _g("n", (100, 400, 1600, 6400), "eps1", (0.0, 0.01, 0.1), trials=(3, 10, 50), eps2=4.0,
                       why="B << 2 Delta'/mu holds only for eps1 ~ 0"),
    "srfca-thm4.11": _g("R", (1, 2, 3), "n", (200, 1600, 6400), trials=(3, 10, 50), eps1=0.0, eps2=4.0),
    "srfca-remark4.12": _g("R", (1, 2, 3), "n", (200, 1600, 6400), trials=(3, 10, 50), eps1=0.0, eps2=4.0),
    "srfca-thm4.14": _g("n", (200, 1600, 6400), "eps1", (0.0, 0.01, 0.1), trials=(3, 10, 50), eps2=4.0),
    # ------------------------------------------------------------------ CLoVE
    "clove-lemma-a.1": _g("n", (1, 2, 3, 5, 10, 30, 100), "sigma", (0.0, 0.01, 0.05, 0.1, 0.2, 0.5),
                          why="exact worst case over unit optima Delta apart; sigma > 0.1 breaks 'sigma << 1'"),
    "clove-lemma-a.2": _g("n", (1, 2, 5, 10, 50), "sigma", (0.01, 0.05, 0.1, 0.25, 0.5),
                          why="exact worst case over Delta-proximal placements"),
    "clove-lemma-a.4": _g("n", (10, 50, 200), "m", (10, 50, 200), trials=(20, 100, 300)),
    "clove-lemma-a.6": _g("n", (1, 5, 20, 100), "sigma", (0.01, 0.1, 0.5, 1.0), why="exact top eigenvalue"),
    "clove-lemma-a.7": _g("m", (10, 50, 200), "n", (10, 50, 200), trials=(10, 40, 100)),
    "clove-thm-a.9": _g("n", (10, 50, 200), "m", (20, 100, 400), trials=(10, 40, 100)),
    "clove-thm4.1": _g("n", (5, 20, 100), "sigma", (0.05, 0.1, 0.5), trials=(5, 20, 60)),
    "clove-lemma-a.13": _g("d", (2, 5, 10, 20), "sigma", (0.05, 0.1, 0.4), trials=(20, 100, 300)),
    "clove-cor-a.14": _g("d", (2, 5, 10, 20), "sigma", (0.05, 0.1, 0.4), trials=(20, 100, 300)),
    "clove-lemma-a.16": _g("n", (1, 2, 5, 10, 20), "m", (1, 2, 5, 10), why="exact matching error (K = 2)"),
    "clove-lemma-a.17": _g("n", (10, 50, 200), "sigma", (0.1, 0.5, 1.0), trials=(3, 10, 20)),
    "clove-thm4.2": _g("T", (1, 2, 3, 5, 8), "sigma", (0.05, 0.1, 0.3), trials=(3, 5, 20)),
    # ------------------------------------------------------------------ slices: where two statements fail
    # A "result@slice" key is a second grid of the same result (its panel and row are labelled with the slice)
    "clove-lemma-a.1@delta": _g("n", (1, 2, 3, 4, 5, 7, 10), "delta", (0.1, 0.25, 0.5, 1.0, 1.5), sigma=0.1, d=5,
                                why="the failure region in Delta at sigma = 0.1 (sigma << 1 met): at Delta <= 0.5 "
                                    "it reaches n = 3"),
    "clove-lemma-a.1@sigma": _g("n", (1, 2, 3, 4, 5, 6, 7, 10), "sigma", (0.01, 0.1, 0.5, 1.0, 2.0), delta=0.1, d=5,
                                much_less=100.0,
                                why="Delta = 0.1 across sigma (much_less = 100: sigma << 1 not enforced): the bound "
                                    "fails up to n = 6 at sigma = 2"),
    "ifca-lemma1@rho": _g("sigma", (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0), "alpha",
                          (-0.1, -0.05, -0.01, 0.01, 0.1, 0.25, 0.45), n=200, delta=1.0, k=2,
                          why="rho = Delta^2/sigma^2 from 1/16 to 400 at n = 200 (exact worst case, k = 2); alpha < 0 "
                              "is outside Assumption 1, where the exact value goes beyond the bound"),
    "ifca-lemma1@k3": _g("n", (1, 5, 20, 100), "alpha", (0.05, 0.1, 0.25, 0.45), k=3, d=3, delta=1.0, sigma=0.5,
                         why="k = 3 models at the symmetric placement only (exact there; a lower bound on the "
                             "worst case)"),
}


def result_of(key: str) -> str:
    """The result a :data:`GRIDS` key belongs to (``"clove-lemma-a.1@delta"`` -> ``"clove-lemma-a.1"``)."""
    return key.split("@", 1)[0]


def _subsample(values: tuple, size: str) -> tuple:
    """quick: the two ends; medium: every other value (ends kept); default: all."""
    if size == "default" or len(values) <= 2:
        return values
    if size == "quick":
        return (values[0], values[-1])
    picked = list(values[::2])
    if picked[-1] != values[-1]:
        picked.append(values[-1])
    return tuple(picked)


def build_cells(names: Sequence[str], size: str) -> list[dict[str, Any]]:
    """The cells to evaluate: ``{result, x, y, ix, iy, params, trials}`` in a fixed order."""
    cells = []
    for name in names:
        g = GRIDS[name]
        xs, ys = _subsample(g.x.values, size), _subsample(g.y.values, size)
        trials = g.trials[SIZES.index(size)]
        for iy, yv in enumerate(ys):
            for ix, xv in enumerate(xs):
                cells.append({"result": name, "x_param": g.x.param, "y_param": g.y.param, "x": xv, "y": yv,
                              "ix": ix, "iy": iy, "params": {**g.fixed, g.x.param: xv, g.y.param: yv},
                              "trials": trials})
    return cells


def _key(cell: dict, seed: int) -> str:
    return json.dumps([cell["result"], cell["params"], cell["trials"], seed], sort_keys=True)


def _ratio(a: float, b: float) -> float:
    """``a / b`` for nonnegative quantities, with ``x/0 = inf`` and NaN for anything undefined."""
    if not (math.isfinite(a) or math.isinf(a)) or not (math.isfinite(b) or math.isinf(b)):
        return math.nan
    if b == 0:
        return math.inf if a > 0 else math.nan
    if math.isinf(a) and math.isinf(b):
        return math.nan
    return a / b


def evaluate_cell(cell: dict, seed: int) -> dict[str, Any]:
    """One cell: :meth:`Result.check` (exact law if there is one, else Monte Carlo) reduced to the atlas record."""
    from theory.results import get_result
    from theory.results.base import json_float

    res = get_result(result_of(cell["result"]))
    out = {k: cell[k] for k in ("result", "x_param", "y_param", "x", "y", "ix", "iy")}
    start, cpu = time.perf_counter(), time.process_time()
    try:
        # numerical warnings of the laws' quadratures (overflowing tails, subdivision limits) are counted in the
        # record instead of flooding the log; the laws state their own accuracy
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            p, c = res.resolve(cell["params"], None)
            has_exact = res.exact(p) is not None
            chk = res.check(cell["params"], trials=0 if has_exact else cell["trials"], seed=seed)
    except (ValueError, ArithmeticError) as exc:  # a grid point outside the result's domain (e.g. d < K)
        return {**out, "status": "invalid", "reason": f"{type(exc).__name__}: {exc}"}
    bound = float(chk.bound)
    exact = json_float(chk.exact)
    emp, lo, hi = json_float(chk.empirical), json_float(chk.ci_low), json_float(chk.ci_high)
    source = "exact" if math.isfinite(exact) else ("monte carlo" if math.isfinite(emp) or math.isinf(emp) else "none")
    value = exact if source == "exact" else emp
    if source == "exact":
        lo = hi = exact
    failed = [k for k, ok in chk.assumptions.items() if not ok]
    vacuous = bool(res.is_vacuous(p, c, bound))
    if chk.direction == "lower":
        slack, s_lo, s_hi = _ratio(value, bound), _ratio(lo, bound), _ratio(hi, bound)
    else:  # upper bounds and identities: bound / value
        slack, s_lo, s_hi = _ratio(bound, value), _ratio(bound, hi), _ratio(bound, lo)
    lower_only = source == "monte carlo" and math.isinf(slack) and math.isfinite(s_lo)
    shown = s_lo if lower_only else slack
    return {**out, "status": "ok", "kind": chk.kind, "direction": chk.direction, "bound": bound, "exact": exact,
            "empirical": emp, "ci_low": json_float(chk.ci_low), "ci_high": json_float(chk.ci_high), "value": value,
            "value_low": lo, "value_high": hi, "source": source, "trials": chk.trials if source != "exact" else 0,
            "assumptions_met": not failed, "assumptions_failed": failed, "vacuous": vacuous,
            "comparison": chk.comparison, "verdict": chk.verdict,
            "violated": (not failed) and chk.comparison == "violated",
            "inconclusive": (not failed) and chk.comparison == "inconclusive",
            "slack": slack, "slack_low": s_lo, "slack_high": s_hi, "slack_shown": shown, "lower_only": lower_only,
            "fitted_name": chk.fitted_name, "fitted_constant": json_float(chk.fitted_constant),
            "fitted_rule": chk.fitted_rule, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu, "warnings": len(caught)}


def _eval_task(cell: dict, seed: int) -> dict[str, Any]:
    return evaluate_cell(cell, seed)


def _finite(vals) -> np.ndarray:
    a = np.asarray([v for v in vals], dtype=np.float64)
    return a[np.isfinite(a)]


def summarise(name: str, cells: list[dict]) -> dict[str, Any]:
    """Per-result summary: grid, slack min/median/max, fitted constants, fractions met/vacuous/violated."""
    from theory.results import get_result

    res = get_result(result_of(name))
    g = GRIDS[name]
    ok = [c for c in cells if c["status"] == "ok"]
    met = [c for c in ok if c["assumptions_met"]]
    xs = sorted({c["x"] for c in cells}, key=lambda v: (isinstance(v, str), v))
    ys = sorted({c["y"] for c in cells}, key=lambda v: (isinstance(v, str), v))
    # a Monte Carlo with no event under a bound below its resolution (bound / upper CI end < 1) says nothing
    # about the slack: such cells are counted as unresolved and left out of the slack statistics
    unresolved = [c for c in ok if c["lower_only"] and c["slack_shown"] < 1]
    shown = np.asarray([c["slack_shown"] for c in ok if c not in unresolved], dtype=np.float64)
    fin = shown[~np.isnan(shown)]
    sources = sorted({c["source"] for c in ok})
    out: dict[str, Any] = {
        "result": name, "title": res.title, "label": label(name), "cite": res.cite, "kind": res.kind,
        "direction": res.direction, "x_param": g.x.param, "x_values": xs, "y_param": g.y.param, "y_values": ys,
        "fixed": g.fixed, "cells": len(cells), "evaluated": len(ok), "invalid": len(cells) - len(ok),
        "seconds": float(sum(c.get("seconds", 0.0) for c in ok)),
        "cpu_seconds": float(sum(c.get("cpu_seconds", 0.0) for c in ok)),
        "source": "+".join(sources) if sources else "none",
        "trials": max([c["trials"] for c in ok] or [0]),
        "slack_min": float(fin.min()) if len(fin) else math.nan,
        "slack_median": float(np.median(fin)) if len(fin) else math.nan,
        "slack_max": float(fin.max()) if len(fin) else math.nan,
        "any_lower_only": any(c["lower_only"] for c in ok),
        "unresolved": len(unresolved),
        "frac_assumptions_met": len(met) / len(ok) if ok else math.nan,
        "frac_vacuous": sum(c["vacuous"] for c in ok) / len(ok) if ok else math.nan,
        "frac_violated": sum(c["violated"] for c in ok) / len(ok) if ok else math.nan,
        "violated_cells": [[c["x"], c["y"]] for c in ok if c["violated"]],
        "beyond_bound_outside_assumptions": sum((not c["assumptions_met"]) and c["comparison"] == "violated"
                                                for c in ok),
    }
    # c*: over the cells whose assumptions hold; where none do, over every cell (flagged)
    pool, pool_name = (met, "assumptions met") if met else (ok, "all cells (assumptions never met)")
    ratio = [(_ratio(c["value"], c["bound"]), _ratio(c["value_low"], c["bound"]), _ratio(c["value_high"], c["bound"]))
             for c in pool if c["bound"] > 0 and math.isfinite(c["bound"])]
    ratio = [r for r in ratio if not math.isnan(r[0])]
    pick = min if res.direction == "lower" else max
    if ratio:
        out["c_star"] = float(pick(r[0] for r in ratio))
        lows = [r[1] for r in ratio if not math.isnan(r[1])]
        highs = [r[2] for r in ratio if not math.isnan(r[2])]
        out["c_star_low"] = float(pick(lows)) if lows else math.nan
        out["c_star_high"] = float(pick(highs)) if highs else math.nan
    else:
        out["c_star"] = out["c_star_low"] = out["c_star_high"] = math.nan
    out["c_star_over"] = pool_name
    if res.direction == "equal" and ratio:
        out["c_star_range"] = [float(min(r[0] for r in ratio)), float(max(r[0] for r in ratio))]
    # the result's own named constant: its worst value over the pool
    fits = [c for c in pool if c.get("fitted_name") and not math.isnan(c["fitted_constant"])]
    if fits:
        rule = fits[0]["fitted_rule"] or ""
        vals = [c["fitted_constant"] for c in fits]
        worst = max(vals) if ">=" in rule else min(vals) if "<=" in rule else None
        out["named_constant"] = fits[0]["fitted_name"]
        out["named_constant_worst"] = float(worst) if worst is not None else math.nan
        out["named_constant_range"] = [float(min(vals)), float(max(vals))]
        out["named_constant_rule"] = rule
    # log-log slope of value on bound (rate check), on the same cells as c*: both finite and positive, bound varying
    pts = [(c["bound"], c["value"]) for c in pool
           if c["bound"] > 0 and math.isfinite(c["bound"]) and c["value"] > 0 and math.isfinite(c["value"])]
    if len({round(math.log(b), 9) for b, _ in pts}) >= 3:
        lb, lv = np.log10([b for b, _ in pts]), np.log10([v for _, v in pts])
        slope, icpt = np.polyfit(lb, lv, 1)
        out["loglog_slope"], out["loglog_intercept"], out["loglog_points"] = float(slope), float(icpt), len(pts)
    else:
        out["loglog_slope"] = out["loglog_intercept"] = math.nan
        out["loglog_points"] = len(pts)
    return out


def label(name: str) -> str:
    """A readable name: the statement's name without the paper prefix (``Lemma A.1``, ``Theorem 4.8``)."""
    from theory.results import get_result

    head = get_result(result_of(name)).title.split(":", 1)[0]
    for prefix in ("IFCA ", "SR-FCA ", "CLoVE "):
        if head.startswith(prefix):
            head = head[len(prefix):]
            break
    if "@" in name:  # a slice: the fixed parameters that set it apart
        fixed = GRIDS[name].fixed
        head += " (" + ", ".join(f"{k} = {v}" for k, v in fixed.items() if k != "much_less") + ")"
    return head


def _load_cache(path: Path) -> dict[str, dict]:
    """The cached cells of ``path``; a last line cut off by an interruption or a full disk is cut from the file
    (that cell is recomputed), so that the next append starts on a line of its own instead of being glued to it."""
    from synth.store import regular_file

    done: dict[str, dict] = {}
    if not regular_file(path, "atlas cell cache"):
        return done
    data = path.read_bytes()
    good = data.rfind(b"\n") + 1
    if good < len(data):
        with open(path, "r+b") as fh:
            fh.truncate(good)
            fh.flush()
            os.fsync(fh.fileno())
        data = data[:good]
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a damaged line: that cell is recomputed
            continue
        if isinstance(rec, dict) and "key" in rec and "cell" in rec:
            done[rec["key"]] = rec["cell"]
    return done


def _append_line(fd: int, line: bytes, path: Path) -> None:
    """Append one cache line, all or nothing: after a failed write (a full disk) the file is cut back to where the
    line began, and the error names the cache file."""
    start = os.lseek(fd, 0, os.SEEK_END)
    view = memoryview(line)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        try:
            os.ftruncate(fd, start)
        except OSError:  # pragma: no cover - then the next run cuts the torn line (_load_cache)
            pass
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None


def json_safe(obj):
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def unjson(obj):
    if isinstance(obj, dict):
        return {k: unjson(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [unjson(v) for v in obj]
    if obj in ("nan", "inf", "-inf"):
        return float(obj)
    return obj


def run_atlas(out: str | Path, size: str = "default", only: Sequence[str] | None = None, seed: int = 0,
              n_jobs: int = 1, plot=None, log=None) -> dict[str, Any]:
    """Evaluate (or resume) every cell, write ``atlas.md``, ``atlas.csv``, ``atlas.json`` (and the figures).

    ``plot(out, summaries, cells) -> file names`` draws the figures (:func:`figures.targets.atlas.plot_atlas`; passed in
    so that :mod:`theory` does not import :mod:`figures`); ``log(message)`` reports progress.

    Returns ``{"summaries": [...], "cells": [...], "seconds": s, "files": [...]}``.
    """
    from theory.results import REGISTRY, get_result

    if not isinstance(out, (str, os.PathLike)) or not os.fspath(out).strip():
        raise ValueError(f"out must name a folder, got {out!r} (use '.' for the current one)")
    size = check_choice("size", size, SIZES)
    seed = check_int("seed", seed, low=0)
    n_jobs = check_int("n_jobs", n_jobs, low=1)
    get_result("ifca-lemma1")  # registers every result
    missing = [n for n in REGISTRY if n not in GRIDS]
    if missing:  # every registered result must have a documented grid
        raise ValueError(f"no atlas grid for {missing}; add them to theory.atlas.GRIDS")
    names = list(GRIDS)
    if only:
        for n in only:
            if n not in GRIDS:
                raise ValueError(f"only: unknown result {n!r}{did_you_mean(str(n), GRIDS)}; "
                                 "see `python -m theory list` (a result's slices are result@slice)")
        # a result's name selects its slices too
        names = [n for n in names if n in set(only) or result_of(n) in set(only)]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    cells = build_cells(names, size)
    cache_path = out / f"cells-{size}.jsonl"
    done = _load_cache(cache_path)
    todo = [c for c in cells if _key(c, seed) not in done]
    if log:
        log(f"atlas ({size}): {len(cells)} cells of {len(names)} results, {len(cells) - len(todo)} cached")
    if todo:
        fd = os.open(cache_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        with os.fdopen(fd, "ab", buffering=0) as fh:
            if n_jobs == 1:
                stream = (evaluate_cell(c, seed) for c in todo)
            else:
                from joblib import Parallel, delayed

                stream = Parallel(n_jobs=n_jobs, return_as="generator")(delayed(_eval_task)(c, seed) for c in todo)
            for i, (cell, rec) in enumerate(zip(todo, stream, strict=True)):
                done[_key(cell, seed)] = json_safe(rec)
                _append_line(fh.fileno(), (json.dumps({"key": _key(cell, seed), "cell": json_safe(rec)}) + "\n")
                             .encode("utf-8"), cache_path)
                if log and (i + 1) % 25 == 0:
                    log(f"  {i + 1}/{len(todo)} cells ({time.perf_counter() - start:.0f} s)")
    records = [unjson(done[_key(c, seed)]) for c in cells]
    return write_atlas(out, size, seed, names, records, time.perf_counter() - start, plot)


def write_atlas(out: Path, size: str, seed: int, names: Sequence[str], records: list[dict], seconds: float,
                plot=None) -> dict[str, Any]:
    """Summarise evaluated cells per result and write ``atlas.md/csv/json`` (and the figures) into ``out``."""
    summaries = [summarise(n, [r for r in records if r["result"] == n]) for n in names]
    files = write_outputs(out, size, seed, summaries, records, seconds)
    if plot is not None:
        files += list(plot(out, summaries, records))
    return {"summaries": summaries, "cells": records, "seconds": seconds, "files": files}


# ------------------------------------------------------------------------------------------------ outputs
def _fmt(v: float, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if v != 0 and (abs(v) >= 1e4 or abs(v) < 1e-3):
        return f"{v:.{max(1, digits - 1)}e}"
    return f"{v:.{digits}g}"


def _grid_text(s: dict) -> str:
    def vals(v):
        return ", ".join(_fmt(x) if isinstance(x, float) else str(x) for x in v)

    fixed = "; ".join(f"{k}={v}" for k, v in s["fixed"].items())
    return f"{s['x_param']} ∈ {{{vals(s['x_values'])}}} × {s['y_param']} ∈ {{{vals(s['y_values'])}}}" + \
        (f"; {fixed}" if fixed else "")


def atlas_markdown(summaries: list[dict], size: str, seed: int, seconds: float) -> str:
    """The atlas table: one row per result."""
    lines = [f"# Tightness atlas ({size} size, seed {seed})", "",
             "Slack = bound ÷ value for upper bounds and identities, value ÷ bound for lower bounds (≥ 1: the bound "
             "holds; log10 of it is the heatmap colour). Value = the exact law where one exists, else the Monte "
             "Carlo estimate (trials per cell in the *value* column). c* = the factor the bound must be multiplied "
             "by to hold, tight, on every cell with the assumptions met (upper: max value/bound; lower: min "
             "value/bound), with its interval from the per-cell 95% intervals where Monte Carlo is involved. Named "
             "constant = the worst value over those cells of the statement's own constant at which bound = value. "
             "Slope = log-log slope of value on bound (1: the bound has the right rate). ≥ marks a slack from a "
             "Monte Carlo that saw no event (bound ÷ upper end of the interval). Fractions are over the evaluated "
             "cells; *violated* counts cells with every assumption met and the exact value (or the whole interval) "
             "beyond the bound.", "",
             f"Computed by `python -m theory atlas --size {size} --seed {seed}`: "
             f"{sum(s.get('cpu_seconds', 0.0) for s in summaries):.0f} s of CPU over all cells (this invocation, "
             f"cached cells read back: {seconds:.0f} s wall).", "",
             "| paper | result | grid | value | slack min / median / max | c* | named constant | slope "
             "| assumptions met | vacuous | violated |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        paper = PAPERS[s["result"].split("-")[0]]
        ge = "≥" if s["any_lower_only"] else ""
        slack = f"{_fmt(s['slack_min'])} / {_fmt(s['slack_median'])} / {_fmt(s['slack_max'])}" + \
            (" (≥ where no event)" if ge else "") + \
            (f"; {s['unresolved']} cells unresolved (no event, bound below the Monte Carlo's resolution)"
             if s.get("unresolved") else "")
        cs = _fmt(s["c_star"])
        if s["source"] != "exact" and not math.isnan(s.get("c_star_low", math.nan)):
            cs += f" [{_fmt(s['c_star_low'])}, {_fmt(s['c_star_high'])}]"
        if "c_star_range" in s:
            cs = f"{_fmt(s['c_star_range'][0])} … {_fmt(s['c_star_range'][1])}"
        if s["c_star_over"] != "assumptions met":
            cs += " †"
        named = "—"
        if s.get("named_constant") and _named_side(s) == "=":  # an identity: the range over the grid
            lo, hi = s["named_constant_range"]
            named = f"{s['named_constant']} = {_fmt(lo)} … {_fmt(hi)}"
        elif s.get("named_constant"):
            named = f"{s['named_constant']} {_named_side(s)} {_fmt(s['named_constant_worst'])}"
        value = s["source"] + (f" ({s['trials']} trials)" if "monte carlo" in s["source"] else "")
        viol = f"{s['frac_violated']:.0%}"
        if s["violated_cells"]:
            cells = ", ".join(f"({a}, {b})" for a, b in s["violated_cells"][:4])
            viol += f": {s['x_param']}, {s['y_param']} = {cells}" + (" …" if len(s["violated_cells"]) > 4 else "")
        slope = "—" if math.isnan(s["loglog_slope"]) else f"{s['loglog_slope']:.2f}"
        lines.append(f"| {paper} | {s['label']} (`{s['result']}`) | {_grid_text(s)} | {value} | {slack} | {cs} | "
                     f"{named} | {slope} | {s['frac_assumptions_met']:.0%} | "
                     f"{s['frac_vacuous']:.0%} | {viol} |")
    lines += ["", "† no cell of the grid meets every assumption: c* is taken over all cells."]
    return "\n".join(lines) + "\n"


def _named_side(s: dict) -> str:
    rule = s.get("named_constant_rule") or ""
    return "≥" if ">=" in rule else "≤" if "<=" in rule else "="


CSV_COLUMNS = ["result", "x_param", "x", "y_param", "y", "status", "kind", "direction", "bound", "exact",
               "empirical", "ci_low", "ci_high", "source", "trials", "slack", "slack_low", "slack_high",
               "lower_only", "assumptions_met", "assumptions_failed", "vacuous", "violated", "inconclusive",
               "comparison", "verdict", "fitted_name", "fitted_constant", "cpu_seconds", "warnings", "reason"]


def write_outputs(out: Path, size: str, seed: int, summaries: list[dict], records: list[dict],
                  seconds: float) -> list[str]:
    """``atlas.md``, ``atlas.csv`` and ``atlas.json`` in ``out``; returns their names."""
    import csv
    import io

    from synth.store import write_json_atomic, write_text_atomic

    write_text_atomic(out / "atlas.md", atlas_markdown(summaries, size, seed, seconds))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in records:
        row = {k: r.get(k) for k in CSV_COLUMNS}
        row["assumptions_failed"] = "; ".join(r.get("assumptions_failed") or [])
        w.writerow({k: ("" if v is None else v) for k, v in row.items()})
    write_text_atomic(out / "atlas.csv", buf.getvalue())
    write_json_atomic(out / "atlas.json", json_safe({"size": size, "seed": seed, "seconds": seconds,
                                                      "grids": {n: {"x": GRIDS[n].x.param, "y": GRIDS[n].y.param,
                                                                    "fixed": GRIDS[n].fixed, "why": GRIDS[n].why}
                                                                for n in GRIDS},
                                                      "summaries": summaries, "cells": records}))
    return ["atlas.md", "atlas.csv", "atlas.json"]
