"""cflab's clustered algorithms inside a Flower app, on Flower's simulation engine (``pip install -e ".[flower]"``).

* :mod:`nets.flower.strategies` -- Flower strategies (``flwr.serverapp.strategy.Strategy``) for IFCA, SR-FCA,
  CLoVE, FedAvg (``global``) and Local; each runs the algorithm of :mod:`synth.algorithms` unchanged on a
  :class:`~nets.flower.backend.FederatedBackend`, whose operations on client data are Flower message exchanges.
* :mod:`nets.flower.client` -- the ``ClientApp``: one cflab client (its partition of :mod:`nets.partition`,
  cflab's torch network) per SuperNode.
* :mod:`nets.flower.server` -- the ``ServerApp`` of ``flwr run`` and :func:`simulate`, which runs strategies
  under ``flwr.simulation.run_simulation`` (``python -m nets flower``).

The JSON record of a Flower run is that of ``nets run`` (same keys and, for the same settings, the same
clustering every round and the same accuracy up to float rounding), plus ``flower``: exchanges, messages, time
spent waiting for answers, lost clients.
"""

from .backend import ClientsLost, FederatedBackend
from .server import run, simulate
from .strategies import (
    STRATEGIES,
    CLoVEStrategy,
    FlowerStrategy,
    GlobalStrategy,
    IFCAStrategy,
    LocalStrategy,
    SRFCAStrategy,
    strategy_for,
)

__all__ = ["STRATEGIES", "CLoVEStrategy", "ClientsLost", "FederatedBackend", "FlowerStrategy", "GlobalStrategy",
           "IFCAStrategy", "LocalStrategy", "SRFCAStrategy", "run", "simulate", "strategy_for"]
