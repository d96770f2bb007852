"""Append-only result store for Monte Carlo trials: one JSON line per finished trial, never lost.

Layout of a store directory::

    trials.jsonl   one JSON object per finished trial, appended, flushed and fsynced as it finishes
    meta.json      what produced the trials (fingerprint, toolkit and library versions), written atomically
    .lock          held (``flock``) while a run appends, so two runs cannot interleave their records

Why this shape: a run killed with SIGKILL can only leave a *torn last line*
(a record cut off mid-write) behind, because every earlier record was
fsynced before the next one started.  :meth:`TrialStore.open` detects the
torn tail, warns, and truncates the file back to the last complete record,
so the trial is simply recomputed.  A damaged line anywhere else is not
something a crash can produce; it is reported as an error instead of being
silently dropped.  A full disk (``ENOSPC``) while appending cannot leave a
torn record either: :meth:`TrialStore.append` cuts the file back to where
the record began before it reports the error.

Every record and ``meta.json`` is checked against its schema when read
(:func:`check_record`, :func:`check_meta`), and the records against the
meta (:func:`verify_records`): each point and trial in range, its seed the
one :func:`synth.montecarlo.trial_seed` gives that (point, trial), its
params the meta's point, a finished trial with a result whose metrics are
numbers, no second and different record of one (point, trial).  The meta
carries a digest of itself and of the files written beside it
(``spec.toml``), so an edit to either after the run wrote them is refused;
a store without digests (written before them, or with its digests
removed) is refused until ``python -m synth seal DIR`` seals it, which first
checks its points against its fingerprint and its ``spec.toml`` against the
stored success criterion.  Only regular files are read (a FIFO in place of a file
would block the reader forever).  A violation is a :class:`StoreError`
naming the file and the line.

Every record carries a ``digest``: the SHA-256 of its canonical JSON (sorted keys, no spaces) without that field;
a store whose meta says so (``digest.records``, itself covered by the meta's digest) holds no record without one,
so an edited line -- a success flipped, a metric changed -- is refused naming the file and the line.  These
digests are an integrity check against accidental or casual edits (anyone can recompute them), not a signature.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import one_line

__all__ = [
    "DIGEST_KEY",
    "META_FILE",
    "RECORDS_FILE",
    "StoreError",
    "TornRecordWarning",
    "TrialStore",
    "check_digest",
    "check_meta",
    "check_record",
    "read_meta",
    "fingerprint_of",
    "read_records",
    "record_digest",
    "regular_file",
    "seal_store",
    "seed_for",
    "save_figure_atomic",
    "verify_records",
    "with_digest",
    "write_json_atomic",
    "write_text_atomic",
]

RECORDS_FILE = "trials.jsonl"
META_FILE = "meta.json"
LOCK_FILE = ".lock"


class StoreError(ValueError):
    """The store directory cannot be used as asked (wrong sweep, in use, corrupt)."""


class TornRecordWarning(UserWarning):
    """The last record of a store was cut off (the writer stopped mid-write); it is dropped."""

    immediate = True  # shown when raised (synth.errors), not after an hours-long run


def _fsync_dir(path: Path) -> None:
    # a rename or a new file is durable only once its directory entry is
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def regular_file(path: str | os.PathLike, what: str = "file") -> bool:
    """Whether ``path`` exists; a StoreError when it exists but is not a regular file (a FIFO, socket, device or
    folder), which a reader would block on or misread."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(mode):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file")
        raise StoreError(f"{path}: the {what} is {kind}, not a regular file; remove it or use another directory")
    return True


def _read_regular(path: Path, what: str) -> bytes:
    """The bytes of a regular file, opened without blocking (a FIFO swapped in after the check is refused too)."""
    regular_file(path, what)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise StoreError(f"{path}: the {what} is not a regular file; remove it or use another directory")
        return fh.read()


def _write_atomic(path: str | os.PathLike, write, binary: bool) -> None:
    """``write(fh)`` into a temporary file beside ``path``, fsync, rename: readers see old or new, never half.

    An error while writing (a full disk) names ``path``, not the temporary file or no file at all.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix + ".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600 files; the result gets the mode of any other new file (0666 less the umask)
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and type(exc).__module__ == "builtins" and exc.errno is not None \
                and exc.filename in (None, tmp):
            raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise
    _fsync_dir(path.parent)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file, fsync, rename)."""
    _write_atomic(path, lambda fh: fh.write(text), binary=False)


def save_figure_atomic(fig, path: str | os.PathLike, **kwargs) -> None:
    """``fig.savefig`` atomically: a crash never leaves half an image where a good one was."""
    fmt = Path(path).suffix.lstrip(".") or None
    _write_atomic(path, lambda fh: fig.savefig(fh, format=fmt, **kwargs), binary=True)


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """:func:`write_text_atomic` of ``obj`` as indented, key-sorted strict JSON."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=False) + "\n")


def _parse_lines(data: bytes, path: Path, lines: list[int] | None = None) -> tuple[list[dict], int, int]:
    """Records in ``data``, the byte length of the valid prefix, and the number of torn tail bytes dropped.

    ``lines`` (if given) receives each record's line number.
    """
    records: list[dict] = []
    pos = 0
    n = len(data)
    lineno = 0
    while pos < n:
        lineno += 1
        end = data.find(b"\n", pos)
        last = end < 0
        line = data[pos:] if last else data[pos:end]
        try:
            obj = json.loads(line) if line.strip() else None
            ok = obj is None or isinstance(obj, dict)
        except ValueError:
            ok = False
        if last:
            # no newline: the writer died before finishing this record -- even if it parses, it is not committed
            return records, pos, n - pos
        if not ok:
            rest = data[end + 1:]
            if not rest.strip():
                # a complete but garbled final line: also a torn write (e.g. a zero-filled block after a crash)
                return records, pos, n - pos
            raise StoreError(f"{path}: line {lineno} is not a JSON record and is followed by more records; "
                             "the store is corrupt (a crash can only tear the last line)")
        if obj is not None:
            check_record(obj, f"{path}, line {lineno}")
            records.append(obj)
            if lines is not None:
                lines.append(lineno)
        pos = end + 1
    return records, pos, 0


_RECORD_TYPES = {"point": int, "trial": int, "seed": int, "status": str, "params": dict, "result": dict}
CLOCK_FIELDS = ("seconds", "cpu_seconds")  # wall and CPU time of a trial: not part of what it computed


def check_record(record: Any, where: str = "record") -> dict:
    """``record`` if it is a trial record (point, trial, seed, status, reason, params, result), else StoreError."""
    if not isinstance(record, dict):
        raise StoreError(f"{where}: a trial record must be a JSON object, got {type(record).__name__}")
    missing = [k for k in _RECORD_TYPES if k not in record]
    if missing:
        raise StoreError(f"{where}: not a trial record (missing {', '.join(missing)}); the store was edited or "
                         "written by another program -- remove that line or use another directory")
    for key, kind in _RECORD_TYPES.items():
        value = record[key]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise StoreError(f"{where}: trial record field {key!r} must be of type {kind.__name__}, got "
                             f"{json.dumps(value)[:40]}")
    if record["point"] < 0 or record["trial"] < 0:
        raise StoreError(f"{where}: trial record point and trial must be >= 0, got point {record['point']}, "
                         f"trial {record['trial']}")
    if record["status"] not in ("ok", "failed"):
        raise StoreError(f"{where}: trial record status must be 'ok' or 'failed', got {record['status']!r}")
    if not isinstance(record.get("reason"), str if record["status"] == "failed" else (str, type(None))):
        raise StoreError(f"{where}: trial record field 'reason' must be a string"
                         + (" (the trial failed)" if record["status"] == "failed" else " or null"))
    for clock in CLOCK_FIELDS:
        seconds = record.get(clock)
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
            raise StoreError(f"{where}: trial record field {clock!r} must be a number or null")
    return record


def check_meta(meta: Any, where: str = META_FILE, require: tuple[str, ...] = ("fingerprint",)) -> dict:
    """``meta`` if it is a store's meta.json, else StoreError naming ``where``.

    ``fingerprint`` is always required; ``points`` (non-empty list of parameter objects), ``trials`` (int >= 1),
    ``sessions``, ``spec``, ``varying``, ``name`` and ``kind`` are checked when present, and must be present when
    named in ``require`` (a report needs ``points`` and ``trials``).
    """
    if not isinstance(meta, dict):
        raise StoreError(f"{where}: must hold a JSON object, got {type(meta).__name__}")
    problems = [f"{key!r} is missing" for key in dict.fromkeys(("fingerprint", *require)) if key not in meta]
    if "fingerprint" in meta and not isinstance(meta["fingerprint"], str):
        problems.append("'fingerprint' must be a string")
    points = meta.get("points", [{}])
    if not isinstance(points, list) or not points or not all(isinstance(p, dict) for p in points):
        problems.append("'points' must be a non-empty list of parameter objects")
    trials = meta.get("trials", 1)
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
        problems.append("'trials' must be an integer >= 1")
    sessions = meta.get("sessions", [])
    if not isinstance(sessions, list) or not all(isinstance(x, dict) for x in sessions):
        problems.append("'sessions' must be a list of objects")
    for key, kind in (("spec", dict), ("varying", list), ("name", str), ("kind", str)):
        if key in meta and not isinstance(meta[key], kind):
            problems.append(f"{key!r} must be of type {kind.__name__}")
    if isinstance(meta.get("varying"), list) and not all(isinstance(v, str) for v in meta["varying"]):
        problems.append("'varying' must be a list of parameter names")
    if problems:
        raise StoreError(f"{where}: not a result-store meta.json ({'; '.join(problems)}); restore it or use another "
                         "directory")
    return meta


def read_records(directory: str | os.PathLike) -> list[dict]:
    """All committed records of a store (read-only), verified against its meta (:func:`verify_records`); a torn
    last line is skipped with a warning."""
    path = Path(directory) / RECORDS_FILE
    if not regular_file(path, "record file"):
        raise StoreError(f"store directory {str(directory)!r} has no {RECORDS_FILE} (not a sweep output?)")
    meta = read_meta(directory)
    lines: list[int] = []
    records, _, torn = _parse_lines(_read_regular(path, "record file"), path, lines)
    if torn:
        warnings.warn(f"{path}: dropped a torn last record ({torn} bytes); it will be recomputed on --resume",
                      TornRecordWarning, stacklevel=2)
    digests = _split_digests(records)
    verify_records(records, meta, path, lines)
    _check_record_digests(records, digests, lines, path, _records_sealed(meta))
    return records


def read_meta(directory: str | os.PathLike, unsealed: bool = False) -> dict | None:
    """The store's ``meta.json`` (schema-checked, see :func:`check_meta`, and checked against its digest), or
    ``None`` if there is none yet.  A store without digests (written before them, or with its digests removed) is
    refused unless ``unsealed`` (only :func:`seal_store` reads one: checked against its fingerprint and spec.toml)."""
    path = Path(directory) / META_FILE
    if not regular_file(path, "meta file"):
        return None
    try:
        meta = json.loads(_read_regular(path, "meta file").decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise StoreError(f"{path}: not valid JSON ({one_line(str(exc))}); restore it or use another directory") \
            from None
    check_meta(meta, str(path))
    _check_digest(meta, Path(directory), path)
    if not unsealed and not _records_sealed(meta):
        # a broken meta is named first: sealing could not fix it
        check_meta(meta, str(path), require=("points", "trials"))
        # without this, deleting every digest would turn a sealed store into a "legacy" one that nothing checks
        raise StoreError(f"{path}: the store carries no record digests (written before digests, or its digests were "
                         f"removed); if you trust it, seal it with 'python -m synth seal {directory}'")
    return meta


# -- digests and record verification ------------------------------------------------------------------------------

DIGEST_KEY = "digest"


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, allow_nan=False, separators=(",", ":")).encode("utf-8")


RECORDS_DIGEST = "sha256"  # digest.records of a store whose every record carries its digest


def _meta_hash(meta: dict) -> str:
    body = {k: v for k, v in meta.items() if k != DIGEST_KEY}
    sealed = meta.get(DIGEST_KEY, {}).get("records") if isinstance(meta.get(DIGEST_KEY), dict) else None
    # the records' flag is covered too (so that removing it cannot let an undigested line through); a meta without
    # it hashes as before the flag existed
    return hashlib.sha256(_canonical(body if sealed is None else {"meta": body, "records": sealed})).hexdigest()


def _with_digest(meta: dict, directory: Path, files: Iterable[str], records: bool = False) -> dict:
    """``meta`` with the SHA-256 of itself and of ``files`` (names in ``directory``, already written); ``records``:
    every record of the store carries its digest (:func:`record_digest`), and must."""
    digests = {name: hashlib.sha256((directory / name).read_bytes()).hexdigest() for name in sorted(files)}
    meta = {k: v for k, v in meta.items() if k != DIGEST_KEY}
    digest: dict[str, Any] = {"files": digests}
    if records:
        digest["records"] = RECORDS_DIGEST
    digest["meta"] = _meta_hash({**meta, DIGEST_KEY: digest})
    return {**meta, DIGEST_KEY: digest}


def record_digest(obj: dict) -> str:
    """SHA-256 of ``obj``'s canonical JSON (sorted keys, no spaces, strict) without its ``digest`` field: the digest
    of a trial record or a campaign run file.  An integrity check against accidental or casual edits, not a
    signature (anyone can recompute it)."""
    if not isinstance(obj, dict):
        raise TypeError(f"obj must be a JSON object (dict) to digest, got {type(obj).__name__}")
    try:
        text = _canonical({k: v for k, v in obj.items() if k != DIGEST_KEY})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"obj must be strict JSON to digest (finite numbers, JSON types): {exc}") from None
    return hashlib.sha256(text).hexdigest()


def with_digest(obj: dict) -> dict:
    """``obj`` (JSON-safe) with its :func:`record_digest` in the field ``digest``."""
    plain = {k: v for k, v in obj.items() if k != DIGEST_KEY}
    return {**plain, DIGEST_KEY: record_digest(plain)}


def check_digest(obj: dict, where: object, required: bool = False) -> dict:
    """``obj`` without its ``digest`` field, after checking it (StoreError naming ``where`` when it does not match:
    the content was changed after it was written).  Without a digest ``obj`` is returned as it is (written before
    digests), unless ``required``."""
    digest = obj.get(DIGEST_KEY)
    plain = {k: v for k, v in obj.items() if k != DIGEST_KEY}
    if digest is None:
        if required:
            raise StoreError(f"{where}: has no digest, and every record of this store must (its meta.json says so); "
                             "the line was edited or copied from elsewhere -- restore it or remove it")
        return plain
    try:
        same = isinstance(digest, str) and digest == record_digest(plain)
    except ValueError:  # a non-finite number: never written by the toolkit (strict JSON), so edited
        same = False
    if not same:
        raise StoreError(f"{where}: changed after it was written (its digest does not match its content); restore it, "
                         "or remove it to compute it again")
    return plain


def _records_sealed(meta: dict | None) -> bool:
    """Whether ``meta`` (already checked against its own digest) says that every record carries a digest."""
    digest = meta.get(DIGEST_KEY) if isinstance(meta, dict) else None
    return isinstance(digest, dict) and digest.get("records") == RECORDS_DIGEST


def _split_digests(records: list[dict]) -> list[Any]:
    """Remove each record's ``digest`` field (in place); the digests, in order (None where a record has none)."""
    return [rec.pop(DIGEST_KEY, None) for rec in records]


def _check_record_digests(records: list[dict], digests: list[Any], lines: list[int], path: Path,
                          required: bool) -> None:
    """Refuse a record whose digest does not match it (or, in a sealed store, that has none), naming the line."""
    for rec, digest, line in zip(records, digests, lines, strict=True):
        check_digest(rec if digest is None else {**rec, DIGEST_KEY: digest}, f"{path}, line {line}", required)


def _check_digest(meta: dict, directory: Path, path: Path) -> None:
    """Refuse a meta.json (or a file its digest covers) changed after the store wrote it; legacy stores (no
    digest) are checked against their fingerprint and spec.toml instead."""
    digest = meta.get(DIGEST_KEY)
    if digest is None:
        _check_legacy(meta, directory, path)
        return
    files = digest.get("files") if isinstance(digest, dict) else None
    if not isinstance(digest, dict) or not isinstance(digest.get("meta"), str) or not isinstance(files, dict):
        raise StoreError(f"{path}: its 'digest' is not the store's (meta.json was edited); restore it or use another "
                         "directory")
    if _meta_hash(meta) != digest["meta"]:
        raise StoreError(f"{path}: meta.json was changed after the store wrote it (its digest does not match); "
                         "restore it, or rerun the sweep into a new directory")
    for name, want in files.items():
        other = directory / str(name)
        if not regular_file(other, "file") or hashlib.sha256(_read_regular(other, "file")).hexdigest() != want:
            raise StoreError(f"{other}: changed or removed after the store wrote it (the digest in {path} does not "
                             "match); restore it, or rerun the sweep into a new directory")


def _check_legacy(meta: dict, directory: Path, path: Path) -> None:
    points, root, trial_id = meta.get("points"), meta.get("root_seed"), meta.get("trial_fn")
    if isinstance(points, list) and isinstance(trial_id, str) and isinstance(root, int) \
            and not isinstance(root, bool):
        try:
            same = fingerprint_of(points, root, trial_id) == meta["fingerprint"]
        except (TypeError, ValueError):
            same = False
        if not same:
            raise StoreError(f"{path}: its points, root_seed or trial_fn do not match its fingerprint (meta.json was "
                             "edited); restore it, or rerun the sweep into a new directory")
    spec = meta.get("spec")
    toml_path = directory / "spec.toml"
    if meta.get("kind") == "synth-sweep" and isinstance(spec, dict) and isinstance(spec.get("source"), dict) \
            and regular_file(toml_path, "spec file"):
        import tomllib

        try:
            raw = tomllib.loads(_read_regular(toml_path, "spec file").decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError):
            raw = None
        if raw is not None and raw != spec["source"]:
            raise StoreError(f"{path}: its spec differs from {toml_path} (one of them was edited after the sweep "
                             "wrote them); restore it, or rerun the sweep into a new directory")
        if raw is not None and "success" in spec:
            # the canonical form synth.sweep gives the [success] table: metric as a list, the bound as written
            table = raw.get("success", {}) if isinstance(raw.get("success", {}), dict) else {}
            metric = table.get("metric", "success")
            parsed = {"metric": [metric] if isinstance(metric, str) else metric,
                      **{b: table[b] for b in ("max", "min") if b in table}}
            if parsed != spec["success"]:
                raise StoreError(f"{path}: its success criterion differs from the one in {toml_path} (meta.json was "
                                 "edited); restore it, or rerun the sweep into a new directory")


def seal_store(directory: str | os.PathLike) -> int:
    """Give a store written before record digests its digests: each record of ``trials.jsonl`` gets its ``digest``
    field (nothing else of the line changes; a record that has one is checked) and ``meta.json`` a digest that
    covers itself, ``spec.toml`` and the records' flag (every record carries a digest from now on).  The store is
    verified first (:func:`read_meta`, :func:`verify_records`) and locked while it is rewritten, atomically, records
    first.  Returns the number of records."""
    directory = Path(directory)
    if not regular_file(directory / META_FILE, "meta file"):
        raise StoreError(f"{directory}: no {META_FILE}, so not a store to seal (a sweep's output folder is expected)")
    holder = TrialStore(directory)
    holder._lock()
    try:
        meta = read_meta(directory, unsealed=True)
        path = directory / RECORDS_FILE
        lines: list[int] = []
        records, _, torn = _parse_lines(_read_regular(path, "record file"), path, lines)
        if torn:
            raise StoreError(f"{path}: ends in a torn record; resume the sweep (or drop that line) before sealing it")
        digests = _split_digests(records)
        verify_records(records, meta, path, lines)
        _check_record_digests(records, digests, lines, path, _records_sealed(meta))
        write_text_atomic(path, "".join(_canonical(with_digest(r)).decode("utf-8") + "\n" for r in records))
        old = meta.get(DIGEST_KEY)
        files = set(old.get("files", {})) if isinstance(old, dict) else set()
        files |= {"spec.toml"} if regular_file(directory / "spec.toml", "spec file") else set()
        write_json_atomic(directory / META_FILE, _with_digest(meta, directory, files, records=True))
    finally:
        holder.close()
    return len(records)


def fingerprint_of(points: list, root: Any, trial_id: str) -> str:
    """SHA-256 of what determines every trial's result -- the points, the root seed, the trial function's id -- as
    :func:`synth.montecarlo.fingerprint` computes it, from the JSON a store's ``meta.json`` keeps."""
    blob = json.dumps({"points": list(points), "root_seed": root, "trial_fn": trial_id},
                      sort_keys=True, allow_nan=False, default=_json_default)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def seed_for(root: int, point: int, trial: int) -> int:
    """The integer seed of trial ``trial`` at point ``point``: ``SeedSequence(root, spawn_key=(point, trial))``'s
    first 64-bit word without its top bit (:func:`synth.montecarlo.trial_seed`, which validates and calls this)."""
    import numpy as np

    ss = np.random.SeedSequence(root, spawn_key=(point, trial))
    return int(ss.generate_state(1, np.uint64)[0] >> np.uint64(1))


def _typed_metrics(meta: dict | None) -> tuple[str, ...]:
    """Result fields a report judges or averages (the spec's success metrics and outputs.metrics)."""
    spec = meta.get("spec") if isinstance(meta, dict) else None
    if not isinstance(spec, dict):
        return ()
    names = []
    for table, key in ((spec.get("success"), "metric"), (spec.get("outputs"), "metrics")):
        value = table.get(key) if isinstance(table, dict) else None
        names += [value] if isinstance(value, str) else [v for v in value or [] if isinstance(v, str)]
    return tuple(dict.fromkeys(names))


def _strip_clock(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_clock(v) for k, v in obj.items() if k not in CLOCK_FIELDS}
    return obj


def verify_records(records: list[dict], meta: dict | None, path: str | os.PathLike,
                   lines: list[int] | None = None) -> None:
    """Refuse records that this store's meta cannot have produced, naming the file and line (StoreError).

    With the meta's points: every point in range and every record's params equal to its point.  With an integer
    root seed: every seed equal to :func:`synth.montecarlo.trial_seed` of its (point, trial).  Trials beyond the
    largest count any session ran (``trials_max``; a legacy store: beyond ``trials`` where the seed cannot be
    checked) are refused.  A finished trial (status ok) must have a non-empty result, and the metrics the spec's
    success criterion and outputs name must be numbers, true/false or null.  Two records of one (point, trial)
    must be equal up to wall-clock times.  Without a meta only the record schema applies.
    """
    if not isinstance(meta, dict):
        return
    lines = lines if lines is not None else list(range(1, len(records) + 1))
    points = meta.get("points") if isinstance(meta.get("points"), list) else None
    root = meta.get("root_seed")
    root = root if isinstance(root, int) and not isinstance(root, bool) else None
    bound = meta.get("trials_max")
    if not isinstance(bound, int) or isinstance(bound, bool):
        bound = meta.get("trials") if root is None and isinstance(meta.get("trials"), int) else None
    metrics = _typed_metrics(meta)
    seen: dict[tuple[int, int], tuple[dict, int]] = {}
    seed_of = seed_for if root is not None else None
    for rec, line in zip(records, lines, strict=True):
        where = f"{path}, line {line}"
        p, t = rec["point"], rec["trial"]
        if points is not None and p >= len(points):
            raise StoreError(f"{where}: point {p} is out of range (meta.json lists {len(points)} points); the line "
                             "was edited or copied from another store -- remove it")
        if bound is not None and t >= bound:
            raise StoreError(f"{where}: trial {t} is out of range (the store's runs asked for {bound} trials per "
                             "point); the line was edited or copied from another store -- remove it")
        if seed_of is not None and rec["seed"] != seed_of(root, p, t):
            raise StoreError(f"{where}: seed {rec['seed']} is not the seed of point {p}, trial {t} "
                             f"({seed_of(root, p, t)}); the line was edited or copied from another store -- remove it")
        if points is not None and rec["params"] != points[p]:
            keys = sorted(set(rec["params"]) | set(points[p]), key=str)
            key = next(k for k in keys if rec["params"].get(k, KeyError) != points[p].get(k, KeyError))
            raise StoreError(f"{where}: params differ from point {p} of meta.json ({key}: "
                             f"{json.dumps(rec['params'].get(key))[:40]} here, {json.dumps(points[p].get(key))[:40]} "
                             "there); the line was edited or copied from another store -- remove it")
        if rec["status"] == "ok" and not rec["result"]:
            raise StoreError(f"{where}: a finished trial (status ok) with an empty result; remove the line (the trial "
                             "is rerun on --resume)")
        for name in metrics:
            value = rec["result"].get(name)
            if value is not None and not isinstance(value, (bool, int, float)):
                raise StoreError(f"{where}: result {name!r} must be a number, true/false or null, got "
                                 f"{json.dumps(value)[:40]}; the line was edited -- remove it")
        first = seen.get((p, t))
        if first is None:
            seen[(p, t)] = (rec, line)
        elif _strip_clock(first[0]) != _strip_clock(rec):
            raise StoreError(f"{where}: a second, different record of point {p}, trial {t} (the first is on line "
                             f"{first[1]}); a store holds one result per trial -- remove the wrong line")


def _json_default(obj: Any) -> Any:
    # numpy scalars and arrays reach the store from trial functions; store them as plain JSON
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"trial record value of type {type(obj).__name__} is not JSON-serialisable")


def _check_finite(obj: Any, where: str = "record") -> None:
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError(f"{where} holds a non-finite float ({obj}); store None instead")
    if isinstance(obj, dict):
        for k, v in obj.items():
            _check_finite(v, f"{where}.{k}")
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _check_finite(v, where)


class TrialStore:
    """An append-only JSON Lines store of trial records in ``directory``.

    Use as a context manager::

        with TrialStore(out) as store:
            done = store.open(meta, resume=True)   # committed records (torn tail repaired)
            store.append(record)                   # flushed + fsynced before returning

    ``meta`` must hold a ``"fingerprint"`` string identifying what produces the
    records; resuming a store written with a different fingerprint is refused.
    """

    def __init__(self, directory: str | os.PathLike):
        if not isinstance(directory, (str, os.PathLike)):
            raise TypeError(f"directory must be a path (str or os.PathLike), got {type(directory).__name__}")
        if not os.fspath(directory).strip():
            raise ValueError("directory must name a folder, got an empty string (use '.' for the current one)")
        self.directory = Path(directory)
        self._fd: int | None = None
        self._lock_fd: int | None = None

    # -- lifecycle -------------------------------------------------------------------------------------------
    def __enter__(self) -> TrialStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing releases the flock
            self._lock_fd = None

    def _lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - no advisory locks on this platform
            return
        # os.open fds are non-inheritable (PEP 446): worker processes never hold the lock after we die
        self._lock_fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise StoreError(f"store directory {str(self.directory)!r} is in use by another running sweep") from None

    def open(self, meta: dict[str, Any], resume: bool, files: dict[str, str] | None = None) -> list[dict]:
        """Lock the store, check or write ``meta``, repair a torn tail; return the committed records.

        ``files`` (name -> text, e.g. the sweep's ``spec.toml``) are written atomically beside the records once
        the lock is held and the store is accepted, so a refused start never changes them.
        """
        if "fingerprint" not in meta:
            raise ValueError("meta must contain a 'fingerprint' string")
        if self.directory.exists() and not self.directory.is_dir():
            raise StoreError(f"out must be a directory, but {str(self.directory)!r} is a file")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock()
        try:
            return self._open(meta, resume, files)
        except BaseException:
            self.close()
            raise

    def _open(self, meta: dict[str, Any], resume: bool, files: dict[str, str] | None) -> list[dict]:
        path = self.directory / RECORDS_FILE
        old = read_meta(self.directory)
        records: list[dict] = []
        sealed = True  # every record on file carries its digest (none on file: true), so the meta can say so
        if regular_file(path, "record file"):
            data = _read_regular(path, "record file")
            lines: list[int] = []
            records, good, torn = _parse_lines(data, path, lines)
            digests = _split_digests(records)
            verify_records(records, old, path, lines)
            _check_record_digests(records, digests, lines, path, _records_sealed(old))
            sealed = all(d is not None for d in digests)
            if records and not resume:
                self.close()
                raise StoreError(f"{str(self.directory)!r} already holds {len(records)} finished trial(s); "
                                 "pass resume=True (--resume) to continue that run, or choose another output "
                                 "directory")
            if torn:
                warnings.warn(f"{path}: dropped a torn last record ({torn} bytes: the writer stopped mid-write, "
                              "killed or out of disk space); that trial is recomputed", TornRecordWarning,
                              stacklevel=2)
                with open(path, "r+b") as fh:
                    fh.truncate(good)
                    fh.flush()
                    os.fsync(fh.fileno())
        same = old is not None and old.get("fingerprint") == meta["fingerprint"]
        if records and not same:
            self.close()
            raise StoreError(f"{str(self.directory)!r} holds results of a different sweep (its points, seed or "
                             "trial function differ); choose another output directory")
        if same:
            # one meta per store: keep when it was created, and log every session that appended to it
            meta = {**meta, "created": old.get("created", meta.get("created")),
                    "sessions": list(old.get("sessions", [])) + list(meta.get("sessions", []))}
        # the largest trial count any session ran: records up to it are the store's own (trials may be lowered
        # before a resume, and those records stay)
        counts = [c for c in (meta.get("trials"), (old or {}).get("trials_max") if same else None,
                              (old or {}).get("trials") if same else None) if isinstance(c, int)]
        counts += [max(r["trial"] for r in records) + 1] if records else []
        if counts and "trials" in meta:
            meta["trials_max"] = max(counts)
        for name, text in (files or {}).items():
            write_text_atomic(self.directory / name, text)
        covered = set(files or {})
        if same and isinstance(old.get(DIGEST_KEY), dict):  # files an earlier session wrote and this one did not
            covered |= {n for n in old[DIGEST_KEY].get("files", {}) if (self.directory / n).is_file()}
        write_json_atomic(self.directory / META_FILE, _with_digest(meta, self.directory, covered, records=sealed))
        existed = path.exists()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if not existed:
            _fsync_dir(self.directory)
        return records

    def append(self, record: dict[str, Any]) -> None:
        """Append one record as a single JSON line; returns only after it is on disk (flush + fsync)."""
        if self._fd is None:
            raise RuntimeError("TrialStore.append called before open()")
        _check_finite(record)
        plain = json.loads(json.dumps({k: v for k, v in record.items() if k != DIGEST_KEY}, allow_nan=False,
                                      default=_json_default))
        line = _canonical(with_digest(plain)) + b"\n"
        # one write() on an O_APPEND fd: the record lands contiguously at the end
        start = os.fstat(self._fd).st_size
        view = memoryview(line)
        try:
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
            os.fsync(self._fd)
        except OSError as exc:
            # e.g. ENOSPC after part of the line was written: cut the file back to the last whole record now,
            # rather than leave a torn record for the next open to find
            try:
                os.ftruncate(self._fd, start)
                os.fsync(self._fd)
            except OSError:  # pragma: no cover - then the next open() drops the torn tail
                pass
            path = self.directory / RECORDS_FILE
            raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None

    def extend(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            self.append(record)
