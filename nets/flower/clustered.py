"""IFCA, SR-FCA and CLoVE as Flower strategies for any model and any ClientApp that keeps the client contract, and
the papers' baselines, :class:`Global` (FedAvg) and :class:`Local`, on the same driver.

A Flower user builds one of these strategies from the algorithm's hyper-parameters and starts it as any Flower
strategy::

    strategy = IFCA(n_clusters=4, local_steps=10, lr=0.1)
    result = strategy.start(grid, initial_arrays=ArrayRecord(model.state_dict()), num_rounds=20)

``initial_arrays`` is one model's ``state_dict`` record (the strategy makes the other cluster models from it,
:func:`~nets.flower.arrays.replicate`) or the ``k`` cluster models stacked by
:func:`~nets.flower.arrays.stack_clusters`.  The rounds are the algorithm's estimator's (below), not Flower's
round loop.  What the clients must answer (``docs/flower-contract.md``): Flower's ``train`` and ``evaluate``
messages, plus ``query.losses`` (the losses of the cluster models on the client's training data) and, for SR-FCA
and gradient averaging, ``query.gradient``.  :func:`nets.flower.torch_client.torch_client_app` makes such a
ClientApp from any PyTorch ``nn.Module`` and DataLoaders.

The three strategies share the exchange (:meth:`ClusteredStrategy._engine_exchange`: the contract's messages,
the reply check :func:`reply_defect` -- a malformed or non-finite reply loses its client -- and lost clients), the
result records and the driver (:meth:`ClusteredStrategy.start`).  ``nets flower``'s strategies
(:mod:`nets.flower.strategies`) are these strategies, built from ``nets run``'s parameters.  The driver, its
exchange, the reply checks and the five front-ends are one module of over 1,000 lines because each piece reaches
into the driver's state.

Each algorithm exists once, in :mod:`synth.algorithms`: IFCA (IFCA journal Alg. 2), CLoVE (Alg. 1) and SR-FCA
(Alg. 1-4) are the estimators themselves, :class:`synth.algorithms.ifca.IFCA`, :class:`synth.algorithms.clove.CLoVE`
and :class:`synth.algorithms.srfca.SRFCA`, the ones of ``nets run``, run on the server
(:meth:`ClusteredStrategy.start`): each of their operations on client data (losses, local updates, local models,
gradients) is one exchange of the contract's messages (:class:`~nets.flower.backend.FederatedBackend` on the
user's model layout, flat float64 vectors of :class:`~nets.flower.arrays.Layout`), so they take ``nets run``'s
decisions from the same numbers.  With IFCA's
``client_choice=True`` one message per client and round carries every model with ``choose="lowest-loss"``: the
client trains its lowest-loss model and returns it with its losses, from which the estimator assigns.
``config["server-round"]`` counts the exchanges; the records count the estimator's rounds (SR-FCA's: ONE_SHOT's
``C_0``, then one per REFINE).

Faults.  A client that fails (its reply is an error), does not answer within the round's timeout, or sends a
malformed or non-finite reply (:func:`reply_defect`: arrays that are not the model's or hold NaN or
inf, a ``num-examples`` that is not a number > 0, ...) is *lost* for that exchange: it leaves the exchange's
aggregate (its cluster's model is the mean of the updates that arrived, not an average with the model it was
sent) and is asked again in the next round.  SR-FCA resumes (the estimator's rule for lost clients): a client
lost in a TrimmedMeanGD step leaves that step's trimmed mean, one lost in RECLUSTER keeps its cluster, one whose
ONE_SHOT local model did not arrive is no node of ONE_SHOT's graph and is asked for it again before each REFINE
(``dist="l2"``; with ``dist="cross"`` it stays out: its cross losses need every other client).
``accept_failures=False`` ends the run instead (:class:`RoundFailed`, one line naming the node, its partition and
the defect).  ``stop()`` ends a run at its next exchange (:class:`RunStopped`).

Every round (the estimator's) logs one line (clusters, their sizes, clients answering) and puts its numbers in
Flower's ``Result``:
``train_metrics_clientapp[round]`` (``clusters``, ``cluster-sizes``, ``answered``, ``lost``, ``unassigned``, the
clients' mean ``train-loss`` and the algorithm's objective) and ``evaluate_metrics_clientapp[round]`` (the
clients' evaluate metrics, ``num-examples``-weighted, each client scoring its cluster's model).
"""

from __future__ import annotations

import dataclasses
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from logging import INFO, WARNING
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.serverapp.strategy.strategy_utils import aggregate_metricrecords
from flwr.supercore import log

from synth.algorithms.clove import CLoVE as _CLoVEEstimator
from synth.algorithms.common import group_argmin, initial_models
from synth.algorithms.srfca import (
    DISTS,
    QUANTILE_NAMES,
    auto_threshold,
)
from synth.backend import GLMBackend
from synth.validation import check_choice, check_int, check_random_state, check_real

from .arrays import Layout, cluster_models, replicate, split_clusters
from .backend import FederatedBackend
from .session import RunStopped, StoppableGrid

__all__ = ["ARRAYS", "CLoVE", "CONFIG", "ClientContractError", "ClusteredResult", "ClusteredStrategy", "GRADIENT",
           "Global", "IFCA", "LOSSES", "Local", "METRICS", "RoundFailed", "RunStopped", "SRFCA", "auto_threshold",
           "reply_defect", "stop_running"]

# the client contract (docs/flower-contract.md): message types and the keys of their RecordDicts
TRAIN = MessageType.TRAIN
EVALUATE = MessageType.EVALUATE
LOSSES = f"{MessageType.QUERY}.losses"
GRADIENT = f"{MessageType.QUERY}.gradient"
ARRAYS, CONFIG, METRICS = "arrays", "config", "metrics"
NUM_EXAMPLES = "num-examples"
AVERAGINGS = ("model", "gradient")
CHOOSE_LOWEST = "lowest-loss"  # config["choose"]: the client trains its lowest-loss model of those sent
# IFCA's restarts when n_init is left out and the strategy replicates one record: on a 3-group digits app (three
# rotations, two clients each) one start separates the groups on 2 of 5 seeds, 5 restarts on 5 of 5
# (tests/test_flower_defaults.py)
DEFAULT_RESTARTS = 5
# the estimators' hyper-parameters the driver runs on, and the strategy option that sets each (estimator_params
# may not: the driver's runs, starts, rounds and train messages must be the estimator's)
DRIVER_PARAMS = {"init": "initial_arrays or init", "random_state": "seed", "monitor": "monitor",
                 "n_clusters": "n_clusters", "n_init": "n_init", "n_rounds": "num_rounds of start()",
                 "step_size": "lr or step_sizes", "local_steps": "local_steps", "start": "initial_arrays or init"}
ARRAY_BYTES = 1024  # an Array in an ArrayRecord beside its data (Python objects, its key): measured ~800 B


# the strategies running in this process (stop_running() ends them, e.g. on Ctrl-C)
_RUNNING: weakref.WeakSet = weakref.WeakSet()


def stop_running() -> int:
    """Stop every cflab strategy running in this process (the clustered ones and ``nets flower``'s; each raises
    :class:`RunStopped` at its next exchange); returns how many were running."""
    running = list(_RUNNING)
    for strategy in running:
        strategy.stop()
    return len(running)


@dataclasses.dataclass
class ClusteredResult(Result):
    """Flower's ``Result`` of a clustered strategy: ``arrays`` is a ``RecordDict`` of the cluster models and the
    assignment (:func:`~nets.flower.arrays.cluster_models`), not one model's ``ArrayRecord``."""

    arrays: RecordDict = dataclasses.field(default_factory=RecordDict)

    def __repr__(self) -> str:
        models = split_clusters(self.arrays)
        size = sum(len(a.data) for m in models for a in m.values()) / 1024**2
        metrics = Result(ArrayRecord(), self.train_metrics_clientapp, self.evaluate_metrics_clientapp,
                         self.evaluate_metrics_serverapp)
        return (f"Cluster models:\n\t{len(models)} ArrayRecords ({size:.3f} MB)\n\n"
                + repr(metrics).split("\n\n", 1)[1])


class ClientContractError(RuntimeError):
    """No client answers a message of the client contract (``docs/flower-contract.md``): e.g. a ClientApp from a
    Flower template that answers ``train`` and ``evaluate`` only."""


# Flower's error reply for a message type the ClientApp has no function for; a stacked key in a load error
_UNKNOWN_MESSAGE = re.compile(r"No \w+ function registered with name")
_STACKED_KEY = re.compile(r"cluster\d+/")


class RoundFailed(RuntimeError):
    """A client was lost in a run with ``accept_failures=False``."""


class _Replies:
    """The operations on model stacks of :class:`FederatedBackend`: :class:`synth.backend.GLMBackend`'s (one
    implementation), on float64 numpy rows."""

    def __init__(self, n_params: int):
        self.n_params = int(n_params)

    # the operations on model stacks: the numpy backend's own (one implementation), in float64
    dtype = np.float64
    combine, trimmed_mean, step, project = (GLMBackend.combine, GLMBackend.trimmed_mean, GLMBackend.step,
                                            GLMBackend.project)
    distances, take, concat, to_numpy = GLMBackend.distances, GLMBackend.take, GLMBackend.concat, GLMBackend.to_numpy
    from_numpy = to_numpy


class ClusteredStrategy(Strategy):
    """What the clustered strategies share: the estimator's run on the client contract (:meth:`start`), the cluster
    models, faults, metrics.

    Parameters
    ----------
    n_clusters, averaging : the number of cluster models (k) and ``"model"`` or ``"gradient"`` averaging (IFCA,
        CLoVE).
    local_steps : local steps (>= 1: the estimators' tau) a client takes on a ``train`` message (sent as
        ``config["local-steps"]``), unless ``train_config`` (:meth:`start`) has a ``local-steps`` entry, which
        reaches the clients unchanged.
    lr : the clients' step size (``config["lr"]``) and, with gradient averaging, the server's, unless
        ``train_config`` has an ``lr`` entry: a default, as every hyper-parameter sent in ``config``.
    fraction_train : fraction of the connected nodes asked each round (at least one), drawn from ``seed`` (IFCA's
        and CLoVE's: their estimator's participation, :meth:`_participation`, over the nodes sorted by id).
    fraction_evaluate : fraction of the assigned nodes asked to evaluate when an evaluation is due.
    evaluate_every : evaluate every this many rounds (and in the last); 0: no federated evaluation.
    min_available_nodes : nodes to wait for before the first round (at most ``start_timeout`` seconds).
    accept_failures : ``True``: a lost client leaves the round (module docstring); ``False``: the run ends with
        :class:`RoundFailed` at the first lost client.
    seed : an int, SeedSequence or Generator (the sampling, CLoVE's clustering, the replicated initial models).
    start_timeout : seconds to wait for ``min_available_nodes``, finite and > 0.
    stacks : the server's operations on model stacks (the estimator's combine, step, trimmed mean, distances):
        ``None`` (default), float64 numpy rows of the model's :class:`~nets.flower.arrays.Layout` (the
        :class:`synth.backend.GLMBackend` operations); or a :class:`nets.backend.TorchBackend` of the clients'
        network (torch tensors in that backend's precision and device, as ``nets run``'s stacks).  Its
        ``n_params`` must be the layout's, in the same order (``FunctionalModel``'s flat vector of the
        ``state_dict``).  The models travel in the layout's dtypes either way, and :attr:`models` and the records
        hold float64 numpy rows.
    lr_decay : the clients' step size's factor per round, in (0, 1]: round ``t`` (from 0) sends ``lr *
        lr_decay**t`` with every ``train`` message (IFCA's CIFAR experiment: 0.99; ``nets run``'s ``lr_decay``, its
        torch backend's local steps).  Gradient averaging's server step is not decayed, as in ``nets run``.
    init : the starting models: ``None`` (default), ``initial_arrays``' (one record is replicated); or a scheme of
        ``stacks``' ``init_models`` (``"default"``: the network's own torch initialisation, ``"gaussian"``,
        ``"zeros"``), drawn from ``seed`` as ``nets run``'s estimator draws them
        (:func:`synth.algorithms.common.initial_models`: each run's ``k`` models in turn, before any other draw of
        the seed), so the starts are ``nets run``'s; ``initial_arrays`` then gives the model's layout only (its
        values are not used).  Needs ``stacks``.
    monitor : ``monitor(round, models, labels) -> dict | None``, the estimator's monitor (:mod:`synth.algorithms`,
        ``nets run``'s per-round history): called after each round (from 0; SR-FCA: ONE_SHOT, then each REFINE)
        once per run (IFCA's restarts: run after run) with that run's models (float64 numpy rows) and
        each client's cluster (-1: none; clients in the federation's order, the nodes sorted by id), before the
        round's records; the dict it returns joins the estimator's record of the call.
    estimator_params : further hyper-parameters of the :mod:`synth.algorithms` estimator, by its own names (``nets
        run --algo-param``), over the strategy's: e.g. SR-FCA's ``variant="public-code"``, CLoVE's
        ``participation`` or IFCA's ``divergence_factor``.  A name the estimator does not declare is a ValueError
        at :meth:`start`; the names the driver runs on (:data:`DRIVER_PARAMS`: the starts, the seed, the monitor,
        the number of models and runs, the rounds, the step sizes, the local steps) are the strategy's options and
        are refused here.  ``nets flower`` passes ``nets run``'s hyper-parameters this way.

    Flower's ``FedAvg`` arguments, with FedAvg's meaning: ``min_train_nodes`` and ``min_evaluate_nodes`` (the
    fewest nodes sampled, when that many are there; default 1), ``fraction_evaluate=0.0`` (no federated
    evaluation), ``weighted_by_key`` (the reply metric that is a client's sample count: CLoVE's and SR-FCA's
    weights, the evaluation's weighting), ``arrayrecord_key`` and ``configrecord_key`` (the keys of the
    ``ArrayRecord`` and ``ConfigRecord`` in every message and reply) and ``train_metrics_aggr_fn`` /
    ``evaluate_metrics_aggr_fn`` (``fn(list[RecordDict], weighted_by_key) -> MetricRecord``: the clients' train
    metrics it aggregates join the round's clustering metrics, whose own keys win; the evaluation's metrics).
    """

    algorithm = ""
    # a reply's numbers are checked (reply_defect): a non-finite model, gradient or metric loses its client
    _check_values = True
    # the labels keep the nodes without a cluster (-1): SR-FCA's clusterings leave clients out, where IFCA's and
    # CLoVE's -1 is a client that was not in the round
    _unassigned_kept = False

    def __init__(self, n_clusters: int = 1, *, averaging: str = "model", local_steps: int = 10, lr: float = 0.1,
                 fraction_train: float = 1.0, fraction_evaluate: float = 1.0, evaluate_every: int = 1,
                 min_available_nodes: int = 2,
                 accept_failures: bool = True, seed: Any = 0, start_timeout: float = 60.0,
                 min_train_nodes: int = 1, min_evaluate_nodes: int = 1, weighted_by_key: str = NUM_EXAMPLES,
                 arrayrecord_key: str = ARRAYS, configrecord_key: str = CONFIG,
                 train_metrics_aggr_fn: Callable[[list[RecordDict], str], MetricRecord] | None = None,
                 evaluate_metrics_aggr_fn: Callable[[list[RecordDict], str], MetricRecord] | None = None,
                 stacks: Any = None, lr_decay: float = 1.0, init: str | None = None,
                 monitor: Callable[[int, Any, np.ndarray], dict | None] | None = None,
                 estimator_params: dict[str, Any] | None = None):
        self.n_clusters = check_int("n_clusters", n_clusters, low=1)
        self.averaging = check_choice("averaging", averaging, AVERAGINGS)
        self.local_steps = check_int("local_steps", local_steps, low=1)  # the estimators' tau >= 1
        self.lr = check_real("lr", lr, low=0.0, low_inclusive=False)
        self.fraction_train = check_real("fraction_train", fraction_train, low=0.0, high=1.0, low_inclusive=False)
        self.fraction_evaluate = check_real("fraction_evaluate", fraction_evaluate, low=0.0, high=1.0)
        self.min_train_nodes = check_int("min_train_nodes", min_train_nodes, low=1)
        self.min_evaluate_nodes = check_int("min_evaluate_nodes", min_evaluate_nodes, low=0)
        for name, value in (("weighted_by_key", weighted_by_key), ("arrayrecord_key", arrayrecord_key),
                            ("configrecord_key", configrecord_key)):
            if not isinstance(value, str) or not value:
                raise TypeError(f"{name} must be a non-empty string, got {value!r}")
        if arrayrecord_key == configrecord_key:
            raise ValueError(f"arrayrecord_key and configrecord_key must differ, both are {arrayrecord_key!r}")
        self.weighted_by_key = weighted_by_key
        self.arrayrecord_key, self.configrecord_key = arrayrecord_key, configrecord_key
        for name, fn in (("train_metrics_aggr_fn", train_metrics_aggr_fn),
                         ("evaluate_metrics_aggr_fn", evaluate_metrics_aggr_fn)):
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be a function (list[RecordDict], str) -> MetricRecord, got {fn!r}")
        self.train_metrics_aggr_fn = train_metrics_aggr_fn
        self.evaluate_metrics_aggr_fn = evaluate_metrics_aggr_fn or aggregate_metricrecords
        self.evaluate_every = check_int("evaluate_every", evaluate_every, low=0)
        self.min_available_nodes = check_int("min_available_nodes", min_available_nodes, low=1)
        if not isinstance(accept_failures, bool):
            raise TypeError(f"accept_failures must be True or False, got {accept_failures!r}")
        self.accept_failures = accept_failures
        self.start_timeout = check_real("start_timeout", start_timeout, low=0.0, low_inclusive=False)
        if not np.isfinite(self.start_timeout):
            raise ValueError(f"start_timeout must be a finite number of seconds > 0, got {start_timeout!r}")
        self._rng = check_random_state(seed)
        for op in ("combine", "step", "distances", "to_numpy", "from_numpy", "n_params"):
            if stacks is not None and not hasattr(stacks, op):
                raise TypeError(f"stacks must be None or a nets.backend.TorchBackend (operations on model stacks), "
                                f"got {type(stacks).__name__} without {op!r}")
        self.stacks = stacks
        self.lr_decay = check_real("lr_decay", lr_decay, low=0.0, high=1.0, low_inclusive=False)
        if init is not None and not isinstance(init, str):
            raise TypeError(f"init must be None or a scheme name (e.g. 'default'), got {init!r}")
        if init is not None and stacks is None:
            raise ValueError(f"init={init!r} draws the starting models with stacks.init_models: pass stacks (a "
                             "nets.backend.TorchBackend of the network)")
        self.init = init
        if monitor is not None and not callable(monitor):
            raise TypeError(f"monitor must be a function (round, models, labels) -> dict, got {monitor!r}")
        self.monitor = monitor
        if estimator_params is not None and not isinstance(estimator_params, dict):
            raise TypeError(f"estimator_params must be a dict of hyper-parameters by name, got {estimator_params!r}")
        check_estimator_params(estimator_params or {})
        self.estimator_params = dict(estimator_params or {})
        self.layout: Layout | None = None
        self.models = np.zeros((0, 0))
        self.labels: dict[int, int] = {}  # node -> its cluster (last assignment)
        self.partitions: dict[int, int] = {}  # node -> partition-id, where the clients report it
        self.history: list[dict] = []  # per round: {"round", "labels": {node: cluster}, metrics}
        self.evaluations: dict[int, dict] = {}  # node -> its metrics in the last federated evaluation
        self.lost: list[tuple[int, str, int, str]] = []  # (round, message type, node, why)
        self.num_rounds = 0
        self.running = False
        self._stop = threading.Event()
        self._grid: StoppableGrid | None = None
        self._timeout = 3600.0
        self._asked: dict[str, list[int]] = {}
        self._round_lost: set[int] = set()
        self._best_run = 0  # IFCA's restarts: the run whose clusters a round shows
        # the estimator's run (IFCA): its exchanges, its federation (sorted node ids), train_config, round records
        self._exchanges = 0
        self._federation: list[int] = []
        self._train_config: dict = {}
        self._message_records: dict[str, ConfigRecord] = {}  # records every message carries beside its own
        self._begin_round(0)

    # ------------------------------------------------------------------ Flower's Strategy API
    def summary(self) -> None:
        """Log the algorithm and its settings."""
        log(INFO, "\t├──> %s: %s", type(self).__name__, self.algorithm)
        log(INFO, "\t└──> %s", ", ".join(f"{k}={v}" for k, v in self._settings().items()))

    def _runs(self) -> int:
        """The runs the estimator fits side by side (IFCA's restarts: its starts times its step sizes)."""
        return 1

    def _starts(self) -> int:
        """The runs' distinct starts (IFCA's ``n_init``: each is run once per step size)."""
        return self._runs()

    def _backend(self, m: int, cls: type[FederatedBackend] = FederatedBackend, **options) -> FederatedBackend:
        """The estimator's backend over the ``m`` nodes: the model stacks are float64 numpy rows of
        :class:`~nets.flower.arrays.Layout` (the server knows the model only from ``initial_arrays``) or
        ``stacks``', the exchanges are :meth:`_engine_exchange`; ``options``: the algorithm's (``choose``, ...)."""
        stacks = _Replies(self.layout.n_params) if self.stacks is None else self.stacks
        if stacks.n_params != self.layout.n_params:
            raise ValueError(f"stacks hold models of {stacks.n_params} parameters; the model has "
                             f"{self.layout.n_params} (initial_arrays)")
        # each client's weighted_by_key (num-examples) as its replies say, unless the strategy knows them
        known = {"exchange": self._engine_exchange, "n_samples": np.ones(m, dtype=np.int64), **self._known_clients(m)}
        return cls(known.pop("exchange"), stacks, known.pop("n_samples"), lr_decay=self.lr_decay,
                   integer=self.layout.integer, local_start=lambda: self._start[None], step_sizes=self._run_step_sizes,
                   on_round=self._begin_round, **known, **options)

    def _estimator(self, m: int, rounds: int, train: dict, starts: np.ndarray, monitor):
        raise NotImplementedError

    def _make(self, cls, **own):
        """The estimator ``cls`` with the strategy's hyper-parameters ``own`` and :attr:`estimator_params` over
        them (a name ``cls`` does not declare: ValueError naming it)."""
        cls.check_param_names(tuple(self.estimator_params))
        return cls(**{**own, **self.estimator_params})

    def _records(self) -> int:
        """The rounds the estimator's monitor reports (IFCA's and CLoVE's T)."""
        return self.num_rounds

    def _fitted(self, est, nodes: list[int]) -> None:
        """The fit's models and each node's cluster (the estimator's final assignment)."""
        self.models = self._numpy(est.result_.models)
        self.labels = {nodes[i]: int(c) for i, c in enumerate(est.result_.labels) if c >= 0 or self._unassigned_kept}

    def _numpy(self, models) -> np.ndarray:
        """A stack of the estimator's models as float64 numpy rows (the records, the result)."""
        return np.asarray(models if self.stacks is None else self.stacks.to_numpy(models), dtype=np.float64)

    def _round_extra(self, t: int, runs: list[tuple[np.ndarray, np.ndarray]], backend: FederatedBackend) -> dict:
        """Round ``t``'s metrics beyond the clusters: the objective, each answering client's loss at its model
        (the run shown)."""
        idx, L = backend.round_losses
        k, labels = len(runs[0][0]), runs[self._best_run][1]
        chosen = labels[idx] if len(idx) else np.zeros(0, dtype=np.int64)
        objective = L[np.arange(len(idx)), self._best_run * k + chosen].mean() if len(idx) else np.nan
        return {"objective": float(objective)}

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int | None = None, timeout: float = 3600,
              train_config: ConfigRecord | None = None, evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, RecordDict], MetricRecord | None] | None = None) -> ClusteredResult:
        """Fit the algorithm's estimator (:mod:`synth.algorithms`) from ``initial_arrays`` on the grid's nodes.

        ``num_rounds``: IFCA's and CLoVE's T (default 3, Flower's); SR-FCA's is ``1 + n_refine * trmean_steps``
        (another value is an error).  ``timeout``: seconds an exchange waits for its clients.  ``train_config``:
        sent with every ``train`` and ``query.gradient`` message; its ``lr`` and ``local-steps`` override the
        strategy's.  Returns Flower's ``Result`` (:class:`ClusteredResult`) whose ``arrays`` are the final cluster
        models in Flower's records (:func:`~nets.flower.arrays.cluster_models`: a ``RecordDict`` with one
        ``ArrayRecord`` per cluster, ``cluster-0``, ``cluster-1``, ..., and the ``assignment`` of each node;
        :func:`~nets.flower.arrays.cluster_state_dict` gives cluster j's ``state_dict``).  ``evaluate_fn(round,
        models)`` receives the same form: before the first round the initial models, after each round that
        round's cluster models (IFCA's restarts: the round's best run, in the last round the run kept) and the
        assignment the clients' evaluation used.
        """
        train = self._begin(initial_arrays, self._check_rounds(num_rounds), timeout, train_config)
        T = self._records()
        R, starts = self._runs(), self.models
        result = ClusteredResult()
        log(INFO, "Starting %s strategy:", type(self).__name__)
        self.summary()
        try:
            nodes = self._connect(grid)
            backend = self._backend(len(nodes))
            self.models = starts[:len(starts) // self._starts()]  # the first run's models (round 0)
            self._evaluate_round(0, result, evaluate_config, evaluate_fn, federated=False)
            runs: list[tuple[np.ndarray, np.ndarray]] = []

            def monitor(t: int, models: np.ndarray, labels: np.ndarray) -> dict:
                runs.append((self._numpy(models), np.asarray(labels)))
                out = (self.monitor(t, runs[-1][0], labels) if self.monitor is not None else None) or {}
                if len(runs) == R:  # the round's last run: its records and evaluation (the last after the fit)
                    self._record_round(t, list(runs), backend, result)
                    runs.clear()
                    if t < T - 1:
                        self._evaluate_round(t + 1, result, evaluate_config, evaluate_fn)
                    self._begin_round(t + 1)  # what follows is the next round's (SR-FCA: the next REFINE)
                    backend._round = t + 1
                return out

            est = self._est = self._estimator(len(nodes), self.num_rounds, train, starts, monitor)
            est.fit(backend)
            self._fitted(est, nodes)
            self._evaluate_round(T, result, evaluate_config, evaluate_fn)
        finally:
            self.running = False
            _RUNNING.discard(self)
        result.arrays = cluster_models([self.layout.unflatten(row) for row in self.models], self.labels,
                                       self.partitions)
        return result

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> list[Message]:
        """Not Flower's round loop: the estimator makes the exchanges (:meth:`start`)."""
        raise RuntimeError(f"{type(self).__name__}'s rounds are the estimator's; run it with start()")

    def aggregate_train(self, server_round: int, replies: Iterable[Message]) -> tuple[ArrayRecord | None,
                                                                                     MetricRecord | None]:
        """Not Flower's round loop: the estimator makes the exchanges (:meth:`start`)."""
        raise RuntimeError(f"{type(self).__name__}'s rounds are the estimator's; run it with start()")

    def _record_round(self, t: int, runs: list[tuple[np.ndarray, np.ndarray]], backend: FederatedBackend,
                      result: ClusteredResult) -> None:
        """Round ``t``'s records: the clusters (with restarts, of the run of lowest total loss this round: IFCA
        Sec. VI-A's rule) and the clients' train metrics."""
        R, k, nodes = len(runs), len(runs[0][0]), self._federation
        idx, L = backend.round_losses
        if len(idx) and R > 1:
            self._best_run = int(np.nan_to_num(L.reshape(len(idx), R, k), nan=np.inf).min(2).sum(0).argmin())
        b = self._best_run
        self.models, labels = runs[b]
        self.labels = {nodes[i]: int(c) for i, c in enumerate(labels) if c >= 0 or self._unassigned_kept}
        ok, asked = self._round_ok, len(self._round_asked)  # answered: the clients asked and never lost this round
        result.train_metrics_clientapp[t + 1] = self._train_metrics(
            t + 1, asked, asked - len(self._round_lost & self._round_asked), self._round_extra(t, runs, backend),
            _train_losses(ok, self.weighted_by_key), ok)
        if R > 1:  # every run's clusters (the round's labels are the best run's)
            self.history[-1].update({"best-run": b, "run-labels": {
                nodes[i]: [int(run[1][i]) for run in runs] for i in idx}})

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> list[Message]:
        """Flower's ``evaluate`` messages, when due: each sampled node with a cluster gets its cluster's model."""
        if not self._evaluate_due(server_round) or not len(self.models) or self.fraction_evaluate == 0.0:
            self._asked[EVALUATE] = []
            return []
        models = split_clusters(arrays) if len(arrays) else []
        nodes = [n for n in self._nodes() if self.labels.get(n, -1) >= 0
                 and self.labels[n] < len(models)]
        nodes = self._sample(nodes, self.fraction_evaluate, self.min_evaluate_nodes)
        config = ConfigRecord({**config, "server-round": server_round})
        return self._messages(EVALUATE, {n: self._content(models[self.labels[n]], config)
                                         for n in nodes})

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """The clients' evaluate metrics, ``num-examples``-weighted (Flower's ``aggregate_metricrecords``)."""
        ok = self._collect(server_round, EVALUATE, replies)
        # each metric is a number in every reply or a list of one length in every reply: the form most replies
        # give (the first node's among equals); a reply of another form is lost, as a malformed one
        forms: dict[str, list] = {}
        for node in sorted(ok):
            for key, value in ok[node][METRICS].items():
                forms.setdefault(key, []).append(len(value) if isinstance(value, list) else None)
        usual = {key: max(dict.fromkeys(seen), key=seen.count) for key, seen in forms.items()}
        for node in sorted(ok):
            for key, value in ok[node][METRICS].items():
                form = len(value) if isinstance(value, list) else None
                if form != usual[key]:
                    what = "a number" if usual[key] is None else f"a list of {usual[key]}"
                    self._lose(server_round, EVALUATE, node, f"metric {key!r} is {value!r} where the other "
                               f"clients send {what}")
                    del ok[node]
                    break
        if not ok:
            return None
        self.evaluations = {node: dict(ok[node][METRICS]) for node in sorted(ok)}
        # a client's identity is no metric to average; a reply without num-examples weighs 1
        contents = [RecordDict({METRICS: MetricRecord({self.weighted_by_key: 1, **{
            k: v for k, v in ok[n][METRICS].items() if k != "partition-id"}})}) for n in sorted(ok)]
        out = self.evaluate_metrics_aggr_fn(contents, self.weighted_by_key)
        out["evaluated"] = len(ok)
        out["lost"] = len(self._asked.get(EVALUATE, [])) - len(ok)
        log(INFO, "%s round %d: evaluated by %d clients: %s", self.algorithm, server_round, len(ok),
            ", ".join(f"{k} {v:.4g}" for k, v in out.items() if isinstance(v, float)))
        return out

    # ------------------------------------------------------------------ stopping
    def stop(self) -> None:
        """End the run at its next exchange: ``start`` raises :class:`RunStopped`."""
        self._stop.set()

    # ------------------------------------------------------------------ subclass hooks
    def _settings(self) -> dict:
        return {"n_clusters": self.n_clusters, "averaging": self.averaging, "local_steps": self.local_steps,
                "lr": self.lr, **({"lr_decay": self.lr_decay} if self.lr_decay != 1.0 else {}),
                "fraction_train": self.fraction_train, **({"init": self.init} if self.init is not None else {}),
                "evaluate_every": self.evaluate_every, "accept_failures": self.accept_failures}

    def _check_rounds(self, num_rounds: int | None) -> int:
        return check_int("num_rounds", 3 if num_rounds is None else num_rounds, low=1)

    def _n_models(self) -> int:
        return self.n_clusters

    def _initial_models(self, initial_arrays: ArrayRecord) -> np.ndarray:
        """``(k, P)``: ``initial_arrays`` as k models (one record is replicated, module docstring)."""
        if not isinstance(initial_arrays, ArrayRecord):
            raise TypeError(f"initial_arrays must be an ArrayRecord (e.g. ArrayRecord(model.state_dict())), got "
                            f"{type(initial_arrays).__name__}")
        records = split_clusters(initial_arrays)
        k = self._n_models()
        if not records:
            Layout(initial_arrays)  # the error of an empty record
        self.layout = Layout(records[0])
        self._check_memory(k * self._runs() // self._starts())  # every run's models (IFCA: starts x step sizes)
        for j, record in enumerate(records):
            _check_finite(self.layout, self.layout.flatten(record),
                          "initial_arrays" + (f" (cluster model {j})" if len(records) > 1 else ""))
        if self.init is not None:  # the seed's starts (nets run's): each run's k models in turn
            R = self._starts()
            if self.stacks.n_params != self.layout.n_params:
                raise ValueError(f"stacks hold models of {self.stacks.n_params} parameters; the model has "
                                 f"{self.layout.n_params} (initial_arrays)")
            return initial_models(self.stacks, self.init, R, k // R, self._rng).reshape(k, -1)
        if len(records) == 1 and k > 1:
            records = replicate(records[0], k, self._rng)
        if len(records) != k:
            raise ValueError(f"initial_arrays holds {len(records)} cluster models; {type(self).__name__} needs {k} "
                             "(or one, replicated)")
        return self.layout.stack(records)

    def _check_memory(self, k: int) -> None:
        """Refuse (:class:`synth.cost.ResourceError`, a ValueError) ``k`` cluster models that do not fit in the
        memory budget, before any is made: the server holds them as float64 rows (the models, the round's
        aggregate and its start) and as ArrayRecords (the stacked record and a message's copy, about
        :data:`ARRAY_BYTES` per array beside its data)."""
        from synth.cost import check_memory, format_bytes

        layout = self.layout
        itemsize = max(np.dtype(d).itemsize for d in layout.dtypes)
        per_model = layout.n_params * (3 * 8 + 2 * itemsize) + 2 * len(layout.keys) * ARRAY_BYTES
        check_memory(float(k) * per_model, f"{type(self).__name__} with {k} cluster models of {layout.n_params} "
                     f"parameters ({format_bytes(per_model)} each on the server)",
                     hint="fewer clusters (n_clusters, max_clusters, n_init) or a smaller model")

    def _evaluate_due(self, server_round: int) -> bool:
        return bool(self.evaluate_every) and (server_round % self.evaluate_every == 0
                                              or server_round == self.num_rounds)

    # ------------------------------------------------------------------ nodes and messages
    def _nodes(self) -> list[int]:
        return sorted(int(n) for n in self._grid.get_node_ids())

    def _sample(self, nodes: list[int], fraction: float, minimum: int = 1) -> list[int]:
        """A sorted random subset of ``max(minimum, 1, round(fraction * len(nodes)))`` nodes (all at fraction 1,
        or when there are no more)."""
        size = max(minimum, 1, int(round(fraction * len(nodes))))
        if fraction >= 1.0 or size >= len(nodes):
            return list(nodes)
        return sorted(int(n) for n in self._rng.choice(nodes, size=size, replace=False))

    def _messages(self, message_type: str, contents: dict[int, RecordDict]) -> list[Message]:
        """One message per node; the nodes asked are remembered for the aggregation of the replies."""
        self._asked[message_type] = list(contents)
        return [Message(content, dst_node_id=int(node), message_type=message_type)
                for node, content in contents.items()]

    def _collect(self, server_round: int, message_type: str, replies: Iterable[Message],
                 asked: list[int] | None = None, models: int | None = None,
                 choose: bool = False) -> dict[int, RecordDict]:
        """The valid replies' contents by node; the nodes asked that failed, did not answer or sent a malformed or
        non-finite reply (:func:`reply_defect`; ``models``: the models or gradients its ``arrays`` must hold;
        ``choose``: the message asked ``choose="lowest-loss"``, whose reply holds ``losses``) are lost.

        :class:`ClientContractError` when every node asked answered as a ClientApp that does not know the message:
        Flower's error for a message type without a function, or (``choose``) a reply without ``losses`` or an
        error that names a stacked key (the client loaded the cluster models as one model)."""
        asked = self._asked.get(message_type, []) if asked is None else asked
        wanted = set(asked)
        ok: dict[int, RecordDict] = {}
        lost: dict[int, str] = {}
        unknown: dict[int, str] = {}  # the replies of a ClientApp that does not know this message (the contract)
        for msg in replies:
            node = int(msg.metadata.src_node_id)
            if node not in wanted or node in ok or node in lost:
                continue  # a late answer to an earlier exchange
            if msg.has_error():
                reason = " ".join(str(msg.error.reason).split())
                lost[node] = f"failed: {reason}"
                if _UNKNOWN_MESSAGE.search(reason) or (choose and _STACKED_KEY.search(reason)):
                    unknown[node] = reason
                continue
            why = reply_defect(msg.content, self.layout, models, weight_key=self.weighted_by_key,
                               arrays_key=self.arrayrecord_key, values=self._check_values)
            if METRICS in msg.content.metric_records and _is_partition(msg.content[METRICS].get("partition-id")):
                self.partitions[node] = int(msg.content[METRICS]["partition-id"])
            if why is None and choose and "losses" not in msg.content[METRICS]:
                why = unknown[node] = f"its reply has no losses (the config asked choose={CHOOSE_LOWEST!r})"
            if why is not None:
                lost[node] = why
                continue
            ok[node] = msg.content
        if asked and len(unknown) == len(asked):
            node = min(unknown)
            what = f"{message_type} with choose={CHOOSE_LOWEST!r}" if choose else message_type
            raise ClientContractError(
                f"{type(self).__name__} round {server_round}: no client answers {what} (node {node}: "
                f"{unknown[node]}); the ClientApp must answer the message types of docs/flower-contract.md "
                "(train, evaluate, query.losses, query.gradient; nets.flower.torch_client.torch_client_app does)")
        for node in asked:
            if node in lost:
                self._lose(server_round, message_type, node, lost[node])
            elif node not in ok:
                self._lose(server_round, message_type, node, f"no answer within {self._timeout:g} s")
        return ok

    def _content(self, arrays: ArrayRecord, config: ConfigRecord) -> RecordDict:
        """A message's content: ``arrays`` and ``config`` under ``arrayrecord_key`` and ``configrecord_key``."""
        return RecordDict({**self._message_records, self.arrayrecord_key: arrays, self.configrecord_key: config})

    def _lose(self, server_round: int, message_type: str, node: int, why: str) -> None:
        self.lost.append((server_round, message_type, node, why))
        self._round_lost.add(node)
        who = f"node {node}" + (f" (partition {self.partitions[node]})" if node in self.partitions else "")
        log(WARNING, "%s round %d: %s lost in %s: %s", self.algorithm, server_round, who, message_type, why)
        if not self.accept_failures:
            raise RoundFailed(f"{type(self).__name__} round {server_round}: {who} lost in {message_type} "
                              f"({why}); accept_failures=False ends the run")

    def _reply_losses(self, server_round: int, kind: str, node: int, ok: dict[int, RecordDict],
                      width: int) -> np.ndarray | None:
        """The ``losses`` of ``node``'s reply, or None when it did not answer or sent another number of losses
        (then it is lost)."""
        if node not in ok:
            return None
        losses = np.asarray(ok[node][METRICS].get("losses", []), dtype=np.float64).ravel()
        if losses.shape != (width,):
            self._lose(server_round, kind, node, f"sent {losses.size} losses for {width} models")
            return None
        return losses

    def _train_metrics(self, server_round: int, asked: int, answered: int, extra: dict | None = None,
                       train_losses: dict[int, tuple[float, float]] | None = None,
                       replies: dict[int, RecordDict] | None = None) -> MetricRecord:
        """The round's clustering in Flower's Result, and its log line; with ``train_metrics_aggr_fn``, what it
        makes of the valid ``replies`` joins them (the clustering's keys win)."""
        k = len(self.models)
        sizes = np.bincount([c for c in self.labels.values() if 0 <= c < k], minlength=k) if k else np.zeros(0)
        unassigned = sum(1 for c in self.labels.values() if c < 0)
        out = MetricRecord({"clusters": int((sizes > 0).sum()), "cluster-sizes": [int(s) for s in sizes],
                            "answered": int(answered), "lost": int(asked - answered),
                            "unassigned": int(unassigned)})
        if train_losses:
            w = np.array([n for _, n in train_losses.values()])
            loss = np.array([v for v, _ in train_losses.values()])
            out["train-loss"] = float((w * loss).sum() / max(w.sum(), 1e-300))
        for key, value in (extra or {}).items():
            out[key] = value
        if self.train_metrics_aggr_fn is not None and replies:
            clients = self.train_metrics_aggr_fn([replies[n] for n in sorted(replies)], self.weighted_by_key)
            for key, value in (clients or {}).items():
                out.setdefault(key, value)
        self.history.append({"round": server_round, "labels": dict(self.labels), **{k: v for k, v in out.items()}})
        log(INFO, "%s round %d: %d clusters, sizes %s; %d of %d clients answered%s", self.algorithm, server_round,
            out["clusters"], list(out["cluster-sizes"]), answered, asked,
            "".join(f", {k} {out[k]:.4g}" for k in ("train-loss", *(extra or {})) if k in out
                    and isinstance(out[k], float)))
        return out


    # ------------------------------------------------------------------ the estimator's run (the engine)
    def _begin(self, initial_arrays: ArrayRecord, num_rounds: int, timeout: float,
               train_config: ConfigRecord | None) -> dict:
        """Check ``start``'s arguments and make the initial models; returns the clients' ``lr`` and
        ``local-steps``: the strategy's, or ``train_config``'s where it has them (they reach the clients
        unchanged)."""
        self.num_rounds = num_rounds
        self._timeout = check_real("timeout", timeout, low=0.0, low_inclusive=False)
        _check_train_config(train_config)
        self._train_config = {k: v for k, v in (train_config or {}).items()}
        self.models = self._initial_models(initial_arrays)
        return {"lr": self._train_config.get("lr", self.lr),
                "local-steps": self._train_config.get("local-steps", self.local_steps)}

    def _connect(self, grid: Grid) -> list[int]:
        """Wait for ``min_available_nodes``; the federation is the nodes then connected, sorted by id (the
        estimator's client order, which makes a run deterministic)."""
        self._grid = StoppableGrid(grid, self._stop)
        self.running = True
        _RUNNING.add(self)
        want = self.min_available_nodes
        self._grid.wait_for_nodes(want, self.start_timeout, f"{self.algorithm}: waiting for {want} nodes (%d "
                                  "connected)", lambda n: f"{n} nodes connected within {self.start_timeout:g} s; "
                                  f"{type(self).__name__} waits for min_available_nodes={want} (a simulation: "
                                  f"num-supernodes, e.g. flwr run . --federation-config \"num-supernodes={want}\")")
        self._federation = self._nodes()
        self._exchanges = 0
        return self._federation

    def _known_clients(self, m: int) -> dict:
        """What the backend of ``m`` clients knows before their first reply (:class:`FederatedBackend`'s
        ``exchange``, ``n_samples``, ``batch_size``, ``seed``, ``n_max``): nothing here; ``nets flower`` knows its
        partitions' sample counts, so it sends ``nets run``'s minibatch order (:mod:`nets.flower.strategies`)."""
        return {}

    def _participation(self, m: int) -> float:
        """The estimator's participation (the fraction of clients in each round's ``M_t``) of ``fraction_train``
        and ``min_train_nodes``: ``max(min_train_nodes, 1, round(fraction_train * m))`` of the ``m`` nodes."""
        size = max(self.min_train_nodes, 1, int(round(self.fraction_train * m)))
        return 1.0 if self.fraction_train >= 1.0 or size >= m else size / m

    def _train_defaults(self) -> dict:
        """The ``local-steps`` and ``lr`` a ``train`` or ``query.gradient`` message carries unless ``train_config``
        has them."""
        return {"local-steps": self.local_steps, "lr": self.lr}

    def _run_step_sizes(self) -> list[float]:
        """Each run's clients' step size (before ``lr_decay``): ``train_config``'s ``lr``, else the strategy's."""
        return [float({**self._train_defaults(), **self._train_config}["lr"])] * self._runs()

    def _begin_round(self, t: int) -> None:
        """The estimator starts round ``t``: its clients asked, lost and their valid training replies."""
        self._round_asked: set[int] = set()
        self._round_lost = set()
        self._round_ok: dict[int, RecordDict] = {}

    def _engine_exchange(self, action: str, clients: np.ndarray, config: dict, *, common=None, rows=None,
                         each=None, runs: int = 0):
        """One exchange of the estimator's backend (:class:`FederatedBackend`) in the contract's messages.

        ``clients`` index the federation; ``common``: model rows every client gets (stacked), ``rows``: each
        client's own (one model's record), ``each``: each client's own settings; ``runs``: the message asks
        ``choose="lowest-loss"`` over that many runs.  ``train`` and ``query.gradient`` carry the strategy's
        ``local-steps`` and ``lr`` under ``train_config`` under the estimator's settings; ``server-round`` counts
        the exchanges.  Returns :class:`~nets.flower.backend.Answers` (lost clients: not answered)."""
        from .backend import Answers

        self._exchanges += 1
        rnd = int(config.get("round", 0)) + 1  # the records count the estimator's rounds
        nodes = [self._federation[int(c)] for c in clients]
        training = action in (TRAIN, GRADIENT)
        base = {**self._train_defaults(), **self._train_config} if training else {}
        engine = {k: _plain(v) for k, v in config.items() if k != "round"}
        if runs:
            engine.update({"choose": CHOOSE_LOWEST, **({"runs": runs} if runs > 1 else {})})
        shared = ArrayRecord() if common is None else self.layout.record(common)
        contents = {}
        for a, node in enumerate(nodes):
            own = {k: _plain(v) for k, v in each[a].items()} if each is not None else {}
            cfg = ConfigRecord({**base, **engine, **own, "server-round": self._exchanges})
            mine = None if rows is None else np.asarray(rows[a])  # one model's record; several stacked
            arrays = shared if mine is None else self.layout.unflatten(mine[0]) if len(mine) == 1 else \
                self.layout.record(mine)
            contents[node] = self._content(arrays, cfg)
        self._round_asked.update(nodes)
        replies = self._grid.send_and_receive(self._messages(action, contents), timeout=self._timeout)
        due = max(runs, 1) if training else None
        ok = self._collect(rnd, action, replies, asked=nodes, models=due, choose=bool(runs))
        width = 0 if common is None or action not in (LOSSES,) and not runs else len(common)
        table = np.full((len(nodes), max(width, 1)), np.nan)
        out = np.full((len(nodes), due, self.layout.n_params), np.nan) if training else None
        answered, counts = np.zeros(len(nodes), dtype=bool), np.ones((len(nodes), 1))
        k = width // max(runs, 1)
        for a, node in enumerate(nodes):
            if node not in ok:
                continue
            if width:
                losses = self._reply_losses(rnd, action, node, ok, width)
                if losses is None:
                    continue
                if runs:  # the client's choice must be its lowest-loss model of every run
                    best = group_argmin(losses[None], k)[0]
                    said = ok[node][METRICS].get("cluster")
                    claimed = np.atleast_1d(np.asarray(said if said is not None else [], dtype=np.float64))
                    if claimed.shape != best.shape or not np.array_equal(claimed, best):
                        self._lose(rnd, action, node, f"trained model {said!r} where its losses give model "
                                   f"{int(best[0]) if runs == 1 else best.tolist()}")
                        continue
                table[a] = losses
            counts[a] = float(ok[node][METRICS].get(self.weighted_by_key, 1))
            if training:
                record = ok[node][self.arrayrecord_key]
                out[a] = self.layout.stack(split_clusters(record)) if due > 1 else self.layout.flatten(record)[None]
                self._round_ok[node] = ok[node]
            answered[a] = True
        metrics = {"n": counts, **({"losses": table} if width else {})}
        preset = {*metrics, "partition-id"}
        for a in np.flatnonzero(answered):  # every other metric the clients sent, client by client (NaN: none)
            for key, value in ok[nodes[a]][METRICS].items():
                if key in preset:
                    continue
                numbers = np.atleast_1d(np.asarray(value, dtype=np.float64))
                metrics.setdefault(key, np.full((len(nodes), len(numbers)), np.nan))
                if metrics[key].shape[1] == len(numbers):
                    metrics[key][a] = numbers
        return Answers(answered, out, metrics)

    def _evaluate_round(self, rnd: int, result: Result, evaluate_config: ConfigRecord | None,
                        evaluate_fn: Callable[[int, RecordDict], MetricRecord | None] | None,
                        federated: bool = True) -> None:
        """Round ``rnd``'s evaluations of :attr:`models` with :attr:`labels`: the clients' (when due, one
        ``evaluate`` exchange) and ``evaluate_fn``'s (every round, and before the first: round 0)."""
        if federated:
            messages = self.configure_evaluate(rnd, self.layout.record(self.models),
                                               ConfigRecord(dict(evaluate_config or {})), self._grid)
            if messages:
                self._exchanges += 1
                for msg in messages:
                    msg.content[self.configrecord_key]["server-round"] = self._exchanges
                metrics = self.aggregate_evaluate(rnd, self._grid.send_and_receive(messages, timeout=self._timeout))
                if metrics is not None:
                    result.evaluate_metrics_clientapp[rnd] = metrics
        if evaluate_fn is not None:
            metrics = evaluate_fn(rnd, cluster_models([self.layout.unflatten(row) for row in self.models],
                                                      self.labels, self.partitions))
            if metrics is not None:
                result.evaluate_metrics_serverapp[rnd] = metrics

def check_estimator_params(params: dict) -> None:
    """Refuse (ValueError, one line) estimator hyper-parameters a Flower strategy cannot take: those its driver runs
    on (:data:`DRIVER_PARAMS`, set by the strategy's own options) and IFCA's ``stopping="converged"``, whose runs
    leave the stack as their verdicts come in (the theory checks' protocol), where the strategy's messages and round
    records carry every run every round."""
    for key in params:
        if key in DRIVER_PARAMS:
            raise ValueError(f"estimator_params may not set {key!r}: the strategy runs on it (its own option sets "
                             f"it: {DRIVER_PARAMS[key]})")
    if params.get("stopping", "fixed") != "fixed":
        raise ValueError(f"stopping={params['stopping']!r} is not available in a Flower strategy: its runs leave "
                         "the stack as their verdicts come in, where every message and round record carries every "
                         "run (stopping='fixed')")


def _check_step_sizes(step_sizes) -> tuple[float, ...]:
    """IFCA's step sizes to restart over: a non-empty list of finite numbers > 0 (ValueError in one line)."""
    items = list(step_sizes) if isinstance(step_sizes, (list, tuple, np.ndarray)) else None
    if not items or any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number))
                        or not np.isfinite(v) or v <= 0 for v in items):
        raise ValueError(f"step_sizes must be a non-empty list of finite numbers > 0, got {step_sizes!r}")
    return tuple(float(v) for v in items)


def _check_train_config(config: ConfigRecord | None) -> None:
    """``train_config``'s ``lr`` (a finite number > 0) and ``local-steps`` (an integer >= 0), which override the
    strategy's own, checked as the strategy checks its arguments."""
    if config is None:
        return
    if not isinstance(config, ConfigRecord):
        raise TypeError(f"train_config must be a ConfigRecord, got {type(config).__name__}")
    if "lr" in config:
        lr = check_real("train_config['lr']", config["lr"], low=0.0, low_inclusive=False)
        if not np.isfinite(lr):
            raise ValueError(f"train_config['lr'] must be a finite number > 0, got {config['lr']!r}")
    if "local-steps" in config:
        check_int("train_config['local-steps']", config["local-steps"], low=0)


def reply_defect(content: RecordDict, layout: Layout, models: int | None, *, weight_key: str = NUM_EXAMPLES,
                 arrays_key: str = ARRAYS, values: bool = True) -> str | None:
    """What makes a reply unusable, or None: the one reply check of the public strategies and ``nets flower``.

    Its metrics: ``weight_key`` (``num-examples``) a finite number > 0, ``partition-id`` an integer >= 0, every
    other metric a finite number or a list of finite numbers (``losses`` may hold NaN and inf: NaN counts as +inf),
    ``train-loss`` and ``loss`` numbers.  Its ``arrays`` (``models`` of them, stacked when more than one): the
    arrays of ``layout``, of their shapes, all finite.  ``values=False`` checks the reply's form only (which
    records, which arrays of which shapes, numbers where numbers are due), not its numbers: ``nets flower`` keeps a
    non-finite model or loss, as ``nets run`` does, for the estimator to judge (a diverged run).
    """
    if METRICS not in content.metric_records:
        return f"its reply has no MetricRecord {METRICS!r}"
    for key, value in content[METRICS].items():
        numbers = np.asarray(value if isinstance(value, list) else [value], dtype=np.float64)
        if key in (weight_key, "partition-id", "train-loss", "loss") and isinstance(value, list):
            return f"{key} is a list ({value!r}), not a number"
        if values and key == weight_key and not (np.isfinite(value) and value > 0):
            return f"{key} is {value!r}, not a finite number > 0"
        if key == "partition-id" and not _is_partition(value):
            return f"partition-id is {value!r}, not an integer >= 0"
        if values and key != "losses" and not np.isfinite(numbers).all():
            return f"metric {key!r} is not finite ({value!r})"
    if models is None:
        return None
    if arrays_key not in content.array_records:
        return f"its reply has no ArrayRecord {arrays_key!r}"
    try:
        arrays = content[arrays_key]
        records = [arrays] if models == 1 else split_clusters(arrays)
        if len(records) != models:
            return f"its arrays hold {len(records)} models where {models} were due (one per run)"
        vectors = [layout.flatten(r) for r in records]
    except ValueError as exc:
        return f"its arrays do not fit the model: {exc}"
    for vector in vectors if values else ():
        if not np.isfinite(vector).all():
            bad = int(np.flatnonzero(~np.isfinite(vector))[0])
            key = layout.keys[int(np.searchsorted(layout.offsets, bad, side="right")) - 1]
            return f"its arrays hold non-finite values (array {key!r})"
    return None


def _plain(value):
    """A ConfigRecord value: numpy scalars as Python numbers."""
    return value.item() if isinstance(value, np.generic) else value


def _is_partition(value) -> bool:
    """A valid ``partition-id``: an integer >= 0 (an int, or a float of integer value)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value))
            and value >= 0 and float(value).is_integer())


def _check_finite(layout: Layout, vector: np.ndarray, what: str) -> None:
    """ValueError in one line naming the first array of ``vector`` that holds NaN or inf."""
    bad = np.flatnonzero(~np.isfinite(vector))
    if len(bad):
        key = layout.keys[int(np.searchsorted(layout.offsets, bad[0], side="right")) - 1]
        raise ValueError(f"{what}: array {key!r} holds NaN or inf ({len(bad)} entries); the models a strategy starts "
                         "from must be finite")


def _train_losses(ok: dict[int, RecordDict], weight: str = NUM_EXAMPLES) -> dict[int, tuple[float, float]]:
    out = {}
    for node, content in ok.items():
        metrics = content[METRICS]
        if "train-loss" in metrics:
            out[node] = (float(metrics["train-loss"]), float(metrics.get(weight, 1)))
    return out


class IFCA(ClusteredStrategy):
    """IFCA (Ghosh et al., IFCA journal Alg. 2; option I gradient averaging, option II model averaging) for any
    model and ClientApp.

    The estimator :class:`synth.algorithms.ifca.IFCA` -- the one IFCA of ``nets run`` -- runs on the server; each
    of its operations on client data is one exchange of the client contract's messages (:class:`FederatedBackend`).
    Each round the sampled clients (the estimator's ``M_t``: ``fraction_train`` and ``min_train_nodes`` give its
    ``participation``, the draw is the estimator's, over the nodes sorted by id) report the loss of each of the
    ``n_clusters`` models on their training data; each takes the model of lowest loss (its cluster identity,
    :func:`synth.algorithms.common.group_argmin`).  ``averaging="model"`` (option II): the client trains it for
    ``local_steps`` steps (``train``) and each model becomes the plain mean of its clients' models (IFCA's average
    over ``S_j``).  ``averaging="gradient"`` (option I): the client returns its gradient at the model
    (``query.gradient``) and each model steps by ``lr / |M_t|`` times the sum of its clients' gradients.  After the
    last round one ``query.losses`` of the final models gives each client its cluster (its lowest-loss final
    model, the estimator's rule, as in ``nets run``) and, with restarts, picks the run.  Parameters as
    :class:`ClusteredStrategy`, plus ``n_clusters`` (k), ``averaging``, ``client_choice`` and ``n_init``.

    ``n_init``: IFCA's restarts (Sec. VI-A), run side by side.  Left out, it is :data:`DEFAULT_RESTARTS` (5) when
    ``initial_arrays`` is one record (the strategy replicates it into every run's starts) and ``client_choice`` is
    True, else 1 (``initial_arrays`` stacking the ``k`` models is one run of the user's own starts): one start of
    ``k`` replicated models can leave two groups in one cluster (a 3-group digits app: 2 of 5 seeds separate the
    groups with one start, 5 of 5 with five).  ``initial_arrays`` holds ``n_init * n_clusters`` models, run by
    run (or one record, replicated); every message carries them all with ``config["runs"]``, each client picks and
    trains its lowest-loss model of every run and returns one model per run (stacked), and each run is averaged
    on its own.  A round's clusters and evaluation are those of the run of lowest total loss that round; the final
    ``query.losses`` picks the run of lowest total loss (the estimator's rule), whose ``k`` models the last
    evaluation and the result hold (:attr:`best_run`, :attr:`run_losses`).  With ``client_choice=False`` (model
    averaging only) each round is one ``query.losses`` of every run's models, then one ``train`` exchange per run.

    ``step_sizes``: IFCA's restarts over step sizes (Sec. VI-A tries {0.01, 0.1, 1} for k = 2 and {0.5, 1, 2} for
    k = 4; ``nets run``'s ``step_size`` list), in place of ``lr``: each of the ``n_init`` starts is run once per
    step size, side by side, ``n_init * len(step_sizes)`` runs in all, run ``r`` from start ``r // S`` at step size
    ``step_sizes[r % S]`` (``S = len(step_sizes)``, the estimator's order), and the run of lowest total loss is
    kept as above (:attr:`best_step_size`).  With several step sizes a ``train`` message's ``config["lr"]`` is a
    list, run ``r``'s step size at index ``r`` (after ``lr_decay``); with ``averaging="gradient"`` the server
    steps each run by its own.  Gradient averaging needs ``client_choice=True`` when there are several runs; a
    ``train_config`` ``lr`` is refused with ``step_sizes`` (both would set the step size).

    ``client_choice=True`` (default): one message per client per round.  The ``train`` (or ``query.gradient``)
    message carries every cluster model and ``config["choose"] = "lowest-loss"``; the client computes the
    losses, trains (or differentiates at) its lowest-loss model and returns it with ``metrics["losses"]`` and
    ``metrics["cluster"]``; the server takes the assignment from the returned losses (a client whose
    ``cluster`` is not its lowest-loss model is lost).  The same decisions as ``False`` (two exchanges:
    ``query.losses``, then the chosen model), which a ClientApp that answers one model per message needs, with
    half the messages (bench/README.md#flower).

    Rounds.  ``config["server-round"]`` in each message counts the run's exchanges (the engine makes one or two
    per round, the evaluations and the final ``query.losses`` one each); the records (:attr:`history`,
    ``Result``'s metrics, :attr:`lost`) count the estimator's rounds, 1 to ``num_rounds``.
    """

    algorithm = "IFCA"

    def __init__(self, n_clusters: int, *, averaging: str = "model", client_choice: bool = True,
                 n_init: int | None = None, step_sizes: Sequence[float] | None = None, **options):
        self.step_sizes = None if step_sizes is None else _check_step_sizes(step_sizes)
        if self.step_sizes is not None and "lr" in options:
            raise ValueError(f"give lr or step_sizes, not both (lr={options['lr']!r}, step_sizes={step_sizes!r})")
        if self.step_sizes is not None:
            options["lr"] = self.step_sizes[0]  # the message's lr where one step size is sent
        super().__init__(n_clusters, averaging=averaging, **options)
        if not isinstance(client_choice, bool):
            raise TypeError(f"client_choice must be True or False, got {client_choice!r}")
        self.client_choice = client_choice
        self._n_init_given = n_init is not None
        if n_init is None:  # restarts where the strategy makes the starts itself (and the client chooses)
            n_init = DEFAULT_RESTARTS if client_choice else 1
        self.n_init = check_int("n_init", n_init, low=1)
        # model averaging asks the runs' train messages one run after another; a gradient of every run needs one
        # message per client (the client's choice), which the server's one-model query.gradient cannot carry
        several = f"n_init={self.n_init}" if self.n_init > 1 else f"step_sizes={list(self.step_sizes)}" \
            if self.step_sizes is not None and len(self.step_sizes) > 1 else None
        if several and not client_choice and self.averaging == "gradient":
            raise ValueError(f"{several} restarts with gradient averaging need client_choice=True (each client returns "
                             "its gradient at its model of every run from one message)")
        self.best_run: int | None = None
        self.best_step_size: float | None = None
        self.run_losses: np.ndarray | None = None

    def _settings(self) -> dict:
        return {"client_choice": self.client_choice, "n_init": self.n_init,
                **({"step_sizes": list(self.step_sizes)} if self.step_sizes is not None else {}),
                **super()._settings()}

    def _n_steps(self) -> int:
        return 1 if self.step_sizes is None else len(self.step_sizes)

    def _begin(self, initial_arrays: ArrayRecord, num_rounds: int, timeout: float,
               train_config: ConfigRecord | None) -> dict:
        if self.step_sizes is not None and train_config is not None and "lr" in train_config:
            raise ValueError(f"train_config['lr'] and step_sizes both set the clients' step size; give one "
                             f"(step_sizes={list(self.step_sizes)})")
        return super()._begin(initial_arrays, num_rounds, timeout, train_config)

    def _run_step_sizes(self) -> list[float]:
        if self.step_sizes is None:
            return super()._run_step_sizes()
        return [float(v) for v in np.tile(self.step_sizes, self.n_init)]  # run r: step_sizes[r % S]

    def _n_models(self) -> int:
        return self.n_clusters * self.n_init

    def _initial_models(self, initial_arrays: ArrayRecord) -> np.ndarray:
        if not self._n_init_given and isinstance(initial_arrays, ArrayRecord) and len(
                split_clusters(initial_arrays)) > 1:  # the user's own k starts: one run of them
            self.n_init = 1
        return super()._initial_models(initial_arrays)

    def _runs(self) -> int:
        return self.n_init * self._n_steps()

    def _starts(self) -> int:
        return self.n_init

    def _backend(self, m: int) -> FederatedBackend:
        kind = GRADIENT if self.averaging == "gradient" else TRAIN
        return super()._backend(m, choose=kind if self.client_choice else None, runs=self._runs())

    def _estimator(self, m: int, rounds: int, train: dict, starts: np.ndarray, monitor):
        from synth.algorithms.ifca import IFCA as Estimator

        step = train["lr"] if self.step_sizes is None else list(self.step_sizes)
        return self._make(Estimator, n_clusters=self.n_clusters, n_rounds=rounds, step_size=step,
                          averaging=self.averaging, local_steps=train["local-steps"],
                          participation=self._participation(m),
                          init=starts.reshape(self.n_init, self.n_clusters, -1), n_init=self.n_init,
                          random_state=self._rng, monitor=monitor)

    def _fitted(self, est, nodes: list[int]) -> None:
        super()._fitted(est, nodes)
        if self._runs() > 1:
            extra = est.result_.extra
            self.best_run, self.run_losses = int(extra["best_run"]), np.asarray(extra["run_losses"])
            self.best_step_size = float(extra["run_step_sizes"][self.best_run])


class CLoVE(ClusteredStrategy):
    """CLoVE (Bhatia et al., Alg. 1; option I model averaging, option II gradient averaging) for any model and
    ClientApp.

    The estimator :class:`synth.algorithms.clove.CLoVE` -- the one CLoVE of ``nets run`` -- runs on the server,
    each of its operations on client data one exchange of the client contract's messages
    (:class:`FederatedBackend`).  Each round the sampled clients (the estimator's ``M^(t)``: ``fraction_train`` and
    ``min_train_nodes`` give its ``participation``, over the nodes sorted by id) report their loss vectors (the
    losses of all models, ``query.losses``); the estimator clusters the loss vectors and matches client clusters to
    models (options ``sqrt_loss``, ``clustering``, ``matching``, ``kmeans_n_init``; ``first_round="random"`` gives
    each client a random model in round 1); each client trains its model (``averaging="model"``) and each model
    becomes the ``num-examples``-weighted mean of its clients' models, or each client returns its gradient
    (``averaging="gradient"``) and each model steps by ``lr`` along the ``num-examples``-weighted mean gradient.
    After the last round one ``query.losses`` of the final models and one more clustering step give each client
    its cluster (the estimator's rule).  ``n_clusters=None`` is the unknown-K mode of the estimator
    (``max_clusters`` models, pruned in rounds where every client answered the losses).  ``server-round`` and the
    records count as :class:`IFCA`'s.
    """

    algorithm = "CLoVE"

    def __init__(self, n_clusters: int | None = 2, *, max_clusters: int = 8, sqrt_loss: bool = False,
                 clustering: str = "kmeans", matching: bool = True, kmeans_n_init: int = 10,
                 first_round: str = "evaluation", **options):
        self._options = {"n_clusters": n_clusters, "max_clusters": max_clusters, "sqrt_loss": sqrt_loss,
                         "clustering": clustering, "matching": matching, "kmeans_n_init": kmeans_n_init,
                         "first_round": first_round}
        # the estimator's own checks of these hyper-parameters (a ValueError naming the parameter)
        _CLoVEEstimator(**self._options)._validate_params()
        super().__init__(max_clusters if n_clusters is None else n_clusters, **options)
        self.unknown_k = n_clusters is None

    def _settings(self) -> dict:
        return {**self._options, **super()._settings()}

    def _backend(self, m: int) -> FederatedBackend:
        return super()._backend(m, normalise="cluster")

    def _estimator(self, m: int, rounds: int, train: dict, starts: np.ndarray, monitor):
        return self._make(_CLoVEEstimator, **self._options, averaging=self.averaging, init=starts,
                          n_rounds=rounds, step_size=train["lr"], local_steps=train["local-steps"],
                          participation=self._participation(m), random_state=self._rng, monitor=monitor)


class SRFCA(ClusteredStrategy):
    """SR-FCA (Vardhan, Ghosh, Mazumdar, Alg. 1-4) for any model and ClientApp.

    The estimator :class:`synth.algorithms.srfca.SRFCA` -- the one SR-FCA of ``nets run`` -- runs on the server,
    each of its operations on client data one exchange of the client contract's messages
    (:class:`FederatedBackend`).  ONE_SHOT: every client trains its local model from ``initial_arrays`` (or
    ``local_start``) for ``local_train_steps`` steps at ``local_step_size`` (``train``); the server joins clients
    whose local models are within ``threshold`` (``dist="l2"``: Euclidean distance; ``"cross"``: Def. 5.1's
    cross-cluster loss, from one ``query.losses`` of every local model on every client) and keeps components of at
    least ``min_size`` clients.
    Then ``n_refine`` REFINEs of ``trmean_steps`` rounds each: one TrimmedMeanGD step per round (each cluster's
    model, started from ``initial_arrays``, moves by ``trmean_step_size`` times the coordinatewise
    ``TrMean_beta`` of its clients' gradients, ``query.gradient``), and the REFINE's last round ends with
    RECLUSTER (each client to its nearest cluster model) and MERGE (clusters within ``threshold`` joined).  So
    ``num_rounds`` (SR-FCA's communication rounds) is ``1 + n_refine * trmean_steps``; the records (:attr:`history`,
    ``Result``'s metrics) count the estimator's rounds: 1 for ONE_SHOT's ``C_0``, ``r + 1`` for REFINE ``r``'s
    ``C_r``, and an evaluation is due at ``C_0``, at every ``evaluate_every``-th REFINE and at the last.  Lost
    clients resume (the estimator's rule): one whose local model did not arrive is no node of ONE_SHOT's graph and
    (``dist="l2"``) is asked for it again before each REFINE; one lost in a TrimmedMeanGD step leaves that step's
    trimmed mean; one lost in RECLUSTER keeps its cluster.  After the last round, clients MERGE left without a
    cluster go to their nearest final model, as :class:`synth.algorithms.srfca.SRFCA` does.  The number of
    clusters is found, never given.  ``local_steps``/``lr`` are not used (SR-FCA's own step counts are; a
    ``train_config`` ``local-steps`` or ``lr`` replaces ``local_train_steps`` / ``local_step_size``).  Before
    ONE_SHOT cuts the local models' pairwise distances at ``threshold``, their quantiles are logged and kept
    (:attr:`distance_quantiles`, round 1's ``distance-quantiles``: min, 10 %, 25 %, median, 75 %, 90 %, max).
    ``diameter``: D, the diameter of Alg. 3's ``W``, a ball around ``center`` (an ``ArrayRecord`` of the model's
    arrays; default all zeros): each TrimmedMeanGD step ends with the projection onto it; ``None``: ``W = R^P``.

    ``threshold="auto"``: ONE_SHOT takes the threshold from the largest gap in the local models' sorted pairwise
    distances (:func:`auto_threshold`) and MERGE uses the same number (:attr:`threshold` after round 1, also
    round 1's ``threshold`` metric).  The rule finds the coarsest separation of the clients: groups at very
    unequal distances from each other can be joined; :attr:`distance_quantiles` shows the distances.  For neural
    networks use it with ``dist="cross"``: their local models' l2 distances can differ between and within groups
    by a ratio below 2 (tests/test_flower_defaults.py).
    """

    algorithm = "SR-FCA"
    _unassigned_kept = True

    def __init__(self, threshold: float | str, *, min_size: int = 2, beta: float = 0.1, n_refine: int = 2,
                 local_train_steps: int = 100, local_step_size: float = 0.1, trmean_steps: int = 50,
                 trmean_step_size: float = 0.1, dist: str = "l2", local_start: ArrayRecord | None = None,
                 diameter: float | None = None, center: ArrayRecord | None = None, **options):
        super().__init__(1, **options)
        self.auto = isinstance(threshold, str) and threshold == "auto"
        if isinstance(threshold, str) and not self.auto:
            raise ValueError(f"threshold must be a number > 0 or 'auto', got {threshold!r}")
        self.threshold = "auto" if self.auto else check_real("threshold", threshold, low=0.0, low_inclusive=False)
        self.min_size = check_int("min_size", min_size, low=1)
        self.beta = check_real("beta", beta, low=0.0, high=0.5, high_inclusive=False)
        self.n_refine = check_int("n_refine", n_refine, low=0)
        self.local_train_steps = check_int("local_train_steps", local_train_steps, low=0)
        self.local_step_size = check_real("local_step_size", local_step_size, low=0.0, low_inclusive=False)
        self.trmean_steps = check_int("trmean_steps", trmean_steps, low=1)
        self.trmean_step_size = check_real("trmean_step_size", trmean_step_size, low=0.0, low_inclusive=False)
        self.dist = check_choice("dist", dist, DISTS)
        if local_start is not None and not isinstance(local_start, ArrayRecord):
            raise TypeError(f"local_start must be an ArrayRecord, got {type(local_start).__name__}")
        self.local_start = local_start
        self.diameter = None if diameter is None else check_real("diameter", diameter, low=0.0,
                                                                 low_inclusive=False)
        if center is not None and not isinstance(center, ArrayRecord):
            raise TypeError(f"center must be an ArrayRecord, got {type(center).__name__}")
        if center is not None and diameter is None:
            raise ValueError("center is the centre of W, the ball of diameter `diameter`; give a diameter with it")
        self.center = center
        self._center = np.zeros(0)
        self.status = "ok"
        self.w0 = np.zeros(0)
        self.distance_quantiles: list[float] = []  # ONE_SHOT's pairwise distances at QUANTILES

    def _settings(self) -> dict:
        return {"threshold": self.threshold, "min_size": self.min_size, "beta": self.beta,
                "n_refine": self.n_refine, "local_train_steps": self.local_train_steps,
                "local_step_size": self.local_step_size, "trmean_steps": self.trmean_steps,
                "trmean_step_size": self.trmean_step_size, "dist": self.dist, "diameter": self.diameter,
                "evaluate_every": self.evaluate_every, "accept_failures": self.accept_failures}

    def _check_rounds(self, num_rounds: int | None) -> int:
        need = 1 + self.n_refine * self.trmean_steps
        if num_rounds is not None and check_int("num_rounds", num_rounds, low=1) != need:
            raise ValueError(f"num_rounds must be 1 + n_refine * trmean_steps = {need} for SR-FCA (ONE_SHOT, then "
                             f"one round per TrimmedMeanGD step), got {num_rounds}; leave it out")
        return need

    def _n_models(self) -> int:
        return 1

    def _initial_models(self, initial_arrays: ArrayRecord) -> np.ndarray:
        models = super()._initial_models(initial_arrays)
        self.w0 = models[0]
        self._start = self.w0 if self.local_start is None else self.layout.flatten(self.local_start)
        self._center = np.zeros_like(self.w0) if self.center is None else self.layout.flatten(self.center)
        _check_finite(self.layout, self._start, "local_start")
        _check_finite(self.layout, self._center, "center")
        return models

    def _records(self) -> int:
        return self.n_refine + 1

    def _evaluate_due(self, server_round: int) -> bool:
        """``C_0``, every ``evaluate_every``-th REFINE's ``C_r`` and the last (where the clustering changes)."""
        r = server_round - 1
        return bool(self.evaluate_every) and (r % self.evaluate_every == 0 or server_round == self._records())

    def _train_defaults(self) -> dict:
        return {"local-steps": self.local_train_steps, "lr": self.local_step_size}

    def _estimator(self, m: int, rounds: int, train: dict, starts: np.ndarray, monitor):
        from synth.algorithms.srfca import SRFCA as Estimator

        return self._make(Estimator, threshold=self.threshold, min_size=self.min_size, beta=self.beta,
                          n_refine=self.n_refine, local="gd",
                          local_train_steps=self._train_config.get("local-steps", self.local_train_steps),
                          local_step_size=self._train_config.get("lr", self.local_step_size),
                          trmean_steps=self.trmean_steps, trmean_step_size=self.trmean_step_size,
                          diameter=self.diameter, center=self._center, dist=self.dist, start=self.w0,
                          random_state=self._rng, monitor=monitor)

    def _round_extra(self, t: int, runs: list, backend: FederatedBackend) -> dict:
        if t:
            return {"refine": t}
        est = self._est  # ONE_SHOT: the distribution its threshold cut (QUANTILES), and the threshold
        self.distance_quantiles = list(est.distance_quantiles_)
        if self.auto:
            self.threshold = float(est.threshold_)
        if self.distance_quantiles:
            log(INFO, "%s ONE_SHOT: pairwise %s distances of the local models: %s; threshold %g", self.algorithm,
                self.dist, ", ".join(f"{name} {v:.4g}" for name, v in zip(QUANTILE_NAMES, self.distance_quantiles,
                                                                          strict=True)), float(est.threshold_))
        return {"distance-quantiles": self.distance_quantiles, **({"threshold": self.threshold} if self.auto else {})}

    def _fitted(self, est, nodes: list[int]) -> None:
        super()._fitted(est, nodes)
        self.status = str(est.result_.extra.get("status", "ok"))


class Global(IFCA):
    """FedAvg (McMahan et al. 2017), the global-model baseline of the IFCA, SR-FCA and CLoVE papers, for any model
    and ClientApp: one model for every client, IFCA's ``k = 1`` case.

    The estimator :class:`synth.algorithms.baselines.GlobalModel` -- ``nets run``'s ``global`` -- runs on the server
    as :class:`IFCA`'s does (same driver, messages and faults, ``n_clusters=1``, ``n_init=1``): each round the
    sampled clients train the model (``averaging="model"``: it becomes the plain mean of their models) or return
    their gradient at it (``"gradient"``: it steps by ``lr / |M_t|`` times their sum); with ``client_choice=True``
    (default) one ``train`` (or ``query.gradient``) message per client and round carries it with
    ``choose="lowest-loss"`` and the reply adds its loss (the estimator's objective), ``False`` asks
    ``query.losses`` first.  A lost client leaves the round (the model is the mean of the updates that arrived).
    ``step_sizes``: restarts over step sizes as :class:`IFCA`'s (one start, ``len(step_sizes)`` runs, the run of
    lowest total loss kept).  ``initial_arrays``: the model's record.  The result holds one cluster, ``cluster-0``,
    with every client that answered the final ``query.losses`` assigned to it.
    """

    algorithm = "FedAvg"

    def __init__(self, *, averaging: str = "model", client_choice: bool = True,
                 step_sizes: Sequence[float] | None = None, **options):
        super().__init__(1, averaging=averaging, client_choice=client_choice, n_init=1, step_sizes=step_sizes,
                         **options)

    def _estimator(self, m: int, rounds: int, train: dict, starts: np.ndarray, monitor):
        from synth.algorithms.baselines import GlobalModel

        step = train["lr"] if self.step_sizes is None else list(self.step_sizes)
        return self._make(GlobalModel, n_rounds=rounds, step_size=step, averaging=self.averaging,
                          local_steps=train["local-steps"], participation=self._participation(m),
                          init=starts.reshape(1, 1, -1), random_state=self._rng, monitor=monitor)


class Local(ClusteredStrategy):
    """Local training, the local baseline of the IFCA, SR-FCA and CLoVE papers, for any model and ClientApp: every
    client trains its own model alone.

    The estimator :class:`synth.algorithms.baselines.LocalModels` (``local="gd"``) -- ``nets run``'s ``local`` --
    runs on the server: one ``train`` exchange asks every client for ``local_steps`` steps at ``lr`` from
    ``initial_arrays`` (one record); client ``i``'s reply is its model, cluster ``i`` of the result (one
    ``ArrayRecord`` per client that answered, ``cluster-0``, ..., in node order).  ``num_rounds`` is 1 (the one
    exchange; another value is an error), every client takes part (``fraction_train`` must be 1), and an
    evaluation (each client scoring its own model) follows it when ``evaluate_every`` is not 0.  A client whose
    local model did not arrive is removed: it has no cluster (it is not in :attr:`labels` or the assignment) and no
    model, the others keep the models they sent (``nets flower``'s rule for Local; the round's ``lost`` counts
    it); ``accept_failures=False`` ends the run instead.
    """

    algorithm = "Local"

    def __init__(self, *, local_steps: int = 100, lr: float = 0.1, **options):
        super().__init__(1, local_steps=local_steps, lr=lr, **options)
        if self.fraction_train != 1.0:
            raise ValueError(f"fraction_train must be 1 for Local (every client trains its own model once), got "
                             f"{self.fraction_train!r}")

    def _settings(self) -> dict:
        return {"local_steps": self.local_steps, "lr": self.lr, "evaluate_every": self.evaluate_every,
                "accept_failures": self.accept_failures}

    def _check_rounds(self, num_rounds: int | None) -> int:
        if num_rounds is not None and check_int("num_rounds", num_rounds, low=1) != 1:
            raise ValueError(f"num_rounds must be 1 for Local (one exchange: each client's local model), got "
                             f"{num_rounds}; leave it out")
        return 1

    def _initial_models(self, initial_arrays: ArrayRecord) -> np.ndarray:
        models = super()._initial_models(initial_arrays)
        self._start = models[0]  # every client's start (FederatedBackend's local_start)
        return models

    def _backend(self, m: int) -> FederatedBackend:
        return super()._backend(m, _LocalBackend)

    def _estimator(self, m: int, rounds: int, train: dict, starts: np.ndarray, monitor):
        from synth.algorithms.baselines import LocalModels

        return _LocalFit(self._make(LocalModels, local="gd", local_train_steps=train["local-steps"],
                                    local_step_size=train["lr"]), monitor)

    def _round_extra(self, t: int, runs: list, backend: FederatedBackend) -> dict:
        return {}  # no losses are asked: Local has no objective across clients


class _LocalBackend(FederatedBackend):
    """Local's backend: a local model that did not arrive is the start it was sent (as a lost ``local_update`` row
    is), not a NaN row, so the estimator's finite-model check holds; :class:`_LocalFit` then removes its client."""

    def local_models(self, method: str = "gd", steps: int = 100, lr: float = 0.1, init=None, clients=None):
        rows = super().local_models(method, steps, lr, init, clients)
        if self.lost:
            rows = self._tensor(self._float64(rows))
            rows[sorted(self.lost)] = self._tensor(self._rows(self._local_start()))
        return rows


class _LocalFit:
    """:class:`synth.algorithms.baselines.LocalModels`' fit, then its one round's records (the driver's monitor,
    which LocalModels does not call) without the clients whose local model did not arrive: they are removed (label
    -1, no model), as ``nets flower``'s Local removes them."""

    def __init__(self, estimator, monitor: Callable[[int, Any, np.ndarray], dict]):
        self.estimator, self.monitor = estimator, monitor

    def fit(self, backend: FederatedBackend) -> _LocalFit:
        res = self.estimator.fit(backend).result_
        members = np.setdiff1d(np.arange(backend.n_clients), sorted(backend.lost))
        labels = np.full(backend.n_clients, -1, dtype=np.int64)
        labels[members] = np.arange(len(members))
        self.result_ = dataclasses.replace(res, models=np.asarray(res.models)[members], labels=labels,
                                           n_clusters=len(members))
        self.monitor(0, self.result_.models, labels)
        return self
