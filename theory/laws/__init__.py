"""Exact laws of the mixed-linear-regression model with Gaussian features and fresh data.

Setting (IFCA Sec. V-A, SR-FCA Prop. 4.1, CLoVE App. A): a client of cluster
``c`` draws ``n`` fresh pairs ``y = <theta*_c, x> + eps`` with ``x ~ N(0, I_d)``,
``eps ~ N(0, sigma^2)``; its empirical squared loss on a model ``theta`` is
``f(theta) = ||X u + eps||^2 / n`` with ``u = theta*_c - theta``.

Objects follow the ``scipy.stats`` convention: a *frozen* law with ``cdf``,
``sf``, ``pdf`` (where cheap), ``ppf``, ``mean``, ``var`` and ``rvs``.

* :func:`client_loss_law` -- ``f(theta) ~ (||u||^2 + sigma^2) chi2_n / n`` (CLoVE App. A.1).
* :func:`root_loss_law` -- ``sqrt f(theta) ~ sqrt((||u||^2 + sigma^2)/n) chi_n``, with the exact
  Gamma-function moments :func:`chi_mean`, :func:`chi_var` and CLoVE's Stirling
  approximations beside them (:func:`clove_moment_report`).
* :class:`GeneralizedChi2` -- ``sum_j w_j chi'^2_{k_j}(nc_j)``, cdf by Imhof's (1961) inversion formula.
* :class:`PairwisePreference` -- ``P[f(theta_j) < f(theta_1)]`` for a client of cluster 1: an
  ``F(n, n)`` tail (derivation in the class docstring).
* :func:`ifca_worst_case` / :func:`search_worst_case` -- the largest pairwise misassignment
  probability over every placement IFCA's Assumption 1 allows (IFCA Lemma 1), derived in closed form
  and confirmed by numerical search.
* :func:`ols_edge_law` -- the ONE_SHOT edge statistic ``||w_i - w_j||^2`` of two clients' OLS ERMs,
  conditional on their designs: a generalised chi-square (SR-FCA Alg. 1, Lemma 4.6).
* :func:`ols_edge_law_unconditional` -- the same statistic with the designs integrated out: a scale mixture of
  noncentral chi-squares over two chi-square variables, its mean in closed form.
* :func:`slv_mean` / :func:`slv_covariance` -- exact mean and covariance of a client's square-root
  loss vector (CLoVE Lemmas A.1-A.7), the cross moment from the bivariate-chi formula
  ``E[chi_a chi_b] = E[chi_n]^2 2F1(-1/2, -1/2; n/2; r^2)``.
* :func:`kl_mlr` -- ``KL(p_i(x, y) || p_j(x, y))`` of two linear-Gaussian clients (SR-FCA Prop. 4.1).
"""

from __future__ import annotations

from .chi import chi_mean, chi_var, client_loss_law, clove_moment_report, root_loss_law
from .clove_a1 import A1WorstCase, clove_a1_worst_case, search_a1_worst_case
from .edge import UnconditionalEdgeLaw, ols_edge_law, ols_edge_law_unconditional
from .gchi2 import GeneralizedChi2
from .kl import kl_mlr
from .misassignment import (
    MisassignmentLaw,
    symmetric_misassignment,
    symmetric_placement,
)
from .preference import (
    PairwisePreference,
    UnderflowWarning,
    chernoff_preference_bound,
    log_f_tail,
    preference_eigen,
    preference_probability,
)
from .slv import slv_covariance, slv_mean
from .worst_case import WorstCase, ifca_worst_case, search_worst_case

__all__ = [
    "UnderflowWarning",
    "log_f_tail",
    "GeneralizedChi2",
    "PairwisePreference",
    "WorstCase",
    "A1WorstCase",
    "MisassignmentLaw",
    "chernoff_preference_bound",
    "chi_mean",
    "chi_var",
    "client_loss_law",
    "clove_a1_worst_case",
    "clove_moment_report",
    "ifca_worst_case",
    "kl_mlr",
    "ols_edge_law",
    "ols_edge_law_unconditional",
    "UnconditionalEdgeLaw",
    "preference_eigen",
    "preference_probability",
    "root_loss_law",
    "search_a1_worst_case",
    "search_worst_case",
    "slv_covariance",
    "slv_mean",
    "symmetric_misassignment",
    "symmetric_placement",
]
