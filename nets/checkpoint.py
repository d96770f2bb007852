"""Per-round checkpoints: atomic ``torch.save``, and ``torch.load(weights_only=True)`` only.

A checkpoint holds tensors and plain strings: the model stack after the last
completed round, the round index, the estimator's random-generator state and
the run's configuration and history as JSON text.  Nothing is pickled, so a
checkpoint file cannot run code when loaded.

Two runs cannot share one checkpoint: :func:`load_checkpoint` takes an
exclusive lock (``flock`` on ``FILE.lock``) that the run holds until
:func:`release_checkpoint` (which removes ``FILE.lock``, so a finished run
leaves none behind) or its exit, and every save writes its own
uniquely named temporary file before the atomic rename.  A path that is a
directory, or a file that is not a checkpoint (garbage, a pickle, another
program's file), is refused with one line before training starts.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import tempfile
from pathlib import Path

import torch

__all__ = ["load_checkpoint", "release_checkpoint", "save_checkpoint"]

VERSION = 1
_KEYS = ("version", "round", "models", "rng_state", "config", "history")
# lock files held by this process, by checkpoint path: (file descriptor, lock file path)
_LOCKS: dict[str, tuple[int, Path]] = {}


def _lock(path: Path) -> None:
    """Hold an exclusive lock on ``path`` for this process (re-entrant within it); refuse when another has it."""
    key = str(path.resolve())
    if key in _LOCKS:
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no advisory locks on this platform
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    while True:  # until the locked file is the one at the path (a releasing run may have just removed it)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ValueError(f"checkpoint {path} is in use by another running experiment; wait for it to finish or "
                             "choose another checkpoint file") from None
        try:
            same = os.stat(lock).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    _LOCKS[key] = (fd, lock)


def release_checkpoint(path: str | os.PathLike) -> None:
    """Release the lock :func:`load_checkpoint` took on ``path`` and remove its lock file (a no-op when this
    process holds none).  The file is removed while still locked, and a run that locks it checks that the file
    it locked is still the one at the path, so two runs never hold locks on two different files."""
    held = _LOCKS.pop(str(Path(path).resolve()), None)
    if held is not None:
        fd, lock = held
        try:
            lock.unlink()
        except FileNotFoundError:
            pass
        os.close(fd)


def save_checkpoint(path: str | os.PathLike, models: torch.Tensor, round_: int, rng_state: dict, config: dict,
                    history: dict) -> None:
    """Write a checkpoint atomically: unique temp file in the same folder, fsync, rename, fsync the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = {"version": VERSION, "round": int(round_), "models": models.detach().to("cpu").clone(),
            "rng_state": json.dumps(rng_state), "config": json.dumps(config, sort_keys=True),
            "history": json.dumps(history)}
    # serialised in memory first: torch.save reports a failed write to a file as a RuntimeError without the
    # file's name or errno, while writing the bytes ourselves gives an OSError naming the checkpoint
    buffer = io.BytesIO()
    torch.save(blob, buffer)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(buffer.getbuffer())
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and type(exc).__module__ == "builtins" and exc.errno is not None:
            raise type(exc)(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise
    try:
        dfd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # some platforms cannot open folders; the rename is still atomic
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def load_checkpoint(path: str | os.PathLike) -> dict | None:
    """Lock ``path`` for this run and return its checkpoint, decoded (``None`` when there is none yet).

    Loads with ``weights_only=True``; anything that is not a checkpoint of this version is a ``ValueError``
    naming the file, raised before any training.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"checkpoint {path} is a directory; give a file name (e.g. {path / 'run.pt'})")
    if path.exists() and not path.is_file():
        raise ValueError(f"checkpoint {path} is not a regular file")
    _lock(path)
    if not path.is_file():
        return None
    bad = (f"checkpoint {path} is not a nets checkpoint (version {VERSION}): it was not written by python -m nets "
           "or is damaged; delete it or choose another checkpoint file")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, ValueError, TypeError, AttributeError, KeyError,
            IndexError, UnicodeDecodeError, ImportError):
        # torch's own message suggests weights_only=False, i.e. running the file's code: never
        raise ValueError(bad) from None
    if not isinstance(blob, dict) or blob.get("version") != VERSION or any(k not in blob for k in _KEYS) \
            or not isinstance(blob["models"], torch.Tensor):
        raise ValueError(bad)
    try:
        out = {"round": blob["round"], "models": blob["models"], "rng_state": json.loads(blob["rng_state"]),
               "config": json.loads(blob["config"]), "history": json.loads(blob["history"])}
    except (TypeError, ValueError):
        raise ValueError(bad) from None
    problem = _content_problem(out)
    if problem:
        raise ValueError(f"checkpoint {path} is damaged or was edited ({problem}); delete it or choose another "
                         "checkpoint file")
    out["round"] = int(out["round"])
    return out


def _content_problem(ckpt: dict) -> str | None:
    """What is wrong with a decoded checkpoint's fields (``None`` when they are what :func:`save_checkpoint` writes):
    a round index >= 0, finite float models (their shape is checked against the run that resumes them), a generator
    state object, a configuration object and a history of per-round rows."""
    rnd, models = ckpt["round"], ckpt["models"]
    if isinstance(rnd, bool) or not isinstance(rnd, int) or rnd < 0:
        return f"round must be an integer >= 0, got {rnd!r}"
    if not models.is_floating_point() or models.numel() == 0:
        return f"models must be a non-empty float tensor, got {models.dtype} of shape {tuple(models.shape)}"
    if not bool(torch.isfinite(models).all()):
        return f"models hold {int((~torch.isfinite(models)).sum())} non-finite values"
    if not isinstance(ckpt["rng_state"], dict):
        return "rng_state must be a generator state object"
    if not isinstance(ckpt["config"], dict):
        return f"config must be an object, got {type(ckpt['config']).__name__}"
    hist = ckpt["history"]
    if not isinstance(hist, dict):
        return f"history must be an object, got {type(hist).__name__}"
    rows, seconds = hist.get("rows", []), hist.get("seconds", 0.0)
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return "history rows must be a list of per-round objects"
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or seconds < 0:
        return f"history seconds must be a number >= 0, got {seconds!r}"
    return None
