import os

import matplotlib
import pytest

matplotlib.use("Agg")
os.environ.setdefault("CFLAB_QUIET", "1")


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(12345)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(request):
    """nets tests use tiny models: one torch thread (two oversubscribe a shared 2-core runner)."""
    if not request.module.__name__.split(".")[-1].startswith("test_nets_"):
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# the targets of one tiny paper_repro run shared by the status-file and headline tests (cheap at the tiny size)
TINY_TARGET, TINY_OTHER = "ifca-fig3c", "ifca-fig3d"  # test_headline and test_status_files name them too


@pytest.fixture(scope="session")
def tiny_out(tmp_path_factory):
    """``paper_repro.py --tiny`` of two targets; tests copy it before changing anything in it."""
    import paper_repro

    out = tmp_path_factory.mktemp("status")
    argv = ["--tiny", "--only", f"{TINY_TARGET},{TINY_OTHER}", "--out", str(out), "--n-jobs", "1"]
    assert paper_repro.main(argv) == 0
    return out


@pytest.fixture(scope="session")
def _tiny_store(tmp_path_factory):
    from synth.cli import main as synth_main
    from tests.test_faults import TINY_SPEC

    base = tmp_path_factory.mktemp("tiny")
    (base / "tiny.toml").write_text(TINY_SPEC)
    assert synth_main(["sweep", str(base / "tiny.toml"), "--out", str(base / "store"), "--quiet"]) == 0
    return base


@pytest.fixture
def store(_tiny_store, tmp_path):
    """A fresh copy of a finished 2-point x 2-trial sweep store, and its spec."""
    import shutil

    shutil.copytree(_tiny_store / "store", tmp_path / "store", ignore=shutil.ignore_patterns(".lock"))
    shutil.copy(_tiny_store / "tiny.toml", tmp_path / "tiny.toml")
    return tmp_path / "tiny.toml", tmp_path / "store"


def marked(marker: str) -> list[str]:
    """``"pid command"`` of the live processes whose environment holds ``CFLAB_TEST_RUN=<marker>`` (a test run's
    processes, Ray's included: nets.flower.session.marked_processes)."""
    from nets.flower.session import marked_processes

    out = []
    for pid in marked_processes(marker, "CFLAB_TEST_RUN"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                command = fh.read().replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{pid} {command[:80]}")
        except OSError:
            continue
    return out


class MarkedRun:
    """A command in a process of its own (own session and process group) whose processes carry
    ``CFLAB_TEST_RUN=<marker>`` (:func:`marked` finds them, Ray's included), one of its streams read as it comes
    into ``lines`` (``stream="stdout"`` merges stderr into it)."""

    def __init__(self, argv: list[str], cwd, stream: str = "stderr", **env: str):
        import subprocess
        import threading
        import uuid

        self.marker = uuid.uuid4().hex
        env = dict(os.environ, OMP_NUM_THREADS="1", CFLAB_TEST_RUN=self.marker, **env)
        err = subprocess.STDOUT if stream == "stdout" else subprocess.PIPE
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
                                     start_new_session=True)
        self.lines: list[str] = []
        source = self.proc.stdout if stream == "stdout" else self.proc.stderr
        self._reader = threading.Thread(target=lambda: self.lines.extend(source), daemon=True)
        self._reader.start()

    def wait_for(self, condition, what: str, limit: float = 300.0) -> None:
        """Until ``condition()`` holds; fails if the run ends first or after ``limit`` seconds."""
        import time

        deadline = time.monotonic() + limit
        while not condition():
            assert self.proc.poll() is None, f"the run ended before {what}: {self.lines[-8:]}"
            assert time.monotonic() < deadline, f"no {what} within {limit} s"
            time.sleep(0.2)

    def end(self, limit: float) -> int:
        """The exit code; fails (after killing every marked process) if the run is still going after ``limit`` s."""
        import subprocess

        try:
            code = self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            self.cleanup()
            pytest.fail(f"still running after {limit} s: {self.lines[-8:]}")
        self._reader.join(10)
        return code

    def cleanup(self) -> None:
        """Kill the run's process group and every marked process left."""
        import signal

        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for pid in marked(self.marker):
            try:
                os.kill(int(pid.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
