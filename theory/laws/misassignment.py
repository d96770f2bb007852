"""IFCA Lemma 1 with K models: the exact P[argmin_j f(theta_j) != 1] for a client of cluster 1."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import optimize, special
from scipy import stats as _st

from synth.validation import check_array, check_int, check_real

from .preference import _f_tail, preference_eigen
from .quadrature import TAIL, gl_nodes

__all__ = ["MisassignmentLaw", "symmetric_misassignment", "symmetric_placement"]


@dataclass(frozen=True)
class MisassignmentLaw:
    """Exact ``P[argmin_j f(theta_j) != 1]`` for a client of cluster 1 facing ``K`` models (IFCA Lemma 1, any K).

    The client's residual rows ``z_l = (<x_l, u_j> + e_l)_j`` are i.i.d. ``N(0, S)`` with
    ``S_jl = <u_j, u_l> + sigma^2`` and ``n f(theta_j) = W_jj``, ``W ~ Wishart_K(n, S)``.  When every
    off-diagonal entry of ``S`` equals one ``c >= 0`` (``S = diag(Lambda) + c 1 1^T``: the wrong models
    are placed symmetrically) the rows are ``sqrt(c) g_l 1 + Lambda^{1/2} h_l``: a *shared* Gaussian
    ``g`` plus independent parts.  Conditional on the shared vector ``xi = sqrt(c) g`` (``||xi||^2 = c Q``,
    ``Q ~ chi2_n``), ``W_jj = Lambda_j chi'^2_n(c Q / Lambda_j)`` independently over ``j``, so

    ``P[correct] = E_Q[ int pdf_1(w | Q) prod_{j >= 2} sf_j(w | Q) dw ]``,

    a two-dimensional integral (composite Gauss-Legendre; :attr:`abs_error` is the change from doubling its panels
    plus the mass cut from the ranges).  That estimate grows where two wrong models nearly coincide (small
    ``Lambda_j``: the wrong losses' conditional laws become steep); for ``K = 3``, wherever it exceeds 1e-8, the
    general ``K = 3`` computation below replaces it (for ``K >= 4`` it is reported as it is).  ``c = 0`` (``S``
    diagonal) makes the losses independent scaled ``chi2_n`` and the outer integral trivial.  For ``K = 2`` this is
    the ``F(n, n)`` tail of :class:`PairwisePreference` (checked to 1e-9).

    Any ``S`` with ``K = 3`` (any placement of the two wrong models): condition on two residual columns exactly and
    smooth the third.  With ``nu_j = Var(c_j | the other two) / S_jj`` (exact Schur complements), the smoothed
    column ``z`` is the one with the largest ``nu_j``: the own column when two wrong models nearly coincide (their
    ``nu`` vanish, the own one's does not), a wrong one when a wrong model nearly coincides with the own.  Write
    ``c_x = sqrt(S_xx) gamma``, ``c_y = k c_x + s eta`` and ``c_z = A c_x + B eta + sqrt(v) zeta`` with independent
    standard Gaussian vectors.  By rotation invariance only ``t = ||c_x||``, ``e = eta_1`` (along ``c_x``) and
    ``g = ||eta_rest|| ~ chi_{n-1}`` matter: ``W_xx = t^2`` and ``W_yy = (k t + s e)^2 + s^2 g^2`` exactly, and
    ``W_zz ~ v chi'^2_n(((A t + B e)^2 + B^2 g^2) / v)`` given them, so ``P[correct]`` is a three-dimensional
    integral of a noncentral chi-square cdf (``z`` own: ``P[W_zz < min(W_xx, W_yy)]``) or survival function
    (``x`` own: ``1[W_yy > W_xx] P[W_zz > W_xx]``).  Its only non-smooth set, ``W_yy = W_xx``, is a circle in
    ``(e, g)`` whose ``e``-roots and top are breakpoints, and ``t`` gets geometrically graded pieces below the two
    small scales ``s / (1 + k)`` and ``sqrt(v)``, so composite Gauss-Legendre converges geometrically, also as two
    wrong models coincide (``s -> 0``).  :attr:`abs_error` is the change between two successive refinement levels
    (accepted at 1e-10) plus the mass cut from the ranges and skipped nodes: below 1e-8 wherever the levels converge
    (every placement the tests try outside the region below), and checked against exact solid angles (``n = 1``),
    the exact coincident limit and the symmetric conditioning (``tests/test_misassignment3.py``).  Two exactly
    coincident wrong models give the ``K = 2`` ``F(n, n)`` tail against the nearer of them.

    Where this is not exact to 1e-8: ``max_j nu_j < 0.02``, three models nearly collinear in parameter space with
    no two nearly coincident (``S`` is then nearly singular in a direction that involves every column, so every
    column's conditional law is steep).  The law still returns its best value there, with ``abs_error = inf``.
    An exactly singular ``S`` of that kind (three collinear models, e.g. ``d = 1``) is refused, as is one where a
    wrong model's column is proportional to the own (a tie on every draw).  ``shared`` is ``nan`` and ``lambdas``
    holds ``(S_11, lambda_2, lambda_3)`` of the split ``T = diag(lambda) + tau tau^T`` of the wrong columns'
    covariance given the own column.  ``K >= 4`` needs the symmetric form (equal off-diagonal entries up to column
    signs); a general ``S`` is refused there.
    """

    prob: float
    abs_error: float
    shared: float
    lambdas: tuple

    @staticmethod
    def from_cov(S, n: int) -> MisassignmentLaw:
        """The law for a residual covariance ``S``: any positive-definite ``S`` for ``K <= 3`` (for ``K = 3`` also one
        singular only because two wrong models coincide); for ``K >= 4`` one whose off-diagonal entries are all equal
        and ``>= 0`` (the symmetric placement)."""
        S = check_array("S", S, ndim=2)
        K = S.shape[0]
        if S.shape != (K, K) or K < 2:
            raise ValueError(f"S must be a square matrix with K >= 2, got shape {S.shape}")
        n = check_int("n", n, low=1)
        off = S[~np.eye(K, dtype=bool)]
        c = float(off.mean())
        scale = float(np.max(np.abs(np.diag(S))))
        symmetric = np.max(np.abs(off - c)) <= 1e-10 * max(scale, 1e-300) and c >= -1e-12 * scale
        if K == 2 and not symmetric:  # one off-diagonal pair: its sign is a column's sign, which W_jj ignores
            S = S * np.array([[1.0, -1.0], [-1.0, 1.0]])
            c, symmetric = float(S[0, 1]), True
        if not symmetric and K == 3:
            if np.max(np.abs(S - S.T)) > 1e-12 * max(scale, 1e-300):
                raise ValueError("S must be symmetric")
            p, err, lam = _misassignment3(S, n)
            return MisassignmentLaw(p, err, float("nan"), lam)
        if not symmetric:
            raise ValueError(f"with K = {K} >= 4 models S must have equal off-diagonal entries c >= 0 (the "
                             "symmetric placement: a one-factor conditioning); a general S is exact only for "
                             f"K <= 3 here; got off-diagonal entries in [{off.min():g}, {off.max():g}]")
        c = max(c, 0.0)
        lam = np.diag(S) - c
        if np.any(lam < -1e-12 * scale):
            raise ValueError(f"S - c 1 1^T must have a nonnegative diagonal, got {lam.tolist()}")
        lam = np.maximum(lam, 0.0)
        p, err = _misassignment(lam, c, n)
        if K == 3 and err > _MIS3_CLAIM:  # two wrong models nearly coincide (small lambda_j): the general law is exact
            try:
                p3, err3, _ = _misassignment3(S, n)
            except ValueError:  # a placement only the symmetric conditioning covers: keep its value and estimate
                p3, err3 = p, err
            if err3 < err:
                p, err = p3, err3
        return MisassignmentLaw(p, err, c, tuple(float(v) for v in lam))


def _correct_prob(lam: np.ndarray, c: float, n: int, panels: int, order: int) -> float:
    """``P[W_11 < W_jj for every j >= 2]`` by composite Gauss-Legendre quadrature in ``(Q, sqrt(W_11))``."""
    lam1, rest = float(lam[0]), np.asarray(lam[1:], dtype=np.float64)
    if c == 0.0:
        qs, wq = np.zeros(1), np.ones(1)
    else:
        q_lo, q_hi = _st.chi2.ppf(TAIL, n), _st.chi2.isf(TAIL, n)
        # sqrt(Q) as the variable: the chi2_1 density's q^(-1/2) singularity becomes bounded
        s, ws = gl_nodes(np.sqrt(q_lo), np.sqrt(q_hi), panels, order)
        qs, wq = s * s, ws * 2.0 * s * _st.chi2.pdf(s * s, n)

    def sf_rest(w, q):
        out = np.ones_like(w)
        for lj in rest:  # loop over the K - 1 wrong models (few)
            if lj == 0.0:
                out = out * (c * q > w)
            elif c == 0.0:
                out = out * _st.chi2.sf(w / lj, n)
            else:
                out = out * (1.0 - special.chndtr(w / lj, n, c * q / lj))  # absolute error ~1e-16 is all we need
        return out

    if lam1 == 0.0:
        return float(np.sum(wq * sf_rest(c * qs, qs)))
    nc = c * qs / lam1
    if c == 0.0:
        t_lo = np.sqrt(lam1 * _st.chi2.ppf(TAIL, n)) * np.ones(1)
        t_hi = np.sqrt(lam1 * _st.chi2.isf(TAIL, n)) * np.ones(1)
    else:
        t_lo = np.sqrt(lam1 * _st.ncx2.ppf(TAIL, n, nc))
        t_hi = np.sqrt(lam1 * _st.ncx2.isf(TAIL, n, nc))
    t, wt = gl_nodes(t_lo, t_hi, panels, order)  # (nq, nodes): the variable is sqrt(W_11)
    w = t * t
    qq = qs[:, None] * np.ones_like(w)
    dens = (_st.chi2.pdf(w / lam1, n) if c == 0.0 else _st.ncx2.pdf(w / lam1, n, nc[:, None])) / lam1
    inner = np.sum(wt * 2.0 * t * dens * sf_rest(w, qq), axis=1)
    return float(np.sum(wq * inner))


def _misassignment(lam: np.ndarray, c: float, n: int) -> tuple[float, float]:
    """``(P[some j >= 2 has W_jj < W_11], error estimate)`` for ``W_jj = ||xi + Lambda_j^{1/2} h_j||^2``.

    The error estimate is the change from doubling the number of panels in both directions plus the
    ``4e-14`` of mass cut from the ranges.
    """
    if float(lam[0]) == 0.0 and c == 0.0:
        return 0.0, 0.0  # the own loss is 0: never beaten
    coarse = _correct_prob(lam, c, n, 12, 16)
    fine = _correct_prob(lam, c, n, 24, 16)
    return float(min(max(1.0 - fine, 0.0), 1.0)), float(abs(fine - coarse) + 4 * TAIL)


_MIS3_ORDER = 16  # Gauss-Legendre nodes per panel of the general K = 3 law
_MIS3_PRUNE = 1e-18  # nodes with a smaller total weight are skipped; their summed weight joins the error estimate
_MIS3_LEVELS = ((3, 3, 2), (4, 4, 3), (6, 6, 4), (8, 8, 6))  # panels per piece in (t, g, e), coarse to fine
_MIS3_TARGET = 1e-10  # two successive levels this close: converged
_MIS3_NU_FLOOR = 0.02  # below it every column's conditional law is steep: no accuracy is claimed (abs_error inf)
_MIS3_CLAIM = 1e-8  # the absolute error the K = 3 law promises wherever it claims one


def _gl_unit(panels: int, order: int = _MIS3_ORDER):
    """Composite Gauss-Legendre nodes and weights on ``[0, 1]``."""
    x, w = special.roots_legendre(order)
    edges = np.linspace(0.0, 1.0, panels + 1)
    a, b = edges[:-1, None], edges[1:, None]
    return (0.5 * (a + b) + 0.5 * (b - a) * x).ravel(), (0.5 * (b - a) * w).ravel()


def _gl_pieces(brk: np.ndarray, panels: int, cubic: bool = False):
    """Composite Gauss-Legendre on each piece ``brk[..., i] .. brk[..., i + 1]`` (vectorised over leading axes).

    ``cubic`` maps ``u -> 3u^2 - 2u^3`` first: an endpoint square-root singularity (the top of a circle) becomes
    analytic, so the rule keeps converging geometrically."""
    u, wu = _gl_unit(panels)
    if cubic:
        wu = wu * 6.0 * u * (1.0 - u)
        u = u * u * (3.0 - 2.0 * u)
    lo, hi = brk[..., :-1, None], brk[..., 1:, None]
    x, w = lo + (hi - lo) * u, (hi - lo) * wu
    return x.reshape(x.shape[:-2] + (-1,)), w.reshape(w.shape[:-2] + (-1,))


def _k3_columns(F: list, x: int, y: int, z: int) -> dict:
    """``c_x = sqrt(S_xx) gamma``, ``c_y = k c_x + s eta``, ``c_z = A c_x + B eta + sqrt(v) zeta`` with
    ``gamma, eta, zeta`` independent standard ``N(0, I_n)``, from the exact rationals ``F`` of ``S``.

    Column ``y``'s sign is flipped where needed so that ``k >= 0`` (``W_yy`` ignores it).  ``s^2`` and ``v`` are
    Schur complements and ``1 - k``, ``1 + k`` differences of nearly equal entries: computed exactly, then rounded,
    so a near-singular ``S`` loses no digits here."""
    Sxx, Sxy, Syy, Sxz, Szz = F[x][x], F[x][y], F[y][y], F[x][z], F[z][z]
    Syz = F[y][z]
    if Sxy < 0:
        Sxy, Syz = -Sxy, -Syz
    s2 = Syy - Sxy**2 / Sxx
    Tzy = Syz - Sxz * Sxy / Sxx
    v = Szz - Sxz**2 / Sxx - Tzy**2 / s2
    s = float(s2) ** 0.5
    return {"Sxx": float(Sxx), "k": float(Sxy / Sxx), "k_m": float((Sxx - Sxy) / Sxx),
            "k_p": float((Sxx + Sxy) / Sxx), "s": s, "A": float(Sxz / Sxx), "B": float(Tzy / s2) * s,
            "v": float(v)}


def _k3_t_nodes(g: dict, n: int, panels: int):
    """Nodes and weights (density included) for ``t = sqrt(W_xx)``.

    Two scales can be far below the bulk of ``t``: ``s/(1+k)``, below which the circle ``W_yy = t^2`` is smaller
    than the unit Gaussian blob of ``eta`` (two nearly coincident exact columns), and ``sqrt(v)``, below which the
    smoothed column's noise is as large as the thresholds.  Each gets a piece mapped by ``t = lam sinh(u)``
    (geometric resolution from ``lam`` up); the rest of the range is plain."""
    Sxx = g["Sxx"]
    tl, th = np.sqrt(Sxx * _st.chi2.ppf(TAIL, n)), np.sqrt(Sxx * _st.chi2.isf(TAIL, n))
    u, wu = _gl_unit(panels)
    ts, ws, lo = [], [], tl
    for lam, reach in sorted(((g["s"] / (1.0 + g["k"]), 16.0), (np.sqrt(g["v"]), 4.0))):
        hi = min(reach * lam, 0.5 * th)
        if lam < th / 8 and hi > lo:
            ua, ub = np.arcsinh(lo / lam), np.arcsinh(hi / lam)
            uu = ua + (ub - ua) * u
            ts.append(lam * np.sinh(uu))
            ws.append((ub - ua) * wu * lam * np.cosh(uu))
            lo = hi
    ts.append(lo + (th - lo) * u)
    ws.append((th - lo) * wu)
    t, wt = np.concatenate(ts), np.concatenate(ws)
    return t, wt * 2.0 * t * _st.chi2.pdf(t * t / Sxx, n) / Sxx


def _correct_prob3(g: dict, n: int, own_smoothed: bool, panels: tuple) -> tuple[float, float]:
    """``P[W_11 < W_22, W_11 < W_33]`` for the columns of :func:`_k3_columns` (see :class:`MisassignmentLaw`).

    Rotating ``c_x`` onto the first axis leaves ``t = ||c_x||``, ``e = eta_1`` and ``g = ||eta_rest|| ~ chi_{n-1}``;
    the exact losses are ``W_xx = t^2`` and ``W_yy = (k t + s e)^2 + s^2 g^2`` and, given ``(t, e, g)``,
    ``W_zz ~ v chi'^2_n(((A t + B e)^2 + B^2 g^2) / v)``.  The integrand is ``P[W_zz < min(W_xx, W_yy)]`` when ``z``
    is the own model (``own_smoothed``) and ``1[W_yy > t^2] P[W_zz > t^2]`` when ``x`` is.  ``W_yy = t^2`` is a
    circle in ``(e, g)``; its ``e``-roots split the innermost range exactly and its top ``g = t/s`` splits the
    middle one, so every piece is smooth.  Composite Gauss-Legendre with ``panels = (t, g, e)`` panels per piece.
    Nodes whose total weight is below ``_MIS3_PRUNE`` are skipped: returns ``(value, skipped weight)``, the second
    a bound on what skipping changed (the integrand lies in [0, 1])."""
    k, k_m, k_p, s, A, B, v = (g[key] for key in ("k", "k_m", "k_p", "s", "A", "B", "v"))
    pt, pg, pe = panels
    t, wt = _k3_t_nodes(g, n, pt)
    E = _st.norm.isf(TAIL)
    if n == 1:  # eta is one-dimensional: no g
        gg, wg = np.zeros((len(t), 1)), np.ones((len(t), 1))
    else:
        g_lo = _st.chi.ppf(TAIL, n - 1) if n > 2 else 0.0
        g_hi = _st.chi.isf(TAIL, n - 1)
        brk = np.stack([np.full_like(t, g_lo), np.clip(t / s, g_lo, g_hi), np.full_like(t, g_hi)], axis=1)
        gg, wg = _gl_pieces(brk, pg, cubic=True)
        wg = wg * _st.chi.pdf(gg, n - 1)
    tg_w = wt[:, None] * wg
    keep = tg_w > _MIS3_PRUNE
    skipped = float(np.sum(tg_w[~keep]))  # the e-weights of a (t, g) pair sum to at most 1
    T, G, W0 = np.broadcast_to(t[:, None], gg.shape)[keep], gg[keep], tg_w[keep]
    # e-roots of (k t + s e)^2 + s^2 g^2 = t^2 (k >= 0), the upper one free of cancellation:
    # (q - k t)/s = ((1 - k)(1 + k) t^2 - s^2 g^2) / (s (q + k t)),  q = sqrt(t^2 - s^2 g^2)
    q2 = T * T - (s * G) ** 2
    cut = q2 > 0
    q = np.sqrt(np.where(cut, q2, 0.0))
    r_hi = np.where(cut, np.clip((k_m * k_p * T * T - (s * G) ** 2) / (s * (q + k * T)), -E, E), -E)
    r_lo = np.where(cut, np.clip(-(q + k * T) / s, -E, E), -E)
    cols = [np.full_like(T, -E), r_lo]
    if own_smoothed and n in (1, 3):  # the threshold W_yy^(n/2) is not analytic at the circle's centre (odd n)
        cols.append(np.clip(-k * T / s, r_lo, r_hi))
    cols += [r_hi, np.full_like(T, E)]
    brk = np.stack(cols, axis=1)
    pieces = brk.shape[1] - 1
    inside = np.zeros(pieces, bool)
    inside[1:-1] = True  # the pieces between the two roots: W_yy < t^2
    inside = np.repeat(inside, pe * _MIS3_ORDER)
    total = 0.0
    chunk = max(1, 2_000_000 // (pieces * pe * _MIS3_ORDER))
    for i in range(0, len(T), chunk):  # loop over chunks of (t, g) pairs: bounded memory
        sl = slice(i, i + chunk)
        ee, we = _gl_pieces(brk[sl], pe)
        W = W0[sl, None] * we * np.exp(-0.5 * ee * ee) / np.sqrt(2.0 * np.pi)
        m = W > _MIS3_PRUNE
        skipped += float(np.sum(W[~m]))
        Tm, Gm, Em = np.broadcast_to(T[sl, None], W.shape)[m], np.broadcast_to(G[sl, None], W.shape)[m], ee[m]
        ins = np.broadcast_to(inside, W.shape)[m]
        nc = ((A * Tm + B * Em) ** 2 + (B * Gm) ** 2) / v
        if own_smoothed:
            thr = np.where(ins, (k * Tm + s * Em) ** 2 + (s * Gm) ** 2, Tm * Tm)
            p = special.chndtr(thr / v, n, nc)
        else:
            p = np.where(ins, 0.0, 1.0 - special.chndtr(Tm * Tm / v, n, nc))
        total += float(np.sum(W[m] * p))
    return total, skipped


def _k3_rationals(S: np.ndarray) -> list:
    """The entries of the symmetric ``S`` as exact fractions (every float is one)."""
    return [[Fraction(float(S[min(i, j), max(i, j)])) for j in range(3)] for i in range(3)]


def _misassignment3(S: np.ndarray, n: int) -> tuple[float, float, tuple]:
    """``(P[misassignment], error estimate, (S_11, lambda_2, lambda_3))`` of the general ``K = 3`` law.

    Every decision below is exact (rational arithmetic on the entries of ``S``).  Two exactly coincident wrong
    columns (``det S_{23} = 0``) give the ``K = 2`` ``F(n, n)`` tail against the smaller of the two.  Otherwise the
    column ``z`` with the largest ``nu_j = Var(c_j | other two) / S_jj`` is the smoothed one (the own column when two
    wrong models nearly coincide, so nothing in the integrand is steep) and :func:`_correct_prob3` runs at the panel
    levels ``_MIS3_LEVELS`` until two successive values differ by at most ``_MIS3_TARGET``; the estimate is that
    change plus the mass cut from the ranges, the weight of skipped nodes and a rounding allowance (it exceeds 1e-8
    only if no level pair converged).  Where ``max_j nu_j < _MIS3_NU_FLOOR`` (three
    models nearly collinear, none two nearly coincident) every conditional law is steep, no level is trusted, and
    the estimate is ``inf``."""
    F = _k3_rationals(S)
    minor = {(i, j): F[i][i] * F[j][j] - F[i][j] ** 2 for i, j in ((0, 1), (0, 2), (1, 2))}
    det = F[0][0] * minor[(1, 2)] - F[0][1] * (F[0][1] * F[2][2] - F[1][2] * F[0][2]) \
        + F[0][2] * (F[0][1] * F[1][2] - F[1][1] * F[0][2])
    if min(F[j][j] for j in range(3)) <= 0 or min(minor.values()) < 0 or det < 0:
        raise ValueError("S must be positive definite for the general K = 3 law (or singular only through two "
                         f"identical wrong models); got eigenvalues {np.round(np.linalg.eigvalsh(S), 12).tolist()}")
    for j in (1, 2):
        if minor[(0, j)] == 0:
            raise ValueError(f"S has the own model's residual column proportional to wrong model {j + 1}'s (its 2x2 "
                             "block is singular): the two losses tie or one always wins; the general K = 3 law needs "
                             "that block positive definite")
    s11 = float(F[0][0])
    # the one-factor split T = diag(lambda) + tau tau^T of the wrong columns' covariance given the own one (reported)
    t22, t33 = float(minor[(0, 1)] / F[0][0]), float(minor[(0, 2)] / F[0][0])
    r = abs(float(F[1][2] - F[0][1] * F[0][2] / F[0][0]))
    lam = (s11, float(t22 - r * np.sqrt(t22 / t33)), float(t33 - r * np.sqrt(t33 / t22)))
    if minor[(1, 2)] == 0:  # c_3 = kappa c_2 exactly: min(W_22, W_33) = m W_22 with m = min(1, kappa^2)
        m = min(Fraction(1), (F[1][2] / F[1][1]) ** 2)
        lam_p, lam_m = preference_eigen(float(m * F[1][1]), s11, float(F[0][1]) * float(m) ** 0.5)
        return _f_tail(lam_p, lam_m, n), 1e-14, lam
    if det == 0:
        raise ValueError("S is singular with every 2x2 block positive definite (three collinear models): the "
                         "general K = 3 law needs S positive definite there")
    nu = [det / (F[j][j] * minor[tuple(i for i in range(3) if i != j)]) for j in range(3)]
    z = int(np.argmax([float(v) for v in nu]))
    x, y = (1, 2) if z == 0 else (0, 3 - z)
    g = _k3_columns(F, x, y, z)
    certified = float(nu[z]) >= _MIS3_NU_FLOOR
    levels = _MIS3_LEVELS if certified else _MIS3_LEVELS[1:3]
    coarse, _ = _correct_prob3(g, n, z == 0, levels[0])
    for panels in levels[1:]:  # loop over refinement levels until two agree
        fine, skipped = _correct_prob3(g, n, z == 0, panels)
        change = abs(fine - coarse)
        if change <= _MIS3_TARGET:
            break
        coarse = fine
    # the change bounds the coarser level's error (the finer converges faster), plus the mass cut from the ranges,
    # the skipped nodes and 1e-13 for rounding in the sums and the cdf
    err = change + 6 * TAIL + skipped + 1e-13 if certified else float("inf")
    return float(min(max(1.0 - fine, 0.0), 1.0)), float(err), lam


def symmetric_placement(own_norm: float, other_norm: float, sigma: float, k: int) -> tuple[np.ndarray, float]:
    """Directions ``u_1, ..., u_k`` (rows, in ``R^k``) with ``|u_1| = own_norm``, ``|u_j| = other_norm`` and
    one common inner product ``gamma`` between every pair, as negative as allowed (``gamma >= -sigma^2``:
    then ``S = Gram + sigma^2 1 1^T`` has equal off-diagonal entries ``gamma + sigma^2 >= 0``).

    ``gamma = -sigma^2`` makes ``S`` diagonal -- the condition that maximises the pairwise probability
    for ``k = 2`` (:func:`ifca_worst_case`), imposed on every pair -- whenever the Gram matrix
    ``diag(|u_j|^2 + sigma^2) - sigma^2 1 1^T`` is positive semi-definite; otherwise ``gamma`` is the most
    negative value keeping it so (a root of ``sum_j (-gamma)/(|u_j|^2 - gamma) = 1``).
    Returns the ``(k, k)`` rows and ``gamma``.
    """
    a = check_real("own_norm", own_norm, low=0.0)
    b = check_real("other_norm", other_norm, low=0.0)
    sigma = check_real("sigma", sigma, low=0.0)
    k = check_int("k", k, low=2)
    norms2 = np.array([a * a] + [b * b] * (k - 1))

    def excess(g: float) -> float:  # PSD of diag(norms2 - g) + g 1 1^T (g < 0) iff sum(-g/(norms2 - g)) <= 1
        return float(np.sum(-g / (norms2 - g))) - 1.0

    gamma = -sigma**2
    if gamma < 0 and (np.any(norms2 == 0) or excess(gamma) > 0):
        hi = -1e-300 if not np.any(norms2 == 0) else 0.0
        gamma = 0.0 if np.any(norms2 == 0) else float(optimize.brentq(excess, gamma, hi, xtol=1e-300, rtol=1e-15))
    G = np.diag(norms2 - gamma) + gamma
    w, V = np.linalg.eigh(G)
    U = V * np.sqrt(np.clip(w, 0.0, None))  # rows: U U^T = G
    return U, gamma


def symmetric_misassignment(alpha: float, delta: float, sigma: float, n: int, k: int) -> MisassignmentLaw:
    """Exact misassignment probability (K = ``k`` models) at IFCA Lemma 1's symmetric placement.

    Own model at the largest distance Assumption 1 allows, ``a = (1/2 - alpha) Delta``, every wrong model
    at the smallest, ``b = (1/2 + alpha) Delta``, pairwise inner products as in :func:`symmetric_placement`.
    For ``k = 2`` and ``ab >= sigma^2`` this is the worst case of :func:`ifca_worst_case`; for ``k >= 3`` it is
    an admissible placement (so a lower bound on the worst case), not proven to be the maximiser.
    """
    alpha = check_real("alpha", alpha, low=0.0, high=0.5, low_inclusive=False, high_inclusive=False)
    delta = check_real("delta", delta, low=0.0, low_inclusive=False)
    U, _ = symmetric_placement((0.5 - alpha) * delta, (0.5 + alpha) * delta, sigma, k)
    S = U @ U.T + sigma**2
    off = S[~np.eye(k, dtype=bool)].mean()
    S[~np.eye(k, dtype=bool)] = off  # remove eigen-decomposition rounding
    return MisassignmentLaw.from_cov(S, n)
