"""The paper-scale campaign on a Dask cluster of CPU and GPU workers, and its plan priced per device.

One module over 700 lines, kept whole: the queues, the device plan, the run loop and the cluster set-up share the
one notion of a worker slot (``CPU=1`` / ``GPU=1``) and are read together when a campaign misbehaves on a cluster.

``python paper_repro.py --campaign run --backend dask [--scheduler ADDR]`` submits the campaign's runs to Dask workers,
one run per worker at a time: a worker declares what it holds with a Dask resource, ``CPU=1`` (one run on one core,
torch on one thread, as the loky runner) or ``GPU=1`` (one run on its CUDA device), and each run asks for one of
them.  Without ``--scheduler`` a local cluster of ``--cpus`` CPU workers and ``--gpus`` GPU workers is started.

* The queues (:func:`queues`): whenever a GPU worker is connected, the GPU queue goes first on it -- the cells whose
  protocol ledger marks their stored runs stale (``figures/published/protocols/*.toml``, ``[stale]``), then the cells
  that need a GPU (manifest status ``needs a GPU``) by published numbers per GPU-minute, the minimal tests first, then
  the paper's remaining seeds; a GPU worker with no GPU run left takes the CPU queue's next run.  CPU workers take the
  CPU queue: the loky runner's queue (:func:`figures.campaign.planner.queue`, within the CPU budget), the big runs
  (:data:`figures.campaign.costs.BIG_CLIENTS`) last and alone, as there; a stale cell's runs stay for a GPU while one
  is connected.  Where only GPU workers are connected they take every run.
* Storing (:func:`run_queue`): a worker computes its run with the campaign's own code and writer
  (:func:`figures.campaign.planner._execute`, the JSON with its digest) into a scratch folder of its own and returns the
  file's text; the coordinator -- never a worker -- checks it (:func:`figures.campaign.store.load_run`: the request's
  run, its digest) and renames it into the store, atomically.  The coordinator holds the run's lock file
  (``<run>.running``, the one :func:`figures.campaign.planner.execute` takes) from submission to storage, and a run
  stored meanwhile is not stored again; so a second runner (loky or Dask) never runs or stores the same run, and a lost
  worker loses only its running run, which the Dask scheduler gives to another worker (its
  ``distributed.scheduler.allowed-failures``, 3 by default: a run that kills that many workers is reported failed).
* ``--hours`` starts no run after that much wall time; the CPU budget limits the CPU queue as in the loky runner.

The plan (:func:`device_plan`, ``--campaign plan --backend dask --cpus N --gpus M``) prices every run left of the
runnable table on each kind of worker -- on a CPU the CPU seconds measured here (stored CPU runs, else the timed
rounds of ``campaign_timings.json``), on a GPU the wall seconds of stored GPU runs of the same point, else the GPU
timing entries of ``campaign_timings.json`` (written from the stored GPU runs by :func:`record_gpu_timings`, with the
device), else the CPU price divided by the CPU-to-GPU speed-up measured on the points that have both
(:func:`speedup`) -- and estimates the wall time by list scheduling (:func:`makespan`).
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import json
import logging
import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synth.store import StoreError, write_json_atomic, write_text_atomic

from . import costs
from . import planner as campaign
from .store import RunRequest, load_run

__all__ = ["GPU", "CPU", "Prices", "Speedup", "device_plan", "git_commit_run", "gpu_timing_key", "local_cluster",
           "makespan", "queues", "record_gpu_timings", "run_on_dask", "run_queue", "speedup", "work"]

GPU, CPU = "GPU", "CPU"  # the Dask worker resources: one run at a time on a GPU, or on one CPU core
_GPU_TIMING = "stored GPU runs: wall seconds / rounds, setup included"


# -- prices per device ------------------------------------------------------------------------------------------------

def gpu_timing_key(req: RunRequest) -> str:
    """The ``campaign_timings.json`` key of ``req``'s setting on a GPU: 16 hex digits, like a CPU timing's
    (:func:`figures.campaign.costs._timing_key`), of that key and the device kind."""
    text = json.dumps({"timing": campaign._timing_key(req), "device": "cuda"}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _request_of(data: dict) -> RunRequest:
    """The request a stored run record answers (its folder, point and seed decide its key and path)."""
    return RunRequest(str(data.get("target", "")), str(data.get("folder")), int(data.get("point_index", 0)),
                      int(data.get("trial", 0)), data["point"], int(data.get("seed", 0)), str(data.get("trial_fn", "")))


def _gpu_runs(root: Path) -> list[dict]:
    """The stored campaign runs under ``root`` made on a GPU (their ``device`` starts with ``cuda``)."""
    return [d for d in campaign._stored_runs(root) if str(d.get("device", "")).startswith("cuda")
            and isinstance(d.get("point"), dict) and (d.get("wall_seconds") or 0) > 0]


def record_gpu_timings(root: Path = campaign.HERE) -> int:
    """Store in ``root/campaign_timings.json`` one GPU timing entry per setting (:func:`gpu_timing_key`) of the
    stored GPU runs: the mean of wall seconds / rounds (setup included), the device, the runs it comes from.  CPU
    entries are kept as they are (the file is re-read just before it is written, as
    :func:`figures.campaign.costs.measure` does).  Returns the number of GPU entries; the file is rewritten only when
    they change."""
    groups: dict[str, list[dict]] = {}
    for data in _gpu_runs(Path(root)):
        groups.setdefault(gpu_timing_key(_request_of(data)), []).append(data)
    entries = {}
    for key, runs in groups.items():
        first = runs[0]["point"]
        per_round = [float(d["wall_seconds"]) / max(int(d["point"].get("rounds", 1)), 1) for d in runs]
        entries[key] = {"cell": f"{runs[0]['folder']}:{first.get('dataset')}:{first.get('clients')}",
                        "algo": first.get("algo"), "dataset": first.get("dataset"),
                        "device": Counter(str(d["device"]) for d in runs).most_common(1)[0][0],
                        "seconds_per_round": sum(per_round) / len(per_round), "setup_seconds": 0.0,
                        "per_round_from": f"{_GPU_TIMING} ({len(runs)} runs)", "runs": len(runs),
                        "measured": max(str(d.get("finished", "")) for d in runs)}
    timings = campaign.read_timings(root)
    old = {k: v for k, v in timings.items() if str(v.get("device", "")).startswith("cuda")}
    if old != entries:
        cpu_only = {k: v for k, v in timings.items() if not str(v.get("device", "")).startswith("cuda")}
        write_json_atomic(Path(root) / costs.TIMINGS, {**cpu_only, **entries})
    return len(entries)


@dataclass(frozen=True)
class Speedup:
    """CPU seconds here over GPU wall seconds, summed over the points that have both."""

    factor: float
    points: int
    low: float  # the smallest and largest ratio of one point
    high: float
    cells: tuple[str, ...]
    gpus: tuple[str, ...]  # the GPUs (records' device) the GPU runs were made on


def speedup(root: Path, timings: dict, measured: dict[str, list[float]] | None = None) -> Speedup | None:
    """The CPU-to-GPU speed-up of the campaign's runs: over every point with a stored GPU run and a CPU price (its
    stored CPU runs, else its timed rounds: :func:`figures.campaign.costs.run_seconds`), the sum of the CPU prices
    over the sum of the points' mean GPU wall seconds; None where no point has both."""
    measured = campaign.stored_seconds(root) if measured is None else measured
    by_point: dict[str, list[dict]] = {}
    for data in _gpu_runs(Path(root)):
        by_point.setdefault(campaign._point_key(str(data["folder"]), data["point"]), []).append(data)
    pairs, cells, gpus = [], set(), set()
    for runs in by_point.values():
        cpu = campaign.run_seconds(_request_of(runs[0]), timings, measured)
        if cpu is None:
            continue
        pairs.append((cpu, sum(float(d["wall_seconds"]) for d in runs) / len(runs)))
        p = runs[0]["point"]
        cells.add(f"{runs[0]['folder']}:{p.get('dataset')}:{p.get('clients')}")
        gpus.update(str(d["device"]).split(": ", 1)[-1].split(" (")[0] for d in runs)
    if not pairs:
        return None
    ratios = [c / g for c, g in pairs]
    return Speedup(sum(c for c, _ in pairs) / sum(g for _, g in pairs), len(pairs), min(ratios), max(ratios),
                   tuple(sorted(cells)), tuple(sorted(gpus)))


def _changed_keys(folder: str) -> tuple[str, ...]:
    """The run-point keys a protocol fix changed in ``folder`` (its ledger's ``[stale]``; none without one)."""
    from ..verdicts.protocol import ledger_for

    ledger = ledger_for(folder)
    return tuple(ledger.stale.changed_keys) if ledger is not None and ledger.stale is not None else ()


def _loose_key(folder: str, point: dict, changed: tuple[str, ...]) -> str:
    """Runs of one point but for the settings a protocol fix changed (any seed)."""
    return campaign._point_key(folder, {k: v for k, v in point.items() if k not in changed})


@dataclass
class Prices:
    """What one run costs on a CPU (CPU seconds measured here) and on a GPU (wall seconds), and where that comes
    from."""

    timings: dict
    cpu_measured: dict[str, list[float]]
    gpu_measured: dict[str, list[float]]  # point key -> wall seconds of its stored GPU runs
    gpu_timings: dict[str, dict]  # gpu_timing_key -> entry
    speedup: Speedup | None
    stale: dict[str, list[dict]]  # loose key -> stored runs of a protocol-changed folder (any protocol)
    cpu_devices: tuple[str, ...] = ()  # the CPUs (records' device) of the stored CPU runs

    @classmethod
    def read(cls, root: Path, timings: dict | None = None) -> Prices:
        """The prices of ``root``'s store: its timings (``timings`` where given), stored CPU and GPU runs."""
        timings = campaign.read_timings(root) if timings is None else timings
        measured = campaign.stored_seconds(root)
        gpu_measured: dict[str, list[float]] = {}
        for data in _gpu_runs(Path(root)):
            gpu_measured.setdefault(campaign._point_key(str(data["folder"]), data["point"]), []).append(
                float(data["wall_seconds"]))
        gpu_timings = {k: v for k, v in timings.items() if str(v.get("device", "")).startswith("cuda")
                       and "error" not in v}
        stale: dict[str, list[dict]] = {}
        cpus = set()
        for data in campaign._stored_runs(Path(root)):
            if not isinstance(data.get("point"), dict):
                continue
            if str(data.get("device", "")).startswith("cpu"):
                cpus.add(str(data["device"]).split(": ", 1)[-1])
            changed = _changed_keys(str(data.get("folder")))
            if changed:
                stale.setdefault(_loose_key(str(data["folder"]), data["point"], changed), []).append(data)
        return cls(timings, measured, gpu_measured, gpu_timings, speedup(root, timings, measured), stale,
                   tuple(sorted(cpus)))

    def _stale_runs(self, req: RunRequest) -> list[dict]:
        changed = _changed_keys(req.folder)
        return self.stale.get(_loose_key(req.folder, req.point, changed), []) if changed else []

    def cpu_priced(self, req: RunRequest) -> tuple[float | None, str]:
        """CPU seconds of ``req`` on one core here and their source: ``measured`` (stored CPU runs of its point,
        else its setting's timed rounds), ``stale runs`` (those of its point under the protocol before a fix
        changed it: the same model and data, another setting), or ``not priced``."""
        seconds = campaign.run_seconds(req, self.timings, self.cpu_measured)
        if seconds is not None:
            return seconds, "measured"
        old = self._stale_runs(req)
        on_cpu = [float(d["cpu_seconds"]) for d in old if str(d.get("device", "cpu")).startswith("cpu")
                  and d.get("cpu_seconds") is not None]
        if on_cpu:
            return sum(on_cpu) / len(on_cpu), "stale runs"
        for data in old:
            seconds = campaign.run_seconds(_request_of(data), self.timings, self.cpu_measured)
            if seconds is not None:
                return seconds, "stale runs"
        return None, "not priced"

    def cpu(self, req: RunRequest) -> float | None:
        """CPU seconds of ``req`` on one core here (None: not priced), see :meth:`cpu_priced`."""
        return self.cpu_priced(req)[0]

    def gpu(self, req: RunRequest) -> tuple[float | None, str]:
        """GPU wall seconds of ``req`` and their source: ``stored GPU runs`` of its point, a ``GPU timing`` of its
        setting, ``stale GPU runs`` (its point under the protocol before a fix), ``CPU / speed-up``, or ``not
        priced``."""
        done = self.gpu_measured.get(campaign._point_key(req.folder, req.point))
        if done:
            return sum(done) / len(done), "stored GPU runs"
        t = self.gpu_timings.get(gpu_timing_key(req))
        if t is not None:
            return t["setup_seconds"] + t["seconds_per_round"] * int(req.point.get("rounds", 1)), "GPU timing"
        old = [float(d["wall_seconds"]) for d in self._stale_runs(req) if str(d.get("device", "")).startswith("cuda")]
        if old:
            return sum(old) / len(old), "stale GPU runs"
        cpu, source = self.cpu_priced(req)
        if cpu is not None and self.speedup is not None:
            return cpu / self.speedup.factor, "CPU / speed-up" + (" (stale runs)" if source == "stale runs" else "")
        return None, "not priced"


# -- the queues -------------------------------------------------------------------------------------------------------

def _stale(cell: campaign.Cell) -> bool:
    """Whether the cell's protocol ledger marks its stored runs stale (a protocol fix since they ran)."""
    from ..verdicts.protocol import ledger_for

    ledger = ledger_for(cell.name)
    return ledger is not None and ledger.stale is not None


def _missing(plan: campaign.CellPlan, root: Path, first: int, last: int) -> list[RunRequest]:
    """The cell's runs of trials ``first`` to ``last - 1`` not stored, seed by seed."""
    return sorted((r for r in plan.cell.requests if first <= r.trial < last and not r.path(root).exists()),
                  key=lambda r: (r.trial, r.point_index))


def gpu_cells(plans: list[campaign.CellPlan], prices: Prices, root: Path) -> list[campaign.CellPlan]:
    """The cells of the GPU queue, in its order: the protocol-changed cells (stale ledger), then the cells that need
    a GPU, each group by published numbers (with ±) per GPU-minute of its minimal test's missing runs, most first
    (cells with a run not priced on a GPU last)."""
    def rate(c: campaign.CellPlan) -> float:
        seconds = [prices.gpu(r)[0] for r in _missing(c, root, 0, c.minimal)]
        if not seconds or any(s is None for s in seconds):
            return -1.0
        return c.numbers / max(sum(seconds) / 60, 1e-9)

    chosen = [c for c in plans if not c.data.startswith("no") and (_stale(c.cell) or c.status == "needs a GPU")]
    return sorted(chosen, key=lambda c: (not _stale(c.cell), -rate(c), c.cell.name))


def queues(plans: list[campaign.CellPlan], timings: dict, budget_hours: float, root: Path,
           prices: Prices) -> tuple[list[RunRequest], list[RunRequest]]:
    """(GPU queue, CPU queue): the GPU queue's cells (:func:`gpu_cells`), their minimal tests' missing runs
    (:func:`figures.campaign.planner.gpu_queue`), then their remaining seeds up to the paper's; the loky runner's queue
    (:func:`figures.campaign.planner.queue`, within ``budget_hours``), its big runs last (they run alone)."""
    order = gpu_cells(plans, prices, root)
    gpu = campaign.gpu_queue([c.cell for c in order], [c.cell.name for c in order], root)
    seen = {r.key for r in gpu}
    gpu += [r for c in order for r in _missing(c, root, c.minimal, c.cell.seeds) if r.key not in seen]
    cpu = campaign.queue(plans, timings, budget_hours, root)
    return gpu, [r for r in cpu if not _big(r)] + [r for r in cpu if _big(r)]


def _big(req: RunRequest) -> bool:
    return int(req.point.get("clients", 0)) >= campaign.BIG_CLIENTS


# -- the plan: wall time on N CPU workers and M GPU workers -----------------------------------------------------------

@dataclass
class _Job:
    """One run of the plan: its class (``GPU``: the GPU queue, ``CPU``: the rest), seconds on a CPU and on a GPU,
    and where the price that counts comes from."""

    req: RunRequest
    kind: str
    cpu: float | None
    gpu: float | None
    source: str  # "CPU: ..." or "GPU: ...": the worker kind that prices it, and where the price comes from

    @property
    def seconds(self) -> float:
        """Its price on the worker kind it is planned on."""
        return (self.gpu if self.source.startswith("GPU") else self.cpu) or 0.0


def makespan(jobs: list[tuple[str, float | None, float | None]], cpus: int, gpus: int) -> dict[str, float]:
    """Wall seconds to run ``jobs`` -- (class, seconds on a CPU worker, seconds on a GPU worker; None: cannot run
    there) -- on ``cpus`` CPU and ``gpus`` GPU workers by list scheduling, longest first: a free GPU worker takes the
    longest GPU-class job left, else the CPU-class job left that is longest on a GPU; a free CPU worker takes the
    longest CPU-class job left (GPU-class jobs wait for a GPU).  Without GPU workers every job is CPU-class.
    Returns ``wall``, ``cpu_busy`` and ``gpu_busy`` (worker-seconds) and ``left`` (jobs no worker could take)."""
    if cpus < 0 or gpus < 0 or cpus + gpus == 0:
        raise ValueError(f"cpus and gpus must be >= 0 and not both 0, got cpus={cpus}, gpus={gpus}")
    if gpus == 0:
        jobs = [(CPU, c, g) for _, c, g in jobs]
    gpu_jobs = sorted((g for k, _, g in jobs if k == GPU and g is not None), reverse=True)
    cpu_jobs = sorted(((c, g) for k, c, g in jobs if k != GPU and (c is not None and cpus or g is not None and gpus)),
                      key=lambda cg: -(cg[0] if cg[0] is not None else 0.0))
    left = len(jobs) - len(gpu_jobs) - len(cpu_jobs)
    free = [(0.0, 0, i) for i in range(gpus)] + [(0.0, 1, i) for i in range(cpus)]  # GPUs first on ties
    heapq.heapify(free)
    busy = {GPU: 0.0, CPU: 0.0}
    wall = 0.0
    while free and (gpu_jobs or cpu_jobs):
        t, kind, i = heapq.heappop(free)
        if kind == 0 and gpu_jobs:
            seconds = gpu_jobs.pop(0)
        elif kind == 0:  # no GPU job left: the CPU job that is longest on a GPU
            on_gpu = [n for n, (_, g) in enumerate(cpu_jobs) if g is not None]
            if not on_gpu:
                continue  # nothing this GPU worker can run: it stops
            seconds = cpu_jobs.pop(max(on_gpu, key=lambda n: cpu_jobs[n][1]))[1]
        else:
            on_cpu = [n for n, (c, _) in enumerate(cpu_jobs) if c is not None]
            if not on_cpu:
                continue  # a CPU worker takes no GPU-class job: it stops
            seconds = cpu_jobs.pop(on_cpu[0])[0]
        busy[GPU if kind == 0 else CPU] += seconds
        wall = max(wall, t + seconds)
        heapq.heappush(free, (t + seconds, kind, i))
    return {"wall": wall, "cpu_busy": busy[CPU], "gpu_busy": busy[GPU], "left": left + len(gpu_jobs) + len(cpu_jobs)}


def _plan_jobs(plans: list[campaign.CellPlan], prices: Prices, root: Path, cpus: int, gpus: int, paper: bool,
               order: set[str]) -> tuple[list[_Job], list[str]]:
    """The runs left of the runnable cells (the minimal tests, or the paper's seeds) with their prices, and the
    cells with runs that no worker of the mix has a price for (the estimate leaves them out: a lower bound)."""
    jobs, unpriced = [], []
    for c in plans:
        if c.data.startswith("no"):
            continue
        runs = _missing(c, root, 0, c.cell.seeds if paper else c.minimal)
        kind = GPU if gpus and c.cell.name in order else CPU
        missing = 0
        for r in runs:
            (cpu, cpu_from), (gpu, gpu_from) = prices.cpu_priced(r), prices.gpu(r)
            on_gpu = kind == GPU or not cpus  # GPU-class runs wait for a GPU worker
            if (gpu if on_gpu else cpu) is None:
                missing += 1
                continue
            jobs.append(_Job(r, kind, cpu, gpu, f"{'GPU' if on_gpu else 'CPU'}: {gpu_from if on_gpu else cpu_from}"))
        if missing:
            unpriced.append(f"`{c.cell.name}` ({missing} of {len(runs)} runs)")
    return jobs, unpriced


def device_plan(plans: list[campaign.CellPlan], timings: dict, cpus: int, gpus: int, root: Path = campaign.HERE,
                budget_hours: float = campaign.BUDGET_HOURS) -> str:
    """Markdown: the wall time of the runnable table's runs left on ``cpus`` CPU workers and ``gpus`` GPU workers
    (:func:`makespan`), for the minimal tests and for the paper's seeds, with the prices' sources.  Stores the GPU
    timings of the stored GPU runs first (:func:`record_gpu_timings`)."""
    root = Path(root)
    record_gpu_timings(root)
    prices = Prices.read(root)
    order = {c.cell.name for c in gpu_cells(plans, prices, root)}
    s = prices.speedup
    gpu_names = sorted({str(v.get("device", "")).split(": ", 1)[-1].split(" (")[0]
                        for v in prices.gpu_timings.values()})
    lines = [f"## The table on {cpus} CPU worker(s) and {gpus} GPU worker(s) (`--backend dask`)", "",
             f"CPU prices: CPU seconds of one run on one core as measured by the campaign "
             f"({'; '.join(prices.cpu_devices) or 'no stored CPU run'}): the point's stored CPU runs, else the timed "
             f"rounds of `{costs.TIMINGS}`; a protocol-changed cell's point not priced so, its stale runs'.",
             f"GPU prices: wall seconds of the point's stored GPU runs, else the GPU timing of its setting in "
             f"`{costs.TIMINGS}` ({len(prices.gpu_timings)} entries with their device, from the stored runs on "
             f"{', '.join(gpu_names) or 'no GPU'}), else its stale GPU runs (protocol-changed cells), else the CPU "
             "price / "
             + (f"**{s.factor:.0f}**, the CPU-to-GPU speed-up measured on the {s.points} point(s) that have both a "
                f"CPU price and a stored GPU run (sum of CPU seconds / sum of GPU seconds; one point alone: "
                f"{s.low:.0f}-{s.high:.0f}x; cells {', '.join(s.cells)}; GPU {', '.join(s.gpus)})."
                if s else "the speed-up, which no point measures yet (no stored GPU run has a CPU price)."),
             ("GPU workers take the GPU queue (protocol-changed cells, then the cells that need a GPU), then the "
              "CPU queue's runs; CPU workers the CPU queue. " if gpus else "Every run on the CPU workers. ")
             + "The wall time is a list-scheduling estimate (longest run first, no start-up or data-loading "
             f"overhead); the CPU budget (`--budget-hours`, {budget_hours:g} h) limits `--campaign run`, not it.", "",
             "| runs | runs left | CPU-hours on CPU workers | GPU-hours on GPU workers | longest run | wall time |",
             "|---|---|---|---|---|---|"]
    notes = []
    for paper, label in ((False, "minimal tests"), (True, "paper's seeds")):
        jobs, unpriced = _plan_jobs(plans, prices, root, cpus, gpus, paper, order)
        m = makespan([(j.kind, j.cpu, j.gpu) for j in jobs], cpus, gpus)
        longest = max(jobs, key=lambda j: j.seconds, default=None)
        at = "" if longest is None else (f"{_duration(longest.seconds)} ({longest.req.folder} "
                                          f"{longest.req.point.get('algo')}, {longest.source.split(':')[0]})")
        low = "≥ " if unpriced else ""
        lines.append(f"| {label} | {len(jobs)} | {low}{m['cpu_busy'] / 3600:.1f} | {low}{m['gpu_busy'] / 3600:.2f} | "
                     f"{at} | {low}**{_duration(m['wall'])}** |")
        sources = Counter(j.source for j in jobs)
        notes.append(f"{label}: prices from " + ", ".join(f"{k} ({n} runs)" for k, n in sorted(sources.items())))
        guessed = sorted({_cell_name(j.req) for j in jobs if j.source.startswith("GPU: CPU / speed-up")})
        if guessed and not paper:
            notes.append("cells with no GPU timing (their runs priced at the CPU price / the speed-up): "
                         + ", ".join(f"`{c}`" for c in guessed))
        if unpriced:
            notes.append(f"{label}: not priced, left out (the times are lower bounds): " + "; ".join(unpriced))
    return "\n".join(lines + [""] + [f"- {n}" for n in notes])


def _cell_name(req: RunRequest) -> str:
    return f"{req.folder}:{req.point.get('dataset')}:{req.point.get('clients')}"


def _duration(seconds: float) -> str:
    if seconds >= 48 * 3600:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"


# -- the runner ---------------------------------------------------------------------------------------------------

def _gpu_settings() -> None:
    """bench/gpu_run.py's determinism settings on a GPU worker: float32 end to end (no TF32), deterministic
    kernels where torch has them (warn otherwise), a fixed cuBLAS workspace."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False


def work(req: RunRequest, root: str, data_dir: str | None, command: str, device: str) -> dict[str, Any]:
    """On a worker: compute one run with the campaign's code and writer (:func:`figures.campaign.planner._execute`) into
    a scratch folder, and return its summary with the file's text (``text``; None when the run raised).  The run's
    checkpoints go to ``root``'s when this worker sees that folder (a shared file system: a run redone after a lost
    worker resumes there), else to the scratch folder."""
    import tempfile

    if device == "cuda":
        _gpu_settings()
    shared = Path(root).is_dir() and os.access(root, os.W_OK)
    with tempfile.TemporaryDirectory(prefix="cflab-run-") as tmp:
        path = Path(tmp) / req.path(Path(root)).name
        out = campaign._execute(req, root if shared else tmp, data_dir, command, path, device)
        out = dict(out, run=f"{req.folder}/{path.name}")
        out["text"] = path.read_text(encoding="utf-8") if path.is_file() else None
    return out


@dataclass
class _Running:
    """A run submitted to a worker: its request, the resource it holds, the lock it holds, its store path."""

    req: RunRequest
    kind: str
    lock: int
    path: Path


def _store(job: _Running, text: str) -> str:
    """Store a worker's run file: checked as the request's run with its digest (:func:`load_run`), then renamed
    into place atomically; '' when stored, else why not."""
    if job.path.exists():
        return "stored meanwhile"
    incoming = job.path.with_suffix(".incoming")
    write_text_atomic(incoming, text)
    try:
        load_run(incoming, job.req)
    except StoreError as exc:
        incoming.unlink(missing_ok=True)
        return f"refused: {exc}"
    os.replace(incoming, job.path)
    return ""


class _Queue:
    """The GPU and CPU queues as the workers take them (see the module docstring)."""

    def __init__(self, gpu_runs: list[RunRequest], cpu_runs: list[RunRequest]):
        self.gpu, self.cpu = list(gpu_runs), list(cpu_runs)
        self.gpu_keys = {r.key for r in gpu_runs}
        self.taken: set[str] = set()

    def left(self) -> int:
        return len({r.key for r in self.gpu + self.cpu} - self.taken)

    def next_for(self, kind: str, gpu_connected: bool) -> RunRequest | None:
        """The next run for a free worker of ``kind`` (taken off the queues), or None."""
        order = (self.gpu, self.cpu) if kind == GPU else (self.cpu,)
        for q in order:
            for r in q:
                if r.key in self.taken or (kind == CPU and gpu_connected and r.key in self.gpu_keys):
                    continue
                self.taken.add(r.key)
                return r
        return None

    def peek_cpu(self, gpu_connected: bool) -> RunRequest | None:
        return next((r for r in self.cpu if r.key not in self.taken
                     and not (gpu_connected and r.key in self.gpu_keys)), None)


def _slots(client) -> dict[str, int]:
    """Runs the connected workers can hold at once: the sum of their ``GPU`` and ``CPU`` resources."""
    slots = Counter()
    for info in client.scheduler_info(n_workers=-1).get("workers", {}).values():
        for kind in (GPU, CPU):
            slots[kind] += int((info.get("resources") or {}).get(kind, 0))
    return {GPU: slots[GPU], CPU: slots[CPU]}


def run_queue(client, gpu_runs: list[RunRequest], cpu_runs: list[RunRequest], root: Path, data_dir: str | None,
              command: str, log: Callable[[str], None] = print, hours: float | None = None,
              on_stored: Callable[[dict], None] | None = None, wait_s: float = 0.0, poll_s: float = 1.0) -> int:
    """Run the GPU and CPU queues on the Dask workers of ``client``, storing each finished run as it comes back
    (see the module docstring); ``on_stored`` is called with each stored run's summary (``run``, ``path``, ``wall``,
    ``cpu``, ``device``); ``wait_s``: how long to wait for a worker that can take the runs left when none is
    connected.  Returns the number of runs stored."""
    from distributed import wait

    root = Path(root).resolve()
    data_dir = str(Path(data_dir).resolve()) if data_dir is not None else None
    queue = _Queue(gpu_runs, cpu_runs)
    deadline = None if hours is None else time.time() + hours * 3600
    running: dict[Any, _Running] = {}
    done, idle_since, said = 0, None, set()
    try:
        while True:
            if deadline is not None and time.time() > deadline:
                if "deadline" not in said:
                    log("campaign: the wall-time limit is reached; no more runs are started")
                    said.add("deadline")
            else:
                _fill(client, queue, running, root, data_dir, command, log)
            if not running:
                if "deadline" in said or not queue.left():
                    break
                idle_since = idle_since or time.time()
                workers = client.scheduler_info(n_workers=-1).get("workers", {})
                if (workers and not any(_slots(client).values())) or time.time() - idle_since >= wait_s:
                    # connected workers that declare no usable resource will never take a run: no wait, no exit 0
                    raise ValueError(f"campaign: {queue.left()} runs left that no connected worker can take "
                                     f"({len(workers)} worker(s) connected; the GPU queue needs a worker declaring "
                                     "the resource GPU=1, the CPU queue CPU=1 or GPU=1)")
                time.sleep(poll_s)
                continue
            idle_since = None
            try:
                finished, _ = wait(list(running), timeout=poll_s, return_when="FIRST_COMPLETED")
            except TimeoutError:
                continue
            for fut in finished:
                done += _finish(fut, running.pop(fut), log, on_stored)
    finally:
        for fut, job in running.items():
            fut.cancel()
            campaign.release(job.lock, job.path)
    return done


def _fill(client, queue: _Queue, running: dict, root: Path, data_dir: str | None, command: str,
          log: Callable[[str], None]) -> None:
    """Submit runs to the free worker slots: GPU slots from the GPU queue, then the CPU queue; CPU slots from the
    CPU queue, a big run only when no other CPU run is running, and nothing beside it."""
    slots = _slots(client)
    busy = Counter(job.kind for job in running.values())
    gpu_connected = slots[GPU] > 0
    for kind in (GPU, CPU):
        while busy[kind] < slots[kind]:
            if kind == CPU:
                nxt = queue.peek_cpu(gpu_connected)
                big_running = any(_big(j.req) for j in running.values() if j.kind == CPU)
                if nxt is None or big_running or (_big(nxt) and busy[CPU]):
                    break
            req = queue.next_for(kind, gpu_connected)
            if req is None:
                break
            fd, why = campaign.claim(req, root)
            if fd is None:
                log(f"campaign: {req.folder}/{req.path(root).name} skipped ({why})")
                continue
            device = "cuda" if kind == GPU else "cpu"
            fut = client.submit(work, req, str(root), data_dir, command, device, key=f"campaign-{req.folder}-"
                                f"{req.path(root).stem}", resources={kind: 1}, pure=False,
                                priority=1 if req.key in queue.gpu_keys else 0)
            running[fut] = _Running(req, kind, fd, req.path(root))
            busy[kind] += 1


def _finish(fut, job: _Running, log: Callable[[str], None], on_stored: Callable[[dict], None] | None) -> int:
    """Store a finished run (1) or report why not (0); the run's lock is released either way."""
    name = f"{job.req.folder}/{job.path.name}"
    try:
        try:
            out = fut.result()
        except Exception as exc:  # e.g. KilledWorker: the run took down allowed-failures workers; the others go on
            log(f"campaign: {name} FAILED on the workers: {type(exc).__name__}: {exc}")
            return 0
        if out.get("text") is None:
            log(f"campaign: {name} FAILED: {out.get('error')}")
            return 0
        why = _store(job, out["text"])
        if why:
            log(f"campaign: {name} not stored ({why})")
            return 0
        if out.get("error"):  # stored with its error, as the loky runner stores it
            log(f"campaign: {name} FAILED: {out['error']}")
            return 0
        where = "GPU" if job.kind == GPU else "CPU"
        log(f"campaign: stored {name} ({out['wall']:.0f} s wall, {out['cpu']:.0f} s CPU, {where} worker)")
        if on_stored is not None:
            on_stored({"run": name, "path": str(job.path), "wall": out["wall"], "cpu": out["cpu"],
                       "device": "cuda" if job.kind == GPU else "cpu"})
        return 1
    finally:
        campaign.release(job.lock, job.path)


# -- clusters ---------------------------------------------------------------------------------------------------------

def local_cluster(cpus: int, gpus: int = 0):
    """A Dask cluster on this machine: ``cpus`` CPU workers (resource ``CPU=1``) and ``gpus`` GPU workers (``GPU=1``,
    each seeing one CUDA device), each a process of one thread under a nanny (a worker that dies is restarted), no
    Dask memory limit (nets guards a run's memory itself), no dashboard."""
    from distributed import Nanny, Scheduler, SpecCluster

    if cpus < 0 or gpus < 0 or cpus + gpus == 0:
        raise ValueError(f"cpus and gpus must be >= 0 and not both 0, got cpus={cpus}, gpus={gpus}")
    base = {"nthreads": 1, "memory_limit": 0, "host": "127.0.0.1", "silence_logs": logging.ERROR}
    workers = {f"cpu-{i}": {"cls": Nanny, "options": dict(base, resources={CPU: 1})} for i in range(cpus)}
    workers.update({f"gpu-{i}": {"cls": Nanny, "options": dict(base, resources={GPU: 1},
                                                                env={"CUDA_VISIBLE_DEVICES": str(i)})}
                    for i in range(gpus)})
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": False}}
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR)


CONNECT_TIMEOUT_S = 30.0  # a scheduler that accepts and never speaks is named within this wait


def _probe(scheduler: str) -> None:
    """A ``tcp://HOST:PORT`` scheduler must accept a connection and speak (a Dask scheduler sends its handshake at
    once) within :data:`CONNECT_TIMEOUT_S`: Dask's own client waits on a silent server without a bound."""
    import socket
    from urllib.parse import urlsplit

    if not scheduler.startswith("tcp://"):
        return
    try:
        parts = urlsplit(scheduler)
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host or not port:
        raise ValueError(f"--scheduler {scheduler}: not an address of the form tcp://HOST:PORT")
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as conn:
            conn.settimeout(CONNECT_TIMEOUT_S)
            spoke = bool(conn.recv(1))
    except OSError as exc:
        raise ValueError(f"--scheduler {scheduler}: no Dask scheduler answered within {CONNECT_TIMEOUT_S:g} s "
                         f"({type(exc).__name__}: {exc})") from None
    if not spoke:
        raise ValueError(f"--scheduler {scheduler}: the server closed the connection without a Dask handshake")


@contextlib.contextmanager
def _client(scheduler: Any, cpus: int, gpus: int) -> Iterator[Any]:
    """A client of ``scheduler`` (an address, or a ``distributed.Client`` used as it is), else of a local cluster
    of ``cpus`` CPU and ``gpus`` GPU workers (closed at the end)."""
    from distributed import Client

    if scheduler is not None and not isinstance(scheduler, str):
        yield scheduler
        return
    if scheduler is not None:
        _probe(scheduler)
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"--scheduler {scheduler}: no Dask scheduler answered within {CONNECT_TIMEOUT_S:g} s "
                             f"({type(exc).__name__}); is it a Dask scheduler's address (tcp://HOST:8786)?") from None
        with client:
            yield client
        return
    with local_cluster(cpus, gpus) as cluster, Client(cluster) as client:
        client.wait_for_workers(cpus + gpus, timeout=300)
        yield client


def run_campaign(budget_hours: float = campaign.BUDGET_HOURS, root: Path = campaign.HERE, data_dir: str | None = None,
                 only: list[str] | None = None, hours: float | None = None, command: str = "",
                 log: Callable[[str], None] = print, scheduler: Any = None, cpus: int = 1, gpus: int = 0,
                 on_stored: Callable[[dict], None] | None = None) -> int:
    """The campaign on Dask workers: the cells of :func:`figures.campaign.planner.chosen_cells`, then
    :func:`run_on_dask` (the GPU queue first on GPU workers, the CPU queue on CPU workers; the coordinator stores).
    Returns the number of runs stored."""
    cell_list = campaign.chosen_cells(only, root, data_dir)
    return run_on_dask(cell_list, budget_hours, root, data_dir, hours, command, log, scheduler=scheduler,
                       cpus=cpus, gpus=gpus, on_stored=on_stored)


def run_on_dask(cell_list: list[campaign.Cell], budget_hours: float, root: Path, data_dir: str | None,
                hours: float | None, command: str, log: Callable[[str], None] = print, scheduler: Any = None,
                cpus: int = 1, gpus: int = 0, on_stored: Callable[[dict], None] | None = None,
                wait_s: float | None = None) -> int:
    """Time the cells not timed yet (as the loky runner does), then run the GPU and CPU queues (:func:`queues`) on
    the workers of ``scheduler`` (an address or a client; None: a local cluster of ``cpus`` + ``gpus`` workers).
    ``wait_s``: how long to wait for a worker that can take the runs left (default: 0 on a local cluster, 10
    minutes on a given scheduler, whose workers may still be queued).  Returns the number of runs stored."""
    timings = campaign.measure(cell_list, root, data_dir, log=log, budget_hours=budget_hours)
    plans = campaign.plan(cell_list, timings, budget_hours, root, data_dir)
    prices = Prices.read(root, timings)
    gpu_runs, cpu_runs = queues(plans, timings, budget_hours, root, prices)
    est = sum(prices.cpu(r) or 0.0 for r in cpu_runs) / 3600
    log(f"campaign: {len(gpu_runs)} runs in the GPU queue, {len(cpu_runs)} in the CPU queue (about {est:.1f} "
        f"CPU-hours); Dask {'scheduler ' + str(scheduler) if scheduler else f'local cluster: {cpus} CPU + {gpus} GPU'}")
    if not gpu_runs and not cpu_runs:
        return 0
    wait_s = (0.0 if scheduler is None else 600.0) if wait_s is None else wait_s
    with _client(scheduler, cpus, gpus) as client:
        return run_queue(client, gpu_runs, cpu_runs, root, data_dir, command, log, hours, on_stored, wait_s)


def git_commit_run(path: str | Path, log: Callable[[str], None] = print) -> bool:
    """Commit one stored run file, and nothing else (``git commit -- <file>``), in the checkout that holds it; a
    failure (another commit holding the index, no git) is one log line, never the end of the campaign."""
    path = Path(path).resolve()
    repo = path.parent
    try:
        rel = str(path.relative_to(repo))
        subprocess.run(["git", "add", "--", rel], cwd=repo, check=True, capture_output=True, text=True, timeout=60)
        msg = f"Campaign run {path.parent.name}/{path.name} (stored by paper_repro.py --campaign run --backend dask)"
        subprocess.run(["git", "commit", "-q", "-m", msg, "--", rel], cwd=repo, check=True, capture_output=True,
                       text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        log(f"campaign: {path.name} stored, not committed: {detail.strip()[:200]}")
        return False
    return True

