"""Fault injection: full disks, unusable paths, wrong-schema stores, divergence, huge requests, concurrent starts.

Every case asserts what a user sees (one line on stderr, exit status 2, or 130 for Ctrl-C) and what is left on
disk (the store unchanged, or repaired so that ``--resume`` finishes it).  A full disk is simulated by a
patched ``os.write`` / ``os.replace`` raising ``ENOSPC`` (a small tmpfs needs root to mount); unwritable paths
use regular files where folders are expected, ``/proc`` (which refuses new files even to root) and patched
``PermissionError`` for the cases root would bypass.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from synth.cli import main as synth_main
from synth.store import LOCK_FILE, META_FILE, RECORDS_FILE, TrialStore

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "CFLAB_QUIET": "1"}

TINY_SPEC = """\
name = "tiny"
trials = 2
seed = 3
[fixed]
K = 2
clients_per_cluster = 3
n = 10
d = 3
rounds = 3
[grid]
sigma = [0.1, 0.2]
[success]
metric = "param_error"
max = "0.6 * sigma"
"""


def _one_line(code: int, err: str, *fragments: str, status: int = 2) -> None:
    assert code == status, (code, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in err, (f, err)


def _spec(tmp_path: Path, text: str = TINY_SPEC, name: str = "tiny.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _results(directory: Path) -> list[tuple]:
    """(point, trial, seed, status, result without timings) of every record: what must not depend on faults."""
    out = []
    for line in (directory / RECORDS_FILE).read_text().splitlines():
        r = json.loads(line)
        out.append((r["point"], r["trial"], r["seed"], r["status"],
                    json.dumps({k: v for k, v in r["result"].items() if k != "seconds"}, sort_keys=True)))
    return sorted(out)


# -- full disk ---------------------------------------------------------------------------------------------------

def test_disk_full_while_appending_leaves_no_torn_record_and_resume_completes(tmp_path, monkeypatch, capsys):
    spec = _spec(tmp_path)
    real_write = os.write
    calls = {"n": 0}

    def full_after_two_records(fd, data):
        data = bytes(data)
        if data.startswith(b"{") and b'"trial":' in data:  # a trial record (meta.json has no "trial" key)
            calls["n"] += 1
            if calls["n"] == 3:  # half the third record reaches the disk, then the disk is full
                real_write(fd, data[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full_after_two_records)
    out = tmp_path / "store"
    code = synth_main(["sweep", str(spec), "--out", str(out), "--quiet"])
    _one_line(code, capsys.readouterr().err, "disk full", RECORDS_FILE)
    lines = (out / RECORDS_FILE).read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 3  # two whole records, no torn tail
    assert all(json.loads(x) for x in lines[:-1])

    monkeypatch.setattr(os, "write", real_write)
    assert synth_main(["sweep", str(spec), "--out", str(out), "--quiet", "--resume"]) == 0
    assert "torn" not in capsys.readouterr().err  # nothing was left to repair
    ref = tmp_path / "ref"
    assert synth_main(["sweep", str(spec), "--out", str(ref), "--quiet"]) == 0
    assert _results(out) == _results(ref)


def test_disk_full_while_writing_the_report_is_one_line(tmp_path, monkeypatch, capsys):
    spec = _spec(tmp_path)
    out = tmp_path / "store"
    assert synth_main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    before = _snapshot(out)

    def full(src, dst):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dst))

    monkeypatch.setattr(os, "replace", full)
    code = synth_main(["report", str(out)])
    _one_line(code, capsys.readouterr().err, "disk full")
    assert _snapshot(out) == before
    assert not [p for p in (out / "report").iterdir() if p.name.endswith(".tmp")] if (out / "report").exists() \
        else True


# -- unusable paths ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make_out, fragment", [
    (lambda tmp: tmp / "afile", "is a file"),
    (lambda tmp: tmp / "afile" / "below", "afile"),
    (lambda tmp: Path("/proc/cflab-no-such-dir/store"), "cflab-no-such-dir"),
])
def test_sweep_out_that_cannot_be_a_folder_is_one_line(tmp_path, make_out, fragment, capsys):
    (tmp_path / "afile").write_text("x")
    spec = _spec(tmp_path)
    code = synth_main(["sweep", str(spec), "--out", str(make_out(tmp_path)), "--quiet"])
    _one_line(code, capsys.readouterr().err, fragment)
    assert (tmp_path / "afile").read_text() == "x"


def test_empty_out_is_refused_and_writes_nothing(tmp_path, monkeypatch, capsys):
    spec = _spec(tmp_path)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    code = synth_main(["sweep", str(spec), "--out", "", "--quiet"])
    _one_line(code, capsys.readouterr().err, "--out")
    assert list(work.iterdir()) == []


def test_permission_denied_for_the_store_is_one_line(tmp_path, monkeypatch, capsys):
    spec = _spec(tmp_path)
    out = tmp_path / "locked" / "store"
    real_mkdir = Path.mkdir

    def denied(self, *a, **k):  # root ignores chmod; a patched mkdir answers as a read-only folder would
        if "locked" in str(self):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", denied)
    code = synth_main(["sweep", str(spec), "--out", str(out), "--quiet"])
    _one_line(code, capsys.readouterr().err, "permission denied", "locked")


def test_unreadable_spec_is_one_line(tmp_path, monkeypatch, capsys):
    spec = _spec(tmp_path)
    real_open = Path.open

    def denied(self, *a, **k):
        if self.name == spec.name:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(self))
        return real_open(self, *a, **k)

    monkeypatch.setattr(Path, "open", denied)
    code = synth_main(["sweep", str(spec), "--out", str(tmp_path / "s"), "--quiet"])
    _one_line(code, capsys.readouterr().err, "tiny.toml")


def test_binary_spec_names_the_file(tmp_path, capsys):
    spec = tmp_path / "binary.toml"
    spec.write_bytes(bytes(range(256)) * 3)
    code = synth_main(["sweep", str(spec), "--out", str(tmp_path / "s"), "--quiet"])
    _one_line(code, capsys.readouterr().err, "binary.toml")


def test_report_out_that_is_a_file_and_report_of_a_file(tmp_path, capsys):
    spec = _spec(tmp_path)
    out = tmp_path / "store"
    assert synth_main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    (tmp_path / "afile").write_text("x")
    _one_line(synth_main(["report", str(out), "--out", str(tmp_path / "afile")]), capsys.readouterr().err, "afile")
    code = synth_main(["report", str(tmp_path / "afile")])
    err = capsys.readouterr().err
    _one_line(code, err, "afile", "is a file")
    assert "does not exist" not in err


def test_report_files_have_the_store_mode(tmp_path, capsys):
    spec = _spec(tmp_path)
    out = tmp_path / "store"
    assert synth_main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    assert synth_main(["report", str(out)]) == 0
    store_mode = (out / RECORDS_FILE).stat().st_mode & 0o777
    modes = {p.name: p.stat().st_mode & 0o777 for p in (out / "report").iterdir()}
    assert modes and all(m == store_mode for m in modes.values()), (store_mode, modes)


def test_paper_repro_out_that_is_a_file_is_one_line(tmp_path, capsys):
    import paper_repro

    (tmp_path / "afile").write_text("x")
    code = paper_repro.main(["--tiny", "--only", "ifca-fig3a", "--out", str(tmp_path / "afile"), "--n-jobs", "1"])
    _one_line(code, capsys.readouterr().err, "afile")


# -- wrong-schema stores -----------------------------------------------------------------------------------------

@pytest.fixture
def store(tmp_path, capsys):
    spec = _spec(tmp_path)
    out = tmp_path / "store"
    assert synth_main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    return spec, out


def _break_record(out: Path, line: int, new: str) -> None:
    lines = (out / RECORDS_FILE).read_text().splitlines()
    lines[line - 1] = new
    (out / RECORDS_FILE).write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("edit, fragments", [
    (lambda out: _break_record(out, 2, '{"hello": "world"}'), [RECORDS_FILE, "line 2", "not a trial record"]),
    (lambda out: _break_record(out, 3, (out / RECORDS_FILE).read_text().splitlines()[2]
                               .replace('"point":1', '"point":"a"')), [RECORDS_FILE, "line 3", "'point'"]),
    (lambda out: _break_record(out, 1, "[1, 2, 3]"), [RECORDS_FILE, "line 1"]),
    (lambda out: (out / META_FILE).write_text('{"fingerprint": "x"}'), [META_FILE, "points"]),
    (lambda out: (out / META_FILE).write_text('[1, 2]'), [META_FILE]),
    (lambda out: (out / META_FILE).write_text('{"fingerprint": 1, "points": "abc", "trials": 2}'), [META_FILE]),
])
def test_wrong_schema_store_is_one_line_naming_file_and_line(store, edit, fragments, capsys):
    spec, out = store
    edit(out)
    before = _snapshot(out)
    _one_line(synth_main(["report", str(out)]), capsys.readouterr().err, *fragments)
    assert _snapshot(out) == before
    code = synth_main(["sweep", str(spec), "--out", str(out), "--quiet", "--resume"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert _snapshot(out) == before


# -- spec.toml under the lock ------------------------------------------------------------------------------------

def test_refused_start_leaves_spec_toml_alone(store, tmp_path, capsys):
    spec, out = store
    before = _snapshot(out)
    other = _spec(tmp_path, TINY_SPEC.replace("trials = 2", "trials = 3").replace("0.2]", "0.3]"), "other.toml")
    # a different sweep into a finished store, with and without --resume: refused, spec.toml unchanged
    for extra in ([], ["--resume"]):
        code = synth_main(["sweep", str(other), "--out", str(out), "--quiet", *extra])
        _one_line(code, capsys.readouterr().err, str(out))
        assert _snapshot(out) == before
    # the store in use by a running sweep: refused before spec.toml is touched
    with TrialStore(out) as running:
        running.open(json.loads((out / META_FILE).read_text()), resume=True)
        code = synth_main(["sweep", str(other), "--out", str(out), "--quiet", "--resume"])
        _one_line(code, capsys.readouterr().err, "in use")
    assert (out / "spec.toml").read_bytes() == before["spec.toml"]


def test_start_into_a_locked_folder_writes_no_spec_toml(tmp_path, capsys):
    spec = _spec(tmp_path)
    out = tmp_path / "store"
    fcntl = pytest.importorskip("fcntl")
    out.mkdir()
    fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:  # another start holds the lock but has written nothing yet
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        code = synth_main(["sweep", str(spec), "--out", str(out), "--quiet"])
        _one_line(code, capsys.readouterr().err, "in use")
    finally:
        os.close(fd)
    assert [p.name for p in out.iterdir()] == [LOCK_FILE]


def test_refused_resume_of_the_same_sweep_keeps_its_spec_toml(store, tmp_path, capsys):
    spec, out = store
    before = (out / "spec.toml").read_bytes()
    # same points and seed (same fingerprint), another text: refused while the store is in use
    edited = _spec(tmp_path, "# edited\n" + TINY_SPEC.replace('max = "0.6 * sigma"', 'max = "0.5 * sigma"'),
                   "edited.toml")
    with TrialStore(out) as running:
        running.open(json.loads((out / META_FILE).read_text()), resume=True)
        code = synth_main(["sweep", str(edited), "--out", str(out), "--quiet", "--resume"])
        _one_line(code, capsys.readouterr().err, "in use")
    assert (out / "spec.toml").read_bytes() == before


def test_concurrent_starts_one_wins_and_spec_toml_describes_it(tmp_path):
    specs = [_spec(tmp_path, TINY_SPEC.replace("sigma = [0.1, 0.2]", f"sigma = [0.1, {0.2 + i / 10}]")
                   .replace('"tiny"', f'"s{i}"'), f"s{i}.toml") for i in range(3)]
    out = tmp_path / "store"
    procs = [subprocess.Popen([sys.executable, "-m", "synth", "sweep", str(s), "--out", str(out), "--quiet"],
                              cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for s in specs]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    winners = [i for i, (code, _) in enumerate(results) if code == 0]
    assert winners, results
    for code, err in results:
        assert code in (0, 2) and "Traceback" not in err, err
        if code == 2:
            assert err.count("\n") == 1 and any(f in err for f in ("in use", "different sweep", "already holds")), err
    # whichever start wrote the records, spec.toml and meta.json describe that sweep and no other
    meta = json.loads((out / META_FILE).read_text())
    assert (out / "spec.toml").read_text() == specs[[f"s{i}" for i in range(3)].index(meta["name"])].read_text()
    assert meta["name"] in {f"s{i}" for i in winners}


# -- divergence --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, flag", [
    (["--step-size", "1e6", "--rounds", "50"], "--step-size"),
    (["--R", "1e308"], "--R"),
    (["--algo", "clove", "--step-size", "1e6"], "--step-size"),
])
def test_divergence_is_one_line_naming_the_flag(argv, flag, capsys):
    code = synth_main(["run", "--K", "2", "--clients-per-cluster", "4", "--n", "20", "--d", "5", *argv])
    _one_line(code, capsys.readouterr().err, "diverged", flag)


def test_nets_divergence_is_one_line(capsys):
    pytest.importorskip("torch")
    from nets.cli import main as nets_main

    code = nets_main(["run", "--step-size", "1e6", "--rounds", "3", "--clients", "4", "--n-per-client", "10",
                      "--n-test", "10", "--device", "cpu"])
    _one_line(code, capsys.readouterr().err, "diverged", "--step-size")


# -- huge requests -----------------------------------------------------------------------------------------------

def test_theory_huge_trials_refused_before_work(capsys):
    from theory.cli import main as theory_main

    code = theory_main(["check", "ifca-lemma1", "--trials", "1000000000000"])
    _one_line(code, capsys.readouterr().err, "--trials", "needs about", "memory")


def test_run_with_huge_client_count_refused_with_estimate(capsys):
    code = synth_main(["run", "--K", "20000000", "--clients-per-cluster", "1", "--n", "1", "--d", "1"])
    _one_line(code, capsys.readouterr().err, "needs about", "20000000 clients")


@pytest.mark.parametrize("head", [
    'trials = 1000000000\n[fixed]\nK = 2\n',
    "trials = 2\n[grid]\n" + "\n".join(f"{k} = [{', '.join(str(1 + j) for j in range(10))}]"
                                       for k in ("sigma", "R", "n", "d", "rounds", "step_size", "K", "n_init")),
])
def test_huge_sweep_refused_before_anything_is_written(tmp_path, head, capsys):
    spec = _spec(tmp_path, head, "huge.toml")
    out = tmp_path / "store"
    code = synth_main(["sweep", str(spec), "--out", str(out), "--quiet"])
    _one_line(code, capsys.readouterr().err, "huge.toml", "needs about")
    assert not out.exists()


def test_run_trials_streams_its_pairs(monkeypatch):
    from synth import montecarlo

    monkeypatch.setenv("CFLAB_MEMORY_LIMIT_MB", "1e9")  # the records' estimate is not what this test is about
    seen = {}

    def fake_execute(tasks, *a, **k):
        seen["type"] = type(tasks)
        seen["first"] = [next(iter(tasks)) for _ in range(2)]
        raise KeyboardInterrupt

    monkeypatch.setattr(montecarlo, "_execute", fake_execute)
    with pytest.raises(KeyboardInterrupt):
        montecarlo.run_trials(lambda p, s: {}, [{"a": 1}, {"a": 2}], trials=10**5, root_seed=0)
    # a generator: the (point, trial) pairs are never built as a list up front
    assert not isinstance(seen["first"], type(None)) and seen["type"].__name__ == "generator"


# -- spec expressions and names at parse time --------------------------------------------------------------------

def test_spec_power_tower_is_refused_fast():
    code = textwrap.dedent("""
        from synth.sweep import parse_spec
        raw = {"trials": 1, "grid": {"R": [1.0, 2.0], "sigma": [0.1, 0.2]},
               "outputs": {"heatmaps": [{"x": "R", "y": "sigma",
                                         "boundaries": [{"label": "b", "y": "9**9**9"}]}]}}
        try:
            parse_spec(raw)
        except ValueError as exc:
            print("refused:", exc)
    """)
    done = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("refused:") and "exponent" in done.stdout, done


@pytest.mark.parametrize("success, fragment", [
    ('metric = "param_eror"\nmax = 0.5', "param_eror"),
    ('metric = "param_error"\nmax = "0.6 * sigmaa"', "sigmaa"),
])
def test_bad_success_rule_refused_before_any_compute(tmp_path, success, fragment, capsys):
    spec = _spec(tmp_path, TINY_SPEC.split("[success]")[0] + "[success]\n" + success + "\n")
    out = tmp_path / "store"
    code = synth_main(["sweep", str(spec), "--out", str(out), "--quiet"])
    _one_line(code, capsys.readouterr().err, fragment)
    assert not out.exists()


# -- nets checkpoints --------------------------------------------------------------------------------------------

NETS_TINY = ["run", "--rounds", "1", "--clients", "4", "--n-per-client", "10", "--n-test", "10", "--device", "cpu"]


@pytest.mark.parametrize("content", [b"garbage" * 50, b"pickle"])
def test_nets_bad_checkpoint_is_one_line_and_runs_nothing(tmp_path, content, capsys):
    pytest.importorskip("torch")
    import pickle

    from nets.cli import main as nets_main

    marker = tmp_path / "executed"
    if content == b"pickle":
        class Evil:
            def __reduce__(self):
                return (Path.touch, (marker,))

        content = pickle.dumps(Evil())
    ckpt = tmp_path / "run.pt"
    ckpt.write_bytes(content)
    code = nets_main([*NETS_TINY, "--checkpoint", str(ckpt)])
    err = capsys.readouterr().err
    _one_line(code, err, "run.pt", "not a nets checkpoint")
    assert "weights_only=False" not in err and not marker.exists()
    assert ckpt.read_bytes() == content


def test_nets_checkpoint_directory_refused(tmp_path, capsys):
    pytest.importorskip("torch")
    from nets.cli import main as nets_main

    code = nets_main([*NETS_TINY, "--checkpoint", str(tmp_path)])
    _one_line(code, capsys.readouterr().err, "is a directory")


def test_nets_checkpoint_in_use_is_refused(tmp_path, capsys):
    pytest.importorskip("torch")
    ckpt = tmp_path / "run.pt"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from nets.checkpoint import load_checkpoint
        load_checkpoint({str(ckpt)!r})
        print("held", flush=True)
        sys.stdin.read()
    """)], env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        from nets.cli import main as nets_main

        code = nets_main([*NETS_TINY, "--checkpoint", str(ckpt)])
        _one_line(code, capsys.readouterr().err, "in use", "run.pt")
        assert not ckpt.exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stdout.close()


def test_nets_checkpoint_save_uses_its_own_temp_name(tmp_path):
    torch = pytest.importorskip("torch")
    from nets import checkpoint

    ckpt = tmp_path / "run.pt"
    (tmp_path / "run.pt.tmp").mkdir()  # another run's fixed temporary name must not matter
    checkpoint.save_checkpoint(ckpt, torch.zeros(2, 3), 1, {"s": 1}, {"c": 2}, {"h": []})
    try:
        assert checkpoint.load_checkpoint(ckpt)["round"] == 1
    finally:
        checkpoint.release_checkpoint(ckpt)
    # no temporary file of this save is left, and releasing the checkpoint removed its lock file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pt", "run.pt.tmp"]


# -- the last resort, interrupts, --debug ------------------------------------------------------------------------

@pytest.mark.parametrize("exc, status, fragment", [
    (RuntimeError("boom"), 2, "--debug"),
    (KeyboardInterrupt(), 130, "interrupted"),
    (MemoryError(), 2, "out of memory"),
    (OSError(errno.EROFS, "Read-only file system", "/mnt/x"), 2, "read-only"),
])
def test_every_failure_is_one_line(monkeypatch, capsys, exc, status, fragment):
    import synth.experiment

    def fail(*a, **k):
        raise exc

    monkeypatch.setattr(synth.experiment, "run_experiment", fail)
    try:
        code = synth_main(["run", "--rounds", "2"])
    except BaseException as escaped:  # noqa: BLE001 - an escaping Ctrl-C must fail this test, not end the run
        pytest.fail(f"{type(escaped).__name__} escaped main")
    _one_line(code, capsys.readouterr().err, fragment, status=status)


def test_debug_shows_the_traceback(monkeypatch, capsys):
    import synth.experiment

    def fail(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(synth.experiment, "run_experiment", fail)
    assert synth_main(["run", "--rounds", "2", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("python -m synth: internal error")


def test_json_output_is_strict_json(monkeypatch, capsys):
    import synth.experiment

    monkeypatch.setattr(synth.experiment, "run_experiment",
                        lambda *a, **k: {"client_error": float("inf"), "x": float("nan"), "y": 1.5})
    assert synth_main(["run", "--json"]) == 0

    def strict(name):
        raise ValueError(name)

    assert json.loads(capsys.readouterr().out, parse_constant=strict)["y"] == 1.5


@pytest.mark.parametrize("argv, fragment", [
    (["check", "ifca-lemma1", "--n-jobs", "0"], "--n-jobs"),
    (["sweep", "ifca-lemma1", "--over", "alpha="], "--over"),
])
def test_theory_small_mistakes(argv, fragment, capsys):
    from theory.cli import main as theory_main

    _one_line(theory_main(argv), capsys.readouterr().err, fragment)


def test_unused_parameter_of_the_family_is_an_error(capsys):
    _one_line(synth_main(["run", "--family", "logistic", "--sigma", "5"]), capsys.readouterr().err, "sigma")


def test_nets_too_many_clients_blames_clients(capsys):
    pytest.importorskip("torch")
    from nets.cli import main as nets_main

    err_code = nets_main(["run", "--clients", "100000000", "--device", "cpu"])
    err = capsys.readouterr().err
    _one_line(err_code, err, "clients")
    assert "n_per_client" not in err


def test_paper_repro_stops_on_a_full_disk(tmp_path, monkeypatch, capsys):
    import figures
    import paper_repro

    class FullDisk:
        name, paper, description = "fake", "none", "a target that meets a full disk"

        def why_not(self, ctx):
            return None

        def run(self, ctx):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(ctx.out / "fake" / "x.csv"))

    monkeypatch.setattr(figures, "load_targets", lambda: {"fake": FullDisk(), "later": FullDisk()})
    code = paper_repro.main(["--tiny", "--out", str(tmp_path / "out"), "--n-jobs", "1"])
    _one_line(code, capsys.readouterr().err, "disk full", "x.csv")


def test_ctrl_c_mid_sweep_is_one_line_exit_130_and_resume_finishes(tmp_path):
    import signal
    import time

    spec = _spec(tmp_path, TINY_SPEC.replace("trials = 2", "trials = 50"))
    out = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "synth", "sweep", str(spec), "--out", str(out), "--quiet"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if (out / RECORDS_FILE).exists() and (out / RECORDS_FILE).stat().st_size > 0:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    proc.stderr.close()
    code = proc.wait(timeout=60)
    if code == 0:
        pytest.skip("the sweep finished before the interrupt arrived")
    _one_line(code, err, "interrupted", status=130)
    n_before = len((out / RECORDS_FILE).read_text().splitlines())
    assert 0 < n_before < 100
    assert synth_main(["sweep", str(spec), "--out", str(out), "--quiet", "--resume"]) == 0
    assert len(_results(out)) == 100
