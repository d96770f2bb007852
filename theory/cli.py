"""python -m theory: list the papers' results, show one, check one at a parameter point, or sweep a parameter.

Examples:

    python -m theory list
    python -m theory show ifca-lemma1
    python -m theory check ifca-lemma1 --n 50 --delta 1.0 --sigma 0.5 --alpha 0.25 --trials 20000 --seed 1 --json
    python -m theory sweep ifca-assumption1 --over alpha=0.25,0.1,0,-0.1 --trials 100 --json
    python -m theory preference --own-norm 0.25 --other-norm 0.75 --cos -1 --sigma 0.5 --n 50
    python -m theory misassignment --k 3 --alpha 0.25 --delta 1 --sigma 0.5 --n 20
    python -m theory edge --n-i 20 --n-j 20 --d 2 --dist 1 --sigma 1 --r 0.5
    python -m theory findings --only srfca-prop4.1
    python -m theory atlas --out atlas_out [--quick | --size {quick,medium,default}] [--only NAME,...]

Every result's parameters and constants are flags (--name value, also --name-with-dashes); `python -m theory
check RESULT --help` lists them.  Every "x << y" of the papers is read as x <= much_less * y: --much-less
(default 0.1; 1 reads "<<" as "<=") on every result with such a hypothesis; ">~"/"<~" take the constant
--assume-const (IFCA) or --cond-const (SR-FCA), default 1.  Each check prints every assumption with its two
sides and its margin (positive when it holds).  Mistakes print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from synth.cli import CleanParser, UsageError, human, json_safe
from synth.errors import run_main
from synth.validation import did_you_mean

from .commands import COMMANDS as LAW_COMMANDS
from .results import REGISTRY, get_result
from .results.base import Result

__all__ = ["main"]

PROG = "python -m theory"
_CONVERT = {"int": int, "float": float, "str": str}


def _converter(kind: str, flag: str):
    def convert(text: str):
        try:
            return _CONVERT[kind](text)
        except ValueError:
            want = {"int": "an integer", "float": "a number"}.get(kind, "a value")
            raise argparse.ArgumentTypeError(f"{flag} expects {want}, got {text!r}") from None
    return convert


def _result_parser(name: str, prog: str, sweep: bool = False) -> CleanParser:
    """A parser for one result's parameters and constants (plus trials, seed, json, n-jobs)."""
    res = get_result(name)
    parser = CleanParser(prog=prog, description=res.statement, allow_abbrev=False)
    for key, spec in res.params.items():
        flags = sorted({"--" + key, "--" + key.replace("_", "-")})
        kwargs = {"dest": key, "default": argparse.SUPPRESS, "type": _converter(spec.kind, flags[0]),
                  "help": f"{spec.help} (default: {spec.default})"}
        if spec.choices:
            kwargs["metavar"] = "{" + ",".join(spec.choices) + "}"
        parser.add_argument(*flags, **kwargs)
    for key, value in res.constants.items():
        flags = sorted({"--" + key, "--" + key.replace("_", "-")})
        default = f"the value of --{value.replace('_', '-')}" if isinstance(value, str) else f"{value:g}"
        parser.add_argument(*flags, dest="const__" + key, default=argparse.SUPPRESS, metavar="VALUE",
                            type=_converter("float", flags[0]), help=f"constant {key} (default: {default})")
    more = type(res).trials_for is not Result.trials_for
    parser.add_argument("--trials", type=_converter("int", "--trials"), default=None,
                        help=f"Monte Carlo repetitions (default: {res.default_trials}"
                             + (", more where the result needs them to resolve its verdict" if more else "")
                             + "; 0 = bound and exact only)")
    parser.add_argument("--seed", type=_converter("int", "--seed"), default=0, help="root seed (default: 0)")
    parser.add_argument("--n-jobs", dest="n_jobs", type=_converter("int", "--n-jobs"), default=1,
                        help="parallel workers (same numbers for any value; default 1)")
    parser.add_argument("--progress", action="store_true", help="progress bar on stderr")
    parser.add_argument("--max-hours", dest="max_hours", type=_converter("float", "--max-hours"), default=None,
                        metavar="H", help="refuse a Monte Carlo estimated to take longer than H hours (default: "
                        "$CFLAB_MAX_HOURS or 12)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (sweep: one per line)")
    if sweep:
        parser.add_argument("--over", required=True, help="PARAM=v1,v2,... the parameter to sweep")
    return parser


def _split(args: argparse.Namespace, name: str) -> tuple[dict, dict]:
    res = get_result(name)
    params = {k: v for k, v in vars(args).items() if k in res.params}
    consts = {k[len("const__"):]: v for k, v in vars(args).items() if k.startswith("const__")}
    return params, consts


def _fmt_rhs(rhs) -> str:
    return f"({rhs[0]:.4g}, {rhs[1]:.4g})" if isinstance(rhs, list | tuple) else f"{rhs:.4g}"


def _print_check(chk: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps(json_safe(chk), allow_nan=False))
        return
    print(f"{chk['result']}: {chk['title']}")
    print(f"  {chk['cite']}")
    print(f"  quantity      {chk['quantity']}")
    for key in ("bound", "exact", "empirical"):  # 4 significant digits, as every number for people (JSON: all)
        print(f"  {key:<13} {human(chk[key])}")
    print(f"  CI ({chk['confidence']:.0%})      [{human(chk['ci_low'])}, {human(chk['ci_high'])}]")
    scope = f"  -- {chk['scope']}" if chk.get("scope") else ""
    print(f"  verdict       {chk['verdict']}  (comparison: {chk['comparison']}){scope}")
    if chk["fitted_constant"] is not None:
        print(f"  fitted        {chk['fitted_name']} = {human(chk['fitted_constant'])}  ({chk['fitted_rule']}; "
              f"on the {chk['fitted_on']} value)")
    margins = chk.get("assumption_margins") or {}
    for name, ok in chk["assumptions"].items():
        m = margins.get(name)
        how = ("  (true by construction)" if m is None else
               f"  ({m['lhs']:.4g} {m['relation']} {_fmt_rhs(m['rhs'])}; margin {m['margin']:+.4g})")
        print(f"  [{'x' if ok else ' '}] {name}{how}")
    opt = (chk.get("details") or {}).get("lambda_optimiser")
    if opt:
        print(f"  lambda        best {opt['best_lambda']:.4g} (plateau [{opt['best_plateau'][0]:.4g}, "
              f"{opt['best_plateau'][1]:.4g})): recovery {opt['recovery_at_best']:.3g} "
              f"[{opt['recovery_at_best_ci'][0]:.3g}, {opt['recovery_at_best_ci'][1]:.3g}]"
              + (f", held out {opt['heldout_recovery']:.3g} [{opt['heldout_recovery_ci'][0]:.3g}, "
                 f"{opt['heldout_recovery_ci'][1]:.3g}]" if "heldout_recovery" in opt else "")
              + f"; paper's midpoint {opt['midpoint_lambda']:.4g}: recovery {opt['recovery_at_midpoint']:.3g} "
              f"[{opt['recovery_at_midpoint_ci'][0]:.3g}, {opt['recovery_at_midpoint_ci'][1]:.3g}]")
    for f in chk.get("formula_findings") or []:
        print(f"  finding: {f['where']}: stated {f['stated']} = {f['stated_value']:.6g}, exact {f['exact']} = "
              f"{f['exact_value']:.6g} (stated off by {f['relative_error']:+.3%})")
    for note in chk["notes"]:
        print(f"  note: {note}")


def _cmd_list(argv: list[str]) -> int:
    parser = CleanParser(prog=f"{PROG} list", description="list every result", allow_abbrev=False)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    get_result("ifca-lemma1")  # imports every results module
    order = {"ifca": 0, "srfca": 1, "clove": 2}
    names = sorted(REGISTRY, key=lambda k: (order.get(k.split("-")[0], 3), list(REGISTRY).index(k)))
    if args.json:
        print(json.dumps([{"result": k, "title": REGISTRY[k].title, "cite": REGISTRY[k].cite} for k in names]))
    else:
        width = max(map(len, names))
        for key in names:
            print(f"{key:<{width}}  {REGISTRY[key].title}")
    return 0


def _generic_help(cmd: str, argv: list[str]) -> bool:
    """``show/check/sweep --help`` without a result: print how the command is called and the results; True if so."""
    if not argv or argv[0] not in ("-h", "--help"):
        return False
    what = {"show": "print a result's statement, parameters (defaults, ranges) and constants as JSON",
            "check": "bound, assumptions, exact value, Monte Carlo and verdict of a result at one parameter point",
            "sweep": "the check at every value of one parameter (--over PARAM=v1,v2,...)"}[cmd]
    flags = "" if cmd == "show" else " [--PARAM VALUE ...] [--trials N] [--seed S] [--n-jobs J] [--json]"
    over = " --over PARAM=v1,v2,..." if cmd == "sweep" else ""
    print(f"usage: {PROG} {cmd} RESULT{over}{flags}\n\n{what}.\n")
    if cmd != "show":
        print(f"`{PROG} {cmd} RESULT --help` lists the result's parameters and constants.\n")
    get_result("ifca-lemma1")  # imports every results module
    print("results:")
    width = max(map(len, REGISTRY))
    for key in REGISTRY:
        print(f"  {key:<{width}}  {REGISTRY[key].title}")
    return True


def _cmd_show(argv: list[str]) -> int:
    if _generic_help("show", argv):
        return 0
    if not argv or argv[0].startswith("-"):
        raise UsageError(f"{PROG} show: error: expected a result name (see `{PROG} list`)")
    res = get_result(argv[0])
    info = {"result": res.name, "title": res.title, "cite": res.cite, "statement": res.statement,
            "quantity": res.quantity, "kind": res.kind, "direction": res.direction,
            "params": {k: {"default": s.default, "help": s.help, "choices": s.choices} for k, s in res.params.items()},
            "constants": dict(res.constants), "fitted_constant": res.fit}
    print(json.dumps(info, indent=1))
    return 0


def _cmd_check(argv: list[str]) -> int:
    if _generic_help("check", argv):
        return 0
    if not argv or argv[0].startswith("-"):
        raise UsageError(f"{PROG} check: error: expected a result name (see `{PROG} list`)")
    name = argv[0]
    get_result(name)
    args = _result_parser(name, f"{PROG} check {name}").parse_args(argv[1:])
    _check_run_args(args, f"{PROG} check", name)
    params, consts = _split(args, name)
    chk = get_result(name).check(params, consts, trials=args.trials, seed=args.seed, n_jobs=args.n_jobs,
                                 progress=True if args.progress else False)
    _print_check(chk.to_dict(), args.json)
    return 0


def _cmd_sweep(argv: list[str]) -> int:
    if _generic_help("sweep", argv):
        return 0
    if not argv or argv[0].startswith("-"):
        raise UsageError(f"{PROG} sweep: error: expected a result name (see `{PROG} list`)")
    name = argv[0]
    res = get_result(name)
    args = _result_parser(name, f"{PROG} sweep {name}", sweep=True).parse_args(argv[1:])
    if "=" not in args.over:
        raise UsageError(f"{PROG} sweep: error: --over expects PARAM=v1,v2,..., got {args.over!r}")
    key, values = args.over.split("=", 1)
    key = key.strip().replace("-", "_")
    if key not in res.params:
        raise UsageError(f"{PROG} sweep: error: {name} has no parameter {key!r}{did_you_mean(key, res.params)}")
    convert = _converter(res.params[key].kind, "--over " + key)
    items = [v.strip() for v in values.split(",")]
    if not values.strip() or any(not v for v in items):
        raise UsageError(f"{PROG} sweep: error: --over {key}= needs comma-separated values without empty items, "
                         f"got {args.over!r}")
    try:
        points = [convert(v) for v in items]
    except argparse.ArgumentTypeError as exc:
        raise UsageError(f"{PROG} sweep: error: {exc}") from None
    _check_run_args(args, f"{PROG} sweep", name, len(points))
    params, consts = _split(args, name)
    for value in points:  # loop over sweep points
        chk = res.check({**params, key: value}, consts, trials=args.trials, seed=args.seed, n_jobs=args.n_jobs,
                        progress=True if args.progress else False).to_dict()
        if args.json:
            print(json.dumps(json_safe(chk), allow_nan=False))
        else:
            print(f"{key}={human(value)}: bound={human(chk['bound'])} exact={human(chk['exact'])} "
                  f"empirical={human(chk['empirical'])} CI=[{human(chk['ci_low'])}, {human(chk['ci_high'])}] "
                  f"verdict={chk['verdict']}"
                  + (f" ({chk['scope']})" if chk.get("scope") else ""))
    return 0


def _cmd_atlas(argv: list[str]) -> int:
    """The tightness atlas (theory.atlas): slack of every bound over a documented 2-D grid of its parameters."""
    from .atlas import SIZES, run_atlas

    parser = CleanParser(prog=f"{PROG} atlas", description=_cmd_atlas.__doc__, allow_abbrev=False)
    parser.add_argument("--out", required=True, metavar="DIR", help="output folder (resumable: rerun to continue)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--size", choices=SIZES, default="default", help="grid size (default: default)")
    size.add_argument("--quick", action="store_true", help="same as --size quick: 2x2 grids, a few trials")
    parser.add_argument("--only", default=None, metavar="NAME,...", help="comma-separated result names")
    parser.add_argument("--seed", type=_converter("int", "--seed"), default=0, help="root seed (default: 0)")
    parser.add_argument("--n-jobs", dest="n_jobs", type=_converter("int", "--n-jobs"), default=1,
                        help="parallel workers (same numbers for any value; default 1)")
    parser.add_argument("--no-figures", dest="figures", action="store_false", help="tables only")
    args = parser.parse_args(argv)
    if not args.out.strip():
        raise UsageError(f"{PROG} atlas: error: --out must name a folder, got an empty string (use '.' for the "
                         "current one)")
    only = None
    if args.only is not None:
        only = [n.strip() for n in args.only.split(",") if n.strip()]
        if not only:
            raise UsageError(f"{PROG} atlas: error: --only needs at least one result name")
    if args.seed < 0:
        raise UsageError(f"{PROG} atlas: error: --seed must be >= 0, got {args.seed}")
    if args.n_jobs < 1:
        raise UsageError(f"{PROG} atlas: error: --n-jobs must be >= 1, got {args.n_jobs}")
    plot = None
    if args.figures:
        from figures.targets.atlas import plot_atlas as plot
    res = run_atlas(args.out, size="quick" if args.quick else args.size, only=only, seed=args.seed,
                    n_jobs=args.n_jobs, plot=plot, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"atlas: {len(res['summaries'])} results, {len(res['cells'])} cells in {res['seconds']:.1f} s -> "
          + ", ".join(str(Path(args.out) / f) for f in res["files"]))
    return 0

def _check_run_args(args: argparse.Namespace, prog: str, name: str, n_points: int = 1) -> None:
    """--n-jobs, --seed, and the memory and time the Monte Carlo will need (refused with the estimate), before any
    work."""
    from synth.cost import check_memory, check_time, record_bytes, work_ceiling

    if args.n_jobs == 0 or args.n_jobs < -1:
        raise UsageError(f"{prog}: error: --n-jobs must be -1 (all cores) or an integer in [1, inf), got {args.n_jobs}")
    if args.seed < 0:
        raise UsageError(f"{prog}: error: --seed must be an integer in [0, inf), got {args.seed}")
    res = get_result(name)
    trials = res.trials_for(res.resolve(_split(args, name)[0])[0]) if args.trials is None else args.trials
    params = {**{k: s.default for k, s in res.params.items()}, **_split(args, name)[0]}
    per_rep_bytes, per_rep_seconds = repetition_cost(res, params)
    batch = max(1, int(res.batch))
    workers = max(1, (os.cpu_count() or 1) if args.n_jobs < 0 else args.n_jobs)
    # one repetition's arrays (the federation the result samples, pairwise client matrices) are needed even for
    # the exact value alone; a task holds `batch` of them, each worker one task
    check_memory(per_rep_bytes * min(batch, max(trials, 1)) * min(workers, max(1, -(-trials // batch))),
                 f"{name} at these parameters (one repetition's federation and pairwise matrices)",
                 hint="lower the number of clients, samples or the dimension")
    if trials > 0:
        tasks = -(-trials // batch)
        # one record per task of `batch` repetitions, and up to one stored value per repetition (a Python float
        # in a list: 32 bytes)
        check_memory(n_points * (tasks * record_bytes({}) + 32 * trials),
                     f"--trials {trials} ({tasks} task(s) of up to {batch} repetitions at {n_points} point(s))",
                     hint="lower --trials")
        seconds = n_points * trials * per_rep_seconds / min(workers, os.cpu_count() or 1)
        with work_ceiling(args.max_hours):
            check_time(seconds, f"{name} with --trials {trials} at {n_points} point(s)",
                       hint="lower --trials or the sizes")


def repetition_cost(res, p: dict) -> tuple[float, float]:
    """Bytes and seconds of one Monte Carlo repetition of result ``res`` at parameters ``p``, from the sizes every
    result names alike (clients: ``K`` x ``clients_per_cluster`` or ``m``; samples ``n``; dimension ``d``; rounds
    ``T``/``rounds``): the federation, pairwise client matrices, and a fixed cost per task of repetitions
    (measured on the 2-core EPYC: 5 us a repetition of ifca-lemma1 in tasks of 2000, 15-25 ms of ifca-thm1 and
    srfca-lemma4.6 alone; an order-of-magnitude estimate)."""
    from synth.cost import CALL_SECONDS, GRADIENT_FLOPS_PER_SECOND

    def size(key: str, default: int = 1) -> int:
        value = p.get(key)
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 \
            else default

    K = size("K")
    clients = K * size("clients_per_cluster") if "clients_per_cluster" in p else (size("m") * K if "m" in p else K)
    n, d = size("n"), size("d")
    rounds = max(size("T", 0), size("rounds", 0), size("trmean_steps", 0), 1)
    memory = 8.0 * (2 * clients * n * d + 4 * clients * n + 3 * clients * clients + 2 * clients * d)
    flops = rounds * (4.0 * clients * n * d * (size("k", K) + 1) + 3.0 * clients * clients * d)
    seconds = (0.02 + rounds * 50 * CALL_SECONDS) / max(1, int(res.batch)) + flops / GRADIENT_FLOPS_PER_SECOND
    return memory, seconds


_COMMANDS = {"list": _cmd_list, "show": _cmd_show, "check": _cmd_check, "sweep": _cmd_sweep, "atlas": _cmd_atlas}

# the exact laws evaluated directly (theory/commands.py)
_COMMANDS.update(LAW_COMMANDS)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 0 on success, 2 on any error (one line on stderr), 130 on Ctrl-C; see :mod:`synth.errors`."""
    return run_main(PROG, _main, argv, diverged_hint="lower the step size of the result's algorithm")


def _main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    cmd = argv[0]
    if cmd not in _COMMANDS:
        raise UsageError(f"{PROG}: error: unknown command {cmd!r}{did_you_mean(cmd, _COMMANDS)}; "
                         f"choose from {', '.join(_COMMANDS)}")
    return _COMMANDS[cmd](argv[1:])
