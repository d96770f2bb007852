"""What a stored campaign run records of where it was made: the commit, the device and the equivalent
``nets run`` command.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

from .store import run_point

__all__ = ["commit", "device_name", "nets_command"]


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


def tree_change() -> dict | None:
    """What a run made from a modified tree ran beyond its commit: ``{"diff_sha256": ..., "changed": [paths]}`` of
    ``git diff HEAD`` outside ``figures/measured`` (None for a clean tree, or where git cannot say).  The digest
    names the code exactly (the same diff gives the same digest); the diff itself is not kept."""
    import hashlib

    if os.environ.get("CFLAB_COMMIT"):
        return None  # a copy on another machine: its commit says what it was
    root = Path(__file__).resolve().parents[2]
    spec = ["--", ".", ":(exclude)figures/measured"]
    try:
        diff = subprocess.run(["git", "diff", "HEAD", "--binary", *spec], cwd=root, capture_output=True,
                              timeout=30).stdout
        names = subprocess.run(["git", "diff", "HEAD", "--name-only", *spec], cwd=root, capture_output=True,
                               text=True, timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    if not diff:
        return None
    return {"diff_sha256": hashlib.sha256(diff).hexdigest(), "changed": sorted(names)}


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
