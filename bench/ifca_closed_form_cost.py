#!/usr/bin/env python
"""What a closed-form partition costs in rounds of one IFCA run, measured against ClosedForm's formula.

    python bench/ifca_closed_form_cost.py [--json OUT]

At the four Fig. 3 shapes (d = 1000, float32, one BLAS thread): the time of one round of a 30-run stack per run
(``GLMBackend.losses_and_weighted_gradients``, IFCA journal Alg. 2 option I), and the time of one partition
(``cluster_quadratics`` on the true partition plus one ``eigh`` per group).  Their ratio is the number of
run-rounds a partition is worth; ``synth.algorithms.closed_form.ClosedForm.cost_ratio`` is its flop-count
estimate (rent or buy: a partition is computed once the runs asking for it have spent that many rounds).
Timings are benchmarks: nothing here is asserted by the tests.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = ((100, 100, 2), (200, 50, 2), (400, 100, 4), (800, 200, 4))  # (m, n, k) of grids a, c, b, d


def _main(argv: list[str]) -> int:
    from synth.cli import CleanParser

    ap = CleanParser(prog="ifca_closed_form_cost.py", allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from synth.algorithms.closed_form import ClosedForm
    from synth.algorithms.ifca import _one_hot_argmin
    from synth.federation import MixedLinearRegression

    rows = []
    for m, n, k in SHAPES:
        fed = MixedLinearRegression(K=k, clients_per_cluster=m // k, n=n, d=1000, sigma=0.1, R=0.5,
                                    dtype=np.float32).sample(0)
        be = fed.backend()
        models = np.random.default_rng(0).normal(size=(30 * k, 1000)).astype(np.float32)

        def choose(L, rows, k=k, m=m):
            return _one_hot_argmin(L, k, 1.0 / m)

        with threadpool_limits(limits=1):
            be.losses_and_weighted_gradients(models, choose)
            t = time.perf_counter()
            for _ in range(3):
                be.losses_and_weighted_gradients(models, choose)
            run_round = (time.perf_counter() - t) / 3 / 30
            t = time.perf_counter()
            Q, _ = be.cluster_quadratics(fed.labels, k)
            for j in range(k):
                np.linalg.eigh(Q[j] / m)
            partition = time.perf_counter() - t
        formula = ClosedForm(be, k, 300, be.root_loss_lipschitz(), None).cost_ratio
        rows.append({"m": m, "n": n, "k": k, "run_round_ms": 1e3 * run_round, "partition_s": partition,
                     "measured_ratio": partition / run_round, "formula_ratio": formula})
        print(f"(m, n, k) = ({m}, {n}, {k}): one run-round {1e3 * run_round:.2f} ms, one partition "
              f"{partition:.2f} s: {partition / run_round:.0f} run-rounds (formula {formula:.0f})", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"command": "python bench/ifca_closed_form_cost.py", "rows": rows},
                                              indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a wrong argument, an unusable file; ``--debug`` shows the
    traceback), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("ifca_closed_form_cost.py", _main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
