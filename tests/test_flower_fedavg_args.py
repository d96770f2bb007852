"""Flower ``FedAvg``'s constructor arguments in the public clustered strategies (``nets.flower.clustered``), with
FedAvg's meaning: ``min_train_nodes`` / ``min_evaluate_nodes`` (the fewest nodes sampled), ``fraction_evaluate=0``
(no federated evaluation), ``weighted_by_key`` (the reply metric that counts a client's samples),
``arrayrecord_key`` / ``configrecord_key`` (the records' keys in messages and replies) and the metric
aggregation functions; and SR-FCA's distribution of pairwise distances before ONE_SHOT (logged and in round 1's
metrics), from which a threshold is chosen.  The clients are the numpy ClientApp of
``tests/test_flower_clustered.py`` on the in-process grid; skipped without the ``flower`` extra.
"""

from __future__ import annotations

import logging
import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
pytest.importorskip("torch")

from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict  # noqa: E402

from nets.flower.arrays import Layout, split_clusters  # noqa: E402
from nets.flower.clustered import EVALUATE, IFCA, SRFCA, TRAIN, CLoVE  # noqa: E402
from nets.flower.inline import InlineGrid  # noqa: E402
from tests.test_flower_clustered import TWO_GROUPS, toy_app, toy_models  # noqa: E402

pytestmark = pytest.mark.flower

LAYOUT = Layout(ArrayRecord({"w": Array(np.zeros(2))}))
START = ([1.0, 0.0], [-1.0, 0.0])
COUNTS = {0: 10, 1: 30, 2: 10, 3: 30}
SPREAD = {0: np.array([5.0, 0.0]), 1: np.array([6.0, 1.0]), 2: np.array([-5.0, 0.0]), 3: np.array([-6.0, 1.0])}


def _asked(grid: InlineGrid, kind: str, rnd: int) -> int:
    return sum(1 for m in grid.sent if m.metadata.message_type == kind and m.content["config"]["server-round"] == rnd)


def _per_exchange(grid: InlineGrid, kind: str) -> list[int]:
    """The nodes asked in each exchange of ``kind``, exchange after exchange."""
    rounds = [m.content["config"]["server-round"] for m in grid.sent if m.metadata.message_type == kind]
    return [rounds.count(r) for r in sorted(set(rounds))]


def test_min_train_and_evaluate_nodes_as_fedavg():
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    IFCA(n_clusters=2, local_steps=1, lr=0.25, fraction_train=0.25, min_train_nodes=3, fraction_evaluate=0.25,
         min_evaluate_nodes=2).start(grid, toy_models(*START), num_rounds=2)
    # IFCA's server-round counts exchanges: each train exchange (one a round) asks 3, each evaluation 1 or 2
    assert _per_exchange(grid, TRAIN) == [3, 3]
    assert len(_per_exchange(grid, EVALUATE)) == 2 and all(1 <= n <= 2 for n in _per_exchange(grid, EVALUATE))
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    result = CLoVE(n_clusters=2, local_steps=1, lr=0.25, fraction_evaluate=0.0).start(grid, toy_models(*START),
                                                                                      num_rounds=2)
    assert _asked(grid, EVALUATE, 1) == 0 and not result.evaluate_metrics_clientapp
    with pytest.raises(ValueError, match="min_train_nodes"):
        IFCA(n_clusters=2, min_train_nodes=0)


KEYS_SEEN: list[set[str]] = []


def _renamed(app, count_key: str | None = None, arrays_key: str = "arrays", config_key: str = "config"):
    """The toy app behind other record keys: ``count_key`` for num-examples, ``arrays_key`` / ``config_key``."""
    def call(message: Message, context) -> Message:
        content = message.content
        KEYS_SEEN.append(set(content.keys()))
        if arrays_key != "arrays":
            content["arrays"] = content[arrays_key]
        if config_key != "config":
            content["config"] = content[config_key]
        reply = app(message, context)
        out = reply.content
        if count_key is not None:
            metrics = dict(out["metrics"].items())
            metrics[count_key] = metrics.pop("num-examples")
            out["metrics"] = MetricRecord(metrics)
        if arrays_key != "arrays" and "arrays" in out.array_records:
            out = RecordDict({arrays_key: out["arrays"], "metrics": out["metrics"]})
        return Message(out, reply_to=message)
    return call


@pytest.mark.parametrize("averaging", ["model", "gradient"])
def test_weighted_by_key_and_record_keys_as_fedavg(averaging):
    def run(app, **options):
        grid = InlineGrid(app, 4)
        s = CLoVE(n_clusters=2, local_steps=1, lr=0.25, averaging=averaging, **options)
        result = s.start(grid, toy_models(*START), num_rounds=2)
        return s, result, grid

    s0, r0, _ = run(toy_app(SPREAD, COUNTS))
    s1, r1, _ = run(_renamed(toy_app(SPREAD, COUNTS), count_key="n"), weighted_by_key="n")
    KEYS_SEEN.clear()
    s2, r2, grid = run(_renamed(toy_app(SPREAD, COUNTS), arrays_key="model", config_key="cfg"),
                       arrayrecord_key="model", configrecord_key="cfg")
    assert KEYS_SEEN and all(keys == {"model", "cfg"} for keys in KEYS_SEEN)
    want = LAYOUT.stack(split_clusters(r0.arrays))
    for s, r in ((s1, r1), (s2, r2)):
        assert not s.lost
        assert np.array_equal(LAYOUT.stack(split_clusters(r.arrays)), want)
        assert r.evaluate_metrics_clientapp == r0.evaluate_metrics_clientapp
    # CLoVE's weights are the counts: with equal counts the models differ
    s3, r3, _ = run(toy_app(SPREAD))
    assert not np.array_equal(LAYOUT.stack(split_clusters(r3.arrays)), want)


def test_metric_aggregation_functions_as_fedavg():
    seen = {}

    def train_fn(records: list[RecordDict], key: str) -> MetricRecord:
        seen["train"] = (len(records), key)
        return MetricRecord({"replies": len(records), "answered": -1})

    def evaluate_fn(records: list[RecordDict], key: str) -> MetricRecord:
        seen["evaluate"] = (len(records), key)
        return MetricRecord({"evaluators": len(records)})

    result = IFCA(n_clusters=2, local_steps=1, lr=0.25, train_metrics_aggr_fn=train_fn,
                  evaluate_metrics_aggr_fn=evaluate_fn).start(InlineGrid(toy_app(TWO_GROUPS), 4),
                                                              toy_models(*START), num_rounds=1)
    row = result.train_metrics_clientapp[1]
    assert row["replies"] == 4 and row["answered"] == 4  # the strategy's own keys win
    assert result.evaluate_metrics_clientapp[1]["evaluators"] == 4
    assert seen == {"train": (4, "num-examples"), "evaluate": (4, "num-examples")}


def test_srfca_logs_the_pairwise_distances_before_one_shot(caplog):
    s = SRFCA(threshold=1.0, local_train_steps=1, local_step_size=0.25, n_refine=1, trmean_steps=1)
    with caplog.at_level(logging.INFO, logger="flwr"):
        result = s.start(InlineGrid(toy_app(TWO_GROUPS), 4), ArrayRecord({"w": Array(np.zeros(2))}))
    # local models: 0.5 * target, i.e. (+-2.5, 0): 2 pairs at distance 0, 4 at distance 5
    q = result.train_metrics_clientapp[1]["distance-quantiles"]
    assert np.allclose(q, np.quantile([0, 0, 5, 5, 5, 5], [0, 0.1, 0.25, 0.5, 0.75, 0.9, 1]))
    assert s.distance_quantiles == q
    line = next(r.getMessage() for r in caplog.records if "ONE_SHOT: pairwise" in r.getMessage())
    assert "median 5" in line and "max 5" in line and "threshold 1" in line
