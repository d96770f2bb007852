#!/usr/bin/env python
"""Where the convergence-aware IFCA Fig. 3 runs spend their iterations: run-rounds by grid, step size and end.

    python bench/ifca_run_status.py [--sample bench/results/ifca_projection_code_agreement.json] [--n-jobs J]
                                    [--json OUT]

Reruns the converged protocol (the specs' own, float32) on every data seed of a projection sample
(``bench/ifca_projection.py``'s JSON: grid, cell, trial) and sums each run's rounds by how it ended -- solved
(round 300's models in closed form), settled (the verdict's bounds), decided (the trial's verdict known),
diverged, or max_rounds (all 300) -- per grid and step size.  Iteration counts are deterministic; nothing here is timed.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENDS = ("solved", "settled", "decided", "diverged", "max_rounds")


def _runs(grid: str, cell: int, trial: int) -> dict:
    from threadpoolctl import threadpool_limits

    from synth import experiment
    from synth.montecarlo import trial_seed
    from synth.sweep import load_spec

    spec = load_spec(ROOT / "synth" / "specs" / f"ifca_fig3{grid}_full_code.toml")
    params = {k: v for k, v in spec.points[cell].items() if k != "algorithm"}
    params["seed"] = trial_seed(spec.seed, cell, trial)
    with threadpool_limits(limits=1):
        _, _, est, _ = experiment.fit_experiment(params)
    extra = est.result_.extra
    return {"grid": grid, "cell": cell, "trial": trial, "status": [str(s) for s in extra["run_status"]],
            "rounds": [int(r) for r in extra["run_rounds"]], "steps": [float(g) for g in extra["run_step_sizes"]]}


def _main(argv: list[str]) -> int:
    from bench._machine import count
    from synth.cli import CleanParser

    ap = CleanParser(prog="ifca_run_status.py", allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", default="bench/results/ifca_projection_code_agreement.json",
                    help="a projection JSON (relative paths are to the repository root)")
    ap.add_argument("--n-jobs", type=count("--n-jobs"), default=2)
    ap.add_argument("--json", default="bench/results/ifca_run_status.json",
                    help="output JSON (relative paths are to the repository root)")
    args = ap.parse_args(argv)
    if args.n_jobs < 1:
        print("ifca_run_status.py: error: --n-jobs must be >= 1", file=sys.stderr)
        return 2
    from joblib import Parallel, delayed

    keys = [(r["grid"], r["cell"], r["trial"]) for r in json.loads((ROOT / args.sample).read_text())["trials"]]
    runs = Parallel(n_jobs=args.n_jobs)(delayed(_runs)(*k) for k in keys)
    table: dict = defaultdict(lambda: defaultdict(int))
    for r in runs:
        for status, rounds, step in zip(r["status"], r["rounds"], r["steps"], strict=True):
            table[f"{r['grid']} step {step:g}"][status] += rounds
            table[f"{r['grid']} step {step:g}"]["all"] += rounds
    summary = {k: dict(v) for k, v in sorted(table.items())}
    total = sum(v["all"] for v in summary.values())
    print(f"{'grid, step':14s} {'all':>8s} {'share':>6s}  " + "  ".join(
        f"{s:>10s}" for s in ENDS))
    for k, v in summary.items():
        print(f"{k:14s} {v['all']:8d} {v['all'] / total:6.1%}  " + "  ".join(
            f"{v.get(s, 0):10d}" for s in ENDS))
    command = " ".join(["python bench/ifca_run_status.py", *sys.argv[1:]])
    (ROOT / args.json).write_text(json.dumps({"command": command, "sample": args.sample,
                                           "run_rounds": summary, "trials": runs}, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a wrong argument, an unusable file; ``--debug`` shows the
    traceback), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("ifca_run_status.py", _main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
