"""The ``ClientApp`` of ``nets flower``: :func:`~nets.flower.torch_client.torch_client_app` over cflab's data and
networks, one cflab client per SuperNode.

Every message carries the experiment (``EXPERIMENT``: the ``nets run`` parameters, as JSON).  A SuperNode derives
the federation from the seed exactly as ``nets run`` does (:func:`nets.experiment.validate_params` and the same data
seed stream) and keeps only the partition of its ``partition-id``, as Flower Datasets' partitioners do.  It
answers the client contract (``docs/flower-contract.md``) with the app that ``torch_client_app`` makes from cflab's
network (:func:`nets.models.model_factory`), that partition's loaders and the run's loss and optimiser (plain SGD,
or Adam as :class:`nets.backend.TorchBackend` runs it); the app is built once per process and experiment, so a
simulation actor serving many SuperNodes builds the federation once.  What ``nets run``'s numbers need beyond the
contract travels in the server's config (the minibatch order, the decayed step size): the client has nothing of
its own to add.

Faults can be injected for tests (the experiment's ``faults``: a client that fails, or answers too late, in a
given ``round`` of the algorithm, ``exchange`` or ``action``: a message type's last part, ``losses``, ``train``,
``gradient``, ``evaluate``, or ``partition`` for building the partition); they are no part of a real run.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict

import numpy as np
import torch
from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from ..datasets import default_model
from ..device import resolve_device
from ..models import MODELS, model_factory
from .torch_client import torch_client_app

__all__ = ["EXPERIMENT", "FaultInjected", "app", "experiment_app"]

EXPERIMENT = "experiment"  # the message's ConfigRecord of the experiment: {"json": {"params": ..., "faults": ...}}
ADAM = {"betas": (0.9, 0.999), "eps": 1e-8}  # nets.backend.TorchBackend's Adam

app = ClientApp()

# the apps built in this process, by experiment (an actor serves many SuperNodes of one or two experiments)
_APPS: OrderedDict[str, ClientApp] = OrderedDict()
_KEEP = 2


class FaultInjected(RuntimeError):
    """A fault the experiment asked this client to have (tests of the server's fault handling)."""


def experiment_app(experiment: dict) -> ClientApp:
    """The ``torch_client_app`` of ``experiment`` (``{"params": nets run parameters, "faults": [...]}``): cflab's
    network and, for each SuperNode, its partition of the federation ``nets run`` builds from the seed."""
    from ..experiment import _federation_that_fits, validate_params

    params = experiment["params"]
    key = json.dumps(experiment, sort_keys=True)
    if key in _APPS:
        return _APPS[key]
    p = validate_params(params)
    data_ss, _, _ = np.random.SeedSequence(p["seed"]).spawn(3)
    fed, _ = _federation_that_fits(p, data_ss, explicit_n=params.get("n_per_client") is not None)
    name = default_model(p["dataset"], p["task"]) if p["model"] == "auto" else p["model"]
    dtype = torch.float64 if p["dtype"] == "float64" else torch.float32
    build = model_factory(name, tuple(fed.input_shape), fed.n_classes, fed.vocab_size)
    kind = MODELS[name].loss

    def data(context: Context) -> tuple[DataLoader, DataLoader]:
        i = int(context.node_config["partition-id"])
        _fault(experiment, i, "partition", {})
        if not 0 <= i < fed.n_clients:
            raise ValueError(f"partition-id {i} is outside the federation's {fed.n_clients} clients: run one "
                             f"SuperNode per client")

        def loader(X, y, n) -> DataLoader:
            x = torch.as_tensor(X[i][:n])
            x = x.to(dtype) if x.is_floating_point() else x.long()
            # the loss's target: the labels, the inputs (reconstruction) or real numbers (regression)
            t = x if kind == "mse" else torch.as_tensor(y[i][:n]).to(dtype if kind == "sq" else torch.long)
            return DataLoader(TensorDataset(x, t), batch_size=max(int(n), 1))  # whole-set passes, nets' order

        return (loader(fed.X, fed.y, int(fed.n_samples[i])), loader(fed.X_test, fed.y_test, int(fed.n_test[i])))

    def optimizer(parameters, lr: float) -> torch.optim.Optimizer:
        if p["optimizer"] == "adam":
            return torch.optim.Adam(parameters, lr=lr, **ADAM)
        return torch.optim.SGD(parameters, lr=lr)

    out = _APPS[key] = torch_client_app(lambda: build().to(dtype), data, optimizer_fn=optimizer,
                                        loss_fn=_LOSSES[kind], device=resolve_device(p["device"]))
    while len(_APPS) > _KEEP:
        _APPS.popitem(last=False)
    return out


def _sq(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((out.reshape(out.shape[0]) - y) ** 2).mean()


# nets.functional.FunctionalModel's losses, as the mean over a batch
_LOSSES = {"ce": F.cross_entropy, "mse": F.mse_loss, "sq": _sq}


def _fault(experiment: dict, partition: int, action: str, config) -> None:
    """Raise (``fail``) or answer late (``drop``) where the experiment's ``faults`` say so."""
    for fault in experiment.get("faults", ()):
        if int(fault["client"]) != partition:
            continue
        when = {"round": config.get("round"), "exchange": config.get("server-round"), "action": action}
        if any(key in fault and fault[key] != value for key, value in when.items()):
            continue
        if fault["kind"] == "drop":
            time.sleep(float(fault.get("seconds", 30.0)))
            return
        raise FaultInjected(f"client {partition} fails {action} (injected fault {fault})")


def _answer(message: Message, context: Context) -> Message:
    experiment = json.loads(message.content[EXPERIMENT]["json"])
    config = message.content["config"] if "config" in message.content else {}
    _fault(experiment, int(context.node_config["partition-id"]), message.metadata.message_type.split(".")[-1],
           config)
    return experiment_app(experiment)(message, context)


app.train()(_answer)
app.evaluate()(_answer)
app.query("losses")(_answer)
app.query("gradient")(_answer)
