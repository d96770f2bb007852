"""Run a Flower app directory on Flower's simulation engine in this process, with cflab's Ray session.

::

    python -m nets.flower.runner examples/flower-ifca --num-supernodes 8 [--run-config "num-server-rounds=5"]

does what ``flwr run . --federation-config "num-supernodes=8"`` does for a local simulation -- the app's
``[tool.flwr.app.components]`` and ``[tool.flwr.app.config]`` from its ``pyproject.toml``, ``--run-config``
overrides in Flower's syntax -- without a background SuperLink: the run starts its own Ray instance and ends every
process of it when it finishes or is interrupted (:mod:`nets.flower.session`).  Ctrl-C stops the clustered
strategies running in the ServerApp (:func:`nets.flower.clustered.stop_running`) and exits with status 130
(SIGTERM: 143) within seconds, leaving no Ray process.  Exit status 2 with one line for a bad argument or app
(a component module that does not exist or fails to import, more SuperNodes than the memory holds).
:func:`run_app` is the same for apps built in Python.
"""

from __future__ import annotations

import importlib
import logging
import sys
import time
import tomllib
import warnings
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from synth.validation import check_int

from .clustered import _RUNNING, stop_running
from .session import STOP_SECONDS, check_actors, ray_config, ray_session

__all__ = ["SUPERNODE_BYTES", "check_supernodes", "load_app", "main", "run_app"]


class _ClientWithConfig(ClientApp):
    """A ClientApp whose nodes see ``run_config`` (Flower's programmatic simulation passes none)."""

    def __init__(self, app: ClientApp, run_config: dict[str, Any]):
        super().__init__()
        self._app, self._run_config = app, dict(run_config)

    def __call__(self, message, context: Context):
        # Flower refuses a ClientApp that changes its context's run config: the app gets a context of its own,
        # sharing the node's state
        own = Context(run_id=context.run_id, node_id=context.node_id, node_config=dict(context.node_config),
                      state=context.state, run_config={**self._run_config, **dict(context.run_config)})
        return self._app(message, own)


def run_app(server_app: ServerApp, client_app: ClientApp, num_supernodes: int, *,
            run_config: dict[str, Any] | None = None, actors: int = 1, verbose: bool = False,
            quiet: bool = False) -> Context:
    """Simulate ``num_supernodes`` SuperNodes running ``client_app`` and the ``server_app`` that drives them.

    ``run_config`` is the run config both apps' contexts hold.  ``actors``: ClientApps computing at a time (one
    core each, at most the usable cores).  ``verbose``: Flower's debug logs; ``quiet``: none of Flower's logs,
    errors included (``nets flower``, whose strategies report lost clients themselves).  Returns the ServerApp's
    context.  Raises :class:`~nets.flower.session.Interrupted` on SIGINT/SIGTERM after stopping the run and Ray.
    """
    from flwr.simulation import run_simulation

    num_supernodes = check_supernodes(num_supernodes)
    actors = check_actors(actors)
    config = dict(run_config or {})
    seen: dict[str, Context] = {}
    server = ServerApp()

    @server.main()
    def _main(grid: Grid, context: Context) -> None:
        ctx = Context(run_id=context.run_id, node_id=context.node_id, node_config=dict(context.node_config),
                      state=context.state, run_config={**config, **dict(context.run_config)})
        seen["context"] = ctx
        server_app(grid, ctx)

    def stop() -> None:  # the ServerApp thread leaves its exchange, so the process can end
        stop_running()
        deadline = time.monotonic() + STOP_SECONDS
        while len(_RUNNING) and time.monotonic() < deadline:
            time.sleep(0.05)

    flwr_logger = logging.getLogger("flwr")
    level = flwr_logger.level
    if verbose or quiet:
        flwr_logger.setLevel(logging.DEBUG if verbose else logging.CRITICAL + 1)
    backend = ray_config(actors)
    client = _ClientWithConfig(client_app, config) if config else client_app
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Tip: In future versions of Ray", category=FutureWarning)
            with ray_session(backend["init_args"], on_stop=stop):
                run_simulation(server_app=server, client_app=client,
                               num_supernodes=num_supernodes, backend_config=backend, verbose_logging=verbose)
    finally:
        flwr_logger.setLevel(level)
    if "context" not in seen:
        raise RuntimeError("the simulation ended before its ServerApp started")
    return seen["context"]


SUPERNODE_BYTES = 32 * 2**10  # Flower's state of one simulated SuperNode (its node record, Context, partition)


def check_supernodes(num_supernodes: int, what: str = "num_supernodes") -> int:
    """``num_supernodes`` as an int >= 1 whose SuperNodes' state (about :data:`SUPERNODE_BYTES` each) fits in the
    memory budget (:func:`synth.cost.memory_budget`); ResourceError, a ValueError, before anything is allocated."""
    from synth.cost import check_memory, format_bytes

    num_supernodes = check_int(what, num_supernodes, low=1)
    check_memory(float(num_supernodes) * SUPERNODE_BYTES, f"a simulation of {num_supernodes} SuperNodes (about "
                 f"{format_bytes(SUPERNODE_BYTES)} of Flower's state each)", hint=f"fewer {what.replace('_', '-')}")
    return num_supernodes


def load_app(app_dir: str | Path) -> tuple[ServerApp, ClientApp, dict[str, Any]]:
    """The ServerApp, ClientApp and run config of a Flower app directory (its ``pyproject.toml``)."""
    root = Path(app_dir).resolve()
    toml = root / "pyproject.toml"
    if not toml.is_file():
        raise ValueError(f"app_dir must be a Flower app directory with a pyproject.toml; {str(root)!r} has none")
    with toml.open("rb") as fh:
        flwr = tomllib.load(fh).get("tool", {}).get("flwr", {}).get("app", {})
    components = flwr.get("components", {})
    missing = [k for k in ("serverapp", "clientapp") if k not in components]
    if missing:
        raise ValueError(f"{toml} has no [tool.flwr.app.components] {missing[0]} (module:attribute)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))

    def load(ref: str, kind: type):
        module, _, attr = ref.partition(":")
        try:
            found = importlib.import_module(module)
        except ImportError as exc:  # the app's module, or a module it imports, is missing
            missing = getattr(exc, "name", None)
            what = (f"module {module!r} does not exist in {str(root)!r}" if missing and module.startswith(missing)
                    else f"importing module {module!r} failed: {exc}")
            raise ValueError(f"{ref!r} in {toml}: {what}") from None
        obj = getattr(found, attr, None)
        if not isinstance(obj, kind):
            raise ValueError(f"{ref!r} in {toml} is not a {kind.__name__}")
        return obj

    return (load(components["serverapp"], ServerApp), load(components["clientapp"], ClientApp),
            dict(flwr.get("config", {})))


def _main(argv: list[str]) -> int:
    from flwr.common.config import parse_config_args

    from synth.cli import CleanParser

    parser = CleanParser(prog="python -m nets.flower.runner", allow_abbrev=False,
                         description=__doc__.split("\n\n")[0])
    parser.add_argument("app_dir", help="a Flower app directory (its pyproject.toml names the apps)")
    parser.add_argument("--num-supernodes", type=int, required=True, help="SuperNodes (clients) to simulate")
    parser.add_argument("--run-config", default=None, help='overrides of the run config, e.g. "lr=0.05 seed=1"')
    parser.add_argument("--actors", type=int, default=1, help="ClientApps computing at a time (<= cores)")
    parser.add_argument("--verbose", action="store_true", help="Flower's and Ray's debug logs")
    args = parser.parse_args(argv)
    check_supernodes(args.num_supernodes, "--num-supernodes")
    server_app, client_app, config = load_app(args.app_dir)
    if args.run_config:
        try:
            overrides = parse_config_args([args.run_config])
        except Exception as exc:  # Flower's parser raises on a malformed pair
            raise ValueError(f"--run-config: {exc}") from None
        unknown = [k for k in overrides if k not in config]
        if unknown:
            raise ValueError(f"--run-config: unknown key {unknown[0]!r}; the app's run config has "
                             f"{', '.join(config)}")
        config.update(overrides)
    run_app(server_app, client_app, args.num_supernodes, run_config=config, actors=args.actors,
            verbose=args.verbose)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit status 0; 2 with one line (a bad argument or app); 130 on Ctrl-C, 143 on SIGTERM."""
    from synth.errors import run_main

    from .session import Interrupted

    def body(args: list[str]) -> int:
        try:
            return _main(args)
        except Interrupted as exc:
            print(f"python -m nets.flower.runner: interrupted ({exc}); the run and its Ray processes are stopped",
                  file=sys.stderr, flush=True)
            return 128 + exc.signum

    return run_main("python -m nets.flower.runner", body, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
