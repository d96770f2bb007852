"""Reports of a sweep's result store: ``python -m synth report DIR``.

Writes into ``DIR/report/`` (or ``--out``):

* ``trials.csv``  -- tidy, one row per finished trial (parameters, status, metrics, success);
* ``summary.csv`` -- one row per point: success probability with a Wilson score interval, and for each
  metric its mean with a Student-t confidence interval;
* figures (PNG): success-probability (or metric) curves with CI bands, 2-D phase diagrams (heatmaps)
  with the spec's theory boundaries overlaid, per-round histories when the trials recorded them;
* ``report.md`` -- the spec in brief, the summary table and the figures.

The spec is read from the store (its canonical form in ``meta.json``, :mod:`synth.spec`), never parsed again.
A paper target's store (``paper_repro.py``; meta kind ``"paper-repro"``), a target's folder or a whole
``paper_repro.py`` output is re-plotted with the target's own view instead: its figures, CSVs and report section
are rebuilt from the stored trials, and a missing trial is an error, never computed (:func:`figures.runs.replot`).

Counting rule: a trial recorded as failed (diverged, non-finite result) counts as *not successful*
in the success probability and is left out of the metric means; both counts are in the table.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .intervals import mean_interval
from .intervals import wilson as wilson_interval
from .store import META_FILE, StoreError, check_meta, read_meta, read_records, save_figure_atomic, write_text_atomic
from .validation import check_real

if TYPE_CHECKING:
    from .spec import ExperimentSpec

__all__ = ["boundary_curve", "build_report", "load_sweep", "mean_interval", "summarise", "tidy_rows", "wilson_interval"]

# nicer axis labels for the parameters papers name with symbols
LABELS = {"R": "separation scale R", "sigma": "noise σ", "n": "samples per client n", "d": "dimension d",
          "K": "clusters K", "clients_per_cluster": "clients per cluster m/K", "alpha": "closeness α",
          "step_size": "step size γ", "participation": "participation", "rounds": "rounds T",
          "delta": "separation Δ", "eps1": "ε₁", "eps2": "ε₂", "n_init": "initialisations",
          "threshold": "threshold λ", "beta": "trimming β", "min_size": "size parameter t"}
MAX_TABLE_ROWS = 80
MAX_HISTORY_LINES = 8
# no band is drawn from fewer trials than this (figures.plots.style.MIN_BAND): a t-interval from 2 values fills the axis
MIN_BAND = 3


def _shade(ax, x, lo, hi, n, colour) -> None:
    """An interval as an error bar at each point where at least :data:`MIN_BAND` values stand behind it, marked
    with that count: bars, not translucent bands, which stack into colours of no series (figures.plots.figcheck)."""
    x, lo, hi = (np.asarray(v, dtype=np.float64) for v in (x, lo, hi))
    counts = np.broadcast_to(np.asarray(n, dtype=np.int64), x.shape)
    ok = np.isfinite(lo) & np.isfinite(hi) & (counts >= MIN_BAND)
    if ok.any():
        bars = ax.vlines(x[ok], lo[ok], hi[ok], colors=[colour], linewidth=1.0)
        bars.set_gid(f"band n={int(counts[ok].min())}")


DODGE = 0.008  # the sideways offset between series, as a fraction of the x range: equal values stay visible


def _dodge(x: np.ndarray, index: int, count: int, span: tuple[float, float], log: bool) -> np.ndarray:
    """``x`` shifted sideways for series ``index`` of ``count`` (by :data:`DODGE` of the axis' range ``span``, in
    log space on a log axis), so that series with equal values (all at success 1.0, say) are drawn side by side
    instead of hidden under the last one drawn."""
    k = (index - (count - 1) / 2) * DODGE
    lo, hi = span
    if log and lo > 0:
        return x * 10 ** (k * np.log10(hi / lo))
    return x + k * (hi - lo)


# -- loading ---------------------------------------------------------------------------------------------------

def _stored_spec(directory: str | Path, meta: dict[str, Any], records: list[dict]) -> ExperimentSpec:
    """The experiment spec a store's trials were run with, rebuilt from ``meta.json`` (never parsed twice).

    A store holds its spec in canonical form (:meth:`synth.spec.ExperimentSpec.to_dict`).  A store whose meta holds
    the TOML layout instead is read with :func:`synth.sweep.parse_spec`, at the store's own points; a store written
    by :func:`synth.montecarlo.run_trials` without a spec gets the default outputs over every numeric result field.
    """
    from .spec import FORMAT, ExperimentSpec

    stored = meta.get("spec") or {}
    try:
        if isinstance(stored, dict) and stored.get("format") == FORMAT:
            return ExperimentSpec.from_dict(stored)
        points, trials, seed = meta["points"], int(meta["trials"]), meta.get("root_seed", 0)
        seed = seed if isinstance(seed, int) else 0  # a SeedSequence root is stored as its repr
        name = meta.get("name", Path(directory).name)
        varying = meta.get("varying")
        if stored and meta.get("kind") == "synth-sweep":
            from .sweep import parse_spec

            layout = parse_spec(stored, name=name)
            return ExperimentSpec(name=name, trials=trials, seed=seed, points=points,
                                  varying=layout.varying if varying is None else varying, success=layout.success,
                                  outputs=layout.outputs, description=layout.description, source=stored,
                                  kind="synth-sweep", trial=layout.trial)
        # a store written by run_trials directly (no spec): summarise every numeric result field
        metrics = dict.fromkeys(k for r in records for k, v in (r.get("result") or {}).items()
                                if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "seconds")
        return ExperimentSpec.from_points(name, points, trials, seed, trial=str(meta.get("trial_fn") or "unknown"),
                                          varying=varying, metrics=list(metrics))
    except (ValueError, TypeError, KeyError) as exc:
        raise StoreError(f"{Path(directory) / META_FILE}: the stored spec is not usable ({exc}); restore meta.json "
                         "or rerun the sweep into a new directory") from None


def load_sweep(directory: str | Path) -> dict[str, Any]:
    """Read a result store: meta, its experiment spec, and the records the spec asks for."""
    if not str(directory).strip():
        raise ValueError("the sweep directory must be named, got an empty string")
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"{str(directory)!r} is a file, not a sweep directory (give the folder passed to --out)")
    if not directory.is_dir():
        raise ValueError(f"sweep directory {str(directory)!r} does not exist")
    meta = read_meta(directory)
    if meta is None:
        raise ValueError(f"{str(directory)!r} has no meta.json: not a sweep output directory")
    check_meta(meta, str(directory / META_FILE), require=("fingerprint", "points", "trials"))
    records = read_records(directory)
    points = meta["points"]
    trials = int(meta["trials"])
    # a store may hold more than the latest spec asks for (trials lowered before --resume): report what it asks
    records = [r for r in records if r["point"] < len(points) and r["trial"] < trials]
    dedup: dict[tuple[int, int], dict] = {}
    for r in records:
        dedup.setdefault((r["point"], r["trial"]), r)
    records = sorted(dedup.values(), key=lambda r: (r["point"], r["trial"]))
    spec = _stored_spec(directory, meta, records)
    return {"dir": directory, "meta": meta, "name": meta.get("name", directory.name), "spec": spec.source,
            "experiment": spec, "points": points, "trials": trials, "varying": spec.varying,
            "success": spec.success, "outputs": spec.outputs, "records": records}


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def tidy_rows(sweep: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """One flat row per trial: point, trial, seed, status, reason, parameters, scalar results, success."""
    from .sweep import success_of

    rows, param_cols, result_cols = [], {}, {}
    for r in sweep["records"]:
        params = r["params"]
        row = {"point": r["point"], "trial": r["trial"], "seed": r["seed"], "status": r["status"],
               "reason": r["reason"]}
        for k, v in params.items():
            row[k] = v if _scalar(v) else ",".join(map(str, v)) if isinstance(v, list) else str(v)
            param_cols[k] = True
        for k, v in (r.get("result") or {}).items():
            if not _scalar(v):
                continue  # per-round histories go to the history figure, not the table
            col = f"result.{k}" if k in params else k
            row[col] = v
            result_cols[col] = True
        row["trial_success"] = success_of(r.get("result"), params, sweep["success"], r["status"])
        row["wall_seconds"] = r.get("seconds")
        row["cpu_seconds"] = r.get("cpu_seconds")
        rows.append(row)
    cols = ["point", "trial", "seed", "status", "reason", *param_cols, *result_cols, "trial_success",
            "wall_seconds", "cpu_seconds"]
    return cols, rows


def summarise(sweep: dict[str, Any], confidence: float = 0.95) -> tuple[list[str], list[dict[str, Any]]]:
    """One row per point: the varying parameters, counts, success probability + Wilson CI, metric means + CIs."""
    from .sweep import success_of

    by_point: dict[int, list[dict]] = {i: [] for i in range(len(sweep["points"]))}
    for r in sweep["records"]:
        by_point[r["point"]].append(r)
    metrics = sweep["outputs"]["metrics"]
    rows = []
    for i, point in enumerate(sweep["points"]):
        recs = by_point[i]
        judged = [success_of(r.get("result"), r["params"], sweep["success"], r["status"]) for r in recs]
        judged = [j for j in judged if j is not None]
        s, n = sum(judged), len(judged)
        lo, hi = wilson_interval(s, n, confidence)
        row: dict[str, Any] = {"point": i, **{k: _cell(point.get(k)) for k in sweep["varying"]},
                               "trials": len(recs), "ok": sum(r["status"] == "ok" for r in recs),
                               "failed": sum(r["status"] != "ok" for r in recs), "judged": n, "successes": s,
                               "success": s / n if n else math.nan, "success_lo": float(lo),
                               "success_hi": float(hi)}
        for m in metrics:
            vals = [(r.get("result") or {}).get(m) for r in recs if r["status"] == "ok"]
            mean, mlo, mhi, used = mean_interval(vals, confidence)
            row.update({f"{m}_mean": mean, f"{m}_lo": mlo, f"{m}_hi": mhi, f"{m}_n": used})
        rows.append(row)
    cols = list(rows[0]) if rows else []
    return cols, rows


def _cell(v: Any) -> Any:
    return ",".join(map(str, v)) if isinstance(v, list) else v


def _write_csv(path: Path, cols: list[str], rows: list[dict[str, Any]]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else _fmt_csv(row.get(k))) for k in cols})
    write_text_atomic(path, buf.getvalue())


def _fmt_csv(v: Any) -> Any:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    return v


# -- figures ---------------------------------------------------------------------------------------------------

def _label(key: str) -> str:
    return LABELS.get(key, key)


# short symbols of the parameters, for legends and facet titles ("σ = 0.1", "m/K = 25")
SYMBOLS = {"sigma": "σ", "clients_per_cluster": "m/K", "delta": "Δ", "alpha": "α", "step_size": "γ",
           "threshold": "λ", "beta": "β", "eps1": "ε₁", "eps2": "ε₂", "n_init": "initialisations",
           "min_size": "t", "rounds": "T"}
# the data a sweep's generator draws, for a figure's face (synth.experiment: family, theta)
FAMILIES = {"linear": "synthetic mixed linear regression", "logistic": "synthetic mixed logistic regression"}
THETAS = {"bernoulli": "θ* ~ Bernoulli(0.5)$^d$ rescaled to norm R (the paper's text)",
          "bernoulli-code": "θ* = R·Bernoulli(0.5)$^d$ (the public code's)",
          "sphere": "θ* on the unit sphere, pairwise Δ to 5Δ apart", "client-optima": "clients' own optima"}


def _symbol(key: str) -> str:
    return SYMBOLS.get(key, key)


def _group_label(key: tuple, names: list[str]) -> str:
    parts = []
    for name, value in zip(names, key, strict=True):
        parts.append(str(value) if name == "algorithm" else f"{_symbol(name)} = {_md_value(value)}")
    return ", ".join(parts) or "all points"


def _setting(sweep: dict[str, Any]) -> str:
    """The generator's fixed sizes in the papers' symbols (k, m, n, d, σ), those not varied by the sweep."""
    p = sweep["points"][0] if sweep["points"] else {}
    vary = set(sweep["varying"])
    parts = []
    if "K" in p and "K" not in vary:
        parts.append(f"k = {p['K']}")
    if "clients_per_cluster" in p and "clients_per_cluster" not in vary and "K" not in vary and \
            isinstance(p["clients_per_cluster"], int) and isinstance(p.get("K"), int):
        parts.append(f"m = {p['K'] * p['clients_per_cluster']} clients")
    for key, text in (("n", "n = {} samples each"), ("d", "d = {}"), ("sigma", "σ = {}"), ("R", "R = {}")):
        if key in p and key not in vary and p[key] is not None and not isinstance(p[key], list):
            parts.append(text.format(_md_value(p[key])))
    # no line break inside "d = 1000" when the face is wrapped
    return ", ".join(part.replace(" = ", "\u00a0=\u00a0") for part in parts)


def _at_paper_scale(sweep: dict[str, Any]) -> bool:
    """Whether the store ran a paper's full grid: the spec file ``synth/specs/<name>.toml`` is a ``_full`` one
    (the papers' sizes, :mod:`figures.targets.ifca_synthetic`) and its settings, grid and trials are the store's."""
    import tomllib

    path = Path(__file__).resolve().parent / "specs" / f"{sweep['name']}.toml"
    if "_full" not in sweep["name"] or not path.is_file():
        return False
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    src = sweep["spec"] or {}
    return all(raw.get(k) == src.get(k) for k in ("fixed", "grid", "algorithms", "trials"))


def _face(sweep: dict[str, Any], title: str | None, what: str, per: str) -> tuple[str, str]:
    """A figure's face (:func:`figures.plots.style.face`) and its small print.

    The face: the paper's figure (the title's part before its first comma) with the generator's sizes and what is
    drawn; the data (family, θ*); the scale ("paper scale" where the store ran the paper's full grid) and the
    protocol; the trials per point.  The small print: the spec's name and the rest of the title (the public code's
    name of the grid), which a reader may want but need not see first.
    """
    from figures.plots.style import face

    head, _, detail = (title or "").partition(", ")
    head = head.strip() or sweep["name"]
    setting = _setting(sweep)
    p = sweep["points"][0] if sweep["points"] else {}
    data = FAMILIES.get(p.get("family"), "synthetic data")
    if p.get("theta") in THETAS and "theta" not in sweep["varying"]:
        data += f", {THETAS[p['theta']]}"
    size = ["paper scale" if _at_paper_scale(sweep) else "reduced or custom grid"]
    if isinstance(p.get("rounds"), int):
        size.append(f"{p['rounds']} iterations")
    blocks = (sweep["spec"] or {}).get("algorithms") or []
    if len(blocks) == 1 and blocks[0].get("n_init"):
        steps = blocks[0].get("step_size")
        restarts = f"{blocks[0]['n_init']} initialisations" + (f" x {len(steps)} step sizes"
                                                               if isinstance(steps, list) else "")
        size.append(f"best of {restarts}")
    small = f"sweep spec: {sweep['name']}" + (f" ({_plain(detail)})" if detail else "")
    return face(f"{head}: {what}" + (f"; {setting}" if setting else ""), data, ", ".join(size),
                f"{sweep['trials']} trials per {per}"), small


def _plain(text: str) -> str:
    from figures.plots.style import plain_maths

    return plain_maths(text.replace("theta*", "θ*"))


def _auto_log(values: list[float], flag: bool | None) -> bool:
    if flag is not None:
        return flag
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    return bool(v.size and np.all(v > 0) and v.max() / v.min() >= 10)


def _y_of(row: dict, y: str) -> tuple[float, float, float]:
    if y == "success":
        return row["success"], row["success_lo"], row["success_hi"]
    return row[f"{y}_mean"], _band(row[f"{y}_lo"]), _band(row[f"{y}_hi"])


def _band(v: float) -> float:
    """An interval end as drawn: an infinite end (fewer than two values) draws no band."""
    return v if math.isfinite(v) else math.nan


def _ylabel(y: str, confidence: float) -> str:
    pct = f"{100 * confidence:g}%"
    if y == "success":
        return f"success probability ({pct} Wilson CI)"
    return f"mean {y} ({pct} t-CI)"


def _curve_figure(sweep, summary, curve, path: Path, confidence: float) -> str:

    from figures.plots.style import new_figure, small_print, suptitle
    from figures.plots.style import palette as project_palette

    x, y = curve["x"], curve["y"]
    if y != "success" and y not in sweep["outputs"]["metrics"]:
        raise ValueError(f"curve y {y!r} must be 'success' or one of outputs.metrics: "
                         f"{', '.join(sweep['outputs']['metrics'])}")
    others = [k for k in sweep["varying"] if k != x]
    groups: dict[tuple, list[dict]] = {}
    for row in summary:
        groups.setdefault(tuple(row[k] for k in others), []).append(row)
    palette = project_palette(max(len(groups), 1))
    markers = "osD^vP*X<>"
    logx = _auto_log([r[x] for r in summary], curve.get("logx"))
    values = [float(r[x]) for r in summary]
    span = (min(values), max(values)) if values else (0.0, 1.0)
    fig, axes = new_figure(1, 1, width=7.0, height=4.6)
    ax = axes[0][0]
    for gi, (key, rows) in enumerate(groups.items()):
        rows = sorted(rows, key=lambda r: r[x])
        xs = np.array([r[x] for r in rows], dtype=np.float64)
        ys, lo, hi = (np.array(v, dtype=np.float64) for v in zip(*(_y_of(r, y) for r in rows), strict=True))
        if not np.isfinite(ys).any():
            continue  # e.g. the metric mean of a setting whose trials all failed: nothing to draw
        colour = palette[gi % len(palette)]
        xs = _dodge(xs, gi, len(groups), span, logx)
        ax.plot(xs, ys, marker=markers[gi % len(markers)], color=colour, label=_group_label(key, others))
        _shade(ax, xs, lo, hi, [r["judged"] if y == "success" else r[f"{y}_n"] for r in rows], colour)
    if logx:
        ax.set_xscale("log")
    _value_ticks(ax.xaxis, sorted({r[x] for r in summary}))
    if y == "success":
        ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_ylabel(y, confidence))
    if len(groups) > 1 or others:
        ax.legend(fontsize=8, ncol=2 if len(groups) > 6 else 1)
    what = "success probability" if y == "success" else f"mean {y}"
    text, small = _face(sweep, curve.get("title"), what, "point")
    suptitle(fig, text, fontsize=9.5)
    if len(groups) > 1:  # say that the sideways offsets are drawing, not data
        small = f"{small}; series offset sideways by {DODGE:.1%} of the axis so that equal values stay visible"
    small_print(fig, small)
    save_figure_atomic(fig, path, dpi=120)
    return path.name


def _value_ticks(axis, values) -> None:
    """Ticks at the grid values themselves (a sweep has few), plain numbers, no minor ticks."""
    from matplotlib.ticker import FixedLocator, NullLocator

    values = list(values)
    if len(values) > 12:
        return
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(lambda v, pos: f"{v:g}")
    axis.set_minor_locator(NullLocator())


def _to_index(v: np.ndarray, grid: np.ndarray, log: bool) -> np.ndarray:
    """Positions on a heatmap drawn as equal cells (cell i centred at i) of parameter values ``v``: piecewise
    linear (in log on a log axis) between the grid's values, extended linearly beyond its ends."""
    g = np.log(grid) if log else grid.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.log(np.asarray(v, dtype=np.float64)) if log else np.asarray(v, dtype=np.float64)
    idx = np.arange(len(g), dtype=np.float64)
    if len(g) == 1:
        return np.zeros_like(t)
    out = np.interp(t, g, idx)
    lo, hi = t < g[0], t > g[-1]
    out[lo] = (t[lo] - g[0]) / (g[1] - g[0])
    out[hi] = len(g) - 1 + (t[hi] - g[-1]) / (g[-1] - g[-2])
    return out


def boundary_curve(boundary: dict[str, str], names: dict[str, Any], x: str, y: str, xlim: tuple[float, float],
                   ylim: tuple[float, float], logx: bool = False, logy: bool = False,
                   num: int = 400) -> tuple[np.ndarray, np.ndarray]:
    """Points of a theory boundary ``y = f(x)`` (or ``x = g(y)``) across the plotted range.

    The expression sees the point's parameters (``names``), the axis parameter under its own name and as
    ``x`` / ``y``; see :func:`synth.sweep.evaluate` for what it may contain.
    """
    from .sweep import evaluate

    if "y" in boundary:
        t = np.geomspace(*xlim, num) if logx else np.linspace(*xlim, num)
        other = evaluate(boundary["y"], {**names, x: t, "x": t}, "boundary y")
        return t, np.broadcast_to(np.asarray(other, dtype=np.float64), t.shape)
    t = np.geomspace(*ylim, num) if logy else np.linspace(*ylim, num)
    other = evaluate(boundary["x"], {**names, y: t, "y": t}, "boundary x")
    return np.broadcast_to(np.asarray(other, dtype=np.float64), t.shape), t


def _span(values: np.ndarray, log: bool) -> tuple[float, float]:
    """The parameter range a heatmap axis covers: half a step beyond the first and last grid values."""
    if len(values) == 1:
        return (values[0] / 1.5, values[0] * 1.5) if log else (values[0] - 0.5, values[0] + 0.5)
    if log:
        a, b = np.log(values[:2]), np.log(values[-2:])
        return float(np.exp(a[0] - (a[1] - a[0]) / 2)), float(np.exp(b[1] + (b[1] - b[0]) / 2))
    return float(values[0] - (values[1] - values[0]) / 2), float(values[-1] + (values[-1] - values[-2]) / 2)


def _heatmap_figure(sweep, summary, heat, path: Path, confidence: float) -> str:
    """Phase diagram: one facet per value of the other varying parameters, the grid as equal cells with each value
    at its cell's centre (a grid of uneven steps such as σ in {0, 0.1, 0.2, 0.4} keeps its cells even), every
    facet on one colour scale, each cell printing its value (and its trial count where it differs)."""

    from figures.plots.style import new_figure, small_print, suptitle
    from figures.plots.style import palette as project_palette

    x, y, value = heat["x"], heat["y"], heat["value"]
    if value != "success" and value not in sweep["outputs"]["metrics"]:
        raise ValueError(f"heatmap value {value!r} must be 'success' or one of outputs.metrics")
    col = "success" if value == "success" else f"{value}_mean"
    others = [k for k in sweep["varying"] if k not in (x, y)]
    facets: dict[tuple, list[dict]] = {}
    for row in summary:
        facets.setdefault(tuple(row[k] for k in others), []).append(row)
    xs_all = np.array(sorted({r[x] for r in summary}), dtype=np.float64)
    ys_all = np.array(sorted({r[y] for r in summary}), dtype=np.float64)
    logx, logy = _auto_log(list(xs_all), heat.get("logx")), _auto_log(list(ys_all), heat.get("logy"))
    n = len(facets)
    ncol = min(n, 3)
    nrow = math.ceil(n / ncol)
    cmap = "cividis"  # perceptually uniform and colour-blind safe
    vmin, vmax = (0.0, 1.0) if value == "success" else (np.nanmin([r[col] for r in summary]),
                                                         np.nanmax([r[col] for r in summary]))
    line_colours = project_palette()
    cell_in = 0.62  # inches per cell: room for "0.97" at 8 pt
    width = max(3.2, cell_in * len(xs_all) + 1.3) if n > 1 else max(5.4, cell_in * len(xs_all) + 1.3)
    height = max(2.6, cell_in * len(ys_all) + 1.3) + (0.3 if heat.get("boundaries") else 0)
    fig, axes = new_figure(nrow, ncol, width=width, height=height)
    fig.set_size_inches(width * ncol + 1.2, height * nrow + 1.1)  # + the colour bar, the face and the small print
    mesh = None
    for fi, (key, rows) in enumerate(facets.items()):
        ax = axes[fi // ncol][fi % ncol]
        grid = np.full((len(ys_all), len(xs_all)), np.nan)
        counts = np.zeros_like(grid)
        for r in rows:
            iy, ix = np.searchsorted(ys_all, r[y]), np.searchsorted(xs_all, r[x])
            grid[iy, ix] = r[col]
            counts[iy, ix] = r["judged"] if value == "success" else r[f"{value}_n"]
        mesh = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=vmin, vmax=vmax, origin="lower", aspect="auto",
                         interpolation="nearest")
        for (iy, ix), v in np.ndenumerate(grid):
            if np.isfinite(v):
                text = f"{v:.2f}" if value == "success" else f"{v:.3g}"
                if counts[iy, ix] != sweep["trials"]:
                    text += f"\nn={int(counts[iy, ix])}"
                ax.text(ix, iy, text, ha="center", va="center", fontsize=8,
                        color="black" if (v - vmin) / ((vmax - vmin) or 1) > 0.55 else "white")
        names = {**sweep["points"][rows[0]["point"]]}
        for bi, b in enumerate(heat.get("boundaries", [])):
            colour = line_colours[(bi + 1) % len(line_colours)]
            bx, by = boundary_curve(b, names, x, y, _span(xs_all, logx), _span(ys_all, logy), logx, logy)
            ax.plot(_to_index(bx, xs_all, logx), _to_index(by, ys_all, logy), color=colour, linewidth=2.2,
                    linestyle="--", label=b.get("label") or "theory")
        ax.set_xlim(-0.5, len(xs_all) - 0.5)
        ax.set_ylim(-0.5, len(ys_all) - 0.5)
        ax.set_xticks(range(len(xs_all)), [f"{v:g}" for v in xs_all])
        ax.set_yticks(range(len(ys_all)), [f"{v:g}" for v in ys_all])
        ax.tick_params(labelsize=8.5)
        ax.grid(False)
        ax.set_xlabel(_label(x), fontsize=9)
        ax.set_ylabel(_label(y), fontsize=9)
        if others:
            ax.set_title(", ".join(f"{_label(k)} = {_md_value(v)}" for k, v in zip(others, key, strict=True)),
                         fontsize=9)
        if heat.get("boundaries"):
            # above the axes, not over the cells it would hide
            ax.legend(fontsize=7.5, loc="lower left", bbox_to_anchor=(0.0, 1.0 if not others else 1.08), ncol=2,
                      frameon=False)
    for fi in range(n, nrow * ncol):
        axes[fi // ncol][fi % ncol].set_visible(False)
    label = (f"success probability (share of the {sweep['trials']} trials)" if value == "success"
             else f"mean {value}")
    fig.colorbar(mesh, ax=[a for a in axes.ravel() if a.get_visible()], label=label, shrink=0.9)
    what = "success probability" if value == "success" else f"mean {value}"
    text, small = _face(sweep, heat.get("title") or next((c.get("title") for c in sweep["outputs"]["curves"]
                                                          if c.get("title")), None), what, "cell")
    suptitle(fig, text, fontsize=9.5)
    small_print(fig, small)
    save_figure_atomic(fig, path, dpi=120)
    return path.name


def _history_figure(sweep, path: Path, confidence: float) -> str | None:
    import seaborn as sns
    from matplotlib.figure import Figure

    from figures.plots.style import palette as project_palette

    hist: dict[int, list[dict]] = {}
    for r in sweep["records"]:
        h = (r.get("result") or {}).get("history")
        if r["status"] == "ok" and isinstance(h, dict) and h.get("rounds"):
            hist.setdefault(r["point"], []).append(h)
    if not hist:
        return None
    keys = sorted({k for hs in hist.values() for h in hs for k in h if k != "rounds"})
    pts = sorted(hist)
    if len(pts) > MAX_HISTORY_LINES:  # evenly spaced subset keeps the figure readable
        pts = [pts[i] for i in np.linspace(0, len(pts) - 1, MAX_HISTORY_LINES).round().astype(int)]
    palette = project_palette(len(pts))
    with sns.axes_style("whitegrid"):
        fig = Figure(figsize=(6.0 * len(keys), 4.0))
        axes = fig.subplots(1, len(keys), squeeze=False)
        for ki, key in enumerate(keys):
            ax = axes[0][ki]
            positive = True
            for pi, p in enumerate(pts):
                series = [h[key] for h in hist[p] if key in h]
                if not series:
                    continue
                length = min(len(s) for s in series)
                arr = np.array([[np.nan if v is None else v for v in s[:length]] for s in series], dtype=np.float64)
                rounds = np.asarray(hist[p][0]["rounds"][:length])
                stats = [mean_interval(arr[:, t], confidence) for t in range(length)]
                mean = np.array([s[0] for s in stats])
                lo = np.array([_band(s[1]) for s in stats])
                hi = np.array([_band(s[2]) for s in stats])
                positive &= bool(np.all(mean[np.isfinite(mean)] > 0))
                label = _group_label(tuple(sweep["points"][p].get(k) for k in sweep["varying"]), sweep["varying"])
                ax.plot(rounds, mean, color=palette[pi], label=label, linewidth=1.4)
                _shade(ax, rounds, lo, hi, np.isfinite(arr).sum(0), palette[pi])
            if positive:
                ax.set_yscale("log")
            ax.set_xlabel("round t")
            ax.set_ylabel(f"mean {key} over trials ({100 * confidence:g}% t-CI)")
            ax.legend(fontsize=7)
        fig.suptitle(f"{sweep['name']}: per-round history of the selected run", fontsize=10)
        fig.tight_layout()
        save_figure_atomic(fig, path, dpi=120)
    return path.name


# -- markdown --------------------------------------------------------------------------------------------------

def _md_value(v: Any) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def _success_text(success: dict) -> str:
    metric = " (else ".join(f"`{m}`" for m in success["metric"]) + ")" * (len(success["metric"]) - 1)
    if "max" in success:
        return f"{metric} <= `{success['max']}`"
    if "min" in success:
        return f"{metric} >= `{success['min']}`"
    return f"{metric} is true"


def _code_line(sessions: list[dict]) -> str:
    codes = list(dict.fromkeys(sess.get("code") for sess in sessions if sess.get("code")))
    n = len(sessions)
    if len(codes) > 1:
        return (f"- **mixed code**: the {n} invocations that wrote this store ran different toolkit code "
                f"({', '.join(codes)}); rerun into a new directory for a table from one version")
    return f"- code: {codes[0] if codes else 'unknown'} (written by {n} invocation{'s' if n != 1 else ''})"


def _compute_line(records: list[dict]) -> str:
    """The trials' compute: wall seconds summed (trials of parallel workers overlap, and a paused or shared worker's
    wall time runs on), and process CPU seconds where the records hold them."""
    wall = sum(float(r.get("seconds") or 0.0) for r in records)
    cpu = [float(r["cpu_seconds"]) for r in records if r.get("cpu_seconds") is not None]
    text = f"- compute: {wall / 3600:.2f} h of trial wall time summed"
    if cpu:
        text += (f"; {sum(cpu) / 3600:.2f} CPU-hours over the {len(cpu)} of {len(records)} trials that record CPU "
                 "time")
    return text + " (`trials.csv`: `wall_seconds`, `cpu_seconds`)"


def build_report(directory: str | Path, out: str | Path | None = None, confidence: float = 0.95) -> Path:
    """Aggregate a sweep store into CSV tables, figures and ``report.md``; returns the report's path.

    A paper target's store (or a target's folder, or a ``paper_repro.py`` output folder) is re-plotted with the
    target's own view instead, from the stored trials alone (:func:`figures.runs.replot`); the path returned is then
    that of the (last) report section written.
    """
    confidence = check_real("confidence", confidence, low=0.0, high=1.0, low_inclusive=False,
                            high_inclusive=False)
    from figures import load_targets
    from figures.runs import paper_stores, replot

    if str(directory).strip() and Path(directory).is_dir() and paper_stores(directory):
        # a paper target's store: its own view (figures, CSVs, report section) re-plotted from the stores
        if out is not None:
            raise ValueError("--out does not apply to a paper target's store: its figures go to the target's folder")
        return replot(directory, load_targets())[-1]
    sweep = load_sweep(directory)
    out = Path(out) if out is not None else Path(directory) / "report"
    out.mkdir(parents=True, exist_ok=True)
    tcols, trows = tidy_rows(sweep)
    _write_csv(out / "trials.csv", tcols, trows)
    scols, srows = summarise(sweep, confidence)
    _write_csv(out / "summary.csv", scols, srows)

    figures: list[tuple[str, str]] = []
    complete = [r for r in srows if r["trials"] > 0]
    for i, curve in enumerate(sweep["outputs"]["curves"]):
        if complete:
            name = _curve_figure(sweep, complete, curve, out / f"curve_{i}_{curve['y']}_vs_{curve['x']}.png",
                                 confidence)
            figures.append((name, f"{curve['y']} against {_label(curve['x'])}; bands: {100 * confidence:g}% "
                                  f"{'Wilson' if curve['y'] == 'success' else 't'} intervals"))
    for i, heat in enumerate(sweep["outputs"]["heatmaps"]):
        if complete:
            name = _heatmap_figure(sweep, complete, heat, out / f"phase_{i}_{heat['y']}_vs_{heat['x']}.png",
                                   confidence)
            bounds = "; ".join(b.get("label", "theory") for b in heat.get("boundaries", []))
            figures.append((name, f"phase diagram of {heat['value']} over ({heat['x']}, {heat['y']})"
                                  + (f"; dashed: {bounds}" if bounds else "")))
    if sweep["outputs"]["history"]:
        name = _history_figure(sweep, out / "history.png", confidence)
        if name:
            figures.append((name, "per-round history (mean over successful-status trials, t-CI bands)"))

    meta = sweep["meta"]
    total = len(sweep["points"]) * sweep["trials"]
    n_done = len(sweep["records"])
    versions = (meta.get("sessions") or [{}])[-1].get("versions", {})
    failed = Counter(r["reason"].split(":")[0] for r in sweep["records"] if r["status"] != "ok")
    lines = [f"# Sweep report: {sweep['name']}", ""]
    if sweep["spec"].get("description"):
        lines += [sweep["spec"]["description"].strip(), ""]
    lines += [f"- trials: {n_done} of {total} finished ({len(sweep['points'])} points x {sweep['trials']} trials)"
              + ("" if n_done == total else " -- **incomplete**: resume the sweep with `--resume`"),
              f"- failed trials (diverged / non-finite): {sum(failed.values())}"
              + (" (" + ", ".join(f"{k}: {v}" for k, v in failed.items()) + ")" if failed else ""),
              f"- success: {_success_text(sweep['success'])}; a failed trial counts as unsuccessful",
              f"- root seed: {meta.get('root_seed')}; varying: {', '.join(sweep['varying']) or 'nothing'}",
              f"- toolkit: {', '.join(f'{k} {v}' for k, v in versions.items())}",
              _code_line(meta.get("sessions") or []),
              _compute_line(sweep["records"]),
              ""]
    spec = sweep["spec"]
    if "fixed" in spec or "algorithms" in spec:
        fixed = spec.get("fixed", {})
        lines.append("- fixed parameters: " + (", ".join(f"`{k}={_cell(v)}`" for k, v in fixed.items()) or "none"))
        for block in spec.get("algorithms", []):
            params = ", ".join(f"`{k}={_cell(v)}`" for k, v in block.items() if k != "label")
            lines.append(f"- algorithm {block.get('label', block.get('algo', ''))}: {params or 'defaults'}")
        lines += ["- every other parameter at its default (all values per trial: `trials.csv`).", ""]
    else:
        fixed = {k: v for k, v in sweep["points"][0].items()
                 if k not in sweep["varying"] and all(p.get(k) == v for p in sweep["points"]) and v is not None}
        if fixed:
            lines += ["Fixed parameters: " + ", ".join(f"`{k}={_cell(v)}`" for k, v in fixed.items()), ""]
    for name, caption in figures:
        lines += [f"![{caption}]({name})", "", f"*{caption}*", ""]
    lines += ["## Summary", "", f"Success probability with {100 * confidence:g}% Wilson intervals; metric means "
              f"with {100 * confidence:g}% Student-t intervals (full table: `summary.csv`, per trial: `trials.csv`).",
              ""]
    show = [c for c in scols if c in ("point", *sweep["varying"], "trials", "failed", "success", "success_lo",
                                       "success_hi") or c.endswith("_mean")]
    lines += ["| " + " | ".join(show) + " |", "|" + "---|" * len(show)]
    for row in srows[:MAX_TABLE_ROWS]:
        lines.append("| " + " | ".join(_md_value(row.get(c)) for c in show) + " |")
    if len(srows) > MAX_TABLE_ROWS:
        lines.append(f"\n({len(srows) - MAX_TABLE_ROWS} more rows in summary.csv)")
    path = out / "report.md"
    write_text_atomic(path, "\n".join(lines) + "\n")
    return path


# -- command line ----------------------------------------------------------------------------------------------

def _configure(sub: argparse.ArgumentParser) -> None:
    from .cli import typed_flag

    sub.add_argument("dir", metavar="DIR", help="a sweep output directory (python -m synth sweep ... --out DIR), or a "
                     "paper target's store, target folder or paper_repro.py output (re-plotted without computing)")
    sub.add_argument("--out", default=None, metavar="REPORT_DIR", help="where to write (default: DIR/report)")
    sub.add_argument("--confidence", type=typed_flag("float", "--confidence"), default=0.95,
                     help="confidence level of the intervals, in (0, 1) (default: 0.95)")


def _run(args: argparse.Namespace) -> int:
    if args.out is not None and not args.out.strip():
        raise ValueError("--out must name a directory, got an empty string")
    path = build_report(args.dir, args.out, args.confidence)
    print(f"report written to {path}")
    return 0


def _register() -> None:
    from .cli import register_command

    register_command("report", "aggregate a sweep directory into CSV tables, figures and a Markdown report",
                     _configure, _run)


_register()
