"""The papers' baselines as public Flower strategies on the clustered strategies' driver (issue #55: one Flower
path): :class:`nets.flower.Global` (FedAvg, McMahan et al. 2017; IFCA's ``k = 1`` case) and
:class:`nets.flower.Local` (every client alone).

Each equals its estimator of ``nets run`` (:class:`synth.algorithms.baselines.GlobalModel`,
:class:`synth.algorithms.baselines.LocalModels`) fitted in this process on the same data and starts; a lost client
leaves FedAvg's round (the model is the mean of the updates that arrived) and is removed by Local (no cluster, no
model; the others keep theirs).  In process (InlineGrid); skipped without the ``flower`` extra.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

from flwr.app import Array, ArrayRecord  # noqa: E402

import nets.flower as flower  # noqa: E402
from nets.flower.arrays import Layout, split_clusters  # noqa: E402
from nets.flower.clustered import TRAIN, Global, Local, RoundFailed  # noqa: E402
from nets.flower.inline import InlineGrid  # noqa: E402
from nets.flower.torch_client import torch_client_app  # noqa: E402
from tests.test_flower_batchnorm import N_NODES  # noqa: E402
from tests.test_flower_clustered import TWO_GROUPS, fails, toy_app, toy_models, toy_update  # noqa: E402
from tests.test_flower_options import _net, drawn_starts, full_batch_data, in_process_backend  # noqa: E402

pytestmark = pytest.mark.flower


def test_exported_from_nets_flower():
    assert flower.Global is Global and flower.Local is Local
    assert {"Global", "Local"} <= set(flower.__all__)


@pytest.mark.parametrize("averaging", ["model", "gradient"])
@pytest.mark.parametrize("step, client_choice", [({"lr": 0.3}, True), ({"lr": 0.3}, False),
                                                 ({"step_sizes": [0.05, 0.8]}, True)],
                         ids=["client-choice", "server-choice", "step-sizes"])
def test_global_is_the_estimators_fedavg(averaging, step, client_choice):
    """Global's model and assignment are GlobalModel's (IFCA with k = 1) fitted in process from the same start,
    with one step size or restarts over several (the run kept and its step size too)."""
    from synth.algorithms.baselines import GlobalModel

    start = drawn_starts(1)
    layout = Layout(ArrayRecord(_net().state_dict()))
    s = Global(averaging=averaging, client_choice=client_choice, local_steps=2, seed=0, evaluate_every=0, **step)
    result = s.start(InlineGrid(torch_client_app(_net, full_batch_data), N_NODES), layout.record(start),
                     num_rounds=3)
    est = GlobalModel(n_rounds=3, step_size=step.get("lr", step.get("step_sizes")), averaging=averaging,
                      local_steps=2, init=start.reshape(1, 1, -1), random_state=0).fit(in_process_backend())
    assert [s.labels[node] for node in s._federation] == est.labels_.tolist() == [0] * N_NODES
    np.testing.assert_allclose(s.models, est.models_, rtol=0, atol=1e-5)
    assert len(split_clusters(result.arrays)) == 1 and len(result.train_metrics_clientapp) == 3
    if "step_sizes" in step:
        assert s.best_run == est.result_.extra["best_run"]
        assert s.best_step_size == step["step_sizes"][s.best_run]


def test_local_is_the_estimators_local_models():
    """Local's models are LocalModels' (local="gd") fitted in process from the same start, one cluster per client,
    and each client evaluates its own model."""
    from synth.algorithms.baselines import LocalModels

    backend = in_process_backend()
    start = backend.model.init(backend.seed).detach().cpu().numpy()[None].astype(np.float64)  # its own start
    layout = Layout(ArrayRecord(_net().state_dict()))
    grid = InlineGrid(torch_client_app(_net, full_batch_data), N_NODES)
    s = Local(local_steps=5, lr=0.3, seed=0)
    result = s.start(grid, layout.record(start))
    est = LocalModels(local="gd", local_train_steps=5, local_step_size=0.3).fit(backend)
    assert [s.labels[node] for node in s._federation] == est.labels_.tolist() == list(range(N_NODES))
    np.testing.assert_allclose(s.models, est.models_, rtol=0, atol=1e-5)
    assert len(split_clusters(result.arrays)) == N_NODES
    kinds = [m.metadata.message_type for m in grid.sent]
    assert kinds == [TRAIN] * N_NODES + ["evaluate"] * N_NODES  # one exchange, then each client scores its own
    evaluated = [(int(m.metadata.dst_node_id), layout.flatten(m.content["arrays"])) for m in grid.sent[N_NODES:]]
    for node, model in evaluated:
        np.testing.assert_array_equal(model, s.models[s.labels[node]].astype(np.float32))
    assert result.train_metrics_clientapp[1]["answered"] == N_NODES and 1 in result.evaluate_metrics_clientapp


def test_local_rounds_and_participation_are_its_own():
    with pytest.raises(ValueError, match="num_rounds must be 1 for Local"):
        Local().start(InlineGrid(torch_client_app(_net, full_batch_data), N_NODES), ArrayRecord(_net().state_dict()),
                      num_rounds=3)
    with pytest.raises(ValueError, match="fraction_train must be 1 for Local"):
        Local(fraction_train=0.5)


# ------------------------------------------------------------------ a lost client
@pytest.mark.parametrize("how", ["fail", "drop"])
def test_global_lost_client_leaves_the_round(how):
    """Node 2 (partition 1) is lost in round 1's train message: the model is the mean of the other three updates
    (IFCA's plain mean over M_t), and round 1 counts it lost."""
    grid = InlineGrid(toy_app(TWO_GROUPS), 4, fault=fails(2, TRAIN, rounds=(1,), how=how))
    s = Global(lr=0.25, local_steps=1, evaluate_every=0)
    start = np.array([1.0, 0.0])
    result = s.start(grid, ArrayRecord({"w": Array(start)}), num_rounds=1, timeout=0.5)
    want = np.mean([toy_update(start, TWO_GROUPS[p], 1, 0.25) for p in (0, 2, 3)], axis=0)
    np.testing.assert_allclose(s.models[0], want, rtol=0, atol=1e-12)
    assert [(rnd, t, n) for rnd, t, n, _ in s.lost] == [(1, TRAIN, 2)]
    assert result.train_metrics_clientapp[1]["answered"] == 3 and result.train_metrics_clientapp[1]["lost"] == 1
    assert sorted(s.labels) == [1, 2, 3, 4]  # the final query.losses assigns every client that answers it


@pytest.mark.parametrize("how", ["fail", "drop"])
def test_local_lost_client_is_removed(how):
    """Node 2 (partition 1) is lost in Local's one exchange: it has no cluster and no model, the others keep the
    models they sent (those of the fault-free run)."""
    start = toy_models([1.0, 0.0])
    clean = Local(local_steps=3, lr=0.25, evaluate_every=0)
    clean.start(InlineGrid(toy_app(TWO_GROUPS), 4), start)
    s = Local(local_steps=3, lr=0.25, evaluate_every=0)
    result = s.start(InlineGrid(toy_app(TWO_GROUPS), 4, fault=fails(2, TRAIN, how=how)), start, timeout=0.5)
    assert sorted(s.labels) == [1, 3, 4] and sorted(s.labels.values()) == [0, 1, 2]
    for node in (1, 3, 4):
        np.testing.assert_array_equal(s.models[s.labels[node]], clean.models[clean.labels[node]])
    assert len(split_clusters(result.arrays)) == 3 and np.isfinite(s.models).all()
    assert [(rnd, t, n) for rnd, t, n, _ in s.lost] == [(1, TRAIN, 2)]
    assert result.train_metrics_clientapp[1]["answered"] == 3 and result.train_metrics_clientapp[1]["lost"] == 1
    with pytest.raises(RoundFailed, match="node 2"):
        Local(local_steps=3, accept_failures=False).start(
            InlineGrid(toy_app(TWO_GROUPS), 4, fault=fails(2, TRAIN, how=how)), start, timeout=0.5)
