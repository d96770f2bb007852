"""The ServerApp: IFCA with k cluster models of the user's network, each from its own torch initialisation."""

from __future__ import annotations

from logging import INFO

import torch
from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.supercore import log

from nets.flower.arrays import split_clusters, stack_clusters
from nets.flower.clustered import IFCA

from .task import Net, setting

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run IFCA; log each SuperNode's cluster and the clusters' test accuracy."""
    k = int(setting(context, "num-clusters"))
    torch.manual_seed(int(setting(context, "seed")))
    initial = stack_clusters([ArrayRecord(Net().state_dict()) for _ in range(k)])  # k independent starts
    strategy = IFCA(n_clusters=k, local_steps=int(setting(context, "local-steps")), lr=float(setting(context, "lr")),
                    fraction_train=float(setting(context, "fraction-train")),
                    min_available_nodes=int(setting(context, "min-nodes")),
                    start_timeout=float(setting(context, "start-timeout")), seed=int(setting(context, "seed")))
    result = strategy.start(grid, initial, num_rounds=int(setting(context, "num-server-rounds")),
                            timeout=float(setting(context, "timeout")))
    clusters = {strategy.partitions.get(node, node): c for node, c in strategy.labels.items()}
    log(INFO, "IFCA clusters by partition: %s", dict(sorted(clusters.items())))
    last = result.evaluate_metrics_clientapp.get(max(result.evaluate_metrics_clientapp, default=0))
    if last is not None:
        log(INFO, "IFCA final test accuracy %.4f, loss %.4f", last["eval-acc"], last["eval-loss"])
    models = split_clusters(result.arrays)  # result.arrays["cluster-0"], ...: one state_dict record per cluster
    context.state["final-models"] = stack_clusters(models)  # e.g. torch.save(cluster_state_dict(result, j), ...)
    log(INFO, "IFCA done: %d cluster models of %d arrays each", len(models), len(models[0]) if models else 0)
