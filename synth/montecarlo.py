"""Monte Carlo engine: independent trials in parallel (joblib), reproducible for any n_jobs and backend.

Reproducibility rests on three rules:

* the seed of trial ``t`` at point ``p`` comes from the root
  ``SeedSequence(root_seed)`` by the spawn key ``(p, t)`` -- a function of
  *which* trial it is, never of when or where it ran;
* trial records are stored in completion order but always returned and
  compared sorted by ``(point, trial)``;
* BLAS runs single-threaded inside every trial (``blas_threads=1``), so a
  trial's floating-point reductions do not depend on how many worker
  processes share the machine.

Batching: trials are independent joblib tasks (joblib groups short ones
into batches); work *within* a trial is batched by the algorithm itself --
IFCA stacks its restarts (initialisations x step sizes) as extra model rows
sharing one data pass.  Trials are not stacked across one another.

Failures: a trial that raises :class:`FloatingPointError` (which includes
:class:`synth.algorithms.DivergenceError`) or returns a non-finite top-level number is
recorded with ``status="failed"`` and the reason, and the run goes on.  Any
other exception is a bug (or bad input) and propagates: the run stops, the
trials finished so far stay in the store, and ``resume=True`` continues
after the fix.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import json
import math
import numbers
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from .progress import Progress, progress_mode
from .store import CLOCK_FIELDS, TrialStore, fingerprint_of, read_meta, seed_for
from .validation import check_choice, check_int

__all__ = [
    "BACKENDS",
    "WALL_CLOCK_FIELDS",
    "CodeChangedWarning",
    "code_hash",
    "comparable",
    "fingerprint",
    "known_backends",
    "run_trials",
    "show_progress",
    "toolkit_version",
    "trial_seed",
]

BACKENDS = ("loky", "threading", "dask")
# fields that measure elapsed time: excluded when records are compared for bit-identity
WALL_CLOCK_FIELDS = CLOCK_FIELDS

TrialFn = Callable[[dict[str, Any], int], dict[str, Any]]


def trial_seed(root_seed: int | np.random.SeedSequence, point: int, trial: int) -> int:
    """The integer seed of trial ``trial`` at point ``point``: ``SeedSequence(root, spawn_key=(point, trial))``.

    Keyed by position in the sweep, not by completion order, so it is the same for every n_jobs and backend.
    The top bit is dropped so the seed fits a signed 64-bit integer (JSON readers, pandas).
    """
    point = check_int("point", point, low=0)
    trial = check_int("trial", trial, low=0)
    if isinstance(root_seed, np.random.SeedSequence):
        ss = np.random.SeedSequence(root_seed.entropy, spawn_key=tuple(root_seed.spawn_key) + (point, trial))
        return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))
    return seed_for(check_int("root_seed", root_seed, low=0), point, trial)  # the store checks seeds with it too


def show_progress(progress: bool | None = None) -> bool:
    """Whether to draw a progress bar: ``progress`` if given, else only on a terminal outside CI / CFLAB_QUIET
    (elsewhere :class:`synth.progress.Progress` prints a plain line every 30 s instead, unless quiet)."""
    return progress_mode(progress) == "bar"


def _callable_id(fn: Callable) -> str:
    if isinstance(fn, functools.partial):
        kw = json.dumps(fn.keywords, sort_keys=True, default=repr)
        return f"partial({_callable_id(fn.func)}, args={fn.args!r}, keywords={kw})"
    mod = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{mod}.{name}"


def fingerprint(points: Sequence[dict], root_seed: int | np.random.SeedSequence, trial_fn: Callable) -> str:
    """SHA-256 of what determines every trial's result: the points, the root seed and the trial function.

    The number of trials is deliberately not part of it: a finished sweep can be extended with more trials
    and resumed (trial ``t``'s seed does not depend on how many trials there are).
    """
    root = (list(root_seed.entropy) if isinstance(root_seed.entropy, Sequence) else root_seed.entropy,
            list(root_seed.spawn_key)) if isinstance(root_seed, np.random.SeedSequence) else root_seed
    return fingerprint_of(list(points), root, _callable_id(trial_fn))


def _plain(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"value of type {type(obj).__name__} in a point is not JSON-serialisable")


def _clean(value: Any, path: str, bad: list[str], top: bool) -> Any:
    """JSON-ready copy of a trial result: numpy -> Python, non-finite floats -> None (noted in ``bad``)."""
    if isinstance(value, dict):
        return {str(k): _clean(v, f"{path}.{k}" if path else str(k), bad, top and not path) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        # inside lists (per-round histories) NaN marks "not recorded"; it is stored as None, not a failure
        return [_clean(v, path, bad, False) for v in value]
    if isinstance(value, np.ndarray):
        return _clean(value.tolist(), path, bad, False)
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        if not math.isfinite(value):
            if top:
                bad.append(f"{path}={value}")
            return None
        return value
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"trial result field {path!r} has type {type(value).__name__}; trial functions must return "
                    "JSON-like values (numbers, strings, bools, None, lists, dicts)")


def _blas_limit(threads: int | None):
    if threads is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=threads)


_MALLOC_TUNED = False


def _tune_malloc() -> None:
    """Keep short-lived numpy temporaries in the heap instead of fresh mmap'd pages (glibc, once per process).

    glibc's default gives every allocation above its (adaptive) mmap threshold fresh zeroed pages and returns
    them on free; an IFCA trial then spends as long in page faults as in arithmetic (measured on the
    ifca_fig3a_small trial: 2.5 s -> 1.1 s for 3 trials, ~200k -> ~0 minor faults each).  Results are
    unchanged.  Opt out with ``CFLAB_MALLOC_TUNING=0``.
    """
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED = True
    if not sys.platform.startswith("linux") or os.environ.get("CFLAB_MALLOC_TUNING", "1") == "0":
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: mmap only blocks above 32 MiB
        libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD: keep up to 64 MiB of freed heap for reuse
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def _run_one(trial_fn: TrialFn, params: dict, point: int, trial: int, seed: int,
             blas_threads: int | None) -> dict[str, Any]:
    """Run one trial and wrap it in a store record (status ok / failed with the reason)."""
    _tune_malloc()
    start, cpu = time.perf_counter(), time.process_time()
    status, reason, result = "ok", None, {}
    with _blas_limit(blas_threads):
        try:
            out = trial_fn(params, seed)
        except FloatingPointError as exc:  # DivergenceError and numpy's errstate(raise) overflows
            status, reason = "failed", f"{type(exc).__name__}: {exc}"
        else:
            if not isinstance(out, dict):
                raise TypeError(f"trial function must return a dict, got {type(out).__name__}")
            bad: list[str] = []
            result = _clean(out, "", bad, True)
            if bad:
                status, reason = "failed", "non-finite result: " + ", ".join(bad)
    return {"point": point, "trial": trial, "seed": seed, "status": status, "reason": reason,
            "params": params, "result": result, "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu}


@contextlib.contextmanager
def _dask_client(scheduler: str | None, n_jobs: int):
    """The dask.distributed Client the joblib ``dask`` backend submits to."""
    try:
        from dask.distributed import Client, LocalCluster, get_client
    except ImportError:  # pragma: no cover - depends on the installation
        raise ValueError("backend 'dask' needs dask.distributed: pip install 'dask[distributed]'") from None
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="15s")
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"scheduler {scheduler!r}: cannot connect to a dask scheduler there "
                             f"({type(exc).__name__}: {exc})") from None
        try:
            yield client
        finally:
            client.close()
        return
    try:
        current = get_client()  # a Client the caller already started (e.g. on a LocalCluster)
    except ValueError:
        current = None
    if current is not None:
        yield current
        return
    workers = (os.cpu_count() or 1) if n_jobs < 0 else n_jobs
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        yield client


def _execute(tasks: Iterable[tuple], trial_fn: TrialFn, n_jobs: int, backend: str,
             scheduler: str | None, blas_threads: int | None) -> Iterator[dict]:
    """Yield records as trials finish (completion order)."""
    if n_jobs == 1 and backend != "dask":
        # in-process: no pickling, and a bug's traceback points straight at the trial
        for params, p, t, s in tasks:
            yield _run_one(trial_fn, params, p, t, s, blas_threads)
        return
    from joblib import Parallel, delayed, parallel_config

    if backend == "threading":
        # threads share one BLAS pool: limit it once around the whole run, not per (racing) trial
        with _blas_limit(blas_threads), parallel_config(backend="threading", n_jobs=n_jobs):
            yield from Parallel(return_as="generator_unordered")(
                delayed(_run_one)(trial_fn, params, p, t, s, None) for params, p, t, s in tasks)
        return
    if backend == "dask":
        with _dask_client(scheduler, n_jobs), parallel_config(backend="dask"):
            yield from Parallel(return_as="generator_unordered")(
                delayed(_run_one)(trial_fn, params, p, t, s, blas_threads) for params, p, t, s in tasks)
        return
    if backend == "ray":
        _register_ray()
    # loky, or any other registered joblib backend (ray, multiprocessing, a user's own): one trial per process
    # at a time is assumed, so the BLAS limit is set inside each trial
    # a generator: joblib dispatches it lazily, so the (point, trial) tasks are never all in memory at once
    jobs = (delayed(_run_one)(trial_fn, params, p, t, s, blas_threads) for params, p, t, s in tasks)
    if _streams(backend):
        with parallel_config(backend=backend, n_jobs=n_jobs):
            yield from Parallel(return_as="generator_unordered")(jobs)
        return
    # a backend that cannot stream results: small rounds on one pool, so finished trials still reach the
    # store as the run goes, not all at its end
    with Parallel(n_jobs=n_jobs, backend=backend) as parallel:
        step = 4 * (n_jobs if n_jobs > 0 else (os.cpu_count() or 1))
        while chunk := list(itertools.islice(jobs, step)):
            yield from parallel(chunk)


def _streams(backend: str) -> bool:
    """Whether a joblib backend can hand back results as they finish (``return_as="generator_unordered"``)."""
    from joblib.parallel import BACKENDS as registered

    factory = registered.get(backend)
    return factory is None or bool(getattr(factory(), "supports_return_generator", False))


def _register_ray() -> None:
    """Make joblib's ``ray`` backend available (Ray's own joblib integration, ``ray.util.joblib``)."""
    from joblib.parallel import BACKENDS as registered

    if "ray" in registered:
        return
    try:
        from ray.util.joblib import register_ray
    except ImportError:
        raise ValueError("backend 'ray' needs Ray: pip install 'ray[default]' (it starts a local Ray, or joins the "
                         "cluster named by RAY_ADDRESS)") from None
    register_ray()


def known_backends() -> tuple[str, ...]:
    """Backends :func:`run_trials` accepts: loky, threading, dask, ray and any other registered joblib backend."""
    from joblib.parallel import BACKENDS as registered

    return tuple(dict.fromkeys([*BACKENDS, "ray", *registered]))


class CodeChangedWarning(UserWarning):
    """A store is resumed with different toolkit code than wrote its earlier records: the table mixes both."""

    immediate = True  # shown when raised (synth.errors), not after an hours-long run


def code_hash(trial_fn: Callable | None = None) -> str:
    """SHA-256 (16 hex digits) of the ``.py`` sources of ``synth`` and of the trial function's top package.

    Version numbers do not change with every edit; this does, so a resumed store can tell that its records
    were computed by different code.
    """
    import importlib
    from pathlib import Path

    fn = trial_fn.func if isinstance(trial_fn, functools.partial) else trial_fn
    top = (getattr(fn, "__module__", None) or "").split(".")[0]
    h = hashlib.sha256()
    for pkg in sorted({"synth", top} - {"", "__main__"}):
        try:
            mod = importlib.import_module(pkg)
        except ImportError:
            continue
        if hasattr(mod, "__path__"):  # a package: every module in it
            files = sorted((root, f) for root in map(Path, mod.__path__) for f in root.rglob("*.py"))
        elif getattr(mod, "__file__", None):
            files = [(Path(mod.__file__).parent, Path(mod.__file__))]
        else:
            files = []
        for root, f in files:
            h.update(f"{pkg}/{f.relative_to(root).as_posix()}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def _versions() -> dict[str, str]:
    out = {"cflab": toolkit_version(), "python": platform.python_version(), "numpy": np.__version__}
    for mod in ("scipy", "sklearn", "joblib"):
        with contextlib.suppress(ImportError):
            out[mod] = __import__(mod).__version__
    return out


def toolkit_version() -> str:
    """cflab's version (package metadata first: it also works when ``synth`` is imported as a namespace)."""
    from importlib import metadata

    try:
        return metadata.version("cflab")
    except metadata.PackageNotFoundError:
        from . import __version__

        return __version__


def run_trials(
    trial_fn: TrialFn,
    points: Sequence[dict[str, Any]],
    trials: int,
    root_seed: int | np.random.SeedSequence = 0,
    *,
    store_dir: str | os.PathLike | None = None,
    n_jobs: int = 1,
    backend: str = "loky",
    scheduler: str | None = None,
    resume: bool = False,
    progress: bool | None = None,
    blas_threads: int | None = 1,
    meta: dict[str, Any] | None = None,
    desc: str = "trials",
    store_files: dict[str, str] | None = None,
    trial_bytes: int = 0,
) -> list[dict[str, Any]]:
    """Run ``trials`` independent trials of ``trial_fn(params, seed) -> dict`` at every point; return all records.

    Parameters
    ----------
    trial_fn : picklable callable ``(params: dict, seed: int) -> dict`` of JSON-like values (numpy scalars and
        arrays are converted).  It must derive all its randomness from ``seed``.
    points : the parameter dicts (JSON-serialisable); ``trial_fn`` gets them as given.
    trials : trials per point.
    root_seed : root of the seed tree; trial ``t`` at point ``p`` gets :func:`trial_seed(root_seed, p, t)`.
    store_dir : append every finished trial to ``store_dir/trials.jsonl`` (see :mod:`synth.store`); ``None``
        keeps results in memory only.
    n_jobs : parallel workers (``-1`` = all cores).  ``1`` runs in-process (no pickling), except with dask.
    backend : ``"loky"`` (processes), ``"threading"``, ``"dask"`` (joblib's dask backend on a
        ``dask.distributed`` Client: the one at ``scheduler``, else the caller's current Client, else a
        LocalCluster of ``n_jobs`` single-threaded worker processes), ``"ray"`` (Ray's joblib backend,
        registered on first use; needs ``ray``), or the name of any backend registered with
        ``joblib.register_parallel_backend``.
    resume : continue a store: finished trials are not rerun.  Without it, a store that already holds
        results is refused.
    progress : progress on stderr (:class:`synth.progress.Progress`): ``True`` a bar, ``False`` nothing, ``None`` a
        bar on a terminal outside CI, else a line every 30 s (nothing under ``CFLAB_QUIET``).
    blas_threads : BLAS threads inside each trial (``None`` = leave alone).  The default 1 keeps results
        bit-identical across n_jobs.
    meta : extra JSON written to ``store_dir/meta.json`` (e.g. the sweep spec).
    store_files : name -> text of further files (e.g. ``spec.toml``) written atomically into ``store_dir`` once
        the store is locked and accepted: a refused run leaves them as they were.
    trial_bytes : estimated peak memory of one trial, for the up-front check (the records are always counted):
        a run whose records plus ``n_jobs`` concurrent trials exceed :func:`synth.cost.memory_budget` is refused
        before it starts, with the estimate in the message.

    The (point, trial) pairs are generated as they are dispatched, never materialised, so the overhead per
    pending trial is nil; the records returned are the run's only memory proportional to ``trials x points``.

    Returns
    -------
    records sorted by ``(point, trial)``: ``{"point", "trial", "seed", "status" ("ok" | "failed"), "reason",
    "params", "result", "seconds", "cpu_seconds"}`` (wall and process CPU seconds of the trial).
    """
    if not callable(trial_fn):
        raise TypeError(f"trial_fn must be callable, got {type(trial_fn).__name__}")
    if isinstance(points, dict) or not isinstance(points, Iterable):
        raise TypeError("points must be a list of parameter dicts")
    points = list(points)
    if not points:
        raise ValueError("points must not be empty")
    for i, p in enumerate(points):
        if not isinstance(p, dict):
            raise TypeError(f"points[{i}] must be a dict of parameters, got {type(p).__name__}")
    trials = check_int("trials", trials, low=1)
    n_jobs = check_int("n_jobs", n_jobs, low=-1)
    if n_jobs == 0:
        raise ValueError("n_jobs must be -1 (all cores) or an integer in [1, inf), got 0")
    backend = check_choice("backend", backend, known_backends())
    if scheduler is not None and backend != "dask":
        raise ValueError(f"scheduler is only used with backend 'dask', got backend {backend!r}")
    if blas_threads is not None:
        blas_threads = check_int("blas_threads", blas_threads, low=1)
    if resume and store_dir is None:
        raise ValueError("resume=True needs a store_dir to resume from")

    if backend == "ray":
        _register_ray()  # refused now if Ray is missing: a run must not record a backend it did not use

    from .cost import WORKER_BYTES, check_memory, format_bytes, record_bytes

    total = len(points) * trials
    workers = (os.cpu_count() or 1) if n_jobs < 0 else n_jobs
    # worker processes each hold an interpreter with the libraries loaded, besides their trial
    process = WORKER_BYTES * workers if (workers > 1 or backend == "dask") and backend != "threading" else 0
    check_memory(total * record_bytes(points[0]) + workers * max(0, int(trial_bytes)) + process,
                 f"{len(points)} point(s) x {trials} trial(s) = {total} trials (their records take about "
                 f"{format_bytes(record_bytes(points[0]))} each"
                 + (f", one trial about {format_bytes(trial_bytes)} while it runs" if trial_bytes else "")
                 + (f", {workers} worker processes of about {format_bytes(WORKER_BYTES)} each" if process else "")
                 + ")",
                 hint="lower trials or the number of points, --n-jobs, or split the run")

    def wanted() -> Iterator[tuple[int, int]]:
        # same order as the records are returned in; a generator, so that no list of every pair is built
        for p in range(len(points)):
            for t in range(trials):
                yield p, t

    done: dict[tuple[int, int], dict] = {}
    store = TrialStore(store_dir) if store_dir is not None else None
    with store if store is not None else contextlib.nullcontext():
        if store is not None:
            code = code_hash(trial_fn)
            info = {"fingerprint": fingerprint(points, root_seed, trial_fn), "trial_fn": _callable_id(trial_fn),
                    "points": points, "trials": trials,
                    "root_seed": root_seed if isinstance(root_seed, int) else repr(root_seed),
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "sessions": [{"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": _versions(),
                                  "code": code,
                                  "n_jobs": n_jobs, "backend": backend}],
                    **(meta or {})}
            for rec in store.open(info, resume=resume, files=store_files):
                done.setdefault((rec["point"], rec["trial"]), rec)
            earlier = {sess.get("code") for sess in (read_meta(store_dir) or {}).get("sessions", [])[:-1]}
            n_done = sum(p < len(points) and t < trials for p, t in done)
            todo_any = n_done < total
            if done and todo_any and earlier - {code}:
                warnings.warn(f"{str(store_dir)!r}: the toolkit code changed since earlier records were written "
                              f"(code {', '.join(sorted(c for c in earlier if c))} -> {code}); the finished table "
                              "will mix results of both versions -- use a new directory for a clean one",
                              CodeChangedWarning, stacklevel=2)
        n_todo = total - sum(p < len(points) and t < trials for p, t in done)
        todo = ((points[p], p, t, trial_seed(root_seed, p, t)) for p, t in wanted() if (p, t) not in done)
        if n_todo:
            # a bar on a terminal, a line every 30 s elsewhere (a sweep logged to a file was silent for minutes); the
            # trials of a resumed store count as done, outside the rate behind the ETA
            with Progress(desc, total, "trials", done=total - n_todo, progress=progress) as bar:
                for rec in _execute(todo, trial_fn, n_jobs, backend, scheduler, blas_threads):
                    # the JSON round trip makes fresh records identical in type and key order to those read back
                    # on resume (the store writes sorted keys), so a table built from them is the same either way
                    rec = json.loads(json.dumps(rec, allow_nan=False, default=_plain, sort_keys=True))
                    if store is not None:
                        store.append(rec)
                    done[(rec["point"], rec["trial"])] = rec
                    bar.update(1, failed=int(rec["status"] != "ok"))
    return [done[key] for key in wanted()]


def comparable(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records without wall-clock fields, sorted by (point, trial): equal iff the trials computed the same."""

    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k not in WALL_CLOCK_FIELDS}
        return obj

    return sorted((strip(r) for r in records), key=lambda r: (r["point"], r["trial"]))
