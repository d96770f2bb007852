"""``python -m nets.flower.runner`` refuses in one line with exit status 2, before Ray starts: an app whose
pyproject names a ClientApp (or ServerApp) module that does not exist or cannot be imported, and a
``--num-supernodes`` whose SuperNodes' state would not fit in memory (a memory estimate, checked before the app is
loaded).  Skipped without the ``flower`` extra.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")

pytestmark = pytest.mark.flower

ROOT = Path(__file__).resolve().parents[1]

SERVER = '''from flwr.serverapp import ServerApp
app = ServerApp()
'''


def _app(tmp_path: Path, clientapp: str, files: dict[str, str] | None = None) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "pyproject.toml").write_text(f'''[project]
name = "tiny"
version = "0.1.0"

[tool.flwr.app]
publisher = "test"

[tool.flwr.app.components]
serverapp = "tiny_server:app"
clientapp = "{clientapp}"
''')
    (app / "tiny_server.py").write_text(SERVER)
    for name, text in (files or {}).items():
        (app / name).write_text(text)
    return app


def _run(*args: str, budget_mb: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "PYTHONPATH": str(ROOT)}
    if budget_mb is not None:
        env["CFLAB_MEMORY_LIMIT_MB"] = str(budget_mb)
    return subprocess.run([sys.executable, "-m", "nets.flower.runner", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_missing_clientapp_module_is_the_users_error(tmp_path):
    proc = _run(str(_app(tmp_path, "no_such_client:app")), "--num-supernodes", "2")
    line = _one_line(proc.stderr)
    assert proc.returncode == 2, proc.stderr
    assert "internal error" not in line and "ModuleNotFoundError" not in line
    assert "'no_such_client:app'" in line and "module 'no_such_client' does not exist" in line


def test_clientapp_module_importing_a_missing_package_is_the_users_error(tmp_path):
    app = _app(tmp_path, "tiny_client:app", {"tiny_client.py": "import no_such_package_xyz\n"})
    proc = _run(str(app), "--num-supernodes", "2")
    line = _one_line(proc.stderr)
    assert proc.returncode == 2 and "internal error" not in line
    assert "importing module 'tiny_client' failed" in line and "no_such_package_xyz" in line


@pytest.mark.parametrize("count", ["2000000", "10000000000"])
def test_num_supernodes_beyond_memory_is_refused_before_anything_starts(tmp_path, count):
    began = time.monotonic()
    proc = _run(str(_app(tmp_path, "no_such_client:app")), "--num-supernodes", count, budget_mb=4096)
    line = _one_line(proc.stderr)
    assert proc.returncode == 2, proc.stderr
    assert f"a simulation of {count} SuperNodes" in line and "memory" in line and "--num-supernodes" in line
    assert "no_such_client" not in line  # checked before the app is loaded
    assert time.monotonic() - began < 60
