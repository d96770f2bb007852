"""The campaign's store of runs: one JSON per run, ``figures/measured/<folder>/<algo>-<key>.json``, keyed by what the
run computes (its folder, point and seed), and the records the targets read from it under ``Context(stored=...)``
(see :mod:`figures.campaign.planner`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synth.montecarlo import trial_seed
from synth.spec import callable_name
from synth.store import StoreError, check_digest, with_digest, write_json_atomic

__all__ = ["RunRequest", "load_run", "run_point", "seal_run", "stale_run", "stored_records"]

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


def load_run(path: Path, request: RunRequest | None = None) -> dict | None:
    """The stored run at ``path`` without its digest (None when there is none); a file that is not a run of
    ``request``, or whose content does not match its digest (:func:`synth.store.check_digest`: edited after the
    runner wrote it), is an error naming the file, never silently read."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path}: not a readable campaign run ({type(exc).__name__}: {exc}); delete it to rerun "
                         "that run") from None
    if not isinstance(data, dict) or not isinstance(data.get("result"), dict):
        raise StoreError(f"{path}: not a campaign run (no 'result' object); delete it to rerun that run")
    data = check_digest(data, path)  # an edited result, device or note is refused (written before digests: as is)
    if request is not None:
        if (data.get("folder"), data.get("seed")) != (request.folder, request.seed) or \
                run_point(data.get("point") or {}) != run_point(request.point):
            raise StoreError(f"{path}: holds another run (its folder, point or seed differ from the file name's); "
                             "delete it to rerun that run")
    return data


def seal_run(path: Path) -> bool:
    """Give a campaign run file written before digests its ``digest`` (nothing else changes; a file that has one is
    checked, see :func:`load_run`); True when the file was rewritten.  Files that are not campaign runs are left."""
    data = load_run(Path(path))
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    if data is None or not raw.get("campaign") or "digest" in raw:
        return False
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
