"""Evaluation by each paper's rule, and the clustering metrics of a labelling.

* ``"min-loss"`` -- IFCA Sec. VI-B: a test client runs every learned model on
  its data and is scored with the model of smallest loss (the global model's
  single model for the Global baseline).
* ``"cluster"`` -- SR-FCA Sec. 5 / CLoVE Sec. 5: a client is scored with the
  model of its own cluster; the Local baseline is the case "one cluster per
  client".  A client left unclustered (label -1) falls back to the min-loss
  rule and is counted in ``unassigned``.

Accuracy (or the reconstruction loss) is averaged over all test samples of all
clients; every client's test set is drawn from its own distribution.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from synth import metrics
from synth.validation import check_choice

from .backend import TorchBackend

__all__ = ["RULES", "client_scores", "clustering_scores", "code_scores", "evaluate", "mean_scores",
           "train_identity_scores"]

RULES = ("min-loss", "cluster")


def evaluate(test: TorchBackend, models, rule: str, labels=None) -> dict:
    """Test loss and accuracy of ``models`` under ``rule``; accuracy is ``None`` for reconstruction."""
    loss, acc, choice, missing = client_scores(test, models, rule, labels)
    return mean_scores(loss, acc, test.n_samples, missing, rule, choice)


def client_scores(test: TorchBackend, models, rule: str, labels=None) -> tuple[np.ndarray, ...]:
    """Each client's test loss and accuracy under ``rule``: ``(loss, acc, choice, missing)``, four ``(c,)`` arrays.

    ``choice`` is the model each client was scored with; ``missing`` marks the clients that had no cluster label
    and fell back to the min-loss rule.  A Flower client (:mod:`nets.flower`) calls this on its own test data.
    """
    rule = check_choice("rule", rule, RULES)
    M = test.from_numpy(models).shape[0]
    choice = np.full(test.n_clients, -1, dtype=np.int64)
    if rule == "cluster":
        if labels is None or len(labels) != test.n_clients:
            raise ValueError(f"rule='cluster' needs one cluster label per client ({test.n_clients})")
        choice = np.asarray(labels, dtype=np.int64).copy()
        if choice.max(initial=-1) >= M:
            raise ValueError(f"labels refer to model {choice.max()} but only {M} models were given")
    missing = choice < 0
    if missing.any():
        L = test.losses(models, np.flatnonzero(missing))
        choice[missing] = np.nan_to_num(L, nan=np.inf).argmin(1)
    loss, acc = test.scores(models, choice)
    return loss, acc, choice, missing


def mean_scores(loss, acc, n_samples, missing, rule: str, choice=None) -> dict:
    """The record of per-client scores: test loss and accuracy averaged over all test samples of all clients."""
    w = np.asarray(n_samples).astype(np.float64)
    mean_acc = float(np.sum(acc * w) / w.sum())
    return {"test_loss": float(np.sum(loss * w) / w.sum()),
            "test_accuracy": None if np.isnan(mean_acc) else mean_acc,
            "unassigned": int(np.sum(missing)) if rule == "cluster" else 0,
            "choice": choice}


def train_identity_scores(score: Callable[..., dict], models, rule: str, labels) -> dict:
    """A min-loss run's clients scored with the model of their last cluster identity on their *training* data
    (IFCA Alg. 2's estimate after the final round), beside the rule's choice on the test data.

    This is how CLoVE Alg. 1 scores its own clients (the model of the client's cluster); CLoVE's tables do not say
    how their self-implemented IFCA was scored, so both are recorded.  ``score(models, "cluster", labels)`` is
    :func:`evaluate` on the test side (nets) or its Flower exchange.  Empty for other rules and single models.
    """
    rule = check_choice("rule", rule, (*RULES, "own"))  # an algorithm's rule ("own": Local, a model per client)
    if rule != "min-loss" or labels is None or len(models) < 2:
        return {}
    s = score(models, "cluster", np.asarray(labels, dtype=np.int64))
    return {"test_accuracy_train_identity": s["test_accuracy"], "test_loss_train_identity": s["test_loss"]}


def code_scores(test: TorchBackend, models, labels) -> dict:
    """SR-FCA's accuracy as its public code reports it (sr-fca@a1b418f src/clustering/sr_fca.py:60, 104-119;
    src/utils.py ``avg_metrics``): each clustered client's test accuracy on its cluster's model, averaged with
    weight 1 per client over the clients that have a cluster; clients with label -1 are left out."""
    labels = np.asarray(labels, dtype=np.int64)
    clustered = labels >= 0
    if not clustered.any() or len(models) == 0:
        return {"test_accuracy_code": None, "clustered_clients_code": 0}
    _, acc, _, _ = client_scores(test, models, "cluster", labels)
    mean = float(np.mean(acc[clustered]))
    return {"test_accuracy_code": None if np.isnan(mean) else mean,
            "clustered_clients_code": int(clustered.sum())}


def clustering_scores(labels, truth) -> dict:
    """ARI, SR-FCA Def. 3.1 misclustering and the one-to-one misclustering; ``None`` without ground truth."""
    if truth is None:
        return {"ari": None, "misclustering": None, "misclustering_matched": None}
    labels = np.asarray(labels, dtype=np.int64)
    return {"ari": float(metrics.adjusted_rand(labels, truth)),
            "misclustering": float(metrics.misclustering(labels, truth)),
            "misclustering_matched": float(metrics.matched_misclustering(labels, truth))}
