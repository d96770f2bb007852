"""The public clustered strategies (``nets.flower.clustered``: IFCA, CLoVE, SR-FCA) with a user's own model and
ClientApp.

The strategies run Flower's own round loop (``Strategy.start``) on :class:`nets.flower.inline.InlineGrid`, which
hands each message to the ClientApp in this process, as Flower's engine would on an actor (no Ray: seconds, not
minutes).  Checked: with a user-defined ``nn.Module`` (not cflab's registry), ``initial_arrays`` from its
``state_dict`` and :func:`nets.flower.torch_client.torch_client_app`, every round's clustering equals ``nets
run``'s on the registry's equivalent MLP (same data, same initial models); on a numpy ClientApp whose answers are
known, a lost client leaves the aggregate's value, SR-FCA resumes, ``accept_failures=False`` ends the run, and
the hyper-parameters and initial arrays are checked.  Skipped without the ``flower`` extra.
"""

from __future__ import annotations

import copy
import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # before flwr is imported: no usage report from tests

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from torch import nn  # noqa: E402

from nets.flower.arrays import Layout, split_clusters, stack_clusters  # noqa: E402
from nets.flower.clustered import (  # noqa: E402
    GRADIENT,
    IFCA,
    LOSSES,
    SRFCA,
    TRAIN,
    CLoVE,
    RoundFailed,
    RunStopped,
)
from nets.flower.inline import InlineGrid  # noqa: E402

pytestmark = pytest.mark.flower


# ------------------------------------------------------------------ a numpy ClientApp with known answers
def toy_app(targets: dict[int, np.ndarray], counts: dict[int, int] | None = None) -> ClientApp:
    """Client ``p`` (its partition) has ``f_p(w) = ||w - t_p||^2`` and trains by ``steps`` gradient steps."""
    app = ClientApp()
    counts = counts or {}

    def facts(context):
        p = int(context.node_config["partition-id"])
        return p, targets[p], counts.get(p, 10)

    def reply(message, metrics, arrays=None):
        content = RecordDict({"metrics": MetricRecord(metrics)})
        if arrays is not None:
            content["arrays"] = arrays
        return Message(content, reply_to=message)

    def all_losses(message: Message, t: np.ndarray) -> list[float]:
        return [float(((r["w"].numpy() - t) ** 2).sum()) for r in split_clusters(message.content["arrays"])]

    def chosen(message: Message, t: np.ndarray) -> tuple[list[np.ndarray], dict]:
        """The model sent, or with choose="lowest-loss" the lowest-loss one of those sent in each run, and what to
        report."""
        if message.content["config"].get("choose") != "lowest-loss":
            return [message.content["arrays"]["w"].numpy()], {}
        out, runs = all_losses(message, t), int(message.content["config"].get("runs", 1))
        picks = [int(j) for j in np.argmin(np.reshape(out, (runs, -1)), axis=1)]
        models = split_clusters(message.content["arrays"])
        k = len(models) // runs
        return ([models[r * k + j]["w"].numpy() for r, j in enumerate(picks)],
                {"losses": out, "cluster": picks[0] if runs == 1 else picks})

    def arrays(ws: list[np.ndarray]) -> ArrayRecord:
        records = [ArrayRecord({"w": Array(w)}) for w in ws]
        return records[0] if len(records) == 1 else stack_clusters(records)

    @app.query("losses")
    def losses(message: Message, context: Context) -> Message:
        p, t, n = facts(context)
        return reply(message, {"losses": all_losses(message, t), "num-examples": n, "partition-id": p})

    @app.train()
    def train(message: Message, context: Context) -> Message:
        p, t, n = facts(context)
        cfg = message.content["config"]
        ws, choice = chosen(message, t)
        ws = [toy_update(w, t, int(cfg["local-steps"]), float(cfg["lr"])) for w in ws]
        return reply(message, {"num-examples": n, "partition-id": p, "train-loss": float(((ws[0] - t) ** 2).sum()),
                               **choice}, arrays(ws))

    @app.query("gradient")
    def gradient(message: Message, context: Context) -> Message:
        p, t, n = facts(context)
        ws, choice = chosen(message, t)
        return reply(message, {"num-examples": n, "partition-id": p, **choice}, arrays([2.0 * (w - t) for w in ws]))

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        p, t, n = facts(context)
        w = message.content["arrays"]["w"].numpy()
        return reply(message, {"num-examples": n, "eval-loss": float(((w - t) ** 2).sum())})

    return app


def toy_update(w: np.ndarray, t: np.ndarray, steps: int, lr: float) -> np.ndarray:
    """``steps`` gradient steps on ``||w - t||^2`` from ``w``."""
    for _ in range(steps):
        w = w - lr * 2.0 * (w - t)
    return w


def toy_models(*rows) -> ArrayRecord:
    return stack_clusters([ArrayRecord({"w": Array(np.asarray(r, dtype=np.float64))}) for r in rows])


def fails(node: int, message_type: str, rounds=(1,), how: str = "fail"):
    """A fault: ``node`` fails (or stays silent) on ``message_type`` in ``rounds``."""
    def fault(message: Message, dst: int):
        rnd = message.content["config"]["server-round"] if "config" in message.content else None
        if dst == node and message.metadata.message_type == message_type and rnd in rounds:
            return how
        return None
    return fault


TWO_GROUPS = {p: np.array([5.0, 0.0]) if p < 2 else np.array([-5.0, 0.0]) for p in range(4)}


# ------------------------------------------------------------------ lost clients leave the aggregate
STRATEGIES = {"ifca": (IFCA, {}), "ifca-server-choice": (IFCA, {"client_choice": False}), "clove": (CLoVE, {})}


def _two_group_round(strategy: str, lost, **options):
    """One round of IFCA (the client's choice, or the server's) or CLoVE on TWO_GROUPS (partitions 0, 1 and 2,
    3; 10, 30, 10, 30 examples) from two models; node 2 (partition 1) is lost by ``lost``.  Returns the run's
    strategy, result, final models, the starts and the clusters ``c0`` (partitions 0, 1) and ``c1`` (2, 3)."""
    counts = {0: 10, 1: 30, 2: 10, 3: 30}
    grid = InlineGrid(toy_app(TWO_GROUPS, counts), 4, fault=lost)
    cls, more = STRATEGIES[strategy]
    s = cls(n_clusters=2, lr=0.25, evaluate_every=0, **more, **options)
    start = [np.array([1.0, 0.0]), np.array([-1.0, 0.0])]
    result = s.start(grid, toy_models(*start), num_rounds=1, timeout=0.5)
    models = Layout(ArrayRecord({"w": Array(np.zeros(2))})).stack(split_clusters(result.arrays))
    by_part = {s.partitions[n]: c for n, c in s.history[-1]["labels"].items()}  # the round's assignment
    c0, c1 = by_part[0], by_part[2]
    # a client lost in the one message of the client's choice has no cluster this round
    assert by_part.get(1, c0) == c0 and by_part[3] == c1 and c0 != c1
    assert (1 in by_part) == (strategy != "ifca")
    return s, result, models, start, c0, c1


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("how", ["fail", "drop"])
def test_lost_client_leaves_the_aggregate(strategy, how):
    """Nodes 1, 2 (partitions 0, 1) are cluster 0; node 2 is lost in training: cluster 0's model is node 1's
    update, not its average with the model node 2 was sent."""
    # server-round counts exchanges: with the server's choice (and CLoVE) query.losses is the first, train the second
    s, result, models, start, c0, c1 = _two_group_round(
        strategy, fails(2, TRAIN, rounds=(1,) if strategy == "ifca" else (2,), how=how), local_steps=1)
    survivor = toy_update(start[c0], TWO_GROUPS[0], 1, 0.25)
    assert np.array_equal(models[c0], survivor)
    # the other cluster: both updates, weighted as the algorithm weighs (IFCA: equally; CLoVE: by num-examples)
    u2, u3 = (toy_update(start[c1], TWO_GROUPS[p], 1, 0.25) for p in (2, 3))
    w2, w3 = (10 / 40, 30 / 40) if strategy == "clove" else (0.5, 0.5)
    assert np.allclose(models[c1], w2 * u2 + w3 * u3, rtol=0, atol=1e-12)
    assert [(rnd, t, n) for rnd, t, n, _ in s.lost] == [(1, TRAIN, 2)]
    row = result.train_metrics_clientapp[1]
    assert row["answered"] == 3 and row["lost"] == 1


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_gradient_averaging_steps_along_the_gradients_that_arrived(strategy):
    """averaging="gradient" (IFCA option I, CLoVE option II): node 2 (partition 1) is lost in the gradient
    exchange; each model steps by lr along its answering clients' gradients (IFCA: each scaled by 1/|M_t|, the 3
    that answered; CLoVE: num-examples-weighted within the model)."""
    s, _, models, start, c0, c1 = _two_group_round(
        strategy, fails(2, GRADIENT, rounds=(1,) if strategy == "ifca" else (2,)), averaging="gradient")
    g = {p: 2.0 * (start[c0 if p < 2 else c1] - TWO_GROUPS[p]) for p in range(4)}
    if strategy != "clove":
        want0, want1 = start[c0] - 0.25 / 3 * g[0], start[c1] - 0.25 / 3 * (g[2] + g[3])
    else:
        want0, want1 = start[c0] - 0.25 * g[0], start[c1] - 0.25 * (10 / 40 * g[2] + 30 / 40 * g[3])
    assert np.allclose(models[c0], want0, rtol=0, atol=1e-12) and np.allclose(models[c1], want1, rtol=0, atol=1e-12)
    assert [(rnd, t, n) for rnd, t, n, _ in s.lost] == [(1, GRADIENT, 2)]


def test_clove_random_first_round_draws_from_the_seed():
    """first_round="random": round 1 gives each client the model the generator draws (as the estimator does), not
    the loss-vector clustering; later rounds cluster."""
    rng = np.random.default_rng(3)
    want = copy.deepcopy(rng).integers(2, size=4)
    s = CLoVE(n_clusters=2, lr=0.25, local_steps=1, first_round="random", seed=rng, evaluate_every=0)
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    s.start(grid, toy_models([1.0, 0.0], [-1.0, 0.0]), num_rounds=2)
    first = s.history[0]["labels"]
    assert [first[n] for n in sorted(first, key=lambda n: s.partitions[n])] == want.tolist()
    last = {s.partitions[n]: c for n, c in s.history[1]["labels"].items()}
    assert last[0] == last[1] != last[2] == last[3]
    with pytest.raises(ValueError, match="first_round"):
        CLoVE(n_clusters=2, first_round="guess")
    with pytest.raises(ValueError, match="averaging"):
        IFCA(n_clusters=2, averaging="median")


@pytest.mark.parametrize("client_choice, exchange", [(True, TRAIN), (False, LOSSES)])
def test_client_lost_before_its_choice_leaves_the_round_and_returns(client_choice, exchange):
    grid = InlineGrid(toy_app(TWO_GROUPS), 4, fault=fails(3, exchange, rounds=(1,)))
    s = IFCA(n_clusters=2, local_steps=1, lr=0.25, evaluate_every=0, client_choice=client_choice)
    result = s.start(grid, toy_models([1.0, 0.0], [-1.0, 0.0]), num_rounds=2)
    first, second = (h["labels"] for h in s.history)
    assert 3 not in first and 3 in second  # out of M_1, back in M_2
    assert result.train_metrics_clientapp[1]["answered"] == 3
    assert result.train_metrics_clientapp[2]["answered"] == 4


@pytest.mark.parametrize("averaging, exchange", [("model", TRAIN), ("gradient", GRADIENT)])
def test_ifca_client_choice_is_one_message_per_client_and_round(averaging, exchange):
    """IFCA's default: each round one message per client, carrying both models; no losses query in a round (one
    after the last, the estimator's final pass that gives each client its cluster); the same clusters and models
    as the server's choice (two exchanges a round)."""
    runs = {}
    for client_choice in (True, False):
        grid = InlineGrid(toy_app(TWO_GROUPS), 4)
        s = IFCA(n_clusters=2, local_steps=1, lr=0.25, evaluate_every=0, averaging=averaging,
                 client_choice=client_choice)
        result = s.start(grid, toy_models([1.0, 0.0], [-1.0, 0.0]), num_rounds=3)
        runs[client_choice] = (s, result, grid)
    (s, result, grid), (s2, result2, grid2) = runs[True], runs[False]
    assert sorted(_sent(grid, exchange)) == [(n, r) for n in (1, 2, 3, 4) for r in (1, 2, 3)]
    assert _sent(grid, LOSSES) == [(n, 4) for n in (1, 2, 3, 4)] and len(grid.sent) == 16
    assert all(len(split_clusters(m.content["arrays"])) == 2 for m in grid.sent)
    assert len(grid2.sent) == 28 and all(len(split_clusters(m.content["arrays"])) == 1
                                         for m in grid2.sent if m.metadata.message_type == exchange)
    assert sorted(_sent(grid2, exchange)) == [(n, r) for n in (1, 2, 3, 4) for r in (2, 4, 6)]
    assert [h["labels"] for h in s.history] == [h["labels"] for h in s2.history]
    assert np.array_equal(Layout(ArrayRecord({"w": Array(np.zeros(2))})).stack(split_clusters(result.arrays)),
                          Layout(ArrayRecord({"w": Array(np.zeros(2))})).stack(split_clusters(result2.arrays)))


def test_ifca_client_whose_choice_contradicts_its_losses_is_lost():
    """Node 2's lowest-loss model is model 0; a reply claiming model 1 leaves the round (its update is not
    averaged into either model)."""
    honest = toy_app(TWO_GROUPS)

    def app(message: Message, context: Context) -> Message:
        reply = honest(message, context)
        if int(context.node_id) == 2:
            reply.content["metrics"]["cluster"] = 1
        return reply

    s = IFCA(n_clusters=2, local_steps=1, lr=0.25, evaluate_every=0)
    result = s.start(InlineGrid(app, 4), toy_models([1.0, 0.0], [-1.0, 0.0]), num_rounds=1)
    assert [(rnd, t, n) for rnd, t, n, _ in s.lost] == [(1, TRAIN, 2)]
    assert "trained model 1 where its losses give model 0" in s.lost[0][3]
    assert 2 not in s.history[0]["labels"] and result.train_metrics_clientapp[1]["answered"] == 3
    models = Layout(ArrayRecord({"w": Array(np.zeros(2))})).stack(split_clusters(result.arrays))
    assert np.array_equal(models[0], toy_update(np.array([1.0, 0.0]), TWO_GROUPS[0], 1, 0.25))


@pytest.mark.parametrize("averaging", ["model", "gradient"])
def test_ifca_restarts_keep_the_run_of_lowest_total_loss(averaging):
    """n_init=2: run 0 starts both models right of both groups (every client picks model 0: one cluster), run 1
    one model on each side; each run is averaged on its own, and the final losses pick run 1, whose two models
    and clustering are the result."""
    s = IFCA(n_clusters=2, n_init=2, local_steps=1, lr=0.25, evaluate_every=1, averaging=averaging)
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    result = s.start(grid, toy_models([10.0, 0.0], [11.0, 0.0], [1.0, 0.0], [-1.0, 0.0]), num_rounds=3)
    first = s.history[0]["run-labels"]
    assert all(first[n][0] == 0 for n in first)  # run 0: every client on model 0
    assert s.best_run == 1 and s.run_losses[1] < s.run_losses[0]
    by_part = {s.partitions[n]: c for n, c in s.labels.items()}
    assert by_part[0] == by_part[1] != by_part[2] == by_part[3]
    final = Layout(ArrayRecord({"w": Array(np.zeros(2))})).stack(split_clusters(result.arrays))
    assert final.shape == (2, 2) and final[by_part[0]][0] > 0 > final[by_part[2]][0]
    sent = [m for m in grid.sent if m.metadata.message_type == (TRAIN if averaging == "model" else GRADIENT)]
    assert len(sent) == 12 and all(len(split_clusters(m.content["arrays"])) == 4 and m.content["config"]["runs"] == 2
                                   for m in sent)
    # the final pass that picks the run: exchange 6 (a train and an evaluation in each of rounds 1 and 2, train 3)
    assert _sent(grid, LOSSES) == [(n, 6) for n in (1, 2, 3, 4)]
    assert result.evaluate_metrics_clientapp[3]["evaluated"] == 4
    # the last round's evaluation scored each client on its cluster's model in that round's best run (run 1)
    want = np.mean([((final[by_part[p]] - TWO_GROUPS[p]) ** 2).sum() for p in range(4)])
    assert abs(result.evaluate_metrics_clientapp[3]["eval-loss"] - want) < 1e-12
    with pytest.raises(ValueError, match="client_choice=True"):
        IFCA(n_clusters=2, n_init=2, client_choice=False, averaging="gradient")
    with pytest.raises(ValueError, match="n_init"):
        IFCA(n_clusters=2, n_init=0)


def test_accept_failures_false_ends_the_run_at_the_lost_client():
    grid = InlineGrid(toy_app(TWO_GROUPS), 4, fault=fails(2, TRAIN))
    s = IFCA(n_clusters=2, local_steps=1, lr=0.25, accept_failures=False)
    with pytest.raises(RoundFailed, match=r"round 1: node 2 lost in train .*accept_failures=False"):
        s.start(grid, toy_models([1.0, 0.0], [-1.0, 0.0]), num_rounds=2)


@pytest.mark.parametrize("client_choice", [True, False])
def test_stop_ends_the_run_at_its_next_exchange(client_choice):
    s = IFCA(n_clusters=2, local_steps=1, lr=0.25, client_choice=client_choice)
    sent_at_stop = []

    def stop_in_round_2(message, node):
        if message.content["config"]["server-round"] == 2 and not sent_at_stop:
            s.stop()
            sent_at_stop.append(len(grid.sent))
        return None

    grid = InlineGrid(toy_app(TWO_GROUPS), 4, fault=stop_in_round_2)
    with pytest.raises(RunStopped):
        s.start(grid, toy_models([1.0, 0.0], [-1.0, 0.0]), num_rounds=5)
    assert len(grid.sent) == sent_at_stop[0] and max(h["round"] for h in s.history) <= 2 and not s.running


# ------------------------------------------------------------------ SR-FCA resumes
SIX = {0: np.array([5.0, 1.0]), 1: np.array([5.0, 1.2]), 2: np.array([5.0, 0.6]), 3: np.array([-5.0, 1.0]),
       4: np.array([-5.0, 1.2]), 5: np.array([-5.0, 0.8])}
SR = {"threshold": 1.0, "trmean_steps": 2, "n_refine": 2, "local_train_steps": 20, "local_step_size": 0.25,
      "trmean_step_size": 0.25, "beta": 0.0, "evaluate_every": 0}


def _sent(grid: InlineGrid, message_type: str) -> list[tuple[int, int]]:
    return [(int(m.metadata.dst_node_id), int(m.content["config"]["server-round"])) for m in grid.sent
            if m.metadata.message_type == message_type]


def test_srfca_client_lost_in_a_gradient_step_resumes():
    """Node 3 fails the first TrimmedMeanGD step (exchange 2): that step's cluster model moves by the other clients'
    gradient alone, no local model is asked again (no restart), and node 3 ends in its group."""
    grid = InlineGrid(toy_app(SIX), 6, fault=fails(3, GRADIENT, rounds=(2,)))
    s = SRFCA(**SR)
    s.start(grid, ArrayRecord({"w": Array(np.zeros(2))}))
    assert sorted(_sent(grid, TRAIN)) == [(n, 1) for n in range(1, 7)]  # ONE_SHOT's local models, once
    assert [(rnd, t, n) for rnd, t, n, _ in s.lost] == [(2, GRADIENT, 3)]  # REFINE 1: the estimator's round 2
    groups = {s.partitions[n]: c for n, c in s.labels.items()}
    assert groups[0] == groups[1] == groups[2] != groups[3] == groups[4] == groups[5]
    # the first step of node 3's cluster: the mean gradient of nodes 1, 2 (partitions 0, 1; beta = 0) at w_0 = 0,
    # the model node 1 is sent in the second step (exchange 3)
    want = 0.0 - 0.25 * np.mean([2.0 * (0.0 - SIX[p]) for p in (0, 1)], axis=0)
    sent = [m.content["arrays"]["w"].numpy() for m in grid.sent if m.metadata.message_type == GRADIENT
            and m.content["config"]["server-round"] == 3 and int(m.metadata.dst_node_id) == 1]
    assert len(sent) == 1 and np.allclose(sent[0], want, rtol=0, atol=1e-12)
    refine = s.history[1]  # REFINE 1's record
    assert refine["answered"] == 5 and refine["lost"] == 1
    assert s.num_rounds == 1 + 2 * 2 and s.status == "ok"


def test_srfca_client_lost_in_one_shot_is_asked_again():
    grid = InlineGrid(toy_app(SIX), 6, fault=fails(4, TRAIN, rounds=(1,)))
    s = SRFCA(**SR)
    s.start(grid, ArrayRecord({"w": Array(np.zeros(2))}))
    assert (4, 2) in _sent(grid, TRAIN) and len(_sent(grid, TRAIN)) == 7  # only node 4, again, in round 2
    assert s.history[0]["labels"][4] == -1  # not in ONE_SHOT's graph
    groups = {s.partitions[n]: c for n, c in s.labels.items()}
    assert groups[3] == groups[4] == groups[5] != groups[0]  # reclustered into its group at the first REFINE


def test_srfca_trimmed_mean_steps_are_projected_onto_w():
    """diameter D: each TrimmedMeanGD step ends with Alg. 3's projection onto W = {w : ||w - center|| <= D/2}.
    One REFINE of one step from w_0 = 0: each cluster's model is w_0 - eta * mean gradient, pulled back onto the
    sphere of radius 1 around (0, 1); without a diameter it stays at its unprojected step."""
    center = np.array([0.0, 1.0])
    got = {}
    for diameter in (2.0, None):
        seen = {}
        s = SRFCA(**{**SR, "n_refine": 1, "trmean_steps": 1}, diameter=diameter,
                  center=None if diameter is None else ArrayRecord({"w": Array(center)}))
        s.start(InlineGrid(toy_app(SIX), 6), ArrayRecord({"w": Array(np.zeros(2))}),
                evaluate_fn=lambda rnd, arrays, seen=seen: seen.setdefault(rnd, split_clusters(arrays)) and None)
        groups = {s.partitions[n]: c for n, c in s.labels.items()}
        assert groups[0] == groups[1] == groups[2] != groups[3] == groups[4] == groups[5]
        got[diameter] = {g: seen[2][groups[g]]["w"].numpy() for g in (0, 3)}
    for g, members in ((0, (0, 1, 2)), (3, (3, 4, 5))):
        step = 0.0 - 0.25 * np.mean([2.0 * (0.0 - SIX[p]) for p in members], axis=0)
        d = step - center
        assert np.linalg.norm(d) > 1.0  # the step leaves W
        assert np.allclose(got[None][g], step, rtol=0, atol=1e-12)
        assert np.allclose(got[2.0][g], center + d / np.linalg.norm(d), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="diameter"):
        SRFCA(threshold=1.0, diameter=-1.0)
    with pytest.raises(ValueError, match="give a diameter"):
        SRFCA(threshold=1.0, center=ArrayRecord({"w": Array(center)}))


def test_srfca_one_shot_on_known_distances():
    """Three groups far apart (distance 10), one of a single client (below min_size=2): ONE_SHOT keeps two
    clusters and leaves the single client unassigned; after the REFINEs it joins its nearest cluster."""
    targets = {0: [5.0, 0], 1: [5.0, 0], 2: [-5.0, 0], 3: [-5.0, 0], 4: [0.0, 8.0]}
    grid = InlineGrid(toy_app({p: np.array(t) for p, t in targets.items()}), 5)
    s = SRFCA(**{**SR, "threshold": 0.5})
    result = s.start(grid, ArrayRecord({"w": Array(np.zeros(2))}))
    first = {s.partitions[n]: c for n, c in s.history[0]["labels"].items()}
    assert first[0] == first[1] != first[2] == first[3] and first[4] == -1
    assert result.train_metrics_clientapp[1]["clusters"] == 2
    assert len(split_clusters(result.arrays)) == 2 and all(c >= 0 for c in s.labels.values())


# ------------------------------------------------------------------ initial arrays, hyper-parameters, metrics
def test_one_record_is_replicated_into_distinct_starts():
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    w = np.arange(6, dtype=np.float64)
    s = IFCA(n_clusters=3, local_steps=1, lr=0.1, evaluate_every=0, seed=1)
    s.start(grid, ArrayRecord({"w": Array(w), "b": Array(np.zeros(1))}), num_rounds=1)
    assert len(s.models) == 3
    starts = s.layout.stack(split_clusters(grid.sent[0].content["arrays"]))  # the first losses query's models
    assert np.array_equal(starts[0], np.r_[w, 0.0])
    for row in starts[1:]:  # a permutation of the same values, and not the record itself
        assert np.array_equal(np.sort(row[:6]), w) and not np.array_equal(row[:6], w) and row[6] == 0.0
    assert not np.array_equal(starts[1], starts[2])


@pytest.mark.parametrize("make, start, match", [
    (lambda: IFCA(n_clusters=2), toy_models([0, 0], [1, 1], [2, 2]), "holds 3 cluster models; IFCA needs 2"),
    (lambda: IFCA(n_clusters=2), ArrayRecord(), "initial_arrays is empty"),
    (lambda: SRFCA(threshold=1.0), toy_models([0, 0], [1, 1]), "holds 2 cluster models; SRFCA needs 1"),
])
def test_initial_arrays_are_checked(make, start, match):
    with pytest.raises(ValueError, match=match):
        make().start(InlineGrid(toy_app(TWO_GROUPS), 4), start)


def test_srfca_rounds_are_its_own():
    with pytest.raises(ValueError, match=r"num_rounds must be 1 \+ n_refine \* trmean_steps = 5"):
        SRFCA(threshold=1.0, n_refine=2, trmean_steps=2).start(InlineGrid(toy_app(TWO_GROUPS), 4),
                                                               ArrayRecord({"w": Array(np.zeros(2))}), num_rounds=3)


@pytest.mark.parametrize("make, match", [
    (lambda: IFCA(n_clusters=0), "n_clusters"),
    (lambda: IFCA(n_clusters=2, lr=0.0), "lr"),
    (lambda: IFCA(n_clusters=2, local_steps=0), "local_steps"),  # the estimator's tau >= 1
    (lambda: IFCA(n_clusters=2, fraction_train=1.5), "fraction_train"),
    (lambda: CLoVE(n_clusters=2, clustering="spectral"), "clustering"),
    (lambda: SRFCA(threshold=-1.0), "threshold"),
    (lambda: SRFCA(threshold=1.0, beta=0.5), "beta"),
    (lambda: SRFCA(threshold=1.0, dist="cosine"), "dist"),
    (lambda: IFCA(n_clusters=2, start_timeout=float("inf")), "start_timeout"),
])
def test_bad_hyper_parameters_name_themselves(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_too_few_nodes_is_one_timeout_naming_the_federation():
    s = IFCA(n_clusters=2, min_available_nodes=5, start_timeout=0.2)
    with pytest.raises(TimeoutError, match=r"4 nodes connected .*num-supernodes=5"):
        s.start(InlineGrid(toy_app(TWO_GROUPS), 4), toy_models([1, 0], [-1, 0]))


def test_result_holds_each_rounds_clusters_and_evaluation():
    grid = InlineGrid(toy_app(TWO_GROUPS), 4)
    result = IFCA(n_clusters=2, local_steps=1, lr=0.25, evaluate_every=2).start(
        grid, toy_models([1.0, 0.0], [-1.0, 0.0]), num_rounds=3)
    assert sorted(result.train_metrics_clientapp) == [1, 2, 3]
    row = result.train_metrics_clientapp[3]
    assert row["clusters"] == 2 and sorted(row["cluster-sizes"]) == [2, 2] and row["unassigned"] == 0
    assert sorted(result.evaluate_metrics_clientapp) == [2, 3]  # every 2nd round, and the last
    assert result.evaluate_metrics_clientapp[3]["evaluated"] == 4
    assert "partition-id" not in result.evaluate_metrics_clientapp[3]
    assert len(split_clusters(result.arrays)) == 2


# ------------------------------------------------------------------ a user's torch model against nets run
BASE = {"dataset": "digits-rotated", "clients": 8, "n_per_client": 30, "rounds": 3, "local_steps": 2, "seed": 0,
        "step_size": 0.3}
SRFCA_PARAMS = {"threshold": 1.0, "trmean_steps": 5, "local_train_steps": 60}


class UserMLP(nn.Module):
    """A user's network, not cflab's: the architecture of the registry's ``mlp`` (64 -> 200 -> 10)."""

    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(64, 200)
        self.out = nn.Linear(200, 10)

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x.flatten(1))))


def _record(vector: np.ndarray) -> ArrayRecord:
    """A flat vector of the registry's MLP (its parameters in order) as UserMLP's state_dict."""
    model = UserMLP()
    torch.nn.utils.vector_to_parameters(torch.as_tensor(np.asarray(vector), dtype=torch.float32),
                                        model.parameters())
    return ArrayRecord(model.state_dict())


def _nets_run(params: dict, monkeypatch) -> tuple[list[np.ndarray], dict]:
    """``nets run``'s labels at every monitor call, and what it drew: its initial models and the generator after
    them (IFCA, CLoVE), SR-FCA's w_0 and the local models' common start."""
    import nets.experiment as experiment
    import synth.algorithms.clove as clove_mod
    import synth.algorithms.ifca as ifca_mod
    import synth.algorithms.srfca as srfca_mod
    from nets.backend import TorchBackend

    seen, drawn = [], {}
    metrics = experiment._metrics
    monkeypatch.setattr(experiment, "_metrics",
                        lambda labels, truth: (seen.append(np.array(labels)), metrics(labels, truth))[1])
    for mod in (ifca_mod, clove_mod):
        def spy(backend, init, n_init, k, rng, _orig=mod.initial_models):
            out = _orig(backend, init, n_init, k, rng)
            drawn.update(init=np.array(out), rng=copy.deepcopy(rng))
            return out
        monkeypatch.setattr(mod, "initial_models", spy)
    validate = srfca_mod.SRFCA._validate

    def w0(self, backend):
        v = validate(self, backend)
        drawn["w0"] = np.array(v["w0"])
        return v

    monkeypatch.setattr(srfca_mod.SRFCA, "_validate", w0)
    local_models = TorchBackend.local_models

    def local(self, method="gd", steps=100, lr=0.1, init=None):
        drawn["local_start"] = self.model.init(self.seed).detach().cpu().numpy()
        return local_models(self, method, steps, lr, init)

    monkeypatch.setattr(TorchBackend, "local_models", local)
    experiment.run_experiment(params)
    monkeypatch.undo()
    return seen, drawn


@pytest.fixture(scope="module")
def user_app():
    """A user's ClientApp: UserMLP and DataLoaders over nets run's partitions of digits-rotated."""
    from torch.utils.data import DataLoader, TensorDataset

    import nets.experiment as experiment
    from nets.flower.torch_client import torch_client_app

    p = experiment.validate_params({**BASE, "algo": "ifca"})
    data_ss, _, _ = np.random.SeedSequence(p["seed"]).spawn(3)
    fed, _ = experiment._federation_that_fits(p, data_ss, explicit_n=True)

    def data(context):
        i = int(context.node_config["partition-id"])
        n, nt = int(fed.n_samples[i]), int(fed.n_test[i])
        train = TensorDataset(torch.as_tensor(fed.X[i][:n]), torch.as_tensor(fed.y[i][:n]))
        test = TensorDataset(torch.as_tensor(fed.X_test[i][:nt]), torch.as_tensor(fed.y_test[i][:nt]))
        return DataLoader(train, batch_size=n), DataLoader(test, batch_size=nt)  # full batch: nets run's steps

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch_client_app(UserMLP, data)
    torch.set_num_threads(threads)


DATA_CALLS: list[int] = []


def _counted_data(context):
    """Eight random samples per node; each call noted in DATA_CALLS (a module global: pickled by reference)."""
    DATA_CALLS.append(int(context.node_id))
    g = torch.Generator().manual_seed(int(context.node_config["partition-id"]))
    X, y = torch.randn(8, 64, generator=g), torch.randint(0, 10, (8,), generator=g)
    from torch.utils.data import DataLoader, TensorDataset

    return DataLoader(TensorDataset(X, y), batch_size=8), DataLoader(TensorDataset(X, y), batch_size=8)


def test_client_app_builds_each_nodes_data_once_though_sent_with_every_message():
    """Flower's simulation engine pickles the ClientApp into its actor with every message (Ray's cloudpickle, as
    here): the helper's network and loaders live in the process, so each node's data_fn runs once, not once per
    message."""
    cloudpickle = pytest.importorskip("ray.cloudpickle")
    from nets.flower.torch_client import torch_client_app

    DATA_CALLS.clear()
    app = torch_client_app(UserMLP, _counted_data)
    grid = InlineGrid(lambda message, context: cloudpickle.loads(cloudpickle.dumps(app))(message, context), 3)
    IFCA(n_clusters=2, n_init=1, local_steps=1, evaluate_every=1).start(grid, ArrayRecord(UserMLP().state_dict()),
                                                                        num_rounds=3)
    assert len(grid.sent) == 21 and sorted(DATA_CALLS) == [1, 2, 3]  # 3 train, 3 evaluate, the final losses
    # in a process that has not built it (an actor), the app is built from its pickled arguments, once
    import nets.flower.torch_client as torch_client

    blob = cloudpickle.dumps(app)
    torch_client._APPS.clear()
    copy = cloudpickle.loads(blob)
    assert copy is not app and cloudpickle.loads(blob) is copy
    assert copy._arguments[0] is UserMLP and copy._arguments[2]["local_steps"] == 10


@pytest.mark.parametrize("algo, averaging, more", [
    ("ifca", "model", {}), ("ifca", "model", {"client_choice": False}), ("clove", "model", {}),
    ("srfca", "model", {}), ("ifca", "gradient", {}), ("clove", "gradient", {})])
def test_user_model_clusters_as_nets_run_every_round(algo, averaging, more, user_app, monkeypatch):
    params = {**BASE, "algo": algo, "averaging": averaging, **(SRFCA_PARAMS if algo == "srfca" else {})}
    want, drawn = _nets_run(params, monkeypatch)
    grid = InlineGrid(user_app, BASE["clients"])
    if algo == "srfca":
        s = SRFCA(threshold=1.0, trmean_steps=5, local_train_steps=60, local_step_size=0.3, trmean_step_size=0.3,
                  dist="cross", evaluate_every=0, local_start=_record(drawn["local_start"]))
        s.start(grid, _record(drawn["w0"]))
        decided = [1, 2, 3]  # the estimator's rounds: ONE_SHOT's C_0 and each REFINE's C_1, C_2
    else:
        cls = IFCA if algo == "ifca" else CLoVE
        s = cls(n_clusters=4, local_steps=2, lr=0.3, seed=drawn["rng"], evaluate_every=0, averaging=averaging,
                **more)
        s.start(grid, stack_clusters([_record(v) for v in drawn["init"][0]]), num_rounds=3)
        decided = [1, 2, 3]
    got = []
    for row in s.history:
        if row["round"] in decided:
            labels = np.full(BASE["clients"], -1)
            for node, c in row["labels"].items():
                labels[s.partitions[node]] = c
            got.append(labels)
    assert len(got) == len(want) == 3
    for t, (a, b) in enumerate(zip(got, want, strict=True)):
        assert np.array_equal(a, b), f"round {decided[t]}: flower {a.tolist()} != nets run {b.tolist()}"
    assert len({c for c in want[-1] if c >= 0}) >= 2  # a clustering, not one blob


def test_user_model_ifca_restarts_as_nets_run(user_app, monkeypatch):
    """IFCA with two restarts (n_init=2): every round, every run's clustering equals nets run's (the two runs
    cluster differently here), and the final pass picks the same run with the same clusters."""
    import synth.algorithms.ifca as ifca_mod

    params = {**BASE, "algo": "ifca", "n_init": 2}
    final = {}
    finish = ifca_mod.IFCA._finish

    def keep(self, *args, **kwargs):
        finish(self, *args, **kwargs)
        final.update(labels=np.array(self.result_.labels), best=int(self.result_.extra["best_run"]))

    monkeypatch.setattr(ifca_mod.IFCA, "_finish", keep)
    want, drawn = _nets_run(params, monkeypatch)  # one monitor call per run and round: run 0, run 1, run 0, ...
    assert drawn["init"].shape[:2] == (2, 4) and len(want) == 2 * BASE["rounds"]
    s = IFCA(n_clusters=4, n_init=2, local_steps=2, lr=0.3, seed=drawn["rng"], evaluate_every=0)
    s.start(InlineGrid(user_app, BASE["clients"]),
            stack_clusters([_record(v) for v in drawn["init"].reshape(8, -1)]), num_rounds=BASE["rounds"])
    for t, row in enumerate(s.history):
        for run in range(2):
            labels = np.full(BASE["clients"], -1)
            for node, runs in row["run-labels"].items():
                labels[s.partitions[node]] = runs[run]
            assert np.array_equal(labels, want[2 * t + run]), f"round {t + 1}, run {run}"
    labels = np.full(BASE["clients"], -1)
    for node, c in s.labels.items():
        labels[s.partitions[node]] = c
    assert s.best_run == final["best"] and np.array_equal(labels, final["labels"])


def test_clove_unknown_k_prunes_to_the_groups():
    """CLoVE's unknown-K mode (n_clusters=None, the estimator's): three models on two groups of three clients; the
    model no client cluster is matched to is pruned, and the result holds the two groups' models."""
    s = CLoVE(n_clusters=None, max_clusters=3, local_steps=1, lr=0.25, evaluate_every=0)
    result = s.start(InlineGrid(toy_app(SIX), 6), toy_models([5.0, 0.0], [-5.0, 0.0], [0.0, 9.0]), num_rounds=3)
    by_part = {s.partitions[n]: c for n, c in s.labels.items()}
    assert len(split_clusters(result.arrays)) == 2 and len(s.models) == 2
    assert by_part[0] == by_part[1] == by_part[2] != by_part[3] == by_part[4] == by_part[5]
