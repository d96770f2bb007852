#!/usr/bin/env python
"""Projected wall time of IFCA Fig. 3 at the paper's full scale, and what the convergence-aware protocol changes.

    python bench/ifca_projection.py [--grids a,b,c,d] [--variant code|text] [--cells N] [--seeds-per-cell S]
                                    [--protocols converged,fixed,float64] [--n-jobs J] [--json OUT] [--resume]
                                    [--summary-only] [--agreement-with OTHER.json ...]

The four grids are the public code's (github.com/jichan3751/ifca, ``synthetic/run_p{2,4}_{r_noise,m_n}.py``),
as the specs ``synth/specs/ifca_fig3{a,b,c,d}_full_{code,text}.toml``: 134,400 runs of 300 full-batch iterations
at d = 1000 (4,480 data seeds of 30 runs each).  The sample is stratified: one data seed per grid cell (all 30
runs of it), trial ``t = cell mod 40`` -- the very trial the sweep runs at that cell (same seed).  ``--cells N``
takes N cells per grid, evenly spaced over the grid's cell list (every cell by default: 112 data seeds);
``--seeds-per-cell S`` takes S data seeds per cell (trials ``t, t+1, ..., t+S-1`` mod 40) for a larger
verdict-agreement sample.  ``--n-jobs J`` runs J trials at once (processes, one BLAS thread each).

Each sampled trial is run under up to three protocols, one BLAS thread, as a sweep worker runs it:

``converged`` the specs' protocol: float32, ``stopping="converged"`` (each run stops at its fixed point, diverged
              runs leave at once, the data seed stops once its verdict is decided; IFCA journal Alg. 2 option I);
``fixed``     float32, every run does all 300 iterations (IFCA Sec. VI-A as written);
``float64``   the converged protocol in float64.

Projection: every cell's 40 data seeds cost what its sampled seeds cost on average (process CPU seconds, all
threads), and two cores share the trials evenly (the sweep's loky workers, one BLAS thread each):
``hours = sum_cells 40 * cpu_seconds / 2 / 3600``.  Verdict agreement: the fraction of sampled data seeds whose
success verdict (the code's closest-truth rule and the text's one-to-one rule, each) is identical under
``converged`` and ``fixed``, and under ``float32`` and ``float64``; every disagreement is listed, with the
one-sided 95 % exact (Clopper-Pearson) lower bound on the agreement rate against the 99.5 % target.
``--agreement-with`` adds the verdicts of other samples' JSON files (e.g. a larger sample of some grids) to the
agreement count, over the distinct data seeds of all files; the projection uses ``--json``'s trials only.

Results go to ``--json`` (default ``bench/results/ifca_projection_<variant>.json``), written after every trial so
that ``--resume`` continues an interrupted run.  Timings are benchmarks: nothing here is asserted by the tests.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GRIDS = ("a", "b", "c", "d")
PROTOCOLS = {"converged": {}, "fixed": {"stopping": "fixed"}, "float64": {"dtype": "float64"}}
VERDICTS = ("success_code_rule", "success_any_restart")
CORES = 2


def _cells(spec, n: int | None) -> list[int]:
    total = len(spec.points)
    if n is None or n >= total:
        return list(range(total))
    return sorted({round(i * (total - 1) / max(n - 1, 1)) for i in range(n)})


def _run(params: dict, seed: int) -> dict:
    from threadpoolctl import threadpool_limits

    from synth.sweep import experiment_trial

    with threadpool_limits(limits=1):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        rec = experiment_trial(params, seed)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    out = {k: rec[k] for k in VERDICTS}
    out.update(cpu_seconds=cpu, wall_seconds=wall, iterations=rec.get("iterations", 30 * params["rounds"]),
               param_error_best_restart=rec["param_error_best_restart"])
    return out


def _main(argv: list[str]) -> int:
    from bench._machine import count
    from synth.cli import CleanParser

    ap = CleanParser(prog="ifca_projection.py", allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--grids", default="a,b,c,d", help="comma list of a, b, c, d (default: all four)")
    ap.add_argument("--variant", choices=("code", "text"), default="code", help="theta* of the public code or text")
    ap.add_argument("--cells", type=count("--cells"), default=None,
                    help="cells per grid, evenly spaced (default: every cell)")
    ap.add_argument("--protocols", default="converged,fixed,float64", help="comma list of converged, fixed, float64")
    ap.add_argument("--json", default=None, help="output JSON (default bench/results/ifca_projection_<variant>.json)")
    ap.add_argument("--resume", action="store_true", help="keep the trials already in --json")
    ap.add_argument("--summary-only", action="store_true",
                    help="run nothing: summarise the trials already in --json (e.g. of an interrupted run)")
    ap.add_argument("--seeds-per-cell", type=count("--seeds-per-cell"), default=1,
                    help="data seeds per sampled cell (default 1)")
    ap.add_argument("--n-jobs", type=count("--n-jobs"), default=1, help="trials run at once (default 1)")
    ap.add_argument("--agreement-with", nargs="+", default=[], metavar="OTHER.json",
                    help="other samples whose verdicts join the agreement count (distinct data seeds)")
    args = ap.parse_args(argv)
    grids = [g.strip() for g in args.grids.split(",") if g.strip()]
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    bad = [g for g in grids if g not in GRIDS] + [p for p in protocols if p not in PROTOCOLS]
    if bad or "converged" not in protocols or (args.cells is not None and args.cells < 1):
        print(f"ifca_projection.py: error: bad --grids/--protocols/--cells ({bad or args.cells}); "
              f"grids from {GRIDS}, protocols from {tuple(PROTOCOLS)} including converged, cells >= 1",
              file=sys.stderr)
        return 2
    if not 1 <= args.seeds_per_cell <= 40 or args.n_jobs < 1:
        print("ifca_projection.py: error: --seeds-per-cell must be in [1, 40] and --n-jobs >= 1", file=sys.stderr)
        return 2

    from synth.montecarlo import trial_seed
    from synth.sweep import load_spec

    out = Path(args.json or ROOT / "bench" / "results" / f"ifca_projection_{args.variant}.json")
    done = {}
    if (args.resume or args.summary_only) and out.exists():
        done = {(r["grid"], r["cell"], r["trial"]): r for r in json.loads(out.read_text())["trials"]}
    try:
        others = [json.loads(Path(f).read_text())["trials"] for f in args.agreement_with]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"ifca_projection.py: error: --agreement-with needs this script's JSON files ({exc})", file=sys.stderr)
        return 2
    if args.summary_only:
        rows = [r for r in done.values() if r["grid"] in grids and "converged" in r]
        summary = _summary(rows, protocols)
        if others:
            summary["agreement_with_other_samples"] = _union_agreement(rows, others, args.agreement_with)
        print(json.dumps(summary, indent=1))
        return 0
    table = dict(done)  # (grid, cell, trial) -> row; written after every trial
    keys, tasks = [], []
    start = time.perf_counter()
    for g in grids:
        spec = load_spec(ROOT / "synth" / "specs" / f"ifca_fig3{g}_full_{args.variant}.toml")
        for c in _cells(spec, args.cells):
            params = {k: v for k, v in spec.points[c].items() if k != "algorithm"}
            for j in range(args.seeds_per_cell):
                t = (c + j) % spec.trials
                row = table.setdefault((g, c, t), {
                    "grid": g, "cell": c, "trial": t, "cells_in_grid": len(spec.points),
                    "trials_per_cell": spec.trials, "point": {k: params[k] for k in spec.varying if k in params},
                    "m": params["clients_per_cluster"] * params["K"], "n": params["n"], "K": params["K"]})
                keys.append((g, c, t))
                seed = trial_seed(spec.seed, c, t)
                tasks += [((g, c, t), proto, {**params, **PROTOCOLS[proto]}, seed)
                          for proto in protocols if proto not in row]
    if tasks:
        from joblib import Parallel, delayed

        # results stream back as they finish and are written at once: an interrupted run keeps them (--resume)
        results = Parallel(n_jobs=args.n_jobs, return_as="generator_unordered")(
            delayed(_task)(key, proto, params, seed) for key, proto, params, seed in tasks)
        for key, proto, res in results:
            table[key][proto] = res
            _write(out, list(table.values()))
            row = table[key]
            if all(p in row for p in protocols):
                conv = row["converged"]
                print(f"[{key[0]}] cell {key[1]:3d} trial {key[2]:2d} m={row['m']:4d} n={row['n']:3d} {row['point']}: "
                      f"converged {conv['cpu_seconds']:6.1f} s cpu, {conv['iterations']:5d} iterations"
                      + "".join(f"; {p} {row[p]['cpu_seconds']:6.1f} s" for p in protocols if p != "converged"),
                      flush=True)
    rows = [table[k] for k in dict.fromkeys(keys)]
    summary = _summary(rows, protocols)
    if others:
        summary["agreement_with_other_samples"] = _union_agreement(rows, others, args.agreement_with)
    _write(out, list(table.values()), summary, time.perf_counter() - start)
    print(json.dumps(summary, indent=1))
    return 0


def _task(key: tuple, proto: str, params: dict, seed: int) -> tuple[tuple, str, dict]:
    return key, proto, _run(params, seed)


def _summary(rows: list[dict], protocols: list[str]) -> dict:
    from synth.intervals import wilson

    s: dict = {"sampled_data_seeds": len(rows), "runs_per_seed": 30, "cores": CORES, "per_grid": {}}
    total = {p: 0.0 for p in protocols}
    partial: dict[str, list[str]] = {}  # protocol -> grids where some sampled seed lacks it
    for g in GRIDS:
        rs = [r for r in rows if r["grid"] == g]
        if not rs:
            continue
        cells = rs[0]["cells_in_grid"]
        per = {}
        for p in protocols:
            # the sampled data seeds stand for all cells x trials of the grid: scale their mean cost
            rp = [r for r in rs if p in r]
            if len(rp) < len(rs):
                partial.setdefault(p, []).append(g)
            if not rp:
                continue
            cpu = sum(r[p]["cpu_seconds"] for r in rp) / len(rp) * cells * rs[0]["trials_per_cell"]
            per[p] = {"projected_hours_on_2_cores": cpu / CORES / 3600, "data_seeds": len(rp),
                      "iterations_fraction": sum(r[p]["iterations"] for r in rp) / (len(rp) * 30 * 300)}
            total[p] += cpu / CORES / 3600
        s["per_grid"][g] = {"cells": cells, "sampled_cells": len({r["cell"] for r in rs}),
                            "sampled_data_seeds": len(rs), **per}
    # a protocol run on part of the sample has no total: its grids' means stand on fewer seeds, or are missing
    s["projected_hours_all_grids_on_2_cores"] = {p: (None if p in partial else h) for p, h in total.items()}
    s["protocols_on_part_of_the_sample"] = partial
    s["grids_sampled"] = sorted({r["grid"] for r in rows})
    for other in ("fixed", "float64"):
        if other not in protocols:
            continue
        both = [r for r in rows if "converged" in r and other in r]
        for v in VERDICTS:
            same = [r["converged"][v] == r[other][v] for r in both]
            s[f"agreement_converged_vs_{other}_{v}"] = sum(same) / len(same)
            lo, hi = wilson(sum(same), len(same), 0.95)
            s[f"agreement_converged_vs_{other}_{v}_count"] = f"{sum(same)}/{len(same)} (95% Wilson {lo:.4f}-{hi:.4f})"
            s[f"agreement_converged_vs_{other}_{v}_lower_95"] = _lower_95(sum(same), len(same))
            s[f"disagreements_converged_vs_{other}_{v}"] = [
                {"grid": r["grid"], "cell": r["cell"], "trial": r["trial"], "point": r["point"],
                 "converged": r["converged"][v], other: r[other][v],
                 "dist_converged": r["converged"]["param_error_best_restart"],
                 f"dist_{other}": r[other]["param_error_best_restart"]}
                for r, ok in zip(both, same, strict=True) if not ok]
    return s


def _lower_95(agree: int, n: int, alpha: float = 0.05) -> float:
    """One-sided exact (Clopper-Pearson) lower bound, level ``1 - alpha``, on an agreement rate: ``agree`` of ``n``
    (the lower end of the two-sided interval at confidence ``1 - 2 alpha``)."""
    from synth.intervals import clopper_pearson

    return float(clopper_pearson(agree, n, 1.0 - 2.0 * alpha)[0])


def _union_agreement(rows: list[dict], others: list[list[dict]], names: list[str]) -> dict:
    """Converged-vs-fixed agreement over the distinct data seeds of this sample and ``others``.

    A seed in several files counts once; its verdicts must be the same in each (the protocols are deterministic),
    else it is listed as inconsistent and counted as a disagreement.  The pooled bound treats the seeds as one
    sample; where grids are sampled unevenly, ``grid_weighted_lower_95`` bounds the agreement over all the grids'
    data seeds: each grid's exact bound at level ``1 - 0.05 / grids`` (all hold at once with probability at least
    95 %), weighted by the grid's number of data seeds.
    """
    seen: dict[tuple, dict] = {}
    inconsistent = []
    size: dict[str, int] = {}  # grid -> its data seeds (cells x trials): the weights of the grid-weighted bound
    for r in [*rows, *(r for trials in others for r in trials)]:
        if "converged" not in r or "fixed" not in r:
            continue
        key = (r["grid"], r["cell"], r["trial"])
        size[r["grid"]] = r["cells_in_grid"] * r["trials_per_cell"]
        verdicts = {(p, v): r[p][v] for p in ("converged", "fixed") for v in VERDICTS}
        if key in seen and seen[key] != verdicts:
            inconsistent.append(key)
        seen.setdefault(key, verdicts)
    out: dict = {"files": names, "data_seeds": len(seen),
                 "per_grid_data_seeds": {g: sum(k[0] == g for k in seen) for g in GRIDS},
                 "inconsistent_seeds": [list(k) for k in inconsistent]}
    for v in VERDICTS:
        ok = {k: s[("converged", v)] == s[("fixed", v)] and k not in inconsistent for k, s in seen.items()}
        agree = sum(ok.values())
        lower = _lower_95(agree, len(seen))
        per_grid = {}
        for g in size:
            n_g = sum(k[0] == g for k in ok)
            a_g = sum(good for k, good in ok.items() if k[0] == g)
            # Bonferroni over the grids: every grid's bound holds at once with probability >= 95 %
            per_grid[g] = {"agree": a_g, "of": n_g, "lower_95_one_sided": _lower_95(a_g, n_g),
                           "lower_simultaneous": _lower_95(a_g, n_g, 0.05 / len(size))}
        weighted = sum(size[g] * per_grid[g]["lower_simultaneous"] for g in size) / sum(size.values())
        out[v] = {"agree": agree, "of": len(seen), "lower_95_one_sided": lower, "meets_99.5_percent": lower >= 0.995,
                  "per_grid": per_grid, "grid_weighted_lower_95": weighted}
    # with every seed agreeing, a grid's simultaneous bound is (0.05 / grids)^(1 / n): the n it takes to reach 0.995
    out["all_agreeing_seeds_per_grid_for_weighted_99.5"] = (
        math.ceil(math.log(0.05 / len(size)) / math.log(0.995)) if size else None)
    return out


def _write(out: Path, rows, summary=None, seconds=None) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    # a note on how the file's protocols were filled in survives the invocations that resume it
    kept = json.loads(out.read_text()).get("provenance") if out.exists() else None
    doc = {"command": "python bench/ifca_projection.py " + " ".join(sys.argv[1:]),
           "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                       "load_average_at_write": os.getloadavg()},
           "seconds": seconds, "summary": summary, "trials": rows, **({"provenance": kept} if kept else {})}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(out)


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a wrong argument, an unusable file; ``--debug`` shows the
    traceback), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("ifca_projection.py", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
