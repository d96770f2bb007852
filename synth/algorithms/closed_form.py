"""The remaining rounds of an IFCA run in closed form, once no client can change its cluster identity (squared loss).

With its identities fixed, model ``j`` of an IFCA run follows gradient descent on one quadratic (IFCA journal
Alg. 2, option I): ``theta <- theta - gamma (H_j theta - c_j)`` with ``H_j = (1/m) sum_{i in S_j} 2 X_i^T X_i / n_i``.
If ``0 < gamma lambda <= 2`` for every eigenvalue ``lambda`` of ``H_j``, the distance to the minimiser
``theta_hat_j = H_j^{-1} c_j`` never grows, so the whole rest of the run stays in the balls
``B(theta_hat_j, ||theta_j - theta_hat_j||)``.  When no client can change its identity anywhere in those balls
(the root-loss Lipschitz certificate of :class:`~synth.algorithms.ifca.IFCA`, widened by the rounding of the
computed losses), round ``T``'s models are ``theta_hat_j + (I - gamma H_j)^N (theta_j - theta_hat_j)`` after the
``N`` remaining steps, computed in ``H_j``'s eigenbasis.  A model with no clients gets no gradient and stays.

The quadratics depend only on the partition of the clients, so they are computed once per partition and shared
by every run (restart or step size) that reaches it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ClosedForm"]


class ClosedForm:
    """Round ``T``'s models of IFCA runs whose identities are certified fixed, by partition (cached).

    ``backend`` gives ``cluster_quadratics``, ``losses``, ``root_loss_lipschitz`` and ``root_loss_error``;
    ``n_rounds`` is ``T``.  ``cost_ratio`` is what computing one partition costs in rounds of one run (flop
    counts).  A partition is computed once the runs asking for it have spent that many rounds in it (the
    rent-or-buy rule: at most twice the cost of the better choice made in hindsight), so a trial whose
    verdict comes soon anyway never pays for it.
    """

    # k Gram matrices of P x P float64 (and their eigenvectors) per partition held at once: above this, no closed form
    MAX_BYTES = 2**28

    @classmethod
    def fits(cls, k: int, n_params: int) -> bool:
        return 2 * k * n_params * n_params * 8 <= cls.MAX_BYTES

    def __init__(self, backend, k: int, n_rounds: int, lip: np.ndarray, error):
        self.backend, self.k, self.T, self.lip, self.error = backend, k, n_rounds, lip, error
        m, d = backend.n_clients, backend.n_params
        n_mean = float(np.mean(backend.n_samples))
        # a float64 Gram (2 m n d^2) and one eigendecomposition (~10 d^3) per group against one round of one
        # run (k + 1 products of the data with a model), at equal rates; `python bench/ifca_closed_form_cost.py`
        # measures both (bench/results/ifca_closed_form_cost.json: the formula is 1.2-1.3x the measured ratio)
        self.cost_ratio = (2 * m * n_mean * d * d + 10 * k * d**3) / (2 * m * n_mean * d * (k + 1))
        self._spent: dict[bytes, int] = {}
        self._cache: dict[bytes, dict | None] = {}
        self._still: dict[bytes, np.ndarray] = {}
        self.partitions = 0

    @staticmethod
    def _canonical(labels: np.ndarray) -> tuple[bytes, np.ndarray, np.ndarray]:
        """The partition of ``labels`` ``(m,)`` with groups numbered by their first client, and each group's label."""
        uniq, first, inv = np.unique(labels, return_index=True, return_inverse=True)
        order = np.argsort(first)
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[order] = np.arange(len(uniq))
        canon = rank[inv]
        return canon.tobytes(), canon, uniq[order]

    def _root_at(self, model: np.ndarray) -> np.ndarray:
        """Every client's root loss at a model without clients (it stays put, so asked again and again)."""
        key = model.tobytes()
        if key not in self._still:
            if len(self._still) > 64:
                self._still.clear()
            with np.errstate(invalid="ignore"):
                self._still[key] = np.sqrt(np.maximum(self.backend.losses(model[None])[:, 0], 0.0))
        return self._still[key]

    def _partition(self, key: bytes, canon: np.ndarray) -> dict | None:
        if key in self._cache:
            return self._cache[key]
        self.partitions += 1
        g = int(canon.max()) + 1
        Q, q = self.backend.cluster_quadratics(canon, g)
        m = self.backend.n_clients
        H, c = Q / m, q / m
        entry: dict | None = {"w": [], "V": [], "hat": np.empty((g, H.shape[1]))}
        rows = int(np.sum(self.backend.n_samples))
        for j in range(g):  # loop over groups
            w, V = np.linalg.eigh(H[j])
            # the float64 Gram errs by at most gamma_N trace(H) in Frobenius norm (N rows, Higham Thm 3.5; the
            # trace of a PSD matrix bounds its Frobenius norm), eigh by O(d eps ||H||): a bound on each eigenvalue
            pad = (rows + 2 * H.shape[1]) * np.finfo(np.float64).eps * np.abs(w).sum()
            if not w[0] > pad:  # singular: no unique minimiser, no closed form
                entry = None
                break
            entry["w"].append((w, pad))
            entry["V"].append(V)
            entry["hat"][j] = V @ ((V.T @ c[j]) / w)
        if entry is not None:
            # the losses are taken at theta_hat as the backend holds models (float32 data: rounded to float32);
            # the balls around that point are widened by the rounding, so they hold those around theta_hat
            held = self.backend.to_numpy(self.backend.from_numpy(entry["hat"]))
            with np.errstate(invalid="ignore"):
                entry["root"] = np.sqrt(np.maximum(self.backend.losses(held), 0.0))  # (m, g)
            entry["norm"] = np.linalg.norm(held, axis=1)
            entry["gap"] = np.linalg.norm(held - entry["hat"], axis=1)
        self._cache[key] = entry
        # the oldest partitions make room (they are computed again if runs come back to them)
        while sum(len(e["V"]) for e in self._cache.values() if e) * H.shape[1] ** 2 * 8 > self.MAX_BYTES:
            old = next(k for k, e in self._cache.items() if e)
            del self._cache[old]
            self._spent[old] = 0
        return entry

    def final_models(self, labels: np.ndarray, models: np.ndarray, gamma: float, steps: int) -> np.ndarray | None:
        """Round ``T``'s models ``(k, P)`` of a run at ``models`` ``(k, P)`` with ``steps`` steps left, or ``None``.

        ``labels`` ``(m,)`` are the identities that produced ``models``; ``None`` unless every model's ``gamma``
        contracts its quadratic and no client can change its identity on the way (module docstring).
        Each call counts one round of one run towards computing an unseen partition (``cost_ratio``).
        """
        key, canon, group_label = self._canonical(labels)
        if key not in self._cache:
            self._spent[key] = self._spent.get(key, 0) + 1
            if self._spent[key] < self.cost_ratio:
                return None
        entry = self._partition(key, canon)
        if entry is None:
            return None
        k = self.k
        center = models.copy()
        group_of = np.full(k, -1)
        group_of[group_label] = np.arange(len(group_label))
        own = group_of >= 0
        for j in np.flatnonzero(own):
            w, pad = entry["w"][group_of[j]]
            if gamma * (w[-1] + pad) > 2:  # the step does not contract: the distance to theta_hat may grow
                return None
            center[j] = entry["hat"][group_of[j]]
        radius = np.linalg.norm(models - center, axis=1)
        radius[own] += entry["gap"][group_of[own]]
        root = np.empty((self.backend.n_clients, k))
        norms = np.linalg.norm(center, axis=1)
        norms[own] = entry["norm"][group_of[own]]
        root[:, own] = entry["root"][:, group_of[own]]
        for j in np.flatnonzero(~own):  # a model without clients gets no gradient: it stays where it is
            root[:, j] = self._root_at(models[j])
        if not identities_kept(root[:, None], labels[:, None], self.lip, radius[None], self.error,
                               norms[None])[0]:
            return None
        out = models.copy()
        for j in np.flatnonzero(own):
            w, _ = entry["w"][group_of[j]]
            V = entry["V"][group_of[j]]
            out[j] = center[j] + V @ ((1.0 - gamma * w) ** steps * (V.T @ (models[j] - center[j])))
        return out


def identities_kept(root: np.ndarray, labels: np.ndarray, lip: np.ndarray, r: np.ndarray, error=None,
                    norms: np.ndarray | None = None) -> np.ndarray:
    """Per run, whether every client keeps its identity while each model stays within ``r`` of its centre.

    ``root`` ``(m, A, k)`` are the computed root losses at the centres, ``labels`` ``(m, A)`` the identities,
    ``r`` ``(A, k)`` the radii.  Client ``i`` keeps ``b`` if ``sqrt f_i(a_j) - s_i r_j > sqrt f_i(a_b) + s_i r_b``
    for every other model ``j`` (``|sqrt f_i(x) - sqrt f_i(y)| <= s_i ||x - y||``, ``s = lip``); with ``error``
    (the backend's ``root_loss_error``) and the centres' ``norms`` ``(A, k)``, both sides are widened by the
    rounding of the losses at the centres and anywhere in the balls, so the computed losses choose ``b`` too.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        spread = lip[:, None, None] * r[None]  # how far each root loss can move, (m, A, k)
        if error is not None:
            spread = spread + 2 * error(root + spread, norms + r)
        low = root - spread
        chosen = np.take_along_axis(root + spread, labels[:, :, None], 2)  # (m, A, 1)
        margin = low - chosen
    np.put_along_axis(margin, labels[:, :, None], np.inf, 2)
    return (margin > 0).all(axis=(0, 2))  # NaN (a non-finite loss or radius) never certifies
