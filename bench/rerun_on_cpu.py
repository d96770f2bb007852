#!/usr/bin/env python
"""Campaign runs made on a GPU, rerun on this machine's CPU: do the two devices compute the same numbers?

    python bench/rerun_on_cpu.py RUN.json [RUN.json ...] [--data-dir DIR] [--dtype float64] [--json OUT]

Each stored run (``figures/measured/<folder>/<algo>-<key>.json``) is rerun from its own point and seed with the
same trial function, torch on one CPU thread, float32 as stored, and its result compared field by field with the
stored one: the clustering (ARI, misclustering, clusters found) should be equal and the test accuracy and loss
equal to float32 rounding carried through training.  ``--dtype float64`` reruns in float64 instead: how far a
float32 run moves by rounding alone, carried through training (the yardstick for a GPU-CPU difference).
Prints one line per run and a table; ``--json`` keeps them.  Nothing here is asserted by the tests (a GPU is
not there).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIELDS = ("test_accuracy", "test_loss", "ari", "misclustering", "n_clusters")


def rerun(path: Path, data_dir: str | None, dtype: str | None = None) -> dict:
    """Rerun one stored run on the CPU; the stored and the rerun values of :data:`FIELDS`."""
    import torch

    from figures.campaign.provenance import device_name
    from figures.campaign.store import load_run, run_point
    from figures.trials import resolve_trial

    stored = load_run(Path(path))  # a regular file, its digest, its ranges: refused in one line naming the file
    if stored is None:
        raise ValueError(f"{path}: no such run file")
    trial_fn = resolve_trial(stored.get("trial_fn"), f"{path}: field 'trial_fn'")
    if not isinstance(stored.get("point"), dict):
        raise ValueError(f"{path}: field 'point' must be an object of the run's parameters")
    if not isinstance(stored.get("seed"), int) or isinstance(stored.get("seed"), bool) or stored["seed"] < 0:
        raise ValueError(f"{path}: field 'seed' must be a non-negative integer")
    if not isinstance(stored.get("folder"), str):
        raise ValueError(f"{path}: field 'folder' must be the run's folder name")
    point = dict(run_point(stored["point"]), device="cpu")
    if dtype is not None:
        point["dtype"] = dtype
    if data_dir is not None:
        point["data_dir"] = data_dir
    torch.set_num_threads(1)
    t0, w0 = time.process_time(), time.perf_counter()
    result = trial_fn(point, stored["seed"])
    cpu, wall = time.process_time() - t0, time.perf_counter() - w0
    old = stored.get("result") if isinstance(stored.get("result"), dict) else {}
    return {"run": f"{stored['folder']}/{path.name}", "stored_device": stored.get("device"),
            "rerun_device": device_name("cpu"), "dtype": point.get("dtype", "float32"), "cpu_seconds": cpu,
            "wall_seconds": wall,
            "stored": {k: old.get(k) for k in FIELDS}, "rerun": {k: (result or {}).get(k) for k in FIELDS}}


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a run file that is missing, unreadable or names a trial function
    outside the toolkit's registry, a wrong argument), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("rerun_on_cpu.py", _main, argv)


def _main(argv: list[str]) -> int:
    from synth.cli import CleanParser

    ap = CleanParser(prog="rerun_on_cpu.py", description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("runs", nargs="+", help="stored campaign run JSON files")
    ap.add_argument("--data-dir", default=None, help="the data directory (default: the trial's own default)")
    ap.add_argument("--dtype", default=None, choices=["float32", "float64"],
                    help="the reruns' precision (default: the stored run's)")
    ap.add_argument("--json", default=None, help="write the comparisons here")
    args = ap.parse_args(argv)
    out = []
    for p in args.runs:
        row = rerun(Path(p), args.data_dir, args.dtype)
        out.append(row)
        s, r = row["stored"], row["rerun"]
        diffs = ", ".join(f"{k} {s[k]!r} -> {r[k]!r}" for k in FIELDS if s[k] != r[k]) or "all equal"
        print(f"{row['run']}: {row['cpu_seconds']:.0f} CPU s; {diffs}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(f"\n| run | field | {out[0]['stored_device'] if out else 'stored'} | CPU rerun |\n|---|---|---|---|")
    for row in out:
        for k in FIELDS:
            print(f"| {row['run']} | {k} | {row['stored'][k]} | {row['rerun'][k]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
