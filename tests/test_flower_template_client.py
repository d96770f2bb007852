"""A ClientApp written from a Flower template -- it answers ``train`` and ``evaluate`` only, loading the one model
it is sent -- under the public clustered strategies: the first exchange it cannot answer (round 1 for IFCA and
CLoVE, SR-FCA's first TrimmedMeanGD step) ends the run with one line naming the message type and
``docs/flower-contract.md``; one such client among contract clients is only lost.  Skipped without the ``flower``
extra.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import pytest  # noqa: E402

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from torch import nn  # noqa: E402

from nets.flower.clustered import IFCA, SRFCA, ClientContractError, CLoVE  # noqa: E402
from nets.flower.inline import InlineGrid  # noqa: E402
from nets.flower.torch_client import torch_client_app  # noqa: E402
from tests.test_flower_batchnorm import BatchNormCNN, _data, load_data  # noqa: E402

pytestmark = pytest.mark.flower


def template_app() -> ClientApp:
    """Flower's PyTorch template, in short: train and evaluate the model sent."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        model = BatchNormCNN()
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        x, y = _data(int(context.node_config["partition-id"]))
        opt = torch.optim.SGD(model.parameters(), lr=float(msg.content["config"]["lr"]))
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                              "metrics": MetricRecord({"num-examples": len(y)})})
        return Message(content=content, reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        model = BatchNormCNN()
        model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
        x, y = _data(int(context.node_config["partition-id"]))
        with torch.no_grad():
            loss = float(nn.functional.cross_entropy(model(x), y))
        return Message(content=RecordDict({"metrics": MetricRecord({"num-examples": len(y), "eval-loss": loss})}),
                       reply_to=msg)

    return app


# rounds: the estimator's round the line names; exchange: the server-round of the last message (SR-FCA: ONE_SHOT's
# train, the evaluation of its clusters, then the first TrimmedMeanGD step's query.gradient)
@pytest.mark.parametrize("make, missing, rounds, exchange", [
    (lambda **o: IFCA(n_clusters=2, **o), "train with choose='lowest-loss'", 1, 1),
    (lambda **o: IFCA(n_clusters=2, client_choice=False, **o), "query.losses", 1, 1),
    (lambda **o: IFCA(n_clusters=2, averaging="gradient", **o), "query.gradient with choose='lowest-loss'", 1, 1),
    (lambda **o: CLoVE(n_clusters=2, **o), "query.losses", 1, 1),
    (lambda **o: SRFCA(threshold=1e6, local_train_steps=1, n_refine=1, trmean_steps=2, **o), "query.gradient", 2,
     3),
])
@pytest.mark.parametrize("accept_failures", [True, False])
def test_template_client_is_detected_at_the_first_query(make, missing, rounds, exchange, accept_failures):
    grid = InlineGrid(template_app(), 4)
    with pytest.raises(ClientContractError) as info:
        make(accept_failures=accept_failures).start(grid, ArrayRecord(BatchNormCNN().state_dict()),
                                                    num_rounds=None if rounds == 2 else 3)
    line = str(info.value)
    assert "\n" not in line and f"round {rounds}: no client answers {missing} (" in line
    assert "docs/flower-contract.md" in line
    assert max(m.content["config"]["server-round"] for m in grid.sent) == exchange


def test_one_template_client_among_contract_clients_is_only_lost():
    good, bad = torch_client_app(BatchNormCNN, load_data), template_app()

    def app(message: Message, context: Context) -> Message:
        return (bad if int(context.node_id) == 1 else good)(message, context)

    s = IFCA(n_clusters=2, local_steps=1)
    result = s.start(InlineGrid(app, 4), ArrayRecord(BatchNormCNN().state_dict()), num_rounds=2)
    assert {n for _, _, n, _ in s.lost} == {1}
    assert all(result.train_metrics_clientapp[r]["lost"] == 1 for r in (1, 2))
