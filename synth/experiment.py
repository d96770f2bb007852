"""One synthetic experiment = generator parameters + algorithm + hyper-parameters -> a metrics record.

The parameter schema :data:`PARAMS` is the single source of truth for the
``python -m synth run`` flags, the keys of sweep specs (TOML) and their
validation, so the three can never drift apart.  :func:`run_experiment` is
what the CLI and the Monte Carlo engine call.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import metrics
from .algorithms import CFL, IFCA, SRFCA, CLoVE, GlobalModel, LocalKMeans, LocalModels, OneShotIFCA, OneShotKMeans
from .algorithms.fedala import FedALA
from .algorithms.fedsoft import FedSoft
from .algorithms.fesem import FeSEM
from .algorithms.flexcfl import FlexCFL
from .algorithms.kfed import KFED
from .algorithms.pacfl import PACFL
from .algorithms.perfedavg import PerFedAvg
from .federation import Federation, LogisticMixture, MixedLinearRegression, anisotropic_cov
from .init import ball_init
from .validation import check_array, check_choice, check_int, check_real, did_you_mean

__all__ = ["ALGORITHMS", "PARAMS", "IFCAVerdict", "Param", "fit_experiment", "make_estimator", "make_federation",
           "run_experiment", "validate_params"]


@dataclass(frozen=True)
class Param:
    """One experiment parameter: type (int, float, str, ints, floats), default, help, checks; ``words``: strings a
    number parameter also takes (SR-FCA's ``threshold="auto"``)."""

    kind: str
    default: Any
    help: str
    choices: tuple[str, ...] | None = None
    low: float | None = None
    high: float | None = None
    low_inclusive: bool = True
    high_inclusive: bool = True
    words: tuple[str, ...] = ()

    def check(self, name: str, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str) and value in self.words:
            return value
        if self.kind == "str":
            return check_choice(name, value, self.choices) if self.choices else str(value)
        if self.kind in ("ints", "floats"):
            items = _as_list(name, value)
            one = Param(self.kind[:-1], None, "", low=self.low, high=self.high,
                        low_inclusive=self.low_inclusive, high_inclusive=self.high_inclusive)
            out = [one.check(name, v) for v in items]
            if not out:
                raise ValueError(f"{name} must not be empty")
            return out if len(out) > 1 else out[0]
        if self.kind == "int":
            lo = None if self.low is None else int(np.ceil(self.low)) + (0 if self.low_inclusive else 1)
            return check_int(name, value, low=lo, high=None if self.high is None else int(self.high))
        return check_real(name, value, low=self.low, high=self.high, low_inclusive=self.low_inclusive,
                          high_inclusive=self.high_inclusive)


def _as_list(name: str, value: Any) -> list:
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if any(not p for p in parts):
            raise ValueError(f"{name} must be a number or comma-separated numbers without empty items, "
                             f"got {value!r}")
        out = []
        for p in parts:
            try:
                out.append(int(p) if p.lstrip("-").isdigit() else float(p))
            except ValueError:
                raise ValueError(f"{name} must be a number or comma-separated numbers, got {value!r}") from None
        return out
    if isinstance(value, (list, tuple, np.ndarray)):
        return list(value)
    return [value]


PARAMS: dict[str, Param] = {
    # generator
    "family": Param("str", "linear", "model family: squared-loss MLR or l2-regularised logistic",
                    choices=("linear", "logistic")),
    "K": Param("int", 2, "number of true clusters", low=1),
    "clients_per_cluster": Param("ints", 10, "clients per cluster (int or comma list of K ints)", low=1),
    "n": Param("ints", 100, "samples per client (int or comma list of m ints)", low=1),
    "d": Param("int", 10, "dimension", low=1),
    "sigma": Param("float", 0.1, "noise standard deviation (linear family)", low=0.0),
    "R": Param("float", 1.0, "scale of theta* (IFCA separation parameter)", low=0.0, low_inclusive=False),
    "theta": Param("str", "bernoulli", "theta* mode: bernoulli (IFCA text, norm R), bernoulli-code "
                   "(IFCA code, R*Bernoulli), sphere (CLoVE, needs --delta), client-optima (SR-FCA, "
                   "needs --eps1 --eps2)", choices=("bernoulli", "bernoulli-code", "sphere", "client-optima")),
    "delta": Param("float", None, "CLoVE sphere separation Delta in (0, 2]", low=0.0, high=2.0,
                   low_inclusive=False),
    "eps1": Param("float", None, "SR-FCA intra-cluster diameter eps1 >= 0 (CFL's threshold is --cfl-eps1)",
                  low=0.0),
    "eps2": Param("float", None, "SR-FCA inter-cluster separation eps2 > eps1 (CFL's threshold is --cfl-eps2)",
                  low=0.0),
    "reg": Param("float", 0.1, "l2 regularisation (logistic family)", low=0.0, low_inclusive=False),
    "cov_condition": Param("float", 1.0, "condition number of a diagonal feature covariance (1 = identity)",
                           low=1.0),
    "regime": Param("str", "fixed", "data regime: fixed, fresh (resample every round), split (IFCA 2T split)",
                    choices=("fixed", "fresh", "split")),
    "seed": Param("int", 0, "random seed (data and algorithm streams are spawned from it)", low=0),
    # algorithm
    "algo": Param("str", "ifca", "algorithm", choices=("ifca", "local", "global", "oneshot-kmeans", "srfca", "clove",
                                                       "local-kmeans", "oneshot-ifca", "cfl", "perfedavg", "fedala",
                                                       "fedproto", "fedpac",
                                                       "kfed", "pacfl", "flexcfl", "fesem", "fedsoft")),
    "n_clusters": Param("int", None, "number of cluster models k (default: K)", low=1),
    "rounds": Param("int", 100, "communication rounds / parallel iterations T", low=0),
    "step_size": Param("floats", 0.1, "step size gamma (comma list = restart over step sizes)", low=0.0,
                       low_inclusive=False),
    "averaging": Param("str", "gradient", "gradient (IFCA option I) or model averaging (option II)",
                       choices=("gradient", "model")),
    "local_steps": Param("int", 10, "local steps tau for model averaging", low=1),
    "participation": Param("float", 1.0, "fraction of clients per round, in (0, 1]", low=0.0, high=1.0,
                           low_inclusive=False),
    "init": Param("str", "bernoulli", "initial models: bernoulli (IFCA VI-A), gaussian, zeros, same "
                  "(identical models, CLoVE Fig. 1), ball (IFCA Assumption 1, radius (1/2-alpha)Delta)",
                  choices=("bernoulli", "gaussian", "zeros", "same", "ball")),
    "alpha": Param("float", 0.25, "IFCA closeness alpha for --init ball, in (0, 1/2)", low=0.0, high=0.5,
                   low_inclusive=False, high_inclusive=False),
    "n_init": Param("int", 1, "random initialisations (restarts; best by total loss)", low=1),
    "local": Param("str", "erm", "local models: exact erm or gd", choices=("erm", "gd")),
    "local_train_steps": Param("int", 100, "GD steps for --local gd", low=1),
    "local_step_size": Param("float", 0.1, "GD step size for --local gd", low=0.0, low_inclusive=False),
    "success_factor": Param("float", 0.6, "IFCA success: param_error <= factor * sigma", low=0.0),
    "code_slack": Param("float", None, "IFCA Fig. 3: also judge the public code's rule (each model to its closest "
                        "truth, mean < factor * sigma + code_slack; 0.001 in its R-noise grids, 0 in its m-n grids)",
                        low=0.0),
    "stopping": Param("str", "fixed", "IFCA restarts: fixed (all --rounds iterations, Sec. VI-A) or converged (a "
                      "diverged run leaves at once; a run stops once it cannot change the success verdict, the trial "
                      "once its verdict is decided; without a verdict (logistic) at its fixed point)",
                      choices=("fixed", "converged")),
    "tol": Param("float", 1e-4, "IFCA --stopping converged: fixed point when identities are unchanged and "
                 "||G_t|| <= tol ||G_0||", low=0.0),
    "dtype": Param("str", "float64", "floating-point type of the data, models and kernel (float32: the IFCA public "
                   "code's precision)", choices=("float64", "float32")),
    # SR-FCA and ONE_SHOT-IFCA (SR-FCA Alg. 1-4)
    "threshold": Param("float", None, "SR-FCA/ONE_SHOT threshold lambda > 0; None = (eps1+eps2)/2 (SR-FCA Lemma 4.6) "
                       "with --dist l2 and --eps1/--eps2, else required", low=0.0, low_inclusive=False),
    "min_size": Param("int", 2, "SR-FCA/ONE_SHOT size parameter t: least clients of a kept cluster, in [1, m]",
                      low=1),
    "beta": Param("float", 0.1, "SR-FCA trimming level beta of TrMean (Def. 3.2), in [0, 1/2)", low=0.0, high=0.5,
                  high_inclusive=False),
    "n_refine": Param("int", 2, "SR-FCA number of REFINE steps R", low=0),
    "trmean_steps": Param("int", 50, "SR-FCA TrimmedMeanGD steps T (Alg. 3)", low=1),
    "trmean_step_size": Param("float", 0.1, "SR-FCA TrimmedMeanGD step size eta", low=0.0, low_inclusive=False),
    "diameter": Param("float", None, "SR-FCA diameter D of W, a ball around 0; None = W is R^d (no projection)",
                      low=0.0, low_inclusive=False),
    "dist": Param("str", "l2", "SR-FCA/ONE_SHOT distance: l2 between models or cross (cross-cluster loss, Def. 5.1)",
                  choices=("l2", "cross")),
    "resample": Param("str", "no", "SR-FCA: fresh data and local models before each REFINE (Thm 4.11; takes "
                      "effect with --regime fresh)", choices=("no", "yes")),
    # CLoVE (CLoVE Alg. 1, Sec. 5)
    "k_selection": Param("str", "given", "CLoVE number of clusters: given (--n-clusters, default K) or silhouette "
                         "(unknown K: --max-clusters models, k picked by silhouette score)",
                         choices=("given", "silhouette")),
    "max_clusters": Param("int", 8, "CLoVE unknown-K mode: number of models, largest k tried", low=2),
    "loss_vector": Param("str", "loss", "CLoVE embedding: loss (loss vectors) or sqrt (square-root loss vectors)",
                         choices=("loss", "sqrt")),
    "clustering": Param("str", "kmeans", "CLoVE loss-vector clustering: kmeans or agglomerative",
                        choices=("kmeans", "agglomerative")),
    "matching": Param("str", "min-cost", "CLoVE cluster-to-model map: min-cost (bipartite matching) or none "
                      "(ablation: clusters by smallest client id get models 0, 1, ...)", choices=("min-cost", "none")),
    "first_round": Param("str", "evaluation", "CLoVE first-round assignment: evaluation (loss vectors) or random "
                         "(CLoVE Fig. 2)", choices=("evaluation", "random")),
    "kmeans_n_init": Param("int", 10, "k-means restarts (clove, oneshot-kmeans, local-kmeans)", low=1),
    # CFL (Sattler et al. 2021)
    "cfl_eps1": Param("float", 0.05, "CFL: split a cluster when its mean update norm < eps1", low=0.0,
                      low_inclusive=False),
    "cfl_eps2": Param("float", 0.5, "CFL: ... and its largest client update norm > eps2", low=0.0,
                      low_inclusive=False),
    "cfl_warmup": Param("int", 20, "CFL: no split before this round", low=0),
    "cfl_min_split": Param("int", 3, "CFL: least clients of a cluster that may be split", low=2),
    # Per-FedAvg (Fallah et al. 2020) and FedALA (Zhang et al. 2023); --step-size is the local / outer step
    "meta_alpha": Param("float", 0.005, "Per-FedAvg inner (personalising) step alpha >= 0 (0 = FedAvg)", low=0.0),
    "meta_variant": Param("str", "fo", "Per-FedAvg variant: fo (first order) or hf (Hessian-free)",
                          choices=("fo", "hf")),
    "meta_delta": Param("float", 1e-3, "Per-FedAvg (HF) finite-difference width delta > 0", low=0.0,
                        low_inclusive=False),
    "ala_eta": Param("float", 1.0, "FedALA learning rate eta >= 0 of the aggregation weights", low=0.0),
    "ala_fraction": Param("float", 0.8, "FedALA fraction s of local data the weights are learned on, in (0, 1]",
                          low=0.0, high=1.0, low_inclusive=False),
    "cfl_linkage": Param("str", "single", "CFL bipartition: single (exact optimum of Sattler's min-max "
                         "cross-similarity) or complete (the authors' code)", choices=("single", "complete")),
    # k-FED, PACFL, FlexCFL, FeSEM, FedSoft (synth/algorithms/{kfed,pacfl,flexcfl,fesem,fedsoft}.py)
    "kfed_local_clusters": Param("int", 1, "k-FED: k-means centres k' per client (>= 1)", low=1),
    "kfed_awasthi_sheffet": Param("str", "yes", "k-FED: Awasthi-Sheffet local k-means with pruning and farthest-"
                                  "first server init (yes, the paper) or standard k-means (no)", choices=("yes", "no")),
    "kfed_margin": Param("float", 1.0 / 3.0, "k-FED: Awasthi-Sheffet pruning ratio, in (0, 1]", low=0.0, high=1.0,
                         low_inclusive=False),
    "pacfl_p": Param("int", 3, "PACFL: singular vectors p per client (>= 1)", low=1),
    "pacfl_threshold": Param("float", None, "PACFL: HC threshold beta in degrees (> 0); None = cut at --n-clusters "
                             "(default K)", low=0.0, low_inclusive=False),
    "pacfl_proximity": Param("str", "smallest", "PACFL: smallest principal angle, sum of the p angles, or "
                             "pairwise (the authors' smallest angle between two basis vectors)",
                             choices=("smallest", "sum", "pairwise")),
    "pacfl_linkage": Param("str", "average", "PACFL: hierarchical clustering linkage (weighted = WPGMA, what the "
                           "authors' 'average' computes)", choices=("average", "weighted", "complete", "single")),
    "flexcfl_alpha": Param("int", 20, "FlexCFL: pre-training clients per group for the grouping (>= 1)", low=1),
    "flexcfl_pretrain": Param("int", 50, "FlexCFL: local steps of a pre-training (>= 1; the authors' code: 50)",
                              low=1),
    "flexcfl_eta": Param("float", 0.0, "FlexCFL: inter-group aggregation rate eta (>= 0)", low=0.0),
    "flexcfl_migration": Param("str", "no", "FlexCFL: model-based client migration (no = the paper on static data)",
                               choices=("no", "yes")),
    "flexcfl_margin": Param("float", 0.05, "FlexCFL: migration margin in cosine dissimilarity, in [0, 1]", low=0.0,
                            high=1.0),
    "fesem_warmup": Param("int", 10, "FeSEM: local steps before the first E-step (>= 0)", low=0),
    "fesem_prox": Param("float", 0.0, "FeSEM: proximal weight of the local update (>= 0)", low=0.0),
    "fesem_init": Param("str", "clients", "FeSEM: centres start at random clients' models (clients) or at fresh "
                        "initialisations (random, the FlexCFL code)", choices=("clients", "random")),
    "fedsoft_prox": Param("float", 0.1, "FedSoft: proximal weight lambda (>= 0)", low=0.0),
    "fedsoft_smoother": Param("float", 1e-4, "FedSoft: importance smoother sigma, in [0, 1)", low=0.0, high=1.0,
                              high_inclusive=False),
    "fedsoft_interval": Param("int", 1, "FedSoft: rounds between importance estimations (>= 1)", low=1),
}

GENERATOR_KEYS = ("family", "K", "clients_per_cluster", "n", "d", "sigma", "R", "theta", "delta", "eps1",
                  "eps2", "reg", "cov_condition")


def validate_params(params: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults, reject unknown keys (with a did-you-mean hint) and check every value."""
    unknown = [k for k in params if k not in PARAMS]
    if unknown:
        k = unknown[0]
        raise ValueError(f"unknown parameter {k!r}{did_you_mean(k, PARAMS)}; known: {', '.join(PARAMS)}")
    out = {}
    for name, spec in PARAMS.items():
        out[name] = spec.check(name, params.get(name, spec.default))
    # a parameter the chosen family does not use is an error, not silently ignored (its default passes, so that
    # a dict validated once validates again)
    unused = {"logistic": ("sigma", "noise of the linear family; the logistic family's labels are Bernoulli"),
              "linear": ("reg", "l2 regularisation of the logistic family")}[out["family"]]
    if out[unused[0]] != PARAMS[unused[0]].default:
        raise ValueError(f"{unused[0]}={out[unused[0]]} is unused with family={out['family']!r} ({unused[1]}); "
                         f"drop {unused[0]} or choose the other family")
    return out


def make_federation(p: dict[str, Any], rng) -> Federation:
    """Sample the federation the parameters describe."""
    cov = None if p["cov_condition"] == 1.0 else anisotropic_cov(p["d"], p["cov_condition"])
    common = dict(K=p["K"], clients_per_cluster=p["clients_per_cluster"], n=p["n"], d=p["d"], theta=p["theta"],
                  R=p["R"], delta=p["delta"], eps1=p["eps1"], eps2=p["eps2"], cov=cov)
    common["dtype"] = np.float32 if p.get("dtype") == "float32" else np.float64
    if p["family"] == "linear":
        gen = MixedLinearRegression(sigma=p["sigma"], **common)
    else:
        gen = LogisticMixture(reg=p["reg"], **common)
    return gen.sample(rng)


def _ifca_init(p, fed, rng):
    if p["init"] != "ball":
        return p["init"]
    return ball_init(fed.theta, p["alpha"], n_init=p["n_init"], random_state=rng)


def _ifca(p, fed, rng):
    k = p["n_clusters"] or p["K"]
    if k > fed.n_clients:
        raise ValueError(f"n_clusters must be in [1, {fed.n_clients}] (the number of clients), got {k}")
    verdict = None
    if p["stopping"] == "converged" and fed.family == "linear":
        thr = p["success_factor"] * p["sigma"]
        verdict = IFCAVerdict(fed.theta, thr, None if p["code_slack"] is None else thr + p["code_slack"])
    return IFCA(n_clusters=k, n_rounds=p["rounds"], step_size=p["step_size"], averaging=p["averaging"],
                local_steps=p["local_steps"], participation=p["participation"], init=_ifca_init(p, fed, rng),
                n_init=p["n_init"], random_state=rng, stopping=p["stopping"], tol=p["tol"], verdict=verdict)


class IFCAVerdict:
    """IFCA Sec. VI-A's success verdict of one trial (the best of its restarts), known as early as possible.

    A trial succeeds when some run ends at the one-to-one matched ``dist <= threshold`` (IFCA journal
    Sec. VI-A, :func:`synth.metrics.param_error`); with ``code_threshold`` it is also judged by the public
    code's rule, ``mean_j min_c ||theta_j - theta*_c|| < code_threshold``.  Called by
    :class:`~synth.algorithms.IFCA` with ``stopping="converged"`` on the open runs' models and their reach
    ``rho_j`` (how far model j can still move by round T): a run's final distance to any truth lies in
    ``[||theta_j - theta*_c|| - rho_j, ||theta_j - theta*_c|| + rho_j]``.

    Each rule is *met* once some run's worst case meets it (the state persists across calls); until then it is
    open.  A run is useful while its best case could still meet an open rule.  Returns per run

    * ``+1`` when no rule is open: the trial's verdict is known, every run stops;
    * ``-1`` when the run is not useful: it cannot change the verdict, and it leaves the stack;
    * ``0`` otherwise.

    A matched ``threshold`` of 0 (``sigma = 0``) asks for exact recovery: gradient descent from a random start
    does not reach the truth exactly in finitely many rounds (the iteration maps are invertible with
    probability 1), so that rule is never open, and its recorded outcome is failure
    (:func:`synth.metrics.restart_success`).  The bench (``bench/ifca_projection.py``) checks this against the
    fixed 300 rounds, where the best float32 run ends 4e-7 to 4e-4 from the truth.
    """

    def __init__(self, truths: np.ndarray, threshold: float, code_threshold: float | None = None):
        self.truths = check_array("truths", truths, ndim=2)
        self.threshold = check_real("threshold", threshold, low=0.0)
        self.code_threshold = None if code_threshold is None else check_real("code_threshold", code_threshold,
                                                                              low=0.0)
        # a rule is open while some run could still change its outcome; the matched rule at threshold 0 never is
        self.matched_open = self.threshold > 0
        self.code_open = code_threshold is not None

    def __call__(self, models: np.ndarray, reach: np.ndarray) -> np.ndarray:
        from .theta import pairwise_distances

        A, k, P = models.shape
        D = pairwise_distances(models.reshape(A * k, P), self.truths).reshape(A, k, -1)  # (A, k, K)
        rho = np.asarray(reach, dtype=np.float64)[:, :, None]
        lower = np.maximum(D - rho, 0.0)
        upper = D + rho
        useful = np.zeros(A, dtype=bool)
        if self.matched_open:
            self.matched_open = not (_matched_stack(upper) <= self.threshold).any()
            if self.matched_open:
                useful |= _matched_stack(lower) <= self.threshold
        if self.code_open:
            self.code_open = not (upper.min(2).mean(1) < self.code_threshold).any()
            if self.code_open:
                useful |= lower.min(2).mean(1) < self.code_threshold
        if not (self.matched_open or self.code_open):
            return np.ones(A, dtype=np.int64)
        return np.where(useful, 0, -1).astype(np.int64)


def _matched_stack(dist: np.ndarray) -> np.ndarray:
    """:func:`_matched` of each ``(k, K)`` matrix of ``dist`` ``(A, k, K)``, all restarts at once (called every round
    of every IFCA Fig. 3 trial).  With every truth matched (``k >= K``, up to 5,040 candidate matchings) it sums
    the same distances in the same order as :func:`synth.metrics.assignment`, so the values are the same floats;
    otherwise one restart at a time."""
    A, k, K = dist.shape
    if A == 0 or K == 0 or k < K or K >= 8 or math.perm(k, K) > 5040:  # K < 8: numpy sums them in order
        return np.array([_matched(d) for d in dist], dtype=np.float64)
    if not np.isfinite(dist).all():
        dist = np.nan_to_num(dist, nan=np.inf, posinf=1e300)
    D = np.asarray(dist, dtype=np.float64).transpose(0, 2, 1)  # (A, truths, models)
    totals = D[:, np.arange(K), _matchings(k, K)].sum(2)  # (A, candidate matchings)
    return totals.min(1) / K


@functools.lru_cache(maxsize=64)
def _matchings(k: int, K: int) -> np.ndarray:
    """Every one-to-one matching of ``K`` truths to ``k`` models, ``(candidates, K)``, as metrics.assignment."""
    from itertools import permutations

    out = np.array(list(permutations(range(k), K)), dtype=np.int64)
    out.flags.writeable = False
    return out


def _matched(dist: np.ndarray) -> float:
    """:func:`synth.metrics.param_error` on a ``(k models, K truths)`` distance matrix (one-to-one matching)."""
    if not np.isfinite(dist).all():
        dist = np.nan_to_num(dist, nan=np.inf, posinf=1e300)
    D = dist.T  # truths x models
    rows, cols = metrics.assignment(D)
    total = D[rows, cols].sum()
    unmatched = np.setdiff1d(np.arange(D.shape[0]), rows)
    total += D[unmatched].min(1).sum() if len(unmatched) else 0.0
    return float(total / D.shape[0])


ALGORITHMS: dict[str, Callable[[dict, Federation, np.random.Generator], Any]] = {
    "ifca": _ifca,
    "global": lambda p, fed, rng: GlobalModel(
        n_rounds=p["rounds"], step_size=p["step_size"], averaging=p["averaging"], local_steps=p["local_steps"],
        participation=p["participation"], init="zeros", random_state=rng),
    "local": lambda p, fed, rng: LocalModels(local=p["local"], local_train_steps=p["local_train_steps"],
                                             local_step_size=p["local_step_size"]),
    "oneshot-kmeans": lambda p, fed, rng: OneShotKMeans(
        n_clusters=p["n_clusters"] or p["K"], local=p["local"], local_train_steps=p["local_train_steps"],
        local_step_size=p["local_step_size"], n_rounds=p["rounds"], step_size=p["step_size"],
        averaging=p["averaging"], local_steps=p["local_steps"], participation=p["participation"],
        kmeans_n_init=p["kmeans_n_init"], random_state=rng),
    "srfca": lambda p, fed, rng: SRFCA(
        threshold=_threshold(p), min_size=_min_size(p, fed), beta=p["beta"], n_refine=p["n_refine"],
        local=p["local"], local_train_steps=p["local_train_steps"], local_step_size=p["local_step_size"],
        trmean_steps=p["trmean_steps"], trmean_step_size=p["trmean_step_size"], diameter=p["diameter"],
        dist=p["dist"], resample=p["resample"] == "yes", random_state=rng),
    "clove": lambda p, fed, rng: CLoVE(
        n_clusters=None if p["k_selection"] == "silhouette" else _n_clusters(p, fed),
        max_clusters=p["max_clusters"], sqrt_loss=p["loss_vector"] == "sqrt", clustering=p["clustering"],
        matching=p["matching"] == "min-cost", averaging=p["averaging"], init=_clove_init(p, fed, rng),
        first_round=p["first_round"], n_rounds=p["rounds"], step_size=_one_step_size(p),
        local_steps=p["local_steps"], participation=p["participation"], kmeans_n_init=p["kmeans_n_init"],
        random_state=rng),
    "local-kmeans": lambda p, fed, rng: LocalKMeans(
        n_clusters=_n_clusters(p, fed), local=p["local"],
        local_train_steps=p["local_train_steps"], local_step_size=p["local_step_size"], n_rounds=p["rounds"],
        step_size=p["step_size"], averaging=p["averaging"], local_steps=p["local_steps"],
        participation=p["participation"], kmeans_n_init=p["kmeans_n_init"], random_state=rng),
    "oneshot-ifca": lambda p, fed, rng: OneShotIFCA(
        threshold=_threshold(p), min_size=_min_size(p, fed), local=p["local"],
        local_train_steps=p["local_train_steps"], local_step_size=p["local_step_size"], dist=p["dist"],
        n_rounds=p["rounds"], step_size=p["step_size"], averaging=p["averaging"], local_steps=p["local_steps"],
        participation=p["participation"], random_state=rng),
    "cfl": lambda p, fed, rng: CFL(
        eps1=p["cfl_eps1"], eps2=p["cfl_eps2"], n_rounds=p["rounds"], step_size=_one_step_size(p),
        local_steps=p["local_steps"], warmup_rounds=p["cfl_warmup"], min_split_size=p["cfl_min_split"],
        linkage=p["cfl_linkage"], init="zeros", random_state=rng),
    "kfed": lambda p, fed, rng: KFED(
        n_clusters=_n_clusters(p, fed), local_clusters=p["kfed_local_clusters"],
        awasthi_sheffet=p["kfed_awasthi_sheffet"] == "yes", margin=p["kfed_margin"],
        kmeans_n_init=p["kmeans_n_init"], n_rounds=p["rounds"], step_size=_one_step_size(p),
        averaging=p["averaging"], local_steps=p["local_steps"], participation=p["participation"],
        init=_scheme_init(p), random_state=rng),
    "pacfl": lambda p, fed, rng: PACFL(
        n_subspace=p["pacfl_p"], distance_threshold=p["pacfl_threshold"], n_clusters=_n_clusters(p, fed),
        proximity=p["pacfl_proximity"], hc_linkage=p["pacfl_linkage"], n_rounds=p["rounds"],
        step_size=_one_step_size(p), averaging=p["averaging"], local_steps=p["local_steps"],
        participation=p["participation"], init=_scheme_init(p), random_state=rng),
    "flexcfl": lambda p, fed, rng: FlexCFL(
        n_clusters=_n_clusters(p, fed), alpha=p["flexcfl_alpha"], pretrain_steps=p["flexcfl_pretrain"],
        eta=p["flexcfl_eta"], migration=p["flexcfl_migration"] == "yes", migration_margin=p["flexcfl_margin"],
        n_rounds=p["rounds"], step_size=_one_step_size(p), local_steps=p["local_steps"],
        participation=p["participation"], init=_scheme_init(p), random_state=rng),
    "fesem": lambda p, fed, rng: FeSEM(
        n_clusters=_n_clusters(p, fed), warmup_steps=p["fesem_warmup"], prox=p["fesem_prox"],
        center_init=p["fesem_init"], n_rounds=p["rounds"], step_size=_one_step_size(p),
        local_steps=p["local_steps"], participation=p["participation"], random_state=rng),
    "fedsoft": lambda p, fed, rng: FedSoft(
        n_clusters=_n_clusters(p, fed), prox=p["fedsoft_prox"], smoother=p["fedsoft_smoother"],
        estimation_interval=p["fedsoft_interval"], n_rounds=p["rounds"], step_size=_one_step_size(p),
        local_steps=p["local_steps"], participation=p["participation"], init=_scheme_init(p), random_state=rng),
    "perfedavg": lambda p, fed, rng: PerFedAvg(
        n_rounds=p["rounds"], local_steps=p["local_steps"], meta_alpha=p["meta_alpha"],
        step_size=_one_step_size(p), meta_variant=p["meta_variant"], meta_delta=p["meta_delta"],
        participation=p["participation"], init="zeros", random_state=rng),
    "fedala": lambda p, fed, rng: FedALA(
        n_rounds=p["rounds"], local_steps=p["local_steps"], step_size=_one_step_size(p), ala_eta=p["ala_eta"],
        ala_fraction=p["ala_fraction"], participation=p["participation"], init="zeros", random_state=rng),
    "fedproto": lambda p, fed, rng: _nets_only("fedproto"),
    "fedpac": lambda p, fed, rng: _nets_only("fedpac"),
}


def _scheme_init(p) -> str:
    """The initial cluster models of k-FED, PACFL and FedSoft: a backend scheme (or same); IFCA's ball has no
    meaning before their clusters exist."""
    if p["init"] == "ball":
        raise ValueError(f"init must be one of bernoulli, gaussian, zeros, same for --algo {p['algo']} (ball places "
                         "IFCA's k models around the true optima), got 'ball'")
    return p["init"]


def _nets_only(algo: str):
    raise ValueError(f"--algo {algo} needs a representation (feature extractor + classifier head), so it runs on "
                     f"neural networks only: python -m nets run --algo {algo}")


def _n_clusters(p, fed) -> int:
    k = p["n_clusters"] or p["K"]
    if k > fed.n_clients:
        raise ValueError(f"n_clusters must be in [1, {fed.n_clients}] (the number of clients), got {k}")
    return k


def _min_size(p, fed) -> int:
    if p["min_size"] > fed.n_clients:
        raise ValueError(f"min_size must be an integer in [1, {fed.n_clients}] (the number of clients), "
                         f"got {p['min_size']}")
    return p["min_size"]


def _threshold(p) -> float:
    """lambda; SR-FCA Lemma 4.6's best choice (eps1 + eps2)/2 when the instance has eps1, eps2 and dist is l2."""
    if p["threshold"] is not None:
        return p["threshold"]
    if p["dist"] == "l2" and p["eps1"] is not None and p["eps2"] is not None:
        return 0.5 * (p["eps1"] + p["eps2"])
    raise ValueError(f"threshold is required for --algo {p['algo']} (a number > 0; it defaults to (eps1+eps2)/2 "
                     "only with --dist l2 and --eps1/--eps2)")


def _one_step_size(p) -> float:
    if isinstance(p["step_size"], list):
        raise ValueError(f"step_size must be a single number > 0 for --algo {p['algo']} (restarts over step sizes "
                         f"are IFCA's), got {p['step_size']}")
    return p["step_size"]


def _clove_init(p, fed, rng):
    """CLoVE's init: same (identical models), a backend scheme (independent draws), or IFCA's ball init."""
    if p["init"] != "ball":
        return p["init"]
    k = p["max_clusters"] if p["k_selection"] == "silhouette" else _n_clusters(p, fed)
    if k != fed.n_clusters:
        raise ValueError(f"--init ball needs one model per true cluster (K={fed.n_clusters}), got {k} models")
    return ball_init(fed.theta, p["alpha"], n_init=1, random_state=rng)[0]


def make_estimator(p: dict[str, Any], fed: Federation, rng) -> Any:
    return ALGORITHMS[p["algo"]](p, fed, rng)


def truths_for(fed: Federation) -> np.ndarray:
    """What parameter error is measured against: the cluster population minimisers."""
    if fed.family == "linear":
        return fed.theta
    return fed.cluster_population.minimiser()


def fit_experiment(params: dict[str, Any]) -> tuple[dict[str, Any], Federation, Any, float]:
    """Validate, sample the federation and fit the estimator: ``(params, federation, estimator, seconds)``.

    The data and the algorithm get independent streams spawned from ``seed``.
    """
    p = validate_params(params)
    from .cost import check_experiment

    check_experiment(p)  # refuse before allocating what cannot fit
    data_seed, algo_seed = np.random.SeedSequence(p["seed"]).spawn(2)
    fed = make_federation(p, np.random.default_rng(data_seed))
    rng = np.random.default_rng(algo_seed)
    backend = fed.backend(regime=p["regime"], rounds=p["rounds"] if p["regime"] == "split" else None,
                          random_state=rng)
    est = make_estimator(p, fed, rng)
    start = time.perf_counter()
    est.fit(backend)
    return p, fed, est, time.perf_counter() - start


def run_experiment(params: dict[str, Any], history: bool = False) -> dict[str, Any]:
    """Sample, fit and score one experiment; returns a JSON-serialisable record."""
    p, fed, est, seconds = fit_experiment(params)
    res = est.result_
    truths = truths_for(fed)
    err = metrics.param_error(res.models, truths)
    record = {
        "algo": p["algo"],
        "ari": metrics.adjusted_rand(res.labels, fed.labels),
        "misclustering": metrics.misclustering(res.labels, fed.labels),
        "misclustering_matched": metrics.matched_misclustering(res.labels, fed.labels),
        "param_error": err,
        "client_error": _client_error(res, fed, truths),
        "success": bool(err <= p["success_factor"] * p["sigma"]) if fed.family == "linear" else None,
        "n_clusters": int(res.n_clusters),
        "rounds": int(res.rounds),
        "separation": float(_separation(fed.theta)),
        "seconds": seconds,
    }
    if "models_all" in res.extra and len(res.extra["models_all"]) > 1:
        ok = ~np.asarray(res.extra.get("diverged", np.zeros(len(res.extra["models_all"]), bool)), dtype=bool)
        # a diverged run's models may be non-finite: it counts as failed, never as the best restart
        errs = [metrics.param_error(mod, truths) if good else np.inf
                for mod, good in zip(res.extra["models_all"], ok, strict=True)]
        record["param_error_best_restart"] = float(np.min(errs))
        record["success_any_restart"] = metrics.restart_success(errs, p["success_factor"] * p["sigma"])
        if p["code_slack"] is not None:
            from .theta import pairwise_distances

            closest = [float(pairwise_distances(mod, truths).min(1).mean()) if good else np.inf
                       for mod, good in zip(res.extra["models_all"], ok, strict=True)]
            record["success_code_rule"] = bool(np.min(closest) < p["success_factor"] * p["sigma"] + p["code_slack"])
    if "run_rounds" in res.extra:
        record["iterations"] = int(np.sum(res.extra["run_rounds"]))
    if history:
        record["history"] = res.history.to_dict()
    return record


def _client_error(res, fed: Federation, truths: np.ndarray) -> float:
    """(1/m) sum_i ||model of client i - w*_i||: the personalised error (Local has one model per client)."""
    labels = np.asarray(res.labels)
    ok = labels >= 0
    if not ok.any():
        return float("inf")
    target = fed.client_optima if fed.family == "linear" else truths[fed.labels]
    err = np.linalg.norm(res.models[labels[ok]] - target[ok], axis=1)
    return float(err.mean()) if ok.all() else float("inf")


def _separation(theta: np.ndarray) -> float:
    from .theta import separation

    return separation(theta)
