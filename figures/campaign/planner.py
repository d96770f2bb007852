"""The paper-scale campaign: every published real-data number, the runs at the paper's own setting behind it, their
cost measured on this machine, and a resumable runner (``python paper_repro.py --campaign plan | run``).

The runs are those the registered neural-network targets ask for at ``--full`` (their points, seeds and trial
functions, unchanged): :func:`collect` runs every target with ``Context(size="full", stored=...)``, under which
:func:`figures.runs.run_points` reads each run from this module's store instead of computing it
(:func:`stored_records`) and logs the request.  The store is one JSON per run,
``figures/measured/<folder>/<algo>-<key>.json``, keyed by the run's folder, point and seed (so a run is found again
whatever the order of the target's points), holding the target's record and the run's provenance: command,
commit, device, seed, wall and CPU time, load.

A *cell* is one data set at one setting (say CLoVE's Amazon runs, or IFCA Table I at (m, n) = (2400, 100)): the runs
of one folder, data set and number of clients.  Every published number of ``figures/published/tables.csv`` belongs
to one cell (:func:`cell_of`); the manifest (``figures/measured/campaign.csv``) lists them with the cell's setting,
its measured seconds per round, its CPU-hours for the paper's seeds and for a minimal test (a point's runs cost the
mean CPU time of its stored runs where any is stored, else a few timed rounds extrapolated: ``cost_basis``), and a
status:

* ``stored`` -- the minimal test's runs are all stored;
* ``queued`` -- it fits the campaign's CPU budget (cells taken by published numbers per CPU-hour, best first);
* ``needs a GPU`` -- its minimal test does not fit what is left of the budget;
* ``data not available`` -- a data set the data directory does not hold (CIFAR-10; AG News' train split).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import platform
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from synth.store import with_digest, write_json_atomic, write_text_atomic

from ..registry import Context
from ..verdicts.published import PAPER_SEEDS, Published, tables
from .store import RunRequest, load_run, run_point, stored_records

__all__ = ["BUDGET_HOURS", "Cell", "HERE", "RunRequest", "cell_of", "cells", "check_cells", "check_timings", "collect",
           "known_cells", "load_run", "manifest_rows", "minimal_seeds", "plan", "gpu_queue", "read_timings",
           "run_campaign", "stored_records", "write_manifest"]

HERE = Path(__file__).parent.parent / "measured"
TIMINGS = "campaign_timings.json"
MANIFEST = "campaign.csv"
CHECKPOINTS = ".checkpoints"
BUDGET_HOURS = 40.0
# the targets whose runs are the papers' real-data tables (figures and ablations reuse these runs or have no table)
TARGETS = ("ifca-table1", "ifca-table2", "srfca-table1", "srfca-table2", "srfca-table3", "srfca-table4",
           "clove-table1", "clove-table2", "clove-table3", "clove-table4", "clove-table5", "clove-table7",
           "clove-table8", "clove-table9", "clove-table10", "clove-table11", "clove-table12")


# -- collecting the runs of the targets ----------------------------------------------------------------------------

def collect(root: Path = HERE, data_dir: str | None = None, names: Iterable[str] = TARGETS,
            out: Path | None = None) -> tuple[list[RunRequest], dict[str, list]]:
    """Every run the campaign's targets ask for at full size, and each target's rows computed from the stored runs.

    The targets run with ``Context(size="full", stored=root)``: nothing is trained; their figures and CSVs go to
    ``out`` (a temporary folder by default).
    """
    import tempfile
    import warnings

    from .. import load_targets

    targets = load_targets()
    requests: list[RunRequest] = []
    rows: dict[str, list] = {}
    from ..plots.style import figures_off

    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings(), figures_off():
        warnings.simplefilter("ignore")  # empty means of runs not stored yet
        ctx = Context(out=Path(out or tmp), size="full", n_jobs=1, device="cpu", data_dir=data_dir,
                      stored=Path(root), reader=stored_records, requests=requests)
        for name in names:
            if targets[name].why_not(ctx):  # e.g. no data: its numbers have no runs (data not available)
                continue
            section = targets[name].run(ctx)
            rows[name] = list(section.rows)
    return requests, rows


# -- cells and published numbers -----------------------------------------------------------------------------------

_TABLE1_MN = re.compile(r"\(m,n\)=\((\d+),(\d+)\)")
_CLOVE_MIX = {"Label skew 1": "label-skew-1", "Concept shift": "concept-shift", "Label skew 2": "label-skew-2",
              "Feature skew": "feature-skew", "Label skew 3": "label-skew-3", "Label skew 4": "label-skew-4"}
_CLOVE_BASE = {"MNIST": "mnist", "FMNIST": "fmnist", "CIFAR-10": "cifar"}


def cell_of(pub: Published) -> tuple[str, int | None]:
    """The data set (nets name) and, where a table has several, the number of clients of a published number's
    runs; the paper's table layout decides (IFCA Table I's columns are (m, n) settings, CLoVE's groups mixings)."""
    col = pub.column
    if pub.paper == "IFCA":
        if pub.artifact == "Table I":
            m = _TABLE1_MN.search(col)
            base = "mnist" if "MNIST" in col else "cifar"
            return f"{base}-rotated", int(m.group(1)) if m else None
        return "femnist", None
    if pub.paper == "SR-FCA":
        for text, ds in (("MNIST (inverted)", "mnist-inverted"), ("MNIST (rotated)", "mnist-rotated"),
                         ("CIFAR (rotated)", "cifar-rotated"), ("FEMNIST", "femnist"),
                         ("Shakespeare", "shakespeare")):
            if col.startswith(text):
                return ds, None
        raise ValueError(f"no cell for SR-FCA {pub.artifact} column {col!r}")
    # CLoVE
    if pub.artifact in ("Table 3", "Table 10", "Table 11"):
        return ("amazon" if col.startswith("Amazon") else "agnews-label-skew-2"), None
    if pub.artifact == "Table 5":
        return f"{_CLOVE_BASE[col]}-one-class", None
    if pub.artifact == "Table 12":
        return "cifar-label-skew-3", None
    base = _CLOVE_BASE[col.split(":")[0]]
    return f"{base}-{_CLOVE_MIX[pub.group]}", None


@dataclass
class Cell:
    """The runs of one data set at one setting, and the published numbers they answer."""

    folder: str
    dataset: str
    clients: int
    requests: list[RunRequest]
    published: list[Published] = field(default_factory=list)
    all_targets: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.folder}:{self.dataset}:{self.clients}"

    @property
    def paper(self) -> str:
        return self.published[0].paper if self.published else ""

    @property
    def seeds(self) -> int:
        """The seeds the target runs at full size (the paper's count)."""
        return 1 + max(r.trial for r in self.requests)

    def points(self) -> dict[int, dict]:
        return {r.point_index: r.point for r in self.requests}


def cells(requests: list[RunRequest]) -> list[Cell]:
    """The requests grouped by (folder, data set, clients), each with its published numbers."""
    groups: dict[tuple, list[RunRequest]] = {}
    for r in requests:
        groups.setdefault((r.folder, r.point.get("dataset"), int(r.point.get("clients", 0))), []).append(r)
    out = []
    for (f, d, c), rs in groups.items():
        cell = Cell(f, d, c, _unique(rs))
        cell.all_targets = sorted({r.target for r in rs})  # every target built from these runs
        out.append(cell)
    for pub in tables():
        ds, clients = cell_of(pub)
        prefix = {"IFCA": "ifca-", "SR-FCA": "srfca-", "CLoVE": "clove-"}[pub.paper]
        matches = [c for c in out if c.dataset == ds and c.folder.startswith(prefix)
                   and (clients is None or c.clients == clients)]
        if len(matches) > 1:  # a data set run by several folders of one paper: the one of the table's own target
            matches = [c for c in matches if _artifact_target(pub) in c.all_targets] or matches[:1]
        if matches:
            matches[0].published.append(pub)
    return out


def _unique(requests: list[RunRequest]) -> list[RunRequest]:
    """One request per run (a run shared by several targets, say Tables 1 and 2 of one paper, is one run)."""
    seen, out = set(), []
    for r in requests:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


_ROMAN = {"I": "1", "II": "2"}


def _artifact_target(pub: Published) -> str:
    """The registered target of a published table (``IFCA Table II`` -> ``ifca-table2``)."""
    paper = {"IFCA": "ifca", "SR-FCA": "srfca", "CLoVE": "clove"}[pub.paper]
    number = pub.artifact.split()[-1]
    return f"{paper}-table{_ROMAN.get(number, number)}"


def minimal_seeds(cell: Cell) -> int:
    """Seeds of a cell's minimal test: 3, the fewest that give a verdict (figures.verdicts.rules.MIN_SEEDS), or the
    paper's own count if smaller.  IFCA Table I's settings too: one of their seeds takes 3-7 CPU-hours here, so they
    need a GPU (29-57 s a run on an H100)."""
    from ..verdicts.rules import MIN_SEEDS

    return min(MIN_SEEDS, cell.seeds, PAPER_SEEDS.get(cell.paper, MIN_SEEDS))


# -- provenance ----------------------------------------------------------------------------------------------------

def commit() -> str:
    """The checked-out commit (with ``+`` when the tree has uncommitted changes), else ``$CFLAB_COMMIT``, else
    ``unknown``."""
    if os.environ.get("CFLAB_COMMIT"):  # a copy of the tree on another machine (a lent GPU) says what it was
        return os.environ["CFLAB_COMMIT"]
    root = Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        # the stored results themselves do not make the code dirty
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)figures/measured"], cwd=root, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head + ("+" if dirty else "")) if head else "unknown"


def device_name(device: str = "cpu") -> str:
    """The GPU (``device`` ``"cuda"``: its name, torch and CUDA versions) or the CPU model and core count of this
    machine, for the run records."""
    if device == "cuda":
        import torch

        return f"cuda: {torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"cpu: {cpu}, {os.cpu_count()} cores"


def nets_command(point: dict, seed: int) -> str:
    """The ``python -m nets run`` command that computes the same record as one campaign run."""
    words = ["python -m nets run"]
    for k, v in run_point(point).items():
        if k == "algo_params":
            words += [f"--algo-param {a}={b}" for a, b in (v or {}).items()]
            continue
        if v is None:
            continue
        text = ",".join(map(str, v)) if isinstance(v, list) else str(v)
        words.append(f"--{k.replace('_', '-')} {text}")
    return " ".join(words + [f"--seed {seed}", "--json --history --data-dir DIR"])


# -- cost: seconds per round measured at each cell's setting ---------------------------------------------------------

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
    path = Path(root) / TIMINGS
    if not path.exists():
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
    for cell in sorted(cell_list, key=_size):  # the cheapest settings first: their runs can start soonest
        if all(r.path(root).exists() for r in cell.requests):
            continue  # every run stored: nothing left to price or run, whatever rule its timings followed
        for req in cell.requests:
            if req.trial != 0 or _current_timing(req, timings) is not None:
                continue  # timed (entries of an older timing method, or that failed, are timed again)
            if measured.get(_point_key(req.folder, req.point)):
                continue  # its stored runs price the point (run_seconds): a timing would change nothing
            if (hours := over_budget(cell)) is not None:
                log(f"timing {cell.name}: left, its timed points alone cost {hours:.1f} CPU-hours "
                    f"(> {budget_hours:g}): needs a GPU")
                break
            if limit_s is not None and time.perf_counter() - start > limit_s:
                return timings
            rounds, first = int(req.point.get("rounds", 1)), _first_round(req)
            try:
                t1, s1 = _time_point(req.point, req.seed, first, data_dir)
                t2, s2 = _time_point(req.point, req.seed, first + 1, data_dir) if rounds > 1 else (t1, s1)
            except (ValueError, MemoryError, RuntimeError) as exc:  # e.g. refused for memory: the cell says so
                timings = read()
                timings[_timing_key(req)] = {"cell": cell.name, "algo": req.point.get("algo"),
                                             "error": f"{type(exc).__name__}: {exc}", "per_round_from": "failed",
                                             "commit": commit(), "measured": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                write_json_atomic(path, timings)
                log(f"timing {cell.name} {req.point.get('algo')} FAILED: {exc}")
                continue
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
            timings = read()
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
    return timings


def _size(cell: Cell) -> float:
    """A proxy of a cell's cost before it is timed: clients x samples x rounds x points."""
    p = next(iter(cell.points().values()))
    return float(cell.clients) * float(p.get("n_per_client", 1)) * float(p.get("rounds", 1)) * len(cell.points())


def _point_key(folder: str, point: dict) -> str:
    """Runs of one point (any seed): same folder, same point."""
    text = json.dumps({"folder": folder, "point": run_point(point)}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _stored_runs(root: Path = HERE) -> Iterable[dict]:
    """Every readable campaign run record under ``root`` (a file being written or of another kind is skipped)."""
    for path in Path(root).glob("*/*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("campaign"):
            yield data


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


# -- the manifest ----------------------------------------------------------------------------------------------------

def _data_status(ctx_data_dir: str | None, dataset: str) -> str:
    """``yes``, or what is missing or partial in the data directory for ``dataset`` (a nets name)."""
    from ..registry import Context as _Ctx
    from ..targets.netcommon import DATA_FOLDERS

    base = dataset.split("-", 1)[0]
    if base not in DATA_FOLDERS:
        return "yes"
    from ..targets.netcommon import data_missing

    why = data_missing(_Ctx(out=Path("."), size="full", data_dir=ctx_data_dir), base)
    if why:
        return f"no: {why}"
    if base == "agnews":
        return "no: AG News' train split is absent (the copy is its 7,600-row test split)"
    if base == "femnist":
        return "partial: the LEAF FEMNIST sample's train split has 20 of 35 files (105 users)"
    if base == "shakespeare":
        return "partial: the LEAF Shakespeare sample (10 users), not the full text"
    return "yes"


@dataclass
class CellPlan:
    """A cell with its cost and status in the campaign."""

    cell: Cell
    data: str
    minimal: int
    seconds_paper: float | None
    seconds_minimal: float | None
    stored: dict[int, int]  # trial -> runs stored
    status: str = ""
    measured_points: int = 0  # points whose cost is the mean of their stored runs (the others: timed rounds)
    untimed_points: int = 0  # points with neither a stored run nor a timing: the costs are then lower bounds

    @property
    def numbers(self) -> int:
        """Published numbers with a ± (the ones a paper-scale verdict can hold to the paper)."""
        return sum(1 for p in self.cell.published if p.pm is not None)

    @property
    def per_hour(self) -> float:
        if not self.seconds_minimal:
            return 0.0
        return self.numbers / (self.seconds_minimal / 3600)

    def failed(self, timings: dict) -> str:
        """Why timing one of the cell's runs failed ('' when none did)."""
        for r in self.cell.requests:
            t = timings.get(_timing_key(r)) or {}
            if "error" in t:
                return f"{t['algo']}: {t['error']}"
        return ""

    def runs_missing(self, seeds: int, root: Path = HERE) -> list[RunRequest]:
        return [r for r in self.cell.requests if r.trial < seeds and not r.path(root).exists()]


def plan(cell_list: list[Cell], timings: dict, budget_hours: float = BUDGET_HOURS, root: Path = HERE,
         data_dir: str | None = None) -> list[CellPlan]:
    """Each cell's cost and status, in the campaign's order (published numbers per CPU-hour of the minimal test,
    best first).  A cell whose minimal test is stored is ``stored``; the others are ``queued`` while their minimal
    tests fit ``budget_hours`` (counting what the stored runs took), else ``needs a GPU``."""
    plans = []
    measured = stored_seconds(root)
    for cell in cell_list:
        data = _data_status(data_dir, cell.dataset)
        minimal = minimal_seeds(cell)
        est = [run_seconds(r, timings, measured) for r in cell.requests]
        # a cell timed in part costs at least its timed runs: enough to tell that it cannot fit the budget
        known = [e for e in est if e is not None]
        paper = sum(known) if known else None
        mini = sum(e for r, e in zip(cell.requests, est, strict=True) if r.trial < minimal and e is not None) \
            if known else None
        untimed = len({r.point_index for r, e in zip(cell.requests, est, strict=True) if e is None})
        stored: dict[int, int] = {}
        for r in cell.requests:
            if r.path(root).exists():
                stored[r.trial] = stored.get(r.trial, 0) + 1
        points = {r.point_index: r for r in cell.requests}
        plans.append(CellPlan(cell, data, minimal, paper, mini, stored, measured_points=sum(
            1 for r in points.values() if _point_key(r.folder, r.point) in measured), untimed_points=untimed))
    plans.sort(key=lambda c: (-c.per_hour, c.cell.name))
    spent = _stored_cpu_hours(root)
    left = budget_hours - spent
    per_trial = {id(c): len(c.cell.points()) for c in plans}
    for c in plans:
        done = all(c.stored.get(t, 0) == per_trial[id(c)] for t in range(c.minimal))
        if done:
            c.status = "stored"
        elif c.data.startswith("no"):
            c.status = "data not available"
        elif c.failed(timings):
            c.status = "does not run here: " + c.failed(timings)
        elif c.seconds_minimal is None:
            c.status = "not timed yet"
        else:
            todo = sum(run_seconds(r, timings, measured) or 0.0 for r in c.runs_missing(c.minimal, root)) / 3600
            if c.untimed_points and todo <= left:
                # its timed part fits: the untimed points decide.  (Its per-hour rate is an upper bound, so it sits
                # no later in the order than its full cost would put it, and `left` here is no smaller.)
                c.status = "not timed yet"
            elif todo <= left:
                c.status = "queued"
                left -= todo
            else:
                c.status = "needs a GPU"
    return plans


def stored_gpu_runs(root: Path = HERE) -> dict[str, tuple[int, float]]:
    """Per GPU (the records' ``device``), the number of stored campaign runs made on it and their wall seconds."""
    out: dict[str, tuple[int, float]] = {}
    for data in _stored_runs(root):
        if str(data.get("device", "")).startswith("cuda"):
            n, wall = out.get(data["device"], (0, 0.0))
            out[data["device"]] = (n + 1, wall + float(data.get("wall_seconds") or 0.0))
    return out


def _stored_cpu_hours(root: Path = HERE) -> float:
    """CPU-hours of every stored campaign run under ``root``."""
    return sum(sum(v) for v in stored_seconds(root).values()) / 3600


MANIFEST_COLUMNS = ["paper", "artifact", "group", "row", "column", "value", "pm", "cell", "targets", "dataset",
                    "clients", "n_per_client", "model", "rounds", "local_steps", "batch_size", "optimizer",
                    "step_size", "paper_seeds", "minimal_seeds", "seeds_stored", "data", "seconds_per_round",
                    "cpu_hours_paper_seeds", "cpu_hours_minimal", "cost_basis", "cell_numbers", "numbers_per_cpu_hour",
                    "status", "round_time_split"]


def manifest_rows(plans: list[CellPlan], timings: dict) -> list[dict]:
    """One row per published number (those of no cell: data not available), for ``campaign.csv``."""
    rows, placed = [], set()
    for c in plans:
        first = next(iter(c.cell.points().values()))
        per_round = 0.0
        for pi in c.cell.points():
            req = next(r for r in c.cell.requests if r.point_index == pi)
            t = timings.get(_timing_key(req))
            per_round = per_round + t["seconds_per_round"] if t is not None and per_round is not None else None
        full = [t for t in range(c.cell.seeds)
                if c.stored.get(t, 0) == len(c.cell.points())]
        split = _cell_split(c.cell, timings)
        for p in c.cell.published:
            placed.add(id(p))
            rows.append({
                "paper": p.paper, "artifact": p.artifact, "group": p.group, "row": p.row, "column": p.column,
                "value": p.text, "pm": p.pm_text, "cell": c.cell.name, "targets": " ".join(c.cell.all_targets),
                "dataset": c.cell.dataset, "clients": c.cell.clients, "n_per_client": first.get("n_per_client"),
                "model": first.get("model") or "auto", "rounds": first.get("rounds"),
                "local_steps": first.get("local_steps"), "batch_size": first.get("batch_size") or "full",
                "optimizer": first.get("optimizer") or "sgd", "step_size": first.get("step_size"),
                "paper_seeds": c.cell.seeds, "minimal_seeds": c.minimal, "seeds_stored": len(full),
                "data": c.data, "seconds_per_round": _num(per_round),
                "cpu_hours_paper_seeds": _num(c.seconds_paper and c.seconds_paper / 3600),
                "cpu_hours_minimal": _num(c.seconds_minimal and c.seconds_minimal / 3600),
                "cost_basis": _basis(c), "cell_numbers": c.numbers, "numbers_per_cpu_hour": _num(c.per_hour),
                "status": c.status,
                "round_time_split": split})
    for p in tables():
        if id(p) not in placed:
            ds, _ = cell_of(p)
            rows.append({"paper": p.paper, "artifact": p.artifact, "group": p.group, "row": p.row,
                         "column": p.column, "value": p.text, "pm": p.pm_text, "dataset": ds,
                         "data": _data_status(None, ds), "status": "data not available"})
    return rows


def _basis(c: CellPlan) -> str:
    """Where a cell's CPU-hours come from ('' where it has none)."""
    if c.seconds_minimal is None:
        return ""
    n = len(c.cell.points())
    if c.measured_points == n:
        return "stored runs"
    basis = f"stored runs ({c.measured_points} of {n} points), timed rounds" if c.measured_points else "timed rounds"
    if c.untimed_points:
        basis += (f" of {n - c.untimed_points - c.measured_points} of {n} points: a lower bound, the other "
                  f"{c.untimed_points} not timed yet")
    return basis


def _cell_split(cell: Cell, timings: dict) -> str:
    """Where a round of the cell's runs spends its CPU time (summed over the cell's points), e.g.
    ``local training 61%; scoring models on clients 30%; ...`` ('' where not measured)."""
    total: dict[str, float] = {}
    for pi in cell.points():
        req = next(r for r in cell.requests if r.point_index == pi)
        t = timings.get(_timing_key(req)) or {}
        for k, v in (t.get("round_split_seconds") or {}).items():
            total[k] = total.get(k, 0.0) + v
    whole = sum(total.values())
    if not whole:
        return ""
    return "; ".join(f"{k} {100 * v / whole:.0f}%" for k, v in sorted(total.items(), key=lambda kv: -kv[1])
                     if v >= 0.005 * whole)


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4g}"


def write_manifest(rows: list[dict], root: Path = HERE) -> Path:
    """``root/campaign.csv``."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=MANIFEST_COLUMNS, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in MANIFEST_COLUMNS})
    path = Path(root) / MANIFEST
    write_text_atomic(path, buf.getvalue())
    return path


def summary(plans: list[CellPlan], rows: list[dict], budget_hours: float) -> str:
    """The counts of the manifest, per status, and the cells in campaign order (Markdown)."""
    from collections import Counter

    by = Counter(r["status"] for r in rows)
    with_pm = Counter(r["status"] for r in rows if r.get("pm"))
    lines = [f"Published real-data numbers: {len(rows)} ({sum(with_pm.values())} with a ±). By status: "
             + "; ".join(f"{s}: {n} ({with_pm.get(s, 0)} with ±)" for s, n in by.most_common()) + ".",
             f"Budget: {budget_hours:g} CPU-hours of campaign time; stored runs took "
             f"{_stored_cpu_hours():.2f} CPU-hours on this machine's CPU"
             + "".join(f"; {n} runs on {dev.split(': ', 1)[-1]} took {wall / 60:.1f} GPU-minutes (`python "
                       f"bench/gpu_run.py`; they spend none of the CPU budget)"
                       for dev, (n, wall) in sorted(stored_gpu_runs().items())) + ".", "",
             "| cell | published (with ±) | data | seeds (minimal / paper / stored) | CPU-h minimal | CPU-h paper "
             "| numbers per CPU-h | status |", "|---|---|---|---|---|---|---|---|"]
    for c in plans:
        full = sum(1 for t in range(c.cell.seeds) if c.stored.get(t, 0) == len(c.cell.points()))
        at_least = "≥ " if c.untimed_points and c.seconds_minimal else ""
        lines.append(f"| `{c.cell.name}` | {len(c.cell.published)} ({c.numbers}) | {c.data.split(':')[0]} | "
                     f"{c.minimal} / {c.cell.seeds} / {full} | "
                     f"{at_least}{_num(c.seconds_minimal and c.seconds_minimal / 3600)}"
                     f" | {at_least}{_num(c.seconds_paper and c.seconds_paper / 3600)} | "
                     f"{'≤ ' if at_least else ''}{_num(c.per_hour)} | {c.status} |")
    return "\n".join(lines)


# -- the runner ------------------------------------------------------------------------------------------------------

def execute(req: RunRequest, root: str, data_dir: str | None, command: str, device: str = "cpu") -> dict:
    """Run one campaign run on ``device`` (``"cpu"``: torch on one thread; ``"cuda"``) and store its JSON
    (atomically): the target's record plus command, commit, device, seed, wall and CPU time.  IFCA and global runs
    checkpoint every round under ``root/.checkpoints`` and resume from there, so a kill loses at most one round of
    them; the other algorithms rerun the run (nets checkpoints only IFCA and global).  Returns a short summary for
    the log."""
    path = req.path(Path(root))
    # another runner (a second `--campaign run`, a Dask coordinator) may be on this run: one process per run
    lock, why = claim(req, root)
    if lock is None:
        return {"run": f"{req.folder}/{path.name}", "skipped": why}
    try:
        return _execute(req, root, data_dir, command, path, device)
    finally:
        release(lock, path)


def claim(req: RunRequest, root: Path | str) -> tuple[int | None, str]:
    """Take ``req``'s lock file (``<run>.running``, an exclusive ``flock``): (its descriptor, '') or (None, why
    not: another runner holds it, or the run was stored meanwhile).  :func:`release` gives it back."""
    import fcntl

    path = req.path(Path(root))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_suffix(".running"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None, "another runner has it"
    if path.exists():
        release(fd, path)
        return None, "stored meanwhile"
    return fd, ""


def release(fd: int, path: Path) -> None:
    """Give back a run's lock taken by :func:`claim` (``path``: the run's JSON)."""
    os.close(fd)
    path.with_suffix(".running").unlink(missing_ok=True)


def _execute(req: RunRequest, root: str, data_dir: str | None, command: str, path: Path, device: str) -> dict:
    import torch

    from figures.trials import resolve_trial

    torch.set_num_threads(1)
    trial_fn = resolve_trial(req.trial_fn, f"{req.folder}: run request's trial_fn")
    point = run_point(req.point)
    if data_dir is not None:
        point["data_dir"] = str(data_dir)
    point["device"] = device
    if req.point.get("algo") in ("ifca", "global") and not isinstance(req.point.get("step_size"), list):
        point["checkpoint_dir"] = str(Path(root) / CHECKPOINTS / req.folder)
    load0 = os.getloadavg()
    w0, c0 = time.perf_counter(), time.process_time()
    try:
        with _Alone(point):
            result = trial_fn(point, req.seed)
    except Exception as exc:  # one failing run is reported, the others go on
        return {"run": req.path(Path(root)).name, "error": f"{type(exc).__name__}: {exc}"}
    if device == "cuda":
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    record = {"campaign": 1, "target": req.target, "folder": req.folder, "point": run_point(req.point),
              "point_index": req.point_index, "trial": req.trial, "seed": req.seed, "trial_fn": req.trial_fn,
              "command": command, "nets_command": nets_command(req.point, req.seed), "commit": commit(),
              "device": device_name(device), "torch_threads": 1, "wall_seconds": wall, "cpu_seconds": cpu,
              "resumed_from_round": (result or {}).get("resumed_from_round"),
              "load_average": [list(load0), list(os.getloadavg())],
              "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "result": result}
    write_json_atomic(path, with_digest(record))  # the readers refuse the file once edited (load_run)
    return {"run": f"{req.folder}/{path.name}", "wall": wall, "cpu": cpu,
            "error": (result or {}).get("error")}


def queue(plans: list[CellPlan], timings: dict, budget_hours: float, root: Path = HERE) -> list[RunRequest]:
    """The runs to do, in order: the minimal tests of the queued cells (best numbers per CPU-hour first), then
    their remaining seeds up to the paper's count, while the budget lasts."""
    left = budget_hours - _stored_cpu_hours(root)
    measured = stored_seconds(root)
    out = []
    for seeds_of in (lambda c: c.minimal, lambda c: c.cell.seeds):
        for c in plans:
            if c.status not in ("queued", "stored") or c.data.startswith("no"):
                continue
            for r in sorted(c.runs_missing(seeds_of(c), root), key=lambda r: (r.trial, r.point_index)):
                if r in out:
                    continue
                cost = (run_seconds(r, timings, measured) or 0.0) / 3600
                if cost > left:
                    continue
                left -= cost
                out.append(r)
    return out


def known_cells(root: Path = HERE) -> list[str] | None:
    """The cell names of the manifest (``root/campaign.csv``, column ``cell``), read in milliseconds where
    :func:`collect` takes a minute; None where there is no readable manifest."""
    try:
        with open(Path(root) / MANIFEST, encoding="utf-8", newline="") as fh:
            names = [row.get("cell") or "" for row in csv.DictReader(fh)]
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return sorted({n for n in names if n}) or None


def check_cells(only: list[str] | None, known: list[str] | None, what: str = "only (--cells)") -> None:
    """ValueError naming ``what`` and the known cells when a string of ``only`` is part of no cell name of
    ``known`` (a cell is chosen by any part of its name); nothing to check where ``only`` or ``known`` is None."""
    if only is None or known is None:
        return
    for text in only:
        if not any(text in name for name in known):
            raise ValueError(f"{what}: {text!r} is part of no campaign cell's name; the cells are "
                             f"{', '.join(known)}")


def gpu_queue(cell_list: list[Cell], only: list[str] | None, root: Path = HERE) -> list[RunRequest]:
    """The minimal tests' missing runs of ``cell_list`` for a GPU: cells in the order ``only`` names them (a GPU's
    time goes first to what the CPU budget cannot reach), each cell's runs seed by seed."""
    order = list({c.name: c for o in (only or [""]) for c in cell_list if o in c.name}.values())
    out: list[RunRequest] = []
    for c in order:
        seeds = minimal_seeds(c)
        out += sorted((r for r in c.requests if r.trial < seeds and not r.path(root).exists()),
                      key=lambda r: (r.trial, r.point_index))
    return out


def chosen_cells(only: list[str] | None, root: Path = HERE, data_dir: str | None = None) -> list[Cell]:
    """The cells of the targets whose data are in ``data_dir``, those whose name contains one of ``only`` (all when
    None); a name matching no cell is refused (``ValueError`` naming ``--cells``)."""
    check_cells(only, known_cells(root))
    requests, _ = collect(root, data_dir)
    every = cells(requests)  # the cells of the targets whose data are here
    check_cells(only, [c.name for c in every] or None)
    cell_list = [c for c in every if only is None or any(o in c.name for o in only)]
    cell_list = [c for c in cell_list if not _data_status(data_dir, c.dataset).startswith("no")]
    if only is not None and not cell_list:
        raise ValueError(f"only (--cells): no cell named by {', '.join(map(repr, only))} has its data in the data "
                         f"directory ({data_dir or 'the default one'}); see the column data of {MANIFEST}")
    return cell_list


def run_campaign(budget_hours: float = BUDGET_HOURS, n_jobs: int = 1, root: Path = HERE, data_dir: str | None = None,
                 only: list[str] | None = None, hours: float | None = None, command: str = "",
                 log: Callable[[str], None] = print, device: str = "cpu", gpu_order: bool | None = None,
                 on_stored: Callable[[dict], None] | None = None) -> int:
    """Time the cells not timed yet, then run the queue (see :func:`queue`) with ``n_jobs`` processes, one JSON
    per finished run; ``only`` restricts to cells whose name contains one of the strings; ``hours`` stops
    starting runs after that much wall time.  On ``device`` ``"cuda"`` (or with ``gpu_order``) nothing is timed
    and the CPU budget does not apply: the queue is :func:`gpu_queue`, one run at a time.  ``on_stored`` is
    called with each finished run's summary (the Dask runner is :func:`figures.campaign.dask_runner.run_campaign`).
    Returns the number of runs finished."""
    from joblib import Parallel, delayed

    if gpu_order is None:
        gpu_order = device != "cpu"
    if not gpu_order:
        read_timings(root)  # a forged or corrupt timings file is refused before any work
    cell_list = chosen_cells(only, root, data_dir)
    if not gpu_order:
        timings = measure(cell_list, root, data_dir, log=log, budget_hours=budget_hours)
        plans = plan(cell_list, timings, budget_hours, root, data_dir)
        todo = queue(plans, timings, budget_hours, root)
        measured = stored_seconds(root)
        est = sum(run_seconds(r, timings, measured) or 0.0 for r in todo) / 3600
        log(f"campaign: {len(todo)} runs queued, about {est:.1f} CPU-hours; {n_jobs} process(es)")
    else:
        todo, n_jobs = gpu_queue(cell_list, only, root), 1
        log(f"campaign: {len(todo)} runs queued on {device_name(device)}")
    if not todo:
        return 0
    deadline = None if hours is None else time.time() + hours * 3600

    def jobs(runs):
        for r in runs:
            if deadline is not None and time.time() > deadline:
                log("campaign: the wall-time limit is reached; no more runs are started")
                return
            yield delayed(execute)(r, str(root), data_dir, command, device)

    done = 0
    # runs side by side, then the big ones (BIG_CLIENTS) one at a time: they may use most of the memory
    small = [r for r in todo if int(r.point.get("clients", 0)) < BIG_CLIENTS]
    big = [r for r in todo if int(r.point.get("clients", 0)) >= BIG_CLIENTS]
    groups = ((todo, 1),) if gpu_order else ((small, n_jobs), (big, 1))  # a GPU keeps the queue's order
    for runs, jobs_n in groups:
        if not runs:
            continue
        for res in Parallel(n_jobs=jobs_n, return_as="generator_unordered", pre_dispatch="n_jobs")(jobs(runs)):
            if res.get("skipped"):
                log(f"campaign: {res['run']} skipped ({res['skipped']})")
            elif res.get("error"):
                log(f"campaign: {res['run']} FAILED: {res['error']}")
            else:
                done += 1
                log(f"campaign: stored {res['run']} ({res['wall']:.0f} s wall, {res['cpu']:.0f} s CPU)")
                if on_stored is not None:
                    on_stored(res)
    return done


_BEGIN, _END = "<!-- campaign summary: begin -->", "<!-- campaign summary: end -->"


def refresh(budget_hours: float = BUDGET_HOURS, root: Path = HERE, data_dir: str | None = None,
            only: list[str] | None = None, command: str = "", measure_missing: bool = True,
            log: Callable[[str], None] = print,
            then: Callable[[list, dict], str] | None = None) -> tuple[Path, str]:
    """Write ``campaign.csv`` and the summary in ``README.md`` (between its campaign markers) from the stored runs
    and timings, timing the cells not timed yet first when ``measure_missing``; ``then(plans, timings)``, when given,
    returns text appended to the returned text only (not written to ``README.md``), as the Dask plan's wall time on
    its workers (:func:`figures.campaign.dask_runner.device_plan`)."""
    timings = read_timings(root)  # a forged or corrupt file is refused before the minute of collecting
    requests, _ = collect(root, data_dir)
    cell_list = cells(requests)
    if measure_missing:
        chosen = [c for c in cell_list if (only is None or any(o in c.name for o in only))
                  and not _data_status(data_dir, c.dataset).startswith("no")]
        timings = measure(chosen, root, data_dir, log=log, budget_hours=budget_hours)
    plans = plan(cell_list, timings, budget_hours, root, data_dir)
    rows = manifest_rows(plans, timings)
    path = write_manifest(rows, root)
    text = summary(plans, rows, budget_hours)
    readme = Path(root) / "README.md"
    body = readme.read_text(encoding="utf-8") if readme.exists() else ""
    block = f"{_BEGIN}\n_Written by `{command or 'python paper_repro.py --campaign plan'}` at commit {commit()}, " \
            f"{time.strftime('%Y-%m-%d %H:%M')}._\n\n{text}\n{_END}"
    if _BEGIN in body and _END in body:
        body = body[:body.index(_BEGIN)] + block + body[body.index(_END) + len(_END):]
    else:
        heading = "" if "## The paper-scale campaign" in body else "## The paper-scale campaign (`campaign.csv`)\n\n"
        body = body.rstrip() + "\n\n" + heading + block + "\n"
    write_text_atomic(readme, body)
    if then is not None:
        text += "\n\n" + then(plans, timings)
    return path, text
