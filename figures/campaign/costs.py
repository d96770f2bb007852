"""What a campaign run costs on this machine: seconds per round timed at each cell's setting
(``campaign_timings.json``, :func:`measure`) and where a round's time goes, the CPU seconds of the stored runs, and
a run's price from either (:func:`run_seconds`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from synth.progress import Progress
from synth.store import write_json_atomic

from .cells import Cell, minimal_seeds
from .provenance import commit
from .store import HERE, RunRequest, load_run, read_run_file, run_point

__all__ = ["BIG_CLIENTS", "BIG_MEMORY_FRACTION", "MAX_ROUND_SECONDS", "MAX_RUN_SECONDS", "TIMINGS", "check_timings",
           "measure", "read_timings", "run_seconds", "stored_seconds"]

TIMINGS = "campaign_timings.json"


def _timing_key(req: RunRequest) -> str:
    """Runs that cost the same per round: same point but for the partition (the data mixing) and the rounds."""
    p = run_point(req.point)
    base = str(p.get("dataset", "")).split("-", 1)[0]
    shape = {k: v for k, v in p.items() if k not in ("dataset", "rounds", "eval_every")}
    text = json.dumps({"base": base, "task": p.get("task"), **shape}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# where a run's CPU time goes: the backend calls and functions of each share (the outermost timed call counts)
_SHARES = {
    "data": [("nets.experiment", "build_federation")],
    "evaluation": [("nets.experiment", "evaluate"), ("nets.experiment", "_test_machines")],
    "local training": [("nets.backend.TorchBackend", "local_update"), ("nets.backend.TorchBackend", "local_models"),
                       ("nets.backend.TorchBackend", "aligned_update")],
    "scoring models on clients": [("nets.backend.TorchBackend", "losses"), ("nets.backend.TorchBackend", "scores"),
                                  ("nets.backend.TorchBackend", "best_model_fractions")],
    "gradients": [("nets.backend.TorchBackend", "weighted_gradients"),
                  ("nets.backend.TorchBackend", "losses_and_weighted_gradients"),
                  ("nets.backend.TorchBackend", "client_gradients")],
    "aggregation": [("nets.backend.TorchBackend", "combine"), ("nets.backend.TorchBackend", "trimmed_mean")],
}


class _Split:
    """CPU seconds per share of :data:`_SHARES` while active (patches the named functions, then restores them)."""

    def __init__(self):
        self.seconds = dict.fromkeys(_SHARES, 0.0)
        self.round_ends: dict[int, float] = {}  # round -> CPU clock when the estimator's monitor saw it end
        self._depth = 0
        self._saved = []

    def _wrap(self, share, fn):
        def timed(*args, **kwargs):
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            t0 = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[share] += time.process_time() - t0
                self._depth -= 1
        return timed

    def __enter__(self):
        import importlib

        for share, names in _SHARES.items():
            for owner, attr in names:
                module, _, cls = owner.partition(".backend.") if ".backend." in owner else (owner, "", "")
                obj = getattr(importlib.import_module(module + (".backend" if cls else "")), cls) if cls else \
                    importlib.import_module(module)
                if hasattr(obj, attr):
                    self._saved.append((obj, attr, getattr(obj, attr)))
                    setattr(obj, attr, self._wrap(share, getattr(obj, attr)))
        from nets.experiment import _Recorder

        monitor = _Recorder.__call__

        def stamped(rec, t, *args, **kwargs):  # the last call of a round (IFCA: one per restart) ends it
            out = monitor(rec, t, *args, **kwargs)
            self.round_ends[int(t) + rec.offset] = time.process_time()
            return out

        self._saved.append((_Recorder, "__call__", monitor))
        _Recorder.__call__ = stamped
        return self

    def __exit__(self, *exc):
        for obj, attr, fn in reversed(self._saved):
            setattr(obj, attr, fn)
        return False


# a run of this many clients or more runs alone (no other campaign run beside it) and may use most of the memory:
# nets' memory guard estimates IFCA Table I's local baseline at (4800, 50) at 30.3 GiB, above its default budget of
# half the machine, while the run's measured peak is 10.6 GB (`/usr/bin/time -v`, 1 round, 2026-11-26)
BIG_CLIENTS = 1000
BIG_MEMORY_FRACTION = 0.85


class _Alone:
    """Within the block, a big run (:data:`BIG_CLIENTS`) may plan on :data:`BIG_MEMORY_FRACTION` of the memory."""

    def __init__(self, point: dict):
        self.big = int(point.get("clients", 0)) >= BIG_CLIENTS
        self._old = None

    def __enter__(self):
        if self.big:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            self._old = os.environ.get("CFLAB_MEMORY_LIMIT_MB")
            os.environ["CFLAB_MEMORY_LIMIT_MB"] = str(int(BIG_MEMORY_FRACTION * total / 2**20))
        return self

    def __exit__(self, *exc):
        if self.big:
            if self._old is None:
                os.environ.pop("CFLAB_MEMORY_LIMIT_MB", None)
            else:
                os.environ["CFLAB_MEMORY_LIMIT_MB"] = self._old
        return False


def _time_point(point: dict, seed: int, rounds: int, data_dir: str | None) -> tuple[float, dict]:
    """CPU seconds of one run of ``point`` cut to ``rounds`` rounds (torch on one thread, no checkpoint), and
    their split over :data:`_SHARES`."""
    from ..trials import nets_trial

    p = dict(run_point(point), rounds=rounds, device="cpu")
    if data_dir is not None:
        p["data_dir"] = str(data_dir)
    with _Split() as split, _Alone(p):
        t0 = time.process_time()
        nets_trial(p, seed)
        total = time.process_time() - t0
    return total, dict(split.seconds, round_ends=split.round_ends)


# algorithms whose first rounds hold one-off work: timed between two later rounds, the one-off counted in the setup.
# FedALA trains its aggregation weights until the losses settle at a client's first adaptive aggregation (round 2;
# at the end of a 1-round run), then one step a round: its second round is 5-10 times a steady one.
_ONE_OFF_ROUNDS = {"fedala": 2}


def _first_round(req: RunRequest) -> int:
    """The shorter of the two run lengths ``req`` is timed at (the longer is one round more)."""
    rounds = int(req.point.get("rounds", 1))
    return min(_ONE_OFF_ROUNDS.get(str(req.point.get("algo")), 1), max(rounds - 1, 1))


def _current_timing(req: RunRequest, timings: dict) -> dict | None:
    """``req``'s timing entry if it was timed by the current rule and did not fail, else None."""
    done = timings.get(_timing_key(req))
    if not done or "per_round_from" not in done or "error" in done:
        return None
    return done if done.get("timed_rounds", [1, 2])[0] == _first_round(req) else None


# the largest plausible timing: a round of 1e6 CPU seconds is 11.6 days; a whole timed run (setup, one or two rounds)
# ten times that.  Anything beyond is a forged or corrupted entry, never a measurement of this machine.
MAX_ROUND_SECONDS = 1e6
MAX_RUN_SECONDS = 1e7
_TIMING_FIELDS = {"seconds_per_round": (MAX_ROUND_SECONDS, False), "setup_seconds": (MAX_RUN_SECONDS, True),
                  "seconds_1_round": (MAX_RUN_SECONDS, False), "seconds_2_rounds": (MAX_RUN_SECONDS, False)}


def read_timings(root: Path = HERE) -> dict:
    """``root/campaign_timings.json`` ({} where there is none), every entry checked (:func:`check_timings`)."""
    from synth.store import regular_file

    path = Path(root) / TIMINGS
    if not regular_file(path, "timings file"):  # a FIFO by its name is refused, not waited on
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable timings file ({type(exc).__name__}: {exc}); restore it from git "
                         "or delete it to time the cells again") from None
    return check_timings(data, path)


def check_timings(timings: object, where: object = TIMINGS) -> dict:
    """``timings`` if every entry is one :func:`measure` can have written, else ValueError naming the file, the
    entry and the field: CPU seconds finite and positive (a setup may be 0) and at most :data:`MAX_ROUND_SECONDS`
    a round, :data:`MAX_RUN_SECONDS` a timed run; ``timed_rounds`` two consecutive rounds from 1; the time splits
    non-negative seconds; a failed timing's ``error`` a string.  A forged entry would otherwise price cells (a
    negative one at minus a million CPU-hours frees the whole budget)."""
    if not isinstance(timings, dict):
        raise ValueError(f"{where}: must hold a JSON object of timing entries, got {type(timings).__name__}")
    for key, entry in timings.items():
        name = f"{where}: entry {str(key)[:40]!r}"
        if not re.fullmatch(r"[0-9a-f]{16}", str(key)):
            raise ValueError(f"{name}: not a timing key (16 hex digits of the run's setting); restore the file from "
                             "git or delete the entry")
        if not isinstance(entry, dict):
            raise ValueError(f"{name}: must be an object, got {type(entry).__name__}")
        name += f" ({entry.get('cell', '?')}, {entry.get('algo', '?')})"
        if "error" in entry:
            if not isinstance(entry["error"], str):
                raise ValueError(f"{name}: 'error' must be a string (why the timing failed)")
            continue
        for field_name, (high, zero_ok) in _TIMING_FIELDS.items():
            if field_name not in entry and field_name not in ("seconds_per_round", "setup_seconds"):
                continue
            _check_seconds(name, field_name, entry.get(field_name), high, zero_ok)
        if not isinstance(entry.get("per_round_from", ""), str):
            raise ValueError(f"{name}: 'per_round_from' must be a string (how the round was timed)")
        rounds = entry.get("timed_rounds", [1, 2])
        if not (isinstance(rounds, list) and len(rounds) == 2 and all(_is_int(r) for r in rounds)
                and rounds[0] >= 1 and rounds[1] == rounds[0] + 1):
            raise ValueError(f"{name}: 'timed_rounds' must be two consecutive round counts [r, r + 1], r >= 1, got "
                             f"{json.dumps(rounds)[:40]}")
        for split in ("round_split_seconds", "setup_split_seconds"):
            value = entry.get(split, {})
            if not isinstance(value, dict):
                raise ValueError(f"{name}: {split!r} must be an object of CPU seconds per share")
            for share, seconds in value.items():
                _check_seconds(name, f"{split}.{share}", seconds, MAX_RUN_SECONDS, True)
    return timings


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _check_seconds(name: str, field_name: str, value: object, high: float, zero_ok: bool) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and (value >= 0 if zero_ok else value > 0) and value <= high
    if not ok:
        low = "[0" if zero_ok else "(0"
        raise ValueError(f"{name}: {field_name!r} must be CPU seconds in {low}, {high:.0e}], got "
                         f"{json.dumps(value)[:40]}; restore the file from git or delete the entry to time it again")


def measure(cell_list: list[Cell], root: Path = HERE, data_dir: str | None = None, limit_s: float | None = None,
            log: Callable[[str], None] = print, budget_hours: float | None = None) -> dict:
    """Time one seed of every point of ``cell_list`` not timed yet at 1 and 2 rounds (CPU seconds, one thread) and
    keep the result in ``root/campaign_timings.json`` after each point (with the commit, the load average and
    where a round's time goes).  An algorithm with one-off work in its first rounds (:data:`_ONE_OFF_ROUNDS`) is
    timed at ``r`` and ``r + 1`` rounds instead, a steady round after them (``timed_rounds``; the entry's
    ``seconds_1_round`` and ``seconds_2_rounds`` are then those two runs).

    Points that differ only in the data mixing share one timing.  ``limit_s`` stops after that many seconds.
    With ``budget_hours``, a cell whose timed points alone make its minimal test cost more than that is left
    there: it needs a GPU whatever its other points cost (the manifest gives its cost as a lower bound).
    Several processes may time at once: each merges its timings into the file as it writes.
    """
    path = Path(root) / TIMINGS

    def read() -> dict:
        return read_timings(root)

    def over_budget(cell: Cell) -> float | None:
        """The timed part of ``cell``'s minimal test in CPU-hours, where it exceeds ``budget_hours``."""
        if budget_hours is None:
            return None
        seeds = minimal_seeds(cell)
        hours = sum(run_seconds(r, timings, measured) or 0.0 for r in cell.requests if r.trial < seeds) / 3600
        return hours if hours > budget_hours else None

    timings = read()
    measured = stored_seconds(root)
    start = time.perf_counter()
    # the points to time, counted first for the progress line on stderr (timing them took minutes in silence)
    todo = [(cell, [r for r in cell.requests if _needs_timing(r, timings, measured)])
            for cell in sorted(cell_list, key=_size)  # the cheapest settings first: their runs can start soonest
            if not all(r.path(root).exists() for r in cell.requests)]  # all stored: nothing left to price or run
    with Progress("campaign", sum(len(reqs) for _, reqs in todo), "points", verb="timed") as progress:
        for cell, reqs in todo:
            for i, req in enumerate(reqs):
                if _current_timing(req, timings) is not None:  # timed meanwhile by another process
                    progress.update()
                    continue
                if (hours := over_budget(cell)) is not None:
                    log(f"timing {cell.name}: left, its timed points alone cost {hours:.1f} CPU-hours "
                        f"(> {budget_hours:g}): needs a GPU")
                    progress.total -= len(reqs) - i  # the cell's points left untimed
                    break
                if limit_s is not None and time.perf_counter() - start > limit_s:
                    return timings
                ok = _time_request(cell, req, data_dir, path, log)
                timings = read()
                progress.update(failed=int(not ok))
    return timings


def _needs_timing(req: RunRequest, timings: dict, measured: dict[str, list[float]]) -> bool:
    """Whether :func:`measure` times ``req``: the first seed of a point with no current timing (entries of an older
    timing method, or that failed, are timed again) and no stored runs (which price the point: :func:`run_seconds`,
    so that a timing would change nothing)."""
    return (req.trial == 0 and _current_timing(req, timings) is None
            and not measured.get(_point_key(req.folder, req.point)))


def _time_request(cell: Cell, req: RunRequest, data_dir: str | None, path: Path, log: Callable[[str], None]) -> bool:
    """Time ``req``'s point at two run lengths and merge the entry into the timings file at ``path`` (an entry
    saying why on a refusal); returns whether it was timed."""
    rounds, first = int(req.point.get("rounds", 1)), _first_round(req)
    try:
        t1, s1 = _time_point(req.point, req.seed, first, data_dir)
        t2, s2 = _time_point(req.point, req.seed, first + 1, data_dir) if rounds > 1 else (t1, s1)
    except (ValueError, MemoryError, RuntimeError) as exc:  # e.g. refused for memory: the cell says so
        timings = read_timings(path.parent)
        timings[_timing_key(req)] = {"cell": cell.name, "algo": req.point.get("algo"),
                                     "error": f"{type(exc).__name__}: {exc}", "per_round_from": "failed",
                                     "commit": commit(), "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        write_json_atomic(path, timings)
        log(f"timing {cell.name} {req.point.get('algo')} FAILED: {exc}")
        return False
    # the first run of a process loads the data files (cached after): the data share is left out of the
    # difference and counted whole in the setup
    d1, d2 = s1["data"], s2["data"]
    ends = s2.pop("round_ends"), s1.pop("round_ends")
    stamps = [ends[0][k] for k in sorted(ends[0])]
    ordinal = {2: "second", 3: "third"}.get(first + 1, f"round {first + 1}")
    if rounds > 1 and len(stamps) == first + 1:
        # the estimator's monitor ends every round: the last round's CPU time, without the setup noise
        per_round = stamps[-1] - stamps[-2]
        how = f"{ordinal} round, between the monitor's calls"
    else:  # no monitor call per round (Local; SR-FCA's are per stage): the difference of the two runs
        per_round = max((t2 - d2) - (t1 - d1), 0.05 * (t2 - d2))  # noise can make the difference small
        how = f"{first + 1}-round run minus {first}-round run"
    setup = max(t2 - d2 - (first + 1) * per_round, 0.0) + max(d1, d2)
    round_split = {k: max(s2[k] - s1[k], 0.0) for k in s1 if k != "data"}
    round_split["other"] = max(per_round - sum(round_split.values()), 0.0)
    timings = read_timings(path.parent)
    timings[_timing_key(req)] = {
        "cell": cell.name, "algo": req.point.get("algo"), "dataset": req.point.get("dataset"),
        "seconds_1_round": t1, "seconds_2_rounds": t2, "seconds_per_round": per_round,
        "setup_seconds": setup, "per_round_from": how, "timed_rounds": [first, first + 1],
        "round_split_seconds": round_split,
        "setup_split_seconds": s1,
        "commit": commit(), "load_average": list(os.getloadavg()),
        "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_json_atomic(path, timings)
    where = ", ".join(f"{k} {100 * v / per_round:.0f}%" for k, v in round_split.items()
                      if v > 0.01 * per_round)
    log(f"timed {cell.name} {req.point.get('algo')}: {per_round:.2f} s/round ({where}) + {setup:.1f} s setup")
    return True


def _size(cell: Cell) -> float:
    """A proxy of a cell's cost before it is timed: clients x samples x rounds x points."""
    p = next(iter(cell.points().values()))
    return float(cell.clients) * float(p.get("n_per_client", 1)) * float(p.get("rounds", 1)) * len(cell.points())


def _point_key(folder: str, point: dict) -> str:
    """Runs of one point (any seed): same folder, same point."""
    text = json.dumps({"folder": folder, "point": run_point(point)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _stored_runs(root: Path = HERE) -> Iterable[dict]:
    """Every campaign run record under ``root``, each read by :func:`figures.campaign.store.load_run` (digest,
    ranges, regular file: a forged or edited file is an error naming it, never a price); files of another kind
    (the timings, a sweep's files) are skipped."""
    for path in sorted(Path(root).glob("*/*.json")):
        if path.name == "campaign_timings.json":
            continue
        raw = read_run_file(path)
        if isinstance(raw, dict) and raw.get("campaign"):
            yield load_run(path)


def stored_seconds(root: Path = HERE) -> dict[str, list[float]]:
    """The CPU seconds of the stored campaign runs under ``root`` made on a CPU, per point (:func:`_point_key`);
    runs made on a GPU cost no CPU budget and price nothing on this machine."""
    out: dict[str, list[float]] = {}
    for data in _stored_runs(root):
        if isinstance(data.get("point"), dict) and data.get("cpu_seconds") is not None \
                and str(data.get("device", "cpu")).startswith("cpu"):
            out.setdefault(_point_key(str(data.get("folder")), data["point"]), []).append(float(data["cpu_seconds"]))
    return out


def run_seconds(req: RunRequest, timings: dict, measured: dict[str, list[float]] | None = None) -> float | None:
    """CPU seconds of one run at its full rounds: the mean of the stored runs of its point where ``measured``
    (:func:`stored_seconds`) has any, else extrapolated from its setting's timed rounds (None when not timed)."""
    done = (measured or {}).get(_point_key(req.folder, req.point))
    if done:
        return sum(done) / len(done)
    t = _current_timing(req, timings)  # an older rule's timing prices nothing: the point is timed again
    if t is None:
        return None
    return t["setup_seconds"] + t["seconds_per_round"] * int(req.point.get("rounds", 1))
