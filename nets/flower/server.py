"""The Flower ``ServerApp`` of cflab, and runs on Flower's simulation engine.

* :func:`simulate` runs one or more strategies (:mod:`nets.flower.strategies`) one after another on one
  simulated federation -- one SuperNode per client, each holding its partition -- under
  ``flwr.simulation.run_simulation``, whose engine runs the ClientApps on Ray actors.  ``python -m nets flower``
  calls it with one strategy.
* :data:`app` is the ``ServerApp`` that ``flwr run`` starts (``pyproject.toml``'s ``[tool.flwr.app]``); the
  experiment comes from the run config (``[tool.flwr.app.config]`` or ``flwr run --run-config``).

The engine is configured for a small machine: Ray starts with ``actors`` CPUs and each ClientApp takes one, so
``actors`` clients compute at a time; a new local Ray instance is started for the process (never an existing
cluster's) and stopped by Ray when the process ends.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Sequence
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from .strategies import FlowerStrategy, strategy_for

__all__ = ["RUN_CONFIG", "app", "params_from_run_config", "ray_config", "run", "simulate"]

# the keys of [tool.flwr.app.config]; "params" and "algo-params" hold further nets run settings as JSON objects
RUN_CONFIG = ("algo", "dataset", "clients", "rounds", "seed", "params", "algo-params", "timeout", "record")


def ray_config(actors: int = 1) -> dict[str, Any]:
    """``run_simulation``'s ``backend_config``: a new local Ray instance of ``actors`` CPUs, one per ClientApp."""
    return {"init_args": {"address": "local", "num_cpus": int(actors), "include_dashboard": False,
                          "object_store_memory": 200 * 2**20, "logging_level": "error", "log_to_driver": False},
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0}}


def simulate(strategies: Sequence[FlowerStrategy], *, actors: int = 1, verbose: bool = False) -> list[dict]:
    """Run ``strategies`` one after another on one simulated federation; returns their JSON records.

    Every strategy must have the same number of clients (one SuperNode each).  ``verbose`` keeps Flower's
    and Ray's logs; otherwise only errors reach stderr.
    """
    from flwr.simulation import run_simulation

    from .client import app as client_app

    clients = {int(s.p["clients"]) for s in strategies}
    if len(clients) != 1:
        raise ValueError(f"strategies simulated together need the same number of clients, got {sorted(clients)}")
    server = ServerApp()

    @server.main()
    def main(grid: Grid, context: Context) -> None:
        for strategy in strategies:  # one after another, on the same SuperNodes
            strategy.start(grid)

    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    if not verbose:
        flwr_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            # Ray's notice about a future default (accelerator variables), raised at every start
            warnings.filterwarnings("ignore", message="Tip: In future versions of Ray", category=FutureWarning)
            run_simulation(server_app=server, client_app=client_app, num_supernodes=clients.pop(),
                           backend_config=ray_config(actors), verbose_logging=verbose)
    finally:
        flwr_logger.setLevel(level)
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
    options = {"timeout": float(config.get("timeout", 600.0))}
    return params, obj("algo-params"), options


app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """``flwr run``: the experiment of the run config; prints its JSON record (and writes it to ``record``)."""
    from synth.cli import json_safe

    config = dict(context.run_config)
    params, algo_params, options = params_from_run_config(config)
    strategy = strategy_for(params, algo_params=algo_params, **options)
    strategy.start(grid)
    text = json.dumps(json_safe(strategy.record), allow_nan=False)
    print(text, flush=True)
    if config.get("record"):
        with open(str(config["record"]), "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
