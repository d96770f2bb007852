"""A federation of clients holding tensors, and the torch backends over its train and test data."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from .backend import TorchBackend
from .functional import FunctionalModel
from .models import MODELS, model_factory

__all__ = ["NetFederation"]


@dataclass
class NetFederation:
    """Clients' train and test data (padded to a common length) and their true clusters.

    ``clusters`` is ``None`` for natural federations without ground truth (LEAF users).
    ``task`` is ``"classify"`` or ``"reconstruct"`` (autoencoders: targets are the inputs).
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    n_samples: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_test: np.ndarray
    clusters: np.ndarray | None
    n_classes: int
    vocab_size: int | None = None
    task: str = "classify"
    notes: list[str] = field(default_factory=list)

    @property
    def n_clients(self) -> int:
        return int(self.X.shape[0])

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.X.shape[2:])

    def model(self, name: str, device="cpu", dtype=torch.float32) -> FunctionalModel:
        """The network ``name`` for this federation's inputs, as a :class:`FunctionalModel`."""
        spec = MODELS[name]
        if spec.loss == "sq":
            raise ValueError(f"model {name!r} fits real-valued targets (synth's regression data); the {self.task!r} "
                             "task of the nets datasets needs a classification or reconstruction model")
        if (spec.loss == "mse") != (self.task == "reconstruct"):
            raise ValueError(f"model {name!r} trains a {'reconstruction' if spec.loss == 'mse' else 'classification'}"
                             f" loss but the task is {self.task!r}")
        factory = model_factory(name, self.input_shape, self.n_classes, self.vocab_size)
        return FunctionalModel(factory, spec.loss, device=device, dtype=dtype)

    def hold_out(self, fraction: float) -> tuple[NetFederation, NetFederation]:
        """``(train, validation)``: each client's last ``ceil(fraction * n_i)`` training samples (its samples are in
        random order) moved to a validation federation, whose *test* data they are, so that tuning (SR-FCA's λ)
        never sees the test data; every client keeps at least one training sample."""
        if not 0.0 < fraction < 0.5:
            raise ValueError(f"fraction must be in (0, 0.5), got {fraction!r}")
        n = self.n_samples.astype(np.int64)
        v = np.minimum(np.ceil(fraction * n).astype(np.int64), n - 1)
        if v.min() < 1:
            raise ValueError(f"validation fraction {fraction} holds out no sample of a client with {int(n.min())} "
                             "training samples (each client needs at least 2)")
        t = n - v
        cols = np.arange(self.X.shape[1])
        keep, held = cols[None, :] < t[:, None], (cols[None, :] >= t[:, None]) & (cols[None, :] < n[:, None])
        X_tr, y_tr = _pack(self.X, keep, int(t.max())), _pack(self.y, keep, int(t.max()))
        X_v, y_v = _pack(self.X, held, int(v.max())), _pack(self.y, held, int(v.max()))
        note = f"validation split: {int(v.sum())} of {int(n.sum())} training samples held out ({fraction:g} per client)"
        train = dataclasses.replace(self, X=X_tr, y=y_tr, n_samples=t.astype(self.n_samples.dtype),
                                    notes=[*self.notes, note])
        val = dataclasses.replace(self, X=X_v, y=y_v, n_samples=v.astype(self.n_samples.dtype), X_test=X_v,
                                  y_test=y_v, n_test=v.astype(self.n_test.dtype))
        return train, val

    def backends(self, model: FunctionalModel, **options) -> tuple[TorchBackend, TorchBackend]:
        """``(train_backend, test_backend)``: the same model on the clients' train and test data."""
        def tensors(X, y):
            Xt = torch.as_tensor(X)
            Xt = Xt.to(model.dtype) if Xt.is_floating_point() else Xt.long()
            yt = None if self.task == "reconstruct" else torch.as_tensor(y).long()
            return Xt, yt

        X, y = tensors(self.X, self.y)
        Xt, yt = tensors(self.X_test, self.y_test)
        train = TorchBackend(model, X, y, self.n_samples, **options)
        test_opts = {k: v for k, v in options.items() if k in ("batched", "memory_budget", "seed")}
        return train, TorchBackend(model, Xt, yt, self.n_test, **test_opts)


def _pack(a: np.ndarray, mask: np.ndarray, width: int) -> np.ndarray:
    """The entries of each client's row of ``a`` (``(clients, samples, ...)``) where ``mask`` holds, moved to the
    front of a ``(clients, width, ...)`` array (zero-padded), in their order."""
    out = np.zeros((a.shape[0], width, *a.shape[2:]), dtype=a.dtype)
    rank = np.cumsum(mask, axis=1) - 1  # each kept entry's position in its client's row
    rows, cols = np.nonzero(mask)
    out[rows, rank[rows, cols]] = a[rows, cols]
    return out
