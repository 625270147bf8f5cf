"""The mapping shim without a switch: API placement, counters -> rates -> remap, on the simulated network."""
from __future__ import annotations

import pytest

from app.controller.api_routes import ApiRoutes
from app.controller.control_api import ApiError
from app.controller.openflow_southbound import FlowStat
from app.controller.plan_runner import PlanRunner
from app.controller.runtime import SETTINGS
from mininet_labs.multihoming import flows_for, multihoming_spec
from tests.lib.fake_network import FakeNetwork
from topology import rule_plan
from topology.flow import FiveTuple
from topology.spec import spec_to_graph

SPEC = multihoming_spec(senders=2)


class _View:
    """The two calls the app makes on the network view."""

    def __init__(self) -> None:
        self.g = spec_to_graph(SPEC)

    def graph(self):
        return self.g, []

    def by_name(self, name):
        return type("Sw", (), {"dpid": SPEC.switch(name).dpid, "name": name})()


class _Counters:
    """flow_stats over the fake network's tables: each matched packet counts as 1,000 bytes."""

    def __init__(self, net: FakeNetwork) -> None:
        self.net = net
        self.asked: list[tuple[int, int]] = []

    def flow_stats(self, dpid, cookie=0, cookie_mask=0, timeout=None):
        self.asked.append((cookie, cookie_mask))
        name = next(s.name for s in SPEC.switches if s.dpid == dpid)
        out = []
        for r in self.net.flows(name):
            if r.cookie & cookie_mask == cookie & cookie_mask:
                n = self.net.counters[name][r.key()]
                out.append(FlowStat(r.cookie, r.priority, r.table, r.match_dict(), (r.out_port,), n, n * 1000))
        return out


@pytest.fixture
def app(monkeypatch):
    from app.controller.mapping_app import MappingApp

    monkeypatch.setattr(SETTINGS, "te", {"mapping": "throughput", "mapping_sites": ["A", "Z"],
                                          "mapping_interval": 1.0}, raising=False)
    net = FakeNetwork.from_spec(SPEC)
    routes = ApiRoutes()
    view = _View()
    # plans run over the fake network, steps one after another (no eventlet hub in unit tests)
    a = MappingApp(mlte_network_view=view, mlte_api_routes=routes, mlte_plan_runner=PlanRunner(net, view))
    a.southbound = _Counters(net)
    a.mapper = None
    yield a, net, routes
    net.close()


def _body(flows):
    return {"flows": [{k: f[k] for k in ("src", "dst", "proto", "sport", "dport")} for f in flows]}


def test_flows_are_placed_through_the_api_and_remapped_from_their_counters(app):
    a, net, routes = app
    flows = flows_for(SPEC, per_sender=4)  # 8 flows s1 -> d1, s2 -> d2
    res = routes[("POST", "/mapping/flows")]({}, _body(flows))
    assert res["ready"] and res["counts"] == [4, 4] and len(res["placed"]) == 8
    assert {r.key() for r in net.all_flows()} == {r.key() for r in a.mapper.rules()}
    # traffic: each flow on path1 gets 1 packet per round, on path2 3 (path2 is faster per flow)
    for _round in range(8):
        for f in flows:
            pkt = {"eth_type": 0x0800, "ipv4_src": f["src"], "ipv4_dst": f["dst"], "ip_proto": 6,
                   "tcp_src": f["sport"], "tcp_dst": f["dport"]}
            on = a.mapper.path_of(FiveTuple(f["src"], f["dst"], 6, f["sport"], f["dport"]))
            for _ in range(1 if on == 0 else 3):
                net.send(f["from"], pkt)
        a._tick()
    assert a.southbound.asked[0] == (rule_plan.MAPPING.cookie(1), rule_plan.MAPPING.mask(by_id=True))
    status = routes[("GET", "/mapping")]({}, {})
    remaps = [h for h in status["history"] if h["decision"] == "remap"]
    assert remaps and all(h["ok"] for h in remaps)
    assert status["weights"][1] > 0.5 and status["counts"][1] > status["counts"][0]
    samples = [h for h in status["history"] if h["decision"] == "sample"]
    assert samples[0]["mbps"] == [0.0, 0.0]  # the first read: no rate yet (RateWindow)
    assert samples[1]["mbps"][1] > samples[1]["mbps"][0] > 0
    assert {r.key() for r in net.all_flows()} == {r.key() for r in a.mapper.rules()}


def test_bad_requests_get_one_line_errors(app):
    a, _net, routes = app
    add = routes[("POST", "/mapping/flows")]
    with pytest.raises(ApiError, match="body must be"):
        add({}, {"flows": []})
    with pytest.raises(ApiError, match="no learnt host"):
        add({}, {"flows": [{"src": "10.9.9.9", "dst": "10.0.2.1", "proto": 6, "sport": 1, "dport": 2}]})
    with pytest.raises(ApiError, match="not A -> Z"):  # d1 -> s1 runs the other way
        add({}, {"flows": [{"src": "10.0.2.1", "dst": "10.0.1.1", "proto": 6, "sport": 1, "dport": 2}]})


def test_policy_switches_at_run_time_only_with_no_flows_mapped(app):
    a, net, routes = app
    flows = flows_for(SPEC, per_sender=2)
    put = routes[("PUT", "/mapping/policy")]
    routes[("POST", "/mapping/flows")]({}, _body(flows))
    a.mapper.weights = (0.3, 0.7)  # as if it had remapped
    with pytest.raises(ApiError, match="4 flow\\(s\\) still mapped"):
        put({}, {"policy": "rtt"})
    with pytest.raises(ApiError, match="one of static, throughput, rtt"):
        put({}, {"policy": "ecmp"})
    assert a.policy == "throughput" and a.mapper.weights == (0.3, 0.7)  # refused: nothing changed
    routes[("DELETE", "/mapping/flows")]({}, _body(flows))
    assert net.all_flows() == []
    res = put({}, {"policy": "rtt"})
    assert res["policy"] == "rtt" == a.mapper.policy and res["weights"] == [0.5, 0.5]
    assert res["counts"] == [0, 0] and res["history"] == []
    res = routes[("POST", "/mapping/flows")]({}, _body(flows))  # the same flows again, from scratch
    assert res["counts"] == [2, 2] and {r.key() for r in net.all_flows()} == {r.key() for r in a.mapper.rules()}


def test_a_short_interval_waits_until_no_rate_spans_a_move(app):
    a, _net, _routes = app
    assert a.settle_samples() == 3  # 1-s interval: as before
    a.interval = 0.25
    assert a.settle_samples() == 5  # a 1-s rate window + the read after it
    a.interval = 2.0
    assert a.settle_samples() == 3


def test_measuring_is_a_service_under_the_one_failure_policy(app, monkeypatch):
    from app.controller import guard
    from app.controller.mapping_app import EventMappingTick

    a, _net, _routes = app
    ticks: list[int] = []
    monkeypatch.setattr(a, "_tick", lambda: ticks.append(1))
    a._periodic(EventMappingTick())
    before = len(guard.failures)
    monkeypatch.setattr(a, "_tick", lambda: 1 / 0)
    a._periodic(EventMappingTick())  # logged and counted, not raised: the next period comes
    st = a.services.status()["mlte_mapping.tick"]
    assert ticks == [1] and st["runs"] == 2 and st["failures"] == 1
    assert guard.failures[-1].startswith("mlte_mapping.tick")
    del guard.failures[before:]
