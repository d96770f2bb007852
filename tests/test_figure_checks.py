"""Every figure of every target, drawn at the tiny size, passes the checks of :mod:`figures.plots.figcheck`.

The targets run once (``paper_repro.py --tiny``) with the figure writer wrapped: each figure is checked as it is
saved, and each target's problems are one test.  The checks themselves are tested on figures that break them.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

import figures.plots.style as style
import paper_repro
from figures import load_targets
from figures.plots.figcheck import check_figure, orphan_word, title_problems

# measured-runs computes nothing and draws its figures with the nets targets' plotting, checked here (and reading
# the stored paper-scale runs takes it minutes)
TARGETS = [name for name in load_targets() if name != "measured-runs"]


def _selected(session) -> list[str]:
    """The targets whose test was selected (``-k clove-table7`` runs that target alone)."""
    names = [item.callspec.params["target"] for item in session.items
             if getattr(item, "originalname", "") == "test_every_figure_of_a_target_reads_cleanly"]
    return list(dict.fromkeys(names))


@pytest.fixture(scope="module")
def checked(request, tmp_path_factory):
    """``{figure stem: problems}`` and ``{target: status}`` of a tiny run of the selected targets."""
    out = tmp_path_factory.mktemp("figs")
    names = _selected(request.session) or TARGETS
    problems: dict[str, list[str]] = {}
    real_save = style.save_figure_atomic

    def save_checked(fig, path, **kw):
        if str(path).endswith(".png"):
            problems[f"{path.parent.name}/{path.stem}"] = check_figure(fig, dpi=kw.get("dpi", style.SAVE_DPI))
        return real_save(fig, path, **kw)

    mp = pytest.MonkeyPatch()
    mp.setattr(style, "save_figure_atomic", save_checked)
    try:
        paper_repro.main(["--tiny", "--only", ",".join(names), "--out", str(out), "--n-jobs", "1"])
    finally:
        mp.undo()
    import json

    status = {}
    for name in names:
        path = out / name / "status-tiny.json"
        status[name] = json.loads(path.read_text()) if path.exists() else {"status": "missing"}
    return problems, status


@pytest.mark.parametrize("target", TARGETS)
def test_every_figure_of_a_target_reads_cleanly(checked, target):
    problems, status = checked
    st = status[target]
    assert st["status"] in ("done", "pending"), f"{target}: {st.get('reason')}"
    mine = {stem: p for stem, p in problems.items() if stem.split("/")[0] == target}
    if st["status"] == "done":
        assert mine, f"{target} drew no figure"
    bad = [f"{stem}: {p}" for stem, ps in mine.items() for p in ps]
    assert not bad, "\n".join(bad)


def _fig(width=4.0, height=3.0):
    return style.new_figure(1, 1, width=width, height=height)


def test_collapsed_layout_and_clipped_legend_fail():
    fig, axes = _fig(3.0, 2.0)
    ax = axes[0][0]
    for i in range(14):
        ax.plot([0, 1], [i, i], label=f"a rather long method name {i}")
    ax.legend(ncol=14, loc="upper center")
    ax.set_xlabel("x " * 60)
    bad = check_figure(fig)
    assert any("outside the canvas" in b for b in bad)


def test_overlapping_tick_labels_fail():
    fig, axes = _fig(2.0, 2.0)
    ax = axes[0][0]
    ax.set_xticks(range(12))
    ax.set_xticklabels([f"label number {i}" for i in range(12)])
    assert any("overlap" in b for b in check_figure(fig))


def test_log_minor_labels_and_offsets_fail():
    fig, axes = _fig(2.0, 2.8)  # a short log range labels its minor ticks: 2x10^2 3x10^2 4x10^2 6x10^2
    ax = axes[0][0]
    ax.plot([200, 300, 400, 600], [1, 2, 3, 4])
    ax.set_xscale("log")
    ax.set_xlim(190, 650)
    assert any("tick labels" in b and "overlap" in b for b in check_figure(fig))
    fig, axes = _fig(2.0, 2.8)
    axes[0][0].plot([200, 300, 400, 600], [1, 2, 3, 4])
    axes[0][0].set_xscale("log")
    style.value_ticks(axes[0][0].xaxis, [200, 300, 400, 600])
    assert not any("overlap" in b for b in check_figure(fig))
    fig, axes = _fig()
    axes[0][0].plot([1, 2, 3], [math.sqrt(2) + 1e-6 * k for k in range(3)])
    assert any("offset text" in b for b in check_figure(fig))


def test_fractional_round_ticks_fail():
    fig, axes = _fig()
    axes[0][0].plot([1, 2, 3, 4], np.linspace(0, 1, 4))  # 3 rounds: matplotlib ticks 1.0, 1.5, 2.0, ...
    axes[0][0].set_xlabel("round")
    assert any("between whole numbers" in b for b in check_figure(fig))
    fig, axes = _fig()
    axes[0][0].plot([1, 2, 3, 4], np.linspace(0, 1, 4))
    axes[0][0].set_xlabel("round")
    style.integer_ticks(axes[0][0].xaxis)
    assert not any("between whole numbers" in b for b in check_figure(fig))


def test_bands_need_three_values_and_a_mark():
    fig, axes = _fig()
    ax = axes[0][0]
    ax.fill_between([0, 1], [0, 0], [1, 1])
    assert any("does not say how many" in b for b in check_figure(fig))
    fig, axes = _fig()
    style.band(axes[0][0], [0, 1, 2], [0.5] * 3, [0.2] * 3, [0.8] * 3, "C0", "x", n=2)
    assert not axes[0][0].collections  # two values: no band at all
    style.band(axes[0][0], [0, 1, 2], [0.5] * 3, [0.2] * 3, [0.8] * 3, "C0", "x", n=3)
    assert not [b for b in check_figure(fig) if "band" in b]
    fig, axes = _fig()
    drawn = style.seed_curves(axes[0][0], [1, 2, 3], [[0.1, 0.5, 0.9], [0.2, 0.4, 1.0]], "C1", "two seeds",
                              bounds=(0, 1))
    # two seeds: no band; their mean over each seed's thin line, one legend entry
    assert drawn == 2 and not axes[0][0].collections and len(axes[0][0].lines) == 3
    assert axes[0][0].get_legend_handles_labels()[1] == ["two seeds (mean of 2 seeds; thin: each)"]


def test_titles_need_paper_data_size_and_seeds():
    good = style.face("CLoVE Table 7 reproduced", "8x8 digits standing in for MNIST", "20 clients x 20 samples, "
                      "40 rounds", "2 seeds")
    assert title_problems(good) == []
    assert len(title_problems("CLoVE Table 7 reproduced: 8x8 digits, quick size, 2 seeds")) == 2
    assert title_problems("Phase diagrams, beyond the papers\ndata: synthetic; size: K = 3; 3 trials") == []
    assert any("seeds" in p for p in title_problems("IFCA Fig. 4\ndata: digits; size: 8 clients"))


def test_small_text_fails():
    fig, axes = _fig()
    axes[0][0].set_ylabel("tiny", fontsize=5)
    assert any("pt (<" in b for b in check_figure(fig))


def test_stand_in_and_synthetic_numbers_are_never_held_to_the_papers_pm(checked):
    from figures.report.headline import classify

    _, status = checked
    kinds = {name: t.kind for name, t in load_targets().items()}
    for name, st in status.items():
        for r in st.get("rows", []) if st["status"] == "done" else []:
            assert classify(r) not in ("within", "outside", "equal", "differs"), (name, kinds[name], r)


def test_dot_plot_whiskers_only_from_three_seeds(tmp_path, monkeypatch):
    from figures.plots.dotplot import Dot, dot_plot

    seen = {}

    def keep(fig, path, **kw):
        seen["gids"] = [c.get_gid() for ax in fig.axes for c in ax.collections if c.get_gid()]
        seen["problems"] = check_figure(fig)

    monkeypatch.setattr(style, "save_figure_atomic", keep)
    title = style.face("IFCA Table I reproduced", "rotated 8x8 digits", "m = 16 clients of n = 25", "3 seeds")
    dot_plot(tmp_path, "x", [Dot("p", "IFCA", [90, 91, 93], 94.2, 0.03), Dot("p", "Global", [80, 82], 86.7, 0.1)],
             xlabel="test accuracy %", title=title, bounds=(0, 100))
    assert seen["gids"] == ["band n=3"] and seen["problems"] == []  # Global's two seeds: points, no whisker
    fig, axes = _fig()
    axes[0][0].errorbar([1], [1], xerr=[0.5]).lines[2][0].set_gid("band n=2")
    assert any("from 2 values" in b for b in check_figure(fig))


def test_dot_plot_says_why_a_panel_has_no_reproduced_value(tmp_path, monkeypatch):
    """A panel whose runs ended before the plotted stages carries the reason, not an unexplained gap."""
    from figures.plots.dotplot import Dot, dot_plot

    seen = {}

    def keep(fig, path, **kw):
        seen["texts"] = {ax.get_title(): [t.get_text() for t in ax.texts] for ax in fig.axes}
        seen["problems"] = check_figure(fig)

    monkeypatch.setattr(style, "save_figure_atomic", keep)
    title = style.face("SR-FCA Table 4 reproduced", "LEAF FEMNIST", "10 users", "3 seeds")
    why = "SR-FCA ended before its stages in every seed: no cluster left"
    dot_plot(tmp_path, "x", [Dot("MNIST", "After 1st REFINE", [90, 91, 93], 91.9, 0.4),
                             Dot("FEMNIST", "After 1st REFINE", [], 83.8, 1.5)],
             xlabel="test accuracy %", title=title, bounds=(0, 100), notes={"FEMNIST": why, "MNIST": "unused"})
    assert [t.replace("\n", " ") for t in seen["texts"]["FEMNIST"]] == [why] and seen["texts"]["MNIST"] == []
    assert seen["problems"] == []


def _faced(fig, data="synthetic mixed linear regression"):
    style.suptitle(fig, style.face("IFCA Fig. 3(a) reproduced", data, "m = 20 clients", "3 trials"))
    return fig


def test_a_missing_or_cut_title_fails():
    fig, axes = _fig()
    axes[0][0].plot([0, 1], [0, 1])
    assert any("no title" in b for b in check_figure(fig))
    fig, axes = _fig()
    axes[0][0].plot([0, 1], [0, 1])
    _faced(fig)
    axes[0][0].set_title("Lemma A.1: SLV means of different clusters are …")
    assert any("is cut" in b for b in check_figure(fig))
    fig, axes = _fig()
    axes[0][0].set_ylabel("P[a client of cluster 1 estimates a ...")
    _faced(fig)
    assert any("is cut" in b for b in check_figure(fig))
    fig, axes = _fig()
    axes[0][0].plot([0, 1], [0, 1])
    axes[0][0].set_title("Lemma A.1: SLV means of different clusters\nare Δ/√(4 + σ²) apart")
    _faced(fig)
    assert check_figure(fig) == []


# the face of IFCA Fig. 4 at the tiny size: greedy wrapping to the figure's width left "seed" alone on the last line
FIG4_FACE = style.face("IFCA Fig. 4 reproduced (accuracy of the cluster identities per round, one panel per (m, n))",
                       "rotated 8x8 digits standing in for MNIST (tiny run)", "(m,n) ∈ {(16,25)}, 3 rounds", "1 seed")


def test_an_orphan_title_word_fails():
    fig, axes = _fig()
    axes[0][0].plot([0, 1], [0, 1])
    fig.suptitle("IFCA Fig. 3(a) reproduced\ndata: synthetic mixed linear regression; size: m = 20 clients; 3 trials "
                 "per\npoint", fontsize=9)
    assert any("orphan title word 'point'" in b for b in check_figure(fig))
    fig, axes = _fig()
    axes[0][0].plot([0, 1], [0, 1])
    axes[0][0].set_title("IFCA journal Lemma 1\nseeds")  # a panel's title too
    _faced(fig)
    assert [b for b in check_figure(fig) if "orphan" in b] == [
        "axes 0 title 'IFCA journal Lemma 1\\nseeds': orphan title word 'seeds' alone on the last line (wrap the "
        "title in balanced lines: figures.plots.style.wrap)"]
    # a bracketed line of its own (theory panels' verdicts), a one-line title and a last line of two words pass
    assert orphan_word("IFCA journal Theorem 1\n(holds)") is None and orphan_word("σ = 0.1") is None
    assert orphan_word("a b\nc d") is None and orphan_word("a b\nc") == "c"


def test_wrapped_titles_are_balanced_without_orphan_words():
    width = 3.7  # inches: 49 characters of 9-point text a line once the margin is taken off (style.wrap)
    greedy = "\n".join(textwrap.wrap(FIG4_FACE.split("\n")[1], int((width - 0.2) * 72 / (0.56 * 9))))
    assert orphan_word(greedy) == "seed"  # what the figure showed before
    fig, axes = _fig(width, 4.0)
    axes[0][0].plot([0, 1], [0, 1])
    style.suptitle(fig, FIG4_FACE)
    assert orphan_word(fig._suptitle.get_text()) is None and check_figure(fig) == []
    text = "data: synthetic mixed linear regression (tiny run); size: k = 2, m ∈ {4, 8}, n ∈ {25}; 3 trials per point"
    for chars in range(20, 120):
        lines = style.balanced_lines(text, chars)
        assert len(lines) == len(textwrap.wrap(text, chars, break_on_hyphens=False))  # no more lines than greedy
        assert max(map(len, lines)) <= chars and " ".join(lines) == text
        assert len(lines) == 1 or len(lines[-1].split()) > 1, (chars, lines)
    assert "{4, 8}" in style.wrap(text, 2.0) and "SR-FCA" in style.wrap("x " * 30 + "SR-FCA y", 2.0)


def _heat(values_x, values_y, even: bool):
    fig, axes = _fig(4.0, 3.4)
    ax = axes[0][0]
    grid = np.arange(len(values_x) * len(values_y), dtype=float).reshape(len(values_y), len(values_x))
    if even:  # equal cells, a tick at each centre labelled with its value
        ax.imshow(grid, origin="lower", aspect="auto")
        ax.set_xticks(range(len(values_x)), [f"{v:g}" for v in values_x])
        ax.set_yticks(range(len(values_y)), [f"{v:g}" for v in values_y])
    else:  # cells between the midpoints of the values: uneven where the values are
        def edges(v):
            v = np.asarray(v, dtype=float)
            mid = (v[1:] + v[:-1]) / 2
            return np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])

        ax.pcolormesh(edges(values_x), edges(values_y), grid)
        ax.set_xticks(values_x)
        ax.set_yticks(values_y)
    ax.grid(False)
    return _faced(fig)


def test_heatmap_cells_must_be_even_with_ticks_at_their_centres():
    bad = check_figure(_heat([0.0, 0.1, 0.2, 0.4], [0.1, 0.25, 0.5, 0.75, 1.0], even=False))
    assert any("uneven x size" in b for b in bad) and any("uneven y size" in b for b in bad)
    fig = _heat([0.0, 0.1, 0.2], [1.0, 2.0], even=True)
    fig.axes[0].set_xticks([0.5, 1.5], ["a", "b"])  # ticks between the cells
    assert any("off the centres" in b for b in check_figure(fig))
    assert check_figure(_heat([0.0, 0.1, 0.2, 0.4], [0.1, 0.25, 0.5, 0.75, 1.0], even=True)) == []


def test_one_colour_scale_per_comparison():
    def pair(same: bool, mark: bool = False):
        fig, axes = style.new_figure(1, 2, width=3.0, height=3.0)
        for i, ax in enumerate(axes[0]):
            data = np.arange(4.0).reshape(2, 2) * (1 if i == 0 else 10)
            im = ax.imshow(data, **({"vmin": 0, "vmax": 30} if same else {}))
            ax.set_xticks([0, 1])
            ax.set_yticks([0, 1])
            ax.grid(False)
            if mark:
                style.separate_scale(im, "different quantities")
        return _faced(fig)

    assert any("different colour scales" in b for b in check_figure(pair(same=False)))
    assert not any("colour scales" in b for b in check_figure(pair(same=True)))
    assert not any("colour scales" in b for b in check_figure(pair(same=False, mark=True)))


def test_a_stand_in_named_as_the_real_set_fails():
    def panel(name, data):
        fig, axes = _fig()
        axes[0][0].plot([0, 1], [0, 1])
        axes[0][0].set_title(name)
        return _faced(fig, data)

    digits = "rotated 8x8 digits standing in for MNIST (quick run)"
    assert any("names MNIST" in b for b in check_figure(panel("MNIST (rotated)", digits)))
    assert any("names MNIST" in b for b in check_figure(panel("ARI per round (MNIST column)", digits)))
    assert style.stand_in_name("MNIST (rotated)") == "digits (rotated), for MNIST"
    assert check_figure(panel(style.stand_in_name("MNIST (rotated)"), digits)) == []
    assert check_figure(panel("the paper's MNIST column", digits)) == []
    assert check_figure(panel("MNIST (rotated)", "rotated MNIST (medium run)")) == []  # the real set was run


def test_an_identity_the_exact_value_contradicts_is_titled_by_its_factor():
    from figures.targets.theory_figs import _verdicts

    rows = [{"direction": "equal", "verdict": "violated", "bound": 10.0 * k, "exact": 2.0 * k, "empirical": math.nan}
            for k in (1, 2, 3)]
    assert _verdicts(rows) == "identity fails: stated = 5 × exact"  # SR-FCA Prop. 4.1: off by the factor d = 5
    upper = [dict(r, direction="upper") for r in rows]
    assert _verdicts(upper) == "violated"  # a bound the value exceeds is violated


def _h2h_rows(init: float, reference: float) -> list[dict]:
    from figures.targets.head_to_head import ALGOS, D0

    out = []
    for sweep, xs in (("separation", [0.2, D0]), ("init", [0.45, 0.05]), ("unknown-k", [2, 3])):
        for x in xs:
            for a in ALGOS:
                v = init if sweep == "init" else reference if (sweep, x) == ("separation", D0) else 0.1
                out.append({"sweep": sweep, "x": x, "algorithm": a, "misclustering_mean": v, "misclustering_lo": v,
                            "misclustering_hi": v, "ari_mean": 1 - v, "ari_lo": 1 - v, "ari_hi": 1 - v,
                            "clusters_found_mean": 3, "trials": 6})
    return out


def test_head_to_head_draws_no_flat_initialisation_panel(tmp_path, monkeypatch):
    import figures.targets.head_to_head as h2h

    seen = {}

    def keep(fig, path, **kw):
        if str(path).endswith(".png"):
            seen["axes"], seen["problems"] = fig.axes, check_figure(fig)

    monkeypatch.setattr(style, "save_figure_atomic", keep)
    s = {"trials": 6, "gen": {"clients_per_cluster": 8, "n": 50, "d": 5, "sigma": 0.5, "rounds": 50}, "size": "quick"}
    h2h.plot(s, _h2h_rows(init=0.0, reference=0.0), tmp_path)  # 0 everywhere: a note says why, no curve
    middle = seen["axes"][1]
    assert not middle.lines and "not drawn" in middle.get_title() and seen["problems"] == []
    h2h.plot(s, _h2h_rows(init=0.0, reference=0.33), tmp_path)  # alpha changes nothing: random against the ball
    middle = seen["axes"][1]
    assert len(middle.patches) == 5 and seen["problems"] == []  # five bars, no line against alpha
    labels = [t.get_text() for t in middle.get_yticklabels()]
    assert "IFCA, random init" in labels and "IFCA, ball init" in labels


def test_phase_cells_print_no_pm_from_three_trials(tmp_path, monkeypatch):
    import figures.targets.phase as phase

    texts = {}

    def keep(fig, path, **kw):
        if str(path).endswith(".png"):
            texts["cells"] = [t.get_text() for ax in fig.axes for t in ax.texts]

    monkeypatch.setattr(style, "save_figure_atomic", keep)
    s = {"deltas": [0.5, 1.0], "ns": [15, 30], "trials": 3, "sigma": 0.5, "d": 5, "K": 3, "size": "quick",
         "gen": {"clients_per_cluster": 8, "rounds": 50}}
    recs = [[{"status": "ok", "result": {a: {"misclustering_matched": 0.0} for a in phase.ALGOS}}] * 3] * 4
    phase.plot(s, phase.summarise(s, recs), tmp_path)
    assert texts["cells"] and not any("±" in t for t in texts["cells"])
    assert all("3/3 all right" in t for t in texts["cells"])


def test_the_committed_fig3_figures_read_cleanly_and_say_paper_scale(tmp_path, monkeypatch):
    """The paper-scale IFCA Fig. 3(a) store redrawn (figures/measured/README.md): equal cells, a face with the paper's
    figure, its sizes, 'paper scale' and the trials; the public code's grid name only in small print."""
    from pathlib import Path

    import synth.report as report

    seen = {}

    def keep(fig, path, **kw):
        seen[path.name] = (check_figure(fig, dpi=kw.get("dpi", style.SAVE_DPI)), fig._suptitle.get_text(),
                           fig._supxlabel.get_text())

    monkeypatch.setattr(report, "save_figure_atomic", keep)
    store = Path(__file__).resolve().parents[1] / "figures" / "measured" / "ifca_fig3a_full_code" / "store"
    report.build_report(store, tmp_path)
    assert sorted(seen) == ["curve_0_success_vs_R.png", "phase_0_R_vs_sigma.png"]
    for name, (problems, face, small) in seen.items():
        flat = " ".join(face.split())
        # synth/report.py's own bands and seaborn palette: test_synth_report_uses_the_figure_style below
        assert [p for p in problems if not _SYNTH_STYLE(p)] == [], (name, problems)
        assert flat.startswith("IFCA Fig. 3(a): success probability; k = 2, m = 100 clients, n = 100")
        assert "paper scale" in flat and "40 trials per" in flat and "run_p2" not in flat
        assert "run_p2_r_noise" in small


def _SYNTH_STYLE(problem: str) -> bool:
    return "translucent bands" in problem or "colours alike" in problem


def test_synth_report_uses_the_figure_style(tmp_path, monkeypatch):
    from pathlib import Path

    import synth.report as report

    seen = []
    monkeypatch.setattr(report, "save_figure_atomic",
                        lambda fig, path, **kw: seen.extend(check_figure(fig, dpi=kw.get("dpi", style.SAVE_DPI))))
    store = Path(__file__).resolve().parents[1] / "figures" / "measured" / "ifca_fig3a_full_code" / "store"
    report.build_report(store, tmp_path)
    assert not [p for p in seen if _SYNTH_STYLE(p)]


def test_the_phase_boundary_runs_along_cell_edges_not_through_labels():
    """On the categorical (Δ, n) grid, SR-FCA's boundary is a staircase at half-integer x (cell edges), left of the
    first column with Δ ≥ Δ*(n) in each row."""
    from figures.targets.phase import boundary_steps

    xs, ys = boundary_steps([0.2, 0.5, 1.0, 1.6], [15, 30, 60], sigma=0.5, d=5)
    assert all(x % 1 == 0.5 for x in xs) and all(y % 1 == 0.5 for y in ys)
    # Δ*(15) = 1.05 -> column 1.6; Δ*(30) = 0.65 -> 1.0; Δ*(60) = 0.43 -> 0.5
    assert xs[::2] == [2.5, 1.5, 0.5]
    assert boundary_steps([0.2], [5], sigma=0.5, d=5)[0] == [0.5, 0.5]  # n <= d + 1: right of every column
