"""Finding, verifying and (optionally) downloading the benchmark files.

The data directory is ``--data-dir``, else ``$CFLAB_DATA``, else the project's
``../shared/data`` when it exists, else ``~/.cache/cflab/data``.  Every file
is checked against its known checksum (:mod:`nets.data.checksums`, or an
``MD5SUMS`` file in its folder); a missing or corrupt file raises
:class:`DataError` with one message naming the file, where it was looked for,
and how to get it.  Nothing is ever unpickled.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from synth.validation import did_you_mean

from . import checksums

__all__ = ["SOURCES", "DataError", "Source", "data_dir", "fetch", "md5_of", "resolve", "verified_path"]


class DataError(OSError):
    """A benchmark file is missing, corrupt or cannot be fetched (one-line message)."""


@dataclass(frozen=True)
class Source:
    """Where a dataset's files live under the data directory and where they come from."""

    name: str
    folder: str
    known: dict[str, str]
    urls: dict[str, list[str]] = field(default_factory=dict)  # relative path -> mirrors
    how: str = ""


_MNIST_MIRRORS = ["https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"]
_FMNIST_MIRROR = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
_AG = "https://raw.githubusercontent.com/mhjabreel/CharCnn_Keras/master/data/ag_news_csv/"

SOURCES: dict[str, Source] = {
    "mnist": Source("MNIST", "mnist", checksums.MNIST,
                    {n: [u + n for u in _MNIST_MIRRORS] for n in checksums.MNIST},
                    "rerun with --download (internet), or copy the four IDX .gz files from "
                    "http://yann.lecun.com/exdb/mnist/"),
    "fashion-mnist": Source("Fashion-MNIST", "fashion-mnist", checksums.FASHION_MNIST,
                            {n: [_FMNIST_MIRROR + n] for n in checksums.FASHION_MNIST},
                            "rerun with --download (internet), or copy the four .gz files from "
                            "https://github.com/zalandoresearch/fashion-mnist (data/fashion/)"),
    "cifar10": Source("CIFAR-10 (binary version)", "cifar10", checksums.CIFAR10,
                      {"cifar-10-binary.tar.gz": ["https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"]},
                      "rerun with --download (internet), or put cifar-10-binary.tar.gz (the *binary* version, "
                      "https://www.cs.toronto.edu/~kriz/cifar.html) or its extracted cifar-10-batches-bin/ there"),
    "femnist": Source("LEAF FEMNIST", "leaf-femnist", checksums.LEAF_FEMNIST, {},
                      "generate it with LEAF (https://github.com/TalwalkarLab/leaf, data/femnist: "
                      "./preprocess.sh -s niid --sf 0.05 -k 0 -t sample) and copy data/{train,test}/"),
    "shakespeare": Source("LEAF Shakespeare", "leaf-shakespeare", checksums.LEAF_SHAKESPEARE, {},
                          "generate it with LEAF (https://github.com/TalwalkarLab/leaf, data/shakespeare: "
                          "./preprocess.sh -s niid --sf 0.023 -k 64 -tf 0.9 -t sample) and copy data/{train,test}/"),
    "ag-news": Source("AG News", "ag-news", checksums.AG_NEWS, {n: [_AG + n] for n in checksums.AG_NEWS},
                      "rerun with --download (internet), or copy train.csv/test.csv of the Zhang et al. (2015) "
                      "CSV version"),
    "amazon": Source("Amazon multi-domain reviews (Blitzer et al. 2007)", "amazon-blitzer", checksums.AMAZON, {},
                     "download processed_acl.tar.gz from https://www.cs.jhu.edu/~mdredze/datasets/sentiment/ and "
                     "extract it there (processed_acl/<domain>/{positive,negative}.review)"),
}


def data_dir(path: str | os.PathLike | None = None) -> Path:
    """The data directory: ``path``, ``$CFLAB_DATA``, the project's ``../shared/data``, or ``~/.cache/cflab/data``."""
    if path is not None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"data_dir must be a path (str or os.PathLike), got {type(path).__name__}")
        if not os.fspath(path).strip():
            raise ValueError("data_dir must name a folder, got an empty string (give the folder, or leave the flag "
                             "out for $CFLAB_DATA or the default)")
        return Path(path).expanduser()
    env = os.environ.get("CFLAB_DATA")
    if env:
        return Path(env).expanduser()
    shared = Path(__file__).resolve().parents[3] / "shared" / "data"
    if shared.is_dir():
        return shared
    return Path.home() / ".cache" / "cflab" / "data"


def md5_of(path: Path, decompress: bool = False) -> str:
    """md5 of a file's bytes (of its decompressed bytes for ``decompress=True``)."""
    h = hashlib.md5()
    opener = gzip.open if decompress else open
    with opener(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _listed(path: Path) -> str | None:
    """The md5 that an ``MD5SUMS`` file in the file's folder (or up to two levels above) lists for it."""
    for base in [path.parent, *list(path.parents)[1:3]]:
        sums = base / "MD5SUMS"
        if not sums.is_file():
            continue
        key = path.relative_to(base).as_posix()
        for line in sums.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].lstrip("*").removeprefix("./") == key:
                return parts[0].lower()
    return None


def resolve(source: str, rel: str, root: str | os.PathLike | None = None) -> Path:
    """Where ``rel`` of dataset ``source`` should be (it may not exist)."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}; got {source!r}{did_you_mean(source, SOURCES)}")
    return data_dir(root) / SOURCES[source].folder / rel


def verified_path(source: str, rel: str, root=None, *, alternatives: tuple[str, ...] = ()) -> tuple[Path, str]:
    """The path of a present, checksum-verified file and how it was verified (``"md5"`` or ``"unverified"``).

    ``alternatives`` are other relative names accepted in its place (e.g. ``x.json.gz`` for ``x.json``,
    whose known checksum is that of the decompressed JSON).
    """
    src = SOURCES[source]
    folder = data_dir(root) / src.folder
    for name in (rel, *alternatives):
        path = folder / name
        if not path.is_file():
            continue
        key = name[:-3] if (name.endswith(".gz") and name[:-3] in src.known) else name
        gz_of_known = key != name
        want = src.known.get(key) or _listed(path)
        if want is None:
            return path, "unverified"
        got = md5_of(path, decompress=gz_of_known)
        if got != want:
            raise DataError(f"{src.name} file {path} is corrupt: md5 {got}, expected {want}; delete it and "
                            f"{src.how}")
        return path, "md5"
    raise DataError(f"{src.name} file {rel!r} not found in {folder} (data dir from --data-dir, $CFLAB_DATA or "
                    f"the default); {src.how}")


def fetch(source: str, root=None, files: list[str] | None = None) -> list[Path]:
    """Download a dataset's files from their standard sources, verifying every checksum (needs internet)."""
    src = SOURCES[source]
    if not src.urls:
        raise DataError(f"{src.name} cannot be downloaded automatically; {src.how}")
    folder = data_dir(root) / src.folder
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for rel in files or list(src.urls):
        target = folder / rel
        want = src.known.get(rel)
        if target.is_file() and want and md5_of(target) == want:
            out.append(target)
            continue
        errors = []
        for url in src.urls[rel]:
            try:
                _download(url, target, want)
                out.append(target)
                break
            except (OSError, ValueError) as exc:  # try the next mirror
                errors.append(f"{url}: {exc}")
        else:
            raise DataError(f"could not download {src.name} file {rel!r} into {folder}: {'; '.join(errors)}")
    return out


def _download(url: str, target: Path, md5: str | None) -> None:
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f, urllib.request.urlopen(url, timeout=60) as r:  # noqa: S310 - fixed https URLs
            try:
                shutil.copyfileobj(r, f)
            except OSError as exc:  # a full disk: name the file being written, not the temporary one
                if exc.errno is None or type(exc).__module__ != "builtins":
                    raise
                raise OSError(exc.errno, exc.strerror or str(exc), str(target)) from None
        got = md5_of(Path(tmp))
        if md5 is not None and got != md5:
            raise ValueError(f"md5 {got}, expected {md5}")
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
