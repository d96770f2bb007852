"""The protocol ledgers (figures/published/protocols/*.toml) and their loader, figures/verdicts/protocol.py.

Every ledger loads with every required setting; every quote is in its paper's text (whitespace-normalised; skipped
without ../shared/papers); every stored paper-scale folder of figures/measured has a ledger; a malformed ledger is
a ValueError naming the file and the field; and the quote check can fail (a quote changed by one word is not found).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from figures.verdicts.protocol import (
    CLASSES,
    HERE,
    PM_KINDS,
    SETTINGS_NETS,
    SETTINGS_SYNTHETIC,
    folder_of,
    ledger_for,
    load_ledger,
    load_ledgers,
    normalise,
    paper_texts,
    quote_found,
)
from figures.verdicts.published import tables

ROOT = Path(__file__).parents[1]
MEASURED = ROOT / "figures" / "measured"
PAPERS = Path(os.environ.get("CFLAB_PAPERS", Path(__file__).parents[1].parent / "shared" / "papers"))
FILES = sorted(HERE.glob("*.toml"))


def _needs_papers() -> dict[str, str]:
    if not PAPERS.is_dir():
        pytest.skip(f"paper texts not available at {PAPERS}")
    return paper_texts(PAPERS)


# -- the ledgers in the repository -------------------------------------------------------------------------------

def test_there_are_ledgers():
    assert len(FILES) >= 5, f"expected the SR-FCA and CLoVE ledgers in {HERE}, found {[p.name for p in FILES]}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_ledger_loads_with_every_required_setting(path):
    ledger = load_ledger(path)
    names = {s.name for s in ledger.settings}
    required = SETTINGS_NETS if ledger.kind == "nets" else SETTINGS_SYNTHETIC
    assert not [n for n in required if n not in names], f"{path.name}: missing settings"
    assert ledger.pm in PM_KINDS and all(s.klass in CLASSES for s in ledger.settings)
    for s in ledger.settings:  # the toolkit's value is readable for every cell the ledger names
        for cell in ledger.cells:
            assert s.value_for(cell).strip(), f"{path.name}: setting {s.name!r} has no value for {cell}"
    assert ledger.summary().startswith("near the paper" if ledger.deviations() else "at the paper's setting")


def test_every_ledger_folder_is_registered_once():
    ledgers = load_ledgers()
    for path in FILES:
        for folder in load_ledger(path).folders:
            assert ledgers[folder].path == path
            assert ledger_for(folder).path == path


def test_every_quote_is_in_its_paper_text():
    texts = _needs_papers()
    missing = []
    for path in FILES:
        ledger = load_ledger(path)
        for s in ledger.settings:
            if not s.paper:
                continue
            assert s.paper_text in texts, f"{path.name}: no text of paper {s.paper_text!r} in {PAPERS}"
            if not quote_found(s.paper, texts[s.paper_text]):
                missing.append(f"{path.name} / {s.name}: {s.paper[:80]!r}")
    assert not missing, "quotes not found in the paper text:\n" + "\n".join(missing)


def test_suspects_name_published_numbers_of_their_paper():
    sources = {p.source(): p for p in tables()}
    for path in FILES:
        ledger = load_ledger(path)
        for s in ledger.suspects:
            assert s.source in sources, f"{path.name}: suspect {s.source!r} is no published number's source"
            assert sources[s.source].paper == ledger.paper


def test_a_setting_scoped_to_methods_names_rows_of_its_tables():
    for path in FILES:
        ledger = load_ledger(path)
        rows = {p.row for p in tables() if p.paper == ledger.paper and p.artifact in ledger.artifacts}
        for s in ledger.settings:
            assert set(s.methods) <= rows, f"{path.name}: setting {s.name!r} names {set(s.methods) - rows}"


def test_a_deviation_scoped_to_one_method_leaves_the_others_at_the_papers_setting():
    from figures.verdicts.protocol import ledger_for

    ledger = ledger_for("clove-label-skew-1")
    assert ledger.protocol_class(methods=["Per-FedAvg"]) == "deviates"
    assert ledger.protocol_class(methods=["CLoVE"]) == "same"
    assert ledger.protocol_class() == "deviates"  # the cell as a whole


def _paper_scale_folders() -> set[str]:
    """Subfolders of figures/measured holding campaign runs ('"campaign": 1') or a sweep store (store/meta.json)."""
    out = set()
    for folder in sorted(p for p in MEASURED.iterdir() if p.is_dir() and not p.name.startswith(".")):
        if (folder / "store" / "meta.json").is_file():
            out.add(folder.name)
            continue
        for run in folder.glob("*.json"):
            if json.loads(run.read_text(encoding="utf-8")).get("campaign") == 1:
                out.add(folder.name)
                break
    return out


def test_every_stored_paper_scale_folder_has_a_ledger():
    found = _paper_scale_folders()
    assert {"ifca-table1", "clove-amazon"} <= found  # the scan sees the stored cells
    assert not found & {"mnist_head_to_head", "medium_run"}  # not paper-scale cells
    missing = sorted(found - set(load_ledgers()))
    assert not missing, f"stored paper-scale folders without a protocol ledger in {HERE}: {', '.join(missing)}"


def test_every_stored_run_is_a_cell_its_ledger_covers():
    ledgers = load_ledgers()
    for folder, ledger in ledgers.items():
        assert (MEASURED / folder).is_dir(), f"{ledger.path.name}: no folder figures/measured/{folder}"
        if ledger.kind != "nets":
            continue
        for run in (MEASURED / folder).glob("*.json"):
            point = json.loads(run.read_text(encoding="utf-8"))["point"]
            cell = f"{folder}:{point['dataset']}:{point['clients']}"
            assert ledger.covers(cell), f"{ledger.path.name}: stored run {run.name} is cell {cell}, not covered"
            assert ledger_for(cell).path == ledger.path


# -- the quote check can fail ------------------------------------------------------------------------------------

def test_quote_found_normalises_whitespace_and_fails_on_one_changed_word():
    text = "We set m = 100,\n  n = 600.\tFor CIFAR10, we create 2 clusters"
    assert quote_found("set m = 100, n = 600. For", text)
    assert not quote_found("set m = 100, n = 700. For", text)
    assert not quote_found("set m = 100, k = 600. For", text)
    assert not quote_found("   ", text)
    assert normalise("  a \n\t b  ") == "a b"


def test_a_real_quote_changed_by_one_word_is_not_found():
    texts = _needs_papers()
    checked = 0
    for path in FILES:
        ledger = load_ledger(path)
        for s in ledger.settings:
            words = s.paper.split()
            if len(words) < 4:
                continue
            assert quote_found(s.paper, texts[s.paper_text])
            for i in (0, len(words) // 2, len(words) - 1):
                changed = " ".join(words[:i] + ["zyzzyva"] + words[i + 1:])
                assert not quote_found(changed, texts[s.paper_text]), f"{path.name} / {s.name}: word {i}"
            checked += 1
    assert checked >= 20


# -- malformed ledgers -------------------------------------------------------------------------------------------

def _setting(name: str, klass: str = "same", paper: str = "We set m = 100, n = 600.", why: str = "") -> str:
    return (f'[[setting]]\nname = "{name}"\npaper = "{paper}"\nwhere = "Sec. 5"\ntoolkit = "100"\n'
            f'class = "{klass}"\n' + (f'why = "{why}"\n' if why else ""))


def _ledger(settings: list[str] | None = None, head: str | None = None, kind: str = "nets") -> str:
    names = SETTINGS_NETS if kind == "nets" else SETTINGS_SYNTHETIC
    head = head if head is not None else (f'folder = "srfca-simulated"\npaper = "SR-FCA"\nartifacts = ["Table 1"]\n'
                                          f'kind = "{kind}"\npm = "unstated"\npaper_seeds = 5\n')
    body = settings if settings is not None else [_setting(n) for n in names]
    return head + "\n" + "\n".join(body)


def _write(tmp_path: Path, text: str, name: str = "bad-ledger.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_minimal_ledger_loads(tmp_path):
    ledger = load_ledger(_write(tmp_path, _ledger()))
    assert ledger.protocol_class() == "same" and ledger.summary() == "at the paper's setting"
    assert ledger.stale is None and ledger.suspects == ()


def test_settings_that_follow_the_public_code_keep_the_cell_at_the_papers_setting(tmp_path):
    # the published numbers came from the authors' code: running it where the text differs is their protocol
    code = _setting("participation", klass="code", why="the code samples 10 clients per round").replace(
        'where = "Sec. 5"', 'where = "Sec. 5; public code src/trainers.py:354-362"')
    settings = [*(_setting(n) for n in SETTINGS_NETS), code]
    ledger = load_ledger(_write(tmp_path, _ledger(settings)))
    assert [s.name for s in ledger.as_code()] == ["participation"] and ledger.deviations() == ()
    assert ledger.protocol_class() == "same"
    assert ledger.summary() == "at the paper's setting; as its public code where the text differs on 1 (participation)"
    # a code setting that cites no file and line is refused, naming the field
    bare = [*(_setting(n) for n in SETTINGS_NETS), _setting("participation", klass="code", why="the code differs")]
    with pytest.raises(ValueError, match="'where'.*file and line"):
        load_ledger(_write(tmp_path, _ledger(bare)))


SWAP = _setting("batch")  # the setting each case below replaces


@pytest.mark.parametrize("replacement, head, field", [
    (None, None, "'seeds'"),  # a required setting left out
    (_setting("batch", klass="differs"), None, "'class'"),
    (_setting("batch", klass="deviates"), None, "'why'"),
    (_setting("batch", klass="paper silent"), None, "'why'"),
    (_setting("batch", klass="deviates", paper="", why="the copy is smaller"), None, "'paper'"),
    (_setting("batch", klass="same", paper=""), None, "'paper'"),
    (_setting("batch") + 'klass = "same"\n', None, "klass"),
    (_setting("batch") + 'paper_text = "IFCA journal"\n', None, "'paper_text'"),
    (_setting("batch").replace('toolkit = "100"', 'toolkit = {"other:mnist:5" = "100"}'), None, "'toolkit'"),
    (_setting("batch").replace('toolkit = "100"\n', ""), None, "'toolkit'"),
    (_setting("batch").replace('where = "Sec. 5"\n', ""), None, "'where'"),
    (_setting("clients"), None, "'clients'"),  # declared twice
    (SWAP, 'folder = "srfca-simulated"\npaper = "SR-FCA"\nartifacts = ["Table 1"]\nkind = "nets"\n'
           'pm = "standard error"\npaper_seeds = 5\n', "pm"),
    (SWAP, 'folder = "srfca-simulated"\npaper = "SR-FCA"\nartifacts = ["Table 1"]\nkind = "nets"\npm = "unstated"\n',
     "paper_seeds"),
    (SWAP, 'folder = "a"\nfolders = ["b"]\npaper = "SR-FCA"\nartifacts = ["Table 1"]\nkind = "nets"\n'
           'pm = "unstated"\npaper_seeds = 5\n', "folder"),
    (SWAP, 'folder = "a"\npaper = "FedAvg"\nartifacts = ["Table 1"]\nkind = "nets"\npm = "unstated"\n'
           'paper_seeds = 5\n', "paper"),
    (SWAP, 'folder = "a"\npaper = "SR-FCA"\nartifacts = ["Table 1"]\nkind = "nets"\npm = "unstated"\n'
           'paper_seeds = 5\ncells = ["b:mnist:100"]\n', "cells"),
    (SWAP, 'folder = "a"\npaper = "SR-FCA"\nartifacts = ["Table 1"]\nkind = "nets"\npm = "unstated"\n'
           'paper_seeds = 5\n[stale]\nreason = "a fix"\nrerun = "python paper_repro.py"\n', "changed_keys"),
    (SWAP + "\n[[suspect]]\nsource = \"CLoVE Table 5\"\n", None, "reason"),
    (SWAP + "\nthis is = not toml ==\n", None, "TOML"),
])
def test_a_malformed_ledger_is_a_value_error_naming_file_and_field(tmp_path, replacement, head, field):
    settings = [_setting(n) for n in SETTINGS_NETS if n != "batch"]
    if replacement is not None:
        settings.append(replacement)
    if field == "'seeds'":
        settings = [s for s in settings if 'name = "seeds"' not in s]
    path = _write(tmp_path, _ledger(settings, head))
    with pytest.raises(ValueError) as err:
        load_ledger(path)
    message = str(err.value)
    assert path.name in message and field in message, message


def test_a_synthetic_ledger_needs_the_synthetic_settings(tmp_path):
    head = ('folders = ["ifca_fig3a_full_code", "ifca_fig3b_full_code"]\npaper = "IFCA"\nartifacts = ["Fig. 3"]\n'
            'kind = "synthetic"\npm = "unstated"\npaper_seeds = 1\n')
    assert load_ledger(_write(tmp_path, _ledger(head=head, kind="synthetic"))).kind == "synthetic"
    nets_settings = [_setting(n) for n in SETTINGS_NETS]
    with pytest.raises(ValueError, match="'generator'"):
        load_ledger(_write(tmp_path, _ledger(nets_settings, head=head), "nets-settings.toml"))


# -- the loader's answers ----------------------------------------------------------------------------------------

def test_deviations_silent_summary_and_cells(tmp_path):
    settings = [_setting(n) for n in SETTINGS_NETS if n not in ("clients", "sampling", "rounds")]
    settings += [_setting("clients", klass="deviates", why="8 clients: the copy holds 2,000 reviews per domain"),
                 _setting("sampling", klass="deviates", why="clients share reviews"),
                 _setting("rounds", klass="paper silent", paper="", why="the toolkit's choice"),
                 _setting("data source", klass="deviates", why="Blitzer 2007").replace(
                     'name = "data source"', 'name = "data copy"')]
    settings = [s.replace('toolkit = "100"', 'toolkit = {"srfca-simulated:mnist-inverted:100" = "280", '
                          '"srfca-simulated:mnist-rotated:100" = "250"}') if 'name = "rounds"' in s else s
                for s in settings]
    head = ('folder = "srfca-simulated"\npaper = "SR-FCA"\nartifacts = ["Table 1"]\nkind = "nets"\npm = "unstated"\n'
            'paper_seeds = 5\ncells = ["srfca-simulated:mnist-inverted:100", "srfca-simulated:mnist-rotated:100"]\n'
            '[stale]\nreason = "tuned on test accuracy"\nchanged_keys = ["threshold"]\n'
            'rerun = "python paper_repro.py --campaign run --cells srfca-simulated"\n')
    ledger = load_ledger(_write(tmp_path, _ledger(settings, head)))
    assert [s.name for s in ledger.deviations()] == ["clients", "sampling", "data copy"]
    assert [s.name for s in ledger.silent()] == ["rounds"]
    assert ledger.protocol_class("srfca-simulated:mnist-rotated:100") == "deviates"
    assert ledger.summary() == ("near the paper: 3 declared deviations (clients; sampling; data copy); paper silent on "
                                "1 (rounds); stored runs stale (tuned on test accuracy)")
    rounds = ledger.setting("rounds")
    assert rounds.value_for("srfca-simulated:mnist-rotated:100") == "250"
    assert "mnist-inverted:100: 280" in rounds.value_for()
    with pytest.raises(KeyError):
        rounds.value_for("srfca-simulated:cifar-rotated:32")
    with pytest.raises(ValueError, match="not one of this ledger's cells"):
        ledger.deviations("srfca-simulated:cifar-rotated:32")
    assert ledger.stale.changed_keys == ("threshold",)
    assert ledger.covers("srfca-simulated:mnist-inverted:100") and not ledger.covers("clove-amazon:amazon:8")


def test_a_file_with_folders_registers_under_each_and_a_folder_is_claimed_once(tmp_path):
    head = ('folders = ["ifca_fig3a_full_code", "ifca_fig3b_full_code"]\npaper = "IFCA"\nartifacts = ["Fig. 3"]\n'
            'kind = "synthetic"\npm = "unstated"\npaper_seeds = 1\n')
    settings = [_setting(n) for n in SETTINGS_SYNTHETIC if n != "clients"]
    settings.append(_setting("clients").replace('toolkit = "100"', 'toolkit = {"ifca_fig3a_full_code" = "m = 100", '
                                                '"ifca_fig3b_full_code" = "m = 400"}'))
    _write(tmp_path, _ledger(settings, head=head, kind="synthetic"), "ifca-fig3.toml")
    ledgers = load_ledgers(tmp_path)
    assert set(ledgers) == {"ifca_fig3a_full_code", "ifca_fig3b_full_code"}
    assert ledgers["ifca_fig3a_full_code"] is ledgers["ifca_fig3b_full_code"]
    clients = ledgers["ifca_fig3b_full_code"].setting("clients")
    assert clients.value_for("ifca_fig3b_full_code") == clients.value_for("ifca_fig3b_full_code:synthetic:400") == \
        "m = 400"
    _write(tmp_path, _ledger(head=head.replace('"ifca_fig3a_full_code", ', ""), kind="synthetic"), "zz-again.toml")
    with pytest.raises(ValueError, match="zz-again.toml.*ifca_fig3b_full_code"):
        load_ledgers(tmp_path)


def test_ledger_for_maps_a_cell_to_its_folder():
    assert folder_of("clove-amazon:amazon:8") == "clove-amazon"
    assert ledger_for("clove-amazon:amazon:8").path == ledger_for("clove-amazon").path == HERE / "clove-amazon.toml"
    assert ledger_for("clove-amazon:amazon:20") is None  # a cell the ledger does not name
    assert ledger_for("no-such-folder") is None


# -- declared equivalence margins ----------------------------------------------------------------------------------

def test_every_ledger_declares_a_margin_for_each_unit_of_its_published_numbers():
    for path in FILES:
        ledger = load_ledger(path)
        units = {t.unit for t in tables() if t.paper == ledger.paper and t.artifact in ledger.artifacts}
        assert units <= set(ledger.margins), f"{path.name}: no margin for {sorted(units - set(ledger.margins))}"
        for unit, m in ledger.margins.items():
            assert len(str(m["why"])) > 40, f"{path.name}: margin {unit!r} needs its reason"


def test_a_row_states_the_margin_its_ledger_declares():
    from figures.verdicts.rules import PaperNumber

    pub = next(t for t in tables() if t.paper == "SR-FCA" and t.artifact == "Table 2" and t.row == "CFL")
    assert "floor, srfca-simulated.toml" in PaperNumber(*pub.paper_number()).margin_text()
    other = next(t for t in tables() if t.paper == "CLoVE" and t.artifact == "Table 7")  # no ledger covers it
    assert "project default" in PaperNumber(*other.paper_number()).margin_text()


@pytest.mark.parametrize("table, field", [
    ('[margin."ARI"]\nfloor = -0.1\ncap = 0.2\nwhy = "w"\n', "'floor'"),
    ('[margin."ARI"]\nfloor = nan\ncap = 0.2\nwhy = "w"\n', "'floor'"),
    ('[margin."ARI"]\nfloor = 0.3\ncap = 0.2\nwhy = "w"\n', "cap is below its floor"),
    ('[margin."ARI"]\nfloor = 0.05\nwhy = "w"\n', "needs a floor"),
    ('[margin."ARI"]\nfloor = 0.05\ncap = 0.2\n', "'why'"),
    ('[margin."ARI"]\nfloor = 0.05\ncap = 0.2\nwhy = "w"\nmargin = 1\n', "margin"),
    ('margin = 3\n', "margin"),
])
def test_a_malformed_margin_is_a_value_error_naming_file_and_field(tmp_path, table, field):
    head = ('folder = "srfca-simulated"\npaper = "SR-FCA"\nartifacts = ["Table 1"]\nkind = "nets"\npm = "unstated"\n'
            'paper_seeds = 5\n' + table)
    path = _write(tmp_path, _ledger(head=head))
    with pytest.raises(ValueError) as err:
        load_ledger(path)
    assert path.name in str(err.value) and field in str(err.value), str(err.value)
