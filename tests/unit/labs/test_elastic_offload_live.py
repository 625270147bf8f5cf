"""The live lines `make demo` prints from the controller's journal."""
from __future__ import annotations


def test_the_demo_prints_a_plans_end_once_in_words() -> None:
    from mininet_labs.elastic_offload import _Live

    live = _Live(clock=None, verbose=True)  # type: ignore[arg-type]
    base = {"type": "plan", "t": 12.5, "plan": "release1"}
    assert live._line({**base, "event": "plan_done", "state": "done"}, 10.0) == \
        "(elephant +2.50s) plan release1: finished, done"
    assert live._line({**base, "event": "plan_done", "state": "rolled_back"}, 10.0).endswith("finished, rolled back")
    assert live._line({**base, "event": "step_done", "step": "xcon+X:4-3", "kind": "xcon_add"}, 10.0) == \
        "(elephant +2.50s) plan release1: step done xcon+X:4-3 (xcon_add)"


def test_the_run_reports_the_monitors_bytes_against_per_flow_polling() -> None:
    """Bytes per second from two GET /monitor/cost readings; per-flow polling of the lab's 17 flows
    (a rule on their ingress and egress switch, 3 packet switches: 12 rules each) from the real OF1.3
    encodings of bench/monitor_cost.py."""
    from mininet_labs.elastic_offload import _monitor_cost

    a = (100.0, {"coarse_sent": 1000, "coarse_received": 5000, "fine_sent": 0, "fine_received": 0, "polls": 3})
    b = (110.0, {"coarse_sent": 3000, "coarse_received": 45000, "fine_sent": 1000, "fine_received": 9000, "polls": 13})
    cost = _monitor_cost(a, b)
    assert cost["polls"] == 10 and cost["monitor_bytes_per_s"] == 5200.0
    assert cost["per_flow_rules_per_switch"] == 12 and cost["per_flow_polling_bytes_per_s"] > 3 * 12 * 100
    assert cost["ratio"] == round(cost["per_flow_polling_bytes_per_s"] / 5200.0, 2)


def test_the_counter_refresh_option_reaches_the_lab_and_is_checked(tmp_path) -> None:
    import argparse

    import pytest

    from app.cli.lab import _lab_options
    from mininet_labs import elastic_offload

    args = argparse.Namespace(runs=5, seeds=None, seed=None, te=None, demo=False, placement=None, paper_sizes=False,
                              topology=None, quick=True, counter_refresh_ms=100)
    assert _lab_options(args, "elastic-offload", elastic_offload.run) == {"runs": 5, "counter_refresh_ms": 100}
    with pytest.raises(ValueError, match="counter-refresh-ms must be >= 10"):
        elastic_offload.run(tmp_path / "out", counter_refresh_ms=5)
    args.min_gain_s = 0.0
    assert _lab_options(args, "elastic-offload", elastic_offload.run)["min_gain_s"] == 0.0
    with pytest.raises(ValueError, match="min-gain-s must be in"):
        elastic_offload.run(tmp_path / "out", min_gain_s=-1.0)
    assert "min_gain_s = 0\n" in elastic_offload.TE.format(enabled="true", gain=0.0, young=0.0)
    args.young_horizon_s = 2.0
    assert _lab_options(args, "elastic-offload", elastic_offload.run)["young_horizon_s"] == 2.0
    with pytest.raises(ValueError, match="young-horizon-s must be in"):
        elastic_offload.run(tmp_path / "out", young_horizon_s=-1.0)
    assert "young_horizon_s = 2.5\n" in elastic_offload.TE.format(enabled="true", gain=0.3, young=2.5)


def test_the_min_gain_option_is_a_number_at_least_0() -> None:
    import argparse

    import pytest

    from app.cli.lab import non_negative_float

    assert non_negative_float("0") == 0.0 and non_negative_float("0.3") == 0.3
    for bad in ("-0.1", "nan", "x"):
        with pytest.raises(argparse.ArgumentTypeError):
            non_negative_float(bad)
