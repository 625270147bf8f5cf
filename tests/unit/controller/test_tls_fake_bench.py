"""bench/ctl_tls_fake.py splits each plan step's round trip by the fake switch's barrier times."""
from __future__ import annotations

import pytest

from bench.ctl_tls_fake import legs


def step(target: str, started: float, sent: float, finished: float) -> dict:
    return {"target": f"{target}/reservation#1 p30000 [in_port=1] -> 3", "started_at": started,
            "detail": {"sent_at": sent}, "finished_at": finished}


def test_legs_match_each_step_to_the_barrier_its_switch_answered_meanwhile():
    rec = {"started_at": 10.0, "finished_at": 10.0105,
           "steps": [step("A", 10.001, 10.0012, 10.004), step("C", 10.005, 10.0051, 10.010)]}
    report = {"0xa1": {"barriers": [[10.0020, 10.0021], [10.0060, 10.0061]]},  # A's second: not in its step
              "0xc1": {"barriers": [[10.0070, 10.0075]]}}
    raw: dict[str, list[float]] = {}
    legs([rec], report, raw)
    assert raw["leg.plan_head"] == pytest.approx([1.0])
    assert raw["leg.plan_tail"] == pytest.approx([0.5])
    assert raw["leg.step_to_queued"] == pytest.approx([0.2, 0.1])
    assert raw["leg.out"] == pytest.approx([0.8, 1.9])  # queued -> read by the switch
    assert raw["leg.switch"] == pytest.approx([0.1, 0.5])
    assert raw["leg.back"] == pytest.approx([1.9, 2.5])  # reply written -> step done


def test_a_step_without_exactly_one_barrier_in_its_window_is_left_out():
    rec = {"started_at": 0.0, "finished_at": 1.0,
           "steps": [step("A", 0.1, 0.1, 0.5), step("C", 0.6, 0.6, 0.9)]}
    report = {"0xa1": {"barriers": [[0.2, 0.21], [0.3, 0.31]]}, "0xc1": {"barriers": []}}
    raw: dict[str, list[float]] = {}
    legs([rec], report, raw)
    assert "leg.out" not in raw and len(raw["leg.step_to_queued"]) == 2
