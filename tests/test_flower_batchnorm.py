"""Models with arrays of every rank and dtype in the public clustered strategies (``nets.flower.clustered``).

A BatchNorm network's ``state_dict`` holds a 0-d integer array (``num_batches_tracked``) beside float weights and
running statistics.  Checked: :class:`~nets.flower.arrays.Layout` and :func:`~nets.flower.arrays.replicate` give
every array back in its own shape and dtype (0-d included); a small BatchNorm CNN runs IFCA (both averagings, the
client's and the server's choice), CLoVE and SR-FCA under :func:`~nets.flower.torch_client.torch_client_app` and
under a ClientApp written from ``docs/flower-contract.md`` alone, on the in-process grid; the counter comes back
an integer (the largest of the cluster's clients', not a float mean) and the models load into the network.
Skipped without the ``flower`` extra.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

from flwr.app import Array, ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from torch import nn  # noqa: E402

from nets.flower.arrays import Layout, replicate, split_clusters, stack_clusters  # noqa: E402
from nets.flower.clustered import IFCA, SRFCA, CLoVE  # noqa: E402
from nets.flower.inline import InlineGrid  # noqa: E402
from nets.flower.torch_client import torch_client_app  # noqa: E402

pytestmark = pytest.mark.flower


def test_arrays_of_every_rank_and_dtype_round_trip_exactly():
    rng = np.random.default_rng(0)
    record = ArrayRecord({
        "scalar-int": Array(np.array(7, dtype=np.int64)),
        "scalar-float": Array(np.array(0.25, dtype=np.float32)),
        "vector": Array(rng.normal(size=3).astype(np.float64)),
        "matrix": Array(rng.normal(size=(2, 3)).astype(np.float16)),
        "tensor": Array(rng.normal(size=(2, 1, 3)).astype(np.float32)),
        "counts": Array(np.array([1, 2, 3], dtype=np.int32)),
        "bytes": Array(np.array([[0, 255]], dtype=np.uint8)),
        "mask": Array(np.array([True, False])),
    })
    layout = Layout(record)
    back = layout.unflatten(layout.flatten(record))
    assert list(back.keys()) == list(record.keys())
    for key in record.keys():
        a, b = record[key].numpy(), back[key].numpy()
        assert b.shape == a.shape and b.dtype == a.dtype and np.array_equal(a, b), key
    assert layout.integer.sum() == 1 + 3 + 2 + 2
    for copy in replicate(record, 3, rng):
        assert {k: (v.numpy().shape, v.numpy().dtype) for k, v in copy.items()} == \
            {k: (v.numpy().shape, v.numpy().dtype) for k, v in record.items()}
        layout.flatten(copy)  # the server's own copies keep the layout
    stacked = layout.record(np.stack([layout.flatten(record)] * 2))
    assert all(r["scalar-int"].numpy().shape == () for r in split_clusters(stacked))


# ------------------------------------------------------------------ a small BatchNorm CNN and its data
class BatchNormCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 3, 3)
        self.bn = nn.BatchNorm2d(3)
        self.fc = nn.Linear(3 * 4 * 4, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


N_NODES = 4


def _data(partition: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Partitions 0, 1 and 2, 3 label the same images oppositely (two clusters)."""
    g = torch.Generator().manual_seed(partition)
    x = torch.randn(16, 1, 6, 6, generator=g)
    y = (x[:, 0, :3].mean((1, 2)) > 0).long()
    return x, (1 - y if partition >= 2 else y)


def load_data(context: Context):
    x, y = _data(int(context.node_config["partition-id"]))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=8)
    return loader, loader


def contract_app() -> ClientApp:
    """A ClientApp written from docs/flower-contract.md: the four message types, state_dict ArrayRecords."""
    app = ClientApp()
    net = BatchNormCNN()

    def data(context):
        return _data(int(context.node_config["partition-id"]))

    def loss_at(record: ArrayRecord, x, y) -> float:
        net.load_state_dict(record.to_torch_state_dict())
        net.eval()
        with torch.no_grad():
            return float(nn.functional.cross_entropy(net(x), y))

    def chosen(message: Message, x, y) -> tuple[list[ArrayRecord], dict]:
        config = message.content["config"]
        if config.get("choose") != "lowest-loss":
            return [message.content["arrays"]], {}
        models = split_clusters(message.content["arrays"])
        losses = [loss_at(m, x, y) for m in models]
        runs = int(config.get("runs", 1))
        k = len(models) // runs
        picks = []
        for r in range(runs):
            row = [np.inf if np.isnan(v) else v for v in losses[r * k:(r + 1) * k]]
            picks.append(int(np.argmin(row)))
        return [models[r * k + j] for r, j in enumerate(picks)], {"losses": losses,
                                                                   "cluster": picks[0] if runs == 1 else picks}

    def reply(message, metrics, records=None):
        content = RecordDict({"metrics": MetricRecord(metrics)})
        if records is not None:
            content["arrays"] = records[0] if len(records) == 1 else stack_clusters(records)
        return Message(content, reply_to=message)

    @app.query("losses")
    def losses(message: Message, context: Context) -> Message:
        x, y = data(context)
        out = [loss_at(m, x, y) for m in split_clusters(message.content["arrays"])]
        return reply(message, {"losses": out, "num-examples": len(y)})

    @app.train()
    def train(message: Message, context: Context) -> Message:
        x, y = data(context)
        config = message.content["config"]
        records, choice = chosen(message, x, y)
        out = []
        for record in records:
            net.load_state_dict(record.to_torch_state_dict())
            net.train()
            opt = torch.optim.SGD(net.parameters(), lr=float(config["lr"]))
            for step in range(int(config["local-steps"])):
                xb, yb = x[8 * (step % 2):8 * (step % 2) + 8], y[8 * (step % 2):8 * (step % 2) + 8]
                opt.zero_grad()
                nn.functional.cross_entropy(net(xb), yb).backward()
                opt.step()
            out.append(ArrayRecord(net.state_dict()))
        return reply(message, {"num-examples": len(y), **choice}, out)

    @app.query("gradient")
    def gradient(message: Message, context: Context) -> Message:
        x, y = data(context)
        records, choice = chosen(message, x, y)
        out = []
        for record in records:
            net.load_state_dict(record.to_torch_state_dict())
            net.train()
            net.zero_grad()
            nn.functional.cross_entropy(net(x), y).backward()
            params = dict(net.named_parameters())
            out.append(ArrayRecord({k: params[k].grad.detach().clone() if k in params else torch.zeros_like(v)
                                    for k, v in net.state_dict().items()}))
        return reply(message, {"num-examples": len(y), **choice}, out)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        x, y = data(context)
        return reply(message, {"num-examples": len(y), "eval-loss": loss_at(message.content["arrays"], x, y)})

    return app


CASES = {
    "ifca": lambda: IFCA(n_clusters=2, local_steps=2, lr=0.1),
    "ifca-gradient": lambda: IFCA(n_clusters=2, local_steps=2, lr=0.1, averaging="gradient"),
    "ifca-server-choice": lambda: IFCA(n_clusters=2, local_steps=2, lr=0.1, client_choice=False),
    "ifca-restarts": lambda: IFCA(n_clusters=2, local_steps=2, lr=0.1, n_init=2),
    "clove": lambda: CLoVE(n_clusters=2, local_steps=2, lr=0.1),
    "clove-gradient": lambda: CLoVE(n_clusters=2, local_steps=2, lr=0.1, averaging="gradient"),
    "srfca": lambda: SRFCA(threshold=1e6, local_train_steps=2, n_refine=1, trmean_steps=2),
}


@pytest.mark.parametrize("client", ["torch_client_app", "contract"])
@pytest.mark.parametrize("case", list(CASES))
def test_batchnorm_cnn_runs_every_strategy(case, client):
    torch.manual_seed(0)
    app = torch_client_app(BatchNormCNN, load_data) if client == "torch_client_app" else contract_app()
    strategy = CASES[case]()
    rounds = None if case == "srfca" else 3
    result = strategy.start(InlineGrid(app, N_NODES), ArrayRecord(BatchNormCNN().state_dict()), num_rounds=rounds)
    assert not strategy.lost
    models = split_clusters(result.arrays)
    # one record per estimator round: SR-FCA's ONE_SHOT and each REFINE, IFCA's and CLoVE's rounds
    assert models and len(result.train_metrics_clientapp) == (
        1 + strategy.n_refine if case == "srfca" else strategy.num_rounds)
    for record in models:
        counter = record["bn.num_batches_tracked"].numpy()
        assert counter.shape == () and counter.dtype == np.int64
        BatchNormCNN().load_state_dict(record.to_torch_state_dict(), strict=True)
        if "gradient" in case or case == "srfca":
            # a gradient step leaves the counter as it was (SR-FCA's REFINE: TrimmedMeanGD from initial_arrays)
            assert int(counter) == 0
        else:  # model averaging: the largest of the clients' counters, 2 steps a round from the model sent
            assert int(counter) % 2 == 0 and 0 <= int(counter) <= 2 * 3
    assert max(int(r["bn.num_batches_tracked"].numpy()) for r in models) == (
        0 if "gradient" in case or case == "srfca" else 6)
