"""The general K = 3 misassignment law where two wrong models nearly coincide (issue #42, item 6).

References, each computed independently of :func:`theory.laws.misassignment._misassignment3`:

* n = 1: ``P[z1^2 < z2^2, z1^2 < z3^2]`` for ``z ~ N(0, S)`` is a union of four polyhedral cones, whose Gaussian
  measure is a solid angle (spherical polygons, Van Oosterom-Strackee), evaluated with mpmath at 40 digits.
* exactly coincident wrong models: the law is the K = 2 ``F(n, n)`` tail (:func:`theory.laws.preference_probability`).
* equal off-diagonal entries: the one-factor conditioning of the symmetric placement
  (:func:`theory.laws._misassignment`), with its own error estimate.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from theory.laws import MisassignmentLaw, preference_probability
from theory.laws.misassignment import _misassignment, _misassignment3

SIGMA = 0.5
OWN, WRONG, PHI = 0.5, 1.0, 2.0  # |u_1|, |u_2| = |u_3|, angle of u_2 from u_1


def _placement(eps: float) -> np.ndarray:
    """Residual covariance ``S = U U^T + sigma^2``: the two wrong models ``eps`` radians apart."""
    u1 = OWN * np.array([1.0, 0.0, 0.0])
    u2 = WRONG * np.array([np.cos(PHI), np.sin(PHI), 0.0])
    u3 = WRONG * np.array([np.cos(PHI + eps), np.sin(PHI + eps), 0.0])
    U = np.array([u1, u2, u3])
    return U @ U.T + SIGMA**2


def _solid_angle_reference(S: np.ndarray) -> float:
    """n = 1, exactly: P[misassignment] = 1 - 2 (Omega(S) + Omega(D S D)) / (4 pi), D = diag(1, 1, -1), where Omega is
    the solid angle of the whitened cone {z2 >= |z1|, z3 >= |z1|} (extreme rays (0,0,1), (1,1,1), (0,1,0), (-1,1,1))."""
    with mp.workdps(40):
        def omega(M: np.ndarray) -> mp.mpf:
            L = mp.cholesky(mp.matrix(M.tolist()))
            rays = [mp.lu_solve(L, mp.matrix(v)) for v in ((0, 0, 1), (1, 1, 1), (0, 1, 0), (-1, 1, 1))]
            rays = [r / mp.norm(r) for r in rays]

            def triangle(a, b, c):  # signed solid angle of a spherical triangle
                det = mp.det(mp.matrix([[a[i], b[i], c[i]] for i in range(3)]))
                return 2 * mp.atan2(det, 1 + (a.T * b)[0] + (b.T * c)[0] + (c.T * a)[0])

            return abs(triangle(rays[0], rays[1], rays[2]) + triangle(rays[0], rays[2], rays[3]))

        D = np.diag([1.0, 1.0, -1.0])
        return float(1 - 2 * (omega(S) + omega(D @ S @ D)) / (4 * mp.pi))


def _coincident_reference(n: int) -> float:
    """Both wrong models at u_2: the K = 2 F(n, n) tail of the own model against one of them."""
    cos = float(np.cos(PHI))
    return preference_probability(OWN, WRONG, cos, SIGMA, n)


@pytest.mark.parametrize("eps", [1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6])
def test_near_coincident_wrong_models_at_one_sample_are_exact_to_1e8_with_an_honest_error(eps):
    # the reference first reproduces a well-conditioned S, where the law was already exact before this fix
    S_plain = np.array([[1.0, 0.3, -0.2], [0.3, 1.5, 0.4], [-0.2, 0.4, 2.0]])
    assert _solid_angle_reference(S_plain) == pytest.approx(MisassignmentLaw.from_cov(S_plain, 1).prob, abs=1e-12)
    S = _placement(eps)
    law = MisassignmentLaw.from_cov(S, 1)
    true_error = abs(law.prob - _solid_angle_reference(S))
    assert true_error <= 1e-8
    assert law.abs_error <= 1e-8
    assert law.abs_error >= true_error  # the estimate bounds the error it reports on


@pytest.mark.parametrize("n", [1, 2, 5, 30])
def test_exactly_coincident_wrong_models_give_the_two_model_law(n):
    law = MisassignmentLaw.from_cov(_placement(0.0), n)
    assert law.abs_error <= 1e-8
    assert law.prob == pytest.approx(_coincident_reference(n), abs=1e-12)


@pytest.mark.parametrize("n", [2, 5, 20])
def test_near_coincident_wrong_models_converge_to_the_coincident_law(n):
    # every placement certifies 1e-8, and P(eps) - P(0) shrinks in proportion to eps (the gap between the two wrong
    # losses is O(eps)); the proportionality constant is measured between eps = 1e-5 and 1e-6
    p0 = _coincident_reference(n)
    laws = {eps: MisassignmentLaw.from_cov(_placement(eps), n) for eps in (1e-1, 1e-3, 1e-5, 1e-6)}
    assert max(law.abs_error for law in laws.values()) <= 1e-8
    slope = (laws[1e-5].prob - p0) / 1e-5
    assert 0.0 < slope < 1.0
    assert laws[1e-6].prob - p0 == pytest.approx(slope * 1e-6, abs=1e-10)
    assert laws[1e-3].prob - p0 == pytest.approx(slope * 1e-3, rel=0.05)


@pytest.mark.parametrize("n", [2, 5, 20])
def test_near_coincident_symmetric_placements_match_the_one_factor_conditioning_and_certify_1e8(n):
    # S = diag(0.5, lam, lam) + 1 1^T: the wrong models' residual columns differ by a variance-2 lam part only.  At
    # lam = 3e-3 the symmetric placement's own conditioning (a shared factor, independent code) is still a reference
    # with a small estimate of its own; at lam = 1e-4 it is steep (estimate ~1e-4) and the K = 3 law must certify 1e-8.
    c = 1.0
    assert MisassignmentLaw.from_cov(np.diag([0.5, 1e-4, 1e-4]) + c, n).abs_error <= 1e-8
    lams = np.array([0.5, 3e-3, 3e-3])
    ref, ref_err = _misassignment(lams, c, n)
    p, err, _ = _misassignment3(np.diag(lams) + c, n)
    assert err <= 1e-8
    assert ref_err <= 1e-8
    assert abs(p - ref) <= err + ref_err


@pytest.mark.parametrize("eps", [1e-2, 1e-5])
def test_a_wrong_model_near_the_own_model_is_exact_to_1e8_with_an_honest_error(eps):
    # u_2 -> u_1: the own column and wrong model 2's nearly coincide, so a wrong column is the smoothed one
    U = np.array([[OWN, 0.0, 0.0], [OWN * np.cos(eps), OWN * np.sin(eps), 0.0], [-0.3, 0.9, 0.2]])
    S = U @ U.T + SIGMA**2
    law = MisassignmentLaw.from_cov(S, 1)
    true_error = abs(law.prob - _solid_angle_reference(S))
    assert law.abs_error <= 1e-8
    assert law.abs_error >= true_error


@pytest.mark.parametrize("lam", [1e-4, 1e-7])
def test_symmetric_k3_placements_with_nearly_coincident_wrong_models_are_exact_to_1e8(lam):
    # equal off-diagonal entries route from_cov to the shared-factor conditioning, which is steep here (its own
    # estimate is ~1e-4); the general K = 3 computation takes over
    S = np.diag([0.5, lam, lam]) + 1.0
    law = MisassignmentLaw.from_cov(S, 1)
    assert law.shared == 1.0  # still described as the symmetric placement
    true_error = abs(law.prob - _solid_angle_reference(S))
    assert law.abs_error <= 1e-8
    assert law.abs_error >= true_error


def _nearly_collinear(delta: float) -> np.ndarray:
    """Models at (0, 0), (1, 0), (2, delta) and the client's optimum at (0.25, 0.1): collinear at delta = 0."""
    models = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, delta]])
    U = np.array([0.25, 0.1]) - models
    return U @ U.T + SIGMA**2


def test_nearly_collinear_models_above_the_floor_are_exact_to_1e8_with_an_honest_error():
    S = _nearly_collinear(0.15)  # max_j nu_j = 0.058
    law = MisassignmentLaw.from_cov(S, 1)
    true_error = abs(law.prob - _solid_angle_reference(S))
    assert law.abs_error <= 1e-8
    assert law.abs_error >= true_error


def test_nearly_collinear_models_below_the_floor_claim_no_accuracy():
    # max_j nu_j = 0.007 < 0.02: every column's conditional law is steep; the value is a best effort, no bound claimed
    S = _nearly_collinear(0.05)
    law = MisassignmentLaw.from_cov(S, 1)
    assert law.abs_error == np.inf
    assert law.prob == pytest.approx(_solid_angle_reference(S), abs=1e-4)


def test_exactly_collinear_models_and_ties_with_the_own_model_are_refused():
    u = np.array([0.5, 1.0, 1.5])  # d = 1: three collinear models, S of rank 2 (exact in binary)
    with pytest.raises(ValueError, match="collinear"):
        MisassignmentLaw.from_cov(np.outer(u, u) + SIGMA**2, 3)
    U = np.array([[OWN, 0.0], [OWN, 0.0], [0.2, 0.7]])  # wrong model 2 equals the own model: a tie on every draw
    with pytest.raises(ValueError, match="proportional"):
        MisassignmentLaw.from_cov(U @ U.T + SIGMA**2, 3)
