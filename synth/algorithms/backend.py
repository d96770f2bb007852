"""The model-backend interface every algorithm is written against.

An algorithm in :mod:`synth.algorithms` never touches data or model internals.
It holds models as a ``(M, P)`` stack of flat parameter vectors in the
backend's own array type (numpy for :mod:`synth`, torch for :mod:`nets`) and
asks the backend for the few heavy operations below; everything it decides
(losses, distances, labels, weights) comes back as numpy arrays.  This is the
``torch.func`` idea of stateless models with parameters as data, applied to
both backends, so each algorithm exists exactly once.

Conventions
-----------
``M`` is the number of models in a stack, ``P`` the number of parameters,
``m`` the number of clients.  ``clients`` is an optional integer index array
selecting participating clients; results are then returned for those clients
in that order.  ``weights`` matrices have one row per selected client and one
column per model.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

Models = Any  # a (M, P) array of the backend's type: numpy.ndarray or torch.Tensor
Chooser = Callable[[np.ndarray, np.ndarray], np.ndarray]


@runtime_checkable
class ModelBackend(Protocol):
    """Losses, gradients and local training for a federation of clients."""

    n_clients: int
    n_params: int
    n_samples: np.ndarray  # (m,) samples per client, the weights n_i of FedAvg/CLoVE

    # -- evaluation ---------------------------------------------------------
    def losses(self, models: Models, clients: np.ndarray | None = None) -> np.ndarray:
        """Empirical loss ``f_i(models[j])`` of every client on every model: ``(c, M)``."""

    # -- first-order information -------------------------------------------
    def weighted_gradients(
        self, models: Models, weights: np.ndarray, clients: np.ndarray | None = None
    ) -> Models:
        """``G[j] = sum_i weights[i, j] * grad f_i(models[j])``: ``(M, P)``."""

    def losses_and_weighted_gradients(
        self, models: Models, choose: Chooser, clients: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, Models]:
        """Fused ``losses`` + ``choose`` + ``weighted_gradients``.

        ``choose(losses_block, rows) -> weights_block`` gets a block of loss
        rows and their positions ``rows`` among the selected clients; it must
        depend on each client's own row only, so a backend may stream clients
        in blocks and read each client's data once.  Returns ``(losses, weights,
        G)``.
        """

    def client_gradients(
        self, models: Models, labels: np.ndarray, clients: np.ndarray | None = None
    ) -> Models:
        """``grad f_i(models[labels[i]])`` for each selected client: ``(c, P)``."""

    def local_update(
        self,
        models: Models,
        labels: np.ndarray,
        steps: int,
        lr: float | np.ndarray,
        clients: np.ndarray | None = None,
    ) -> Models:
        """Each client runs ``steps`` local GD steps from ``models[labels[i]]``: ``(c, P)``.

        ``lr`` is a scalar or one step size per model in the stack.
        """

    def local_models(self, method: str, steps: int, lr: float, init: Models | None = None) -> Models:
        """Every client's own model: ``method='erm'`` (exact) or ``'gd'`` (``steps`` steps): ``(m, P)``."""

    # -- data access (algorithms that cluster data, not models) -------------
    def client_features(self, clients: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Each selected client's data points as feature rows, numpy: ``(F (c, n_max, D), n (c,))``.

        Rows ``n[i]:`` of ``F[i]`` are padding.  The GLM backend's points are ``[x, y]``, the torch
        backend's the flattened inputs.  Used by k-FED (Dennis et al. 2021) and PACFL (Vahidian et al. 2023).
        """

    def best_model_fractions(self, models: Models, clients: np.ndarray | None = None) -> np.ndarray:
        """Fraction of each client's samples on which each model has the smallest loss: ``(c, M)``.

        FedSoft's importance weights ``u_{ks}`` (Ruan & Joe-Wong 2022, Sec. 4).
        """

    # -- operations on model stacks (parameters as data) --------------------
    def combine(self, weights: np.ndarray, values: Models) -> Models:
        """``weights.T @ values`` for ``weights`` of shape ``(c, M)`` and values ``(c, P)``: ``(M, P)``."""

    def trimmed_mean(self, values: Models, labels: np.ndarray, n_groups: int, beta: float,
                     rule: str = "symmetric") -> Models:
        """Coordinatewise ``TrMean_beta`` of the rows of each group (SR-FCA Def. 3.2): ``(n_groups, P)``.

        ``rule``: which sorted positions are kept, :func:`synth.backend.trim_range`."""

    def step(self, models: Models, direction: Models, lr: np.ndarray) -> Models:
        """``models - lr[:, None] * direction`` (one step size per model)."""

    def project(self, models: Models, center: Models | None, radius: float) -> Models:
        """Euclidean projection of each row onto the ball ``{w : ||w - center|| <= radius}``."""

    def distances(self, a: Models, b: Models) -> np.ndarray:
        """Pairwise Euclidean distances ``||a_i - b_j||``: ``(len(a), len(b))``."""

    def take(self, models: Models, index: np.ndarray) -> Models:
        """Rows ``index`` of a model stack."""

    def concat(self, stacks: list[Models]) -> Models:
        """Stack several model stacks along the first axis."""

    def to_numpy(self, models: Models) -> np.ndarray:
        """A float64 numpy copy of a model stack."""

    def from_numpy(self, array: np.ndarray) -> Models:
        """A model stack in the backend's array type."""

    def init_models(self, n_models: int, scheme: str, rng: np.random.Generator) -> Models:
        """``n_models`` fresh models from an initialisation scheme the backend knows."""

    def at_round(self, t: int) -> tuple[ModelBackend, ModelBackend]:
        """The views to use at round ``t``: ``(identity_view, gradient_view)``.

        With fixed data both are the backend itself; with the theory's
        resampling they hold fresh, independent samples (IFCA Sec. V, SR-FCA
        Thm 4.11).
        """
