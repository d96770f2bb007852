"""Fuzz the command lines and the sweep-spec parser: success or a clean one-line error, never a crash.

Hypothesis draws flag names (real, misspelt and invented) and values (numbers of every sign and size, nan,
inf, text, empty, lists).  Counts that would make a *valid* run long are drawn small, so every example
finishes quickly; the property is about the outcome, not the size of the problem.  Each CLI call is made
in-process; the test fails on any exception escaping ``main`` or on an error that is not exactly one line.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synth import experiment, sweep
from synth.cli import main as synth_main

FLAGS = [name.replace("_", "-") for name in experiment.PARAMS]
WEIRD_FLAGS = ["sigm", "rounds2", "K ", "n-init-", "x", "", "step_size", "--", "json2"]
SMALL = {"rounds", "local-steps", "local-train-steps", "n-init", "clients-per-cluster", "n", "d", "K",
         "trmean-steps", "n-refine", "max-clusters", "cfl-warmup", "n-clusters"}

numbers = st.one_of(
    st.integers(-5, 8),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([0, -1, 1e300, -1e-300, 0.5, 2.5]),
)
texts = st.one_of(st.text(max_size=6), st.sampled_from(["", "nan", "inf", "-inf", "1,2", "1,,2", "a,b", "1e999",
                                                        "ifca", "srfca", "clove", "yes", "no", "sphere"]))


def _value(flag: str):
    if flag in SMALL:
        return st.one_of(st.integers(-3, 4).map(str), texts)
    return st.one_of(numbers.map(lambda x: repr(x) if isinstance(x, float) else str(x)), texts)


@st.composite
def argvs(draw):
    argv = ["run", "--K", "2", "--clients-per-cluster", "3", "--n", "15", "--d", "3", "--rounds", "3", "--json"]
    for _ in range(draw(st.integers(1, 3))):
        flag = draw(st.sampled_from(FLAGS + WEIRD_FLAGS))
        argv += ["--" + flag, draw(_value(flag))]
    return argv


@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=argvs())
def test_synth_run_fuzz(argv, capsys):
    code = _call(synth_main, argv)
    out, err = capsys.readouterr()
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        assert err.count("\n") == 1 and "Traceback" not in err, (argv, err)
    elif "-h" not in argv and "--help" not in argv:
        assert out.strip().startswith("{"), (argv, out)


spec_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=True), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
spec_keys = st.sampled_from(list(sweep.SPEC_KEYS) + ["fixd", "grd", "trails", "algo"])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.dictionaries(spec_keys, spec_values, max_size=5), st.dictionaries(
    st.sampled_from(list(experiment.PARAMS) + ["sigmaa", "Rr"]), spec_values, max_size=3))
def test_spec_parser_fuzz(raw, params):
    raw = dict(raw)
    if params and "fixed" not in raw:
        raw["fixed"] = params
    try:
        spec = sweep.parse_spec(raw)
    except (ValueError, TypeError) as exc:
        assert str(exc) and "\n" not in str(exc).strip()
        return
    assert spec.points  # a parsed spec always has something to run


@pytest.mark.parametrize("argv", [
    ["run", "--K", "2", "--rounds", "nan"], ["run", "--sigma", "inf"], ["run", "--sigma", "1e999"],
    ["run", "--step-size", "1,,2"], ["run", "--clients-per-cluster", "3,a"], ["sweep"], ["report"],
    ["sweep", "/nonexistent.toml", "--out", "/tmp/x"], ["report", "/nonexistent-dir"],
])
def test_known_nasty_inputs(argv, capsys):
    assert synth_main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_value_of_inf_never_reaches_math():
    # belt and braces for the property above: the schema refuses non-finite reals before any arithmetic
    with pytest.raises(ValueError, match="finite"):
        experiment.validate_params({"sigma": math.inf})


# -- the other entry points: theory, nets, paper_repro.py ------------------------------------------------------

def _call(main, argv) -> int:
    """``main(argv)``'s exit status; a drawn ``-h`` asks for help, which exits (status 0) as argparse does."""
    try:
        return main(argv)
    except SystemExit as exc:
        assert exc.code == 0, (argv, exc.code)
        return 0


def _strict(name):
    raise ValueError(f"{name} is not JSON")


def _check_outcome(argv, code, out, err, ok=(0,)):
    assert code in (*ok, 2), (argv, code, err)
    if code == 2:
        assert err.count("\n") == 1 and "Traceback" not in err, (argv, err)
        return
    assert "Traceback" not in err, (argv, err)
    assert out.strip(), (argv, "success that prints nothing")
    if "--json" in argv and "show" not in argv and not {"-h", "--help"} & set(argv):
        for line in out.strip().splitlines():  # strict JSON: no NaN or Infinity
            json.loads(line, parse_constant=_strict)


def _theory_results():
    from theory import get_result
    from theory.results import REGISTRY

    get_result("ifca-lemma1")  # imports every results module
    return REGISTRY


@st.composite
def theory_argvs(draw):
    registry = _theory_results()
    names = sorted(registry)
    name = draw(st.one_of(st.sampled_from(names), st.sampled_from(["ifca-lema1", "", "-x", "clove"])))
    res = registry.get(name)
    flags = (list(res.params) + list(res.constants)) if res is not None else []
    flags = [f.replace("_", "-") for f in flags] + ["trials", "seed", "n-jobs", "json", "over", "sigm", "x"]
    cmd = draw(st.sampled_from(["check", "sweep", "show", "list", "chek"]))
    # a valid run stays short: few repetitions, one worker unless the value is refused anyway
    argv = [cmd, name, "--trials", draw(st.sampled_from(["0", "3", "20", "-1", "x", "1e12"]))]
    for _ in range(draw(st.integers(0, 3))):
        flag = draw(st.sampled_from(flags))
        if flag == "n-jobs":
            value = draw(st.sampled_from(["0", "1", "-2", "x", ""]))
        elif flag == "over":
            key = draw(st.sampled_from(flags[:3] or ["alpha"]))
            value = f"{key}=" + draw(st.sampled_from(["", "1", "0.1,0.2", "a,b", ",", "nan", "1,,2"]))
        elif flag == "json":
            argv.append("--json")
            continue
        else:
            value = draw(st.one_of(st.integers(-3, 6).map(str), texts))
        argv += ["--" + flag, value]
    return argv


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=theory_argvs())
def test_theory_cli_fuzz(argv, capsys):
    from theory.cli import main as theory_main

    code = _call(theory_main, argv)
    out, err = capsys.readouterr()
    _check_outcome(argv, code, out, err)


NETS_SMALL = {"clients", "n-per-client", "n-test", "rounds", "local-steps", "n-init", "local-train-steps",
              "trmean-steps", "n-refine", "clusters", "n-clusters", "batch-size", "min-size", "eval-every"}


@st.composite
def nets_argvs(draw):
    from nets.experiment import PARAMS as NETS_PARAMS

    flags = [k.replace("_", "-") for k in NETS_PARAMS if k not in ("device",)] + ["algo-param", "clientz", "json"]
    argv = ["run", "--clients", "4", "--n-per-client", "8", "--n-test", "8", "--rounds", "1", "--local-steps", "1",
            "--device", "cpu"]
    for _ in range(draw(st.integers(1, 3))):
        flag = draw(st.sampled_from(flags))
        if flag == "json":
            argv.append("--json")
            continue
        if flag in NETS_SMALL:
            value = draw(st.one_of(st.integers(-2, 5).map(str), texts))
        elif flag == "algo-param":
            value = draw(st.sampled_from(["x=1", "threshold=nan", "=", "n_init", "step_size=-1"]))
        else:
            value = draw(st.one_of(numbers.map(lambda x: repr(x) if isinstance(x, float) else str(x)), texts))
        argv += ["--" + flag, value]
    return argv


@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=nets_argvs())
def test_nets_cli_fuzz(argv, capsys, tmp_path_factory, monkeypatch):
    pytest.importorskip("torch")
    from nets.cli import main as nets_main

    monkeypatch.chdir(tmp_path_factory.mktemp("nets"))  # a drawn --checkpoint or --data-dir lands here
    code = _call(nets_main, argv)
    out, err = capsys.readouterr()
    _check_outcome(argv, code, out, err)


@st.composite
def repro_argvs(draw):
    argv = ["--list"]  # --list names the targets and returns: every flag is parsed and checked, nothing runs
    for _ in range(draw(st.integers(0, 4))):
        flag = draw(st.sampled_from(["--quick", "--full", "--tiny", "--only", "--out", "--n-jobs", "--backend",
                                     "--scheduler", "--device", "--data-dir", "--progress", "--onyl", "-x"]))
        if flag in ("--quick", "--full", "--tiny", "--progress"):
            argv.append(flag)
        else:
            argv += [flag, draw(st.one_of(texts, st.sampled_from(["ifca-fig3a", "ifca-fig3a,nope", "-1", "0", "dask",
                                                                  "tcp://x:1", "cuda"])))]
    return draw(st.permutations(argv)) if len(argv) < 6 else argv


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=repro_argvs())
def test_paper_repro_cli_fuzz(argv, capsys):
    import paper_repro

    code = _call(paper_repro.main, list(argv))
    out, err = capsys.readouterr()
    _check_outcome(argv, code, out, err)


# -- spec expressions ------------------------------------------------------------------------------------------

atoms = st.one_of(st.sampled_from(["sigma", "R", "x", "y", "pi", "e", "sigmaa", "0", "1e308", "9", "-1", "0.5",
                                   "1e-320", "nan", "inf", "True", "'a'"]), st.integers(-99, 10**6).map(str))
expressions = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "**", "//", "%", "@"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["sqrt", "log", "exp", "abs", "log2", "min", "__import__", "max"]), inner).map(
            lambda t: f"{t[0]}({t[1]})"),
        inner.map(lambda s: "-" + s),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(expr=st.one_of(expressions, st.text(max_size=20)))
def test_spec_expression_fuzz(expr):
    import numpy as np

    names = {"sigma": 0.1, "R": 2.0, "x": np.linspace(0.1, 1.0, 4), "y": np.array([0.5, 1.0, 2.0, 4.0])}
    try:
        value = sweep.evaluate(expr, names, "boundaries[0].y")
    except (ValueError, TypeError) as exc:
        assert str(exc) and "\n" not in str(exc).strip() and "boundaries[0].y" in str(exc), (expr, exc)
        return
    # an accepted expression is a real number or an array of them (non-finite entries only where the
    # arithmetic of an array argument leaves its domain, e.g. log(x - 1))
    assert np.isrealobj(value), (expr, value)
    if np.ndim(value) == 0:
        assert math.isfinite(float(value)), (expr, value)


@st.composite
def law_argvs(draw):
    cmd = draw(st.sampled_from(["preference", "misassignment", "findings"]))
    if cmd == "findings":  # --list computes nothing; the other flags are parsed and checked
        argv = [cmd, "--list"]
        flags = ["only", "trials-scale", "json", "x"]
    else:
        argv = [cmd]
        flags = ["sigma", "n", "alpha", "delta", "own-norm", "other-norm", "cos", "k", "json", "sigm"]
    for _ in range(draw(st.integers(0, 5))):
        flag = draw(st.sampled_from(flags))
        if flag == "json":
            argv.append("--json")
            continue
        value = draw(st.one_of(st.integers(-3, 60).map(str), numbers.map(repr), texts))
        argv += ["--" + flag, value]
    return argv


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=law_argvs())
def test_theory_law_commands_fuzz(argv, capsys):
    from theory.cli import main as theory_main

    code = _call(theory_main, argv)
    out, err = capsys.readouterr()
    _check_outcome(argv, code, out, err)


# -- the campaign's Dask flags and the Flower app runner ---------------------------------------------------------
# Both would start real work once every flag is accepted (a campaign plan times cells and rewrites the manifest; the
# runner starts Ray), so the last step is replaced by a recorder: the property is that every flag is parsed, checked
# and bounded before that step, or refused in one line.

CAMPAIGN_VALUES = ["0", "1", "2", "-1", "1e8", "1000000000", "10001", "nan", "inf", "x", "", "0.5",
                   "tcp://127.0.0.1:1", "tcp://", "srfca-simulated", "zzz", ",", "ifca,clove"]


@st.composite
def campaign_argvs(draw):
    argv = ["--campaign", draw(st.sampled_from(["plan", "plan", "run", "run", "rnu"]))]
    if draw(st.integers(0, 5)):
        argv += ["--backend", draw(st.sampled_from(["dask", "dask", "dask", "loky", "ray"]))]
    flags = st.sampled_from(["--cpus", "--gpus", "--scheduler", "--commit-runs", "--hours", "--budget-hours",
                             "--cells", "--n-jobs", "--device", "--data-dir", "--cpu"])
    for flag in draw(st.lists(flags, max_size=4, unique=True)):  # a flag given twice is refused before any check
        argv += [flag] if flag == "--commit-runs" else [flag, draw(st.sampled_from(CAMPAIGN_VALUES))]
    return argv


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=campaign_argvs())
def test_campaign_dask_flags_fuzz(argv, capsys, monkeypatch):
    import paper_repro
    from figures.campaign import dask_runner, planner

    reached = []
    monkeypatch.setattr(planner, "refresh", lambda *a, **k: (reached.append(k) or ("manifest.csv", "plan")))
    monkeypatch.setattr(planner, "run_campaign", lambda *a, **k: reached.append(k))
    monkeypatch.setattr(dask_runner, "run_campaign", lambda *a, **k: reached.append(k))
    code = _call(paper_repro.main, list(argv))
    out, err = capsys.readouterr()
    _check_outcome(argv, code, out, err)
    for kwargs in reached:  # what got through is bounded
        for key in ("cpus", "gpus"):
            if key in kwargs:
                assert isinstance(kwargs[key], int) and 0 <= kwargs[key] <= paper_repro.MAX_WORKERS, (argv, kwargs)
        if kwargs.get("hours") is not None:
            assert math.isfinite(kwargs["hours"]) and kwargs["hours"] > 0, (argv, kwargs)


@st.composite
def runner_argvs(draw):
    app = draw(st.sampled_from(["examples/flower-ifca"] * 4 + ["examples", "/nonexistent", "", "tests"]))
    argv = [app] if app else []
    counts = st.one_of(st.integers(-2, 5).map(str),
                       st.sampled_from(["2000000", "1e9", "nan", "x", "", "99999999999999999"]))
    if draw(st.integers(0, 4)):  # the required flag, mostly given
        argv += ["--num-supernodes", draw(counts)]
    flags = st.sampled_from(["--run-config", "--run-config", "--actors", "--verbose", "--num-supernode", "--seed"])
    flags = st.one_of(st.sampled_from(["--run-config", "--actors", "--verbose"]), flags)
    for flag in draw(st.lists(flags, max_size=4, unique=True)):
        if flag == "--verbose":
            argv.append(flag)
        elif flag == "--run-config":
            argv += [flag, draw(st.sampled_from(["num-server-rounds=2", "lr=0.05 seed=1", "nope=1", "=", "lr=",
                                                "lr", "num-server-rounds=x", "'a b'", ""]))]
        else:
            argv += [flag, draw(counts)]
    return argv


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(argv=runner_argvs())
def test_flower_runner_fuzz(argv, capsys, monkeypatch):
    pytest.importorskip("flwr")
    from pathlib import Path

    from nets.flower import runner
    from nets.flower.session import check_actors

    def checked_only(server_app, client_app, num_supernodes, *, run_config=None, actors=1, verbose=False):
        # run_app's checks, without starting the simulation
        runner.check_supernodes(num_supernodes)
        check_actors(actors)
        print(f"would run {num_supernodes} SuperNodes")

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(runner, "run_app", checked_only)
    code = _call(runner.main, list(argv))
    out, err = capsys.readouterr()
    _check_outcome(argv, code, out, err)
