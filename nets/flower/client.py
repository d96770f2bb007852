"""The Flower ``ClientApp``: one cflab client per SuperNode, training and evaluating with cflab's torch models.

Each message carries the experiment (the ``nets run`` parameters that fix the data, the network and the local
optimiser).  A SuperNode derives the federation from the seed exactly as ``nets run`` does
(:func:`nets.experiment.validate_params` and the same data seed stream) and keeps only the partition of its
``partition-id``, as Flower Datasets' partitioners do; the server never sees the data.  The federation is built
once per process and experiment, so a simulation actor serving many SuperNodes builds it once.

The client answers the data operations of :class:`synth.algorithms.backend.ModelBackend` on its own partition,
through a one-client :class:`nets.backend.TorchBackend` (:mod:`nets.flower.protocol` lists the actions):
losses of the models it is sent, local steps from a model, gradients, its local model, and its test scores by
the papers' evaluation rules (:func:`nets.evaluate.client_scores`).  Minibatch orders are drawn as the client's
row of the draw ``nets run`` makes for all clients of the same call, so both paths take the same minibatches.

Faults can be injected for tests (the experiment's ``faults``: a client that fails, or answers too late, in a
given round, exchange or action); they are no part of a real run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import OrderedDict
from typing import Any

import numpy as np
import torch
from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from ..backend import TorchBackend
from ..datasets import default_model
from ..device import resolve_device
from ..evaluate import client_scores
from .protocol import ARRAYS, CONFIG, EXPERIMENT, METRICS, RESULT, pack, unpack

__all__ = ["FaultInjected", "Member", "app", "member"]

app = ClientApp()

# federations built in this process, by experiment (an actor serves many SuperNodes of one or two experiments)
_FEDERATIONS: OrderedDict[str, tuple] = OrderedDict()
_MEMBERS: dict[tuple[str, int], Member] = {}
_KEEP = 2


class FaultInjected(RuntimeError):
    """A fault the experiment asked this client to have (tests of the server's fault handling)."""


@dataclasses.dataclass
class Member:
    """One client's partition: its train and test backends, its true cluster and the federation's facts."""

    train: TorchBackend
    test: TorchBackend
    cluster: int
    facts: dict


def member(experiment: dict, partition: int) -> Member:
    """The client ``partition`` of ``experiment`` (built from the seed as ``nets run`` builds it, then cached)."""
    from ..experiment import _federation_that_fits, validate_params

    params = experiment["params"]
    key = json.dumps(params, sort_keys=True)
    if (key, partition) in _MEMBERS:
        return _MEMBERS[(key, partition)]
    if key not in _FEDERATIONS:
        p = validate_params(params)
        data_ss, _, batch_ss = np.random.SeedSequence(p["seed"]).spawn(3)
        fed, note = _federation_that_fits(p, data_ss, explicit_n=params.get("n_per_client") is not None)
        name = default_model(p["dataset"], p["task"]) if p["model"] == "auto" else p["model"]
        model = fed.model(name, device=resolve_device(p["device"]),
                          dtype=torch.float64 if p["dtype"] == "float64" else torch.float32)
        _FEDERATIONS[key] = (p, fed, note, name, model, int(batch_ss.generate_state(1)[0]))
        while len(_FEDERATIONS) > _KEEP:
            old, _ = _FEDERATIONS.popitem(last=False)
            for k in [k for k in _MEMBERS if k[0] == old]:
                del _MEMBERS[k]
    p, fed, note, name, model, batch_seed = _FEDERATIONS[key]
    if not 0 <= partition < fed.n_clients:
        raise ValueError(f"partition-id {partition} is outside the federation's {fed.n_clients} clients: run one "
                         f"SuperNode per client")
    i = slice(partition, partition + 1)
    own = dataclasses.replace(fed, X=fed.X[i], y=fed.y[i], n_samples=fed.n_samples[i], X_test=fed.X_test[i],
                              y_test=fed.y_test[i], n_test=fed.n_test[i],
                              clusters=None if fed.clusters is None else fed.clusters[i])
    train, test = own.backends(model, batch_size=p["batch_size"], optimizer=p["optimizer"], batched=True,
                               seed=batch_seed, lr_decay=p["lr_decay"],
                               memory_budget=(p["memory_mb"] or (4096 if model.device.type == "cuda" else 256)) * 2**20)
    facts = {"model": name, "input_shape": list(fed.input_shape), "n_classes": int(fed.n_classes),
             "vocab_size": fed.vocab_size, "input_float": bool(np.issubdtype(fed.X.dtype, np.floating)),
             "n_per_client": int(fed.X.shape[1]), "notes": list(fed.notes) + list(note), "n_clients": fed.n_clients,
             "device": str(model.device)}
    cluster = -1 if fed.clusters is None else int(fed.clusters[partition])
    _MEMBERS[(key, partition)] = out = Member(train, test, cluster, facts)
    return out


def _position(backend: TorchBackend, config: dict) -> None:
    """Put the backend at the server's round and call, and make its minibatch order its cohort's row.

    ``nets run`` draws one ``(c, n_max)`` matrix of sort keys per local-training call for the ``c`` clients of the
    call (:meth:`nets.backend.TorchBackend._draw_batches`); this client draws the same matrix from the same
    generator and keeps its own row, ``position``.
    """
    backend.at_round(int(config.get("round", 0)))
    backend._calls = int(config.get("call", 0))
    size, position = int(config.get("cohort", 1)), int(config.get("position", 0))

    def draw(idx: torch.Tensor, steps: int):
        if backend.batch_size is None or steps == 0:
            return None
        keys = torch.rand((size, backend.X.shape[1]), generator=backend._generator())[position:position + 1]
        keys = keys.to(backend.device).masked_fill(backend.mask[idx] == 0, 2.0)
        return keys.argsort(1), backend._n[idx]

    backend._draw_batches = draw  # this client's backend only


def _fault(experiment: dict, partition: int, action: str, config: dict) -> None:
    """Raise (``fail``) or answer late (``drop``) where the experiment's ``faults`` say so."""
    for fault in experiment.get("faults", ()):
        if int(fault["client"]) != partition:
            continue
        when = {"round": config.get("round"), "exchange": config.get("exchange"), "action": action}
        if any(key in fault and fault[key] != value for key, value in when.items()):
            continue
        if fault["kind"] == "drop":
            time.sleep(float(fault.get("seconds", 30.0)))
            return
        raise FaultInjected(f"client {partition} fails {action} (injected fault {fault})")


def _unpack_message(message: Message, context: Context, action: str) -> tuple[Member, dict, np.ndarray | None, dict]:
    content = message.content
    experiment = json.loads(content[EXPERIMENT]["json"])
    config = dict(content[CONFIG]) if CONFIG in content else {}
    partition = int(context.node_config["partition-id"])
    _fault(experiment, partition, action, config)
    models = unpack(content[ARRAYS]) if ARRAYS in content else None
    return member(experiment, partition), config, models, {"partition": partition}


def _reply(message: Message, metrics: dict[str, Any], rows: np.ndarray | None = None,
           info: dict | None = None) -> Message:
    content = RecordDict({METRICS: MetricRecord(metrics)})
    if rows is not None:
        content[RESULT] = pack(rows)
    if info is not None:
        content[CONFIG] = ConfigRecord({"json": json.dumps(info)})
    return Message(content, reply_to=message)


@app.query("describe")
def describe(message: Message, context: Context) -> Message:
    """The client's partition: sample counts, true cluster (-1 without ground truth), the federation's facts."""
    own, _, _, extra = _unpack_message(message, context, "describe")
    return _reply(message, {"partition": extra["partition"], "n-train": int(own.train.n_samples[0]),
                            "n-test": int(own.test.n_samples[0]), "cluster": own.cluster}, info=own.facts)


@app.query("losses")
def losses(message: Message, context: Context) -> Message:
    """``f_i(models[j])`` on the client's training data for every model it is sent."""
    own, config, models, extra = _unpack_message(message, context, "losses")
    own.train.at_round(int(config.get("round", 0)))
    L = own.train.losses(own.train.from_numpy(models))[0]
    return _reply(message, {"partition": extra["partition"], "losses": [float(v) for v in L]})


@app.train("update")
def update(message: Message, context: Context) -> Message:
    """``steps`` local steps (SGD or Adam) from the model row it is sent, at step size ``lr``."""
    own, config, models, extra = _unpack_message(message, context, "update")
    _position(own.train, config)
    out = own.train.local_update(own.train.from_numpy(models), np.zeros(1, dtype=np.int64), int(config["steps"]),
                                 float(config["lr"]))
    return _reply(message, {"partition": extra["partition"]}, rows=out.detach().cpu().numpy())


@app.train("local")
def local(message: Message, context: Context) -> Message:
    """The client's own model: ``steps`` local steps from its start (the run's shared start, or the row sent)."""
    own, config, models, extra = _unpack_message(message, context, "local")
    _position(own.train, config)
    out = own.train.local_models("gd", int(config["steps"]), float(config["lr"]),
                                 init=None if models is None else own.train.from_numpy(models))
    return _reply(message, {"partition": extra["partition"]}, rows=out.detach().cpu().numpy())


@app.train("gradient")
def gradient(message: Message, context: Context) -> Message:
    """``grad f_i`` on the client's training data at each model row it is sent."""
    own, config, models, extra = _unpack_message(message, context, "gradient")
    own.train.at_round(int(config.get("round", 0)))
    theta = own.train.from_numpy(models)
    rows = len(theta)
    out = own.train.client_gradients(theta, np.arange(rows), np.zeros(rows, dtype=np.int64))
    return _reply(message, {"partition": extra["partition"]}, rows=out.detach().cpu().numpy())


@app.evaluate("scores")
def scores(message: Message, context: Context) -> Message:
    """Test loss and accuracy by the paper's rule (``nets.evaluate.client_scores``) on the client's test data."""
    own, config, models, extra = _unpack_message(message, context, "scores")
    loss, acc, choice, missing = client_scores(own.test, own.test.from_numpy(models), config["rule"],
                                               [int(config["label"])] if config["rule"] == "cluster" else None)
    return _reply(message, {"partition": extra["partition"], "loss": float(loss[0]), "accuracy": float(acc[0]),
                            "choice": int(choice[0]), "missing": int(missing[0]), "n-test": int(own.test.n_samples[0])})
