"""PFLlib side by side: PFLlib's FedALA, Per-FedAvg, FedProto and FedPAC and the toolkit's on the same client data.

CLoVE's Table 6 names PFLlib (TsingZ0/PFLlib) as the code of Per-FedAvg, FedProto, FedALA and FedPAC, so its
numbers for them come from there.  PFLlib@d832e76 runs here unchanged, on CPU, through import-time shims that live
in this script only:

1. ``h5py`` is a stub whose ``File`` writes nothing: ``serverbase.save_results`` stores the curves in an HDF5 file
   and this environment has no h5py (the curves are read from the server object instead);
2. PFLlib's clients read ``../dataset/<name>/{train,test}/<id>.npz`` (``utils/data_utils.py:7-17``): the script
   writes the toolkit's client data there, in a temporary folder that is the working directory while PFLlib runs;
3. the arguments are ``system/main.py``'s own parser defaults (its ``argparse`` block, run without the rest of
   ``main.py``), then the few set below (device cpu, rounds, batch, learning rate, clients, data set name);
4. ``cvxpy`` (imported by ``serverpac.py:5``, absent here) is a stub that solves FedPAC's head QP
   (``serverpac.py:236-241``) exactly, by the non-negative least-squares form the toolkit uses.

Both sides get the ``nets`` federation of the seed (default: MNIST label skew 1, 10 clients with two classes each,
100 training / 50 test images per client), the same network (nets' ``mlp``: 784-200-10; PFLlib's head-split
algorithms get it as ``BaseHeadSplit(base, head)`` with the last layer as head, as ``main.py`` does) and the same
initial weights, plain SGD at PFLlib's default learning rate 0.005 and batch 10, one local epoch (``n / B``
minibatches; Per-FedAvg's PFLlib epoch is ``n / 2B`` meta-steps on batches of ``2B``).  The toolkit runs twice: with
the paper's defaults and with the PFLlib options (FedALA ``ala_batch_size = B``, ``ala_max_steps = None``;
Per-FedAvg ``meta_passes = 2``, ``meta_weights = "samples"``, ``meta_adapt_batch = B``, ``meta_batch = B``; FedProto
``local_prototypes = "during"``, ``prototype_mean = "clients"``; FedPAC ``prototype_mean = "clients"``,
``head_assignment = "pfllib"``); both FedProto runs score by the nearest prototype.  PFLlib's FedPAC also runs with
its heads matched to their clients (:func:`_matched_heads`, a bench variant of ``aggregate_and_send_heads``).
PFLlib evaluates at the start of every round (``rs_test_acc[t]`` = after ``t`` rounds of training) and prints the
best; the table shows its accuracy after ``T`` rounds and its best, and the toolkit's after ``T`` rounds.

    git --git-dir MIRROR archive HEAD system | tar -x -C PFLLIB_DIR
    python bench/pfllib_side_by_side.py --pfllib PFLLIB_DIR/system --data-dir ../shared/data --rounds 20 \\
        --seeds 0,1,2 --json bench/results/pfllib_side_by_side.json

needs the ``nets`` extra and scikit-learn (PFLlib's ``clientbase.py`` imports it).  About 90 s of CPU per seed.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import random
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

ALGOS = ("fedala", "perfedavg", "fedproto", "fedpac")
SERVER = {"fedala": ("flcore.servers.serverala", "FedALA", "FedALA"),
          "perfedavg": ("flcore.servers.serverperavg", "PerAvg", "PerAvg"),
          "fedproto": ("flcore.servers.serverproto", "FedProto", "FedProto"),
          "fedpac": ("flcore.servers.serverpac", "FedPAC", "FedPAC")}


def _shim_pfllib(system: Path) -> None:
    """Shim 1 of the module docstring (h5py) and PFLlib's ``system/`` on the import path."""
    h5 = types.ModuleType("h5py")

    class _File:  # save_results: with h5py.File(path, "w") as hf: hf.create_dataset(...)
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def create_dataset(self, *a, **k):
            pass

    h5.File = _File
    sys.modules.setdefault("h5py", h5)
    sys.modules.setdefault("cvxpy", _cvxpy_stub())
    sys.path.insert(0, str(system))


def _cvxpy_stub() -> types.ModuleType:
    """Shim 4: the part of ``cvxpy`` that ``serverpac.solve_quadratic`` uses (``serverpac.py:236-241``), solving
    its problem ``min a^T P a, sum a = 1, a >= 0`` exactly: with ``P = L L^T`` the KKT conditions are those of the
    non-negative least squares ``min ||L^T b - L^{-1} 1||`` at ``a = b / sum b`` (as the toolkit's
    ``collaboration_weights``; the same problem, another solver than cvxpy's)."""
    from scipy.linalg import solve_triangular
    from scipy.optimize import nnls

    cvx = types.ModuleType("cvxpy")

    class Variable:
        def __init__(self, n):
            self.n, self.value = n, None

        def __ge__(self, other):
            return ("nonneg", self)

    class Minimize:
        def __init__(self, expr):
            self.expr = expr

    class Problem:
        def __init__(self, objective, constraints):
            self.objective = objective

        def solve(self):
            var, P = self.objective.expr
            Q = 0.5 * (P + P.T)
            Q = Q / max(float(np.abs(Q).max()), 1e-300) + 1e-12 * np.eye(var.n)
            L = np.linalg.cholesky(Q)
            b, _ = nnls(L.T, solve_triangular(L, np.ones(var.n), lower=True), maxiter=50 * var.n)
            var.value = b / b.sum()

    class _Sum:
        def __eq__(self, other):
            return ("sum", other)

    cvx.Variable, cvx.Minimize, cvx.Problem = Variable, Minimize, Problem
    cvx.quad_form = lambda var, P: (var, np.asarray(P, dtype=np.float64))
    cvx.sum = lambda var: _Sum()
    return cvx


def _pfllib_defaults(system: Path) -> argparse.Namespace:
    """Shim 3: ``main.py``'s parser block, executed alone, parsed with no arguments."""
    src = (system / "main.py").read_text(encoding="utf-8")
    start = src.index("    parser = argparse.ArgumentParser()")
    end = src.index("    args = parser.parse_args()")
    block = "\n".join(line[4:] for line in src[start:end].splitlines())
    scope = {"argparse": argparse}
    exec(compile(block, str(system / "main.py"), "exec"), scope)  # noqa: S102 - PFLlib's own parser definition
    return scope["parser"].parse_args([])


def _write_clients(root: Path, name: str, fed) -> None:
    """Shim 2: the clients' data as PFLlib's ``read_data`` expects it."""
    for split, X, y, n in (("train", fed.X, fed.y, fed.n_samples), ("test", fed.X_test, fed.y_test, fed.n_test)):
        folder = root / "dataset" / name / split
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(len(n)):
            data = {"x": np.asarray(X[i][: n[i]], dtype=np.float32), "y": np.asarray(y[i][: n[i]], dtype=np.int64)}
            with open(folder / f"{i}.npz", "wb") as f:
                np.savez(f, data=data)


def _matched_heads(server) -> None:
    """``FedPAC.aggregate_and_send_heads`` with the heads matched to their clients (a bench variant, not PFLlib):
    the weights of ``solve_quadratic`` are in ``selected_clients`` order (``serverpac.py:40-44``), PFLlib applies
    them in ``uploaded_ids`` order, a ``random.sample`` permutation (``serverpac.py:129-130, 155-164``), and combines
    heads that ``set_head`` already overwrote in the loop (``clientpac.py:110-112``).  Here client ``i`` gets
    ``sum_j alpha_ij psi_j`` over the heads as uploaded."""
    solve = sys.modules[type(server).__module__].solve_quadratic
    order = [c.id for c in server.selected_clients]
    uploaded = dict(zip(server.uploaded_ids, server.uploaded_heads, strict=True))
    heads = [copy.deepcopy(uploaded[cid]) for cid in order]  # before any set_head
    for idx, (cid, w) in enumerate(zip(order, solve(len(order), server.Vars, server.Hs), strict=True)):
        if w is None:
            new = heads[idx]
        else:
            new = copy.deepcopy(heads[0])
            for p in new.parameters():
                p.data.zero_()
            for wj, h in zip(w, heads, strict=True):
                for p, q in zip(new.parameters(), h.parameters(), strict=True):
                    p.data += q.data.clone() * wj
        server.clients[cid].set_head(new)


def _run_pfllib(algo: str, args: argparse.Namespace, module, seed: int, matched: bool = False) -> list[float]:
    """PFLlib's server for ``algo`` from its ``main.py`` set-up; its per-round test accuracies (``matched``:
    FedPAC with :func:`_matched_heads`)."""
    import importlib

    import torch

    mod, cls, name = SERVER[algo]
    args = copy.copy(args)
    args.algorithm = name
    if algo in ("fedproto", "fedpac"):  # main.py:246-249, 285-288: the last layer becomes the head
        net = copy.deepcopy(module).net
        head = net[-1]
        base = torch.nn.Sequential(*list(net)[:-1])
        args.head = head
        args.model = importlib.import_module("flcore.trainmodel.models").BaseHeadSplit(base, head)
    else:
        args.model = copy.deepcopy(module)
    random.seed(seed)
    np.random.seed(seed)  # noqa: NPY002 - PFLlib draws from numpy's global generator (serverbase.py:99)
    torch.manual_seed(seed)
    server = getattr(importlib.import_module(mod), cls)(args, 0)
    if matched:
        server.aggregate_and_send_heads = types.MethodType(_matched_heads, server)
    with contextlib.redirect_stdout(io.StringIO()):
        server.train()
    return [float(a) for a in server.rs_test_acc]


def _run_toolkit(algo: str, train, test, init: np.ndarray, rounds: int, steps: int, lr: float, batch: int,
                 pfllib: bool, seed: int) -> float:
    """The toolkit's estimator, paper defaults or PFLlib options; the test accuracy of its final models."""
    from synth.algorithms import FedALA, FedPAC, FedProto, PerFedAvg

    common = dict(n_rounds=rounds, step_size=lr, init=init[None], random_state=seed)
    if algo == "fedala":
        extra = dict(ala_batch_size=batch, ala_max_steps=None) if pfllib else {}
        est = FedALA(local_steps=steps, **common, **extra)
    elif algo == "perfedavg":
        # PFLlib's epoch: floor(n / 2B) meta-steps on batches of 2B (clientperavg.py:23); with meta_batch the
        # estimator draws them itself and local_steps counts epochs; the paper's defaults take as many all-data steps
        extra = dict(meta_passes=2, meta_weights="samples", meta_adapt_batch=batch, meta_batch=batch) if pfllib else {}
        est = PerFedAvg(local_steps=1 if pfllib else max(1, steps // 2), meta_alpha=lr, **common, **extra)
    elif algo == "fedproto":
        extra = dict(local_prototypes="during", prototype_mean="clients") if pfllib else {}
        est = FedProto(local_steps=steps, scoring="prototype", **common, **extra)
    else:
        extra = dict(prototype_mean="clients", head_assignment="pfllib") if pfllib else {}
        est = FedPAC(local_steps=steps, **common, **extra)
    est.fit(train)
    _, acc = test.scores(est.models_, np.arange(train.n_clients))
    n = np.asarray(test.n_samples, dtype=np.float64)
    return float((acc * n).sum() / n.sum())  # PFLlib: total correct over total test samples


def _one_seed(a, system: Path, seed: int) -> dict:
    """Both sides on the federation and initial model of ``seed``: one row per algorithm."""
    from nets.datasets import build_federation

    fed = build_federation(a.dataset, a.clients, a.n, np.random.default_rng(seed), n_test=a.n_test,
                           clusters=a.clusters, data_dir=a.data_dir)
    model = fed.model("mlp")
    init = model.init(seed)
    module = model.module
    module.load_state_dict(dict(model.unflatten(init).items()))
    train, test = fed.backends(model, batch_size=a.batch, optimizer="sgd", seed=seed + 1)
    args = _pfllib_defaults(system)
    args.device, args.dataset, args.num_clients = "cpu", f"cflab_{a.dataset}", a.clients
    args.global_rounds, args.batch_size, args.local_learning_rate = a.rounds, a.batch, a.lr
    args.num_classes, args.local_epochs, args.join_ratio, args.eval_gap = 10, 1, 1.0, 1
    steps = a.n // a.batch  # one epoch of a drop_last loader
    rows = {}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "system"
        work.mkdir()
        _write_clients(Path(tmp), args.dataset, fed)
        for algo in a.algos.split(","):
            t0 = time.process_time()
            os.chdir(work)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    curve = _run_pfllib(algo, args, module, seed)
            finally:
                os.chdir(cwd)
            t1 = time.process_time()
            paper = _run_toolkit(algo, train, test, init.numpy(), a.rounds, steps, a.lr, a.batch, False, seed)
            t2 = time.process_time()
            opts = _run_toolkit(algo, train, test, init.numpy(), a.rounds, steps, a.lr, a.batch, True, seed)
            t3 = time.process_time()
            row = {"pfllib_after_T": curve[a.rounds] if len(curve) > a.rounds else curve[-1],
                   "pfllib_best": max(curve), "pfllib_curve": curve, "toolkit_paper": paper,
                   "toolkit_pfllib_options": opts,
                   "cpu_seconds": {"pfllib": t1 - t0, "toolkit_paper": t2 - t1, "toolkit_pfllib_options": t3 - t2}}
            if algo == "fedpac":  # PFLlib with its heads matched to their clients (_matched_heads)
                os.chdir(work)
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        fixed = _run_pfllib(algo, args, module, seed, matched=True)
                finally:
                    os.chdir(cwd)
                row["pfllib_matched_heads_after_T"] = fixed[a.rounds] if len(fixed) > a.rounds else fixed[-1]
                row["pfllib_matched_heads_curve"] = fixed
            rows[algo] = row
            matched = f" | PFLlib, heads matched {row['pfllib_matched_heads_after_T']:.3f}" if algo == "fedpac" else ""
            print(f"seed {seed} {algo:10s} PFLlib after T {row['pfllib_after_T']:.3f}  best {row['pfllib_best']:.3f}"
                  f" | toolkit paper {paper:.3f}  PFLlib options {opts:.3f}{matched}", flush=True)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pfllib", required=True, type=Path, help="PFLlib's system/ folder")
    ap.add_argument("--dataset", default="mnist-label-skew-1")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--clusters", type=int, default=5)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--n-test", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--seeds", default="0", help="comma list: one federation, initial model and run per seed")
    ap.add_argument("--algos", default=",".join(ALGOS))
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    system = a.pfllib.resolve()
    _shim_pfllib(system)
    out = {"setting": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}, "runs": []}
    for seed in (int(x) for x in a.seeds.split(",")):
        out["runs"].append({"seed": seed, "algos": _one_seed(a, system, seed)})
    for algo in a.algos.split(","):
        rows = [r["algos"][algo] for r in out["runs"]]
        keys = ("pfllib_after_T", "pfllib_best", "toolkit_paper", "toolkit_pfllib_options",
                "pfllib_matched_heads_after_T")
        print(f"{algo:10s} mean over seeds {a.seeds}: " + ", ".join(
            f"{key} {np.mean([r[key] for r in rows]):.3f}" for key in keys if key in rows[0]), flush=True)
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
