"""The paper-scale campaign's plan and runner: every published real-data number, the runs at the paper's own setting
behind it, their cost measured on this machine, and a resumable runner (``python paper_repro.py --campaign plan |
run``).  The cells are built in :mod:`figures.campaign.cells`, their costs measured in :mod:`figures.campaign.costs`,
a run's provenance read in :mod:`figures.campaign.provenance`; the store is :mod:`figures.campaign.store`.

The runs are those the registered neural-network targets ask for at ``--full`` (their points, seeds and trial
functions, unchanged): :func:`collect` runs every target with ``Context(size="full", stored=...)``, under which
:func:`figures.runs.run_points` reads each run from the campaign's store instead of computing it
(:func:`figures.campaign.store.stored_records`) and logs the request.  The store is one JSON per run,
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
import io
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from synth.progress import Progress
from synth.store import with_digest, write_json_atomic, write_text_atomic

from ..registry import Context
from ..verdicts.published import tables
from .cells import Cell, cell_of, cells, minimal_seeds, power_seeds
from .costs import (
    BIG_CLIENTS,
    _Alone,
    _point_key,
    _stored_runs,
    _timing_key,
    measure,
    read_timings,
    run_seconds,
    stored_seconds,
)
from .provenance import commit, device_name, nets_command, tree_change
from .store import HERE, RunRequest, run_point, stored_records

__all__ = ["BUDGET_HOURS", "CHECKPOINTS", "CellPlan", "MANIFEST", "MANIFEST_COLUMNS", "TARGETS", "check_cells",
           "chosen_cells", "claim", "collect", "execute", "gpu_queue", "known_cells", "manifest_rows", "plan", "queue",
           "refresh", "release", "run_campaign", "stored_gpu_runs", "summary", "write_manifest"]

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
        names = list(names)
        # reading every target's stored runs takes a minute: a progress line on stderr (synth.progress)
        with Progress("campaign", len(names), "targets", verb="collected") as progress:
            for name in names:
                if not targets[name].why_not(ctx):  # else e.g. no data: its numbers have no runs
                    rows[name] = list(targets[name].run(ctx).rows)
                progress.update()
    return requests, rows


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
    power: int | None = None  # seeds for P(agrees) >= 0.8 of a perfect reproduction (cells.power_seeds)
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
        plans.append(CellPlan(cell, data, minimal, paper, mini, stored, power=power_seeds(cell), measured_points=sum(
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
                    "step_size", "paper_seeds", "minimal_seeds", "power_seeds", "seeds_stored", "data",
                    "seconds_per_round",
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
                "paper_seeds": c.cell.seeds, "minimal_seeds": c.minimal,
                "power_seeds": "none up to 100" if c.power is None else c.power, "seeds_stored": len(full),
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
             "| cell | published (with ±) | data | seeds (minimal / for 0.8 power / paper / stored) | CPU-h minimal "
             "| CPU-h paper "
             "| numbers per CPU-h | status |", "|---|---|---|---|---|---|---|---|"]
    for c in plans:
        full = sum(1 for t in range(c.cell.seeds) if c.stored.get(t, 0) == len(c.cell.points()))
        at_least = "≥ " if c.untimed_points and c.seconds_minimal else ""
        lines.append(f"| `{c.cell.name}` | {len(c.cell.published)} ({c.numbers}) | {c.data.split(':')[0]} | "
                     f"{c.minimal} / {'—' if c.power is None else c.power} / {c.cell.seeds} / {full} | "
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
    change = tree_change() if record["commit"].endswith("+") else None
    if change is not None:  # a run from a modified tree names the code it ran by the diff's digest
        record["tree"] = change
    write_json_atomic(path, with_digest(record))  # the readers refuse the file once edited (load_run)
    return {"run": f"{req.folder}/{path.name}", "wall": wall, "cpu": cpu,
            "error": (result or {}).get("error")}


def queue(plans: list[CellPlan], timings: dict, budget_hours: float, root: Path = HERE) -> list[RunRequest]:
    """The runs to do, in order: the minimal tests of the queued cells (best numbers per CPU-hour first), then
    their seeds up to the count at which a perfect reproduction agrees with probability 0.8 (``--verdict-power``;
    at most the paper's count, which the targets' requests end at), then the rest up to the paper's count, while
    the budget lasts."""
    left = budget_hours - _stored_cpu_hours(root)
    measured = stored_seconds(root)
    out = []
    for seeds_of in (lambda c: c.minimal, lambda c: min(c.power or c.cell.seeds, c.cell.seeds),
                     lambda c: c.cell.seeds):
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
