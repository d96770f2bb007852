"""``python -m nets run``: the JSON record, one-line errors with exit status 2, batched == looped end to end."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nets.cli import main
from nets.experiment import run_experiment

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--dataset", "digits-rotated", "--clients", "8", "--n-per-client", "20", "--n-test", "10", "--rounds", "2",
        "--local-steps", "2"]


def test_cli_prints_one_json_object():
    out = subprocess.run([sys.executable, "-m", "nets", "run", "--dataset", "digits-rotated", "--algo", "ifca",
                          "--clients", "8", "--n-per-client", "20", "--rounds", "2", "--seed", "0", "--device", "auto",
                          "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    for key in ("test_accuracy", "ari", "misclustering", "n_clusters", "seconds", "device"):
        assert key in record
    assert record["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert 0.0 <= record["test_accuracy"] <= 1.0 and record["n_clusters"] <= 4


def _error(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err


def test_errors_are_one_line_exit_2(capsys, tmp_path):
    assert "did you mean '--n-per-client'" in _error(capsys, ["run", "--n-per-clint", "5"])
    assert "clients must be an integer in [1, inf), got 0" in _error(capsys, ["run", "--clients", "0"])
    assert "did you mean 'mnist-rotated'" in _error(capsys, ["run", "--dataset", "mnist-rotatd"])
    assert "--rounds expects an integer" in _error(capsys, ["run", "--rounds", "many"])
    err = _error(capsys, ["run", *TINY, "--algo", "srfca"])
    assert "threshold (SR-FCA's lambda) is required" in err
    err = _error(capsys, ["run", *TINY, "--algo", "clove", "--algo-param", "n_cluster=3"])
    assert "CLoVE has no hyper-parameter 'n_cluster' (did you mean 'n_clusters'?)" in err
    err = _error(capsys, ["run", "--dataset", "cifar-rotated", "--clients", "4", "--data-dir", str(tmp_path)])
    assert "'data_batch_1.bin' not found in" in err and str(tmp_path) in err
    err = _error(capsys, ["run", *TINY, "--algo", "ifca", "--share", "last", "--n-init", "0"])
    assert "n_init must be an integer in [1, inf), got 0" in err
    err = _error(capsys, ["run", *TINY, "--algo", "ifca", "--algo-param", "n_init=2"])
    assert "named flag controls (use --n-init)" in err
    assert "--threshold expects a number or 'auto', got 'autp'" in _error(capsys, ["run", "--threshold", "autp"])
    if not torch.cuda.is_available():
        assert "torch sees no CUDA GPU" in _error(capsys, ["run", *TINY, "--device", "cuda"])


def test_srfca_automatic_threshold_is_recorded(capsys):
    """``--threshold auto``: SR-FCA cuts ONE_SHOT's pairwise distances at their largest gap; the record names the
    number it took, which lies within the quantiles of the distances it cut (also recorded)."""
    assert main(["run", *TINY, "--algo", "srfca", "--threshold", "auto", "--dist", "cross", "--trmean-steps", "2",
                 "--local-train-steps", "10", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    q = record["distance_quantiles"]
    assert len(q) == 7 and q[0] <= record["threshold_chosen"] <= q[-1]


def test_batched_equals_looped_end_to_end():
    params = dict(dataset="digits-rotated", clients=8, n_per_client=20, n_test=10, rounds=3, local_steps=3,
                  batch_size=7, n_init=2, dtype="float64", seed=2)
    for algo in ("ifca", "clove"):
        a = run_experiment(dict(params, algo=algo), batched=True)
        b = run_experiment(dict(params, algo=algo), batched=False)
        assert a["ari"] == b["ari"] and a["n_clusters"] == b["n_clusters"]
        assert a["test_loss"] == pytest.approx(b["test_loss"], rel=1e-9)
        assert a["test_accuracy"] == b["test_accuracy"]


def test_same_seed_same_numbers():
    params = dict(dataset="digits-label-skew-1", clients=8, n_per_client=20, n_test=10, rounds=2, local_steps=2,
                  batch_size=5, algo="ifca", seed=4)
    a, b = run_experiment(params), run_experiment(params)
    c = run_experiment(dict(params, seed=5))
    assert (a["test_loss"], a["ari"]) == (b["test_loss"], b["ari"])
    assert a["test_loss"] != c["test_loss"]


@pytest.mark.parametrize("algo", ["srfca", "clove", "cfl", "local-kmeans", "oneshot-kmeans", "oneshot-ifca", "local",
                                  "global"])
def test_every_algorithm_of_synth_runs_on_torch(algo):
    """Every --algo dispatches to the estimator of synth.algorithms and is scored by its paper's rule."""
    r = run_experiment(dict(dataset="digits-rotated", algo=algo, clients=8, n_per_client=20, n_test=10, rounds=2,
                            local_steps=2, threshold=5.0, seed=0))  # untrained models: a loose threshold
    assert r["test_accuracy"] is not None and 0.0 <= r["test_accuracy"] <= 1.0
    assert -1.0 <= r["ari"] <= 1.0 and r["n_clusters"] >= 1
    if algo == "srfca":
        too_tight = run_experiment(dict(dataset="digits-rotated", algo=algo, clients=8, n_per_client=20, n_test=10,
                                        rounds=2, local_steps=2, threshold=0.1, seed=0))
        assert too_tight["test_accuracy"] is None and "no cluster" in too_tight["status"]
