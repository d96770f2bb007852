"""Baselines of the three papers: Local, Global (FedAvg) and one-shot k-means (IFCA Alg. 1).

Global is IFCA with a single model (k = 1: every client is assigned to it),
so FedAvg exists once, inside :class:`~synth.algorithms.ifca.IFCA`.
"""

from __future__ import annotations

import numpy as np

from ..validation import check_choice, check_int, check_random_state, check_real
from .backend import ModelBackend
from .common import apply_round, assignment_weights, participants, step_sizes
from .ifca import IFCA
from .params import Estimator, shared
from .result import FitResult, History, Monitor

__all__ = ["GlobalModel", "LocalModels", "OneShotKMeans", "train_clusters"]


class LocalModels(Estimator):
    """Local baseline: every client trains alone.

    Parameters
    ----------
    local : ``"erm"`` (exact local ERM) or ``"gd"`` (``local_train_steps`` GD steps of size
        ``local_step_size``), as for the local models of SR-FCA's ONE_SHOT and one-shot clustering.
    """

    _parameter_constraints = shared("local", "local_train_steps", "local_step_size")

    def __init__(self, local: str = "erm", local_train_steps: int = 100, local_step_size: float = 0.1):
        self.local = local
        self.local_train_steps = local_train_steps
        self.local_step_size = local_step_size

    def fit(self, backend: ModelBackend) -> LocalModels:
        v = self._validate_params(backend)
        method, steps, lr = v["local"], v["local_train_steps"], v["local_step_size"]
        models = backend.to_numpy(backend.local_models(method, steps, lr))
        labels = np.arange(backend.n_clients)
        history = History()
        history.record(0, labels)
        self.result_ = FitResult(labels, models, backend.n_clients, history, rounds=steps if method == "gd" else 1)
        self.labels_, self.models_, self.n_clusters_, self.history_ = labels, models, backend.n_clients, history
        return self


class GlobalModel(IFCA):
    """Global baseline (FedAvg, McMahan et al.): one model for all clients = IFCA with k = 1."""

    _runs_of = "global-model (FedAvg)"
    _parameter_constraints = shared("n_rounds", "step_size", "averaging", "local_steps", "participation", "init",
                                    "random_state", "monitor", "monitor_every")

    def __init__(self, n_rounds: int = 300, step_size=0.1, averaging: str = "gradient", local_steps: int = 10,
                 participation: float = 1.0, init="zeros", random_state=None, monitor: Monitor | None = None,
                 monitor_every: int = 1):
        super().__init__(n_clusters=1, n_rounds=n_rounds, step_size=step_size, averaging=averaging,
                         local_steps=local_steps, participation=participation, init=init, n_init=1,
                         random_state=random_state, monitor=monitor, monitor_every=monitor_every)


def train_clusters(backend: ModelBackend, models, labels: np.ndarray, n_rounds: int, step_size: float,
                   averaging: str = "gradient", local_steps: int = 10, participation: float = 1.0,
                   rng: np.random.Generator | None = None, history: History | None = None,
                   monitor: Monitor | None = None, first_round: int = 0):
    """Federated training inside a *fixed* clustering: FedAvg (or gradient averaging) per cluster.

    The second stage of IFCA Alg. 1 and of Local-KMeans.  ``labels`` may hold
    -1 for clients that train nothing.  Returns the trained model stack.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    n_rounds = check_int("n_rounds", n_rounds, low=0)
    step_size = check_real("step_size", step_size, low=0.0, low_inclusive=False)
    check_choice("averaging", averaging, ("gradient", "model"))
    check_int("local_steps", local_steps, low=1)
    k = len(models) if not hasattr(models, "shape") else models.shape[0]
    labels = np.asarray(labels)
    if labels.shape != (backend.n_clients,) or labels.min(initial=0) < -1 or labels.max(initial=0) >= k:
        raise ValueError(f"labels must be {backend.n_clients} cluster ids in [-1, {k - 1}], got shape "
                         f"{labels.shape} with range [{labels.min(initial=0)}, {labels.max(initial=0)}]")
    lr = np.full(k, step_size)
    for t in range(n_rounds):
        clients = participants(rng, backend.n_clients, participation)
        lab = labels if clients is None else labels[clients]
        W = assignment_weights(lab, k, backend.n_samples if clients is None else backend.n_samples[clients])
        models = apply_round(backend, models, W, lr, averaging, local_steps, clients)
        if history is not None:
            extra = {} if monitor is None else monitor(first_round + t, backend.to_numpy(models), labels)
            history.record(first_round + t, labels, **extra)
    return models


class OneShotKMeans(Estimator):
    """One-shot clustering (IFCA Alg. 1): local ERMs, k-means on them, then FL inside each cluster.

    Parameters
    ----------
    n_clusters : k for k-means.
    local : ``"erm"`` (exact) or ``"gd"`` local models; ``local_steps``/``local_step_size`` for GD.
    n_rounds, step_size, averaging, local_steps, participation : the per-cluster FL stage.
    """

    _parameter_constraints = shared("n_clusters", "local", "local_train_steps", "local_step_size", "n_rounds",
                                    "step_size", "averaging", "local_steps", "participation", "kmeans_n_init",
                                    "random_state", "monitor")

    def __init__(self, n_clusters: int = 2, local: str = "erm", local_train_steps: int = 100,
                 local_step_size: float = 0.1, n_rounds: int = 100, step_size: float = 0.1,
                 averaging: str = "gradient", local_steps: int = 10, participation: float = 1.0,
                 kmeans_n_init: int = 10, random_state=None, monitor: Monitor | None = None):
        self.n_clusters = n_clusters
        self.local = local
        self.local_train_steps = local_train_steps
        self.local_step_size = local_step_size
        self.n_rounds = n_rounds
        self.step_size = step_size
        self.averaging = averaging
        self.local_steps = local_steps
        self.participation = participation
        self.kmeans_n_init = kmeans_n_init
        self.random_state = random_state
        self.monitor = monitor

    def fit(self, backend: ModelBackend) -> OneShotKMeans:
        v = self._validate_params(backend)
        k = v["n_clusters"]
        gamma = float(step_sizes(self.step_size)[0])
        rng = check_random_state(self.random_state)
        local = backend.to_numpy(backend.local_models(v["local"], v["local_train_steps"], v["local_step_size"]))
        from sklearn.cluster import KMeans  # imported where used: keeps `python -m synth` start-up fast

        km = KMeans(n_clusters=k, n_init=v["kmeans_n_init"],
                    random_state=int(rng.integers(2**31 - 1))).fit(local)
        labels = km.labels_.astype(np.int64)
        history = History()
        history.record(0, labels)
        models = backend.from_numpy(km.cluster_centers_)
        models = train_clusters(backend, models, labels, self.n_rounds, gamma, self.averaging, self.local_steps,
                                self.participation, rng, history, self.monitor, first_round=1)
        models_np = backend.to_numpy(models)
        self.result_ = FitResult(labels, models_np, k, history, rounds=self.n_rounds,
                                 extra={"local_models": local})
        self.labels_, self.models_, self.n_clusters_, self.history_ = labels, models_np, k, history
        return self
