"""The WAN lab's loaded stage, chosen from the spec alone: a backbone tree that reaches every PoP over one
fibre per edge, gravity pairs, reservation requests on VLANs of their own."""
from __future__ import annotations

import itertools

import networkx as nx
import pytest

from mininet_labs import wan_load
from topology.spec import from_topohub


@pytest.fixture(scope="module", params=["sndlib/abilene", "gabriel/25/0"])
def spec(request):  # noqa: ANN001, ANN201
    base = from_topohub(request.param)
    return from_topohub(request.param, uplinks=wan_load.uplinks_needed(base))


def test_the_backbone_tree_spans_every_pop_over_one_fibre_each(spec) -> None:  # noqa: ANN001
    pairs = wan_load.tree_pairs(spec)
    pops = wan_load.pops(spec)
    assert len(pairs) == len(pops) - 1
    tree = nx.Graph([(a.switch, b.switch) for a, b in pairs])
    assert nx.is_tree(tree) and set(tree) == {p.switch for p in pops}
    fibres = {frozenset((link.a, link.b)) for link in spec.links_of_kind("optical")}
    assert all(frozenset((a.ots, b.ots)) in fibres for a, b in pairs)


def test_the_backbone_is_one_reservation_per_tree_fibre_routed_over_it(spec) -> None:  # noqa: ANN001
    body = wan_load.backbone_requests(spec, "2030-01-01T00:00:00Z", "2030-01-01T02:00:00Z")
    pairs = wan_load.tree_pairs(spec)
    assert len(body) == len(pairs)
    assert [b["ero"] for b in body] == [[a.switch, a.ots, z.ots, z.switch] for a, z in pairs]
    vlans = [b["src_vlan"] for b in body]
    assert len(set(vlans)) == len(vlans) and min(vlans) >= wan_load.BACKBONE_VLAN
    # the reservations that ride it never take a backbone VLAN
    most = wan_load.BACKBONE_VLAN - wan_load.FIRST_VLAN
    riders = wan_load.reservation_requests(wan_load.gravity_pairs(spec, most), 0.1, "s", "e")
    assert max(b["src_vlan"] for b in riders) < wan_load.BACKBONE_VLAN
    # each PoP keeps a spare uplink for the TE loop
    deg: dict[str, int] = {}
    for a, z in pairs:
        deg[a.switch] = deg.get(a.switch, 0) + 1
        deg[z.switch] = deg.get(z.switch, 0) + 1
    per_pop = len(spec.links_of_kind("adaptation")) // len(wan_load.pops(spec))
    assert max(deg.values()) == per_pop - 1


def test_gravity_pairs_are_reproducible_and_favour_well_connected_pops(spec) -> None:  # noqa: ANN001
    a = wan_load.gravity_pairs(spec, 400, seed=3)
    assert a == wan_load.gravity_pairs(spec, 400, seed=3)
    assert all(x != y for x, y in a)
    deg = wan_load.fibre_degree(spec)
    hi = max(deg, key=lambda o: deg[o])
    lo = min(deg, key=lambda o: deg[o])
    if deg[hi] > deg[lo]:
        count = {o: sum((x.ots == o) + (y.ots == o) for x, y in a) for o in (hi, lo)}
        assert count[hi] > count[lo]
    with pytest.raises(ValueError):
        wan_load.gravity_pairs(spec, -1)


def test_reservation_requests_each_on_a_vlan_of_its_own(spec) -> None:  # noqa: ANN001
    pairs = wan_load.gravity_pairs(spec, 100, seed=2)
    body = wan_load.reservation_requests(pairs, 0.1, "2030-01-01T00:00:00Z", "2030-01-01T01:00:00Z")
    assert len({b["src_vlan"] for b in body}) == 100 and all(b["src_vlan"] == b["dst_vlan"] for b in body)
    assert {b["start"] for b in body} == {"2030-01-01T00:00:00Z"}
    assert all(b["src"].endswith(":1") and b["src"] != b["dst"] for b in body)
    with pytest.raises(ValueError, match="4094"):
        wan_load.reservation_requests(pairs, 0.1, "s", "e", first_vlan=4000)


def test_traffic_is_one_tagged_flow_per_reservation_on_its_vlan(spec) -> None:  # noqa: ANN001
    from mininet_labs import tagged_udp

    pairs = wan_load.gravity_pairs(spec, 40, seed=2)
    body = wan_load.reservation_requests(pairs, 0.1, "a", "b")
    flows = wan_load.traffic_flows(pairs, 0.1)
    hosts = {p.switch: p.host for p in wan_load.pops(spec)}
    assert [(f.src, f.dst, f.vlan) for f in flows] == [(hosts[r["src"].split(":")[0]], hosts[r["dst"].split(":")[0]],
                                                        r["src_vlan"]) for r in body]
    by_src, receivers = tagged_udp.plan_hosts(flows)  # unique ports per receiver: accepted
    assert sum(map(len, by_src.values())) == 40 and set(receivers) == {f.dst for f in flows}
    sent = {f: 0.1 for f in flows}
    got = {f: 0.1 for f in flows} | {flows[3]: 0.05}
    summary = wan_load.traffic_summary(flows, sent, got)
    assert summary["flows"] == 40 and summary["worst"] == 0.5 and summary["below_90pct"] == [flows[3].vlan]
    assert summary["delivered"] == round(3.95 / 4.0, 4)


def test_tagged_udp_refuses_flows_it_could_not_tell_apart() -> None:
    from mininet_labs.tagged_udp import Flow, plan_hosts

    with pytest.raises(ValueError, match="UDP port 5301"):
        plan_hosts([Flow("h1", "h3", 101, 5301, 1.0), Flow("h2", "h3", 102, 5301, 1.0)])
    with pytest.raises(ValueError, match="must be > 0"):
        plan_hosts([Flow("h1", "h3", 101, 5301, 0.0)])


def test_the_common_start_leaves_twice_the_timed_bookings() -> None:
    assert wan_load.lead_for(0.07, 30) == pytest.approx(14.2)
    assert wan_load.lead_for(1.25, 100) == pytest.approx(260.0)  # germany50's admission
    assert wan_load.lead_for(0.0, 100, floor_s=5.0) == 5.0


def test_arrivals_are_a_seeded_poisson_process_inside_the_window() -> None:
    offsets = wan_load.arrival_offsets(1.0, 60.0, seed=3)
    assert offsets == wan_load.arrival_offsets(1.0, 60.0, seed=3)  # the same run, the same arrivals
    assert offsets != wan_load.arrival_offsets(1.0, 60.0, seed=4)
    assert all(0 < a < b < 60.0 for a, b in itertools.pairwise(offsets))
    many = wan_load.arrival_offsets(1.0, 10_000.0, seed=1)
    assert 9_500 < len(many) < 10_500  # about rate x window
    gaps = [b - a for a, b in itertools.pairwise(many)]
    assert 0.95 < sum(gaps) / len(gaps) < 1.05  # exponential gaps of mean 1/rate
    for bad in ((0.0, 10.0), (1.0, 0.0), (float("nan"), 10.0)):
        with pytest.raises(ValueError, match="rate and a window"):
            wan_load.arrival_offsets(*bad)


def test_booking_together_stops_waiting_once_every_reservation_settled(monkeypatch) -> None:  # noqa: ANN001
    """One reservation FAILED for good (its retries spent): the stage goes on at once instead of polling out
    its 120-s timeout, and says how many went ACTIVE."""
    import time

    import requests

    booked = itertools.count(1)
    monkeypatch.setattr(wan_load, "_book", lambda _url, _headers, _body: {"id": next(booked)})
    monkeypatch.setattr(requests, "post", lambda *_a, **_k: type("R", (), {"raise_for_status": lambda self: None})())
    monkeypatch.setattr(wan_load, "lead_for", lambda _one, _n: 0.05)
    polls = iter([{2: "PROVISIONING", 3: "PROVISIONING"}, {2: "ACTIVE", 3: "PROVISIONING"}])
    monkeypatch.setattr(wan_load, "_states", lambda *_a: next(polls, {2: "ACTIVE", 3: "FAILED"}))
    t = time.monotonic()
    out = wan_load.book_together("http://x", {}, lambda _start: [{"name": "a"}, {"name": "b"}], timeout=120.0,
                                 progress=lambda _line: None)
    assert time.monotonic() - t < 10.0
    assert (out["n"], out["active"], out["active_s"], out["states"]) == (2, 1, None, {"ACTIVE": 1, "FAILED": 1})
