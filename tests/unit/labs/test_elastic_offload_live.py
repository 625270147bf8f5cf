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
