"""Checkpoint every round, resume after a kill: the resumed run equals the uninterrupted one."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nets.checkpoint import load_checkpoint, save_checkpoint
from nets.experiment import run_experiment

ROOT = Path(__file__).resolve().parents[1]
BASE = dict(dataset="digits-rotated", clients=8, n_per_client=20, n_test=10, rounds=5, local_steps=2,
            batch_size=5, n_init=2, eval_every=2, seed=3)


class Killed(Exception):
    pass


def _kill_after(round_):
    def hook(t):
        if t == round_:
            raise Killed
    return hook


@pytest.mark.parametrize("algo,participation", [("ifca", 1.0), ("ifca", 0.5), ("global", 0.75)])
def test_resume_after_kill_equals_uninterrupted(tmp_path, algo, participation):
    params = dict(BASE, algo=algo, participation=participation)
    if algo == "global":
        params.pop("n_init")
    whole = run_experiment(params, history=True)
    ck = tmp_path / "run.ckpt"
    with pytest.raises(Killed):
        run_experiment(dict(params, checkpoint=str(ck)), on_round=_kill_after(2))
    assert load_checkpoint(ck)["round"] == 2
    resumed = run_experiment(dict(params, checkpoint=str(ck)), history=True)
    assert resumed["resumed_from_round"] == 3
    for key in ("test_accuracy", "test_loss", "ari", "misclustering", "n_clusters"):
        assert resumed[key] == whole[key], key
    assert resumed["history"] == whole["history"]
    # a finished checkpoint resumes to the same result without training
    again = run_experiment(dict(params, checkpoint=str(ck)))
    assert again["test_accuracy"] == whole["test_accuracy"] and again["resumed_from_round"] == 5


def test_checkpoint_is_weights_only_and_config_checked(tmp_path):
    ck = tmp_path / "c.ckpt"
    run_experiment(dict(BASE, rounds=2, checkpoint=str(ck)))
    blob = torch.load(ck, weights_only=True)  # loads without unpickling arbitrary objects
    assert set(blob) == {"version", "round", "models", "rng_state", "config", "history"}
    assert blob["models"].shape[:2] == (2, 4)
    with pytest.raises(ValueError, match="was written with seed=3, this run has seed=4"):
        run_experiment(dict(BASE, rounds=3, seed=4, checkpoint=str(ck)))
    with pytest.raises(ValueError, match="rounds must be at least 2"):
        run_experiment(dict(BASE, rounds=1, checkpoint=str(ck)))
    with pytest.raises(ValueError, match="checkpoint is supported for ifca and global"):
        run_experiment(dict(BASE, algo="local", checkpoint=str(ck)))
    with pytest.raises(ValueError, match="single step_size"):
        run_experiment(dict(BASE, step_size=[0.1, 0.2], checkpoint=str(tmp_path / "x")))


def test_save_is_atomic(tmp_path):
    path = tmp_path / "a.ckpt"
    save_checkpoint(path, torch.zeros(1, 2, 3), 0, {"s": 1}, {"a": 1}, {"rows": []})
    assert not (tmp_path / "a.ckpt.tmp").exists()
    assert load_checkpoint(path)["round"] == 0
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(Exception):  # noqa: B017 - torch raises its own unpickling error type
        load_checkpoint(path)


def test_cli_resumes_after_sigkill(tmp_path):
    """A real kill: SIGKILL the CLI once a checkpoint exists; resuming gives the uninterrupted run's numbers."""
    ck = tmp_path / "k.ckpt"
    params = dict(dataset="digits-rotated", clients=8, n_per_client=20, n_test=10, rounds=12, local_steps=2,
                  batch_size=5, seed=1)
    args = [sys.executable, "-m", "nets", "run", "--json", "--checkpoint", str(ck)]
    for key, value in params.items():
        args += ["--" + key.replace("_", "-"), str(value)]
    proc = subprocess.Popen(args, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not ck.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ck.exists()
    resumed = run_experiment(dict(params, checkpoint=str(ck)))  # the same entry point the CLI calls
    whole = run_experiment(params)
    assert resumed["test_accuracy"] == whole["test_accuracy"] and resumed["ari"] == whole["ari"]
    assert resumed["test_loss"] == whole["test_loss"]


def test_a_finished_run_leaves_no_lock_file_and_a_held_lock_refuses_others(tmp_path):
    from nets.checkpoint import release_checkpoint

    ckpt = tmp_path / "run.ckpt"
    lock = tmp_path / "run.ckpt.lock"
    assert load_checkpoint(ckpt) is None and lock.exists()  # held while the run trains
    code = ("import sys; from nets.checkpoint import load_checkpoint\n"
            "try:\n    load_checkpoint(sys.argv[1])\nexcept ValueError as e:\n    print(e); sys.exit(3)\n")
    other = subprocess.run([sys.executable, "-c", code, str(ckpt)], capture_output=True, text=True)
    assert other.returncode == 3 and "in use" in other.stdout
    release_checkpoint(ckpt)
    assert not lock.exists()
    # a later run locks a fresh file, and another process can take it once that run is done
    assert load_checkpoint(ckpt) is None and lock.exists()
    release_checkpoint(ckpt)
    assert subprocess.run([sys.executable, "-c", code, str(ckpt)], capture_output=True).returncode == 0
    assert not lock.exists() or lock.stat().st_size == 0  # the other process exited holding it: an empty file


def test_a_finished_nets_run_removes_its_lock_file(tmp_path):
    ckpt = tmp_path / "c.ckpt"
    run_experiment({"dataset": "digits-rotated", "algo": "ifca", "clients": 8, "n_per_client": 10, "rounds": 2,
                    "seed": 0, "checkpoint": str(ckpt)})
    assert ckpt.exists() and not (tmp_path / "c.ckpt.lock").exists()
