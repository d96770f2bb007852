"""``python -m theory`` commands that evaluate the exact laws directly (no result object, no Monte Carlo).

* ``preference`` -- :class:`theory.laws.PairwisePreference`: the probability that a client of cluster 1
  prefers a wrong model ``theta_j`` to its own ``theta_1`` (IFCA Lemma 1, K = 2), an ``F(n, n)`` tail,
  at a given placement (``--own-norm``, ``--other-norm``, ``--cos``) or at the worst placement IFCA's
  Assumption 1 allows (``--alpha``, ``--delta``; :func:`theory.laws.ifca_worst_case`).
* ``edge`` -- :func:`theory.laws.ols_edge_law_unconditional`: SR-FCA ONE_SHOT's edge statistic with the designs
  integrated out.
* ``findings`` -- :mod:`theory.findings`, recomputed now.
* ``misassignment`` -- :class:`theory.laws.MisassignmentLaw`: ``P[argmin_j f(theta_j) != 1]`` with ``K``
  models at the symmetric placement (IFCA Lemma 1, any K), from ``--alpha``/``--delta`` or the two norms.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from synth.cli import CleanParser, UsageError, human, json_safe

from .laws import (
    MisassignmentLaw,
    PairwisePreference,
    chernoff_preference_bound,
    ifca_worst_case,
    symmetric_misassignment,
    symmetric_placement,
)

__all__ = ["COMMANDS"]

PROG = "python -m theory"


def _num(kind, flag: str):
    def convert(text: str):
        try:
            return kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} expects {'an integer' if kind is int else 'a number'}, "
                                             f"got {text!r}") from None
    return convert


def _parser(name: str, description: str, example: str) -> CleanParser:
    parser = CleanParser(prog=f"{PROG} {name}", description=description, allow_abbrev=False,
                         epilog=f"example: {PROG} {name} {example}",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sigma", type=_num(float, "--sigma"), required=True, help="noise sigma (>= 0)")
    parser.add_argument("--n", type=_num(int, "--n"), required=True, help="samples per client n (>= 1)")
    parser.add_argument("--alpha", type=_num(float, "--alpha"), default=None,
                        help="IFCA Assumption 1 closeness alpha in (0, 1/2) (with --delta)")
    parser.add_argument("--delta", type=_num(float, "--delta"), default=None, help="separation Delta (with --alpha)")
    parser.add_argument("--own-norm", dest="own_norm", type=_num(float, "--own-norm"), default=None,
                        help="||theta*_1 - theta_1|| (instead of --alpha/--delta)")
    parser.add_argument("--other-norm", dest="other_norm", type=_num(float, "--other-norm"), default=None,
                        help="||theta*_1 - theta_j|| of every wrong model (instead of --alpha/--delta)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _mode(args, name: str) -> str:
    by_alpha = args.alpha is not None or args.delta is not None
    by_norm = args.own_norm is not None or args.other_norm is not None
    if by_alpha == by_norm:
        raise UsageError(f"{PROG} {name}: error: give either --alpha and --delta or --own-norm and --other-norm")
    if by_alpha and (args.alpha is None or args.delta is None):
        raise UsageError(f"{PROG} {name}: error: --alpha and --delta go together")
    if by_norm and (args.own_norm is None or args.other_norm is None):
        raise UsageError(f"{PROG} {name}: error: --own-norm and --other-norm go together")
    return "alpha" if by_alpha else "norm"


def _emit(out: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(json_safe(out), allow_nan=False))
        return
    for key, value in out.items():  # floats to 4 significant digits (the JSON keeps them all)
        print(f"{key:<16} {human(value)}")


def _cmd_preference(argv: list[str]) -> int:
    parser = _parser("preference", "P[f(theta_j) < f(theta_1)] for a client of cluster 1 (IFCA Lemma 1, K = 2): "
                     "exactly F_{n,n}(lambda_-/lambda_+) (theory.laws.PairwisePreference). With --alpha/--delta: "
                     "at the worst placement Assumption 1 allows.",
                     "--own-norm 0.25 --other-norm 0.75 --cos -1 --sigma 0.5 --n 50")
    parser.add_argument("--cos", type=_num(float, "--cos"), default=None,
                        help="cosine between theta*_1 - theta_1 and theta*_1 - theta_j, in [-1, 1] (with the norms)")
    args = parser.parse_args(argv)
    if _mode(args, "preference") == "alpha":
        if args.cos is not None:
            raise UsageError(f"{PROG} preference: error: --cos goes with --own-norm/--other-norm, not --alpha")
        wc = ifca_worst_case(args.alpha, args.delta, args.sigma, args.n)
        a, b, cos = wc.own_norm, wc.other_norm, wc.cos
        out = {"law": "IFCA Lemma 1 pairwise preference, worst placement under Assumption 1",
               "alpha": args.alpha, "delta": args.delta, "regime": wc.regime, "attained": wc.attained}
    else:
        if args.cos is None:
            raise UsageError(f"{PROG} preference: error: --own-norm/--other-norm need --cos")
        a, b, cos = args.own_norm, args.other_norm, args.cos
        out = {"law": "IFCA Lemma 1 pairwise preference at the given placement"}
    if not -1.0 <= cos <= 1.0:
        raise UsageError(f"{PROG} preference: error: --cos must be in [-1, 1], got {cos}")
    law = PairwisePreference([a, 0.0], [b * cos, b * (1.0 - min(cos * cos, 1.0)) ** 0.5], args.sigma, args.n)
    out.update({"own_norm": a, "other_norm": b, "cos": cos, "sigma": args.sigma, "n": args.n,
                "lambda_plus": law.lambda_plus, "lambda_minus": law.lambda_minus, "ratio": law.ratio,
                "prob": law.prob(), "chernoff": chernoff_preference_bound(law.ratio, args.n)})
    _emit(out, args.json)
    return 0


def _cmd_misassignment(argv: list[str]) -> int:
    parser = _parser("misassignment", "P[argmin_j f(theta_j) != 1] for a client of cluster 1 facing K models at the "
                     "symmetric placement (IFCA Lemma 1, any K): exact, by conditioning on the shared noise "
                     "(theory.laws.MisassignmentLaw).",
                     "--k 3 --alpha 0.25 --delta 1 --sigma 0.5 --n 20")
    parser.add_argument("--k", type=_num(int, "--k"), required=True, help="number of models K (>= 2)")
    args = parser.parse_args(argv)
    if _mode(args, "misassignment") == "alpha":
        law = symmetric_misassignment(args.alpha, args.delta, args.sigma, args.n, args.k)
        a, b = (0.5 - args.alpha) * args.delta, (0.5 + args.alpha) * args.delta
        out = {"law": "IFCA Lemma 1 misassignment, symmetric placement under Assumption 1", "alpha": args.alpha,
               "delta": args.delta}
    else:
        a, b = args.own_norm, args.other_norm
        U, _ = symmetric_placement(a, b, args.sigma, args.k)
        S = U @ U.T + args.sigma**2
        offdiag = ~np.eye(args.k, dtype=bool)
        S[offdiag] = S[offdiag].mean()  # remove eigen-decomposition rounding
        law = MisassignmentLaw.from_cov(S, args.n)
        out = {"law": "IFCA Lemma 1 misassignment at the symmetric placement with the given norms"}
    out.update({"k": args.k, "own_norm": a, "other_norm": b, "sigma": args.sigma, "n": args.n,
                "shared": law.shared, "lambdas": list(law.lambdas), "prob": law.prob, "abs_error": law.abs_error})
    _emit(out, args.json)
    return 0


def _cmd_edge(argv: list[str]) -> int:
    parser = CleanParser(prog=f"{PROG} edge", allow_abbrev=False,
                         description="ONE_SHOT's edge statistic ||w_hat_i - w_hat_j||^2 of two clients' OLS ERMs with "
                                     "the Gaussian designs integrated out (theory.laws.ols_edge_law_unconditional): "
                                     "E in closed form and P[||w_hat_i - w_hat_j|| <= r] exactly",
                         epilog=f"example: {PROG} edge --n-i 20 --n-j 20 --d 2 --dist 1 --sigma 1 --r 0.5")
    for flag, kind, text in (("--n-i", int, "samples of client i (>= d)"), ("--n-j", int, "samples of client j (>= d)"),
                             ("--d", int, "dimension d"), ("--dist", float, "||w*_i - w*_j|| (>= 0)"),
                             ("--sigma", float, "noise sigma (> 0)"), ("--r", float, "radius r (ONE_SHOT's lambda)")):
        parser.add_argument(flag, dest=flag[2:].replace("-", "_"), type=_num(kind, flag), required=True, help=text)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    from .laws import ols_edge_law_unconditional

    law = ols_edge_law_unconditional(args.n_i, args.n_j, args.d, args.dist, args.sigma)
    if args.r < 0:
        raise UsageError(f"{PROG} edge: error: --r must be >= 0, got {args.r}")
    p, err = law.cdf_with_error(args.r**2)
    _emit({"law": "SR-FCA ONE_SHOT edge statistic, designs integrated out", "n_i": args.n_i, "n_j": args.n_j,
           "d": args.d, "dist": args.dist, "sigma": args.sigma, "r": args.r, "mean_sq_distance": law.mean(),
           "prob_edge": p, "abs_error": err}, args.json)
    return 0


def _cmd_findings(argv: list[str]) -> int:
    from .findings import FINDINGS, render, run_finding

    parser = CleanParser(prog=f"{PROG} findings", allow_abbrev=False,
                         description="the project's theory findings, recomputed now (exact laws; Monte Carlo with "
                                     "fixed seeds), each with the command that regenerates it",
                         epilog=f"example: {PROG} findings --only srfca-prop4.1 --trials-scale 0.5")
    parser.add_argument("--only", action="append", default=None, metavar="ID",
                        help=f"one finding (repeatable); ids: {', '.join(FINDINGS)}")
    parser.add_argument("--trials-scale", dest="trials_scale", type=_num(float, "--trials-scale"), default=1.0,
                        help="multiply every finding's Monte Carlo trials (default 1)")
    parser.add_argument("--list", action="store_true", help="list the finding ids and titles, compute nothing")
    parser.add_argument("--json", action="store_true", help="one JSON object per finding, one per line")
    parser.add_argument("--write", metavar="FILE", default=None,
                        help="replace the generated section of FILE (between its BEGIN/END marker lines, as in "
                             "FINDINGS.md) by every finding's text")
    args = parser.parse_args(argv)
    if not args.trials_scale > 0:
        raise UsageError(f"{PROG} findings: error: --trials-scale must be > 0, got {args.trials_scale}")
    ids = args.only or list(FINDINGS)
    for fid in ids:
        if fid not in FINDINGS:
            from synth.validation import did_you_mean

            raise UsageError(f"{PROG} findings: error: unknown finding {fid!r}{did_you_mean(fid, FINDINGS)}")
    if args.list:
        for fid in ids:
            print(f"{fid:<26} {FINDINGS[fid].paper}: {FINDINGS[fid].title}")
        return 0
    if args.write is not None:
        from .findings import BEGIN, END, render_all, write_section

        if args.only or args.trials_scale != 1.0 or args.json:
            raise UsageError(f"{PROG} findings: error: --write takes every finding at --trials-scale 1 (no --only, "
                             "--trials-scale or --json)")
        target = Path(args.write)
        if not target.is_file() or BEGIN not in target.read_text(encoding="utf-8") \
                or END not in target.read_text(encoding="utf-8"):
            raise UsageError(f"{PROG} findings: error: --write {args.write}: not a file holding the marker lines "
                             f"{BEGIN!r} and {END!r}")
        write_section(target, render_all([run_finding(fid) for fid in ids]))
        print(f"wrote the theory findings into {target}")
        return 0
    paper = None
    for fid in ids:  # loop over findings
        rec = run_finding(fid, args.trials_scale)
        if args.json:
            print(json.dumps(json_safe(rec), allow_nan=False), flush=True)
            continue
        print(render(rec, paper), flush=True)
        paper = rec["paper"]
    return 0


COMMANDS = {"preference": _cmd_preference, "misassignment": _cmd_misassignment, "edge": _cmd_edge,
            "findings": _cmd_findings}
