"""KL divergence of two linear-Gaussian clients (SR-FCA Prop. 4.1)."""

from __future__ import annotations

import numpy as np

from synth.validation import check_array, check_real

__all__ = ["kl_mlr"]


def kl_mlr(w_i, w_j, sigma: float, cov=None) -> float:
    """``KL(p_i(x, y) || p_j(x, y))`` for ``y = <w, x> + N(0, sigma^2)``, ``x ~ N(0, Sigma)`` (SR-FCA Prop. 4.1).

    The ``x``-marginals agree, so ``KL = E_x[KL(N(<w_i,x>, s^2) || N(<w_j,x>, s^2))]
    = E_x[<w_i - w_j, x>^2] / (2 sigma^2) = (w_i - w_j)^T Sigma (w_i - w_j) / (2 sigma^2)``;
    with ``Sigma = I_d`` that is ``||w_i - w_j||^2 / (2 sigma^2)`` -- without the
    factor ``d`` that Prop. 4.1 states.
    """
    wi = check_array("w_i", w_i, ndim=1)
    diff = wi - check_array("w_j", w_j, ndim=1, shape=wi.shape)
    sigma = check_real("sigma", sigma, low=0.0, low_inclusive=False)
    S = np.eye(len(wi)) if cov is None else check_array("cov", cov, shape=(len(wi), len(wi)))
    return float(diff @ S @ diff / (2.0 * sigma**2))
