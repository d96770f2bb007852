"""cflab's clustered algorithms inside a Flower app, on Flower's simulation engine (``pip install -e ".[flower]"``).

For your own Flower app (any model, any data):

* :mod:`nets.flower.clustered` -- :class:`IFCA`, :class:`SRFCA`, :class:`CLoVE`: Flower strategies built from the
  algorithms' hyper-parameters, started with ``strategy.start(grid, initial_arrays=ArrayRecord(...))``, and the
  papers' baselines on the same driver, :class:`Global` (FedAvg) and :class:`Local`;
* :mod:`nets.flower.torch_client` -- ``torch_client_app(model_fn, data_fn)``, a ClientApp for them from any
  PyTorch ``nn.Module`` and DataLoaders (the client contract: ``docs/flower-contract.md``);
* :mod:`nets.flower.inline` -- a Grid that runs a ClientApp in-process (tests, timing).

For ``nets flower`` (cflab's data sets and networks, records identical to ``nets run``):

* :mod:`nets.flower.strategies` -- the strategies above built from ``nets run``'s parameters (IFCA, SR-FCA,
  CLoVE, FedAvg as ``global``, Local), with ``nets run``'s estimator, starts and minibatch order, and its record.
* :mod:`nets.flower.client` -- the ``ClientApp``: :func:`~nets.flower.torch_client.torch_client_app` over one
  cflab client (its partition of :mod:`nets.partition`, cflab's torch network) per SuperNode, answering the same
  client contract as a user's app.
* :mod:`nets.flower.server` -- the ``ServerApp`` of ``flwr run`` and :func:`simulate`, which runs strategies
  under ``flwr.simulation.run_simulation`` (``python -m nets flower``).

One driver runs both (:meth:`nets.flower.clustered.ClusteredStrategy.start`): the estimators of
:mod:`synth.algorithms` on a :class:`~nets.flower.backend.FederatedBackend` whose operations on client data are
Flower message exchanges, with one reply check (:func:`~nets.flower.clustered.reply_defect`), one stop-aware grid
(:class:`~nets.flower.session.StoppableGrid`) and one form of ``Result.arrays``
(:func:`~nets.flower.arrays.cluster_models`).

The JSON record of a Flower run is that of ``nets run`` (same keys and, for the same settings, the same
clustering every round and the same accuracy up to float rounding), plus ``flower``: exchanges, messages, time
spent waiting for answers, lost clients.
"""

import os

# Flower reports usage to its developers unless FLWR_TELEMETRY_ENABLED is "0" (read when flwr is first imported):
# off unless the user turns it on
os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

from .arrays import Layout, cluster_models, cluster_state_dict, replicate, split_clusters, stack_clusters  # noqa: E402
from .backend import FederatedBackend  # noqa: E402
from .clustered import (  # noqa: E402
    IFCA,
    SRFCA,
    ClientContractError,
    CLoVE,
    ClusteredResult,
    ClusteredStrategy,
    Global,
    Local,
    RoundFailed,
)
from .server import run, simulate  # noqa: E402
from .strategies import (  # noqa: E402
    STRATEGIES,
    CLoVEStrategy,
    FlowerStrategy,
    GlobalStrategy,
    IFCAStrategy,
    LocalStrategy,
    SRFCAStrategy,
    strategy_for,
)

__all__ = ["IFCA", "SRFCA", "STRATEGIES", "CLoVE", "CLoVEStrategy", "ClientContractError",
           "ClusteredResult", "ClusteredStrategy", "FederatedBackend", "FlowerStrategy", "Global", "GlobalStrategy",
           "IFCAStrategy", "Layout", "Local", "LocalStrategy", "RoundFailed", "SRFCAStrategy", "cluster_models",
           "cluster_state_dict", "replicate", "run", "simulate", "split_clusters", "stack_clusters", "strategy_for"]
