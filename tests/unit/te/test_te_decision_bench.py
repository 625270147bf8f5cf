"""The TE decision bench's instances (bench/te_decision.py) are sane networks: a lit backbone that joins
every PoP and leaves uplinks for new circuits, every flow routed by default forwarding along the path the
monitor's link loads count it on, the elephants on the congested link the event names — and the TE
app's deciders take a decision on them."""
from __future__ import annotations

import networkx as nx
import pytest

from app.te.placement import forwarding_path
from bench.te_decision import FREE_UPLINKS, build_instance, decide
from pce.circuits import candidate_circuits_by_pair
from pce.otter.graph import hop_id
from topology.flow import FiveTuple


def _hops(inst, path: list[str]) -> list[str]:
    """Edge keys of the backbone links along a switch path."""
    g = inst.graph
    out = []
    for a, b in zip(path, path[1:], strict=False):
        (key,) = [k for k in inst.backbone if set(g.edge(k)["ports"]) == {a, b}]
        out.append(key)
    return out


@pytest.fixture(scope="module")
def abilene():
    return build_instance("sndlib/abilene", 40, elephants=3, seed=7)


def test_the_backbone_is_lit_joins_every_pop_and_leaves_free_uplinks(abilene):
    g = abilene.graph
    switches = g.nodes_of_kind("packet")
    assert abilene.pops == len(switches) == 12
    assert len(abilene.backbone) == len(switches) - 1  # one circuit per fibre of the spanning tree
    lit = nx.Graph([tuple(g.edge(k)["ports"]) for k in abilene.backbone])
    assert nx.is_tree(lit) and set(lit) == set(switches)
    for k in abilene.backbone:  # a circuit: both ends' XCONs active (uplink <-> fibre)
        e = g.edge(k)
        assert e["kind"] == "packet" and e["capacity"] == 10.0
    assert len(g.active_xcons()) == 2 * len(abilene.backbone)
    # every switch keeps FREE_UPLINKS uplinks off the backbone: new circuits can be lit between PoPs
    for sw in switches:
        used = sum(1 for k in abilene.backbone if sw in g.edge(k)["ports"])
        adapt = [e for _u, _v, e in g.g.edges(sw, data=True) if e.get("kind") == "adaptation"]
        assert len(adapt) - used >= FREE_UPLINKS
    # the fibres off the tree are dark: the PoPs at their ends can light a circuit over each
    dark = [(u, v) for u, v, e in g.g.edges(data=True) if e.get("kind") == "optical"
            and not any(g.active_xcon_at(p) for p in (u, v))]
    assert len(dark) == 15 - 11  # abilene: 15 fibres, 11 in the tree
    switch_of = {}  # OTS -> the PoP's packet switch
    for u, v, e in g.g.edges(data=True):
        if e.get("kind") == "adaptation":
            sw, oport = (u, v) if g.kind(u) == "packet" else (v, u)
            switch_of[oport.rsplit(":", 1)[0]] = sw
    pairs = [tuple(sorted(switch_of[p.rsplit(":", 1)[0]] for p in (u, v))) for u, v in dark]
    chains = candidate_circuits_by_pair(g, pairs, per_pair=1)
    assert all(chains[p] for p in pairs)


def test_every_flow_is_routed_and_counted_where_it_goes(abilene):
    g = abilene.graph
    macs = {d["ip"]: d["mac"] for _n, d in g.g.nodes(data=True) if d.get("kind") == "host"}
    hosts = {d["ip"]: n for n, d in g.g.nodes(data=True) if d.get("kind") == "host"}
    load = dict.fromkeys(abilene.backbone, 0.0)
    assert len(abilene.flows) == 40 + 3
    for f, count in abilene.flows.items():
        assert count.mbps > 0 and count.bytes > 0
        path = abilene.paths[f]
        src_sw, dst_sw = (next(iter(g.g.neighbors(hosts[ip]))) for ip in (f.src, f.dst))
        assert (path[0], path[-1]) == (src_sw, dst_sw) and src_sw != dst_sw
        mac = macs[f.dst]
        out_ports = {s: r[mac] for s, r in abilene.forwarding.items() if mac in r}
        hops = forwarding_path(g, out_ports, src_sw, dst_sw)
        keys = _hops(abilene, path)
        assert hops == tuple(hop_id(*_ends(g, k)) for k in keys)  # default forwarding follows the tree
        for k in keys:
            load[k] += count.mbps
    assert load == pytest.approx(abilene.link_loads)
    ev = abilene.event
    busiest = max(abilene.link_loads, key=abilene.link_loads.get)
    assert ev.circuit == busiest and ev.detail["util"] == pytest.approx(load[busiest] / 10.0, abs=1e-3)
    assert len(ev.flows) == 3 and all(isinstance(f, FiveTuple) for f in ev.flows)
    for f in ev.flows:  # the named elephants cross the congested link at their named rate
        assert busiest in _hops(abilene, abilene.paths[f])
        assert abilene.flows[f].mbps in ev.detail["elephant_mbps"]


def _ends(g, key: str) -> tuple[str, int, str, int]:
    (a, pa), (b, pb) = sorted(g.edge(key)["ports"].items())
    return a, int(pa), b, int(pb)


@pytest.mark.parametrize("policy", ["joint", "cspf"])
def test_the_deciders_take_a_decision_on_it(abilene, policy):
    got = decide(policy, abilene, cold=True)
    assert got["seconds"] > 0 and got["split"]["graph"] > 0
    assert sum(got["decisions"].values()) >= 1 and got["reasons"]
    if got["moved_flows"]:
        assert got["rules"] >= 2 * got["moved_flows"]


def test_fig2_uses_its_initial_circuit():
    inst = build_instance("fig2", 10, elephants=2)
    assert sorted(_ends(inst.graph, k) for k in inst.backbone) == [("A", 3, "B", 1), ("B", 2, "C", 1)]
    assert inst.event.circuit in inst.backbone and len(inst.event.flows) == 2


def test_more_wavelengths_leave_a_free_one_on_every_fibre():
    one = build_instance("sndlib/abilene", 20, wavelengths=1)
    two = build_instance("sndlib/abilene", 20, wavelengths=2)
    fibres = [(u.rsplit(":", 1)[0], v.rsplit(":", 1)[0]) for u, v, e in two.graph.g.edges(data=True)
              if e.get("kind") == "optical"]
    assert len(fibres) == 2 * 15 and all(fibres.count(f) == 2 for f in set(fibres))
    assert sorted(_ends(two.graph, k) for k in two.backbone) == sorted(_ends(one.graph, k) for k in one.backbone)
    assert len(two.graph.active_xcons()) == len(one.graph.active_xcons())
    switches = two.graph.nodes_of_kind("packet")
    pairs = [(a, b) for a in switches for b in switches if a < b]
    chains = candidate_circuits_by_pair(two.graph, pairs, per_pair=1)
    assert all(chains[p] for p in pairs)  # every PoP pair can light a circuit (one wavelength: 5 of 66)


def test_an_event_re_places_the_congested_links_flows_and_holds_the_rest_as_background(abilene, monkeypatch):
    """``[te] placement_scope``: ``congested`` hands OTTER the flows that cross the event's link (the
    rest is counted as background on their paths) and takes the decision ``all`` takes here;
    ``named`` hands it the elephants alone."""
    from app.te import placement as pl

    seen: dict[str, tuple[int, int]] = {}
    split = pl.scope_to_hop

    def spy(flows, hop, named):
        free, fixed = split(flows, hop, named)
        seen[scope] = (len(free), len(fixed))
        return free, fixed

    monkeypatch.setattr(pl, "scope_to_hop", spy)
    got = {}
    for scope in ("all", "congested", "named"):
        got[scope] = decide("otter", abilene, cold=True, scope=scope)
    hop = pl.edge_hop(abilene.graph, abilene.event.circuit)
    crossing = [f for f in abilene.flows if hop in _hop_ids(abilene, f)]
    assert "all" not in seen  # no split: every flow placed
    assert seen["congested"] == (len(crossing), len(abilene.flows) - len(crossing))
    assert 0 < len(crossing) < len(abilene.flows)
    assert seen["named"] == (len(abilene.event.flows), len(abilene.flows) - len(abilene.event.flows))
    assert got["congested"]["decisions"] == got["all"]["decisions"]
    assert got["congested"]["moved_flows"] == got["all"]["moved_flows"]


def _hop_ids(inst, f: FiveTuple) -> list[str]:
    return [hop_id(*_ends(inst.graph, k)) for k in _hops(inst, inst.paths[f])]


def test_scope_to_hop_keeps_named_held_and_pathless_flows_free():
    from app.te.placement import scope_to_hop
    from pce.otter.graph_flows import GraphFlow

    def flow(fid: str, path, hold: bool = False) -> GraphFlow:
        return GraphFlow(fid, "A", "C", 1.0, "bulk", path=path, hold=hold)

    hot, cold = "A:3-B:1", "B:2-C:1"
    flows = [flow("on", (hot, cold)), flow("off", (cold,)), flow("named", (cold,)), flow("resv", (cold,), True),
             flow("new", None), flow("chain", (f"{hot}[X:1-X:3]",))]
    free, fixed = scope_to_hop(flows, hot, {"named"})
    assert [f.id for f in free] == ["on", "named", "resv", "new", "chain"] and [f.id for f in fixed] == ["off"]
    free, fixed = scope_to_hop(flows, None, {"named"})
    assert [f.id for f in free] == ["named", "resv", "new"] and [f.id for f in fixed] == ["on", "off", "chain"]
