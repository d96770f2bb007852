"""Up-front cost estimates: refuse a request that cannot fit in memory before any work starts.

A run that would exhaust the machine's memory is refused with the estimate in the message instead of being
killed by the kernel after minutes (or hours) of work.  The estimates are deliberately simple upper-level
counts of the arrays an experiment allocates (data, per-client losses against every model, per-round
histories, pairwise client distances) and of the records a Monte Carlo run keeps; the time estimate is a
floating-point operation count at a rate measured for the data's precision, good to an order of magnitude, and
only reported.  With ``stopping = "converged"`` a run ends once its result is known, so the estimate, which
counts every round, is an upper bound.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["ResourceError", "check_experiment", "check_memory", "experiment_cost", "format_bytes", "format_seconds",
           "memory_budget", "record_bytes"]

# Sustained rate of one core on IFCA's data passes, in the operations :func:`experiment_cost` counts, for the
# order-of-magnitude time estimate.  Measured on the 2-core EPYC: float32, d = 1000, the fixed 300 rounds of
# the Fig. 3 sample (bench/results/ifca_projection_code_agreement.json, "fixed"): 45-69 GFLOP/s, median 61;
# float64, d = 100 (synth/specs/ifca_fig3a_small.toml): 10-21 GFLOP/s.  Small problems run below these rates
# (fixed costs per trial), and SR-FCA's tiny specs far below, but finish in well under a second a trial.
FLOPS_PER_SECOND = {"float32": 5e10, "float64": 2e10}
# Python objects of one stored trial record: the record dict, its params dict (one entry per parameter) and a
# result dict of a few dozen numbers (measured with tracemalloc on synth sweep records: ~4 KiB at 60 parameters)
RECORD_BASE_BYTES = 1500
RECORD_BYTES_PER_PARAM = 50


class ResourceError(ValueError):
    """A request whose estimated memory exceeds what this machine allows (the message holds the estimate)."""


def memory_budget() -> int:
    """Bytes one run may plan to use: half the machine's physical memory (``CFLAB_MEMORY_LIMIT_MB`` overrides)."""
    env = os.environ.get("CFLAB_MEMORY_LIMIT_MB")
    if env:
        try:
            return max(1, int(float(env) * 2**20))
        except ValueError:
            raise ValueError(f"CFLAB_MEMORY_LIMIT_MB must be a number of MiB, got {env!r}") from None
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2)
    except (ValueError, OSError, AttributeError):  # pragma: no cover - platforms without sysconf
        return 8 * 2**30


def format_bytes(n: float) -> str:
    """``n`` bytes as ``'1.5 GiB'`` (an int too large for a float, from a hostile size, reads ``'inf PiB'``)."""
    try:
        n = float(n)
    except OverflowError:
        n = math.inf
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


def format_seconds(s: float) -> str:
    """A duration in the largest sensible unit (s, min, h, days, years)."""
    try:
        s = float(s)
    except OverflowError:
        s = math.inf
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s / size:.3g} {unit}"
    return f"{s:.2g} s"


def record_bytes(point: Mapping[str, Any] | None = None) -> int:
    """Estimated memory of one stored trial record whose params are ``point``."""
    return RECORD_BASE_BYTES + RECORD_BYTES_PER_PARAM * len(point or {})


def _total(value: Any, count: int) -> int:
    """Sum of an int-or-list parameter broadcast to ``count`` items."""
    if isinstance(value, (list, tuple)):
        return int(sum(value))
    return int(value) * count


def _largest(value: Any) -> int:
    return int(max(value)) if isinstance(value, (list, tuple)) else int(value)


def experiment_cost(p: Mapping[str, Any]) -> dict[str, float]:
    """Estimated peak memory (bytes), floating-point work and time of one synthetic experiment (validated params).

    Counts the federation (features drawn and stored, responses, noise, scores, client optima, Sigma and its
    Cholesky factor, per-client integer arrays), the models stacked over restarts, the per-client losses and
    assignment weights against every model, per-client local models and pairwise distances (SR-FCA, one-shot,
    CFL, CLoVE), and the per-round label history.  ``seconds`` is the work at :data:`FLOPS_PER_SECOND` for the
    data's precision; ``early_stop`` says the runs stop once their result is known (the time is then at most
    that).
    """
    K = int(p["K"])
    m = _total(p["clients_per_cluster"], K)
    n = _largest(p["n"])
    d = int(p["d"])
    algo = p.get("algo", "ifca")
    k = int(p.get("n_clusters") or K)
    steps = p.get("step_size", 0.1)
    restarts = int(p.get("n_init", 1)) * (len(steps) if isinstance(steps, list) else 1) if algo == "ifca" else 1
    if algo == "clove" and p.get("k_selection") == "silhouette":
        k = max(k, int(p.get("max_clusters", 8)))
    models = k * restarts
    rounds = int(p.get("rounds", 100))
    f8 = 8.0
    data = f8 * (2 * m * n * d + 4 * m * n + 2 * m * d + K * d + 2 * d * d) + f8 * 4 * m
    working = f8 * (4 * m * models + 2 * models * d + m * d)
    if algo in ("srfca", "oneshot-ifca", "oneshot-kmeans", "local-kmeans", "cfl", "clove", "local"):
        working += f8 * (2 * m * d + (2 * m * m if algo in ("srfca", "oneshot-ifca", "cfl") else 0))
    history = f8 * rounds * restarts * m
    flops = rounds * restarts * (2.0 * m * n * d * (k + 1)) + 2.0 * m * n * d
    if algo in ("srfca", "oneshot-ifca", "cfl"):
        flops += 2.0 * m * m * d
    rate = FLOPS_PER_SECOND["float32" if p.get("dtype") == "float32" else "float64"]
    return {"memory": data + working + history, "flops": flops, "seconds": flops / rate, "clients": m,
            "models": models, "early_stop": p.get("stopping") == "converged"}


def check_memory(need: float, what: str, *, seconds: float | None = None, hint: str = "") -> None:
    """Raise :class:`ResourceError` when ``need`` bytes exceed :func:`memory_budget`, with the estimate."""
    budget = memory_budget()
    if need <= budget or not math.isfinite(budget):
        return
    eta = f", roughly {format_seconds(seconds)} of computing" if seconds is not None else ""
    raise ResourceError(f"{what} needs about {format_bytes(need)} of memory{eta}; this machine allows "
                        f"{format_bytes(budget)} (half its memory){'; ' + hint if hint else ''}")


def check_experiment(p: Mapping[str, Any]) -> dict[str, float]:
    """:func:`experiment_cost` of validated params, refused (ResourceError) beyond the memory budget."""
    cost = experiment_cost(p)
    check_memory(cost["memory"], f"one experiment ({cost['clients']} clients, n={_largest(p['n'])}, d={p['d']}, "
                 f"{cost['models']} models, {p.get('rounds')} rounds)", seconds=cost["seconds"],
                 hint="reduce K, clients_per_cluster, n, d, n_clusters, n_init or rounds")
    return cost
