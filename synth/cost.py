"""Up-front cost estimates: refuse a request that cannot fit in memory, or would run for longer than a stated
ceiling, before any work starts.

A run that would exhaust the machine's memory is refused with the estimate in the message instead of being
killed by the kernel after minutes (or hours) of work.  The estimates are deliberately simple upper-level
counts of the arrays an experiment allocates (data, per-client losses against every model, per-round
histories, pairwise client distances, per-client model stacks) and of the records a Monte Carlo run keeps.

Time: :func:`algorithm_work` counts each algorithm's dominant terms -- per-sample loss evaluations and
gradients of a model, floating-point work outside the data passes (k-means, pairwise distances, SVDs) and the
Python-level calls per round and local step -- and :func:`experiment_cost` prices them at rates measured on
the 2-core EPYC (good to an order of magnitude; ``tests/test_hostile_input.py`` checks every algorithm against
measured runs within a factor 10 both ways).  With ``stopping = "converged"`` a run ends once its result is
known, so the estimate, which counts every round, is an upper bound.  Command lines refuse a request estimated
above :func:`max_seconds` (``--max-hours``, default 12 h, ``CFLAB_MAX_HOURS``) with the estimate, before any
work; the ceiling is set for the duration of a command with :func:`work_ceiling`.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["DEFAULT_MAX_HOURS", "WORKER_BYTES", "ResourceError", "algorithm_work", "check_experiment",
           "check_memory", "check_time", "experiment_cost", "format_bytes", "format_seconds", "max_seconds",
           "memory_budget", "record_bytes", "work_ceiling"]

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
# Resident memory of one worker process of a parallel run before its first trial: the interpreter with numpy,
# scipy, scikit-learn, joblib and the toolkit imported (measured: 180 MB peak RSS running a small trial)
WORKER_BYTES = 180 * 2**20
# Python-level cost of one backend call or loop step of an algorithm (dispatch, small temporaries, a block loop):
# measured on the 2-core EPYC with tiny federations, where it is all the time there is (tests/test_hostile_input)
CALL_SECONDS = 40e-6
# floating-point rate of work outside the data passes (k-means on small matrices, pairwise distances, SVDs) and of
# per-client gradients (a batched matrix-vector product per client and step, far from GEMM's rate): measured in
# CPU time on the 2-core EPYC, one BLAS thread (SVDs of k-FED and PACFL about 2e9 operations/s; SR-FCA's
# trimmed-mean steps and FedSoft's local steps 3-4e9)
SMALL_FLOPS_PER_SECOND = 2e9
GRADIENT_FLOPS_PER_SECOND = 3e9
# Lloyd iterations a k-means typically takes (scikit-learn's cap is 300; runs here converge in tens)
KMEANS_ITERS = 30
# drawing one feature value of a synthetic federation (normal draw, scaling, store): measured 15-25 ns
DRAW_SECONDS = 2e-8
# the default time ceiling: twice the longest single command of the papers' reproduction (an IFCA Fig. 3 grid at
# the fixed 300 iterations, about 6 h on 2 cores)
DEFAULT_MAX_HOURS = 12.0
_CEILING: contextvars.ContextVar[float | None] = contextvars.ContextVar("cflab_work_ceiling", default=None)


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


def max_seconds() -> float:
    """The time ceiling of one request, in seconds: :func:`work_ceiling`'s, else ``$CFLAB_MAX_HOURS``, else 12 h."""
    hours = _CEILING.get()
    if hours is None:
        env = os.environ.get("CFLAB_MAX_HOURS")
        try:
            hours = float(env) if env else DEFAULT_MAX_HOURS
        except ValueError:
            raise ValueError(f"CFLAB_MAX_HOURS must be a number of hours, got {env!r}") from None
    return hours * 3600.0


@contextlib.contextmanager
def work_ceiling(hours: float | None = None) -> Iterator[None]:
    """Within the block, requests are checked against ``hours`` (``None``: $CFLAB_MAX_HOURS or 12 h); command lines
    run their work inside one (``--max-hours``), Python callers that want the check may too."""
    if hours is None:
        hours = max_seconds() / 3600.0
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not hours > 0:
        raise ValueError(f"max_hours must be a number of hours > 0, got {hours!r}")
    token = _CEILING.set(float(hours))
    try:
        yield
    finally:
        _CEILING.reset(token)


def ceiling_active() -> bool:
    """Whether a :func:`work_ceiling` is in force (a command line's request is being checked)."""
    return _CEILING.get() is not None


def check_time(seconds: float, what: str, *, hint: str = "", flag: str = "--max-hours") -> None:
    """Raise :class:`ResourceError` when ``seconds`` exceed :func:`max_seconds`, with the estimate and the flag that
    raises the ceiling."""
    limit = max_seconds()
    if not seconds > limit:
        return
    need = math.ceil(float(min(seconds, 1e300)) / 3600.0 * 1.5) if math.isfinite(seconds) else None
    allow = f"pass {flag} {need} to run it anyway" if need is not None and need < 1e12 else "it cannot finish"
    raise ResourceError(f"{what} is estimated at roughly {format_seconds(seconds)} of computing, above the "
                        f"{format_seconds(limit)} ceiling{'; ' + hint if hint else ''}; {allow}")


def algorithm_work(algo: str, m: int, n: int, P: int, *, rounds: int, k: int = 2, restarts: int = 1,
                   local_steps: int = 10, batch: int | None = None, averaging: str = "gradient",
                   participation: float = 1.0, features: int | None = None, hyper: Mapping[str, Any] | None = None,
                   local_gd_steps: int | None = None) -> dict[str, float]:
    """The dominant terms of one fit of ``algo`` on ``m`` clients of ``n`` samples and ``P`` model parameters.

    Returns ``eval`` (per-sample loss evaluations of a model), ``grad`` (per-sample gradients of a model),
    ``grad_fused`` (gradients formed from a loss pass's scores, IFCA's fused pass), ``flops`` (floating-point
    work outside the data passes), ``calls`` (backend calls and local steps, each with
    a Python-level cost), ``lib_calls`` (the same cost in library calls, such as k-means, outside the backend)
    and ``memory`` (bytes of model stacks and pairwise matrices beyond the data, float64).
    ``batch`` is a local step's minibatch (``None``: the client's ``n`` samples); ``features`` the dimension of
    a client's data points (k-FED, PACFL); ``hyper`` the algorithm's own settings by their flag names
    (``kmeans_n_init``, ``n_refine``, ``trmean_steps``, ``dist``, ``max_clusters``, ``fesem_warmup``,
    ``flexcfl_alpha``, ``flexcfl_pretrain``, ``pacfl_p``, ``kfed_local_clusters``, ``meta_variant``,
    ``fedsoft_interval``, ``local``); ``local_gd_steps`` the gradient steps of clients' own models (``None``:
    exact least squares).
    """
    h = dict(hyper or {})
    T, tau = int(rounds), int(local_steps)
    B = n if batch is None else min(int(batch), n)
    mp = max(1, int(round(participation * m)))
    D = features or P
    f8 = 8.0
    model_round = mp * (tau * B if averaging == "model" else n)  # one round of FedAvg / gradient averaging
    steps = tau if averaging == "model" else 1
    # ``client_stacks``: the part of ``memory`` that is stacks of one model per client (nets trains those chunk by
    # chunk, so only the finished stack and its float64 copy are held, see nets.experiment.work_cost)
    work = {"eval": 0.0, "grad": 0.0, "grad_fused": 0.0, "flops": 0.0, "calls": 0.0, "lib_calls": 0.0,
            "memory": 0.0, "client_stacks": 0.0}
    per_client_models = f8 * 2 * m * P  # a stack of one model per client and its float64 copy
    kmeans_init = int(h.get("kmeans_n_init", 10))

    def local_models() -> None:
        if local_gd_steps is None:  # exact ERM: one d x d system per client
            work["flops"] += m * (2.0 * n * P * P + P**3 / 3.0)
            work["calls"] += 2
        else:
            work["grad"] += float(m) * B * local_gd_steps
            work["calls"] += local_gd_steps
        work["memory"] += per_client_models
        work["client_stacks"] += per_client_models

    def train_clusters(clusters: int) -> None:
        work["grad"] += T * float(model_round)
        work["calls"] += T * (2 + steps) + clusters

    def kmeans(points: float, dim: float, clusters: int, inits: int = kmeans_init, times: int = 1) -> None:
        # scikit-learn's k-means costs about 1.5 ms an initialisation on tiny inputs (25 calls' worth)
        work["flops"] += times * inits * KMEANS_ITERS * 3.0 * points * dim * clusters
        work["lib_calls"] += times * (inits * 25 + 5)

    if algo in ("ifca", "global"):
        kk, R = (1, 1) if algo == "global" else (k, restarts)
        work["eval"] += T * float(R) * kk * mp * n
        # gradient averaging: the gradient reuses the loss pass's scores (one fused pass per round)
        work["grad_fused" if averaging == "gradient" else "grad"] += T * float(R) * model_round
        work["calls"] += T * (3 + steps)
        work["memory"] += f8 * (4 * m * R * kk + 2 * R * kk * P) + f8 * T * R * m
    elif algo == "local":
        local_models()
    elif algo in ("oneshot-kmeans", "local-kmeans"):
        local_models()
        kmeans(m, P, k)
        train_clusters(k)
    elif algo == "oneshot-ifca":
        local_models()
        work["flops"] += 3.0 * m * m * P
        work["memory"] += f8 * 3 * m * m
        work["eval"] += T * float(k) * mp * n
        work["grad"] += T * float(model_round)
        work["calls"] += T * (3 + steps)
    elif algo == "srfca":
        local_models()
        refine, trm = int(h.get("n_refine", 2)), int(h.get("trmean_steps", 50))
        clusters = max(1, m // max(1, int(h.get("min_size", 2))))
        if h.get("dist", "l2") == "cross":
            work["eval"] += float(m) * m * n
        work["flops"] += 3.0 * m * m * P + refine * trm * 2.0 * m * P * math.log2(m + 1)
        work["grad"] += refine * trm * float(m) * n
        work["eval"] += refine * float(clusters) * m * n
        work["calls"] += refine * (trm * 3 + 2 * clusters) + m / 50.0
        work["memory"] += f8 * 4 * m * m
    elif algo == "clove":
        kk = max(k, int(h.get("max_clusters", 8))) if h.get("k_selection") == "silhouette" else k
        work["eval"] += T * float(kk) * mp * n
        work["grad"] += T * float(model_round)
        kmeans(mp, kk, kk, times=T)  # the loss vectors clustered every round
        if h.get("k_selection") == "silhouette":
            work["flops"] += T * kk * 3.0 * mp * mp * kk
            work["memory"] += f8 * 2 * m * m
        work["calls"] += T * (4 + steps)
    elif algo == "cfl":
        work["grad"] += T * float(mp) * tau * B
        work["memory"] += per_client_models
        work["client_stacks"] += per_client_models
        work["flops"] += 3.0 * m * m * P
        work["calls"] += T * (6 + tau)
        work["memory"] += f8 * (2 * m * m + 2 * m * P)
    elif algo == "kfed":
        kp = int(h.get("kfed_local_clusters", 1))
        # the Awasthi-Sheffet projection: an SVD of all m n points (m n x D), then Lloyd steps per client
        work["flops"] += 4.0 * m * n * D * min(m * n, D) + m * 50 * 3.0 * n * D * max(kp, 1) + 50 * 3.0 * m * kp * D * k
        work["calls"] += 60
        work["memory"] += f8 * 3 * m * n * D
        train_clusters(k)
    elif algo == "pacfl":
        pp = int(h.get("pacfl_p", 3))
        work["flops"] += m * 4.0 * n * D * min(n, D) + 2.0 * m * m * pp * pp * D + 10.0 * m * m * pp**3
        work["calls"] += 20
        work["memory"] += f8 * (m * n * D * 2 + m * m * (3 * pp * pp + 4))
        train_clusters(k)
    elif algo == "flexcfl":
        chosen = min(m, int(h.get("flexcfl_alpha", 20)) * k)
        pre = int(h.get("flexcfl_pretrain", 20))
        work["grad"] += float(chosen) * B * pre + T * float(mp) * tau * B
        kmeans(chosen, min(chosen, P), k)
        work["flops"] += 4.0 * chosen * P * min(chosen, P) + 3.0 * m * k * P * T
        work["calls"] += pre + T * (5 + tau)
    elif algo == "fesem":
        warm = int(h.get("fesem_warmup", 10))
        work["memory"] += per_client_models
        work["client_stacks"] += per_client_models
        work["grad"] += float(m) * n * warm + T * float(mp) * tau * B
        work["flops"] += T * 3.0 * mp * k * P
        work["calls"] += warm + T * (6 + tau)
    elif algo == "fedsoft":
        every = max(1, int(h.get("fedsoft_interval", 1)))
        work["memory"] += per_client_models
        work["client_stacks"] += per_client_models
        work["eval"] += (T // every + 1) * float(k) * m * n
        work["grad"] += T * float(mp) * tau * B
        work["calls"] += T * (6 + tau)
    elif algo == "perfedavg":
        work["memory"] += per_client_models
        work["client_stacks"] += per_client_models
        work["grad"] += T * float(mp) * tau * B * (4 if h.get("meta_variant") == "hf" else 2) + m * n
        work["calls"] += T * (3 + tau * (4 if h.get("meta_variant") == "hf" else 2))
    elif algo == "fedala":
        work["memory"] += 2 * per_client_models  # local models and aggregation weights
        frac = float(h.get("ala_fraction", 0.8))
        work["grad"] += T * float(mp) * tau * B + (T + 50) * float(mp) * frac * n
        work["calls"] += T * (6 + tau) + 50
    elif algo in ("fedproto", "fedpac"):
        work["memory"] += per_client_models
        work["client_stacks"] += per_client_models
        work["eval"] += T * float(mp) * n
        work["grad"] += T * float(mp) * tau * B * (2 if algo == "fedpac" else 1)
        work["calls"] += T * (8 + tau)
    else:
        raise ValueError(f"no cost model for algo {algo!r}")
    return work


def experiment_cost(p: Mapping[str, Any]) -> dict[str, float]:
    """Estimated peak memory (bytes), floating-point work and time of one synthetic experiment (validated params).

    Memory counts the federation (features drawn and stored, responses, noise, scores, client optima, Sigma and
    its Cholesky factor, per-client integer arrays), the models stacked over restarts, the per-client losses and
    assignment weights against every model, per-client local models and pairwise matrices (SR-FCA, one-shot,
    CFL, CLoVE, PACFL's subspace angles), and the per-round label history.  Time prices
    :func:`algorithm_work`: a per-sample loss costs ``2d`` operations, a gradient ``4d`` (``2d`` where IFCA's
    fused pass reuses the loss's scores); losses and fused gradients at :data:`FLOPS_PER_SECOND` for the data's
    precision, other gradients at :data:`GRADIENT_FLOPS_PER_SECOND`, other work at :data:`SMALL_FLOPS_PER_SECOND`;
    each call :data:`CALL_SECONDS`.  ``early_stop`` says the runs stop once
    their result is known (the time is then at most that).
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
    hyper = {key: p[key] for key in ("kmeans_n_init", "n_refine", "trmean_steps", "dist", "min_size", "max_clusters",
                                     "k_selection", "fesem_warmup", "flexcfl_alpha", "flexcfl_pretrain", "pacfl_p",
                                     "kfed_local_clusters", "meta_variant", "fedsoft_interval", "ala_fraction")
             if p.get(key) is not None}
    local_gd = int(p.get("local_train_steps", 100)) if p.get("local", "erm") == "gd" else None
    work = algorithm_work(algo, m, n, d, rounds=rounds, k=k, restarts=restarts,
                          local_steps=int(p.get("local_steps", 10)), averaging=p.get("averaging", "gradient"),
                          participation=float(p.get("participation", 1.0)),
                          features=d + 1, hyper=hyper, local_gd_steps=local_gd)
    working = f8 * (4 * m * models + 2 * models * d + m * d) + work["memory"]
    history = f8 * rounds * restarts * m
    fast = 2.0 * d * (work["eval"] + work["grad_fused"]) + 2.0 * m * n * d
    data_flops = fast + 4.0 * d * work["grad"]
    rate = FLOPS_PER_SECOND["float32" if p.get("dtype") == "float32" else "float64"]
    seconds = (fast / rate + 4.0 * d * work["grad"] / GRADIENT_FLOPS_PER_SECOND + work["flops"] / SMALL_FLOPS_PER_SECOND
               + (work["calls"] + work["lib_calls"]) * CALL_SECONDS + DRAW_SECONDS * m * n * d)
    return {"memory": data + working + history, "flops": data_flops + work["flops"], "seconds": seconds,
            "clients": m, "models": models, "early_stop": p.get("stopping") == "converged"}


def check_memory(need: float, what: str, *, seconds: float | None = None, hint: str = "") -> None:
    """Raise :class:`ResourceError` when ``need`` bytes exceed :func:`memory_budget`, with the estimate."""
    budget = memory_budget()
    if need <= budget or not math.isfinite(budget):
        return
    eta = f", roughly {format_seconds(seconds)} of computing" if seconds is not None else ""
    raise ResourceError(f"{what} needs about {format_bytes(need)} of memory{eta}; this machine allows "
                        f"{format_bytes(budget)} (half its memory){'; ' + hint if hint else ''}")


def check_experiment(p: Mapping[str, Any]) -> dict[str, float]:
    """:func:`experiment_cost` of validated params, refused (ResourceError) beyond the memory budget and, inside a
    :func:`work_ceiling` (a command line), beyond the time ceiling."""
    cost = experiment_cost(p)
    what = (f"one experiment ({p.get('algo', 'ifca')}, {cost['clients']} clients, n={_largest(p['n'])}, d={p['d']}, "
            f"{cost['models']} models, {p.get('rounds')} rounds)")
    check_memory(cost["memory"], what, seconds=cost["seconds"],
                 hint="reduce K, clients_per_cluster, n, d, n_clusters, n_init or rounds")
    if ceiling_active():
        check_time(cost["seconds"], what, hint="reduce the rounds, local or refinement steps, restarts or sizes")
    return cost
