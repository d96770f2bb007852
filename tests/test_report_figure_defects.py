"""The figure defects of issue #54, each a check of :mod:`figures.plots.figcheck` that fails a figure drawing it,
and the style that avoids it (:mod:`figures.plots.style`)."""

from __future__ import annotations

import itertools

import numpy as np

import figures.plots.style as style
from figures.plots.figcheck import check_figure, colours_alike


def _fig(ncols: int = 1):
    fig, axes = style.new_figure(1, ncols, width=4.0, height=3.0)
    style.suptitle(fig, style.face("IFCA Fig. 3(c) test", "synthetic", "m = 4", "3 trials"))
    return fig, axes


def _has(fig, words: str) -> bool:
    return any(words in b for b in check_figure(fig))


def test_the_palette_has_distinguishable_hues_for_eight_series():
    colours = style.palette(8)
    assert not [(a, b) for a, b in itertools.combinations(colours, 2) if colours_alike(a, b)]
    assert not [(a, b) for a, b in itertools.combinations(style.palette(10), 2) if colours_alike(a, b)]
    # what the issue found: seaborn's colorblind orange and vermillion (sigma = 0.1 and 0.4), orange and tan
    assert colours_alike("#de8f05", "#d55e00") and colours_alike("#de8f05", "#ca9161")
    assert not colours_alike("#0173b2", "#0173b2")  # one series in parts is not two alike


def test_two_series_in_colours_alike_fail():
    fig, axes = _fig()
    for i, c in enumerate(("#de8f05", "#d55e00")):
        axes[0][0].plot([0, 1], [i, i + 1], color=c, marker="o", label=f"σ = {i}")
    assert _has(fig, "colours alike")
    fig, axes = _fig()
    for i, c in enumerate(style.palette(8)):
        axes[0][0].plot([0, 1], [i, i + 1], color=c, marker="o", label=f"σ = {i}")
    assert not _has(fig, "colours alike")


def test_stacked_translucent_bands_fail_and_band_draws_error_bars():
    fig, axes = _fig()
    for c in ("C0", "C1"):
        poly = axes[0][0].fill_between([0, 1, 2], [0.1, 0.2, 0.3], [0.6, 0.7, 0.8], color=c, alpha=0.2)
        poly.set_gid("band n=10")
    assert _has(fig, "translucent bands")
    fig, axes = _fig()
    for i, c in enumerate(style.palette(3)):
        # equal curves: staggered markers and bars keep each visible
        style.band(axes[0][0], range(6), [0.4] * 6, [0.1] * 6, [0.7] * 6, c, f"s{i}", n=10, bounds=(0, 1),
                   stagger=(i, 3))
    assert not any(type(c).__name__.endswith("PolyCollection") for c in axes[0][0].collections)
    assert not [b for b in check_figure(fig) if "band" in b or "alike" in b or "hidden" in b]


def test_distinct_kinds_of_reference_drawn_alike_fail():
    fig, axes = _fig(2)
    axes[0][0].plot([0, 1], [1, 2], "k--x", label=style.BOUND_LABELS["equal"])
    axes[0][1].plot([0, 1], [1, 2], "k--x", label=style.BOUND_LABELS["upper"])
    style.figure_legend(fig, axes[0])
    assert _has(fig, "drawn alike")
    fig, axes = _fig()
    axes[0][0].plot([0, 1], [1, 2], "k--x", label="a")
    axes[0][0].plot([0, 1], [2, 3], "k--x", label="b")
    assert _has(fig, "drawn alike")


def test_a_series_hidden_under_another_fails():
    fig, axes = _fig()
    axes[0][0].plot([0, 1, 2], [1, 1, 1], "o-", color="C0", label="one-to-one")
    axes[0][0].plot([0, 1, 2], [1, 1, 1], "o-", color="C1", label="code rule")
    assert _has(fig, "hidden under")
    fig, axes = _fig()
    axes[0][0].plot([0, 1, 2], [1, 1, 1], "o-", color="C0", label="one-to-one")
    axes[0][0].plot([0, 1, 2], [1, 1, 1], "s--", color="C1", label="code rule", markerfacecolor="none")
    assert not _has(fig, "hidden under")


def test_a_probability_axis_beyond_one_fails():
    fig, axes = _fig()
    axes[0][0].plot([0, 1], [0.2, 10.0], "o-", label="x")
    axes[0][0].set_ylabel("P[misclustering]")
    assert _has(fig, "is a probability")
    fig, axes = _fig()
    axes[0][0].plot([0, 1], [0.2, 0.9], "o-", label="x")
    axes[0][0].set_ylabel("success probability")
    axes[0][0].set_ylim(0, 1)
    assert not _has(fig, "is a probability")


def test_a_colour_bar_with_uneven_ticks_fails():
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    for ticks, bad in (([-4, -2, -1, -0.3, 0, 0.3, 1, 2, 4], True), (np.arange(-4, 5), False)):
        fig, axes = _fig()
        axes[0][0].plot([0, 1], [0, 1], label="x")
        bar = fig.colorbar(ScalarMappable(norm=Normalize(-4, 4), cmap="RdBu"), ax=axes[0][0])
        bar.set_ticks(ticks)
        assert _has(fig, "not evenly valued") is bad


def test_an_empty_or_constant_panel_needs_a_note():
    fig, axes = _fig(2)
    axes[0][0].plot([0, 1], [0, 1], label="x")
    assert _has(fig, "empty panel")
    axes[0][1].text(0.5, 0.5, "no trial reached this cell", transform=axes[0][1].transAxes, ha="center")
    assert not _has(fig, "empty panel")
    fig, axes = _fig()
    axes[0][0].plot([0, 1, 2], [0, 0, 0], "o-", label="IFCA")
    assert _has(fig, "constant")
    axes[0][0].text(0.5, 0.5, "every trial failed: success 0", transform=axes[0][0].transAxes, ha="center")
    assert not _has(fig, "constant")


def test_series_with_equal_values_are_drawn_side_by_side_not_hidden():
    """Four success curves all at 1.0 (IFCA Fig. 3 at large R) are offset sideways, each by the same small share of
    the axis, so every marker stays visible; the offsets are symmetric around the true x."""
    import numpy as np

    from synth.report import DODGE, _dodge

    x = np.array([0.1, 0.25, 1.0])
    shifted = [_dodge(x, i, 4, (0.1, 1.0), log=True) for i in range(4)]
    assert all(not np.allclose(a, b) for a, b in zip(shifted[:-1], shifted[1:], strict=True))
    ratio = shifted[3] / shifted[0]  # log axis: the same factor at every x
    assert np.allclose(ratio, ratio[0]) and np.isclose(np.log10(ratio[0]), 3 * DODGE * 1.0)
    lin = [_dodge(x, i, 3, (0.1, 1.0), log=False) for i in range(3)]
    assert np.allclose(lin[1], x) and np.allclose(lin[2] - x, x - lin[0])
