"""Hostile input, round 4 (issue #43): no file may run code, forged and edited records are refused, every command
line ends in one line and a known status.

API cases raise ``ValueError`` naming the parameter; command lines exit 2 with one line on stderr; nothing
segfaults, hangs or prints a traceback.  (The Flower items of the issue are tested in ``tests/test_flower*.py``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from synth.store import with_digest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "CFLAB_QUIET": "1"}


def _one_line(code: int, err: str, *fragments: str, status: int = 2) -> None:
    assert code == status, (code, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in err, (f, err)


def _script(args: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env=env or ENV)


# -- item 1: a result file never chooses code ------------------------------------------------------------------------

def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """A module on PYTHONPATH whose import writes a file (the proof that it was imported), and that file."""
    folder = tmp_path / "planted"
    folder.mkdir()
    marker = tmp_path / "imported.txt"
    (folder / "cflab_planted.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n"
                                             "def trial(point, seed):\n    return {}\n")
    return folder, marker


@pytest.mark.parametrize("kind", ["subprocess.call", "planted module"])
def test_a_run_file_naming_foreign_code_is_refused_and_nothing_runs(tmp_path, kind):
    planted, marker = _planted(tmp_path)
    shell_marker = tmp_path / "shell.txt"
    run = {"campaign": 1, "folder": "x", "seed": 0, "result": {}}
    if kind == "subprocess.call":  # the probe of the issue: point keys become sh -c '...'
        run.update(trial_fn="subprocess.call", point={"sh": 0, "-c": 0, f"echo pwned > {shell_marker}": 0})
    else:
        run.update(trial_fn="cflab_planted.trial", point={"dataset": "digits-rotated"})
    path = tmp_path / "run.json"
    path.write_text(json.dumps(with_digest(run)))  # sealed: the digest is no licence to name foreign code
    env = {**ENV, "PYTHONPATH": f"{ROOT}{os.pathsep}{planted}"}
    proc = _script([str(ROOT / "bench" / "rerun_on_cpu.py"), str(path)], env=env)
    _one_line(proc.returncode, proc.stderr, str(path), "'trial_fn'", "not one of the toolkit's trial functions")
    assert not marker.exists() and not shell_marker.exists()


@pytest.mark.parametrize("name", ["subprocess.call", "os.system", "cflab_planted.trial", "figures.trials.np",
                                  "figures.trials.resolve_trial", "", None, 3, ["figures.trials.nets_trial"]])
def test_resolve_trial_refuses_every_name_outside_the_registry(tmp_path, monkeypatch, name):
    from figures.trials import TRIAL_FUNCTIONS, resolve_trial

    planted, marker = _planted(tmp_path)
    monkeypatch.syspath_prepend(str(planted))
    with pytest.raises(ValueError, match="run.json: field 'trial_fn'.*not one of the toolkit's trial functions"):
        resolve_trial(name, "run.json: field 'trial_fn'")
    assert not marker.exists() and "cflab_planted" not in sys.modules
    assert all(resolve_trial(n) is fn for n, fn in TRIAL_FUNCTIONS.items())


def test_the_campaign_runner_refuses_a_foreign_trial_function(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from figures.campaign.planner import RunRequest, execute

    planted, marker = _planted(tmp_path)
    monkeypatch.syspath_prepend(str(planted))
    for name in ("subprocess.call", "cflab_planted.trial"):
        req = RunRequest("t", "folder", 0, 0, {"algo": "ifca", "sh": 0, "-c": 0, f"touch {marker}": 0}, 0, name)
        with pytest.raises(ValueError, match="trial_fn.*not one of the toolkit's trial functions"):
            execute(req, str(tmp_path / "store"), None, "test")
        assert not req.path(tmp_path / "store").exists()
    assert not marker.exists() and "cflab_planted" not in sys.modules


# -- item 6: the compiled kernel never reads past the arrays, whatever happens to the counts ---------------------------

_KERNEL_PROBE = """
import sys
import numpy as np
from synth import algorithms as A
from synth.backend import GLMBackend
from synth.federation import MixedLinearRegression

fed = MixedLinearRegression(K=2, clients_per_cluster=3, n=20, d=3).sample(0)
be = GLMBackend(fed, kernel="fused")
if sys.argv[1] == "reassigned":
    be.n_samples = np.full(6, 10**7)
elif sys.argv[1] == "write flag":
    be.n_samples.flags.writeable = True
    be.n_samples[0] = 10**7
elif sys.argv[1] == "negative":
    be.n_samples = np.full(6, -5)
try:
    A.IFCA(n_rounds=2, random_state=0).fit(be)
except ValueError as exc:
    print(exc)
    sys.exit(3)
print("fit")
"""


@pytest.mark.parametrize("how", ["reassigned", "write flag", "negative"])
def test_counts_changed_after_construction_never_reach_the_kernel(how):
    """In a subprocess: a segfault (exit -11) fails this test instead of killing pytest."""
    from synth import _kernels

    if _kernels.load() is None:
        pytest.skip(f"no compiled kernel here: {_kernels.status()['reason']}")
    proc = _script(["-c", _KERNEL_PROBE, how], timeout=120)
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    assert "n_samples" in proc.stdout, proc.stdout


_ARGUMENT_PROBE = """
import numpy as np
from synth import _kernels

lib = _kernels.load()
X, y = np.zeros((3, 5, 2)), np.zeros((3, 5))
data = lib.bind(X, y)
args = dict(clients=np.array([0, 2]), rows=np.array([5, 5]), models=np.zeros((4, 2)), logistic=False,
            loss=np.empty((2, 4)), grad=np.empty((2, 4, 2)))
lib.losses_gradients(data, **args)  # the valid call
bad = {"clients": dict(clients=np.array([0, 3])), "rows": dict(rows=np.array([5, 6])),
       "models": dict(models=np.zeros((4, 3))), "loss": dict(loss=np.empty((2, 3))),
       "grad": dict(grad=np.empty((2, 4, 3), dtype=np.float32)), "only": dict(only=np.array([0, 4])),
       "counter": dict(counter=np.zeros(2))}
for name, change in bad.items():
    try:
        lib.losses_gradients(data, **{**args, **change})
        print(name, "accepted")
    except ValueError as exc:
        print(name, "refused:", exc)
try:
    lib.combine(args["grad"], np.zeros((2, 4)), np.zeros((3, 2)))
    print("G accepted")
except ValueError as exc:
    print("G refused:", exc)
"""


def test_the_kernel_checks_every_argument_at_its_call():
    from synth import _kernels

    if _kernels.load() is None:
        pytest.skip(f"no compiled kernel here: {_kernels.status()['reason']}")
    proc = _script(["-c", _ARGUMENT_PROBE], timeout=120)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    lines = proc.stdout.splitlines()
    names = ["clients", "rows", "models", "loss", "grad", "only", "counter", "G"]
    assert [x.split()[0] for x in lines] == names, proc.stdout
    for name, line in zip(names, lines, strict=True):
        assert line.startswith(f"{name} refused: {name} must"), line


# -- item 8: report.html links only to http(s) and relative targets -------------------------------------------------

@pytest.mark.parametrize("target", ["javascript:alert(document.cookie)", "JaVaScRiPt:alert(1)", "vbscript:msgbox(1)",
                                    "data:text/html;base64,PHNjcmlwdD4=", "\x01javascript:alert(1)",
                                    "mailto:someone@example.org", "file:///etc/passwd", "x:y"])
def test_a_stored_link_to_another_scheme_is_rendered_as_text(target):
    from figures.report.html_report import inline, markdown_html

    text = f"run notes: [click me]({target}) and [the paper](https://arxiv.org/abs/2006.04088)"
    for page in (inline(text), markdown_html(f"# {text}\n\n{text}\n\n| a |\n|---|\n| {text} |\n\n- {text}")):
        hrefs = [h.lower() for h in __import__("re").findall(r'href="([^"]*)"', page)]
        assert hrefs and all(h == "https://arxiv.org/abs/2006.04088" for h in hrefs), (target, page)
        assert "click me" in page  # the text stays, as text


@pytest.mark.parametrize("target, href", [("https://example.org/a?b=1&c=2", "https://example.org/a?b=1&amp;c=2"),
                                          ("http://example.org", "http://example.org"),
                                          ("#ifca-fig3a", "#ifca-fig3a"), ("figs/a.pdf", "figs/a.pdf"),
                                          ("../report.md", "../report.md")])
def test_http_and_relative_links_stay_links(target, href):
    from figures.report.html_report import inline

    assert inline(f"[x]({target})") == f'<a href="{href}">x</a>'


# -- item 5: forged campaign timings are refused naming the entry ---------------------------------------------------

def _timing_entry(**change) -> dict:
    entry = {"cell": "clove-amazon:amazon:8", "algo": "ifca", "seconds_1_round": 30.0, "seconds_2_rounds": 50.0,
             "seconds_per_round": 20.0, "setup_seconds": 10.0, "per_round_from": "test", "timed_rounds": [1, 2],
             "round_split_seconds": {"local training": 15.0}, "setup_split_seconds": {"data": 5.0}}
    entry.update(change)
    return {k: v for k, v in entry.items() if v is not None}


@pytest.mark.parametrize("change, fragment", [
    (dict(seconds_per_round=-1e6), "'seconds_per_round' must be CPU seconds in (0, 1e+06], got -1000000.0"),
    (dict(seconds_per_round=float("nan")), "'seconds_per_round' must be CPU seconds in (0, 1e+06], got NaN"),
    (dict(setup_seconds=float("inf")), "'setup_seconds' must be CPU seconds in [0, 1e+07], got Infinity"),
    (dict(seconds_per_round=1e9), "'seconds_per_round'"), (dict(seconds_per_round="20"), "'seconds_per_round'"),
    (dict(seconds_per_round=True), "'seconds_per_round'"), (dict(setup_seconds=None), "'setup_seconds'"),
    (dict(seconds_1_round=0.0), "'seconds_1_round'"), (dict(timed_rounds=[0, 1]), "'timed_rounds'"),
    (dict(timed_rounds=[2, 4]), "'timed_rounds'"),
    (dict(round_split_seconds={"local training": -5.0}), "'round_split_seconds.local training'"),
    (dict(error=3), "'error' must be a string"),
], ids=["negative", "nan", "inf-setup", "implausible", "string", "bool", "no-setup", "zero-run", "round-0",
        "rounds-apart", "negative-split", "error-not-text"])
def test_a_forged_timing_entry_is_refused_naming_it(tmp_path, change, fragment):
    from figures.campaign import costs as campaign_costs
    from figures.campaign import planner as campaign

    good = _timing_entry()
    (tmp_path / campaign_costs.TIMINGS).write_text(json.dumps({"0123456789abcdef": good,
                                                         "fedcba9876543210": _timing_entry(**change)}))
    with pytest.raises(ValueError) as err:
        campaign.read_timings(tmp_path)
    text = str(err.value)
    assert str(tmp_path / campaign_costs.TIMINGS) in text and "entry 'fedcba9876543210'" in text, text
    assert fragment in text, text
    (tmp_path / campaign_costs.TIMINGS).write_text(json.dumps({"0123456789abcdef": good, "not-a-key": good}))
    with pytest.raises(ValueError, match="entry 'not-a-key': not a timing key"):
        campaign.read_timings(tmp_path)
    (tmp_path / campaign_costs.TIMINGS).write_text("{\"0123456789abcdef\": {")
    with pytest.raises(ValueError, match="not a readable timings file"):
        campaign.read_timings(tmp_path)


def test_the_committed_timings_pass_and_a_failed_entry_is_a_timing():
    from figures.campaign import costs as campaign_costs
    from figures.campaign import planner as campaign

    assert campaign.read_timings(campaign.HERE)
    campaign_costs.check_timings({"0123456789abcdef": {"cell": "c", "algo": "a", "error": "MemoryError: too big",
                                                 "per_round_from": "failed"}})


@pytest.mark.parametrize("command", ["plan", "run"])
def test_paper_repro_refuses_forged_timings_before_any_work(tmp_path, monkeypatch, command, capsys):
    pytest.importorskip("torch")
    import paper_repro
    from figures.campaign import costs as campaign_costs
    from figures.campaign import planner as campaign

    forged = tmp_path / "campaign_timings.json"
    forged.write_text(json.dumps({"0123456789abcdef": _timing_entry(seconds_per_round=-1e6)}))
    monkeypatch.setattr(campaign_costs, "TIMINGS", str(forged))  # an absolute name: Path(root) / TIMINGS is the file

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(campaign, "collect", no_work)
    monkeypatch.setattr(campaign, "write_manifest", no_work)
    code = paper_repro.main(["--campaign", command])
    _one_line(code, capsys.readouterr().err, str(forged), "'seconds_per_round'", "-1000000.0")


# -- item 7: --cells matching no cell is refused before any work ------------------------------------------------------

@pytest.mark.parametrize("cells", ["X", "clove-amazon,nope", ","])
def test_campaign_cells_matching_nothing_exit_2_before_any_work(monkeypatch, cells, capsys):
    pytest.importorskip("torch")
    import paper_repro
    from figures.campaign import planner as campaign

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    for name in ("collect", "write_manifest", "measure", "run_campaign", "refresh"):
        monkeypatch.setattr(campaign, name, no_work)
    for command in ("plan", "run"):
        code = paper_repro.main(["--campaign", command, "--cells", cells])
        err = capsys.readouterr().err
        _one_line(code, err, "--cells")
        if cells != ",":
            bad = "X" if cells == "X" else "nope"
            assert f"'{bad}' is part of no campaign cell's name" in err and "clove-amazon:amazon:8" in err, err


def test_run_campaign_refuses_a_name_of_no_collected_cell(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from figures.campaign import planner as campaign

    monkeypatch.setattr(campaign, "collect", lambda root, data_dir: ([campaign.RunRequest(
        "t", "clove-amazon", 0, 0, {"dataset": "amazon", "clients": 8, "algo": "ifca"}, 0, "x")], {}))
    monkeypatch.setattr(campaign, "measure", lambda *a, **k: pytest.fail("timing started"))
    with pytest.raises(ValueError, match=r"only \(--cells\): 'nope' is part of no campaign cell's name; the cells "
                                         r"are clove-amazon:amazon:8"):
        campaign.run_campaign(root=tmp_path, only=["amazon", "nope"])


@pytest.mark.parametrize("argv, fragment", [
    (["--cells", "nope"], "'nope' is part of no campaign cell's name"),
    (["--cells", ","], "--cells needs at least one part"),
    (["--minutes", "nan"], "--minutes must be"), (["--minutes", "x"], "--minutes"),
    (["--device", "tpu"], "invalid choice"), (["--out", ""], "--out must name a folder"),
    (["--data-dir", "/nonexistent-cflab"], "--data-dir '/nonexistent-cflab' is not a folder"),
    (["--out", "FILE/sub", "--smoke"], "is a regular file, not a directory"),
    (["--smoke", "--smoke"], "--smoke given twice"),
])
def test_gpu_run_argument_errors_are_one_line(tmp_path, argv, fragment):
    (tmp_path / "FILE").write_text("x")
    base = {"--out": str(tmp_path / "out"), "--data-dir": str(tmp_path)}
    argv = [str(tmp_path / "FILE" / "sub") if a == "FILE/sub" else a for a in argv]
    full = [*argv] + [x for k, v in base.items() if k not in argv for x in (k, v)]
    proc = _script([str(ROOT / "bench" / "gpu_run.py"), *full, "--skip-tests"], timeout=180)
    _one_line(proc.returncode, proc.stderr, fragment)
    assert not (tmp_path / "out").exists()


def test_gpu_run_without_a_gpu_is_one_line(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here")
    proc = _script([str(ROOT / "bench" / "gpu_run.py"), "--out", str(tmp_path / "out"), "--data-dir", str(tmp_path)])
    _one_line(proc.returncode, proc.stderr, "--device cuda: torch sees no CUDA GPU", "--smoke")
    assert not (tmp_path / "out").exists()


# -- item 13: a cell whose runs are stored is not timed again ---------------------------------------------------------

@pytest.fixture
def fake_data(tmp_path):
    """A data directory whose MNIST folder exists (its files are never read by the collection)."""
    (tmp_path / "data" / "mnist").mkdir(parents=True)
    (tmp_path / "data" / "mnist" / "placeholder").write_text("x")
    return str(tmp_path / "data")


def test_stored_runs_are_not_timed_again_whatever_rule_their_timing_followed(tmp_path, fake_data, monkeypatch):
    pytest.importorskip("torch")
    from figures.campaign import costs as campaign_costs
    from figures.campaign import planner as campaign

    root = tmp_path / "store"
    requests, _ = campaign.collect(root, fake_data, names=["clove-table5"])
    cell = next(c for c in campaign.cells(requests) if "unsup-mnist" in c.name)
    # every point timed by an older rule (no timed_rounds for FedALA's rule, here: rounds [5, 6] for all)
    stale = {campaign._timing_key(r): {"seconds_per_round": 36.0, "setup_seconds": 0.0, "per_round_from": "old",
                                       "timed_rounds": [5, 6]} for r in cell.requests}
    root.mkdir()
    (root / campaign_costs.TIMINGS).write_text(json.dumps(stale))
    timed = []
    monkeypatch.setattr(campaign_costs, "_time_point", lambda point, seed, rounds, data_dir: timed.append(point["algo"])
                        or (1.0, {"data": 0.0, "round_ends": {}}))

    def store(r, cpu=60.0):
        r.path(root).parent.mkdir(parents=True, exist_ok=True)
        r.path(root).write_text(json.dumps(with_digest({"campaign": 1, "folder": r.folder, "seed": r.seed,
                                                        "point": r.point, "cpu_seconds": cpu, "device": "cpu: test",
                                                        "result": {"ari": 1.0}})))

    # seed 0 of IFCA and CLoVE stored: those points are priced by their runs, the other two are timed again
    for r in cell.requests:
        if r.trial == 0 and r.point["algo"] in ("ifca", "clove"):
            store(r)
    campaign.measure([cell], root, fake_data, log=lambda _: None)
    assert sorted(set(timed)) == ["global", "local"]
    # every run stored (the GPU's runs too): nothing is timed
    timed.clear()
    (root / campaign_costs.TIMINGS).write_text(json.dumps(stale))
    for r in cell.requests:
        store(r)
    campaign.measure([cell], root, fake_data, log=lambda _: None)
    assert timed == []


# -- item 13: a divergence names the algorithm that diverged -----------------------------------------------------------

def test_a_diverged_global_model_is_not_called_ifca(capsys):
    pytest.importorskip("torch")
    from nets.cli import main as nets_main
    from synth.cli import main as synth_main

    code = nets_main(["run", "--dataset", "digits-rotated", "--algo", "global", "--clients", "4", "--n-per-client",
                      "10", "--n-test", "5", "--rounds", "2", "--local-steps", "2", "--step-size", "1e30",
                      "--device", "cpu"])
    _one_line(code, capsys.readouterr().err, "all 1 global-model (FedAvg) runs diverged", "--step-size")
    code = synth_main(["run", "--algo", "global", "--K", "2", "--clients-per-cluster", "3", "--n", "20", "--d", "3",
                       "--rounds", "3", "--step-size", "1e30"])
    err = capsys.readouterr().err
    _one_line(code, err, "all 1 global-model (FedAvg) runs diverged")
    assert "IFCA" not in err
    code = synth_main(["run", "--algo", "ifca", "--n-init", "3", "--K", "2", "--clients-per-cluster", "3", "--n", "20",
                       "--d", "3", "--rounds", "3", "--step-size", "1e30"])
    _one_line(code, capsys.readouterr().err, "all 3 IFCA runs diverged")


# -- item 12: a flag given twice, or one the run would ignore, is refused ----------------------------------------------

def _mains():
    pytest.importorskip("torch")
    import paper_repro
    from nets.cli import main as nets_main
    from synth.cli import main as synth_main
    from theory.cli import main as theory_main

    return {"synth": synth_main, "nets": nets_main, "theory": theory_main, "paper_repro": paper_repro.main}


@pytest.mark.parametrize("cli, argv, fragment", [
    ("synth", ["run", "--seed", "1", "--rounds", "2", "--seed", "2"], "--seed given twice"),
    ("synth", ["run", "--json", "--json"], "--json given twice"),
    ("synth", ["sweep", "x.toml", "--out", "o", "--n-jobs", "1", "--n-jobs=2"], "--n-jobs given twice"),
    ("nets", ["run", "--eps1", "0.1", "--cfl-eps1", "0.2"], "--cfl-eps1 given twice (as --eps1 and --cfl-eps1"),
    ("nets", ["run", "--rounds", "1", "--rounds", "100000"], "--rounds given twice"),
    ("theory", ["check", "ifca-lemma1", "--n", "5", "--n", "50"], "--n given twice"),
    ("theory", ["check", "ifca-lemma1", "--trials", "5", "--trials", "50"], "--trials given twice"),
    ("paper_repro", ["--list", "--only", "ifca-fig3a", "--only", "ifca-fig3b"], "--only given twice"),
])
def test_a_flag_given_twice_is_refused(cli, argv, fragment, capsys):
    code = _mains()[cli](argv)
    _one_line(code, capsys.readouterr().err, fragment)


@pytest.mark.parametrize("cli, argv, fragment", [
    ("synth", ["run", "--algo", "ifca", "--ala-eta", "1e308"],
     "--ala-eta is a flag of --algo fedala, not of --algo ifca"),
    ("synth", ["run", "--algo", "kfed", "--alpha", "0.1"],
     "--alpha is a flag of --algo ifca, clove, not of --algo kfed"),
    ("synth", ["run", "--algo", "global", "--init", "gaussian"], "--init is a flag of"),
    ("synth", ["run", "--algo", "local", "--rounds", "5"], "--rounds is a flag of 16 other algorithms"),
    ("synth", ["run", "--algo", "cfl", "--eps1", "0.1", "--kmeans-n-init", "3"], "--kmeans-n-init is a flag of --algo"),
    ("synth", ["run", "--algo", "pacfl", "--cfl-eps1", "0.1"],
     "--cfl-eps1 is a flag of --algo cfl, not of --algo pacfl"),
    ("nets", ["run", "--algo", "ifca", "--eps1", "0.1"], "--eps1 is a flag of --algo cfl, not of --algo ifca"),
    ("nets", ["run", "--algo", "global", "--n-clusters", "3"], "--n-clusters is a flag of"),
    ("nets", ["run", "--algo", "cfl", "--threshold", "1"], "--threshold is a flag of --algo srfca, oneshot-ifca"),
    ("paper_repro", ["--campaign", "plan", "--out", "x"], "--out does not apply to --campaign"),
    ("paper_repro", ["--campaign", "run", "--only", "ifca-fig3a"], "--only does not apply to --campaign"),
    ("paper_repro", ["--campaign", "run", "--size", "medium"], "--size does not apply to --campaign"),
    ("paper_repro", ["--campaign", "plan", "--quick"], "--quick does not apply to --campaign"),
    ("paper_repro", ["--campaign", "plan", "--n-jobs", "2"], "--n-jobs applies only to --campaign run"),
    ("paper_repro", ["--only", "ifca-fig3a", "--cells", "amazon"], "--cells applies only with --campaign"),
    ("paper_repro", ["--only", "ifca-fig3a", "--budget-hours", "3"], "--budget-hours applies only with --campaign"),
])
def test_a_flag_the_run_would_ignore_is_refused_before_any_work(cli, argv, fragment, monkeypatch, capsys):
    from figures.campaign import planner as campaign

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    for name in ("collect", "write_manifest", "measure", "run_campaign", "refresh"):
        monkeypatch.setattr(campaign, name, no_work)
    monkeypatch.setattr("synth.experiment.fit_experiment", no_work)
    monkeypatch.setattr("nets.experiment.run_experiment", no_work)
    code = _mains()[cli](argv)
    _one_line(code, capsys.readouterr().err, fragment)


def test_rounds_set_the_split_regime_of_any_algorithm(capsys):
    from synth.cli import main as synth_main

    assert synth_main(["run", "--algo", "local", "--regime", "split", "--rounds", "3", "--K", "2",
                       "--clients-per-cluster", "3", "--n", "20", "--d", "3", "--json"]) == 0
    capsys.readouterr()


class _Reads(dict):
    """A parameter dict that remembers the keys read."""

    def __init__(self, *args):
        super().__init__(*args)
        self.read: set[str] = set()

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)


def test_each_algorithms_flags_are_the_ones_its_builder_reads():
    """The flags synth run accepts for an --algo (its estimator's declared hyper-parameters, less those the builder
    fixes) are exactly the algorithm-specific flags the builder of synth.experiment reads."""
    import numpy as np

    from synth.cli import ESTIMATOR_OF, algo_flags
    from synth.experiment import ALGORITHMS, validate_params
    from synth.federation import MixedLinearRegression

    fed = MixedLinearRegression(K=2, clients_per_cluster=3, n=20, d=3).sample(0)
    specific = set().union(*(algo_flags(a) for a in ESTIMATOR_OF))
    for algo in ESTIMATOR_OF:
        if algo in ("fedproto", "fedpac"):  # networks only: the synthetic builder refuses them
            continue
        read: set[str] = set()
        for extra in ({}, {"init": "ball"}):  # the ball init reads alpha
            p = _Reads(validate_params({"algo": algo, "threshold": 1.0, **extra}))
            try:
                ALGORITHMS[algo](p, fed, np.random.default_rng(0))
            except ValueError:
                pass  # --init ball is refused by the algorithms it does not apply to
            read |= p.read
        assert read & specific == set(algo_flags(algo)), (algo, sorted(read & specific ^ set(algo_flags(algo))))


def test_the_estimator_table_is_nets_table():
    pytest.importorskip("torch")
    from nets.algorithms import ALGOS
    from synth.cli import ESTIMATOR_OF

    assert ESTIMATOR_OF == {name: spec.cls for name, spec in ALGOS.items()}


# -- item 11: workers are bounded by the cores and the memory ----------------------------------------------------------

def test_paper_repro_caps_its_workers_at_the_cores(monkeypatch, capsys):
    import paper_repro

    monkeypatch.setattr(paper_repro.os, "cpu_count", lambda: 2)
    assert paper_repro._workers(24, nets=False) == 2
    err = capsys.readouterr().err
    assert err == "paper_repro.py: warning: --n-jobs 24 is more than this machine's 2 cores: 2 workers\n"
    assert paper_repro._workers(-1, nets=True) == 2 and paper_repro._workers(1, nets=True) == 1
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv", [["--only", "ifca-fig3a", "--tiny", "--n-jobs", "2"],
                                  ["--campaign", "run", "--n-jobs", "2"]])
def test_workers_beyond_the_memory_are_refused_naming_the_numbers(tmp_path, monkeypatch, argv, capsys):
    pytest.importorskip("torch")
    import paper_repro
    from figures.campaign import planner as campaign

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    monkeypatch.setattr(campaign, "collect", no_work)
    monkeypatch.setattr(paper_repro.os, "cpu_count", lambda: 2)
    monkeypatch.setenv("CFLAB_MEMORY_LIMIT_MB", "300")
    code = paper_repro.main([*argv, *([] if "--campaign" in argv else ["--out", str(tmp_path / "out")])])
    _one_line(code, capsys.readouterr().err, "--n-jobs 2 (2 worker processes of about", "MiB of memory",
              "allows 300 MiB", "lower --n-jobs")
    assert not (tmp_path / "out").exists()


# -- item 9: stores and campaign runs carry digests; an edited record or run is refused naming file and line ---------



@pytest.fixture
def sealed(store):
    """A finished tiny sweep store (conftest's ``store``), whose records carry their digests."""
    return store


def _edit_line(out: Path, line: int, change) -> None:
    lines = (out / "trials.jsonl").read_text().splitlines()
    rec = json.loads(lines[line - 1])
    change(rec)
    lines[line - 1] = json.dumps(rec, sort_keys=True, separators=(",", ":"))
    (out / "trials.jsonl").write_text("".join(x + "\n" for x in lines))


def _flip(rec: dict) -> None:
    rec["result"]["success"] = not rec["result"]["success"]


@pytest.mark.parametrize("change, fragment", [
    (_flip, "changed after it was written (its digest does not match"),
    (lambda r: r["result"].update(param_error=0.0), "changed after it was written"),
    (lambda r: r.update(seconds=0.5), "changed after it was written"),
    (lambda r: (_flip(r), r.pop("digest")), "has no digest, and every record of this store must"),
], ids=["success-flipped", "metric", "clock", "digest-removed"])
def test_an_edited_record_is_refused_naming_file_and_line(sealed, change, fragment, capsys):
    from synth.cli import main as synth_main
    from synth.store import read_records

    spec, out = sealed
    assert all("digest" in json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines())
    assert json.loads((out / "meta.json").read_text())["digest"]["records"] == "sha256"
    _edit_line(out, 3, change)
    with pytest.raises(ValueError, match=rf"trials.jsonl, line 3: {fragment.replace('(', '[(]')}"):
        read_records(out)
    _one_line(synth_main(["report", str(out)]), capsys.readouterr().err, "trials.jsonl, line 3", fragment)
    _one_line(synth_main(["sweep", str(spec), "--out", str(out), "--quiet", "--resume"]), capsys.readouterr().err,
              "trials.jsonl, line 3", fragment)


def test_the_records_flag_cannot_be_dropped_from_the_meta(sealed):
    from synth.store import read_records

    _, out = sealed
    meta = json.loads((out / "meta.json").read_text())
    del meta["digest"]["records"]
    (out / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="meta.json was changed after the store wrote it"):
        read_records(out)


def test_records_are_the_same_with_and_without_their_digests(sealed):
    """The digest is the store's, not the trial's: read records carry none, and equal what the sweep returned."""
    from synth.montecarlo import comparable
    from synth.store import read_records

    _, out = sealed
    recs = read_records(out)
    assert recs and all("digest" not in r for r in recs)
    raw = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
    assert comparable(recs) == comparable([{k: v for k, v in r.items() if k != "digest"} for r in raw])


def test_a_store_without_record_digests_is_sealed_and_then_verified(sealed, capsys):
    from synth.store import read_records, seal_store

    spec, out = sealed
    want = read_records(out)
    meta = json.loads((out / "meta.json").read_text())
    del meta["digest"]  # a store written before digests
    (out / "meta.json").write_text(json.dumps(meta))
    lines = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
    (out / "trials.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "digest"},
                                                         sort_keys=True, separators=(",", ":")) + "\n" for r in lines))
    before = (out / "trials.jsonl").read_text().splitlines()
    with pytest.raises(ValueError, match="carries no record digests.*python -m synth seal"):
        read_records(out)  # unsealed: refused until the user seals it
    assert seal_store(out) == len(want)
    after = (out / "trials.jsonl").read_text().splitlines()
    # only the digest field was added to each line
    assert [{k: v for k, v in json.loads(x).items() if k != "digest"} for x in after] == [json.loads(x) for x in before]
    assert read_records(out) == want
    _edit_line(out, 2, _flip)
    with pytest.raises(ValueError, match="trials.jsonl, line 2: changed after it was written"):
        read_records(out)


def _committed_stores() -> list[str]:
    return sorted(str(p.parent.relative_to(ROOT)) for p in (ROOT / "figures" / "measured").glob("*/store/meta.json"))


@pytest.mark.parametrize("store_dir", _committed_stores())
def test_committed_stores_carry_digests_and_an_edited_copy_is_refused(store_dir, tmp_path):
    import shutil

    from synth.store import read_meta, read_records

    meta = read_meta(ROOT / store_dir)
    assert meta["digest"]["records"] == "sha256" and "spec.toml" in meta["digest"]["files"]
    lines = (ROOT / store_dir / "trials.jsonl").read_text().splitlines()
    assert all('"digest":' in x for x in lines)
    copy = tmp_path / "store"
    shutil.copytree(ROOT / store_dir, copy, ignore=shutil.ignore_patterns(".lock"))
    line = len(lines) // 2
    _edit_line(copy, line, _flip)
    with pytest.raises(ValueError, match=rf"trials.jsonl, line {line}: changed after it was written"):
        read_records(copy)


def _campaign_runs() -> list[Path]:
    out = []
    # runs of a folder and of a superseded protocol kept in a subfolder (srfca-simulated/sgd-full-batch/)
    for path in sorted([*(ROOT / "figures" / "measured").glob("*/*.json"),
                        *(ROOT / "figures" / "measured").glob("*/*/*.json")]):
        if "/store/" in path.as_posix():
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and data.get("campaign"):
            out.append(path)
    return out


def _committed_runs() -> dict[str, dict] | None:
    """The campaign run files as the checked-out commit holds them (None without git): a runner started before
    digests existed may be writing files without one into the working tree (seal them: figures.campaign.store.
    seal_run), but what is committed carries them."""
    try:
        names = subprocess.run(["git", "ls-files", "-z", "figures/measured"], cwd=ROOT, capture_output=True,
                               timeout=60, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.SubprocessError):
        return None
    out = {}
    for name in names:
        if name.count("/") not in (3, 4) or not name.endswith(".json") or "/store/" in name:
            continue
        blob = subprocess.run(["git", "show", f"HEAD:{name}"], cwd=ROOT, capture_output=True, timeout=60).stdout
        data = json.loads(blob)
        if isinstance(data, dict) and data.get("campaign"):
            out[name] = data
    return out


def test_committed_campaign_runs_carry_digests_that_match():
    from figures.campaign.store import load_run
    from synth.store import check_digest

    for path in _campaign_runs():  # every file with a digest matches it (the working tree's too)
        if "digest" in json.loads(path.read_text()):
            assert "digest" not in load_run(path)
    committed = _committed_runs()
    if committed is None:
        pytest.skip("no git here: the committed files cannot be told from the working tree's")
    assert len(committed) > 100
    for name, data in committed.items():
        assert "digest" in data, f"{name}: committed without a digest (figures.campaign.store.seal_run adds it)"
        check_digest(data, name)


@pytest.mark.parametrize("field", ["result", "device", "notes"])
def test_an_edited_campaign_run_is_refused_naming_the_file(tmp_path, field):
    from figures.campaign.store import load_run, seal_run
    from synth.store import with_digest

    run = {"campaign": 1, "folder": "f", "seed": 1, "point": {"algo": "ifca"}, "device": "cpu: x",
           "result": {"test_accuracy": 0.5, "notes": ["a"]}}
    path = tmp_path / "ifca-0123.json"
    path.write_text(json.dumps(with_digest(run), indent=2))
    assert load_run(path) == run
    data = json.loads(path.read_text())
    if field == "result":
        data["result"]["test_accuracy"] = 0.99
    elif field == "device":
        data["device"] = "cuda: forged"
    else:
        data["result"]["notes"] = ["[x](javascript:alert(1))"]
    path.write_text(json.dumps(data, indent=2))
    with pytest.raises(ValueError, match=rf"{path}: changed after it was written"):
        load_run(path)
    # a run written before digests is refused until sealed, and sealed with nothing else changed
    path.write_text(json.dumps(run, indent=2))
    with pytest.raises(ValueError, match="has no digest"):
        load_run(path)
    assert seal_run(path) and load_run(path) == run
    assert json.loads(path.read_text()) == with_digest(run) and not seal_run(path)


def test_the_campaign_runner_writes_runs_with_their_digest(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import figures.trials
    from figures.campaign.planner import RunRequest, execute
    from figures.campaign.store import load_run

    monkeypatch.setattr(figures.trials, "resolve_trial", lambda name, where="": lambda point, seed: {"ari": 1.0})
    req = RunRequest("t", "folder", 0, 0, {"algo": "local", "dataset": "digits-rotated"}, 7,
                     "figures.trials.nets_trial")
    summary = execute(req, str(tmp_path), None, "test")
    assert "error" not in summary or summary["error"] is None, summary
    data = json.loads(req.path(tmp_path).read_text())
    assert data["digest"] and load_run(req.path(tmp_path), req)["result"] == {"ari": 1.0}


# -- item 10: the bench scripts end in one line on a wrong argument or file --------------------------------------------

@pytest.mark.parametrize("script, argv, fragment", [
    ("rerun_on_cpu", ["/nonexistent-cflab/run.json"], "/nonexistent-cflab/run.json: no such run file"),
    ("rerun_on_cpu", ["TRUNCATED"], "not a readable campaign run (JSONDecodeError"),
    ("rerun_on_cpu", ["RUN", "--dtype", "float16"], "argument --dtype: invalid choice"),
    ("rerun_on_cpu", [], "the following arguments are required: runs"),
    ("sweep_retime", ["/nonexistent-cflab"], "no such file or directory"),
    ("sweep_retime", ["STORE", "--every", "0"], "argument --every: must be an integer >= 1, got 0"),
    ("run", ["--only", "nope"], "--only: unknown section(s) nope"),
    ("run", ["--threads", "x"], "argument --threads: expects an integer >= 1, got 'x'"),
    ("roofline", ["--iters", "0"], "argument --iters: must be an integer >= 1"),
    ("ifca_projection", ["--n-jobs", "-1"], "argument --n-jobs: must be an integer >= 1, got -1"),
    ("ifca_trial_overheads", ["--sample", "/nonexistent-cflab.json"], "--sample"),
    ("ifca_run_status", ["--sample", "/nonexistent-cflab.json"], "no such file or directory"),
    ("ifca_closed_form_cost", ["--jsn", "x"], "unrecognized argument '--jsn'"),
    ("nets_batched", ["--configs", "nope"], "--configs: unknown 'nope'"),
    ("flower_overhead", ["--rounds", "0"], "argument --rounds: must be an integer >= 1, got 0"),
    ("gpu_run", ["--out", "x"], "the following arguments are required: --data-dir"),
])
def test_bench_script_errors_are_one_line(tmp_path, script, argv, fragment, capsys):
    import importlib

    if script in ("nets_batched", "flower_overhead", "rerun_on_cpu"):
        pytest.importorskip("torch")
    (tmp_path / "trunc.json").write_text('{"campaign": 1, "poi')
    (tmp_path / "run.json").write_text("{}")
    (tmp_path / "store").mkdir()
    names = {"TRUNCATED": str(tmp_path / "trunc.json"), "RUN": str(tmp_path / "run.json"),
             "STORE": str(tmp_path / "store")}
    main = importlib.import_module(f"bench.{script}").main
    code = main([names.get(a, a) for a in argv])
    out, err = capsys.readouterr()
    _one_line(code, err, fragment)


# -- the fuzz: random flags and values from each parser's own options, always one line and exit 0 or 2 ----------------
#
# Every drawn command line carries one value that is refused before any work (a "poison": --K 0, --clients 0,
# --n-jobs 0, a --cells naming no cell), so no example trains or samples anything: the property is about the
# handling of the arguments -- every flag, repeated, misplaced, of another algorithm, with nan, inf, empty or
# binary values -- which runs before the poison is found.  Deterministic (derandomize) and bounded: about 20 s.

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FUZZ_VALUES = ["", "0", "-1", "1", "2", "3", "0.5", "nan", "inf", "-inf", "1e308", "-1e-320", "x", "ifca", "global",
               "cfl", "fedala", "cpu", "cuda", "dask", "a,b", "1,,2", "=", "k=v", "step_size=-1", "/dev/null",
               "/nonexistent-cflab", "nul\x00byte", "--json", "-x", "é", "1" * 400]


def _options(parser, skip=("-h", "--help")) -> list[str]:
    return sorted({o for a in parser._actions for o in a.option_strings if o not in skip})


def _subparser(parser, name):
    import argparse

    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def _draw_flags(draw, options: list[str], n_max: int = 4) -> list[str]:
    argv: list[str] = []
    for _ in range(draw(st.integers(0, n_max))):
        flag = draw(st.sampled_from(options))
        if draw(st.booleans()):
            argv += [flag, draw(st.sampled_from(FUZZ_VALUES))]
        else:
            argv.append(flag)  # a flag without its value, or a store_true flag
    return argv


@st.composite
def _synth_argvs(draw):
    from synth.cli import _load_plugins, build_parser

    _load_plugins()
    cmd = draw(st.sampled_from(["run", "sweep", "report"]))
    head = {"run": ["run"], "sweep": ["sweep", draw(st.sampled_from(FUZZ_VALUES))],
            "report": ["report", draw(st.sampled_from(FUZZ_VALUES))]}[cmd]
    argv = head + _draw_flags(draw, _options(_subparser(build_parser(), cmd)))
    poison = {"run": ["--K", "0"], "sweep": ["--n-jobs", "0"], "report": []}[cmd]
    return argv + poison


@st.composite
def _nets_argvs(draw):
    from nets.cli import build_parser

    return ["run", *_draw_flags(draw, _options(_subparser(build_parser(), "run"))), "--clients", "0"]


@st.composite
def _theory_argvs(draw):
    from theory import get_result
    from theory.cli import _result_parser
    from theory.results import REGISTRY

    get_result("ifca-lemma1")  # imports every result
    cmd = draw(st.sampled_from(["check", "sweep", "show", "list"]))
    if cmd == "list":
        return ["list", *draw(st.sampled_from([[], ["--json"], ["--json", "--json"], ["-x"]]))]
    name = draw(st.sampled_from(sorted(REGISTRY)))
    if cmd == "show":
        return ["show", name]
    argv = [cmd, name, *_draw_flags(draw, _options(_result_parser(name, "fuzz", sweep=cmd == "sweep")))]
    if cmd == "sweep" and "--over" not in argv:
        argv += ["--over", draw(st.sampled_from(["n=1,2", "x=1", "", "alpha=nan"]))]
    return argv + ["--n-jobs", "0"]


@st.composite
def _repro_argvs(draw):
    import paper_repro
    from figures import load_targets

    options = _options(paper_repro._parser(load_targets()))
    if draw(st.booleans()):  # the campaign: a --cells naming no cell stops it before any work
        flags = _draw_flags(draw, [o for o in options if o not in ("--cells", "--campaign")])
        return ["--campaign", draw(st.sampled_from(["plan", "run"])), *flags, "--cells", "zzz-no-such-cell"]
    flags = _draw_flags(draw, [o for o in options if o != "--list"])
    return ["--list", *flags]  # --list runs nothing: every flag is parsed and checked


def _fuzz_call(main, argv, capsys) -> None:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's --help
        code = exc.code
    out, err = capsys.readouterr()
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    if code == 2:
        assert err.count("\n") == 1, (argv, err)


_FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@_FUZZ
@given(argv=_synth_argvs())
def test_fuzz_synth_command_line(argv, capsys):
    from synth.cli import main

    _fuzz_call(main, argv, capsys)


@_FUZZ
@given(argv=_nets_argvs())
def test_fuzz_nets_command_line(argv, capsys, tmp_path_factory, monkeypatch):
    pytest.importorskip("torch")
    from nets.cli import main

    monkeypatch.chdir(tmp_path_factory.mktemp("fuzz"))  # a drawn --checkpoint or --data-dir lands here
    _fuzz_call(main, argv, capsys)


@_FUZZ
@given(argv=_theory_argvs())
def test_fuzz_theory_command_line(argv, capsys):
    from theory.cli import main

    _fuzz_call(main, argv, capsys)


@_FUZZ
@given(argv=_repro_argvs())
def test_fuzz_paper_repro_command_line(argv, capsys, monkeypatch):
    pytest.importorskip("torch")
    import paper_repro
    from figures.campaign import planner as campaign

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    for name in ("collect", "measure", "run_campaign", "refresh"):
        monkeypatch.setattr(campaign, name, no_work)
    _fuzz_call(paper_repro.main, argv, capsys)
