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
    path.write_text(json.dumps(run))
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
    from figures.campaign import RunRequest, execute

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
    from figures.html_report import inline, markdown_html

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
    from figures.html_report import inline

    assert inline(f"[x]({target})") == f'<a href="{href}">x</a>'
