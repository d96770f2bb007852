"""The Flower ``ServerApp`` of cflab, and runs on Flower's simulation engine.

* :func:`simulate` runs one or more strategies (:mod:`nets.flower.strategies`) one after another on one
  simulated federation -- one SuperNode per client, each holding its partition -- with
  :func:`nets.flower.runner.run_app` (Flower's ``run_simulation``, whose engine runs the ClientApps on Ray actors).
  ``python -m nets flower`` calls it with one strategy.
* :data:`app` is the ``ServerApp`` that ``flwr run`` starts (``pyproject.toml``'s ``[tool.flwr.app]``); the
  experiment comes from the run config (``[tool.flwr.app.config]`` or ``flwr run --run-config``).

Before Ray starts, :func:`simulate` refuses what ``nets run`` refuses (each strategy's
:meth:`~nets.flower.strategies.FlowerStrategy.preflight`: the same checks and messages) and a simulation whose
actors need more memory than the machine allows (:func:`check_simulation_memory`).  The engine is configured for
a small machine: Ray starts with ``actors`` CPUs (at most the cores this process may use) and each ClientApp takes
one, so ``actors`` clients compute at a time.  A new local Ray instance is started for the run (never an existing
cluster's) and stopped with it, interrupted or not, leaving no process behind (:mod:`nets.flower.session`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from .session import OBJECT_STORE_BYTES, check_actors
from .strategies import FlowerStrategy, strategy_for

__all__ = ["RUN_CONFIG", "app", "check_simulation_memory", "params_from_run_config", "run", "simulate"]

# the keys of [tool.flwr.app.config]; "params" and "algo-params" hold further nets run settings as JSON objects
RUN_CONFIG = ("algo", "dataset", "clients", "rounds", "seed", "params", "algo-params", "timeout", "start-timeout",
              "record")
# resident memory measured on the 2-core EPYC (Ray 2.55, Flower 1.42, CPU torch) during a run of the embedded digits:
# one ClientAppActor 640 MiB (Python, torch, Ray's worker, before its copy of the data); Ray's own processes (GCS
# server, raylet, monitor, dashboard, log monitor, two agents) about 600 MiB; plus the object store (session.py)
ACTOR_BYTES = 640 * 2**20
RAY_BYTES = 600 * 2**20


def check_simulation_memory(actors: int, data_bytes: Sequence[int]) -> float:
    """Refuse (ResourceError, a ValueError) a simulation whose processes need more memory than the budget.

    Each actor is a process of :data:`ACTOR_BYTES` that builds the federations of the experiments it serves (up to
    two, :mod:`nets.flower.client`), counted at three times their arrays (the data set's pool is loaded before it
    is split); Ray's own processes and object store come once.  ``data_bytes``: each experiment's arrays.
    """
    from synth.cost import check_memory, format_bytes

    largest = sorted((int(b) for b in data_bytes), reverse=True)[:2]
    actor = ACTOR_BYTES + 3.0 * sum(largest)
    need = RAY_BYTES + OBJECT_STORE_BYTES + actors * actor
    check_memory(need, f"a Flower simulation of {actors} actor(s) (each about {format_bytes(actor)}: a ClientApp "
                 f"process and its copy of the federation) and Ray's own processes",
                 hint="lower --actors (clients computing at a time), --clients or --n-per-client")
    return need


def simulate(strategies: Sequence[FlowerStrategy], *, actors: int = 1, verbose: bool = False) -> list[dict]:
    """Run ``strategies`` one after another on one simulated federation; returns their JSON records.

    Every strategy must have the same number of clients (one SuperNode each).  Before Ray starts, each strategy
    is checked as ``nets run`` checks its experiment, and the actors' memory against the budget.  ``verbose``
    keeps Flower's and Ray's logs (and a line per exchange); otherwise nothing reaches stderr but one line per
    failing client (a :class:`~nets.flower.strategies.ClientFailed` warning).  SIGINT or SIGTERM ends the run
    with :class:`~nets.flower.session.Interrupted`, after Ray and its processes are stopped.
    """
    from .client import app as client_app
    from .runner import run_app

    clients = {int(s.p["clients"]) for s in strategies}
    if len(clients) != 1:
        raise ValueError(f"strategies simulated together need the same number of clients, got {sorted(clients)}")
    actors = check_actors(actors)
    check_simulation_memory(actors, [s.preflight() for s in strategies])
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        for strategy in strategies:  # one after another, on the same SuperNodes
            strategy.start(grid)

    # without --verbose Flower's logs stay quiet, errors included: a failing client is one warning line (the
    # strategy's), an error of the run one exception
    run_app(server, client_app, clients.pop(), actors=actors, verbose=verbose, quiet=True)
    missing = [type(s).__name__ for s in strategies if s.record is None]
    if missing:
        raise RuntimeError(f"the simulation ended before {', '.join(missing)} finished")
    return [s.record for s in strategies]


def run(params: dict[str, Any], algo_params: dict[str, Any] | None = None, *, history: bool = False,
        timeout: float = 600.0, actors: int = 1, verbose: bool = False, faults: Sequence[dict] = ()) -> dict:
    """One experiment (the ``nets run`` parameters) as a Flower simulation; returns its JSON record."""
    strategy = strategy_for(params, algo_params=algo_params, history=history, timeout=timeout, faults=faults)
    return simulate([strategy], actors=actors, verbose=verbose)[0]


def params_from_run_config(config: dict[str, Any]) -> tuple[dict, dict, dict]:
    """``(params, algo_params, options)`` of a run config (``[tool.flwr.app.config]``); unknown keys are errors."""
    from synth.validation import did_you_mean

    unknown = [k for k in config if k not in RUN_CONFIG]
    if unknown:
        raise ValueError(f"unknown run-config key {unknown[0]!r}{did_you_mean(unknown[0], RUN_CONFIG)}; known: "
                         f"{', '.join(RUN_CONFIG)}")

    def obj(key: str) -> dict:
        text = str(config.get(key) or "{}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"run-config {key} must be a JSON object, got {text!r} ({exc.msg})") from None
        if not isinstance(value, dict):
            raise ValueError(f"run-config {key} must be a JSON object, got {text!r}")
        return value

    params = {k.replace("-", "_"): v for k, v in obj("params").items()}
    for key in ("algo", "dataset", "clients", "rounds", "seed"):
        if key in config:
            params[key] = config[key]
    options = {"timeout": float(config.get("timeout", 600.0)),
               "start_timeout": float(config.get("start-timeout", 600.0))}
    return params, obj("algo-params"), options


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """``flwr run``: the experiment of the run config; prints its JSON record (and writes it to ``record``)."""
    from synth.cli import json_safe

    config = dict(context.run_config)
    params, algo_params, options = params_from_run_config(config)
    strategy = strategy_for(params, algo_params=algo_params, **options)
    strategy.preflight()  # nets run's refusals, before any message
    strategy.start(grid)
    text = json.dumps(json_safe(strategy.record), allow_nan=False)
    print(text, flush=True)
    if config.get("record"):
        with open(str(config["record"]), "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
