"""The paper-scale campaign on Dask workers (figures/campaign/dask_runner.py): records identical to the loky runner's, a
worker killed mid-run, one runner per run, the GPU queue's order and the plan priced per device."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from synth.store import with_digest

pytest.importorskip("torch")
distributed = pytest.importorskip("distributed")

from figures.campaign import costs as campaign_costs  # noqa: E402
from figures.campaign import dask_runner as campaign_dask  # noqa: E402
from figures.campaign import planner as campaign  # noqa: E402
from figures.campaign.store import RunRequest, load_run  # noqa: E402
from synth.montecarlo import trial_seed  # noqa: E402

TRIAL = "figures.trials.nets_trial"
COMMAND = "python paper_repro.py --campaign run --backend dask"


def _request(folder: str, index: int, trial: int, **change) -> RunRequest:
    """A tiny real run (the embedded 8x8 digits: well under a second of training once torch is imported)."""
    point = {**dict(dataset="digits-rotated", algo="global", clients=4, n_per_client=10, n_test=5, rounds=2,
                    local_steps=1, step_size=0.1, averaging="model", eval_every=0, device="cpu"), **change}
    return RunRequest("some-target", folder, index, trial, point, trial_seed(77, index, trial), TRIAL)


def _tiny_campaign() -> list[RunRequest]:
    return [_request("tiny-a", 0, 0), _request("tiny-a", 0, 1), _request("tiny-a", 1, 0, algo="ifca", n_clusters=2),
            _request("tiny-b", 0, 0, algo="local", clients=5)]


def _comparable(record: dict) -> dict:
    """A stored run less what says when, where and how long it ran (the result's own timer included)."""
    when = {"wall_seconds", "cpu_seconds", "load_average", "finished", "commit", "digest"}
    out = {k: v for k, v in record.items() if k not in when}
    out["result"] = {k: v for k, v in record["result"].items() if k != "seconds"}
    return out


def _loky_records(requests: list[RunRequest], root: Path) -> dict[str, dict]:
    """What the loky runner stores for ``requests``: each one through :func:`figures.campaign.planner.execute`."""
    for r in requests:
        assert campaign.execute(r, str(root), None, COMMAND).get("error") is None
    return {r.key: _comparable(load_run(r.path(root), r)) for r in requests}


def _assert_clean(root: Path, requests: list[RunRequest]) -> None:
    """Exactly one readable run file per request (digest checked), and no lock or half-written file left."""
    files = sorted(p for p in root.rglob("*") if p.is_file() and ".checkpoints" not in p.parts)
    assert sorted(files) == sorted(r.path(root) for r in requests)
    for r in requests:
        assert load_run(r.path(root), r)["result"]


@pytest.fixture(scope="module")
def cluster():
    """Two worker processes of one thread, each declaring one CPU (a nanny restarts a killed one)."""
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, resources={"CPU": 1},
                                  memory_limit="2GiB", dashboard_address=None, silence_logs=logging.ERROR) as c, \
            distributed.Client(c) as client:
        yield client


def test_dask_workers_store_the_loky_runners_records(cluster, tmp_path):
    requests = _tiny_campaign()
    expected = _loky_records(requests, tmp_path / "loky")
    lines: list[str] = []
    root = tmp_path / "dask"
    stored = []
    n = campaign_dask.run_queue(cluster, [], requests, root, None, COMMAND, log=lines.append,
                                on_stored=stored.append)
    assert n == len(requests) == len(stored), lines
    _assert_clean(root, requests)
    for r in requests:
        data = json.loads(r.path(root).read_text())
        assert data["digest"]  # the campaign's writer, on the worker; checked when the coordinator stores it
        assert _comparable(data) == expected[r.key]  # results and histories identical, provenance too
        assert data["result"]["history"] == expected[r.key]["result"]["history"]
    # a second run of the same command finds everything stored: nothing is run or stored again
    assert campaign_dask.run_queue(cluster, [], requests, root, None, COMMAND, log=lines.append) == 0
    assert sum(line.startswith("campaign: stored") for line in lines) == len(requests)


def _executing(dask_worker) -> tuple[int, list[str]]:
    """On a worker: its process id and the keys of the tasks it is running."""
    return os.getpid(), [str(ts.key) for ts in dask_worker.state.tasks.values() if ts.state == "executing"]


def test_a_worker_killed_mid_run_loses_only_that_run_which_is_redone(cluster, tmp_path):
    """SIGKILL the worker process while it trains the long run: nothing torn or doubled is stored, the scheduler
    gives the run to a worker again, and its record is the loky runner's."""
    long = _request("tiny-kill", 0, 0, algo="local", clients=8, n_per_client=50, rounds=300)
    requests = [long, _request("tiny-kill", 1, 0)]
    expected = _loky_records(requests, tmp_path / "loky")
    root = tmp_path / "dask"
    lines: list[str] = []
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(n=campaign_dask.run_queue(
        cluster, [], requests, root, None, COMMAND, log=lines.append, poll_s=0.2)))
    runner.start()
    key = f"campaign-tiny-kill-{long.path(root).stem}"
    killed, deadline = None, time.time() + 120
    while killed is None and time.time() < deadline and runner.is_alive():
        for pid, keys in cluster.run(_executing, on_error="ignore").values():
            if key in keys:
                time.sleep(0.3)  # inside its training (about 3 CPU seconds)
                os.kill(pid, signal.SIGKILL)
                killed, killed_at = pid, time.time()
        time.sleep(0.2)
    runner.join(timeout=240)
    assert killed is not None, f"the long run was never seen executing: {lines}"
    assert not runner.is_alive() and result["n"] == 2, lines
    assert killed not in [pid for pid, _ in cluster.run(_executing).values()]  # that process is gone
    _assert_clean(root, requests)
    for r in requests:
        assert _comparable(json.loads(r.path(root).read_text())) == expected[r.key]
    finished = time.mktime(time.strptime(json.loads(long.path(root).read_text())["finished"][:19], "%Y-%m-%dT%H:%M:%S"))
    assert finished >= int(killed_at) - 1  # computed again after the kill
    assert sum(line.startswith("campaign: stored") for line in lines) == 2


def test_a_run_another_runner_holds_is_left_to_it(cluster, tmp_path):
    """The coordinator takes each run's lock file (the one the loky runner's execute takes) before submitting it:
    a run locked by another runner is skipped, neither run nor stored."""
    import fcntl

    held = _request("tiny-lock", 0, 0)
    root = tmp_path / "store"
    held.path(root).parent.mkdir(parents=True)
    fd = os.open(held.path(root).with_suffix(".running"), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    lines: list[str] = []
    try:
        assert campaign_dask.run_queue(cluster, [], [held], root, None, COMMAND, log=lines.append) == 0
    finally:
        os.close(fd)
    assert not held.path(root).exists()
    assert lines == [f"campaign: tiny-lock/{held.path(root).name} skipped (another runner has it)"]


def test_the_coordinator_refuses_a_file_that_is_not_the_runs(tmp_path):
    """A worker's file for another run (or edited on the way) is not stored, and nothing half-written is left."""
    req, other = _request("tiny-x", 0, 0), _request("tiny-x", 0, 0, rounds=3)
    root = tmp_path / "store"
    fd, why = campaign.claim(req, root)
    assert why == ""
    job = campaign_dask._Running(req, campaign_dask.CPU, fd, req.path(root))
    from synth.store import with_digest

    record = {"campaign": 1, "folder": other.folder, "seed": other.seed, "point": other.point, "result": {"x": 1}}
    assert campaign_dask._store(job, json.dumps(with_digest(record))).startswith("refused")
    good = dict(record, point=req.point)
    edited = dict(with_digest(good), result={"x": 2})
    assert "digest" in campaign_dask._store(job, json.dumps(edited))
    assert campaign_dask._store(job, json.dumps(with_digest(good))) == ""
    campaign.release(fd, job.path)
    assert sorted(p.name for p in req.path(root).parent.iterdir()) == [req.path(root).name]


# -- the queues and the plan (no cluster) -----------------------------------------------------------------------------

def test_gpu_workers_take_the_gpu_queue_first_and_cpu_workers_leave_it_to_them():
    stale, gpu_only, c1, c2 = (_request("q", i, 0) for i in range(4))
    # a protocol-changed cell's run is in both queues (it fits the CPU budget); a needs-a-GPU run only in the GPU's
    q = campaign_dask._Queue([gpu_only, stale], [stale, c1, c2])
    assert q.next_for(campaign_dask.CPU, gpu_connected=True) == c1  # left for the GPU while one is connected
    assert q.next_for(campaign_dask.GPU, gpu_connected=True) == gpu_only
    assert q.next_for(campaign_dask.GPU, gpu_connected=True) == stale
    assert q.next_for(campaign_dask.GPU, gpu_connected=True) == c2  # GPU queue done: the CPU queue's next
    assert q.next_for(campaign_dask.CPU, gpu_connected=True) is None and q.left() == 0
    q = campaign_dask._Queue([gpu_only, stale], [stale, c1])
    assert q.next_for(campaign_dask.CPU, gpu_connected=False) == stale  # no GPU worker: the CPU queue as the loky one
    assert q.next_for(campaign_dask.CPU, gpu_connected=False) == c1
    assert q.next_for(campaign_dask.CPU, gpu_connected=False) is None and q.left() == 1  # gpu_only waits for a GPU


class _Pub:
    pm = 0.1  # a published number with its ±


def test_the_gpu_queue_takes_protocol_changed_cells_then_numbers_per_gpu_minute():
    def plan(folder, dataset, clients, numbers, status, gpu_seconds, prices):
        reqs = [_request(folder, 0, 0, dataset=dataset, clients=clients)]
        cell = campaign.Cell(folder, dataset, clients, reqs, published=[_Pub()] * numbers)
        prices.gpu_measured[campaign._point_key(folder, reqs[0].point)] = [gpu_seconds]
        return campaign.CellPlan(cell, "yes", 1, None, 1.0, {}, status)

    prices = campaign_dask.Prices({}, {}, {}, {}, None, {})
    stale = plan("ifca-table1", "mnist-rotated", 1200, 1, "queued", 600.0, prices)  # [stale] in its ledger
    cheap = plan("clove-feature-skew", "digits-rotated", 20, 10, "needs a GPU", 60.0, prices)  # 10 a minute
    dear = plan("clove-label-skew-2", "digits-rotated", 20, 20, "needs a GPU", 600.0, prices)  # 2 a minute
    cpu = plan("clove-amazon", "amazon", 8, 29, "queued", 60.0, prices)
    missing = plan("clove-concept-shift", "digits-rotated", 20, 10, "data not available", 1.0, prices)
    missing.data = "no: not in the data directory"
    order = campaign_dask.gpu_cells([cpu, dear, cheap, missing, stale], prices, Path("/nonexistent"))
    assert [c.cell.folder for c in order] == ["ifca-table1", "clove-feature-skew", "clove-label-skew-2"]


def test_makespan_is_list_scheduling_longest_first():
    # 2 CPU workers, jobs 5, 4, 3, 3 h: LPT gives {5, 3} and {4, 3}: 8 h
    jobs = [(campaign_dask.CPU, h * 3600.0, None) for h in (3, 5, 3, 4)]
    m = campaign_dask.makespan(jobs, cpus=2, gpus=0)
    assert m["wall"] == 8 * 3600 and m["cpu_busy"] == 15 * 3600 and m["left"] == 0
    # the GPU worker takes the GPU job (1 h), the CPU worker the longest CPU job (10 h, as the runner: no run is
    # held back for a GPU), then the GPU the CPU job left (1 min on it); a CPU worker never takes the GPU job
    jobs = [(campaign_dask.GPU, 100 * 3600.0, 3600.0), (campaign_dask.CPU, 10 * 3600.0, 600.0),
            (campaign_dask.CPU, 2 * 3600.0, 60.0)]
    m = campaign_dask.makespan(jobs, cpus=1, gpus=1)
    assert m["wall"] == 10 * 3600 and m["gpu_busy"] == 3600 + 60 and m["cpu_busy"] == 10 * 3600
    # only GPU workers: every job on them
    assert campaign_dask.makespan(jobs, cpus=0, gpus=1)["wall"] == 3600 + 600 + 60
    # no GPU: the GPU job runs on a CPU worker
    assert campaign_dask.makespan(jobs, cpus=1, gpus=0)["wall"] == 112 * 3600
    with pytest.raises(ValueError, match="cpus and gpus"):
        campaign_dask.makespan(jobs, cpus=0, gpus=0)


def _stored(req: RunRequest, root: Path, device: str, wall: float, cpu: float, suffix: str = "") -> None:
    path = req.path(root).with_name(req.path(root).stem + suffix + ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(with_digest({"campaign": 1, "folder": req.folder, "seed": req.seed, "point": req.point,
                                "trial": req.trial, "point_index": req.point_index, "device": device,
                                "wall_seconds": wall, "cpu_seconds": cpu, "finished": "2026-11-28T00:00:00+0000",
                                "result": {}})))


def test_gpu_timings_are_stored_with_their_device_and_price_runs(tmp_path):
    """Stored GPU runs give GPU timing entries in campaign_timings.json (the device named, CPU entries kept, the
    file still valid); a point's CPU and GPU runs give the speed-up that prices the runs with no GPU timing."""
    root = tmp_path / "store"
    root.mkdir()
    a, b = _request("f", 0, 0, rounds=100), _request("f", 1, 0, rounds=100, clients=8)
    other_mixing = _request("f", 0, 1, rounds=50, dataset="digits")  # same setting as a but for data and rounds
    untimed_gpu = _request("f", 2, 0, rounds=100, clients=5)
    cpu_entry = {"cell": "f:digits:5", "algo": "global", "seconds_per_round": 2.0, "setup_seconds": 0.0,
                 "per_round_from": "test", "timed_rounds": [1, 2]}
    (root / campaign_costs.TIMINGS).write_text(json.dumps({campaign._timing_key(untimed_gpu): cpu_entry}))
    h100 = "cuda: NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130, CUDA 13.0)"
    _stored(a, root, h100, wall=10.0, cpu=10.0)
    _stored(b, root, h100, wall=20.0, cpu=20.0)
    _stored(b, root, "cpu: AMD EPYC, 2 cores", wall=9000.0, cpu=8000.0, suffix="-cpu")  # b's point on a CPU
    assert campaign_dask.record_gpu_timings(root) == 2
    timings = campaign.read_timings(root)  # still a valid timings file
    assert timings[campaign._timing_key(untimed_gpu)] == cpu_entry
    gpu = {k: v for k, v in timings.items() if v.get("device")}
    assert {v["device"] for v in gpu.values()} == {h100} and len(gpu) == 2
    entry = timings[campaign_dask.gpu_timing_key(a)]
    assert entry["seconds_per_round"] == pytest.approx(0.1) and entry["runs"] == 1
    prices = campaign_dask.Prices.read(root)
    assert prices.gpu(a) == (10.0, "stored GPU runs")
    assert prices.gpu(other_mixing) == (pytest.approx(5.0), "GPU timing")  # 50 rounds at a's 0.1 s a round
    assert prices.speedup.factor == pytest.approx(8000.0 / 20.0) and prices.speedup.points == 1
    seconds, source = prices.gpu(untimed_gpu)  # 200 CPU s / 400
    assert source == "CPU / speed-up" and seconds == pytest.approx(200.0 / 400.0)
    assert campaign_dask.record_gpu_timings(root) == 2  # unchanged: not rewritten


def test_the_device_plan_prices_each_run_on_its_workers(tmp_path):
    """A cell that needs a GPU goes to the GPU worker at its CPU price / the measured speed-up, a queued cell to the
    CPU workers; the wall time is the list schedule's, and the plan names the factor and the sources."""
    root = tmp_path / "store"
    root.mkdir()
    probe = _request("srfca-simulated", 0, 0, clients=6, rounds=10)  # a point run on both: 400 CPU s, 2 GPU s
    _stored(probe, root, "cuda: NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130, CUDA 13.0)", wall=2.0, cpu=2.0)
    _stored(probe, root, "cpu: AMD EPYC, 2 cores", wall=500.0, cpu=400.0, suffix="-cpu")

    def cell_plan(folder, clients, trials, status, per_round):
        reqs = [_request(folder, 0, t, clients=clients, rounds=10) for t in range(trials)]
        timings[campaign._timing_key(reqs[0])] = {"cell": folder, "algo": "global", "seconds_per_round": per_round,
                                                   "setup_seconds": 0.0, "per_round_from": "test",
                                                   "timed_rounds": [1, 2]}
        cell = campaign.Cell(folder, "digits-rotated", clients, reqs, published=[_Pub()])
        return campaign.CellPlan(cell, "yes", trials, None, 1.0, {}, status)

    timings: dict = {}
    gpu_cell = cell_plan("clove-feature-skew", 20, 2, "needs a GPU", 10.0)  # 100 CPU s a run: 0.5 GPU s
    cpu_cell = cell_plan("clove-amazon", 8, 3, "queued", 360.0)  # 3600 CPU s a run
    (root / campaign_costs.TIMINGS).write_text(json.dumps(timings))
    text = campaign_dask.device_plan([gpu_cell, cpu_cell], timings, cpus=2, gpus=1, root=root)
    assert "**200**" in text and "1 point(s)" in text  # 400 CPU s / 2 GPU s, measured on the probe's point
    # two CPU workers take two 1-hour runs; the GPU its two 0.5 s runs, then the third hour's run at 18 s
    assert "| minimal tests | 5 | 2.0 | 0.01 | 1.0 h (clove-amazon global, CPU) | **1.0 h** |" in text
    assert "GPU: CPU / speed-up (2 runs)" in text and "CPU: measured (3 runs)" in text
    assert "cells with no GPU timing (their runs priced at the CPU price / the speed-up): " \
           "`clove-feature-skew:digits-rotated:20`" in text
    assert campaign.read_timings(root)[campaign_dask.gpu_timing_key(probe)]["device"].startswith("cuda: NVIDIA H100")
    # one CPU worker and no GPU: every run on it
    text = campaign_dask.device_plan([gpu_cell, cpu_cell], timings, cpus=1, gpus=0, root=root)
    assert "| minimal tests | 5 | 3.1 | 0.00 |" in text and "**3.1 h**" in text  # 3 h + 200 s


@pytest.mark.parametrize("argv, fragment", [
    (["--campaign", "plan", "--cpus", "2"], "--cpus applies to --campaign only with --backend dask"),
    (["--campaign", "run", "--scheduler", "tcp://h:8786"], "--scheduler applies to --campaign only with --backend"),
    (["--campaign", "run", "--backend", "dask", "--n-jobs", "2"], "--n-jobs does not apply to --campaign with"),
    (["--campaign", "run", "--backend", "dask", "--device", "cuda"], "--device does not apply to --campaign with"),
    (["--campaign", "plan", "--backend", "dask", "--scheduler", "tcp://h:8786"], "--scheduler applies only to"),
    (["--campaign", "run", "--backend", "dask", "--scheduler", "tcp://h:8786", "--gpus", "1"],
     "--gpus does not apply with --scheduler"),
    (["--campaign", "plan", "--backend", "dask", "--cpus", "x"],
     "--cpus must be a whole number of workers in [0, 10000]"),
    (["--campaign", "plan", "--backend", "dask", "--cpus", "0", "--gpus", "0"], "are both 0"),
    (["--campaign", "run", "--backend", "dask", "--gpus", "4096"], "CUDA device(s) torch sees"),
    (["--campaign", "plan", "--backend", "dask", "--commit-runs"], "--commit-runs applies only to --campaign run"),
    (["--only", "ifca-fig3a", "--gpus", "1"], "--gpus applies only with --campaign"),
])
def test_the_dask_campaigns_flags_are_refused_where_they_would_be_ignored(argv, fragment, monkeypatch, capsys):
    import paper_repro

    def no_work(*args, **kwargs):
        raise AssertionError("work started")

    for name in ("collect", "measure", "run_campaign", "refresh"):
        monkeypatch.setattr(campaign, name, no_work)
    assert paper_repro.main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err


def test_commit_runs_commits_the_stored_file_and_nothing_else(tmp_path):
    """--commit-runs: the run file alone goes into the commit (another change staged meanwhile stays staged); where
    git cannot commit it, one log line and the campaign goes on."""
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("config", "user.email", "test@example.org")
    git("config", "user.name", "test")
    (repo / "other.txt").write_text("x")
    git("add", "other.txt")
    git("commit", "-qm", "base")
    (repo / "other.txt").write_text("y")
    git("add", "other.txt")  # someone else's change, staged
    run = repo / "tiny-a" / "global-0123456789abcdef.json"
    run.parent.mkdir()
    run.write_text("{}")
    lines: list[str] = []
    assert campaign_dask.git_commit_run(run, lines.append) and lines == []
    assert git("show", "--name-only", "--format=", "HEAD").split() == ["tiny-a/global-0123456789abcdef.json"]
    assert git("diff", "--cached", "--name-only").split() == ["other.txt"]
    outside = tmp_path / "plain" / "global-0123456789abcdef.json"
    outside.parent.mkdir()
    outside.write_text("{}")
    assert not campaign_dask.git_commit_run(outside, lines.append)
    assert len(lines) == 1 and lines[0].startswith("campaign: global-0123456789abcdef.json stored, not committed")
