from __future__ import annotations

import pytest

from monitor.counters import CounterTracker, Ewma, PortSnapshot


def test_ewma_formula_and_step_response():
    e = Ewma(0.3)
    assert e.update(10) == 10
    assert e.update(0) == pytest.approx(7.0)
    e = Ewma(0.3)
    e.update(0.0)
    vals = [e.update(1.0) for _ in range(10)]
    assert vals[2] == pytest.approx(1 - 0.7**3) and vals[9] > 0.97
    with pytest.raises(ValueError):
        Ewma(0)


def test_rates_drops_and_utilization():
    tr = CounterTracker(alpha=0.5)
    tr.set_capacity("A:3", 10.0)
    assert tr.update("A:3", 0.0, PortSnapshot(0, 0)) is None
    s = tr.update("A:3", 2.0, PortSnapshot(tx_bytes=2_500_000, rx_bytes=250_000, drops=40))
    assert s.tx_mbps == pytest.approx(10.0) and s.rx_mbps == pytest.approx(1.0)
    assert s.drops == 40 and s.drop_pps == 20 and s.util == pytest.approx(1.0)
    assert s.smoothed_util == pytest.approx(1.0)
    s = tr.update("A:3", 3.0, PortSnapshot(tx_bytes=2_500_000, rx_bytes=250_000, drops=40))
    assert s.util == 0 and s.smoothed_util == pytest.approx(0.5) and s.drops == 0


def test_counter_reset_restarts_point_and_unknown_capacity():
    tr = CounterTracker()
    tr.update("B:1", 0.0, PortSnapshot(1000, 1000))
    assert tr.update("B:1", 1.0, PortSnapshot(10, 10)) is None  # went backwards
    s = tr.update("B:1", 2.0, PortSnapshot(125_010, 10))
    assert s.tx_mbps == pytest.approx(1.0) and s.util is None and s.smoothed_util is None
