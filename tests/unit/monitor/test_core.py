"""The plain monitor core end to end on synthetic counters: hot spot → fine on → imbalance → off."""
from __future__ import annotations

from app.config import load_config
from monitor.core import MonitorCore, WatchedLink, circuits_from_graph
from monitor.counters import PortSnapshot
from monitor.events import HOT_SPOT, HOT_SPOT_CLEARED, UNCONSTRAINED_IMBALANCE
from monitor.fine import DISABLE, ENABLE, FineAction
from monitor.sflow.estimator import FlowRate
from topology.flow import FiveTuple
from topology.graph import MultiLayerGraph

EL = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 5001)


class FakeFine:
    def __init__(self):
        self.flows: list[FlowRate] = []
        self.calls: list[set | None] = []

    def flow_rates(self, now=None, agents=None):
        self.calls.append(agents)
        return [f for f in self.flows if agents is None or f.points[0][0] in agents]


def fr(key, mbps, agent="127.0.1.1"):
    return FlowRate(key, mbps * 1e6 / 8, 10, ((agent, 1),))


def test_circuits_from_graph():
    g = MultiLayerGraph()
    g.add_packet_switch("A", 0xA1)
    g.add_packet_switch("B", 0xB1)
    g.add_packet_link("A", 3, "B", 1, 10.0, source="lldp")
    (c,) = circuits_from_graph(g)
    assert c.ends == (("A", 3), ("B", 1)) and c.capacity_mbps == 10.0 and c.switches == ("A", "B")


def test_core_imbalance_cycle():
    fine = FakeFine()
    core = MonitorCore(load_config()["monitor"], fine, agents={"A": "127.0.1.1", "B": "127.0.1.2"})
    core.set_circuits([WatchedLink("A-B", (("A", 3), ("B", 1)), 10.0), WatchedLink("B-C", (("B", 2), ("C", 1)), 10.0)])
    tx = {"A:3": 0, "B:1": 0, "B:2": 0, "C:1": 0}
    drops = 0
    events, actions = [], []
    for t in range(12):
        lossy = 2 <= t < 6
        drops += 50 if lossy else 0
        for pt in tx:
            tx[pt] += 500_000 if pt in ("A:3", "B:1") else 10_000  # A-B at 4 Mbit/s (40%), B-C idle
            sw, port = pt.split(":")
            core.port_stats(float(t), sw, int(port), PortSnapshot(tx[pt], 0, drops=drops if pt == "A:3" else 0))
        fine.flows = [fr(EL, 3.0)] + [fr(FiveTuple("10.0.0.2", "10.0.0.4", 6, 41000 + i, 80), 0.1) for i in range(5)]
        res = core.tick(float(t))
        events += [(t, e.kind, e.flows) for e in res.events]
        actions += [(t, a) for a in res.actions]
    assert [(t, k) for t, k, _ in events] == [(2, HOT_SPOT), (3, UNCONSTRAINED_IMBALANCE), (8, HOT_SPOT_CLEARED)]
    assert events[1][2] == (EL,)
    assert actions[:2] == [(2, FineAction(ENABLE, "A")), (2, FineAction(ENABLE, "B"))]
    assert ("C" not in {a.switch for _, a in actions})  # fine data only on the hot circuit's switches
    assert {"127.0.1.1", "127.0.1.2"} in fine.calls  # read only that circuit's agents
    # the elephant keeps A and B on after the hot spot clears, until it is gone
    assert not [a for _, a in actions if a.op == DISABLE]
    fine.flows = []
    t = 12
    for t in range(12, 16):
        for pt in tx:
            sw, port = pt.split(":")
            core.port_stats(float(t), sw, int(port), PortSnapshot(tx[pt], 0, drops=drops if pt == "A:3" else 0))
        res = core.tick(float(t))
        actions += [(t, a) for a in res.actions]
    assert [a for _, a in actions if a.op == DISABLE] == [FineAction(DISABLE, "A"), FineAction(DISABLE, "B")]


def test_monitor_app_settings_and_agent_addresses(tmp_path, monkeypatch):
    from app.controller import monitor_app

    assert monitor_app.agent_address(0) == "127.0.1.1" and monitor_app.agent_address(251) == "127.0.2.2"
    conf = tmp_path / "m.toml"
    conf.write_text("[monitor]\ninterval = 0.5\nsflow_collector_port = 16343\n")
    monkeypatch.setenv("MLTE_CONFIG", str(conf))
    cfg = monitor_app.monitor_settings()
    assert cfg["interval"] == 0.5 and cfg["sflow_collector_port"] == 16343 and cfg["ewma_alpha"] == 0.3
    monkeypatch.delenv("MLTE_CONFIG")
    assert monitor_app.monitor_settings()["interval"] == 1.0


def test_drops_in_a_new_circuits_first_interval_are_not_a_hot_spot():
    """After a re-route the new circuit's ports were dark for part of the interval: the switch
    counted tx_dropped there. Only drops from its second interval on count."""
    core = MonitorCore(load_config()["monitor"], FakeFine())
    ab = WatchedLink("A-B", (("A", 3), ("B", 1)), 10.0)
    ac = WatchedLink("A-C", (("A", 3), ("C", 1)), 10.0)
    core.set_circuits([ab])
    drops, kinds = 0, []
    for t in range(8):
        if t == 3:
            core.set_circuits([ac])  # re-routed; 3 packets were dropped at A:3 while it was dark
        drops += 3 if t in (3, 6) else 0
        for sw, port in (("A", 3), ("B", 1), ("C", 1)):
            core.port_stats(float(t), sw, port, PortSnapshot(1000 * t, 0, drops=drops if sw == "A" else 0))
        res = core.tick(float(t))
        if t == 3:
            assert res.circuits["A-C"]["drops"] == 3  # reported, not classified
        kinds += [(t, e.circuit, e.kind) for e in res.events]
    assert kinds == [(6, "A-C", HOT_SPOT)]  # drops in a later interval do count


def test_a_circuit_released_while_hot_turns_its_fine_monitoring_off():
    """The lab's bug: the offload circuit A-C, hot (its elephant fills it), is released by the TE loop
    before three calm intervals could clear it; it leaves the graph, so no tick ever observed it calm
    again and fine monitoring stayed on at A and C for good. Leaving the graph now clears it."""
    fine = FakeFine()
    core = MonitorCore(load_config()["monitor"], fine)
    static = WatchedLink("A-B", (("A", 3), ("B", 1)), 10.0)
    offload = WatchedLink("A-C", (("A", 4), ("C", 2)), 10.0)
    core.set_circuits([static, offload])
    tx = {"A:3": 0, "B:1": 0, "A:4": 0, "C:2": 0}
    actions, events = [], []

    def tick(t: int, busy: set[str]) -> None:
        for pt in tx:
            tx[pt] += 1_150_000 if pt in busy else 10_000  # 9.2 Mbit/s (92 %) or idle
            sw, port = pt.split(":")
            core.port_stats(float(t), sw, int(port), PortSnapshot(tx[pt], 0, drops=0))
        res = core.tick(float(t))
        actions.extend(res.actions)
        events.extend((e.kind, e.circuit, e.detail) for e in res.events)

    for t in range(8):
        tick(t, {"A:4", "C:2"})
    assert FineAction(ENABLE, "A") in actions and FineAction(ENABLE, "C") in actions
    assert core.manager.enabled == {"A", "C"} and (HOT_SPOT, "A-C") in [(k, c) for k, c, _ in events]
    core.set_circuits([static])  # released while still hot
    tick(8, set())
    assert core.manager.enabled == set()
    assert actions[-2:] == [FineAction(DISABLE, "A"), FineAction(DISABLE, "C")]
    cleared = [d for k, c, d in events if (k, c) == (HOT_SPOT_CLEARED, "A-C")]
    assert cleared and cleared[0]["reason"] == "circuit removed"
    # a circuit of the same name lit again later is a new episode: hot again, fine data on again
    core.set_circuits([static, offload])
    for t in range(9, 14):
        tick(t, {"A:4", "C:2"})
    assert [(k, c) for k, c, _ in events].count((HOT_SPOT, "A-C")) == 2 and core.manager.enabled == {"A", "C"}
