"""Which estimator of :mod:`synth.algorithms` a ``--algo`` name runs, and how it is scored.

``nets`` holds no algorithm code: every name maps to a class of
:mod:`synth.algorithms`, looked up by name, so algorithms added there (SR-FCA,
CLoVE, CFL, ...) become available here as soon as they exist.  Hyper-parameters
are passed by the names the estimator declares in ``_parameter_constraints``
(:mod:`synth.algorithms.params`); a name that no estimator declares is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import synth.algorithms as algorithms
from synth.validation import did_you_mean

__all__ = ["ALGOS", "AlgoSpec", "available", "estimator_class", "hyper_parameters", "make_estimator"]


@dataclass(frozen=True)
class AlgoSpec:
    """A ``--algo`` name: the estimator class name in :mod:`synth.algorithms`, its evaluation rule, paper."""

    cls: str
    rule: str  # "min-loss" (IFCA), "cluster" (SR-FCA, CLoVE, one-shot), "own" (Local: one model per client)
    paper: str
    # IFCA's stacked runs: step_size may be a list of restarts, the best run is extra["best_run"], and a run
    # can be checkpointed and resumed round by round
    restarts: bool = False


ALGOS: dict[str, AlgoSpec] = {
    "ifca": AlgoSpec("IFCA", "min-loss", "IFCA Alg. 2", restarts=True),
    "global": AlgoSpec("GlobalModel", "min-loss", "FedAvg (IFCA/SR-FCA/CLoVE baseline)", restarts=True),
    "local": AlgoSpec("LocalModels", "own", "local training baseline"),
    "oneshot-kmeans": AlgoSpec("OneShotKMeans", "cluster", "IFCA Alg. 1 one-shot clustering"),
    "local-kmeans": AlgoSpec("LocalKMeans", "cluster", "SR-FCA baseline Local-KMeans"),
    "srfca": AlgoSpec("SRFCA", "cluster", "SR-FCA Alg. 1"),
    "clove": AlgoSpec("CLoVE", "cluster", "CLoVE Alg. 1"),
    "cfl": AlgoSpec("CFL", "cluster", "CFL (Sattler et al. 2021)"),
    "oneshot-ifca": AlgoSpec("OneShotIFCA", "min-loss", "SR-FCA baseline ONE_SHOT-IFCA"),
    "kfed": AlgoSpec("KFED", "cluster", "k-FED (Dennis et al. 2021, Alg. 1-2)"),
    "pacfl": AlgoSpec("PACFL", "cluster", "PACFL (Vahidian et al. 2023, Alg. 1)"),
    "flexcfl": AlgoSpec("FlexCFL", "cluster", "FlexCFL (Duan et al. 2022)"),
    "fesem": AlgoSpec("FeSEM", "cluster", "FeSEM (Long et al. 2023, Alg. 1)"),
    "fedsoft": AlgoSpec("FedSoft", "cluster", "FedSoft (Ruan & Joe-Wong 2022, Alg. 1)"),
    "perfedavg": AlgoSpec("PerFedAvg", "own", "Per-FedAvg (Fallah et al. 2020, Alg. 1)"),
    "fedproto": AlgoSpec("FedProto", "own", "FedProto (Tan et al. AAAI 2022, Alg. 1)"),
    "fedpac": AlgoSpec("FedPAC", "own", "FedPAC (Xu et al. ICLR 2023, Alg. 1)"),
    "fedala": AlgoSpec("FedALA", "own", "FedALA (Zhang et al. AAAI 2023)"),
}


def available(name: str) -> bool:
    """Whether the estimator class behind ``name`` exists in :mod:`synth.algorithms`."""
    return hasattr(algorithms, ALGOS[name].cls)


def hyper_parameters(name: str) -> tuple[str, ...]:
    """The hyper-parameters the estimator behind ``name`` declares."""
    return tuple(_estimator_class(name)._parameter_constraints)


def _known_hyper_parameters() -> set[str]:
    """Every hyper-parameter name some available estimator declares."""
    return {key for n in ALGOS if available(n) for key in _estimator_class(n)._parameter_constraints}


def estimator_class(name: str):
    """The estimator class of :mod:`synth.algorithms` behind ``--algo name`` (ValueError for an unknown name)."""
    return _estimator_class(name)


def _estimator_class(name: str):
    if name not in ALGOS:
        raise ValueError(f"algo must be one of {', '.join(ALGOS)}; got {name!r}{did_you_mean(str(name), ALGOS)}")
    spec = ALGOS[name]
    cls = getattr(algorithms, spec.cls, None)
    if cls is None:
        raise ValueError(f"algo {name!r} needs synth.algorithms.{spec.cls}, which does not exist in this "
                         f"version; available: {', '.join(n for n in ALGOS if available(n))}")
    return cls


def make_estimator(name: str, hyper: dict, explicit=()):
    """The estimator ``name`` with the hyper-parameters of ``hyper`` that it declares.

    ``hyper`` holds the run's settings for every algorithm by their shared names; each key must be declared by
    some estimator (a misspelt key is an error, never dropped), and the estimator takes the ones it declares.
    Names in ``explicit`` (asked for by the user) must be declared by this estimator.
    """
    cls = _estimator_class(name)
    cls.check_param_names(explicit)
    known = _known_hyper_parameters()
    unknown = sorted(k for k in hyper if k not in known)
    if unknown:
        raise ValueError(f"no estimator has a hyper-parameter {unknown[0]!r}{did_you_mean(unknown[0], known)}")
    own = cls._parameter_constraints
    return cls.from_params({k: v for k, v in hyper.items() if k in own})
