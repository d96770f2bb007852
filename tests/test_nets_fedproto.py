"""FedProto (Tan et al., AAAI 2022) on nets: prototypes are class means of local features, the global
prototype is their count-weighted mean, lambda = 0 is local training, lambda > 0 pulls the clients'
prototypes together.  Tiny digits federations, full-batch or seeded minibatches: deterministic."""

import numpy as np
import pytest
import torch

from nets.datasets import build_federation
from nets.representation import Representation
from synth.algorithms import FedProto
from synth.algorithms.fedproto import global_prototypes
from synth.algorithms.perfedavg import shared_init


def _backends(batch_size=None, clients=8, n=16, seed=0):
    fed = build_federation("digits-label-skew-1", clients, n, np.random.default_rng(seed), n_test=8)
    model = fed.model("mlp", dtype=torch.float64)
    return fed, *fed.backends(model, batch_size=batch_size, seed=1)


def test_prototypes_are_class_means_of_local_features():
    fed, train, _ = _backends(batch_size=4)
    est = FedProto(n_rounds=3, local_steps=3, step_size=0.1, proto_lambda=1.0, random_state=0).fit(train)
    rep = Representation(train.model)
    models = torch.as_tensor(est.models_)
    C = fed.n_classes
    for i in range(fed.n_clients):  # reference: one client at a time, features of each sample, class means
        n = int(fed.n_samples[i])
        with torch.no_grad():
            feats = rep.features(models[i], train.X[i, :n]).numpy()
        ys = fed.y[i, :n]
        for k in range(C):
            if (ys == k).any():
                np.testing.assert_allclose(est.local_prototypes_[i, k], feats[ys == k].mean(0), rtol=0, atol=1e-10)
                assert est.class_counts_[i, k] == (ys == k).sum()
            else:
                assert est.class_counts_[i, k] == 0
    # the global prototype is the count-weighted mean of the local ones (FedProto Sec. 4)
    counts = est.class_counts_
    for k in range(C):
        if counts[:, k].sum():
            ref = (counts[:, k, None] * est.local_prototypes_[:, k]).sum(0) / counts[:, k].sum()
            np.testing.assert_allclose(est.prototypes_[k], ref, rtol=0, atol=1e-10)
        else:
            assert np.isnan(est.prototypes_[k]).all()


def test_lambda_zero_is_local_training():
    fed, train, _ = _backends(batch_size=None)
    est = FedProto(n_rounds=3, local_steps=4, step_size=0.2, proto_lambda=0.0, init="default",
                   random_state=0).fit(train)
    # the shared initial model FedProto drew: the same draw of the default scheme
    start = shared_init(train, "default", np.random.default_rng(0))
    local = train.local_update(start, np.zeros(fed.n_clients, dtype=np.int64), 12, 0.2)
    np.testing.assert_allclose(est.models_, local.numpy(), rtol=0, atol=1e-10)


def test_regulariser_pulls_client_prototypes_to_the_global_ones():
    # FedProto's claim (Sec. 4): the regulariser aligns each client's class representations with the global
    # prototypes.  Same data, seeds and steps; only lambda differs.
    fed, train, _ = _backends(batch_size=None, clients=8, n=16)

    def spread(lam):
        est = FedProto(n_rounds=6, local_steps=5, step_size=0.2, proto_lambda=lam, random_state=0).fit(train)
        P, counts = est.local_prototypes_, est.class_counts_
        G = global_prototypes(counts, P)
        has = counts > 0
        return np.linalg.norm(P - G[None], axis=2)[has].mean()

    aligned, free = spread(5.0), spread(0.0)
    assert aligned < 0.7 * free, (aligned, free)


def test_synthetic_backend_refuses_fedproto():
    from synth.federation import MixedLinearRegression

    be = MixedLinearRegression(K=2, clients_per_cluster=2, n=10, d=3).sample(np.random.default_rng(0)).backend()
    with pytest.raises(TypeError, match="representation"):
        FedProto().fit(be)


def test_synth_command_line_says_nets_only(capsys):
    from synth.cli import main

    assert main(["run", "--algo", "fedproto"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nets" in err[0] and "fedproto" in err[0]


def test_no_transfer_to_classes_a_client_never_saw():
    # FedProto's failing instance (Sec. 4: only prototypes travel, every classifier stays local): under label
    # skew 1 a client's model never sees the other clusters' classes, so it cannot recognise them, while one
    # FedAvg model trained on the same data and steps does.  Measured: FedProto 0.0 on the other clusters'
    # samples (1.0 on its own), FedAvg 0.73 on both.
    from synth.algorithms import GlobalModel

    fed, train, _ = _backends(batch_size=None, clients=8, n=16)
    proto = FedProto(n_rounds=6, local_steps=5, step_size=0.2, proto_lambda=1.0, random_state=0).fit(train)
    avg = GlobalModel(n_rounds=6, local_steps=5, step_size=0.2, averaging="model", init="default",
                      random_state=0).fit(train)

    def accuracy(theta, j):
        n = int(fed.n_samples[j])
        with torch.no_grad():
            pred = train.model.forward(torch.as_tensor(theta), train.X[j, :n]).argmax(1).numpy()
        return (pred == fed.y[j, :n]).mean()

    C, m = fed.clusters, fed.n_clients
    pairs = [(i, j) for i in range(m) for j in range(m) if C[i] != C[j]]
    unseen_proto = np.mean([accuracy(proto.models_[i], j) for i, j in pairs])
    unseen_avg = np.mean([accuracy(avg.models_[0], j) for _, j in pairs])
    own_proto = np.mean([accuracy(proto.models_[i], i) for i in range(m)])
    assert unseen_proto < 0.05 < 0.5 < unseen_avg, (unseen_proto, unseen_avg)
    assert own_proto > 0.9


def test_prototype_scoring_classifies_by_the_nearest_global_prototype():
    # PFLlib clientproto.test_metrics: argmin_j MSE(f_i(x), C_bar^(j)), computed here one test sample at a time
    fed, train, test = _backends(batch_size=4)
    kw = dict(n_rounds=3, local_steps=3, step_size=0.1, proto_lambda=1.0, random_state=0)
    own = FedProto(**kw).fit(train)
    est = FedProto(scoring="prototype", **kw).fit(train)
    head = train.head_mask()
    np.testing.assert_array_equal(est.models_[:, ~head], own.models_[:, ~head])  # same training, same extractors
    np.testing.assert_array_equal(est.prototypes_, own.prototypes_)
    rep = Representation(train.model)
    protos = torch.as_tensor(est.prototypes_)
    _, acc = test.scores(torch.as_tensor(est.models_), np.arange(fed.n_clients))
    _, acc_own = test.scores(torch.as_tensor(own.models_), np.arange(fed.n_clients))
    for i in range(fed.n_clients):
        n = int(test.n_samples[i])
        with torch.no_grad():
            feats = rep.features(torch.as_tensor(own.models_[i]), test.X[i, :n])
        mse = ((feats[:, None, :] - protos[None]) ** 2).mean(-1)
        mse = torch.where(torch.isnan(mse), torch.inf, mse)  # classes without a prototype: never chosen
        want = float((mse.argmin(1) == test.y[i, :n]).double().mean())
        assert acc[i] == pytest.approx(want, abs=1e-12)
    assert not np.allclose(acc, acc_own)  # the two rules score differently on this instance


def test_client_mean_prototypes_are_the_unweighted_mean():
    counts = np.array([[3.0, 0.0], [1.0, 2.0]])
    means = np.array([[[1.0, 1.0], [9.0, 9.0]], [[3.0, 5.0], [2.0, 0.0]]])
    np.testing.assert_allclose(global_prototypes(counts, means, "clients"), [[2.0, 3.0], [2.0, 0.0]])
    np.testing.assert_allclose(global_prototypes(counts, means), [[1.5, 2.0], [2.0, 0.0]])
