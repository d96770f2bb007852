"""The protocol ledgers: every setting of a stored paper-scale cell against the paper's own words.

One TOML file per folder of :mod:`figures.campaign.planner`'s store (``figures/published/protocols/<folder>.toml``; a
file with ``folders`` covers several, e.g. IFCA's Fig. 3 stores).  For each setting (data source, clients, sampling,
model, rounds, ..., what the paper's ``±`` means) a ledger gives the paper's sentence verbatim and where it stands,
the toolkit's value, and a class:

* ``same`` -- the toolkit runs what the quoted sentence states;
* ``paper silent`` -- the paper does not state it; ``where`` names the source used instead (public code file and
  line, another section, another paper, or the toolkit's own choice) and ``why`` says what was used;
* ``code`` -- the paper's text states something else, and the toolkit runs what the authors' public code that
  produced the published numbers runs; ``where`` cites that code's file and line, ``why`` says how they differ;
* ``deviates`` -- the toolkit runs something else than the paper states (and than its code, where one is cited);
  ``why`` says why (say, the data copy here holds fewer reviews per domain than the stated draw needs).

``toolkit`` is one string, or a table by cell name (``folder:dataset:clients``) or by folder (a file covering several
folders) where the cells differ.

``[margin."<unit>"]`` declares, per unit of the cell's published numbers (a column of
``figures/published/tables.csv``), the practical-equivalence margin's ``floor`` (or ``relative``, a fraction of the
published value), its ``cap`` (or ``cap_relative``: the informative limit, the loosest agreement that still ranks
the table's methods; a wider margin is the paper's own spread and its agreements say so) and ``why``: fixed from the
paper and the unit before the runs are judged (:func:`figures.verdicts.rules.declared_margin`; a table no ledger
covers uses the project's defaults).

A cell with no ``deviates`` setting is at the paper's setting (:meth:`Ledger.protocol_class` ``"same"``): the
published numbers' protocol, which is the public code's where it and the text differ (``code`` settings, listed by
:meth:`Ledger.summary`); one with any ``deviates`` setting is near the paper, its deviations declared.
``tests/test_protocol_ledger.py`` checks every quote against the paper text in ``../shared/papers``.  A malformed
file raises ValueError naming the file and the field.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from pathlib import Path
from types import MappingProxyType

__all__ = ["CLASSES", "HERE", "KINDS", "PAPERS", "PM_KINDS", "SETTINGS_NETS", "SETTINGS_SYNTHETIC", "Ledger",
           "Setting", "Stale", "Suspect", "declared_margin_of", "folder_of", "ledger_for", "load_ledger",
           "load_ledgers", "normalise", "paper_texts", "quote_found"]

HERE = Path(__file__).parent.parent / "published" / "protocols"
PAPERS = ("IFCA", "SR-FCA", "CLoVE")
KINDS = ("nets", "synthetic")
CLASSES = ("same", "paper silent", "code", "deviates")
# a code setting's ``where`` cites a file and its line(s): "src/trainers.py:354-362", "simulated.py lines 13-18"
_CODE_LINE = re.compile(r"\.\w{1,5}(:| lines? )\d+")
# what a paper's "±" is: the spread of its seeds as a population SD (divisor n) or a sample SD (n - 1)
PM_KINDS = ("population SD", "sample SD", "unstated")
# the settings every ledger of a kind declares; further names are allowed
SETTINGS_NETS = ("data source", "clients", "samples per client", "sampling", "model", "rounds", "local steps",
                 "batch", "optimizer", "step size", "tuning", "evaluation", "test split", "seeds", "± meaning")
SETTINGS_SYNTHETIC = ("generator", "clients", "samples per client", "dimension", "noise", "initialisation",
                      "iterations", "step size", "success rule", "trials", "evaluation")
REQUIRED = {"nets": SETTINGS_NETS, "synthetic": SETTINGS_SYNTHETIC}
# the plain-text papers by file prefix (figures.verdicts.published.PAPERS): IFCA has a journal and a conference version
PAPER_FILES = {"SR-FCA": ("000",), "IFCA": ("001", "003"), "CLoVE": ("004",)}

_TOP_KEYS = {"folder", "folders", "paper", "artifacts", "kind", "cells", "pm", "paper_seeds", "stale", "setting",
             "suspect", "margin"}
# a [margin."<unit>"] table: the practical-equivalence bounds of one unit (figures.verdicts.rules.UnitMargin)
_MARGIN_KEYS = {"floor", "relative", "cap", "cap_relative", "why"}
_SETTING_KEYS = {"name", "paper", "paper_text", "where", "toolkit", "class", "why", "methods"}
_STALE_KEYS = {"reason", "changed_keys", "rerun"}
_SUSPECT_KEYS = {"source", "reason"}


@dataclass(frozen=True)
class Setting:
    """One setting of a cell: the paper's words (``paper``, from ``paper_text``'s file), where they stand, the
    toolkit's value (one string, or one per cell name), the class (:data:`CLASSES`) and why."""

    name: str
    paper: str
    paper_text: str
    where: str
    toolkit: str | Mapping[str, str]
    klass: str
    why: str
    methods: tuple[str, ...] = ()  # the methods (table rows) the setting concerns; empty: every method of the cell

    def concerns(self, methods: Sequence[str] | None) -> bool:
        """Whether this setting applies to a row of ``methods`` (None: the whole cell)."""
        return not self.methods or methods is None or bool(set(self.methods) & set(methods))

    def value_for(self, cell: str | None = None) -> str:
        """The toolkit's value for ``cell`` (a name ``folder:dataset:clients``, or a folder name); a table keyed by
        folder answers for every cell of that folder.  Without a cell: every value (``"key: value; ..."``) when
        they differ."""
        if isinstance(self.toolkit, str):
            return self.toolkit
        if cell is None:
            return "; ".join(f"{c}: {v}" for c, v in self.toolkit.items())
        for key in (cell, folder_of(cell)):
            if key in self.toolkit:
                return self.toolkit[key]
        raise KeyError(f"setting {self.name!r} has no toolkit value for cell {cell!r}; it has "
                       f"{', '.join(self.toolkit)}")


@dataclass(frozen=True)
class Stale:
    """Stored runs that a protocol fix invalidated: why, the run-point keys whose values changed, and the command
    that reruns them."""

    reason: str
    changed_keys: tuple[str, ...]
    rerun: str


@dataclass(frozen=True)
class Suspect:
    """A published number that looks like a misprint: its source (:meth:`figures.verdicts.published.Published.source`)
    and the reason (its row and column neighbours, the paper's text)."""

    source: str
    reason: str


@dataclass(frozen=True)
class Ledger:
    """The protocol of the cells of one or more store folders against one paper (see the module docstring)."""

    folders: tuple[str, ...]
    paper: str
    artifacts: tuple[str, ...]
    kind: str
    cells: tuple[str, ...]  # empty: every cell of the folders
    pm: str
    paper_seeds: int
    settings: tuple[Setting, ...]
    stale: Stale | None
    suspects: tuple[Suspect, ...]
    path: Path
    # unit (a column of figures/published/tables.csv) -> the declared margin's fields (floor, relative, cap,
    # cap_relative, why): fixed from the paper and the unit, before the cell's runs are judged
    margins: Mapping[str, Mapping[str, float | str]] = dataclass_field(default_factory=lambda: MappingProxyType({}))

    def covers(self, cell: str) -> bool:
        """Whether ``cell`` (``folder:dataset:clients``) is one of this ledger's cells."""
        return folder_of(cell) in self.folders and (not self.cells or cell in self.cells)

    def setting(self, name: str) -> Setting:
        """The setting called ``name`` (KeyError naming the ledger's file when there is none)."""
        for s in self.settings:
            if s.name == name:
                return s
        raise KeyError(f"{self.path.name}: no setting {name!r}")

    def _check_cell(self, cell: str | None) -> None:
        if cell is not None and not self.covers(cell):
            raise ValueError(f"{self.path.name}: cell {cell!r} is not one of this ledger's cells (folders "
                             f"{', '.join(self.folders)}" + (f"; cells {', '.join(self.cells)}" if self.cells else "")
                             + ")")

    def deviations(self, cell: str | None = None, methods: Sequence[str] | None = None) -> tuple[Setting, ...]:
        """The settings where the toolkit runs something else than the paper states (for a row of ``methods``:
        those that concern them)."""
        self._check_cell(cell)
        return tuple(s for s in self.settings if s.klass == "deviates" and s.concerns(methods))

    def silent(self, cell: str | None = None, methods: Sequence[str] | None = None) -> tuple[Setting, ...]:
        """The settings the paper does not state (the toolkit's source is in ``where``)."""
        self._check_cell(cell)
        return tuple(s for s in self.settings if s.klass == "paper silent" and s.concerns(methods))

    def as_code(self, cell: str | None = None, methods: Sequence[str] | None = None) -> tuple[Setting, ...]:
        """The settings where the toolkit follows the authors' public code where the paper's text differs."""
        self._check_cell(cell)
        return tuple(s for s in self.settings if s.klass == "code" and s.concerns(methods))

    def protocol_class(self, cell: str | None = None, methods: Sequence[str] | None = None) -> str:
        """``"same"`` when no setting (that concerns a row of ``methods``) deviates from the paper's stated
        protocol, else ``"deviates"``."""
        return "deviates" if self.deviations(cell, methods) else "same"

    def summary(self, cell: str | None = None, methods: Sequence[str] | None = None) -> str:
        """One line: at or near the paper, the declared deviations and the settings the paper is silent on, e.g.
        ``near the paper: 3 declared deviations (clients; sampling; data source); paper silent on 4 (...)``."""
        dev, quiet = self.deviations(cell, methods), self.silent(cell, methods)
        code = self.as_code(cell, methods)
        if dev:
            text = (f"near the paper: {len(dev)} declared deviation{'s' if len(dev) != 1 else ''} "
                    f"({'; '.join(s.name for s in dev)})")
        else:
            text = "at the paper's setting"
        if code:
            text += f"; as its public code where the text differs on {len(code)} ({'; '.join(s.name for s in code)})"
        if quiet:
            text += f"; paper silent on {len(quiet)} ({'; '.join(s.name for s in quiet)})"
        if self.stale is not None:
            text += f"; stored runs stale ({self.stale.reason})"
        return text


def folder_of(folder_or_cell: str) -> str:
    """The store folder of a cell name ``folder:dataset:clients`` (a folder name is returned as it is)."""
    return str(folder_or_cell).split(":", 1)[0]


# -- reading and checking a ledger file -------------------------------------------------------------------------

class _Reader:
    """Typed access to a ledger's fields; every error names the file and the field."""

    def __init__(self, path: Path):
        self.path = path

    def fail(self, field: str, problem: str) -> ValueError:
        return ValueError(f"{self.path}: {field}: {problem}")

    def text(self, table: Mapping, key: str, field: str, *, required: bool = True, empty: bool = False) -> str:
        if key not in table:
            if required:
                raise self.fail(field, "missing")
            return ""
        value = table[key]
        if not isinstance(value, str):
            raise self.fail(field, f"must be a string, got {type(value).__name__} {value!r}")
        if not empty and not value.strip():
            raise self.fail(field, "must not be empty")
        return value

    def choice(self, table: Mapping, key: str, field: str, choices: tuple[str, ...]) -> str:
        value = self.text(table, key, field)
        if value not in choices:
            raise self.fail(field, f"must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")
        return value

    def texts(self, table: Mapping, key: str, field: str, *, required: bool = True) -> tuple[str, ...]:
        if key not in table:
            if required:
                raise self.fail(field, "missing")
            return ()
        value = table[key]
        if not isinstance(value, list) or not value:
            raise self.fail(field, f"must be a non-empty list of strings, got {value!r}")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise self.fail(f"{field}[{i}]", f"must be a non-empty string, got {item!r}")
        if len(set(value)) != len(value):
            raise self.fail(field, f"lists an entry twice: {value!r}")
        return tuple(value)

    def unknown(self, table: Mapping, allowed: set[str], field: str) -> None:
        extra = sorted(set(table) - allowed)
        if extra:
            raise self.fail(field, f"unknown key(s) {', '.join(repr(k) for k in extra)}; known: "
                            f"{', '.join(sorted(allowed))}")


def load_ledger(path: str | Path) -> Ledger:
    """Read and check one ledger file (ValueError naming the file and the field when it is malformed)."""
    path = Path(path)
    r = _Reader(path)
    import stat

    try:
        regular = stat.S_ISREG(path.stat().st_mode)
    except OSError as exc:
        raise r.fail("file", f"not readable ({type(exc).__name__})") from None
    if not regular:  # a FIFO by a ledger's name would block the reader
        raise r.fail("file", "not a regular file (a pipe, device or folder by a ledger's name)")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise r.fail("file", f"not valid TOML ({exc})") from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise r.fail("file", "nested too deeply to read (a ledger is a few flat tables)") from None
    r.unknown(raw, _TOP_KEYS, "top level")
    folders = _folders(r, raw)
    paper = r.choice(raw, "paper", "paper", PAPERS)
    artifacts = r.texts(raw, "artifacts", "artifacts")
    kind = r.choice(raw, "kind", "kind", KINDS)
    cells = r.texts(raw, "cells", "cells", required=False)
    for i, cell in enumerate(cells):
        _check_cell_name(r, cell, folders, f"cells[{i}]")
    pm = r.choice(raw, "pm", "pm", PM_KINDS)
    seeds = raw.get("paper_seeds")
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise r.fail("paper_seeds", f"must be a positive integer (the paper's seeds), got {seeds!r}")
    settings = _settings(r, raw, kind, folders, cells)
    return Ledger(folders, paper, artifacts, kind, cells, pm, seeds, settings, _stale(r, raw), _suspects(r, raw),
                  path, _margins(r, raw))


def _margins(r: _Reader, raw: Mapping) -> Mapping[str, Mapping[str, float | str]]:
    """The ``[margin."<unit>"]`` tables: positive finite bounds (a floor or a relative floor; a cap or a relative
    cap at least the floor) and a ``why``."""
    import math

    table = raw.get("margin", {})
    if not isinstance(table, dict):
        raise r.fail("margin", "must be a table of [margin.\"<unit>\"] tables")
    out = {}
    for unit, entry in table.items():
        field = f"margin.{unit!r}"
        if not isinstance(entry, dict):
            raise r.fail(field, "must be a table with floor or relative, cap or cap_relative, and why")
        r.unknown(entry, _MARGIN_KEYS, field)
        bounds = {}
        for key in ("floor", "relative", "cap", "cap_relative"):
            if key in entry:
                value = entry[key]
                if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
                        or value <= 0:
                    raise r.fail(f"{field} field {key!r}", f"must be a positive finite number, got {value!r}")
                bounds[key] = float(value)
        if not {"floor", "relative"} & set(bounds) or not {"cap", "cap_relative"} & set(bounds):
            raise r.fail(field, "needs a floor (floor or relative) and a cap (cap or cap_relative)")
        if bounds.get("cap", math.inf) < bounds.get("floor", 0.0) \
                or bounds.get("cap_relative", math.inf) < bounds.get("relative", 0.0):
            raise r.fail(field, "its cap is below its floor")
        out[unit] = MappingProxyType({**bounds, "why": r.text(entry, "why", f"{field} field 'why'")})
    return MappingProxyType(out)


def declared_margin_of(paper: str, artifact: str, unit: str) -> tuple[Mapping[str, float | str], str] | None:
    """The margin a ledger declares for ``unit`` in ``paper``'s ``artifact`` (its fields, and the ledger's file
    name), or None when no ledger of that artifact declares one."""
    for ledger in {id(x): x for x in _default_ledgers().values()}.values():  # a file covering folders once
        if ledger.paper == paper and artifact in ledger.artifacts and unit in ledger.margins:
            return ledger.margins[unit], ledger.path.name
    return None


def _folders(r: _Reader, raw: Mapping) -> tuple[str, ...]:
    if ("folder" in raw) == ("folders" in raw):
        raise r.fail("folder", "give exactly one of 'folder' (a string) or 'folders' (a list)")
    if "folder" in raw:
        folders = (r.text(raw, "folder", "folder"),)
    else:
        folders = r.texts(raw, "folders", "folders")
    for i, f in enumerate(folders):
        if ":" in f or "/" in f:
            raise r.fail("folder" if "folder" in raw else f"folders[{i}]",
                         f"must be a subfolder name of figures/measured, got {f!r}")
    return folders


def _check_cell_name(r: _Reader, cell: str, folders: tuple[str, ...], field: str) -> None:
    parts = cell.split(":")
    if len(parts) != 3 or not all(parts) or not parts[2].isdigit():
        raise r.fail(field, f"a cell name is 'folder:dataset:clients', got {cell!r}")
    if parts[0] not in folders:
        raise r.fail(field, f"cell {cell!r} is not in this ledger's folder(s) {', '.join(folders)}")


def _settings(r: _Reader, raw: Mapping, kind: str, folders: tuple[str, ...],
              cells: tuple[str, ...]) -> tuple[Setting, ...]:
    entries = raw.get("setting")
    if not isinstance(entries, list) or not entries:
        raise r.fail("setting", "missing: give one [[setting]] table per setting")
    out, seen = [], set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise r.fail(f"setting[{i}]", "must be a table ([[setting]])")
        name = r.text(entry, "name", f"setting[{i}] field 'name'")
        field = f"setting {name!r}"
        if name in seen:
            raise r.fail(field, "declared twice")
        seen.add(name)
        r.unknown(entry, _SETTING_KEYS, field)
        klass = r.choice(entry, "class", f"{field} field 'class'", CLASSES)
        paper = r.text(entry, "paper", f"{field} field 'paper'", required=False, empty=True)
        if klass != "paper silent" and not paper.strip():
            raise r.fail(f"{field} field 'paper'", f"the paper's own words are required for class {klass!r} "
                         "(empty only for 'paper silent')")
        source = r.text(entry, "paper_text", f"{field} field 'paper_text'", required=False)
        if source and source not in PAPERS:
            raise r.fail(f"{field} field 'paper_text'", f"must be one of {', '.join(PAPERS)}, got {source!r}")
        where = r.text(entry, "where", f"{field} field 'where'")
        why = r.text(entry, "why", f"{field} field 'why'", required=False, empty=True)
        if klass != "same" and not why.strip():
            raise r.fail(f"{field} field 'why'", f"required for class {klass!r}")
        if klass == "code" and not _CODE_LINE.search(where):
            raise r.fail(f"{field} field 'where'", "must cite the public code's file and line for class 'code' "
                         "(e.g. 'src/trainers.py:354-362')")
        toolkit = _toolkit(r, entry, f"{field} field 'toolkit'", folders, cells)
        methods = r.texts(entry, "methods", f"{field} field 'methods'", required=False) if "methods" in entry else ()
        out.append(Setting(name, paper, source or str(raw.get("paper")), where, toolkit, klass, why, methods))
    missing = [n for n in REQUIRED[kind] if n not in seen]
    if missing:
        raise r.fail("setting", f"missing required setting(s) {', '.join(repr(n) for n in missing)} for kind "
                     f"{kind!r}")
    return tuple(out)


def _toolkit(r: _Reader, entry: Mapping, field: str, folders: tuple[str, ...],
             cells: tuple[str, ...]) -> str | Mapping[str, str]:
    value = entry.get("toolkit")
    if isinstance(value, str):
        return r.text(entry, "toolkit", field)
    if not isinstance(value, dict) or not value:
        raise r.fail(field, f"must be a string or a table of cell name -> string, got {value!r}")
    for key, text in value.items():  # a key is a cell name, or a folder of a file covering several
        if key not in folders:
            _check_cell_name(r, key, folders, f"{field} key {key!r}")
            if cells and key not in cells:
                raise r.fail(f"{field} key {key!r}", f"not one of the ledger's cells {', '.join(cells)}")
        if not isinstance(text, str) or not text.strip():
            raise r.fail(f"{field} key {key!r}", f"must be a non-empty string, got {text!r}")
    unanswered = [c for c in cells if c not in value and folder_of(c) not in value]
    if unanswered:
        raise r.fail(field, f"gives no value for cell(s) {', '.join(unanswered)}")
    return MappingProxyType(dict(value))


def _stale(r: _Reader, raw: Mapping) -> Stale | None:
    if "stale" not in raw:
        return None
    table = raw["stale"]
    if not isinstance(table, dict):
        raise r.fail("stale", "must be a table ([stale])")
    r.unknown(table, _STALE_KEYS, "stale")
    keys = r.texts(table, "changed_keys", "stale field 'changed_keys'")
    bad = [k for k in keys if not _POINT_KEY.fullmatch(k)]
    if bad:
        raise r.fail("stale field 'changed_keys'", f"must name keys of a run's point (lower-case words joined by _, "
                     f"as nets run's parameters), got {bad[0][:40]!r}")
    return Stale(r.text(table, "reason", "stale field 'reason'"), keys, r.text(table, "rerun", "stale field 'rerun'"))


_POINT_KEY = re.compile(r"[a-z][a-z0-9_]{0,39}")


def _suspects(r: _Reader, raw: Mapping) -> tuple[Suspect, ...]:
    entries = raw.get("suspect", [])
    if not isinstance(entries, list):
        raise r.fail("suspect", "must be an array of tables ([[suspect]])")
    out = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise r.fail(f"suspect[{i}]", "must be a table ([[suspect]])")
        r.unknown(entry, _SUSPECT_KEYS, f"suspect[{i}]")
        out.append(Suspect(r.text(entry, "source", f"suspect[{i}] field 'source'"),
                           r.text(entry, "reason", f"suspect[{i}] field 'reason'")))
    return tuple(out)


def load_ledgers(folder: str | Path = HERE) -> dict[str, Ledger]:
    """Every ``*.toml`` ledger of ``folder``, by store folder name (a file with ``folders`` is listed under each;
    ValueError when two files claim one folder)."""
    out: dict[str, Ledger] = {}
    for path in sorted(Path(folder).glob("*.toml")):
        ledger = load_ledger(path)
        for name in ledger.folders:
            if name in out:
                raise ValueError(f"{path}: folder: {name!r} is already covered by {out[name].path}")
            out[name] = ledger
    return out


@functools.cache
def _default_ledgers() -> dict[str, Ledger]:
    return load_ledgers(HERE)


def ledger_for(folder_or_cell: str) -> Ledger | None:
    """The ledger of a store folder, or of a cell ``folder:dataset:clients`` (None when no ledger covers it)."""
    ledger = _default_ledgers().get(folder_of(folder_or_cell))
    if ledger is None or (":" in str(folder_or_cell) and not ledger.covers(str(folder_or_cell))):
        return None
    return ledger


# -- quotes against the paper text ----------------------------------------------------------------------------

def normalise(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included) collapsed to one space, stripped."""
    return " ".join(str(text).split())


def quote_found(quote: str, text: str) -> bool:
    """Whether ``quote`` occurs in ``text`` once whitespace is normalised (an empty quote is never found)."""
    q = normalise(quote)
    return bool(q) and q in normalise(text)


def paper_texts(papers_dir: str | Path) -> dict[str, str]:
    """The plain text of each paper in ``papers_dir`` by name: ``"SR-FCA"`` (``000_*.txt``), ``"IFCA"`` (``001_*``
    and ``003_*``, the journal and conference versions, joined) and ``"CLoVE"`` (``004_*``); a paper with no file
    there is left out."""
    root = Path(papers_dir)
    out = {}
    for paper, prefixes in PAPER_FILES.items():
        parts = [p.read_text(encoding="utf-8") for prefix in prefixes for p in sorted(root.glob(f"{prefix}_*.txt"))]
        if parts:
            out[paper] = "\n".join(parts)
    return out

