"""One neural-network experiment: dataset + partition + network + algorithm -> a metrics record.

:data:`PARAMS` is the single source of truth for the ``python -m nets run``
flags and their validation (the :class:`synth.experiment.Param` schema).
:func:`run_experiment` builds the federation, fits the estimator of
:mod:`synth.algorithms` on a :class:`~nets.backend.TorchBackend`, evaluates it
by the paper's rule every ``eval_every`` rounds and at the end, and (for
IFCA/Global) checkpoints every round so that a killed run resumes exactly
where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from synth.experiment import Param
from synth.validation import did_you_mean

from .algorithms import ALGOS, hyper_parameters, make_estimator
from .checkpoint import load_checkpoint, release_checkpoint, save_checkpoint
from .data import SOURCES, fetch
from .datasets import DATASETS, build_federation, default_model
from .device import resolve_device
from .evaluate import clustering_scores, code_scores, evaluate, train_identity_scores
from .models import MODELS
from .partition import PoolTooSmallError

__all__ = ["PARAMS", "run_experiment", "validate_params"]

PARAMS: dict[str, Param] = {
    "dataset": Param("str", "digits-rotated", "federation: <base>-<partition> or femnist/shakespeare/amazon",
                     choices=DATASETS),
    "algo": Param("str", "ifca", "algorithm (an estimator of synth.algorithms)", choices=tuple(ALGOS)),
    "model": Param("str", "auto", "network (auto = the paper's network for the dataset)",
                   choices=("auto", *MODELS)),
    "task": Param("str", "classify", "classify (cross-entropy) or reconstruct (autoencoder, CLoVE unsupervised)",
                  choices=("classify", "reconstruct")),
    "clients": Param("int", 40, "number of clients m", low=1),
    "n_per_client": Param("int", 100, "training samples per client n (a cap for LEAF users)", low=1),
    "n_test": Param("int", None, "test samples per client (default: n, limited by the test pool)", low=1),
    "clusters": Param("int", None, "true clusters K of the partition (default: the partition's own)", low=1),
    "draw": Param("str", "disjoint", "disjoint clients; amazon: overlap (each client draws its reviews "
                  "independently from its domain, as CLoVE's 1,000 reviews per client need); rotated/inverted: split "
                  "(one permutation of the pool among all clients, SR-FCA's code; disjoint: one per cluster, IFCA's)",
                  choices=("disjoint", "overlap", "split")),
    "input_scale": Param("float", 1.0, "image inputs multiplied by this after the partition (255: the raw pixels "
                         "SR-FCA's public code feeds for inverted MNIST)", low=0.0, low_inclusive=False),
    "alpha": Param("float", 0.5, "Dirichlet concentration of the dirichlet partition", low=0.0,
                   low_inclusive=False),
    "n_clusters": Param("int", None, "cluster models k of the algorithm (default: K, or 3 without ground truth)",
                        low=1),
    "rounds": Param("int", 50, "communication rounds T", low=0),
    "step_size": Param("floats", 0.1, "step size gamma (comma list = IFCA restarts over step sizes)", low=0.0,
                       low_inclusive=False),
    "averaging": Param("str", "model", "model averaging (IFCA option II, FedAvg) or gradient averaging",
                       choices=("model", "gradient")),
    "local_steps": Param("int", 10, "local steps tau per round", low=1),
    "batch_size": Param("int", None, "minibatch size of local steps (default: full batch, IFCA's MNIST code)",
                        low=1),
    "optimizer": Param("str", "sgd", "local optimizer: sgd (IFCA, SR-FCA) or adam (CLoVE)",
                       choices=("sgd", "adam")),
    "lr_decay": Param("float", 1.0, "step size factor per round (IFCA CIFAR: 0.99)", low=0.0, high=1.0,
                      low_inclusive=False),
    "participation": Param("float", 1.0, "fraction of clients per round, in (0, 1]", low=0.0, high=1.0,
                           low_inclusive=False),
    "init": Param("str", "default", "initial models: default (torch init), same (all k equal, CLoVE Fig. 1), "
                  "gaussian, zeros", choices=("default", "same", "gaussian", "zeros")),
    "n_init": Param("int", 1, "random initialisations (IFCA restarts, best by total loss)", low=1),
    "share": Param("str", "none", "IFCA weight sharing (Sec. IV-C): none, or last (only the last layer is "
                   "clustered)", choices=("none", "last")),
    "local_init": Param("str", "shared", "start of the clients' local models (Local, Local-KMeans, one-shot k-means, "
                        "ONE_SHOT-IFCA): shared (one initialisation for every client) or separate (one per client)",
                        choices=("shared", "separate")),
    "local_train_steps": Param("int", None, "steps of the Local baseline / one-shot local models "
                               "(default: rounds * local_steps)", low=1),
    # SR-FCA (and ONE_SHOT-IFCA)
    "threshold": Param("float", None, "SR-FCA lambda: distance threshold of ONE_SHOT and MERGE (required for srfca, "
                       "oneshot-ifca; 'auto': SR-FCA's cut at the largest gap of ONE_SHOT's pairwise distances, "
                       "the paper variant)", low=0.0, low_inclusive=False, words=("auto",)),
    "min_size": Param("int", 2, "SR-FCA t: least clients of a kept cluster", low=1),
    "beta": Param("float", 0.1, "SR-FCA trimming level of TrMean_beta, in [0, 1/2)", low=0.0, high=0.5,
                  high_inclusive=False),
    "n_refine": Param("int", 2, "SR-FCA REFINE steps", low=0),
    "dist": Param("str", "cross", "SR-FCA distance: cross (cross-cluster loss, Def. 5.1) or l2",
                  choices=("cross", "l2")),
    "trmean_steps": Param("int", None, "SR-FCA TrimmedMeanGD steps per REFINE (default: rounds * local_steps, "
                          "the gradient steps the other algorithms take)", low=1),
    # CLoVE and CFL
    "clustering": Param("str", "kmeans", "CLoVE loss-vector clustering", choices=("kmeans", "agglomerative")),
    "eps1": Param("float", None, "CFL: split when the mean update norm is below eps1", low=0.0,
                  low_inclusive=False),
    "eps2": Param("float", None, "CFL: ... and the largest client update norm above eps2", low=0.0,
                  low_inclusive=False),
    "warmup_rounds": Param("int", None, "CFL: no split before this round (default 20, the reference code's)",
                           low=0),
    "min_split_size": Param("int", None, "CFL: only clusters of at least this many clients are split (default 3)",
                            low=2),
    "linkage": Param("str", None, "CFL bipartition: single (the optimum of Sattler et al. Sec. III) or complete "
                     "(the reference code)", choices=("single", "complete")),
    "test_machines": Param("int", None, "IFCA Sec. VI-B test protocol: also score on this many separate test "
                           "machines of one cluster each, the cluster models by the min-loss rule, each local model "
                           "on the machines of its own cluster (IFCA: m_test = 10000 k / n)", low=1),
    "test_machine_size": Param("int", 100, "test images per test machine (IFCA: n)", low=1),
    "validation": Param("float", 0.0, "fraction of each client's training samples held out as its validation "
                        "split (never trained on; the final models are scored on it like the test data: "
                        "validation_accuracy, validation_loss), for tuning without test data", low=0.0, high=0.5,
                        high_inclusive=False),
    "eval_every": Param("int", 0, "test every this many rounds (0: only at the end)", low=0),
    "seed": Param("int", 0, "random seed (data, algorithm and minibatch streams are spawned from it)", low=0),
    "device": Param("str", "auto", "torch device: auto (cuda when present), cpu or cuda",
                    choices=("auto", "cpu", "cuda")),
    "dtype": Param("str", "float32", "parameter precision", choices=("float32", "float64")),
    "memory_mb": Param("int", None, "memory one chunk of clients may use, MiB (default: 256 on CPU, 4096 on CUDA)",
                       low=1),
    "data_dir": Param("str", None, "data directory (default: $CFLAB_DATA, ../shared/data, ~/.cache/cflab/data)"),
    "checkpoint": Param("str", None, "checkpoint file: written every round, resumed from when present "
                        "(ifca, global)"),
}


def validate_params(params: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults, reject unknown keys (did-you-mean) and check every value."""
    unknown = [k for k in params if k not in PARAMS]
    if unknown:
        k = unknown[0]
        raise ValueError(f"unknown parameter {k!r}{did_you_mean(k, PARAMS)}; known: {', '.join(PARAMS)}")
    out = {name: spec.check(name, params.get(name, spec.default)) for name, spec in PARAMS.items()}
    for name, what in (("data_dir", "a folder"), ("checkpoint", "a file")):
        if out[name] is not None and not str(out[name]).strip():
            raise ValueError(f"{name} must name {what}, got an empty string (leave it out for the default)")
    return out


# keys that may differ between a checkpointed run and its resumption
_RESUMABLE = ("rounds", "checkpoint", "device", "eval_every", "memory_mb", "data_dir")

# estimator hyper-parameters that run_experiment sets from its own flags (see _hyper): an --algo-param may not set
# them, or the record would show the flag's value while the estimator ran another; None = set internally
FLAG_OF_HYPER = {
    "n_clusters": "n_clusters", "n_rounds": "rounds", "step_size": "step_size", "averaging": "averaging",
    "local_steps": "local_steps", "participation": "participation", "init": "init", "n_init": "n_init",
    "random_state": "seed", "monitor": None, "monitor_every": None, "local": None,
    "local_train_steps": "local_train_steps", "local_step_size": "step_size", "threshold": "threshold",
    "min_size": "min_size", "beta": "beta", "n_refine": "n_refine", "dist": "dist", "trmean_steps": "trmean_steps",
    "trmean_step_size": "step_size", "clustering": "clustering", "eps1": "eps1", "eps2": "eps2",
    "warmup_rounds": "warmup_rounds", "min_split_size": "min_split_size", "linkage": "linkage",
}


def check_algo_params(algo: str, algo_params: dict[str, Any] | None) -> dict[str, Any]:
    """``--algo-param KEY=VALUE`` pairs: hyper-parameters the estimator of ``algo`` declares and no named flag sets
    (else ValueError naming the flag to use); values are checked by the estimator's own declaration."""
    out = dict(algo_params or {})
    for key in out:
        if not isinstance(key, str):
            raise TypeError(f"algo_params keys must be hyper-parameter names, got {key!r}")
        if key in FLAG_OF_HYPER:
            flag = FLAG_OF_HYPER[key]
            how = f"use --{flag.replace('_', '-')}" if flag else "it is set by python -m nets itself"
            raise ValueError(f"--algo-param {key}=... sets a hyper-parameter that a named flag controls ({how}); the "
                             "record and checkpoint would otherwise show one value while the run used another")
    if out:
        from .algorithms import estimator_class

        try:  # the estimator's own declaration, now rather than after the data are loaded
            estimator_class(algo).check_param_values(out)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"--algo-param: {exc}") from None
    return out


def _federation_that_fits(p: dict[str, Any], data_ss: np.random.SeedSequence, explicit_n: bool):
    """The federation of ``p``; without an explicit ``n_per_client`` the default (100) is lowered to what the
    partition's class pools hold (the embedded 8x8 digits have 1797 images), and a note says so."""
    n = p["n_per_client"]
    while True:
        try:  # the same data seed on every attempt: the result depends on the parameters only
            fed = build_federation(p["dataset"], p["clients"], n, np.random.default_rng(data_ss), n_test=p["n_test"],
                                   clusters=p["clusters"], alpha=p["alpha"], task=p["task"], data_dir=p["data_dir"],
                                   draw=p["draw"], input_scale=p["input_scale"])
        except PoolTooSmallError as exc:
            if explicit_n or n <= 1:
                raise
            n = max(1, min(n - 1, int(n * exc.available / exc.need)))
            continue
        if n == p["n_per_client"]:
            return fed, []
        return fed, [f"n_per_client lowered from its default {p['n_per_client']} to {n}: the data set's class pools "
                     f"hold no more for {p['clients']} clients under this partition (set --n-per-client to choose)"]


# bytes of one sample's input as the loaders keep it: float32 pixels, int64 token ids, float32 bag of features
_SAMPLE_BYTES = {"digits": 4 * 64, "mnist": 4 * 784, "fmnist": 4 * 784, "cifar": 4 * 3072, "femnist": 4 * 784,
                 "shakespeare": 8 * 80, "agnews": 8 * 64, "amazon": 4 * 5000}
# Python- and dispatch-level cost of one backend call or local step on the torch backend (vmap set-up, chunks),
# and of its per-sample work relative to one batched pass of a single model (per-client parameters in vmap):
# measured on the 2-core EPYC with the embedded digits (tests/test_hostile_input.py checks the estimate)
TORCH_CALL_SECONDS = 1e-3
TORCH_PER_CLIENT_FACTOR = 2.0
# estimator hyper-parameters (--algo-param names) that synth.cost.algorithm_work reads under a flag's name
_WORK_HYPER = {"kmeans_n_init": "kmeans_n_init", "max_clusters": "max_clusters", "warmup_steps": "fesem_warmup",
               "pretrain_steps": "flexcfl_pretrain", "alpha": "flexcfl_alpha", "n_subspace": "pacfl_p",
               "local_clusters": "kfed_local_clusters", "meta_variant": "meta_variant",
               "estimation_interval": "fedsoft_interval", "ala_fraction": "ala_fraction"}


def check_data_size(p: dict[str, Any]) -> None:
    """Refuse, before any data is loaded, a federation whose inputs alone exceed the memory budget."""
    from synth.cost import check_memory

    base = p["dataset"].split("-", 1)[0]
    n_test = p["n_test"] or p["n_per_client"]
    need = 3.0 * p["clients"] * (p["n_per_client"] + n_test) * (_SAMPLE_BYTES.get(base, 4096) + 16)
    check_memory(need, f"the {p['dataset']} federation ({p['clients']} clients x {p['n_per_client']} training and "
                 f"{n_test} test samples)", hint="lower --clients, --n-per-client or --n-test")


def per_sample_seconds(model, backend) -> tuple[float, float]:
    """Measured seconds per sample of a loss and of a loss gradient of one model, on a batch of this federation's
    data on its device (after a warm-up): the prices of :func:`work_cost`."""
    from torch.func import grad

    # a batch of 256 samples, as the backend's batched passes see many at once (a small batch's fixed costs
    # would price every sample several times too high)
    rows = min(backend.n_clients, max(1, -(-256 // max(1, backend.X.shape[1]))))
    x = backend.X[:rows].flatten(0, 1)[:256]
    y = backend.y[:rows].flatten(0, 1)[:256]
    w = torch.full((len(x),), 1.0 / len(x), dtype=model.dtype, device=x.device)
    flat = model.init(0).to(x.device)
    g = grad(model.weighted_loss)

    def timed(fn) -> float:
        fn()
        best = float("inf")
        for _ in range(3):  # the fastest of three: time lost to other processes only ever adds
            t0 = time.perf_counter()
            fn()
            if x.device.type == "cuda":
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
        return best / len(x)

    with torch.no_grad():
        t_eval = timed(lambda: model.sample_losses(flat, x, y))
    return t_eval, timed(lambda: g(flat, x, y, w))


def work_cost(p: dict[str, Any], algo_params: dict[str, Any], fed, model, k: int, runs: int,
              prices: tuple[float, float]) -> dict[str, float]:
    """Estimated seconds and peak memory of fitting ``p['algo']`` on ``fed`` (:func:`synth.cost.algorithm_work`
    priced at the measured per-sample seconds, per-client work at :data:`TORCH_PER_CLIENT_FACTOR` times that)."""
    from synth.cost import CALL_SECONDS, SMALL_FLOPS_PER_SECOND, algorithm_work

    m, n, P = fed.n_clients, int(fed.X.shape[1]), model.n_params
    hyper = {key: p[key] for key in ("n_refine", "trmean_steps", "dist", "min_size") if p.get(key) is not None}
    hyper.update({_WORK_HYPER[key]: v for key, v in algo_params.items() if key in _WORK_HYPER})
    local_gd = p["local_train_steps"] or max(1, p["rounds"] * p["local_steps"])
    features = int(np.prod(fed.X.shape[2:])) if fed.X.ndim > 2 else 1
    work = algorithm_work(p["algo"], m, n, P, rounds=p["rounds"], k=k, restarts=runs, local_steps=p["local_steps"],
                          batch=p["batch_size"], averaging=p["averaging"], participation=p["participation"],
                          features=features, hyper=hyper, local_gd_steps=local_gd)
    t_eval, t_grad = prices
    seconds = (work["eval"] * t_eval + (work["grad_fused"] + work["grad"] * TORCH_PER_CLIENT_FACTOR) * t_grad
               + work["flops"] / SMALL_FLOPS_PER_SECOND + work["calls"] * (TORCH_CALL_SECONDS + CALL_SECONDS)
               + work["lib_calls"] * CALL_SECONDS)
    itemsize = 8 if p["dtype"] == "float64" else 4
    data = 2.0 * (fed.X.nbytes + fed.X_test.nbytes + fed.y.nbytes + fed.y_test.nbytes)
    # stacks of one model per client are trained chunk by chunk (the chunks within memory_mb): only the finished
    # stack, in the model's precision, and its float64 copy stay (IFCA Table I's local baseline at (4800, 50):
    # 12.6 GB estimated, 10.6 GB measured peak)
    stacks = work.get("client_stacks", 0.0)
    memory = (data + (work["memory"] - stacks) * (1.0 + 3.0 * itemsize / 8.0) + stacks * (itemsize + 8.0) / 16.0
              + 4.0 * runs * k * P * itemsize + (p["memory_mb"] or 256) * 2**20)
    return {"seconds": seconds, "memory": memory}


def run_experiment(params: dict[str, Any], *, history: bool = False, batched: bool = True,
                   download: bool = False, algo_params: dict[str, Any] | None = None,
                   on_round: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Build, fit and score one experiment; returns a JSON-serialisable record.

    ``batched=False`` runs the looped reference backend; ``algo_params`` are
    extra estimator hyper-parameters by name (e.g. SR-FCA's thresholds);
    ``on_round(t)`` is called after every completed (and checkpointed) round.
    """
    p = validate_params(params)
    algo_params = check_algo_params(p["algo"], algo_params)
    device = resolve_device(p["device"])
    dtype = torch.float64 if p["dtype"] == "float64" else torch.float32
    data_ss, algo_ss, batch_ss = np.random.SeedSequence(p["seed"]).spawn(3)
    if download:
        base = p["dataset"].split("-", 1)[0]
        name = {"fmnist": "fashion-mnist", "cifar": "cifar10", "agnews": "ag-news"}.get(base, base)
        if name in SOURCES:
            fetch(name, p["data_dir"])
    check_data_size(p)
    fed, n_note = _federation_that_fits(p, data_ss, explicit_n=params.get("n_per_client") is not None)
    held = None
    if p["validation"] > 0:
        fed, held = fed.hold_out(p["validation"])
    truth = fed.clusters
    k = check_sizes(p, int(fed.X.shape[1]), fed.n_clients, truth)
    model_name = default_model(p["dataset"], p["task"]) if p["model"] == "auto" else p["model"]
    model = fed.model(model_name, device=device, dtype=dtype)
    shared = _shared_mask(model) if p["share"] == "last" else None
    if shared is not None and p["algo"] != "ifca":
        raise ValueError(f"share='last' is IFCA's weight sharing (Sec. IV-C); got algo {p['algo']!r}")
    train, test = fed.backends(model, batch_size=p["batch_size"], optimizer=p["optimizer"], batched=batched,
                               seed=int(batch_ss.generate_state(1)[0]), shared=shared,
                               share_block=k if shared is not None else None, lr_decay=p["lr_decay"],
                               memory_budget=(p["memory_mb"] or (4096 if device.type == "cuda" else 256)) * 2**20)
    if p["local_init"] == "separate":
        if p["algo"] not in _LOCAL_START_ALGOS:
            raise ValueError(f"local_init='separate' applies to {', '.join(_LOCAL_START_ALGOS)} (their local models "
                             f"train once from the start); got algo {p['algo']!r}")
        _separate_local_starts(train, np.random.default_rng(np.random.SeedSequence(p["seed"], spawn_key=(3,))))
    rng = np.random.default_rng(algo_ss)
    spec = ALGOS[p["algo"]]
    steps = np.atleast_1d(p["step_size"])
    n_runs = p["n_init"] * len(steps)
    runs = n_runs if "n_init" in hyper_parameters(p["algo"]) else 1  # the estimator stacks its restarts
    recorder = _Recorder(test, truth, spec.rule, p["eval_every"], p["rounds"], runs,
                         k, on_round)
    resumable = spec.restarts
    init, start, ckpt = p["init"], 0, None
    if p["checkpoint"]:
        if not resumable:
            raise ValueError(f"checkpoint is supported for ifca and global, not {p['algo']!r}")
        if len(steps) > 1:
            raise ValueError("checkpoint needs a single step_size (restarts over step sizes cannot resume)")
        ckpt = load_checkpoint(p["checkpoint"])
        recorder.checkpoint = (p["checkpoint"], rng, _config(p, algo_params))
    if ckpt is not None:
        init, start = _resume(ckpt, p, rng, recorder, (runs, 1 if p["algo"] == "global" else k, model.n_params),
                              _config(p, algo_params))
        train.round_offset = start
    _check_work(p, algo_params, fed, model, train, k, runs, start)
    est = make_estimator(p["algo"], _hyper(p, spec, k, init, start, rng, recorder, algo_params),
                         explicit=tuple(algo_params or ()))
    recorder.offset = start
    t0 = time.perf_counter()
    try:
        est.fit(train)
    finally:
        if p["checkpoint"]:  # taken by load_checkpoint: one run per checkpoint file at a time, failed or not
            release_checkpoint(p["checkpoint"])
    seconds = time.perf_counter() - t0 + (ckpt["history"].get("seconds", 0.0) if ckpt else 0.0)
    res = est.result_
    final = _score(test, res, spec.rule, truth)
    validation = None
    if held is not None:
        val = held.backends(model, batched=batched, seed=int(batch_ss.generate_state(1)[0]),
                            memory_budget=(p["memory_mb"] or (4096 if device.type == "cuda" else 256)) * 2**20)[1]
        v = _score(val, res, spec.rule, truth)
        validation = {"validation_accuracy": v["test_accuracy"], "validation_loss": v["test_loss"],
                      "n_validation": int(held.n_test.sum())}
    machines = None
    if p["test_machines"] is not None:
        machines = _test_machines(p, model, res, spec.rule, batched, device, truth)
    record = {
        "dataset": p["dataset"], "algo": p["algo"], "model": model_name, "task": p["task"],
        "test_accuracy": final["test_accuracy"], "test_loss": final["test_loss"],
        **clustering_scores(res.labels, truth),
        "n_clusters": int(res.n_clusters), "rounds": int(p["rounds"]) if resumable else int(res.rounds),
        "clients": fed.n_clients, "n_per_client": int(fed.X.shape[1]), "n_params": model.n_params,
        "seconds": seconds, "device": str(device), "batched": bool(batched), "unassigned": final["unassigned"],
        "resumed_from_round": start if ckpt is not None else None, "notes": list(fed.notes) + n_note,
        "algo_params": dict(sorted(algo_params.items())),
    }
    record.update(train_identity_scores(lambda M, rule, lab: evaluate(test, M, rule, lab), res.models, spec.rule,
                                        res.labels))
    if validation is not None:
        record.update(validation)
    if "scored_labels" in res.extra:  # SR-FCA's public-code variant: the accuracy its code reports
        record.update(code_scores(test, res.extra["scored_models"], res.extra["scored_labels"]))
    if "status" in res.extra:  # e.g. SR-FCA: why no cluster survived
        record["status"] = str(res.extra["status"])
    record.update(chosen_threshold(p, est))
    if machines is not None:
        record.update(machines)
    if "splits" in res.extra:  # CFL: when it split, and the norms its split test (Sattler et al. Alg. 1) compares
        record["splits"] = [[int(a) for a in sp] for sp in res.extra["splits"]]
        sc = res.history.scalars
        record["update_norms"] = {k: [round(float(v), 6) for v in sc.get(k, [])]
                                  for k in ("mean_update_norm", "max_update_norm")}
        record["split_test"] = {k: getattr(est, k) for k in ("eps1", "eps2", "warmup_rounds", "min_split_size",
                                                             "linkage")}
    if history:
        best = int(res.extra.get("best_run", 0)) if spec.restarts else 0
        record["history"] = recorder.history(best)
    return record


def _check_work(p, algo_params, fed, model, train, k, runs, start) -> None:
    """Refuse a run whose estimated memory exceeds the budget or (inside a work ceiling: the command line) whose
    estimated time exceeds the ceiling, with the estimate, before any training."""
    from synth.cost import ceiling_active, check_memory, check_time

    rest = {**p, "rounds": p["rounds"] - start}
    # the per-sample prices are measured only where a time ceiling applies (a command line): a Python caller
    # running many experiments does not pay for the measurement
    timed = ceiling_active()
    cost = work_cost(rest, algo_params, fed, model, k, runs, per_sample_seconds(model, train) if timed else (0, 0))
    what = (f"nets run --algo {p['algo']} ({fed.n_clients} clients x {fed.X.shape[1]} samples, {model.n_params} "
            f"parameters, {rest['rounds']} rounds)")
    check_memory(cost["memory"], what, seconds=cost["seconds"] if timed else None,
                 hint="lower --clients or --n-per-client, or choose an algorithm without one model per client")
    if timed:
        check_time(cost["seconds"], what, hint="lower --rounds, --local-steps, --local-train-steps, --n-init or the "
                   "sizes")


def chosen_threshold(p: dict, est) -> dict:
    """SR-FCA's ``threshold="auto"``: the number it took (ONE_SHOT's and MERGE's lambda, ``threshold_``) and the
    quantiles of the pairwise distances it cut, for the record; nothing for a given threshold."""
    if p.get("threshold") != "auto" or not hasattr(est, "threshold_"):
        return {}
    return {"threshold_chosen": float(est.threshold_),
            "distance_quantiles": [float(q) for q in getattr(est, "distance_quantiles_", [])]}


def _hyper(p, spec, k, init, start, rng, recorder, algo_params) -> dict:
    """Every hyper-parameter an estimator of synth.algorithms may take, by its own name."""
    lr = float(np.atleast_1d(p["step_size"])[0])
    local_train = p["local_train_steps"] or max(1, p["rounds"] * p["local_steps"])
    if "threshold" in hyper_parameters(p["algo"]) and p["threshold"] is None and "threshold" not in (algo_params or {}):
        raise ValueError(f"threshold (SR-FCA's lambda) is required for algo {p['algo']!r}: pass --threshold VALUE "
                         "(a cross-cluster loss for --dist cross)")
    hyper = {
        "n_clusters": k, "n_rounds": p["rounds"] - start,
        "step_size": p["step_size"] if spec.restarts else lr,
        "averaging": p["averaging"], "local_steps": p["local_steps"], "participation": p["participation"],
        "init": init, "n_init": p["n_init"], "random_state": rng, "monitor": recorder, "monitor_every": 1,
        # Local / one-shot local models: as many local steps as the federated run makes
        "local": "gd", "local_train_steps": local_train,
        "local_step_size": lr,
        "threshold": p["threshold"], "min_size": p["min_size"], "beta": p["beta"], "n_refine": p["n_refine"],
        "dist": p["dist"], "trmean_steps": p["trmean_steps"] or local_train, "trmean_step_size": lr,
        "clustering": p["clustering"], "eps1": p["eps1"], "eps2": p["eps2"],
        "warmup_rounds": p["warmup_rounds"], "min_split_size": p["min_split_size"], "linkage": p["linkage"],
    }
    hyper = {key: v for key, v in hyper.items() if v is not None}
    hyper.update(algo_params or {})
    return hyper


_LOCAL_START_ALGOS = ("local", "local-kmeans", "oneshot-kmeans", "oneshot-ifca")


def _separate_local_starts(train, rng: np.random.Generator) -> None:
    """Local models from one independent default initialisation per client instead of one shared start.

    SR-FCA Sec. 5 trains the clients' local models of Local-KMeans from scratch without saying whether they
    share a start; a shared start keeps k-means on their weights meaningful, separate starts test that choice.
    """
    starts = train.to_numpy(train.init_models(train.n_clients, "default", rng))
    shared_start = train.local_models

    def local_models(method: str = "gd", steps: int = 100, lr: float = 0.1, init=None):
        return shared_start(method, steps, lr, init=starts if init is None else init)

    train.local_models = local_models  # this backend instance only


def _test_machines(p: dict, model, res, rule: str, batched: bool, device, truth=None) -> dict:
    """IFCA Sec. VI-B: accuracy on ``test_machines`` fresh machines of ``test_machine_size`` test images each,
    spread evenly over the clusters, every machine holding images of one cluster (one rotation).

    The machines are a second federation of the same data set and partition drawn from the test pool with its
    own seed stream (the rotations of ``rotated`` are fixed per cluster, so a machine's cluster means the same
    distortion as a training client's).  IFCA's m_test = 10000 k / n machines of n images hold every image of the
    MNIST test split once per rotation.  Scoring, as IFCA's text and code (jichan3751/ifca, mnist/) define it:

    * IFCA and the global model: "For every test worker machine, we run inference on all learned models ... and
      calculate the accuracy from the model that produces the smallest loss value" (the min-loss rule on the
      machine's own images; train_cluster_mnist.py ``get_inference_stats``);
    * Local (rule ``"own"``, one model per training client): "the models are tested by measuring the accuracy on
      the test data with the same distribution (i.e. those have the same rotation). We report the accuracy
      averaged over all the models in worker machines": model i on every test machine of client i's true cluster
      (``truth``), averaged over the models (train_cluster_mnist_local.py ``get_inference_stats``).
    """
    none = {"n_test_machines": p["test_machines"], "test_accuracy_machines": None, "test_loss_machines": None}
    if len(res.models) == 0 or (rule == "own" and truth is None):  # no model, or no cluster to match a machine
        return none
    rng = np.random.default_rng(np.random.SeedSequence(p["seed"], spawn_key=(4,)))
    fed = build_federation(p["dataset"], p["test_machines"], 1, rng, n_test=p["test_machine_size"],
                           clusters=p["clusters"], alpha=p["alpha"], task=p["task"], data_dir=p["data_dir"])
    _, test = fed.backends(model, batched=batched, memory_budget=(p["memory_mb"] or (
        4096 if device.type == "cuda" else 256)) * 2**20)
    if rule == "own":
        scored = _own_cluster_scores(test, res.models, truth, fed.clusters)
    else:
        scored = evaluate(test, res.models, "min-loss")
    return {"n_test_machines": int(fed.n_clients), "test_machine_size": int(fed.X_test.shape[1]),
            "test_machines_rule": "own cluster" if rule == "own" else "min-loss",
            "test_accuracy_machines": scored["test_accuracy"], "test_loss_machines": scored["test_loss"]}


def _own_cluster_scores(test, models, truth, machine_clusters) -> dict:
    """IFCA Sec. VI-B's Local test: local model i scored on all the test machines of its client's cluster
    ``truth[i]``; loss and accuracy averaged over the models (each over its cluster's test images)."""
    truth = np.asarray(truth, dtype=np.int64)
    stack = test.from_numpy(models)  # converted once, not once per model
    if len(truth) != stack.shape[0]:
        raise ValueError(f"truth must hold one cluster per local model ({stack.shape[0]}), got {len(truth)}")
    loss, acc = np.empty(len(truth)), np.empty(len(truth))
    for c in np.unique(truth):  # loop over clusters
        rows = np.flatnonzero(machine_clusters == c)
        if len(rows) == 0:
            raise ValueError(f"test_machines must give every cluster a machine: cluster {c} has none")
        w = test.n_samples[rows].astype(np.float64)
        for i in np.flatnonzero(truth == c):  # loop over local models: one forward over the cluster's test images
            lo, ac = test.scores(stack, np.full(len(rows), i), clients=rows)
            loss[i], acc[i] = np.sum(lo * w) / w.sum(), np.sum(ac * w) / w.sum()
    mean_acc = float(acc.mean())
    return {"test_loss": float(loss.mean()), "test_accuracy": None if np.isnan(mean_acc) else mean_acc}


def check_sizes(p: dict[str, Any], n: int, m: int, truth) -> int:
    """The checks of a federation of ``m`` clients of ``n`` training samples against the run's parameters ``p``: a
    minibatch of at most ``n`` samples, at most ``m`` cluster models; returns the cluster models k (``n_clusters``,
    else the true clusters, else 3).  ``nets run`` and ``nets flower`` (before Ray starts) both call it."""
    if p["batch_size"] is not None and p["batch_size"] > n:
        raise ValueError(f"batch_size must be at most the {n} training samples per client, got {p['batch_size']} "
                         "(leave it out for full-batch steps)")
    K = int(np.max(truth)) + 1 if truth is not None else None
    k = p["n_clusters"] or K or 3
    if k > m:
        raise ValueError(f"n_clusters must be in [1, {m}] (the number of clients), got {k}")
    return k


def _score(test, res, rule: str, truth) -> dict:
    if len(res.models) == 0:  # e.g. SR-FCA kept no cluster: nothing to evaluate
        return {"test_accuracy": None, "test_loss": None, "unassigned": test.n_clients}
    if rule == "own":  # Local: client i is scored with its own model
        return evaluate(test, res.models, "cluster", np.arange(test.n_clients))
    return evaluate(test, res.models, rule, res.labels if rule == "cluster" else None)


def _shared_mask(model) -> np.ndarray:
    """IFCA Sec. IV-C: every coordinate but those of the last layer (weight and bias) is shared."""
    slices = model.slices()
    names = list(slices)
    last = names[-2:] if len(names) >= 2 and names[-1].endswith("bias") else names[-1:]
    mask = np.ones(model.n_params, dtype=bool)
    for name in last:
        mask[slices[name]] = False
    return mask


def _config(p: dict, algo_params: dict) -> dict:
    """What a checkpoint must have been written with to be resumed: every setting but the resumable ones, and the
    --algo-param pairs (checked like the named flags)."""
    return {**{k: v for k, v in p.items() if k not in _RESUMABLE}, "algo_params": dict(sorted(algo_params.items()))}


def _resume(ckpt: dict, p: dict, rng: np.random.Generator, recorder, want: tuple[int, int, int],
            current: dict) -> tuple[np.ndarray, int]:
    saved = ckpt["config"]
    # a parameter newer than the checkpoint is compatible when it has its default value (no --algo-param: {})
    defaults = {k: _jsonable(PARAMS[k].check(k, PARAMS[k].default)) if k in PARAMS else {}
                for k in current if k not in saved}
    diff = sorted(k for k in set(saved) | set(current)
                  if saved.get(k, defaults.get(k)) != _jsonable(current.get(k)))
    if diff:
        k = diff[0]
        raise ValueError(f"checkpoint {p['checkpoint']} was written with {k}={saved.get(k)!r}, this run has "
                         f"{k}={current.get(k)!r}; use another checkpoint file or the same settings")
    start = ckpt["round"] + 1
    if start > p["rounds"]:
        raise ValueError(f"rounds must be at least {start} to resume {p['checkpoint']} (it holds {start} rounds), "
                         f"got {p['rounds']}")
    shape = tuple(ckpt["models"].shape)
    if shape != tuple(want):
        raise ValueError(f"checkpoint {p['checkpoint']} holds models of shape {shape}, this run needs "
                         f"{tuple(want)} (runs, models, parameters); it was "
                         "edited or written for another network -- delete it or choose another checkpoint file")
    try:
        rng.bit_generator.state = ckpt["rng_state"]
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
        raise ValueError(f"checkpoint {p['checkpoint']} holds no usable random-generator state (it was edited); "
                         "delete it or choose another checkpoint file") from None
    rows = ckpt["history"]["rows"]
    if any(not isinstance(r.get("round"), int) or not 0 <= r["round"] < start for r in rows):
        raise ValueError(f"checkpoint {p['checkpoint']} holds history rows outside rounds 0..{start - 1} (it was "
                         "edited); delete it or choose another checkpoint file")
    recorder.load(ckpt["history"])
    return ckpt["models"].numpy().astype(np.float64), start


def _jsonable(value):
    import json

    return json.loads(json.dumps(value))


class _Recorder:
    """The estimator's monitor: per-round clustering metrics, test scores every ``eval_every`` rounds, checkpoints.

    IFCA calls the monitor once per restart run at the end of every round; the
    checkpoint is written after the last run's call, when the estimator's
    random generator holds exactly the state the next round starts from.
    """

    def __init__(self, test, truth, rule, eval_every, rounds, n_runs, k, on_round):
        # test: the clients' test data (a TorchBackend), or score(models, rule, labels) -> dict (nets flower's)
        self.score = test if callable(test) else lambda models, rule, labels: evaluate(test, models, rule, labels)
        self.truth, self.rule = truth, rule
        self.eval_every, self.rounds, self.n_runs, self.k = eval_every, rounds, n_runs, k
        self.on_round = on_round
        self.offset = 0
        self.checkpoint = None
        self.rows: list[dict] = []  # one dict per (round, run)
        self._pending: list[np.ndarray] = []
        self._t0 = time.perf_counter()
        self._seconds = 0.0

    def load(self, hist: dict) -> None:
        self.rows = list(hist.get("rows", []))
        self._seconds = float(hist.get("seconds", 0.0))

    def __call__(self, t: int, models: np.ndarray, labels: np.ndarray) -> dict:
        t = t + self.offset
        run = len(self._pending)
        row = {"round": t, "run": run, **self._clustering(t, labels)}
        due = self.eval_every and ((t + 1) % self.eval_every == 0 or t == self.rounds - 1)
        # an empty stack (e.g. SR-FCA's ONE_SHOT kept no cluster) has nothing to evaluate this round
        if due and self.rule != "own" and len(models) > 0:
            scored = self.score(models, self.rule, labels if self.rule == "cluster" else None)
            row.update(test_accuracy=scored["test_accuracy"], test_loss=scored["test_loss"])
        self.rows.append(row)
        self._pending.append(models)
        if len(self._pending) == self.n_runs:
            stack = np.stack(self._pending)
            self._pending = []
            if self.checkpoint is not None:
                path, rng, config = self.checkpoint
                save_checkpoint(path, torch.as_tensor(stack, dtype=torch.float64), t, rng.bit_generator.state,
                                _jsonable(config), {"rows": self.rows, "seconds": self.seconds()})
            if self.on_round is not None:
                self.on_round(t)
        return {}

    def _clustering(self, t: int, labels) -> dict:
        return _metrics(labels, self.truth)

    def seconds(self) -> float:
        return self._seconds + time.perf_counter() - self._t0

    def history(self, best_run: int) -> dict:
        rows = [r for r in self.rows if r["run"] == best_run]
        keys = ("ari", "misclustering", "test_accuracy", "test_loss")
        return {"rounds": [r["round"] for r in rows], **{k: [r.get(k) for r in rows] for k in keys}}


def _metrics(labels, truth) -> dict:
    scores = clustering_scores(labels, truth)
    return {"ari": scores["ari"], "misclustering": scores["misclustering"]}
