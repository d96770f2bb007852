"""Flower runs with clients that fail or answer too late: IFCA and CLoVE go on with the round's other clients
(participation subsets), SR-FCA resumes (a client lost in a TrimmedMeanGD step leaves that step only), Local
removes a client whose local model did not arrive and keeps the others', a SuperNode that cannot build its
partition is one error -- and nothing waits longer than the exchange's timeout.

Two simulations (two actors each, so that a slow client does not hold up the others) run the cases: the late
client's with a short exchange timeout, every other case with a long one, so that on a loaded machine the messages
queued behind other strategies' exchanges are not lost for being slow; skipped without the ``flower`` extra.
"""

from __future__ import annotations

import logging
import re
import time
import warnings

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("ray")

import nets.experiment as experiment  # noqa: E402
from nets.flower import simulate, strategy_for  # noqa: E402
from nets.flower.strategies import ClientFailed  # noqa: E402

pytestmark = pytest.mark.flower

BASE = {"dataset": "digits-rotated", "clients": 8, "n_per_client": 30, "rounds": 3, "local_steps": 2, "seed": 0}
SRFCA = {"algo": "srfca", "threshold": 1.0, "trmean_steps": 5, "local_train_steps": 60, "step_size": 0.3}
# seconds an exchange of the late-client case waits; the late client sleeps longer.  Above the first exchange's
# warm-up of the actors (2-4 s idle, 13.6 s at a load average of 5 on 2 cores), the one slow exchange of a sound run
TIMEOUT = 30.0
PATIENCE = 120.0  # the other cases' timeout: their clients answer or fail at once, however loaded the machine
CASES = {
    "ifca-fails-losses": ({"algo": "ifca"}, [{"client": 2, "kind": "fail", "round": 1, "action": "losses"}]),
    "ifca-fails-update": ({"algo": "ifca"}, [{"client": 3, "kind": "fail", "round": 1, "action": "train"}]),
    "ifca-late": ({"algo": "ifca"}, [{"client": 5, "kind": "drop", "round": 1, "action": "losses",
                                      "seconds": 1.5 * TIMEOUT}]),
    "ifca-all-fail": ({"algo": "ifca"}, [{"client": c, "kind": "fail", "round": 1, "action": "losses"}
                                         for c in range(8)]),
    "clove-fails-losses": ({"algo": "clove"}, [{"client": 1, "kind": "fail", "round": 1, "action": "losses"}]),
    # exchange 1 describes, 2 trains the local models, 3 their cross losses, 4.. TrimmedMeanGD's gradients
    # (client 6 is in a ONE_SHOT cluster, so the first REFINE asks it for gradients)
    "srfca-fails-gradient": (SRFCA, [{"client": 6, "kind": "fail", "exchange": 5, "action": "gradient"}]),
    "local-fails": ({"algo": "local", "local_train_steps": 20}, [{"client": 6, "kind": "fail", "action": "train"}]),
}


@pytest.fixture(scope="module")
def faulty_runs():
    strategies = {name: strategy_for({**BASE, **params}, history=True,
                                     timeout=TIMEOUT if name == "ifca-late" else PATIENCE, faults=faults)
                  for name, (params, faults) in CASES.items()}
    broken = strategy_for({**BASE, "algo": "ifca"}, timeout=PATIENCE,
                          faults=[{"client": 0, "kind": "fail", "action": "partition"}])
    t0 = time.perf_counter()
    flwr_log = _Records()
    logging.getLogger("flwr").addHandler(flwr_log)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ClientFailed)
            simulate([strategies["ifca-late"]], actors=2)
            with pytest.raises(ValueError, match="could not set up its partition") as err:
                simulate([s for name, s in strategies.items() if name != "ifca-late"] + [broken], actors=2)
    finally:
        logging.getLogger("flwr").removeHandler(flwr_log)
    failed = [str(w.message) for w in caught if issubclass(w.category, ClientFailed)]
    return strategies, str(err.value), time.perf_counter() - t0, failed, flwr_log.records


class _Records(logging.Handler):
    """The records Flower's logger lets through (its level decides: without verbose, none)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _nets_labels(params: dict, monkeypatch) -> list[np.ndarray]:
    """The labels ``nets run``'s monitor sees at every round (no faults)."""
    seen: list[np.ndarray] = []
    metrics = experiment._metrics
    monkeypatch.setattr(experiment, "_metrics", lambda labels, truth: (seen.append(np.array(labels)),
                                                                       metrics(labels, truth))[1])
    experiment.run_experiment(params)
    monkeypatch.undo()
    return seen


def _lost(strategy) -> list[tuple[str, int]]:
    return [(action, client) for _, action, client, _ in strategy.record["flower"]["lost"]]


def test_ifca_client_lost_before_its_choice_leaves_the_round(faulty_runs, monkeypatch):
    runs = faulty_runs[0]
    s = runs["ifca-fails-losses"]
    want = _nets_labels({**BASE, "algo": "ifca"}, monkeypatch)
    assert _lost(s) == [("query.losses", 2)]
    assert np.array_equal(s.round_labels[0], want[0])  # before the fault: as without it
    got = s.round_labels[1]
    assert got[2] == -1  # not in M_1
    others = np.arange(8) != 2
    assert np.array_equal(got[others], want[1][others])  # the others chose from the same models
    assert s.record["unassigned"] == 0 and s.record["test_accuracy"] is not None


def test_ifca_client_lost_after_its_choice_keeps_its_choice(faulty_runs, monkeypatch):
    runs = faulty_runs[0]
    s = runs["ifca-fails-update"]
    want = _nets_labels({**BASE, "algo": "ifca"}, monkeypatch)
    assert _lost(s) == [("train", 3)]
    assert np.array_equal(s.round_labels[1], want[1])  # everyone chose in round 1
    assert np.isfinite(s.record["test_loss"])


def test_ifca_late_client_is_lost_after_the_timeout_only(faulty_runs):
    runs, seconds = faulty_runs[0], faulty_runs[2]
    s = runs["ifca-late"]
    assert s.record["flower"]["lost"][0][1:3] == ["query.losses", 5]
    assert "no answer within" in s.record["flower"]["lost"][0][3]
    assert s.round_labels[1][5] == -1 and (s.round_labels[2] >= 0).all()  # back in the next round
    exchange = s.record["flower"]["lost"][0][0]  # waited for the timeout, not for the client
    assert TIMEOUT <= s._log.waits[exchange - 2] < 3 * TIMEOUT  # (waits start at exchange 2: 1 describes)
    assert seconds < 600


def test_round_without_answers_changes_nothing(faulty_runs):
    runs = faulty_runs[0]
    s = runs["ifca-all-fail"]
    assert len(_lost(s)) == 8 and (s.round_labels[1] == -1).all()
    assert (s.round_labels[2] >= 0).all() and s.record["test_accuracy"] is not None
    # ... but the record names the round: nets flower exits 1 on it, and no clustering score is claimed for it
    assert s.record["flower"]["rounds_without_answers"] == [1]
    assert s.record["flower"]["answered"][:3] == [[0, 8, 8], [1, 0, 8], [2, 8, 8]]
    assert s.record["history"]["ari"][1] is None and s.record["history"]["ari"][2] is not None


def test_clove_client_lost_leaves_the_round(faulty_runs):
    runs = faulty_runs[0]
    s = runs["clove-fails-losses"]
    assert _lost(s) == [("query.losses", 1)]
    assert s.round_labels[1][1] == -1 and (np.delete(s.round_labels[1], 1) >= 0).all()
    assert (s.round_labels[2] >= 0).all()


def test_srfca_client_lost_in_a_gradient_step_resumes(faulty_runs, monkeypatch):
    """Client 6 fails one TrimmedMeanGD step: it leaves that step's trimmed mean only -- no client
    removed, no local model asked again -- and keeps its place: every clustering equals the fault-free nets run's."""
    runs = faulty_runs[0]
    s = runs["srfca-fails-gradient"]
    assert _lost(s) == [("query.gradient", 6)]
    flower = s.record["flower"]
    assert flower["removed_clients"] == []
    want = _nets_labels({**BASE, **SRFCA}, monkeypatch)
    assert len(s.round_labels) == len(want) and s.round_labels[0][6] >= 0
    for got, ref in zip(s.round_labels, want, strict=True):
        assert np.array_equal(got, ref)
    assert s.labels[6] >= 0


def test_local_client_lost_is_removed(faulty_runs):
    """Client 6's local model does not arrive: it is removed and unassigned; the other 7 keep the local models of
    the one local exchange (nothing is asked again: describe, local models, test) and are scored with them."""
    runs = faulty_runs[0]
    s = runs["local-fails"]
    assert _lost(s) == [("train", 6)] and s.record["flower"]["removed_clients"] == [6]
    assert s.record["unassigned"] == 1 and s.record["test_accuracy"] is not None
    assert s.record["n_clusters"] == 7 and s.labels.tolist() == [0, 1, 2, 3, 4, 5, -1, 6]
    assert s.record["flower"]["exchanges"] == 3 and "reused" not in s.record["flower"]


def test_partition_that_cannot_be_built_is_one_error(faulty_runs):
    error = faulty_runs[1]
    assert "client 0 fails partition" in error and "\n" not in error


def test_failing_client_is_one_line_without_traceback(faulty_runs):
    """Every failing client is one ClientFailed warning (its id, the action, its exception's message), once per
    client and action however many rounds it fails in; Flower's log of it (a ~70-line traceback) stays quiet."""
    failed, flwr_records = faulty_runs[3], faulty_runs[4]
    found = set()
    for text in failed:
        match = re.fullmatch(r"Flower client (\d+) failed in (\S+): client (\d+) fails .*", text)
        assert match and match.group(1) == match.group(3) and "\n" not in text, text
        found.add((int(match.group(1)), match.group(2)))
    expected = ({(2, "query.losses"), (3, "train"), (1, "query.losses"), (6, "query.gradient"), (6, "train")}
                | {(c, "query.losses") for c in range(8)})
    assert found == expected
    assert flwr_records == [], [r.getMessage()[:200] for r in flwr_records[:3]]
