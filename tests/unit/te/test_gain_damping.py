"""Offload gain and damping: short flows are not moved, flows do not flap, bursts are capped."""
from __future__ import annotations

import subprocess
import sys

import pytest

from app.te.damping import Damper
from app.te.gain import offload_gain, predicted_remaining


def test_an_elephant_that_sent_a_lot_is_worth_moving():
    # 100 MB sent at 1.3 Mbit/s (starved by small flows), a 10 Mbit/s circuit after a 0.4 s switch-over
    g = offload_gain(100e6, 1.3, 10.0, 0.4)
    assert g.pays and g.remaining_bytes == 100e6
    assert g.stay_s == pytest.approx(800e6 / 1.3e6) and g.move_s == pytest.approx(0.4 + 80.0)
    assert "sooner" in g.reason


def test_a_short_flow_is_not_moved_and_the_reason_says_why():
    g = offload_gain(200e3, 5.0, 10.0, 0.4)  # 200 kB so far: 0.32 s where it is vs 0.56 s moved
    assert not g.pays and g.gain_s < 0 and "switch-over" in g.reason
    assert g.as_dict()["pays"] is False


def test_a_small_speedup_is_not_worth_a_wrong_prediction():
    g = offload_gain(50e6, 9.0, 10.0, 0.2, min_gain_s=1.0)  # gains ~4 s on ~44 s: 1.1x
    assert not g.pays and "sooner (<" in g.reason


def test_the_tail_shape_sets_the_prediction_and_bad_input_is_refused():
    assert predicted_remaining(10e6, alpha=2.0) == 10e6
    assert predicted_remaining(10e6, alpha=3.0) == 5e6
    with pytest.raises(ValueError, match="alpha"):
        predicted_remaining(1.0, alpha=1.0)
    with pytest.raises(ValueError, match="current rate"):
        offload_gain(1e6, 0.0, 10.0, 0.1)
    with pytest.raises(ValueError, match="switch-over"):
        offload_gain(1e6, 1.0, 10.0, -1.0)


def test_hold_time_cap_and_hysteresis():
    d = Damper(min_hold_s=10.0, max_moves=2, interval_s=1.0, on=0.9, off=0.6)
    assert d.why_not("f1", 0.0) is None
    d.moved("f1", 0.0)
    assert "held" in d.why_not("f1", 5.0)
    assert d.why_not("f1", 10.0) is None  # the hold is over (and the cap window too)
    d.moved("f2", 20.0)
    d.moved("f3", 20.1)
    assert "cap" in d.why_not("f4", 20.5)
    assert d.why_not("f4", 21.2) is None  # the window moved on
    assert d.triggers(0.95, moved=False) and not d.triggers(0.8, moved=False)
    assert not d.triggers(0.8, moved=True) and d.triggers(0.5, moved=True)  # back only below off
    d.forget("f1")
    with pytest.raises(ValueError, match="hysteresis"):
        Damper(on=0.5, off=0.6)


def test_the_te_package_is_plain():
    code = "import sys, app.te.gain, app.te.damping; assert 'os_ken' not in sys.modules and 'flask' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
