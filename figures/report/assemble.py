"""``report.md`` and ``report.html`` of a ``paper_repro.py`` output, from the verified status of every target.

Every target's status is read through :func:`figures.report.status.read_status`: a status that cannot be read or does
not match its rows and section is listed as unreadable (naming the file) and counted nowhere, and the others are
reported. The report opens with the headline (:mod:`figures.report.headline`); at the quick and tiny sizes, which run no
real data, the headline says where the real-data verdicts are and shows the stored paper-scale rows.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path

from synth.store import write_text_atomic

from ..verdicts.rules import head
from .headline import data_kind, headline_markdown, paper_sentences, system_rows, tally
from .status import Status, read_status, section_path

__all__ = ["MEDIUM_RECORD", "Report", "assemble", "headline", "read_all", "sentences", "stored_rows",
           "where_real_data"]

# the headline of the last medium run kept with the repository (its command and time: docs/reproducing.md)
MEDIUM_RECORD = "figures/measured/medium_run/report_head.md"


@dataclass
class Report:
    """What :func:`assemble` wrote: the Markdown and HTML reports and the targets whose status was unreadable."""

    markdown: Path
    html: Path
    unreadable: list[Status]


def read_all(out: Path, targets: dict, size: str) -> dict[str, Status]:
    """The verified status of every registered target at ``size``."""
    return {name: read_status(out, name, size) for name in targets}


def _entries(statuses: dict[str, Status], targets: dict, size: str):
    entries, pending = [], []
    for name, st in statuses.items():
        t = targets[name]
        if st.state == "done":
            entries.append((name, t.paper, data_kind(t.kind, st.data.get("run_size", size)), st.rows))
        elif st.state not in ("unreadable", "not run"):  # never run in this folder (e.g. outside --only): the
            pending.append((name, t.paper, f"{st.state}: {st.reason}"))  # target table lists it, the headline not
    return entries, pending


def stored_rows(out: Path, statuses: dict[str, Status]) -> list[dict]:
    """The rows of the stored paper-scale runs (the ``measured-runs`` target's ``comparison.csv``), when that target
    is done at this size."""
    st = statuses.get("measured-runs")
    path = Path(out) / "measured-runs" / "comparison.csv"
    if st is None or st.state != "done" or not path.is_file():
        return []
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def where_real_data(size: str, stored: list[dict]) -> str:
    """The paragraph that opens a quick or tiny headline: this run has no real data; where its verdicts are."""
    if size in ("medium", "full"):
        return ""
    return (f"**Where the real-data verdicts are.** A {size} run uses no real data: the neural-network targets run "
            "on scikit-learn's 8x8 digits in place of MNIST (their numbers are never held to the paper's ±), and the "
            "targets on data with no embedded copy are pending. The papers' own data are compared by `python "
            "paper_repro.py --size medium` (MNIST, FEMNIST, AG News, Amazon from the data directory; its time: "
            "docs/reproducing.md; the headline of the last "
            f"such run is kept in `{MEDIUM_RECORD}`), by `--full`, and by the "
            f"stored paper-scale runs of `figures/measured/`, whose {len(stored)} rows follow (counted in the "
            "*stored paper-scale runs* lines of the first table).")


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# the stored rows' order: what differs first, then what the seeds cannot settle, agreement, then rows without a test
_FIRST = ("differs", "not resolved", "agrees", "shown", "stale", "paper value suspect")


def _stored_table(stored: list[dict]) -> str:
    if not stored:
        return ""

    def rank(r: dict) -> int:
        h = head(r["verdict"])
        return _FIRST.index(h) if h in _FIRST else len(_FIRST)

    lines = ["### Stored paper-scale rows", "", "Differences first; *protocol*: *same* = the paper's setting in every "
             "setting it states, *deviates* = declared deviations (the cell's ledger, "
             "`figures/published/protocols/`).", "",
             "| item | paper | reproduced | verdict | protocol |", "|---|---|---|---|---|"]
    lines += [f"| {_cell(r['item'])} | {_cell(r['paper'])} | {_cell(r['reproduced'])} | {_cell(r['verdict'])}"
              f"{'' if r.get('counted', 'True') == 'True' else ' (second protocol, not counted)'} | "
              f"{_cell(r.get('protocol') or '—')} |" for r in sorted(stored, key=rank)]
    return "\n".join(lines) + "\n"


def sentences(out: Path, targets: dict, size: str, statuses: dict[str, Status] | None = None) -> dict:
    """Per paper, what holds, differs, is untested (:func:`figures.report.headline.paper_sentences`) from the
    verified status files of this size."""
    statuses = statuses if statuses is not None else read_all(out, targets, size)
    return paper_sentences(*_entries(statuses, targets, size), size, _gaps(stored_rows(out, statuses)))


def _gaps(stored: list[dict]) -> dict[str, float]:
    """Item -> reproduced minus published, of the stored paper-scale rows that state it."""
    out = {}
    for r in stored:
        try:
            out[r["item"]] = float(str(r.get("difference", "")).replace("−", "-"))
        except ValueError:
            continue
    return out


def headline(out: Path, targets: dict, size: str, statuses: dict[str, Status] | None = None,
             with_sentences: bool = True) -> str:
    """The headline (Markdown) from the verified status files of this size (targets run earlier included): the
    sentences per paper (unless ``with_sentences`` is False), then the count tables."""
    statuses = statuses if statuses is not None else read_all(out, targets, size)
    entries, pending = _entries(statuses, targets, size)
    stored = stored_rows(out, statuses)
    unreadable = [(n, st.reason) for n, st in statuses.items() if st.state == "unreadable"]
    text = headline_markdown(tally(entries), pending, size, system_rows(entries), where_real_data(size, stored),
                             unreadable, paper_sentences(entries, pending, size, _gaps(stored)) if with_sentences
                             else None)
    if size not in ("medium", "full"):
        text += "\n" + _stored_table(stored)
    return text


def _seconds(st: Status) -> str:
    s = st.data.get("seconds")
    return f"{s:.0f}" if isinstance(s, (int, float)) else ""


def assemble(ctx, targets: dict, seconds: float, n_jobs: int, intro_extra: str = "") -> Report:
    """Write ``report.md`` and ``report.html`` into ``ctx.out`` from every target's verified status and section."""
    from .html_report import write_html

    statuses = read_all(ctx.out, targets, ctx.size)
    head = [f"# cflab reproduction report ({ctx.size})", "",
            f"Written by `python paper_repro.py --size {ctx.size}` (last invocation: {seconds:.0f} s with n_jobs = "
            f"{n_jobs}, {time.strftime('%Y-%m-%d %H:%M')}). Each section compares the paper's number with the "
            "toolkit's; the verdict vocabulary is defined in `figures/verdicts/compare.py` and "
            "`figures/verdicts/rules.py`. "
            "Published numbers: `figures/published/*.csv` (with their source lines)." + intro_extra, "",
            headline(ctx.out, targets, ctx.size, statuses), "", "## Targets", "",
            "| target | paper | status | verdicts | seconds |", "|---|---|---|---|---|"]
    body = []
    for name, st in statuses.items():
        t = targets[name]
        if st.state == "not run":
            head.append(f"| `{name}` | {t.paper} | not run | | |")
            continue
        if st.state == "unreadable":
            head.append(f"| `{name}` | {t.paper} | unreadable: {_cell(st.reason)} | | |")
            continue
        verdicts = ", ".join(f"{k}: {v}" for k, v in sorted(st.data.get("verdicts", {}).items()))
        label = st.state if st.state == "done" else f"{st.state}: {_cell(st.reason)}"
        head.append(f"| [`{name}`](#{name}) | {t.paper} | {label} | {verdicts} | {_seconds(st)} |")
        sec = section_path(ctx.out, name, ctx.size)
        if st.state == "done":
            body += [f"<a id=\"{name}\"></a>", f"## {st.data.get('title', name)} (`{name}`)", "",
                     sec.read_text(encoding="utf-8"), ""]
        else:
            body += [f"<a id=\"{name}\"></a>", f"## {t.description} (`{name}`)", "", f"**{st.state}**: {st.reason}",
                     ""]
    report = ctx.out / "report.md"
    write_text_atomic(report, "\n".join(head + [""] + body) + "\n")
    html = write_html(ctx.out, ctx.size, targets, statuses, "\n".join(head[:3]),
                      headline(ctx.out, targets, ctx.size, statuses, with_sentences=False),
                      sentences(ctx.out, targets, ctx.size, statuses))
    return Report(report, html, [st for st in statuses.values() if st.state == "unreadable"])
