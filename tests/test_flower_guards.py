"""``python -m nets flower`` is guarded like ``nets run`` (issue #43, items 2-4): what ``nets run`` refuses is refused
before Ray starts, with the same line; its own flags are checked; Ctrl-C and SIGTERM end a run within seconds and
leave no process of it behind, nor does a finished run; a run in which no client answered fails (exit 1).

The refusals run in-process with ``ray.init`` replaced by a function that fails the test, so they prove that
nothing of Ray starts.  The signal cases start a small run in a process of its own (own session, so a Ctrl-C can
go to its whole process group as a terminal's does) and look for leftovers by a marker that the test puts in the
run's environment, which every process it starts inherits.  Skipped without the ``flower`` extra.
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import MarkedRun, marked

pytest.importorskip("flwr")
pytest.importorskip("ray")

from nets.cli import main  # noqa: E402

pytestmark = pytest.mark.flower

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--clients", "4", "--n-per-client", "20", "--local-steps", "1"]


@pytest.fixture
def no_ray(monkeypatch):
    """``ray.init`` fails the test: whatever is refused must be refused before Ray starts."""
    import ray

    def started(*args, **kwargs):
        raise AssertionError("Ray was started")

    monkeypatch.setattr(ray, "init", started)


def _line(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return code, err.strip()


def _numbers_out(text: str) -> str:
    """The line without its numbers and their time units (a time estimate is measured, so it differs from one call
    to the next, and may cross from minutes to hours under load)."""
    return re.sub(r"# (s|min|h|days|years)\b", "# T", re.sub(r"\d+(\.\d+)?", "#", text))


@pytest.mark.parametrize("argv", [
    ["--clients", "1000000"],  # the data alone exceed the memory budget
    [*SMALL, "--rounds", "100000000"],  # the fit's history and stacks exceed it
    ["--clients", "2"],  # digits-rotated has 4 clusters: at least 4 clients
    [*SMALL, "--rounds", "1", "--batch-size", "50"],  # a minibatch larger than a client's 20 samples
    [*SMALL, "--rounds", "1", "--n-clusters", "5"],  # more cluster models than clients
    [*SMALL, "--rounds", "3000", "--max-hours", "1e-6"],  # the time ceiling
], ids=["clients", "rounds", "too-few-clients", "batch-size", "n-clusters", "max-hours"])
def test_flower_refuses_what_nets_run_refuses_before_ray(argv, capsys, no_ray):
    run_code, run_err = _line(["run", *argv], capsys)
    flower_code, flower_err = _line(["flower", *argv], capsys)
    assert run_code == flower_code == 2
    assert _numbers_out(flower_err) == _numbers_out(run_err)


@pytest.mark.parametrize("argv, expect", [
    (["--timeout", "nan"], "timeout must be finite, got nan"),
    (["--timeout", "inf"], "timeout must be finite, got inf"),
    (["--timeout", "-1"], "timeout must be in (0, inf), got -1.0"),
    (["--actors", "0"], "actors must be an integer in [1, inf), got 0"),
])
def test_flower_flags_are_checked_before_ray(argv, expect, capsys, no_ray):
    code, err = _line(["flower", *SMALL, "--rounds", "1", *argv], capsys)
    assert code == 2 and expect in err, err


def test_actors_are_capped_at_the_cores(capsys, no_ray):
    cores = len(os.sched_getaffinity(0))
    code, err = _line(["flower", *SMALL, "--rounds", "1", "--actors", str(cores + 1)], capsys)
    assert code == 2 and f"actors must be an integer in [1, {cores}]" in err and f"got {cores + 1}" in err, err


def test_actors_are_capped_by_memory(capsys, monkeypatch, no_ray):
    """With a budget that holds ``nets run``'s estimate of the fit but not one actor and Ray's processes (about
    1.4 GiB, nets.flower.server), the simulation is refused naming --actors."""
    monkeypatch.setenv("CFLAB_MEMORY_LIMIT_MB", "1200")
    assert main(["run", *SMALL, "--rounds", "1", "--json"]) == 0  # nets run fits in that budget
    capsys.readouterr()
    code, err = _line(["flower", *SMALL, "--rounds", "1"], capsys)
    assert code == 2 and "Flower simulation of 1 actor(s)" in err and "lower --actors" in err, err


def test_run_without_answers_fails_in_one_line(capsys, monkeypatch):
    """``--timeout 1e-3``: no client answers any exchange; exit 1, one line counting the answers per round (round 2:
    the final assignment's ``query.losses`` after the last round); the record (kept for the test) claims no ARI for
    a clustering in which no client is assigned."""
    import nets.flower.server as server

    records = []
    real = server.run
    monkeypatch.setattr(server, "run", lambda *a, **k: records.append(real(*a, **k)) or records[-1])
    code, err = _line(["flower", *SMALL, "--rounds", "2", "--timeout", "1e-3", "--json"], capsys)
    assert code == 1, err
    assert "no client answered in 4 of 4 rounds and tests" in err and "rounds 0-2: 0 of 4, test: 0 of 4" in err
    record = records[0]
    assert record["unassigned"] == 4 and record["test_accuracy"] is None
    assert record["ari"] is None  # 4 clients in 4 true clusters: unassigned singletons would score 1.0
    assert record["flower"]["rounds_without_answers"] == [0, 1, 2, "test"]


# ---------------------------------------------------------------------------------------------- signals, leftovers


def _run(*flags: str) -> MarkedRun:
    """``python -m nets flower`` with its stderr read as it comes."""
    return MarkedRun([sys.executable, "-m", "nets", "flower", *SMALL, *flags], ROOT)


def _end(run: MarkedRun, limit: float) -> tuple[int, float]:
    t0 = time.monotonic()
    return run.end(limit), time.monotonic() - t0


# seconds a signalled run may take to end: ~2 s unloaded (Ray's shutdown 1.3 s, the interpreter's exit), 5-7 s at a
# load average of 5 on the 2 cores
END_SECONDS = 30.0


def test_ctrl_c_ends_the_run_and_its_ray_processes():
    """A terminal's Ctrl-C (SIGINT to the whole process group, Ray's processes included) after the rounds began:
    exit 130 within seconds, and no process of the run left."""
    run = _run("--rounds", "2000", "--verbose")
    try:
        run.wait_for(lambda: any(re.search(r"exchange 3 \(.*round", line) for line in run.lines), "third exchange")
        assert marked(run.marker)  # Ray's processes carry the marker
        os.killpg(run.proc.pid, signal.SIGINT)
        code, seconds = _end(run, END_SECONDS)
        assert code == 130, run.lines[-5:]
        assert run.lines[-1].startswith("python -m nets: interrupted"), run.lines[-5:]
        assert seconds < END_SECONDS
        assert marked(run.marker) == []
    finally:
        run.cleanup()


def test_sigterm_ends_the_run_in_one_line():
    """SIGTERM to the driver once Ray's actor runs: exit 143, one line on stderr, no process of the run left."""
    run = _run("--rounds", "2000")
    try:
        run.wait_for(lambda: any("ClientAppActor" in p for p in marked(run.marker)), "simulation actor")
        time.sleep(2.0)
        run.proc.send_signal(signal.SIGTERM)
        code, seconds = _end(run, END_SECONDS)
        assert code == 143 and len(run.lines) == 1 and "terminated (SIGTERM)" in run.lines[0], run.lines[-5:]
        assert seconds < END_SECONDS
        assert marked(run.marker) == []
    finally:
        run.cleanup()


def test_finished_run_leaves_no_process():
    run = _run("--rounds", "1", "--json")
    try:
        code = run.end(600)
        assert code == 0 and run.lines == [], run.lines[-5:]
        assert marked(run.marker) == []
    finally:
        run.cleanup()
