"""LEAF federated datasets (Caldas et al. 2018): FEMNIST and Shakespeare, from LEAF's JSON files.

LEAF writes ``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [...], "y": [...]}}}``
into ``data/train/*.json`` and ``data/test/*.json``; gzipped copies (``.json.gz``) are read as well and
verified against the md5 of the decompressed JSON.  Users are LEAF's natural clients.
"""

from __future__ import annotations

import functools
import gzip
import json
import re
import warnings
from dataclasses import dataclass, field

import numpy as np

from .files import SOURCES, DataError, data_dir, verified_path

__all__ = ["ALL_LETTERS", "LeafData", "UnlistedFilesWarning", "encode_text", "leaf_user_count", "load_leaf"]

# LEAF's Shakespeare alphabet (models/utils/language_utils.py); unknown characters map to index 80
ALL_LETTERS = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
_INDEX = {c: i for i, c in enumerate(ALL_LETTERS)}


@dataclass
class LeafData:
    """Per-user train and test arrays of a LEAF dataset."""

    name: str
    users: list[str]
    train: dict[str, tuple[np.ndarray, np.ndarray]]
    test: dict[str, tuple[np.ndarray, np.ndarray]]
    n_classes: int
    vocab_size: int | None = None
    notes: list[str] = field(default_factory=list)


def encode_text(strings) -> np.ndarray:
    """LEAF letter indices of equal-length strings: ``(n, length)`` int64."""
    return np.array([[_INDEX.get(c, len(ALL_LETTERS)) for c in s] for s in strings], dtype=np.int64)


def _read_json(path):
    """A LEAF JSON file; anything unreadable is a DataError naming the file (not EOFError or a JSON error)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, EOFError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DataError(f"{path} is not a readable LEAF JSON file ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:120] if str(exc) else 'truncated'}); delete it or restore it "
                        "from the LEAF sample") from None


class UnlistedFilesWarning(UserWarning):
    """Files in a LEAF split folder that no checksum list names: excluded from the data."""


def _split_files(source: str, split: str, root) -> list:
    """The checksum-verified files of a LEAF split; files with no known checksum (neither in
    :mod:`nets.data.checksums` nor in an ``MD5SUMS`` file) are left out, listed in one warning, so that a file
    copied in under a new name (a test file in train/, say) is never used silently."""
    folder = data_dir(root) / SOURCES[source].folder / split
    names = sorted({p.name.removesuffix(".gz") for p in folder.glob("*.json*")}) if folder.is_dir() else []
    if not names:
        raise DataError(f"{SOURCES[source].name} {split} split not found: no *.json or *.json.gz in {folder}; "
                        f"{SOURCES[source].how}")
    found = [verified_path(source, f"{split}/{n}", root, alternatives=(f"{split}/{n}.gz",)) for n in names]
    unlisted = [path.name for path, how in found if how != "md5"]
    if unlisted:
        what = f"{len(unlisted)} file(s) in {folder} with no known checksum ({', '.join(unlisted[:5])}" + \
            (", ..." if len(unlisted) > 5 else "") + ")"
        if len(unlisted) == len(found):
            raise DataError(f"{SOURCES[source].name}: {what}; only checksum-verified files are used -- list them in an "
                            f"MD5SUMS file in {folder} to use them, or {SOURCES[source].how}")
        warnings.warn(f"{SOURCES[source].name}: left out {what}; list them in {folder / 'MD5SUMS'} to use them",
                      UnlistedFilesWarning, stacklevel=3)
    return [path for path, how in found if how == "md5"]


def _users(blob, path, dataset: str):
    """``(user, x, y)`` of every user of a LEAF file, its structure checked as soon as it is read."""
    users = blob.get("users") if isinstance(blob, dict) else None
    data = blob.get("user_data") if isinstance(blob, dict) else None
    if not isinstance(users, list) or not isinstance(data, dict):
        raise DataError(f"{path} is not a LEAF file: it lacks the 'users' list or the 'user_data' object")
    for user in users:
        ud = data.get(user) if isinstance(user, str) else None
        if not isinstance(ud, dict) or not isinstance(ud.get("x"), list) or not isinstance(ud.get("y"), list) \
                or len(ud["x"]) != len(ud["y"]) or not ud["y"]:
            raise DataError(f"{path}: user {user!r} has no equal-length, non-empty 'x' and 'y' lists in 'user_data'")
        try:
            if dataset == "femnist":
                x = np.asarray(ud["x"], dtype=np.float32)
                if x.ndim != 2 or x.shape[1] != 784 or not np.isfinite(x).all():
                    raise ValueError(f"x must hold rows of 784 finite pixel values, got shape {x.shape}")
                y = np.asarray(ud["y"], dtype=np.int64)
                if y.ndim != 1 or y.min() < 0 or y.max() >= 62:
                    raise ValueError("y must hold class labels in [0, 62)")
                x = x.reshape(-1, 1, 28, 28)
            else:
                if not all(isinstance(s, str) and len(s) == 80 for s in ud["x"]) \
                        or not all(isinstance(s, str) and len(s) == 1 for s in ud["y"]):
                    raise ValueError("x must hold 80-character strings and y single characters")
                x = encode_text(ud["x"])
                y = encode_text(ud["y"])[:, 0]
        except (TypeError, ValueError) as exc:
            raise DataError(f"{path}: user {user!r}: {exc}") from None
        yield user, x, y


_USERS_FIRST = re.compile(r'\A\s*\{\s*"users"\s*:\s*')


def _listed_users(path) -> list:
    """The ``users`` list of a LEAF file.  LEAF writes it as the first key: then only that list is decoded (the
    samples after it are most of the file); any other layout is parsed whole."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            text = f.read()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise DataError(f"{path} is not a readable LEAF JSON file ({type(exc).__name__})") from None
    m = _USERS_FIRST.match(text)
    try:
        listed = json.JSONDecoder().raw_decode(text, m.end())[0] if m else json.loads(text).get("users")
    except (ValueError, AttributeError, RecursionError):
        listed = None
    if not isinstance(listed, list):
        raise DataError(f"{path}: no 'users' list (not a LEAF JSON file)")
    return listed


@functools.lru_cache(maxsize=4)
def leaf_user_count(dataset: str, root=None) -> int:
    """How many LEAF users have both train and test data: the files' ``users`` lists only, none of their samples
    converted (what a campaign's plan needs to name its runs; :func:`load_leaf` reads and checks the samples)."""
    if dataset not in ("femnist", "shakespeare"):
        raise ValueError(f"dataset must be 'femnist' or 'shakespeare', got {dataset!r}")
    names = {}
    for split in ("train", "test"):
        users: set[str] = set()
        for path in _split_files(dataset, split, root):
            users.update(map(str, _listed_users(path)))
        names[split] = users
    return len(names["train"] & names["test"])


@functools.lru_cache(maxsize=4)  # one parse and checksum pass per process and arguments
def load_leaf(dataset: str, root=None) -> LeafData:
    """LEAF ``"femnist"`` (28x28 images, 62 classes) or ``"shakespeare"`` (80-character windows, next character)."""
    if dataset not in ("femnist", "shakespeare"):
        raise ValueError(f"dataset must be 'femnist' or 'shakespeare', got {dataset!r}")
    splits = {}
    counts = {}
    for split in ("train", "test"):
        files = _split_files(dataset, split, root)
        counts[split] = len(files)
        data = {}
        for path in files:
            for user, x, y in _users(_read_json(path), path, dataset):
                data[user] = (x, y)
        splits[split] = data
    users = sorted(set(splits["train"]) & set(splits["test"]))
    if not users:
        raise DataError(f"{SOURCES[dataset].name}: no user has both train and test data under "
                        f"{data_dir(root) / SOURCES[dataset].folder}")
    notes = []
    if counts["train"] != counts["test"] or len(users) < max(len(splits["train"]), len(splits["test"])):
        notes.append(f"partial LEAF sample: {counts['train']} train and {counts['test']} test files; "
                     f"{len(splits['train'])} train users, {len(splits['test'])} test users, {len(users)} with both")
    if dataset == "femnist":
        return LeafData("LEAF FEMNIST", users, splits["train"], splits["test"], n_classes=62, notes=notes)
    return LeafData("LEAF Shakespeare", users, splits["train"], splits["test"], n_classes=len(ALL_LETTERS) + 1,
                    vocab_size=len(ALL_LETTERS) + 1, notes=notes)
