"""A target's ``status-<size>.json``: written after each target runs, verified whenever the report reads it.

A ``done`` status keeps the rows the headline counts (:func:`figures.report.headline.row_record`), their verdict counts
and a SHA-256 digest of those rows together with the title, the size and the text of the target's
``section-<size>.md``.  On reading, a status that is not a regular file, not JSON, lacks a field, or whose digest
or verdict counts do not match its rows and section is *unreadable*: the report names the file and the reason and
counts nothing from it, and the other targets are reported as usual.  The digest catches a hand-edited, truncated
or forged status (say a "done" with 99 "within ±" rows) and a section changed after its status was written; it is
no signature, and someone who recomputes it can still forge one.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MAX_BYTES", "STATES", "Status", "digest", "done_status", "read_status", "section_path", "status_path",
           "verdict_counts"]

STATES = ("done", "pending", "failed")
MAX_BYTES = 64 * 2 ** 20  # a status file beyond this is not one paper_repro.py wrote


@dataclass
class Status:
    """A target's status as read: ``state`` is one of :data:`STATES`, ``not run`` (no file) or ``unreadable``."""

    name: str
    path: Path
    state: str
    data: dict = field(default_factory=dict)
    reason: str = ""

    @property
    def rows(self) -> list[dict]:
        return self.data.get("rows", []) if self.state == "done" else []


def status_path(out: Path, name: str, size: str) -> Path:
    return Path(out) / name / f"status-{size}.json"


def section_path(out: Path, name: str, size: str) -> Path:
    return Path(out) / name / f"section-{size}.md"


def verdict_counts(rows: list[dict]) -> dict[str, int]:
    """How many rows carry each verdict head (:func:`figures.verdicts.rules.head`)."""
    from ..verdicts.rules import head

    return dict(Counter(head(r["verdict"]) for r in rows))


def digest(rows: list[dict], title: str, size: str, run_size: str, section: str) -> str:
    """SHA-256 of what the headline counts from a done target, and of its section's text."""
    blob = json.dumps({"rows": rows, "title": title, "size": size, "run_size": run_size,
                       "section": hashlib.sha256(section.encode("utf-8")).hexdigest()},
                      sort_keys=True, ensure_ascii=True)
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


def done_status(rows: list[dict], title: str, size: str, run_size: str, section: str, seconds: float) -> dict:
    """The fields of a done status (``paper_repro.py`` adds ``size`` and ``finished``)."""
    return {"status": "done", "title": title, "seconds": seconds, "verdicts": verdict_counts(rows), "rows": rows,
            "run_size": run_size, "digest": digest(rows, title, size, run_size, section)}


def _regular_text(path: Path) -> str:
    """The text of a regular file (a FIFO or device would block or never end); OSError or ValueError otherwise."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError("not a regular file")
    if st.st_size > MAX_BYTES:
        raise ValueError(f"{st.st_size} bytes, more than a status file holds")
    return path.read_text(encoding="utf-8")


def _check_done(data: dict, out: Path, name: str, size: str) -> str | None:
    """Why a done status does not hold together (None when it does)."""
    rows, title = data.get("rows"), data.get("title")
    if not isinstance(rows, list) or not all(isinstance(r, dict) and all(isinstance(r.get(k), str) for k in
                                                                         ("item", "verdict", "compared"))
                                             for r in rows):
        return "its rows are not a list of {item, verdict, compared} strings"
    if not isinstance(title, str) or not isinstance(data.get("run_size"), str) or not isinstance(data.get("digest"),
                                                                                                 str):
        return "a done status needs a title, run_size and digest"
    if data.get("verdicts") != verdict_counts(rows):
        return "its verdict counts do not match its rows"
    sec = section_path(out, name, size)
    try:
        section = _regular_text(sec)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return f"its section {sec} cannot be read ({exc})"
    if data["digest"] != digest(rows, title, size, data["run_size"], section):
        return f"its digest does not match its rows and {sec.name} (edited after the run?)"
    return None


def read_status(out: Path, name: str, size: str) -> Status:
    """The verified status of target ``name`` at ``size`` under ``out`` (never raises for a bad file)."""
    path = status_path(out, name, size)
    try:
        text = _regular_text(path)
    except FileNotFoundError:
        return Status(name, path, "not run", reason="no status file in this output folder")
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return Status(name, path, "unreadable", reason=f"{path}: {exc}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return Status(name, path, "unreadable", reason=f"{path}: not JSON ({exc})")
    if not isinstance(data, dict) or data.get("status") not in STATES:
        return Status(name, path, "unreadable", reason=f"{path}: no status among {', '.join(STATES)}")
    if data.get("size") != size:
        return Status(name, path, "unreadable", reason=f"{path}: written for size {data.get('size')!r}, not {size!r}")
    if not isinstance(data.get("reason", ""), str):
        return Status(name, path, "unreadable", reason=f"{path}: its reason is not text")
    if data["status"] == "done":
        why = _check_done(data, Path(out), name, size)
        if why:
            return Status(name, path, "unreadable", reason=f"{path}: {why}")
    return Status(name, path, data["status"], data, str(data.get("reason", "")))
