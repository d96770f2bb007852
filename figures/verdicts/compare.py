"""Paper-versus-toolkit rows: the published number, the reproduced one, their difference and a verdict.

Verdicts: one vocabulary, defined in :mod:`figures.verdicts.rules` (agrees / differs / not resolved / shown / stale /
paper value suspect), used for the published numbers at the paper's setting (equivalence and difference tests over
seeds, Holm over each table), the orderings of methods, the papers' qualitative claims and the trends of success
probabilities (:func:`trend_verdict`).  Rows that are no comparison say so:

* ``not comparable (...)`` -- the reproduced number comes from a different setting (a ``--quick`` run on
  the 8x8 digits instead of MNIST, fewer rounds); the difference is shown but means nothing by itself.
* ``finding (...)`` -- what the toolkit observed where the paper states nothing to test (no verdict).
* ``not run (...)`` -- the algorithm is not in the toolkit, or the data are not available.
* theory rows use the verdicts of :mod:`theory` (holds, violated, vacuous, assumptions not met).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict
from pathlib import Path

from synth.store import write_text_atomic

from .published import Claim, Published
from .rows import Row
from .rules import PaperNumber, judge_numbers, number_test, number_verdict

__all__ = ["Row", "build_section", "claim_row", "fmt", "markdown_table", "not_run_row", "numeric_row", "write_rows",
           "trend_verdict", "write_table"]


def fmt(value: float | None, pm: float | None = None, decimals: int = 2) -> str:
    """``value ± pm`` at ``decimals`` decimals ('n/a' for a missing value)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    text = f"{value:.{decimals}f}"
    if pm is not None and math.isfinite(pm):
        text += f" ± {pm:.{decimals}f}"
    return text


def numeric_row(item: str, pub: Published | None, mean: float | None, std: float | None, n: int,
                scale: float = 1.0, comparable: str | None = None, note: str = "") -> Row:
    """Compare a reproduced mean (± std over ``n`` seeds, times ``scale``) with a published value.

    ``comparable`` is None when the run reproduces the paper's setting, else the reason it does not
    (the verdict then says "not comparable (reason)").
    """
    # shown at the paper's precision, at least 2 decimals (a published "0.0" would hide a reproduced 0.04)
    decimals = max(pub.decimals, 2) if pub is not None else 2
    if mean is None or n == 0 or not math.isfinite(mean):
        why = f"no finished trial: {note}" if note else "no finished trial"
        return Row(item, fmt(pub.value, pub.pm, decimals) if pub else "n/a", "n/a (no finished run)", "n/a",
                   f"not run ({why})", pub.source() if pub else "", note)
    m = mean * scale
    s = None if std is None or not math.isfinite(std) else std * scale
    rep = fmt(m, s if n > 1 else None, decimals) + f" (n={n})"
    if pub is None:
        return Row(item, "n/a (not in the paper)", rep, "n/a", "no published value", "", note)
    diff = m - pub.value
    if comparable is not None:
        return Row(item, fmt(pub.value, pub.pm, decimals), rep, f"{diff:+.{decimals}f}",
                   f"not comparable ({comparable})", pub.source(), note, stats=(m, s, n))
    paper = PaperNumber(*pub.paper_number())
    verdict = number_verdict(number_test(m, s, n, paper), paper)
    return Row(item, fmt(pub.value, pub.pm, decimals), rep, f"{diff:+.{decimals}f}", verdict, pub.source(), note,
               stats=(m, s, n), paper_number=pub.paper_number())


def not_run_row(item: str, pub: Published | None, reason: str) -> Row:
    """A published number the toolkit does not reproduce, and why."""
    decimals = pub.decimals if pub is not None else 2
    return Row(item, fmt(pub.value, pub.pm, decimals) if pub else "n/a", "—", "—", f"not run ({reason})",
               pub.source() if pub else "")


def claim_row(item: str, claim: Claim, reproduced: str, verdict: str, note: str = "") -> Row:
    """A qualitative statement of a paper against what the toolkit measured."""
    paper = claim.claim if claim.value is None else f"{claim.claim} [{claim.value:g}" + (
        f" ± {claim.pm:g}]" if claim.pm is not None else "]")
    return Row(item, paper, reproduced, "—", verdict, claim.source(), note)


def _cell(text: str) -> str:
    # a ledger's or a run's text must not become markup in report.md: '|' ends a cell, '<' opens an HTML tag
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[Row], source: bool = False) -> str:
    """The rows as a Markdown table: item | paper | reproduced | difference | verdict (| source)."""
    cols = ["item", "paper", "reproduced", "difference", "verdict"] + (["source"] if source else [])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        d = asdict(r)
        lines.append("| " + " | ".join(_cell(d[c]) for c in cols) + " |")
    return "\n".join(lines)


def write_rows(rows: list[Row], path: Path) -> str:
    """Write the comparison rows as CSV (every field, source and note included; the numbers of one table judged
    together, :func:`figures.verdicts.rules.judge_numbers`); returns the file name."""
    rows = judge_numbers(rows)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(asdict(rows[0]) if rows else Row("", "", "", "", "").__dict__),
                       lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(asdict(r))
    write_text_atomic(path, buf.getvalue())
    return Path(path).name


def write_table(path: Path, header: list[str], rows: list[dict]) -> str:
    """Write a list of dicts as CSV with the given columns; returns the file name."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _csv_value(r.get(k)) for k in header})
    write_text_atomic(path, buf.getvalue())
    return Path(path).name


def _csv_value(v):
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    if isinstance(v, (list, tuple)):
        return ",".join(map(str, v))
    return "" if v is None else v


def build_section(title: str, intro: str, folder: str, figures: list[tuple[str, str]], rows: list[Row],
                  files: list[str], notes: list[str] | None = None, extra: str = ""):
    """A report section: intro, figures (PNG, with a PDF beside each), the comparison table, notes, file list.

    ``folder`` is the target's folder relative to ``report.md``; ``figures`` are ``(png name, caption)``.
    """
    from ..registry import Section

    parts = [intro.strip(), ""]
    for png, caption in figures:
        caption = " ".join(str(caption).split())  # one line: an image's alt text may not break
        parts += [f"![{caption}]({folder}/{png})", "", f"*{caption}* ([PDF]({folder}/{png[:-4]}.pdf))", ""]
    if rows:
        rows = judge_numbers(rows)  # the numbers of one table are tested together (Holm)
        parts += ["**Paper vs toolkit**", "", markdown_table(rows), ""]
    if extra:
        parts += [extra.strip(), ""]
    for note in notes or []:
        parts.append(f"- {note}")
    if notes:
        parts.append("")
    parts.append("Files: " + ", ".join(f"`{folder}/{f}`" for f in files))
    return Section(title, "\n".join(parts), [f"{folder}/{f}" for f in files], list(rows))


def trend_verdict(k_low: int, n_low: int, k_high: int, n_high: int, alpha: float = 0.05) -> tuple[str, float]:
    """Did the success probability rise from the low end of an axis to its high end?

    One-sided Fisher exact tests on the two 2x2 counts: ``agrees`` when a rise is significant at
    ``alpha``, ``differs`` when a fall is, else ``not resolved`` (with the flat level when both ends
    are all-success or all-failure).  Returns ``(verdict, p-value of the rise)``.
    """
    from scipy.stats import fisher_exact

    table = [[k_high, n_high - k_high], [k_low, n_low - k_low]]
    p_up = float(fisher_exact(table, alternative="greater")[1])
    p_down = float(fisher_exact(table, alternative="less")[1])
    if p_up < alpha:
        return "agrees", p_up
    if p_down < alpha:
        return "differs (a significant fall)", p_up
    if k_low == n_low and k_high == n_high:
        return "not resolved (flat at 1: no room to rise)", p_up
    if k_low == 0 and k_high == 0:
        return "not resolved (flat at 0)", p_up
    return "not resolved (no significant rise)", p_up
