"""Progress of long commands on stderr (synth/progress.py): when stderr is not a terminal one line every 30 s at most
and a closing line, never on stdout, silenced by CFLAB_QUIET or --quiet; used by ``python -m synth sweep``,
``python -m nets run`` and the campaign planner (``paper_repro.py --campaign plan``).  Every time is a fake clock's."""

from __future__ import annotations

import io
import json
import re

import pytest

import synth.progress as progress
from synth.progress import INTERVAL, Progress, duration, progress_mode

LINE = re.compile(r"^\[(?P<label>[^\]]+)\] (?P<done>\d+) of (?P<total>\d+) (?P<what>[a-z ]+)(?: \(\d+ failed\))?, "
                  r"(?P<elapsed>\S+) elapsed(?:, (?:ETA \S+|no ETA before the first is done))?$")


class FakeClock:
    """A clock that moves only when told, or by ``step`` seconds at every reading."""

    def __init__(self, step: float = 0.0):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture
def loud(monkeypatch):
    """Neither CFLAB_QUIET (tests/conftest.py sets it) nor CI: the default mode follows the stream."""
    monkeypatch.delenv("CFLAB_QUIET", raising=False)
    monkeypatch.delenv("CI", raising=False)


def test_lines_every_interval_and_not_more_often_when_not_a_tty(loud):
    clock, out = FakeClock(), io.StringIO()
    bar = Progress("sweep", 480, "trials", stream=out, clock=clock)
    assert bar.mode == "lines" and INTERVAL == 30.0
    printed_at = []
    for second in range(1, 301):  # a trial every 5/8 s... and a look every second, as the reporting thread does
        clock.now = float(second)
        before = bar.lines_printed
        if second % 5 == 0:
            bar.update(8)
        else:
            bar.poll()
        if bar.lines_printed > before:
            printed_at.append(second)
    assert printed_at == [30, 60, 90, 120, 150, 180, 210, 240, 270, 300]
    lines = out.getvalue().splitlines()
    assert lines[0] == "[sweep] 48 of 480 trials, 30.0s elapsed, ETA 4m30s"
    assert lines[3] == "[sweep] 192 of 480 trials, 2m00s elapsed, ETA 3m00s"
    assert lines[-1] == "[sweep] 480 of 480 trials, 5m00s elapsed"
    clock.now = 301.0
    bar.close()
    assert out.getvalue().splitlines()[-1] == "[sweep] 480 of 480 trials, 5m01s elapsed"  # the closing line
    assert all(LINE.match(x) for x in out.getvalue().splitlines())


def test_a_late_look_prints_one_line_not_a_burst(loud):
    clock, out = FakeClock(), io.StringIO()
    bar = Progress("nets run", 50, "rounds", stream=out, clock=clock)
    clock.now = 29.9
    bar.poll()
    assert out.getvalue() == ""
    clock.now = 125.0  # four intervals late (a round that took long): one line, the next due at 150 s
    bar.poll()
    bar.poll()
    assert out.getvalue() == "[nets run] 0 of 50 rounds, 2m05s elapsed, no ETA before the first is done\n"
    clock.now = 149.0
    bar.set(10)
    assert bar.lines_printed == 1
    clock.now = 150.0
    bar.poll()
    assert out.getvalue().splitlines()[-1] == "[nets run] 10 of 50 rounds, 2m30s elapsed, ETA 10m00s"


def test_a_short_run_prints_nothing_and_quiet_silences(loud, monkeypatch):
    clock, out = FakeClock(), io.StringIO()
    with Progress("sweep", 4, stream=out, clock=clock) as bar:
        clock.now = 29.0
        bar.update(4)
    assert out.getvalue() == ""  # under one interval: not even a closing line
    monkeypatch.setenv("CFLAB_QUIET", "1")
    quiet = Progress("sweep", 4, stream=out, clock=clock)
    clock.now = 100.0
    quiet.update(1)
    quiet.poll()
    quiet.close()
    assert quiet.mode == "off" and out.getvalue() == ""
    monkeypatch.delenv("CFLAB_QUIET")
    assert progress_mode(False, out) == "off"  # --quiet
    assert progress_mode(True, out) == "bar"  # --progress


def test_the_mode_follows_the_stream(loud, monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert progress_mode(None, Tty()) == "bar" and progress_mode(None, io.StringIO()) == "lines"
    monkeypatch.setenv("CI", "true")
    assert progress_mode(None, Tty()) == "lines"  # a CI log is no terminal, whatever it claims
    monkeypatch.setenv("CFLAB_QUIET", "0")
    assert progress_mode(None, io.StringIO()) == "lines"
    assert duration(75.2) == "1m15s" and duration(42.0) == "42.0s" and duration(3720) == "1h02m"


def test_resumed_units_count_but_not_in_the_eta(loud):
    clock, out = FakeClock(), io.StringIO()
    bar = Progress("nets run", 50, "rounds", stream=out, clock=clock)
    bar.resumed(20)  # a checkpoint held 20 rounds
    clock.now = 30.0
    bar.set(23)  # 3 rounds in 30 s: 27 left take 270 s
    assert out.getvalue() == "[nets run] 23 of 50 rounds, 30.0s elapsed, ETA 4m30s\n"


def test_synth_sweep_progress_goes_to_stderr_not_stdout(loud, monkeypatch, tmp_path, capsys):
    from synth.cli import main
    from tests.test_faults import TINY_SPEC

    monkeypatch.setattr(progress, "_clock", FakeClock(step=20.0))  # every reading 20 s later
    (tmp_path / "tiny.toml").write_text(TINY_SPEC)
    assert main(["sweep", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "store")]) == 0
    out, err = capsys.readouterr()
    assert "trials," not in out and len(out.splitlines()) == 2  # the estimate and the closing summary
    lines = [x for x in err.splitlines() if x.startswith("[tiny]")]
    assert lines and all(LINE.match(x) for x in lines), err
    assert lines[-1].startswith("[tiny] 4 of 4 trials, ")
    # --quiet: nothing at all on stderr
    assert main(["sweep", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "store2"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_nets_run_rounds_on_stderr_and_json_alone_on_stdout(loud, monkeypatch, capsys):
    pytest.importorskip("torch")
    from nets.cli import main
    from tests.test_nets_cli import TINY

    monkeypatch.setattr(progress, "_clock", FakeClock(step=20.0))
    assert main(["run", *TINY, "--algo", "global", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["rounds"] == 2  # stdout is the JSON object alone
    lines = [x for x in err.splitlines() if x.startswith("[nets run]")]
    assert lines and all(LINE.match(x) for x in lines), err
    assert lines[-1].startswith("[nets run] 2 of 2 rounds, ")
    monkeypatch.setenv("CFLAB_QUIET", "1")
    assert main(["run", *TINY, "--algo", "global", "--json"]) == 0
    assert capsys.readouterr().err == ""


def test_campaign_plan_times_points_with_progress_lines(loud, monkeypatch, tmp_path, capsys):
    pytest.importorskip("torch")
    from figures.campaign import costs as campaign_costs
    from figures.campaign import planner as campaign

    data = tmp_path / "data"
    for folder in ("mnist", "amazon-blitzer", "ag-news"):
        (data / folder).mkdir(parents=True)
        (data / folder / "placeholder").write_text("x")  # the folders exist; their files are never read
    requests, _ = campaign.collect(tmp_path / "store", str(data), names=["clove-table5"])
    cell = next(c for c in campaign.cells(requests) if "unsup-mnist" in c.name)
    root = tmp_path / "store"
    root.mkdir()
    clock = FakeClock()
    monkeypatch.setattr(progress, "_clock", clock)

    def fake_time(point, seed, rounds, data_dir):  # each timed run takes 40 s of the fake clock
        clock.now += 40.0
        ends = {k: 1.0 + k for k in range(rounds)}
        return 1.0 + rounds, {"data": 0.0, "local training": float(rounds), "round_ends": ends}

    monkeypatch.setattr(campaign_costs, "_time_point", fake_time)
    campaign.measure([cell], root, str(data), log=print)
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines and all(LINE.match(x) for x in lines), err
    assert lines[-1].startswith("[campaign] 4 of 4 points timed, ")
    assert "points timed" not in out and out.count("timed ") == 4  # the log's lines stay on stdout
