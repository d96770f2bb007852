#!/usr/bin/env python
"""Rounds per second of IFCA on a rotated-MNIST-sized federation: batched (vmap) vs looped TorchBackend.

100 clients, IFCA's MLP (one hidden layer of 200), k = 4 rotations, model
averaging with tau = 10 local steps (IFCA Sec. VI-B), full participation.
Reads MNIST through the nets loaders when the files are present, else uses
random tensors of MNIST's shape (the timing does not depend on pixel values).
Each configuration runs a few IFCA rounds on each backend; the first round is
a warm-up and is not timed.

    python bench/nets_batched.py                 # CPU, default configurations
    python bench/nets_batched.py --device cuda   # on a GPU
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._machine import cpu_name  # noqa: E402
from nets.backend import TorchBackend  # noqa: E402
from nets.data import DataError  # noqa: E402
from nets.datasets import build_federation  # noqa: E402
from nets.device import resolve_device  # noqa: E402
from nets.functional import FunctionalModel  # noqa: E402
from nets.models import model_factory  # noqa: E402
from synth.algorithms import IFCA  # noqa: E402

# (label, samples per client n, minibatch size or None for full batch)
CONFIGS = {
    "n100-full": (100, None),   # IFCA Table I's n = 100, full-batch local GD (IFCA's MNIST code)
    "n600-full": (600, None),   # SR-FCA's m = 100, n = 600
    "n600-b50": (600, 50),      # minibatch SGD, batch 50 (IFCA's CIFAR setting)
    "n100-b10": (100, 10),      # minibatch SGD, batch 10 (FedAvg)
}


def federation(n: int, clients: int, rng, data_dir):
    """MNIST rotated into 4 clusters, or random MNIST-shaped tensors when MNIST is absent."""
    try:
        fed = build_federation("mnist-rotated", clients, n, rng, n_test=10, data_dir=data_dir)
        return torch.as_tensor(fed.X), torch.as_tensor(fed.y), "MNIST (rotated 0/90/180/270)"
    except DataError:
        X = torch.rand((clients, n, 1, 28, 28), generator=torch.Generator().manual_seed(0))
        y = torch.randint(0, 10, (clients, n), generator=torch.Generator().manual_seed(1))
        return X, y, "random tensors of MNIST shape (MNIST files absent)"


def rounds_per_second(backend, rounds: int) -> float:
    stamps = []
    IFCA(n_clusters=4, n_rounds=rounds + 1, step_size=0.1, averaging="model", local_steps=10, init="default",
         random_state=0, monitor=lambda t, m, lab: stamps.append(time.perf_counter()) or {}).fit(backend)
    return rounds / (stamps[-1] - stamps[0])  # round 0 is the warm-up


def machine() -> str:
    cpu = cpu_name()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu}, {os.cpu_count()} logical CPUs, torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"load average {load:.1f}")


def _main(argv: list[str]) -> int:
    from bench._machine import count
    from synth.cli import CleanParser

    parser = CleanParser(prog="nets_batched.py", allow_abbrev=False,
                         description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--clients", type=count("--clients"), default=100)
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list of {', '.join(CONFIGS)}")
    parser.add_argument("--rounds", type=count("--rounds"), default=3, help="timed rounds per backend (batched)")
    parser.add_argument("--looped-rounds", type=count("--looped-rounds"), default=2,
                        help="timed rounds per backend (looped)")
    parser.add_argument("--threads", type=count("--threads"), default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    print(f"machine: {machine()}; device: {device}" + (f" ({torch.cuda.get_device_name()})"
                                                          if device.type == "cuda" else ""))
    print(f"IFCA, {args.clients} clients, k = 4, MLP 784-200-10, model averaging, tau = 10, full participation")
    print(f"{'config':>10} {'batched r/s':>12} {'looped r/s':>11} {'speed-up':>9}  data")
    unknown = [c for c in args.configs.split(",") if c not in CONFIGS]
    if unknown:
        raise ValueError(f"--configs: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(CONFIGS)}")
    for name in args.configs.split(","):
        n, batch = CONFIGS[name]
        X, y, what = federation(n, args.clients, np.random.default_rng(0), args.data_dir)
        model = FunctionalModel(model_factory("mlp", (1, 28, 28), 10), device=device)
        rates = {}
        for batched, rounds in ((True, args.rounds), (False, args.looped_rounds)):
            backend = TorchBackend(model, X, y, batch_size=batch, batched=batched, seed=0,
                                   memory_budget=(2048 if device.type == "cuda" else 256) * 2**20)
            rates[batched] = rounds_per_second(backend, rounds)
        print(f"{name:>10} {rates[True]:12.3f} {rates[False]:11.3f} {rates[True] / rates[False]:8.2f}x  {what}",
              flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Exit status 0, or 2 with one line on stderr (a wrong argument, an unusable file; ``--debug`` shows the
    traceback), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("nets_batched.py", _main, argv)


if __name__ == "__main__":
    sys.exit(main())
