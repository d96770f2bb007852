"""CLoVE (Bhatia et al.) Sec. 5 and App. C on neural networks, supervised: Tables 1-4 and 7-12, with :mod:`nets`
(the unsupervised Table 5 and Figs. 2, 4 and 5: :mod:`figures.targets.clove_unsup`).

Protocol (CLoVE Sec. 5.1): Adam, batch 100, learning rate 1e-3, one local epoch per round, T = 100 rounds,
500 training samples per client (Amazon 1000, AG News 100), 20-100 clients in 4-10 clusters (the paper does not
say which per table: ``--full`` uses 5 clients per cluster, 4 clusters, 5 for label skews 3/4 as App. C.1.2
states), test data of each client from its own distribution, models scored on their own clients ("cluster"
rule), ARI of the final clustering, 3 seeds.  Baselines in the toolkit: FedAvg (global), Local-only, CFL,
IFCA, the clustered FeSEM, FlexCFL, PACFL and the personalised Per-FedAvg, FedProto, FedALA, FedPAC.

Over 700 lines, kept whole: the supervised tables share one set of runs (``_sup_runs``, ``_text_runs``), one scoring
rule per method (``SCORING``, the PFLlib options) and one protocol per cell; split by table they would each rebuild
them.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ..plots.dotplot import Dot, dot_plot
from ..plots.style import (
    algo_colour,
    constant_note,
    drawing,
    face,
    figure_legend,
    integer_ticks,
    marker,
    new_figure,
    palette,
    save,
    seed_curves,
    seeds_text,
    suptitle,
)
from ..registry import Context, Section, register
from ..runs import summarise_values
from ..verdicts.compare import Row, build_section, claim_row, not_run_row, numeric_row, write_rows, write_table
from ..verdicts.published import claim, lookup, table
from ..verdicts.rules import (
    SHOWN,
    PaperNumber,
    best_claim,
    equal_claim,
    level_claim,
    ordering_rows,
    paper_relation,
    seed_values,
)
from .netcommon import (
    NOT_IN_TOOLKIT,
    base_dataset,
    cfl_split_row,
    data_missing,
    data_used,
    errors,
    full_data_missing,
    nets_missing,
    ok,
    rounds_to,
    run_nets,
    seed_histories,
    substitute_reason,
    summary_by,
)

MIXINGS = {"Label skew 1": "label-skew-1", "Concept shift": "concept-shift", "Label skew 2": "label-skew-2",
           "Feature skew": "feature-skew", "Label skew 3": "label-skew-3", "Label skew 4": "label-skew-4"}
IMAGE = [("MNIST", "mnist"), ("CIFAR-10", "cifar"), ("FMNIST", "fmnist")]
SUP = [("FedAvg", "global"), ("Local-only", "local"), ("CFL", "cfl"), ("IFCA", "ifca"), ("CLoVE", "clove")]
CLUSTERED = ("CFL", "IFCA", "CLoVE")
# the clustered systems of CLoVE Tables 1-2, 4, 7-9 (synth/algorithms/{fesem,flexcfl,pacfl}.py)
SUP += [("FeSEM", "fesem"), ("FlexCFL", "flexcfl"), ("PACFL", "pacfl")]
CLUSTERED += ("FeSEM", "FlexCFL", "PACFL")
# personalised baselines (each client scored with its own model); rows of Tables 1, 3 and 7
PERSONAL = [("Per-FedAvg", "perfedavg"), ("FedProto", "fedproto"), ("FedALA", "fedala"), ("FedPAC", "fedpac")]
SUP += PERSONAL


# the variants of the code CLoVE ran (its Table 6): MMorafah/PACFL's stacked per-class SVDs (n_basis 5), its
# entry-wise angle, its 'average' HC (WPGMA) cut at its default threshold cluster_alpha = 3.5 degrees (CLoVE gives
# no threshold), so PACFL chooses the number of clusters; PFLlib (TsingZ0/PFLlib@d832e76) for the four personalised
# baselines: FedProto scores by the nearest global prototype, averages the clients' prototypes unweighted and
# collects them during training; FedPAC averages the prototypes unweighted and assigns the combined heads as PFLlib
# (serverpac.py's mismatch, which costs it 0.11 in bench/pfllib_side_by_side.py); Per-FedAvg trains twice per round,
# averages by n_i, takes its meta-steps on minibatches and is scored after one step on one minibatch (_personal adds
# its batch size and sets local_steps to the cell's one epoch); FedALA learns its
# weights per minibatch (_personal adds the batch size) with the start phase unbounded
CODE_VARIANTS = {
    "pacfl": ({"algo_params": {"subspace": "per_class", "n_subspace": 5, "proximity": "pairwise",
                               "hc_linkage": "weighted", "distance_threshold": 3.5}},
              "PACFL as its authors' code (CLoVE Table 6): per-class SVDs, 5 vectors per class, entry-wise angle, "
              "WPGMA cut at the code's default 3.5 degrees (K chosen by the threshold)"),
    "fedproto": ({"algo_params": {"scoring": "prototype", "prototype_mean": "clients", "local_prototypes": "during"}},
                 "FedProto as PFLlib (CLoVE Table 6): scored by the nearest global prototype, prototypes the "
                 "clients' unweighted mean of the features seen during training"),
    "fedpac": ({"algo_params": {"prototype_mean": "clients", "head_assignment": "pfllib"}},
               "FedPAC as PFLlib (CLoVE Table 6): global prototypes the clients' unweighted mean, combined heads "
               "assigned as PFLlib does (to the wrong clients, a defect of that code)"),
    "perfedavg": ({"algo_params": {"meta_passes": 2, "meta_weights": "samples"}},
                  "Per-FedAvg as PFLlib (CLoVE Table 6): meta-steps on minibatches (two halves of a shuffled batch "
                  "of twice the batch size), two training passes of one epoch per round, models averaged by n_i, "
                  "scored after one step of size alpha on one random training minibatch"),
    "fedala": ({"algo_params": {"ala_max_steps": None}},
               "FedALA as PFLlib (CLoVE Table 6): weights learned per minibatch, the first aggregation's weight "
               "training until its losses settle (no bound)"),
}
# the PFLlib options that take the cell's minibatch size (PFLlib uses the training batch size for all of them)
BATCH_OPTIONS = {"perfedavg": ("meta_adapt_batch", "meta_batch"), "fedala": ("ala_batch_size",)}
# Per-FedAvg's alpha = beta: PFLlib sets both to its learning rate, default 0.005 (main.py:400, clientperavg.py:14)
PERFEDAVG_STEP = 0.005


def _personal(ctx: Context, algo: str, batch_size: int | None = None) -> tuple[dict, str]:
    """Point overrides of a personalised baseline or a code variant, and the note its rows carry ({} and "" for
    the others); ``batch_size`` is the cell's minibatch size, which PFLlib's options of Per-FedAvg and FedALA take."""
    if algo in CODE_VARIANTS and algo not in dict(PERSONAL).values():
        over, note = CODE_VARIANTS[algo]
        return {k: dict(v) if isinstance(v, dict) else v for k, v in over.items()}, note
    if algo not in dict(PERSONAL).values():
        return {}, ""
    over, notes = {}, []
    if ctx.size == "quick":  # run time: the four personalised baselines add ~40 s of CPU to --quick at 20 rounds
        over["rounds"] = 20
        notes.append("20 rounds (quick run time)")
    params: dict = {}
    if algo == "perfedavg":
        # Per-FedAvg's inner and outer steps are plain gradient steps (Alg. 1, PFLlib's PerAvgOptimizer), not Adam;
        # CLoVE does not report alpha and beta, PFLlib sets both to its learning rate (default 0.005)
        over.update(step_size=PERFEDAVG_STEP)
        params["meta_alpha"] = PERFEDAVG_STEP
        notes.append(f"gradient steps alpha = beta = {PERFEDAVG_STEP} (PFLlib's default; not reported by CLoVE)")
    if algo in CODE_VARIANTS:
        params.update(CODE_VARIANTS[algo][0]["algo_params"])
        notes.append(CODE_VARIANTS[algo][1])
    if algo in BATCH_OPTIONS and batch_size is not None:
        params.update(dict.fromkeys(BATCH_OPTIONS[algo], batch_size))
        if "meta_batch" in params:  # with minibatch meta-steps local_steps counts epochs: the cell's one epoch
            over["local_steps"] = 1
    if params:
        over["algo_params"] = params
    return over, "; ".join(notes)


def _mnist_available(ctx: Context) -> str | None:
    """The MNIST-only targets (Figs. 2, 4, 5): nets, and in --full the MNIST files."""
    return nets_missing(ctx) or (data_missing(ctx, "mnist") if ctx.real else None)


# test images per client at --full: CLoVE does not give its test size, and one class of MNIST's test split (892 to
# 1,135 images) does not hold 5 clients x 500 (Tables 1, 7) or 5 x 250 (Table 5) of them
FULL_N_TEST = 100


def _k(mixing: str) -> int:
    return 5 if mixing in ("Label skew 3", "Label skew 4") else 4


def _setting(ctx: Context, mixing: str, task: str = "classify") -> dict:
    """Clients, samples and training options at this size (one local epoch = ``local_steps`` minibatches)."""
    k = _k(mixing)
    if ctx.size == "full":
        # 100 test images per client (CLoVE gives no test size; the test split's class pools of ~1,000 images do
        # not hold 5 clients x 500 of one class)
        return dict(clients=5 * k, n_per_client=500, n_test=FULL_N_TEST, batch_size=100, local_steps=5, rounds=100)
    if ctx.size == "medium":
        # the paper's clients, one local epoch of 5 minibatches, fewer samples and rounds (see _reduced)
        return dict(clients=5 * k, n_per_client=MEDIUM["n"], n_test=MEDIUM["n_test"], batch_size=MEDIUM["n"] // 5,
                    local_steps=5, rounds=MEDIUM["rounds"])
    if ctx.size == "quick":
        # the digits pool has ~125 training and ~54 test images per class: 20 training / 8 test samples per
        # client keep every mixing (shared classes of label skew 2, Dirichlet draws of label skew 3) drawable
        # without replacement; batch 4 keeps 5 minibatches per epoch, as 500 / 100 in the paper.  30 rounds (40
        # before): every method's ARI is settled by round 10, and from round 30 to 40 test accuracy moves by at most
        # 3 points, alike for every method (one seed, label skews 1 and 3: CLoVE 0.99 / 0.63 -> 0.99 / 0.65, the
        # global model 0.79 / 0.60 -> 0.80 / 0.63), at three quarters of the CPU time
        return dict(clients=(5 if k == 5 else 4) * k, n_per_client=20, n_test=8, batch_size=4, local_steps=5,
                    rounds=30)
    return dict(clients=2 * k, n_per_client=10, n_test=5, batch_size=5, local_steps=2, rounds=3)


def _seeds(ctx: Context) -> int:
    return ctx.pick(1, 2, 3, medium=3)


# medium runs: MNIST from the data directory at the paper's clients per cluster and seeds (FMNIST: MEDIUM_BUDGET)
MEDIUM = dict(n=100, n_test=50, rounds=20, model="mlp")
# CFL's thresholds are problem-specific and CLoVE does not give them; Sattler et al.'s defaults (0.05, 0.5) never
# split here (MNIST label skew 1, seed 0: mean update norm 0.28-0.39 > eps1 in every round). These sit between the
# measured mean (0.28-0.39) and largest client (1.06-1.15) update norms of that run.
CFL_MEDIUM = dict(eps1=0.4, eps2=0.8)
# what a medium run leaves out to stay within its hour on 2 CPU cores (per-trial costs measured on this machine:
# supervised MLP runs 3-11 s, a text run 60-90 s, an autoencoder run on 30 clients x 10 models ~60 s)
MEDIUM_BUDGET = "medium run: outside its 60-minute budget on 2 CPU cores (MNIST is run); runs with --full"
TEXT_MEDIUM_ALGOS = ("global", "local", "cfl", "ifca", "clove")  # the paper's own five (CLoVE Sec. 5.1)
TEXT_MEDIUM_BUDGET = ("medium run: outside its 60-minute budget on 2 CPU cores (a text run takes 60-90 s; the medium "
                      "run has the paper's five methods); runs with --full")


def _reduced(ctx: Context) -> str | None:
    """What a reduced run of the supervised tables changes from the paper's setting (CLoVE Sec. 5.1)."""
    if ctx.size != "medium":
        return None
    return (f"{MEDIUM['n']} training / {MEDIUM['n_test']} test samples per client (paper 500), batch "
            f"{MEDIUM['n'] // 5} (paper 100: still 5 minibatches per epoch), {MEDIUM['rounds']} rounds (paper 100), "
            f"IFCA's MLP (paper: a CNN), CFL's thresholds eps1 = {CFL_MEDIUM['eps1']}, eps2 = {CFL_MEDIUM['eps2']} "
            "(from measured update norms; the paper gives none)")


def _image_columns(ctx: Context) -> list[tuple[str, str, str | None]]:
    """(column, nets base, why not run or None) for MNIST, CIFAR-10, FMNIST at this size."""
    out = []
    for col, base in IMAGE:
        if not ctx.real:
            why = None if base == "mnist" else f"{ctx.size} run: only MNIST has an embedded substitute (digits)"
        else:
            why = data_missing(ctx, base) or (MEDIUM_BUDGET if ctx.size == "medium" and base == "fmnist" else None)
        out.append((col, base, why))
    return out


def _sup_runs(ctx: Context, mixing: str):
    """The runs of one data mixing (all image data sets, the five algorithms); records keyed (column, algorithm)."""
    st = _setting(ctx, mixing)
    points, index = [], {}
    for col, base, why in _image_columns(ctx):
        if why:
            continue
        for label, algo in SUP:
            index[(col, label)] = len(points)
            # CLoVE App. B: a CNN for MNIST/FMNIST; the 8x8 digits of reduced runs are too small for it (IFCA's MLP)
            model = {"mnist": "cnn", "fmnist": "cnn"}.get(base, "auto") if ctx.size == "full" else \
                MEDIUM["model"] if ctx.size == "medium" else "auto"
            points.append(dict(dataset=base_dataset(ctx, base, MIXINGS[mixing]), algo=algo, clusters=_k(mixing),
                               model=model, optimizer="adam", step_size=1e-3, averaging="model", eval_every=0, **st))
            points[-1].update(_personal(ctx, algo, st["batch_size"])[0])
            if algo == "cfl" and ctx.size == "medium":
                points[-1].update(CFL_MEDIUM)
    folder = "clove-" + MIXINGS[mixing]
    groups = run_nets(ctx, folder, points, _seeds(ctx), seed=2025 + list(MIXINGS).index(mixing)) if points else []
    return {key: groups[i] for key, i in index.items()}


def _intro(ctx: Context, what: str) -> str:
    st = _setting(ctx, "Label skew 1")
    size = ("" if ctx.size == "full" else f" Reduced (medium): MNIST, {_reduced(ctx)}; FMNIST is outside the "
            "medium run's budget; CIFAR-10 is not in the data directory. Numbers are compared by the orderings of "
            "methods." if ctx.size == "medium" else
            f" Reduced ({ctx.size}): the embedded 8x8 digits replace MNIST (FMNIST and CIFAR-10 are not run), "
            f"{st['clients'] // 4} clients per cluster (5 for label skews 3/4) of {st['n_per_client']} training and "
            f"{st.get('n_test')} test samples, batch {st['batch_size']} ({st['local_steps']} minibatches = one local "
            f"epoch), {st['rounds']} rounds, IFCA's MLP in place of CLoVE's CNN (8x8 inputs). Reproduced numbers "
            "are not comparable with the paper's; the ordering rows are.")
    return (f"CLoVE {what}; Adam, learning rate 1e-3, one local epoch per round, mean ± std over {_seeds(ctx)} "
            f"seed(s).{size}")


def degenerate(recs: list[dict], rows: list[Row]) -> list[Row]:
    """ARI rows of a method whose clustering is degenerate in every finished seed (one cluster, or every client
    alone): marked so, and never counted as agreement (ARI 0 = 0 says nothing about clustering)."""
    done = [(r.get("result") or {}) for r in recs if ok(r)]
    found = {int(d["n_clusters"]) for d in done if isinstance(d.get("n_clusters"), int)}
    clients = {int(d["clients"]) for d in done if isinstance(d.get("clients"), int)}
    if not done or len(found) != 1:
        return rows
    k = found.pop()
    what = "one cluster" if k == 1 else "every client alone" if k in clients else None
    if what is None:
        return rows
    return [not_agreement(row, f"degenerate clustering: {what} in every seed; an ARI of a clustering that groups "
                               "nothing is no agreement") for row in rows]


def not_agreement(row: Row, why: str) -> Row:
    """``row`` noted with ``why``; where its value sits within the declared margin of the paper's (an agreement would
    rest on what ``why`` names: a degenerate clustering, a 0/0 ratio), shown and not counted instead."""
    row = replace(row, note="; ".join(filter(None, [row.note, why])))
    if row.paper_number is None or row.stats is None:
        return row
    paper = PaperNumber(*row.paper_number)
    if abs(row.stats[0] - paper.value) > paper.margin:
        return row  # a difference beyond the margin is real whatever the clustering
    return replace(row, verdict=f"{SHOWN} ({why})", counted=False, paper_number=None)


def _rows_for(ctx: Context, artifact: str, mixings: list[str], metric: str, algos: list[str], scale: float):
    rows, out = [], []
    pub_algos = list(dict.fromkeys(p.row for p in table("CLoVE", artifact)))
    for mixing in mixings:
        runs = _sup_runs(ctx, mixing)
        for col, base, why in _image_columns(ctx):
            reason = substitute_reason(ctx, base, _reduced(ctx))
            if not why and metric == "ari":
                rows.append(cfl_split_row(f"{mixing} / {col}: CFL split check", runs[(col, "CFL")],
                                          _setting(ctx, mixing)["rounds"]))
            if not why:  # the paper's pairwise orderings and gaps among the toolkit's algorithms, tested over seeds
                here = [a for a in pub_algos if a in algos]
                rows += ordering_rows(f"{mixing} / {col}", {a: lookup("CLoVE", artifact, a, col, mixing) for a in here},
                                      {a: seed_values(runs[(col, a)], _scored_key(runs[(col, a)], metric, a))
                                       for a in here}, scale, reduced=reason or "")
            for alg in pub_algos:
                pub = lookup("CLoVE", artifact, alg, col, mixing)
                item = f"{mixing} / {col} / {alg}"
                if alg not in algos:
                    rows.append(not_run_row(item, pub, NOT_IN_TOOLKIT))
                    continue
                if why:
                    rows.append(not_run_row(item, pub, why))
                    continue
                recs = runs[(col, alg)]
                key = _scored_key(recs, metric, alg)
                s = summary_by(recs, key)
                note = "; ".join([*errors(recs), *filter(None, [_personal(ctx, dict(SUP)[alg])[1]])])
                scored = _clove_row(item, pub, recs, metric, alg, scale, reason, note)
                rows += degenerate(recs, scored) if metric == "ari" else scored
                out.append({"mixing": mixing, "column": col, "algorithm": alg, "mean": s.mean, "std": s.std,
                            "seeds": s["n"], "published": pub.value if pub else None,
                            "published_pm": pub.pm if pub else None, "values": seed_values(recs, key)})
    return rows, out


def _size(ctx: Context, mixings: list[str]) -> str:
    """Clients, samples and rounds of the supervised runs, for a figure's title."""
    parts = []
    for k in dict.fromkeys(_k(m) for m in mixings):
        st = _setting(ctx, next(m for m in mixings if _k(m) == k))
        parts.append(f"{k} clusters x {st['clients'] // k} clients")
    st = _setting(ctx, mixings[0])
    return (f"{' or '.join(parts)}, {st['n_per_client']} training samples per client, {st['rounds']} rounds")


def _dots(folder, table_rows, stem, xlabel, scale, title, bounds=(0.0, 100.0)):
    """The table as a faceted dot plot: one panel per mixing (and data set where several ran)."""
    columns = list(dict.fromkeys(r["column"] for r in table_rows))
    dots = [Dot(r["mixing"] if len(columns) == 1 else f"{r['mixing']} / {r['column']}", r["algorithm"],
                [scale * v for v in r["values"]], r["published"], r["published_pm"]) for r in table_rows]
    names = dot_plot(folder, stem, dots, xlabel=xlabel, title=title, bounds=bounds,
                     paper_label=f"paper ({', '.join(columns)}): value ± std")
    return [(names[0], title)], names


def _order_rows(out: list[dict], what: str, artifact: str, higher_better: bool = True) -> list[Row]:
    """The paper's claim that its best method leads (Sec. 5.2), judged over seeds (:func:`best_claim`)."""
    rows = []
    for (mixing, col) in dict.fromkeys((r["mixing"], r["column"]) for r in out):
        here = {r["algorithm"]: r for r in out if r["mixing"] == mixing and r["column"] == col}
        pubs = {p.row: p for p in table("CLoVE", artifact) if p.group == mixing and p.column == col and p.row in here}
        means = {a: r["mean"] for a, r in here.items()}
        order = sorted(means, key=lambda a: -means[a] if higher_better else means[a])
        item = f"{mixing} / {col}: the paper's best algorithm leads, by {what}"
        if not pubs:
            rows.append(Row(item, "n/a", " > ".join(order), "—", "no published value"))
            continue
        porder = sorted(pubs, key=lambda a: -pubs[a].value if higher_better else pubs[a].value)
        top = pubs[porder[0]]
        best = [a for a in porder if paper_relation(top.value, top.pm, pubs[a].value, pubs[a].pm,
                                                    max(top.decimals, pubs[a].decimals, 1)) == 0]
        verdict = best_claim({a: here[a]["values"] for a in pubs}, best, higher_better)
        rows.append(Row(item, f"best: {', '.join(best)} (tied within the published ±); {' > '.join(porder)}",
                        f"means: {' > '.join(order)}", "—", verdict))
    return rows


def _table_target(artifact: str, mixings: list[str], metric: str, scale: float, what: str, title: str):
    algos = [a for a, _ in SUP] if metric == "test_accuracy" else list(CLUSTERED)

    def run(ctx: Context) -> Section:
        rows, out = _rows_for(ctx, artifact, mixings, metric, algos, scale)
        rows += _order_rows(out, what, artifact)
        if metric == "ari" and artifact == "Table 2":
            clove = {f"{r['mixing']} / {r['column']}": r["values"] for r in out if r["algorithm"] == "CLoVE"}
            rows.append(claim_row("CLoVE ARI = 1.00 everywhere", claim("CLoVE", "clove-ari-1"),
                                  "CLoVE ARI per case: " + "; ".join(f"{k}: {[round(v, 2) for v in vs]}"
                                                                     for k, vs in clove.items()),
                                  equal_claim(clove, 1.0, margin=0.005) if clove else "not run (no finished run)"))
        folder = ctx.folder(name := f"clove-{artifact.lower().replace(' ', '')}")
        files = [write_table(folder / f"{what}.csv", list(out[0]) if out else ["mixing"], out)]
        figs = []
        if out:
            figs, names = _dots(folder, out, f"clove_{artifact.lower().replace(' ', '')}",
                                what + (" %" if scale == 100 else ""), scale,
                                face(f"CLoVE {artifact} reproduced: {title.split(': ', 1)[1]}",
                                     data_used(ctx, "MNIST"), _size(ctx, mixings), seeds_text(_seeds(ctx))),
                                bounds=(0.0, 100.0) if scale == 100 else (-1.0, 1.0))
            files += names
        files.append(write_rows(rows, folder / "comparison.csv"))
        return build_section(f"CLoVE {artifact}", _intro(ctx, title), name, figs, rows, files)
    return run


for _art, _mix, _metric, _scale, _what, _title in [
        ("Table 1", ["Label skew 1", "Concept shift", "Label skew 2", "Feature skew"], "test_accuracy", 100.0,
         "accuracy", "Table 1: supervised test accuracy (%)"),
        ("Table 2", ["Label skew 1", "Concept shift", "Label skew 2", "Feature skew"], "ari", 1.0, "ARI",
         "Table 2: ARI of the final clustering"),
        ("Table 7", ["Label skew 3", "Label skew 4"], "test_accuracy", 100.0, "accuracy",
         "Table 7: supervised test accuracy (%), label skews 3 and 4"),
        ("Table 8", ["Label skew 3", "Label skew 4"], "ari", 1.0, "ARI", "Table 8: ARI, label skews 3 and 4")]:
    register(f"clove-{_art.lower().replace(' ', '')}", "CLoVE", f"{_art}: {_title.split(': ', 1)[1]} "
             f"({', '.join(_mix)})", kind="nets", available=nets_missing)(
        _table_target(_art, _mix, _metric, _scale, _what, _title))


# -- convergence (Tables 4 and 9) ------------------------------------------------------------------------------

def censored(conv: dict, key: str, rounds: int) -> tuple[list[float], str]:
    """Every seed's value of a convergence quantity (``rounds_to``'s ``first`` or ``percent``), none dropped, and a
    note saying how the censored seeds count.

    CLoVE's convergence tables average over every seed: Table 11's 34.0 ± 46.7 is the mean and population SD of
    1, 1 and 100, so a seed that never reaches ARI >= 0.9 counts at the round cap (100 rounds); and PACFL's
    "0.0 ± 0.0" % of a final ARI of 0.00 ± 0.00 counts a seed whose final ARI is 0 as 0 %.
    """
    if key == "first":
        never = sum(v is None for v in conv["first"])
        vals = [float(rounds) if v is None else float(v) for v in conv["first"]]
        why = (f"{never} of {len(vals)} seeds never reach ARI >= 0.9: counted at the round cap {rounds}, as the "
               "paper's Table 11 (34.0 ± 46.7 = 1, 1, 100) does") if never else ""
        return vals, why
    undefined = sum(not (v == v) for v in conv["percent"])
    vals = [0.0 if not (v == v) else float(v) for v in conv["percent"]]
    why = (f"undefined: {undefined} of {len(vals)} seeds end at ARI 0, so their % of final ARI is 0/0 (counted as "
           "0 %, as the paper's PACFL row, 0.0 ± 0.0 of a final ARI of 0.00, does)") if undefined else ""
    return vals, why


def _conv_target(artifact: str, mixings: list[str]):
    def run(ctx: Context) -> Section:
        rows, out = [], []
        pub_algos = list(dict.fromkeys(p.row for p in table("CLoVE", artifact)))
        folder = ctx.folder(name := f"clove-{artifact.lower().replace(' ', '')}")
        draw = drawing()  # the campaign reads these rows with figures off: no figure is built then
        curves = {}  # (mixing, algorithm): rounds and per-seed ARI of the MNIST column's runs (_conv_figure)
        clove_first = {}  # per (mixing, column): CLoVE's first round with ARI >= 0.9 per seed (never: rounds + 1)
        for mixing in mixings:
            runs = _sup_runs(ctx, mixing)
            for col, base, why in _image_columns(ctx):
                # medium: fewer samples, rounds and the MLP (_reduced) change how fast clusters form
                reason = substitute_reason(ctx, base, _reduced(ctx))
                for alg in pub_algos:
                    for quantity, key in (("% of final ARI reached in 10 rounds", "percent"),
                                          ("first round when ARI >= 90%", "first")):
                        pub = lookup("CLoVE", artifact, alg, f"{col}: {quantity}", mixing)
                        item = f"{mixing} / {col} / {alg} / {quantity}"
                        if alg not in CLUSTERED:
                            rows.append(not_run_row(item, pub, NOT_IN_TOOLKIT))
                            continue
                        if why:
                            rows.append(not_run_row(item, pub, why))
                            continue
                        conv = rounds_to(runs[(col, alg)], "ari", lambda v: v >= 0.9, percent_at=10)
                        never = sum(v is None for v in conv["first"])
                        vals, note = censored(conv, key, _setting(ctx, mixing)["rounds"])
                        if alg == "CLoVE" and key == "first":
                            clove_first[f"{mixing} / {col}"] = vals
                        s = summarise_values(vals)
                        row = numeric_row(item, pub, s.mean, s.std, s["n"], 1.0, reason)
                        rows.append(not_agreement(row, note) if note.startswith("undefined") else
                                    replace(row, note=note))
                        out.append({"mixing": mixing, "column": col, "algorithm": alg, "quantity": quantity,
                                    "mean": s.mean, "std": s.std, "seeds": s["n"], "never": never,
                                    "published": pub.value if pub else None})
                    if draw and not why and alg in CLUSTERED and col == "MNIST":
                        curves[(mixing, alg)] = seed_histories(runs[(col, alg)], "ari")
        names = _conv_figure(ctx, artifact, mixings, curves, folder)
        rows.append(claim_row("CLoVE: first round with ARI >= 90% (within 3 rounds: mean below 3.5)",
                              claim("CLoVE", "clove-2-3-rounds"),
                              "; ".join(f"{k}: {v}" for k, v in clove_first.items()) + " (never: the round cap)",
                              level_claim(clove_first, 3.5, below=True) if clove_first else
                              "not run (no finished run)"))
        files = [write_table(folder / "convergence.csv", list(out[0]) if out else ["mixing"], out), *names,
                 write_rows(rows, folder / "comparison.csv")]
        return build_section(f"CLoVE {artifact}", _intro(ctx, f"{artifact}: clustering convergence (percentage of "
                                                         "the final ARI reached at round 10; first round with "
                                                         "ARI >= 0.9), from the runs of Tables 1/2/7/8"), name,
                             [(names[0], "ARI per round, one panel per method (the paper's MNIST column's runs); "
                                         "dotted: ARI 0.9 and round 10")], rows, files)
    return run


def _conv_figure(ctx: Context, artifact: str, mixings: list[str], curves: dict, folder) -> list[str]:
    """Tables 4 and 9 as small multiples: one panel per method (its convergence is what the tables compare), one
    colour per data mixing, each curve the mean ARI over seeds with their spread (:func:`seed_curves`); dotted: the
    tables' thresholds, ARI 0.9 and round 10."""
    stem = f"clove_{artifact.lower().replace(' ', '')}"
    algos = [a for a in CLUSTERED if any(alg == a for _, alg in curves)]
    if not drawing() or not algos:
        return save(None, folder, stem)
    ncols = min(3, len(algos))
    fig, axes = new_figure(math.ceil(len(algos) / ncols), ncols, width=3.6, height=2.7, sharex=True, sharey=True)
    cols = palette(len(mixings))
    for ai, alg in enumerate(algos):
        ax = axes[ai // ncols][ai % ncols]
        for mi, mixing in enumerate(mixings):
            if (mixing, alg) in curves:
                seed_curves(ax, *curves[(mixing, alg)], cols[mi], mixing, marker(mi), bounds=(-1.0, 1.0),
                            stagger=(mi, max(4, len(mixings))))
        ax.axhline(0.9, color="grey", linestyle=":", linewidth=1)
        ax.axvline(10, color="grey", linestyle=":", linewidth=1)
        ax.set_title(alg, fontsize=10, color=algo_colour(alg), fontweight="bold")
        constant_note(ax, "ARI")  # a method whose every run stays at one value says so
        integer_ticks(ax.xaxis)
        if ai // ncols == (len(algos) - 1) // ncols:
            ax.set_xlabel("round")
        if ai % ncols == 0:
            ax.set_ylabel("ARI")
    for k in range(len(algos), axes.size):
        axes.ravel()[k].set_visible(False)
    figure_legend(fig, axes.ravel(), ncol=2, fontsize=8)  # below the panels: inside one it would cover the curves
    suptitle(fig, face(f"CLoVE {artifact} reproduced: ARI per round, one panel per method (runs of the paper's MNIST "
                       "column); dotted: ARI 0.9 and round 10", data_used(ctx, "MNIST"), _size(ctx, mixings),
                       seeds_text(_seeds(ctx))))
    return save(fig, folder, stem)


register("clove-table4", "CLoVE", "Table 4: convergence speed of the clustering (label skew 1, concept shift)",
         kind="nets", available=nets_missing)(_conv_target("Table 4", ["Label skew 1", "Concept shift"]))
register("clove-table9", "CLoVE", "Table 9: convergence speed (label skews 2-4, feature skew)", kind="nets",
         available=nets_missing)(_conv_target("Table 9", ["Label skew 2", "Label skew 3", "Label skew 4",
                                                         "Feature skew"]))


# -- text data sets (Tables 3, 10, 11) -------------------------------------------------------------------------

def _text_available(ctx: Context) -> str | None:
    return full_data_missing(ctx, "Amazon Reviews and AG News", ["amazon", "agnews"])


TEXT_DEVIATION = {"Amazon": "2 clients per domain, 8 in all (CLoVE: 20-100 clients), of 1,000 training reviews (the "
                            "paper's number) drawn independently within the domain, so that a domain's two clients "
                            "share about 60 % of their reviews (CLoVE: without replacement, which neither its own "
                            "per-category counts nor this copy's 2,000 labelled reviews per domain allow at 1,000 "
                            "per client); the Blitzer et al. 2007 copy, not Ni et al. 2019; 150 test reviews per "
                            "client (figures/published/protocols/clove-amazon.toml)",
                  "AG News": "this copy is AG News' test split only (6,080 / 1,520 after nets' split)"}


TEXT_MEDIUM_ROUNDS = 10
TEXT_MEDIUM_AMAZON = dict(n=300, n_test=100)  # 2 clients per domain of 300 / 100 reviews (--full: 750 / 150)


def _text_rounds(ctx: Context) -> int:
    """Rounds of the text runs (CLoVE: 100)."""
    return ctx.pick(3, 20, 100, medium=TEXT_MEDIUM_ROUNDS)


def _text_runs(ctx: Context):
    out = {}
    # AG News has 4 classes: label skew 2 with U = 2, V = 1 allows at most (4 - 1) / (2 - 1) = 3 clusters.
    # The Amazon copy has ~1,600 training / ~400 test reviews per domain: the paper's 1,000 reviews per client
    # (--full) are drawn independently per client (draw="overlap"); the AG News copy is its 7,600-row test split
    # (6,080 / 1,520 after nets' split)
    amazon = TEXT_MEDIUM_AMAZON if ctx.size == "medium" else dict(n=1000, n_test=150, draw="overlap") \
        if ctx.size == "full" else dict(n=750, n_test=150)
    text = (("Amazon", "amazon", 8, amazon["n"], amazon["n_test"], 4),
            ("AG News", "agnews-label-skew-2", 21, 100, 30, 3))
    sup = [(label, algo) for label, algo in SUP if ctx.size != "medium" or algo in TEXT_MEDIUM_ALGOS]
    for col, ds, m, n, nt, k in text:
        draw = {"draw": amazon["draw"]} if ds == "amazon" and "draw" in amazon else {}
        points = [dict(dataset=ds, algo=algo, clients=m, n_per_client=n, n_test=nt, **draw,
                       clusters=None if ds == "amazon" else k, optimizer="adam", step_size=1e-3, batch_size=100,
                       local_steps=max(1, n // 100), rounds=_text_rounds(ctx),
                       averaging="model", eval_every=0)
                  for _, algo in sup]
        for q in points:
            q.update(_personal(ctx, q["algo"], q["batch_size"])[0])
        groups = run_nets(ctx, f"clove-{ds}", points, _seeds(ctx), seed=2031)
        for (label, _), g in zip(sup, groups, strict=True):
            out[(col, label)] = g
    return out


def _text_reason(ctx: Context, col: str) -> str | None:
    """Why a text run is not comparable with the paper's number at this size (None when it is): at ``--full`` the
    Amazon runs have the paper's 1,000 reviews per client and are tested, near the paper (their deviations,
    :data:`TEXT_DEVIATION`, are declared in the cell's ledger); AG News has only its test split."""
    if ctx.size == "full":
        return None if col == "Amazon" else TEXT_DEVIATION[col]
    if ctx.size == "medium":
        amazon = (f"2 clients per domain of {TEXT_MEDIUM_AMAZON['n']} / {TEXT_MEDIUM_AMAZON['n_test']} training / test "
                  "reviews (the paper: 1,000 per client)")
        return (f"medium run; {amazon if col == 'Amazon' else TEXT_DEVIATION[col]}; {TEXT_MEDIUM_ROUNDS} rounds "
                "(paper 100)")
    return f"{ctx.size} run; {TEXT_DEVIATION[col]}"


# CLoVE Sec. 5.1: "We report the average performance of the models assigned to the clients on their local test
# data."  IFCA assigns each client the model of its cluster identity, estimated on its training data
# (nets.evaluate.train_identity_scores); its min-loss choice on the *test* data is another protocol, shown beside
SCORING = ("every method scored as CLoVE Sec. 5.1 states: the model assigned to each client on its local test data "
           "(IFCA: the model of the client's cluster identity on its training data)")
MIN_LOSS = "second protocol: IFCA's min-loss choice on each client's test data, not counted"
ASSIGNED = "_train_identity"


def _scored_key(recs: list[dict], metric: str, alg: str) -> str:
    """The record key of ``metric`` under CLoVE's scoring (:data:`SCORING`): IFCA's ``<metric>_train_identity``,
    every other method's own ``metric`` (its rule already scores the model assigned to the client)."""
    return f"{metric}{ASSIGNED}" if alg == "IFCA" and metric in ("test_accuracy", "test_loss") else metric


def _unscored(recs: list[dict], metric: str, alg: str) -> bool:
    """IFCA runs that do not record the assigned model's score (runs made before it was recorded): their CLoVE
    rows are stale until rerun."""
    key = _scored_key(recs, metric, alg)
    done = [r for r in recs if r.get("status") == "ok" and "error" not in (r.get("result") or {})]
    return key != metric and bool(done) and not seed_values(recs, key)


def _clove_row(item: str, pub, recs: list[dict], metric: str, alg: str, scale: float, reason: str | None,
               note: str, digits: int = 2) -> list[Row]:
    """A CLoVE table's number under CLoVE's scoring (:data:`SCORING`) and, for IFCA, its min-loss score as a
    second protocol (shown, not counted); runs without the assigned model's score are stale."""
    key = _scored_key(recs, metric, alg)
    if _unscored(recs, metric, alg):
        s = summary_by(recs, metric)
        row = numeric_row(item, pub, s.mean, s.std, s["n"], scale, reason, note=note)
        return [replace(row, paper_number=None, verdict="stale (the runs record IFCA's min-loss score on test data "
                        "only; CLoVE scores the model assigned to each client: rerun to record it)")]
    s = summary_by(recs, key)
    rows = [numeric_row(item, pub, s.mean, s.std, s["n"], scale, reason, note=note)]
    if key != metric:
        m = summary_by(recs, metric)
        rows.append(replace(numeric_row(f"{item} [{MIN_LOSS}]", pub, m.mean, m.std, m["n"], scale, reason,
                                        note=note), counted=False))
    return rows


def _text_target(artifact: str):
    def run(ctx: Context) -> Section:
        runs = _text_runs(ctx)
        rows, out = [], []
        for p in table("CLoVE", artifact):
            col = p.column.split(":")[0].replace(" Review", "")
            item = f"{p.column} / {p.row}"
            if (col, p.row) not in runs:
                medium_cut = ctx.size == "medium" and p.row in dict(SUP)
                rows.append(not_run_row(item, p, TEXT_MEDIUM_BUDGET if medium_cut else NOT_IN_TOOLKIT))
                continue
            recs = runs[(col, p.row)]
            reason = _text_reason(ctx, col)
            note = "; ".join([*errors(recs), *filter(None, [_personal(ctx, dict(SUP)[p.row])[1]])])
            if artifact == "Table 11":
                key = "percent" if "% of final" in p.column else "first"
                # "first round when ARI >= 90%" read as 90 % of the seed's final ARI: the paper's own numbers rule out
                # an absolute 0.9 here (IFCA ends at ARI 0.29 on Amazon yet "reaches" it at round 2.7; CFL at 0.07
                # and round 24.3; FlexCFL on AG News at 0.02 and round 1.0); the absolute reading is a second row
                of_final = 0.9 if key == "first" else None
                values, why_censored = censored(rounds_to(recs, "ari", lambda v: v >= 0.9, percent_at=10,
                                                          of_final=of_final), key, _text_rounds(ctx))
                s = summarise_values(values)
                reading = "read as >= 90 % of the final ARI" if of_final else ""
                row = numeric_row(item, p, s.mean, s.std, s["n"], 1.0, reason, "; ".join(filter(None, [note, reading])))
                rows.append(not_agreement(row, why_censored) if why_censored.startswith("undefined") else
                            replace(row, note="; ".join(filter(None, [row.note, why_censored]))))
                if of_final:
                    absolute, why_abs = censored(rounds_to(recs, "ari", lambda v: v >= 0.9), key, _text_rounds(ctx))
                    a = summarise_values(absolute)
                    rows.append(replace(numeric_row(item, p, a.mean, a.std, a["n"], 1.0, reason, why_abs),
                                        item=f"{item} [absolute ARI >= 0.9, a reading the paper's numbers rule out; "
                                             "not counted]", counted=False))
            elif artifact == "Table 3":
                key = _scored_key(recs, "test_accuracy", p.row)
                s = summary_by(recs, key)
                values = [100.0 * v for v in seed_values(recs, key)]
                rows += _clove_row(item, p, recs, "test_accuracy", p.row, 100.0, reason, note)
            else:
                s = summary_by(recs, "ari")
                values = seed_values(recs, "ari")
                rows += degenerate(recs, [numeric_row(item, p, s.mean, s.std, s["n"], 1.0, reason, note)])
            out.append({"item": item, "mean": s.mean, "std": s.std, "seeds": s["n"], "published": p.value,
                        "panel": p.column, "method": p.row, "values": values, "published_pm": p.pm})
        if artifact in ("Table 3", "Table 10"):  # orderings and gaps per data set, tested over seeds
            metric = "test_accuracy" if artifact == "Table 3" else "ari"
            for column in dict.fromkeys(p.column for p in table("CLoVE", artifact)):
                col = column.split(":")[0].replace(" Review", "")
                pubs = {p.row: p for p in table("CLoVE", artifact) if p.column == column and (col, p.row) in runs}
                reason = _text_reason(ctx, col)
                rows += ordering_rows(column, pubs, {a: seed_values(runs[(col, a)],
                                                                    _scored_key(runs[(col, a)], metric, a))
                                                     for a in pubs},
                                      100.0 if artifact == "Table 3" else 1.0, reduced=reason or "")
        folder = ctx.folder(name := f"clove-{artifact.lower().replace(' ', '')}")
        files = [write_table(folder / "values.csv", ["item", "mean", "std", "seeds", "published"], out),
                 write_rows(rows, folder / "comparison.csv")]
        figs = []
        if out:
            amazon = TEXT_MEDIUM_AMAZON if ctx.size == "medium" else dict(n=750, n_test=150)
            size = (f"Amazon 8 clients of {amazon['n']} reviews, AG News 21 clients of 100 texts, "
                    f"{_text_rounds(ctx)} rounds")
            what = {"Table 3": "test accuracy %", "Table 10": "ARI"}.get(artifact, "convergence speed")
            title = face(f"CLoVE {artifact} reproduced ({what})",
                         f"Amazon Reviews (4 domains), AG News (test split) ({ctx.size} run)", size,
                         seeds_text(_seeds(ctx)))
            names = dot_plot(folder, f"clove_{artifact.lower().replace(' ', '')}",
                             [Dot(r["panel"], r["method"], r["values"], r["published"], r["published_pm"])
                              for r in out],
                             xlabel={"Table 3": "test accuracy %", "Table 10": "ARI"}.get(artifact) or
                             {r["panel"]: "% of final ARI at round 10" if "% of final" in r["panel"] else
                              "first round with ARI >= 0.9" for r in out},
                             title=title, bounds=(0.0, 100.0) if artifact == "Table 3" else
                             (-1.0, 1.0) if artifact == "Table 10" else (0.0, math.inf),
                             ncols=2, sharex=artifact != "Table 11")
            files += names
            figs = [(names[0], f"CLoVE {artifact}: reproduced vs published")]
        return build_section(f"CLoVE {artifact}", _intro(ctx, f"{artifact} (Amazon: the 4 product domains are the "
                                                         "clusters; AG News: label skew 2 with U = 2, V = 1, 3 "
                                                         "clusters)"), name, figs, rows, files)
    return run


register("clove-table3", "CLoVE", "Table 3: test accuracy on Amazon Reviews and AG News", kind="nets",
         available=_text_available)(_text_target("Table 3"))
register("clove-table10", "CLoVE", "Table 10: ARI on Amazon Reviews and AG News", kind="nets",
         available=_text_available)(_text_target("Table 10"))
register("clove-table11", "CLoVE", "Table 11: convergence speed on Amazon Reviews and AG News", kind="nets",
         available=_text_available)(_text_target("Table 11"))


ABLATIONS = [("Original CLoVE", {}), ("No matching", {"algo_params": {"matching": False}}),
             ("Agglomerative clustering", {"clustering": "agglomerative"}),
             ("Square root loss", {"algo_params": {"sqrt_loss": True}})]


@register("clove-table12", "CLoVE", "Table 12: ablations (no matching, agglomerative clustering, square-root loss) "
          "on label skew 3", kind="nets", available=nets_missing)
def table12(ctx: Context) -> Section:
    """CLoVE Table 12 (Sec. 5.3, App. C.3): ablations of the matching, the clustering and the loss embedding."""
    base = "cifar" if ctx.real else "mnist"
    why = data_missing(ctx, "cifar") if ctx.real else None
    rows, out = [], []
    if why is None:
        st = _setting(ctx, "Label skew 3")
        pts = [dict(dataset=base_dataset(ctx, base, "label-skew-3"), algo="clove", clusters=5, optimizer="adam",
                    step_size=1e-3, averaging="model", eval_every=0, **st, **opts) for _, opts in ABLATIONS]
        groups = run_nets(ctx, "clove-table12", pts, ctx.pick(1, 3, 3), seed=2045)
        reason = None if ctx.size == "full" else f"{ctx.size} run: 8x8 digits for CIFAR-10"
        acc = {}
        for (label, _), recs in zip(ABLATIONS, groups, strict=True):
            pub = lookup("CLoVE", "Table 12", label, "test accuracy", "CIFAR-10 label skew 3")
            s = summary_by(recs, "test_accuracy")
            acc[label] = s
            rows.append(numeric_row(label, pub, s.mean, s.std, s["n"], 100.0, reason))
            out.append({"variant": label, "mean": s.mean, "std": s.std, "seeds": s["n"],
                        "published": pub.value if pub else None, "published_pm": pub.pm if pub else None,
                        "values": [100.0 * v for v in seed_values(recs, "test_accuracy")]})
        drop = 100 * (acc["Original CLoVE"].mean - acc["No matching"].mean)
        c = claim("CLoVE", "no-matching-drop")
        # per seed: the two variants share their data seed (paired), so the drop is a per-seed difference
        drops = {"drop": [100 * (a - b) for a, b in zip(seed_values(groups[0], "test_accuracy"),
                                                        seed_values(groups[[lb for lb, _ in ABLATIONS].index(
                                                            "No matching")], "test_accuracy"), strict=False)]}
        rows.append(claim_row("accuracy drop without matching (points)", c, f"{drop:+.1f}",
                              f"not comparable ({reason})" if reason else
                              equal_claim(drops, c.value if c.value is not None else 4.3,
                                          margin=c.pm if c.pm is not None else 1.0)))
    else:
        for label, _ in ABLATIONS:
            rows.append(not_run_row(label, lookup("CLoVE", "Table 12", label, "test accuracy",
                                                  "CIFAR-10 label skew 3"), why))
    folder = ctx.folder("clove-table12")
    files = [write_table(folder / "ablation.csv", ["variant", "mean", "std", "seeds", "published"], out)]
    figs = []
    if out:
        st = _setting(ctx, "Label skew 3")
        title = face("CLoVE Table 12 reproduced (ablations of CLoVE, label skew 3)",
                     data_used(ctx, "CIFAR-10", "8x8 digits standing in for CIFAR-10"),
                     f"5 clusters x {st['clients'] // 5} clients, {st['n_per_client']} samples per client, "
                     f"{st['rounds']} rounds", seeds_text(ctx.pick(1, 3, 3)))
        names = dot_plot(folder, "clove_table12", [Dot("label skew 3", r["variant"], r["values"], r["published"],
                                                       r["published_pm"]) for r in out],
                         xlabel="test accuracy %", title=title, bounds=(0.0, 100.0),
                         paper_label="paper (CIFAR-10): value ± std")
        files += names
        figs = [(names[0], "CLoVE ablations")]
    files.append(write_rows(rows, folder / "comparison.csv"))
    return build_section("CLoVE Table 12", _table12_intro(ctx), "clove-table12", figs, rows, files)


def _table12_intro(ctx: Context) -> str:
    """Table 12's section text, saying what its figure's face says: its own seeds and the data set its stand-in
    replaces (CIFAR-10, not the MNIST of the other supervised tables)."""
    st = _setting(ctx, "Label skew 3")
    head = ("CLoVE Table 12: ablations of CLoVE on label skew 3 (CIFAR-10 in the paper, 25 clients in 5 clusters); "
            f"Adam, learning rate 1e-3, one local epoch per round, mean ± std over {seeds_text(ctx.pick(1, 3, 3))}.")
    if ctx.size == "full":
        return head
    if ctx.real:
        return head + f" Reduced ({ctx.size}): CIFAR-10 from the data directory, {_reduced(ctx)}."
    return (head + f" Reduced ({ctx.size}): the embedded 8x8 digits stand in for CIFAR-10, {st['clients'] // 5} "
            f"clients per cluster of {st['n_per_client']} training and {st.get('n_test')} test samples, batch "
            f"{st['batch_size']} ({st['local_steps']} minibatches = one local epoch), {st['rounds']} rounds, IFCA's "
            "MLP (8x8 inputs). Reproduced numbers are not comparable with the paper's.")
