"""The example a Flower user copies (``examples/flower-ifca``): a valid Flower app, run at tiny size with Flower's
own ``flwr run .`` (a local SuperLink, the environment the tests run in: CI's fresh venv with the flower extra) and
on Flower's simulation engine (``python -m nets.flower.runner``, in a process of its own); Ctrl-C ends it with
status 130 and no process of the run left.  The README's relative links resolve.  Skipped without the
``flower`` extra (the README check runs always).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests.conftest import MarkedRun, marked

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "examples" / "flower-ifca"
TINY = "num-server-rounds=2 min-nodes=4 local-steps=2 num-clusters=2 start-timeout=120.0"


def test_flower_readmes_relative_links_resolve():
    """Every relative link of the Flower READMEs and the client contract names a file or directory that exists
    (and, with an anchor, a heading of that file)."""
    for page in (ROOT / "nets/flower/README.md", APP / "README.md", ROOT / "docs/flower-contract.md"):
        text = page.read_text(encoding="utf-8")
        links = re.findall(r"\]\(([^)\s]+)\)", text)
        assert links, f"{page} has no links"
        for link in links:
            if re.match(r"[a-z]+://", link):
                continue
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            assert target.exists(), f"{page.relative_to(ROOT)}: {link} -> {target} does not exist"
            if anchor and target.suffix == ".md":
                headings = {_slug(h) for h in re.findall(r"^#+\s+(.*)$", target.read_text(encoding="utf-8"), re.M)}
                assert anchor in headings, f"{page.relative_to(ROOT)}: {link}: no heading #{anchor} in {target.name}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


flwr = pytest.importorskip("flwr")
pytest.importorskip("ray")


@pytest.mark.flower
def test_example_is_a_valid_flower_app():
    """Flower's own check of the app's pyproject (components importable, config), and the defaults the app uses
    without a run config are the pyproject's."""
    from flwr.cli.config_utils import load_and_validate

    sys.path.insert(0, str(APP))
    try:
        config, warnings = load_and_validate(APP / "pyproject.toml")
        from flower_ifca.task import DEFAULTS
    finally:
        sys.path.remove(str(APP))
    assert warnings == []
    assert config["tool"]["flwr"]["app"]["config"] == DEFAULTS




@pytest.mark.flower
def test_example_server_app_in_process():
    """The app's ServerApp and ClientApp on an in-process grid (no Ray): the final cluster models hold the BatchNorm
    network's state_dict (its running statistics and counter included) and load into ``Net``; each client's last
    evaluation carries its partition, from which the app reports accuracy by group."""
    from flwr.app import Context, RecordDict

    from nets.flower.arrays import cluster_state_dict
    from nets.flower.inline import InlineGrid

    sys.path.insert(0, str(APP))
    try:
        import flower_ifca.server_app as server_app
        from flower_ifca.client_app import app as client_app
        from flower_ifca.task import Net
    finally:
        sys.path.remove(str(APP))
    config = {"num-server-rounds": 2, "min-nodes": 4, "local-steps": 2, "num-clusters": 2}
    grid = InlineGrid(client_app, 4, run_config=config)
    context = Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=config)
    seen = {}
    original = server_app.IFCA

    class Kept(original):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            seen["strategy"] = self

    server_app.IFCA = Kept
    try:
        server_app.main(grid, context)  # the function @app.main() registers
    finally:
        server_app.IFCA = original
    models = context.state["final-models"]
    assert {"cluster0/norm.running_mean", "cluster1/norm.num_batches_tracked"} <= set(models.keys())
    for j in range(2):
        Net().load_state_dict(cluster_state_dict(models, j))
        assert int(cluster_state_dict(models, j)["norm.num_batches_tracked"]) > 0
    strategy = seen["strategy"]
    assert sorted(int(m["partition-id"]) for m in strategy.evaluations.values()) == [0, 1, 2, 3]
    assert all(0.0 <= m["eval-acc"] <= 1.0 for m in strategy.evaluations.values())


def _run(run_config: str, supernodes: int = 4) -> MarkedRun:
    """``python -m nets.flower.runner`` on the example, its output (stdout and stderr) read as it comes."""
    return MarkedRun([sys.executable, "-m", "nets.flower.runner", str(APP), "--num-supernodes", str(supernodes),
                      "--run-config", run_config], ROOT, stream="stdout", FLWR_TELEMETRY_ENABLED="0")


@pytest.mark.flower
def test_example_runs_on_the_simulation_engine():
    """Four SuperNodes, two rounds: every round logs its clusters, the app ends with each partition's cluster and
    the test accuracy, exit 0, and no process of the run is left."""
    run = _run(TINY)
    try:
        code = run.end(600)
        text = "".join(run.lines)
        assert code == 0, run.lines[-8:]
        assert re.search(r"IFCA round 1: \d clusters, sizes \[.*\]; 4 of 4 clients answered", text), text[-2000:]
        assert re.search(r"IFCA round 2: evaluated by 4 clients: eval-loss", text)
        found = re.search(r"IFCA clusters by partition: \{(.*)\}", text)
        assert found and sorted(int(p) for p in re.findall(r"(\d+): \d", found.group(1))) == [0, 1, 2, 3]
        assert re.search(r"IFCA final test accuracy 0\.\d+", text)
        found = re.search(r"IFCA test accuracy by group: \{(.*)\}", text)  # TINY's 4 partitions: 4 groups
        assert found and [int(g) for g in re.findall(r"(\d+): [01]\.\d+", found.group(1))] == [0, 1, 2, 3]
        assert re.search(r"IFCA done: 2 cluster models loaded into Net \(BatchNorm batches tracked: \[\d+, \d+\]\)",
                         text)
        assert marked(run.marker) == []
    finally:
        run.cleanup()


@pytest.mark.flower
def test_example_runs_under_flwr_run(tmp_path):
    """``flwr run .`` in the app's folder, as its README says: Flower's CLI starts a local SuperLink (its state
    under a FLWR_HOME of the test's own), runs the app in this environment
    (``FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION=1``) on the SuperNodes given with ``--federation-config``,
    streams the log and exits 0; the SuperLink it leaves running is then stopped."""
    import shutil
    import socket

    from flwr.cli.constant import LOCAL_SUPERLINK_HTTP_API_PORT

    flwr = shutil.which("flwr", path=str(Path(sys.executable).parent)) or shutil.which("flwr")
    if flwr is None:
        pytest.skip("Flower's flwr command is not installed")
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", int(LOCAL_SUPERLINK_HTTP_API_PORT))) == 0:
            pytest.skip(f"a SuperLink already listens on 127.0.0.1:{LOCAL_SUPERLINK_HTTP_API_PORT}")
    run = MarkedRun([flwr, "run", ".", "--run-config", TINY, "--federation-config", "num-supernodes=4", "--stream"],
                    APP, stream="stdout", FLWR_HOME=str(tmp_path), FLWR_TELEMETRY_ENABLED="0",
                    FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION="1")
    try:
        code = run.end(600)
        text = "".join(run.lines)
        assert code == 0, text[-2000:]
        assert re.search(r"IFCA round 2: \d clusters, sizes \[.*\]; 4 of 4 clients answered", text), text[-2000:]
        found = re.search(r"IFCA clusters by partition: \{(.*)\}", text)
        assert found and sorted(int(p) for p in re.findall(r"(\d+): \d", found.group(1))) == [0, 1, 2, 3]
        assert re.search(r"IFCA final test accuracy 0\.\d+", text)
    finally:
        # the detached SuperLink starts its SuperExec processes on its own: kill until none is left
        deadline = time.monotonic() + 30
        run.cleanup()
        while marked(run.marker) and time.monotonic() < deadline:
            time.sleep(0.5)
            run.cleanup()
    assert marked(run.marker) == []


@pytest.mark.flower
def test_ctrl_c_ends_the_example_with_130_and_no_process():
    run = _run(TINY.replace("num-server-rounds=2", "num-server-rounds=2000"))
    try:
        run.wait_for(lambda: any(re.search(r"IFCA round 1: ", line) for line in run.lines), "round 1")
        assert marked(run.marker)  # Ray's processes carry the marker
        os.killpg(run.proc.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
        t0 = time.monotonic()
        code = run.end(60)
        assert code == 130, run.lines[-8:]
        assert time.monotonic() - t0 < 60
        assert "interrupted" in run.lines[-1], run.lines[-5:]
        assert marked(run.marker) == []
    finally:
        run.cleanup()


def test_tiny_config_keys_are_the_apps():
    with open(APP / "pyproject.toml", "rb") as fh:
        keys = tomllib.load(fh)["tool"]["flwr"]["app"]["config"]
    assert {pair.split("=")[0] for pair in TINY.split()} <= set(keys)
