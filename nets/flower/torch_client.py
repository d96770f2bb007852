"""A ClientApp for the clustered strategies from any PyTorch model and data (the client contract,
``docs/flower-contract.md``).

::

    app = torch_client_app(lambda: Net(), load_data)        # load_data(context) -> (train_loader, test_loader)

answers the messages of :mod:`nets.flower.clustered`:

* ``query.losses``: the mean training loss of every cluster model sent (a stacked ``ArrayRecord``);
* ``train``: ``config["local-steps"]`` optimiser steps (one minibatch each, cycling through the train loader) at
  step size ``config["lr"]`` from the model sent; the model back as a state_dict ``ArrayRecord``;
* ``query.gradient``: the gradient of the mean training loss at the model sent (parameters; buffers get zeros);
* for both, with ``config["choose"] = "lowest-loss"`` and several cluster models sent: the model of lowest mean
  training loss (IFCA's cluster identity; the first of equal ones, NaN as +inf) is the one trained or
  differentiated, and the reply adds ``losses`` (every model's) and ``cluster`` (its index); with
  ``config["runs"] = R`` (IFCA's restarts) the models are R runs of k, one model is chosen and trained per run,
  and the reply holds the R results stacked (``cluster{r}/...``) and ``cluster`` as R indices; ``config["lr"]``
  may then be a list of R step sizes, run r's at index r (IFCA's restarts over step sizes);
* ``evaluate``: test loss and accuracy (classification) of the model sent; with ``choose="lowest-loss"`` and several
  models sent, those of the model of lowest test loss (IFCA's min-loss evaluation rule), ``cluster`` its index;
* ``query.gradient`` without ``choose`` and with several models sent: the gradient at each, stacked;
* ``train`` with ``config["order"]`` (a sample order, the server's draw) and ``config["batch-size"]`` B: local step
  ``s`` trains on the samples ``order[(s * B + j) % len(order)]``, ``j < B``, of the train loader's dataset (the
  minibatches ``nets run`` takes), not on the loader's own batches.

Every reply's ``MetricRecord`` holds ``num-examples`` (the client's training samples; test samples for
``evaluate``) and, where the node config has one, ``partition-id``.  Each node's loaders are built once per
process, also on Flower's simulation actors, which receive the app anew with every message (``data_fn`` is called
with the node's ``Context``: ``context.node_config["partition-id"]`` and
``["num-partitions"]`` say which part of the data it holds).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn

from .arrays import split_clusters, stack_clusters
from .clustered import ARRAYS, CHOOSE_LOWEST, CONFIG, METRICS, NUM_EXAMPLES

__all__ = ["torch_client_app"]

Loader = Iterable[tuple[torch.Tensor, torch.Tensor]]


def _sgd(params, lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=lr)


def torch_client_app(model_fn: Callable[[], nn.Module], data_fn: Callable[[Context], tuple[Loader, Loader]], *,
                     optimizer_fn: Callable[[Any, float], torch.optim.Optimizer] = _sgd,
                     loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.functional.cross_entropy,
                     local_steps: int = 10, lr: float = 0.1, device: str | torch.device = "cpu",
                     keep_batches: bool = True) -> ClientApp:
    """A ``ClientApp`` that keeps the clustered strategies' client contract for ``model_fn()``'s network.

    Parameters
    ----------
    model_fn : builds the network (once per process; every message loads the model it carries into it).
    data_fn : ``data_fn(context) -> (train_loader, test_loader)``, iterables of ``(x, y)`` batches (DataLoaders).
    optimizer_fn : ``optimizer_fn(parameters, lr)``, a fresh optimiser per ``train`` message (default SGD).
    loss_fn : ``loss_fn(output, y)``, the mean loss of a batch (default cross-entropy).
    local_steps, lr : used when a ``train`` message's config has no ``local-steps`` / ``lr``.
    device : where the network computes.
    keep_batches : keep each loader's batches (on ``device``) after their first pass, and serve the whole-set
        passes (losses, gradient, evaluation) and the training steps of a loader that does not shuffle from them:
        a DataLoader collates its batches sample by sample on every pass, which cost a full-batch client 2-4x its
        computation (bench/README.md#flower).  A shuffling loader's training steps still come from the loader.
        ``False`` for data that does not fit in memory.
    """
    options = {"optimizer_fn": optimizer_fn, "loss_fn": loss_fn, "local_steps": local_steps, "lr": lr,
               "device": device, "keep_batches": keep_batches}
    return _build(uuid.uuid4().hex, model_fn, data_fn, options)


def _build(token: str, model_fn, data_fn, options: dict) -> ClientApp:
    """The app of :func:`torch_client_app`, known in this process by ``token``."""
    optimizer_fn, loss_fn, local_steps, lr, device, keep_batches = (
        options[k] for k in ("optimizer_fn", "loss_fn", "local_steps", "lr", "device", "keep_batches"))
    app = _TorchClientApp(token, (model_fn, data_fn, options))
    device = torch.device(device)
    cache: dict[str, Any] = {"model": None, "data": {}}  # lives as long as the app, one app per process and token

    def setup(context: Context) -> tuple[nn.Module, _Data, _Data, dict]:
        if cache["model"] is None:
            cache["model"] = model_fn().to(device)
        node = int(context.node_id)
        if node not in cache["data"]:
            train, test = data_fn(context)
            cache["data"][node] = (_Data(train, device, keep_batches), _Data(test, device, keep_batches))
        train, test = cache["data"][node]
        ident = {}
        if "partition-id" in context.node_config:
            ident["partition-id"] = int(context.node_config["partition-id"])
        return cache["model"], train, test, {"n-train": train.count(), "n-test": test.count(), **ident}

    def load(model: nn.Module, record: ArrayRecord | dict) -> nn.Module:
        state = record.to_torch_state_dict() if isinstance(record, ArrayRecord) else record
        model.load_state_dict(state, strict=True)
        return model

    def reply(message: Message, metrics: dict, arrays: ArrayRecord | None = None) -> Message:
        content = RecordDict({METRICS: MetricRecord(metrics)})
        if arrays is not None:
            content[ARRAYS] = arrays
        return Message(content, reply_to=message)

    def mean_loss(model: nn.Module, data: _Data) -> tuple[float, float | None]:
        """Mean loss and accuracy over a loader (sample-weighted over its batches); accuracy is None unless the
        outputs are class scores for integer labels (a reconstruction or regression has none)."""
        model.eval()
        total, correct, n, classes = 0.0, 0.0, 0, True
        with torch.no_grad():
            for x, y in data.passes():
                out = model(x)
                total += float(loss_fn(out, y)) * len(y)
                classes = classes and out.ndim == 2 and y.ndim == 1 and not torch.is_floating_point(y)
                if classes:
                    correct += float((out.argmax(1) == y).sum())
                n += len(y)
        return total / max(n, 1), correct / max(n, 1) if classes else None

    @app.query("losses")
    def losses(message: Message, context: Context) -> Message:
        """The mean training loss of every cluster model in ``arrays``."""
        model, train, _, facts = setup(context)
        out = [mean_loss(load(model, record), train)[0] for record in split_clusters(message.content[ARRAYS])]
        return reply(message, {"losses": out, NUM_EXAMPLES: facts["n-train"], **_ident(facts)})

    def chosen(message: Message, model: nn.Module, train: _Data, config) -> tuple[list, dict]:
        """The models to train: the one sent, or with ``choose="lowest-loss"`` the lowest-loss one of those sent
        in each of ``config["runs"]`` runs (IFCA's restarts; their losses and indices go into the reply)."""
        if config.get("choose") != CHOOSE_LOWEST:
            return [message.content[ARRAYS]], {}
        states = [record.to_torch_state_dict() for record in split_clusters(message.content[ARRAYS])]
        out = [mean_loss(load(model, state), train)[0] for state in states]
        runs = int(config.get("runs", 1))
        k = len(states) // runs
        losses = torch.tensor(out, dtype=torch.float64).nan_to_num(nan=float("inf")).reshape(runs, k)
        picks = [int(j) for j in losses.argmin(1)]
        return ([states[r * k + j] for r, j in enumerate(picks)],
                {"losses": out, "cluster": picks[0] if runs == 1 else picks})

    def one_or_stacked(records: list[ArrayRecord]) -> ArrayRecord:
        return records[0] if len(records) == 1 else stack_clusters(records)

    @app.train()
    def fit(message: Message, context: Context) -> Message:
        """``local-steps`` optimiser steps from the model sent (from each chosen model: one per run); the model
        (stacked by run) and the mean loss of the steps back."""
        model, train, _, facts = setup(context)
        config = message.content[CONFIG] if CONFIG in message.content else {}
        steps = int(config.get("local-steps", local_steps))
        given = config.get("lr", lr)
        records, choice = chosen(message, model, train, config)
        # one step size, or (IFCA's restarts over step sizes) a list of one per run
        step_sizes = [float(v) for v in given] if isinstance(given, list) else [float(given)] * len(records)
        if len(step_sizes) != len(records):
            raise ValueError(f"config['lr'] holds {len(step_sizes)} step sizes for {len(records)} runs")
        trained, seen = [], 0.0
        for record, step_size in zip(records, step_sizes, strict=True):  # one model, or one per IFCA restart
            load(model, record).train()
            optimizer = optimizer_fn(model.parameters(), step_size)
            batches = train.steps() if "order" not in config else train.ordered(config["order"],
                                                                                 int(config["batch-size"]))
            for _ in range(steps):  # one minibatch per local step
                x, y = next(batches)
                optimizer.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
                seen += loss.item()
            trained.append(ArrayRecord(model.state_dict()))
        metrics = {NUM_EXAMPLES: facts["n-train"], **_ident(facts), **choice}
        if steps:
            metrics["train-loss"] = seen / (steps * len(records))
        return reply(message, metrics, one_or_stacked(trained))

    @app.query("gradient")
    def gradient(message: Message, context: Context) -> Message:
        """The gradient of the mean training loss at the model sent (at each chosen model: one per run), under the
        model's state_dict keys."""
        model, train, _, facts = setup(context)
        config = message.content[CONFIG] if CONFIG in message.content else {}
        records, choice = chosen(message, model, train, config)
        if not choice:  # several models sent without choose: the gradient at each (stacked)
            records = split_clusters(records[0])
        n, total, out = facts["n-train"], 0.0, []
        for record in records:
            load(model, record).train()
            model.zero_grad()
            for x, y in train.passes():  # the full training set: sum of (batch mean loss * batch size) / n
                loss = loss_fn(model(x), y) * (len(y) / n)
                loss.backward()
                total += loss.item()
            params = dict(model.named_parameters())
            grads = {}
            for key, value in model.state_dict().items():
                p = params.get(key)
                grads[key] = (p.grad.detach().clone() if p is not None and p.grad is not None
                              else torch.zeros_like(value))
            out.append(ArrayRecord(grads))
        return reply(message, {"loss": total / len(records), NUM_EXAMPLES: n, **_ident(facts), **choice},
                     one_or_stacked(out))

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        """Test loss and accuracy of the model sent; with ``choose="lowest-loss"``, of the model of lowest test loss
        among those sent (the first of equal ones, NaN as +inf), ``cluster`` its index."""
        model, _, test, facts = setup(context)
        config = message.content[CONFIG] if CONFIG in message.content else {}
        records = (split_clusters(message.content[ARRAYS]) if config.get("choose") == CHOOSE_LOWEST
                   else [message.content[ARRAYS]])
        scores = [mean_loss(load(model, record), test) for record in records]
        pick = int(torch.tensor([s[0] for s in scores], dtype=torch.float64).nan_to_num(nan=float("inf")).argmin())
        loss, accuracy = scores[pick]
        metrics = {"eval-loss": loss, NUM_EXAMPLES: facts["n-test"], **_ident(facts)}
        if accuracy is not None:
            metrics["eval-acc"] = accuracy
        if config.get("choose") == CHOOSE_LOWEST:
            metrics["cluster"] = pick
        return reply(message, metrics)

    return app


class _TorchClientApp(ClientApp):
    """The ClientApp of :func:`torch_client_app`, pickled as its token and its arguments.

    Flower's simulation engine sends the ClientApp to its actor with every message (Ray pickles the call's
    arguments), and pickling the app's dozen closures function by function cost the driver more than the clients'
    computation (bench/README.md#flower).  This app pickles as ``(token, arguments pickled once)``; in a process
    that has built the app of that token the same object is reused, elsewhere it is built once from the
    arguments."""

    def __init__(self, token: str, arguments: tuple):
        super().__init__()
        self._token, self._arguments, self._blob = token, arguments, None
        _APPS[token] = self

    def __reduce__(self):
        if self._blob is None:
            self._blob = _cloudpickle().dumps(self._arguments)
        return _app_from, (self._token, self._blob)


_APPS: dict[str, ClientApp] = {}  # the apps of this process, by token


def _app_from(token: str, blob: bytes) -> ClientApp:
    """The app ``token`` of this process, built from its pickled arguments the first time."""
    app = _APPS.get(token)
    if app is None:
        model_fn, data_fn, options = _cloudpickle().loads(blob)
        app = _build(token, model_fn, data_fn, options)
    return app


def _cloudpickle():
    # the user's model_fn and data_fn may be lambdas or closures: cloudpickle (Ray's, with the flower extra)
    try:
        import cloudpickle
    except ImportError:
        from ray import cloudpickle
    return cloudpickle


def _ident(facts: dict) -> dict:
    return {"partition-id": facts["partition-id"]} if "partition-id" in facts else {}


class _Data:
    """A node's loader: its batches on the device, kept after the first pass where allowed (``keep_batches``)."""

    def __init__(self, loader: Loader, device: torch.device, keep: bool):
        self.loader, self.device, self.keep = loader, device, keep
        self._kept: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._all: tuple[torch.Tensor, torch.Tensor] | None = None  # the dataset in its order (config["order"])
        self._n: int | None = None
        sampler = getattr(loader, "sampler", None)
        # a loader that draws the same batches in the same order every pass (no shuffling)
        self.fixed = isinstance(sampler, torch.utils.data.SequentialSampler)

    def _fresh(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for x, y in self.loader:
            yield x.to(self.device), y.to(self.device)

    def passes(self) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
        """One pass over all the batches (order irrelevant: whole-set means)."""
        if not self.keep:
            return self._fresh()
        if self._kept is None:
            self._kept = list(self._fresh())
        return self._kept

    def steps(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batches without end for training steps: the loader again (reshuffled, for a shuffling DataLoader) when
        a pass ends; the kept batches for a loader that does not shuffle."""
        while True:
            empty = True
            for batch in (self.passes() if self.fixed else self._fresh()):
                empty = False
                yield batch
            if empty:
                raise ValueError("the train loader yields no batch")

    def ordered(self, order, batch_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batches without end in the server's sample order: step ``s`` takes ``order[(s * B + j) % len(order)]``,
        ``j < B`` (an epoch may end inside a batch, as in ``nets run``'s minibatches)."""
        if self._all is None:
            dataset = getattr(self.loader, "dataset", None)
            if dataset is None or not hasattr(dataset, "__getitem__"):
                raise ValueError("config['order'] needs a train loader over an indexable dataset")
            x, y = torch.utils.data.default_collate([dataset[i] for i in range(len(dataset))])
            self._all = (x.to(self.device), y.to(self.device))
        x, y = self._all
        order = torch.as_tensor(list(order), dtype=torch.long, device=self.device)
        if batch_size < 1 or not len(order):
            raise ValueError(f"config['order'] needs samples and batch-size >= 1, got {len(order)} and {batch_size}")
        span = torch.arange(batch_size, device=self.device)
        s = 0
        while True:
            take = order[(s * batch_size + span) % len(order)]
            yield x[take], y[take]
            s += 1

    def count(self) -> int:
        """Samples in the loader: its dataset's length, else one pass over it."""
        if self._n is None:
            dataset = getattr(self.loader, "dataset", None)
            if dataset is not None and hasattr(dataset, "__len__"):
                self._n = len(dataset)
            else:
                self._n = sum(len(y) for _, y in self.passes())
        return self._n
