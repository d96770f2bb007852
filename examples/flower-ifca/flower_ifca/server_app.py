"""The ServerApp: IFCA with k cluster models of the user's network, started from its torch initialisation."""

from __future__ import annotations

from logging import INFO

import torch
from flwr.app import ArrayRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.supercore import log

from nets.flower.arrays import cluster_state_dict, split_clusters, stack_clusters
from nets.flower.clustered import IFCA

from .task import Net, group_of, setting

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Run IFCA; log each SuperNode's cluster, the test accuracy overall and per group, and load each cluster's
    model into the user's network."""
    k = int(setting(context, "num-clusters"))
    groups = int(setting(context, "groups"))
    torch.manual_seed(int(setting(context, "seed")))
    # one record: the strategy makes each run's k starts from it and runs n_init (default 5) restarts side by side,
    # keeping the run of lowest total loss (stack_clusters([...k records...]) would be one run of your own starts)
    initial = ArrayRecord(Net().state_dict())
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
    # each client's own last evaluation (its cluster's model on its test data), gathered by group (rotation)
    correct: dict[int, float] = {}
    tested: dict[int, float] = {}
    for metrics in strategy.evaluations.values():
        g = group_of(int(metrics["partition-id"]), groups)
        correct[g] = correct.get(g, 0.0) + metrics["eval-acc"] * metrics["num-examples"]
        tested[g] = tested.get(g, 0.0) + metrics["num-examples"]
    log(INFO, "IFCA test accuracy by group: %s", {g: round(correct[g] / tested[g], 4) for g in sorted(tested)})
    # result.arrays holds one state_dict record per cluster (result.arrays["cluster-0"], ...) and the assignment
    nets = []
    for j in range(len(split_clusters(result.arrays))):
        net = Net()
        net.load_state_dict(cluster_state_dict(result, j))  # e.g. torch.save(net.state_dict(), f"cluster-{j}.pt")
        nets.append(net)
    context.state["final-models"] = stack_clusters(split_clusters(result.arrays))
    log(INFO, "IFCA done: %d cluster models loaded into Net (BatchNorm batches tracked: %s)", len(nets),
        [int(net.norm.num_batches_tracked) for net in nets])
