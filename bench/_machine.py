"""The machine a benchmark ran on, as the rows of ``bench/`` record it."""

from __future__ import annotations

import contextlib
import platform
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (else what :mod:`platform` knows)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def count(flag: str, low: int = 1):
    """An argparse ``type``: an integer >= ``low`` for ``flag`` (else an ``ArgumentTypeError``, which argparse
    prefixes with the flag: one line through :class:`synth.cli.CleanParser`)."""
    import argparse

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects an integer >= {low}, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value
    return convert
