"""IFCA Lemma 1: the largest pairwise misassignment probability over every placement Assumption 1 allows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from synth.validation import check_int, check_real

from .preference import _f_tail_and_log, _preference_lambdas

__all__ = ["WorstCase", "ifca_worst_case", "search_worst_case"]


@dataclass(frozen=True)
class WorstCase:
    """The placement of (own, wrong) model that maximises the misassignment probability.

    ``own_norm = |theta*_1 - theta_1|``, ``other_norm = |theta*_1 - theta_j|``,
    ``cos`` the cosine between ``u_1`` and ``u_j``; ``attained`` is False when
    the value is a supremum approached but not reached (``alpha < 0``).  ``log_prob`` is ``log(prob)``, exact
    also where ``prob`` is below double precision (large ``n``: :func:`ifca_worst_case` returns ``prob = 0`` there,
    silently, the size kept in ``log_prob``).
    """

    prob: float
    own_norm: float
    other_norm: float
    cos: float
    regime: str
    attained: bool = True
    log_prob: float | None = None  # natural log of prob, exact where prob underflows to 0 (None: not computed)


def ifca_worst_case(alpha: float, delta: float, sigma: float, n: int, d: int = 2) -> WorstCase:
    """Largest ``P[client of cluster 1 prefers theta_j]`` over placements allowed by IFCA Assumption 1.

    Allowed: ``|theta_j - theta*_j| <= (1/2 - alpha) Delta`` for both models and
    ``|theta*_1 - theta*_j| >= Delta``.  Then ``a = |u_1| <= r := (1/2 - alpha) Delta``
    and ``b = |u_j| >= Delta - r = (1/2 + alpha) Delta`` can be chosen freely, with
    any angle when ``d >= 2`` and only ``cos = +-1`` when ``d = 1``.

    Derivation (``D = S11 - S22 = b^2 - a^2``, ``P = det S``): the ratio
    ``lambda_-/lambda_+ = (sqrt(D^2 + 4P) - D)/(sqrt(D^2 + 4P) + D)`` increases with
    ``P/D^2`` when ``D > 0`` and decreases with it when ``D < 0``.

    * ``alpha > 0`` (``b > a`` always): maximise ``P = AB - C^2``, i.e. make
      ``|C| = |ab cos + sigma^2|`` small.  If ``ab >= sigma^2`` and ``d >= 2`` the angle
      ``cos = -sigma^2/(ab)`` gives ``C = 0`` and ``P/D^2 = (a^2+s^2)(b^2+s^2)/(b^2-a^2)^2``;
      otherwise ``cos = -1`` (opposite sides: the collinear placement that "looks
      worst" is *not* the maximiser when ``ab > sigma^2``) gives ``P = s^2 (a+b)^2``,
      ``P/D^2 = s^2/(b-a)^2``.  Both increase in ``a`` and decrease in ``b``, so
      ``a = r``, ``b = (1/2 + alpha) Delta``.
    * ``alpha = 0``: ``a = b = Delta/2`` gives ``D = 0`` and probability exactly 1/2.
    * ``alpha < 0`` (outside Assumption 1): ``b < a`` is allowed, ``D < 0`` and the
      probability exceeds 1/2; it is largest when ``P/D^2`` is smallest: ``cos = +1``
      (the wrong model on the segment between theta*_1 and theta_1), where
      ``P/D^2 = s^2/(a+b)^2``, minimised by ``a = r`` and ``b -> r`` (a supremum:
      at ``b = a`` the two models coincide).  The limit is
      ``F_{n,n}((sqrt(1+4q)+1)/(sqrt(1+4q)-1))``, ``q = sigma^2/(2r)^2``.

    The value only depends on ``n``, ``alpha`` and ``rho = Delta^2/sigma^2`` (scale invariance).
    """
    alpha = check_real("alpha", alpha, low=-0.5, high=0.5, low_inclusive=False, high_inclusive=False)
    delta = check_real("delta", delta, low=0.0, low_inclusive=False)
    sigma = check_real("sigma", sigma, low=0.0)
    n = check_int("n", n, low=1)
    d = check_int("d", d, low=1)
    r = (0.5 - alpha) * delta
    if alpha > 0:
        a, b = r, (0.5 + alpha) * delta
        if d >= 2 and a * b >= sigma**2:
            cos, regime = (-sigma**2 / (a * b) if a * b > 0 else 0.0), "angle with <u_j, u_1> = -sigma^2 (S diagonal)"
        else:
            cos, regime = -1.0, "collinear, opposite sides"
        # the probability with its exact log: deep in the tail (large n or rho) it underflows, which is no loss here
        prob, log_prob = _f_tail_and_log(*_preference_lambdas(a, b, cos, sigma, n))
        return WorstCase(prob, a, b, cos, regime, log_prob=log_prob)
    if alpha == 0:
        return WorstCase(0.5, r, r, -1.0, "a = b = Delta/2: equal expected losses", log_prob=float(np.log(0.5)))
    q = sigma**2 / (2.0 * r) ** 2
    s = np.sqrt(1.0 + 4.0 * q)
    ratio = (s + 1.0) / (s - 1.0) if q > 0 else np.inf
    prob = float(special.betainc(n / 2.0, n / 2.0, ratio / (1.0 + ratio))) if np.isfinite(ratio) else 1.0
    return WorstCase(prob, r, r, 1.0, "wrong model on the ray through the own model, approaching it "
                     "(alpha < 0: outside Assumption 1)", attained=False, log_prob=float(np.log(prob)))


def search_worst_case(alpha: float, delta: float, sigma: float, n: int, d: int = 2, grid: int = 41,
                      b_span: float = 2.0) -> WorstCase:
    """Numerical maximisation of the misassignment probability over Assumption-1 placements.

    Confirms :func:`ifca_worst_case`: a grid over ``a in [0, r]``,
    ``b in [max(Delta - r, 0), Delta - r + b_span Delta]`` (``b = a`` excluded when it
    would make the models coincide) and ``cos in [-1, 1]`` (only ``+-1`` for
    ``d = 1``), then local refinement (L-BFGS-B on the log-probability) from the best grid points.
    """
    alpha = check_real("alpha", alpha, low=-0.5, high=0.5, low_inclusive=False, high_inclusive=False)
    r = (0.5 - alpha) * delta
    b_lo = max(delta - r, 0.0)
    b_hi = b_lo + b_span * delta
    coss = np.array([-1.0, 1.0]) if d == 1 else np.linspace(-1.0, 1.0, grid)

    def prob(a, b, c):
        if abs(a - b) < 1e-12 and c > 1 - 1e-12:
            return -np.inf  # coincident models: excluded (tie)
        # a maximum is sought: a probability that underflows to 0 loses nothing here (no UnderflowWarning)
        return _f_tail_and_log(*_preference_lambdas(a, b, c, sigma, n))[0]

    best = []
    for a in np.linspace(0.0, r, grid):  # a small grid search; the refinement below does the rest
        for b in np.linspace(b_lo, b_hi, grid):
            for c in coss:
                best.append((prob(a, b, c), a, b, c))
    best.sort(key=lambda t: -t[0])
    top = best[0]
    for _, a0, b0, c0 in best[:5]:
        if d == 1:
            free = lambda z, c0=c0: -np.log(max(prob(z[0], z[1], c0), 1e-300))  # noqa: E731
            res = optimize.minimize(free, [a0, b0], method="L-BFGS-B", bounds=[(0, r), (b_lo, b_hi)])
            cand = (prob(res.x[0], res.x[1], c0), res.x[0], res.x[1], c0)
        else:
            free = lambda z: -np.log(max(prob(*z), 1e-300))  # noqa: E731
            res = optimize.minimize(free, [a0, b0, c0], method="L-BFGS-B",
                                    bounds=[(0, r), (b_lo, b_hi), (-1, 1)])
            cand = (prob(*res.x), *res.x)
        if cand[0] > top[0]:
            top = cand
    return WorstCase(float(top[0]), float(top[1]), float(top[2]), float(top[3]), "numerical search")
