"""SR-FCA (Vardhan, Ghosh, Mazumdar) Sec. 5: Tables 1-4 on neural networks, with :mod:`nets`.

Protocol (SR-FCA Sec. 5): Inverted MNIST (2 clusters) and Rotated MNIST (4 clusters) with m = 100 clients of
n = 600 images, a 2-layer feed-forward network, 280 / 250 iterations, full participation; Rotated CIFAR-10
(2 clusters, m = 32, n = 3125, ResNet9, 50% participation, 2400 iterations); SR-FCA with the cross-cluster
distance (Def. 5.1), t = 2, 2 REFINE steps, lambda and beta tuned; FEMNIST and Shakespeare (m = 50 LEAF users,
1000 / 2400 iterations, one REFINE); baselines Local, Global (FedAvg), CFL, Local-KMeans, IFCA, FedSoft;
5 seeds.  Misclustering is SR-FCA Def. 3.1.
"""

from __future__ import annotations

from dataclasses import replace

from ..plots.dotplot import Dot, dot_plot
from ..plots.style import face, seeds_text
from ..registry import Context, Section, register
from ..runs import summarise_values
from ..verdicts.compare import build_section, claim_row, not_run_row, numeric_row, write_rows, write_table
from ..verdicts.published import claim, lookup
from ..verdicts.rules import SHOWN, equal_claim, head, level_claim, order_claim, ordering_rows, seed_values
from .ifca_nets import FEMNIST_TRAINED
from .netcommon import (
    base_dataset,
    cfl_split_row,
    data_missing,
    data_used,
    errors,
    full_data_missing,
    leaf_users,
    nets_missing,
    ok,
    run_nets,
    substitute_reason,
    summary_by,
)

SIM = [("MNIST (inverted)", "mnist", "inverted"), ("MNIST (rotated)", "mnist", "rotated"),
       ("CIFAR (rotated)", "cifar", "rotated")]
BASELINES = [("Local", dict(algo="local")), ("Global", dict(algo="global")), ("CFL", dict(algo="cfl")),
             # the paper's ~10% for Local-KMeans fits local models from separate initialisations (k-means on the
             # weights of separately started networks finds no clusters), as the public code trains them (one
             # ClientTrainer per client, sr-fca@a1b418f src/clustering/sr_fca.py:23-26); the shared start is shown
             # beside it, not counted
             ("Local-KMeans", dict(algo="local-kmeans", local_init="separate")), ("IFCA", dict(algo="ifca")),
             ("Local-KMeans (shared start)", dict(algo="local-kmeans", local_init="shared"))]
# CFL's thresholds are problem-specific and SR-FCA does not give them; Sattler et al.'s defaults (0.05, 0.5) never
# split here (rotated MNIST, seed 0: largest client update norm 0.15-0.32 < eps2 in every round). These sit between
# the measured mean (0.06-0.18) and largest client (0.15-0.32) update norms of that run.
CFL_MEDIUM = dict(eps1=0.1, eps2=0.12)
SRFCA = dict(algo="srfca", dist="cross", min_size=2, beta=0.1, n_refine=2, eval_every=1)


# SR-FCA Sec. 5 tunes lambda; the toolkit tunes it on a validation split carved from each client's training data
# (nets' `validation`: never trained on, never the test data), its share a choice the paper leaves open
VALIDATION = 0.1

# At full size the MNIST columns run as SR-FCA's public code ran them for the paper's numbers (harshv834/sr-fca at
# a1b418f; figures/published/protocols/srfca-simulated.toml cites every file and line): the code's network
# (784-200-10, 'two_layer_lin'), Adam, minibatches of 50 (configs/experiment/*_mnist.yaml), 5 local steps per
# round, 10 clients per round (configs/clustering/<algo>/<dataset>/best_hp.yaml), each method's tuned learning rate,
# SR-FCA as SRFCA(variant="public-code") at the code's tuned lambda (its unit is the mean loss over the batch size
# 50, src/utils.py:160-168, so lambda_code 0.02 is the toolkit's 1.0), no validation split for any method.
CODE_BATCH = 50
CODE = {
    "MNIST (inverted)": dict(iterations=280, refine_rounds=56, lambda_code=0.77,
                             lr={"srfca": 2e-4, "global": 2e-4, "ifca": 2e-4, "cfl": 2e-4, "local": 2e-4,
                                 "local-kmeans": 2e-4},
                             rounds={"global": 50, "ifca": 50, "cfl": 56}),
    "MNIST (rotated)": dict(iterations=250, refine_rounds=42, lambda_code=0.02,
                            lr={"srfca": 2e-4, "global": 0.000743656035585964, "ifca": 2e-4,
                                "cfl": 0.0009100199708881474, "local": 2e-4, "local-kmeans": 2e-4},
                            rounds={"global": 50, "ifca": 50, "cfl": 50}),
}
CODE_SRFCA = dict(algo="srfca", dist="cross", min_size=2, beta=0.15, n_refine=2, eval_every=1)


def _code_protocol(ctx: Context, column: str) -> bool:
    """Whether ``column`` runs the public code's protocol: the MNIST columns at full size."""
    return ctx.size == "full" and column in CODE


def _accuracy_key(ctx: Context, column: str, name: str) -> str:
    """The record key of a method's Table 1 accuracy: SR-FCA under the public code's protocol is scored as that code
    reports it (clustered clients on the last REFINE's models, before its RECLUSTER and MERGE, sr-fca@a1b418f
    src/clustering/sr_fca.py:60, 104-119: nets' ``test_accuracy_code``), every other run by Sec. 5's test metric."""
    return "test_accuracy_code" if name == "SR-FCA" and _code_protocol(ctx, column) else "test_accuracy"


def _code_point(column: str, name: str, opts: dict) -> dict:
    """One method's point under the public code's protocol (see :data:`CODE`)."""
    c = CODE[column]
    # draw="split": one permutation of the 60,000 images among the 100 clients, 100 test images each, as the code
    # (src/datasets/simulated.py:13-30)
    base = dict(clients=100, n_per_client=600, model="mlp", optimizer="adam", batch_size=CODE_BATCH,
                participation=1.0, draw="split")
    if column == "MNIST (inverted)":  # the code's raw 0-255 pixels, 255 - x inverted (src/datasets/client.py:60-65)
        base["input_scale"] = 255.0
    algo = opts["algo"]
    if algo == "srfca":
        return dict(**CODE_SRFCA, **base, threshold=c["lambda_code"] * CODE_BATCH, rounds=c["iterations"],
                    local_steps=1, local_train_steps=c["iterations"], trmean_steps=c["refine_rounds"],
                    step_size=c["lr"]["srfca"],
                    algo_params={"variant": "public-code", "clients_per_round": 10, "refine_local_steps": 5})
    if algo in ("local", "local-kmeans"):
        # the code's local models: one start per client (ClientTrainer), the ONE_SHOT iterations
        return dict(**{"local_init": "separate", **opts}, **base, rounds=c["iterations"], local_steps=1,
                    step_size=c["lr"][algo])
    point = dict(**opts, **base, rounds=c["rounds"][algo], local_steps=5, step_size=c["lr"][algo])
    if algo in ("global", "ifca"):
        point["participation"] = 0.1  # num_clients_per_round 10 of 100
    if algo == "cfl":
        point.update(CFL_MEDIUM)
    return point


def _lambdas(ctx: Context) -> list[float]:
    # SR-FCA tunes lambda (Sec. 5); reduced runs use one value (not tuned) to stay within the time budget: on the
    # digits at the quick size lambda = 1 keeps no ONE_SHOT cluster and lambda >= 2.5 merges the rotations
    return ctx.pick([1.5], [1.5], [1.0, 1.5, 2.0, 3.0])


def _sim_setting(ctx: Context, column: str, base: str) -> dict | None:
    if base == "cifar":
        if not ctx.real:
            return None
        return dict(clients=32, n_per_client=3125, rounds=2400, participation=0.5, model="resnet9", local_steps=1,
                    step_size=0.1, batch_size=50)
    rounds = {"MNIST (inverted)": 280, "MNIST (rotated)": 250}[column]
    return dict(clients=ctx.pick(8, 40, 100), n_per_client=ctx.pick(20, 60, 600, medium=100),
                rounds=ctx.pick(2, 15, rounds), model="ffnet", local_steps=ctx.pick(2, 5, 1), step_size=0.1,
                participation=1.0)


def _face(ctx: Context, what: str, real: dict | None = None) -> str:
    """The title of a Tables 1, 2 or 4 figure: ``what``, the data, size and seeds of their runs (``real``: the LEAF
    data sets of Table 4's last columns and their users and rounds)."""
    n = ctx.pick(20, 60, 600, medium=100)
    data = data_used(ctx, "inverted/rotated MNIST", "inverted/rotated 8x8 digits standing in for MNIST")
    size = f"m = {ctx.pick(8, 40, 100)} clients of n = {n} images, {ctx.pick(2, 15, 250)} rounds"
    if real:
        data += ", LEAF " + " and ".join(real)
        size += "; " + "; ".join(f"{c}: {u} users, {r} rounds" for c, (u, r) in real.items())
    return face(what, data, size, seeds_text(ctx.pick(1, 2, 5, medium=3)))


def _sim_reduced(ctx: Context) -> str:
    """What a reduced run of Tables 1, 2 and 4 changes from the paper's setting."""
    data = "MNIST" if ctx.real else "the embedded 8x8 digits replace MNIST"
    return (f"{data}, m = {ctx.pick(8, 40, 100)} clients of n = {ctx.pick(20, 60, 600, medium=100)} images (paper "
            f"100 of 600), {ctx.pick(2, 15, 250)} rounds of {ctx.pick(2, 5, 1)} local steps (paper 280 / 250 "
            f"iterations), λ = 1.5 not tuned, {ctx.pick(1, 2, 5, medium=3)} seed(s) (paper 5)"
            + (f", CFL's thresholds eps1 = {CFL_MEDIUM['eps1']}, eps2 = {CFL_MEDIUM['eps2']} (from measured update "
               "norms; the paper gives none)" if ctx.size == "medium" else ""))


def _sim_runs(ctx: Context):
    """The runs behind Tables 1, 2 and 4 (simulated data sets): every algorithm, every lambda of SR-FCA."""
    points, index, skipped = [], {}, {}
    for column, base, part in SIM:
        st = _sim_setting(ctx, column, base)
        if st is None:
            skipped[column] = f"{ctx.size} run: no embedded CIFAR substitute"
            continue
        if ctx.real and data_missing(ctx, base):
            skipped[column] = data_missing(ctx, base)
            continue
        ds = base_dataset(ctx, base, part)
        if _code_protocol(ctx, column):
            lam = CODE[column]["lambda_code"] * CODE_BATCH
            index[(column, "SR-FCA", lam)] = len(points)
            points.append(dict(dataset=ds, **_code_point(column, "SR-FCA", {"algo": "srfca"})))
            for name, opts in BASELINES:
                index[(column, name, None)] = len(points)
                points.append(dict(dataset=ds, eval_every=0, **_code_point(column, name, opts)))
            continue
        tuned = {"validation": VALIDATION} if len(_lambdas(ctx)) > 1 else {}
        for lam in _lambdas(ctx):
            index[(column, "SR-FCA", lam)] = len(points)
            points.append(dict(dataset=ds, threshold=lam, **SRFCA, **st, **tuned))
        for name, opts in BASELINES:
            index[(column, name, None)] = len(points)
            points.append(dict(dataset=ds, eval_every=0, **opts, **st))
            if opts["algo"] == "cfl" and ctx.size == "medium":
                points[-1].update(CFL_MEDIUM)
    groups = run_nets(ctx, "srfca-simulated", points, ctx.pick(1, 2, 5, medium=3), seed=2023) if points else []
    # SR-FCA at the lambda with the best mean validation accuracy (the paper tunes lambda; never on test data)
    best = {}
    for column, _, _ in SIM:
        if column in skipped:
            continue
        if _code_protocol(ctx, column):
            best[column] = CODE[column]["lambda_code"] * CODE_BATCH  # the code's tuned lambda, in the toolkit's unit
            index[(column, "SR-FCA", None)] = index[(column, "SR-FCA", best[column])]
            continue
        best[column] = tune(groups, index, column, _lambdas(ctx))
        index[(column, "SR-FCA", None)] = index[(column, "SR-FCA", best[column])]
    return points, index, groups, skipped, best


def tune(groups: list, index: dict, column: str, lambdas: list[float]) -> float:
    """The λ of the grid with the best mean *validation* accuracy over seeds (each client's held-out training
    samples, :data:`VALIDATION`); one λ needs no tuning.  Runs without a validation score (made before the split
    existed: the campaign marks them stale) are tuned on their test accuracy, as they were."""
    if len(lambdas) == 1:
        return lambdas[0]
    recs = {lam: groups[index[(column, "SR-FCA", lam)]] for lam in lambdas}
    key = "validation_accuracy" if all(seed_values(r, "validation_accuracy") for r in recs.values()) else \
        "test_accuracy"
    scores = {lam: summary_by(r, key).mean for lam, r in recs.items()}
    return max(scores, key=lambda k: -1.0 if scores[k] != scores[k] else scores[k])


def _intro(ctx: Context, what: str, best: dict) -> str:
    lam = ", ".join(f"{c}: λ = {v:g}" for c, v in best.items())
    tuned = (f"λ tuned over {{1, 1.5, 2, 3}} on the mean accuracy of a validation split ({VALIDATION:.0%} of each "
             "client's training samples, held out from training; never the test data; the paper tunes λ and β)"
             if ctx.size == "full" else "λ = 1.5 fixed (not tuned, to stay within the time budget)")
    size = ("" if ctx.size == "full" else
            f" Reduced ({ctx.size}): {_sim_reduced(ctx)}; CIFAR only with the data. Reproduced numbers are not "
            "comparable with the paper's; the ordering rows are.")
    if ctx.size == "full":
        return (f"SR-FCA {what}. MNIST columns: every method as SR-FCA's public code (harshv834/sr-fca@a1b418f) "
                "trains it (784-200-10 network, Adam, batches of 50, 5 local steps and 10 clients per round, each "
                "method's tuned learning rate; no validation split), SR-FCA as SRFCA(variant='public-code') with the "
                "cross-cluster distance, t = 2, β = 0.15, 2 REFINE steps and the code's tuned λ (0.77 inverted, 0.02 "
                f"rotated in the code's unit, the mean loss over the batch size 50; the toolkit's unit is 50 times "
                f"larger: {lam}), scored as the code reports it; the ledger cites every file and line. CIFAR: "
                f"{tuned}.")
    return (f"SR-FCA {what}; SR-FCA with the cross-cluster distance (Def. 5.1), t = 2, β = 0.1, 2 REFINE steps, "
            f"{tuned} ({lam}).{size}")


@register("srfca-table1", "SR-FCA", "Table 1: test accuracy on Inverted/Rotated MNIST and Rotated CIFAR "
          "(SR-FCA, Local, Global, CFL, Local-KMeans, IFCA)", kind="nets", available=nets_missing)
def table1(ctx: Context) -> Section:
    """SR-FCA Table 1: test accuracy on the simulated data sets (Sec. 5)."""
    points, index, groups, skipped, best = _sim_runs(ctx)
    rows, table = [], []
    for column, base, _ in SIM:
        reason = substitute_reason(ctx, base, _sim_reduced(ctx))
        for name in ["SR-FCA"] + [b for b, _ in BASELINES]:
            pub = lookup("SR-FCA", "Table 1", name.split(" (")[0], column)
            item = f"{column} / {name}"
            if column in skipped:
                rows.append(not_run_row(item, pub, skipped[column]))
                continue
            recs = groups[index[(column, name, None)]]
            key = _accuracy_key(ctx, column, name)
            s = summary_by(recs, key)
            row = numeric_row(item, pub, s.mean, s.std, s["n"], 100.0, reason, note="; ".join(errors(recs)))
            # a variant of a published method (Local-KMeans from a shared start) is shown beside the method's
            # counted row, not counted again
            rows.append(replace(row, item=f"{item} [second protocol, not counted]", counted=False)
                        if "(" in name else row)
            if key != "test_accuracy":  # the toolkit's scoring of the same runs: every client, after the last MERGE
                every = summary_by(recs, "test_accuracy")
                rows.append(replace(numeric_row(item, pub, every.mean, every.std, every["n"], 100.0, reason),
                                    item=f"{item} [every client on its final cluster's model, not counted]",
                                    counted=False))
            table.append({"column": column, "algorithm": name, "accuracy_mean": s.mean, "accuracy_std": s.std,
                          "seeds": s["n"], "failed": len(errors(recs)), "published": pub.value if pub else None,
                          "published_pm": pub.pm if pub else None,
                          "lambda": best.get(column) if name == "SR-FCA" else None,
                          "values": [100.0 * v for v in seed_values(recs, key)]})
    for column, base, _ in SIM:
        if column in skipped:
            continue
        names = ["SR-FCA"] + [b for b, _ in BASELINES if "(" not in b]
        rows += ordering_rows(column, {n: lookup("SR-FCA", "Table 1", n, column) for n in names},
                              {n: seed_values(groups[index[(column, n, None)]], _accuracy_key(ctx, column, n))
                               for n in names},
                              100.0, reduced=substitute_reason(ctx, base, _sim_reduced(ctx)) or "")
    for column, _, _ in SIM:
        if column in skipped:
            continue
        acc = {r["algorithm"]: r["accuracy_mean"] for r in table if r["column"] == column}
        vals = {r["algorithm"]: r["values"] for r in table if r["column"] == column}
        for lkname in ("Local-KMeans", "Local-KMeans (shared start)"):
            lk = acc.get(lkname)
            rows.append(claim_row(f"{column}: {lkname} near 10% (chance): mean below 20%",
                                  claim("SR-FCA", "local-kmeans-10pct"), f"{lkname} {100 * lk:.1f}%",
                                  level_claim({lkname: vals.get(lkname, [])}, 20.0, below=True)))
        order = sorted(acc, key=lambda a: -acc[a])
        rows.append(claim_row(f"{column}: SR-FCA vs IFCA", claim("SR-FCA", "srfca-beats-ifca-real"),
                              f"ranking: {' > '.join(order)}", "n/a (the paper's claim is for the real data sets; "
                              "shown for reference)"))
    folder = ctx.folder("srfca-table1")
    files = [write_table(folder / "accuracy.csv", list(table[0]) if table else ["column"], table)]
    figs = []
    if table:
        figs, names = _dots(folder, table, "test accuracy %", "srfca_table1",
                            _face(ctx, "SR-FCA Table 1 reproduced (test accuracy %)"), (0.0, 100.0))
        files += names
    files.append(write_rows(rows, folder / "comparison.csv"))
    return build_section("SR-FCA Table 1", _intro(ctx, "Table 1: test accuracy (%), mean ± std over seeds", best),
                         "srfca-table1", figs, rows, files)


@register("srfca-table2", "SR-FCA", "Table 2: misclustering of the clustered algorithms (same runs as Table 1)",
          kind="nets", available=nets_missing)
def table2(ctx: Context) -> Section:
    """SR-FCA Table 2: misclustering (Def. 3.1) of the clustered algorithms on the simulated data sets."""
    points, index, groups, skipped, best = _sim_runs(ctx)
    rows, table = [], []
    for column, base, _ in SIM:
        reason = substitute_reason(ctx, base, _sim_reduced(ctx))
        if column not in skipped:
            cfl = index[(column, "CFL", None)]
            rows.append(cfl_split_row(f"{column}: CFL split check", groups[cfl], points[cfl]["rounds"]))
            names = ("SR-FCA", "CFL", "Local-KMeans", "IFCA")
            rows += ordering_rows(column, {n: lookup("SR-FCA", "Table 2", n, column) for n in names},
                                  {n: seed_values(groups[index[(column, n, None)]], "misclustering") for n in names},
                                  1.0, higher_better=False, reduced=reason or "")
        for name in ("SR-FCA", "CFL", "Local-KMeans", "IFCA"):
            pub = lookup("SR-FCA", "Table 2", name, column)
            item = f"{column} / {name}"
            if column in skipped:
                rows.append(not_run_row(item, pub, skipped[column]))
                continue
            recs = groups[index[(column, name, None)]]
            s = summary_by(recs, "misclustering")
            sm = summary_by(recs, "misclustering_matched")
            rows.append(numeric_row(item, pub, s.mean, s.std, s["n"], 1.0, reason,
                                    note=f"one-to-one misclustering {sm.mean:.3f}"))
            table.append({"column": column, "algorithm": name, "misclustering_mean": s.mean, "misclustering_std": s.std,
                          "matched_mean": sm.mean, "seeds": s["n"], "published": pub.value if pub else None,
                          "published_pm": pub.pm if pub else None, "values": seed_values(recs, "misclustering")})
    if "CIFAR (rotated)" not in skipped:
        ifca = [r for r in table if r["column"] == "CIFAR (rotated)" and r["algorithm"] == "IFCA"][0]
        rows.append(claim_row("CIFAR (rotated): IFCA collapses to one cluster (misclustering 0.5)",
                              claim("SR-FCA", "ifca-collapse-cifar"), f"misclustering {ifca['values']}",
                              equal_claim({"IFCA": ifca["values"]}, 0.5, margin=0.05)))
    folder = ctx.folder("srfca-table2")
    files = [write_table(folder / "misclustering.csv", list(table[0]) if table else ["column"], table)]
    figs = []
    if table:
        figs, names = _dots(folder, table, "misclustering (Def. 3.1)", "srfca_table2",
                            _face(ctx, "SR-FCA Table 2 reproduced (misclustering, Def. 3.1)"), (0.0, 1.0))
        files += names
    files.append(write_rows(rows, folder / "comparison.csv"))
    return build_section("SR-FCA Table 2", _intro(ctx, "Table 2: misclustering (Def. 3.1), mean over seeds "
                                                  "(the one-to-one version in the notes)", best),
                         "srfca-table2", figs, rows, files)


def _dots(folder, table, xlabel, stem, title, bounds):
    """A table as a dot plot, one panel per data set column."""
    names = dot_plot(folder, stem, [Dot(r["column"], r["algorithm"], r["values"], r["published"],
                                        r.get("published_pm")) for r in table], xlabel=xlabel, title=title,
                     bounds=bounds)
    return [(names[0], title)], names


REAL = [("FEMNIST", "femnist"), ("Shakespeare", "shakespeare")]
REAL_BASE = dict(REAL)
REAL_ALGOS = [("SR-FCA", dict(algo="srfca", dist="cross", min_size=2, beta=0.1, n_refine=1, eval_every=1)),
              ("Local", dict(algo="local")), ("Global", dict(algo="global")), ("CFL", dict(algo="cfl")),
              ("IFCA", dict(algo="ifca")), ("ONE_SHOT-IFCA", dict(algo="oneshot-ifca"))]
# FedSoft (Ruan & Joe-Wong 2022; synth/algorithms/fedsoft.py), K tuned as for the clustered baselines (Sec. 5)
REAL_ALGOS += [("FedSoft", dict(algo="fedsoft"))]


# LEAF's CNN (6.5 M parameters) and LSTM are slow on CPU: a medium run takes few users, samples and rounds
REAL_MEDIUM = {"femnist": dict(clients=10, n_per_client=50, local_steps=2, rounds=10, K=[2, 3]),
               "shakespeare": dict(clients=10, n_per_client=100, local_steps=2, rounds=10, K=[1, 2])}


# a medium run skips Shakespeare: the character LSTM (2 layers, 80 steps unrolled) takes 2-3 minutes per SR-FCA
# trial on 2 CPU cores even at 25 sequences per user and 5 rounds, ~30 trials would take most of the hour
SHAKESPEARE_MEDIUM = ("medium run: outside its 60-minute budget (the character LSTM takes 2-3 min per SR-FCA trial "
                      "on 2 CPU cores, about 40 min for the column's 30 trials); runs with --full, or on a GPU")


def _real_skip(ctx: Context, base: str) -> str | None:
    """Why a Table 3 column is not run at this size (None: it runs)."""
    return SHAKESPEARE_MEDIUM if ctx.size == "medium" and base == "shakespeare" else None


def _real_reduced(ctx: Context, base: str) -> str:
    """What a reduced run of Table 3 changes from the paper's setting (SR-FCA Sec. 5)."""
    if ctx.size != "medium":
        return f"{ctx.size} run"
    m = REAL_MEDIUM[base]
    return (f"medium run: {m['clients']} LEAF users (paper 50) of at most {m['n_per_client']} samples, {m['rounds']} "
            f"rounds of {m['local_steps']} local steps (paper {1000 if base == 'femnist' else 2400} iterations), K "
            f"tuned over {m['K']}, λ = 1.5 not tuned, 3 seeds (paper 5)")


def _real_available(ctx: Context) -> str | None:
    return full_data_missing(ctx, "FEMNIST and Shakespeare", [b for _, b in REAL], "the LEAF files")


def _real_runs(ctx: Context):
    points, index = [], {}
    for column, base in REAL:
        if _real_skip(ctx, base):
            continue
        # the paper samples m = 50 users; a smaller copy of LEAF (this repository's Shakespeare sample has 10
        # users with train and test data) gives all of its users
        st = dict(dataset=base, clients=min(ctx.pick(8, 50, 50, medium=REAL_MEDIUM[base]["clients"]),
                                            leaf_users(ctx, base)),
                  n_per_client=ctx.pick(20, 200, 1000, medium=REAL_MEDIUM[base]["n_per_client"]),
                  local_steps=ctx.pick(1, 5, 1, medium=REAL_MEDIUM[base]["local_steps"]),
                  step_size=0.1 if base == "femnist" else 0.8,
                  rounds=ctx.pick(2, 20, 1000 if base == "femnist" else 2400, medium=REAL_MEDIUM[base]["rounds"]))
        for name, opts in REAL_ALGOS:
            # tuned: lambda for the threshold algorithms, K for the clustered baselines (Sec. 5)
            if opts["algo"] in ("srfca", "oneshot-ifca"):
                variants = [("λ", lam, dict(threshold=lam)) for lam in _lambdas(ctx)]
            elif opts["algo"] in ("ifca", "cfl", "fedsoft"):
                variants = [("K", k, dict(n_clusters=k)) for k in ctx.pick(*([[2, 3, 4, 5] if base == "femnist" else
                                                                              [1, 2, 3, 4]] * 3),
                                                                           medium=REAL_MEDIUM[base]["K"])]
            else:
                variants = [(None, None, {})]
            for kind, v, extra in variants:
                index[(column, name, (kind, v) if kind else None)] = len(points)
                points.append(dict(st, **opts, **extra, **({} if "eval_every" in opts else dict(eval_every=0))))
    groups = run_nets(ctx, "srfca-real", points, ctx.pick(1, 2, 5, medium=3), seed=2024)
    return points, index, groups


def _best(index: dict, groups: list, column: str, name: str):
    """The tuned variant (lambda or K) of an algorithm with the best mean test accuracy, and its summary."""
    cands = [(k, summary_by(groups[i], "test_accuracy")) for (c, a, k), i in index.items() if c == column and a == name]
    return max(cands, key=lambda kv: kv[1].mean if kv[1].mean == kv[1].mean else -1.0)


@register("srfca-table3", "SR-FCA", "Table 3: FEMNIST and Shakespeare test accuracy (K tuned for the clustered "
          "baselines)", kind="nets", available=_real_available)
def table3(ctx: Context) -> Section:
    """SR-FCA Table 3: test accuracy on FEMNIST and Shakespeare, K and lambda tuned (Sec. 5)."""
    points, index, groups = _real_runs(ctx)
    rows, table = [], []
    for column, base in REAL:
        if _real_skip(ctx, base):
            rows += [not_run_row(f"{column} / {name}", lookup("SR-FCA", "Table 3", name, column),
                                 _real_skip(ctx, base)) for name, _ in REAL_ALGOS]
            continue
        rows += ordering_rows(column, {n: lookup("SR-FCA", "Table 3", n, column) for n, _ in REAL_ALGOS},
                              {n: seed_values(groups[index[(column, n, _best(index, groups, column, n)[0])]],
                                              "test_accuracy") for n, _ in REAL_ALGOS},
                              100.0, reduced="" if ctx.size == "full" else _real_reduced(ctx, base),
                              trained_above=FEMNIST_TRAINED if base == "femnist" else None)
        for name, _ in REAL_ALGOS:
            pub = lookup("SR-FCA", "Table 3", name, column)
            k, s = _best(index, groups, column, name)
            tuned = f"{k[0]}={k[1]}" if k else ""
            recs = groups[index[(column, name, k)]]
            note = "; ".join(errors(recs))
            if not note and s["n"] == 0 and all(ok(r) and (r["result"] or {}).get("n_clusters") == 0 for r in recs):
                note = "ONE_SHOT kept no cluster (every pairwise distance above λ)"
            rows.append(numeric_row(f"{column} / {name}" + (f" ({tuned}, tuned)" if k else ""), pub, s.mean, s.std,
                                    s["n"], 100.0, None if ctx.size == "full" else _real_reduced(ctx, base), note))
            table.append({"column": column, "algorithm": name, "tuned": tuned, "accuracy_mean": s.mean,
                          "accuracy_std": s.std, "seeds": s["n"], "published": pub.value if pub else None,
                          "published_pm": pub.pm if pub else None,
                          "values": [100.0 * v for v in seed_values(recs, "test_accuracy")]})
    for column, base in REAL:
        if _real_skip(ctx, base):
            rows.append(claim_row(f"{column}: SR-FCA > IFCA", claim("SR-FCA", "srfca-beats-ifca-real"), "—",
                                  f"not run ({_real_skip(ctx, base)})"))
            continue
        acc = {r["algorithm"]: r["accuracy_mean"] for r in table if r["column"] == column}
        vals = {r["algorithm"]: r["values"] for r in table if r["column"] == column}
        verdict = order_claim(vals, [("SR-FCA", "IFCA")])
        if base == "femnist" and max(acc.values()) <= FEMNIST_TRAINED and head(verdict) != SHOWN:
            verdict = (f"not resolved (models barely trained: best mean {100 * max(acc.values()):.1f} <= "
                       f"{100 * FEMNIST_TRAINED:.1f})")
        rows.append(claim_row(f"{column}: SR-FCA > IFCA", claim("SR-FCA", "srfca-beats-ifca-real"),
                              f"SR-FCA {100 * acc['SR-FCA']:.2f}, IFCA {100 * acc['IFCA']:.2f}", verdict))
    folder = ctx.folder("srfca-table3")
    files = [write_table(folder / "accuracy.csv", list(table[0]), table)]
    users = {p["dataset"]: p["clients"] for p in points}
    ran = [(c, b) for c, b in REAL if not _real_skip(ctx, b)]
    rounds = ", ".join(f"{c} {ctx.pick(2, 20, 1000 if b == 'femnist' else 2400, medium=REAL_MEDIUM[b]['rounds'])}"
                       for c, b in ran)
    figs, names = _dots(folder, [dict(r, algorithm=f"{r['algorithm']} ({r['tuned']})" if r["tuned"] else
                                      r["algorithm"]) for r in table], "test accuracy %", "srfca_table3",
                        face("SR-FCA Table 3 reproduced (test accuracy %; K or λ tuned)",
                             "LEAF " + " and ".join(c for c, _ in ran) + f" ({ctx.size} run)",
                             ", ".join(f"{c} {users.get(b)} users" for c, b in ran) + f"; rounds: {rounds}",
                             seeds_text(ctx.pick(1, 2, 5, medium=3))), (0.0, 100.0))
    files += names + [write_rows(rows, folder / "comparison.csv")]
    intro = (f"SR-FCA Table 3: test accuracy (%) on FEMNIST and Shakespeare ({users.get('femnist', 'not run')} / "
             f"{users.get('shakespeare', 'not run')} LEAF users; the paper: 50 each), K tuned over "
             "{2..5} (FEMNIST) / {1..4} (Shakespeare) for IFCA, CFL and FedSoft and λ for SR-FCA and ONE_SHOT-IFCA, "
             "each by mean test accuracy (as the paper tunes); SR-FCA with one REFINE. The paper gives no step sizes "
             "or local steps; these are the toolkit's choices.")
    return build_section("SR-FCA Table 3", intro, "srfca-table3", figs, rows, files)


@register("srfca-table4", "SR-FCA", "Table 4: test accuracy after ONE_SHOT and after each REFINE step",
          kind="nets", available=nets_missing)
def table4(ctx: Context) -> Section:
    """SR-FCA Table 4: test accuracy after ONE_SHOT and after each REFINE step (Sec. 5.1)."""
    points, index, groups, skipped, best = _sim_runs(ctx)
    real = _real_available(ctx) is None
    rpoints, rindex, rgroups = _real_runs(ctx) if real else (None, None, None)
    rows, table, ended = [], [], {}
    stages = ["After ONE_SHOT", "After 1st REFINE", "After 2nd REFINE"]
    cols = [(c, b) for c, b, _ in SIM] + [(c, b) for c, b in REAL]
    for column, base in cols:
        if column in dict(REAL):
            why = _real_available(ctx) or _real_skip(ctx, base)
            recs = None if why else rgroups[rindex[(column, "SR-FCA", _best(rindex, rgroups, column, "SR-FCA")[0])]]
        else:
            recs = groups[index[(column, "SR-FCA", None)]] if column not in skipped else None
            why = skipped.get(column)
        for si, stage in enumerate(stages):
            pub = lookup("SR-FCA", "Table 4", stage, column)
            item = f"{column} / {stage}"
            if recs is None:
                rows.append(not_run_row(item, pub, why or "not run"))
                continue
            vals = []
            for r in recs:
                h = ((r["result"] or {}).get("history") or {}).get("test_accuracy") or [] if ok(r) else []
                vals.append(h[si] if si < len(h) else None)
            s = summarise_values(vals)
            reason = substitute_reason(ctx, base, _sim_reduced(ctx)) if column not in dict(REAL) else (
                None if ctx.size == "full" else _real_reduced(ctx, REAL_BASE[column]))
            note = "the paper's text has no numbers for this row" if pub is None else ""
            if s["n"] == 0:
                errs = errors(recs)
                # SR-FCA stops early when ONE_SHOT or MERGE leaves no cluster of min_size clients
                stops = sorted({str((r["result"] or {}).get("status")) for r in recs if ok(r)} - {"ok", "None"})
                if stops:
                    ended[column] = f"SR-FCA ended before its stages in every seed: {stops[0]}"
                rows.append(not_run_row(item, pub, f"every trial failed: {errs[0]}" if errs else
                                        ended.get(column, "the run has no such stage")))
            else:
                rows.append(numeric_row(item, pub, s.mean, s.std, s["n"], 100.0, reason, note=note))
            table.append({"column": column, "stage": stage, "accuracy_mean": s.mean, "accuracy_std": s.std,
                          "seeds": s["n"], "published": pub.value if pub else None,
                          "published_pm": pub.pm if pub else None,
                          "values": [100.0 * v for v in vals if v is not None and v == v]})
    folder = ctx.folder("srfca-table4")
    files = [write_table(folder / "stages.csv", list(table[0]) if table else ["column"], table)]
    files.append(write_rows(rows, folder / "comparison.csv"))
    figs = []
    # a stage no seed reached shows the paper's value alone (its row says why: "the run has no such stage")
    shown = table
    names = {b: c for c, b in REAL}
    leaf = {names[p["dataset"]]: (p["clients"], p["rounds"]) for p in (rpoints or [])
            if any(r["column"] == names[p["dataset"]] for r in shown)}
    if shown:
        names = dot_plot(folder, "srfca_table4", [Dot(r["column"], r["stage"], r["values"], r["published"],
                                                      r["published_pm"]) for r in shown],
                         xlabel="test accuracy % of SR-FCA",
                         title=_face(ctx, "SR-FCA Table 4 reproduced (test accuracy after each stage)", leaf),
                         bounds=(0.0, 100.0), notes=ended)
        files += names
        figs = [(names[0], "SR-FCA test accuracy after ONE_SHOT and each REFINE")]
    return build_section("SR-FCA Table 4", _intro(ctx, "Table 4: test accuracy after ONE_SHOT and each REFINE "
                                                  "(the paper's ONE_SHOT row has no numbers in its text)", best),
                         "srfca-table4", figs, rows, files)
