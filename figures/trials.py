"""Trial functions ``(params, seed) -> dict`` that the targets run through :func:`figures.runs.run_points`.

Module-level (picklable) so that joblib workers can run them.  Every trial derives all its randomness
from ``seed``; the synthetic ones use the seed scheme of :func:`synth.experiment.run_experiment`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["TRIAL_FUNCTIONS", "closest_truth_distance", "ifca_fig3_trial", "nets_loss_matrix_trial", "nets_trial",
           "resolve_trial", "shared_instance_trial", "synth_history_trial", "synth_trial", "theory_trial"]


def synth_trial(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One synthetic experiment (:func:`synth.experiment.run_experiment`) at ``params`` with ``seed``."""
    from synth.experiment import run_experiment

    return run_experiment({**params, "seed": seed})


def synth_history_trial(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """:func:`synth_trial` plus the clustering accuracy (ARI and matched accuracy) after every round.

    The true clusters of the generators are ``repeat(arange(K), clients_per_cluster)``
    (:mod:`synth.federation`), so the per-round labels of the history can be scored here.
    """
    from synth import metrics
    from synth.experiment import run_experiment, validate_params

    p = validate_params({**params, "seed": seed})
    rec = run_experiment(p, history=True)
    hist = rec.pop("history")
    truth = np.repeat(np.arange(p["K"]), p["clients_per_cluster"])
    labels = hist.get("labels", [])
    rec["round_ari"] = [metrics.adjusted_rand(np.asarray(lab), truth) for lab in labels]
    rec["round_accuracy"] = [1.0 - metrics.matched_misclustering(np.asarray(lab), truth) for lab in labels]
    return rec


def ifca_fig3_trial(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """IFCA Sec. VI-A success of one trial, judged two ways over all restarts (inits x step sizes).

    * ``success_matched`` -- the toolkit's rule: some restart has the one-to-one matched distance
      ``(1/k) sum_j ||theta_j - theta*_pi(j)|| <= 0.6 sigma`` (IFCA journal Sec. VI-A, ``dist <= 0.6 sigma``);
    * ``success_code`` -- the public code's rule: some restart has the mean distance of each model to its
      *closest* truth ``< 0.6 sigma + 0.001``, under which all k models on one truth can count.

    ``collapsed_success`` marks trials that succeed only under the code's rule.  Same seeds as
    :func:`synth.experiment.run_experiment` (data and algorithm streams spawned from ``seed``).
    """
    from synth import metrics
    from synth.experiment import fit_experiment, truths_for

    p, fed, est, _ = fit_experiment({**params, "seed": seed})
    truths = truths_for(fed)
    runs = est.result_.extra["models_all"]  # (restarts, k, d)
    ok = ~np.asarray(est.result_.extra["diverged"], dtype=bool)
    matched = np.array([metrics.param_error(mod, truths) if good else np.inf for mod, good in zip(runs, ok,
                                                                                                    strict=True)])
    closest = np.array([closest_truth_distance(mod, truths) if good else np.inf
                        for mod, good in zip(runs, ok, strict=True)])
    threshold = p["success_factor"] * p["sigma"]
    s_matched = metrics.restart_success(matched, threshold)
    slack = 0.001 if p.get("code_slack") is None else p["code_slack"]  # the public code's R-noise grids: 0.001
    s_code = bool(closest.min() < threshold + slack)
    return {
        "success_matched": s_matched,
        "success_code": s_code,
        "collapsed_success": bool(s_code and not s_matched),
        "best_matched_dist": float(matched.min()),
        "best_closest_dist": float(closest.min()),
        "separation": float(metrics_separation(fed.theta)),
        "theta_norm": float(np.linalg.norm(fed.theta, axis=1).mean()),
        "restarts": int(len(runs)),
        "diverged_restarts": int((~ok).sum()),
        "iterations": int(np.sum(est.result_.extra.get("run_rounds", np.full(len(runs), p["rounds"])))),
    }


def shared_instance_trial(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """Several algorithms on the *same* sampled federation: ``{"generator": {...}, "algos": {label: {...}}}``.

    :func:`synth.experiment.run_experiment` draws the data from the first stream spawned from ``seed`` and
    the algorithm's randomness from the second, so every algorithm sees identical clients.  Returns
    ``{label: {misclustering, misclustering_matched, ari, param_error, n_clusters}}``.
    """
    from synth.experiment import run_experiment

    out = {}
    for label, algo in params["algos"].items():  # loop over the few compared algorithms
        rec = run_experiment({**params["generator"], **algo, "seed": seed})
        out[label] = {k: rec[k] for k in ("misclustering", "misclustering_matched", "ari", "param_error",
                                          "n_clusters")}
    return out


def closest_truth_distance(models: np.ndarray, truths: np.ndarray) -> float:
    """IFCA public code's ``dist``: the mean over models of the distance to the *closest* truth (no matching).

    Unlike IFCA Sec. VI-A's one-to-one ``dist`` (:func:`synth.metrics.param_error`), k models sitting on one
    truth score 0 here.
    """
    from synth.theta import pairwise_distances

    return float(pairwise_distances(np.asarray(models, dtype=np.float64),
                                    np.asarray(truths, dtype=np.float64)).min(1).mean())


def metrics_separation(theta: np.ndarray) -> float:
    """Delta = min_{j != j'} ||theta*_j - theta*_j'||."""
    from synth.theta import separation

    return separation(theta)


def nets_trial(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One neural-network experiment (:func:`nets.experiment.run_experiment`) with its per-round history.

    ``params`` may hold ``algo_params`` (extra estimator hyper-parameters, e.g. CLoVE's ``matching``).
    torch runs single-threaded so that the numbers do not depend on how many trials share the machine.
    """
    import torch

    from nets.experiment import run_experiment

    torch.set_num_threads(1)
    p = dict(params)
    algo_params = p.pop("algo_params", None) or None
    ckpt_dir = p.pop("checkpoint_dir", None)
    ckpt = None
    if ckpt_dir is not None:
        # a long full-size run checkpoints every round (nets resumes IFCA/global runs exactly), so an interrupted
        # trial continues where it stopped; the file is named by the trial's parameters and seed
        import hashlib
        import json
        from pathlib import Path

        key = hashlib.sha256(json.dumps({**p, "seed": seed}, sort_keys=True).encode()).hexdigest()[:20]
        ckpt = Path(ckpt_dir) / f"{key}.ckpt"
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        p["checkpoint"] = str(ckpt)
    try:
        record = run_experiment({**p, "seed": seed}, history=True, algo_params=algo_params)
    except RuntimeError as exc:
        # a torch-level failure inside one run (e.g. nets evaluating an empty model stack when SR-FCA's
        # ONE_SHOT keeps no cluster) is recorded with its reason; the targets count such trials as failed
        return {"error": f"{type(exc).__name__}: {exc}"}
    if ckpt is not None and ckpt.exists():
        ckpt.unlink()  # the trial is finished and goes to the store
    return record


def nets_loss_matrix_trial(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """CLoVE Fig. 4: train one algorithm on a network federation and return the test loss of every client on
    every learned model (``loss_matrix[i][j]`` = mean test loss of client ``i`` on model ``j``).

    Built from ``nets``' public pieces (:func:`nets.datasets.build_federation`, the federation's model and
    backends, :func:`nets.algorithms.make_estimator`) because :func:`nets.experiment.run_experiment` does not
    return the models.  Keys: dataset, algo, clients, n_per_client, clusters, rounds, local_steps, step_size,
    optimizer, batch_size, task, device.
    """
    import torch

    from nets.algorithms import make_estimator
    from nets.datasets import build_federation, default_model
    from nets.device import resolve_device

    torch.set_num_threads(1)
    data_ss, algo_ss, batch_ss = np.random.SeedSequence(seed).spawn(3)
    fed = build_federation(params["dataset"], params["clients"], params["n_per_client"],
                           np.random.default_rng(data_ss), n_test=params.get("n_test"), clusters=params.get("clusters"),
                           task=params["task"],
                           data_dir=params.get("data_dir"))
    device = resolve_device(params.get("device", "auto"))
    model = fed.model(default_model(params["dataset"], params["task"]), device=device)
    train, test = fed.backends(model, batch_size=params.get("batch_size"), optimizer=params.get("optimizer", "sgd"),
                               seed=int(batch_ss.generate_state(1)[0]))
    k = params.get("n_clusters") or int(fed.clusters.max()) + 1
    steps = params["rounds"] * params["local_steps"]
    hyper = {"n_clusters": k, "n_rounds": params["rounds"], "step_size": params["step_size"],
             "averaging": "model", "local_steps": params["local_steps"], "init": "different"
             if params["algo"] == "clove" else "default", "random_state": np.random.default_rng(algo_ss),
             "local": "gd", "local_train_steps": steps,  # LocalModels: one model per client, rounds * local_steps
             "local_step_size": params["step_size"]}  # GD steps of the federated step size
    est = make_estimator(params["algo"], hyper)
    est.fit(train)
    models = est.result_.models
    L = test.losses(models)  # (m, M)
    labels = np.asarray(est.result_.labels, dtype=np.int64)
    return {"loss_matrix": np.asarray(L, dtype=np.float64).tolist(), "labels": labels.tolist(),
            "clusters": np.asarray(fed.clusters).tolist(), "n_models": int(len(models))}


def theory_trial(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One check of a :mod:`theory` result: ``{"result", "params", "constants", "trials"}`` -> ``Check.to_dict()``."""
    from theory.results import get_result

    chk = get_result(params["result"]).check(params.get("params") or {}, params.get("constants") or {},
                                             trials=params["trials"], seed=seed)
    return chk.to_dict()


def atlas_cell_trial(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One cell of the tightness atlas (:func:`theory.atlas.evaluate_cell`), infinities and NaNs as strings."""
    from theory.atlas import evaluate_cell, json_safe, unjson

    return json_safe(evaluate_cell(unjson(params), seed))


# The only trial functions a stored run or store may name.  A result file never chooses code: a name outside this
# table is refused by :func:`resolve_trial` before anything is imported.
TRIAL_FUNCTIONS: dict[str, Any] = {f"{__name__}.{fn.__name__}": fn for fn in (
    synth_trial, synth_history_trial, ifca_fig3_trial, shared_instance_trial, nets_trial, nets_loss_matrix_trial,
    theory_trial, atlas_cell_trial)}


def resolve_trial(name: object, where: str = "trial_fn") -> Any:
    """The toolkit's trial function called ``name``; ``ValueError`` naming ``where`` (file and field) for any other
    value, so that no file can make the toolkit import or call a callable it does not own."""
    fn = TRIAL_FUNCTIONS.get(name) if isinstance(name, str) else None
    if fn is None:
        known = ", ".join(sorted(TRIAL_FUNCTIONS))
        raise ValueError(f"{where}: {str(name)[:80]!r} is not one of the toolkit's trial functions ({known})")
    return fn
