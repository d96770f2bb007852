#!/usr/bin/env python
"""The CPU time of a stored sweep, re-measured on a sample of its trials, and a check that they compute the same.

    python bench/sweep_retime.py STORE [--every K] [--first N] [--json OUT]

A store's per-trial ``seconds`` are wall time: a worker that shared its core, or was paused, counts that time too,
and stores written before the trials recorded ``cpu_seconds`` have no CPU time at all.  This reruns every trial
with ``trial % K == 0`` among the store's first ``N`` records (in the order they were written: the segment to
measure), one BLAS thread, from the record's own parameters and seed, and reports the process CPU seconds, the
estimate ``K x sample CPU`` for the segment, and whether every rerun's result equals the stored one (wall-clock
fields aside).  Timings are benchmarks: nothing here is asserted by the tests.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _main(argv: list[str]) -> int:
    from threadpoolctl import threadpool_limits

    from bench._machine import count, cpu_name
    from synth.cli import CleanParser
    from synth.sweep import experiment_trial

    ap = CleanParser(prog="sweep_retime.py", allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("store")
    ap.add_argument("--every", type=count("--every"), default=5,
                    help="rerun the trials whose index is a multiple of this")
    ap.add_argument("--first", type=count("--first"), default=None,
                    help="only the store's first N records (default: all)")
    ap.add_argument("--json", default=None, help="write the per-trial timings here")
    args = ap.parse_args(argv)
    if args.every < 1:
        ap.error(f"--every must be at least 1, got {args.every}")
    path = Path(args.store) / "trials.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]  # in written order
    segment = records[: args.first] if args.first is not None else records
    sample = [r for r in segment if r["trial"] % args.every == 0]
    rows = []
    with threadpool_limits(1):
        for r in sample:
            t0, w0 = time.process_time(), time.perf_counter()
            res = experiment_trial(r["params"], r["seed"])
            cpu, wall = time.process_time() - t0, time.perf_counter() - w0
            same = ({k: v for k, v in res.items() if k != "seconds"}
                    == {k: v for k, v in r["result"].items() if k != "seconds"})
            rows.append({"point": r["point"], "trial": r["trial"], "cpu_seconds": cpu, "wall_seconds": wall,
                         "stored_wall_seconds": r.get("seconds"), "identical": same})
    cpu = sum(x["cpu_seconds"] for x in rows)
    out = {"command": "python bench/sweep_retime.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": cpu_name(), "store": str(args.store), "segment_trials": len(segment),
           "sampled_trials": len(rows), "sample_cpu_seconds": cpu,
           "segment_cpu_hours_estimate": args.every * cpu / 3600,
           "segment_stored_wall_hours": sum(float(r.get("seconds") or 0) for r in segment) / 3600,
           "all_identical": all(x["identical"] for x in rows), "trials": rows}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    print(f"{len(rows)} of {len(segment)} trials rerun: {cpu:.1f} CPU s; segment estimate "
          f"{out['segment_cpu_hours_estimate']:.2f} CPU-h (stored wall {out['segment_stored_wall_hours']:.2f} h); "
          f"results identical: {out['all_identical']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a wrong argument, an unusable file; ``--debug`` shows the
    traceback), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("sweep_retime.py", _main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
