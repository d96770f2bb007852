"""Feature extractor / classifier head of a network, for the prototype-based personalised methods.

FedProto (Tan et al., AAAI 2022) and FedPAC (Xu et al., ICLR 2023) view a classifier as a feature extractor
``f_phi`` followed by a linear head ``psi``: the *representation* of a sample is the input of the last linear
layer, and a client's *prototype* of class ``k`` is the mean representation of its samples of class ``k``.
:class:`Representation` finds that split in a :class:`~nets.functional.FunctionalModel` (the head is the last
``nn.Linear`` whose parameters close the flat vector; every classifier of :mod:`nets.models` has one), and
the functions below do the per-client work for :class:`~nets.backend.TorchBackend`, vectorised over clients
with ``vmap`` (no loop over clients):

* :func:`class_statistics` -- per client and class: sample count, mean representation (the prototype) and
  mean squared norm of the representation (FedPAC's variance term);
* :func:`aligned_update` -- local steps on cross-entropy plus ``lam`` times the mean squared distance of each
  sample's representation to the prototype of its class, optionally training only the head or only the
  feature extractor (FedPAC's two-stage local update);
* :func:`layer_slices` -- the coordinate range of every layer (FedALA's "top p layers").
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from synth.validation import check_choice, check_int, check_real

from .functional import FunctionalModel

__all__ = ["Representation", "aligned_update", "class_statistics", "layer_slices"]

TRAIN = ("all", "head", "body")


class Representation:
    """The split of a classifier into feature extractor (body) and last linear layer (head)."""

    def __init__(self, model: FunctionalModel):
        if model.loss_kind != "ce":
            raise ValueError("a representation (feature extractor + classifier head) needs a classification "
                             f"model (loss 'ce'), got loss {model.loss_kind!r}")
        head_name, head = None, None
        for name, mod in model.module.named_modules():
            if isinstance(mod, nn.Linear):
                head_name, head = name, mod
        if head is None:
            raise ValueError("the model has no linear layer to serve as classifier head")
        names = [f"{head_name}.{p}" for p, _ in head.named_parameters()]
        if model.names[-len(names):] != names:
            raise ValueError(f"the last linear layer {head_name!r} does not hold the last parameters of the "
                             "model, so it is not a classifier head on top of a feature extractor")
        self.model, self.head = model, head
        self.head_names = tuple(names)
        self.feature_dim, self.n_classes = int(head.in_features), int(head.out_features)
        slices = model.slices()
        self.head_mask = np.zeros(model.n_params, dtype=bool)
        for n in names:
            self.head_mask[slices[n]] = True

    def features_and_logits(self, params: dict[str, torch.Tensor], x: torch.Tensor):
        """``(f(x), logits)`` at a parameter dict: the head's input is captured during the forward pass."""
        captured = []
        handle = self.head.register_forward_pre_hook(lambda _m, inp: captured.append(inp[0]))
        try:
            out = functional_call(self.model.module, params, (x,))
        finally:
            handle.remove()
        return captured[-1], out

    def features(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """The representation ``f(x)`` (the head's input) of a batch at flat parameters."""
        return self.features_and_logits(self.model.unflatten(flat), x)[0]


def class_statistics(backend, rep: Representation, models, labels, clients=None):
    """Per selected client, at its model ``models[labels[i]]``, and per class ``k`` of its training data:
    ``(counts (c, C), means (c, C, d), sq_norms (c, C))`` as float64 numpy arrays.

    ``means[i, k]`` is the client's prototype of class k, ``(1/n_ik) sum_{y_s = k} f(x_s)`` (FedProto Sec. 3,
    FedPAC Sec. 4), zero where the class is absent; ``sq_norms[i, k]`` the mean of ``||f(x_s)||^2`` over them.
    """
    models = backend.from_numpy(models)
    labels = np.asarray(labels, dtype=np.int64)
    idx = backend._index(clients)
    if len(labels) != len(idx):
        raise ValueError(f"labels must hold one model index per selected client ({len(idx)}), got {len(labels)}")
    theta = models[torch.as_tensor(labels, device=backend.device)]
    c, n_max = len(idx), backend.X.shape[1]
    C, d = rep.n_classes, rep.feature_dim
    counts, sums, sq = np.zeros((c, C)), np.zeros((c, C, d)), np.zeros((c, C))
    fn = vmap(rep.features)
    with torch.no_grad():
        for sl in backend._chunks(c, n_max * backend._act * 1.5 + 8.0 * backend.n_params):
            rows = idx[sl]
            f = fn(theta[sl], backend.X[rows]).to(torch.float64)  # (b, n, d)
            oh = F.one_hot(backend.y[rows], C).to(torch.float64) * backend.mask[rows].to(torch.float64)[..., None]
            counts[sl] = oh.sum(1).cpu().numpy()
            sums[sl] = torch.einsum("bnk,bnd->bkd", oh, f).cpu().numpy()
            sq[sl] = torch.einsum("bnk,bn->bk", oh, (f * f).sum(-1)).cpu().numpy()
    safe = np.maximum(counts, 1.0)
    return counts, sums / safe[..., None], sq / safe


def aligned_update(backend, rep: Representation, models, labels, steps: int, lr, prototypes=None,
                   lam: float = 0.0, train: str = "all", clients=None, collect: dict | None = None):
    """Each selected client runs ``steps`` local steps from ``models[labels[i]]`` on
    ``CE + lam * (1/d) ||f(x) - prototypes[y]||^2`` (per sample, averaged as the minibatch loss): ``(c, P)``.

    ``prototypes`` is ``(C, d)`` with NaN rows for classes without a prototype (no alignment term for their
    samples) or ``None`` (plain cross-entropy).  ``train`` = ``"all"``, ``"head"`` (feature extractor frozen)
    or ``"body"`` (head frozen).  Minibatches, optimiser (SGD or Adam) and chunking are the backend's, as in
    :meth:`~nets.backend.TorchBackend.local_update`.

    ``collect``: a dict that receives ``counts`` ``(c, C)`` and ``means`` ``(c, C, d)`` (float64 numpy) of the
    features of every sample the steps train on, each at the parameters of its step before the update -- the
    local prototypes as PFLlib's FedProto collects them during training (PFLlib@d832e76 ``clientproto.py:54-56,
    67``), rather than at the trained model.
    """
    steps = check_int("steps", steps, low=0)
    lam = check_real("lam", lam, low=0.0)
    train = check_choice("train", train, TRAIN)
    models = backend.from_numpy(models)
    labels = np.asarray(labels, dtype=np.int64)
    idx = backend._index(clients)
    if len(labels) != len(idx):
        raise ValueError(f"labels must hold one model index per selected client ({len(idx)}), got {len(labels)}")
    C, d = rep.n_classes, rep.feature_dim
    if prototypes is None:
        protos = torch.zeros((C, d), dtype=backend.dtype, device=backend.device)
        has = torch.zeros(C, dtype=backend.dtype, device=backend.device)
    else:
        arr = np.asarray(prototypes, dtype=np.float64)
        if arr.shape != (C, d):
            raise ValueError(f"prototypes must have shape ({C}, {d}), got {arr.shape}")
        ok = np.isfinite(arr).all(1)
        protos = torch.as_tensor(np.where(ok[:, None], arr, 0.0), dtype=backend.dtype, device=backend.device)
        has = torch.as_tensor(ok, dtype=backend.dtype, device=backend.device)
    theta = models[torch.as_tensor(labels, device=backend.device)].clone()
    if collect is not None:
        collect["counts"], collect["means"] = np.zeros((len(idx), C)), np.zeros((len(idx), C, d))
    if steps == 0 or len(idx) == 0:
        return theta
    lr_rows = backend._lr_rows(lr, models.shape[0], labels)
    batches = backend._draw_batches(idx, steps)
    head = set(rep.head_names)
    trainable = [n for n in rep.model.names if train == "all" or ((n in head) == (train == "head"))]

    def loss(params, x, y, w):
        feat, out = rep.features_and_logits(params, x)
        per = F.cross_entropy(out, y, reduction="none")
        if lam > 0:
            per = per + lam * has[y] * ((feat - protos[y]) ** 2).mean(-1)
        return (w * per).sum()

    g_fn = vmap(grad(loss))
    B = backend.X.shape[1] if backend.batch_size is None else backend.batch_size
    state = (5.0 if backend.optimizer == "adam" else 3.0) * backend.n_params * backend.X.element_size()
    for sl in backend._chunks(len(idx), B * backend._per_sample_bytes() + 2 * state, state):
        rows = idx[sl]
        params = rep.model.split(theta[sl])
        full = (backend.X[rows], backend.y[rows], backend.w[rows]) if batches is None else None
        rates = {n: lr_rows[sl].view(-1, *[1] * (params[n].dim() - 1)) for n in trainable}
        adam = backend.optimizer == "adam"
        if adam:
            m1 = {n: torch.zeros_like(params[n]) for n in trainable}
            m2 = {n: torch.zeros_like(params[n]) for n in trainable}
            b1, b2 = backend.adam_betas
        for s in range(steps):
            xb, yb, wb = full if batches is None else backend._batch(batches, sl, rows, s)
            if collect is not None:
                _collect(collect, sl, rep, params, xb, yb, wb, C)
            g = g_fn(params, xb, yb, wb)
            for n in trainable:  # loop over parameter tensors, in place
                if adam:
                    m1[n].mul_(b1).add_(g[n], alpha=1 - b1)
                    m2[n].mul_(b2).addcmul_(g[n], g[n], value=1 - b2)
                    denom = (m2[n] / (1 - b2 ** (s + 1))).sqrt_().add_(backend.adam_eps)
                    params[n].addcmul_(rates[n] / (1 - b1 ** (s + 1)), m1[n] / denom, value=-1.0)
                else:
                    params[n].addcmul_(rates[n], g[n], value=-1.0)
        theta[sl] = rep.model.join(params)
    if collect is not None:
        collect["means"] /= np.maximum(collect["counts"], 1.0)[..., None]
    return theta


def _collect(collect: dict, sl, rep: Representation, params, xb, yb, wb, C: int) -> None:
    """Add one step's features per class to ``collect`` (class sums in ``means`` until the caller divides)."""
    with torch.no_grad():
        f = vmap(lambda p, x: rep.features_and_logits(p, x)[0])(params, xb).to(torch.float64)
        oh = F.one_hot(yb, C).to(torch.float64) * (wb > 0).to(torch.float64)[..., None]  # padding has weight 0
        collect["counts"][sl] += oh.sum(1).cpu().numpy()
        collect["means"][sl] += torch.einsum("bnk,bnd->bkd", oh, f).cpu().numpy()


def layer_slices(model: FunctionalModel) -> list[slice]:
    """Coordinate range of every layer (the parameters of one module, e.g. a weight and its bias), in order."""
    out: list[slice] = []
    prefixes: list[str] = []
    for name, sl in model.slices().items():
        prefix = name.rsplit(".", 1)[0]
        if prefixes and prefixes[-1] == prefix and out[-1].stop == sl.start:
            out[-1] = slice(out[-1].start, sl.stop)
        else:
            prefixes.append(prefix)
            out.append(sl)
    return out
