#!/usr/bin/env python
"""Roofline check of the synthetic IFCA kernel (issue: foundation; extended by ``bench/run.py``).

    python bench/roofline.py [--iters 300] [--restart-iters 30] [--fused-threads auto,1] [--sweep | --sweep-only]
                             [--blas-threads N] [--json OUT]

Measures, in one run on this machine:

* the memory read ceiling: a large array read once, by the read kernels at hand (numpy's sum, BLAS ddot
  of the array with itself, BLAS dgemv over the array viewed as a matrix and, where the fused kernel can
  be built, its own compiler's 8-accumulator vector sum); the *largest* rate is the ceiling (the
  strictest floor);
* the matrix-product ceiling: a square GEMM through the same BLAS;
* the IFCA gradient-averaging iteration (IFCA journal Alg. 2, option I) at (m, n, d, k) =
  (100, 100, 1000, 2) and (400, 100, 1000, 4), float64 and float32, and with 30 runs stacked (IFCA Fig. 3's
  10 initialisations x 3 step sizes), timed over full fits on both paths of ``GLMBackend``: ``numpy``
  (BLAS-2/GEMM passes over cached blocks) and ``fused`` (the compiled read-once kernel of synth/_kernels).
  The path ``kernel="auto"`` takes is starred.

Floor per iteration = max(bytes of client data read once / read ceiling, flops / GEMM rate); the flops are
those of the scores of every model plus one gradient per client and run (the numpy path's count; the fused
kernel does about twice that on purpose).  ``--sweep`` times one ``losses_and_weighted_gradients`` call on
both paths over model-stack sizes: the measurement behind the backend's dispatch rule.  Prints tables with
the load average; ``--json OUT`` writes the numbers.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SIZES = [(100, 100, 1000, 2), (400, 100, 1000, 4)]
RESTART_STEPS = {2: (0.01, 0.1, 1.0), 4: (0.5, 1.0, 2.0)}  # IFCA Sec. VI-A step sizes for k = 2 and k = 4


def median_time(fn, repeats: int = 5, warmup: int = 1) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def read_bandwidth(n_bytes: int = 512_000_000, repeats: int = 5) -> dict[str, float]:
    """GB/s of the ways at hand of reading a large float64 array once."""
    a = np.ones(n_bytes // 8)
    mat = a.reshape(-1, 1000)
    v = np.ones(1000)
    out = {
        "numpy_sum": n_bytes / median_time(lambda: a.sum(), repeats) / 1e9,
        # ddot(a, a) streams the array once (both operands are the same memory)
        "blas_ddot": n_bytes / median_time(lambda: a @ a, repeats) / 1e9,
        "blas_dgemv": n_bytes / median_time(lambda: mat @ v, repeats) / 1e9,
    }
    from synth import _kernels

    lib = _kernels.load()
    if lib is not None:  # the fused kernel's own compiler and flags: numpy's sum may not be the fastest read
        out["c_stream"] = n_bytes / median_time(lambda: lib.stream_sum(a), repeats) / 1e9
    out["ceiling"] = max(out.values())
    return out


def gemm_rate(dtype, size: int = 2000, repeats: int = 5) -> float:
    """GFLOP/s of a square matrix product through numpy's BLAS."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((size, size)).astype(dtype)
    B = rng.standard_normal((size, size)).astype(dtype)
    return 2 * size**3 / median_time(lambda: A @ B, repeats) / 1e9


def _federation(m, n, d, k, dtype):
    from synth.federation import MixedLinearRegression

    return MixedLinearRegression(K=k, clients_per_cluster=m // k, n=n, d=d, sigma=0.1, R=1.0,
                                 dtype=dtype).sample(0)


def ifca_iteration(fed, k: int, iters: int, kernel: str = "auto", threads: int | None = None, runs: int = 1,
                   repeats: int = 3) -> dict:
    """Seconds per IFCA gradient-averaging iteration (a full fit of ``iters`` iterations / iters).

    ``runs = 1``: one run from a Bernoulli initialisation; ``runs = 30``: 10 initialisations x 3 step sizes
    stacked as model rows of one computation (M = 30 k).
    """
    from synth.algorithms import IFCA
    from synth.backend import GLMBackend

    m, n_max, d = fed.X.shape
    be = GLMBackend(fed, kernel=kernel, threads=threads)
    if runs == 1:
        est = IFCA(n_clusters=k, n_rounds=iters, step_size=0.1, random_state=0)
    else:
        steps = RESTART_STEPS[k]
        est = IFCA(n_clusters=k, n_rounds=iters, step_size=list(steps), n_init=runs // len(steps), random_state=0)
    per_iter = median_time(lambda: est.fit(be), repeats, warmup=1) / iters
    M = runs * k
    # scores of every client on every model + one gradient per client and run
    flops = 2 * m * n_max * d * M + 2 * m * n_max * d * runs
    path = be.kernel if be._use_fused(M) else "numpy"
    return {"seconds_per_iter": per_iter, "data_bytes": fed.X.nbytes + fed.y.nbytes, "flops": flops,
            "path": path, "models": M, "labels": est.labels_}


def _paths(fused_threads: list) -> list[tuple[str, str, int | None]]:
    from synth import _kernels

    out = [("numpy", "numpy", None)]
    if _kernels.load() is not None:
        for t in fused_threads:
            out.append((f"fused/{'auto' if t is None else t}t", "fused", t))
    return out


def ifca_rows(ceil: dict, iters: int, restart_iters: int, fused_threads: list) -> list[dict]:
    import synth.backend as backend_module
    from synth.backend import GLMBackend

    rows = []
    cases = [(s, dt, 1, iters) for s in SIZES for dt in (np.float64, np.float32)]
    cases += [((100, 100, 1000, 2), np.float64, 30, restart_iters)]
    for (m, n, d, k), dtype, runs, its in cases:
        fed = _federation(m, n, d, k, dtype)
        name = np.dtype(dtype).name
        results = {}
        for label, kernel, threads in _paths(fused_threads):
            limit = backend_module._FUSED_MAX_MODELS
            if kernel == "fused":  # time the fused kernel even where auto would not take it
                backend_module._FUSED_MAX_MODELS = 2**62
            try:
                r = ifca_iteration(fed, k, its, kernel, threads, runs)
            finally:
                backend_module._FUSED_MAX_MODELS = limit
            results[label] = r
            mem_floor = r["data_bytes"] / (ceil["read_gbs"] * 1e9)
            flop_floor = r["flops"] / (ceil["gemm_gflops"][name] * 1e9)
            floor = max(mem_floor, flop_floor)
            rows.append({"m": m, "n": n, "d": d, "k": k, "runs": runs, "M": r["models"], "dtype": name,
                         "path": label, "iters": its, "seconds_per_iter": r["seconds_per_iter"],
                         "data_bytes": r["data_bytes"], "flops": r["flops"], "mem_floor_s": mem_floor,
                         "flop_floor_s": flop_floor, "floor_s": floor,
                         "ratio_to_floor": r["seconds_per_iter"] / floor, "auto": False})
        auto = "fused/autot" if GLMBackend(fed)._use_fused(k * runs) else "numpy"
        for row in rows[-len(results):]:
            row["auto"] = row["path"] == auto
        # both paths run the same algorithm: they must end at the same clustering
        labs = [r["labels"] for r in results.values()]
        agree = all(np.array_equal(labs[0], lab) for lab in labs[1:])
        for row in rows[-len(results):]:
            row["same_labels_all_paths"] = agree
    return rows


def sweep_rows(dtype=np.float64) -> list[dict]:
    """One ``losses_and_weighted_gradients`` call with IFCA's per-run one-hot choice, numpy vs fused (forced)."""
    import synth.backend as backend_module
    from synth import _kernels
    from synth.algorithms.common import group_argmin, one_hot_runs
    from synth.backend import GLMBackend

    if _kernels.load() is None:
        return []
    out = []
    shapes = [(100, 100, 1000), (100, 100, 300), (100, 100, 100), (20, 50, 100), (100, 100, 50), (20, 25, 50),
              (40, 100, 20)]
    stacks = [(2, 1), (2, 2), (4, 1), (2, 3), (4, 2), (2, 6), (4, 3), (2, 10), (2, 30), (4, 30)]
    limit = backend_module._FUSED_MAX_MODELS
    backend_module._FUSED_MAX_MODELS = 2**62
    try:
        for m, n, d in shapes:
            fed = _federation(m, n, d, 2, dtype)
            for k, runs in stacks:
                M = k * runs
                models = np.random.default_rng(0).standard_normal((M, d)).astype(dtype)

                def choose(L, rows, k=k, m=m):
                    return one_hot_runs(group_argmin(L, k), k, 1.0 / m)

                t = {}
                for kernel in ("numpy", "fused"):
                    call = partial(GLMBackend(fed, kernel=kernel).losses_and_weighted_gradients, models, choose)
                    reps = int(min(30, max(5, 0.5 / max(median_time(call, 1), 1e-6))))
                    t[kernel] = median_time(call, reps)
                stack_kib = M * d * np.dtype(dtype).itemsize / 1024
                auto = "fused" if M <= limit else "numpy"
                out.append({"m": m, "n": n, "d": d, "M": M, "stack_kib": stack_kib, "numpy_s": t["numpy"],
                            "fused_s": t["fused"], "fused_over_numpy": t["fused"] / t["numpy"], "auto": auto})
    finally:
        backend_module._FUSED_MAX_MODELS = limit
    return out


def machine() -> dict:
    from threadpoolctl import threadpool_info

    from bench._machine import cpu_name
    from synth import _kernels

    cpu = cpu_name()
    blas = [f"{lib.get('internal_api')} {lib.get('version')} ({lib.get('num_threads')} threads)"
            for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "blas": blas, "fused": _kernels.status(), "fused_auto_threads": min(2, _kernels.blas_threads()),
            "load_average_start": os.getloadavg()}


def _main(argv: list[str]) -> int:
    from bench._machine import count
    from synth.cli import CleanParser

    ap = CleanParser(prog="roofline.py", allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=count("--iters"), default=300, help="IFCA iterations per timed fit (one run)")
    ap.add_argument("--restart-iters", type=count("--restart-iters"), default=30,
                    help="iterations per timed fit with 30 stacked runs")
    ap.add_argument("--fused-threads", default="auto",
                    help="comma list of fused-kernel thread counts to time ('auto': as the backend picks)")
    ap.add_argument("--sweep", action="store_true", help="also time both paths over model-stack sizes")
    ap.add_argument("--sweep-only", action="store_true", help="only the sweep (no ceilings, no IFCA fits)")
    ap.add_argument("--blas-threads", type=count("--blas-threads"), default=None,
                    help="run under a BLAS thread limit (1: the Monte Carlo engine's setting); default: the library's")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    for name in ("iters", "restart_iters"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be an integer >= 1, got {getattr(args, name)}")
    try:
        threads = [None if t.strip() == "auto" else int(t) for t in args.fused_threads.split(",") if t.strip()]
    except ValueError:
        ap.error(f"--fused-threads takes a comma list of 'auto' and integers >= 1, got {args.fused_threads!r}")
    if not threads or any(t is not None and t < 1 for t in threads):
        ap.error(f"--fused-threads takes a comma list of 'auto' and integers >= 1, got {args.fused_threads!r}")

    if args.blas_threads is not None and args.blas_threads < 1:
        ap.error(f"--blas-threads must be an integer >= 1, got {args.blas_threads}")
    from threadpoolctl import threadpool_limits

    with threadpool_limits(args.blas_threads, user_api="blas"):
        info = machine()
        bw, rates, rows = {}, {}, []
        if not args.sweep_only:
            bw = read_bandwidth()
            rates = {"float64": gemm_rate(np.float64), "float32": gemm_rate(np.float32)}
            rows = ifca_rows({"read_gbs": bw["ceiling"], "gemm_gflops": rates}, args.iters, args.restart_iters,
                             threads)
        sweep = sweep_rows() if args.sweep or args.sweep_only else []
    info["load_average_end"] = os.getloadavg()

    print(f"machine: {info['cpu']}, {info['cores']} CPUs, numpy {info['numpy']}, BLAS {', '.join(info['blas'])}")
    print(f"fused kernel: {'available' if info['fused']['available'] else 'NOT available'} "
          f"({info['fused']['reason']}); auto threads {info['fused_auto_threads']}")
    print("load average (1, 5, 15 min): start " + ", ".join(f"{v:.2f}" for v in info["load_average_start"])
          + "; end " + ", ".join(f"{v:.2f}" for v in info["load_average_end"]))
    if rows:
        _print_rows(bw, rates, rows)
    if sweep:
        print("\none losses_and_weighted_gradients call, IFCA one-hot per run (float64, BLAS threads as above):")
        print(f"{'m':>4} {'n':>4} {'d':>5} {'M':>4} {'stack KiB':>9} {'numpy ms':>9} {'fused ms':>9} "
              f"{'fused/numpy':>11} {'auto':>6}")
        for s in sweep:
            print(f"{s['m']:>4} {s['n']:>4} {s['d']:>5} {s['M']:>4} {s['stack_kib']:9.0f} {1e3 * s['numpy_s']:9.2f} "
                  f"{1e3 * s['fused_s']:9.2f} {s['fused_over_numpy']:11.2f} {s['auto']:>6}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "bandwidth": bw, "gemm": rates, "rows": rows, "sweep": sweep}, fh,
                      indent=2, default=str)
    return 0


def _print_rows(bw: dict, rates: dict, rows: list[dict]) -> None:
    print("read bandwidth GB/s: " + ", ".join(f"{k}={v:.1f}" for k, v in bw.items()))
    print("GEMM GFLOP/s: " + ", ".join(f"{k}={v:.1f}" for k, v in rates.items()))
    print(f"{'(m,n,d,k)':>18} {'runs':>4} {'M':>3} {'dtype':>7} {'path':>11} {'iters':>5} {'ms/iter':>8} "
          f"{'mem floor':>9} {'flop floor':>10} {'x floor':>7}  labels")
    for r in rows:
        star = "*" if r["auto"] else " "
        print(f"{str((r['m'], r['n'], r['d'], r['k'])):>18} {r['runs']:>4} {r['M']:>3} {r['dtype']:>7} "
              f"{r['path'] + star:>11} {r['iters']:>5} {1e3 * r['seconds_per_iter']:8.2f} "
              f"{1e3 * r['mem_floor_s']:9.2f} {1e3 * r['flop_floor_s']:10.2f} {r['ratio_to_floor']:7.2f}  "
              f"{'same on all paths' if r['same_labels_all_paths'] else 'DIFFER between paths'}")
    print("* the path GLMBackend(kernel='auto') takes; floors are per iteration")


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a wrong argument, an unusable file; ``--debug`` shows the
    traceback), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("roofline.py", _main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
