"""``python -m nets``: ``run`` one neural-network experiment; ``flower`` runs it as a Flower app; ``fetch`` a dataset.

Errors in flags, values or data files print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence

from synth.cli import CleanParser, print_record, typed_flag
from synth.errors import UsageError, run_main
from synth.progress import Progress

__all__ = ["build_parser", "main"]


def _algo_param(text: str):
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--algo-param expects KEY=VALUE, got {text!r}")
    for convert in (int, float):
        try:
            return key, convert(value)
        except ValueError:
            pass
    return key, {"true": True, "false": False, "none": None}.get(value.lower(), value)


def _configure_run(sub: argparse.ArgumentParser, looped: bool = True) -> None:
    from .experiment import PARAMS

    for name, spec in PARAMS.items():
        flag = "--" + name.replace("_", "-")
        # a help text that states its own default (what None means) is not given a second one
        shown = spec.help if "(default" in spec.help else f"{spec.help} (default: {spec.default})"
        kwargs = {"dest": name, "default": argparse.SUPPRESS, "type": typed_flag(spec.kind, flag, spec.words),
                  "help": shown}
        if spec.choices:
            kwargs["metavar"] = "{" + ",".join(spec.choices) + "}"
        flags = [flag]
        if name in ("eps1", "eps2"):  # CFL's thresholds: synth's --eps1/--eps2 are SR-FCA's; --cfl-eps1 is both CLIs'
            flags.insert(0, "--cfl-" + name)
            kwargs["metavar"] = name.upper()
            kwargs["help"] = (f"{spec.help} (CFL's threshold, as --cfl-{name} of python -m synth run, where --{name} "
                              f"is SR-FCA's cluster {'diameter' if name == 'eps1' else 'separation'}; default: "
                              f"{0.05 if name == 'eps1' else 0.5}, Sattler et al.'s)")
        sub.add_argument(*flags, **kwargs)
    sub.add_argument("--algo-param", dest="algo_params", action="append", type=_algo_param, default=[],
                     metavar="KEY=VALUE", help="extra estimator hyper-parameter by name (repeatable)")
    sub.add_argument("--max-hours", dest="max_hours", type=typed_flag("float", "--max-hours"), default=None,
                     metavar="H", help="refuse a run estimated to take longer than H hours (default: "
                     "$CFLAB_MAX_HOURS or 12)")
    sub.add_argument("--download", action="store_true", help="fetch missing files from the standard sources first")
    if looped:
        sub.add_argument("--looped", action="store_true", help="use the looped reference backend (for testing)")
    sub.add_argument("--json", action="store_true", help="print one JSON object")
    sub.add_argument("--history", action="store_true", help="include per-round metrics in the output")


# flags that every algorithm reads: the local models' and SR-FCA's trimmed-mean steps default to --rounds x
# --local-steps, --step-size is every estimator's step size, and --seed draws the data, the initial weights and the
# minibatch order of every run (nets.experiment.run_experiment spawns the three streams from it)
_EVERY_ALGO = ("rounds", "local_steps", "step_size", "seed")


def algo_flags(algo: str) -> frozenset[str]:
    """The ``nets run`` flags that set a hyper-parameter of ``--algo algo``: those of the hyper-parameters its
    estimator declares (``_parameter_constraints``, through :data:`nets.experiment.FLAG_OF_HYPER`), and
    :data:`_EVERY_ALGO`."""
    from .algorithms import hyper_parameters
    from .experiment import FLAG_OF_HYPER

    return frozenset(f for f in (*(FLAG_OF_HYPER.get(h) for h in hyper_parameters(algo)), *_EVERY_ALGO) if f)


def _run(args: argparse.Namespace) -> int:
    from synth.cli import check_algo_flags

    from .algorithms import ALGOS
    from .experiment import PARAMS, run_experiment

    params = {k: v for k, v in vars(args).items() if k in PARAMS}
    check_algo_flags(params, str(params.get("algo", PARAMS["algo"].default)), algo_flags, "python -m nets run", ALGOS)
    algo_params = _algo_params(args)
    from synth.cost import work_ceiling

    # rounds on stderr (a bar on a terminal, else a line every 30 s): a run logged to a file was silent for minutes
    rounds = params.get("rounds", PARAMS["rounds"].default)
    try:
        with work_ceiling(args.max_hours), Progress("nets run", rounds, "rounds") as progress:
            record = run_experiment(params, history=args.history, batched=not args.looped, download=args.download,
                                    algo_params=algo_params, on_round=round_counter(progress))
    except FloatingPointError as exc:
        raise UsageError(diverged_line(exc, params, algo_params)) from None
    print_record(record, args.json)
    return 0


def round_counter(progress: Progress) -> Callable[[int], None]:
    """``run_experiment``'s ``on_round``: round ``t`` (0-based) is done.  A first call past round 0 follows a resumed
    checkpoint, whose rounds count as done but not in the ETA's rate."""
    first = [True]

    def on_round(t: int) -> None:
        if first[0] and t > 0:
            progress.resumed(t)
        first[0] = False
        progress.set(t + 1)

    return on_round


def _algo_params(args: argparse.Namespace) -> dict:
    """The ``--algo-param`` pairs as a dict; a key given twice is refused (the last value would win silently)."""
    algo_params = dict(args.algo_params)
    if len(algo_params) < len(args.algo_params):
        keys = [k for k, _ in args.algo_params]
        twice = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"--algo-param {twice}=... is given twice; give each hyper-parameter once")
    return algo_params


def diverged_line(exc: FloatingPointError, params: dict, algo_params: dict) -> str:
    """One error line for a diverged run naming the flags (or --algo-param names) that scale its updates."""
    from .experiment import FLAG_OF_HYPER

    flags = []
    for knob in getattr(exc, "knobs", ()) or ("step_size",):
        flag = FLAG_OF_HYPER.get(knob, knob)
        text = (f"--algo-param {knob}" if knob in algo_params or knob not in FLAG_OF_HYPER
                else f"--{flag.replace('_', '-')}")
        if flag is not None and text not in flags:
            flags.append(text)
    given = [f"{f} {params[f[2:].replace('-', '_')]}" for f in flags
             if f.startswith("--") and not f.startswith("--algo-param") and f[2:].replace("-", "_") in params]
    given += [f"{f} = {algo_params[f.split()[1]]}" for f in flags if f.startswith("--algo-param") and
              f.split()[1] in algo_params]
    return (f"python -m nets: error: the run diverged ({getattr(exc, 'what', exc)})"
            + (f" with {', '.join(given)}" if given else "") + f"; lower {' or '.join(flags)}")


def _configure_flower(sub: argparse.ArgumentParser) -> None:
    _configure_run(sub, looped=False)
    sub.add_argument("--timeout", type=typed_flag("float", "--timeout"), default=600.0, metavar="SECONDS",
                     help="seconds an exchange waits for its clients; later answers count as lost (default: 600)")
    sub.add_argument("--actors", type=typed_flag("int", "--actors"), default=1,
                     help="clients computing at a time (Ray actors of Flower's simulation engine; default: 1)")
    sub.add_argument("--verbose", action="store_true", help="show Flower's and Ray's logs")


def _flower(args: argparse.Namespace) -> int:
    """``nets run``'s experiment as a Flower app under ``flwr.simulation.run_simulation`` (:mod:`nets.flower`).

    Refused before Ray starts: whatever ``nets run`` refuses (the same checks and messages, inside the same work
    ceiling, ``--max-hours``), a timeout that is not a finite number > 0, more actors than cores or than the memory
    holds.  Exit status 1 when some round had no answering client (one line naming the clients that answered per
    round); Ctrl-C 130, SIGTERM 143, in both cases after Ray and its processes are stopped.
    """
    import importlib.util

    if importlib.util.find_spec("flwr") is None or importlib.util.find_spec("ray") is None:
        raise ValueError("python -m nets flower needs Flower's simulation engine: pip install -e \".[nets,flower]\"")
    from synth.cli import check_algo_flags
    from synth.cost import work_ceiling

    from .algorithms import ALGOS
    from .experiment import PARAMS
    from .flower.server import run
    from .flower.session import Interrupted

    params = {k: v for k, v in vars(args).items() if k in PARAMS}
    # nets run's refusal of another algorithm's flags (over every algorithm, so that e.g. CFL's --eps1 is named)
    check_algo_flags(params, str(params.get("algo", PARAMS["algo"].default)), algo_flags, "python -m nets flower",
                     ALGOS)
    algo_params = _algo_params(args)
    if args.download:
        _download(params)
    try:
        with work_ceiling(args.max_hours):
            record = run(params, algo_params, history=args.history, timeout=args.timeout,
                         actors=args.actors, verbose=args.verbose)
    except Interrupted as exc:
        if exc.signum != signal.SIGTERM:
            raise  # Ctrl-C: run_main's line and status 130
        print("python -m nets: terminated (SIGTERM); the Flower run and its Ray processes were stopped",
              file=sys.stderr, flush=True)
        return 128 + signal.SIGTERM
    silent = record["flower"]["rounds_without_answers"]
    if silent:
        print(f"python -m nets: error: {_silent_rounds_line(record, args.timeout)}", file=sys.stderr, flush=True)
        return 1
    print_record(record, args.json)
    return 0


def _silent_rounds_line(record: dict, timeout: float) -> str:
    """Why a Flower run failed: the rounds in which no client answered, and how many answered in each round."""
    from synth.errors import one_line

    spans: list[list] = []  # [first, last, answering, asked]: consecutive rounds with the same counts
    for key, got, asked in record["flower"]["answered"]:
        last = spans[-1] if spans else None
        if (last is not None and isinstance(key, int) and isinstance(last[1], int) and key == last[1] + 1
                and last[2:] == [got, asked]):
            last[1] = key
        else:
            spans.append([key, key, got, asked])
    counts = ", ".join(f"{'test' if a == 'test' else (f'round {a}' if a == b else f'rounds {a}-{b}')}: {got} of {asked}"
                       for a, b, got, asked in spans)
    silent = record["flower"]["rounds_without_answers"]
    return one_line(f"no client answered in {len(silent)} of {len(record['flower']['answered'])} rounds and tests "
                    f"of the Flower run (clients answering: {counts}); the record is not a result -- raise --timeout "
                    f"(now {timeout:g} s) if the clients are slow, or see --verbose for their errors")


def _download(params: dict) -> None:
    from .data import SOURCES, fetch

    base = str(params.get("dataset", "digits-rotated")).split("-", 1)[0]
    name = {"fmnist": "fashion-mnist", "cifar": "cifar10", "agnews": "ag-news"}.get(base, base)
    if name in SOURCES:
        fetch(name, params.get("data_dir"))


def _configure_fetch(sub: argparse.ArgumentParser) -> None:
    from .data import SOURCES

    sub.add_argument("dataset", choices=sorted(SOURCES), help="dataset to download")
    sub.add_argument("--data-dir", default=None, metavar="DIR", help="data directory (default: $CFLAB_DATA, "
                     "../shared/data, ~/.cache/cflab/data)")


def _fetch(args: argparse.Namespace) -> int:
    from .data import fetch

    for path in fetch(args.dataset, args.data_dir):
        print(path)
    return 0


_COMMANDS = {
    "run": ("run one neural-network experiment and print its metrics", _configure_run, _run),
    "fetch": ("download a dataset's files with checksum verification (needs internet)", _configure_fetch, _fetch),
    "flower": ("run the experiment as a Flower app on Flower's simulation engine (needs the flower extra)",
               _configure_flower, _flower),
}


def build_parser() -> CleanParser:
    parser = CleanParser(prog="python -m nets", description="cflab neural-network experiments", allow_abbrev=False)
    subs = parser.add_subparsers(dest="command", required=True, parser_class=CleanParser)
    for name, (help_, configure, _) in _COMMANDS.items():
        configure(subs.add_parser(name, help=help_, description=help_, allow_abbrev=False))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Exit status 0 on success, 2 on any error (one line on stderr), 130 on Ctrl-C; see :mod:`synth.errors`."""
    return run_main("python -m nets", _main, argv, diverged_hint="lower --step-size")


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return _COMMANDS[args.command][2](args)
