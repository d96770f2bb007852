"""``report.html``: the whole reproduction on one page, beside the figures it links (``report.html`` opens at once;
its PNGs load lazily from the target folders next to it, each a link to its full-size file).

The page opens with the headline; then, per target, its figures at the page's width above its paper-vs-toolkit
table, the targets on real data and the stored paper-scale runs first, then the stand-in runs, then synthetic and
theory targets, then the targets that did not run.  Only a small subset of Markdown is rendered (headings,
paragraphs, lists, tables, images, code, bold, italics, links): the subset :mod:`figures.verdicts.compare` and
:mod:`figures.report.headline` write.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from synth.store import write_text_atomic

from .headline import classify, data_kind
from .status import Status, section_path

__all__ = ["inline", "markdown_html", "safe_href", "write_html"]

_STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px auto;max-width:1500px;
color:#1b1b1b;line-height:1.4;padding:0 16px}
h1{font-size:1.6em}h2{font-size:1.3em;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:2em}
h3{font-size:1.1em}table{border-collapse:collapse;font-size:12.5px;margin:6px 0}
th,td{border:1px solid #d0d0d0;padding:3px 6px;vertical-align:top;text-align:left}th{background:#f1f1f1}
code{background:#f4f4f4;padding:0 3px;border-radius:3px;font-size:92%}
.target{display:block}
ul.caption{font-size:12.5px;color:#444;margin-top:2px}ul.toc{columns:4;font-size:13px}
.figs img{width:100%;max-width:1200px;border:1px solid #e0e0e0;cursor:zoom-in}
.figcap{font-size:12px;color:#555;margin:2px 0 12px}
.verdicts{max-height:640px;overflow:auto;border:1px solid #e4e4e4}
.kind{font-size:12px;color:#666;font-weight:normal}.note{font-size:13px;color:#333}
.v-good{background:#e3f4e3}.v-bad{background:#fbe0de}.v-open{background:#f3f3f3}.v-none{color:#777}
.scroll{max-height:480px;overflow:auto;border:1px solid #e4e4e4}
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
    from ..verdicts.rules import head

    c = classify({"verdict": verdict, "compared": ""})
    if c in ("claim", "theory"):
        return {"agrees": "v-good", "holds": "v-good", "differs": "v-bad", "violated": "v-bad"}.get(head(verdict),
                                                                                                  "v-open")
    return _CLASS.get(c, "")


def _table(lines: list[str]) -> str:
    header = _cells(lines[0])
    rows = [_cells(x) for x in lines[2:]]
    vcol = header.index("verdict") if "verdict" in header else None
    out = ["<table><thead><tr>" + "".join(f"<th>{inline(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for r in rows:
        cls = f' class="{_verdict_class(r[vcol])}"' if vcol is not None and vcol < len(r) else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{inline(c)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def markdown_html(text: str) -> str:
    """The Markdown subset of the reports as HTML (images are left out: the caller places them)."""
    out, block = [], []

    def flush():
        if not block:
            return
        if all(x.lstrip().startswith("|") for x in block) and len(block) >= 2:
            # a long table scrolls in its own box so that what follows stays near
            out.append(_table(block) if len(block) <= 32 else f'<div class="scroll">{_table(block)}</div>')
        elif all(x.startswith("- ") for x in block):
            # a list of definitions (a table's caption) is set smaller than the text
            cls = ' class="caption"' if all(x.startswith("- **") for x in block) else ""
            out.append(f"<ul{cls}>" + "".join(f"<li>{inline(x[2:])}</li>" for x in block) + "</ul>")
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


def _target_html(out: Path, name: str, st: Status, targets: dict, size: str) -> str:
    t = targets[name]
    kind = data_kind(t.kind, st.data.get("run_size", size))
    head = f'<h2 id="{html.escape(name)}">{inline(st.data.get("title", name))} <code>{html.escape(name)}</code> ' \
           f'<span class="kind">{html.escape(kind)}</span></h2>'
    text = section_path(out, name, size).read_text(encoding="utf-8")
    figs, table, rest = _section_parts(text)
    imgs = []
    for src, cap in figs:
        href = safe_href(src)
        if (out / src).is_file() and href is not None:  # linked, not embedded: a click opens it full size
            imgs.append(f'<a href="{html.escape(href)}" target="_blank"><img src="{html.escape(href)}" '
                        f'loading="lazy" alt="{html.escape(cap)}"></a><div class="figcap">{inline(cap)}</div>')
    verdicts = f'<div class="verdicts">{_table(table.splitlines())}</div>' if table else \
        "<p class='note'>No paper-vs-toolkit rows.</p>"
    if imgs:
        body = f'<div class="target"><div class="figs">{"".join(imgs)}</div>{verdicts}</div>'
    else:
        body = verdicts
    return f'{head}\n{body}\n<div class="note">{markdown_html(rest)}</div>'


def write_html(out: Path, size: str, targets: dict, statuses: dict[str, Status], intro_md: str,
               headline_md: str) -> Path:
    """Write ``out/report.html``; returns its path."""
    out = Path(out)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>cflab reproduction report "
             f"({html.escape(size)})</title><style>{_STYLE}</style></head><body>", markdown_html(intro_md),
             markdown_html(headline_md), "<h2>Targets</h2>"]
    order = _order(statuses, targets, size)
    parts.append('<ul class="toc">' + "".join(
        f'<li><a href="#{html.escape(n)}">{html.escape(n)}</a>: {html.escape(statuses[n].state)}</li>'
        for n in order) + "</ul>")
    for name in order:
        st = statuses[name]
        if st.state == "done":
            parts.append(_target_html(out, name, st, targets, size))
        else:
            parts.append(f'<h2 id="{html.escape(name)}">{inline(targets[name].description)} '
                         f'<code>{html.escape(name)}</code></h2><p><b>{html.escape(st.state)}</b>: '
                         f"{inline(st.reason)}</p>")
    parts.append("</body></html>")
    path = out / "report.html"
    write_text_atomic(path, "\n".join(parts) + "\n")
    return path
