"""The public clustered strategies' options for ``nets flower``'s runs (issue #55: one driver).

``stacks``: the server's operations on model stacks on a :class:`nets.backend.TorchBackend` (``nets run``'s stacks)
instead of float64 numpy rows.  The estimator (:mod:`synth.algorithms`) takes the same decisions on either: with a
float64 torch backend the models and clusters equal the numpy run's (IFCA with restarts and both averagings,
CLoVE, SR-FCA, whose ONE_SHOT and REFINE use the backend's distances, trimmed means, steps and projections); a
float32 backend keeps the clusters and the models within float32's rounding.  ``lr_decay``: each round's step
size in the ``train`` messages.  ``init``: the starting models drawn from the seed, as ``nets run``'s.
``monitor``: the estimator's monitor (``nets run``'s history).  In process (InlineGrid); skipped without the
``flower`` extra.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

from flwr.app import ArrayRecord  # noqa: E402
from torch import nn  # noqa: E402

from nets.backend import TorchBackend  # noqa: E402
from nets.flower.arrays import Layout, split_clusters  # noqa: E402
from nets.flower.clustered import IFCA, SRFCA, CLoVE  # noqa: E402
from nets.flower.inline import InlineGrid  # noqa: E402
from nets.flower.torch_client import torch_client_app  # noqa: E402
from nets.functional import FunctionalModel  # noqa: E402
from tests.test_flower_batchnorm import N_NODES, load_data  # noqa: E402

pytestmark = pytest.mark.flower


def _layers() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(36, 4), nn.Tanh(), nn.Linear(4, 2))


def _net() -> nn.Module:
    torch.manual_seed(0)  # every build the same (initial_arrays): the clients load the server's models anyway
    return _layers()


def _stacks(dtype: torch.dtype) -> TorchBackend:
    """A TorchBackend of the clients' network holding no client data (a placeholder sample), as nets flower's; its
    ``init`` seeds torch before it builds the network (``_net`` would undo that)."""
    return TorchBackend(FunctionalModel(_layers, "ce", dtype=dtype), torch.zeros((1, 1, 1, 6, 6), dtype=dtype))


CASES = {
    "ifca-model-restarts": (lambda **o: IFCA(n_clusters=2, n_init=2, local_steps=2, lr=0.2, **o), 3),
    "ifca-gradient-server-choice": (lambda **o: IFCA(n_clusters=2, averaging="gradient", client_choice=False,
                                                     lr=0.5, **o), 3),
    "clove": (lambda **o: CLoVE(n_clusters=2, local_steps=2, lr=0.2, **o), 3),
    "srfca": (lambda **o: SRFCA(threshold="auto", local_train_steps=5, local_step_size=0.2, trmean_steps=2,
                                n_refine=1, **o), None),
}


def _run(name: str, stacks=None) -> tuple[np.ndarray, dict]:
    make, rounds = CASES[name]
    s = make(stacks=stacks, seed=0)
    result = s.start(InlineGrid(torch_client_app(_net, load_data), N_NODES), ArrayRecord(_net().state_dict()),
                     num_rounds=rounds)
    layout = Layout(ArrayRecord(_net().state_dict()))
    sent = np.stack([layout.flatten(r) for r in split_clusters(result.arrays)])  # in the network's float32
    assert np.array_equal(sent, s.models.astype(np.float32))
    assert s.models.dtype == np.float64
    return s.models, dict(s.labels)


@pytest.mark.parametrize("name", list(CASES))
def test_torch_stacks_take_the_numpy_stacks_decisions(name):
    want_models, want_labels = _run(name)
    models, labels = _run(name, _stacks(torch.float64))
    assert labels == want_labels
    np.testing.assert_allclose(models, want_models, rtol=0, atol=1e-10)
    models32, labels32 = _run(name, _stacks(torch.float32))
    assert labels32 == want_labels
    np.testing.assert_allclose(models32, want_models, rtol=0, atol=1e-4)


def test_stacks_must_hold_the_model():
    with pytest.raises(TypeError, match="stacks must be None or a nets.backend.TorchBackend"):
        IFCA(n_clusters=2, stacks=object())
    other = TorchBackend(FunctionalModel(lambda: nn.Linear(3, 2)), torch.zeros((1, 1, 3)))
    s = IFCA(n_clusters=2, n_init=1, stacks=other)
    with pytest.raises(ValueError, match="stacks hold models of 8 parameters; the model has 158"):
        s.start(InlineGrid(torch_client_app(_net, load_data), N_NODES), ArrayRecord(_net().state_dict()),
                num_rounds=1)


@pytest.mark.parametrize("make", [lambda **o: IFCA(n_clusters=2, n_init=1, **o),
                                  lambda **o: IFCA(n_clusters=2, client_choice=False, **o),
                                  lambda **o: CLoVE(n_clusters=2, **o)], ids=["ifca", "ifca-server-choice", "clove"])
def test_lr_decay_sends_each_rounds_step_size(make):
    """``lr_decay``: every ``train`` message of round t carries ``lr * lr_decay**t`` (nets run's local steps),
    whether the client chooses its model in that message or the server chose it."""
    grid = InlineGrid(torch_client_app(_net, load_data), N_NODES)
    make(local_steps=1, lr=0.4, lr_decay=0.5, seed=0).start(grid, ArrayRecord(_net().state_dict()), num_rounds=3)
    trains = [m.content["config"]["lr"] for m in grid.sent if m.metadata.message_type == "train"]
    assert len(trains) == 3 * N_NODES  # every client in every round
    assert trains == pytest.approx([0.4 * 0.5 ** (a // N_NODES) for a in range(len(trains))], rel=1e-12)


def test_lr_decay_takes_the_same_decisions_whoever_chooses():
    """IFCA's client choice with ``lr_decay`` trains what the server's choice trains (the same models)."""
    runs = []
    for choice in (True, False):
        s = IFCA(n_clusters=2, n_init=1, client_choice=choice, local_steps=2, lr=0.4, lr_decay=0.7, seed=0)
        s.start(InlineGrid(torch_client_app(_net, load_data), N_NODES), ArrayRecord(_net().state_dict()),
                num_rounds=3)
        runs.append((s.models, s.labels))
    assert runs[0][1] == runs[1][1]
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=0, atol=1e-12)


def test_lr_decay_is_a_factor_in_0_1():
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="lr_decay"):
            IFCA(n_clusters=2, lr_decay=bad)


@pytest.mark.parametrize("make", [lambda **o: IFCA(n_clusters=2, n_init=2, local_steps=1, lr=0.3, **o),
                                  lambda **o: CLoVE(n_clusters=2, local_steps=1, lr=0.3, fraction_train=0.5, **o)],
                         ids=["ifca-restarts", "clove-sampled"])
def test_init_draws_the_starts_from_the_seed_as_nets_run(make):
    """``init="default"``: the starts are :func:`~synth.algorithms.common.initial_models`' draw from the seed
    (``nets run``'s), and the run goes on with the seed's stream after it (CLoVE's sampling): the same run as the
    drawn models passed as ``initial_arrays`` with the stream where the draw left it."""
    from synth.algorithms.common import initial_models
    from synth.validation import check_random_state

    stacks = _stacks(torch.float32)  # float32 draws: the layout's records carry them exactly
    layout = Layout(ArrayRecord(_net().state_dict()))
    drawn = make(stacks=stacks, init="default", seed=3)
    runs, k = drawn._runs(), drawn.n_clusters
    drawn.start(InlineGrid(torch_client_app(_net, load_data), N_NODES), ArrayRecord(_net().state_dict()),
                num_rounds=3)
    rng = check_random_state(3)
    starts = initial_models(stacks, "default", runs, k, rng).reshape(runs * k, -1)
    assert not np.allclose(starts[0], layout.flatten(ArrayRecord(_net().state_dict())))  # not initial_arrays'
    given = make(stacks=stacks, seed=rng)
    given.start(InlineGrid(torch_client_app(_net, load_data), N_NODES), layout.record(starts), num_rounds=3)
    assert drawn.labels == given.labels
    np.testing.assert_array_equal(drawn.models, given.models)


def test_init_needs_stacks():
    with pytest.raises(ValueError, match="pass stacks"):
        IFCA(n_clusters=2, init="default")
    with pytest.raises(TypeError, match="init must be None or a scheme"):
        IFCA(n_clusters=2, init=3, stacks=_stacks(torch.float32))


@pytest.mark.parametrize("stacks", [None, torch.float64], ids=["numpy", "torch"])
def test_monitor_sees_every_runs_round_as_the_records(stacks):
    """``monitor``: called once per run after each round with that run's models (float64 rows) and labels;
    the round's records show the best run's labels (IFCA Sec. VI-A), which the monitor saw."""
    calls = []

    def watch(t, models, labels):
        calls.append((t, models, np.array(labels)))
        return {"seen": t}

    s = IFCA(n_clusters=2, n_init=2, local_steps=1, lr=0.3, seed=0, monitor=watch,
             stacks=None if stacks is None else _stacks(stacks))
    s.start(InlineGrid(torch_client_app(_net, load_data), N_NODES), ArrayRecord(_net().state_dict()), num_rounds=3)
    assert [t for t, _, _ in calls] == [0, 0, 1, 1, 2, 2]
    assert all(isinstance(m, np.ndarray) and m.dtype == np.float64 and m.shape == (2, s.layout.n_params)
               for _, m, _ in calls)
    nodes = s._federation
    for t, row in enumerate(s.history):
        seen = calls[2 * t + row["best-run"]][2]
        assert row["labels"] == {nodes[i]: int(c) for i, c in enumerate(seen) if c >= 0}
    with pytest.raises(TypeError, match="monitor must be a function"):
        IFCA(n_clusters=2, monitor=3)


# ------------------------------------------------------------------ IFCA's restarts over step sizes
def full_batch_data(context):
    """``load_data``'s partitions in one batch each: the clients' local steps are full-batch gradient steps, those
    of the in-process estimator's backend."""
    from tests.test_flower_batchnorm import _data

    x, y = _data(int(context.node_config["partition-id"]))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=len(y))
    return loader, loader


def in_process_backend() -> TorchBackend:
    """The federation of ``full_batch_data`` in this process (client i: partition i, node i + 1), float32 as the
    clients' network: what ``nets run`` fits the estimator on."""
    from tests.test_flower_batchnorm import _data

    parts = [_data(i) for i in range(N_NODES)]
    return TorchBackend(FunctionalModel(_layers, "ce", dtype=torch.float32),
                        torch.stack([x for x, _ in parts]), torch.stack([y for _, y in parts]))


def drawn_starts(n: int, seed: int = 1) -> np.ndarray:
    """``n`` starting models of ``_net``'s layout, float32 values (they travel exactly)."""
    layout = Layout(ArrayRecord(_net().state_dict()))
    rows = np.random.default_rng(seed).normal(scale=0.5, size=(n, layout.n_params))
    return rows.astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("averaging, client_choice", [("model", True), ("model", False), ("gradient", True)])
def test_ifca_restarts_over_step_sizes_are_the_estimators(averaging, client_choice):
    """``step_sizes``: ``n_init`` starts x step sizes, run r from start r // S at step size r % S (IFCA Sec. VI-A,
    ``nets run``'s ``step_size`` list): the clusters, the run kept, its step size and its models are those of
    the estimator (:class:`synth.algorithms.ifca.IFCA`) fitted in this process on the same data and starts,
    whether each client trains its model of every run from one message or the server sends each run's."""
    from synth.algorithms.ifca import IFCA as Estimator

    k, n_init, steps, rounds = 2, 2, [0.05, 0.8], 3
    starts = drawn_starts(n_init * k)
    layout = Layout(ArrayRecord(_net().state_dict()))
    grid = InlineGrid(torch_client_app(_net, full_batch_data), N_NODES)
    s = IFCA(n_clusters=k, n_init=n_init, step_sizes=steps, local_steps=2, averaging=averaging, seed=0,
             evaluate_every=0, client_choice=client_choice)
    s.start(grid, layout.record(starts), num_rounds=rounds)
    est = Estimator(n_clusters=k, n_rounds=rounds, step_size=steps, averaging=averaging, local_steps=2,
                    init=starts.reshape(n_init, k, -1), n_init=n_init, random_state=0).fit(in_process_backend())
    assert s.best_run == est.result_.extra["best_run"]
    assert s.best_step_size == steps[s.best_run % len(steps)]
    np.testing.assert_allclose(s.run_losses, est.result_.extra["run_losses"], rtol=1e-5)
    assert [s.labels[node] for node in s._federation] == est.labels_.tolist()
    np.testing.assert_allclose(s.models, est.models_, rtol=0, atol=1e-5)
    # every round every run's clusters: the monitor's per run, run after run, the estimator's order
    assert all(len(row["run-labels"][1]) == n_init * len(steps) for row in s.history)
    sent = [m.content["config"]["lr"] for m in grid.sent if m.metadata.message_type == "train"]
    if averaging == "model" and client_choice:  # each train message carries run r's step size at index r
        assert sent and all(list(v) == steps * n_init for v in sent)
    elif averaging == "model":  # one train exchange per run and round, at that run's step size
        assert len(sent) == rounds * n_init * len(steps) * N_NODES
        assert sent == [steps[r % len(steps)] for _ in range(rounds) for r in range(n_init * len(steps))
                        for _ in range(N_NODES)]


def test_estimator_params_reach_the_estimator():
    """``estimator_params``: a hyper-parameter of the estimator the strategy has no option for (here IFCA's
    ``participation``, over ``fraction_train``'s) is the estimator's: the clusters and models of the estimator
    fitted in process with it, half the clients asked each round."""
    from synth.algorithms.ifca import IFCA as Estimator

    starts = drawn_starts(2)
    layout = Layout(ArrayRecord(_net().state_dict()))
    grid = InlineGrid(torch_client_app(_net, full_batch_data), N_NODES)
    s = IFCA(n_clusters=2, n_init=1, local_steps=2, lr=0.3, seed=0, evaluate_every=0,
             estimator_params={"participation": 0.5})
    s.start(grid, layout.record(starts), num_rounds=3)
    est = Estimator(n_clusters=2, n_rounds=3, step_size=0.3, averaging="model", local_steps=2,
                    init=starts.reshape(1, 2, -1), participation=0.5, random_state=0).fit(in_process_backend())
    assert [s.labels.get(node, -1) for node in s._federation] == est.labels_.tolist()
    np.testing.assert_allclose(s.models, est.models_, rtol=0, atol=1e-5)
    trains = [m for m in grid.sent if m.metadata.message_type == "train"]
    assert len(trains) == 3 * round(0.5 * N_NODES)


def test_estimator_params_are_checked():
    """A name the driver runs on is refused at construction, naming the option that sets it; a name the estimator
    does not declare is refused at start, before any message."""
    with pytest.raises(ValueError, match=r"estimator_params may not set 'n_init': .* \(its own option sets it: "
                                         r"n_init\)"):
        IFCA(n_clusters=2, estimator_params={"n_init": 3})
    with pytest.raises(ValueError, match=r"may not set 'random_state'.*seed"):
        CLoVE(n_clusters=2, estimator_params={"random_state": 1})
    with pytest.raises(ValueError, match=r"stopping='converged' is not available in a Flower strategy"):
        IFCA(n_clusters=2, estimator_params={"stopping": "converged"})
    with pytest.raises(TypeError, match="estimator_params must be a dict"):
        SRFCA(threshold=1.0, estimator_params=[("beta", 0.2)])
    grid = InlineGrid(torch_client_app(_net, full_batch_data), N_NODES)
    with pytest.raises(ValueError, match=r"CLoVE has no hyper-parameter 'clusterng' \(did you mean 'clustering'"):
        CLoVE(n_clusters=2, estimator_params={"clusterng": "agglomerative"}).start(
            grid, ArrayRecord(_net().state_dict()), num_rounds=1)
    assert not [m for m in grid.sent if m.metadata.message_type != "query.losses"]


def test_ifca_step_sizes_are_checked():
    for bad in ([], [0.1, 0.0], [0.1, float("inf")], [True], "0.1", 0.1, [0.1, "a"]):
        with pytest.raises(ValueError, match=r"step_sizes must be a non-empty list of finite numbers > 0, got"):
            IFCA(n_clusters=2, step_sizes=bad)
    with pytest.raises(ValueError, match="give lr or step_sizes, not both"):
        IFCA(n_clusters=2, lr=0.1, step_sizes=[0.1, 1.0])
    with pytest.raises(ValueError, match=r"step_sizes=\[0.1, 1.0\] restarts with gradient averaging need "
                       "client_choice=True"):
        IFCA(n_clusters=2, client_choice=False, step_sizes=[0.1, 1.0], averaging="gradient")
    from flwr.app import ConfigRecord

    s = IFCA(n_clusters=2, step_sizes=[0.1, 1.0])
    with pytest.raises(ValueError, match=r"train_config\['lr'\] and step_sizes both set"):
        s.start(InlineGrid(torch_client_app(_net, load_data), N_NODES), ArrayRecord(_net().state_dict()),
                num_rounds=1, train_config=ConfigRecord({"lr": 0.1}))
