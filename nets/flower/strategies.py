"""Flower strategies (the message-based ``flwr.serverapp.strategy.Strategy``) for IFCA, SR-FCA, CLoVE, FedAvg, Local.

A strategy runs its algorithm's estimator from :mod:`synth.algorithms` -- the same object, hyper-parameters and
random streams as ``nets run`` -- on a :class:`~nets.flower.backend.FederatedBackend`, whose every operation on
client data is one exchange of the client contract's messages (``docs/flower-contract.md``: ``query.losses``,
``train``, ``query.gradient``, ``evaluate``, answered by :func:`~nets.flower.torch_client.torch_client_app`, which
:mod:`nets.flower.client` builds over cflab's data and networks), sent and checked by the public strategies'
exchange (:meth:`nets.flower.clustered.ClusteredStrategy._engine_exchange`, the one implementation of the
contract's messages, reply check and lost clients; here each message also carries the experiment).  The
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
each REFINE.  Local's one exchange (each client's local model, ``train``) has no round to leave: a client whose
local model did not arrive is removed (``flower.removed_clients``) and reported unassigned (label -1), the others
keep the local models they sent (the models of that one exchange, asked once).  Every exchange has a
timeout, so a run never waits longer than that for a client.
"""

from __future__ import annotations

import dataclasses
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
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
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
from .arrays import Layout, cluster_models
from .backend import Answers, FederatedBackend
from .client import EXPERIMENT
from .clustered import (
    _RUNNING,
    CHOOSE_LOWEST,
    NUM_EXAMPLES,
    ClientContractError,
    ClusteredResult,
    ClusteredStrategy,
)
from .session import RunStopped, StoppableGrid

__all__ = ["STRATEGIES", "CLoVEStrategy", "ClientFailed", "FlowerStrategy", "GlobalStrategy", "IFCAStrategy",
           "LocalStrategy", "RunStopped", "SRFCAStrategy", "strategy_for"]

# nets run parameters a Flower run does not offer, and why
_UNSUPPORTED = {
    "checkpoint": "a Flower run is not resumed from a checkpoint",
    "test_machines": "IFCA's separate test machines are not Flower clients",
}


_FAILED = "failed: "  # the reason of a lost client whose ClientApp raised (ClusteredStrategy._collect)


class ClientFailed(UserWarning):
    """A client's ClientApp raised: one line with the client and its exception's message (``python -m nets``
    prints it when it happens, ``immediate``)."""

    immediate = True


@dataclass
class _Log:
    """What the Flower side of a run cost and lost."""

    exchanges: int = 0
    messages: int = 0
    seconds: float = 0.0  # in send_and_receive
    lost: list[list] = field(default_factory=list)  # [exchange, action, client, why]
    waits: list[float] = field(default_factory=list)  # seconds each exchange waited for its answers
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
        self._log = _Log()
        self._experiment = ConfigRecord({"json": json.dumps({"params": self.params, "faults": self.faults})})
        self._driver = _Driver(self)  # the exchanges: the public strategies'
        self._describing = False  # a failure while the SuperNodes describe their partitions is an error, no warning
        self._nodes = np.zeros(0, dtype=np.uint64)  # node ids are 64-bit unsigned
        self._stop = threading.Event()
        self.running = False  # in start(): the ServerApp thread runs this strategy
        self.pull_seconds: tuple[float, float] | None = None  # the poll's shortest and longest pause (default)

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
        """Not Flower's round loop: the estimator makes the exchanges (:meth:`start`)."""
        raise RuntimeError(f"{type(self).__name__}'s rounds are the estimator's; run it with start()")

    def aggregate_train(self, server_round: int, replies) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Not Flower's round loop: the estimator makes the exchanges (:meth:`start`)."""
        raise RuntimeError(f"{type(self).__name__}'s rounds are the estimator's; run it with start()")

    configure_evaluate, aggregate_evaluate = configure_train, aggregate_train

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
        """Send ``action`` to ``clients`` (indices into the federation) and gather the answers in their order: the
        public strategies' exchange (:meth:`~nets.flower.clustered.ClusteredStrategy._engine_exchange`).

        ``common``: model rows every client gets; ``rows``: each client's own rows; ``each``: each client's own
        settings.  Used by :class:`~nets.flower.backend.FederatedBackend` for every operation on client data.
        """
        clients = np.asarray(clients, dtype=np.int64)
        # the round travels in every message beside the settings (the clients' injected faults name it)
        each = [{**({"round": config["round"]} if "round" in config else {}), **(each[a] if each else {})}
                for a in range(len(clients))]
        t0 = time.perf_counter()
        ans = self._driver._engine_exchange(action, clients, config, common=common, rows=rows, each=each)
        self._driver._begin_round(0)  # the public strategies' round records: none kept here (the replies' models)
        self._log.waits.append(time.perf_counter() - t0)
        self._log.seconds += self._log.waits[-1]
        self._log.exchanges = self._driver._exchanges
        self._log.messages += len(clients)
        for a in np.flatnonzero(ans.answered):  # each SuperNode holds the partition it described
            node = self._driver._federation[clients[a]]
            if self._driver.partitions.get(node) != clients[a]:
                self._driver.partitions[node] = int(clients[a])
                self._lose(self._log.exchanges, action, node, "answered for another partition")
                ans.answered[a] = False
                for table in (*ans.metrics.values(), *(() if ans.rows is None else (ans.rows,))):
                    table[a] = np.nan
        if self.algo == "local" and ans.rows is not None:  # the estimator refuses a NaN row: a lost client's is the
            for a in np.flatnonzero(~ans.answered):  # start it was sent, and _run removes the client after the fit
                ans.rows[a] = rows[a]
        key = "test" if action == "evaluate" else int(config.get("round", 0))
        self._log.count(key, clients, ans.answered)
        log(INFO, "exchange %d (%s, %s): %d of %d clients answered in %.2f s", self._log.exchanges, action,
            "test" if action == "evaluate" else f"round {key}", int(ans.answered.sum()), len(clients),
            self._log.waits[-1])
        return ans

    def _lose(self, exchange: int, action: str, node: int, why: str) -> None:
        """The driver lost ``node`` (:meth:`_Driver._lose`): a ``flower.lost`` entry with its client, and a
        :class:`ClientFailed` warning when its ClientApp raised."""
        client = self._driver._federation.index(node)
        failed = why.startswith(_FAILED)
        why = _reason(why[len(_FAILED):]) if failed else why
        self._log.lost.append([exchange, action, client, why])
        log(INFO, "exchange %d (%s): client %d lost: %s", exchange, action, client, why)
        if failed and not self._describing:  # one line per failing client (Flower's own log of it is quiet)
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
        facts = self._known if self._known is not None else self._facts()
        driver = self._driver
        driver._grid, driver._federation = self._grid, [int(n) for n in nodes]  # node order, until described
        driver._timeout, self._describing, lost = self.start_timeout, True, len(self._log.lost)
        try:  # the losses of no model: each reply names its partition and training samples (docs/flower-contract.md)
            ans = driver._engine_exchange("query.losses", np.arange(m), {})
        except ClientContractError as exc:
            raise ClientContractError(f"{type(self).__name__}: {str(exc).split(': ', 1)[1]}".replace(
                "torch_client_app does", "nets.flower.client.app does")) from None
        finally:
            driver._timeout, self._describing = self.timeout, False
        self._log.exchanges = driver._exchanges
        errors = [why for _, _, _, why in self._log.lost[lost:] if not why.startswith("no answer within")]
        del self._log.lost[lost:]  # describing is no round: what fails here is an error
        if errors:
            raise ValueError(f"a client could not set up its partition: {errors[0]}")
        if not ans.answered.all():
            raise TimeoutError(f"{m - int(ans.answered.sum())} of {m} SuperNodes did not describe their partition "
                               f"within {self.start_timeout:g} s")
        by_partition = {driver.partitions.get(n, -1): a for a, n in enumerate(driver._federation)}
        if sorted(by_partition) != list(range(m)):
            raise ValueError(f"the SuperNodes hold partitions {sorted(by_partition)}; the run needs 0..{m - 1}, one "
                             f"each")
        order = [by_partition[i] for i in range(m)]
        driver._federation = [driver._federation[a] for a in order]  # client i is the node of partition i
        self._nodes = np.array(driver._federation, dtype=np.uint64)
        held = ans.table("n", 1)[order, 0].astype(np.int64)
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
        # flat rows <-> the contract's records
        self._layout = self._driver.layout = Layout(ArrayRecord(model.module.state_dict()))
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
        rng = np.random.default_rng(algo_ss)
        train = FederatedBackend(self.exchange, stacks, facts["n_train"], batch_size=p["batch_size"],
                                 seed=facts["seed"], n_max=facts["n_per_client"], lr_decay=p["lr_decay"])
        if p["local_init"] == "separate":
            _separate_local_starts(train, np.random.default_rng(np.random.SeedSequence(p["seed"], spawn_key=(3,))))
        monitor = _Monitor(self, truth, spec.rule, runs)
        est = make_estimator(algo, _hyper(p, spec, k, p["init"], 0, rng, monitor, self.algo_params),
                             explicit=tuple(self.algo_params))
        self.round_labels = monitor.labels
        self._monitor = monitor
        t0 = time.perf_counter()
        est.fit(train)
        seconds = time.perf_counter() - t0
        res, members = est.result_, np.arange(m)
        if spec.rule == "own" and train.lost:  # Local: a client whose local model did not arrive is removed
            members = np.setdiff1d(members, sorted(train.lost))
            res = dataclasses.replace(res, models=np.asarray(res.models)[members], n_clusters=len(members),
                                      labels=np.arange(len(members)))
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
                            "seconds_in_exchanges": round(lg.seconds, 3), "lost": lg.lost,
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

    def __init__(self, strategy: FlowerStrategy, truth, rule: str, n_runs: int):
        p = strategy.p
        self.strategy, self.truth, self.rule, self.n_runs = strategy, truth, rule, n_runs
        self.eval_every, self.rounds = p["eval_every"], p["rounds"]
        self.rows: list[dict] = []
        self.labels: list[np.ndarray] = []
        self._pending = 0

    def __call__(self, t: int, models: np.ndarray, labels: np.ndarray) -> dict:
        full = np.array(labels, dtype=np.int64)
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


class _Driver(ClusteredStrategy):
    """The public strategies' exchange (:meth:`~nets.flower.clustered.ClusteredStrategy._engine_exchange`: the
    contract's messages, the reply check, lost clients) for a :class:`FlowerStrategy`: every message also carries
    the experiment, a ``train`` message only the estimator's settings, and a lost client is the strategy's
    ``flower.lost`` entry.  A reply's numbers are not checked: ``nets run`` keeps a non-finite model or loss for
    the estimator to judge (a diverged run)."""

    algorithm = "nets flower"
    _check_values = False

    def __init__(self, owner: FlowerStrategy):
        super().__init__(1, min_available_nodes=1)
        self._owner = owner
        self._message_records = {EXPERIMENT: owner._experiment}

    def _train_defaults(self) -> dict:
        return {}  # the estimator's settings say everything (FederatedBackend's local-steps, lr, order)

    def _lose(self, server_round: int, message_type: str, node: int, why: str) -> None:
        self._owner._lose(self._exchanges, message_type, node, why)


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


STRATEGIES: dict[str, type[FlowerStrategy]] = {
    cls.algo: cls for cls in (IFCAStrategy, SRFCAStrategy, CLoVEStrategy, GlobalStrategy, LocalStrategy)}


def strategy_for(params: dict[str, Any], **options) -> FlowerStrategy:
    """The strategy of ``params["algo"]`` (default ``ifca``) with ``params``; other algorithms are a ValueError."""
    algo = params.get("algo", "ifca")
    if algo not in STRATEGIES:
        hint = did_you_mean(str(algo), STRATEGIES) if algo not in ALGOS else ""
        raise ValueError(f"algo {algo!r} has no Flower strategy{hint}; choose one of {', '.join(STRATEGIES)}")
    return STRATEGIES[algo](params, **options)
