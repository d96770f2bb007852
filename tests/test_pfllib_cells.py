"""CLoVE's cells run the four PFLlib baselines (its Table 6) with PFLlib's options: the overrides that
figures/targets/clove_nets.py gives each of them, and that nets accepts every one of them.  No runs."""

import pytest

from figures.registry import Context
from figures.targets.clove_nets import _personal
from nets.experiment import check_algo_params


@pytest.mark.parametrize("size", ["tiny", "quick", "full"])
def test_pfllib_options_of_the_cells(tmp_path, size):
    ctx = Context(out=tmp_path, size=size, n_jobs=1, device="cpu")
    per, note = _personal(ctx, "perfedavg", 100)
    assert per["step_size"] == per["algo_params"]["meta_alpha"] == 0.005  # PFLlib main.py:400
    assert per["algo_params"] | {"meta_alpha": 0} == {"meta_alpha": 0, "meta_passes": 2, "meta_weights": "samples",
                                                      "meta_adapt_batch": 100, "meta_batch": 100}
    assert per["local_steps"] == 1  # with minibatch meta-steps local_steps counts epochs: the cells' one epoch
    assert "PFLlib" in note
    assert _personal(ctx, "fedala", 100)[0]["algo_params"] == {"ala_batch_size": 100, "ala_max_steps": None}
    assert _personal(ctx, "fedproto", 100)[0]["algo_params"] == {
        "scoring": "prototype", "prototype_mean": "clients", "local_prototypes": "during"}
    assert _personal(ctx, "fedpac", 100)[0]["algo_params"] == {"prototype_mean": "clients", "head_assignment": "pfllib"}
    assert ("rounds" in per) == (size == "quick")
    for algo in ("perfedavg", "fedala", "fedproto", "fedpac"):
        check_algo_params(algo, _personal(ctx, algo, 4)[0]["algo_params"])


def test_the_batch_size_is_the_cells():
    ctx = Context(out="x", size="tiny", n_jobs=1, device="cpu")
    assert _personal(ctx, "fedala", 4)[0]["algo_params"]["ala_batch_size"] == 4
    assert "ala_batch_size" not in _personal(ctx, "fedala")[0]["algo_params"]  # the notes' calls give none
    assert _personal(ctx, "ifca", 4) == ({}, "")
