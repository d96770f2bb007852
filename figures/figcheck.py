"""Checks that fail when a figure is broken: what a reader would see at a glance, measured after drawing.

:func:`check_figure` draws a figure (Agg) and returns its problems, each one line:

* matplotlib warned while laying it out (e.g. "constrained_layout not applied because axes sizes collapsed to zero");
* a text artist (title, axis label, tick label, legend entry, annotation) reaches outside the canvas;
* two drawn tick labels of one axis overlap (their window extents intersect);
* an axis shows an offset or scale text ("1e-5+1.4142") instead of plain tick values;
* text smaller than :data:`MIN_FONT` points;
* a rounds or iterations axis has ticks between whole numbers;
* the title lacks the paper's table or figure, the data, the size or the seeds (:func:`figures.style.face`);
* a shaded band is not marked as resting on at least :data:`figures.style.MIN_BAND` values
  (:func:`figures.style.band` marks it).
"""

from __future__ import annotations

import re
import warnings

from .style import MIN_BAND, SAVE_DPI

__all__ = ["MIN_FONT", "check_figure", "title_problems"]

MIN_FONT = 6.0
_TOL = 1.0  # pixels: rounding of extents


def _draw(fig, dpi: float) -> tuple[object, list[str]]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig.set_dpi(dpi)  # hinted text is not exactly proportional to dpi: measure at the resolution that is saved
    canvas = FigureCanvasAgg(fig)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        canvas.draw()
    return canvas.get_renderer(), [f"matplotlib warned while drawing: {w.message}" for w in caught]


def _drawn_ticks(axis) -> list:
    """The tick labels an axis actually draws (within its view, visible, non-empty)."""
    try:
        ticks = axis._update_ticks()  # the ticks matplotlib draws; not public, stable since 3.1
    except AttributeError:
        ticks = axis.get_major_ticks()
    out = []
    for t in ticks:
        for lab in (t.label1, t.label2):
            if lab.get_visible() and lab.get_text().strip():
                out.append(lab)
    return out


def _texts(fig) -> list[tuple[str, object]]:
    """Every drawn text artist of ``fig`` with a short description of where it is."""
    out = []
    if fig._suptitle is not None:
        out.append(("figure title", fig._suptitle))
    out += [("figure text", t) for t in fig.texts]
    for leg in fig.legends:
        out += [("figure legend", t) for t in leg.get_texts()]
    for ai, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"axes {ai}"
        out += [(f"{where} title", t) for t in (ax.title, ax._left_title, ax._right_title)]
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            out.append((f"{where} {name} label", axis.label))
            out += [(f"{where} {name} tick label", t) for t in _drawn_ticks(axis)]
            out.append((f"{where} {name} offset text", axis.offsetText))
        out += [(f"{where} text", t) for t in ax.texts]
        if ax.get_legend() is not None:
            out += [(f"{where} legend", t) for t in ax.get_legend().get_texts()]
    return [(w, t) for w, t in out if t.get_visible() and t.get_text().strip()]


def _inside(fig, renderer, texts) -> list[str]:
    W, H = fig.bbox.width, fig.bbox.height  # pixels at the dpi drawn
    bad = []
    for where, t in texts:
        e = t.get_window_extent(renderer)
        if e.x0 < -_TOL or e.y0 < -_TOL or e.x1 > W + _TOL or e.y1 > H + _TOL:
            bad.append(f"{where} {t.get_text()[:40]!r} reaches outside the canvas ({e.x0:.0f}..{e.x1:.0f} x "
                       f"{e.y0:.0f}..{e.y1:.0f} px of {W:.0f} x {H:.0f})")
    return bad


def _overlaps(fig, renderer) -> list[str]:
    bad = []
    for ai, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _drawn_ticks(axis)]
            for i in range(len(boxes)):
                for j in range(i + 1, len(boxes)):
                    a, b = boxes[i][1], boxes[j][1]
                    if (min(a.x1, b.x1) - max(a.x0, b.x0) > _TOL) and (min(a.y1, b.y1) - max(a.y0, b.y0) > _TOL):
                        bad.append(f"axes {ai} {name} tick labels {boxes[i][0]!r} and {boxes[j][0]!r} overlap")
    return bad


def _axis_problems(fig) -> list[str]:
    bad = []
    for ai, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            off = axis.offsetText
            if off.get_visible() and off.get_text().strip():
                bad.append(f"axes {ai} {name} axis shows the offset text {off.get_text()!r} instead of plain values")
            label = " ".join(axis.label.get_text().lower().split())
            if re.fullmatch(r"(communication )?(rounds?|iterations?)( t)?|t|t \(rounds\)", label):
                lo, hi = sorted(axis.get_view_interval())
                locs = [v for v in axis.get_majorticklocs() if lo - 1e-9 <= v <= hi + 1e-9]
                frac = [v for v in locs if abs(v - round(v)) > 1e-9]
                if frac:
                    bad.append(f"axes {ai} {name} axis ({axis.label.get_text()!r}) has ticks between whole numbers: "
                               f"{', '.join(f'{v:g}' for v in frac[:4])}")
    return bad


def _fonts(texts) -> list[str]:
    return [f"{where} {t.get_text()[:30]!r} is {t.get_fontsize():.1f} pt (< {MIN_FONT:g})" for where, t in texts
            if t.get_fontsize() < MIN_FONT - 1e-9]


def title_problems(title: str) -> list[str]:
    """What a figure's title lacks: the paper with its table or figure (or 'beyond the papers'), ``data:``,
    ``size:`` and a count of seeds or trials."""
    bad = []
    title = " ".join(title.split())  # a wrapped title breaks lines anywhere
    if not re.search(r"(IFCA|SR-FCA|CLoVE)\S*( \S+)?( \S+)? (Table|Fig\.)|beyond the papers", title):
        bad.append("the title names no paper with its table or figure")
    if not re.search(r"\bdata: \S", title):
        bad.append("the title does not say which data were used ('data: ...')")
    if not re.search(r"\bsize: \S", title):
        bad.append("the title does not give the size ('size: ...')")
    if not re.search(r"\b\d+(-\d+)?( [A-Za-z]+){0,2} (seeds?|trials?|runs?)\b", title):
        bad.append("the title does not give the number of seeds or trials")
    return bad


def _title(fig) -> str:
    if fig._suptitle is not None and fig._suptitle.get_text().strip():
        return fig._suptitle.get_text()
    visible = [ax for ax in fig.axes if ax.get_visible()]
    return visible[0].get_title() if len(visible) == 1 else ""


def _bands(fig) -> list[str]:
    from matplotlib.collections import LineCollection, PolyCollection

    bad = []
    for ai, ax in enumerate(fig.axes):
        for c in ax.collections:
            if isinstance(c, LineCollection) and (c.get_gid() or "").startswith("band n="):
                pass  # a whisker marked with its count (figures.dotplot)
            elif not isinstance(c, PolyCollection):
                continue
            m = re.fullmatch(r"band n=(\d+)", c.get_gid() or "")
            if m is None:
                bad.append(f"axes {ai}: a shaded band that does not say how many values it rests on")
            elif int(m.group(1)) < MIN_BAND:
                bad.append(f"axes {ai}: a band from {m.group(1)} values (< {MIN_BAND})")
    return bad


def check_figure(fig, dpi: float = SAVE_DPI) -> list[str]:
    """Every problem of ``fig`` drawn at ``dpi`` (see the module docstring); an empty list when it reads cleanly."""
    renderer, bad = _draw(fig, dpi)
    texts = _texts(fig)
    bad += _inside(fig, renderer, texts)
    bad += _overlaps(fig, renderer)
    bad += _axis_problems(fig)
    bad += _fonts(texts)
    bad += [f"title: {p}" for p in title_problems(_title(fig))]
    bad += _bands(fig)
    return bad
