"""Every public entry point refuses at least one invalid value with a clear error.

Each case calls an entry point with an invalid value and expects a ``ValueError``
or ``TypeError`` whose message names the offending parameter.  A coverage test
checks that every public callable of the toolkit's modules has a case here or
an explicit exemption with its reason, so a new entry point cannot be added
without one.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect

import numpy as np
import pytest

from synth import experiment, federation, init, metrics, population, report, store, sweep, theta
from synth import montecarlo as mc
from synth import validation as v
from synth.algorithms import (
    CFL,
    IFCA,
    KFED,
    PACFL,
    SRFCA,
    CLoVE,
    FedALA,
    FedPAC,
    FedProto,
    FedSoft,
    FeSEM,
    FlexCFL,
    GlobalModel,
    LocalKMeans,
    LocalModels,
    OneShotIFCA,
    OneShotKMeans,
    PerFedAvg,
    train_clusters,
)
from synth.algorithms import cfl as cfl_mod
from synth.algorithms import clove as clove_mod
from synth.algorithms import srfca as srfca_mod
from synth.backend import GLMBackend


@pytest.fixture(scope="module")
def fed():
    return federation.MixedLinearRegression(K=2, clients_per_cluster=3, n=20, d=3).sample(0)


@pytest.fixture(scope="module")
def be(fed):
    return fed.backend()


def _theory():
    import theory
    import theory.laws as laws
    import theory.stats as stats

    return theory, laws, stats


# (entry point, call(fed, be), fragment the message must contain)
CASES = [
    # validation helpers
    ("synth.validation.check_real", lambda f, b: v.check_real("x", float("nan")), "x must be finite"),
    ("synth.validation.check_int", lambda f, b: v.check_int("k", 1.5), "k must be an integer"),
    ("synth.validation.check_choice", lambda f, b: v.check_choice("mode", "b", ["a"]), "mode must be one of"),
    ("synth.validation.check_array", lambda f, b: v.check_array("X", [[1, np.inf]]), "X must be finite"),
    ("synth.validation.check_probability", lambda f, b: v.check_probability("p", 0.0), "p must be in (0, 1]"),
    ("synth.validation.check_random_state", lambda f, b: v.check_random_state(-3), "random_state"),
    ("synth.validation.check_client_counts", lambda f, b: v.check_client_counts([1, 0], 2, 5), "n_samples[1] = 0"),
    ("synth.validation.check_federation_shape", lambda f, b: v.check_federation_shape(f.X, f.y[:, :3], f.n_samples),
     "y must have shape"),
    ("synth.validation.check_federation_data",
     lambda f, b: v.check_federation_data(np.full((1, 2, 1), np.nan), np.zeros((1, 2)), np.array([2])),
     "X must be finite"),
    # theta* modes
    ("synth.theta.bernoulli_rescaled", lambda f, b: theta.bernoulli_rescaled(2, 5, -1.0), "R must be"),
    ("synth.theta.bernoulli_scaled", lambda f, b: theta.bernoulli_scaled(0, 5, 1.0), "K must be"),
    ("synth.theta.sphere_separated", lambda f, b: theta.sphere_separated(2, 5, 3.0), "delta must be"),
    ("synth.theta.client_optima", lambda f, b: theta.client_optima([2, 2], 5, 0.5, 0.1), "eps2 must be > eps1"),
    ("synth.theta.check_theta", lambda f, b: theta.check_theta([[np.nan, 1.0]]), "theta must be finite"),
    ("synth.theta.pairwise_distances", lambda f, b: theta.pairwise_distances(np.ones((2, 3)), np.ones((2, 4))),
     "b must have shape"),
    ("synth.theta.separation", lambda f, b: theta.separation(np.ones(3)), "theta must have 2"),
    # generators and populations
    ("synth.federation.MixedLinearRegression", lambda f, b: federation.MixedLinearRegression(sigma=-1), "sigma"),
    ("synth.federation.LogisticMixture", lambda f, b: federation.LogisticMixture(reg=0.0), "reg must be"),
    ("synth.federation.anisotropic_cov", lambda f, b: federation.anisotropic_cov(3, 0.5), "condition must be"),
    ("synth.federation.Federation.backend", lambda f, b: f.backend(regime="split"), "rounds"),
    ("synth.population.LinearPopulation", lambda f, b: population.LinearPopulation([[1.0]], -1.0), "sigma"),
    ("synth.population.LogisticPopulation", lambda f, b: population.LogisticPopulation([[1.0]], 0.0), "reg"),
    # numpy backend
    ("synth.backend.GLMBackend", lambda f, b: GLMBackend(f, regime="nope"), "regime must be one of"),
    ("synth.backend.GLMBackend.losses", lambda f, b: b.losses(np.ones((2, 4))), "models must have shape"),
    ("synth.backend.GLMBackend.local_update", lambda f, b: b.local_update(np.ones((2, 3)), np.zeros(6, int), -1, 0.1),
     "steps must be"),
    ("synth.backend.GLMBackend.local_models", lambda f, b: b.local_models("nope"), "method must be one of"),
    ("synth.backend.GLMBackend.init_models", lambda f, b: b.init_models(2, "nope", np.random.default_rng()),
     "init must be one of"),
    ("synth.init.ball_init", lambda f, b: init.ball_init(f.theta, 0.7), "alpha must be"),
    # metrics
    ("synth.metrics.misclustering", lambda f, b: metrics.misclustering([0, 1], [0]), "labels_pred"),
    ("synth.metrics.matched_misclustering", lambda f, b: metrics.matched_misclustering([0], [-1]), "labels_true"),
    ("synth.metrics.adjusted_rand", lambda f, b: metrics.adjusted_rand([0, 1, 2], [0, 1]), "labels_pred"),
    ("synth.metrics.cluster_labels", lambda f, b: metrics.cluster_labels([0.5], [0]), "labels_pred"),
    ("synth.metrics.param_error", lambda f, b: metrics.param_error(np.ones((2, 4)), f.theta), "models must have"),
    ("synth.metrics.ifca_success", lambda f, b: metrics.ifca_success(f.theta, f.theta, -1.0), "sigma must be"),
    ("synth.metrics.restart_success", lambda f, b: metrics.restart_success([], 0.1), "dists must hold"),
    # estimators
    ("synth.algorithms.IFCA", lambda f, b: IFCA(n_clusters=-1).fit(b), "n_clusters must be"),
    ("synth.algorithms.SRFCA", lambda f, b: SRFCA(threshold=-1.0).fit(b), "threshold must be"),
    ("synth.algorithms.CLoVE", lambda f, b: CLoVE(n_clusters=0).fit(b), "n_clusters must be"),
    ("synth.algorithms.CFL", lambda f, b: CFL(eps1=-1.0).fit(b), "eps1 must be"),
    ("synth.algorithms.LocalKMeans", lambda f, b: LocalKMeans(n_clusters=0).fit(b), "n_clusters must be"),
    ("synth.algorithms.OneShotIFCA", lambda f, b: OneShotIFCA(threshold=0.0).fit(b), "threshold must be"),
    ("synth.algorithms.GlobalModel", lambda f, b: GlobalModel(n_rounds=-2).fit(b), "n_rounds must be"),
    ("synth.algorithms.LocalModels", lambda f, b: LocalModels(local="x").fit(b), "local must be one of"),
    ("synth.algorithms.OneShotKMeans", lambda f, b: OneShotKMeans(n_clusters=100).fit(b), "n_clusters must be"),
    ("synth.experiment.IFCAVerdict", lambda f, b: __import__("synth.experiment").experiment.IFCAVerdict(
        np.zeros((2, 3)), threshold=-1.0), "threshold must be in"),
    ("synth.algorithms.PerFedAvg", lambda f, b: PerFedAvg(meta_variant="x").fit(b), "meta_variant must be one of"),
    ("synth.algorithms.FedProto", lambda f, b: FedProto(step_size=-1.0).fit(b), "step_size must be in"),
    ("synth.algorithms.FedPAC", lambda f, b: FedPAC(head_steps=-1).fit(b), "head_steps must be an integer"),
    ("synth.algorithms.FedALA", lambda f, b: FedALA(ala_fraction=0.0).fit(b), "ala_fraction must be in"),
    ("synth.algorithms.KFED", lambda f, b: KFED(margin=0.0).fit(b), "margin must be"),
    ("synth.algorithms.PACFL", lambda f, b: PACFL(proximity="x").fit(b), "proximity must be one of"),
    ("synth.algorithms.FlexCFL", lambda f, b: FlexCFL(alpha=0).fit(b), "alpha must be"),
    ("synth.algorithms.FeSEM", lambda f, b: FeSEM(center_init="x").fit(b), "center_init must be one of"),
    ("synth.algorithms.FedSoft", lambda f, b: FedSoft(smoother=1.0).fit(b), "smoother must be"),
    ("synth.algorithms.train_clusters", lambda f, b: train_clusters(b, np.ones((2, 3)), np.zeros(6, int), -1, 0.1),
     "n_rounds must be"),
    ("synth.algorithms.srfca.one_shot", lambda f, b: srfca_mod.one_shot(np.ones((3, 3)), 0.0, 1), "threshold"),
    ("synth.algorithms.srfca.recluster", lambda f, b: srfca_mod.recluster(np.ones((3, 0))), "dist_to_clusters"),
    ("synth.algorithms.srfca.pivot_clusters",
     lambda f, b: srfca_mod.pivot_clusters(np.ones((2, 3)), np.random.default_rng(0), 0), "adjacency"),
    ("synth.algorithms.srfca.merge", lambda f, b: srfca_mod.merge(np.ones((2, 2)), 1.0, 9, np.ones(2)), "min_size"),
    ("synth.algorithms.clove.loss_vectors", lambda f, b: clove_mod.loss_vectors(np.ones(3), True), "losses must"),
    ("synth.algorithms.clove.match_clusters",
     lambda f, b: clove_mod.match_clusters(np.zeros(3, int), np.ones((3, 2)), 0), "n_clusters must be"),
    ("synth.algorithms.cfl.bipartition", lambda f, b: cfl_mod.bipartition(np.ones((3, 2))), "similarity must be"),
    # experiments, engine, sweeps, reports
    ("synth.experiment.validate_params", lambda f, b: experiment.validate_params({"sigmaa": 1}), "did you mean"),
    ("synth.experiment.run_experiment", lambda f, b: experiment.run_experiment({"K": 0}), "K must be"),
    ("synth.montecarlo.run_trials", lambda f, b: mc.run_trials(_noop_trial, [{}], trials=0), "trials must be"),
    ("synth.montecarlo.trial_seed", lambda f, b: mc.trial_seed(-1, 0, 0), "root_seed must be"),
    ("synth.sweep.parse_spec", lambda f, b: sweep.parse_spec({"trials": -1}), "trials must be"),
    ("synth.sweep.load_spec", lambda f, b: sweep.load_spec("/nonexistent/spec.toml"), "spec"),
    ("synth.report.wilson_interval", lambda f, b: report.wilson_interval(5, 3), "successes"),
    ("synth.report.build_report", lambda f, b: report.build_report("/nonexistent"), "does not exist"),
    ("synth.store.TrialStore", lambda f, b: store.TrialStore(123), "directory"),
    ("synth.store.check_record", lambda f, b: store.check_record({"hello": "world"}, "x.jsonl, line 3"),
     "x.jsonl, line 3: not a trial record (missing point"),
    ("synth.store.regular_file", lambda f, b: store.regular_file("/", "record file"), "record file is a directory"),
    ("synth.store.verify_records", lambda f, b: store.verify_records(
        [{"point": 5, "trial": 0, "seed": 1, "status": "ok", "params": {}, "result": {"a": 1}}],
        {"fingerprint": "x", "points": [{}]}, "t.jsonl"), "point 5 is out of range"),
    ("synth.store.check_digest", lambda f, b: store.check_digest({"a": 1, "digest": "0" * 64}, "run.json"),
     "run.json: changed after it was written"),
    ("synth.store.record_digest", lambda f, b: store.record_digest({"a": float("nan")}), "obj must be strict JSON"),
    ("synth.store.with_digest", lambda f, b: store.with_digest({"a": {1, 2}}), "obj must be strict JSON"),
    ("synth.store.seal_store", lambda f, b: store.seal_store("/nonexistent-cflab-store"), "not a store to seal"),
    ("synth.store.check_meta", lambda f, b: store.check_meta({"fingerprint": 3}, "m.json"),
     "m.json: not a result-store meta.json"),
    # theory
    ("theory.get_result", lambda f, b: _theory()[0].get_result("ifca-lema1"), "did you mean"),
    ("theory.laws.chi_mean", lambda f, b: _theory()[1].chi_mean(0), "degrees of freedom"),
    ("theory.laws.chi_var", lambda f, b: _theory()[1].chi_var(-1), "degrees of freedom"),
    ("theory.laws.client_loss_law", lambda f, b: _theory()[1].client_loss_law(-1, 1.0, 3), "err2 must be"),
    ("theory.laws.root_loss_law", lambda f, b: _theory()[1].root_loss_law(1.0, -1.0, 3), "sigma must be"),
    ("theory.laws.preference_probability", lambda f, b: _theory()[1].preference_probability(1, 1, 2, 1, 5),
     "cos must be"),
    ("theory.laws.ifca_worst_case", lambda f, b: _theory()[1].ifca_worst_case(50, 1.0, 0.5, 0.7), "alpha must be"),
    ("theory.laws.kl_mlr", lambda f, b: _theory()[1].kl_mlr(np.ones(3), np.ones(4), 1.0), "w_j must have shape"),
    ("theory.stats.wilson", lambda f, b: _theory()[2].wilson(3, 2), "successes must be"),
    ("theory.stats.clopper_pearson", lambda f, b: _theory()[2].clopper_pearson(-1, 2), "successes must be"),
    ("theory.stats.mean_ci", lambda f, b: _theory()[2].mean_ci([1.0, 2.0], confidence=1.5), "confidence"),
]


def _nets():
    pytest.importorskip("torch")
    import nets
    from nets import algorithms, checkpoint, datasets, evaluate, models, partition
    from nets.data import images, leaf, text

    return nets, algorithms, checkpoint, datasets, evaluate, models, partition, images, leaf, text


def _files():
    from nets.data import files

    return files


NETS_CASES = [
    ("nets.run_experiment", lambda t: _nets()[0].run_experiment({"clients": -1}), "clients must be"),
    ("nets.experiment.validate_params", lambda t: _nets()[0].experiment.validate_params({"clientz": 3}),
     "did you mean 'clients'"),
    ("nets.build_federation", lambda t: _nets()[3].build_federation("digits-rotatd", 8, 10, np.random.default_rng()),
     "did you mean"),
    ("nets.default_model", lambda t: _nets()[3].default_model("nope"), "dataset must be one of"),
    ("nets.algorithms.estimator_class", lambda t: __import__("nets.algorithms").algorithms.estimator_class("ifcaa"),
     "did you mean 'ifca'"),
    ("nets.resolve_device", lambda t: _nets()[0].resolve_device("tpu"), "device must be one of"),
    ("nets.models.model_factory", lambda t: _nets()[5].model_factory("nope", (1, 8, 8), 10), "model must be one of"),
    ("nets.partition.partition", lambda t: _nets()[6].partition("nope", None, None, None, None, 10, 4, 5, None, 2,
                                                                np.random.default_rng()), "partition must be one of"),
    ("nets.partition.cluster_sizes", lambda t: _nets()[6].cluster_sizes(-1, 2), "clients must be"),
    ("nets.evaluate.evaluate", lambda t: _nets()[4].evaluate(None, np.zeros((1, 3)), "nope"), "rule must be one of"),
    ("nets.evaluate.train_identity_scores",
     lambda t: _nets()[4].train_identity_scores(None, np.zeros((2, 3)), "nope", [0, 1]), "rule must be one of"),
    ("nets.evaluate.client_scores", lambda t: _nets()[4].client_scores(None, np.zeros((1, 3)), "nope"),
     "rule must be one of"),
    ("nets.algorithms.make_estimator", lambda t: _nets()[1].make_estimator("ifcaa", {}), "did you mean 'ifca'"),
    ("nets.algorithms.hyper_parameters", lambda t: _nets()[1].hyper_parameters("clovee"), "did you mean 'clove'"),
    ("nets.data.leaf.load_leaf", lambda t: _nets()[8].load_leaf("nope", t), "dataset must be"),
    ("nets.data.leaf.leaf_user_count", lambda t: _nets()[8].leaf_user_count("nope", t), "dataset must be"),
    ("nets.data.files.data_dir", lambda t: _files().data_dir(123), "data"),
    ("nets.data.files.resolve", lambda t: _files().resolve("nope", "x"), "nope"),
    # a missing or corrupt data file is one clear DataError naming the file and where it was looked for
    ("nets.data.images.load_mnist", lambda t: _nets()[7].load_mnist(t), "train-images-idx3-ubyte.gz"),
    ("nets.data.images.load_cifar10", lambda t: _nets()[7].load_cifar10(t), "data_batch_1.bin"),
    ("nets.data.images.read_cifar_bin", lambda t: _nets()[7].read_cifar_bin(b"\x00" * 100, "x.bin"),
     "not a CIFAR-10 binary batch"),
    ("nets.data.text.load_ag_news", lambda t: _nets()[9].load_ag_news(t), "test.csv"),
    ("nets.data.text.load_amazon", lambda t: _nets()[9].load_amazon(t), "positive.review"),
]


@pytest.mark.parametrize("name, call, fragment", NETS_CASES, ids=[c[0] for c in NETS_CASES])
def test_nets_invalid_value_is_refused(name, call, fragment, tmp_path):
    from nets.data.files import DataError

    with pytest.raises((ValueError, TypeError, DataError)) as info:
        call(tmp_path)
    assert fragment in str(info.value), f"{name}: {info.value}"
    assert "\n" not in str(info.value).strip()


@pytest.mark.parametrize("argv, fragment", [
    (["run", "--dataset", "digits-rotatd"], "did you mean 'digits-rotated'"),
    (["run", "--clients", "-3"], "clients must be"),
    (["run", "--device", "tpu"], "device must be one of"),
    (["run", "--rounds", "x"], "--rounds"),
    (["run", "--algo", "ifca", "--clientz", "3"], "did you mean '--clients'"),
    (["run", "--dataset", "mnist-rotated", "--data-dir", "/nonexistent-cflab"], "train-images-idx3-ubyte.gz"),
])
def test_nets_cli_bad_input_is_one_line_exit_2(argv, fragment, capsys):
    pytest.importorskip("torch")
    from nets.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, fragment", [
    (["--only", "ifca-fig3x"], "did you mean"),
    (["--n-jobs", "0"], "--n-jobs"),
    (["--quick", "--full"], "not allowed with"),
    (["--device", "tpu"], "invalid choice"),
    (["--quik"], "did you mean '--quick'"),
])
def test_paper_repro_bad_input_is_one_line_exit_2(argv, fragment, capsys):
    import paper_repro

    assert paper_repro.main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, fragment", [
    (["check", "ifca-lema1"], "did you mean 'ifca-lemma1'"),
    (["check", "ifca-lemma1", "--alpha", "0.7"], "alpha"),
    (["check", "ifca-lemma1", "--trials", "-5"], "trials"),
    (["sweep", "ifca-lemma1", "--over", "alpha"], "over"),
    (["lst"], "did you mean 'list'"),
])
def test_theory_cli_bad_input_is_one_line_exit_2(argv, fragment, capsys):
    from theory.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err


def _noop_trial(params, seed):
    return {}


@pytest.mark.parametrize("name, call, fragment", CASES, ids=[c[0] for c in CASES])
def test_invalid_value_is_refused_by_name(name, call, fragment, fed, be):
    with pytest.raises((ValueError, TypeError)) as info:
        call(fed, be)
    assert fragment in str(info.value), f"{name}: {info.value}"


# public callables that take no user values, or are internal building blocks whose inputs the estimators
# above validate ("validation at the boundary, pure array code inside")
EXEMPT = {
    "synth.validation.did_you_mean": "returns a hint for any string; no invalid input",
    "synth.theta.THETA_MODES": "a constant",
    "synth.experiment.PARAMS": "a constant (the schema itself)",
    "synth.experiment.ALGORITHMS": "a constant (the registry)",
    "synth.experiment.Param": "schema record; validated through validate_params",
    "synth.experiment.make_estimator": "called by run_experiment after validate_params",
    "synth.experiment.fit_experiment": "validates with validate_params (covered through run_experiment)",
    "synth.experiment.make_federation": "called by run_experiment after validate_params",
    "synth.metrics.ClusterLabels": "a result record",
    "synth.backend.IllConditionedError": "an exception type",
    "synth.algorithms.DivergenceError": "an exception type",
    "synth.algorithms.FitResult": "a result record",
    "synth.algorithms.History": "a result record",
    "synth.algorithms.ModelBackend": "a Protocol",
    "synth.algorithms.srfca.SRFCA": "covered as synth.algorithms.SRFCA",
    "synth.algorithms.srfca.trimmed_mean_gd": "building block of SRFCA; inputs validated by SRFCA.fit",
    "synth.algorithms.srfca.local_models": "thin wrapper of backend.local_models (covered)",
    "synth.algorithms.srfca.client_distances": "building block of SRFCA; inputs validated by SRFCA.fit",
    "synth.algorithms.srfca.client_cluster_distances": "building block of SRFCA; inputs validated by SRFCA.fit",
    "synth.algorithms.srfca.cluster_distances": "building block of SRFCA; inputs validated by SRFCA.fit",
    "synth.algorithms.srfca.merge_weights": "building block of SRFCA; takes merge()'s validated output",
    "synth.algorithms.srfca.auto_threshold": "any distance matrix: non-finite distances are skipped, fewer than two "
                                             "clients give a positive threshold (tests/test_flower_defaults.py)",
    "synth.algorithms.srfca.distance_quantiles": "any distance matrix: [] for fewer than two clients or no finite "
                                                 "distance",
    "synth.algorithms.clove.used_models": "building block of CLoVE; takes the assignment of its own _assign",
    "synth.algorithms.clove.CLoVE": "covered as synth.algorithms.CLoVE",
    "synth.algorithms.clove.cluster_vectors": "building block of CLoVE; inputs validated by CLoVE.fit",
    "synth.algorithms.clove.order_by_smallest_client": "building block of CLoVE; inputs validated by CLoVE.fit",
    "synth.algorithms.cfl.CFL": "covered as synth.algorithms.CFL",
    "synth.algorithms.cfl.cosine_similarities": "building block of CFL; inputs validated by CFL.fit",
    "synth.montecarlo.BACKENDS": "a constant",
    "synth.montecarlo.WALL_CLOCK_FIELDS": "a constant",
    "synth.montecarlo.CodeChangedWarning": "a warning type",
    "synth.montecarlo.code_hash": "no arguments",
    "synth.montecarlo.comparable": "projection of records already validated by the store",
    "synth.montecarlo.fingerprint": "hash of any JSON-able object",
    "synth.store.fingerprint_of": "hash of the JSON a store's meta.json holds (checked by read_meta)",
    "synth.store.seed_for": "the seed formula behind synth.montecarlo.trial_seed (covered)",
    "synth.montecarlo.known_backends": "no arguments",
    "synth.montecarlo.show_progress": "reads the environment",
    "synth.montecarlo.toolkit_version": "no arguments",
    "synth.store.DIGEST_KEY": "a constant",
    "synth.store.META_FILE": "a constant",
    "synth.store.RECORDS_FILE": "a constant",
    "synth.store.StoreError": "an exception type",
    "synth.store.TornRecordWarning": "a warning type",
    "synth.store.read_meta": "reads a store's meta.json through check_meta (wrong-schema cases: test_faults)",
    "synth.store.read_records": "covered through TrialStore and the torn-record tests",
    "synth.store.write_json_atomic": "writes any JSON-able object atomically (tests: test_sweep, test_store)",
    "synth.store.write_text_atomic": "writes any text atomically",
    "synth.store.save_figure_atomic": "saves any matplotlib figure atomically; a bad path is an OSError",
    "synth.sweep.SweepSpec": "built by parse_spec (covered)",
    "synth.sweep.evaluate": "safe expression evaluator, refusals tested in test_sweep",
    "synth.sweep.experiment_trial": "trial function; parameters validated by run_experiment",
    "synth.sweep.run_sweep": "takes a parsed SweepSpec (parse_spec covered)",
    "synth.sweep.success_of": "evaluates a parsed success criterion",
    "synth.report.boundary_curve": "evaluates a parsed boundary expression",
    "synth.report.load_sweep": "covered through build_report",
    "synth.report.mean_interval": "mean and t-interval of any finite sample",
    "synth.report.summarise": "aggregates records already in the store",
    "synth.report.tidy_rows": "aggregates records already in the store",
    "theory.REGISTRY": "a constant",
}

MODULES = ["synth.validation", "synth.theta", "synth.federation", "synth.population", "synth.backend", "synth.init",
           "synth.metrics", "synth.experiment", "synth.montecarlo", "synth.store", "synth.sweep", "synth.report",
           "synth.algorithms", "synth.algorithms.srfca", "synth.algorithms.clove", "synth.algorithms.cfl", "theory"]


NETS_EXEMPT = {
    "nets.DATASETS": "a constant", "nets.MODELS": "a constant", "nets.PARAMS": "a constant",
    "nets.FunctionalModel": "built by the dataset/model factories from validated names",
    "nets.NetFederation": "built by build_federation (covered)",
    "nets.partition.PoolTooSmallError": "an exception type",
    "nets.TorchBackend": "built by NetFederation.backends from a validated federation",
    "nets.experiment.PARAMS": "a constant",
    "nets.experiment.run_experiment": "covered as nets.run_experiment",
    "nets.models.MODELS": "a constant", "nets.models.ModelSpec": "a record",
    "nets.partition.PARTITIONS": "a constant", "nets.partition.Partition": "a record",
    "nets.evaluate.RULES": "a constant",
    "nets.evaluate.clustering_scores": "metrics of labels already validated (synth.metrics, covered)",
    "nets.evaluate.mean_scores": "weighted means of client_scores' arrays (covered through evaluate)",
    "nets.evaluate.code_scores": "SR-FCA's public-code scoring of the estimator's own result; client_scores validates",
    "nets.checkpoint.save_checkpoint": "writes tensors of a run atomically; tested in test_nets_checkpoint",
    "nets.checkpoint.release_checkpoint": "takes only a path whose lock this process may hold; a no-op otherwise",
    "nets.checkpoint.load_checkpoint": "a missing checkpoint means a fresh start; corrupt ones: test_nets_checkpoint",
    "nets.algorithms.ALGOS": "a constant", "nets.algorithms.AlgoSpec": "a record",
    "nets.algorithms.available": "true/false for a known name",
    "nets.data.images.ImageData": "a record", "nets.data.leaf.LeafData": "a record",
    "nets.data.text.TextData": "a record", "nets.data.leaf.ALL_LETTERS": "a constant",
    "nets.data.text.AMAZON_DOMAINS": "a constant",
    "nets.data.images.read_idx": "reads a checksum-verified file (the loaders above are covered)",
    "nets.data.images.load_digits": "no arguments (scikit-learn's bundled digits)",
    "nets.data.leaf.encode_text": "encodes any string",
    "nets.data.text.tokenize": "tokenises any string",
    "nets.data.files.SOURCES": "a constant", "nets.data.files.DataError": "an exception type",
    "nets.data.leaf.UnlistedFilesWarning": "a warning type",
    "nets.data.files.Source": "a record",
    "nets.data.files.fetch": "downloads (never in tests); refuses unknown names like resolve",
    "nets.data.files.md5_of": "hashes any readable file",
    "nets.data.files.verified_path": "covered through every loader above (missing/corrupt files)",
}
NETS_MODULES = ["nets", "nets.experiment", "nets.models", "nets.partition", "nets.evaluate", "nets.checkpoint",
                "nets.algorithms", "nets.data.images", "nets.data.leaf", "nets.data.text", "nets.data.files"]


def test_every_public_entry_point_has_a_case_or_a_reason():
    covered = {c[0] for c in CASES} | {c[0] for c in NETS_CASES}
    missing = []
    modules = MODULES + (NETS_MODULES if importlib.util.find_spec("torch") else [])
    exempt = {**EXEMPT, **NETS_EXEMPT}
    for modname in modules:
        mod = importlib.import_module(modname)
        for name in getattr(mod, "__all__", []):
            full = f"{modname}.{name}"
            obj = getattr(mod, name)
            if full in covered or full in exempt:
                continue
            if inspect.isclass(obj) and any(c.startswith(full + ".") for c in covered):
                continue
            missing.append(full)
    assert not missing, f"public entry points without a bad-input case or exemption: {missing}"


def test_huge_sizes_give_one_clear_line():
    from synth.cost import format_bytes, format_seconds
    from synth.sweep import parse_spec

    # found by the spec fuzzer: 3.4e307 trials made the memory message overflow while formatting
    assert format_bytes(10**400) == "inf PiB" and format_seconds(10**400) == "inf years"
    for trials in (3.440818261867311e307, 10**400):
        with pytest.raises(ValueError, match=r"trials must be an integer in \[1, 1e\+09\]") as err:
            parse_spec({"name": "x", "trials": trials})
        assert len(str(err.value)) < 200
