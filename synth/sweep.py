"""Parameter sweeps from TOML specs: ``python -m synth sweep SPEC.toml --out DIR``.

A spec names the fixed parameters, a grid (Cartesian product) and/or a list
of points, the algorithms with their hyper-parameters, the trials per point,
the success criterion and the outputs.  Every parameter key is a key of
:data:`synth.experiment.PARAMS` and is validated with it, so a spec, the
``run`` flags and the experiment can never disagree.  Example
(``synth/specs/ifca_fig3a_small.toml``)::

    name = "ifca_fig3a_small"
    seed = 2020
    trials = 40

    [fixed]                       # every point
    K = 2
    clients_per_cluster = 10
    rounds = 300

    [grid]                        # Cartesian product, in this order
    R = [0.05, 0.1, 0.2, 0.4]
    sigma = [0.05, 0.2]

    [[algorithms]]                # one block per algorithm (label + hyper-parameters)
    label = "IFCA"
    algo = "ifca"
    step_size = [0.01, 0.1, 1.0]
    n_init = 10

    [success]                     # a boolean record key, or a metric with max/min (numbers or expressions)
    metric = "param_error_best_restart"
    max = "0.6 * sigma"

    [outputs]
    metrics = ["param_error", "misclustering"]
    history = false
    [[outputs.curves]]
    x = "R"
    [[outputs.heatmaps]]
    x = "R"
    y = "sigma"
    boundaries = [{ label = "...", y = "expression in x and the fixed parameters" }]

Each trial calls :func:`synth.experiment.run_experiment` with the point's
parameters and a seed from :func:`synth.montecarlo.trial_seed` (root = the
spec's ``seed``, spawn key = (point index, trial index)).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import math
import operator
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .montecarlo import BACKENDS, run_trials
from .spec import ExperimentSpec
from .validation import check_int, did_you_mean

__all__ = [
    "SweepSpec",
    "evaluate",
    "experiment_trial",
    "load_spec",
    "parse_spec",
    "run_sweep",
    "success_of",
]

MAX_TRIALS = 10**9  # per point; a larger count is a typo, and its memory estimate would not fit a float
SPEC_KEYS = ("name", "description", "seed", "trials", "fixed", "grid", "points", "algorithms", "success",
             "outputs")
SUCCESS_KEYS = ("metric", "max", "min")
OUTPUT_KEYS = ("metrics", "history", "curves", "heatmaps")
CURVE_KEYS = ("x", "y", "logx", "title")
HEATMAP_KEYS = ("x", "y", "value", "logx", "logy", "title", "boundaries")
BOUNDARY_KEYS = ("label", "x", "y")
SPEC_FILE = "spec.toml"
# keys of a synth.experiment.run_experiment record: what success.metric and outputs.metrics may name
# (true/false ones are judged as they are; numeric ones need success.max or success.min)
BOOL_METRICS = ("success", "success_any_restart", "success_code_rule")
NUMERIC_METRICS = ("ari", "misclustering", "misclustering_matched", "param_error", "client_error", "n_clusters",
                   "rounds", "separation", "seconds", "param_error_best_restart", "iterations")
RECORD_KEYS = (*NUMERIC_METRICS, *BOOL_METRICS)
# limits that keep a spec expression cheap to evaluate: ``9**9**9`` is refused at once instead of computing a
# 370-million-digit integer
MAX_EXPRESSION_CHARS = 500
MAX_EXPRESSION_NODES = 200
MAX_EXPONENT = 1024.0


# -- safe arithmetic expressions (success thresholds, theory boundaries) --------------------------------------

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCS = {"sqrt": np.sqrt, "log": np.log, "log2": np.log2, "log10": np.log10, "exp": np.exp, "abs": np.abs,
          "min": np.minimum, "max": np.maximum}
_CONSTS = {"pi": math.pi, "e": math.e}


def evaluate(expr: str | float | int, names: Mapping[str, Any], what: str = "expression") -> Any:
    """Evaluate an arithmetic expression over ``names`` (numbers or numpy arrays).

    Allowed: numbers, the names given, ``+ - * / **``, parentheses, ``pi``, ``e`` and the functions
    sqrt, log, log2, log10, exp, abs, min, max (element-wise).  Nothing else (no attributes, indexing or
    other calls), so a spec file cannot run code.  Bounded: at most 500 characters and 200 syntax nodes,
    numbers are floats (no unbounded integer powers), an exponent's magnitude is at most 1024, and a
    result too large for a float is an error, so evaluation is always fast.
    """
    if isinstance(expr, bool):
        raise TypeError(f"{what} must be a number or an arithmetic expression string, got {expr!r}")
    if isinstance(expr, (int, float)):
        return float(expr)
    if not isinstance(expr, str):
        raise TypeError(f"{what} must be a number or an arithmetic expression string, got {type(expr).__name__}")
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"{what} is {len(expr)} characters long; at most {MAX_EXPRESSION_CHARS} are allowed")
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # ValueError: a NUL byte in the text
        raise ValueError(f"{what} {expr[:80]!r} is not a valid arithmetic expression") from None
    n_nodes = sum(1 for _ in ast.walk(tree))
    if n_nodes > MAX_EXPRESSION_NODES:
        raise ValueError(f"{what} {expr[:80]!r} has {n_nodes} syntax elements; at most {MAX_EXPRESSION_NODES} "
                         "are allowed")
    known = {**_CONSTS, **{k: v for k, v in names.items() if v is not None and not isinstance(v, (str, list))}}

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return float(node.value)  # float arithmetic: overflow is an error, never a huge integer
        if isinstance(node, ast.Name):
            if node.id not in known:
                usable = sorted(set(known) | set(_FUNCS))
                raise ValueError(f"{what} {expr!r} uses unknown name {node.id!r}{did_you_mean(node.id, usable)}; "
                                 f"usable: {', '.join(usable)}")
            return known[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and np.any(np.abs(right) > MAX_EXPONENT):
                raise ValueError(f"{what} {expr[:80]!r}: an exponent of magnitude above {MAX_EXPONENT:g} is not "
                                 "allowed")
            return _BINOPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS \
                and not node.keywords:
            arity = 2 if node.func.id in ("min", "max") else 1
            if len(node.args) != arity or any(isinstance(a, ast.Starred) for a in node.args):
                raise ValueError(f"{what} {expr[:80]!r}: {node.func.id}() takes {arity} argument"
                                 f"{'s' if arity > 1 else ''}, got {len(node.args)}")
            return _FUNCS[node.func.id](*[ev(a) for a in node.args])
        raise ValueError(f"{what} {expr[:80]!r}: only numbers, parameter names, + - * / **, parentheses and "
                         f"{', '.join(_FUNCS)} are allowed")

    try:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            value = ev(tree)
    except OverflowError:
        raise ValueError(f"{what} {expr[:80]!r} overflows (its value is too large for a float)") from None
    except ZeroDivisionError:
        raise ValueError(f"{what} {expr[:80]!r} divides by zero") from None
    if isinstance(value, complex) or np.iscomplexobj(value):
        raise ValueError(f"{what} {expr[:80]!r} has a complex value (a negative number to a fractional power?)")
    if np.ndim(value) == 0 and not np.isfinite(value):
        raise ValueError(f"{what} {expr[:80]!r} is not a finite number (it evaluates to {float(value)})")
    return value


# -- the spec --------------------------------------------------------------------------------------------------

# a sweep's parsed spec is the canonical experiment spec (kind "synth-sweep")
SweepSpec = ExperimentSpec


def _unknown(keys, allowed, where: str) -> None:
    for k in keys:
        if k not in allowed:
            raise ValueError(f"unknown key {k!r} in {where}{did_you_mean(k, allowed)}; allowed: {', '.join(allowed)}")


def _table(raw: dict, key: str, where: str = "the spec") -> dict:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise TypeError(f"{key} in {where} must be a table ([{key}]), got {type(value).__name__}")
    return value


def _param_keys(table: dict, where: str) -> None:
    from .experiment import PARAMS

    for k in table:
        if k == "seed":
            raise ValueError(f"seed in {where} is not allowed: every trial gets its own seed from the spec's "
                             "top-level seed")
        if k not in PARAMS:
            raise ValueError(f"unknown parameter {k!r} in {where}{did_you_mean(k, PARAMS)}; "
                             f"known: {', '.join(PARAMS)}")


def _where(point: dict, varying: list[str]) -> str:
    return ", ".join(f"{k}={point.get(k)!r}" for k in varying) or "the only point"


def parse_spec(raw: dict[str, Any], name: str = "sweep", text: str = "") -> ExperimentSpec:
    """Validate a spec given as a dict (parsed TOML) and expand it into the canonical :class:`ExperimentSpec`."""
    from .experiment import validate_params

    if not isinstance(raw, dict):
        raise TypeError(f"a sweep spec must be a table, got {type(raw).__name__}")
    _unknown(raw, SPEC_KEYS, "the spec")
    if "trials" not in raw:
        raise ValueError("the spec must set trials (trials per point), an integer in [1, inf)")
    trials = check_int("trials", raw["trials"], low=1, high=MAX_TRIALS)
    seed = check_int("seed", raw.get("seed", 0), low=0)
    name = str(raw.get("name", name))
    fixed = _table(raw, "fixed")
    _param_keys(fixed, "[fixed]")

    grid = _table(raw, "grid")
    _param_keys(grid, "[grid]")
    for k, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ValueError(f"grid.{k} must be a non-empty list of values, got {values!r}")
    _check_size(grid, raw, trials)
    combos = [dict(zip(grid, vals, strict=True)) for vals in itertools.product(*grid.values())] if grid else []
    explicit = raw.get("points", [])
    if not isinstance(explicit, list) or not all(isinstance(p, dict) for p in explicit):
        raise TypeError("points must be an array of tables ([[points]])")
    for i, p in enumerate(explicit):
        _param_keys(p, f"points[{i}]")
    combos += [dict(p) for p in explicit]
    if not combos:
        combos = [{}]

    algos = raw.get("algorithms", [{}])
    if not isinstance(algos, list) or not algos or not all(isinstance(a, dict) for a in algos):
        raise TypeError("algorithms must be a non-empty array of tables ([[algorithms]])")
    labels = []
    for i, a in enumerate(algos):
        _param_keys({k: v for k, v in a.items() if k != "label"}, f"algorithms[{i}]")
        label = a.get("label", a.get("algo", fixed.get("algo", "ifca")))
        if not isinstance(label, str) or not label:
            raise TypeError(f"algorithms[{i}].label must be a non-empty string, got {label!r}")
        labels.append(label)
    if len(set(labels)) != len(labels):
        raise ValueError(f"algorithm labels must be distinct, got {labels}; set label = \"...\" in each block")

    points, seen = [], {}
    for a, label in zip(algos, labels, strict=True):
        algo_params = {k: v for k, v in a.items() if k != "label"}
        for combo in combos:
            sources = {"fixed": fixed, f"algorithm {label!r}": algo_params, "grid/points": combo}
            merged: dict[str, Any] = {}
            owner: dict[str, str] = {}
            for src, table in sources.items():
                for k, v in table.items():
                    if k in merged:
                        raise ValueError(f"parameter {k!r} is set both in {owner[k]} and in {src}; set it in one "
                                         "place")
                    merged[k], owner[k] = v, src
            try:
                full = validate_params(merged)
            except (ValueError, TypeError) as exc:
                where = ", ".join(f"{k}={v!r}" for k, v in combo.items()) or "fixed parameters"
                raise type(exc)(f"algorithm {label!r}, point ({where}): {exc}") from None
            full.pop("seed", None)
            point = {"algorithm": label, **full}
            key = json.dumps(point, sort_keys=True)
            if key in seen:
                raise ValueError(f"point {_where(combo, list(combo))} of algorithm {label!r} appears twice "
                                 "(grid and points overlap?)")
            seen[key] = True
            points.append(point)

    # the axes of the sweep: the algorithm, then grid/points keys that take several values (parameters set per
    # algorithm block are part of that algorithm, not axes)
    axis_keys = ["algorithm"] + list(dict.fromkeys(k for c in combos for k in c))
    varying = [k for k in axis_keys if any(p.get(k) != points[0].get(k) for p in points)]
    success = _parse_success(_table(raw, "success"))
    _check_success(success, points[0])
    outputs = _parse_outputs(_table(raw, "outputs"), points, varying)
    _check_metrics(outputs["metrics"], "outputs.metrics")
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise TypeError(f"description must be a string, got {type(description).__name__}")
    return SweepSpec(name=name, trials=trials, seed=seed, points=points, varying=varying, success=success,
                     outputs=outputs, description=description, source=raw, text=text, kind="synth-sweep",
                     trial="synth.sweep.experiment_trial")


def _parse_success(table: dict) -> dict[str, Any]:
    _unknown(table, SUCCESS_KEYS, "[success]")
    metric = table.get("metric", "success")
    metrics = [metric] if isinstance(metric, str) else metric
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        raise TypeError(f"success.metric must be a record key or a list of them, got {metric!r}")
    if "max" in table and "min" in table:
        raise ValueError("success takes max or min, not both")
    out: dict[str, Any] = {"metric": metrics}
    for bound in ("max", "min"):
        if bound in table:
            value = table[bound]
            evaluate(value, {}, f"success.{bound}") if not isinstance(value, str) else _syntax(value, bound)
            out[bound] = value
    return out


def _check_size(grid: dict, raw: dict, trials: int) -> None:
    """Refuse a spec whose points and records cannot fit in memory, before the grid is expanded."""
    from .cost import check_memory, record_bytes
    from .experiment import PARAMS

    algos = raw.get("algorithms", [{}])
    explicit = raw.get("points", [])
    n_points = (math.prod(len(v) for v in grid.values()) if grid else 0) + (len(explicit) if isinstance(explicit, list)
                                                                          else 0)
    n_points = max(n_points, 1) * (len(algos) if isinstance(algos, list) else 1)
    # each point is held a few times while the spec is expanded, and each trial keeps its record
    check_memory(n_points * (4 + trials) * record_bytes(PARAMS), f"the spec's {n_points} point(s) x {trials} "
                 "trial(s)", hint="use fewer grid values or trials, or split the sweep into several specs")


def _check_metrics(names: list[str], where: str) -> None:
    for m in names:
        if m not in RECORD_KEYS:
            raise ValueError(f"{where} names {m!r}, which is not a metric of the experiment record"
                             f"{did_you_mean(m, RECORD_KEYS)}; metrics: {', '.join(RECORD_KEYS)}")


def _check_success(success: dict[str, Any], point: dict[str, Any]) -> None:
    """The success rule of a spec against the experiment's record keys and parameters, before any compute."""
    _check_metrics(success["metric"], "success.metric")
    bound = "max" if "max" in success else "min" if "min" in success else None
    for m in success["metric"]:
        if bound is None and m not in BOOL_METRICS:
            raise ValueError(f"success.metric {m!r} is numeric; give success.max or success.min (or name a true/false "
                             f"metric: {', '.join(BOOL_METRICS)})")
        if bound is not None and m in BOOL_METRICS:
            raise ValueError(f"success.metric {m!r} is true/false; success.max and success.min apply to numeric "
                             "metrics only")
    if bound is not None:
        evaluate(success[bound], point, f"success.{bound}")  # unknown names and bad arithmetic fail here


def _syntax(expr: str, bound: str) -> None:
    try:
        ast.parse(expr, mode="eval")
    except SyntaxError:
        raise ValueError(f"success.{bound} {expr!r} is not a valid arithmetic expression") from None


def _numeric_axis(name: str, points: list[dict], varying: list[str], where: str) -> None:
    if name not in varying:
        raise ValueError(f"{where} = {name!r} is not a parameter that varies in this sweep"
                         f"{did_you_mean(name, varying)}; varying: {', '.join(varying) or 'none'}")
    for p in points:
        v = p[name]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"{where} = {name!r} must be a numeric parameter, but it takes the value {v!r}")


def _flag(table: dict, key: str, where: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise TypeError(f"{where}.{key} must be true or false, got {value!r}")
    return value


def _parse_outputs(table: dict, points: list[dict], varying: list[str]) -> dict[str, Any]:
    _unknown(table, OUTPUT_KEYS, "[outputs]")
    out: dict[str, Any] = {"history": _flag(table, "history", "outputs")}
    metrics = table.get("metrics", ["param_error", "misclustering", "ari"])
    if not isinstance(metrics, list) or not all(isinstance(m, str) for m in metrics):
        raise TypeError(f"outputs.metrics must be a list of record keys, got {metrics!r}")
    out["metrics"] = metrics
    numeric = [k for k in varying if all(isinstance(p[k], (int, float)) and not isinstance(p[k], bool)
                                         for p in points)]
    curves = table.get("curves")
    if curves is None:
        curves = [{"x": k} for k in numeric]
    if not isinstance(curves, list) or not all(isinstance(c, dict) for c in curves):
        raise TypeError("outputs.curves must be an array of tables ([[outputs.curves]])")
    curves = [dict(c) for c in curves]
    for i, c in enumerate(curves):
        _unknown(c, CURVE_KEYS, f"outputs.curves[{i}]")
        if "x" not in c:
            raise ValueError(f"outputs.curves[{i}] needs x (the parameter on the horizontal axis)")
        _numeric_axis(c["x"], points, varying, f"outputs.curves[{i}].x")
        c.setdefault("y", "success")
        if c["y"] != "success" and c["y"] not in metrics:
            raise ValueError(f"outputs.curves[{i}].y = {c['y']!r} must be 'success' or one of outputs.metrics "
                             f"({', '.join(metrics)}){did_you_mean(c['y'], metrics)}")
        c["logx"] = _flag(c, "logx", f"outputs.curves[{i}]") if "logx" in c else None  # None = automatic
    out["curves"] = curves
    heatmaps = table.get("heatmaps")
    if heatmaps is None:
        heatmaps = [{"x": numeric[0], "y": numeric[1]}] if len(numeric) >= 2 else []
    if not isinstance(heatmaps, list) or not all(isinstance(h, dict) for h in heatmaps):
        raise TypeError("outputs.heatmaps must be an array of tables ([[outputs.heatmaps]])")
    heatmaps = [dict(h) for h in heatmaps]
    for i, h in enumerate(heatmaps):
        where = f"outputs.heatmaps[{i}]"
        _unknown(h, HEATMAP_KEYS, where)
        for axis in ("x", "y"):
            if axis not in h:
                raise ValueError(f"{where} needs {axis} (a varying numeric parameter)")
            _numeric_axis(h[axis], points, varying, f"{where}.{axis}")
        if h["x"] == h["y"]:
            raise ValueError(f"{where}: x and y must be different parameters, both are {h['x']!r}")
        h.setdefault("value", "success")
        if h["value"] != "success" and h["value"] not in metrics:
            raise ValueError(f"{where}.value = {h['value']!r} must be 'success' or one of outputs.metrics "
                             f"({', '.join(metrics)}){did_you_mean(h['value'], metrics)}")
        for ax in ("logx", "logy"):
            h[ax] = _flag(h, ax, where) if ax in h else None  # None = automatic
        bounds = h.get("boundaries", [])
        if not isinstance(bounds, list) or not all(isinstance(b, dict) for b in bounds):
            raise TypeError(f"{where}.boundaries must be an array of tables")
        for j, b in enumerate(bounds):
            bw = f"{where}.boundaries[{j}]"
            _unknown(b, BOUNDARY_KEYS, bw)
            if ("x" in b) == ("y" in b):
                raise ValueError(f"{bw} needs exactly one of y = \"f(x)\" (a curve) or x = \"g(y)\" (a curve in y)")
            if not isinstance(b.get("label", ""), str):
                raise TypeError(f"{bw}.label must be a string")
            # check names now, not after an hour of compute: evaluate at the first point
            names = {**points[0], "x": 1.0, "y": 1.0, h["x"]: 1.0, h["y"]: 1.0}
            evaluate(b.get("y", b.get("x")), names, f"{bw}.{'y' if 'y' in b else 'x'}")
    out["heatmaps"] = heatmaps
    return out


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a TOML sweep spec."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"spec file {str(path)!r} is a directory; give the .toml file")
    if path.exists() and not path.is_file():
        raise ValueError(f"spec file {str(path)!r} is not a regular file (a FIFO or device?); give the .toml file")
    if not path.is_file():
        raise ValueError(f"spec file {str(path)!r} does not exist")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"spec file {str(path)!r} cannot be read ({exc.strerror or exc})") from None
    if len(data) > 2**20:
        raise ValueError(f"spec file {str(path)!r} is {len(data)} bytes; a spec is at most 1 MiB of TOML")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"spec file {str(path)!r} is not UTF-8 text (byte {exc.start}); is it a TOML spec?") \
            from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ValueError(f"{path}: invalid TOML: nested too deeply") from None
    try:
        return parse_spec(raw, name=path.stem, text=text)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{path.name}: {exc}") from None


# -- trials ----------------------------------------------------------------------------------------------------

def experiment_trial(params: dict[str, Any], seed: int, history: bool = False) -> dict[str, Any]:
    """One sweep trial: :func:`synth.experiment.run_experiment` at ``params`` with ``seed``.

    The per-round history keeps its scalar series (loss, monitored values) and drops the per-round labels,
    which would make every record O(rounds x clients).
    """
    from .experiment import run_experiment

    p = {k: v for k, v in params.items() if k != "algorithm"}
    p["seed"] = seed
    record = run_experiment(p, history=history)
    if history and "history" in record:
        record["history"] = {k: v for k, v in record["history"].items() if k != "labels"}
    return record


def success_of(result: Mapping[str, Any] | None, params: Mapping[str, Any], success: Mapping[str, Any],
               status: str = "ok") -> bool | None:
    """Whether one trial succeeded under the spec's criterion (a failed/diverged trial did not succeed).

    ``None`` when the record has none of the criterion's metrics (nothing to judge).
    """
    if status != "ok":
        return False
    result = result or {}
    for key in success["metric"]:
        value = result.get(key)
        if value is None:
            continue
        if isinstance(value, bool) and ("max" in success or "min" in success):
            raise ValueError(f"success.metric {key!r} is true/false; success.max and success.min apply to numeric "
                             "metrics only")
        if "max" in success:
            return bool(value <= evaluate(success["max"], params, "success.max"))
        if "min" in success:
            return bool(value >= evaluate(success["min"], params, "success.min"))
        if not isinstance(value, bool):
            raise ValueError(f"success.metric {key!r} is numeric ({value!r}); give success.max or success.min")
        return value
    return None


def run_sweep(spec: SweepSpec, out: str | Path, *, n_jobs: int = 1, backend: str = "loky",
              scheduler: str | None = None, resume: bool = False, progress: bool | None = None) -> list[dict]:
    """Run (or resume) a sweep into ``out``; returns every trial record sorted by (point, trial)."""
    import functools

    from .cost import check_memory

    if not str(out).strip():
        raise ValueError("out must name a directory, got an empty string (use '.' for the current one)")
    trial = functools.partial(experiment_trial, history=spec.history)
    out = Path(out)
    from .cost import ceiling_active, check_time

    cost = sweep_cost(spec, n_jobs, backend)
    check_memory(cost["memory"], cost["what"], seconds=cost["seconds"],
                 hint="lower trials, grid sizes or problem sizes (K, clients_per_cluster, n, d, rounds), or --n-jobs")
    if ceiling_active():
        left = 1.0
        if resume and (out / "trials.jsonl").is_file():  # a resumed sweep has only its missing trials left to run
            from .store import read_records

            done = {(r["point"], r["trial"]) for r in read_records(out)
                    if r["point"] < len(spec.points) and r["trial"] < spec.trials}
            left = 1.0 - len(done) / max(1, cost["trials"])
        check_time(cost["seconds"] * left, cost["what"] + (f", {left:.0%} of it left to run" if left < 1 else ""),
                   hint="lower trials, grid sizes, rounds or problem sizes")
    meta = {"kind": "synth-sweep", "name": spec.name, "spec": spec.to_dict(), "varying": spec.varying}
    # spec.toml is written by the store under its lock, after the fingerprint check: a refused start or --resume
    # leaves the spec.toml that describes the records in place
    return run_trials(trial, spec.points, spec.trials, spec.seed, store_dir=out, n_jobs=n_jobs, backend=backend,
                      scheduler=scheduler, resume=resume, progress=progress, meta=meta, desc=spec.name,
                      store_files={SPEC_FILE: spec.text or _dump_raw(spec.raw)}, trial_bytes=int(cost["trial_bytes"]))


def sweep_cost(spec: SweepSpec, n_jobs: int = 1, backend: str = "loky") -> dict[str, Any]:
    """Up-front estimate of a sweep: peak memory (every record plus the largest trial on each worker) and time.

    The time is a floating-point operation count at a measured rate (:data:`synth.cost.FLOPS_PER_SECOND`), good
    to an order of magnitude, and an upper bound (``early_stop``) where the runs stop once their result is known;
    ``what`` describes the request for messages.
    """
    from .cost import WORKER_BYTES, experiment_cost, record_bytes

    costs = [experiment_cost(p) for p in spec.points]
    trial_bytes = max(c["memory"] for c in costs) * (2 if spec.history else 1)
    workers = (os.cpu_count() or 1) if n_jobs < 0 else n_jobs
    cores = max(1, min(workers, os.cpu_count() or 1))
    total = len(spec.points) * spec.trials
    # a parallel run's workers are processes, each holding the interpreter and its libraries besides its trial
    process = WORKER_BYTES * workers if workers > 1 and backend != "threading" else 0
    return {"memory": total * record_bytes(spec.points[0]) + workers * trial_bytes + process,
            "trial_bytes": trial_bytes,
            "seconds": spec.trials * sum(c["seconds"] for c in costs) / cores, "trials": total,
            "early_stop": any(c["early_stop"] for c in costs),
            "what": f"sweep {spec.name!r} ({len(spec.points)} points x {spec.trials} trials = {total} trials, the "
                    f"largest trial about {trial_bytes / 2**20:.3g} MiB on each of {workers} worker(s)"
                    + (f", {workers} worker processes of about {WORKER_BYTES / 2**20:.0f} MiB each" if process else "")
                    + ")"}


def _dump_raw(raw: dict) -> str:
    # specs built in Python have no TOML text: store their JSON form (TOML readers are not needed for it)
    return "# spec given as a Python dict; JSON form:\n# " + json.dumps(raw, sort_keys=True) + "\n"


# -- command line ----------------------------------------------------------------------------------------------

def _configure(sub: argparse.ArgumentParser) -> None:
    from .cli import typed_flag

    sub.add_argument("spec", metavar="SPEC.toml", help="sweep spec (see synth/specs/ for examples)")
    sub.add_argument("--out", required=True, metavar="DIR", help="output directory (the result store)")
    sub.add_argument("--n-jobs", dest="n_jobs", type=typed_flag("int", "--n-jobs"), default=1, metavar="N",
                     help="parallel workers, -1 = all cores (default: 1)")
    sub.add_argument("--backend", choices=(*BACKENDS, "ray"), default="loky",
                     help="joblib backend: loky (processes), threading, dask (a dask.distributed cluster), or ray "
                          "(Ray's joblib backend; needs ray installed) (default: loky)")
    sub.add_argument("--scheduler", default=None, metavar="tcp://host:port",
                     help="dask.distributed scheduler address (with --backend dask; default: a local cluster)")
    sub.add_argument("--resume", action="store_true", help="continue DIR: skip the trials already finished")
    from .cli import add_max_hours

    add_max_hours(sub)
    bar = sub.add_mutually_exclusive_group()
    bar.add_argument("--progress", dest="progress", action="store_const", const=True, default=None,
                     help="always draw the progress bar")
    bar.add_argument("--quiet", dest="progress", action="store_const", const=False,
                     help="no progress on stderr (default: a bar on a terminal outside CI, else a line every 30 s; "
                          "none with CFLAB_QUIET=1)")


def _run(args: argparse.Namespace) -> int:
    if args.n_jobs == 0 or args.n_jobs < -1:
        raise ValueError(f"--n-jobs must be -1 (all cores) or an integer in [1, inf), got {args.n_jobs}")
    if args.scheduler is not None and args.backend != "dask":
        raise ValueError(f"--scheduler needs --backend dask, got --backend {args.backend}")
    if not args.out.strip():
        raise ValueError("--out must name a directory, got an empty string (use '.' for the current one)")
    spec = load_spec(args.spec)
    from .cost import format_bytes, format_seconds

    cost = sweep_cost(spec, args.n_jobs, args.backend)
    # the estimate is CPU time over the workers: wall time on that many idle cores (measured: ifca_fig3a_small at
    # --n-jobs 2, estimate 1.07 min, 133 s of CPU = 66 s on 2 idle cores; 5.1 min of wall with the cores shared)
    cores = max(1, min((os.cpu_count() or 1) if args.n_jobs < 0 else args.n_jobs, os.cpu_count() or 1))
    where = f"on {cores} idle core{'s' if cores > 1 else ''}; longer when they are shared"
    eta = (f"at most roughly {format_seconds(cost['seconds'])} of computing {where} (runs stop once their result is "
           f"known; an order-of-magnitude bound)") if cost["early_stop"] else (
        f"roughly {format_seconds(cost['seconds'])} of computing {where} (an order-of-magnitude estimate)")
    print(f"{spec.name}: {cost['trials']} trials; estimated peak memory {format_bytes(cost['memory'])}, {eta}",
          flush=True)
    from .cost import work_ceiling

    with work_ceiling(args.max_hours):
        records = run_sweep(spec, args.out, n_jobs=args.n_jobs, backend=args.backend, scheduler=args.scheduler,
                            resume=args.resume, progress=args.progress)
    failed = sum(r["status"] != "ok" for r in records)
    print(f"{spec.name}: {len(spec.points)} points x {spec.trials} trials = {len(records)} trials finished "
          f"({failed} failed) in {args.out}; summarise with: python -m synth report {args.out}")
    return 0


def _register() -> None:
    from .cli import register_command

    register_command("sweep", "run a parameter sweep from a TOML spec into a resumable result store",
                     _configure, _run)


_register()
