"""cflab.figures -- reproduction targets for the papers' figures and tables (run by ``paper_repro.py``).

The engine lives at the package's root (registry, runs, trials) and imports no sub-package; the sub-packages are
targets/, verdicts/, report/, campaign/ and plots/, with the import directions of docs/architecture.md (checked by
tests/test_imports.py).  :func:`load_targets` imports every target module named in :data:`TARGET_MODULES`.
"""

import re

from .registry import SIZES, TARGETS, Context, Section, Target, register

__all__ = ["SIZES", "TARGETS", "TARGET_MODULES", "Context", "Section", "Target", "register", "load_targets"]

TARGET_MODULES = ("targets.ifca_synthetic", "targets.ifca_nets", "targets.srfca_nets", "targets.clove_synthetic",
                  "targets.clove_nets", "targets.clove_unsup", "targets.theory_figs", "targets.atlas",
                  "targets.head_to_head", "targets.phase", "campaign.measured")
_PAPER_ORDER = ("measured", "ifca", "srfca", "clove", "theory", "head", "phase")
_KIND_ORDER = ("synthetic", "nets", "theory")


def _order(target: Target) -> tuple:
    """Report order: by paper, synthetic targets first, then tables and figures by their number."""
    prefix, _, rest = target.name.partition("-")
    number = re.search(r"(table|fig)(\d+)", target.name)
    if prefix == "theory":  # theory-ifca, theory-srfca, theory-clove in paper order
        return (_PAPER_ORDER.index("theory"), 2, 0, _PAPER_ORDER.index(rest) if rest in _PAPER_ORDER else 9, "")
    return (_PAPER_ORDER.index(prefix) if prefix in _PAPER_ORDER else len(_PAPER_ORDER),
            _KIND_ORDER.index(target.kind) if target.kind in _KIND_ORDER else 3,
            0 if number is None or number.group(1) == "table" else 1,
            int(number.group(2)) if number else 0, target.name)


def load_targets() -> dict:
    """Import every target module so that it registers itself; the targets in report order."""
    import importlib

    for mod in TARGET_MODULES:
        importlib.import_module(f"{__name__}.{mod}")
    ordered = sorted(TARGETS.values(), key=_order)
    TARGETS.clear()
    TARGETS.update((t.name, t) for t in ordered)
    return TARGETS
