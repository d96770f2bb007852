#!/usr/bin/env python
"""Per-round cost of IFCA on Flower against ``nets run``, same problem: ``nets flower``'s strategy (before and after
the poll change) and the public IFCA strategy with the PyTorch ClientApp helper, on Flower's engine and in-process.

IFCA on ``digits-rotated`` (k = 4, model averaging, tau = 10 local steps, full participation, the MLP, step size
0.1), 20 or 100 clients, the same seed and data on every path.  Paths (``--paths``):

* ``nets``: ``nets run`` (one process, all clients batched, one torch thread) -- the reference;
* ``cli-poll-0.1``: ``nets flower``'s strategy polling for answers every 0.1 s (the code before this change);
* ``cli``: ``nets flower``'s strategy with the adaptive poll (5 ms after an answer, doubling to 50 ms);
* ``clustered``: :class:`nets.flower.clustered.IFCA` + :func:`nets.flower.torch_client.torch_client_app` (an
  ``nn.Module``, full-batch DataLoaders) under ``run_simulation``, one message per client and round (the client
  trains its lowest-loss model, ``client_choice=True``);
* ``clustered-two``: the same with ``client_choice=False``: two exchanges a round (the losses, then the chosen
  model), as before the client's choice;
* ``inline``, ``inline-two``: the same strategy and ClientApp on :class:`nets.flower.inline.InlineGrid` (no
  Flower engine, no Ray): what cflab's strategy and client helper cost by themselves;
* ``floor``: Flower's engine alone: the same exchange of one message per client and round (the k models, about
  230 KB, in; one model out) to a ClientApp that answers at once without computing -- what no strategy or client
  code can remove;
* ``inline-no-keep``: ``inline`` with the helper's ``keep_batches=False`` (every pass collated by the
  DataLoader again, as before the helper kept batches).

*fit* is the time of the rounds: for ``nets flower`` its record's ``seconds`` (after the SuperNodes described their
partitions), for ``clustered``/``inline`` rounds 2..R+1 of R+1 (round 1 warms the actors and builds each client's
loaders, as ``nets flower``'s describe exchange does).  *after start-up* adds the final test to the fit; *wall* is
the whole call (Ray's and the actors' start included).  The Flower paths compute on one simulation actor (one
ClientApp at a time), the server in the driver; ``nets run`` on one torch thread.

    python bench/flower_overhead.py                        # 20 clients, every path, JSON to stdout
    python bench/flower_overhead.py --configs 20-n100,100-n12 --json bench/results/flower_overhead.json
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import torch  # noqa: E402

from bench._machine import cpu_name  # noqa: E402
from nets.experiment import run_experiment  # noqa: E402

# (label, clients, samples per client): the command of the README, and the same problem at 20 and 100 clients
# (digits-rotated's pools hold 12 distinct images per client at 100 clients)
CONFIGS = {"20-n100": (20, 100), "20-n12": (20, 12), "100-n12": (100, 12)}
PATHS = ("nets", "cli-poll-0.1", "cli", "floor", "clustered-two", "clustered", "inline-two", "inline",
         "inline-no-keep")
K, TAU, LR = 4, 10, 0.1


def _params(clients: int, n: int, rounds: int) -> dict:
    return {"algo": "ifca", "dataset": "digits-rotated", "clients": clients, "n_per_client": n, "rounds": rounds,
            "seed": 0, "n_clusters": K, "local_steps": TAU, "step_size": LR, "averaging": "model"}


def measure_nets(params: dict) -> dict:
    run_experiment({**params, "rounds": 1})  # warm-up: the first fit in a process pays one-time costs
    t0 = time.perf_counter()
    rec = run_experiment(params)
    wall = time.perf_counter() - t0
    return {"fit_s": rec["seconds"], "after_startup_s": wall, "wall_s": wall, "test_accuracy": rec["test_accuracy"]}


def measure_cli(params: dict, actors: int, polls: dict[str, tuple[float, float]]) -> dict[str, dict]:
    """``nets flower``'s strategy once per poll setting, one after another in one simulation (one Ray start)."""
    from nets.flower import simulate, strategy_for

    strategies = {}
    for label, pull in polls.items():
        s = strategy_for(params)
        s.pull_seconds = pull
        strategies[label] = s
    t0 = time.perf_counter()
    simulate(list(strategies.values()), actors=actors)
    wall = time.perf_counter() - t0
    out = {}
    for label, s in strategies.items():
        rec, lg = s.record, s._log
        fit = rec["seconds"]
        out[label] = {"fit_s": fit, "after_startup_s": fit + lg.waits[-1], "wall_s": wall,
                      "messages_per_round": (lg.messages - 2 * params["clients"]) / params["rounds"],
                      "waiting_s": lg.seconds, "test_accuracy": rec["test_accuracy"]}
    out[next(iter(polls))]["wall_note"] = "one simulation for both poll settings (wall counts both)"
    return out


_FEDERATIONS: dict[str, tuple] = {}


def _federation(params: dict) -> tuple:
    """``nets run``'s federation of ``params`` (built once per process): the partitions' arrays and sizes."""
    import numpy as np

    import nets.experiment as experiment

    key = json.dumps(params, sort_keys=True)
    if key not in _FEDERATIONS:
        p = experiment.validate_params(params)
        data_ss, _, _ = np.random.SeedSequence(p["seed"]).spawn(3)
        fed, _ = experiment._federation_that_fits(p, data_ss, explicit_n=True)
        _FEDERATIONS[key] = (fed.X, fed.y, fed.n_samples, fed.X_test, fed.y_test, fed.n_test,
                             int(np.prod(fed.X.shape[2:])), int(fed.n_classes))
    return _FEDERATIONS[key]


def _user_app(params: dict, keep_batches: bool = True):
    """A PyTorch ClientApp over ``nets run``'s partitions (the MLP as a plain nn.Sequential, full-batch loaders).

    Each process builds the federation from ``params`` once and each node takes its partition, as a Flower app
    loads its partition where it runs: Flower's ``run_simulation`` pickles the ClientApp into its actor with every
    message, and an app whose closure held the federation's arrays sent 1.07 MB with each (23 ms to pickle)."""
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from nets.flower.torch_client import torch_client_app

    d, n_classes = _federation(params)[6:]

    def model():
        return nn.Sequential(nn.Flatten(), nn.Linear(d, 200), nn.ReLU(), nn.Linear(200, n_classes))

    def data(context):
        torch.set_num_threads(1)
        X, y, n_train, Xt, yt, n_test, _, _ = _federation(params)
        i = int(context.node_config["partition-id"])
        n, nt = int(n_train[i]), int(n_test[i])
        train = TensorDataset(torch.as_tensor(X[i][:n]), torch.as_tensor(y[i][:n]))
        test = TensorDataset(torch.as_tensor(Xt[i][:nt]), torch.as_tensor(yt[i][:nt]))
        return DataLoader(train, batch_size=n), DataLoader(test, batch_size=max(nt, 1))

    return model, torch_client_app(model, data, keep_batches=keep_batches)


def _timed_ifca(rounds: int, client_choice: bool = True):
    from nets.flower.clustered import IFCA

    class Timed(IFCA):
        """IFCA that notes when each round ends: Flower's ``configure_evaluate`` hook, which the strategy calls once
        after every round's aggregation (the last one after the estimator's final clustering pass), before any
        evaluation exchange."""

        def __init__(self, **kw):
            super().__init__(**kw)
            self.stamps: list[float] = []

        def configure_evaluate(self, server_round, arrays, config, grid):
            self.stamps.append(time.perf_counter())
            return super().configure_evaluate(server_round, arrays, config, grid)

    return Timed(n_clusters=K, local_steps=TAU, lr=LR, evaluate_every=rounds + 1, seed=0, client_choice=client_choice)


def _clustered_row(strategy, result, t_end: float, rounds: int) -> dict:
    fit = strategy.stamps[-1] - strategy.stamps[0]
    last = result.evaluate_metrics_clientapp.get(rounds + 1)
    return {"fit_s": fit, "after_startup_s": t_end - strategy.stamps[0],
            "test_accuracy": None if last is None else last["eval-acc"]}


def measure_clustered(params: dict, actors: int, inline: bool, keep_batches: bool = True,
                      client_choice: bool = True) -> dict:
    from flwr.app import ArrayRecord, Context
    from flwr.serverapp import Grid, ServerApp

    from nets.flower.arrays import stack_clusters
    from nets.flower.inline import InlineGrid
    from nets.flower.runner import run_app

    rounds, m = params["rounds"], params["clients"]
    model, client_app = _user_app(params, keep_batches)
    torch.manual_seed(0)
    initial = stack_clusters([ArrayRecord(model().state_dict()) for _ in range(K)])
    strategy = _timed_ifca(rounds, client_choice)
    strategy.min_available_nodes = m
    got: dict = {}
    t0 = time.perf_counter()
    if inline:
        got["result"] = strategy.start(InlineGrid(client_app, m), initial, num_rounds=rounds + 1)
        got["end"] = time.perf_counter()
    else:
        server = ServerApp()

        @server.main()
        def main(grid: Grid, context: Context) -> None:
            got["result"] = strategy.start(grid, initial, num_rounds=rounds + 1)
            got["end"] = time.perf_counter()

        run_app(server, client_app, m, actors=actors)
    row = _clustered_row(strategy, got["result"], got["end"], rounds)
    row["wall_s"] = time.perf_counter() - t0
    # the client's choice: one train message per client; else the losses query and then the train message
    row["messages_per_round"] = m if client_choice else 2 * m
    return row


def measure_floor(params: dict, actors: int) -> dict:
    """Flower's engine without computation: ``rounds + 1`` exchanges of one message per client carrying IFCA's k
    models (the first exchange warms the actors), answered at once with one model."""
    import numpy as np
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import Grid, ServerApp

    from nets.flower.arrays import stack_clusters
    from nets.flower.runner import run_app
    from nets.flower.session import pull_replies

    rounds, m = params["rounds"], params["clients"]
    model, _ = _user_app(params)
    state = {k: v.numpy() for k, v in model().state_dict().items()}
    models = stack_clusters([ArrayRecord({k: Array(v) for k, v in state.items()}) for _ in range(K)])
    echo = ClientApp()

    @echo.train()
    def answer(message: Message, context: Context) -> Message:
        return Message(RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in state.items()}),
                                   "metrics": MetricRecord({"num-examples": 1})}), reply_to=message)

    stamps: list[float] = []
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        while len(list(grid.get_node_ids())) < m:
            time.sleep(0.05)
        for r in range(rounds + 1):
            messages = [Message(RecordDict({"arrays": models, "config": ConfigRecord({"server-round": r + 1})}),
                                dst_node_id=node, message_type="train") for node in sorted(grid.get_node_ids())]
            if len(pull_replies(grid, messages, 600.0, lambda: None)) != m:
                raise RuntimeError("the engine lost an answer")
            stamps.append(time.perf_counter())

    t0 = time.perf_counter()
    run_app(server, echo, m, actors=actors)
    fit = stamps[-1] - stamps[0]
    return {"fit_s": fit, "after_startup_s": fit, "wall_s": time.perf_counter() - t0, "test_accuracy": None,
            "messages_per_round": m, "median_exchange_s": float(np.median(np.diff(stamps)))}


def measure(clients: int, n: int, rounds: int, actors: int, paths: list[str]) -> dict:
    params = _params(clients, n, rounds)
    rows: dict[str, dict] = {}
    if "nets" in paths:
        rows["nets"] = measure_nets(params)
    polls = {label: pull for label, pull in (("cli-poll-0.1", (0.1, 0.1)), ("cli", None)) if label in paths}
    if polls:
        from nets.flower.session import PULL_SECONDS, PULL_SECONDS_MAX

        rows.update(measure_cli(params, actors, {k: v or (PULL_SECONDS, PULL_SECONDS_MAX) for k, v in polls.items()}))
    if "floor" in paths:
        rows["floor"] = measure_floor(params, actors)
    for label, inline, choice in (("clustered-two", False, False), ("clustered", False, True),
                                  ("inline-two", True, False), ("inline", True, True)):
        if label in paths:
            rows[label] = measure_clustered(params, actors, inline=inline, client_choice=choice)
    if "inline-no-keep" in paths:
        rows["inline-no-keep"] = measure_clustered(params, actors, inline=True, keep_batches=False)
    ref = rows.get("nets")
    for label in ("cli-poll-0.1", "cli"):  # nets flower's strategies make nets run's decisions: the same accuracy
        if ref is not None and label in rows and abs(rows[label]["test_accuracy"] - ref["test_accuracy"]) > 1e-4:
            raise RuntimeError(f"{label} and nets run disagree: accuracy {rows[label]['test_accuracy']} vs "
                               f"{ref['test_accuracy']}")
    for label, row in rows.items():
        row["fit_round_s"] = row["fit_s"] / rounds
        if ref is not None and label != "nets":
            row["fit_ratio"] = row["fit_s"] / ref["fit_s"]
            row["after_startup_ratio"] = row["after_startup_s"] / ref["wall_s"]
    return {"clients": clients, "n_per_client": n, "rounds": rounds, "actors": actors, "paths": rows}


def _main(argv: list[str]) -> int:
    from bench._machine import count
    from synth.cli import CleanParser

    parser = CleanParser(prog="flower_overhead.py", allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="20-n100", help=f"comma list of {', '.join(CONFIGS)}")
    parser.add_argument("--paths", default=",".join(PATHS), help=f"comma list of {', '.join(PATHS)}")
    parser.add_argument("--rounds", type=count("--rounds"), default=10)
    parser.add_argument("--actors", type=count("--actors"), default=1)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    import logging

    logging.getLogger("flwr").setLevel(logging.WARNING)  # the per-round lines of the clustered paths
    for flag, value, known in (("--configs", args.configs, CONFIGS), ("--paths", args.paths, PATHS)):
        unknown = [c for c in value.split(",") if c not in known]
        if unknown:
            raise ValueError(f"{flag}: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(known)}")
    paths = args.paths.split(",")
    rows = []
    for label in args.configs.split(","):
        clients, n = CONFIGS[label]
        load = os.getloadavg()[0]
        row = measure(clients, n, args.rounds, args.actors, paths)
        row.update(config=label, load_before=load, load_after=os.getloadavg()[0])
        rows.append(row)
        for path, r in row["paths"].items():
            ratio = "" if path == "nets" else (f" (fit {r['fit_ratio']:.1f}x, after start-up "
                                               f"{r['after_startup_ratio']:.1f}x nets run's wall)")
            print(f"{label} {path}: fit {r['fit_round_s']:.3f} s/round, after start-up {r['after_startup_s']:.1f} s, "
                  f"wall {r['wall_s']:.1f} s{ratio}", flush=True)
        print(f"{label}: load {load:.1f}->{row['load_after']:.1f}", flush=True)
    out = {"machine": {"cpu": cpu_name(), "cpus": os.cpu_count(), "python": platform.python_version(),
                       "torch": torch.__version__, "flwr": __import__("flwr").__version__,
                       "ray": __import__("ray").__version__},
           "rows": rows}
    text = json.dumps(out, indent=1)
    if args.json:
        Path(args.json).write_text(text + "\n")
    else:
        print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a wrong argument, an unusable file; ``--debug`` shows the
    traceback), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("flower_overhead.py", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
