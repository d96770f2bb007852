"""One estimator base: hyper-parameters declared once, validated from the declarations (scikit-learn's idiom).

Every estimator of :mod:`synth.algorithms` subclasses :class:`Estimator`, stores its hyper-parameters in
``__init__`` unchanged (as scikit-learn asks) and declares each of them once in ``_parameter_constraints``::

    class MyAlgo(Estimator):
        _parameter_constraints = {
            **shared("n_clusters", "n_rounds", "step_size", "random_state", "monitor"),
            "gamma": [Real(0.0, None, closed="neither")],
        }

        def __init__(self, n_clusters=2, n_rounds=100, step_size=0.1, gamma=1.0, random_state=None, monitor=None):
            ...  # self.<name> = <name> for every argument

        def fit(self, backend):
            v = self._validate_params(backend)  # {name: checked value}; raises naming the parameter
            ...
            return self

A name used by several estimators takes its declaration from :data:`SHARED` (one meaning, one range, one
spelling everywhere).  Defining the class checks that the declarations and ``__init__``'s arguments name the same
hyper-parameters, so an undeclared or misspelt one fails at import.  :meth:`Estimator.get_params`,
:meth:`Estimator.set_params` and :meth:`Estimator.from_params` refuse unknown names with a did-you-mean hint.

A constraint is a :class:`Constraint` or ``None`` (the value ``None`` is allowed); a list of them accepts a value
that any one accepts.  Bounds that depend on the data (``n_clusters <= m``) are written as the string
``"n_clients"`` (or as a function of ``{"n_clients": m}``) and resolved against the backend at fit.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..validation import (
    check_array,
    check_choice,
    check_int,
    check_random_state,
    check_real,
    did_you_mean,
    format_interval,
    format_value,
)
from .common import check_backend, check_fitted_models, step_sizes

__all__ = [
    "SHARED",
    "Array",
    "Boolean",
    "Constraint",
    "Estimator",
    "Function",
    "Int",
    "Options",
    "RandomState",
    "Real",
    "StepSizes",
    "String",
    "shared",
]

Bound = float | int | str | Callable[[dict], float] | None


class Constraint:
    """One allowed kind of value; :meth:`check` returns the value (converted) or raises."""

    def check(self, name: str, value: Any, bounds: dict[str, float]) -> Any:
        raise NotImplementedError

    def describe(self, bounds: dict[str, float]) -> str:
        raise NotImplementedError


def _resolve(bound: Bound, bounds: dict[str, float]) -> float | None:
    if isinstance(bound, str):
        return bounds.get(bound)  # unknown before fit: not checked yet
    if callable(bound):
        return bound(bounds) if bounds else None
    return bound


class Real(Constraint):
    """A finite real number in an interval; ``closed`` is ``"both"``, ``"left"``, ``"right"`` or ``"neither"``."""

    def __init__(self, low: Bound = None, high: Bound = None, closed: str = "both"):
        self.low, self.high, self.closed = low, high, closed

    def _ends(self, bounds):
        return (_resolve(self.low, bounds), _resolve(self.high, bounds),
                self.closed in ("both", "left"), self.closed in ("both", "right"))

    def check(self, name, value, bounds):
        lo, hi, lo_in, hi_in = self._ends(bounds)
        return check_real(name, value, low=lo, high=hi, low_inclusive=lo_in, high_inclusive=hi_in)

    def describe(self, bounds):
        return f"a real number in {format_interval(*self._ends(bounds))}"


class Int(Constraint):
    """An integer in ``[low, high]`` (a float holding an integer is accepted, as by :func:`check_int`)."""

    def __init__(self, low: Bound = None, high: Bound = None):
        self.low, self.high = low, high

    def check(self, name, value, bounds):
        return check_int(name, value, low=_resolve(self.low, bounds), high=_resolve(self.high, bounds))

    def describe(self, bounds):
        lo, hi = _resolve(self.low, bounds), _resolve(self.high, bounds)
        return f"an integer in {format_interval(lo, hi, True, True)}"


class Options(Constraint):
    """One of a fixed set of strings."""

    def __init__(self, *choices: str):
        self.choices = choices

    def check(self, name, value, bounds):
        return check_choice(name, value, self.choices)

    def describe(self, bounds):
        return "one of " + ", ".join(self.choices)


class String(Constraint):
    """Any string (e.g. an initialisation scheme that the backend, not the estimator, knows)."""

    def check(self, name, value, bounds):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be {self.describe(bounds)}, got {type(value).__name__}")
        return value

    def describe(self, bounds):
        return "a string"


class Boolean(Constraint):
    def check(self, name, value, bounds):
        if not isinstance(value, bool | np.bool_):
            raise TypeError(f"{name} must be True or False, got {format_value(value)}")
        return bool(value)

    def describe(self, bounds):
        return "True or False"


class Array(Constraint):
    """A finite float array of the given number(s) of dimensions."""

    def __init__(self, ndim: int | tuple[int, ...]):
        self.ndim = ndim

    def check(self, name, value, bounds):
        if isinstance(value, str) or value is None:
            raise TypeError(f"{name} must be {self.describe(bounds)}, got {format_value(value)}")
        return check_array(name, value, ndim=self.ndim)

    def describe(self, bounds):
        nd = (self.ndim,) if isinstance(self.ndim, int) else self.ndim
        return f"a {' or '.join(map(str, nd))}-d array"


class StepSizes(Constraint):
    """A positive step size or a non-empty list of them (restarts over step sizes)."""

    def check(self, name, value, bounds):
        step_sizes(value)  # raises naming step_size; the estimator keeps the value as given
        return value

    def describe(self, bounds):
        return "a positive number or a list of them"


class RandomState(Constraint):
    """``None``, a non-negative int, a SeedSequence or a Generator."""

    def check(self, name, value, bounds):
        check_random_state(value)  # raises on a bad seed; a Generator is kept as is (shared state)
        return value

    def describe(self, bounds):
        return "None, a non-negative int, a SeedSequence or a Generator"


class Function(Constraint):
    """A callable (monitors)."""

    def check(self, name, value, bounds):
        if not callable(value):
            raise TypeError(f"{name} must be callable, got {format_value(value)}")
        return value

    def describe(self, bounds):
        return "a callable"


POSITIVE = Real(0.0, None, closed="neither")

SHARED: dict[str, list] = {
    # clusters, rounds, steps: IFCA Alg. 2 (k, T, gamma, tau), SR-FCA, CLoVE Alg. 1, FedAvg
    "n_clusters": [Int(1, "n_clients")],
    "n_rounds": [Int(0, None)],
    "step_size": [StepSizes()],
    "averaging": [Options("gradient", "model")],
    "local_steps": [Int(1, None)],
    "participation": [Real(0.0, 1.0, closed="right")],
    "init": [String(), Array((2, 3))],
    "n_init": [Int(1, None)],
    # every client's own model (ONE_SHOT's w_i, the Local baseline, one-shot clustering)
    "local": [Options("erm", "gd")],
    "local_train_steps": [Int(1, None)],
    "local_step_size": [POSITIVE],
    "kmeans_n_init": [Int(1, None)],
    # SR-FCA's ONE_SHOT threshold lambda and least cluster size t
    "threshold": [POSITIVE],
    "min_size": [Int(1, "n_clients")],
    "dist": [Options("l2", "cross")],
    # FedProto Sec. 4 and FedPAC Sec. 4: weight lambda of the prototype (feature alignment) regulariser
    "proto_lambda": [Real(0.0, None)],
    # their global prototypes: the papers' count-weighted mean, or the unweighted mean over clients (PFLlib)
    "prototype_mean": [Options("counts", "clients")],
    "random_state": [RandomState()],
    "monitor": [None, Function()],
    "monitor_every": [Int(1, None)],
    # the proximal local objective f_i(w) + (prox/2)||w - anchor||^2 (FeSEM, FedSoft's lambda)
    "prox": [Real(0.0, None)],
}


def shared(*names: str) -> dict[str, list]:
    """The shared declarations of ``names`` (a name :data:`SHARED` lacks is a programming error)."""
    missing = [n for n in names if n not in SHARED]
    if missing:
        raise KeyError(f"no shared hyper-parameter {missing[0]!r}{did_you_mean(missing[0], SHARED)}")
    return {n: SHARED[n] for n in names}


class Estimator:
    """Base of every estimator: declared hyper-parameters, ``get_params``/``set_params``, validation at fit."""

    _parameter_constraints: ClassVar[dict[str, list]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "fit" in cls.__dict__ and not getattr(cls.__dict__["fit"], "_boundary", False):
            cls.fit = _boundary_fit(cls.__dict__["fit"])
        declared, names = set(cls._parameter_constraints), set(cls._get_param_names())
        if declared != names:
            raise TypeError(f"{cls.__name__}: _parameter_constraints must declare exactly the __init__ "
                            f"hyper-parameters; undeclared {sorted(names - declared)}, "
                            f"not in __init__ {sorted(declared - names)}")

    @classmethod
    def _get_param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind == p.POSITIONAL_OR_KEYWORD]

    @classmethod
    def check_param_names(cls, names) -> None:
        """Raise a ValueError naming the first of ``names`` that is not a hyper-parameter of ``cls``."""
        known = cls._get_param_names()
        for key in names:
            if key not in known:
                raise ValueError(f"{cls.__name__} has no hyper-parameter {key!r}{did_you_mean(str(key), known)}; "
                                 f"it takes {', '.join(known)}")

    @classmethod
    def check_param_values(cls, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` checked by name and against their declarations (bounds that depend on the data, such as
        ``n_clients``, are checked at fit); returns the converted values."""
        cls.check_param_names(params)
        return {k: _check_one(k, v, cls._parameter_constraints[k], {}) for k, v in params.items()}

    @classmethod
    def from_params(cls, params: dict[str, Any]):
        """``cls(**params)``, refusing an unknown name with a did-you-mean hint (rather than Python's TypeError)."""
        cls.check_param_names(params)
        return cls(**params)

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        """The hyper-parameters as passed to ``__init__`` (scikit-learn's ``get_params``)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set hyper-parameters by name; an unknown name is a ValueError.  Returns ``self``."""
        self.check_param_names(params)
        for key, value in params.items():
            setattr(self, key, value)
        return self

    def _validate_params(self, backend=None) -> dict[str, Any]:
        """Every hyper-parameter checked against its declaration: ``{name: value}`` (converted, e.g. int).

        With a ``backend``, bounds written ``"n_clients"`` are its number of clients.
        """
        bounds = {} if backend is None else {"n_clients": backend.n_clients}
        out = {}
        for name, constraints in self._parameter_constraints.items():
            out[name] = _check_one(name, getattr(self, name), constraints, bounds)
        return out

    def __repr__(self) -> str:
        params = self.get_params()
        sig = inspect.signature(type(self).__init__).parameters
        shown = [f"{k}={format_value(v)}" for k, v in params.items()
                 if sig[k].default is inspect.Parameter.empty or not _same(v, sig[k].default)]
        return f"{type(self).__name__}({', '.join(shown)})"


_FITS = threading.local()  # how many fits are running in this thread (an estimator may fit another inside)


def _boundary_fit(fit: Callable) -> Callable:
    """``fit`` with the checks at the boundary of every estimator: the backend's federation before any work
    (:func:`~synth.algorithms.common.check_backend`) and finite models at the end
    (:func:`~synth.algorithms.common.check_fitted_models`), once per outermost fit."""

    @functools.wraps(fit)
    def guarded(self, backend, *args, **kwargs):
        depth = getattr(_FITS, "depth", 0)
        if depth == 0:
            check_backend(backend)
        _FITS.depth = depth + 1
        try:
            out = fit(self, backend, *args, **kwargs)
        except (ValueError, np.linalg.LinAlgError) as exc:
            if depth == 0 and _library_non_finite(exc):
                check_fitted_models(self, f"diverged: non-finite values reached a library step ({_origin(exc)}: "
                                          f"{str(exc).splitlines()[0][:80]})")
            raise
        finally:
            _FITS.depth = depth
        if depth == 0:
            check_fitted_models(self)
        return out

    guarded._boundary = True
    return guarded


# what scikit-learn, scipy and numpy.linalg say when handed NaN or infinity (a diverged update reached them)
_NON_FINITE = ("contains nan", "contains infinity", "must contain only finite values", "array must not contain infs",
               "did not converge", "input contains nan")


def _origin(exc: BaseException) -> str:
    """The top-level package of the frame that raised ``exc`` (``sklearn``, ``scipy``, ``numpy``, ...)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "") if tb is not None else ""
    return module.split(".")[0]


def _library_non_finite(exc: BaseException) -> bool:
    return _origin(exc) in ("sklearn", "scipy", "numpy") and any(t in str(exc).lower() for t in _NON_FINITE)


def _same(a, b) -> bool:
    try:
        return bool(a is b or (type(a) is type(b) and a == b))
    except (ValueError, TypeError):
        return False


def _check_one(name: str, value: Any, constraints: list, bounds: dict[str, float]) -> Any:
    """The value as the first constraint that accepts it returns it; else the most specific error."""
    if value is None and None in constraints:
        return None
    errors: list[Exception] = []
    for c in constraints:
        if c is None:
            continue
        try:
            return c.check(name, value, bounds)
        except (TypeError, ValueError) as exc:
            errors.append(exc)
    real = [c for c in constraints if c is not None]
    if len(real) == 1:
        raise errors[0]
    kinds = [c.describe(bounds) for c in real] + (["None"] if None in constraints else [])
    # a ValueError (right type, wrong value) is more telling than "wrong type" from the other alternatives
    value_errors = [e for e in errors if isinstance(e, ValueError)]
    if value_errors:
        raise ValueError(f"{value_errors[0]} (allowed: {'; or '.join(kinds)})")
    raise TypeError(f"{name} must be {'; or '.join(kinds)}, got {format_value(value)} of type {type(value).__name__}")

