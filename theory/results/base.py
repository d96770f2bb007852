"""The checkable-result protocol: bound, assumptions, exact law, Monte Carlo, verdict, fitted constant.

Every lemma/theorem of the three papers is one :class:`Result` subclass.  A
result declares

* ``params`` -- its parameters (a :class:`synth.experiment.Param` each:
  type, default, allowed range), and ``constants`` -- the universal constants
  of the statement (``c1``, ``c2``, ``b2`` ...), default 1 unless the paper
  fixes a value, never silently dropped;
* ``kind`` -- what the statement bounds:

  - ``"probability"``: ``P[event] <= bound`` (or ``>=``); a trial returns
    ``{"events": k, "count": c}`` and the estimate carries a Wilson interval;
  - ``"quantile"``: "with probability at least ``1 - delta``, ``X <= bound``"; a
    trial returns ``{"x": [...]}``, the estimate is the empirical
    ``(1 - delta)``-quantile of ``X`` with a distribution-free interval, and
    ``details["failure_rate"]`` is ``P[X > bound]`` (Wilson) beside ``delta``;
  - ``"value"``: a deterministic quantity or an expectation (an identity or
    an inequality between numbers); a trial returns ``{"x": [...]}`` and the
    estimate is their mean (Student-t interval), or their minimum/maximum for
    "for every instance" statements (``aggregate``);

* ``direction`` -- ``"upper"`` (quantity <= bound), ``"lower"`` (quantity >=
  bound) or ``"equal"`` (an identity).

:meth:`Result.check` puts it together into a :class:`Check`.  The verdict is
``"assumptions not met"`` if any hypothesis of the statement fails for the
parameters, else ``"vacuous"`` if the bound says nothing (a probability bound
>= 1, a magnitude bound >= the trivial value), else ``"violated"`` if the exact
value -- or, without one, the whole Monte Carlo confidence interval -- is on
the wrong side of the bound, else ``"inconclusive"`` if the Monte Carlo point
estimate is on the wrong side but its interval reaches the bound, else ``"holds"``.  ``comparison`` gives the
numeric outcome irrespective of the assumptions.  The *fitted constant* is
the value of the result's ``fit`` constant at which the bound equals the
observed quantity (exact value if there is one, else the Monte Carlo point
estimate); ``fitted_rule`` says on which side the bound holds.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np
from scipy import optimize

from synth.experiment import Param
from synth.validation import check_int, check_real, did_you_mean

from ..stats import mean_ci, quantile_ci, wilson
from .registry import REGISTRY, get_result, register

__all__ = ["REGISTRY", "Check", "Cond", "Estimate", "Result", "differing", "formula_finding", "ge", "get_result", "gt",
           "json_float", "le", "merge_extra", "much_less", "register", "run_monte_carlo", "within"]

CONFIDENCE = 0.95
VERDICTS = ("holds", "violated", "inconclusive", "vacuous", "assumptions not met")
_REL_TOL = 1e-9  # exact values and bounds are floating-point numbers: equal within this relative tolerance


class Cond:
    """One hypothesis ``lhs <relation> rhs`` with its margin; truthy when it holds.

    Every "x << y" of the three papers is read with one policy: ``x <= much_less * y`` (the ``--much-less``
    flag of every result that has such a hypothesis, :data:`theory.results.common.MUCH_LESS`, default 0.1;
    ``much_less = 1`` reads "<<" as a plain "<="), and every ">~"/"<~" with a constant (``--assume-const`` /
    ``--cond-const``, default 1).  The margin (``rhs - lhs`` for ``<=``/``<``, ``lhs - rhs`` for ``>=``/``>``,
    the distance to the nearer end for ``in``, an open interval ``rhs = (lo, hi)``) is positive when the
    hypothesis holds and says by how much; :meth:`Result.check` reports it for every assumption
    (``assumption_margins``; ``None`` for a hypothesis true by construction of the instance).
    """

    __slots__ = ("lhs", "rhs", "relation")
    RELATIONS = ("<=", ">=", "<", ">", "in")

    def __init__(self, lhs: float, rhs, relation: str = "<="):
        if relation not in self.RELATIONS:
            raise ValueError(f"relation must be one of {self.RELATIONS}, got {relation!r}")
        self.lhs, self.relation = float(lhs), relation
        self.rhs = (float(rhs[0]), float(rhs[1])) if relation == "in" else float(rhs)

    def __bool__(self) -> bool:
        x, r = self.lhs, self.rhs
        return {"<=": lambda: x <= r, ">=": lambda: x >= r, "<": lambda: x < r, ">": lambda: x > r,
                "in": lambda: r[0] < x < r[1]}[self.relation]()

    @property
    def margin(self) -> float:
        x, r = self.lhs, self.rhs
        if self.relation == "in":
            return min(x - r[0], r[1] - x)
        return r - x if self.relation in ("<=", "<") else x - r

    def to_dict(self) -> dict[str, Any]:
        rhs = list(self.rhs) if self.relation == "in" else self.rhs
        return {"lhs": self.lhs, "relation": self.relation, "rhs": rhs, "margin": self.margin}


def formula_finding(where: str, stated: str, stated_value: float, exact: str, exact_value: float) -> dict[str, Any]:
    """A paper's formula against the exact one, with both values and the relative error of the stated one."""
    sv, ev = float(stated_value), float(exact_value)
    rel = (sv - ev) / abs(ev) if ev != 0 else (math.inf if sv != 0 else 0.0)
    return {"where": where, "stated": stated, "stated_value": sv, "exact": exact, "exact_value": ev,
            "relative_error": rel}


def differing(*findings: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings whose stated value differs from the exact one (relative difference above 1e-9)."""
    return [f for f in findings
            if abs(f["stated_value"] - f["exact_value"]) > 1e-9 * max(abs(f["exact_value"]), 1e-300)]


def le(lhs: float, rhs: float) -> Cond:
    """The hypothesis ``lhs <= rhs``."""
    return Cond(lhs, rhs, "<=")


def ge(lhs: float, rhs: float) -> Cond:
    """The hypothesis ``lhs >= rhs``."""
    return Cond(lhs, rhs, ">=")


def gt(lhs: float, rhs: float) -> Cond:
    """The hypothesis ``lhs > rhs``."""
    return Cond(lhs, rhs, ">")


def within(x: float, low: float, high: float) -> Cond:
    """The hypothesis ``low < x < high`` (margin: distance to the nearer end)."""
    return Cond(x, (low, high), "in")


def much_less(x: float, y: float, p: dict[str, Any]) -> Cond:
    """The papers' ``x << y``, read as ``x <= much_less * y`` with the result's ``much_less`` parameter."""
    return Cond(x, p["much_less"] * y, "<=")


@dataclass
class Estimate:
    """A Monte Carlo estimate with its confidence interval and the raw tallies."""

    value: float | None
    low: float | None
    high: float | None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class Check:
    """The outcome of checking one result at one parameter point (what ``--json`` prints)."""

    result: str
    title: str
    cite: str
    quantity: str
    kind: str
    direction: str
    params: dict[str, Any]
    constants: dict[str, float]
    bound: float
    exact: float | None
    empirical: float | None
    ci_low: float | None
    ci_high: float | None
    confidence: float
    assumptions: dict[str, bool]
    assumption_margins: dict[str, Any]
    verdict: str
    comparison: str
    fitted_constant: float | None
    fitted_name: str | None
    fitted_rule: str | None
    fitted_on: str | None
    trials: int
    seed: int
    notes: list[str]
    details: dict[str, Any]
    # every place where a formula the paper states differs from the exact one (see Result.paper_formulas)
    formula_findings: list[dict[str, Any]] = field(default_factory=list)
    # what the verdict covers where that is less than the statement (Result.scope); None: the statement itself
    scope: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


def json_float(v) -> float:
    """The float a JSON value written by :meth:`Check.to_dict` stands for: ``None`` -> nan, ``"inf"`` / ``"-inf"``
    -> +-inf, a number -> itself."""
    if v is None:
        return math.nan
    if isinstance(v, str):
        return {"inf": math.inf, "-inf": -math.inf}.get(v, math.nan)
    return float(v)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        return v if math.isfinite(v) else (None if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    return obj


class Result:
    """One lemma/theorem/remark of a paper as a checkable object (see the module docstring)."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    cite: ClassVar[str] = ""
    statement: ClassVar[str] = ""
    quantity: ClassVar[str] = ""
    kind: ClassVar[str] = "probability"
    direction: ClassVar[str] = "upper"
    aggregate: ClassVar[str] = "mean"  # for kind "value": mean, min or max of the trial values
    params: ClassVar[dict[str, Param]] = {}
    constants: ClassVar[dict[str, float]] = {}
    fit: ClassVar[str | None] = None
    # the values the bounded quantity can take: Monte Carlo intervals are clipped to it (a probability's
    # interval never leaves [0, 1], a norm's never goes below 0)
    support: ClassVar[tuple[float, float]] = (-math.inf, math.inf)
    default_trials: ClassVar[int] = 200
    batch: ClassVar[int] = 1  # repetitions per Monte Carlo task (vectorised inside one trial call)

    # ------------------------------------------------------------------ to override
    def bound(self, p: dict[str, Any], c: dict[str, float]) -> float:
        """The statement's bound as a number (a probability, a magnitude, or a value)."""
        raise NotImplementedError

    def assumptions(self, p: dict[str, Any]) -> dict[str, bool]:
        """Each hypothesis of the statement, by name -> whether it holds at ``p``."""
        return {}

    def exact(self, p: dict[str, Any]) -> float | None:
        """The exact value of the bounded quantity, where an exact law exists."""
        return None

    def trial(self, p: dict[str, Any], rng: np.random.Generator, size: int) -> dict[str, Any]:
        """``size`` Monte Carlo repetitions through the synth toolkit (see the module docstring)."""
        raise NotImplementedError

    def delta(self, p: dict[str, Any], c: dict[str, float]) -> float:
        """For ``kind = "quantile"``: the failure probability the statement allows."""
        raise NotImplementedError

    def trivial(self, p: dict[str, Any], c: dict[str, float]) -> float | None:
        """A value of the quantity that holds trivially; a bound beyond it is vacuous."""
        if self.kind == "probability":
            return 1.0 if self.direction == "upper" else 0.0
        return None

    def notes(self, p: dict[str, Any], c: dict[str, float]) -> list[str]:
        """Remarks on the statement (disagreements with the paper, readings of garbled text)."""
        return []

    def scope(self, p: dict[str, Any]) -> str | None:
        """What the verdict covers when it is less than the statement (e.g. one admissible instance of a
        worst-case bound, so ``holds`` is no certificate); ``None`` when the check covers the statement."""
        return None

    def details(self, p: dict[str, Any], c: dict[str, float]) -> dict[str, Any]:
        """Extra exact numbers worth reporting beside the bound."""
        return {}

    def paper_formulas(self, p: dict[str, Any], c: dict[str, float]) -> list[dict[str, Any]]:
        """Formulas the paper states (in the statement or the proof) that differ from the exact ones at ``p``.

        Each is a :func:`formula_finding` dict; only those that differ (relative difference above 1e-9) are
        listed, and :meth:`check` reports them as ``formula_findings``.
        """
        return []

    def validate(self, p: dict[str, Any]) -> dict[str, Any]:
        """Cross-parameter checks after each parameter's own range check."""
        return p

    def summarize(self, p: dict[str, Any], c: dict[str, float], info: dict[str, Any]) -> dict[str, Any]:
        """Turn the summed side tallies of the trials (``info``) into reportable numbers."""
        return info

    # ------------------------------------------------------------------ machinery
    def resolve(self, params: dict[str, Any] | None = None,
                constants: dict[str, float] | None = None) -> tuple[dict[str, Any], dict[str, float]]:
        """Fill defaults, reject unknown names (with a did-you-mean hint), check every value."""
        params, constants = dict(params or {}), dict(constants or {})
        for key in params:
            if key not in self.params:
                hint = did_you_mean(key, list(self.params) + list(self.constants))
                raise ValueError(f"{self.name}: unknown parameter {key!r}{hint}; known: {', '.join(self.params)}")
        for key in constants:
            if key not in self.constants:
                hint = did_you_mean(key, list(self.constants) + list(self.params))
                known = ", ".join(self.constants) or "none"
                raise ValueError(f"{self.name}: unknown constant {key!r}{hint}; known: {known}")
        p = {k: spec.check(k, params.get(k, spec.default)) for k, spec in self.params.items()}
        # a constant whose default is a parameter's name takes that parameter's value (e.g. "<< 1" as much_less)
        c = {k: check_real(k, constants.get(k, p[v] if isinstance(v, str) else v), low=0.0)
             for k, v in self.constants.items()}
        return self.validate(p), c

    def trials_for(self, p: dict[str, Any]) -> int:
        """The default number of Monte Carlo repetitions at ``p`` (``default_trials`` unless a result needs more
        somewhere to resolve its verdict)."""
        return self.default_trials

    def empirical(self, p: dict[str, Any], c: dict[str, float], trials: int, seed: int, n_jobs: int = 1,
                  progress: bool | None = False) -> Estimate:
        """Monte Carlo estimate of the bounded quantity with a confidence interval.

        Runs through :func:`synth.montecarlo.run_trials`: the ``trials``
        repetitions are cut into tasks of ``batch`` repetitions (the last one
        smaller), each with its own seed from the tree under ``seed``, so the
        numbers are identical for every ``n_jobs``.
        """
        records = run_monte_carlo(self, p, trials, seed, n_jobs, progress)
        failed = [r for r in records if r["status"] != "ok"]
        ok = [r["result"] for r in records if r["status"] == "ok"]
        info: dict[str, Any] = {"tasks": len(records), "failed_tasks": len(failed)}
        if failed:
            info["first_failure"] = failed[0]["reason"]
        if self.kind == "probability":
            k = int(sum(r["events"] for r in ok))
            n = int(sum(r["count"] for r in ok))
            low, high = wilson(k, n, CONFIDENCE)
            info.update(events=k, count=n)
            xs = [v for r in ok for v in r.get("x", [])]
            if xs:  # per-repetition side values of a probability result, for its summarize()
                info["_x"] = xs
            info = self.summarize(p, c, {**info, **merge_extra(ok)})
            info.pop("_x", None)
            return Estimate(k / n if n else None, low, high, info)
        x = np.array([v for r in ok for v in r["x"]], dtype=np.float64)
        info["count"] = int(len(x))
        info = self.summarize(p, c, {**info, **merge_extra(ok)})
        if len(x) == 0:
            return Estimate(None, None, None, info)
        if self.kind == "quantile":
            q = 1.0 - self.delta(p, c)
            est, low, high = quantile_ci(x, min(max(q, 0.0), 1.0), CONFIDENCE)
            low, high = self._clip(low, high)
            b = self.bound(p, c)
            over = int(np.sum(x > b))
            fl, fh = wilson(over, len(x), CONFIDENCE)
            info.update(quantile=q, failure_rate=over / len(x), failure_ci=[fl, fh],
                        allowed_failure=self.delta(p, c), mean=float(x.mean()), max=float(x.max()))
            return Estimate(est, low, high, info)
        if self.aggregate == "min":
            v = float(x.min())
            return Estimate(v, v, v, info)
        if self.aggregate == "max":
            v = float(x.max())
            return Estimate(v, v, v, info)
        m, low, high = mean_ci(x, CONFIDENCE)
        return Estimate(m, *self._clip(low, high), info)

    def _clip(self, low: float, high: float) -> tuple[float, float]:
        lo, hi = (0.0, 1.0) if self.kind == "probability" else self.support
        return float(min(max(low, lo), hi)), float(max(min(high, hi), lo))

    def compare(self, value: float, bound: float, low: float | None = None,
                high: float | None = None) -> str:
        """``"holds"``/``"violated"`` for an exact value (``low = high = None``) or an interval.

        With an interval: ``"violated"`` when all of it is on the wrong side of the bound,
        ``"inconclusive"`` when the point estimate is on the wrong side but the interval reaches the bound
        (never ``"holds"`` for an estimate beyond the bound), else ``"holds"``.
        """
        tol = _REL_TOL * max(1.0, abs(bound))
        if self.direction == "upper":
            worst = value if low is None else low
            if worst > bound + tol:
                return "violated"
            return "inconclusive" if value > bound + tol else "holds"
        if self.direction == "lower":
            worst = value if high is None else high
            if worst < bound - tol:
                return "violated"
            return "inconclusive" if value < bound - tol else "holds"
        if low is None:
            return "holds" if abs(value - bound) <= tol + _REL_TOL * abs(value) else "violated"
        return "holds" if low - tol <= bound <= high + tol else "violated"

    def is_vacuous(self, p: dict[str, Any], c: dict[str, float], bound: float) -> bool:
        trivial = self.trivial(p, c)
        if self.kind == "quantile" and self.delta(p, c) >= 1.0:
            return True
        if trivial is None or not np.isfinite(bound):
            return not np.isfinite(bound)
        return bound >= trivial if self.direction == "upper" else (
            bound <= trivial if self.direction == "lower" else False)

    def fitted_constant(self, p: dict[str, Any], c: dict[str, float], target: float) -> tuple[float | None, str]:
        """The value of constant ``fit`` at which the bound equals ``target``, and on which side it holds.

        The bound is assumed monotone in that constant (true of every bound
        here: constants multiply a term or scale an exponent); the crossing is
        found by bracketing over ``[1e-12, 1e12]`` on a log scale and Brent's
        method.  For ``direction="equal"`` it is the value that makes the two sides equal.
        """
        name = self.fit
        if name is None or target is None or not np.isfinite(target):
            return None, ""

        def g(v: float) -> float:
            with np.errstate(all="ignore"):
                out = self.bound(p, {**c, name: v}) - target
            return float(out) if np.isfinite(out) else (math.inf if out > 0 else -math.inf)

        lo_v, hi_v = 1e-12, 1e12
        g_lo, g_hi = g(lo_v), g(hi_v)
        increasing = g_hi >= g_lo
        want_above = self.direction != "lower"
        side = ">=" if increasing == want_above else "<="
        rule = f"the bound holds for {name} {side} the fitted value"
        if self.direction == "equal":
            rule = f"{name} at which the stated value equals the exact one"
        if g_lo == g_hi == g(1.0):  # the bound does not depend on this constant
            return None, f"{name} does not enter the bound"

        def holds(gv: float) -> bool:
            return gv >= 0 if want_above else gv <= 0

        if self.direction != "equal" and holds(g_lo) == holds(g_hi):
            # the bound is on one side for every value of the constant in range
            if holds(g_lo):
                return (0.0 if side == ">=" else math.inf), rule
            return (math.inf if side == ">=" else 0.0), rule
        if self.direction == "equal" and np.sign(g_lo) == np.sign(g_hi):
            return None, rule

        def h(z: float) -> float:  # brentq needs finite values: clip the overflowing ends
            return float(np.clip(g(math.exp(z)), -1e300, 1e300))

        root = optimize.brentq(h, math.log(lo_v), math.log(hi_v), xtol=1e-12, rtol=1e-12)
        return float(math.exp(root)), rule

    def verdict(self, params: dict[str, Any] | None = None, constants: dict[str, float] | None = None,
                trials: int | None = None, seed: int = 0) -> str:
        """The verdict alone: holds / violated / vacuous / assumptions not met (see :meth:`check`)."""
        return self.check(params, constants, trials, seed).verdict

    def check(self, params: dict[str, Any] | None = None, constants: dict[str, float] | None = None,
              trials: int | None = None, seed: int = 0, n_jobs: int = 1,
              progress: bool | None = False) -> Check:
        """Bound, assumptions, exact law and Monte Carlo at one parameter point, with verdict and fitted constant."""
        p, c = self.resolve(params, constants)
        trials = self.trials_for(p) if trials is None else check_int("trials", trials, low=0)
        seed = check_int("seed", seed, low=0)
        bound = float(self.bound(p, c))
        raw = self.assumptions(p)
        assumptions = {k: bool(v) for k, v in raw.items()}
        margins = {k: (v.to_dict() if isinstance(v, Cond) else None) for k, v in raw.items()}
        exact = self.exact(p)
        exact = None if exact is None else float(exact)
        est = self.empirical(p, c, trials, seed, n_jobs, progress) if trials > 0 else Estimate(None, None, None)
        details = dict(self.details(p, c))
        details.update(est.details)
        if exact is not None:
            comparison, fitted_on, target = self.compare(exact, bound), "exact", exact
            if est.value is not None:
                details["empirical_agrees_with_exact"] = bool(est.low - 1e-12 <= exact <= est.high + 1e-12)
        elif est.value is not None:
            comparison, fitted_on, target = self.compare(est.value, bound, est.low, est.high), "empirical", est.value
        else:
            comparison, fitted_on, target = "not evaluated (no exact law and trials=0)", None, None
        if not all(assumptions.values()):
            verdict = "assumptions not met"
        elif self.is_vacuous(p, c, bound):
            verdict = "vacuous"
        elif comparison == "violated":
            verdict = "violated"
        elif comparison in ("holds", "inconclusive"):
            verdict = comparison
        else:
            verdict = comparison
        fitted, rule = self.fitted_constant(p, c, target) if target is not None else (None, "")
        return Check(
            result=self.name, title=self.title, cite=self.cite, quantity=self.quantity, kind=self.kind,
            direction=self.direction, params=p, constants=c, bound=bound, exact=exact, empirical=est.value,
            ci_low=est.low, ci_high=est.high, confidence=CONFIDENCE, assumptions=assumptions,
            assumption_margins=margins, verdict=verdict,
            comparison=comparison, fitted_constant=fitted, fitted_name=self.fit if fitted is not None else None,
            fitted_rule=rule or None, fitted_on=fitted_on if fitted is not None else None, trials=trials,
            seed=seed, notes=self.notes(p, c), details=details, formula_findings=self.paper_formulas(p, c),
            scope=self.scope(p),
        )


def merge_extra(records: list[dict]) -> dict[str, Any]:
    """Sum the numeric side tallies trials may return under ``"extra"`` (same keys in every trial)."""
    out: dict[str, Any] = {}
    for r in records:
        for k, v in (r.get("extra") or {}).items():
            if isinstance(v, list):
                acc = out.setdefault(k, [0.0] * len(v))
                out[k] = [a + (b if b is not None else float("nan")) for a, b in zip(acc, v, strict=True)]
            else:
                out[k] = out.get(k, 0.0) + (v if v is not None else float("nan"))
    return out


# ----------------------------------------------------------------------- Monte Carlo glue
def _task(params: dict[str, Any], seed: int) -> dict[str, Any]:
    """One Monte Carlo task (module level so that joblib can pickle it)."""
    result = get_result(params["result"])
    return result.trial(params["p"], np.random.default_rng(seed), int(params["size"]))


def run_monte_carlo(result: Result, p: dict[str, Any], trials: int, seed: int, n_jobs: int,
         progress: bool | None) -> list[dict[str, Any]]:
    from synth.montecarlo import run_trials

    batch = max(1, int(result.batch))
    full, rest = divmod(trials, batch)
    root = np.random.SeedSequence(seed)
    # full tasks and the remainder draw from separate branches of the seed tree, so neither depends on the other
    branch_full, branch_rest = root.spawn(2)
    records: list[dict] = []
    if full:
        records += run_trials(_task, [{"result": result.name, "p": p, "size": batch}], full, branch_full,
                              n_jobs=n_jobs, progress=progress, desc=result.name)
    if rest:
        records += run_trials(_task, [{"result": result.name, "p": p, "size": rest}], 1, branch_rest,
                              n_jobs=1, progress=False, desc=result.name)
    return records
