"""Named federations: ``<base>-<partition>`` (e.g. ``mnist-rotated``), ``femnist``, ``shakespeare``, ``amazon``.

Bases: ``digits`` (scikit-learn's bundled 8x8 digits, no download), ``mnist``,
``fmnist`` (Fashion-MNIST), ``cifar`` (CIFAR-10 binary) and ``agnews`` (label
partitions only).  Natural federations: ``femnist`` and ``shakespeare`` (LEAF
users, no ground-truth clusters) and ``amazon`` (the four product domains are
the clusters, CLoVE Sec. 5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from synth.validation import check_choice, check_int, check_real

from .data import load_ag_news, load_amazon, load_cifar10, load_digits, load_leaf, load_mnist
from .federation import NetFederation
from .partition import PARTITIONS, cluster_sizes, partition

__all__ = ["DATASETS", "build_federation", "default_model"]


@dataclass(frozen=True)
class _Base:
    load: object  # (data_dir, seed) -> ImageData | TextData
    model: str
    autoencoder: str | None
    partitions: tuple[str, ...]


_LABEL_ONLY = tuple(p for p in PARTITIONS if p not in ("rotated", "inverted", "feature-skew"))
BASES = {
    "digits": _Base(lambda root, seed: load_digits(seed=seed), "mlp", "fc-ae", PARTITIONS),
    "mnist": _Base(lambda root, seed: load_mnist(root), "mlp", "fc-ae", PARTITIONS),
    "fmnist": _Base(lambda root, seed: load_mnist(root, fashion=True), "mlp", "fc-ae", PARTITIONS),
    "cifar": _Base(lambda root, seed: load_cifar10(root), "cifar-cnn", "conv-ae", PARTITIONS),
    "agnews": _Base(lambda root, seed: load_ag_news(root, seed=seed), "textcnn", None, _LABEL_ONLY),
}
NATURAL = {"femnist": "femnist-cnn", "shakespeare": "lstm", "amazon": "amazon-mlp"}
DATASETS: tuple[str, ...] = tuple(f"{b}-{p}" for b, base in BASES.items() for p in base.partitions) + tuple(NATURAL)


def default_model(dataset: str, task: str = "classify") -> str:
    """The network each paper uses for a dataset (autoencoder for ``task="reconstruct"``)."""
    dataset = check_choice("dataset", dataset, DATASETS)
    if dataset in NATURAL:
        if task == "reconstruct":
            raise ValueError(f"task 'reconstruct' is defined for image datasets, not {dataset!r}")
        return NATURAL[dataset]
    base = BASES[dataset.split("-", 1)[0]]
    if task == "reconstruct":
        if base.autoencoder is None:
            raise ValueError(f"task 'reconstruct' is defined for image datasets, not {dataset!r}")
        return base.autoencoder
    return base.model


def build_federation(dataset: str, clients: int, n_per_client: int, rng: np.random.Generator, *,
                     n_test: int | None = None, clusters: int | None = None, alpha: float = 0.5,
                     task: str = "classify", data_dir=None, draw: str = "disjoint",
                     input_scale: float = 1.0) -> NetFederation:
    """Load a dataset and split it into ``clients`` clients (see the module docstring).

    ``draw="overlap"`` (Amazon only) lets the clients of one domain draw their reviews independently, so that they
    may share reviews: CLoVE's Amazon setting (1,000 reviews per client, Sec. 5.1) needs more reviews per domain
    than two disjoint clients of the Blitzer copy hold.  ``draw="split"`` (rotated and inverted images) splits one
    permutation of the pool among all clients, as SR-FCA's public code (no image in two clusters; the default
    ``"disjoint"`` is IFCA's: disjoint within a cluster, each cluster its own permutation).  ``input_scale``
    multiplies the images after the partition's transformation: 255 gives the raw pixels SR-FCA's public code feeds
    for inverted MNIST (``src/datasets/client.py:60-65``: uint8 cast to float, ``255 - x`` inverted).
    """
    dataset = check_choice("dataset", dataset, DATASETS)
    task = check_choice("task", task, ("classify", "reconstruct"))
    clients = check_int("clients", clients, low=1)
    n_per_client = check_int("n_per_client", n_per_client, low=1)
    draw = check_choice("draw", draw, ("disjoint", "overlap", "split"))
    input_scale = check_real("input_scale", input_scale, low=0.0, low_inclusive=False)
    if input_scale != 1.0 and dataset.split("-")[0] not in ("digits", "mnist", "fmnist", "cifar"):
        raise ValueError(f"input_scale is defined for image datasets (digits, mnist, fmnist, cifar), got dataset "
                         f"{dataset!r}")
    if draw == "overlap" and dataset != "amazon":
        raise ValueError(f"draw='overlap' is defined for the amazon dataset only, got dataset {dataset!r}")
    if draw == "split" and not dataset.endswith(("-rotated", "-inverted")):
        raise ValueError(f"draw='split' is defined for the rotated and inverted datasets only, got dataset "
                         f"{dataset!r}")
    if dataset in ("femnist", "shakespeare"):
        return _leaf(dataset, clients, n_per_client, n_test, rng, data_dir)
    if dataset == "amazon":
        return _amazon(clients, n_per_client, n_test, clusters, rng, data_dir, overlap=draw == "overlap")
    base_name, kind = dataset.split("-", 1)
    base = BASES[base_name]
    if base_name == "cifar" and kind == "rotated" and clusters is None:
        clusters = 2  # Rotated CIFAR: 0 and 180 degrees (IFCA Sec. VI-B, SR-FCA Sec. 5)
    data = base.load(data_dir, int(rng.integers(2**31 - 1)))
    part = partition(kind, data.X_train, data.y_train, data.X_test, data.y_test, data.n_classes, clients,
                     n_per_client, n_test, clusters, rng, alpha, split=draw == "split")
    if input_scale != 1.0:
        part.X, part.X_test = part.X * np.float32(input_scale), part.X_test * np.float32(input_scale)
    m, n, nt = part.X.shape[0], part.X.shape[1], part.X_test.shape[1]
    return NetFederation(dataset, part.X, part.y, np.full(m, n), part.X_test, part.y_test, np.full(m, nt),
                         part.clusters, data.n_classes, getattr(data, "vocab_size", None), task,
                         [*data.notes, *part.notes])


def _pad(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    n = np.array([len(a) for a in arrays])
    out = np.zeros((len(arrays), n.max(), *arrays[0].shape[1:]), dtype=arrays[0].dtype)
    for i, a in enumerate(arrays):  # one-time data preparation
        out[i, :len(a)] = a
    return out, n


def _leaf(dataset, m, cap, n_test, rng, data_dir) -> NetFederation:
    data = load_leaf(dataset, data_dir)
    if m > len(data.users):
        raise ValueError(f"clients must be at most {len(data.users)} for {dataset} (users with train and test "
                         f"data in this copy), got {m}")
    users = [data.users[i] for i in np.sort(rng.choice(len(data.users), size=m, replace=False))]
    tcap = cap if n_test is None else check_int("n_test", n_test, low=1)
    Xs, ys, Xts, yts = [], [], [], []
    for u in users:  # data preparation, once per run
        x, y = data.train[u]
        keep = rng.permutation(len(y))[:cap]
        Xs.append(x[keep])
        ys.append(y[keep])
        xt, yt = data.test[u]
        keep = rng.permutation(len(yt))[:tcap]
        Xts.append(xt[keep])
        yts.append(yt[keep])
    X, n = _pad(Xs)
    y, _ = _pad(ys)
    Xt, nt = _pad(Xts)
    yt, _ = _pad(yts)
    return NetFederation(dataset, X, y, n, Xt, yt, nt, None, data.n_classes, data.vocab_size, "classify",
                         [*data.notes, f"{m} LEAF users, at most {cap} train / {tcap} test samples each"])


def _amazon(m, n, n_test, K, rng, data_dir, overlap: bool = False) -> NetFederation:
    data = load_amazon(data_dir)
    K = 4 if K is None else check_int("clusters", K, low=1, high=4)
    m = check_int("clients", m, low=K)
    clusters = np.repeat(np.arange(K), cluster_sizes(m, K))
    nt = n if n_test is None else check_int("n_test", n_test, low=1)
    idx, tidx = [], []
    for c in range(K):  # loop over domains (clusters)
        size = int((clusters == c).sum())
        pool = np.flatnonzero(data.domain_train == c)
        tpool = np.flatnonzero(data.domain_test == c)
        if overlap:
            if n > len(pool) or nt > len(tpool):
                raise ValueError(f"amazon: domain {c} has {len(pool)} train / {len(tpool)} test reviews, a client "
                                 f"needs {n} / {nt}; use a smaller n_per_client / n_test")
            # each client an independent draw without replacement from its domain (clients may share reviews)
            idx.append(pool[np.argsort(rng.random((size, len(pool))), axis=1)[:, :n]])
            tidx.append(tpool[np.argsort(rng.random((size, len(tpool))), axis=1)[:, :nt]])
            continue
        if size * n > len(pool) or size * nt > len(tpool):
            raise ValueError(f"amazon: domain {c} has {len(pool)} train / {len(tpool)} test reviews, {size} clients "
                             f"need {size * n} / {size * nt}; use fewer clients, a smaller n_per_client / n_test, "
                             "or draw='overlap'")
        idx.append(rng.permutation(pool)[:size * n].reshape(size, n))
        tidx.append(rng.permutation(tpool)[:size * nt].reshape(size, nt))
    idx, tidx = np.concatenate(idx), np.concatenate(tidx)
    return NetFederation("amazon", data.X_train[idx], data.y_train[idx], np.full(m, n), data.X_test[tidx],
                         data.y_test[tidx], np.full(m, nt), clusters, 2, None, "classify", list(data.notes))
