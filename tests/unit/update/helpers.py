"""Shared helpers of the update tests: watch every state of a fake network, plan the Fig. 2 move."""
from __future__ import annotations

from typing import Any

from app.update import planner
from app.update.plan import Plan
from tests.lib.fake_network import FakeNetwork, Fig2Move

Flow = tuple[Any, dict[str, Any], str]


class Watch:
    """Traces every flow after every change applied to ``net`` (the make-before-break check)."""

    def __init__(self, net: FakeNetwork, flows: list[Flow]) -> None:
        self.flows = flows
        self.states: list[tuple[str, list[Any]]] = []
        net.observe(self._see)

    def _see(self, net: FakeNetwork, change: Any) -> None:
        self.states.append((f"{change.node}: {change.what}", [net.trace(s, p) for s, p, _ in self.flows]))

    def broken(self) -> list[tuple[str, str, Any]]:
        """(change, expected host, trace) for every state in which a flow did not reach its host."""
        return [(what, f[2], t) for what, traces in self.states for t, f in zip(traces, self.flows, strict=True)
                if isinstance(t, str) or t[-1][0] != f[2]]


def fig2_plan(sc: Fig2Move, **kw: Any) -> Plan:
    """The Fig. 2 move with test-sized waits (D = 10 ms, drain quiet 30 ms)."""
    kw = {"stable_ms": 10, "quiet_ms": 30, "verify_timeout_s": 1.0, "circuit_timeout_s": 1.0, **kw}
    return planner.move(sc.old_xcons, sc.old_rules, sc.new_xcons, sc.new_ports, sc.new_links, sc.new_rules,
                        sc.ingress, **kw)


def norm_xcons(xcons: Any) -> set[tuple[str, frozenset[int]]]:
    return {(x.ots, x.ports) for x in xcons}
