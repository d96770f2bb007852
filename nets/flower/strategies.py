"""``nets flower``'s strategies for IFCA, SR-FCA, CLoVE, FedAvg and Local: the public strategies of
:mod:`nets.flower.clustered` built from ``nets run``'s parameters, on cflab's data sets and networks.

A :class:`FlowerStrategy` validates ``nets run``'s parameters (:meth:`preflight` refuses what ``nets run`` refuses,
with its functions and messages, before Ray starts) and runs the public strategy of its algorithm
(:class:`~nets.flower.clustered.IFCA`, :class:`~nets.flower.clustered.SRFCA`,
:class:`~nets.flower.clustered.CLoVE`, :class:`~nets.flower.clustered.Global`, :class:`~nets.flower.clustered.Local`)
with ``nets run``'s estimator: the public options from the parameters, every other hyper-parameter as
``estimator_params``, the network's stacks in the run's precision (``stacks``), the starts drawn from the seed as
``nets run`` draws them (``init``), and the round's step size after ``lr_decay``.  So the run, its messages (the
client contract, ``docs/flower-contract.md``, answered by :data:`nets.flower.client.app`, which is
:func:`~nets.flower.torch_client.torch_client_app` over cflab's partitions), the reply checks and the fault rules
are the public strategies'; a ``nets flower`` run and ``nets run`` with the same settings take the same decisions
every round (``tests/test_flower.py``, ``tests/test_flower_single_path.py``).  What ``nets flower`` adds
(:class:`_NetsRun`): before the first round one ``query.losses`` of no model maps each SuperNode to its partition
and checks its sample counts, and client ``i`` is the node of partition ``i``; each ``train`` message carries
``nets run``'s minibatch order (:meth:`~nets.flower.backend.FederatedBackend._training`) and every message the
experiment and the estimator's round; a reply's numbers are not checked (a non-finite model or loss is the
estimator's to judge, as in ``nets run``); :attr:`FlowerStrategy.record` is ``nets run``'s JSON record plus
``flower`` (exchanges, messages, time waiting, lost clients as ``[exchange, message type, client, why]``, the
clients answering round by round, the rounds in which none did: ``python -m nets flower`` then exits 1, and a
clustering in which no client is assigned has no ARI).  After the fit, one ``evaluate`` exchange scores the
models by the paper's rule (IFCA's min-loss rule: every model sent with ``choose="lowest-loss"``; SR-FCA's and
CLoVE's: the client's cluster's model; Local's: the client's own), as do ``eval_every``'s evaluations.
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
from flwr.app import ArrayRecord, ConfigRecord, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result, Strategy
from flwr.supercore import log

from synth.validation import check_real, did_you_mean

from ..algorithms import ALGOS, estimator_class, hyper_parameters, make_estimator
from ..backend import TorchBackend
from ..datasets import default_model
from ..device import resolve_device
from ..evaluate import clustering_scores, mean_scores, train_identity_scores
from ..experiment import _Recorder
from ..functional import FunctionalModel
from ..models import MODELS, model_factory
from .arrays import Layout
from .backend import Answers
from .client import EXPERIMENT
from .clustered import (
    _RUNNING,
    CHOOSE_LOWEST,
    DRIVER_PARAMS,
    IFCA,
    NUM_EXAMPLES,
    SRFCA,
    ClientContractError,
    CLoVE,
    ClusteredResult,
    ClusteredStrategy,
    Global,
    Local,
    check_estimator_params,
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
        for key in sorted(set(self.algo_params) & set(DRIVER_PARAMS)):  # the public strategy's own (the driver's)
            raise ValueError(f"--algo-param {key}=... is not available in a Flower run: the strategy sets it "
                             f"({DRIVER_PARAMS[key]}, from the run's flags and seed)")
        check_estimator_params({k: v for k, v in self.algo_params.items() if k not in DRIVER_PARAMS})

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
        self._public: ClusteredStrategy | None = None  # the run (_public_strategy)
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

    # not Flower's round loop: the estimator makes the exchanges (start), as in the public strategies
    configure_train, aggregate_train = ClusteredStrategy.configure_train, ClusteredStrategy.aggregate_train
    configure_evaluate, aggregate_evaluate = configure_train, aggregate_train

    def start(self, grid: Grid, initial_arrays: ArrayRecord | None = None, num_rounds: int | None = None,
              timeout: float | None = None, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None, evaluate_fn=None) -> Result:
        """Run the algorithm on the grid's SuperNodes; :attr:`record` is then the ``nets run`` JSON record.

        The run is the public strategy's (:meth:`~nets.flower.clustered.ClusteredStrategy.start`, built from the
        parameters by :meth:`_public`).  Its initial models are drawn from the run's seed, as ``nets run`` draws
        them, so ``initial_arrays`` must be empty; ``num_rounds`` (if given) must equal the ``rounds`` parameter.
        ``train_config``, ``evaluate_config`` and ``evaluate_fn`` are not used: the parameters say everything.
        The ``Result`` is the public strategies' (:class:`~nets.flower.clustered.ClusteredResult`): ``arrays``
        holds one ``state_dict`` record per model and each node's cluster and partition
        (:func:`~nets.flower.arrays.cluster_models`), its train metrics the kept run's clustering round by round.
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
            if self._known is None:  # preflight builds it before Ray starts; a run without preflight builds it here
                self._known = self._facts()
            facts = self._known
            self._public = self._public_strategy(facts)
            self._describe(facts)
            result = self._fit(facts)
        finally:
            self.running = False
            _RUNNING.discard(self)
        return result

    def _public_strategy(self, facts: dict) -> ClusteredStrategy:
        """The public strategy of this run (nets.flower.clustered) with ``nets run``'s estimator: its options from
        the parameters, every other hyper-parameter of ``nets run``'s estimator as ``estimator_params``, the
        network's stacks (:class:`~nets.backend.TorchBackend`, in the run's precision), the seed's starts drawn as
        ``nets run``'s estimator draws them (``init``), and :class:`_NetsRun` for the federation and the record."""
        from ..experiment import _LOCAL_START_ALGOS, _hyper, check_sizes

        p, algo = self.p, self.algo
        device = resolve_device(p["device"])
        dtype = torch.float64 if p["dtype"] == "float64" else torch.float32
        name = facts["model"]
        model = FunctionalModel(model_factory(name, tuple(facts["input_shape"]), facts["n_classes"],
                                              facts["vocab_size"]), MODELS[name].loss, device=device, dtype=dtype)
        placeholder = torch.zeros((1, 1, *facts["input_shape"]), dtype=dtype if facts["input_float"] else torch.long)
        stacks = TorchBackend(model, placeholder)  # operations on model stacks only: it holds no client data
        self._layout = Layout(ArrayRecord(model.module.state_dict()))  # flat rows <-> the contract's records
        m = int(p["clients"])
        k = check_sizes(p, int(facts["n_per_client"]), m, facts["truth"])
        if p["local_init"] == "separate" and algo not in _LOCAL_START_ALGOS:
            raise ValueError(f"local_init='separate' applies to {', '.join(_LOCAL_START_ALGOS)} (their local models "
                             f"train once from the start); got algo {algo!r}")
        _, algo_ss, _ = np.random.SeedSequence(p["seed"]).spawn(3)
        rng = np.random.default_rng(algo_ss)
        spec = ALGOS[algo]
        runs = p["n_init"] * len(np.atleast_1d(p["step_size"])) if "n_init" in hyper_parameters(algo) else 1
        self._monitor = _Monitor(self, facts["truth"], spec.rule, runs)
        self.round_labels = self._monitor.labels
        hyper = _hyper(p, spec, k, p["init"], 0, rng, None, self.algo_params)
        declared = estimator_class(algo)._parameter_constraints
        common = {"seed": rng, "stacks": stacks, "lr_decay": p["lr_decay"], "monitor": self._monitor,
                  "evaluate_every": 0, "min_available_nodes": m, "start_timeout": self.start_timeout,
                  "estimator_params": {key: v for key, v in hyper.items()
                                       if key in declared and key not in DRIVER_PARAMS}}
        steps = [float(v) for v in np.atleast_1d(p["step_size"])]
        # the seed's network: the local models' start (nets run's torch backend: model.init(seed))
        self._start = self._layout.unflatten(stacks.to_numpy(model.init(facts["seed"])[None])[0])
        if algo in ("ifca", "global"):
            step = {"lr": steps[0]} if np.ndim(p["step_size"]) == 0 else {"step_sizes": steps}
            # the server's two exchanges per round (its minibatch order travels with each train message); a
            # gradient of every run of restarts needs the client's choice (no local steps, so no order)
            restarts = (p["n_init"] if algo == "ifca" else 1) * len(steps)
            options = {"averaging": p["averaging"], "client_choice": p["averaging"] == "gradient" and restarts > 1,
                       "local_steps": p["local_steps"], "init": p["init"], **step, **common}
            cls, args = (IFCA, (k,)) if algo == "ifca" else (Global, ())
            options.update({"n_init": p["n_init"]} if algo == "ifca" else {})
        elif algo == "clove":
            cls, args = CLoVE, (k,)
            options = {"averaging": p["averaging"], "local_steps": p["local_steps"], "lr": steps[0],
                       "init": p["init"], **common}
        elif algo == "srfca":  # w_0: the estimator's one draw of the network's initialisation
            cls, args = SRFCA, (hyper["threshold"],)
            options = {"n_refine": hyper["n_refine"], "trmean_steps": hyper["trmean_steps"],
                       "local_start": self._start, "init": "default", **common}
        else:  # local: every client from the seed's network
            cls, args = Local, ()
            options = {"local_steps": hyper["local_train_steps"], "lr": steps[0], **common}
        public = type(cls.__name__, (_NetsRun, cls), {})(*args, **options)
        public._owner = self
        public._message_records = {EXPERIMENT: self._experiment}
        public.layout = self._layout
        return public

    def _fit(self, facts: dict) -> ClusteredResult:
        """The public strategy's run on the described federation, then ``nets run``'s final scoring and record."""
        from ..experiment import chosen_threshold

        p, algo, spec, public = self.p, self.algo, ALGOS[self.algo], self._public
        m = int(p["clients"])
        initial = self._start  # Local's start; the others draw theirs from the seed (init) and take its layout
        t0 = time.perf_counter()
        result = public.start(self._grid, initial, num_rounds=p["rounds"] if algo in ("ifca", "global", "clove")
                              else None, timeout=self.timeout)
        seconds = time.perf_counter() - t0
        res = public._est.result_
        labels = np.asarray(res.labels, dtype=np.int64)  # Local: -1 for a removed client (_LocalFit)
        self.labels = labels
        models = public._numpy(res.models)
        final = self._score(models, spec.rule, labels)
        truth = facts["truth"]
        record = {
            "dataset": p["dataset"], "algo": algo, "model": facts["model"], "task": p["task"],
            "test_accuracy": final["test_accuracy"], "test_loss": final["test_loss"],
            **_clustering_scores(labels, truth, bool(self._log.silent())),
            "n_clusters": int(res.n_clusters), "rounds": int(p["rounds"]) if spec.restarts else int(res.rounds),
            "clients": m, "n_per_client": int(facts["n_per_client"]), "n_params": self._layout.n_params,
            # each client trains alone on its own SuperNode: nothing is batched across clients
            "seconds": seconds, "device": facts["device"], "batched": False, "unassigned": final["unassigned"],
            "resumed_from_round": None, "notes": list(facts["notes"]),
            "algo_params": dict(sorted(self.algo_params.items())),
        }
        record.update(train_identity_scores(self.evaluate, models, spec.rule, labels))
        if "scored_labels" in res.extra:  # SR-FCA's public-code variant: the accuracy its code reports
            record.update(self._code_scores(public._numpy(res.extra["scored_models"]), res.extra["scored_labels"]))
        if "status" in res.extra:
            record["status"] = str(res.extra["status"])
        record.update(chosen_threshold(p, public._est))
        best = int(res.extra.get("best_run", 0)) if spec.restarts else 0
        if self.history:
            record["history"] = self._monitor.history(best)
        lg = self._log
        record["flower"] = {"exchanges": lg.exchanges, "messages": lg.messages,
                            "seconds_in_exchanges": round(lg.seconds, 3), "lost": lg.lost,
                            "removed_clients": [int(c) for c in np.flatnonzero(labels < 0)] if spec.rule == "own"
                            else [], "answered": [list(e) for e in lg.answered],
                            "rounds_without_answers": lg.silent()}
        self.record = record
        for row in self._monitor.rows:  # the kept run's clustering and scores join the public round records
            if row["run"] == best:
                out = result.train_metrics_clientapp.setdefault(int(row["round"]) + 1, MetricRecord())
                out.update({k: float(row[k]) for k in ("ari", "misclustering", "test_accuracy", "test_loss")
                            if row.get(k) is not None})
        result.evaluate_metrics_clientapp[lg.exchanges] = MetricRecord(
            {k: float("nan") if v is None else float(v) for k, v in final.items() if k != "choice"})
        return result

    # ---------------------------------------------------------------- the exchanges
    def exchange(self, action: str, clients: np.ndarray, config: dict, *, common: np.ndarray | None = None,
                 rows: list[np.ndarray] | None = None, each: list[dict] | None = None, runs: int = 0) -> Answers:
        """Send ``action`` to ``clients`` (indices into the federation) and gather the answers in their order: the
        public strategy's exchange (:meth:`~nets.flower.clustered.ClusteredStrategy._engine_exchange`), with the
        round in every message and the exchange in :attr:`record`'s ``flower`` entry.

        ``common``: model rows every client gets; ``rows``: each client's own rows; ``each``: each client's own
        settings; ``runs``: the client's choice over that many runs.  The public strategy's backend
        (:class:`~nets.flower.backend.FederatedBackend`) makes every operation on client data through it.
        """
        public = self._public
        clients = np.asarray(clients, dtype=np.int64)
        # the round travels in every message beside the settings (the clients' injected faults name it)
        each = [{**({"round": config["round"]} if "round" in config else {}), **(each[a] if each else {})}
                for a in range(len(clients))]
        t0 = time.perf_counter()
        ans = public._engine_exchange(action, clients, config, common=common, rows=rows, each=each, runs=runs)
        self._log.waits.append(time.perf_counter() - t0)
        self._log.seconds += self._log.waits[-1]
        self._log.exchanges = public._exchanges
        self._log.messages += len(clients)
        for a in np.flatnonzero(ans.answered):  # each SuperNode holds the partition it described
            node = public._federation[clients[a]]
            if public.partitions.get(node) != clients[a]:
                public.partitions[node] = int(clients[a])
                public._lose(int(config.get("round", 0)) + 1, action, node, "answered for another partition")
                ans.answered[a] = False
                for table in (*ans.metrics.values(), *(() if ans.rows is None else (ans.rows,))):
                    table[a] = np.nan
        key = "test" if action == "evaluate" else int(config.get("round", 0))
        self._log.count(key, clients, ans.answered)
        log(INFO, "exchange %d (%s, %s): %d of %d clients answered in %.2f s", self._log.exchanges, action,
            "test" if action == "evaluate" else f"round {key}", int(ans.answered.sum()), len(clients),
            self._log.waits[-1])
        return ans

    def _lose(self, exchange: int, action: str, node: int, why: str) -> None:
        """The public strategy lost ``node`` (:meth:`_NetsRun._lose`): a ``flower.lost`` entry with its client,
        and a :class:`ClientFailed` warning when its ClientApp raised."""
        client = self._public._federation.index(node)
        failed = why.startswith(_FAILED)
        why = _reason(why[len(_FAILED):]) if failed else why
        self._log.lost.append([exchange, action, client, why])
        log(INFO, "exchange %d (%s): client %d lost: %s", exchange, action, client, why)
        if failed and not self._describing:  # one line per failing client (Flower's own log of it is quiet)
            warnings.warn(f"Flower client {client} failed in {action}: {why}", ClientFailed, stacklevel=2)

    def _describe(self, facts: dict) -> None:
        """Wait for one SuperNode per client; learn each node's partition and check its sample counts: the
        federation in partition order, client ``i`` the node of partition ``i`` (as ``nets run``'s clients)."""
        m = int(self.p["clients"])
        nodes = self._grid.wait_for_nodes(
            m, self.start_timeout, f"{self.algo}: waiting up to {self.start_timeout:g} s for {m} SuperNodes, one per "
            "client (%d connected)", lambda n: f"{n} SuperNodes connected within {self.start_timeout:g} s; the run "
            f"needs one per client ({m}): flwr run . --federation-config \"num-supernodes={m}\"")
        if len(nodes) != m:
            raise ValueError(f"the federation has {len(nodes)} SuperNodes but the run has {m} clients: run one "
                             f"SuperNode per client (--clients {len(nodes)}, or num-supernodes={m})")
        public = self._public
        public._grid, public._federation = self._grid, [int(n) for n in nodes]  # node order, until described
        public._timeout, self._describing, lost = self.start_timeout, True, len(self._log.lost)
        try:  # the losses of no model: each reply names its partition and training samples (docs/flower-contract.md)
            ans = public._engine_exchange("query.losses", np.arange(m), {})
        except ClientContractError as exc:
            raise ClientContractError(f"{type(self).__name__}: {str(exc).split(': ', 1)[1]}".replace(
                "torch_client_app does", "nets.flower.client.app does")) from None
        finally:
            public._timeout, self._describing = self.timeout, False
        self._log.exchanges = public._exchanges
        errors = [why for _, _, _, why in self._log.lost[lost:] if not why.startswith("no answer within")]
        del self._log.lost[lost:]  # describing is no round: what fails here is an error
        if errors:
            raise ValueError(f"a client could not set up its partition: {errors[0]}")
        if not ans.answered.all():
            raise TimeoutError(f"{m - int(ans.answered.sum())} of {m} SuperNodes did not describe their partition "
                               f"within {self.start_timeout:g} s")
        by_partition = {public.partitions.get(n, -1): a for a, n in enumerate(public._federation)}
        if sorted(by_partition) != list(range(m)):
            raise ValueError(f"the SuperNodes hold partitions {sorted(by_partition)}; the run needs 0..{m - 1}, one "
                             f"each")
        order = [by_partition[i] for i in range(m)]
        public._federation = [public._federation[a] for a in order]  # client i is the node of partition i
        self._nodes = np.array(public._federation, dtype=np.uint64)
        held = ans.table("n", 1)[order, 0].astype(np.int64)
        if not np.array_equal(held, facts["n_train"]):
            raise ValueError(f"the SuperNodes hold {held.tolist()} training samples where the experiment's "
                             f"partitions have {facts['n_train'].tolist()}")

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

    def _score(self, models: np.ndarray, rule: str, labels: np.ndarray) -> dict:
        """``nets.experiment``'s final scoring by the paper's rule, on the clients' test data."""
        m = len(labels)
        if len(models) == 0:  # e.g. SR-FCA kept no cluster: nothing to evaluate
            return {"test_accuracy": None, "test_loss": None, "unassigned": m}
        if rule == "own":  # Local: client i is scored with its own model; a removed client by the min-loss rule
            return self.evaluate(models, "cluster", labels)
        return self.evaluate(models, rule, labels if rule == "cluster" else None)

    def _code_scores(self, models: np.ndarray, labels) -> dict:
        """:func:`nets.evaluate.code_scores` on the clients: each clustered client's test accuracy on its
        cluster's model (an ``evaluate`` exchange), averaged with weight 1 over those that answered."""
        labels = np.asarray(labels, dtype=np.int64)
        clustered = np.flatnonzero(labels >= 0)
        if not len(clustered) or len(models) == 0:
            return {"test_accuracy_code": None, "clustered_clients_code": 0}
        M = models.astype(np.float64 if self.p["dtype"] == "float64" else np.float32, copy=False)
        ans = self.exchange("evaluate", clustered, {}, rows=[M[j:j + 1] for j in labels[clustered]])
        acc = ans.table("eval-acc", 1)[ans.answered, 0]
        return {"test_accuracy_code": float(acc.mean()) if len(acc) else None,
                "clustered_clients_code": int(len(clustered))}

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


class _Monitor(_Recorder):
    """The estimator's monitor in a Flower run: ``nets run``'s (per-round clustering metrics, its history rows),
    with the test scores of ``eval_every`` from an ``evaluate`` exchange, the labels of every call, no ARI for a
    round in which no client answered, and a log line per call."""

    def __init__(self, strategy: FlowerStrategy, truth, rule: str, n_runs: int):
        p = strategy.p
        super().__init__(strategy.evaluate, truth, rule, p["eval_every"], p["rounds"], n_runs, None, None)
        self.strategy = strategy
        self.labels: list[np.ndarray] = []

    def _clustering(self, t: int, labels) -> dict:
        scores = _clustering_scores(labels, self.truth, t in self.strategy._log.silent())
        return {"ari": scores["ari"], "misclustering": scores["misclustering"]}

    def __call__(self, t: int, models: np.ndarray, labels: np.ndarray) -> dict:
        if self.rule == "own":  # Local's one call is the public driver's round record; nets run's has no rounds
            return {}
        full = np.array(labels, dtype=np.int64)
        self.labels.append(full)
        run = len(self._pending)
        super().__call__(t, models, full)
        sizes = np.bincount(full[full >= 0], minlength=int(full.max(initial=-1)) + 1)
        ari = self.rows[-1]["ari"]
        log(INFO, "%s round %d%s: %d clusters, sizes %s, %d unassigned, ARI %s", self.strategy.algo, t,
            f" (run {run})" if self.n_runs > 1 else "", int((sizes > 0).sum()), [int(c) for c in sizes],
            int((full < 0).sum()), "n/a" if ari is None else f"{ari:.3f}")
        return {}


def _clustering_scores(labels, truth, silent: bool) -> dict:
    """:func:`nets.evaluate.clustering_scores`, but a clustering in which no client is assigned because none
    answered (``silent``) has no ARI.

    Unassigned clients (-1) count as singletons in the ARI; with every client unassigned against singleton clusters
    (as many clusters as clients) that would read 1.0 for a run in which no client answered.  A clustering that
    leaves every client out for the algorithm's own reasons (SR-FCA keeping no cluster) keeps ``nets run``'s ARI.
    """
    scores = clustering_scores(labels, truth)
    if silent and truth is not None and len(labels) and (np.asarray(labels) < 0).all():
        scores["ari"] = None
    return scores


class _NetsRun:
    """What a ``nets flower`` run changes in its public strategy (mixed in before the strategy's class by
    :meth:`FlowerStrategy._public_strategy`; the run, its messages and its records stay the strategy's): the
    federation is the one :meth:`FlowerStrategy._describe` put in partition order; the backend's exchanges go
    through :meth:`FlowerStrategy.exchange`, and it knows the clients' sample counts before the first reply, so
    it sends ``nets run``'s minibatch order with every ``train`` message (:meth:`FederatedBackend._training`);
    a lost client is the run's ``flower.lost`` entry; and a reply's numbers are not checked: ``nets run`` keeps a
    non-finite model or loss for the estimator to judge (a diverged run)."""

    _check_values = False
    _owner: FlowerStrategy

    def _connect(self, grid: Grid) -> list[int]:
        self.running = True  # the nodes are described and ordered; the describing exchange stays counted
        return self._federation

    def _known_clients(self, m: int) -> dict:
        owner = self._owner
        facts = owner._known  # built before the run (FlowerStrategy.start)
        return {"exchange": owner.exchange, "n_samples": facts["n_train"], "batch_size": owner.p["batch_size"],
                "seed": facts["seed"], "n_max": facts["n_per_client"]}

    def _backend(self, m: int):
        from ..experiment import _separate_local_starts

        backend = super()._backend(m)
        p = self._owner.p
        if p["local_init"] == "separate":  # nets run's rule: one start per client, from the seed's fourth stream
            _separate_local_starts(backend, np.random.default_rng(np.random.SeedSequence(p["seed"], spawn_key=(3,))))
        return backend

    def _lose(self, server_round: int, message_type: str, node: int, why: str) -> None:
        self._round_lost.add(node)
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
