"""Stored paper-scale runs (``figures/measured/*.json``) as report rows with a within/outside ± verdict.

A long run (hours, at the paper's size) is kept as the JSON that ``python -m nets run --json --history``
printed, with one line in ``figures/measured/README.md`` giving its command.  This module reads every such
file, finds the published number it reproduces, groups the files of one configuration that differ only in
the seed, and compares their mean with the paper's ``±`` (:func:`figures.verdicts.compare.numeric_row`).

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

from ..registry import Context, Section, register
from ..runs import summarise_values
from ..verdicts.compare import Row, build_section, claim_row, numeric_row, write_rows
from ..verdicts.published import claim, lookup
from ..verdicts.rules import SHOWN, STALE, head

__all__ = ["HERE", "RULES", "load_runs", "load_stores", "match", "measured_rows", "readme_commands", "store_rows"]

HERE = Path(__file__).parent.parent / "measured"

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
        diffs.append("test: each client's own test images, scored with the min-loss model (IFCA: m_test = 10000 k / n "
                     "test machines of n images)")
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
    from .costs import TIMINGS

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
        # an earlier single run beside the campaign's: shown, never the counted row of its published value
        rows.append(replace(numeric_row(f"{paper} {artifact}: {where} [stored run, {rec.get('rounds')} rounds]", pub,
                                        s.mean, s.std, s["n"], float(cell.get("scale", 1.0)), None, note=note),
                            counted=False))
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
    from ..targets.ifca_synthetic import compare_fig3, fig3_rows

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
    # the other success rule's curves beside the counted ones, never counted: the code's rule and generator are
    # declared deviations (figures/published/protocols/ifca-fig3.toml), and under the text's one-to-one rule the
    # sigma = 0 curves cannot rise (dist <= 0 never holds)
    other, said = ("matched", "the text's one-to-one rule") if rule == "code" else ("code", "the code's rule")
    out += [replace(r, item=f"{r.item} [second protocol: {said}]", counted=False)
            for r in (compare_fig3(panel, axis, rows, prefix=prefix, rule=other) if rows else [])
            if "`," in r.item]
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
    from ..verdicts.protocol import ledger_for

    ledger = ledger_for(st["folder"])
    klass = ledger.protocol_class() if ledger is not None else ""
    return [replace(r, note=note, protocol=klass) for r in out]


def store_rows(folder: Path = HERE, stores: list[dict] | None = None) -> list[Row]:
    """The paper's claims judged on every stored paper-scale sweep of ``folder`` (IFCA Fig. 3 grids; ``stores``:
    :func:`load_stores`'s list when already read)."""
    rows = []
    for st in load_stores(folder) if stores is None else stores:
        m = _FIG3_STORE.match(st["name"])
        if m is None:
            rows.append(Row(f"`{st['folder']}/store` ({st['name']})", "—", "—", "—",
                            "not matched (no published figure recognised for this sweep)", "", st["command"]))
        elif st["records"]:
            rows += _fig3_store_rows(st, m.group(1))
    return rows


def _provenance(unrecorded: dict[str, set[str]], method: str) -> str:
    """The note of a row whose method has runs made from a modified tree whose diff was not recorded."""
    def names(algo: str) -> set[str]:  # the row names of one algorithm in the three papers' tables
        return {x.lower() for x in (algo, *(t.get(algo) for t in (_IFCA_ROW, _SRFCA_ROW, _CLOVE_ROW))) if x}

    commits = sorted(c for algo, cs in unrecorded.items() if method.lower() in names(algo) for c in cs)
    if not commits:
        return ""
    return f"; provenance: modified tree {', '.join(commits)}, diff not recorded"


def campaign_rows(folder: Path = HERE, data_dir: str | None = None) -> tuple[list[Row], list[dict]]:
    """The paper-scale rows of the campaign's stored runs (:mod:`figures.campaign.planner`): every real-data target's
    rows at its ``--full`` setting, computed from the runs stored under ``folder`` (nothing is run), keeping the rows
    that stored runs answer.

    Each number is tested against the paper's by :func:`figures.verdicts.rules.judge_numbers` (equivalence within the
    paper's ± and a difference test, Holm over the numbers of one table; fewer than 3 seeds: shown).  Each row
    carries its cell's protocol class from the cell's ledger (:mod:`figures.verdicts.protocol`: ``same`` or
    ``deviates``, with the declared deviations in the note); rows whose runs were made under a protocol since corrected
    are
    *stale*, and published values the ledger flags as likely misprints are *paper value suspect*: both shown,
    neither counted.
    """
    from ..verdicts.protocol import ledger_for
    from ..verdicts.published import PAPER_SEEDS
    from ..verdicts.rules import SUSPECT, judge_numbers
    from .cells import cells, minimal_seeds
    from .planner import collect
    from .store import stale_run

    requests, by_target = collect(folder, data_dir, names=_targets_with_runs(folder))
    cell_list = cells(requests)
    stored, devices, stale, unrecorded = {}, {}, {}, {}
    for c in cell_list:
        n_points = len(c.points())
        per_trial: dict[int, int] = {}
        on: dict[str, int] = {}
        ledger = ledger_for(c.folder)
        changed = list(ledger.stale.changed_keys) if ledger is not None and ledger.stale is not None else []
        for r in c.requests:
            path = r.path(folder)
            if not path.exists() and changed:
                old = stale_run(r, folder, changed)
                if old is not None:
                    path = old
                    stale.setdefault(c.name, (ledger.stale, set()))[1].add(str(r.point.get("algo")))
            if path.exists():
                per_trial[r.trial] = per_trial.get(r.trial, 0) + 1
                record = json.loads(path.read_text(encoding="utf-8"))
                if str(record.get("commit", "")).endswith("+") and "tree" not in record:
                    # made from a modified tree before runs recorded their diff: the code it ran is not known
                    unrecorded.setdefault(c.name, {}).setdefault(str(r.point.get("algo")), set()).add(
                        str(record["commit"]))
                dev = str(record.get("device", "cpu"))
                name = dev.split(": ", 1)[-1].split(" (")[0] if dev.startswith("cuda") else "CPU"
                on[name] = on.get(name, 0) + 1
        devices[c.name] = ", ".join(f"{n} on {d}" for d, n in sorted(on.items()))
        stored[c.name] = sum(1 for t, k in per_trial.items() if k == n_points)
    by_source = {p.source(): c for c in cell_list for p in c.published}
    rows, table, seen = [], [], set()
    for trows in by_target.values():
        for r in trows:
            if r.compared:  # an ordering of methods at the paper's scale
                cell = by_source.get(r.source.split("; ")[0])
                if head(r.verdict) in ("not run", SHOWN) or (r.item, r.verdict) in seen or cell is None:
                    continue
                seen.add((r.item, r.verdict))
                art = r.source.split(":")[0]  # "SR-FCA Table 1": the paper and table the pair's values come from
                methods = [k.rsplit("/", 1)[-1] for k in r.compared.split(";")]
                row = _protocol(replace(r, item=f"{art}: {r.item} [paper scale]"), cell,
                                _stale_for(stale.get(cell.name), cell.paper, methods), methods)
                ledger = ledger_for(cell.folder)
                suspect = next((x for x in (ledger.suspects if ledger is not None else ())
                                if x.source in r.source.split("; ")), None)
                if suspect is not None and head(row.verdict) != STALE:  # an order against a likely misprint
                    row = replace(row, verdict=f"{SUSPECT} ({suspect.reason})")
                rows.append(row)
                continue
            cell = by_source.get(r.source)
            if cell is None or r.verdict.startswith("not run") or r.source in seen and r.stats is None:
                continue
            if r.stats is None and (not stored[cell.name] or counted_word(r.verdict)):
                # a row without its own numbers (rounds-to, "never") needs a whole seed of the cell stored;
                # qualitative claims are judged on the target's own runs
                continue
            seen.add(r.source)
            pub = next(p for p in cell.published if p.source() == r.source)
            n = r.stats[2] if r.stats else 0
            notes = [x for x in r.note.split("; ") if x and "not run yet" not in x]
            ledger = ledger_for(cell.folder)
            minimal = minimal_seeds(cell)
            declared = ledger.summary(cell.name, [pub.row]) if ledger is not None else \
                "no protocol ledger for this cell"
            note = (f"paper scale: cell `{cell.name}`, {n} seed(s) stored (minimal test {minimal}, the paper "
                    f"{PAPER_SEEDS[pub.paper]}); runs: `figures/measured/{cell.folder}/` ({devices[cell.name]}); "
                    f"command: `python paper_repro.py --campaign run` (on a GPU: `python bench/gpu_run.py`); "
                    f"protocol: {declared}" + _provenance(unrecorded.get(cell.name, {}), pub.row)
                    + (f"; {'; '.join(notes)}" if notes else ""))
            row = _protocol(replace(r, item=f"{pub.paper} {pub.artifact}: {r.item} [paper scale]", note=note), cell,
                            _stale_for(stale.get(cell.name), cell.paper, [pub.row]), [pub.row])
            suspect = next((x for x in (ledger.suspects if ledger is not None else ()) if x.source == r.source),
                           None)
            if suspect is not None and head(row.verdict) != STALE:
                row = replace(row, verdict=f"{SUSPECT} ({suspect.reason})", paper_number=None)
            table.append({"row": len(rows), "paper": pub.paper, "artifact": pub.artifact, "pub": pub, "n": n,
                          "minimal": minimal, "cell": cell.name, "stats": r.stats})
            rows.append(row)
    rows = judge_numbers(rows)
    for t in table:
        t["verdict"] = rows[t["row"]].verdict
    return rows, table


# the algorithm behind each method a table names (a label not here is taken to depend on every run of its cell)
_ALGO_OF = {
    "IFCA": {"IFCA": "ifca", "global model": "global", "local model": "local"},
    "SR-FCA": {"SR-FCA": "srfca", "After 1st REFINE": "srfca", "After 2nd REFINE": "srfca", "Local": "local",
               "Global": "global", "CFL": "cfl", "Local-KMeans": "local-kmeans", "IFCA": "ifca"},
    "CLoVE": {"FedAvg": "global", "Local-only": "local", "CFL": "cfl", "IFCA": "ifca", "CLoVE": "clove",
              "FeSEM": "fesem", "FlexCFL": "flexcfl", "PACFL": "pacfl", "Per-FedAvg": "perfedavg",
              "FedProto": "fedproto", "FedALA": "fedala", "FedPAC": "fedpac"}}


def _stale_for(stale, paper: str, methods: list[str]):
    """The cell's stale record when a row's methods read stale runs (their algorithms' runs were made under a
    corrected protocol), else None."""
    if stale is None:
        return None
    ledger_stale, algos = stale
    table = _ALGO_OF.get(paper, {})
    needs = {table.get(m.split(" (")[0]) for m in methods}
    return ledger_stale if None in needs or needs & algos else None


def _targets_with_runs(folder: Path) -> tuple[str, ...]:
    """The campaign's targets whose cells have a stored run under ``folder`` (from the manifest's cell and targets
    columns): only those can give a paper-scale row, and running the others (LEAF data sets read to count their
    users) is most of the time of reading the stored runs.  Every campaign target when there is no manifest."""
    import csv

    from .planner import MANIFEST, TARGETS

    path = Path(folder) / MANIFEST
    if not path.is_file():
        return TARGETS
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with_runs = {f.name for f in Path(folder).iterdir() if f.is_dir() and any(f.glob("*.json"))}
    names = {t for r in rows if str(r.get("cell", "")).split(":")[0] in with_runs
             for t in str(r.get("targets", "")).split()}
    return tuple(t for t in TARGETS if t in names)


def counted_word(verdict: str) -> bool:
    """A claim's or ordering's verdict word (agrees, differs, not resolved): :func:`figures.verdicts.rules.counted`."""
    from ..verdicts.rules import counted

    return counted(verdict)


def _protocol(row: Row, cell, stale, methods: list[str]) -> Row:
    """A paper-scale row with its protocol class (the cell's ledger, the settings that concern the row's
    ``methods``); a row of runs made under a corrected protocol is *stale* (shown, not tested), naming the
    correction and the command that reruns it."""
    from ..verdicts.protocol import ledger_for

    ledger = ledger_for(cell.folder)
    klass = ledger.protocol_class(cell.name, [m.split(" (")[0] for m in methods]) if ledger is not None else ""
    if stale is not None:
        return replace(row, protocol=klass, paper_number=None,
                       verdict=f"{STALE} ({stale.reason}; rerun: `{stale.rerun}`)")
    return replace(row, protocol=klass)


@register("measured-runs", "all papers", "Stored paper-scale runs (figures/measured/*.json) against the published "
          "numbers", kind="measured")
def measured_target(ctx: Context) -> Section:
    """The stored paper-scale runs of ``figures/measured`` as comparison rows (any size: nothing is computed)."""
    rows, table = measured_rows()
    stores = load_stores()
    rows += store_rows(stores=stores)
    paper_scale, cells = campaign_rows(data_dir=ctx.data_dir)
    rows += paper_scale
    folder = ctx.folder("measured-runs")
    files = [write_rows(rows, folder / "comparison.csv")] if rows else []
    n_runs, cpu_hours = _campaign_compute()
    intro = (f"Runs at the papers' sizes kept in `figures/measured/`: {n_runs} campaign run files "
             f"({cpu_hours:.1f} CPU-hours as recorded; `python paper_repro.py --campaign run`), "
             f"{len(load_runs())} single run file(s) of `python -m nets run --json --history` (commands in "
             "`figures/measured/README.md`) and "
             f"{len(stores)} paper-scale sweep store(s) (`figures/measured/<name>/store`), judged against the "
             "paper's claim about the figure, one row per curve. Each row's note gives its seeds, command and "
             "protocol (the cell's ledger in `figures/published/protocols/`). These runs are not recomputed by "
             "`paper_repro.py`.")
    notes = [f"**{r.item}**: {r.note}" for r in rows if r.note]  # seeds, command, protocol differences
    return build_section("Stored paper-scale runs", intro, "measured-runs", [], rows, files, notes,
                         extra=_store_figures(folder, stores) + "\n\n" + _campaign_table(paper_scale, cells))


def _store_figures(folder: Path, stores: list[dict]) -> str:
    """The committed figures of the stored paper-scale sweeps (IFCA Fig. 3 at the public code's full grids), copied
    beside the section so that the report shows them: one Markdown image line each."""
    import shutil

    lines = []
    for st in stores:
        m = _FIG3_STORE.match(st["name"])
        src = Path(st["store"]).parent
        for png in sorted(src.glob("*.png")):
            dst = Path(folder) / src.name / png.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, dst)
            what = "phase diagram" if png.name.startswith("phase") else "success curves"
            label = f"IFCA Fig. 3({m.group(1)})" if m else st["name"]
            n = len(st["records"])
            lines.append(f"![{label} at paper scale ({n} data seeds, the public code's grid): {what}]"
                         f"(measured-runs/{src.name}/{png.name})")
    return "\n\n".join(lines)


def _campaign_compute(folder: Path = HERE) -> tuple[int, float]:
    """(campaign run files, their CPU-hours as recorded) under ``folder``."""
    n, seconds = 0, 0.0
    for path in folder.glob("*/*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(data, dict) and data.get("campaign") == 1:
            n += 1
            cpu = data.get("cpu_seconds")
            seconds += float(cpu) if isinstance(cpu, (int, float)) and math.isfinite(cpu) else 0.0
    return n, seconds / 3600


# the order of the paper-scale table: what disagrees first, then what the seeds cannot settle, then agreement
_ORDER = ("differs", "not resolved", "agrees", "shown", "stale", "paper value suspect")


def _campaign_table(rows: list[Row], cells: list[dict]) -> str:
    """The campaign's paper-scale numbers: reproduced mean ± std against the paper's, the verdict and the protocol
    class, differences first."""
    if not cells:
        return ("**Paper-scale campaign**: no run stored yet (`python paper_repro.py --campaign plan` lists the cells "
                "and their cost: `figures/measured/campaign.csv`).")
    numbers = {c["pub"].source() for c in cells}
    lines = [f"**Paper-scale campaign** (`python paper_repro.py --campaign run`; manifest "
             f"`figures/measured/campaign.csv`): {len(numbers)} published numbers with stored runs ({len(cells)} "
             "rows; a value scored under a second protocol has a second row, shown and not counted). Verdicts "
             "(`figures/verdicts/rules.py`): *agrees* = shown equivalent within the paper's ± and its rounding (TOST, "
             "Holm over the table); *differs* = a significant difference outside it (Welch, Holm); *not resolved* = "
             "neither, with the smallest gap the seeds could detect; *shown* = fewer than 3 seeds, no verdict; "
             "*stale* = runs of a protocol since corrected; *paper value suspect* = a likely misprint. Protocol: "
             "*same* = the paper's setting in every setting it states; *deviates* = declared deviations (the "
             "row's note and the cell's ledger).", "",
             "| number | paper | reproduced | difference | verdict | protocol |", "|---|---|---|---|---|---|"]
    order = sorted(cells, key=lambda c: (_ORDER.index(head(rows[c["row"]].verdict))
                                         if head(rows[c["row"]].verdict) in _ORDER else len(_ORDER), c["row"]))
    for c in order:
        r = rows[c["row"]]
        counted = "" if r.counted else " (second protocol, not counted)"
        lines.append(f"| {r.item} | {r.paper} | {r.reproduced} | {r.difference} | {r.verdict}{counted} | "
                     f"{r.protocol or 'no ledger'} |")
    return "\n".join(lines)
