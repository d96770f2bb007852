"""What ``paper_repro.py`` tells a person while it runs: each target's elapsed time, trials done and an ETA, and a
closing summary of the verdicts per paper, the run's wall and CPU time and the report's paths.

A target's trials go through :func:`figures.runs.run_points`, which announces each batch (its record file and the
number of trials asked for) to the running target's :class:`StepProgress` (the engine's batch observer, see
:func:`figures.runs.set_batch_observer`); the trials done are the records the
store has gained since (``trials.jsonl`` gets one line per finished trial, whichever process ran it), so no worker
has to report anything.  On a terminal the progress is a tqdm bar with an ETA; elsewhere (a log file, a pipe, CI)
one plain line every ``interval`` seconds once the step has run that long.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from synth.progress import INTERVAL, TICK, check_seconds, duration, print_if_due

from ..runs import set_batch_observer

__all__ = ["INTERVAL", "RunProgress", "StepProgress", "closing_summary", "cpu_seconds", "current", "duration"]

# INTERVAL (seconds between plain progress lines, and before the first: shorter steps print none) and TICK (seconds
# between looks at the stores, and redraws of a bar) are synth.progress's, imported here so that tests can shorten them
_clock = time.monotonic  # the time source of every StepProgress not given one

_CURRENT: StepProgress | None = None


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process, its finished children and its live descendants (the joblib
    workers, which stay alive between targets: read through psutil where it is installed, else counted once they
    are reaped)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    try:
        import psutil
    except ImportError:
        return total
    try:
        for child in psutil.Process().children(recursive=True):
            try:
                t = child.cpu_times()
                total += t.user + t.system
            except psutil.Error:  # exited between the listing and the read: counted once reaped
                continue
    except psutil.Error:
        pass
    return total


@dataclass
class _Batch:
    """One :func:`figures.runs.run_points` call: its store's record file, the records it had when the batch began
    and the trials the batch still has to run."""

    records: Path | None
    start_lines: int
    todo: int
    started: float
    offset: int = 0
    lines: int = 0

    def done(self) -> int:
        """Trials finished since the batch began: the record file's new lines (read incrementally)."""
        if self.records is None:
            return 0
        try:
            with open(self.records, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return min(self.todo, max(0, self.lines - self.start_lines))
        self.offset += len(chunk)
        self.lines += chunk.count(b"\n")
        return min(self.todo, max(0, self.lines - self.start_lines))


class StepProgress:
    """The progress of one target: elapsed time, and for its trial batches the trials done and an ETA.

    ``bar``: a tqdm bar (``True``), plain lines every ``interval`` seconds (``False``), or ``None`` = a bar when
    ``stream`` is a terminal.  ``clock`` is the time source (tests pass a fake one).  Use as a context manager, or
    call :meth:`start` and :meth:`stop`.
    """

    def __init__(self, name: str, stream: TextIO | None = None, interval: float | None = None, bar: bool | None = None,
                 clock: Callable[[], float] | None = None, tick: float | None = None):
        interval = check_seconds("interval", INTERVAL if interval is None else interval)
        tick = check_seconds("tick", TICK if tick is None else tick)
        self.name, self.interval, self.tick = name, interval, tick
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock if clock is not None else _clock
        self.bar_mode = bool(getattr(self.stream, "isatty", lambda: False)()) if bar is None else bool(bar)
        self.started = self.clock()
        self._batches: list[_Batch] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_line = self.started + self.interval
        self._bar = None
        self._bar_n = 0
        self.lines_printed = 0

    # ---------------------------------------------------------------------------------------------- batches
    def add_batch(self, records: Path | None, total: int) -> _Batch:
        """A batch of ``total`` trials writing to the record file ``records`` (its lines at this moment are trials
        already stored, which the batch does not rerun)."""
        lines = _count_lines(records)
        b = _Batch(records, lines, max(0, int(total) - lines), self.clock(), offset=_size(records), lines=lines)
        with self._lock:
            self._batches.append(b)
        return b

    def _observe(self, records: Path, total: int) -> None:
        if _CURRENT is self:
            self.add_batch(records, total)

    def counts(self) -> tuple[int, int]:
        """(trials done, trials asked for) over this target's batches so far."""
        with self._lock:
            return sum(b.done() for b in self._batches), sum(b.todo for b in self._batches)

    def eta(self) -> float | None:
        """Seconds left in the running batch at its rate so far (None before its first trial has finished)."""
        with self._lock:
            if not self._batches:
                return None
            b = self._batches[-1]
            done = b.done()
        left = b.todo - done
        if left <= 0:
            return 0.0
        if done == 0:
            return None
        return (self.clock() - b.started) / done * left

    def line(self) -> str:
        """One plain progress line: ``[name] 1m30s elapsed; 12/40 trials; ETA 2m05s``."""
        text = f"[{self.name}] {duration(self.clock() - self.started)} elapsed"
        done, total = self.counts()
        if total:
            eta = self.eta()
            text += f"; {done}/{total} trials"
            if done < total:
                text += f"; ETA {duration(eta)} for this batch" if eta is not None else "; ETA after the first trial"
            else:
                text += "; writing figures and tables"
        return text

    # ---------------------------------------------------------------------------------------------- output
    def poll(self) -> None:
        """Print what is due: a plain line once per ``interval``, or the bar's new trials."""
        if self.bar_mode:
            self._update_bar()
            return
        print_if_due(self)

    def _update_bar(self) -> None:
        done, total = self.counts()
        if not total:
            return
        if self._bar is None:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=f"[{self.name}]", unit="trial", file=self.stream,
                             dynamic_ncols=True, leave=False)
        if self._bar.total != total:
            self._bar.total = total
        if done > self._bar_n:
            self._bar.update(done - self._bar_n)
            self._bar_n = done
        else:
            self._bar.refresh()

    def _loop(self) -> None:
        while not self._stop.wait(self.tick if self.bar_mode else min(self.tick, self.interval)):
            try:
                self.poll()
            except Exception:  # progress must never fail a target
                return

    def start(self) -> StepProgress:
        """Become the running target (the engine's batch observer) and start the reporting thread."""
        global _CURRENT
        _CURRENT = self
        set_batch_observer(self._observe)
        self._thread = threading.Thread(target=self._loop, name=f"progress-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> float:
        """Stop reporting; returns the elapsed seconds."""
        global _CURRENT
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if _CURRENT is self:
            _CURRENT = None
            set_batch_observer(None)
        return self.clock() - self.started

    def __enter__(self) -> StepProgress:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class RunProgress:
    """The whole run's progress: one line every ``interval`` seconds, ``[run] 3 of 29 targets done; 4m10s elapsed;
    ETA 6m40s``, whatever the targets print themselves (several run side by side in a quick run).

    The ETA weighs the targets by their expected cost (``cost(name)``: :func:`figures.registry.quick_cost`, the
    CPU seconds each takes in a quick run): the elapsed time times the cost still to run over the cost run so far.
    Call :meth:`done` as each target finishes; use as a context manager, or :meth:`start` and :meth:`stop`."""

    def __init__(self, names: list[str], stream: TextIO | None = None, interval: float | None = None,
                 clock: Callable[[], float] | None = None, tick: float | None = None,
                 cost: Callable[[str], float] | None = None):
        interval = check_seconds("interval", INTERVAL if interval is None else interval)
        tick = check_seconds("tick", TICK if tick is None else tick)
        if cost is None:
            from ..registry import quick_cost as cost
        self.names = list(names)
        self.cost = {n: max(float(cost(n)), 1e-9) for n in self.names}
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock if clock is not None else _clock
        self.interval, self.tick = interval, tick
        self.started = self.clock()
        self._next_line = self.started + self.interval
        self._done: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lines_printed = 0

    def done(self, name: str) -> None:
        """Target ``name`` finished (done, pending or failed)."""
        with self._lock:
            if name not in self._done:
                self._done.append(name)

    def eta(self) -> float | None:
        """Seconds left, by cost (None before the first target has finished)."""
        with self._lock:
            spent = sum(self.cost.get(n, 0.0) for n in self._done)
            left = sum(c for n, c in self.cost.items() if n not in self._done)
        if left <= 0:
            return 0.0
        if spent <= 0:
            return None
        return (self.clock() - self.started) * left / spent

    def line(self) -> str:
        with self._lock:
            k = len(self._done)
        eta = self.eta()
        text = f"[run] {k} of {len(self.names)} targets done; {duration(self.clock() - self.started)} elapsed"
        if k < len(self.names):
            text += f"; ETA {duration(eta)}" if eta is not None else "; ETA after the first target"
        return text

    def poll(self) -> None:
        """Print the line when it is due."""
        print_if_due(self)

    def _loop(self) -> None:
        while not self._stop.wait(min(self.tick, self.interval)):
            try:
                self.poll()
            except Exception:  # progress must never fail a run
                return

    def start(self) -> RunProgress:
        self._thread = threading.Thread(target=self._loop, name="progress-run", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> float:
        """Stop reporting; returns the elapsed seconds."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.clock() - self.started

    def __enter__(self) -> RunProgress:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def current() -> StepProgress | None:
    """The target being run by ``paper_repro.py`` (None outside it)."""
    return _CURRENT


def _size(path: Path | None) -> int:
    try:
        return os.stat(path).st_size if path is not None else 0
    except OSError:
        return 0


def _count_lines(path: Path | None) -> int:
    if path is None:
        return 0
    try:
        with open(path, "rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except OSError:
        return 0


# ------------------------------------------------------------------------------------------------ closing summary
def _entries(statuses: dict, targets: dict, size: str) -> list[tuple[str, str, str, list[dict]]]:
    from .headline import data_kind

    return [(name, targets[name].paper, data_kind(targets[name].kind, st.data.get("run_size", size)), st.rows)
            for name, st in statuses.items() if st.state == "done"]


def _kind_counts(t) -> str:
    """A (paper, data kind) tally in a few words: claims, orderings, bounds, numbers shown, findings, not run."""
    from ..verdicts.rules import AGREES, DIFFERS, NOT_RESOLVED
    from .headline import THEORY

    parts = []
    for what, c in (("claims", t.claims), ("orderings", t.order)):
        if sum(c[k] for k in (AGREES, DIFFERS, NOT_RESOLVED)):
            parts.append(f"{what} {c[AGREES]} agree / {c[DIFFERS]} differ / {c[NOT_RESOLVED]} not resolved")
    if sum(t.theory.values()):
        parts.append("bounds " + " / ".join(f"{t.theory[k]} {k}" for k in THEORY))
    if t.shown:
        parts.append(f"{t.shown} shown")
    if t.findings:
        parts.append(f"{t.findings} findings")
    if sum(t.not_run.values()):
        parts.append(f"{sum(t.not_run.values())} not run")
    return ", ".join(parts) or "no rows"


def _without(text: str, prefix: str) -> str:
    text = text.strip()
    return text[len(prefix):].strip() if text.startswith(prefix) else text


def closing_summary(out: Path, targets: dict, size: str, wall: float, cpu: float, markdown: Path, html: Path,
                    failed: list[str] | None = None) -> str:
    """The lines ``paper_repro.py`` ends with: targets done / pending / failed, per paper the headline's sentences
    (what holds, differs, is untested: :func:`figures.report.headline.paper_sentences`) and verdict counts (from the
    verified status files, as the report's headline counts them: :func:`figures.report.headline.tally`), the published
    numbers tested per paper (:func:`figures.report.headline.verdict_sentences`), wall and CPU time, and the paths of
    report.md and report.html."""
    from .assemble import read_all
    from .assemble import sentences as paper_sentences
    from .headline import PAPERS, tally, verdict_sentences

    statuses = read_all(Path(out), targets, size)
    said = paper_sentences(Path(out), targets, size, statuses)
    states = Counter(st.state for st in statuses.values() if st.state != "not run")
    tallies = tally(_entries(statuses, targets, size))
    lines = [f"Summary ({size} run): targets " + ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
             + (f" (failed: {', '.join(failed)})" if failed else "")]
    for paper in PAPERS:
        mine = {(p, k): t for (p, k), t in tallies.items() if p == paper}
        if paper in said:  # the sentences that open report.md and report.html
            lines += [f"  {paper}. {said[paper][key].replace('`', '')}" for key in ("holds", "differs", "untested")]
        # the published numbers tested (real data, stored paper-scale runs), then every kind of row in a few words
        lines += [f"  {paper}, published numbers {_without(s.replace('**', ''), paper)}"
                  for s in verdict_sentences(mine)]
        lines += [f"  {paper}, {k}: {_kind_counts(t)}" for (_, k), t in mine.items()]
    lines.append(f"  time: {duration(wall)} wall, {duration(cpu)} CPU ({cpu:.0f} CPU s, worker processes included; "
                 f"{cpu / wall if wall > 0 else float('nan'):.2f} cores busy on average)")
    lines.append(f"  report: {markdown}")
    lines.append(f"  report: {html}")
    return "\n".join(lines)
