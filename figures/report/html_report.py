"""``report.html``: the whole reproduction on one page, beside the figures it links (``report.html`` opens at once;
its PNGs load lazily from the target folders next to it, each a link to its full-size file).

A page, not a dump (issue #54): it opens with the headline, per paper what holds, what differs and what is untested
(:func:`figures.report.headline.paper_sentences`), one table per paper; everything else is collapsed (``<details>``):
the count tables, the protocol ledgers (each cell's settings stated once, ``figures/published/protocols/``) and one
section per target, each with its figures at their natural width (never upscaled) above its paper-vs-toolkit table;
the targets on real data and the stored paper-scale runs first, then the stand-in runs, then synthetic and theory
targets, then the targets that did not run.  A long cell text repeated in a table's column is stated once, under the
table; a list of stored runs states each shared protocol once; past :data:`MAX_ROWS` rows, the rows without a test
are counted (their file is linked).  No box scrolls on its own.  Only a small subset of Markdown is rendered (headings,
paragraphs, lists, tables, images, code, bold, italics, links): the subset :mod:`figures.verdicts.compare` and
:mod:`figures.report.headline` write.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from synth.store import write_text_atomic

from .headline import classify, data_kind
from .status import Status, section_path

__all__ = ["MAX_ROWS", "inline", "markdown_html", "png_size", "safe_href", "write_html"]

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1400px;
color:#1b1b1b;line-height:1.4;padding:0 16px}
h1{font-size:1.5em;margin:0 0 4px}
h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:3px;margin:1.2em 0 .4em}
h3{font-size:1.05em;margin:.8em 0 .2em}table{border-collapse:collapse;font-size:12.5px;margin:6px 0}
th,td{border:1px solid #d0d0d0;padding:3px 6px;vertical-align:top;text-align:left}th{background:#f1f1f1}
code{background:#f4f4f4;padding:0 3px;border-radius:3px;font-size:92%}
table.paper{width:100%;font-size:13.5px}table.paper th{width:9em}
details{margin:3px 0;border:1px solid #e4e4e4;border-radius:4px;padding:2px 8px}
details>summary{cursor:pointer;font-size:14px;padding:2px 0}details[open]>summary{border-bottom:1px solid #eee}
ul.caption{font-size:12.5px;color:#444;margin-top:2px}
.figs img{max-width:100%;height:auto;border:1px solid #e0e0e0;cursor:zoom-in}
.figcap{font-size:12px;color:#555;margin:2px 0 12px}
.kind{font-size:12px;color:#666;font-weight:normal}.note{font-size:13px;color:#333}
.v-good{background:#e3f4e3}.v-bad{background:#fbe0de}.v-open{background:#f3f3f3}.v-none{color:#777}
ol.notes{font-size:12px;color:#444;margin:2px 0 8px}
"""

_CLASS = {"not run": "v-none", "shown": "v-none", "finding": "v-open", "other": "v-none"}


def inline(text: str) -> str:
    """Markdown inline markup (code, bold, italics, links) of escaped ``text``.  Code spans are set aside first, so
    that bold or a link may enclose one (``**`file.json`**: ...``)."""
    codes: list[str] = []

    def hold(m: re.Match) -> str:
        codes.append(f"<code>{html.escape(m.group(1))}</code>")
        return f"\x00{len(codes) - 1}\x00"

    p = html.escape(re.sub(r"`([^`]*)`", hold, text.replace("\x00", "")), quote=False)
    p = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", p)
    p = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<i>\1</i>", p)
    p = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", _link, p)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], p)


def _link(m: re.Match) -> str:
    """A Markdown link ``[text](target)`` (both escaped) as an anchor when its target is safe, else as the text it
    is: stored fields (a store's name, a run's notes) reach the page, and a ``javascript:`` target would run."""
    href = safe_href(html.unescape(m.group(2)))
    return m.group(0) if href is None else f'<a href="{html.escape(href)}">{m.group(1)}</a>'


def safe_href(target: str) -> str | None:
    """``target`` if it is an http(s) URL or a relative one (a path, ``#anchor`` or ``?query``), else None.

    A scheme is whatever precedes the first ``:`` that comes before any ``/``, ``?`` or ``#``, read as a browser
    reads it: case-insensitive, with control characters and whitespace dropped (``java\tscript:``).
    """
    squeezed = re.sub(r"[\x00-\x20\x7f-\x9f]", "", target)
    m = re.match(r"([^/?#]*):", squeezed)
    if m and m.group(1).lower() not in ("http", "https"):
        return None
    return target


def _cells(line: str) -> list[str]:
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def _verdict_class(verdict: str) -> str:
    from ..verdicts.rules import head, wide

    c = classify({"verdict": verdict, "compared": ""})
    if wide(verdict):
        return "v-open"  # an agreement only within the paper's own spread ranks nothing: not shaded as agreement
    if c in ("claim", "theory"):
        return {"agrees": "v-good", "holds": "v-good", "differs": "v-bad", "violated": "v-bad"}.get(head(verdict),
                                                                                                  "v-open")
    return _CLASS.get(c, "")


MAX_ROWS = 25  # rows shown of a long table besides its tested rows (the rest: in its comparison.csv and report.md)
_LONG = 40  # a cell this long or longer, repeated in its column, is stated once under the table
_UNTESTED = ("shown", "not comparable", "not run", "n/a", "no published value", "finding")


def _table(lines: list[str], rest_href: str | None = None) -> str:
    """A Markdown table as HTML.  A long cell text repeated in its column (a protocol paragraph, a verdict's
    reason) is stated once, as a numbered note under the table, the rows carrying the note's number (a verdict
    cell keeps its first word).  Past :data:`MAX_ROWS`, rows without a test (shown, not run, not comparable) are
    counted, not shown, and ``rest_href`` links to the file with every row."""
    from ..verdicts.rules import head

    header = _cells(lines[0])
    rows = [_cells(x) for x in lines[2:]]
    vcol = header.index("verdict") if "verdict" in header else None
    hidden: dict[str, int] = {}
    if vcol is not None and len(rows) > MAX_ROWS:
        keep, others = [], 0
        for r in rows:
            h = head(r[vcol]) if vcol < len(r) else ""
            if h.split(" (")[0] not in _UNTESTED or others < MAX_ROWS:
                keep.append(r)
                others += h.split(" (")[0] in _UNTESTED
            else:
                hidden[h.split(" (")[0]] = hidden.get(h.split(" (")[0], 0) + 1
        rows = keep
    seen: dict[tuple[int, str], int] = {}
    numbers = {j for j, h in enumerate(header) if h in ("reproduced", "difference")}  # equal by chance, not repeated
    for r in rows:
        for j, c in enumerate(r):
            if len(c) >= _LONG and j not in numbers:
                seen[(j, c)] = seen.get((j, c), 0) + 1
    notes: dict[tuple[int, str], int] = {}
    out = ["<table><thead><tr>" + "".join(f"<th>{inline(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for r in rows:
        cls = f' class="{_verdict_class(r[vcol])}"' if vcol is not None and vcol < len(r) else ""
        cells = []
        for j, c in enumerate(r):
            if seen.get((j, c), 0) > 1:
                n = notes.setdefault((j, c), len(notes) + 1)
                word = html.escape(head(c)) + " " if j == vcol else ""
                cells.append(f"<td>{word}<sup>[{n}]</sup></td>")
            else:
                cells.append(f"<td>{inline(c)}</td>")
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    if notes:
        out.append('<ol class="notes">' + "".join(f"<li>{inline(c)}</li>" for (_, c) in notes) + "</ol>")
    if hidden:
        where = f' (every row: <a href="{html.escape(rest_href)}">{html.escape(rest_href)}</a> and report.md)' \
            if rest_href else " (every row: report.md)"
        out.append(f"<p class='note'>{sum(hidden.values())} more rows without a test not shown here: "
                   + ", ".join(f"{n} {html.escape(w)}" for w, n in sorted(hidden.items(), key=lambda kv: -kv[1]))
                   + where + ".</p>")
    return "\n".join(out)


def _segments(text: str) -> list[str]:
    """``text`` split at its top-level ``"; "`` (not inside parentheses or code)."""
    out, depth, code, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "`":
            code = not code
        elif not code and ch in "([":
            depth += 1
        elif not code and ch in ")]":
            depth = max(0, depth - 1)
        elif not code and depth == 0 and text.startswith("; ", i):
            out.append(text[start:i])
            start = i + 2
    out.append(text[start:])
    return [x for x in (x.strip() for x in out) if x]


def _grouped(items: list[str]) -> list[str]:
    """List items ``**label**: text`` with each text stated once.

    Items that share their whole text become one item (``**label 1**; **label 2**: text``).  Items of one stored
    cell (``cell `name` `` in their text) state the cell's shared parts (its protocol summary, command, seeds) once,
    in an item of their own, and each row keeps only what is its own."""
    parsed: list[tuple[str, str] | str] = []
    for x in items:
        m = re.match(r"(\*\*.+?\*\*): (.+)$", x)
        parsed.append((m.group(1), m.group(2)) if m else x)
    cells: dict[str, list[int]] = {}
    for i, x in enumerate(parsed):
        m = re.search(r"cell `([^`]+)`", x[1]) if isinstance(x, tuple) else None
        if m:
            cells.setdefault(m.group(1), []).append(i)
    shared_of: dict[int, str] = {}
    head_of: dict[int, str] = {}
    for cell, idx in cells.items():
        if len(idx) < 2:
            continue
        segs = [_segments(parsed[i][1]) for i in idx]
        common = [g for g in segs[0] if all(g in other for other in segs[1:])]
        # a ledger may scope a deviation to some methods: the cell's protocol summaries, each said once with the
        # methods it concerns, instead of once per row
        protocols: dict[tuple[str, ...], list[str]] = {}
        for i, sg in zip(idx, segs, strict=True):
            proto = tuple(g for g in sg if g not in common and _is_protocol(g))
            if proto:
                protocols.setdefault(proto, []).append(_method(parsed[i][0]))
        if not common and not protocols:
            continue
        parts = common + [f"protocol of {', '.join(dict.fromkeys(ms))}: "
                          + "; ".join((proto[0].removeprefix("protocol: "), *proto[1:]))
                          for proto, ms in protocols.items()]
        head_of[idx[0]] = f"**{len(idx)} rows of cell `{cell}`**: " + "; ".join(parts)
        for i, sg in zip(idx, segs, strict=True):
            rest = [g for g in sg if g not in common and not (protocols and _is_protocol(g))]
            shared_of[i] = ("; ".join(rest) if rest else "as the cell") + f"\x01{cell}"  # grouped within its cell
    by: dict[str, list[str]] = {}
    order: list[str] = []
    for i, x in enumerate(parsed):
        if i in head_of:
            order.append(head_of[i])
        if not isinstance(x, tuple):
            order.append(x)
            continue
        label, text = x
        text = shared_of.get(i, text)
        if text not in by:
            order.append(text)
            by[text] = []
        by[text].append(label)
    return [f"{_labels(by[x])}: {x.split(chr(1))[0]}" if x in by else x for x in order]


def _is_protocol(segment: str) -> bool:
    """Whether a note's segment is part of a cell's protocol summary (figures.verdicts.protocol.Ledger.summary)."""
    return segment.startswith(("protocol: ", "paper silent on "))


def _method(label: str) -> str:
    """The method of a row label: ``**SR-FCA Table 2: MNIST (inverted) / CFL [paper scale]**`` -> ``CFL``."""
    text = label.strip("*")
    return text.split(" / ", 1)[1].split(" [", 1)[0] if " / " in text else text


def _labels(labels: list[str]) -> str:
    """The labels of rows sharing one text: all of them up to three, else their count with what they share
    (``**12 rows of IFCA Fig. 3(a) [ifca_fig3a_full_code]**``): every row is in the table above, the note is what
    the footnote is for."""
    if len(labels) <= 3:
        return "; ".join(labels)
    plain = [x.strip("*") for x in labels]
    prefix = os.path.commonprefix(plain)
    cut = max(prefix.rfind(": "), prefix.rfind(" / "))
    prefix = prefix[:cut].rstrip() if cut > 0 else ""
    if len(prefix) < 8:
        return f"{labels[0]}; {labels[1]} and {len(labels) - 2} more rows"
    return f"**{len(labels)} rows of {prefix}**"


def markdown_html(text: str) -> str:
    """The Markdown subset of the reports as HTML (images are left out: the caller places them)."""
    out, block = [], []

    def flush():
        if not block:
            return
        if all(x.lstrip().startswith("|") for x in block) and len(block) >= 2:
            out.append(_table(block))
        elif all(x.startswith("- ") for x in block):
            # a list of definitions (a table's caption) is set smaller than the text
            cls = ' class="caption"' if all(x.startswith("- **") for x in block) else ""
            out.append(f"<ul{cls}>" + "".join(f"<li>{inline(x)}</li>" for x in _grouped([x[2:] for x in block]))
                       + "</ul>")
        else:
            out.append(f"<p>{inline(' '.join(block))}</p>")
        block.clear()

    for line in text.splitlines():
        s = line.rstrip()
        m = re.match(r"(#{1,4}) (.*)", s)
        if not s.strip() or m or s.startswith("<a id=") or s.startswith("!["):
            flush()
            if m:
                level = len(m.group(1))
                out.append(f"<h{level}>{inline(m.group(2))}</h{level}>")
            continue
        if block and (s.lstrip().startswith("|") != block[-1].lstrip().startswith("|")):
            flush()
        block.append(s)
    flush()
    return "\n".join(out)


def _section_parts(text: str) -> tuple[list[tuple[str, str]], str, str]:
    """A section's figures ``(png path, caption)``, its paper-vs-toolkit table and the rest of its text."""
    figs = re.findall(r"^!\[([^\]]*)\]\(([^)]+\.png)\)$", text, flags=re.M)
    lines = text.splitlines()
    table: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "**Paper vs toolkit**":
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith("|"):
                i += 1
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                table.append(lines[i])
                i += 1
            continue
        if not re.match(r"^\*[^*].*\(\[PDF\]\(.*\)\)$", lines[i]):  # the figure's caption line, shown under it
            rest.append(lines[i])
        i += 1
    return [(src, cap) for cap, src in figs], "\n".join(table), "\n".join(rest)


def _merge_repeated_table(table: str, rest: str) -> tuple[str, str]:
    """A table of ``rest`` whose rows all repeat rows of the section's paper-vs-toolkit ``table`` (the stored
    campaign's rows, listed again with their protocol class) is shown once: its extra columns (the protocol's short
    word) join ``table`` and it leaves ``rest``."""
    if not table:
        return table, rest
    main = table.splitlines()
    header = _cells(main[0])
    items = {_cells(x)[0]: k for k, x in enumerate(main[2:])}
    lines = rest.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].lstrip().startswith("|"):
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].lstrip().startswith("|"):
            j += 1
        block = lines[i:j]
        if len(block) > 2:
            head = _cells(block[0])
            rows = [_cells(x) for x in block[2:]]
            extra = [c for c in head if c not in header and c not in ("number", "item")]
            if all(r and r[0] in items for r in rows) and extra:
                cols = [head.index(c) for c in extra]
                add = {r[0]: [r[c] if c < len(r) else "" for c in cols] for r in rows}
                body = [_cells(x) for x in main[2:]]
                main = ["| " + " | ".join(header + extra) + " |", "|" + "---|" * (len(header) + len(extra))]
                main += ["| " + " | ".join(c.replace("|", "\\|") for c in r + add.get(r[0], ["—"] * len(extra)))
                         + " |" for r in body]
                del lines[i:j]
                return "\n".join(main), "\n".join(lines)
        i = j
    return table, rest


def _order(statuses: dict[str, Status], targets: dict, size: str) -> list[str]:
    """Targets in page order: stored paper-scale runs and real data first, then stand-ins, synthetic and theory,
    then the targets that did not run."""
    rank = {"stored paper-scale runs": 0, "real data": 1, "stand-in (8x8 digits)": 2, "synthetic / theory": 3}

    def key(name):
        st = statuses[name]
        if st.state != "done":
            return (9, 0)
        return (rank[data_kind(targets[name].kind, st.data.get("run_size", size))], 0)

    return sorted(statuses, key=key)  # stable: the report order within each group


def png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) in pixels of a PNG file (read from its header), or None when it is not one."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(24)
    except OSError:
        return None
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def _verdict_counts(st: Status) -> str:
    v = st.data.get("verdicts", {})
    return ", ".join(f"{n} {k}" for k, n in sorted(v.items(), key=lambda kv: -kv[1])) if isinstance(v, dict) else ""


def _target_html(out: Path, name: str, st: Status, targets: dict, size: str) -> str:
    """One target, collapsed: its title and verdict counts; open, its figures at their natural width (never
    wider), its paper-vs-toolkit table and its notes."""
    t = targets[name]
    kind = data_kind(t.kind, st.data.get("run_size", size))
    head = f'<summary><b>{inline(st.data.get("title", name))}</b> <code>{html.escape(name)}</code> ' \
           f'<span class="kind">{html.escape(kind)}; {html.escape(_verdict_counts(st))}</span></summary>'
    text = section_path(out, name, size).read_text(encoding="utf-8")
    figs, table, rest = _section_parts(text)
    table, rest = _merge_repeated_table(table, rest)
    imgs = []
    for src, cap in figs:
        href = safe_href(src)
        if (out / src).is_file() and href is not None:  # linked, not embedded: a click opens it full size
            wh = png_size(out / src)
            dims = f' width="{wh[0]}" height="{wh[1]}"' if wh else ""
            imgs.append(f'<a href="{html.escape(href)}" target="_blank"><img src="{html.escape(href)}"{dims} '
                        f'loading="lazy" alt="{html.escape(cap)}"></a><div class="figcap">{inline(cap)}</div>')
    csv_href = f"{name}/comparison.csv" if (out / name / "comparison.csv").is_file() else None
    verdicts = f'<div class="verdicts">{_table(table.splitlines(), csv_href)}</div>' if table else \
        "<p class='note'>No paper-vs-toolkit rows.</p>"
    body = f'<div class="target"><div class="figs">{"".join(imgs)}</div>{verdicts}</div>' if imgs else verdicts
    return (f'<details id="{html.escape(name)}">{head}\n{body}\n<div class="note">{markdown_html(rest)}</div>'
            "</details>")


def _paper_tables(sentences: dict[str, dict[str, str]]) -> str:
    """Per paper, one table: what holds, what differs, what is untested (the headline's sentences)."""
    rows = (("holds", "What holds", "Holds: "), ("differs", "What differs", "Differs: "),
            ("untested", "What is untested", "Untested: "))
    out = []
    for paper, s in sentences.items():
        out.append(f"<h3>{html.escape(paper)}</h3><table class='paper'>" + "".join(
            f"<tr class='{ {'holds': 'v-good', 'differs': 'v-bad'}.get(key, 'v-open') }'><th>{label}</th>"
            f"<td>{inline(s[key][len(prefix):] if s[key].startswith(prefix) else s[key])}</td></tr>"
            for key, label, prefix in rows) + "</table>")
    return "\n".join(out)


def _ledgers_html() -> str:
    """Each stored cell's protocol, stated once: one table per ledger (``figures/published/protocols/``)."""
    try:
        from ..verdicts.protocol import load_ledgers

        ledgers = load_ledgers()
    except Exception as e:  # a broken ledger fails its own tests; the report still opens
        return f"<p class='note'>The protocol ledgers could not be read: {html.escape(str(e))}</p>"
    parts = []
    for key, led in sorted(ledgers.items()):
        dev = sum(s.klass == "deviates" for s in led.settings)
        code = sum(s.klass == "code" for s in led.settings)
        rows = "".join(_setting_row(st) for st in led.settings)
        as_code = f", {code} run as the authors' code where the text differs" if code else ""
        parts.append(f"<details><summary><b>{html.escape(key)}</b> <span class='kind'>{html.escape(led.paper)}, "
                     f"{html.escape(led.kind)}; {len(led.settings)} settings: {dev} declared "
                     f"deviation{'s' * (dev != 1)}{as_code}; {html.escape(', '.join(led.folders))}</span></summary>"
                     "<table><thead><tr><th>setting</th><th>class</th><th>paper</th><th>toolkit</th></tr></thead>"
                     f"<tbody>{rows}</tbody></table><p class='note'>Why, and where the paper says it: "
                     f"<code>{html.escape(str(led.path.name))}</code>.</p></details>")
    return "\n".join(parts)


def _setting_row(st) -> str:
    """One setting of a ledger: the paper's words and the toolkit's value where they differ (a deviation), the
    paper's words where they agree, the toolkit's source where the paper is silent."""
    if st.klass == "same":
        paper, toolkit, cls = _clip(st.paper, 100), "as the paper", ""
    elif st.klass == "paper silent":
        paper, toolkit, cls = "(silent)", _clip(st.value_for(), 120), ""
    elif st.klass == "code":  # the published numbers' protocol: not a deviation
        paper, toolkit, cls = _clip(st.paper), _clip(st.value_for()), ""
    else:
        paper, toolkit, cls = _clip(st.paper), _clip(st.value_for()), " class='v-bad'"
    return (f"<tr{cls}><td>{html.escape(st.name)}</td><td>{html.escape(st.klass)}</td><td>{inline(paper)}</td>"
            f"<td>{inline(toolkit)}</td></tr>")


def _clip(text: str, n: int = 140) -> str:
    """``text`` cut to ``n`` characters; a cut text loses its links and unpaired bold or code marks."""
    text = " ".join(text.split())
    if len(text) <= n:
        return text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)[:n - 3].rstrip() + "..."
    text = text.replace("](", " (")
    for mark in ("**", "`"):
        if text.count(mark) % 2:
            text = text.replace(mark, "")
    return text


def write_html(out: Path, size: str, targets: dict, statuses: dict[str, Status], intro_md: str,
               headline_md: str, sentences: dict[str, dict[str, str]] | None = None) -> Path:
    """Write ``out/report.html``; returns its path.

    The first screen: the title, the headline's sentences and one table per paper (what holds, differs, is
    untested); then, collapsed, the count tables (``headline_md``), the protocol ledgers and one section per
    target."""
    out = Path(out)
    body = re.sub(r"^## Headline \([^)]*\)\n", "", headline_md.lstrip(), count=1)
    if "### Stored paper-scale rows" in body:  # the page shows them once: in the measured-runs section
        body = body[:body.index("### Stored paper-scale rows")] + \
            "The stored paper-scale rows are in the section [Stored paper-scale runs](#measured-runs) below.\n"
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>cflab reproduction report "
             f"({html.escape(size)})</title><style>{_STYLE}</style></head><body>", markdown_html(intro_md),
             f"<h2>Headline ({html.escape(size)})</h2>"]
    if sentences:
        parts.append(_paper_tables(sentences))
    parts += ["<h2>Details</h2>",
              f"<details id='counts'><summary><b>Counts</b> per paper and kind of data; where the real-data "
              f"verdicts are; stored paper-scale rows</summary>{markdown_html(body)}</details>",
              f"<details id='protocols'><summary><b>Protocols</b>: each stored cell's settings against its paper "
              f"(stated once; rows say same / deviates)</summary>{_ledgers_html()}</details>",
              "<h2>Targets</h2>"]
    order = _order(statuses, targets, size)
    for name in order:
        st = statuses[name]
        if st.state == "done":
            parts.append(_target_html(out, name, st, targets, size))
        else:
            parts.append(f'<details id="{html.escape(name)}"><summary>{inline(targets[name].description)} '
                         f'<code>{html.escape(name)}</code> <span class="kind">{html.escape(st.state)}</span>'
                         f"</summary><p>{inline(st.reason)}</p></details>")
    parts.append("</body></html>")
    path = out / "report.html"
    write_text_atomic(path, "\n".join(parts) + "\n")
    return path
