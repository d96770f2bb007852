"""FedProto -- federated prototype learning (Tan, Long, Liu, Zhou, Lu, Jiang, Zhang, AAAI 2022).

Clients exchange *class prototypes* instead of model weights.  A client's model is a feature extractor ``f``
and a classifier head; its prototype of class ``j`` is the mean representation of its samples of that class
(Sec. 3, "prototype"):

    C_i^(j) = (1 / |D_ij|) sum_{(x, y) in D_ij} f_i(x),

the server aggregates them into global prototypes weighted by the clients' class counts (Sec. 4, the global
prototype aggregation):

    C_bar^(j) = sum_{i in N_j} |D_ij| C_i^(j) / sum_{i in N_j} |D_ij|,

and every client trains on its supervised loss plus ``lambda`` times the distance of its representations to
the global prototypes of their classes (Sec. 4, the local objective; Alg. 1).  No weights are averaged: each
client keeps its own model, which is what is evaluated ("own" rule, the local classifier's output).

Where this follows the code rather than the paper: the regulariser is applied per sample, as the mean squared
error between ``f_i(x)`` and ``C_bar^(y)`` (``nn.MSELoss``, i.e. also averaged over the feature dimension), as
in the authors' code and PFLlib (the implementation CLoVE ran): the paper writes it as a distance between the
local prototype and the global one.  Where this follows the paper rather than the code: the global prototype
is the count-weighted mean of the paper, while the authors' code and PFLlib average the clients' prototypes
unweighted; and the local prototypes are the class means at the model after local training (the paper's
definition), while the code averages features collected during the training epoch (``prototype_mean="clients"``
gives the code's unweighted mean; ``local_prototypes="during"`` the features collected during training).

Against PFLlib (PFLlib@d832e76 ``clientproto.py``, ``serverproto.py``), the code whose numbers CLoVE reports:

* local prototypes: PFLlib averages the features of every sample its local steps train on, each at the model of
  its step, before that step's update (``clientproto.py:32, 42, 54-56, 67``); ``local_prototypes="during"``
  follows it, ``"after"`` (the default) takes the class means at the trained model (the paper's definition).
* global prototypes: PFLlib's unweighted mean over the uploading clients (``serverproto.py:289-304``):
  ``prototype_mean="clients"``.
* test rule: the nearest global prototype by MSE (``clientproto.py:110-129``): ``scoring="prototype"``.
  Before any global prototype exists PFLlib scores 0 (``clientproto.py:130-131``).
* the regulariser is the same: ``MSELoss`` over the batch with the rows of classes without a global prototype
  equal to the features (``clientproto.py:46-52``), i.e. zero for them but counted in the mean.
* PFLlib evaluates at the start of a round, before training (``serverproto.py:213-216``), and prints the best
  round's accuracy (``serverproto.py:236-239``); nets scores the final models.

Inference (``scoring``): ``"classifier"`` uses the local classifier's output.  ``"prototype"`` classifies a test
sample by its nearest global prototype, ``argmin_j ||f_i(x) - C_bar^(j)||^2``, as PFLlib's
``clientproto.test_metrics`` (the numbers CLoVE reports; its MSE is this distance over ``d``).  That rule is a
linear head on ``f_i``, ``logits_j = 2 <C_bar^(j), f_i(x)> - ||C_bar^(j)||^2`` (the dropped ``-||f_i(x)||^2``
is the same for every ``j``), so the fitted client model carries it as its head and every evaluator scores by
the nearest prototype; a class without a global prototype gets the bias ``-1e30`` (never chosen, as PFLlib's
``inf`` distance).  Its test loss is the cross-entropy of these logits, not a quantity of the paper.

This method needs a representation, so it runs on :mod:`nets` only (see :class:`RepresentationBackend`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from ..validation import check_random_state
from .backend import ModelBackend, Models
from .common import DivergenceError, participants
from .params import POSITIVE, Estimator, Options, shared
from .perfedavg import INIT, scatter_rows, shared_init
from .result import FitResult, History, Monitor

__all__ = ["FedProto", "RepresentationBackend", "global_prototypes", "nearest_prototype_heads",
           "require_representation"]


@runtime_checkable
class RepresentationBackend(Protocol):
    """What FedProto and FedPAC need beyond :class:`ModelBackend`: a model split into feature extractor and
    classifier head (:class:`nets.backend.TorchBackend` implements it)."""

    def head_mask(self) -> np.ndarray:
        """Boolean ``(P,)`` mask of the classifier head's coordinates."""

    def class_statistics(self, models: Models, labels: np.ndarray, clients: np.ndarray | None = None):
        """``(counts (c, C), prototypes (c, C, d), mean squared feature norms (c, C))`` per selected client at
        ``models[labels[i]]`` on its training data."""

    def aligned_update(self, models: Models, labels: np.ndarray, steps: int, lr, prototypes=None,
                       lam: float = 0.0, train: str = "all", clients: np.ndarray | None = None,
                       collect: dict | None = None) -> Models:
        """Local steps on ``CE + lam * MSE(f(x), prototypes[y])``; ``train`` = all, head or body: ``(c, P)``.
        ``collect`` (a dict) receives the ``counts`` and ``means`` per class of the features the steps trained on
        (``local_prototypes="during"`` needs it)."""


def require_representation(backend: ModelBackend, name: str) -> None:
    """A clear error where the backend has no feature extractor / head split (the synthetic GLM backend)."""
    missing = [a for a in ("head_mask", "class_statistics", "aligned_update") if not hasattr(backend, a)]
    if missing:
        raise TypeError(f"{name} needs a representation (a feature extractor and a classifier head): it runs "
                        f"on nets' TorchBackend, not on {type(backend).__name__}")


def global_prototypes(counts: np.ndarray, means: np.ndarray, weights: str = "counts") -> np.ndarray:
    """``C_bar^(j) = sum_i n_ij C_i^(j) / sum_i n_ij`` (FedProto Sec. 4): ``(C, d)``; NaN rows for classes no
    client holds.  ``weights="clients"``: the unweighted mean over the clients holding class j (the authors'
    code and PFLlib's ``proto_cluster``)."""
    w = counts if weights == "counts" else (counts > 0).astype(np.float64)
    total = w.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.einsum("ik,ikd->kd", w, means) / total[:, None]
    out[total == 0] = np.nan
    return out


def nearest_prototype_heads(models: np.ndarray, head: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """``models`` ``(c, P)`` with every head replaced by the nearest-prototype classifier of ``prototypes``
    ``(C, d)``: weight ``2 C_bar`` and bias ``-||C_bar^(j)||^2`` (``-1e30`` for a NaN row, a class without one).

    The head's coordinates are a linear layer's weight ``(C, d)`` (row-major) then its bias ``(C,)``, torch's
    ``nn.Linear`` order (:class:`nets.representation.Representation`).
    """
    protos = np.asarray(prototypes, dtype=np.float64)
    C, d = protos.shape
    if int(head.sum()) != C * d + C:
        raise ValueError(f"nearest-prototype scoring needs a classifier head with weight ({C}, {d}) and bias "
                         f"({C},), {C * d + C} coordinates; the model's head has {int(head.sum())}")
    ok = np.isfinite(protos).all(1)
    weight = np.where(ok[:, None], 2.0 * protos, 0.0)
    bias = np.where(ok, -(np.where(ok[:, None], protos, 0.0) ** 2).sum(1), -1e30)
    out = np.array(models, dtype=np.float64, copy=True)
    out[:, head] = np.concatenate([weight.ravel(), bias])[None, :]
    return out


class FedProto(Estimator):
    """FedProto (Tan et al., AAAI 2022, Alg. 1): local models regularised towards global class prototypes.

    Parameters
    ----------
    n_rounds : communication rounds.
    local_steps : local steps per round (one epoch = n / batch minibatches).
    step_size : local step size.
    proto_lambda : lambda, weight of the prototype regulariser (code and PFLlib: 1.0); ``0`` is local
        training.
    prototype_mean : ``"counts"`` (the paper's count-weighted global prototypes) or ``"clients"`` (the unweighted
        mean over clients of the authors' code and PFLlib).
    local_prototypes : ``"after"``: a client's prototypes are its class means at its trained model (Sec. 3);
        ``"during"``: the mean features of the samples its local steps trained on, each at its step's model
        (PFLlib ``clientproto.py:54-56, 67``; needs a backend whose ``aligned_update`` takes ``collect``).
    scoring : ``"classifier"`` (each client's local classifier) or ``"prototype"`` (the nearest global prototype,
        PFLlib's test rule: the returned models carry it as their head; see the module docstring).
    participation, init, random_state, monitor, monitor_every : as in
        :class:`~synth.algorithms.perfedavg.PerFedAvg` (all local models start from one initial model; the
        monitor sees an empty model stack: there is no shared model).

    Attributes
    ----------
    models_ : ``(m, P)`` the clients' own models (with ``scoring="prototype"``, their heads are the
    nearest-prototype classifier); ``prototypes_`` ``(C, d)`` global prototypes;
    local_prototypes_ ``(m, C, d)`` and class_counts_ ``(m, C)`` at the final models; labels_ = ``arange(m)``.
    """

    _parameter_constraints = {
        **shared("n_rounds", "local_steps", "proto_lambda", "prototype_mean", "participation", "random_state",
                 "monitor", "monitor_every"),
        "step_size": [POSITIVE],
        "local_prototypes": [Options("after", "during")],
        "scoring": [Options("classifier", "prototype")],
        "init": INIT,
    }

    def __init__(self, n_rounds: int = 100, local_steps: int = 10, step_size: float = 0.01,
                 proto_lambda: float = 1.0, prototype_mean: str = "counts", local_prototypes: str = "after",
                 scoring: str = "classifier", participation: float = 1.0, init=None, random_state=None,
                 monitor: Monitor | None = None, monitor_every: int = 1):
        self.n_rounds = n_rounds
        self.local_steps = local_steps
        self.step_size = step_size
        self.proto_lambda = proto_lambda
        self.prototype_mean = prototype_mean
        self.local_prototypes = local_prototypes
        self.scoring = scoring
        self.participation = participation
        self.init = init
        self.random_state = random_state
        self.monitor = monitor
        self.monitor_every = monitor_every

    def fit(self, backend: ModelBackend) -> FedProto:
        v = self._validate_params(backend)
        require_representation(backend, "FedProto")
        lr, lam, every = v["step_size"], v["proto_lambda"], v["monitor_every"]
        rng = check_random_state(self.random_state)
        m = backend.n_clients
        labels = np.arange(m)
        models = backend.take(shared_init(backend, self.init, rng), np.zeros(m, dtype=np.int64))
        protos = None
        history = History()
        for t in range(self.n_rounds):
            _, view = backend.at_round(t)
            clients = participants(rng, m, self.participation)
            sel = labels if clients is None else clients
            if v["local_prototypes"] == "during":  # PFLlib clientproto.py:54-56, 67
                seen: dict = {}
                new = view.aligned_update(models, sel, self.local_steps, lr, protos, lam, "all", clients,
                                          collect=seen)
                counts, means = seen["counts"], seen["means"]
                models = scatter_rows(backend, models, clients, new)
            else:
                new = view.aligned_update(models, sel, self.local_steps, lr, protos, lam, "all", clients)
                models = scatter_rows(backend, models, clients, new)
                counts, means, _ = view.class_statistics(models, sel, clients)
            protos = global_prototypes(counts, means, v["prototype_mean"])
            if self.monitor is not None and (t % every == 0 or t == self.n_rounds - 1):
                history.record(t, labels, **self.monitor(t, np.zeros((0, backend.n_params)), labels))
            else:
                history.record(t, labels)
        models_np = backend.to_numpy(models)
        if not np.isfinite(models_np).all():
            raise DivergenceError("FedProto produced non-finite models; lower step_size or proto_lambda")
        counts, means, _ = backend.class_statistics(models, labels)
        if protos is None:  # no round: the prototypes of the initial models
            protos = global_prototypes(counts, means, v["prototype_mean"])
        if v["scoring"] == "prototype":
            models_np = nearest_prototype_heads(models_np, np.asarray(backend.head_mask(), dtype=bool), protos)
        self.prototypes_ = protos
        self.local_prototypes_, self.class_counts_ = means, counts
        self.result_ = FitResult(labels, models_np, m, history, rounds=self.n_rounds,
                                 extra={"prototypes": protos, "local_prototypes": means, "class_counts": counts})
        self.labels_, self.models_, self.n_clusters_, self.history_ = labels, models_np, m, history
        return self
