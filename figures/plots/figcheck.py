"""Checks that fail when a figure is broken: what a reader would see at a glance, measured after drawing.

:func:`check_figure` draws a figure (Agg) and returns its problems, each one line:

* matplotlib warned while laying it out (e.g. "constrained_layout not applied because axes sizes collapsed to zero");
* a text artist (title, axis label, tick label, legend entry, annotation) reaches outside the canvas;
* two drawn tick labels of one axis overlap (their window extents intersect);
* an axis shows an offset or scale text ("1e-5+1.4142") instead of plain tick values;
* text smaller than :data:`MIN_FONT` points;
* a rounds or iterations axis has ticks between whole numbers;
* the title lacks the paper's table or figure, the data, the size or the seeds (:func:`figures.plots.style.face`);
* a shaded band is not marked as resting on at least :data:`figures.plots.style.MIN_BAND` values
  (:func:`figures.plots.style.band` marks it);
* the figure has no title, or a text is cut: a line ending in "…" or "..." (a shortened title or label);
* a heatmap's cells are uneven or its tick labels sit off the cells' centres;
* several colour-mapped images of one figure (one comparison) use different colour scales, unless each is marked
  as intentionally separate (:func:`figures.plots.style.separate_scale`);
* the face says the data are a stand-in ("8x8 digits standing in for MNIST") while some text of the figure names
  the real data set as what was run (a panel titled "MNIST");
* two translucent shaded bands of one panel overlap (they blend into colours of neither series: draw error bars,
  :func:`figures.plots.style.band`, or one panel per series);
* two series of one panel in colours alike (:func:`colours_alike`: two oranges, an orange and a tan);
* two labelled series (say a paper's stated value and a paper's upper bound) drawn alike: same colour, line style
  and marker;
* a labelled series hidden under another (the same points, line style and markers): draw it visibly or name the
  overlap;
* a probability axis (its label says probability) that runs beyond [0, 1];
* a colour bar whose ticks are not evenly valued (linear: equal steps; logarithmic: equal ratios);
* an empty panel, or one whose every series is one constant, without a note (a text on the panel) saying why;
* an orphan title word: a title (the figure's or a panel's) of several lines whose last line is one word ("seeds"
  alone under the rest; :func:`figures.plots.style.wrap` balances the lines).  A last line that is one bracketed
  item, a panel's "(holds)", is a line of its own by design, not a word left over.
"""

from __future__ import annotations

import re
import warnings

from .style import MIN_BAND, SAVE_DPI, SEPARATE_SCALE

__all__ = ["MIN_FONT", "REAL_SETS", "check_figure", "colours_alike", "orphan_word", "stand_in_problems",
           "title_problems"]

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
    """The tick labels an axis actually draws (within its view, visible, non-empty; none where the axes are off)."""
    if not axis.axes.axison or not axis.get_visible():
        return []
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
    out += [(f"figure {name}", t) for name, t in (("x label", fig._supxlabel), ("y label", fig._supylabel))
            if t is not None]
    out += [("figure text", t) for t in fig.texts]
    for leg in fig.legends:
        out += [("figure legend", t) for t in leg.get_texts()]
    for ai, ax in enumerate(fig.axes):
        if not ax.get_visible():
            continue
        where = f"axes {ai}"
        out += [(f"{where} title", t) for t in (ax.title, ax._left_title, ax._right_title)]
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)) if ax.axison else ():
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
                pass  # a whisker marked with its count (figures.plots.dotplot)
            elif not isinstance(c, PolyCollection):
                continue
            m = re.fullmatch(r"band n=(\d+)", c.get_gid() or "")
            if m is None:
                bad.append(f"axes {ai}: a shaded band that does not say how many values it rests on")
            elif int(m.group(1)) < MIN_BAND:
                bad.append(f"axes {ai}: a band from {m.group(1)} values (< {MIN_BAND})")
    return bad


def _cut(texts) -> list[str]:
    """Texts shortened with an ellipsis: a title or label that ends in "…" or "..." hides the rest of itself."""
    bad = []
    for where, t in texts:
        for line in t.get_text().split("\n"):
            if re.search(r"(…|\.\.\.)\s*$", line):
                bad.append(f"{where} {line.strip()[-40:]!r} is cut (ends in an ellipsis): give it in full")
                break
    return bad


def _plot_axes(fig) -> list:
    """The visible axes of ``fig`` that are not colour bars."""
    return [ax for ax in fig.axes if ax.get_visible() and getattr(ax, "_colorbar", None) is None]


def _cell_edges(artist) -> tuple[object, object] | None:
    """The x and y cell edges (data coordinates) of a heatmap drawn by ``imshow`` or ``pcolormesh``."""
    import numpy as np
    from matplotlib.collections import QuadMesh
    from matplotlib.image import AxesImage

    if isinstance(artist, AxesImage):
        shape = artist.get_array().shape
        x0, x1, y0, y1 = artist.get_extent()
        return np.linspace(x0, x1, shape[1] + 1), np.linspace(y0, y1, shape[0] + 1)
    if isinstance(artist, QuadMesh):
        c = np.asarray(artist.get_coordinates())
        return c[0, :, 0], c[:, 0, 1]
    return None


MAX_CELLS = 40  # a heatmap axis with more cells than this is an image, not a labelled grid: not checked


def _heatmaps(fig) -> list[str]:
    """Heatmap cells of unequal size on the page, and tick labels that do not sit at a cell's centre."""
    import numpy as np

    bad = []
    for ai, ax in enumerate(fig.axes):
        if ax not in _plot_axes(fig):
            continue
        for art in [*ax.images, *ax.collections]:
            edges = _cell_edges(art)
            if edges is None:
                continue
            for name, e, axis in (("x", edges[0], ax.xaxis), ("y", edges[1], ax.yaxis)):
                if len(e) - 1 > MAX_CELLS or len(e) < 2:
                    continue
                pts = np.column_stack([e, np.zeros_like(e)] if name == "x" else [np.zeros_like(e), e])
                px = ax.transData.transform(pts)[:, 0 if name == "x" else 1]
                width = np.abs(np.diff(px))
                if width.min() <= 0 or width.max() / width.min() > 1.05:
                    bad.append(f"axes {ai}: heatmap cells of uneven {name} size on the page ({width.min():.0f} to "
                               f"{width.max():.0f} px): draw the grid's values as equal cells")
                    continue
                centres = (px[1:] + px[:-1]) / 2
                off = []
                for t in _drawn_ticks(axis):
                    loc = t.get_position()[0 if name == "x" else 1]
                    p = ax.transData.transform((loc, 0) if name == "x" else (0, loc))[0 if name == "x" else 1]
                    if np.min(np.abs(centres - p)) > 0.1 * width.min():
                        off.append(t.get_text())
                if off:
                    bad.append(f"axes {ai}: {name} tick labels {', '.join(repr(o) for o in dict.fromkeys(off))} sit "
                               "off the centres of the heatmap's cells")
    return bad


def _scales(fig) -> list[str]:
    """Colour-mapped images of one figure on different scales (norm, limits or colour map)."""
    from matplotlib.collections import QuadMesh
    from matplotlib.image import AxesImage

    seen: dict[tuple, list[int]] = {}
    for ai, ax in enumerate(fig.axes):
        if ax not in _plot_axes(fig):
            continue
        for art in [*ax.images, *ax.collections]:
            if not isinstance(art, AxesImage | QuadMesh) or (art.get_gid() or "").startswith(SEPARATE_SCALE):
                continue
            norm = art.norm
            key = (type(norm).__name__, f"{norm.vmin:.6g}", f"{norm.vmax:.6g}", art.get_cmap().name)
            seen.setdefault(key, []).append(ai)
    if len(seen) <= 1:
        return []
    scales = "; ".join(f"axes {', '.join(map(str, dict.fromkeys(v)))}: {k[3]} {k[1]}..{k[2]}" for k, v in seen.items())
    return [f"{len(seen)} different colour scales in one figure ({scales}): one scale per comparison, or mark each "
            "as separate (figures.plots.style.separate_scale)"]


# the papers' image data sets that reduced runs replace by the embedded 8x8 digits
REAL_SETS = ("Fashion-MNIST", "FMNIST", "FEMNIST", "MNIST", "CIFAR-10", "CIFAR")
# a real set's name is fine after these words: it is then what the stand-in stands for, or the paper's
_ALLOWED_BEFORE = re.compile(r"(standing in for|in place of|instead of|replac\w+|for|paper's|papers'|paper:?|"
                             r"paper \(|published)\s*$", re.IGNORECASE)


def stand_in_problems(title: str, texts: list[tuple[str, str]]) -> list[str]:
    """Texts that name a real data set as the data run while the face (``title``) says a stand-in was run.

    A stand-in run's face says so in its data (``data: 8x8 digits standing in for MNIST``, any data naming the
    embedded "digits"); then every other mention of MNIST, FMNIST, FEMNIST or CIFAR must say it is the set stood in
    for or the paper's (``for MNIST``, ``the paper's MNIST column``, ``paper (CIFAR-10)``)."""
    flat = " ".join(title.split())
    m = re.search(r"\bdata: (.*?)(; size:|$)", flat)
    if m is None or not re.search(r"standing in for|\bdigits\b", m.group(1)):
        return []
    bad = []
    pattern = re.compile(r"(?<![\w-])(" + "|".join(re.escape(n) for n in REAL_SETS) + r")(?![\w-])")
    for where, text in texts:
        flat_text = " ".join(text.split())
        for hit in pattern.finditer(flat_text):
            if not _ALLOWED_BEFORE.search(flat_text[:hit.start()][-30:]):
                bad.append(f"{where} {flat_text[max(0, hit.start() - 20):hit.end() + 10]!r} names {hit.group(1)} "
                           "as the data, but the run used a stand-in: say what ran (e.g. 'digits (rotated), for "
                           f"{hit.group(1)}')")
                break
    return bad


def _lab(colour):
    """CIE L*a*b* (D65) of a matplotlib colour."""
    import numpy as np
    from matplotlib.colors import to_rgb

    c = np.asarray(to_rgb(colour), dtype=float)
    c = np.where(c > 0.04045, ((c + 0.055) / 1.055) ** 2.4, c / 12.92)
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    xyz = m @ c / np.array([0.9505, 1.0, 1.089])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def colours_alike(a, b) -> bool:
    """Whether two different colours would be read as one: closer than 20 in L*a*b*, or two coloured (chroma > 15)
    hues less than 20 degrees apart and closer than 45 (seaborn's colorblind orange #de8f05 and vermillion #d55e00;
    orange and tan #ca9161), or two greys closer than 25."""
    import numpy as np

    A, B = _lab(a), _lab(b)
    d = float(np.linalg.norm(A - B))
    if d == 0:
        return False  # the same colour: one series drawn in parts (a mean and its seeds), not two alike
    ca, cb = np.hypot(*A[1:]), np.hypot(*B[1:])
    if ca > 15 and cb > 15:
        ha, hb = (np.degrees(np.arctan2(v[2], v[1])) % 360 for v in (A, B))
        dh = min(abs(ha - hb), 360 - abs(ha - hb))
        return d < 20 or (dh < 20 and d < 45)
    return d < 25 if ca <= 15 and cb <= 15 else d < 20


def _series(ax) -> list:
    """The labelled, drawn lines of ``ax`` (a legend entry each)."""
    return [ln for ln in ax.lines if ln.get_visible() and not ln.get_label().startswith("_")
            and (ln.get_linestyle() not in ("None", "") or ln.get_marker() not in ("None", "", None))]


def _colours(fig) -> list[str]:
    from matplotlib.colors import to_hex

    bad = []
    for ai, ax in enumerate(_plot_axes(fig)):
        seen: dict[str, str] = {}
        for ln in _series(ax):
            c = to_hex(ln.get_color())
            seen.setdefault(c, ln.get_label())
        for c in ax.collections:  # scatter series
            if c.get_label().startswith("_") or not len(c.get_facecolors()):
                continue
            seen.setdefault(to_hex(c.get_facecolors()[0]), c.get_label())
        items = list(seen.items())
        for i, (c1, l1) in enumerate(items):
            for c2, l2 in items[i + 1:]:
                if colours_alike(c1, c2):
                    bad.append(f"axes {ai}: series {l1[:40]!r} ({c1}) and {l2[:40]!r} ({c2}) in colours alike: use "
                               "the palette's distinct hues (figures.plots.style.palette)")
    return bad


def _stacked_bands(fig) -> list[str]:
    from matplotlib.collections import PolyCollection
    from matplotlib.colors import to_hex

    bad = []
    for ai, ax in enumerate(_plot_axes(fig)):
        polys = []
        for c in ax.collections:
            if type(c).__name__ not in ("PolyCollection", "FillBetweenPolyCollection") or \
                    not isinstance(c, PolyCollection):
                continue
            alpha = c.get_alpha()
            fc = c.get_facecolors()
            if not len(fc) or (alpha is None and fc[0][3] >= 1) or (alpha is not None and alpha >= 1):
                continue
            ext = c.get_datalim(ax.transData)
            polys.append((to_hex(fc[0][:3]), ext))
        for i, (c1, e1) in enumerate(polys):
            for c2, e2 in polys[i + 1:]:
                if c1 != c2 and e1.x0 < e2.x1 and e2.x0 < e1.x1 and e1.y0 < e2.y1 and e2.y0 < e1.y1:
                    bad.append(f"axes {ai}: translucent bands of two series overlap and blend ({c1}, {c2}): draw "
                               "error bars (figures.plots.style.band) or one panel per series")
                    break
            else:
                continue
            break
    return bad


def _style(line) -> tuple:
    """What tells a line apart at a glance: colour, line style, marker, its size and fill, and its opacity."""
    from matplotlib.colors import to_hex

    face = line.get_markerfacecolor()
    return (to_hex(line.get_color()), line.get_linestyle(), line.get_marker(), round(float(line.get_markersize()), 1),
            to_hex(face) if not (isinstance(face, str) and face == "none") else "none",
            1.0 if line.get_alpha() is None else round(float(line.get_alpha()), 2))


def _alike_and_hidden(fig) -> list[str]:
    import numpy as np

    bad = []
    for ai, ax in enumerate(_plot_axes(fig)):
        lines = _series(ax)
        for i, a in enumerate(lines):
            for b in lines[i + 1:]:
                if a.get_label() == b.get_label():
                    continue
                if _style(a) == _style(b):
                    bad.append(f"axes {ai}: {a.get_label()[:40]!r} and {b.get_label()[:40]!r} are drawn alike (colour, "
                               "line style, marker): distinct kinds need distinct styles")
                    continue
                xa, ya = (np.asarray(v, dtype=float) for v in a.get_data())
                xb, yb = (np.asarray(v, dtype=float) for v in b.get_data())
                if xa.shape == xb.shape and ya.shape == yb.shape and xa.size and np.allclose(xa, xb, equal_nan=True) \
                        and np.allclose(ya, yb, equal_nan=True) and a.get_linestyle() == b.get_linestyle() \
                        and a.get_marker() == b.get_marker() and str(a.get_markevery()) == str(b.get_markevery()):
                    bad.append(f"axes {ai}: {a.get_label()[:40]!r} is hidden under {b.get_label()[:40]!r} (the same "
                               "points and style): stagger its markers or say on the panel that they coincide")
    return bad


def _probability_label(label: str) -> bool:
    """Whether an axis label names a probability: "probability", or a ``P[...]``/``Pr(...)`` at its start."""
    text = label.strip().lstrip("$").lstrip("\\")
    return text.startswith(("P[", "P(", "Pr[", "Pr(", "P_{", "mathbb{P}")) or "probabilit" in label.lower()


def _legend_alike(fig) -> list[str]:
    """Entries of one figure legend with different labels drawn alike (the legend cannot tell them apart)."""
    from matplotlib.lines import Line2D

    bad = []
    for leg in fig.legends:
        seen: dict[tuple, str] = {}
        for h, t in zip(leg.legend_handles, leg.get_texts(), strict=False):
            if not isinstance(h, Line2D):
                continue
            key = _style(h)
            if key in seen and seen[key] != t.get_text():
                bad.append(f"legend: {seen[key][:40]!r} and {t.get_text()[:40]!r} are drawn alike (colour, line "
                           "style, marker): distinct kinds need distinct styles")
            seen.setdefault(key, t.get_text())
    return bad


def _probability_axes(fig) -> list[str]:
    bad = []
    for ai, ax in enumerate(_plot_axes(fig)):
        for name, label, lim, scale in (("x", ax.get_xlabel(), ax.get_xlim(), ax.get_xscale()),
                                        ("y", ax.get_ylabel(), ax.get_ylim(), ax.get_yscale())):
            if _probability_label(label) and (max(lim) > 1.05 or (scale == "linear" and min(lim) < -0.05)):
                bad.append(f"axes {ai}: the {name} axis is a probability ({label.splitlines()[0][:40]!r}) but runs "
                           f"from {min(lim):.3g} to {max(lim):.3g}: keep it within [0, 1] (say on the panel what "
                           "lies outside)")
    return bad


def _colorbar_ticks(fig) -> list[str]:
    import numpy as np

    bad = []
    for ai, ax in enumerate(fig.axes):
        cb = getattr(ax, "_colorbar", None)
        if cb is None or not ax.get_visible():
            continue
        axis = ax.yaxis if cb.orientation == "vertical" else ax.xaxis
        lo, hi = sorted(axis.get_view_interval())
        ticks = np.array([t for t in axis.get_majorticklocs() if lo - 1e-12 <= t <= hi + 1e-12], dtype=float)
        if len(ticks) < 3:
            continue
        log = axis.get_scale() == "log"
        v = np.log10(ticks[ticks > 0]) if log else ticks
        steps = np.diff(v)
        if len(steps) >= 2 and np.ptp(steps) > 1e-6 * max(1.0, float(np.abs(steps).max())):
            bad.append(f"axes {ai}: the colour bar's ticks are not evenly valued ({', '.join(f'{t:g}' for t in ticks)})"
                       ": use a locator with equal steps")
    return bad


def _empty_panels(fig) -> list[str]:
    import numpy as np

    bad = []
    for ai, ax in enumerate(_plot_axes(fig)):
        if not ax.axison:
            continue
        noted = any(t.get_visible() and t.get_text().strip() for t in ax.texts)
        lines = [ln for ln in ax.lines if ln.get_visible()]
        data = lines or ax.collections or ax.images or [p for p in ax.patches if p.get_visible()]
        if not data and not noted:
            bad.append(f"axes {ai}: an empty panel without a note saying why (ax.text)")
            continue
        # the curves in data coordinates (a threshold drawn by axhline/axvline is not one)
        series = [ln for ln in lines if ln.get_transform() == ax.transData]
        if _series(ax) and series and not (ax.images or [p for p in ax.patches if p.get_visible()]) and not noted:
            ys = [np.asarray(ln.get_ydata(), dtype=float) for ln in series]
            vals = np.concatenate([y[np.isfinite(y)] for y in ys]) if ys else np.array([])
            if vals.size > 1 and np.ptp(vals) == 0:
                bad.append(f"axes {ai}: every series is the constant {vals[0]:g}, without a note saying so (ax.text)")
    return bad


def orphan_word(title: str) -> str | None:
    """The lone word on the last line of a title of several lines (None when there is none): what a reader sees as
    a word left over by the wrapping.  A bracketed last line ("(holds)", "[n = 20]") is set apart on purpose."""
    lines = [line for line in title.strip().split("\n") if line.strip()]
    if len(lines) < 2:
        return None
    last = lines[-1].strip()
    if " " in last or (last[0], last[-1]) in (("(", ")"), ("[", "]")):
        return None
    return last


def _orphan_titles(texts) -> list[str]:
    """The figure's and the panels' titles whose last line is one word (:func:`orphan_word`)."""
    bad = []
    for where, t in texts:
        word = orphan_word(t.get_text()) if where.endswith("title") else None
        if word is not None:
            bad.append(f"{where} {t.get_text()[:40]!r}: orphan title word {word!r} alone on the last line (wrap the "
                       "title in balanced lines: figures.plots.style.wrap)")
    return bad


def check_figure(fig, dpi: float = SAVE_DPI) -> list[str]:
    """Every problem of ``fig`` drawn at ``dpi`` (see the module docstring); an empty list when it reads cleanly."""
    renderer, bad = _draw(fig, dpi)
    texts = _texts(fig)
    bad += _inside(fig, renderer, texts)
    bad += _overlaps(fig, renderer)
    bad += _axis_problems(fig)
    bad += _fonts(texts)
    title = _title(fig)
    if not title.strip():
        bad.append("title: the figure has no title (figures.plots.style.suptitle with figures.plots.style.face)")
    else:
        bad += [f"title: {p}" for p in title_problems(title)]
    bad += _cut(texts)
    bad += _bands(fig)
    bad += _heatmaps(fig)
    bad += _scales(fig)
    bad += stand_in_problems(title, [(w, t.get_text()) for w, t in texts])
    bad += _stacked_bands(fig)
    bad += _colours(fig)
    bad += _alike_and_hidden(fig)
    bad += _legend_alike(fig)
    bad += _probability_axes(fig)
    bad += _colorbar_ticks(fig)
    bad += _empty_panels(fig)
    bad += _orphan_titles(texts)
    return bad
