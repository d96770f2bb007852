"""Configuration precedence in the public clustered strategies (``nets.flower.clustered``): the strategy's
``local_steps`` and ``lr`` (SR-FCA's ``local_train_steps`` and ``local_step_size``) are defaults; an entry of
``train_config`` reaches the clients unchanged and is the value the round uses (with gradient averaging also the
server's step); the strategy's protocol keys (``server-round``, ``cluster``, ``choose``, ``runs``) stay its own.
The clients are the numpy ClientApp of ``tests/test_flower_clustered.py`` on the in-process grid; skipped without
the ``flower`` extra.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
pytest.importorskip("torch")

from flwr.app import Array, ArrayRecord, ConfigRecord  # noqa: E402

from nets.flower.arrays import Layout, split_clusters  # noqa: E402
from nets.flower.clustered import GRADIENT, IFCA, SRFCA, TRAIN, CLoVE  # noqa: E402
from nets.flower.inline import InlineGrid  # noqa: E402
from tests.test_flower_clustered import TWO_GROUPS, toy_app, toy_models, toy_update  # noqa: E402

pytestmark = pytest.mark.flower

LAYOUT = Layout(ArrayRecord({"w": Array(np.zeros(2))}))
START = [np.array([1.0, 0.0]), np.array([-1.0, 0.0])]


# the server-round of the train messages counts exchanges (the server's choice and CLoVE ask query.losses first)
@pytest.mark.parametrize("make, train_round", [(lambda **o: IFCA(n_clusters=2, **o), 1),
                                               (lambda **o: IFCA(n_clusters=2, client_choice=False, **o), 2),
                                               (lambda **o: CLoVE(n_clusters=2, **o), 2)])
def test_train_config_overrides_the_strategys_lr_and_local_steps(make, train_round):
    grid = InlineGrid(toy_app(TWO_GROUPS, {p: 10 for p in range(4)}), 4)
    s = make(evaluate_every=0)  # lr=0.1, local_steps=10 by default
    config = ConfigRecord({"lr": 0.05, "local-steps": 3, "mu": 0.01, "optimizer": "adam"})
    result = s.start(grid, toy_models(*START), num_rounds=1, train_config=config)
    sent = [m.content["config"] for m in grid.sent if m.metadata.message_type == TRAIN]
    assert sent and all(c["lr"] == 0.05 and c["local-steps"] == 3 and c["mu"] == 0.01 and c["optimizer"] == "adam"
                        and c["server-round"] == train_round for c in sent)
    models = LAYOUT.stack(split_clusters(result.arrays))
    by_part = {s.partitions[n]: c for n, c in s.labels.items()}
    for part in (0, 2):
        c = by_part[part]
        want = np.mean([toy_update(START[c], TWO_GROUPS[p], 3, 0.05) for p in (part, part + 1)], axis=0)
        assert np.allclose(models[c], want, rtol=0, atol=1e-12)


def test_train_config_lr_is_the_servers_step_with_gradient_averaging():
    grid = InlineGrid(toy_app(TWO_GROUPS, {p: 10 for p in range(4)}), 4)
    s = IFCA(n_clusters=2, averaging="gradient", evaluate_every=0)
    result = s.start(grid, toy_models(*START), num_rounds=1, train_config=ConfigRecord({"lr": 0.05}))
    assert all(m.content["config"]["lr"] == 0.05 for m in grid.sent if m.metadata.message_type == GRADIENT)
    models = LAYOUT.stack(split_clusters(result.arrays))
    g = {p: 2.0 * (START[0 if p < 2 else 1] - TWO_GROUPS[p]) for p in range(4)}
    assert np.allclose(models[0], START[0] - 0.05 / 4 * (g[0] + g[1]), rtol=0, atol=1e-12)


def test_train_config_overrides_srfca_local_training():
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    # threshold 1: 2 steps of 0.05 put the groups' local models 1.9 apart, so ONE_SHOT keeps them apart
    s = SRFCA(threshold=1.0, local_train_steps=100, local_step_size=0.1, n_refine=1, trmean_steps=1,
              evaluate_every=0)
    seen = {}
    s.start(grid, ArrayRecord({"w": Array(np.zeros(2))}), train_config=ConfigRecord({"lr": 0.05, "local-steps": 2}),
            evaluate_fn=lambda rnd, models: seen.setdefault(rnd, models) and None)
    sent = [m.content["config"] for m in grid.sent if m.metadata.message_type == TRAIN]
    assert sent and all(c["lr"] == 0.05 and c["local-steps"] == 2 for c in sent)
    # ONE_SHOT's cluster models (round 1): the means of their clients' local models, each 2 steps of 0.05 from 0
    one_shot = seen[1]
    models = split_clusters(one_shot)
    for node, c in one_shot["assignment"].items():
        p = s.partitions[int(node)]
        want = toy_update(np.zeros(2), TWO_GROUPS[p], 2, 0.05)
        assert np.allclose(models[c]["w"].numpy(), want, rtol=0, atol=1e-12)


def test_protocol_keys_stay_the_strategys():
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    s = IFCA(n_clusters=2, evaluate_every=0, client_choice=False)
    s.start(grid, toy_models(*START), num_rounds=1,
            train_config=ConfigRecord({"server-round": 7, "cluster": 5, "choose": "random"}))
    sent = [m.content["config"] for m in grid.sent if m.metadata.message_type == TRAIN]
    # server-round counts the exchanges (query.losses was the first) whatever train_config says
    assert all(c["server-round"] == 2 and c["cluster"] in (0, 1) and c["choose"] == "random" for c in sent)


@pytest.mark.parametrize("config, match", [({"lr": -1.0}, "lr"), ({"lr": float("inf")}, "lr"),
                                           ({"local-steps": -2}, "local-steps")])
def test_bad_train_config_values_are_refused(config, match):
    with pytest.raises(ValueError, match=match):
        IFCA(n_clusters=2).start(InlineGrid(toy_app(TWO_GROUPS), 4), toy_models(*START), num_rounds=1,
                                 train_config=ConfigRecord(config))
