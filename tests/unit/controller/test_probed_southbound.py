"""Verification probes start when the plan's verify step first reads a counter, not with the plan: on
the 50-PoP WAN lab, probes sent from the start of 49 plans flooded the bridges through their XCON and
circuit-up steps and 41 of the plans failed on late barrier replies."""
from __future__ import annotations

from app.controller.probed_southbound import ProbedSouthbound
from tests.unit.controller.test_reservations import FakeStore, Order, manager, net, probes, stored_path  # noqa: F401


def test_the_probes_start_once_every_rule_is_in_and_stop_with_the_plan(net) -> None:  # noqa: F811
    store = FakeStore()
    m, _ = manager(net, store)
    base = probes(net)
    seen: list[tuple[int, int]] = []  # (flows, xcons) on the network when the probes started
    stopped: list[bool] = []

    def start(c):  # noqa: ANN001, ANN202
        seen.append((len(net.all_flows()), len(net.all_xcons())))
        stop = base(c)
        return lambda: (stop(), stopped.append(True))

    m.probes = start
    out = m.provision(stored_path(Order(1)))
    assert out.ok, out
    rules = store.installed[1].rules
    assert seen == [(len(rules), len(net.all_xcons()))] and len(rules) > 0  # once, with all rules in
    assert stopped == [True]
    assert m.release(store.installed[1]).ok and seen == [(len(rules), seen[0][1])]  # no probes to take down


def test_a_batched_counter_read_starts_the_probes_too() -> None:
    starts: list[int] = []

    class Sb:
        def flow_packets_many(self, rules):  # noqa: ANN001, ANN202
            return [3] * len(rules)

    p = ProbedSouthbound(Sb(), lambda: (starts.append(1), lambda: None)[1])  # type: ignore[arg-type]
    assert p.flow_packets_many(["a", "b"]) == [3, 3] and starts == [1]  # type: ignore[list-item]


def test_the_proxy_passes_every_call_through_and_starts_once() -> None:
    calls: list[tuple] = []

    class Sb:
        def __getattr__(self, name):  # noqa: ANN001, ANN204
            return lambda *a: calls.append((name, *a)) or 7

    starts: list[int] = []
    p = ProbedSouthbound(Sb(), lambda: (starts.append(1), lambda: starts.append(-1))[1])  # type: ignore[arg-type]
    p.install_flow("r", False)  # type: ignore[arg-type]
    p.flow_bytes("r")  # type: ignore[arg-type]
    assert not p.probing and starts == []
    assert p.flow_packets("r") == 7 and p.flow_packets("r") == 7  # type: ignore[arg-type]
    assert p.probing and starts == [1]
    p.flow_packets_many(["r"])  # type: ignore[list-item]  # the verify step's batched read
    assert starts == [1]
    p.stop()
    p.stop()
    assert starts == [1, -1] and not p.probing
    assert calls == [("install_flow", "r", False), ("flow_bytes", "r"), ("flow_packets", "r"), ("flow_packets", "r"),
                     ("flow_packets_many", ["r"])]
