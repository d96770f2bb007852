"""No import cycle among the project's modules (synth, theory, nets, figures, bench, paper_repro).

The graph is read from the source with ``ast``, without importing anything.  Its edges are the imports that run
when a module is first imported: statements at module level, including those inside module-level ``if``/``try``/
``with`` blocks and class bodies.  Imports inside functions (run later, when the function is called) and under
``if TYPE_CHECKING:`` (never run) are left out: a cycle through them cannot leave a half-initialised module behind,
and a function-level import is the usual way to break one.  ``import a.b`` and ``from a import b`` point at the
module ``a.b`` when it exists, else at the package ``a`` (its ``__init__``); the implicit import of a parent package
by its submodules is not an edge (Python finishes the parent's ``__init__`` first only when nothing in it imports
back, which is exactly what an explicit edge records).

A second, stricter check counts the imports inside functions too (still not those under ``TYPE_CHECKING``): a cycle
there is legal Python but means two modules each need the other, usually a registry importing what registers in it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("synth", "theory", "nets", "figures", "bench")
SCRIPTS = ("paper_repro",)

# Cycles known at this revision and being removed elsewhere; each entry is the sorted tuple of a cycle's modules.
# The lists must only shrink: an entry that is no longer a cycle fails the test too, so it is deleted when fixed.
KNOWN_CYCLES: set[tuple[str, ...]] = set()
KNOWN_DEFERRED_CYCLES: set[tuple[str, ...]] = set()


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    for name in SCRIPTS:
        if (ROOT / f"{name}.py").exists():
            out[name] = ROOT / f"{name}.py"
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _load_time_imports(body: list[ast.stmt]):
    """Import statements that run at import time (not in functions, not under ``if TYPE_CHECKING``)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _load_time_imports(node.body)
            yield from _load_time_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]):
                yield from _load_time_imports(block)
        elif isinstance(node, ast.With | ast.For | ast.While):
            yield from _load_time_imports(node.body)
        elif isinstance(node, ast.ClassDef):
            yield from _load_time_imports(node.body)


def _all_imports(body: list[ast.stmt]):
    """Every import statement, at any depth (functions included), except those under ``if TYPE_CHECKING``."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _all_imports(node.orelse)
            continue
        for field in ("body", "orelse", "finalbody"):
            yield from _all_imports(getattr(node, field, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            yield from _all_imports(handler.body)
        for case in getattr(node, "cases", None) or []:
            yield from _all_imports(case.body)


def _target(name: str, modules: dict[str, Path]) -> str | None:
    """The project module an import of ``name`` runs: the longest prefix of ``name`` that is one."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        cand = ".".join(parts[:n])
        if cand in modules:
            return cand
    return None


def import_graph(deferred: bool = False) -> dict[str, set[str]]:
    """Module -> the project modules it imports at import time (``deferred=True``: also inside functions)."""
    walk = _all_imports if deferred else _load_time_imports
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        package = mod if is_pkg else mod.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in walk(tree.body):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                if node.level:
                    base_parts = package.split(".") if package else []
                    base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for name in names:
                dep = _target(name, modules)
                if dep is not None and dep != mod:
                    graph[mod].add(dep)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[tuple[str, ...]]:
    """The strongly connected components with more than one module (Tarjan), each as a sorted tuple."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[tuple[str, ...]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_the_walker_sees_the_project():
    graph = import_graph()
    assert {"synth.backend", "synth.algorithms.ifca", "nets.backend", "theory", "figures.registry"} <= set(graph)
    assert "synth.validation" in graph["synth.backend"]  # a module-level relative import
    assert "synth.algorithms.backend" in graph["nets.algorithms"] or "synth.algorithms" in graph["nets.algorithms"]


def test_the_walker_finds_a_cycle_and_ignores_deferred_imports():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(g) == [("a", "b", "c")]
    tree = ast.parse("import x\nif TYPE_CHECKING:\n    import y\ndef f():\n    import z\ntry:\n    import w\n"
                     "except ImportError:\n    pass\n")
    assert [a.name for node in _load_time_imports(tree.body) for a in node.names] == ["x", "w"]
    assert [a.name for node in _all_imports(tree.body) for a in node.names] == ["x", "z", "w"]


def test_no_import_cycles():
    cycles = set(find_cycles(import_graph()))
    new = sorted(cycles - KNOWN_CYCLES)
    assert not new, f"module-level import cycles: {new}"
    fixed = sorted(KNOWN_CYCLES - cycles)
    assert not fixed, f"no longer cycles, delete them from KNOWN_CYCLES: {fixed}"


def test_no_import_cycles_through_functions():
    cycles = set(find_cycles(import_graph(deferred=True)))
    new = sorted(cycles - KNOWN_DEFERRED_CYCLES)
    assert not new, f"import cycles (counting imports inside functions): {new}"
    fixed = sorted(KNOWN_DEFERRED_CYCLES - cycles)
    assert not fixed, f"no longer cycles, delete them from KNOWN_DEFERRED_CYCLES: {fixed}"


def test_the_command_line_does_not_import_heavy_libraries():
    """`python -m synth run --help` stays fast: scikit-learn, scipy.stats/optimize and torch load where used."""
    import subprocess
    import sys

    code = ("import sys, synth.cli, synth.experiment, synth.algorithms; "
            "print(' '.join(m for m in ('sklearn', 'scipy.stats', 'scipy.optimize', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported at start-up: {out.stdout.strip()}"


# The parts of figures (docs/architecture.md) and the parts each may import, imports inside functions included.
# "root" is the package's __init__ (load_targets imports every target module by name); the engine is the modules
# at the package's root.
FIGURES_ENGINE = ("figures.registry", "figures.runs", "figures.trials")
FIGURES_DATA = ("measured", "published")  # data folders; a script among the data stands alone
FIGURES_ALLOWED: dict[str, set[str]] = {
    "engine": set(),
    "plots": set(),
    "verdicts": {"engine"},
    "targets": {"engine", "verdicts", "plots"},
    "report": {"engine", "verdicts"},
    "campaign": {"engine", "verdicts", "plots", "targets", "root"},
    "root": {"engine", "verdicts", "plots", "targets", "report", "campaign"},
}


def figures_part(module: str) -> str | None:
    """The part of figures a module belongs to (None outside figures and in its data folders); a module directly
    under figures/ that is not the engine is a part of its own, which no rule names, so that importing it is refused
    until it is placed."""
    if module == "figures":
        return "root"
    if module in FIGURES_ENGINE:
        return "engine"
    parts = module.split(".")
    if parts[0] != "figures" or parts[1] in FIGURES_DATA:
        return None
    return parts[1]


def arrows_against_the_grain(graph: dict[str, set[str]],
                             allowed: dict[str, set[str]] = FIGURES_ALLOWED) -> list[tuple[str, str]]:
    """The imports between parts of figures that ``allowed`` does not list, as (importer, imported)."""
    bad = []
    for mod, deps in graph.items():
        src = figures_part(mod)
        if src is None:
            continue
        for dep in deps:
            dst = figures_part(dep)
            if dst is not None and dst != src and dst not in allowed.get(src, set()):
                bad.append((mod, dep))
    return sorted(bad)


def test_the_direction_checker_refuses_an_arrow_against_the_grain():
    graph = {"figures.runs": {"figures.registry", "figures.report.progress"},
             "figures.targets.ifca_nets": {"figures.verdicts.rules", "figures.plots.style", "figures.campaign.planner"},
             "figures.report.assemble": {"figures.verdicts.rules", "synth.store"},
             "figures.plots.style": {"figures.newpart"},
             "synth.report": {"figures.runs"}}
    assert arrows_against_the_grain(graph) == [("figures.plots.style", "figures.newpart"),
                                               ("figures.runs", "figures.report.progress"),
                                               ("figures.targets.ifca_nets", "figures.campaign.planner")]
    assert arrows_against_the_grain({"figures.campaign.measured": {"figures.targets.ifca_synthetic"}}) == []


def test_every_figures_module_has_a_part_with_rules():
    parts = {figures_part(m) for m in import_graph()} - {None}
    assert parts == set(FIGURES_ALLOWED), f"parts of figures without rules: {sorted(parts - set(FIGURES_ALLOWED))}"


def test_figures_imports_flow_one_way():
    bad = arrows_against_the_grain(import_graph(deferred=True))
    assert not bad, f"imports against the allowed directions (docs/architecture.md): {bad}"
