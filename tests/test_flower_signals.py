"""The signal handling of a Flower run (nets.flower.session._Signals), without Ray: a signal stops the run from a
thread and never raises inside Ray's code; the run's end turns it into Interrupted."""

from __future__ import annotations

import signal
import threading
import types

import pytest

pytest.importorskip("ray")

from nets.flower.session import Interrupted, _in_ray, _Signals  # noqa: E402


def _frame_in(module_name: str):
    """A frame whose globals name ``module_name`` (as if the main thread ran that module's code)."""
    namespace = {"__name__": module_name}
    exec("import sys\ndef here():\n    return sys._getframe()\n", namespace)
    return namespace["here"]()


def test_a_frame_in_ray_is_recognised_and_others_not():
    assert _in_ray(_frame_in("ray._private.worker"))
    assert _in_ray(_frame_in("ray"))
    assert not _in_ray(_frame_in("rayleigh.tools"))
    assert not _in_ray(_frame_in("nets.flower.server"))


def test_a_signal_stops_the_run_from_a_thread_and_raises_nothing_at_once():
    stopped = threading.Event()
    signals = _Signals(stopped.set, grace=30.0)
    signals.handler(signal.SIGTERM, _frame_in("ray._private.worker"))  # inside Ray: no raise here
    assert stopped.wait(5.0) and signals.interrupted() and signals.received == signal.SIGTERM
    signals.handler(signal.SIGINT, None)  # a second signal while stopping is ignored
    assert signals.received == signal.SIGTERM
    signals.finished.set()


def test_a_forced_stop_raises_only_outside_ray():
    signals = _Signals(lambda: None, grace=30.0)
    signals.received, signals.forcing = signal.SIGTERM, True
    signals.handler(signal.SIGINT, _frame_in("ray.util"))  # inside Ray: waits for the next chance
    with pytest.raises(Interrupted) as err:
        signals.handler(signal.SIGINT, _frame_in("flwr.simulation"))
    assert err.value.signum == signal.SIGTERM and not signals.forcing


def test_without_a_stop_callback_the_signal_raises_at_once():
    with pytest.raises(Interrupted):
        _Signals().handler(signal.SIGINT, types.SimpleNamespace(f_globals={}, f_back=None))
