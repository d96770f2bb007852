"""Protocol options of ``python -m nets run``: separate local starts, IFCA's test machines and training-identity
score, CFL's split test."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from nets.datasets import build_federation  # noqa: E402
from nets.experiment import _separate_local_starts, run_experiment  # noqa: E402

SMALL = dict(dataset="digits-rotated", clients=8, n_per_client=10, rounds=2, local_steps=1)


def _locals(separate: bool) -> np.ndarray:
    fed = build_federation("digits-rotated", 8, 10, np.random.default_rng(0))
    train, _ = fed.backends(fed.model("mlp", device=torch.device("cpu"), dtype=torch.float64), seed=0)
    if separate:
        _separate_local_starts(train, np.random.default_rng(1))
    return train.to_numpy(train.local_models("gd", 1, 1e-12))  # a negligible step: the starts


def test_separate_local_starts_differ_per_client_shared_ones_do_not():
    shared, separate = _locals(False), _locals(True)
    assert np.allclose(shared, shared[0])  # one initialisation for every client
    assert min(np.abs(separate[i] - separate[0]).max() for i in range(1, len(separate))) > 1e-3


def test_test_machines_scored_by_min_loss_and_by_own_rotation_for_local_models():
    rec = run_experiment(dict(SMALL, algo="ifca", test_machines=8, test_machine_size=5))
    assert rec["n_test_machines"] == 8 and rec["test_machine_size"] == 5
    assert 0.0 <= rec["test_accuracy_machines"] <= 1.0
    # IFCA Sec. VI-B: each local model on the test machines of its rotation (tests/test_ifca_table1_protocol.py)
    assert 0.0 <= run_experiment(dict(SMALL, algo="local", test_machines=8, test_machine_size=5))[
        "test_accuracy_machines"] <= 1.0
    assert "test_accuracy_machines" not in run_experiment(dict(SMALL, algo="ifca"))


def test_ifca_also_scored_with_its_training_identity_which_never_beats_the_test_min_loss_choice():
    # 6 models for 4 clusters: some clients' test data can prefer a model their training data did not pick
    rec = run_experiment(dict(SMALL, algo="ifca", n_clusters=6, rounds=3, seed=3))
    assert 0.0 <= rec["test_accuracy_train_identity"] <= 1.0
    # the min-loss rule picks, per client, the model of least test loss: its loss is at most the training identity's
    assert rec["test_loss"] <= rec["test_loss_train_identity"] + 1e-9
    assert rec["test_loss"] < rec["test_loss_train_identity"]  # at this seed the two rules pick different models
    for algo in ("global", "srfca", "clove", "local"):  # one model, or already scored by the client's cluster
        extra = dict(threshold=1.5) if algo == "srfca" else {}
        assert "test_accuracy_train_identity" not in run_experiment(dict(SMALL, algo=algo, **extra))


def test_cfl_records_its_split_test_and_splits_when_the_thresholds_allow():
    rec = run_experiment(dict(SMALL, algo="cfl", rounds=4, warmup_rounds=1, eps1=10.0, eps2=1e-6,
                              min_split_size=2, linkage="complete"))
    assert rec["split_test"] == {"eps1": 10.0, "eps2": 1e-6, "warmup_rounds": 1, "min_split_size": 2,
                                 "linkage": "complete"}
    assert rec["splits"] and all(t >= 1 for t, _ in rec["splits"]) and rec["n_clusters"] > 1
    never = run_experiment(dict(SMALL, algo="cfl", rounds=4, warmup_rounds=4))
    assert never["splits"] == [] and never["n_clusters"] == 1  # no round after the warm-up


def test_separate_starts_only_for_algorithms_with_one_local_training():
    with pytest.raises(ValueError, match="local_init='separate'"):
        run_experiment(dict(SMALL, algo="ifca", local_init="separate"))


def test_default_client_size_fits_the_embedded_digits():
    """Without --n-per-client a label-skew partition of the 1797 digits lowers the default n and says so; an
    explicit n that the class pools cannot hold stays an error naming the pool."""
    from nets.experiment import run_experiment

    rec = run_experiment({"dataset": "digits-label-skew-1", "algo": "global", "rounds": 1, "local_steps": 1})
    n = rec["n_per_client"]
    # the lowered default is the largest n the class pools hold: n runs, n + 1 is refused
    assert run_experiment({"dataset": "digits-label-skew-1", "algo": "global", "rounds": 1, "local_steps": 1,
                           "n_per_client": n})["n_per_client"] == n
    with pytest.raises(ValueError, match="pool has .* samples of class"):
        run_experiment({"dataset": "digits-label-skew-1", "algo": "global", "rounds": 1, "n_per_client": n + 1})
    assert any(f"n_per_client lowered from its default 100 to {rec['n_per_client']}:" in n for n in rec["notes"])
    with pytest.raises(ValueError, match="pool has .* samples of class"):
        run_experiment({"dataset": "digits-label-skew-1", "algo": "global", "rounds": 1, "n_per_client": 100})
