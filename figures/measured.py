"""Stored paper-scale runs (``figures/measured/*.json``) as report rows with a within/outside ± verdict.

A long run (hours, at the paper's size) is kept as the JSON that ``python -m nets run --json --history``
printed, with one line in ``figures/measured/README.md`` giving its command.  This module reads every such
file, finds the published number it reproduces, groups the files of one configuration that differ only in
the seed, and compares their mean with the paper's ``±`` (:func:`figures.compare.numeric_row`).

Which published number a file reproduces: the JSON's own ``"reproduces"`` list when it has one (each entry
``{"paper", "artifact", "row", "column", "group", "metric", "scale"}``), otherwise the rules of
:data:`RULES`, which recognise the papers' own settings (data set, algorithm, clients m, samples n).  A run
no rule recognises is listed as "not matched" rather than dropped.

A paper-scale *sweep* (e.g. IFCA Fig. 3 at the public code's grid) is kept as its trial store,
``figures/measured/<name>/store`` (``spec.toml``, ``meta.json``, ``trials.jsonl``), with its command in the same
README table (a row whose first cell is ``<name>/``).  :func:`store_rows` judges the paper's claim about the
figure (IFCA Fig. 3: success rises with R, or with m and n) on every curve of the stored grid.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from .compare import Row, build_section, claim_row, numeric_row, write_rows
from .published import claim, lookup
from .registry import Context, Section, register
from .runs import summarise_values

__all__ = ["HERE", "RULES", "load_runs", "load_stores", "match", "measured_rows", "readme_commands", "store_rows"]

HERE = Path(__file__).parent / "measured"

_IFCA_T1 = {(4800, 50), (2400, 100), (1200, 200)}
_IFCA_ROW = {"ifca": "IFCA", "global": "global model", "local": "local model"}
_SRFCA_ROW = {"srfca": "SR-FCA", "local": "Local", "global": "Global", "cfl": "CFL", "local-kmeans": "Local-KMeans",
              "ifca": "IFCA"}
_CLOVE_ROW = {"global": "FedAvg", "local": "Local-only", "cfl": "CFL", "ifca": "IFCA", "clove": "CLoVE"}
_CLOVE_MIX = {"label-skew-1": "Label skew 1", "concept-shift": "Concept shift", "label-skew-2": "Label skew 2",
              "feature-skew": "Feature skew", "label-skew-3": "Label skew 3", "label-skew-4": "Label skew 4"}
_CLOVE_BASE = {"mnist": "MNIST", "fmnist": "FMNIST", "cifar": "CIFAR-10"}


def _ifca_table1(rec: dict, args: dict) -> list[dict]:
    if rec.get("dataset") != "mnist-rotated" or rec.get("algo") not in _IFCA_ROW:
        return []
    m, n = rec.get("clients"), rec.get("n_per_client")
    if (m, n) not in _IFCA_T1:
        return []
    diffs = ["the paper does not give the number of rounds"]
    if rec.get("n_test_machines") is None:  # the IFCA test protocol option records this key
        diffs.append("test: each client's own test images, scored with the min-loss model (IFCA: 400 test machines "
                     "of 100 images)")
    return [dict(paper="IFCA", artifact="Table I", row=_IFCA_ROW[rec["algo"]], column=f"Rotated MNIST (m,n)=({m},{n})",
                 group="", metric="test_accuracy", scale=100.0, paper_seeds=5, differences=diffs)]


def _srfca_sim(rec: dict, args: dict) -> list[dict]:
    col = {"mnist-inverted": "MNIST (inverted)", "mnist-rotated": "MNIST (rotated)"}.get(rec.get("dataset"))
    if col is None or rec.get("algo") not in _SRFCA_ROW or (rec.get("clients"), rec.get("n_per_client")) != (100, 600):
        return []
    row = _SRFCA_ROW[rec["algo"]]
    out = [dict(paper="SR-FCA", artifact="Table 1", row=row, column=col, group="", metric="test_accuracy",
                scale=100.0, paper_seeds=5, differences=[])]
    if row in ("SR-FCA", "CFL", "Local-KMeans", "IFCA"):
        out.append(dict(out[0], artifact="Table 2", metric="misclustering", scale=1.0))
    return out


def _clove_sup(rec: dict, args: dict) -> list[dict]:
    base, _, part = str(rec.get("dataset", "")).partition("-")
    if part not in _CLOVE_MIX or base not in _CLOVE_BASE or rec.get("algo") not in _CLOVE_ROW:
        return []
    if rec.get("n_per_client") != 500 or rec.get("task") != "classify":
        return []
    mix = _CLOVE_MIX[part]
    art = ("Table 1", "Table 2") if mix in ("Label skew 1", "Concept shift", "Label skew 2", "Feature skew") else \
        ("Table 7", "Table 8")
    out = [dict(paper="CLoVE", artifact=art[0], row=_CLOVE_ROW[rec["algo"]], column=_CLOVE_BASE[base], group=mix,
                metric="test_accuracy", scale=100.0, paper_seeds=3, differences=[])]
    if rec["algo"] in ("cfl", "ifca", "clove"):
        out.append(dict(out[0], artifact=art[1], metric="ari", scale=1.0))
    return out


# (name, rule): a rule maps (record, command arguments) to the published cells the run reproduces
RULES: list[tuple[str, Callable[[dict, dict], list[dict]]]] = [
    ("IFCA Table I (rotated MNIST)", _ifca_table1), ("SR-FCA Tables 1-2 (MNIST)", _srfca_sim),
    ("CLoVE Tables 1, 2, 7, 8", _clove_sup)]


def readme_commands(folder: Path = HERE) -> dict[str, str]:
    """``file name -> command`` from the table of ``README.md`` (rows ``| `file` | `command` | ...``; a stored
    sweep's row names its folder, ``name/``)."""
    path = folder / "README.md"
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\|\s*`([^`]+(?:\.json|/))`\s*\|\s*`([^`]+)`\s*\|", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _args(command: str) -> dict[str, str]:
    """``--flag value`` pairs of a command line (flags without a value map to '')."""
    try:
        words = shlex.split(command)
    except ValueError:
        return {}
    out, i = {}, 0
    while i < len(words):
        w = words[i]
        if w.startswith("--"):
            nxt = words[i + 1] if i + 1 < len(words) else ""
            if nxt and not nxt.startswith("--"):
                out[w[2:].replace("-", "_")] = nxt
                i += 2
                continue
            out[w[2:].replace("-", "_")] = ""
        i += 1
    return out


def match(rec: dict, args: dict) -> list[dict]:
    """The published cells a stored run reproduces: its own ``reproduces`` list, else the first rule that fits."""
    if isinstance(rec.get("reproduces"), list):
        return [dict({"group": "", "scale": 1.0, "paper_seeds": None, "differences": []}, **c)
                for c in rec["reproduces"]]
    for _, rule in RULES:
        cells = rule(rec, args)
        if cells:
            return cells
    return []


def load_runs(folder: Path = HERE) -> list[dict[str, Any]]:
    """Every ``*.json`` of ``folder`` with its command (README), seed and matched cells (the campaign's timings
    file is not a run; the campaign's runs are in subfolders, see :func:`campaign_rows`)."""
    from .campaign import TIMINGS

    commands = readme_commands(folder)
    runs = []
    for path in sorted(p for p in folder.glob("*.json") if p.name != TIMINGS):
        rec = json.loads(path.read_text(encoding="utf-8"))
        command = rec.get("command") or commands.get(path.name, "")
        args = _args(command)
        seed = rec.get("seed", args.get("seed"))
        runs.append({"file": path.name, "record": rec, "command": command, "args": args,
                     "seed": None if seed in (None, "") else int(seed), "cells": match(rec, args)})
    return runs


def _config_key(run: dict) -> tuple:
    """Runs that differ only in the seed share this key."""
    a = {k: v for k, v in run["args"].items() if k not in ("seed", "checkpoint", "json", "history", "data_dir",
                                                             "device", "eval_every")}
    rec = run["record"]
    return (rec.get("dataset"), rec.get("algo"), rec.get("clients"), rec.get("n_per_client"), rec.get("rounds"),
            tuple(sorted(a.items())))


def measured_rows(folder: Path = HERE) -> tuple[list[Row], list[dict]]:
    """One row per (published cell, configuration) of the stored runs: the mean over their seeds vs the paper."""
    runs = load_runs(folder)
    rows, table = [], []
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        if not run["cells"]:
            rows.append(Row(f"`{run['file']}`", "—", "—", "—", "not matched (no published cell recognised; add a "
                            "\"reproduces\" list to the JSON)", "", run["command"]))
        for cell in run["cells"]:
            groups.setdefault((cell["paper"], cell["artifact"], cell["group"], cell["row"], cell["column"],
                               cell["metric"], _config_key(run)), []).append((run, cell))
    for (paper, artifact, group, row, column, metric, _), members in groups.items():
        cell = members[0][1]
        pub = lookup(paper, artifact, row, column, group)
        vals = [r["record"].get(metric) for r, _ in members]
        s = summarise_values(vals)
        seeds = [r["seed"] for r, _ in members]
        rec = members[0][0]["record"]
        diffs = list(cell.get("differences", [])) + [str(n) for n in rec.get("notes", [])]
        ps = cell.get("paper_seeds")
        if ps and len(members) < ps:
            diffs.append(f"{len(members)} seed(s) (the paper: mean of {ps})")
        where = " / ".join(x for x in (group, row, column) if x)
        note = (f"paper scale, {len(members)} seed(s) {seeds}; files: {', '.join(r['file'] for r, _ in members)}; "
                f"command: `{members[0][0]['command']}`; protocol differences: {'; '.join(diffs) or 'none known'}")
        rows.append(numeric_row(f"{paper} {artifact}: {where} [stored run, {rec.get('rounds')} rounds]", pub, s.mean,
                                s.std, s["n"], float(cell.get("scale", 1.0)), None, note=note))
        table.append({"paper": paper, "artifact": artifact, "cell": where, "metric": metric, "seeds": len(members),
                      "mean": s.mean, "published": pub.value if pub else None, "published_pm": pub.pm if pub else None,
                      "verdict": rows[-1].verdict, "files": [r["file"] for r, _ in members],
                      "command": members[0][0]["command"], "differences": diffs,
                      "hours": sum(float(r["record"].get("seconds") or 0) for r, _ in members) / 3600})
    return rows, table


# a stored sweep the report knows how to judge: its spec name -> (paper's figure, panel)
_FIG3_STORE = re.compile(r"ifca_fig3([abcd])_full_(text|code)$")


def load_stores(folder: Path = HERE) -> list[dict[str, Any]]:
    """Every trial store ``folder/<name>/store`` with its spec name, command (README), meta and records."""
    from synth.store import read_meta, read_records

    commands = readme_commands(folder)
    out = []
    for store in sorted(p.parent for p in folder.glob("*/store/meta.json")):
        meta = read_meta(store) or {}
        out.append({"folder": store.parent.name, "store": store, "name": str(meta.get("name", store.parent.name)),
                    "meta": meta, "records": read_records(store),
                    "command": commands.get(store.parent.name + "/", "")})
    return out


def _fig3_store_rows(st: dict, panel: str) -> list[Row]:
    """The Fig. 3 claims on one stored grid; a curve with a cell short of the spec's trials is *pending*, not
    judged on the cells that happen to be finished (a running or killed sweep's store)."""
    from .ifca_synthetic import compare_fig3, fig3_rows

    recs = st["records"]
    grid = st["meta"].get("points") or []
    want = int(st["meta"].get("trials") or 0)
    n_points = max(len(grid), 1 + max((r["point"] for r in recs), default=-1))
    points: list[dict] = [dict(grid[i]) if i < len(grid) else {} for i in range(n_points)]
    groups: list[list[dict]] = [[] for _ in range(n_points)]
    for r in recs:
        points[r["point"]] = r["params"]
        groups[r["point"]].append(r)
    axis = "R" if len({p.get("sigma") for p in points}) > 1 or panel in "ab" else "mn"

    def curve(p: dict) -> tuple:
        return (p.get("theta"), p.get("sigma") if axis == "R" else p.get("R"))

    cells: dict[tuple, list[int]] = {}
    for i, p in enumerate(points):
        cells.setdefault(curve(p), []).append(i)
    whole = {k for k, idx in cells.items() if all(len(groups[i]) >= want for i in idx)}
    keep = [i for i, p in enumerate(points) if curve(p) in whole and groups[i]]
    rows = fig3_rows([points[i] for i in keep], [groups[i] for i in keep], "success_any_restart", "success_code_rule")
    p0 = points[0]
    trials = sorted({len(g) for g in groups})
    per_cell = "/".join(map(str, trials))
    total = want * len(grid)
    state = "" if len(recs) >= total else f"incomplete store ({len(recs)} of {total} trials), "
    scale = (f"stored run, paper scale: {state}{len(recs)} data seeds over {n_points} grid cells ({per_cell} per "
             f"cell) of (m, n, d) = ({p0['K'] * p0['clients_per_cluster']}, {p0['n']}, {p0['d']}), "
             f"{p0['n_init']} initialisations x step sizes {p0['step_size']}, {p0['rounds']} iterations, "
             f"{p0.get('dtype', 'float64')}, stopping = {p0.get('stopping', 'fixed')}")
    # judged by the stored spec's own success rule (the public code's closest-truth rule in its code-theta* grids)
    metric = ((st["meta"].get("spec") or {}).get("success") or {}).get("metric", "success_any_restart")
    metric = str(metric[0] if isinstance(metric, list) and metric else metric)  # specs hold a list of keys
    rule = "code" if metric == "success_code_rule" else "matched"
    prefix = f"IFCA Fig. 3({panel}) [{st['folder']}]: "
    out = compare_fig3(panel, axis, rows, prefix=prefix, rule=rule) if rows else []
    c = claim("IFCA", "success-rises-with-R" if axis == "R" else "success-rises-with-mn")
    for key in sorted(set(cells) - whole, key=str):
        theta, value = key
        done = sum(len(groups[i]) >= want for i in cells[key])
        label = f"σ={value}" if axis == "R" else f"R={value}"
        out.append(claim_row(f"{prefix}Fig. 3({panel}) `{theta}`, {label}", c,
                             f"{done} of {len(cells[key])} cells finished",
                             f"pending (store incomplete: {len(recs)} of {total} trials)"))
    note = (f"{scale}; success judged by `{metric}`, the spec's rule; store `figures/measured/{st['folder']}/store`; "
            f"command: `{st['command'] or 'not in figures/measured/README.md'}`")
    return [replace(r, note=note) for r in out]


def store_rows(folder: Path = HERE) -> list[Row]:
    """The paper's claims judged on every stored paper-scale sweep of ``folder`` (IFCA Fig. 3 grids)."""
    rows = []
    for st in load_stores(folder):
        m = _FIG3_STORE.match(st["name"])
        if m is None:
            rows.append(Row(f"`{st['folder']}/store` ({st['name']})", "—", "—", "—",
                            "not matched (no published figure recognised for this sweep)", "", st["command"]))
        elif st["records"]:
            rows += _fig3_store_rows(st, m.group(1))
    return rows


def campaign_rows(folder: Path = HERE, data_dir: str | None = None) -> tuple[list[Row], list[dict]]:
    """The paper-scale rows of the campaign's stored runs (:mod:`figures.campaign`): every real-data target's rows
    at its ``--full`` setting, computed from the runs stored under ``folder`` (nothing is run), keeping the rows
    that stored runs answer.

    A number held to the paper's ``±`` keeps the target's verdict (*within ±* / *outside ±*); where both sides
    have at least 3 seeds a Welch test of the two means (the paper's ``±`` read as a standard deviation over its
    seeds: IFCA and SR-FCA 5, CLoVE 3), Holm-corrected per table, adds *consistent* or *differs* at 0.05.  Each
    row's note gives its seeds and the cell's protocol differences (:func:`figures.campaign.protocol`).
    """
    from .campaign import PAPER_SEEDS, cells, collect, minimal_seeds, protocol
    from .verdicts import holm

    requests, by_target = collect(folder, data_dir)
    cell_list = cells(requests)
    stored, devices = {}, {}
    for c in cell_list:
        n_points = len(c.points())
        per_trial: dict[int, int] = {}
        on: dict[str, int] = {}
        for r in c.requests:
            if r.path(folder).exists():
                per_trial[r.trial] = per_trial.get(r.trial, 0) + 1
                dev = str(json.loads(r.path(folder).read_text(encoding="utf-8")).get("device", "cpu"))
                name = dev.split(": ", 1)[-1].split(" (")[0] if dev.startswith("cuda") else "CPU"
                on[name] = on.get(name, 0) + 1
        devices[c.name] = ", ".join(f"{n} on {d}" for d, n in sorted(on.items()))
        stored[c.name] = sum(1 for t, k in per_trial.items() if k == n_points)
    by_source = {p.source(): c for c in cell_list for p in c.published}
    rows, table, seen = [], [], set()
    for trows in by_target.values():
        for r in trows:
            cell = by_source.get(r.source)
            if r.compared:  # an ordering of methods at the paper's scale
                if r.verdict.startswith(("not run", "inconclusive (fewer than")) or (r.item, r.verdict) in seen:
                    continue
                seen.add((r.item, r.verdict))
                rows.append(replace(r, item=f"{r.item} [paper scale]"))
                continue
            if cell is None or r.verdict.startswith("not run") or r.source in seen and r.stats is None:
                continue
            if r.stats is None and (not stored[cell.name] or r.verdict.startswith(("agrees", "disagrees",
                                                                                  "inconclusive"))):
                # a row without its own numbers (rounds-to, "never") needs a whole seed of the cell stored;
                # qualitative claims are judged on the target's own runs
                continue
            seen.add(r.source)
            pub = next(p for p in cell.published if p.source() == r.source)
            n = r.stats[2] if r.stats else 0
            notes = [x for x in r.note.split("; ") if x and "not run yet" not in x]
            diffs = protocol(cell)
            minimal = minimal_seeds(cell)
            note = (f"paper scale: cell `{cell.name}`, {n} seed(s) stored (minimal test {minimal}, the paper "
                    f"{PAPER_SEEDS[pub.paper]}); runs: `figures/measured/{cell.folder}/` ({devices[cell.name]}); "
                    f"command: `python paper_repro.py --campaign run` (on a GPU: `python bench/gpu_run.py`); "
                    f"protocol differences: {'; '.join(diffs) or 'none known'}"
                    + (f"; {'; '.join(notes)}" if notes else ""))
            table.append({"row": len(rows), "paper": pub.paper, "artifact": pub.artifact, "pub": pub, "n": n,
                          "minimal": minimal, "cell": cell.name, "stats": r.stats})
            rows.append(replace(r, item=f"{pub.paper} {pub.artifact}: {r.item} [paper scale]", note=note))
    # Welch tests against the paper's mean +- std over its seeds, Holm per table
    tests: dict[tuple, list[tuple[int, float]]] = {}
    for t in table:
        pub, stats = t["pub"], t["stats"]
        ps = PAPER_SEEDS[pub.paper]
        if stats is None or pub.pm is None or t["n"] < 3 or ps < 3:
            continue
        p = _welch_p(stats[0], stats[1], t["n"], pub.value, pub.pm, ps)
        tests.setdefault((pub.paper, pub.artifact), []).append((t["row"], p))
    for pairs in tests.values():
        adjusted = holm([p for _, p in pairs])
        for (i, p), q in zip(pairs, adjusted, strict=True):
            word = "consistent" if q >= 0.05 else "differs"
            rows[i] = replace(rows[i], welch=f"{word} (Welch p = {p:.3g}, Holm {q:.3g})")
    for t in table:
        t["welch"] = rows[t["row"]].welch
        t["verdict"] = rows[t["row"]].verdict
    return rows, table


def _welch_p(m1: float, s1: float, n1: int, m2: float, s2: float, n2: int) -> float:
    """Two-sided Welch p-value of two means from their standard deviations and counts (1.0 when both are exact)."""
    from scipy.stats import ttest_ind_from_stats

    if s1 == 0 and s2 == 0:
        return 1.0 if m1 == m2 else 0.0
    return float(ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False).pvalue)


@register("measured-runs", "all papers", "Stored paper-scale runs (figures/measured/*.json) against the published "
          "numbers", kind="measured")
def measured_target(ctx: Context) -> Section:
    """The stored paper-scale runs of ``figures/measured`` as comparison rows (any size: nothing is computed)."""
    rows, table = measured_rows()
    stored = store_rows()
    rows += stored
    paper_scale, cells = campaign_rows(data_dir=ctx.data_dir)
    rows += paper_scale
    folder = ctx.folder("measured-runs")
    files = [write_rows(rows, folder / "comparison.csv")] if rows else []
    hours = sum(t["hours"] for t in table if not math.isnan(t["hours"]))
    intro = (f"Runs at the papers' sizes kept in `figures/measured/` ({len(load_runs())} file(s), {hours:.1f} h of "
             "compute in all), each the JSON of `python -m nets run --json --history` with its command in "
             "`figures/measured/README.md`. The reproduced number is the mean over the files of one configuration "
             "(one per seed); the note of each row gives the seeds, the command and how the protocol differs from "
             "the paper's. Paper-scale sweeps are kept as their trial stores (`figures/measured/<name>/store`); "
             f"{len(load_stores())} such store(s) are judged against the paper's claim about the figure, one row per "
             "curve. These runs are not recomputed by `paper_repro.py`.")
    notes = [f"**{r.item}**: {r.note}" for r in rows if r.note]  # seeds, command, protocol differences
    return build_section("Stored paper-scale runs", intro, "measured-runs", [], rows, files, notes,
                         extra=_campaign_table(paper_scale, cells))


def _campaign_table(rows: list[Row], cells: list[dict]) -> str:
    """The campaign's paper-scale numbers: reproduced mean ± std against the paper's, within ±, Welch test."""
    if not cells:
        return ("**Paper-scale campaign**: no run stored yet (`python paper_repro.py --campaign plan` lists the cells "
                "and their cost: `figures/measured/campaign.csv`).")
    # a published value scored under two protocols (IFCA's own test, a second initialisation) has a row for each
    numbers = {c["pub"].source() for c in cells}
    held = {c["pub"].source() for c in cells if c["n"] >= c["minimal"]}
    lines = [f"**Paper-scale campaign** (`python paper_repro.py --campaign run`; manifest "
             f"`figures/measured/campaign.csv`): {len(numbers)} published numbers with stored runs at the paper's "
             f"setting ({len(cells)} rows), {len(held)} of them with at least the minimal test's seeds (3, or the "
             "paper's own count if smaller; IFCA Table I: 1). *within ±*: |reproduced mean - paper| <= the paper's "
             "± (plus half a unit of its last digit); Welch: the two means tested with the paper's ± as its standard "
             "deviation over its seeds, Holm-corrected per table, *consistent* at p >= 0.05, where both sides have "
             ">= 3 seeds.", "",
             "| number | paper | reproduced | difference | within ± | Welch |", "|---|---|---|---|---|---|"]
    for c in cells:
        r = rows[c["row"]]
        lines.append(f"| {r.item} | {r.paper} | {r.reproduced} | {r.difference} | {r.verdict} | "
                     f"{r.welch or 'not tested (fewer than 3 seeds)'} |")
    return "\n".join(lines)
