"""Flower strategies (the message-based ``flwr.serverapp.strategy.Strategy``) for IFCA, SR-FCA, CLoVE, FedAvg, Local.

A strategy runs its algorithm's estimator from :mod:`synth.algorithms` -- the same object, hyper-parameters and
random streams as ``nets run`` -- on a :class:`~nets.flower.backend.FederatedBackend`, whose every operation on
client data is one exchange of the client contract's messages (``docs/flower-contract.md``: ``query.losses``,
``train``, ``query.gradient``, ``evaluate``, answered by :func:`~nets.flower.torch_client.torch_client_app`, which
:mod:`nets.flower.client` builds over cflab's data and networks) built by :meth:`FlowerStrategy.configure_train` (or
``configure_evaluate``) and gathered by :meth:`FlowerStrategy.aggregate_train` (``aggregate_evaluate``).  The
algorithm decides everything on the server exactly as it does in-process, so a Flower run and ``nets run`` with
the same settings take the same decisions (``tests/test_flower.py`` checks it).  The messages per round:

* IFCA (Ghosh et al., IFCA journal Alg. 2) and FedAvg (its ``k = 1`` case): all ``k`` models out, the loss
  vector back; the server takes each client's argmin (the cluster identity estimate), then the chosen model
  out, the model after ``tau`` local steps back (model averaging) or the gradient (gradient averaging).
* SR-FCA (Vardhan, Ghosh, Mazumdar, Alg. 1-4): ONE_SHOT's local models back, then the losses of every local
  model on every client (Def. 5.1's cross-cluster loss; none for ``dist="l2"``), then for each REFINE one
  exchange per TrimmedMeanGD step (each cluster's model out, the client's gradient back) and one for the
  losses of the trained cluster models (RECLUSTER, MERGE).
* CLoVE (Bhatia et al., Alg. 1): all models out, the loss vector back; the server clusters the loss vectors
  and matches clusters to models, then the assigned model out, the local model back.
* Local: each client's local model back.

Order and sampling.  Flower's node sampling is not used: the estimator draws each round's clients from its own
seeded generator (IFCA's ``M_t``, CLoVE's ``M^(t)``) exactly as in ``nets run``, each SuperNode is mapped to its
partition once, and the answers are put in client order whatever order they arrive in, so a run is deterministic
for any number of simulation actors.

After the fit, one ``evaluate`` exchange scores the models on the clients' test data by the paper's rule (IFCA's
min-loss rule: every model sent with ``choose="lowest-loss"``; SR-FCA's and CLoVE's cluster rule: the client's
cluster's model; Local's own model).  Before the first round, a ``query.losses`` of no model maps each SuperNode to
its partition (its reply's ``partition-id``) and checks its training samples against the federation's.

Before the run (:meth:`FlowerStrategy.preflight`, called before Ray starts) the experiment is checked as ``nets
run`` checks it, with the same functions and messages: the data's size, the federation (e.g. too few clients for
the partition's clusters), the minibatch and cluster counts, and the estimated memory and (on a command line) time
of the fit.

Faults (:mod:`nets.flower.backend`): a client that fails, times out or sends a malformed reply (the public
strategies' check, :func:`~nets.flower.clustered.reply_defect`, of the reply's form: a non-finite model or loss is
kept for the estimator to judge, as in ``nets run``) in an IFCA, FedAvg or CLoVE round leaves
that round's participants (the participation subsets ``M_t`` / ``M^(t)`` of both papers) and is asked again in
the next; a failing client is one :class:`ClientFailed` warning line (its id and its exception's message).  The
record counts, round by round, the clients that answered (``flower.answered``) and names the rounds in which none
did (``flower.rounds_without_answers``; ``python -m nets flower`` then exits with status 1); a clustering in which
no client is assigned has no ARI (``None``), not the 1.0 that unassigned singletons would score against singleton
clusters.  SR-FCA resumes (:class:`synth.algorithms.srfca.SRFCA`'s rule for a backend that loses clients): a
client lost in a TrimmedMeanGD step leaves that step's trimmed mean, one lost in RECLUSTER keeps its cluster, one
whose local model did not arrive is no node of ONE_SHOT's graph and (``dist="l2"``) is asked for it again before
each REFINE.  Local's graph-free fit has no round to leave, so a client lost in Local is removed and Local restarts
on the clients that remain (same seed); the removed clients are reported unassigned (label -1).  The restart
resumes rather than recomputes: the local models (``train``, ``local_train_steps`` steps per client) are kept per
client and request, and a restart that asks the same client for the same local model takes the kept one
(``flower.reused`` counts them).  With minibatches the draws depend on the clients of the call, so
there a restart computes the local models again, as ``nets run`` on the smaller federation would.  Every exchange has a
timeout, so a run never waits longer than that for a client.
"""

from __future__ import annotations

import json
import re
import threading
import time
import warnings
from dataclasses import dataclass, field
from logging import INFO
from typing import Any

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.supercore import log

from synth.validation import check_real, did_you_mean

from ..algorithms import ALGOS, hyper_parameters, make_estimator
from ..backend import TorchBackend
from ..datasets import default_model
from ..device import resolve_device
from ..evaluate import clustering_scores, mean_scores, train_identity_scores
from ..functional import FunctionalModel
from ..models import MODELS, model_factory
from .arrays import Layout, cluster_models, split_clusters
from .backend import Answers, ClientsLost, FederatedBackend
from .client import EXPERIMENT
from .clustered import (
    _RUNNING,
    _UNKNOWN_MESSAGE,
    ARRAYS,
    CHOOSE_LOWEST,
    CONFIG,
    METRICS,
    NUM_EXAMPLES,
    ClientContractError,
    ClusteredResult,
    _plain,
    reply_defect,
)
from .session import RunStopped, StoppableGrid

__all__ = ["STRATEGIES", "CLoVEStrategy", "ClientFailed", "FlowerStrategy", "GlobalStrategy", "IFCAStrategy",
           "LocalStrategy", "RunStopped", "SRFCAStrategy", "strategy_for"]

# nets run parameters a Flower run does not offer, and why
_UNSUPPORTED = {
    "checkpoint": "a Flower run is not resumed from a checkpoint",
    "test_machines": "IFCA's separate test machines are not Flower clients",
}


class ClientFailed(UserWarning):
    """A client's ClientApp raised: one line with the client and its exception's message (``python -m nets``
    prints it when it happens, ``immediate``)."""

    immediate = True


@dataclass
class _Pending:
    """The exchange being configured: its action, the clients asked (federation indices), per-client payloads."""

    action: str
    clients: np.ndarray
    rows: list[np.ndarray] | None = None
    each: list[dict] | None = None


@dataclass
class _Log:
    """What the Flower side of a run cost and lost."""

    exchanges: int = 0
    messages: int = 0
    seconds: float = 0.0  # in send_and_receive
    lost: list[list] = field(default_factory=list)  # [exchange, action, client, why]
    waits: list[float] = field(default_factory=list)  # seconds each exchange waited for its answers
    restarts: int = 0
    reused: int = 0  # local models a restart took from the earlier run instead of asking again
    # consecutive exchanges of one round (or of one test): [round or "test", clients answering, clients asked]
    answered: list[list] = field(default_factory=list)
    _who: tuple[set, set] | None = None  # the last entry's clients answering and asked

    def count(self, key, asked: np.ndarray, answered: np.ndarray) -> None:
        """Add one exchange's clients (asked, and those of them that answered) to its round's entry."""
        if not self.answered or self.answered[-1][0] != key:
            self.answered.append([key, 0, 0])
            self._who = (set(), set())
        got, all_ = self._who
        got.update(int(c) for c in asked[answered])
        all_.update(int(c) for c in asked)
        self.answered[-1][1:] = [len(got), len(all_)]

    def silent(self) -> list:
        """The rounds (or tests) in which clients were asked and none answered."""
        return [key for key, got, asked in self.answered if asked and not got]


class FlowerStrategy(Strategy):
    """A cflab algorithm as a Flower strategy (module docstring); subclasses name the algorithm.

    Parameters
    ----------
    params : the ``nets run`` parameters (:data:`nets.experiment.PARAMS`), e.g. ``{"algo": "ifca", "clients":
        20, "rounds": 10, "seed": 0}``; validated here, so a mistake is a ``ValueError`` before any message.
    algo_params : extra estimator hyper-parameters by name (``nets run --algo-param``).
    history : keep the per-round metrics (``nets run --history``).
    timeout : seconds an exchange waits for its clients, finite and > 0; later answers are lost.
    start_timeout : seconds to wait for the SuperNodes to connect and describe their partitions (the first
        answer builds each simulation actor's data), finite and > 0.
    faults : injected client faults (tests; see :mod:`nets.flower.client`).
    """

    algo = ""
    on_loss = "subsets"

    def __init__(self, params: dict[str, Any], algo_params: dict[str, Any] | None = None, *, history: bool = False,
                 timeout: float = 600.0, start_timeout: float = 600.0, faults: list[dict] | tuple = ()):
        from ..experiment import _hyper, check_algo_params, validate_params

        params = dict(params)
        params.setdefault("algo", self.algo)
        self.p = validate_params(params)
        if self.p["algo"] != self.algo:
            raise ValueError(f"{type(self).__name__} runs algo {self.algo!r}, got {self.p['algo']!r}")
        for key, why in _UNSUPPORTED.items():
            if self.p[key] is not None:
                raise ValueError(f"{key} is not available in a Flower run: {why}")
        if self.p["share"] != "none":
            raise ValueError("share='last' (IFCA weight sharing) is not available in a Flower run")
        if self.p.get("validation", 0.0) > 0:  # the clients would train on the held-out samples without a word
            raise ValueError("validation is not available in a Flower run: its clients hold out no validation split")
        self.algo_params = check_algo_params(self.algo, algo_params)

        # the estimator's own checks of its hyper-parameters (e.g. SR-FCA's threshold), before any message
        make_estimator(self.algo, _hyper(self.p, ALGOS[self.algo], 1, self.p["init"], 0, np.random.default_rng(0),
                                         None, self.algo_params), explicit=tuple(self.algo_params))
        self.params = {k: v for k, v in params.items() if k != "algo_params"}
        self.history = bool(history)
        self.timeout = check_real("timeout", timeout, low=0.0, low_inclusive=False)
        self.start_timeout = check_real("start_timeout", start_timeout, low=0.0, low_inclusive=False)
        self.faults = [dict(f) for f in faults]
        self.record: dict[str, Any] | None = None
        self._known: dict | None = None  # the federation's facts, once built (preflight)
        self.round_labels: list[np.ndarray] = []  # the labels the estimator's monitor saw, call by call
        self.labels = np.zeros(0, dtype=np.int64)  # each client's final cluster (-1: none)
        self._grid: Grid | None = None
        self._pending: _Pending | None = None
        self._log = _Log()
        self._experiment = ConfigRecord({"json": json.dumps({"params": self.params, "faults": self.faults})})
        self._nodes = np.zeros(0, dtype=np.uint64)  # node ids are 64-bit unsigned
        self._stop = threading.Event()
        self.running = False  # in start(): the ServerApp thread runs this strategy
        self.pull_seconds: tuple[float, float] | None = None  # the poll's shortest and longest pause (default)
        # the local models (train) kept across restarts: (request key) -> (rows, metrics) of one client
        self._kept: dict[tuple, tuple[np.ndarray | None, dict[str, np.ndarray]]] = {}

    # ---------------------------------------------------------------- before Ray, and stopping
    def preflight(self) -> int:
        """Refuse what ``nets run`` refuses for this experiment, with its functions and messages, before any
        message (or Ray) starts; returns the bytes of the federation's arrays (each actor holds a copy).

        The data's size (:func:`nets.experiment.check_data_size`), the federation itself (e.g. fewer clients than
        the partition's clusters), the minibatch and cluster counts, and the fit's estimated memory and -- inside a
        :func:`synth.cost.work_ceiling`, as on a command line -- time (``nets.experiment._check_work``: the
        per-sample prices are measured here on the server's copy, which is then dropped).  The time is ``nets
        run``'s, a lower bound for Flower, whose messages cost more (bench/README.md#flower).
        """
        from ..experiment import _check_work, _federation_that_fits, check_data_size, check_sizes

        p = self.p
        check_data_size(p)
        data_ss, _, batch_ss = np.random.SeedSequence(p["seed"]).spawn(3)
        fed, note = _federation_that_fits(p, data_ss, explicit_n=self.params.get("n_per_client") is not None)
        self._known = self._facts_of(fed, note, batch_ss)  # so start() does not build the federation again
        k = check_sizes(p, int(fed.X.shape[1]), fed.n_clients, fed.clusters)
        device = resolve_device(p["device"])
        model = fed.model(default_model(p["dataset"], p["task"]) if p["model"] == "auto" else p["model"],
                          device=device, dtype=torch.float64 if p["dtype"] == "float64" else torch.float32)
        train, _ = fed.backends(model, batch_size=p["batch_size"], optimizer=p["optimizer"], batched=True,
                                seed=int(batch_ss.generate_state(1)[0]), lr_decay=p["lr_decay"],
                                memory_budget=(p["memory_mb"] or (4096 if device.type == "cuda" else 256)) * 2**20)
        runs = p["n_init"] * len(np.atleast_1d(p["step_size"])) if "n_init" in hyper_parameters(self.algo) else 1
        _check_work(p, self.algo_params, fed, model, train, k, runs, 0)
        return int(sum(a.nbytes for a in (fed.X, fed.y, fed.X_test, fed.y_test)))

    def stop(self) -> None:
        """End the run at its next exchange (or now, if it waits for one): it raises :class:`RunStopped`."""
        self._stop.set()

    # ---------------------------------------------------------------- Flower's Strategy API
    def summary(self) -> None:
        """Log the algorithm and its settings."""
        log(INFO, "\t├──> %s (cflab algo %r, %s)", type(self).__name__, self.algo, ALGOS[self.algo].paper)
        log(INFO, "\t└──> parameters: %s", json.dumps(self.params, sort_keys=True))

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> list[Message]:
        """One message per client of the pending exchange: ``arrays`` (models every client gets) or the client's
        own model rows, ``config`` plus the client's own settings, and the experiment."""
        p = self._pending
        messages = []
        for a, client in enumerate(p.clients):  # one message per client: the framework's unit of work
            cfg = ConfigRecord({**config, **({k: _plain(v) for k, v in p.each[a].items()} if p.each else {})})
            own = p.rows is not None and p.rows[a] is not None
            content = RecordDict({EXPERIMENT: self._experiment, CONFIG: cfg,
                                  ARRAYS: self._record(p.rows[a]) if own else arrays})
            messages.append(Message(content, dst_node_id=int(self._nodes[client]), message_type=p.action))
        return messages

    def _record(self, rows: np.ndarray, stacked: bool = False) -> ArrayRecord:
        """Model rows as the contract's records: one model's ``state_dict`` record, several (or ``stacked``)
        stacked by cluster (``cluster{j}/...``)."""
        rows = np.asarray(rows)
        if len(rows) == 1 and not stacked:
            return self._layout.unflatten(rows[0])
        return self._layout.record(rows)

    def _vectors(self, record: ArrayRecord) -> np.ndarray:
        """A reply's model or gradient record as ``(r, P)`` rows in the run's precision."""
        return self._layout.stack(split_clusters(record)).astype(self._np_dtype)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> list[Message]:
        """Test-data exchanges are built like training ones (the action names the split)."""
        return self.configure_train(server_round, arrays, config, grid)

    def aggregate_train(self, server_round: int, replies) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The answers of the pending exchange in the order of its clients.

        ``rows``: ``(c, r, P)`` model rows or gradients (NaN for a client that did not answer); the metric record
        holds ``answered`` (1/0 per client) and every statistic the clients sent, client after client (NaN-filled).
        The algorithm combines them (averaging, trimmed means, clustering) on the server.
        """
        p = self._pending
        where = {int(node): a for a, node in enumerate(self._nodes[p.clients])}
        c = len(p.clients)
        got: list[tuple[dict, np.ndarray | None] | None] = [None] * c
        for msg in replies:
            a = where.get(int(msg.metadata.src_node_id))
            if a is None:
                continue  # a late answer to an earlier exchange
            if msg.has_error():
                self._lose(server_round, p.action, int(p.clients[a]), _reason(msg.error.reason), failed=True)
                continue
            # a malformed reply loses its client (reply_defect, the public strategies' check: its form only, a
            # non-finite model or loss is the estimator's to judge, as in nets run)
            due = len(p.rows[a]) if p.rows is not None and p.action in ("train", "query.gradient") else None
            why = reply_defect(msg.content, self._layout, due, values=False)
            if why is None and int(msg.content[METRICS].get("partition-id", -1)) != int(p.clients[a]):
                why = "answered for another partition"
            if why is not None:
                self._lose(server_round, p.action, int(p.clients[a]), why)
                continue
            metrics = dict(msg.content[METRICS])
            got[a] = (metrics, self._vectors(msg.content[ARRAYS]) if ARRAYS in msg.content else None)
        answered = np.array([g is not None for g in got], dtype=bool)
        for a in np.flatnonzero(~answered):
            if not any(e[0] == server_round and e[2] == int(p.clients[a]) for e in self._log.lost):
                self._lose(server_round, p.action, int(p.clients[a]), f"no answer within {self.timeout:g} s")
        ok = [g for g in got if g is not None]
        out = MetricRecord({"answered": [int(v) for v in answered]})
        for key in (ok[0][0] if ok else {}):
            if key == "partition-id":
                continue
            width = len(np.atleast_1d(ok[0][0][key]))
            table = np.full((c, width), np.nan)
            for a in np.flatnonzero(answered):
                if key in got[a][0]:  # e.g. no eval-acc for a reconstruction
                    table[a] = np.atleast_1d(got[a][0][key])
            out[key] = [float(v) for v in table.ravel()]
        arrays = None
        if ok and ok[0][1] is not None:
            first = ok[0][1]
            r = max(g[1].shape[0] for g in ok)
            stack = np.full((c, r, *first.shape[1:]), np.nan, dtype=first.dtype)
            for a in np.flatnonzero(answered):
                stack[a, :len(got[a][1])] = got[a][1]
            arrays = ArrayRecord({"rows": Array(stack)})  # (clients, rows, P), NaN where none arrived
        return arrays, out

    def aggregate_evaluate(self, server_round: int, replies) -> MetricRecord | None:
        """The clients' test scores, as :meth:`aggregate_train` gathers them."""
        return self.aggregate_train(server_round, replies)[1]

    def start(self, grid: Grid, initial_arrays: ArrayRecord | None = None, num_rounds: int | None = None,
              timeout: float | None = None, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None, evaluate_fn=None) -> Result:
        """Run the algorithm on the grid's SuperNodes; :attr:`record` is then the ``nets run`` JSON record.

        The estimator draws its initial models from the run's seed, as ``nets run`` does, so ``initial_arrays``
        must be empty; ``num_rounds`` (if given) must equal the ``rounds`` parameter.  ``train_config``,
        ``evaluate_config`` and ``evaluate_fn`` are not used: the parameters say everything.  The ``Result`` is the
        public strategies' (:class:`~nets.flower.clustered.ClusteredResult`): ``arrays`` holds one ``state_dict``
        record per model and each node's cluster and partition (:func:`~nets.flower.arrays.cluster_models`).
        """
        if initial_arrays is not None and len(initial_arrays):
            raise ValueError("the initial models are drawn from the run's seed (as in nets run); pass no "
                             "initial_arrays")
        if num_rounds is not None and num_rounds != self.p["rounds"]:
            raise ValueError(f"num_rounds={num_rounds} differs from the rounds parameter ({self.p['rounds']})")
        if timeout is not None:
            self.timeout = check_real("timeout", timeout, low=0.0, low_inclusive=False)
        self._grid = StoppableGrid(grid, self._stop, f"{type(self).__name__} stopped: the simulation was interrupted",
                                   self.pull_seconds)
        log(INFO, "Starting %s:", type(self).__name__)
        self.summary()
        self.running = True
        _RUNNING.add(self)  # stop_running() (the app runner's Ctrl-C) ends it as it ends the public strategies
        try:
            self._grid.check()
            facts = self._describe()
            models, scores = self._run(facts)
        finally:
            self.running = False
            _RUNNING.discard(self)
        # the public strategies' Result: one state_dict record per model, each node's cluster and partition
        nodes = [int(n) for n in self._nodes]
        result = ClusteredResult(arrays=cluster_models([self._layout.unflatten(row) for row in models],
                                                       dict(zip(nodes, self.labels.tolist(), strict=True)),
                                                       {n: i for i, n in enumerate(nodes)}))
        for row in self._monitor.rows:  # the selected run's clustering, round by round (Flower counts from 1)
            if row["run"] == self._best_run:
                out = {"clusters": sum(1 for c in row["cluster-sizes"] if c > 0),
                       "cluster-sizes": row["cluster-sizes"], "unassigned": row["unassigned"]}
                out.update({k: float(row[k]) for k in ("ari", "misclustering", "test_accuracy", "test_loss")
                            if row.get(k) is not None})
                result.train_metrics_clientapp[int(row["round"]) + 1] = MetricRecord(out)
        result.evaluate_metrics_clientapp[self._log.exchanges] = MetricRecord(
            {k: float("nan") if v is None else float(v) for k, v in scores.items() if k != "choice"})
        return result

    # ---------------------------------------------------------------- the exchanges
    def exchange(self, action: str, clients: np.ndarray, config: dict, *, common: np.ndarray | None = None,
                 rows: list[np.ndarray] | None = None, each: list[dict] | None = None) -> Answers:
        """Send ``action`` to ``clients`` (indices into the federation) and gather the answers in their order.

        ``common``: model rows every client gets; ``rows``: each client's own rows; ``each``: each client's own
        settings.  Used by :class:`~nets.flower.backend.FederatedBackend` for every operation on client data.
        A restarting algorithm's local models asked before are taken from the earlier answers (module docstring).
        """
        clients = np.asarray(clients, dtype=np.int64)
        # SR-FCA's and Local's train messages are their local models (neither trains from a cluster model)
        if action != "train" or self.on_loss != "raise":
            return self._exchange(action, clients, config, common=common, rows=rows, each=each)
        keys = [self._request_key(action, int(c), config, common, None if rows is None else rows[a],
                                  None if each is None else each[a]) for a, c in enumerate(clients)]
        kept = np.array([key in self._kept for key in keys], dtype=bool)
        ask = np.flatnonzero(~kept)
        self._log.reused += int(kept.sum())
        if len(ask):
            ans = self._exchange(action, clients[ask], config, common=common,
                                 rows=None if rows is None else [rows[a] for a in ask],
                                 each=None if each is None else [each[a] for a in ask])
            for pos, a in enumerate(ask):
                if ans.answered[pos]:
                    self._kept[keys[a]] = (None if ans.rows is None else ans.rows[pos].copy(),
                                           {k: v[pos].copy() for k, v in ans.metrics.items()})
        elif len(clients):
            log(INFO, "%s: the %d local models of this call were computed before the restart", self.algo,
                len(clients))
        answered = np.array([key in self._kept for key in keys], dtype=bool)
        got = [self._kept[key] for key in keys if key in self._kept]
        out_rows = None
        if got and got[0][0] is not None:
            first = got[0][0]
            out_rows = np.full((len(clients), *first.shape), np.nan, dtype=first.dtype)
            for a in np.flatnonzero(answered):
                out_rows[a] = self._kept[keys[a]][0]
        metrics = {}
        for name, value in (got[0][1] if got else {}).items():
            table = np.full((len(clients), len(value)), np.nan)
            for a in np.flatnonzero(answered):
                table[a] = self._kept[keys[a]][1][name]
            metrics[name] = table
        return Answers(answered, out_rows, metrics)

    def _request_key(self, action: str, client: int, config: dict, common, rows, each) -> tuple:
        """What determines a client's answer: the action, the client, the settings and the model rows sent (the
        minibatch positions only where there are minibatches)."""
        import hashlib

        # with minibatches the client's sample order (its row of the call's draw) is among the settings
        settings = {k: _plain(v) for k, v in {**config, **(each or {})}.items() if k != "server-round"}
        digest = hashlib.sha1()
        for part in (common, rows):
            if part is not None:
                digest.update(np.ascontiguousarray(part).tobytes())
        return action, client, json.dumps(settings, sort_keys=True), digest.hexdigest()

    def _exchange(self, action: str, clients: np.ndarray, config: dict, *, common: np.ndarray | None = None,
                  rows: list[np.ndarray] | None = None, each: list[dict] | None = None) -> Answers:
        """One exchange of messages with ``clients`` (:meth:`exchange`)."""
        self._log.exchanges += 1
        server_round = self._log.exchanges
        clients = np.asarray(clients, dtype=np.int64)
        self._pending = _Pending(action, clients, rows, each)
        cfg = ConfigRecord({k: _plain(v) for k, v in {**config, "server-round": server_round}.items()})
        arrays = self._record(common, stacked=True) if common is not None and len(common) else ArrayRecord()
        evaluate = action == "evaluate"
        configure = self.configure_evaluate if evaluate else self.configure_train
        messages = configure(server_round, arrays, cfg, self._grid)
        t0 = time.perf_counter()
        replies = self._grid.send_and_receive(messages, timeout=self.timeout)
        self._log.waits.append(time.perf_counter() - t0)
        self._log.seconds += self._log.waits[-1]
        self._log.messages += len(messages)
        if evaluate:
            arrays_out, metrics = None, self.aggregate_evaluate(server_round, replies)
        else:
            arrays_out, metrics = self.aggregate_train(server_round, replies)
        answered = np.asarray(metrics["answered"], dtype=bool)
        key = "test" if evaluate else int(config.get("round", 0))
        self._log.count(key, clients, answered)
        log(INFO, "exchange %d (%s, %s): %d of %d clients answered in %.2f s", server_round, action,
            "test" if evaluate else f"round {key}", int(answered.sum()), len(clients), self._log.waits[-1])
        table = {k: np.asarray(v, dtype=np.float64).reshape(len(clients), -1) for k, v in metrics.items()
                 if k != "answered"}
        return Answers(answered, None if arrays_out is None else arrays_out["rows"].numpy(), table)

    def _lose(self, server_round: int, action: str, client: int, why: str, failed: bool = False) -> None:
        self._log.lost.append([server_round, action, client, why])
        log(INFO, "exchange %d (%s): client %d lost: %s", server_round, action, client, why)
        if failed:  # one line per failing client (Flower's own log of it, a traceback, is quiet without --verbose)
            warnings.warn(f"Flower client {client} failed in {action}: {why}", ClientFailed, stacklevel=2)

    def _describe(self) -> dict:
        """Wait for one SuperNode per client; learn each node's partition, sample counts and true cluster."""
        m = int(self.p["clients"])
        nodes = self._grid.wait_for_nodes(
            m, self.start_timeout, f"{self.algo}: waiting up to {self.start_timeout:g} s for {m} SuperNodes, one per "
            "client (%d connected)", lambda n: f"{n} SuperNodes connected within {self.start_timeout:g} s; the run "
            f"needs one per client ({m}): flwr run . --federation-config \"num-supernodes={m}\"")
        if len(nodes) != m:
            raise ValueError(f"the federation has {len(nodes)} SuperNodes but the run has {m} clients: run one "
                             f"SuperNode per client (--clients {len(nodes)}, or num-supernodes={m})")
        self._nodes = np.asarray(nodes, dtype=np.uint64)  # until the partitions are known: node order
        facts = self._known if self._known is not None else self._facts()
        keep, self.timeout = self.timeout, self.start_timeout
        try:  # the losses of no model: each reply names its partition and training samples (docs/flower-contract.md)
            self._pending = _Pending("query.losses", np.arange(m))
            self._log.exchanges += 1
            messages = self.configure_train(self._log.exchanges, ArrayRecord(), ConfigRecord(
                {"server-round": self._log.exchanges}), self._grid)
            replies = self._grid.send_and_receive(messages, timeout=self.start_timeout)
        finally:
            self.timeout = keep
        errors = [_reason(r.error.reason) for r in replies if r.has_error()]
        if errors and len(errors) == m and all(_UNKNOWN_MESSAGE.search(e) for e in errors):  # as the public ones
            raise ClientContractError(
                f"{type(self).__name__}: no client answers query.losses ({errors[0]}); the ClientApp must answer the "
                "message types of docs/flower-contract.md (train, evaluate, query.losses, query.gradient; "
                "nets.flower.client.app does)")
        if errors:
            raise ValueError(f"a client could not set up its partition: {errors[0]}")
        if len(replies) < m:
            raise TimeoutError(f"{m - len(replies)} of {m} SuperNodes did not describe their partition within "
                               f"{self.start_timeout:g} s")
        by_partition = {int(r.content[METRICS]["partition-id"]): r for r in replies}
        if sorted(by_partition) != list(range(m)):
            raise ValueError(f"the SuperNodes hold partitions {sorted(by_partition)}; the run needs 0..{m - 1}, one "
                             f"each")
        self._nodes = np.array([by_partition[i].metadata.src_node_id for i in range(m)], dtype=np.uint64)
        held = np.array([by_partition[i].content[METRICS][NUM_EXAMPLES] for i in range(m)], dtype=np.int64)
        if not np.array_equal(held, facts["n_train"]):
            raise ValueError(f"the SuperNodes hold {held.tolist()} training samples where the experiment's "
                             f"partitions have {facts['n_train'].tolist()}")
        return facts

    def _facts(self) -> dict:
        """The federation's facts, from the seed as ``nets run`` builds it (the data is dropped): the network, the
        shapes, each partition's sample counts and true cluster."""
        from ..experiment import _federation_that_fits

        data_ss, _, batch_ss = np.random.SeedSequence(self.p["seed"]).spawn(3)
        fed, note = _federation_that_fits(self.p, data_ss, explicit_n=self.params.get("n_per_client") is not None)
        return self._facts_of(fed, note, batch_ss)

    def _facts_of(self, fed, note: list, batch_ss: np.random.SeedSequence) -> dict:
        p = self.p
        return {"model": default_model(p["dataset"], p["task"]) if p["model"] == "auto" else p["model"],
                "input_shape": list(fed.input_shape), "n_classes": int(fed.n_classes), "vocab_size": fed.vocab_size,
                "input_float": bool(np.issubdtype(fed.X.dtype, np.floating)), "n_per_client": int(fed.X.shape[1]),
                "notes": list(fed.notes) + list(note), "device": str(resolve_device(p["device"])),
                "n_train": np.asarray(fed.n_samples, dtype=np.int64), "truth": None if fed.clusters is None
                else np.asarray(fed.clusters, dtype=np.int64), "seed": int(batch_ss.generate_state(1)[0])}

    # ---------------------------------------------------------------- the run (as nets.experiment.run_experiment)
    def _run(self, facts: dict) -> tuple[np.ndarray, dict]:
        from ..experiment import _LOCAL_START_ALGOS, _hyper, _separate_local_starts, check_sizes

        p, algo = self.p, self.algo
        device = resolve_device(p["device"])
        dtype = torch.float64 if p["dtype"] == "float64" else torch.float32
        name = facts["model"]
        model = FunctionalModel(model_factory(name, tuple(facts["input_shape"]), facts["n_classes"],
                                              facts["vocab_size"]), MODELS[name].loss, device=device, dtype=dtype)
        placeholder = torch.zeros((1, 1, *facts["input_shape"]), dtype=dtype if facts["input_float"] else torch.long)
        stacks = TorchBackend(model, placeholder)  # operations on model stacks only: it holds no client data
        self._layout = Layout(ArrayRecord(model.module.state_dict()))  # flat rows <-> the contract's records
        self._np_dtype = np.float64 if dtype == torch.float64 else np.float32
        truth = facts["truth"]
        m = int(self.p["clients"])
        k = check_sizes(p, int(facts["n_per_client"]), m, truth)
        if p["local_init"] == "separate" and algo not in _LOCAL_START_ALGOS:
            raise ValueError(f"local_init='separate' applies to {', '.join(_LOCAL_START_ALGOS)} (their local models "
                             f"train once from the start); got algo {algo!r}")
        _, algo_ss, _ = np.random.SeedSequence(p["seed"]).spawn(3)
        spec = ALGOS[algo]
        n_runs = p["n_init"] * len(np.atleast_1d(p["step_size"]))
        runs = n_runs if "n_init" in hyper_parameters(algo) else 1
        members = np.arange(m)
        while True:
            rng = np.random.default_rng(algo_ss)  # a restart on fewer clients starts from the same seed
            train = FederatedBackend(self.exchange, stacks, facts["n_train"], members=members,
                                     batch_size=p["batch_size"], seed=facts["seed"], n_max=facts["n_per_client"],
                                     lr_decay=p["lr_decay"], on_loss=self.on_loss)
            if p["local_init"] == "separate":
                _separate_local_starts(train, np.random.default_rng(np.random.SeedSequence(p["seed"],
                                                                                           spawn_key=(3,))))
            monitor = _Monitor(self, truth, spec.rule, runs, members, m)
            est = make_estimator(algo, _hyper(p, spec, k, p["init"], 0, rng, monitor, self.algo_params),
                                 explicit=tuple(self.algo_params))
            self.round_labels = monitor.labels
            self._monitor = monitor
            t0 = time.perf_counter()
            try:
                est.fit(train)
                break
            except ClientsLost as exc:
                members = members[~np.isin(members, exc.clients)]
                self._log.restarts += 1
                log(INFO, "%s: clients %s lost in %s; restarting on the %d that remain", algo, exc.clients,
                    exc.action, len(members))
                if len(members) < max(k if "n_clusters" in hyper_parameters(algo) else 1, 1):
                    raise ValueError(f"{algo}: too few clients left ({len(members)}) after losing {exc.clients} in "
                                     f"{exc.action}") from None
        seconds = time.perf_counter() - t0
        res = est.result_
        labels = np.full(m, -1, dtype=np.int64)
        labels[members] = res.labels
        self.labels = labels
        final = self._score(res, spec.rule, labels, members)
        record = {
            "dataset": p["dataset"], "algo": algo, "model": name, "task": p["task"],
            "test_accuracy": final["test_accuracy"], "test_loss": final["test_loss"],
            **_clustering_scores(labels, truth),
            "n_clusters": int(res.n_clusters), "rounds": int(p["rounds"]) if spec.restarts else int(res.rounds),
            "clients": m, "n_per_client": int(facts["n_per_client"]), "n_params": model.n_params,
            # each client trains alone on its own SuperNode: nothing is batched across clients
            "seconds": seconds, "device": facts["device"], "batched": False, "unassigned": final["unassigned"],
            "resumed_from_round": None, "notes": list(facts["notes"]),
            "algo_params": dict(sorted(self.algo_params.items())),
        }
        record.update(train_identity_scores(self.evaluate, res.models, spec.rule, labels))
        if "status" in res.extra:
            record["status"] = str(res.extra["status"])
        self._best_run = int(res.extra.get("best_run", 0)) if spec.restarts else 0
        if self.history:
            record["history"] = monitor.history(self._best_run)
        lg = self._log
        record["flower"] = {"exchanges": lg.exchanges, "messages": lg.messages,
                            "seconds_in_exchanges": round(lg.seconds, 3), "lost": lg.lost, "restarts": lg.restarts,
                            "reused": lg.reused,
                            "removed_clients": [int(c) for c in np.setdiff1d(np.arange(m), members)],
                            "answered": [list(e) for e in lg.answered],
                            "rounds_without_answers": lg.silent()}
        self.record = record
        return np.asarray(res.models), final

    def _score(self, res, rule: str, labels: np.ndarray, members: np.ndarray) -> dict:
        """``nets.experiment``'s final scoring by the paper's rule, on the clients' test data."""
        m = len(labels)
        if len(res.models) == 0:  # e.g. SR-FCA kept no cluster: nothing to evaluate
            return {"test_accuracy": None, "test_loss": None, "unassigned": m}
        if rule == "own":  # Local: client i is scored with its own model; a removed client by the min-loss rule
            own = np.full(m, -1, dtype=np.int64)
            own[members] = np.arange(len(members))
            return self.evaluate(res.models, "cluster", own)
        return self.evaluate(res.models, rule, labels if rule == "cluster" else None)

    def evaluate(self, models, rule: str, labels: np.ndarray | None = None) -> dict:
        """Test loss and accuracy of ``models`` by ``rule`` (:func:`nets.evaluate.evaluate`), on the clients that
        answer: a client with a label is sent its cluster's model only, the others every model."""
        M = np.asarray(models.detach().cpu() if isinstance(models, torch.Tensor) else models)
        m = len(self._nodes)
        M = M.astype(np.float64 if self.p["dtype"] == "float64" else np.float32, copy=False)
        lab = np.full(m, -1, dtype=np.int64) if labels is None else np.asarray(labels, dtype=np.int64)
        if rule != "cluster":
            lab[:] = -1
        # a client without a label (the min-loss rule, or no cluster) scores the model of lowest test loss
        rows = [M if j < 0 else M[j:j + 1] for j in lab]
        each = [{"choose": CHOOSE_LOWEST} if j < 0 else {} for j in lab]
        ans = self.exchange("evaluate", np.arange(m), {}, rows=rows, each=each)
        ok = ans.answered
        if not ok.any():
            return {"test_accuracy": None, "test_loss": None, "unassigned": m, "choice": None}
        t = {k: v[ok, 0] for k, v in ans.metrics.items()}
        choice = np.where(lab[ok] >= 0, lab[ok], np.nan_to_num(t.get("cluster", np.zeros(ok.sum())), nan=-1))
        accuracy = t.get("eval-acc", np.full(ok.sum(), np.nan))
        return mean_scores(t["eval-loss"], accuracy, t[NUM_EXAMPLES], lab[ok] < 0, rule, choice.astype(np.int64))


class _Monitor:
    """The estimator's monitor in a Flower run: per-round clustering metrics (``nets run``'s history rows) and
    the labels of every call; the test scores of ``eval_every`` come from an ``evaluate`` exchange."""

    def __init__(self, strategy: FlowerStrategy, truth, rule: str, n_runs: int, members: np.ndarray, m: int):
        p = strategy.p
        self.strategy, self.truth, self.rule, self.n_runs = strategy, truth, rule, n_runs
        self.eval_every, self.rounds = p["eval_every"], p["rounds"]
        self.members, self.m = members, m
        self.rows: list[dict] = []
        self.labels: list[np.ndarray] = []
        self._pending = 0

    def __call__(self, t: int, models: np.ndarray, labels: np.ndarray) -> dict:
        full = np.full(self.m, -1, dtype=np.int64)
        full[self.members] = labels
        self.labels.append(full)
        scores = _clustering_scores(full, self.truth)
        sizes = np.bincount(full[full >= 0], minlength=int(full.max(initial=-1)) + 1)
        row = {"round": t, "run": self._pending, "ari": scores["ari"], "misclustering": scores["misclustering"],
               "cluster-sizes": [int(c) for c in sizes], "unassigned": int((full < 0).sum())}
        log(INFO, "%s round %d%s: %d clusters, sizes %s, %d unassigned, ARI %s", self.strategy.algo, t,
            f" (run {self._pending})" if self.n_runs > 1 else "", int((sizes > 0).sum()), row["cluster-sizes"],
            row["unassigned"], "n/a" if scores["ari"] is None else f"{scores['ari']:.3f}")
        due = self.eval_every and ((t + 1) % self.eval_every == 0 or t == self.rounds - 1)
        if due and self.rule != "own" and len(models) > 0:
            scored = self.strategy.evaluate(models, self.rule, full if self.rule == "cluster" else None)
            row.update(test_accuracy=scored["test_accuracy"], test_loss=scored["test_loss"])
        self.rows.append(row)
        self._pending = (self._pending + 1) % self.n_runs
        return {}

    def history(self, best_run: int) -> dict:
        rows = [r for r in self.rows if r["run"] == best_run]
        keys = ("ari", "misclustering", "test_accuracy", "test_loss")
        return {"rounds": [r["round"] for r in rows], **{k: [r.get(k) for r in rows] for k in keys}}


def _clustering_scores(labels, truth) -> dict:
    """:func:`nets.evaluate.clustering_scores`, but a clustering in which no client is assigned has no ARI.

    Unassigned clients (-1) count as singletons in the ARI; with every client unassigned against singleton clusters
    (as many clusters as clients) that would read 1.0 for a run in which no client answered.
    """
    scores = clustering_scores(labels, truth)
    if truth is not None and len(labels) and (np.asarray(labels) < 0).all():
        scores["ari"] = None
    return scores


def _reason(reason: str) -> str:
    """The client's own error message out of Flower's wrapping of a ClientApp exception."""
    found = re.search(r"Message:\s*(.*?)'?>?\s*$", reason, re.S)
    return " ".join((found.group(1) if found else reason).split())


class IFCAStrategy(FlowerStrategy):
    """IFCA (Ghosh et al., IFCA journal Alg. 2) as a Flower strategy; lost clients leave ``M_t``."""

    algo = "ifca"


class GlobalStrategy(FlowerStrategy):
    """FedAvg (McMahan et al.), IFCA's ``k = 1`` case; lost clients leave the round."""

    algo = "global"


class CLoVEStrategy(FlowerStrategy):
    """CLoVE (Bhatia et al., Alg. 1) as a Flower strategy; lost clients leave ``M^(t)``."""

    algo = "clove"


class SRFCAStrategy(FlowerStrategy):
    """SR-FCA (Vardhan, Ghosh, Mazumdar, Alg. 1-4) as a Flower strategy; a lost client resumes (the estimator's rule
    for backends that lose clients, :class:`synth.algorithms.srfca.SRFCA`)."""

    algo = "srfca"


class LocalStrategy(FlowerStrategy):
    """Local training (every client alone; the papers' baseline); a lost client is removed and reported
    unassigned."""

    algo = "local"
    on_loss = "raise"


STRATEGIES: dict[str, type[FlowerStrategy]] = {
    cls.algo: cls for cls in (IFCAStrategy, SRFCAStrategy, CLoVEStrategy, GlobalStrategy, LocalStrategy)}


def strategy_for(params: dict[str, Any], **options) -> FlowerStrategy:
    """The strategy of ``params["algo"]`` (default ``ifca``) with ``params``; other algorithms are a ValueError."""
    algo = params.get("algo", "ifca")
    if algo not in STRATEGIES:
        hint = did_you_mean(str(algo), STRATEGIES) if algo not in ALGOS else ""
        raise ValueError(f"algo {algo!r} has no Flower strategy{hint}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[algo](params, **options)
