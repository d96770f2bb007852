"""What paper_repro.py tells a person while it runs (figures/report/progress.py): each target's elapsed time, periodic
lines with trials done and an ETA when stderr is not a terminal, and a closing summary of the verdict counts per
paper, the wall and CPU time and both report paths."""

from __future__ import annotations

import io
import re
import time

import paper_repro
from figures.registry import TARGETS, Context, Section, register
from figures.report import progress
from figures.report.assemble import read_all
from figures.report.headline import data_kind, tally
from figures.verdicts.rules import AGREES, DIFFERS, NOT_RESOLVED

CHEAP = ("ifca-fig3c", "ifca-fig3d")  # seconds each at the tiny size


def test_closing_summary_names_counts_times_and_paths(tmp_path, capsys):
    out = tmp_path / "out"
    cpu = time.process_time()
    code = paper_repro.main(["--tiny", "--only", ",".join(CHEAP), "--out", str(out), "--n-jobs", "1"])
    cpu = time.process_time() - cpu
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    for name in CHEAP:  # one line per target with its elapsed time
        assert re.search(rf"^\[{name}\] done in [\d.]+s \([\d.]+ CPU s", stdout, re.M), stdout
    summary = stdout[stdout.index("Summary (tiny run)"):]
    assert "targets 2 done" in summary
    # the counts per paper are those of the verified status files, as the report's headline counts them
    statuses = read_all(out, {n: TARGETS[n] for n in CHEAP}, "tiny")
    entries = [(n, TARGETS[n].paper, data_kind(TARGETS[n].kind, "tiny"), st.rows) for n, st in statuses.items()]
    t = tally(entries)[("IFCA", "synthetic / theory")]
    assert sum(t.claims.values()) > 0
    line = next(x for x in summary.splitlines() if x.strip().startswith("IFCA, synthetic / theory:"))
    assert (f"claims {t.claims[AGREES]} agree / {t.claims[DIFFERS]} differ / {t.claims[NOT_RESOLVED]} not resolved"
            in line), line
    m = re.search(r"time: (\S+) wall, \S+ CPU \(([\d.]+) CPU s", summary)
    assert m, summary
    assert abs(float(m.group(2)) - cpu) <= 1.0 + 0.05 * cpu  # in-process run (n_jobs 1): the test's own CPU time
    assert f"report: {out / 'report.md'}" in summary and f"report: {out / 'report.html'}" in summary


# a fake slow target: each trial moves the progress clock on by 20 s (and waits a moment for the reporting thread)
FAKE = {"now": 0.0}


def _slow_trial(params: dict, seed: int) -> dict:
    FAKE["now"] += 20.0
    time.sleep(0.05)
    return {"x": params["i"]}


def test_periodic_lines_for_a_long_step_when_stderr_is_not_a_tty(tmp_path, capsys, monkeypatch):
    from figures.runs import run_points

    FAKE["now"] = 0.0
    monkeypatch.setattr(progress, "_clock", lambda: FAKE["now"])
    monkeypatch.setattr(progress, "TICK", 0.01)

    def run(ctx: Context) -> Section:
        recs = run_points(ctx, "fake-slow", _slow_trial, [{"i": i} for i in range(3)], 2, seed=0)
        return Section("fake slow target", f"{len(recs)} trials\n")

    monkeypatch.setitem(TARGETS, "fake-slow", None)  # restored (removed) after the test
    del TARGETS["fake-slow"]
    register("fake-slow", "beyond papers", "a slow target of the test")(run)
    code = paper_repro.main(["--tiny", "--only", "fake-slow", "--out", str(tmp_path / "o"), "--n-jobs", "1"])
    err = capsys.readouterr().err
    assert code == 0, err
    lines = [x for x in err.splitlines() if x.startswith("[fake-slow]")]
    # 6 trials of 20 s: a line every 30 s of the step, each with the elapsed time, trials done and an ETA
    assert len(lines) >= 3, err
    for x in lines:
        assert re.fullmatch(r"\[fake-slow\] \S+ elapsed; \d/6 trials; (ETA \S+ for this batch|writing figures and "
                            r"tables)", x), x
    assert any("ETA" in x for x in lines)
    assert "\r" not in err  # no bar drawn into a file


def test_a_terminal_gets_a_bar_and_no_lines():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    stream = Tty()
    now = [0.0]
    step = progress.StepProgress("t", stream=stream, clock=lambda: now[0], tick=0.01)
    assert step.bar_mode
    step.add_batch(None, 4)
    now[0] = 100.0
    step.poll()
    step.stop()
    assert "[t]" in stream.getvalue() and "elapsed" not in stream.getvalue()


def test_progress_refuses_a_bad_interval():
    import pytest

    with pytest.raises(ValueError, match="interval"):
        progress.StepProgress("t", interval=0)


def test_quick_targets_run_side_by_side_and_share_their_runs(tmp_path, capfd):
    """With 2 workers, targets run side by side (one process each); ifca-fig4 reads the runs ifca-table1 makes,
    whichever starts first, and no run is made twice."""
    import json

    out = tmp_path / "o"
    names = ["ifca-table1", "ifca-fig4", "ifca-fig3c"]
    code = paper_repro.main(["--tiny", "--only", ",".join(names), "--out", str(out), "--n-jobs", "2"])
    stdout = capfd.readouterr().out
    assert code == 0, stdout
    if json.loads((out / "ifca-table1" / "status-tiny.json").read_text())["status"] == "pending":
        import pytest

        pytest.skip("the neural-network targets need torch")
    assert "3 targets on 2 workers side by side" in stdout
    for name in names:
        assert json.loads((out / name / "status-tiny.json").read_text())["status"] == "done"
        assert re.search(rf"^\[{name}\] done in ", stdout, re.M), stdout
    store = out / "ifca-table1" / "store-tiny"
    meta = json.loads((store / "meta.json").read_text())
    assert meta["targets"] == ["ifca-fig4", "ifca-table1"]
    lines = (store / "trials.jsonl").read_text().splitlines()
    keys = [(r["point"], r["trial"]) for r in map(json.loads, lines)]
    assert len(keys) == len(set(keys)) == len(meta["spec"]["points"]) * meta["spec"]["trials"]


def test_a_target_waits_for_a_store_another_target_is_filling(tmp_path, capsys):
    """Side by side, a store in use by another target of the run is waited for (one line), not refused."""
    import fcntl
    import os
    import threading

    from figures.runs import _store_turn

    ctx = Context(out=tmp_path, wait_for_stores=True, target="second")
    store = tmp_path / "shared" / "store-quick"
    store.parent.mkdir()
    fd = os.open(store.parent / f".{store.name}.turn", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the first target holds the store
    got = threading.Event()

    def second():
        with _store_turn(ctx, store):
            got.set()

    th = threading.Thread(target=second)
    th.start()
    assert not got.wait(0.5)  # waiting
    os.close(fd)  # the first target is done with it
    assert got.wait(10)
    th.join()
    assert "[second] waiting for shared/store-quick" in capsys.readouterr().err
