"""Per-FedAvg, FedALA, FedProto and FedPAC from the command lines and sweep specs: selectable by name, their
hyper-parameters set by name and validated (a bad value or a misspelt name is one line and exit status 2)."""

import json

import pytest

from synth.cli import main as synth_main
from synth.sweep import parse_spec, run_sweep

SMALL = ["--K", "2", "--clients-per-cluster", "3", "--n", "20", "--d", "3", "--rounds", "5", "--local-steps", "2"]


@pytest.mark.parametrize("algo, flags", [("perfedavg", ["--meta-alpha", "0.05", "--meta-variant", "hf"]),
                                         ("fedala", ["--ala-eta", "0.5", "--ala-fraction", "0.5"])])
def test_synth_run_takes_the_algorithm_and_its_hyper_parameters(algo, flags, capsys):
    assert synth_main(["run", "--algo", algo, *SMALL, *flags, "--json"]) == 0
    rec = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert rec["algo"] == algo and rec["n_clusters"] == 6 and rec["client_error"] >= 0


@pytest.mark.parametrize("flags, name", [(["--meta-alpha", "-1"], "meta_alpha must be"),
                                         (["--ala-fraction", "0"], "ala_fraction must be"),
                                         (["--meta-variant", "so"], "meta_variant must be one of fo, hf"),
                                         (["--meta-alfa", "0.1"], "did you mean '--meta-alpha'")])
def test_synth_run_refuses_bad_hyper_parameters_in_one_line(flags, name, capsys):
    algo = "fedala" if flags[0].startswith("--ala") else "perfedavg"  # each algorithm with its own flags
    assert synth_main(["run", "--algo", algo, *SMALL, *flags]) == 2
    err = capsys.readouterr().err
    assert name in err and err.count("\n") == 1


@pytest.mark.parametrize("algo", ["fedproto", "fedpac"])
def test_synth_run_says_representation_methods_run_on_nets(algo, capsys):
    assert synth_main(["run", "--algo", algo]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "python -m nets run --algo " + algo in err


def test_sweep_spec_selects_the_personalised_methods(tmp_path):
    spec = parse_spec({"trials": 1, "fixed": {"K": 2, "clients_per_cluster": 3, "n": 20, "d": 3, "rounds": 4,
                                              "local_steps": 2},
                       "algorithms": [{"algo": "perfedavg", "meta_alpha": 0.05},
                                      {"algo": "fedala", "label": "fedala-s05", "ala_fraction": 0.5}]})
    assert [p["algorithm"] for p in spec.points] == ["perfedavg", "fedala-s05"]
    assert spec.points[0]["meta_alpha"] == 0.05 and spec.points[1]["ala_fraction"] == 0.5
    recs = run_sweep(spec, tmp_path / "sweep")
    assert [r["status"] for r in recs] == ["ok", "ok"]
    with pytest.raises(ValueError, match=r"unknown parameter 'ala_frac' .*did you mean 'ala_fraction'"):
        parse_spec({"trials": 1, "algorithms": [{"algo": "fedala", "ala_frac": 0.5}]})


@pytest.mark.parametrize("param, message", [("meta_alfa=0.1", "did you mean 'meta_alpha'"),
                                            ("ala_eta=0.1", "PerFedAvg has no hyper-parameter 'ala_eta'"),
                                            ("meta_alpha=-1", "meta_alpha must be")])
def test_nets_run_validates_algorithm_hyper_parameters(param, message, capsys):
    pytest.importorskip("torch")
    from nets.cli import main as nets_main

    code = nets_main(["run", "--algo", "perfedavg", "--dataset", "digits-label-skew-1", "--clients", "4",
                      "--n-per-client", "8", "--n-test", "4", "--rounds", "1", "--local-steps", "1",
                      "--algo-param", param])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
