"""Seed 004 estimators and FlowRemapping."""
from __future__ import annotations

import math

import pytest

from monitor.load_estimators import (
    STAGE1_WEIGHTS,
    CycleSmoother,
    FlowRemapper,
    limit_weights,
    rtt_weights,
    throughput_weights,
)


def test_stage1_weights_match_the_seed():
    assert STAGE1_WEIGHTS[:8] == [1.0] * 8
    assert STAGE1_WEIGHTS[8] == pytest.approx(0.88) and STAGE1_WEIGHTS[15] == pytest.approx(0.11)
    assert len(STAGE1_WEIGHTS) == 16


def test_cycle_average_of_a_periodic_signal():
    sm = CycleSmoother()
    for i in range(400):
        sm.add(50 + 20 * math.sin(2 * math.pi * i / 40))
    assert sm.cycles >= 5
    assert sm.value() == pytest.approx(50, abs=3)


def test_rtt_weights_favour_the_unloaded_path():
    idle, busy = CycleSmoother(), CycleSmoother()
    for i in range(200):
        idle.add(40 + (i % 2) * 0.5)
        # busy path: queue builds to +60 ms and drains, repeatedly
        busy.add(40 + 60 * abs(math.sin(math.pi * i / 50)))
    w = rtt_weights([idle, busy])
    assert sum(w) == pytest.approx(1) and w[0] > 0.7 > w[1]
    assert rtt_weights([idle, idle]) == [0.5, 0.5]


def test_throughput_weights_per_flow_and_equal_band():
    a, b = CycleSmoother(), CycleSmoother()
    for _ in range(50):
        a.add(900.0)
        b.add(300.0)
    w = throughput_weights([a, b], nflows=[10, 10])
    assert w == pytest.approx([0.75, 0.25], abs=1e-6)
    assert throughput_weights([a, b], nflows=[30, 10]) == [0.5, 0.5]  # 30 vs 30 per flow


def test_limit_weights_step_and_floor():
    w = limit_weights([0.5, 0.5], [1.0, 0.0])
    assert w == pytest.approx([0.6, 0.4])
    w = limit_weights([0.15, 0.85], [0.0, 1.0])
    assert min(w) >= 0.1 - 1e-9 and sum(w) == pytest.approx(1)


def test_remapping_moves_youngest_first():
    r = FlowRemapper(2)
    for i in range(10):
        r.add_flow(f"f{i}", 0 if i < 6 else 1, now=float(i))
    assert r.counts() == [6, 4]
    moves = r.remap([0.4, 0.6], now=100.0)
    assert [(m.flow, m.src, m.dst) for m in moves] == [("f5", 0, 1), ("f4", 0, 1)]
    assert r.counts() == [4, 6]
    moves = r.remap([0.5, 0.5], now=200.0)  # the flows just remapped are the youngest on path 1
    assert {m.flow for m in moves} == {"f4"} and r.counts() == [5, 5]
    with pytest.raises(ValueError):
        r.remap([1.0], now=0)


def test_a_long_fall_closes_the_cycle_when_bounded():
    # rate steady at 4, then falling for 20 samples with no trough: the unbounded smoother keeps
    # the steady cycle's average, a bounded one follows the fall
    steady = [4.0, 4.4, 3.8, 4.3, 3.9, 4.4, 3.8]
    fall = [max(1.0, 4.0 - 0.15 * i) for i in range(32)]
    free, bounded = CycleSmoother(), CycleSmoother(max_cycle=8)
    for x in steady + fall:
        free.add(x)
        bounded.add(x)
    assert free.cycles == 0 and free.value() > 3.0  # the running mean of everything since the start
    assert bounded.cycles >= 3 and bounded.value() < 2.5
    with pytest.raises(ValueError, match="max_cycle"):
        CycleSmoother(max_cycle=1)
