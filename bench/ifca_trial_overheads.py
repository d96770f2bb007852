#!/usr/bin/env python
"""Per-trial costs of the IFCA Fig. 3 projection that are not iterations: the data draw and the Lipschitz constants.

    python bench/ifca_trial_overheads.py [--sample bench/results/ifca_projection_code_agreement.json]
                                         [--reps 3] [--json OUT]

For every (m, n) shape of the projection's sample (d = 1000, float32 as the specs), one BLAS thread, the best of
``--reps``: the federation's data draw (``synth.federation._draw_data``, features drawn a block of clients at a
time) and ``GLMBackend.root_loss_lipschitz`` (a Gram and its top eigenvalue per client, which the
convergence-aware protocol computes once per trial).  Each is summed over the sample's trials and scaled as
``bench/ifca_projection.py`` scales CPU time: ``hours = 40 seeds x seconds / 2 cores / 3600``.  Timings are
benchmarks: nothing here is asserted by the tests.
"""

from __future__ import annotations

import collections
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _main(argv: list[str]) -> int:
    from bench._machine import count
    from synth.cli import CleanParser

    ap = CleanParser(prog="ifca_trial_overheads.py", allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--sample", default=str(ROOT / "bench" / "results" / "ifca_projection_code_agreement.json"))
    ap.add_argument("--reps", type=count("--reps"), default=3)
    ap.add_argument("--json", default=None, help="write the table here")
    args = ap.parse_args(argv)
    if args.reps < 1:
        print("ifca_trial_overheads.py: error: --reps must be >= 1", file=sys.stderr)
        return 2
    try:
        trials = json.loads(Path(args.sample).read_text())["trials"]
        shapes = collections.Counter((int(r["m"]), int(r["n"])) for r in trials)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"ifca_trial_overheads.py: error: --sample needs bench/ifca_projection.py's JSON ({exc})",
              file=sys.stderr)
        return 2

    from threadpoolctl import threadpool_limits

    from synth.federation import MixedLinearRegression, _draw_data

    rows, total = [], {"draw": 0.0, "lipschitz": 0.0}
    with threadpool_limits(limits=1):
        for (m, n), count in sorted(shapes.items()):
            w = np.random.default_rng(1).standard_normal((m, 1000))
            sizes = np.full(m, n)
            best = {"draw": np.inf, "lipschitz": np.inf}
            for _ in range(args.reps):
                t0 = time.perf_counter()
                _draw_data(w, sizes, "linear", 0.1, None, np.random.default_rng(5), np.float32)
                best["draw"] = min(best["draw"], time.perf_counter() - t0)
            fed = MixedLinearRegression(K=1, clients_per_cluster=m, n=n, d=1000, sigma=0.1, theta="bernoulli-code",
                                        R=0.5, dtype=np.float32).sample(0)
            for _ in range(args.reps):
                backend = fed.backend(regime="fixed")  # a fresh backend: the constants are cached per backend
                t0 = time.perf_counter()
                backend.root_loss_lipschitz()
                best["lipschitz"] = min(best["lipschitz"], time.perf_counter() - t0)
            for key in total:
                total[key] += count * best[key]
            rows.append({"m": m, "n": n, "trials": count, "draw_s": best["draw"], "lipschitz_s": best["lipschitz"]})
            print(f"m={m:4d} n={n:3d} ({count:2d} trials): draw {best['draw']:.3f} s, Lipschitz "
                  f"{best['lipschitz']:.3f} s", flush=True)
    summary = {key: {"sample_seconds": v, "projected_hours_on_2_cores": v * 40 / 2 / 3600} for key, v in total.items()}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": "python bench/ifca_trial_overheads.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                        "load_average": list(os.getloadavg())},
            "summary": summary, "rows": rows}, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a wrong argument, an unusable file; ``--debug`` shows the
    traceback), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("ifca_trial_overheads.py", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
