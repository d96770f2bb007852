"""SR-FCA side by side: the authors' public code and the toolkit's ``variant="public-code"`` on the same client data.

The public code (harshv834/sr-fca at a1b418f, the code behind the paper's Tables 1-2) runs here unchanged, on CPU,
through four shims that live in this script only:

1. ``torchvision`` is a stub module: ``src/trainers.py`` imports three torchvision models used only for CIFAR
   features, and this environment has no torchvision;
2. ``src.clustering`` is registered as a bare package, so its ``__init__`` (which imports ``feddrift``, a module
   absent at a1b418f) does not run; ``src.clustering.sr_fca`` is then imported as usual;
3. the code needs a GPU (``src/utils.py``:334-347 raises without one, and ``compute_metric`` calls ``.cuda()``):
   ``get_device`` returns ``"cpu"`` and ``torch.nn.Module.cuda`` returns the module unchanged;
4. ``torch.nn.Module.cpu`` copies the module's tensors, as moving them off a GPU does: the code's REFINE hands each
   sampled client the cluster model's own tensors, the clients train one after another in place, and each
   client's ``model.cpu()`` at the end of its training (``src/trainers.py``:303) is what snapshots its weights
   for the trimmed mean on the GPU the paper ran on; on a CPU ``.cpu()`` copies nothing, and every client would
   end with the last client's weights (the code's numbers came from the GPU behaviour).

Both sides get the toolkit's federation of each seed (``nets`` rotated MNIST: the clients' already rotated
images and labels, 28x28 flattened for the code's 784-200-10 network), the code's configuration for rotated MNIST
(configs/clustering/sr_fca/rot_mnist/best_hp.yaml: lambda 0.02 in the code's unit, t = 2, beta 0.15, 10 clients per
round, 250 ONE_SHOT iterations, 2 REFINE steps of 42 rounds x 5 local iterations, Adam 2e-4; batch 50 from
configs/experiment/rot_mnist.yaml).  The code's distance is a mean loss divided by the batch size (src/utils.py:
160-168, a sum of per-batch means over the sample count), so its lambda 0.02 is the toolkit's 1.0.  The number
compared is the accuracy the code reports: each clustered client's test accuracy on its cluster model, before the
last RECLUSTER and MERGE, averaged over clustered clients (the toolkit's ``test_accuracy_code``).

    git --git-dir MIRROR archive a1b418f | tar -x -C CODE_DIR
    python bench/srfca_public_code.py --code CODE_DIR --data-dir ../shared/data --seeds 0,1,2 \\
        --clients 32 --json bench/results/srfca_public_code_side_by_side.json

needs ``networkx`` and ``pyyaml`` besides the ``nets`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

# the code's configuration for rotated MNIST (sr-fca@a1b418f configs/clustering/sr_fca/rot_mnist/best_hp.yaml and
# configs/experiment/rot_mnist.yaml); read from the checkout and checked against these values
CODE_CONFIG = {"dist_threshold": 0.02, "size_threshold": 2, "beta": 0.15, "num_clients_per_round": 10,
               "init_iterations": 250, "refine_local_iter": 5, "refine_rounds": 42, "num_refine_steps": 2,
               "lr": 0.0002, "batch_train": 50}


def _shim_public_code(code: Path):
    """Import the public code's SR-FCA with the shims of the module docstring; returns the module."""
    import torch

    tv = types.ModuleType("torchvision")
    tv_models = types.ModuleType("torchvision.models")
    for name in ("efficientnet_b7", "EfficientNet_B7_Weights", "resnet18"):
        setattr(tv_models, name, None)
    tv.models = tv_models
    sys.modules.setdefault("torchvision", tv)
    sys.modules.setdefault("torchvision.models", tv_models)
    sys.path.insert(0, str(code))
    pkg = types.ModuleType("src.clustering")
    pkg.__path__ = [str(code / "src" / "clustering")]
    sys.modules["src.clustering"] = pkg
    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.nn.Module.cpu = lambda self: self._apply(lambda t: t.clone())  # a GPU -> CPU move copies
    import src.utils as code_utils

    code_utils.get_device = lambda config, i, cluster=False: "cpu"
    import src.trainers as code_trainers

    code_trainers.get_device = code_utils.get_device
    import src.clustering.sr_fca as code_srfca

    return code_srfca


class _Client:
    """A client as the public code reads one (src/datasets/client.py Client): loaders and ``sample_batch``."""

    def __init__(self, X, y, Xt, yt, batch_train: int, batch_test: int, generator):
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        self.trainloader = DataLoader(TensorDataset(torch.as_tensor(X), torch.as_tensor(y)), batch_size=batch_train,
                                      shuffle=True, generator=generator)
        self.testloader = DataLoader(TensorDataset(torch.as_tensor(Xt), torch.as_tensor(yt)), batch_size=batch_test,
                                     shuffle=False)
        self.train_iterator, self.test_iterator = iter(self.trainloader), iter(self.testloader)

    def sample_batch(self, train=True):
        it = self.train_iterator if train else self.test_iterator
        try:
            return next(it)
        except StopIteration:
            if train:
                self.train_iterator = iter(self.trainloader)
                return next(self.train_iterator)
            self.test_iterator = iter(self.testloader)
            return next(self.test_iterator)


def _federation(seed: int, clients: int, n: int, data_dir: str | None):
    from nets.experiment import _federation_that_fits, validate_params

    p = validate_params({"dataset": "mnist-rotated", "algo": "srfca", "clients": clients, "n_per_client": n,
                         "seed": seed, "data_dir": data_dir})
    data_ss = np.random.SeedSequence(seed).spawn(3)[0]  # run_experiment's data stream of this seed
    fed, _ = _federation_that_fits(p, data_ss, explicit_n=True)
    return fed


def _read_code_config(code: Path) -> dict:
    import yaml

    exp = yaml.safe_load((code / "configs/experiment/rot_mnist.yaml").read_text())
    hp = yaml.safe_load((code / "configs/clustering/sr_fca/rot_mnist/best_hp.yaml").read_text())
    seen = {"dist_threshold": hp["dist_threshold"], "size_threshold": hp["size_threshold"], "beta": hp["beta"],
            "num_clients_per_round": hp["num_clients_per_round"], "init_iterations": hp["init"]["iterations"],
            "refine_local_iter": hp["refine"]["local_iter"], "refine_rounds": hp["refine"]["rounds"],
            "num_refine_steps": hp["num_refine_steps"], "lr": hp["optimizer"]["params"]["lr"],
            "batch_train": exp["batch"]["train"]}
    if seen != CODE_CONFIG or hp["optimizer"]["name"] != "adam" or hp["dist_metric"] != "cross_entropy":
        raise SystemExit(f"error: {code} is not sr-fca@a1b418f's rotated-MNIST configuration: {seen}")
    return {**exp, **hp}


def run_public_code(code: Path, fed, seed: int, config: dict) -> dict:
    """The public code's SRFCA.cluster on the federation's client data; its reported accuracy and clustering."""
    import random

    import torch

    code_srfca = _shim_public_code(code)
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 -- the public code draws from numpy's global stream
    torch.manual_seed(seed)
    m = fed.n_clients
    g = torch.Generator().manual_seed(seed)

    def flat(a):
        return a.reshape(a.shape[0], -1).astype(np.float32)

    clients = {i: _Client(flat(fed.X[i][:fed.n_samples[i]]), fed.y[i][:fed.n_samples[i]].astype(np.int64),
                          flat(fed.X_test[i][:fed.n_test[i]]), fed.y_test[i][:fed.n_test[i]].astype(np.int64),
                          config["batch"]["train"], config["batch"]["test"], g) for i in range(m)}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = {**config, "num_clients": m, "clustering": "sr_fca", "time": {}, "path": {"results": tmp}}
        cfg["dataset"] = {**cfg["dataset"], "num_clusters": int(fed.clusters.max()) + 1}
        (Path(tmp) / "init").mkdir()
        algo = code_srfca.SRFCA.__new__(code_srfca.SRFCA)
        algo.cluster_map, algo.tune, algo.config = {}, False, cfg
        algo.client_trainers = {i: code_srfca.ClientTrainer(config=cfg, client_id=i, mode="solo") for i in range(m)}
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            metrics = algo.cluster(types.SimpleNamespace(client_dict=clients))
        seconds = time.perf_counter() - t0
    labels = np.full(m, -1)
    for c, members in algo.cluster_map.items():
        labels[members] = c
    return {"accuracy": float(metrics["test"]["acc"]), "clusters": len(algo.cluster_map),
            "clustered_clients": int((labels >= 0).sum()), "labels": labels.tolist(), "seconds": seconds}


def run_toolkit(fed_seed: int, clients: int, n: int, data_dir: str | None) -> dict:
    """``nets run`` with SR-FCA's public-code variant at the code's configuration (lambda in the toolkit's unit)."""
    from nets.experiment import run_experiment

    c = CODE_CONFIG
    params = {"dataset": "mnist-rotated", "algo": "srfca", "model": "mlp", "clients": clients, "n_per_client": n,
              "seed": fed_seed, "data_dir": data_dir, "optimizer": "adam", "step_size": c["lr"],
              "batch_size": c["batch_train"], "local_train_steps": c["init_iterations"],
              "trmean_steps": c["refine_rounds"], "threshold": c["dist_threshold"] * c["batch_train"],
              "min_size": c["size_threshold"], "beta": c["beta"], "n_refine": c["num_refine_steps"],
              "dist": "cross", "rounds": c["init_iterations"]}
    algo = {"variant": "public-code", "clients_per_round": c["num_clients_per_round"],
            "refine_local_steps": c["refine_local_iter"]}
    t0 = time.perf_counter()
    rec = run_experiment(params, algo_params=algo)
    return {"accuracy": rec["test_accuracy_code"], "clusters": rec["n_clusters"],
            "clustered_clients": rec["clustered_clients_code"], "misclustering": rec["misclustering"],
            "test_accuracy_all_clients": rec["test_accuracy"], "seconds": time.perf_counter() - t0}


def _summary(values: list[float]) -> dict:
    a = np.asarray(values, dtype=float)
    sd = float(a.std(ddof=1)) if len(a) > 1 else math.nan
    return {"mean": float(a.mean()), "sd": sd, "values": a.tolist()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--code", required=True, type=Path, help="a checkout of harshv834/sr-fca at a1b418f")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--clients", type=int, default=32, help="clients (a multiple of 4; the paper has 100)")
    ap.add_argument("--n", type=int, default=600, help="training images per client (the paper's 600)")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    if not (a.code / "src" / "clustering" / "sr_fca.py").is_file():
        ap.error(f"--code must be a checkout of harshv834/sr-fca (no src/clustering/sr_fca.py under {a.code})")
    if a.clients < 4 or a.clients % 4:
        ap.error(f"--clients must be a multiple of 4 (four rotations), at least 4; got {a.clients}")
    seeds = [int(s) for s in a.seeds.split(",")]
    config = _read_code_config(a.code)
    rows = []
    for seed in seeds:
        fed = _federation(seed, a.clients, a.n, a.data_dir)
        code = run_public_code(a.code, fed, seed, config)
        tool = run_toolkit(seed, a.clients, a.n, a.data_dir)
        from synth.metrics import misclustering

        code["misclustering"] = float(misclustering(np.asarray(code["labels"]), fed.clusters)) \
            if min(code["labels"]) >= 0 else None
        rows.append({"seed": seed, "public_code": code, "toolkit": tool})
        print(f"seed {seed}: public code {100 * code['accuracy']:.2f} % ({code['clusters']} clusters, "
              f"{code['clustered_clients']} clustered, {code['seconds']:.0f} s); toolkit variant "
              f"{100 * tool['accuracy']:.2f} % ({tool['clusters']} clusters, {tool['clustered_clients']} clustered, "
              f"{tool['seconds']:.0f} s)", flush=True)
    out = {"setting": {"dataset": "mnist-rotated", "clients": a.clients, "n": a.n, "seeds": seeds,
                       "code": "harshv834/sr-fca@a1b418f", "config": CODE_CONFIG},
           "public_code": _summary([r["public_code"]["accuracy"] for r in rows]),
           "toolkit": _summary([r["toolkit"]["accuracy"] for r in rows]), "runs": rows}
    diff = out["toolkit"]["mean"] - out["public_code"]["mean"]
    spread = max(out["toolkit"]["sd"], out["public_code"]["sd"])
    out["difference"] = {"toolkit_minus_code": diff, "larger_seed_sd": spread,
                         "within_seed_spread": bool(abs(diff) <= spread)}
    print(f"mean accuracy: public code {100 * out['public_code']['mean']:.2f} +- {100 * out['public_code']['sd']:.2f}, "
          f"toolkit {100 * out['toolkit']['mean']:.2f} +- {100 * out['toolkit']['sd']:.2f} (sample SD over "
          f"{len(seeds)} seeds); difference {100 * diff:+.2f} points, within the larger seed SD: "
          f"{out['difference']['within_seed_spread']}")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
