"""The public clustered strategies' results in Flower's records (``nets.flower.clustered``): ``Result.arrays`` is
a ``RecordDict`` holding one ``ArrayRecord`` per cluster (``cluster-0``, ...) and the assignment;
:func:`~nets.flower.arrays.cluster_state_dict` gives cluster j's ``state_dict``; ``evaluate_fn`` receives the same
form, and with IFCA's restarts the models it receives are those the clients evaluate (the round's best run, in
the last round the run kept): a server-side evaluation of them equals the clients' own.  Skipped without the
``flower`` extra.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict  # noqa: E402
from torch import nn  # noqa: E402

from nets.flower.arrays import cluster_state_dict, split_clusters  # noqa: E402
from nets.flower.clustered import IFCA, SRFCA, CLoVE  # noqa: E402
from nets.flower.inline import InlineGrid  # noqa: E402
from nets.flower.torch_client import torch_client_app  # noqa: E402
from tests.test_flower_batchnorm import BatchNormCNN, _data, load_data  # noqa: E402
from tests.test_flower_clustered import TWO_GROUPS, toy_app, toy_models  # noqa: E402

pytestmark = pytest.mark.flower


@pytest.mark.parametrize("make, rounds", [(lambda: IFCA(n_clusters=2, local_steps=1, lr=0.25), 2),
                                          (lambda: IFCA(n_clusters=2, local_steps=1, lr=0.25, n_init=2), 2),
                                          (lambda: CLoVE(n_clusters=2, local_steps=1, lr=0.25), 2),
                                          (lambda: SRFCA(threshold=1.0, local_train_steps=1, local_step_size=0.25,
                                                         n_refine=1, trmean_steps=1), None)])
def test_result_arrays_hold_one_record_per_cluster_and_the_assignment(make, rounds):
    s = make()
    start = toy_models([1.0, 0.0], [-1.0, 0.0], [2.0, 0.0], [-2.0, 0.0]) if getattr(s, "n_init", 1) == 2 else \
        (toy_models([1.0, 0.0], [-1.0, 0.0]) if not isinstance(s, SRFCA) else split_clusters(
            toy_models([0.0, 0.0]))[0])
    result = s.start(InlineGrid(toy_app(TWO_GROUPS), 4), start, num_rounds=rounds)
    assert isinstance(result.arrays, RecordDict)
    assert sorted(result.arrays.array_records) == ["cluster-0", "cluster-1"]
    assignment = result.arrays["assignment"]
    assert isinstance(assignment, ConfigRecord)
    assert {int(n): c for n, c in assignment.items()} == s.labels and len(assignment) == 4
    assert {int(n): p for n, p in result.arrays["partitions"].items()} == s.partitions
    for j in (0, 1):
        state = cluster_state_dict(result, j)
        assert torch.equal(state["w"], torch.from_numpy(result.arrays[f"cluster-{j}"]["w"].numpy()))
        assert torch.equal(state["w"], cluster_state_dict(result.arrays, j)["w"])
    with pytest.raises(IndexError, match="cluster 2 does not exist"):
        cluster_state_dict(result, 2)
    assert "2 ArrayRecords" in repr(result)


def test_evaluate_fn_gets_the_models_the_clients_evaluate_with_restarts():
    seen = {}

    def evaluate_fn(server_round: int, models: RecordDict) -> MetricRecord:
        records = split_clusters(models)
        seen[server_round] = len(records)
        assignment = {int(n): c for n, c in models["assignment"].items()}
        parts = {int(n): p for n, p in models["partitions"].items()}
        if not assignment:
            return MetricRecord({"eval-loss": float("nan")})
        losses = [((records[c]["w"].numpy() - TWO_GROUPS[parts[n]]) ** 2).sum() for n, c in assignment.items()]
        return MetricRecord({"eval-loss": float(np.mean(losses))})

    s = IFCA(n_clusters=2, n_init=2, local_steps=1, lr=0.25)
    # run 0 starts on the wrong side of both groups, run 1 one model on each side
    result = s.start(InlineGrid(toy_app(TWO_GROUPS), 4), toy_models([10.0, 0.0], [11.0, 0.0], [1.0, 0.0],
                                                                     [-1.0, 0.0]), num_rounds=3,
                     evaluate_fn=evaluate_fn)
    assert seen == {0: 2, 1: 2, 2: 2, 3: 2}  # k models, never the R * k of the restarts
    for rnd in (1, 2, 3):
        server = result.evaluate_metrics_serverapp[rnd]["eval-loss"]
        assert abs(server - result.evaluate_metrics_clientapp[rnd]["eval-loss"]) < 1e-12
    assert s.best_run == 1


def test_server_side_accuracy_equals_the_clients_with_restarts_on_a_torch_model():
    """IFCA with restarts on a BatchNorm CNN (torch_client_app): every round, the accuracy evaluate_fn computes
    from the cluster models it receives and their assignment equals the clients' evaluation."""
    def evaluate_fn(server_round: int, models: RecordDict) -> MetricRecord | None:
        assignment = {int(n): c for n, c in models["assignment"].items()}
        parts = {int(n): p for n, p in models["partitions"].items()}
        if not assignment:
            return None
        net, correct, total, loss = BatchNormCNN(), 0.0, 0, 0.0
        for node, c in assignment.items():
            net.load_state_dict(cluster_state_dict(models, c))
            net.eval()
            x, y = _data(parts[node])
            with torch.no_grad():
                out = net(x)
            correct += float((out.argmax(1) == y).sum())
            loss += float(nn.functional.cross_entropy(out, y)) * len(y)
            total += len(y)
        return MetricRecord({"acc": correct / total, "loss": loss / total})

    torch.manual_seed(0)
    s = IFCA(n_clusters=2, n_init=2, local_steps=2, lr=0.1)
    result = s.start(InlineGrid(torch_client_app(BatchNormCNN, load_data), 4),
                     ArrayRecord(BatchNormCNN().state_dict()), num_rounds=3, evaluate_fn=evaluate_fn)
    assert sorted(result.evaluate_metrics_serverapp) == [1, 2, 3]
    for rnd in (1, 2, 3):
        server, clients = result.evaluate_metrics_serverapp[rnd], result.evaluate_metrics_clientapp[rnd]
        assert abs(server["acc"] - clients["eval-acc"]) < 1e-9
        assert abs(server["loss"] - clients["eval-loss"]) < 1e-5
