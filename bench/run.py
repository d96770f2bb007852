#!/usr/bin/env python
"""cflab benchmark suite (issue 8): ratios taken in one run, on one machine, against its own ceilings.

    python bench/run.py [--quick] [--json OUT] [--threads N] [--only SECTIONS] [--compare OLD.json]

Sections (``--only`` takes a comma list of their names):

``ceiling``   GEMM rate (float64, float32) through numpy's BLAS and the memory read bandwidth (a large
              array read once: numpy sum, BLAS ddot, BLAS dgemv and, where the fused kernel builds, a C vector
              sum by its compiler; the largest is the ceiling).
``ifca``      one synthetic IFCA gradient-averaging iteration (IFCA journal Alg. 2, option I) at
              (m, n, d, k) = (100, 100, 1000, 2) and (400, 100, 1000, 4), float64 and float32: against the
              roofline floor ``max(flops / GEMM rate, data bytes / read bandwidth)`` (target >= 50 %) on the path
              ``GLMBackend`` takes (the compiled read-once kernel of ``synth/_kernels`` where it builds), the
              other path beside it, and against the plain reference of ``bench/reference.py`` (target >= 10x).
``restarts``  IFCA Fig. 3 protocol, 10 initialisations x 3 step sizes: the 30 runs stacked as model rows of one
              computation vs 30 separate runs (target >= 5x).
``oneshot``   SR-FCA ONE_SHOT (Alg. 1) pairwise distances (l2 and the cross-cluster loss of Def. 5.1) and its
              graph step, and CLoVE's loss-vector clustering (Alg. 1 lines 7-10), at m = 1000 clients, with the
              scaling exponent of the time in m.
``montecarlo`` trials per second of ``synth.montecarlo.run_trials`` with n_jobs 1 and 2.
``nets``      rounds per second of IFCA on the torch backend, batched (vmap) vs looped clients.
``memory``    peak resident memory of the largest synthetic configuration, beside the bytes of its data.

Every timing is the median of >= 5 repeats after a warm-up; the table gives the spread (min-max) as the noise
band.  ``--compare OLD.json`` flags rows that got slower than an earlier run by more than the noise band.
Timings are benchmarks: nothing here is asserted by the test suite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.reference import reference_ifca  # noqa: E402
from bench.roofline import gemm_rate, read_bandwidth  # noqa: E402

SECTIONS = ("ceiling", "ifca", "restarts", "oneshot", "montecarlo", "nets", "memory")
IFCA_SIZES = [(100, 100, 1000, 2), (400, 100, 1000, 4)]
EXTRA_SIZES = [(100, 100, 50, 2)]  # not a target size: where per-call overhead, not memory, bounds the reference
RESTART_STEPS = {2: (0.01, 0.1, 1.0), 4: (0.5, 1.0, 2.0)}  # IFCA Sec. VI-A step sizes for k = 2 and k = 4
MIN_REPEATS = 5


# --------------------------------------------------------------------------- timing and rows
def timed(fn, repeats: int = MIN_REPEATS, warmup: int = 1) -> dict:
    """Median, min and max seconds of ``repeats`` calls of ``fn`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(repeats, MIN_REPEATS)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {"median": float(np.median(times)), "min": float(np.min(times)), "max": float(np.max(times)),
            "repeats": len(times)}


def spread(t: dict) -> float:
    """Relative noise band of a timing: (max - min) / median."""
    return (t["max"] - t["min"]) / t["median"] if t["median"] > 0 else float("nan")


def row(section: str, what: str, size: str, t: dict | None, metric: str, value: float | None,
        target: str = "", met: bool | None = None, note: str = "", unit: str = "s", per: float = 1.0,
        **extra) -> dict:
    """One table row; ``t`` is a :func:`timed` result scaled by ``1/per`` (e.g. seconds per iteration)."""
    out = {"section": section, "what": what, "size": size, "unit": unit, "metric": metric, "value": value,
           "target": target, "met": met, "note": note, **extra}
    if t is not None:
        out.update(median_s=t["median"] / per, min_s=t["min"] / per, max_s=t["max"] / per, repeats=t["repeats"],
                   noise=spread(t))
    return out


def machine_info(threads: int | None) -> dict:
    from threadpoolctl import threadpool_info

    from bench._machine import cpu_name

    cpu = cpu_name()
    mem = None
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    blas = [{k: lib.get(k) for k in ("internal_api", "version", "num_threads", "architecture")}
            for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "memory_bytes": mem, "python": platform.python_version(),
            "numpy": np.__version__, "blas": blas, "threads": threads or "library default",
            "load_average_start": os.getloadavg()}


# --------------------------------------------------------------------------- 1. ceilings
def ceilings(quick: bool) -> tuple[dict, list[dict]]:
    n_bytes = 256_000_000 if quick else 512_000_000
    bw = read_bandwidth(n_bytes, repeats=MIN_REPEATS)
    size = 1500 if quick else 2000
    rates = {"float64": gemm_rate(np.float64, size, MIN_REPEATS), "float32": gemm_rate(np.float32, size, MIN_REPEATS)}
    rows = [row("ceiling", f"GEMM {dt}", f"{size}^3", None, "GFLOP/s", rate) for dt, rate in rates.items()]
    for kernel in [k for k in ("numpy_sum", "blas_ddot", "blas_dgemv", "c_stream") if k in bw]:
        rows.append(row("ceiling", f"read {kernel}", f"{n_bytes / 1e6:.0f} MB", None, "GB/s", bw[kernel],
                        note="ceiling" if bw[kernel] == bw["ceiling"] else ""))
    return {"gemm_gflops": rates, "read_gbs": bw["ceiling"], "read": bw}, rows


# --------------------------------------------------------------------------- 2. IFCA iteration
def _federation(m, n, d, k, dtype, seed=0):
    from synth.federation import MixedLinearRegression

    return MixedLinearRegression(K=k, clients_per_cluster=m // k, n=n, d=d, sigma=0.1, R=1.0,
                                 dtype=dtype).sample(seed)


def ifca_rows(ceil: dict, quick: bool) -> list[dict]:
    cases = [(s, dt) for s in IFCA_SIZES for dt in (np.float64, np.float32)] + [(s, np.float64) for s in EXTRA_SIZES]
    rows = []
    for (m, n, d, k), dtype in cases:
        rows += _ifca_case(ceil, m, n, d, k, dtype, iters=10 if quick else 30, ref_iters=2 if quick else 5)
    return rows


def _ifca_case(ceil: dict, m: int, n: int, d: int, k: int, dtype, iters: int, ref_iters: int) -> list[dict]:
    from synth.algorithms import IFCA
    from synth.backend import GLMBackend

    name = np.dtype(dtype).name
    fed = _federation(m, n, d, k, dtype)
    be = fed.backend()  # kernel="auto": the path a user gets
    other = GLMBackend(fed, kernel="numpy" if be.kernel == "fused" else "fused") if _fused_available() else None
    init = np.random.default_rng(1).binomial(1, 0.5, size=(k, d)).astype(dtype)
    est = IFCA(n_clusters=k, n_rounds=iters, step_size=0.1, init=init, random_state=0)
    t = timed(lambda: est.fit(be))
    models_auto = est.models_.copy()
    per_iter = t["median"] / iters
    data_bytes = fed.X.nbytes + fed.y.nbytes
    flops = 2 * m * n * d * k + 2 * m * n * d  # scores of every model + one gradient per client
    mem_floor = data_bytes / (ceil["read_gbs"] * 1e9)
    flop_floor = flops / (ceil["gemm_gflops"][name] * 1e9)
    floor = max(mem_floor, flop_floor)
    size = f"({m},{n},{d},{k}) {name}"
    target = (m, n, d, k) in IFCA_SIZES
    frac = floor / per_iter
    bound = "memory" if mem_floor >= flop_floor else "compute"
    tr = timed(lambda: reference_ifca(fed.X, fed.y, fed.n_samples, init, 0.1, ref_iters))
    speedup = (tr["median"] / ref_iters) / per_iter
    rows = [
        row("ifca", f"IFCA iteration vs roofline [{be.kernel} path]", size, t, "% of roofline", 100 * frac,
            ">= 50%" if target else "", (frac >= 0.5) if target else None,
            f"floor {1e3 * floor:.2f} ms ({bound}-bound: {data_bytes / 1e6:.0f} MB, {flops / 1e9:.2f} GFLOP)",
            unit="s/iter", per=iters, floor_s=floor, mem_floor_s=mem_floor, flop_floor_s=flop_floor,
            data_bytes=data_bytes, flops=flops, kernel=be.kernel),
    ]
    if other is not None:  # the other path of GLMBackend on the same data, side by side
        to = timed(lambda: est.fit(other))
        tol = 1e-8 if name == "float64" else 1e-3
        same = np.allclose(est.models_, models_auto, rtol=tol, atol=tol)
        rows.append(row("ifca", f"IFCA iteration vs roofline [{other.kernel} path]", size, to, "% of roofline",
                        100 * floor / (to["median"] / iters), unit="s/iter", per=iters, kernel=other.kernel,
                        note=f"{(to['median'] / t['median']):.2f}x the {be.kernel} path's time; same models as "
                             f"the {be.kernel} path: {'yes' if same else 'NO'}"))
    rows.append(row("ifca", "plain reference (loop clients x models)", size, tr, "speed-up", speedup,
                    ">= 10x" if target else "", (speedup >= 10) if target else None,
                    f"reference at {100 * floor / (tr['median'] / ref_iters):.0f}% of roofline"
                    + ("" if target else "; not a target size"), unit="s/iter", per=ref_iters))
    return rows


def _fused_available() -> bool:
    from synth import _kernels

    return _kernels.load() is not None


# --------------------------------------------------------------------------- 3. restarts
def restart_rows(quick: bool) -> list[dict]:
    sizes = [(100, 100, 1000, 2)] if quick else [(100, 100, 1000, 2), (400, 100, 1000, 4)]
    rows = []
    for (m, n, d, k) in sizes:
        rows += _restart_case(m, n, d, k, iters=(5 if quick else 20) if k == 2 else 3)
    return rows


def _restart_case(m: int, n: int, d: int, k: int, iters: int) -> list[dict]:
    from synth.algorithms import IFCA, DivergenceError

    steps = RESTART_STEPS[k]
    n_init = 10
    fed = _federation(m, n, d, k, np.float64)
    be = fed.backend()
    inits = np.random.default_rng(2).binomial(1, 0.5, size=(n_init, k, d)).astype(np.float64)
    stacked = IFCA(n_clusters=k, n_rounds=iters, step_size=list(steps), n_init=n_init, init=inits, random_state=0)
    singles = [IFCA(n_clusters=k, n_rounds=iters, step_size=g, init=inits[i], random_state=0)
               for i in range(n_init) for g in steps]
    diverged = np.zeros(len(singles), dtype=bool)

    def separate():
        for r, est in enumerate(singles):
            try:
                est.fit(be)
            except DivergenceError:  # a lone run that diverges stops early: this only favours "separate"
                diverged[r] = True

    ts = timed(lambda: stacked.fit(be))
    tsep = timed(separate)
    # the stacked computation is the same 30 runs: check it before the timing means anything
    ok = ~diverged & ~stacked.result_.extra["diverged"]
    sep_models = np.stack([est.models_ for r, est in enumerate(singles) if ok[r]])
    same = np.allclose(stacked.result_.extra["models_all"][ok], sep_models, rtol=1e-8, atol=1e-10)
    speedup = tsep["median"] / ts["median"]
    R = len(singles)
    flops = 2 * m * n * d * R * k + 2 * m * n * d * R  # scores of all R k models + one gradient per client and run
    size = f"({m},{n},{d},{k}) float64, {R} runs"
    return [
        row("restarts", f"{R} runs stacked", size, ts, "GFLOP/s", flops / (ts["median"] / iters) / 1e9,
            note=f"{flops / 1e9:.2f} GFLOP/iter", unit="s/iter", per=iters),
        row("restarts", f"{R} runs separately", size, tsep, "speed-up", speedup, ">= 5x", speedup >= 5,
            "stacked == separate: " + ("yes" if same else "NO (results differ)")
            + (f"; {int(diverged.sum())} lone runs diverged" if diverged.any() else ""), unit="s/iter", per=iters),
    ]


# --------------------------------------------------------------------------- 4. ONE_SHOT and CLoVE
def _exponent(ms, secs) -> float:
    """Least-squares slope of log(seconds) against log(m)."""
    return float(np.polyfit(np.log(ms), np.log(secs), 1)[0])


ONESHOT_KINDS = ("ONE_SHOT l2 distances", "ONE_SHOT cross-cluster distances", "ONE_SHOT graph components",
                 "CLoVE k-means clustering", "CLoVE agglomerative clustering")


def _oneshot_times(m: int, n: int, d: int, K: int) -> dict[str, dict]:
    from synth.algorithms.clove import cluster_vectors, loss_vectors, match_clusters
    from synth.algorithms.srfca import client_distances, one_shot

    fed = _federation(m, n, d, K, np.float64, seed=3)
    be = fed.backend()
    local = be.local_models("erm")
    D = client_distances(be, local, "l2")
    lam = float(np.median(D))  # a threshold that leaves a non-trivial graph
    models = fed.theta + 0.3 * np.random.default_rng(4).standard_normal(fed.theta.shape)
    L = be.losses(models)

    def clove(method):
        V = loss_vectors(L, False)
        clusters = cluster_vectors(V, K, method, seed=0, n_init=10)
        return match_clusters(clusters, L, K)[clusters]

    return dict(zip(ONESHOT_KINDS, [timed(lambda: client_distances(be, local, "l2")),
                                    timed(lambda: client_distances(be, local, "cross")),
                                    timed(lambda: one_shot(D, lam, 2)),
                                    timed(lambda: clove("kmeans")),
                                    timed(lambda: clove("agglomerative"))], strict=True))


def oneshot_rows(quick: bool) -> list[dict]:
    ms = [250, 500, 1000] if quick else [250, 500, 1000, 2000]
    n, d, K = 100, 50, 4
    kinds = list(ONESHOT_KINDS)
    times: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for m in ms:
        for kind, t in _oneshot_times(m, n, d, K).items():
            times[kind].append(t)
    rows = []
    at = ms.index(1000)
    for kind in kinds:
        secs = [t["median"] for t in times[kind]]
        expo = _exponent(ms, secs)
        ratios = ", ".join(f"{secs[i + 1] / secs[i]:.2f}" for i in range(len(ms) - 1))
        rows.append(row("oneshot", kind, f"m=1000, n={n}, d={d}, K={K}", times[kind][at], "exponent in m", expo,
                        note=f"t(2m)/t(m) over m={ms}: {ratios}",
                        seconds_by_m={str(m): s for m, s in zip(ms, secs, strict=True)}))
    return rows


# --------------------------------------------------------------------------- 5. Monte Carlo
def _mc_point(quick: bool) -> dict:
    # IFCA Fig. 3(a) protocol at the reduced size of synth/specs/ifca_fig3a_small.toml
    return {"family": "linear", "K": 2, "clients_per_cluster": 10, "n": 50, "d": 100, "sigma": 0.1, "R": 1.0,
            "theta": "bernoulli", "init": "bernoulli", "algo": "ifca", "rounds": 100 if quick else 300,
            "step_size": [0.01, 0.1, 1.0], "n_init": 10, "averaging": "gradient"}


def montecarlo_rows(quick: bool) -> list[dict]:
    try:
        from synth.montecarlo import run_trials
        from synth.sweep import experiment_trial
    except ImportError as exc:
        return [row("montecarlo", "run_trials", "", None, "trials/s", None, note=f"not available: {exc}")]
    point = _mc_point(quick)
    trials = 4
    rates, ts = {}, {}
    for n_jobs in (1, 2):
        ts[n_jobs] = timed(lambda n_jobs=n_jobs: run_trials(experiment_trial, [point], trials, 0, n_jobs=n_jobs,
                                                            progress=False))
        rates[n_jobs] = trials / ts[n_jobs]["median"]
    eff = rates[2] / (2 * rates[1])
    size = f"IFCA fig3a-small, {point['rounds']} rounds x 30 runs, {trials} trials/batch"
    return [row("montecarlo", "run_trials n_jobs=1", size, ts[1], "trials/s", rates[1]),
            row("montecarlo", "run_trials n_jobs=2 (loky)", size, ts[2], "trials/s", rates[2],
                note=f"parallel efficiency {100 * eff:.0f}% (rate2 / (2 rate1)); workers started in the warm-up")]


# --------------------------------------------------------------------------- 6. nets
def nets_rows(quick: bool) -> list[dict]:
    try:
        import torch

        from bench import nets_batched as nb
        from nets.backend import TorchBackend
        from nets.device import resolve_device
        from nets.functional import FunctionalModel
        from nets.models import model_factory
        from synth.algorithms import IFCA
    except ImportError as exc:
        return [row("nets", "TorchBackend rounds", "", None, "rounds/s", None, note=f"not available: {exc}")]
    device = resolve_device("auto")
    configs = ["n100-full"]  # IFCA Table I's n = 100, full-batch local GD
    clients = 50 if quick else 100
    rows = []
    for name in configs:
        n, batch = nb.CONFIGS[name]
        X, y, what = nb.federation(n, clients, np.random.default_rng(0), None)
        model = FunctionalModel(model_factory("mlp", (1, 28, 28), 10), device=device)
        t = {}
        for batched in (True, False):
            backend = TorchBackend(model, X, y, batch_size=batch, batched=batched, seed=0,
                                   memory_budget=(2048 if device.type == "cuda" else 256) * 2**20)
            rounds = MIN_REPEATS + 1
            stamps: list[float] = []

            def stamp(r, models, labels, stamps=stamps):
                if device.type == "cuda":
                    torch.cuda.synchronize()
                stamps.append(time.perf_counter())
                return {}

            IFCA(n_clusters=4, n_rounds=rounds + 1, step_size=0.1, averaging="model", local_steps=10, init="default",
                 random_state=0, monitor=stamp).fit(backend)
            durations = np.diff(stamps)  # round 0 is the warm-up; the monitor stamps the end of every round
            t[batched] = {"median": float(np.median(durations)), "min": float(durations.min()),
                          "max": float(durations.max()), "repeats": len(durations)}
        speedup = t[False]["median"] / t[True]["median"]
        dev = str(device) + (f" ({torch.cuda.get_device_name()})" if device.type == "cuda" else
                             f", torch {torch.get_num_threads()} threads")
        size = f"{clients} clients, {name}, MLP 784-200-10, k=4, tau=10"
        rows.append(row("nets", f"IFCA round batched (vmap) [{dev}]", size, t[True], "rounds/s",
                        1 / t[True]["median"], note=what, unit="s/round"))
        rows.append(row("nets", f"IFCA round looped [{dev}]", size, t[False], "speed-up", speedup,
                        unit="s/round"))
    return rows


# --------------------------------------------------------------------------- 7. memory
MEMORY_CONFIG = (400, 100, 1000, 4)


def _memory_child(what: str) -> None:
    """Body of the child process measured by /usr/bin/time: ``none`` (imports only) or the largest config."""
    import tracemalloc

    from synth.algorithms import IFCA

    if what == "none":
        print(json.dumps({"traced_peak": 0, "data_bytes": 0}))
        return
    m, n, d, k = MEMORY_CONFIG
    tracemalloc.start()
    fed = _federation(m, n, d, k, np.float64)
    IFCA(n_clusters=k, n_rounds=3, step_size=list(RESTART_STEPS[k]), n_init=10, random_state=0).fit(fed.backend())
    _, peak = tracemalloc.get_traced_memory()
    print(json.dumps({"traced_peak": peak, "data_bytes": fed.X.nbytes + fed.y.nbytes}))


def _max_rss(what: str) -> tuple[int | None, dict]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--memory-child", what]
    if Path("/usr/bin/time").exists():
        proc = subprocess.run(["/usr/bin/time", "-v", *cmd], capture_output=True, text=True, check=True)
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
        rss = int(found.group(1)) * 1024 if found else None
    else:  # pragma: no cover - depends on the system
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        rss = None
    return rss, json.loads(proc.stdout.strip().splitlines()[-1])


def memory_rows(quick: bool) -> list[dict]:
    base_rss, _ = _max_rss("none")
    rss, info = _max_rss("config")
    m, n, d, k = MEMORY_CONFIG
    data = info["data_bytes"]
    size = f"({m},{n},{d},{k}) float64, 30 runs (M = 120 model rows)"
    out = [row("memory", "peak traced allocations (tracemalloc)", size, None, "x data bytes",
               info["traced_peak"] / data, note=f"{info['traced_peak'] / 1e6:.0f} MB traced, data {data / 1e6:.0f} MB",
               peak_bytes=info["traced_peak"], data_bytes=data)]
    if rss is not None and base_rss is not None:
        out.append(row("memory", "peak RSS above interpreter + imports", size, None, "x data bytes",
                       (rss - base_rss) / data,
                       note=f"max RSS {rss / 1e6:.0f} MB - {base_rss / 1e6:.0f} MB baseline (/usr/bin/time -v)",
                       peak_bytes=rss - base_rss, data_bytes=data))
    return out


# --------------------------------------------------------------------------- output
def _fmt(v, metric: str) -> str:
    if v is None:
        return "-"
    if metric.startswith("%"):
        return f"{v:.0f}%"
    if metric == "speed-up":
        return f"{v:.2f}x"
    return f"{v:.3g}"


def _fmt_time(r: dict) -> str:
    if "median_s" not in r:
        return ""
    med = r["median_s"]
    scale, unit = (1e3, "ms") if med < 1 else (1, "s")
    per = r["unit"].split("/", 1)[1] if "/" in r["unit"] else ""
    return f"{scale * med:.3g} {unit}{'/' + per if per else ''} +-{100 * r['noise'] / 2:.0f}%"


def print_table(rows: list[dict]) -> None:
    head = f"{'section':<10} {'what':<46} {'size':<38} {'median (n>=5)':>20} {'metric':>14} {'value':>9} " \
           f"{'target':>7} {'met':>4}  note"
    print(head)
    print("-" * len(head))
    for r in rows:
        met = "" if r["met"] is None else ("yes" if r["met"] else "NO")
        print(f"{r['section']:<10} {r['what'][:46]:<46} {r['size'][:38]:<38} {_fmt_time(r):>20} "
              f"{r['metric'][:14]:>14} {_fmt(r['value'], r['metric']):>9} {r['target']:>7} {met:>4}  {r['note']}")


def markdown(result: dict) -> str:
    """The table of a stored ``--json`` result as GitHub markdown (for the README)."""
    m = result["machine"]
    blas = ", ".join(f"{b['internal_api']} {b['version']} ({b['architecture']})" for b in m["blas"])
    lines = [f"Machine: {m['cpu']}, {m['logical_cpus']} logical CPUs, {(m['memory_bytes'] or 0) / 2**30:.0f} GiB; "
             f"Python {m['python']}, numpy {m['numpy']}, {blas}; BLAS threads: {m['threads']}; load average "
             f"{m['load_average_start'][0]:.2f} at the start, {m['load_average_end'][0]:.2f} at the end; "
             f"{'--quick' if result['quick'] else 'full'} run, {result['wall_s']:.0f} s.", "",
             "| section | what | size | median (spread) | metric | value | target | met | note |",
             "|---|---|---|---|---|---|---|---|---|"]
    loads = {r["section"]: r["load_average"] for r in result["rows"] if "load_average" in r}
    if loads:
        lines.insert(1, "Load average during each section: " + ", ".join(
            f"{sec} {a:.1f}->{b:.1f}" for sec, (a, b) in loads.items()) + ".")
    for r in result["rows"]:
        met = "" if r["met"] is None else ("yes" if r["met"] else "**no**")
        lines.append(f"| {r['section']} | {r['what']} | {r['size']} | {_fmt_time(r)} | {r['metric']} | "
                     f"{_fmt(r['value'], r['metric'])} | {r['target']} | {met} | {r['note']} |")
    return "\n".join(lines)


def compare(rows: list[dict], old_path: str) -> None:
    """Note every row that got slower than in ``old_path`` by more than both runs' noise bands."""
    old = {(r["section"], r["what"], r["size"]): r for r in json.loads(Path(old_path).read_text())["rows"]}
    for r in rows:
        o = old.get((r["section"], r["what"], r["size"]))
        if not o or "median_s" not in r or "median_s" not in o:
            continue
        band = max(r["noise"], o["noise"])
        change = r["median_s"] / o["median_s"] - 1
        if change > band:
            r["note"] = (r["note"] + "; " if r["note"] else "") + \
                f"SLOWER than {Path(old_path).name} by {100 * change:.0f}% (noise band {100 * band:.0f}%)"


def _main(argv: list[str]) -> int:
    from bench._machine import count
    from synth.cli import CleanParser

    ap = CleanParser(prog="run.py", allow_abbrev=False, description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer iterations (< 10 minutes)")
    ap.add_argument("--json", default=None, metavar="OUT", help="write the rows and the machine to OUT")
    ap.add_argument("--threads", type=count("--threads"), default=None, help="BLAS threads (default: the library's)")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma list of {', '.join(SECTIONS)}")
    ap.add_argument("--compare", default=None, metavar="OLD.json", help="flag rows slower than an earlier run")
    ap.add_argument("--markdown", default=None, metavar="RESULT.json",
                    help="print the table of a stored --json result as markdown and exit (no benchmarking)")
    ap.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        _memory_child(args.memory_child)
        return 0
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return 0
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        ap.error(f"--only: unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    if args.threads is not None and args.threads < 1:
        ap.error(f"--threads must be an integer >= 1, got {args.threads}")

    # load every BLAS the sections use (scipy and scikit-learn bring their own OpenBLAS) before limiting threads
    import scipy.linalg  # noqa: F401
    import sklearn.cluster  # noqa: F401
    from threadpoolctl import threadpool_limits

    import synth.algorithms  # noqa: F401

    start = time.perf_counter()
    machine = machine_info(args.threads)
    rows: list[dict] = []
    limit = threadpool_limits(limits=args.threads, user_api="blas") if args.threads else contextlib.nullcontext()
    with limit:
        ceil, ceil_rows = ceilings(args.quick)  # the ifca section needs the ceilings, so they always run
        if "ceiling" in only or "ifca" in only:
            rows += ceil_rows
        steps = {"ifca": lambda: ifca_rows(ceil, args.quick), "restarts": lambda: restart_rows(args.quick),
                 "oneshot": lambda: oneshot_rows(args.quick), "montecarlo": lambda: montecarlo_rows(args.quick),
                 "nets": lambda: nets_rows(args.quick), "memory": lambda: memory_rows(args.quick)}
        for name in SECTIONS[1:]:
            if name in only:
                t0 = time.perf_counter()
                load0 = os.getloadavg()[0]
                try:
                    new = steps[name]()
                except Exception as exc:  # a section that breaks (e.g. an API it uses changed) is reported, not fatal
                    new = [row(name, "section failed", "", None, "", None, note=f"{type(exc).__name__}: {exc}")]
                load = (load0, os.getloadavg()[0])  # other jobs on the machine: the first thing to check in a row
                for r in new:
                    r["load_average"] = load
                rows += new
                print(f"[{name} done in {time.perf_counter() - t0:.0f} s, load average {load[0]:.2f} -> "
                      f"{load[1]:.2f}]", file=sys.stderr, flush=True)
    machine["load_average_end"] = os.getloadavg()
    if args.compare:
        compare(rows, args.compare)
    wall = time.perf_counter() - start
    print(f"machine: {machine['cpu']}, {machine['logical_cpus']} logical CPUs, numpy {machine['numpy']}, "
          f"BLAS {machine['blas']}, threads {machine['threads']}, load average "
          f"{machine['load_average_start'][0]:.2f} -> {machine['load_average_end'][0]:.2f}")
    print_table(rows)
    print(f"suite wall time {wall:.0f} s ({'quick' if args.quick else 'full'})")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine, "quick": args.quick, "wall_s": wall,
                                               "ceilings": ceil, "rows": rows}, indent=2, default=float))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a wrong argument, an unusable file; ``--debug`` shows the
    traceback), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("run.py", _main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
