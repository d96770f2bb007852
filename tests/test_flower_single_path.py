"""``nets flower``'s strategies against ``nets run`` through the public client contract, in process.

The ClientApp is :data:`nets.flower.client.app`: ``torch_client_app`` over cflab's partitions and networks, the app
a user's model would use, on :class:`~nets.flower.inline.InlineGrid` (no Ray).  The cases are what ``nets run``'s
local training does beyond the contract's plain SGD steps -- the step size's decay per round (IFCA CIFAR's
``lr_decay``), Adam, minibatches in the server's order -- and IFCA's min-loss evaluation rule
(``evaluate`` with ``choose="lowest-loss"``); every round's clustering and the scores must be ``nets run``'s.
Skipped without the ``flower`` extra.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

import nets.experiment as experiment  # noqa: E402
from nets.flower import strategy_for  # noqa: E402
from nets.flower.client import app  # noqa: E402
from nets.flower.inline import InlineGrid  # noqa: E402
from nets.flower.strategies import ClientFailed  # noqa: E402

pytestmark = pytest.mark.flower

BASE = {"dataset": "digits-rotated", "clients": 6, "n_per_client": 24, "rounds": 3, "local_steps": 2, "seed": 1}
CASES = {
    "ifca-decay-adam-minibatch": {"algo": "ifca", "lr_decay": 0.5, "optimizer": "adam", "step_size": 0.01,
                                  "batch_size": 8},
    "clove-minibatch-decay": {"algo": "clove", "batch_size": 5, "lr_decay": 0.7, "step_size": 0.3},
    # 8 clients: ONE_SHOT finds clusters (2 after MERGE) where 6 clients of 24 samples leave every client alone
    "srfca-minibatch": {"algo": "srfca", "clients": 8, "n_per_client": 30, "seed": 0, "threshold": 1.0,
                        "trmean_steps": 3, "local_train_steps": 60, "step_size": 0.3, "batch_size": 8},
    "local-adam": {"algo": "local", "local_train_steps": 10, "optimizer": "adam", "step_size": 0.01},
    # one start per client (nets run's local_init="separate", SR-FCA Sec. 5's Local-KMeans question)
    "local-separate-starts": {"algo": "local", "local_train_steps": 5, "local_init": "separate"},
    # restarts with gradient averaging: every run's gradient from one query.gradient (the client's choice)
    "ifca-gradient-restarts": {"algo": "ifca", "averaging": "gradient", "n_init": 2, "step_size": 0.5},
    # SR-FCA as its public code runs it (sr-fca@a1b418f: per-client starts, pivot clustering), an --algo-param
    "srfca-public-code": {"algo": "srfca", "clients": 8, "n_per_client": 30, "threshold": 1e6, "trmean_steps": 2,
                          "local_train_steps": 20, "step_size": 0.3, "algo_params": {"variant": "public-code"}},
    # SR-FCA's automatic threshold (the largest gap of ONE_SHOT's cross-cluster losses): the record names it
    "srfca-auto-threshold": {"algo": "srfca", "clients": 8, "n_per_client": 30, "threshold": "auto",
                             "dist": "cross", "trmean_steps": 2, "local_train_steps": 20, "step_size": 0.3},
    # SR-FCA keeping no cluster (cross-cluster losses far above the threshold): every client unassigned, as in
    # nets run, with nets run's ARI (not the "no client answered" rule)
    "srfca-no-cluster": {"algo": "srfca", "clients": 8, "n_per_client": 30, "threshold": 1.0, "dist": "cross",
                         "trmean_steps": 2, "local_train_steps": 20, "step_size": 0.3},
    # FedAvg's restarts over step sizes with gradient averaging (the client's choice)
    "global-gradient-step-sizes": {"algo": "global", "averaging": "gradient", "step_size": [0.1, 0.5]},
    # restarts over step sizes with model averaging: the server's choice, one train exchange per run
    "ifca-step-sizes-minibatch": {"algo": "ifca", "n_init": 2, "step_size": [0.05, 0.3], "batch_size": 8},
}


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("name", list(CASES))
def test_public_client_contract_reproduces_nets_run(name, monkeypatch):
    params = {**BASE, **CASES[name]}
    algo_params = params.pop("algo_params", {})
    seen: list[np.ndarray] = []
    metrics = experiment._metrics
    monkeypatch.setattr(experiment, "_metrics", lambda labels, truth: (seen.append(np.array(labels)),
                                                                       metrics(labels, truth))[1])
    want = experiment.run_experiment(params, algo_params=algo_params, history=True)
    monkeypatch.undo()
    strategy = strategy_for(params, algo_params=algo_params, history=True)
    grid = InlineGrid(app, params["clients"])
    strategy.start(grid)
    got = strategy.record
    assert len(strategy.round_labels) == len(seen)
    for t, (a, b) in enumerate(zip(strategy.round_labels, seen, strict=True)):
        assert np.array_equal(a, b), f"call {t}: flower {a.tolist()} != nets run {b.tolist()}"
    for key in ("ari", "n_clusters", "unassigned"):
        assert got[key] == want[key], key
    if name != "srfca-no-cluster":  # a clustering, not all alone
        assert want["n_clusters"] >= 1 and want["unassigned"] < params["clients"]
    else:
        assert want["unassigned"] == params["clients"] and got["ari"] == want["ari"] is not None
    for key in ("test_accuracy", "test_loss", "test_accuracy_train_identity", "test_loss_train_identity",
                "test_accuracy_code", "threshold_chosen"):  # the last two: SR-FCA's public code, threshold 'auto'
        assert got.get(key) == pytest.approx(want.get(key), abs=1e-4), key
    assert set(got) == set(want) | {"flower"}  # nets run's record, plus what the Flower side cost
    # only the contract's message types went out
    assert {m.metadata.message_type for m in grid.sent} <= {"query.losses", "train", "query.gradient", "evaluate"}
    if params.get("batch_size"):  # nets run's minibatches: each train message carries the client's sample order
        trains = [m for m in grid.sent if m.metadata.message_type == "train"]
        assert trains and all("order" in m.content["config"] for m in trains)


def test_malformed_reply_loses_its_client_as_in_the_public_strategies():
    """A reply whose model does not fit the network loses its client (``reply_defect``, the public strategies'
    check) in that exchange, as a failing client: IFCA goes on with the round's other updates."""
    from flwr.app import Array, ArrayRecord

    params = {**BASE, "algo": "ifca"}

    def broken(message, context):
        reply = app(message, context)
        if (message.metadata.message_type == "train" and context.node_config["partition-id"] == 2
                and message.content["config"]["round"] == 1):
            reply.content["arrays"] = ArrayRecord({"w": Array(np.zeros(3, dtype=np.float32))})
        return reply

    strategy = strategy_for(params)
    strategy.start(InlineGrid(broken, params["clients"]))
    lost = strategy.record["flower"]["lost"]
    assert [(action, client) for _, action, client, _ in lost] == [("train", 2)]
    assert "do not fit the model" in lost[0][3]
    assert strategy.record["flower"]["rounds_without_answers"] == [] and strategy.record["test_accuracy"] is not None


def test_reply_for_another_partition_loses_its_client():
    """A SuperNode that answers for another partition than the one it described is lost in that exchange (its
    answer is not taken for the client's); the run goes on with the others."""
    params = {**BASE, "algo": "ifca", "rounds": 2}

    def confused(message, context):
        reply = app(message, context)
        if message.metadata.message_type == "train" and context.node_config["partition-id"] == 4:
            reply.content["metrics"]["partition-id"] = 1
        return reply

    strategy = strategy_for(params)
    strategy.start(InlineGrid(confused, params["clients"]))
    lost = strategy.record["flower"]["lost"]
    assert {(action, client, why) for _, action, client, why in lost} == {
        ("train", 4, "answered for another partition")} and len(lost) == 2  # once a round
    assert strategy.record["test_accuracy"] is not None


def test_local_client_lost_is_removed_and_the_others_keep_their_models():
    """Local: client 3's local model does not arrive; it is removed (unassigned), the other clients keep the local
    models of the one exchange and are scored with them, as nets run scores its own local models."""
    from nets.flower.arrays import split_clusters

    params = {**BASE, "algo": "local", "local_train_steps": 5}

    def fault(message, node):
        return "fail" if message.metadata.message_type == "train" and node == 4 else None  # partition 3

    whole = strategy_for(params)
    everyone = [whole._layout.flatten(r) for r in split_clusters(whole.start(InlineGrid(app, 6)).arrays)]
    strategy = strategy_for(params)
    with pytest.warns(ClientFailed, match="client 3 failed in train"):
        result = strategy.start(InlineGrid(app, params["clients"], fault=fault))
    got = strategy.record
    assert got["flower"]["removed_clients"] == [3] and strategy.labels.tolist() == [0, 1, 2, -1, 3, 4]
    assert got["n_clusters"] == 5 and got["unassigned"] == 1 and got["flower"]["exchanges"] == 3
    kept = [strategy._layout.flatten(r) for r in split_clusters(result.arrays)]
    assert len(kept) == 5 and all(np.array_equal(a, b) for a, b in zip(kept, np.delete(everyone, 3, 0), strict=True))
    assert got["test_accuracy"] is not None


def test_result_holds_the_models_as_the_public_strategies_do():
    """``start`` returns the public strategies' Result: one state_dict record per cluster model that cflab's network
    loads, and each node's cluster (the record's clustering) and partition."""
    from nets.flower.arrays import cluster_state_dict, split_clusters
    from nets.models import model_factory

    params = {**BASE, "algo": "ifca", "rounds": 1}
    strategy = strategy_for(params)
    result = strategy.start(InlineGrid(app, params["clients"]))
    k = len(split_clusters(result.arrays))  # the models, of which the record counts the used clusters
    assert k >= strategy.record["n_clusters"] >= 1 and strategy.labels.max() < k
    facts = strategy._facts()
    network = model_factory(facts["model"], tuple(facts["input_shape"]), facts["n_classes"], facts["vocab_size"])()
    network.load_state_dict(cluster_state_dict(result, 0))
    assignment, partitions = result.arrays["assignment"], result.arrays["partitions"]
    labels = [assignment[node] for node in sorted(partitions, key=lambda n: partitions[n])]
    assert labels == strategy.labels.tolist() and sorted(partitions.values()) == list(range(params["clients"]))


def test_template_client_app_is_a_contract_error_before_the_first_round():
    """A ClientApp from Flower's template (``train`` and ``evaluate`` only) cannot describe its partition: one
    ClientContractError naming the message type and the contract, as the public strategies raise it."""
    from nets.flower.clustered import ClientContractError
    from tests.test_flower_template_client import template_app

    strategy = strategy_for({**BASE, "algo": "ifca"})
    with pytest.raises(ClientContractError, match=r"no client answers query\.losses .*flower-contract\.md"):
        strategy.start(InlineGrid(template_app(), BASE["clients"]))


@pytest.mark.parametrize("dist", ["l2", "cross"])
def test_srfca_client_lost_in_one_shot_resumes(dist):
    """``nets flower``'s SR-FCA resumes (the estimator's rule for lost clients): client 2's ONE_SHOT local model
    does not arrive, so it is no node of ONE_SHOT's graph; with l2 it is asked for it again before the first REFINE
    and RECLUSTER places it, with cross it stays out; no client is removed."""
    # l2 distances of these networks' local models are far above the cross threshold: one cluster of all at 1e6
    params = {**BASE, **CASES["srfca-minibatch"], "batch_size": None, "dist": dist,
              "threshold": 1e6 if dist == "l2" else 1.0}
    trains: list[int] = []

    def fault(message, node):
        if message.metadata.message_type == "train":
            trains.append(node)
            return "fail" if node == 3 and trains.count(3) == 1 else None  # node 3 holds partition 2
        return None

    strategy = strategy_for(params, history=True)
    with pytest.warns(ClientFailed, match="client 2 failed in train"):
        strategy.start(InlineGrid(app, params["clients"], fault=fault))
    flower = strategy.record["flower"]
    assert [(a, c) for _, a, c, _ in flower["lost"]] == [("train", 2)]
    assert flower["removed_clients"] == [] and len(flower["lost"]) == 1
    assert strategy.round_labels[0][2] == -1 and (np.delete(strategy.round_labels[0], 2) >= 0).any()
    assert trains.count(3) == (2 if dist == "l2" else 1)
    assert (strategy.labels[2] >= 0) == (dist == "l2")
