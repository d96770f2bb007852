"""The ClientApp: cflab's helper answers the IFCA strategy's messages with the user's model and data."""

from __future__ import annotations

from flwr.app import Context

from nets.flower.torch_client import torch_client_app

from .task import Net, load_data, setting


def data(context: Context):
    """This SuperNode's loaders (Flower's simulation numbers the SuperNodes' partitions 0..num-partitions-1)."""
    return load_data(int(context.node_config["partition-id"]), int(context.node_config["num-partitions"]),
                     groups=int(setting(context, "groups")), batch_size=int(setting(context, "batch-size")),
                     seed=int(setting(context, "seed")))


app = torch_client_app(Net, data)
