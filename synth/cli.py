"""``python -m synth``: run one synthetic experiment (``run``); sweeps and reports register here too.

Errors in flags or values print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
import sys
from collections.abc import Callable, Iterable, Sequence

from .errors import UsageError, run_main
from .store import StoreError
from .validation import did_you_mean

__all__ = ["ESTIMATOR_OF", "CleanParser", "UsageError", "algo_flags", "check_algo_flags", "human", "json_safe", "main",
           "print_record", "register_command"]

# name -> (configure(subparser), run(args) -> exit code); later modules (sweeps, reports) add theirs
_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]] = {}


class CleanParser(argparse.ArgumentParser):
    """argparse that reports mistakes as one line (with a did-you-mean hint) instead of usage + traceback, and
    refuses a flag given twice (argparse would keep the last value without a word)."""

    def parse_known_args(self, args=None, namespace=None):  # noqa: D102 - argparse API (subparsers call it too)
        args = sys.argv[1:] if args is None else list(args)
        self.given_options(args)
        return super().parse_known_args(args, namespace)

    def given_options(self, argv: Sequence[str]) -> dict[str, str]:
        """``dest -> flag`` for every option of this parser that ``argv`` gives (up to a ``--``); a UsageError for
        an option given twice, under one spelling or two (``--eps1`` and ``--cfl-eps1``).  Repeatable options
        (``action="append"``) and help are left out."""
        seen: dict[str, str] = {}
        for token in argv:
            if token == "--":
                break
            if not token.startswith("-"):
                continue
            flag = token.split("=", 1)[0] if token.startswith("--") else token
            action = self._option_string_actions.get(flag)
            if action is None or isinstance(action, _REPEATABLE):
                continue
            if action.dest in seen:
                also = "" if seen[action.dest] == flag else f" (as {seen[action.dest]} and {flag}, one flag)"
                raise UsageError(f"{self.prog}: error: {flag} given twice{also}; give it once")
            seen[action.dest] = flag
        return seen

    def error(self, message: str):  # noqa: D401 - argparse API
        if "unrecognized arguments:" in message:
            bad = message.split("unrecognized arguments:", 1)[1].split()
            flag = next((b for b in bad if b.startswith("-")), bad[0] if bad else "")
            options = _all_options(self)
            message = f"unrecognized argument {flag!r}{did_you_mean(flag.split('=')[0], options)}"
        elif "invalid choice:" in message:
            message = message.replace("\n", " ")
        raise UsageError(f"{self.prog}: error: {message}")


_REPEATABLE = (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction, argparse._HelpAction,
               argparse._VersionAction)


def _all_options(parser: argparse.ArgumentParser) -> list[str]:
    """Option strings of a parser and of all its subparsers."""
    out = []
    for action in parser._actions:
        out.extend(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out.extend(_all_options(sub))
    return out


_CONVERT = {"int": int, "float": float, "str": str, "ints": str, "floats": str}


def typed_flag(kind: str, flag: str, words: tuple[str, ...] = ()):
    def convert(text: str):
        if text in words:
            return text
        try:
            return _CONVERT[kind](text)
        except ValueError:
            what = "an integer" if kind == "int" else "a number"
            raise argparse.ArgumentTypeError(f"{flag} expects {what}{''.join(f' or {w!r}' for w in words)}, "
                                             f"got {text!r}") from None
    return convert


def register_command(name: str, help_: str, configure, run) -> None:
    """Add a subcommand (used by sweep and report modules)."""
    _COMMANDS[name] = (help_, configure, run)


def _configure_run(sub: argparse.ArgumentParser) -> None:
    from .experiment import PARAMS

    for name, spec in PARAMS.items():
        flag = "--" + name.replace("_", "-")
        default = "K" if (name == "n_clusters" and spec.default is None) else spec.default
        # a help text that states its own default (what None means) is not given a second one
        shown = spec.help if "(default" in spec.help else f"{spec.help} (default: {default})"
        kwargs = {"dest": name, "default": argparse.SUPPRESS, "type": typed_flag(spec.kind, flag), "help": shown}
        if spec.choices:
            kwargs["metavar"] = "{" + ",".join(spec.choices) + "}"
        sub.add_argument(flag, **kwargs)
    sub.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_argument("--history", action="store_true", help="include the per-round history in the JSON")
    add_max_hours(sub)


def add_max_hours(sub: argparse.ArgumentParser) -> None:
    """The ``--max-hours`` flag: the time ceiling of :func:`synth.cost.work_ceiling` for this command."""
    sub.add_argument("--max-hours", dest="max_hours", type=typed_flag("float", "--max-hours"), default=None,
                     metavar="H", help="refuse work estimated to take longer than H hours, before starting (default: "
                     "$CFLAB_MAX_HOURS or 12)")


def _run(args: argparse.Namespace) -> int:
    from .cost import work_ceiling
    from .experiment import PARAMS, run_experiment

    params = {k: v for k, v in vars(args).items() if k in PARAMS}
    # --rounds also sets the split regime's halves (IFCA's 2T split), whatever the algorithm
    given = [k for k in params if not (k == "rounds" and params.get("regime") == "split")]
    check_algo_flags(given, str(params.get("algo", PARAMS["algo"].default)), algo_flags, "python -m synth run",
                     ESTIMATOR_OF)
    try:
        with work_ceiling(args.max_hours):
            record = run_experiment(params, history=args.history)
    except FloatingPointError as exc:
        raise UsageError(diverged_message("python -m synth", exc, params)) from None
    except (ValueError, TypeError) as exc:
        if "non-finite" in str(exc) and not isinstance(exc, StoreError):
            raise UsageError(diverged_message("python -m synth", exc, params)) from None
        text = flag_message(str(exc), params.get("algo", "ifca"))
        if text == str(exc):
            raise
        raise type(exc)(text) from None
    print_record(record, args.json)
    return 0


# estimator hyper-parameters whose run flag (a key of synth.experiment.PARAMS) has another name, per --algo
# (synth.experiment.ALGORITHMS builds the estimators from the flags)
FLAG_OF = {
    "*": {"n_rounds": "rounds"},
    "pacfl": {"n_subspace": "pacfl_p", "distance_threshold": "pacfl_threshold", "proximity": "pacfl_proximity",
              "linkage": "pacfl_linkage", "hc_linkage": "pacfl_linkage"},
    "kfed": {"local_clusters": "kfed_local_clusters", "awasthi_sheffet": "kfed_awasthi_sheffet",
             "margin": "kfed_margin"},
    "flexcfl": {"alpha": "flexcfl_alpha", "pretrain_steps": "flexcfl_pretrain", "eta": "flexcfl_eta",
                "migration": "flexcfl_migration", "migration_margin": "flexcfl_margin"},
    "fesem": {"warmup_steps": "fesem_warmup", "prox": "fesem_prox", "center_init": "fesem_init"},
    "fedsoft": {"prox": "fedsoft_prox", "smoother": "fedsoft_smoother", "estimation_interval": "fedsoft_interval"},
    "cfl": {"eps1": "cfl_eps1", "eps2": "cfl_eps2", "warmup_rounds": "cfl_warmup", "min_split_size": "cfl_min_split",
            "linkage": "cfl_linkage"},
    "clove": {"sqrt_loss": "loss_vector"},
}
# flags that scale a run's numbers besides the estimator's own (the data: theta*'s norm, noise, regularisation)
DATA_SCALE = ("R", "sigma", "reg")
# the estimator class of synth.algorithms behind each --algo (nets.algorithms.ALGOS names the same classes; a test
# holds the two equal)
ESTIMATOR_OF = {"ifca": "IFCA", "global": "GlobalModel", "local": "LocalModels", "oneshot-kmeans": "OneShotKMeans",
                "local-kmeans": "LocalKMeans", "srfca": "SRFCA", "clove": "CLoVE", "cfl": "CFL",
                "oneshot-ifca": "OneShotIFCA", "kfed": "KFED", "pacfl": "PACFL", "flexcfl": "FlexCFL", "fesem": "FeSEM",
                "fedsoft": "FedSoft", "perfedavg": "PerFedAvg", "fedproto": "FedProto", "fedpac": "FedPAC",
                "fedala": "FedALA"}
# hyper-parameters that synth.experiment.ALGORITHMS sets itself for an --algo, whatever its flag says (FedAvg, CFL,
# Per-FedAvg and FedALA start from zero models)
_FIXED_BY_BUILDER = {"global": ("init",), "cfl": ("init",), "perfedavg": ("init",), "fedala": ("init",)}
# run flags that are no estimator's hyper-parameter but shape one algorithm's construction: the ball init's alpha
# (IFCA Assumption 1; CLoVE's --init ball), CLoVE's choice of k
_BUILDER_FLAGS = {"ifca": ("alpha",), "clove": ("alpha", "k_selection")}


def algo_flags(algo: str) -> frozenset[str]:
    """The ``synth run`` flags (keys of :data:`synth.experiment.PARAMS`) that set a hyper-parameter of ``--algo
    algo``: those its estimator declares (``_parameter_constraints``, through :data:`FLAG_OF`), less those the
    builder fixes, plus the builder's own flags of that algorithm."""
    import synth.algorithms as algorithms

    from .experiment import PARAMS

    declared = getattr(algorithms, ESTIMATOR_OF[algo])._parameter_constraints
    fixed = _FIXED_BY_BUILDER.get(algo, ())
    keys = {FLAG_OF.get(algo, {}).get(h) or FLAG_OF["*"].get(h) or h for h in declared if h not in fixed}
    return frozenset(k for k in (*keys, *_BUILDER_FLAGS.get(algo, ())) if k in PARAMS)


def check_algo_flags(given: Iterable[str], algo: str, flags_of: Callable[[str], frozenset[str]], prog: str,
                     algos: Iterable[str]) -> None:
    """Refuse (UsageError, one line) a flag of ``given`` (parameter names) that sets a hyper-parameter of some
    algorithm of ``algos`` (``flags_of(a)``) but not of ``algo``: the run would ignore it without a word.  Flags of
    no algorithm in particular (the data, the seed, the run's size) always apply."""
    algos = list(algos)
    if algo not in algos:
        return  # the parameter check names the unknown algorithm
    own = flags_of(algo)
    for key in given:
        if key in own:
            continue
        owners = [a for a in algos if key in flags_of(a)]
        if owners:
            whose = f"--algo {', '.join(owners)}" if len(owners) <= 4 else f"{len(owners)} other algorithms"
            mine = ", ".join(sorted("--" + k.replace("_", "-") for k in own)) or "none"
            raise UsageError(f"{prog}: error: --{key.replace('_', '-')} is a flag of {whose}, not of --algo {algo}, "
                             f"which would ignore it (its flags: {mine}); drop it or choose another algorithm")


def flag_of(algo: str, name: str) -> str | None:
    """The ``synth run`` flag (``--pacfl-p``) that sets estimator hyper-parameter ``name`` (``n_subspace``) of
    ``--algo algo``, or ``None`` when no flag does."""
    from .experiment import PARAMS

    key = FLAG_OF.get(algo, {}).get(name) or FLAG_OF["*"].get(name) or name
    return "--" + key.replace("_", "-") if key in PARAMS else None


def flag_message(text: str, algo: str) -> str:
    """An estimator's error (``n_subspace must be ...``) as the flag that set the value (``--pacfl-p (n_subspace)
    must be ...``); other messages unchanged."""
    name = text.split(" ", 1)[0]
    flag = flag_of(algo, name) if name.isidentifier() and text.startswith(name + " must") else None
    if flag is None or flag == "--" + name.replace("_", "-"):  # a flag of the same name is named as it is
        return text
    return f"{flag} ({name})" + text[len(name):]


def diverged_message(prog: str, exc: BaseException, params: dict) -> str:
    """One error line for a run whose numbers left the finite range, naming the flags that scale them: the
    estimator's (step sizes, proximal weights) and the data's (``--R``, ``--sigma``, ``--reg``) that were given."""
    algo = params.get("algo", "ifca")
    knobs = [flag_of(algo, k) for k in getattr(exc, "knobs", ())] or ["--step-size"]
    knobs = list(dict.fromkeys(k for k in knobs if k is not None)) or ["--step-size"]
    scale = [f"--{k.replace('_', '-')}" for k in DATA_SCALE if k in params] + knobs
    given = [f"{f} {params[f[2:].replace('-', '_')]}" for f in dict.fromkeys(scale)
             if f[2:].replace("-", "_") in params]
    suspects = [g.split(" ")[0] for g in given] + [k for k in knobs if k not in " ".join(given)]
    return (f"{prog}: error: the run diverged ({getattr(exc, 'what', exc)})"
            + (f" with {', '.join(given)}" if given else "") + f"; lower {' or '.join(dict.fromkeys(suspects))}")


def print_record(record: dict, as_json: bool) -> None:
    """One JSON object (full precision), or one aligned ``key: value`` line per metric with floats to 4 significant
    digits (:func:`human`; the history only in JSON)."""
    if as_json:
        print(json.dumps(json_safe(record), allow_nan=False))
        return
    width = max((len(k) for k in record), default=0)
    for key, value in record.items():
        if key != "history":
            print(f"{key:>{width}}: {human(value)}")


HUMAN_DIGITS = 4  # significant digits of a float in output meant for people (JSON keeps every digit)


def human(value: object) -> str:
    """``value`` as a person reads it: a float to :data:`HUMAN_DIGITS` significant digits (``0.00044385664790311767``
    -> ``0.0004439``), also inside lists, tuples and dicts; anything else as ``str`` (integers and text unchanged).
    Seventeen digits of a Monte Carlo estimate or a bound are noise to a reader; ``--json`` has them all."""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return f"{float(value):.{HUMAN_DIGITS}g}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_inner(k)}: {_inner(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_inner(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_inner(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


def _inner(value: object) -> str:
    """An item of a container as :func:`human` shows it: text quoted as ``str(list)`` would, numbers rounded."""
    return repr(value) if isinstance(value, str) else human(value)


def json_safe(obj):
    """``obj`` with every non-finite float replaced, so that ``--json`` output is strict JSON.

    NaN becomes ``null`` (no value); +-infinity becomes the string ``"inf"`` / ``"-inf"`` (e.g. ``client_error`` when a
    client has no cluster).
    """
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


register_command("run", "run one synthetic experiment and print its metrics", _configure_run, _run)


def _configure_seal(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("stores", nargs="+", metavar="DIR", help="a sweep's output folder written before digests")


def _seal(args: argparse.Namespace) -> int:
    """Seal stores the user trusts: a digest is an integrity check against accidental or casual edits of stored
    trials (anyone can recompute one), not a signature; sealing vouches for the store as it is now."""
    from .store import seal_store

    for directory in args.stores:
        print(f"python -m synth seal: {directory}: {seal_store(directory)} record(s) sealed")
    return 0


register_command("seal", "give a sweep store written before digests its digests (checked first)", _configure_seal,
                 _seal)


def build_parser() -> CleanParser:
    parser = CleanParser(prog="python -m synth", description="cflab synthetic experiments", allow_abbrev=False)
    subs = parser.add_subparsers(dest="command", required=True, parser_class=CleanParser)
    for name, (help_, configure, _) in _COMMANDS.items():
        sub = subs.add_parser(name, help=help_, description=help_, allow_abbrev=False)
        configure(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 0 on success, 2 on any error (one line on stderr), 130 on Ctrl-C; see :mod:`synth.errors`."""
    return run_main("python -m synth", _main, argv,
                    diverged_hint="lower --step-size (or --R, the scale of the models)")


def _main(argv: list[str]) -> int:
    _load_plugins()
    args = build_parser().parse_args(argv)
    return _COMMANDS[args.command][2](args)


def _load_plugins() -> None:
    """Import the modules that register further subcommands (if present)."""
    import importlib

    for mod in ("synth.sweep", "synth.report"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
