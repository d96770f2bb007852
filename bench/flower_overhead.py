#!/usr/bin/env python
"""Per-round cost of IFCA as a Flower app (``flwr.simulation.run_simulation``) against ``nets run``, same problem.

IFCA on ``digits-rotated`` (k = 4, model averaging, tau = 10 local steps, full participation, the MLP), the same
seed and settings on both paths, at 20 and 100 clients.  The time per round is each path's fit time over its
rounds: for Flower from the first round's messages to the last aggregation, excluding the simulation's start (Ray,
the actors, each client building its partition) and the final test exchange, which are reported apart.  Both
compute on one core: ``nets run`` with one torch thread, Flower with one simulation actor (one client's
ClientApp at a time), the server in the driver process.  Both runs must reach the same accuracy (checked).

    python bench/flower_overhead.py                        # 20 and 100 clients, JSON to stdout
    python bench/flower_overhead.py --json bench/results/flower_overhead.json
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from bench._machine import cpu_name  # noqa: E402
from nets.experiment import run_experiment  # noqa: E402

# (label, clients, samples per client): the command of the README, and the same problem at 20 and 100 clients
# (digits-rotated's pools hold 12 distinct images per client at 100 clients)
CONFIGS = {"20-n100": (20, 100), "20-n12": (20, 12), "100-n12": (100, 12)}


def measure(clients: int, n: int, rounds: int, actors: int) -> dict:
    from nets.flower import simulate, strategy_for

    params = {"algo": "ifca", "dataset": "digits-rotated", "clients": clients, "n_per_client": n, "rounds": rounds,
              "seed": 0}
    t0 = time.perf_counter()
    ref = run_experiment(params)
    nets_wall = time.perf_counter() - t0
    strategy = strategy_for(params)
    t0 = time.perf_counter()
    simulate([strategy], actors=actors)
    flower_wall = time.perf_counter() - t0
    got = strategy.record
    if abs(got["test_accuracy"] - ref["test_accuracy"]) > 1e-4:
        raise RuntimeError(f"the two paths disagree: accuracy {got['test_accuracy']} vs {ref['test_accuracy']}")
    fl = got["flower"]
    return {
        "clients": clients, "n_per_client": n, "rounds": rounds, "actors": actors,
        "nets_round_s": ref["seconds"] / rounds, "flower_round_s": got["seconds"] / rounds,
        "ratio": got["seconds"] / ref["seconds"],
        "flower_waiting_round_s": fl["seconds_in_exchanges"] / rounds,
        "messages_per_round": (fl["messages"] - 2 * clients) / rounds,  # less the final loss pass and the test
        "flower_startup_and_test_s": flower_wall - got["seconds"], "nets_wall_s": nets_wall,
        "flower_wall_s": flower_wall, "test_accuracy": got["test_accuracy"],
    }


def _main(argv: list[str]) -> int:
    from bench._machine import count
    from synth.cli import CleanParser

    parser = CleanParser(prog="flower_overhead.py", allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list of {', '.join(CONFIGS)}")
    parser.add_argument("--rounds", type=count("--rounds"), default=10)
    parser.add_argument("--actors", type=count("--actors"), default=1)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    unknown = [c for c in args.configs.split(",") if c not in CONFIGS]
    if unknown:
        raise ValueError(f"--configs: unknown {', '.join(map(repr, unknown))}; choose from {', '.join(CONFIGS)}")
    for label in args.configs.split(","):
        clients, n = CONFIGS[label]
        load = os.getloadavg()[0]
        row = measure(clients, n, args.rounds, args.actors)
        row.update(config=label, load_before=load, load_after=os.getloadavg()[0])
        rows.append(row)
        print(f"{label}: nets run {row['nets_round_s']:.3f} s/round, Flower {row['flower_round_s']:.3f} s/round "
              f"(ratio {row['ratio']:.2f}; waiting for answers {row['flower_waiting_round_s']:.3f} s/round, "
              f"{row['messages_per_round']:.0f} messages/round); Flower start-up and test "
              f"{row['flower_startup_and_test_s']:.1f} s; load {load:.1f}->{row['load_after']:.1f}", flush=True)
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
