"""Registry of reproduction targets (figures and tables of the three papers, and the toolkit's own checks).

A target is a function ``run(ctx) -> Section`` registered under a name; ``paper_repro.py``
lists and runs them.  A target that cannot run in a setting (no ``nets`` package, data files
missing) says so through ``available(ctx)``, which returns ``None`` (it can run) or the reason;
such targets are reported as pending, never faked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from synth.validation import check_choice, check_int

__all__ = ["MEDIUM_AT_QUICK", "QUICK_CPU_SECONDS", "SIZES", "Context", "Section", "Target", "TARGETS", "medium_size",
           "quick_cost", "register"]

SIZES = ("tiny", "quick", "medium", "full")

# neural-network targets that a medium run runs at the quick size (the digits stand-in, counted apart in the
# headline), each with why: their unsupervised or CIFAR-10 runs would multiply the medium run's time on 2 CPU cores
MEDIUM_AT_QUICK = {
    "clove-fig2": "8 autoencoder variants x 3 seeds on 30 MNIST clients with 10 models (~60 s a run): ~12 min",
    "clove-fig4": "autoencoders on 30 MNIST clients with 10 models, loss matrices on every model",
    "clove-fig5": "autoencoder runs of up to 50 MNIST clients with 10 models (~60 s a run and more)",
    "clove-table12": "its published column is CIFAR-10, which is not in the data directory",
}


# CPU seconds of each target in a quick run (measured on the 2-core EPYC, in one `paper_repro.py --quick`, the
# targets sharing runs after those that make them): paper_repro.py starts the longest first when it runs targets
# side by side, so that the last to finish are short.  An order, not a promise: a target missing here counts as
# QUICK_DEFAULT_SECONDS.
QUICK_CPU_SECONDS = {
    "measured-runs": 6, "ifca-fig3a": 84, "ifca-fig3b": 35, "ifca-fig3c": 31, "ifca-fig3d": 29, "ifca-table1": 97,
    "ifca-fig4": 7, "srfca-table1": 152, "srfca-table2": 4, "srfca-table4": 4, "clove-fig3a": 23, "clove-fig3b": 13,
    "clove-table1": 191, "clove-table2": 9, "clove-table4": 8, "clove-table5": 61, "clove-table7": 128,
    "clove-table8": 7, "clove-table9": 7, "clove-table12": 49, "clove-fig2": 75, "clove-fig4": 70, "clove-fig5": 105,
    "theory-ifca": 20, "theory-srfca": 28, "theory-clove": 38, "theory-atlas": 156, "head-to-head": 58,
    "phase-diagrams": 39,
}
QUICK_DEFAULT_SECONDS = 30.0


def quick_cost(name: str) -> float:
    """The CPU seconds target ``name`` takes in a quick run (:data:`QUICK_CPU_SECONDS`), for ordering targets."""
    return float(QUICK_CPU_SECONDS.get(name, QUICK_DEFAULT_SECONDS))


def medium_size(name: str, kind: str) -> str:
    """The size a medium run runs target ``name`` at: ``medium`` for the neural-network targets on the papers'
    data, ``quick`` for the synthetic and theory targets and those of :data:`MEDIUM_AT_QUICK`."""
    return "medium" if kind in ("nets", "measured") and name not in MEDIUM_AT_QUICK else "quick"


@dataclass
class Context:
    """What a target gets: output folder, size (tiny / quick / medium / full), parallelism and device.

    ``tiny`` is the test suite's size (seconds per target), ``quick`` the reduced sizes on
    embedded data (the default of ``paper_repro.py``), ``medium`` the papers' own data sets from the
    data directory at reduced sizes (fewer clients, rounds, seeds; its measured time: docs/reproducing.md), ``full``
    the papers' sizes.
    """

    out: Path
    size: str = "quick"
    n_jobs: int = 1
    backend: str = "loky"
    device: str = "auto"
    scheduler: str | None = None
    data_dir: str | None = None
    progress: bool | None = None
    cfl: dict | None = None  # CFL hyper-parameters for every CFL run (see figures.targets.netcommon.parse_cfl)
    # re-plot from the result stores alone: run_points reads finished trials and computes nothing (a missing trial
    # is an error), see figures.runs.replot
    replot: bool = False
    # the target being run (set by the registry): recorded in the stores it writes, so they can be re-plotted
    target: str | None = None
    # read the runs from the campaign's one-JSON-per-run folders under this directory instead of running them
    # (figures.campaign.planner): a run not stored there is a "missing" record, never computed
    stored: Path | None = None
    # with ``stored``: reads a target's records instead of running its trials, called by run_points as
    # reader(ctx, folder, spec, trial_fn) (figures.campaign.store.stored_records)
    reader: Callable | None = None
    # with ``stored``: every run a target asks for is appended here (figures.campaign.store.RunRequest)
    requests: list | None = None
    # other targets of this run may be filling the same result store at the same time (paper_repro.py runs quick
    # targets side by side): wait for a store in use, then read its runs, instead of refusing it
    wait_for_stores: bool = False

    def __post_init__(self) -> None:
        self.out = Path(self.out)
        self.size = check_choice("size", self.size, SIZES)
        self.n_jobs = check_int("n_jobs", self.n_jobs, low=-1)
        if self.n_jobs == 0:
            raise ValueError("n_jobs must be -1 (all cores) or an integer in [1, inf), got 0")
        self.device = check_choice("device", self.device, ("auto", "cpu", "cuda"))

    @property
    def quick(self) -> bool:
        """Whether this is a reduced run (tiny, quick or medium)."""
        return self.size != "full"

    @property
    def real(self) -> bool:
        """Whether the neural-network targets run the papers' data sets (medium, full), not the 8x8 digits."""
        return self.size in ("medium", "full")

    def pick(self, tiny, quick, full, medium=None):
        """The value for this context's size (``medium`` defaults to the ``quick`` value)."""
        return {"tiny": tiny, "quick": quick, "medium": quick if medium is None else medium, "full": full}[self.size]

    def folder(self, name: str) -> Path:
        """``out/<name>``: where a target writes its figures, CSVs and result stores."""
        path = self.out / name
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class Section:
    """A target's part of ``report.md``: markdown text, the files it wrote, its paper-vs-toolkit rows."""

    title: str
    markdown: str
    files: list[str] = field(default_factory=list)
    rows: list = field(default_factory=list)


@dataclass
class Target:
    """One registered target: ``run(ctx)`` and an optional ``available(ctx)`` (None = can run, else why not)."""

    name: str
    paper: str
    description: str
    run: Callable[[Context], Section] | None
    pending: str | None = None
    kind: str = "synthetic"
    available: Callable[[Context], str | None] | None = None

    def why_not(self, ctx: Context) -> str | None:
        """Why this target cannot run in ``ctx`` (None when it can)."""
        if self.pending:
            return self.pending
        return self.available(ctx) if self.available is not None else None


TARGETS: dict[str, Target] = {}


def register(name: str, paper: str, description: str, pending: str | None = None, kind: str = "synthetic",
             available: Callable[[Context], str | None] | None = None):
    """Decorator registering a target function (or a pending placeholder when ``pending`` is given)."""
    if name in TARGETS:
        raise ValueError(f"target {name!r} is registered twice")

    def deco(fn):
        def run(ctx: Context) -> Section:
            return fn(dataclasses.replace(ctx, target=name))

        run.__doc__, run.__wrapped__ = fn.__doc__, fn
        TARGETS[name] = Target(name, paper, description, run, pending, kind, available)
        return fn

    if pending is not None:
        TARGETS[name] = Target(name, paper, description, None, pending, kind, available)
        return lambda fn: fn
    return deco
