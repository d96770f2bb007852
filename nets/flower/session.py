"""The Ray instance of one Flower simulation: started for the run, stopped with it, and nothing left behind.

Flower's simulation engine runs the ClientApps on Ray actors; ``ray.init`` starts a GCS server, a raylet, a
dashboard, a log monitor, two agents and (per actor) a worker process, and installs its own SIGTERM handlers.
Left alone, a Ctrl-C raised in the main thread leaves the ServerApp thread waiting out its exchange's timeout
(the process lives on), SIGTERM runs into Ray's handlers, and Ray's agents and workers outlive the run by minutes.
:func:`ray_session` therefore

* starts Ray itself (``run_simulation`` then reuses the running instance) in a temporary directory of its own,
  with a marker unique to the run in the environment that every Ray process inherits (:data:`MARKER`);
* while the run lasts, turns SIGINT and SIGTERM into :class:`Interrupted` (a ``KeyboardInterrupt``), once: the
  run is stopped from a thread of its own (the strategies leave their exchange, the actors end) and the main
  thread raises when Flower's run has ended, never inside Ray's code (:class:`_Signals`); a second signal during
  the clean-up is ignored, so the clean-up finishes;
* at the end -- finished, failed or interrupted -- shuts Ray down, ends every process that carries the run's
  marker (SIGTERM, then SIGKILL after a grace period) and removes the temporary directory.

Only a SIGKILL of the driver itself cannot be handled: Ray's processes then end on their own, minutes later.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from logging import INFO
from typing import Any

from synth.validation import check_int

__all__ = ["MARKER", "Interrupted", "RunStopped", "StoppableGrid", "check_actors", "marked_processes", "pull_replies",
           "ray_config", "ray_session"]

# the environment variable whose value (unique per run) every process of the run's Ray instance inherits
MARKER = "CFLAB_FLOWER_RUN"
# seconds a run stopped by a signal gets to end by itself before its main thread is interrupted
STOP_GRACE_SECONDS = 10.0
# seconds Ray's processes get to end after SIGTERM before they are killed
GRACE_SECONDS = 3.0


# Ray's object store of a simulation
OBJECT_STORE_BYTES = 200 * 2**20
# seconds a stopped strategy's ServerApp thread is given to leave its exchange
STOP_SECONDS = 5.0


def ray_config(actors: int = 1) -> dict[str, Any]:
    """``run_simulation``'s ``backend_config``: a new local Ray instance of ``actors`` CPUs, one per ClientApp."""
    return {"init_args": {"address": "local", "num_cpus": int(actors), "include_dashboard": False,
                          "object_store_memory": OBJECT_STORE_BYTES, "logging_level": "error",
                          "log_to_driver": False},
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0}}


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the platform has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1


def check_actors(actors: Any) -> int:
    """``actors`` as an int in ``[1, usable cores]`` (Ray gives each actor one core), else ValueError/TypeError."""
    actors = check_int("actors", actors, low=1)
    cores = usable_cores()
    if actors > cores:
        raise ValueError(f"actors must be an integer in [1, {cores}] (one simulation actor per CPU core this process "
                         f"may use), got {actors}")
    return actors


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived during a Flower run (``signum`` says which)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def marked_processes(value: str, name: str = MARKER) -> list[int]:
    """Process ids (this user's, other than this process, not ended) whose environment holds ``name=value``.

    Reads ``/proc/<pid>/environ`` (Linux); elsewhere nothing is found and only ``ray.shutdown`` ends Ray.
    """
    entry = f"{name}={value}".encode()
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    uid = os.getuid()
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if entry not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":  # ended, awaiting its parent
                    continue
            found.append(pid)
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie -- ended, not yet reaped -- does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def end_processes(value: str, grace: float = GRACE_SECONDS) -> list[int]:
    """SIGTERM every process marked with ``value``, SIGKILL those alive after ``grace`` seconds; returns them."""
    pids = marked_processes(value)
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    for pid in pids:  # our own children (the GCS server, the raylet, ...) are reaped here, not left as zombies
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    return pids


def _in_ray(frame) -> bool:
    """Whether the main thread's current Python stack runs inside Ray's package."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).split(".", 1)[0] == "ray":
            return True
        frame = frame.f_back
    return False


class _Signals:
    """SIGINT/SIGTERM during a run, the first time only.  Without ``on_signal``, :class:`Interrupted` is raised in
    the main thread at once.  With it, the run is stopped from a thread of its own (``on_signal``: the strategies
    leave their exchange and the actors end, so Flower's run ends by itself), and :class:`Interrupted` is raised
    in the main thread only where it is not inside Ray's code: raising there (e.g. while it waits on actors still
    starting) ended the process with Ray's "core worker has already been shutdown", exit 1.  A run still going
    ``grace`` seconds later is interrupted (re-signalled every half second until the main thread is out of Ray)."""

    def __init__(self, on_signal: Callable[[], None] | None = None, grace: float = 0.0) -> None:
        self.received: int | None = None
        self.saved: dict[int, Any] = {}
        self.active = threading.current_thread() is threading.main_thread()
        self.on_signal, self.grace = on_signal, grace
        self.finished = threading.Event()  # the run's body has ended (set by ray_session)
        self.forcing = False  # the run did not end by itself: raise at the next chance outside Ray

    def handler(self, signum: int, frame) -> None:
        if self.forcing and self.received is not None and self.received > 0:
            if not _in_ray(frame):
                self.forcing = False
                raise Interrupted(self.received)
            return
        if self.received is not None:  # already stopping: let the clean-up finish
            return
        self.received = signum
        if self.on_signal is None:
            raise Interrupted(signum)
        threading.Thread(target=self._stop, name="cflab-stop-run", daemon=True).start()

    def _stop(self) -> None:
        with contextlib.suppress(Exception):
            self.on_signal()
        if self.finished.wait(self.grace):
            return
        self.forcing = True
        while self.forcing and not self.finished.wait(0.5):
            _thread.interrupt_main()  # SIGINT's handler above, in the main thread

    def interrupted(self) -> bool:
        return self.received is not None and self.received > 0

    def install(self) -> None:
        if not self.active:  # signal handlers can only be set from the main thread
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous = signal.signal(sig, self.handler)
            self.saved.setdefault(sig, previous)

    def hold(self) -> None:
        """From now on a signal is ignored (the clean-up is under way)."""
        if self.received is None:
            self.received = -1

    def restore(self) -> None:
        for sig, previous in self.saved.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)


def end_actors(value: str) -> list[int]:
    """SIGKILL the Ray worker processes (actors, ``ray::...``) marked with ``value``; returns them."""
    pids = []
    for pid in marked_processes(value):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if not fh.read().startswith(b"ray::"):
                    continue
            os.kill(pid, signal.SIGKILL)
            pids.append(pid)
        except OSError:
            continue
    return pids


@contextlib.contextmanager
def ray_session(init_args: dict[str, Any], on_stop: Callable[[], None] | None = None) -> Iterator[str]:
    """A new local Ray instance for one Flower run (module docstring); yields the run's marker value.

    ``init_args`` are ``ray.init``'s arguments (:func:`ray_config`); ``on_stop`` is called first
    in the clean-up (the strategies stop their exchanges, so the ServerApp thread ends).
    """
    import ray

    # a signal stops the run through on_stop (raising in the main thread while it waits inside Ray's code, e.g. on
    # actors still starting, ended the process with Ray's "core worker has already been shutdown", exit 1)
    value = uuid.uuid4().hex

    import ray._private.worker as ray_worker

    printer = ray_worker.print_to_stdstream

    def stop_run() -> None:
        if on_stop is not None:
            on_stop()
        # a Flower worker waiting on an actor (one still starting) gets its error at once; the raylet's notices of
        # the actors so ended ("A worker died ...") would reach stdout, so Ray's printer is silent until Ray stops
        ray_worker.print_to_stdstream = lambda *args, **kwargs: None
        end_actors(value)

    signals = _Signals(stop_run if on_stop is not None else None, STOP_GRACE_SECONDS)
    temp = tempfile.mkdtemp(prefix="cflab-ray-")  # short: Ray's socket paths live under it
    before = os.environ.get(MARKER)
    signals.install()
    try:
        os.environ[MARKER] = value
        try:
            # Flower's RayBackend passes sys.path on as PYTHONPATH, so that the actors import what the driver does
            path = os.pathsep.join([*sys.path, *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
            ray.init(**init_args, _temp_dir=temp, runtime_env={"env_vars": {"PYTHONPATH": path}})
        finally:  # only Ray's processes, started above, inherit the marker
            if before is None:
                os.environ.pop(MARKER, None)
            else:
                os.environ[MARKER] = before
        signals.install()  # ray.init replaced the SIGTERM handler with its own
        try:
            yield value
        except BaseException:
            signals.finished.set()
            if signals.interrupted():  # the run stopped by the signal ends with its error: Interrupted
                raise Interrupted(signals.received) from None
            raise
        signals.finished.set()
        if signals.interrupted():
            raise Interrupted(signals.received)
    finally:
        signals.finished.set()
        signals.hold()
        try:
            if on_stop is not None:
                on_stop()
            with contextlib.suppress(Exception):
                ray.shutdown()
            end_processes(value)
        finally:
            ray_worker.print_to_stdstream = printer
            shutil.rmtree(temp, ignore_errors=True)
            signals.restore()


# seconds between two looks for the answers of an exchange: PULL_SECONDS after an answer arrived, doubling up to
# PULL_SECONDS_MAX while none does.  Flower's InMemoryGrid waits a fixed 0.1 s, half an IFCA round of 20 clients on
# average over an exchange's two looks (bench/README.md#flower); a run is stopped within PULL_SECONDS_MAX.
PULL_SECONDS = 0.005
PULL_SECONDS_MAX = 0.05


def pull_replies(grid, messages: list, timeout: float, check_stop: Callable[[], None],
                 pull_seconds: tuple[float, float] = (PULL_SECONDS, PULL_SECONDS_MAX)) -> list:
    """``Grid.send_and_receive`` that looks for answers at adaptive intervals (``pull_seconds``: the shortest and
    longest pause) and calls ``check_stop`` before every look, so that a stopped run ends within the longest pause
    (``check_stop`` raises to stop it); a stopped run sends nothing more."""
    check_stop()
    ids = {str(i) for i in grid.push_messages(messages)}
    end = time.monotonic() + timeout
    out: list = []
    shortest, longest = pull_seconds
    pause = shortest
    while True:
        check_stop()
        got = list(grid.pull_messages(ids))
        out.extend(got)
        ids.difference_update(str(m.metadata.reply_to_message_id) for m in got)
        left = end - time.monotonic()
        if not ids or left <= 0:
            return out
        time.sleep(min(pause, left))
        pause = shortest if got else min(2 * pause, max(longest, shortest))


class RunStopped(RuntimeError):
    """A strategy was stopped (its ``stop()``) during an exchange or while it waited for its nodes."""


class StoppableGrid:
    """A run's grid (the public strategies' and ``nets flower``'s): ``send_and_receive`` polls finely
    (:func:`pull_replies`) and, as :meth:`check` and :meth:`wait_for_nodes` do, raises :class:`RunStopped`
    (``why``) once ``stop`` is set."""

    def __init__(self, grid, stop: threading.Event, why: str = "the strategy was stopped",
                 pull_seconds: tuple[float, float] | None = None):
        self._grid, self._stop, self._why = grid, stop, why
        self.pull_seconds = pull_seconds or (PULL_SECONDS, PULL_SECONDS_MAX)  # the poll's shortest, longest pause

    def __getattr__(self, name: str):
        return getattr(self._grid, name)

    def check(self) -> None:
        if self._stop.is_set():
            raise RunStopped(self._why)

    def send_and_receive(self, messages, *, timeout: float | None = None) -> list:
        messages = list(messages)
        if not messages:
            return []
        return pull_replies(self._grid, messages, 3600.0 if timeout is None else float(timeout), self.check,
                            self.pull_seconds)

    def wait_for_nodes(self, count: int, timeout: float, waiting: str, too_few: Callable[[int], str]) -> list[int]:
        """The connected nodes' ids, sorted, once ``count`` are connected; a wait is logged once (``waiting %
        connected``), and after ``timeout`` seconds it is ``TimeoutError(too_few(connected))``."""
        from flwr.supercore import log

        deadline = time.monotonic() + timeout
        said = False
        while len(nodes := sorted(int(n) for n in self._grid.get_node_ids())) < count:
            self.check()
            if not said:  # Flower's log: a run that waits says for what
                log(INFO, waiting, len(nodes))
                said = True
            if time.monotonic() > deadline:
                raise TimeoutError(too_few(len(nodes)))
            time.sleep(0.05)
        return nodes
