#!/usr/bin/env python
"""The fused kernel with guessed models against GEMM, over model-stack sizes: the backend's dispatch rule.

    python bench/fused_guessed.py [--shapes 100x100,400x100,800x50] [--ks 2,4] [--stacks 8,12,16,20,24,32]
                                  [--reps 5] [--json OUT]

IFCA's stacked restarts (IFCA journal Alg. 2, restarts of Sec. VI-A) weight each client on one model per
restart of ``k`` models.  Once those models have held for two passes, the fused kernel forms only their
gradients (``M`` dot products and ``M / k`` axpys per row instead of ``M`` of each).  For each float32 shape
``(m clients, n samples)`` at d = 1000, each ``k`` and each stack of ``M`` models (``M / k`` restarts, fixed
random models, so every client's choice holds), one ``losses_and_weighted_gradients`` call is timed, one BLAS
thread, the best of ``--reps``, on three paths: ``numpy`` (GEMM), ``fused`` without guesses, ``fused`` with
them.  ``synth/backend.py``'s ``_FUSED_GUESSED_MAX_MODELS`` rests on these numbers.  Timings are benchmarks:
nothing here is asserted by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _time(fn, reps: int) -> float:
    best = np.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _one_hot_runs(k: int, M: int, m: int):
    """IFCA's identity weights: per client, 1/m on its lowest-loss model in each restart of k models."""
    def choose(L, rows):
        W = np.zeros_like(L)
        best = L.reshape(len(L), M // k, k).argmin(2)
        W.reshape(len(L), M // k, k)[np.arange(len(L))[:, None], np.arange(M // k)[None, :], best] = 1.0 / m
        return W
    return choose


def _measure(GLMBackend, fed, models, choose, reps: int) -> dict:
    """One pass on each path, best of ``reps``: numpy (GEMM), fused without guesses, fused with them."""
    out = {}
    for path in ("numpy", "fused", "fused_guessed"):
        be = GLMBackend(fed, kernel="numpy" if path == "numpy" else "fused")
        if path == "numpy":
            def call(be=be):
                be.losses_and_weighted_gradients(models, choose)
        elif path == "fused":  # never a guess: every client forms all M gradients
            def call(be=be):
                be._guesses.clear()
                be._fused_pass(models, choose, None)
        else:
            be._fused_pass(models, choose, None)
            be._fused_pass(models, choose, None)  # two equal passes: the guesses hold

            def call(be=be):
                be._fused_pass(models, choose, None)
        call()
        out[f"{path}_ms"] = 1e3 * _time(call, reps)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="100x100,400x100,800x50", help="comma list of m x n (d = 1000)")
    ap.add_argument("--ks", default="2,4", help="models per restart")
    ap.add_argument("--stacks", default="8,12,16,20,24,32", help="model-stack sizes M")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=None, help="write the table here")
    args = ap.parse_args(argv)
    try:
        shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
        ks = [int(v) for v in args.ks.split(",")]
        stacks = [int(v) for v in args.stacks.split(",")]
        if any(len(s) != 2 or min(s) < 1 for s in shapes) or min(ks) < 1 or min(stacks) < 1 or args.reps < 1:
            raise ValueError
    except ValueError:
        print("fused_guessed.py: error: --shapes takes MxN pairs, --ks/--stacks positive integers, --reps >= 1",
              file=sys.stderr)
        return 2

    from threadpoolctl import threadpool_limits

    import synth.backend as backend_module
    from synth.backend import GLMBackend
    from synth.federation import MixedLinearRegression

    rows = []
    with threadpool_limits(limits=1):
        for m, n in shapes:
            fed = MixedLinearRegression(K=1, clients_per_cluster=m, n=n, d=1000, sigma=0.1, theta="bernoulli-code",
                                        R=0.5, dtype=np.float32).sample(0)
            rng = np.random.default_rng(0)
            for k in ks:
                for M in stacks:
                    if M % k:
                        continue
                    models = (0.1 * rng.standard_normal((M, 1000))).astype(np.float32)
                    out = {"m": m, "n": n, "d": 1000, "k": k, "M": M,
                           **_measure(GLMBackend, fed, models, _one_hot_runs(k, M, m), args.reps)}
                    out["guessed_over_numpy"] = out["fused_guessed_ms"] / out["numpy_ms"]
                    rows.append(out)
                    print(f"m={m:4d} n={n:4d} k={k} M={M:3d}: numpy {out['numpy_ms']:7.1f} ms, fused "
                          f"{out['fused_ms']:7.1f} ms, fused with guesses {out['fused_guessed_ms']:7.1f} ms "
                          f"({out['guessed_over_numpy']:.2f}x numpy)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "command": "python bench/fused_guessed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(),
                        "load_average": list(os.getloadavg())},
            "guessed_max_models": backend_module._FUSED_GUESSED_MAX_MODELS, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
