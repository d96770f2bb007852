"""Flower strategies against ``nets run``: the same clustering every round and the same accuracy, on Flower's
simulation engine; run-config parsing and one-line errors of ``python -m nets flower``.

All strategies run in one simulation (one Ray start; a module fixture), each against ``nets run`` with the same
parameters.  Skipped without the ``flower`` extra.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("ray")

import nets.experiment as experiment  # noqa: E402
from nets.cli import main  # noqa: E402
from nets.flower import simulate, strategy_for  # noqa: E402
from nets.flower.server import params_from_run_config  # noqa: E402

pytestmark = pytest.mark.flower

ROOT = Path(__file__).resolve().parents[1]
BASE = {"dataset": "digits-rotated", "clients": 8, "n_per_client": 30, "rounds": 3, "local_steps": 2, "seed": 0}
# every strategy, and IFCA's and FedAvg's other paths: restarts, sampled clients, minibatches, gradient averaging
CASES = {
    "ifca": {"algo": "ifca"},
    "ifca-restarts-sampled-minibatch": {"algo": "ifca", "n_init": 2, "participation": 0.5, "batch_size": 8},
    "srfca": {"algo": "srfca", "threshold": 1.0, "trmean_steps": 5, "local_train_steps": 60, "step_size": 0.3},
    "clove": {"algo": "clove"},
    "global-gradient": {"algo": "global", "averaging": "gradient", "step_size": 0.5},
    "local": {"algo": "local", "local_train_steps": 20},
}


@pytest.fixture(scope="module")
def flower_runs():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the simulation's clients use one thread each; so does the reference
    strategies = {name: strategy_for({**BASE, **case}, history=True) for name, case in CASES.items()}
    simulate(list(strategies.values()))
    yield strategies
    torch.set_num_threads(threads)


def _nets_run(params: dict, monkeypatch) -> tuple[dict, list[np.ndarray]]:
    """``nets run``'s record, and the labels its monitor saw at every call (every round of every restart)."""
    seen: list[np.ndarray] = []
    metrics = experiment._metrics

    def spy(labels, truth):
        seen.append(np.asarray(labels, dtype=np.int64).copy())
        return metrics(labels, truth)

    monkeypatch.setattr(experiment, "_metrics", spy)
    record = experiment.run_experiment(params, history=True)
    monkeypatch.undo()
    return record, seen


@pytest.mark.parametrize("name", list(CASES))
def test_flower_run_equals_nets_run(name, flower_runs, monkeypatch):
    strategy = flower_runs[name]
    got = strategy.record
    want, labels = _nets_run({**BASE, **CASES[name]}, monkeypatch)
    # the same clustering after every round (every restart's), and at the end
    assert len(strategy.round_labels) == len(labels)
    if name != "local":  # Local has no rounds
        assert len(labels) >= BASE["rounds"]
    for t, (a, b) in enumerate(zip(strategy.round_labels, labels, strict=True)):
        assert np.array_equal(a, b), f"call {t}: flower {a.tolist()} != nets run {b.tolist()}"
    for key in ("ari", "misclustering", "misclustering_matched", "n_clusters", "rounds", "clients", "n_per_client",
                "n_params", "unassigned", "notes", "algo_params", "model", "task"):
        assert got[key] == want[key], key
    assert got["test_accuracy"] == pytest.approx(want["test_accuracy"], abs=1e-4)
    assert got["test_loss"] == pytest.approx(want["test_loss"], abs=1e-4)
    for key in ("test_accuracy_train_identity", "test_loss_train_identity"):  # IFCA's second score
        assert got.get(key) == pytest.approx(want.get(key), abs=1e-4), key
    assert got["history"]["ari"] == want["history"]["ari"]
    # the same record, plus what the Flower side cost
    assert set(got) == set(want) | {"flower"}
    assert got["flower"]["lost"] == [] and got["flower"]["exchanges"] >= 3  # describe, train, evaluate
    assert got["flower"]["rounds_without_answers"] == []
    assert want["batched"] is True and got["batched"] is False  # each Flower client trains alone


def test_runs_are_not_trivial(flower_runs):
    """The cases exercise the algorithms: models change the clustering, SR-FCA merges, accuracy above chance."""
    ifca = flower_runs["ifca"].round_labels
    assert any(not np.array_equal(a, b) for a, b in zip(ifca, ifca[1:], strict=False))
    srfca = flower_runs["srfca"].round_labels
    assert len({tuple(r) for r in srfca}) > 1
    assert all(s.record["test_accuracy"] > 0.125 for s in flower_runs.values())


def test_command_line_prints_the_nets_run_record():
    """``python -m nets flower ... --json``: one JSON object, the ``nets run`` record of the same flags."""
    flags = ["--algo", "ifca", "--dataset", "digits-rotated", "--clients", "4", "--n-per-client", "20", "--rounds",
             "1", "--local-steps", "2", "--seed", "3", "--json"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", "nets", "flower", *flags], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=env)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = experiment.run_experiment({"algo": "ifca", "dataset": "digits-rotated", "clients": 4, "n_per_client": 20,
                                      "rounds": 1, "local_steps": 2, "seed": 3})
    assert set(got) == set(want) | {"flower"}
    assert got["test_accuracy"] == pytest.approx(want["test_accuracy"], abs=1e-4)
    assert (got["ari"], got["n_clusters"]) == (want["ari"], want["n_clusters"])
    assert out.stderr == ""  # Flower's and Ray's logs stay quiet without --verbose


def test_run_config_of_pyproject_is_a_valid_experiment():
    """``flwr run``'s ``[tool.flwr.app]``: the components exist and the run config is a valid experiment."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["flwr"]["app"]
    for ref in tool["components"].values():
        module, attr = ref.split(":")
        assert getattr(__import__(module, fromlist=[attr]), attr) is not None
    params, algo_params, options = params_from_run_config(tool["config"])
    assert strategy_for(params, algo_params=algo_params, **options).p["clients"] == params["clients"]
    with pytest.raises(ValueError, match="unknown run-config key 'round'"):
        params_from_run_config({**tool["config"], "round": 3})
    with pytest.raises(ValueError, match="JSON object"):
        params_from_run_config({**tool["config"], "params": "[1]"})
    # how long the run waits for its SuperNodes comes from the run config (flwr run --run-config start-timeout=60)
    _, _, options = params_from_run_config({**tool["config"], "start-timeout": 60.0})
    assert strategy_for(params, **options).start_timeout == 60.0


@pytest.mark.parametrize("argv, expect", [
    (["--algo", "cfl"], "has no Flower strategy"),
    (["--algo", "ifcaa"], "has no Flower strategy (did you mean 'ifca'?)"),
    (["--algo", "ifca", "--algo-param", "stoping=fixed"], "stoping"),
    (["--algo", "ifca", "--setp-size", "0.1"], "did you mean '--step-size'"),
    (["--algo", "srfca"], "threshold"),
    (["--algo", "ifca", "--checkpoint", "x.pt"], "not available in a Flower run"),
    (["--algo", "ifca", "--share", "last"], "not available in a Flower run"),
    (["--algo", "ifca", "--validation", "0.2"], "validation is not available in a Flower run"),
    (["--algo", "ifca", "--timeout", "0"], "timeout must be in (0, inf), got 0.0"),
    (["--algo", "ifca", "--algo-param", "x=1", "--algo-param", "x=2"], "--algo-param x=... is given twice"),
    (["--algo", "ifca", "--averaging", "gradient", "--algo-param", "stopping=converged"],
     "stopping='converged' is not available in a Flower strategy"),
    (["--algo", "ifca", "--rounds", "1", "--rounds", "2"], "--rounds given twice"),
])
def test_bad_input_is_one_line_exit_2(argv, expect, capsys):
    code = main(["flower", "--clients", "4", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and expect in err, err


def test_algo_param_the_strategy_sets_is_refused():
    """An estimator hyper-parameter the public strategy sets from the run's flags and seed (SR-FCA's ``start``,
    settable from Python only) is refused in one line, not silently replaced."""
    with pytest.raises(ValueError, match=r"--algo-param start=\.\.\. is not available in a Flower run"):
        strategy_for({**BASE, "algo": "srfca", "threshold": 1.0}, algo_params={"start": np.zeros(3)})


@pytest.mark.parametrize("argv", [
    ["--algo", "ifca", "--threshold", "1"],  # SR-FCA's
    ["--algo", "ifca", "--cfl-eps1", "0.1"],  # CFL's (an algorithm without a Flower strategy)
    ["--algo", "srfca", "--threshold", "1", "--clustering", "agglomerative"],  # CLoVE's
    ["--algo", "local", "--n-clusters", "2"],  # the clustered algorithms'
])
def test_flag_of_another_algorithm_is_refused_as_nets_run_refuses_it(argv, capsys, monkeypatch):
    """A flag the run's algorithm would ignore: one line naming the flag and its algorithms, nets run's line."""
    import ray

    monkeypatch.setattr(ray, "init", lambda *a, **k: pytest.fail("Ray was started"))
    assert main(["run", "--clients", "4", *argv]) == 2
    want = capsys.readouterr().err
    assert main(["flower", "--clients", "4", *argv]) == 2
    got = capsys.readouterr().err
    assert got.count("\n") == 1 and "is a flag of " in got and "not of --algo" in got, got
    assert got == want.replace("python -m nets run", "python -m nets flower")
