"""Composite Gauss-Legendre quadrature over a law's bulk, shared by the exact laws that integrate numerically."""

from __future__ import annotations

import numpy as np
from scipy import special

__all__ = ["TAIL", "gl_nodes"]

TAIL = 1e-14  # probability mass cut from each end of every integration range


def gl_nodes(lo, hi, panels: int, order: int):
    """Composite Gauss-Legendre nodes and weights on ``[lo, hi]`` (vectorised over leading axes of lo/hi)."""
    x, w = special.roots_legendre(order)
    lo, hi = np.asarray(lo, dtype=np.float64)[..., None], np.asarray(hi, dtype=np.float64)[..., None]
    edges = lo + (hi - lo) * np.linspace(0.0, 1.0, panels + 1)
    a, b = edges[..., :-1, None], edges[..., 1:, None]
    nodes = 0.5 * (a + b) + 0.5 * (b - a) * x
    weights = 0.5 * (b - a) * w
    shape = nodes.shape[:-2] + (panels * order,)
    return nodes.reshape(shape), weights.reshape(shape)

