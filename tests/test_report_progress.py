"""The whole run's progress line (issue #54): every 30 s, k of N targets done, the elapsed time and an ETA weighed
by the targets' expected costs."""

from __future__ import annotations

import io
import re

import pytest

import paper_repro
from figures.report.progress import INTERVAL, RunProgress


def test_a_line_every_interval_with_targets_done_elapsed_and_eta():
    now = {"t": 0.0}
    out = io.StringIO()
    run = RunProgress(["a", "b", "c"], stream=out, clock=lambda: now["t"], cost={"a": 10, "b": 10, "c": 20}.get)
    assert INTERVAL == 30.0
    now["t"] = 29.0
    run.poll()
    assert out.getvalue() == ""  # nothing before the first interval
    now["t"] = 30.0
    run.poll()
    assert out.getvalue().splitlines()[-1] == "[run] 0 of 3 targets done; 30.0s elapsed; ETA after the first target"
    run.done("a")
    now["t"] = 60.0
    run.poll()
    # a (cost 10) took 60 s: b and c (cost 30) take 3 x 60 s more
    assert out.getvalue().splitlines()[-1] == "[run] 1 of 3 targets done; 1m00s elapsed; ETA 3m00s"
    run.done("b")
    run.done("c")
    now["t"] = 95.0
    run.poll()
    assert out.getvalue().splitlines()[-1] == "[run] 3 of 3 targets done; 1m35s elapsed"
    assert run.lines_printed == 3
    with pytest.raises(ValueError):
        RunProgress(["a"], interval=0)


def test_paper_repro_prints_the_run_line(tmp_path, capsys, monkeypatch):
    import figures.report.progress as progress

    monkeypatch.setattr(progress, "INTERVAL", 0.05)
    monkeypatch.setattr(progress, "TICK", 0.01)
    code = paper_repro.main(["--tiny", "--only", "ifca-fig3c,ifca-fig3d", "--out", str(tmp_path / "out"),
                             "--n-jobs", "1"])
    err = capsys.readouterr().err
    assert code == 0
    assert re.search(r"^\[run\] \d of 2 targets done; \S+ elapsed", err, re.M), err[-2000:]
