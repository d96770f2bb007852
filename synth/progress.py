"""What a long command tells a person while it runs, on stderr: a tqdm bar on a terminal, elsewhere (a log file, a
pipe, CI) one plain line every :data:`INTERVAL` seconds and a closing line, e.g.
``[sweep] 120 of 480 trials, 1m30s elapsed, ETA 4m10s``.

Shared by ``python -m synth sweep`` (:func:`synth.montecarlo.run_trials`), ``python -m nets run`` and the campaign
planner (``paper_repro.py --campaign plan``), and by the figures' own progress lines (:mod:`figures.report.progress`,
which reuses :func:`duration`, :func:`print_if_due` and :func:`check_seconds`).  It lives in ``synth`` because
``synth`` must not import ``figures``, while ``figures`` and ``nets`` both import ``synth``.

Progress never goes to stdout (a command's stdout may be JSON), and ``CFLAB_QUIET=1`` or a command's ``--quiet``
silences it (:func:`progress_mode`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Protocol, TextIO

__all__ = ["INTERVAL", "TICK", "Progress", "check_seconds", "duration", "print_if_due", "progress_mode", "quiet"]

INTERVAL = 30.0  # seconds between plain progress lines (and before the first): shorter runs print none
TICK = 1.0  # seconds between the reporting thread's looks at the clock
_clock = time.monotonic  # the time source of every Progress not given one (tests replace it)


def duration(seconds: float) -> str:
    """``75.2`` -> ``1m15s``; under a minute ``42.0s``; from an hour ``1h02m``."""
    if not seconds >= 0:  # NaN or negative: nothing to say
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def check_seconds(what: str, value: object) -> float:
    """``value`` as float seconds in (0, inf); a ValueError naming ``what`` otherwise."""
    if isinstance(value, bool) or not (isinstance(value, int | float) and 0 < value < float("inf")):
        raise ValueError(f"{what} must be a number of seconds in (0, inf), got {value!r}")
    return float(value)


def quiet() -> bool:
    """Whether ``CFLAB_QUIET`` asks for silence (set to anything but empty or ``0``)."""
    return os.environ.get("CFLAB_QUIET", "").strip() not in ("", "0")


def progress_mode(progress: bool | None = None, stream: TextIO | None = None) -> str:
    """How to report: ``"bar"``, ``"lines"`` or ``"off"``.

    ``progress=True`` always draws a bar and ``False`` (``--quiet``) reports nothing; ``None`` reports nothing under
    ``CFLAB_QUIET``, draws a bar when ``stream`` (default stderr) is a terminal outside CI, and otherwise prints plain
    lines (a bar's carriage returns make a log file unreadable).
    """
    if progress is not None:
        return "bar" if progress else "off"
    if quiet():
        return "off"
    stream = sys.stderr if stream is None else stream
    tty = bool(getattr(stream, "isatty", lambda: False)())
    return "bar" if tty and not os.environ.get("CI") else "lines"


class _Reporter(Protocol):
    """What :func:`print_if_due` reads and updates."""

    clock: Callable[[], float]
    interval: float
    stream: TextIO
    lines_printed: int
    _next_line: float

    def line(self) -> str: ...


def print_if_due(reporter: _Reporter) -> bool:
    """Print ``reporter.line()`` once its next line is due (every ``interval`` seconds of ``reporter.clock``);
    returns whether it printed."""
    now = reporter.clock()
    if now < reporter._next_line:
        return False
    print(reporter.line(), file=reporter.stream, flush=True)
    reporter.lines_printed += 1
    while reporter._next_line <= now:  # a late look skips the missed lines rather than printing them in a burst
        reporter._next_line += reporter.interval
    return True


class Progress:
    """Progress of ``total`` units of work (trials, rounds, points): a bar, plain lines, or nothing
    (:func:`progress_mode`).

    Plain lines read ``[label] 120 of 480 trials, 1m30s elapsed, ETA 4m10s``, one every ``interval`` seconds at most
    (none for a run shorter than that), from a reporting thread so that they come even while one unit takes long,
    and a closing line when a line was printed before.  A bar is drawn at the first unit done, or once ``interval``
    has passed without one (so that a command refused while it sets up leaves no empty bar above its error line).
    ``done`` units were finished before this run (a resumed store or checkpoint): they count in the line but not in
    the rate behind the ETA.  ``verb`` follows the unit (``"timed"``: ``3 of 12 points timed``).  ``clock`` is the
    time source (tests pass a fake one).  Use as a context manager (it starts the thread and closes), or call
    :meth:`start` and :meth:`close`.
    """

    def __init__(self, label: str, total: int, unit: str = "trials", *, done: int = 0, verb: str = "",
                 progress: bool | None = None, stream: TextIO | None = None, interval: float | None = None,
                 clock: Callable[[], float] | None = None, tick: float | None = None):
        self.label, self.unit, self.verb = label, unit, verb
        self.total, self.done, self.initial, self.failed = max(0, int(total)), int(done), int(done), 0
        self.stream = stream if stream is not None else sys.stderr
        self.mode = progress_mode(progress, self.stream)
        self.interval = check_seconds("interval", INTERVAL if interval is None else interval)
        self.tick = check_seconds("tick", TICK if tick is None else tick)
        self.clock = clock if clock is not None else _clock
        self.started = self.clock()
        self._next_line = self.started + self.interval
        self.lines_printed = 0
        self._lock = threading.RLock()  # the reporting thread and the caller both print
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._bar = None
        self._bar_failed = 0

    # ------------------------------------------------------------------------------------------------ counting
    def update(self, n: int = 1, failed: int = 0) -> None:
        """``n`` more units done, ``failed`` of them failed."""
        with self._lock:
            self.set(self.done + n, self.failed + failed)

    def set(self, done: int, failed: int | None = None) -> None:
        """``done`` units done in all (and ``failed`` of them failed, when given)."""
        with self._lock:
            self.done = int(done)
            if failed is not None:
                self.failed = int(failed)
            self.poll(counted=True)

    def resumed(self, done: int) -> None:
        """``done`` units turn out to have been finished before this run (e.g. a checkpoint read after the start):
        they count as done, outside the rate behind the ETA."""
        with self._lock:
            self.initial = self.done = int(done)

    def eta(self) -> float | None:
        """Seconds left at this run's rate so far (None before its first unit is done)."""
        left = self.total - self.done
        if left <= 0:
            return 0.0
        ran = self.done - self.initial
        if ran <= 0:
            return None
        return (self.clock() - self.started) / ran * left

    def line(self) -> str:
        """One plain line: ``[label] 120 of 480 trials (2 failed), 1m30s elapsed, ETA 4m10s``."""
        what = f"{self.unit} {self.verb}".strip()
        text = f"[{self.label}] {self.done} of {self.total} {what}"
        if self.failed:
            text += f" ({self.failed} failed)"
        text += f", {duration(self.clock() - self.started)} elapsed"
        if self.done < self.total:
            eta = self.eta()
            text += f", ETA {duration(eta)}" if eta is not None else ", no ETA before the first is done"
        return text

    # ------------------------------------------------------------------------------------------------ output
    def poll(self, counted: bool = False) -> None:
        """Report what is due: the plain line once per ``interval``, or the bar's count (drawn at the first unit,
        ``counted``, or once ``interval`` has passed)."""
        with self._lock:
            if self.mode == "lines":
                print_if_due(self)
            elif self.mode == "bar":
                self._update_bar(counted)

    def _update_bar(self, counted: bool) -> None:
        if self._bar is None:
            if not counted and self.clock() < self.started + self.interval:
                return
            from tqdm.auto import tqdm

            self._bar = tqdm(total=self.total, initial=self.initial, desc=self.label,
                             unit=self.unit.rstrip("s") or self.unit, file=self.stream, dynamic_ncols=True)
        if self.done != self._bar.n:
            self._bar.update(self.done - self._bar.n)
        if self.failed != self._bar_failed:
            self._bar.set_postfix(failed=self.failed, refresh=False)
            self._bar_failed = self.failed
        self._bar.refresh()

    def _loop(self) -> None:
        while not self._stop.wait(min(self.tick, self.interval)):
            try:
                self.poll()
            except Exception:  # progress must never fail the work it reports on
                return

    def start(self) -> Progress:
        """Start the reporting thread (nothing to start when quiet)."""
        if self.mode != "off" and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=f"progress-{self.label}", daemon=True)
            self._thread.start()
        return self

    def close(self) -> float:
        """Stop reporting: close the bar, or print the closing line when a line was printed before (a run shorter
        than ``interval`` stays silent); returns the elapsed seconds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            elif self.mode == "lines" and self.lines_printed:
                print(self.line(), file=self.stream, flush=True)
                self.lines_printed += 1
            self.mode = "off"  # closed: nothing more, a second close included
        return self.clock() - self.started

    def __enter__(self) -> Progress:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
