"""The campaign's store of runs: one JSON per run, ``figures/measured/<folder>/<algo>-<key>.json``, keyed by what the
run computes (its folder, point and seed), and the records the targets read from it under ``Context(stored=...)``
(see :mod:`figures.campaign.planner`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.montecarlo import trial_seed
from synth.spec import callable_name
from synth.store import StoreError, check_digest, with_digest, write_json_atomic

__all__ = ["RECORD_BOUNDS", "RESULT_BOUNDS", "RunRequest", "load_run", "read_run_file", "run_point", "seal_run",
           "stale_run", "stored_records"]

# keys of a point that do not change what a run computes (where it runs, where its files are)
HERE = Path(__file__).parent.parent / "measured"  # the store: figures/measured/<folder>/<run>.json
_PLACE_KEYS = ("checkpoint_dir", "data_dir", "device")



def run_point(point: dict) -> dict:
    """A point without the keys that say only where a run runs (device, data and checkpoint folders)."""
    return {k: v for k, v in point.items() if k not in _PLACE_KEYS}


@dataclass(frozen=True)
class RunRequest:
    """One run a target asks for at full size: trial ``trial`` of point ``point_index`` of run folder ``folder``."""

    target: str
    folder: str
    point_index: int
    trial: int
    point: dict = field(hash=False, compare=False)
    seed: int = 0
    trial_fn: str = ""

    @property
    def key(self) -> str:
        """A digest of what the run computes: its folder, point and seed."""
        text = json.dumps({"folder": self.folder, "point": run_point(self.point), "seed": self.seed}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def path(self, root: Path) -> Path:
        """Where the run's JSON is kept under ``root``."""
        algo = re.sub(r"[^a-z0-9-]", "", str(self.point.get("algo", "run")))
        return Path(root) / self.folder / f"{algo}-{self.key}.json"


# the numbers a run's result and record carry that the readers compute with: finite, and within these bounds
RESULT_BOUNDS = {"test_accuracy": (0.0, 1.0), "test_accuracy_code": (0.0, 1.0), "validation_accuracy": (0.0, 1.0),
                 "test_accuracy_train_identity": (0.0, 1.0), "ari": (-1.0, 1.0), "misclustering": (0.0, 1.0),
                 "misclustering_matched": (0.0, 1.0), "test_loss": (0.0, 1e6), "test_loss_train_identity": (0.0, 1e6),
                 "validation_loss": (0.0, 1e6), "seconds": (0.0, 1e8)}
RECORD_BOUNDS = {"cpu_seconds": (0.0, 1e8), "wall_seconds": (0.0, 1e8), "seed": (0, 2**64)}


def read_run_file(path: Path) -> dict | None:
    """A regular file's JSON object (None when there is no file); a FIFO, device or folder by that name, or text
    that is not JSON, is a StoreError naming the file (never waited on, never skipped)."""
    import os
    import stat

    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(mode):
        raise StoreError(f"{path}: not a regular file (a pipe, device, link or folder by a run's name); remove it")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise StoreError(f"{path}: not a readable campaign run ({type(exc).__name__}: {exc}); delete it to rerun "
                         "that run") from None


def _check_bounds(path: Path, where: str, values: dict, bounds: dict) -> None:
    for key, (low, high) in bounds.items():
        v = values.get(key)
        if v is None:
            continue
        number = isinstance(v, int | float) and not isinstance(v, bool)
        ok = number and (isinstance(v, int) or math.isfinite(v)) and low <= v <= high  # ints may exceed a float
        if not ok:
            raise StoreError(f"{path}: field {where}{key} must be a finite number in [{low:g}, {high:g}], got "
                             f"{str(v)[:40]!r}; restore the file or remove it to rerun that run")


def load_run(path: Path, request: RunRequest | None = None) -> dict | None:
    """The stored run at ``path`` without its digest (None when there is none).  A file that is not a regular file,
    not a run of ``request``, without a digest or whose content does not match it (:func:`synth.store.check_digest`:
    edited after the runner wrote it; files written before digests: ``python paper_repro.py --seal-runs``), or whose
    numbers are not finite and in range (:data:`RESULT_BOUNDS`, :data:`RECORD_BOUNDS`), is an error naming the file
    and the field, never silently read."""
    data = read_run_file(Path(path))
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("result"), dict):
        raise StoreError(f"{path}: not a campaign run (no 'result' object); delete it to rerun that run")
    if "digest" not in data:
        raise StoreError(f"{path}: has no digest (the runner seals every run): a file written before digests is "
                         f"sealed by 'python paper_repro.py --seal-runs {path}'; one edited or copied from elsewhere "
                         "is restored or removed")
    data = check_digest(data, path)  # an edited result, device or note is refused
    _check_bounds(path, "", data, RECORD_BOUNDS)
    _check_bounds(path, "result.", data["result"], RESULT_BOUNDS)
    if request is not None:
        if (data.get("folder"), data.get("seed")) != (request.folder, request.seed) or \
                run_point(data.get("point") or {}) != run_point(request.point):
            raise StoreError(f"{path}: holds another run (its folder, point or seed differ from the file name's); "
                             "delete it to rerun that run")
    return data


def seal_run(path: Path) -> bool:
    """Give a campaign run file written before digests its ``digest`` (nothing else changes; a file that has one is
    checked, see :func:`load_run`); True when the file was rewritten.  Files that are not campaign runs are left.

    A digest is a SHA-256 of the run's content: it tells a file changed after it was written (an edited result, a
    deleted field) from one as the runner wrote it.  It is no signature: whoever can write the file can compute a
    new digest, so it guards against accidents and careless edits, not against a forger."""
    raw = read_run_file(Path(path))
    if not isinstance(raw, dict) or not raw.get("campaign"):
        return False
    if "digest" in raw:
        load_run(Path(path))  # checked: an edited sealed file is refused, never sealed again
        return False
    if not isinstance(raw.get("result"), dict):
        raise StoreError(f"{path}: not a campaign run (no 'result' object); nothing to seal")
    _check_bounds(Path(path), "", raw, RECORD_BOUNDS)
    _check_bounds(Path(path), "result.", raw["result"], RESULT_BOUNDS)
    write_json_atomic(path, with_digest(raw))
    return True


def stale_run(req: RunRequest, root: Path, changed_keys: list[str] | tuple[str, ...]) -> Path | None:
    """A stored run of ``req`` made under a protocol since corrected: same folder and seed, and a point equal to the
    request's once the ``changed_keys`` (the protocol's corrected settings, :class:`figures.verdicts.protocol.Stale`)
    are left out of both; None when there is none."""
    if not changed_keys:
        return None
    want = {k: v for k, v in run_point(req.point).items() if k not in changed_keys}
    for path, data in _folder_runs(Path(root) / req.folder):
        if data.get("seed") == req.seed and {k: v for k, v in run_point(data.get("point") or {}).items()
                                             if k not in changed_keys} == want:
            return path
    return None


def _folder_runs(folder: Path) -> list[tuple[Path, dict]]:
    """Every readable campaign run of ``folder`` (cached by the folder's listing and modification times)."""
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    key = (str(folder), tuple((p.name, p.stat().st_mtime_ns) for p in paths))
    if _FOLDER_CACHE.get("key") != key:
        runs = []
        for path in paths:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(data, dict) and isinstance(data.get("point"), dict):
                runs.append((path, data))
        _FOLDER_CACHE.update(key=key, runs=runs)
    return _FOLDER_CACHE["runs"]


_FOLDER_CACHE: dict[str, Any] = {}


def stored_records(ctx, folder: str, spec, trial_fn: Callable) -> list[dict[str, Any]]:
    """The records of ``spec``'s trials read from the campaign store under ``ctx.stored`` (see
    :func:`figures.runs.run_points`): a stored run is an ``ok`` record, any other a ``missing`` one; every request
    is appended to ``ctx.requests`` when that is a list.  Where the folder's protocol ledger marks stored runs
    stale (:mod:`figures.verdicts.protocol`), a missing run is read from its stale run, and the record says
    ``stale``."""
    from ..verdicts.protocol import ledger_for

    out = []
    name = callable_name(trial_fn)
    ledger = ledger_for(folder)
    changed = list(ledger.stale.changed_keys) if ledger is not None and ledger.stale is not None else []
    for p, point in enumerate(spec.points):
        for t in range(spec.trials):
            req = RunRequest(ctx.target or folder, folder, p, t, point, trial_seed(spec.seed, p, t), name)
            if ctx.requests is not None:
                ctx.requests.append(req)
            data = load_run(req.path(ctx.stored), req)
            old = None if data is not None else stale_run(req, ctx.stored, changed)
            if old is not None:
                data = load_run(old)
                out.append({"point": p, "trial": t, "seed": req.seed, "params": point, "status": "ok",
                            "result": data["result"], "seconds": data.get("wall_seconds"),
                            "stale": ledger.stale.reason})
            elif data is None:
                out.append({"point": p, "trial": t, "seed": req.seed, "params": point, "status": "missing",
                            "reason": "not run yet (paper-scale campaign)", "result": None})
            else:
                out.append({"point": p, "trial": t, "seed": req.seed, "params": point, "status": "ok",
                            "result": data["result"], "seconds": data.get("wall_seconds")})
    return out
