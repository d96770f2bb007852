"""Malformed and non-finite client replies in the public clustered strategies (``nets.flower.clustered``).

A reply with arrays of the wrong shape, missing or extra arrays, no arrays, NaN or inf in its model or gradient, a
``num-examples`` that is a list, negative, zero or NaN, a ``partition-id`` that is NaN, a ``train-loss`` sent as
a list, or an evaluate metric sent as a list where the other clients send a number loses that client for that
exchange -- exactly as an error reply does: the run goes on, the cluster models and the round's metrics (the
client counted as lost) are those of the same run with an error reply in its place -- in IFCA (the client's and
the server's choice), CLoVE and SR-FCA, model and gradient averaging, every message type.
``accept_failures=False`` ends the run with one line naming the node, its partition and the defect.  A NaN in
``initial_arrays`` and a cluster count whose models cannot fit in memory are refused before the first round, in
one line.  The clients are the numpy ClientApp of ``tests/test_flower_clustered.py`` on the in-process grid;
skipped without the ``flower`` extra.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
pytest.importorskip("torch")

from flwr.app import Array, ArrayRecord, Message, MetricRecord, RecordDict  # noqa: E402

from nets.flower.arrays import Layout, split_clusters, stack_clusters  # noqa: E402
from nets.flower.clustered import (  # noqa: E402
    EVALUATE,
    GRADIENT,
    IFCA,
    LOSSES,
    SRFCA,
    TRAIN,
    CLoVE,
    RoundFailed,
)
from nets.flower.inline import InlineGrid  # noqa: E402
from tests.test_flower_clustered import TWO_GROUPS, fails, toy_app, toy_models  # noqa: E402

pytestmark = pytest.mark.flower


# ------------------------------------------------------------------ the defects
def _arrays(fn):
    """A defect of the reply's arrays: ``fn(ArrayRecord) -> ArrayRecord``, applied to every model of a stack."""
    def mutate(content: RecordDict) -> RecordDict:
        models = split_clusters(content["arrays"])
        out = [fn(m) for m in models]
        content["arrays"] = out[0] if len(out) == 1 and not any("/" in k for k in content["arrays"].keys()) \
            else stack_clusters(out)
        return content
    return mutate


def _each(record: ArrayRecord, fn) -> ArrayRecord:
    return ArrayRecord({k: Array(fn(v.numpy())) for k, v in record.items()})


def _metric(key: str, value):
    def mutate(content: RecordDict) -> RecordDict:
        metrics = dict(content["metrics"].items())
        metrics[key] = value
        content["metrics"] = MetricRecord(metrics)
        return content
    return mutate


def _no_arrays(content: RecordDict) -> RecordDict:
    return RecordDict({"metrics": content["metrics"]})


def _extra(record: ArrayRecord) -> ArrayRecord:
    out = _each(record, lambda a: a)
    out["extra"] = Array(np.zeros(1))
    return out


ARRAY_DEFECTS = {
    "wrong-shape": _arrays(lambda r: _each(r, lambda a: np.zeros(a.size + 1))),
    "missing-array": _arrays(lambda r: ArrayRecord({"v": Array(np.zeros(2))})),
    "extra-array": _arrays(_extra),
    "no-arrays": _no_arrays,
    "nan": _arrays(lambda r: _each(r, lambda a: np.full_like(a, np.nan))),
    "inf": _arrays(lambda r: _each(r, lambda a: np.full_like(a, np.inf))),
}
METRIC_DEFECTS = {
    "count-list": _metric("num-examples", [10]),
    "count-negative": _metric("num-examples", -10),
    "count-zero": _metric("num-examples", 0),
    "count-nan": _metric("num-examples", float("nan")),
    "partition-nan": _metric("partition-id", float("nan")),
    "loss-list": _metric("train-loss", [1.0, 2.0]),
}
EVALUATE_DEFECTS = {**METRIC_DEFECTS, "metric-list": _metric("eval-loss", [1.0, 2.0])}

# strategy -> (constructor, the message types its clients answer, with arrays or not)
STRATEGIES = {
    "ifca": (lambda **o: IFCA(n_clusters=2, **o), [TRAIN]),
    "ifca-gradient": (lambda **o: IFCA(n_clusters=2, averaging="gradient", **o), [GRADIENT]),
    "ifca-server-choice": (lambda **o: IFCA(n_clusters=2, client_choice=False, **o), [LOSSES, TRAIN]),
    "ifca-restarts": (lambda **o: IFCA(n_clusters=2, n_init=2, **o), [TRAIN, LOSSES]),
    "clove": (lambda **o: CLoVE(n_clusters=2, **o), [LOSSES, TRAIN]),
    "clove-gradient": (lambda **o: CLoVE(n_clusters=2, averaging="gradient", **o), [LOSSES, GRADIENT]),
    "srfca": (lambda **o: SRFCA(threshold=3.0, local_train_steps=1, local_step_size=0.25, n_refine=1,
                                trmean_steps=2, trmean_step_size=0.25, **o), [TRAIN, GRADIENT]),
}
NUM_ROUNDS = {"srfca": None}
START = {"ifca-restarts": ([1.0, 0.0], [-1.0, 0.0], [2.0, 0.0], [-2.0, 0.0]), "srfca": ([0.0, 0.0],)}


def _cases():
    for name, (_, types) in STRATEGIES.items():
        for kind in [*types, EVALUATE]:
            defects = EVALUATE_DEFECTS if kind == EVALUATE else METRIC_DEFECTS
            if kind in (TRAIN, GRADIENT):
                defects = {**ARRAY_DEFECTS, **defects}
            for defect in defects:
                yield name, kind, defect


def _round_of(message: Message) -> int | None:
    return message.content["config"]["server-round"] if "config" in message.content else None


# every exchange of a run (IFCA's server-round counts its exchanges: with restarts its final query.losses is the 4th)
EVERY = tuple(range(1, 10))


def malformed(node: int, kind: str, defect: str, rounds=EVERY):
    """The toy ClientApp whose ``node`` answers ``kind`` with ``defect`` in ``rounds``."""
    honest = toy_app(TWO_GROUPS, {0: 10, 1: 30, 2: 10, 3: 30})
    mutate = {**ARRAY_DEFECTS, **EVALUATE_DEFECTS}[defect]

    def app(message: Message, context) -> Message:
        reply = honest(message, context)
        if (int(context.node_id) == node and message.metadata.message_type == kind
                and _round_of(message) in rounds):
            reply = Message(mutate(reply.content), reply_to=message)
        return reply
    return app


def _run(name: str, app, fault=None, **options):
    make, _ = STRATEGIES[name]
    s = make(local_steps=1, lr=0.25, **options)
    start = START.get(name, ([1.0, 0.0], [-1.0, 0.0]))
    result = s.start(InlineGrid(app, 4, fault=fault), toy_models(*start), num_rounds=NUM_ROUNDS.get(name, 2),
                     timeout=5)
    return s, result


def _models(result) -> np.ndarray:
    return Layout(ArrayRecord({"w": Array(np.zeros(2))})).stack(split_clusters(result.arrays))


@pytest.mark.parametrize("name, kind, defect", list(_cases()))
def test_malformed_reply_loses_only_that_client_as_an_error_does(name, kind, defect):
    s, result = _run(name, malformed(2, kind, defect))
    s_err, result_err = _run(name, toy_app(TWO_GROUPS, {0: 10, 1: 30, 2: 10, 3: 30}),
                             fault=fails(2, kind, rounds=EVERY))
    assert s_err.lost, "the reference run loses the client"
    assert [(r, t, n) for r, t, n, _ in s.lost] == [(r, t, n) for r, t, n, _ in s_err.lost]
    models = _models(result)
    assert np.isfinite(models).all()
    assert np.array_equal(models, _models(result_err))
    assert result.train_metrics_clientapp == result_err.train_metrics_clientapp
    assert result.evaluate_metrics_clientapp == result_err.evaluate_metrics_clientapp
    assert s.labels == s_err.labels


@pytest.mark.parametrize("kind, defect, said", [
    (TRAIN, "nan", "non-finite"),
    (TRAIN, "wrong-shape", "shape"),
    (TRAIN, "count-negative", "num-examples"),
    (LOSSES, "partition-nan", "partition-id"),
    (EVALUATE, "metric-list", "eval-loss"),
])
def test_accept_failures_false_names_the_client_and_the_defect(kind, defect, said):
    name = "ifca" if kind != LOSSES else "clove"
    with pytest.raises(RoundFailed) as info:
        _run(name, malformed(2, kind, defect), accept_failures=False)
    line = str(info.value)
    assert "\n" not in line and "node 2" in line and kind in line and said in line
    if defect != "partition-nan":
        assert "partition 1" in line


@pytest.mark.parametrize("make", [
    lambda: IFCA(n_clusters=2),
    lambda: CLoVE(n_clusters=2),
    lambda: SRFCA(threshold=1.0),
])
@pytest.mark.parametrize("start", [
    toy_models([1.0, np.nan], [-1.0, 0.0]),
    ArrayRecord({"w": Array(np.array([np.inf, 0.0]))}),
])
def test_non_finite_initial_arrays_are_refused_up_front(make, start):
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    strategy = make()
    if isinstance(strategy, SRFCA) and len(split_clusters(start)) > 1:
        start = split_clusters(start)[0]
    with pytest.raises(ValueError, match="initial_arrays") as info:
        strategy.start(grid, start, num_rounds=None if isinstance(strategy, SRFCA) else 2)
    assert "\n" not in str(info.value) and "finite" in str(info.value)
    assert not grid.sent


@pytest.mark.parametrize("make", [
    lambda: IFCA(n_clusters=10**6),
    lambda: IFCA(n_clusters=1000, n_init=1000),
    lambda: CLoVE(n_clusters=10**6),
    lambda: CLoVE(n_clusters=None, max_clusters=10**6),
])
def test_cluster_count_beyond_memory_is_refused_before_allocating(make, monkeypatch):
    monkeypatch.setenv("CFLAB_MEMORY_LIMIT_MB", "512")
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    record = ArrayRecord({"w": Array(np.zeros(2)), "b": Array(np.zeros((3, 3), dtype=np.float32))})
    began = time.perf_counter()
    with pytest.raises(ValueError, match="memory") as info:
        make().start(grid, record, num_rounds=1)
    assert time.perf_counter() - began < 2.0  # refused before the models are made
    assert "\n" not in str(info.value) and "cluster models" in str(info.value)
    assert not grid.sent
