"""``[te] placement`` in the TE app, without a switch: the Fig. 2 testbed on the fake network, the
monitor's event and fine data in, plans run through the app's own executor path (``TeApp._run``).

``otter`` moves the bulk elephant onto a new circuit while an interactive flow (classed by its port)
and the small flows stay on their default-forwarding path; ``joint`` is the offload decider as before;
a bad setting is refused by the config layer."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from app.config import merge_config
from app.controller.journal import JOURNAL
from app.controller.monitor_app import EventMonitor
from app.controller.plan_runner import PlanRunner
from app.controller.runtime import SETTINGS
from app.errors import ConfigError
from app.te.decisions import OffloadDecider, five_tuple_match
from app.te.placement import PlacementDecider, PlacementPolicy
from app.update.model import FlowRule, XconSpec
from mininet_labs.circuits import FIG2_CIRCUITS
from monitor.events import ELEPHANT_GONE, UNCONSTRAINED_IMBALANCE, Event
from monitor.flowstats import FlowCount
from tests.lib.fake_network import FakeNetwork
from topology.flow import FiveTuple
from topology.spec import fig2_testbed, spec_to_graph

H1, H3 = "00:00:00:00:00:01", "00:00:00:00:00:03"
ELEPHANT = FiveTuple("10.0.0.1", "10.0.0.3", 17, 45000, 5201)  # bulk (default class)
SIP = FiveTuple("10.0.0.1", "10.0.0.3", 17, 5060, 5201)  # interactive: source port 5060
MICE = [FiveTuple("10.0.0.1", "10.0.0.3", 17, 46001 + i, 5201) for i in range(3)]
FORWARDING = {"A": {H3: 3, H1: 1}, "B": {H3: 2, H1: 1}, "C": {H3: 3, H1: 1}}


class _View:
    """What the TE app reads from the network view: the graph, fine data, default forwarding."""

    def __init__(self) -> None:
        self.spec = fig2_testbed()
        self.g = spec_to_graph(self.spec)
        for ots, a, b in FIG2_CIRCUITS["initial"]:
            self.g.set_xcon_active(f"{ots}:{a}", f"{ots}:{b}", True)
        self.g.add_packet_link("A", 3, "B", 1, 10.0, source="lldp")
        self.g.add_packet_link("B", 2, "C", 1, 10.0, source="lldp")
        now = time.monotonic()
        self.fine_flows = {ELEPHANT: FlowCount(50_000_000, 6.0, now), SIP: FlowCount(20_000, 0.2, now),
                           **{m: FlowCount(60_000, 0.5, now) for m in MICE}}
        self.forwarding_rules = FORWARDING
        self.link_loads: dict[str, float] = {}
        self.reserved: dict[str, frozenset] = {}

    def graph(self):
        return self.g, []

    def name_of(self, dpid):
        return dpid

    def by_name(self, name):
        return SimpleNamespace(dpid=self.spec.switch(name).dpid, name=name)

    def reserve(self, owner, ports) -> bool:
        self.reserved[owner] = frozenset(ports)
        return True

    def unreserve(self, owner) -> bool:
        return self.reserved.pop(owner, None) is not None

    def reservations_of(self, prefix) -> dict[str, frozenset]:
        return {o: p for o, p in self.reserved.items() if o.startswith(prefix)}


@pytest.fixture
def net():
    n = FakeNetwork.from_spec(fig2_testbed(), xcon_delay_s=0.02)
    n.preload([XconSpec(*x) for x in FIG2_CIRCUITS["initial"]],
              [FlowRule(sw, "forwarding", 0, 100, (("eth_dst", mac),), port)
               for sw, rules in FORWARDING.items() for mac, port in rules.items()])
    yield n
    n.close()


def make_app(monkeypatch, net, te: dict):
    from app.controller import te_app

    monkeypatch.setattr(te_app, "hub", SimpleNamespace(spawn=lambda f, *a: f(*a), sleep=time.sleep))
    monkeypatch.setattr(SETTINGS, "te", {"stable_ms": 5.0, "verify_timeout": 2.0, **te}, raising=False)
    view = _View()
    # plans run over the fake network, steps one after another (no eventlet hub in unit tests)
    app = te_app.TeApp(mlte_network_view=view, mlte_plan_runner=PlanRunner(net, view))
    app.adopted = True  # a first start on an empty network: no previous controller's circuits to take over
    return app


def pkt(f: FiveTuple, reverse: bool = False) -> dict:
    m = dict(five_tuple_match(f, 1, reverse))
    m.pop("in_port")
    return {**m, "eth_dst": H1 if reverse else H3}


def switches(net, start, packet) -> list[str]:
    t = net.trace(start, packet)
    assert not isinstance(t, str), t
    return [h[0] for h in t]


def imbalance() -> EventMonitor:
    return EventMonitor(Event(10.0, "packet:A:3-B:1", UNCONSTRAINED_IMBALANCE, (ELEPHANT,),
                              {"elephant_mbps": [6.0], "util": 0.5, "drops": 40, "threshold_mbps": 1.0}))


def with_traffic(net, fn):
    """Every flow keeps sending while ``fn`` runs (a plan's verification counts the moved ones)."""
    stop = threading.Event()

    def traffic() -> None:
        while not stop.wait(0.003):
            for f in (ELEPHANT, SIP, *MICE):
                net.send("h1", pkt(f))
                net.send("h3", pkt(f, True))

    t = threading.Thread(target=traffic, daemon=True)
    t.start()
    try:
        return fn()
    finally:
        stop.set()
        t.join()


def test_otter_moves_the_elephant_onto_a_new_circuit_and_the_interactive_flow_stays(monkeypatch, net):
    a = make_app(monkeypatch, net, {"placement": "otter"})
    assert isinstance(a.decider, PlacementDecider) and a.decider.policy.name == "otter"
    for f in (ELEPHANT, SIP, *MICE):
        assert "B" in switches(net, "h1", pkt(f))  # all on A-B-C before
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    with_traffic(net, lambda: a._monitor(imbalance()))
    decisions = JOURNAL.since(since, "te_decision")
    (off,) = [d for d in decisions if d["decision"] == "offload"]
    assert off["flows"] == [str(ELEPHANT)], decisions  # only the elephant moves
    assert off["policy"] == "otter" and off["circuit"].endswith("A:4-C:2") and "new circuit" in off["reason"], off
    # PATHPIN: the rest stay where they are (the SIP flow classed interactive by its port)
    assert off["kept"] == {str(SIP): "interactive", **{str(m): "bulk" for m in MICE}}
    (done,) = JOURNAL.since(since, "te_done")
    assert done["ok"] and done["decision"] == "offload", done
    # the data plane: the elephant A -> new circuit -> C both ways, the interactive flow still via B
    assert "B" not in switches(net, "h1", pkt(ELEPHANT)) and switches(net, "h1", pkt(ELEPHANT))[-1] == "h3"
    assert "B" not in switches(net, "h3", pkt(ELEPHANT, True))
    assert "B" in switches(net, "h1", pkt(SIP)) and "B" in switches(net, "h3", pkt(SIP, True))
    assert all("B" in switches(net, "h1", pkt(m)) for m in MICE)
    (offload,) = a.decider.offloads.values()
    assert a.view.reserved == {f"te:{offload.ident}": frozenset(offload.ends)} and len(offload.ends) == 2
    assert a.decider.policy.paths[str(ELEPHANT)]  # PATHPIN state once the plan succeeded
    # PER a period later: nothing worth moving (the elephant is held on its circuit)
    assert a.decider.tick(a.view.g, time.monotonic() + 60.0) == []
    # the elephant is gone: the same release path as the joint decider's offloads
    (rel,) = a.decider.on_event(Event(50.0, offload.circuit_id, ELEPHANT_GONE, offload.flows, {}), a.view.g, 50.0)
    a._run(rel)
    assert a.decider.offloads == {} and a.view.reserved == {} and str(ELEPHANT) not in a.decider.policy.paths
    assert not [r for r in net.all_flows() if r.band == "steer"]
    assert {(x.ots, x.ports) for x in net.all_xcons()} == {(o, frozenset({p, q})) for o, p, q in FIG2_CIRCUITS["initial"]}
    assert "B" in switches(net, "h1", pkt(ELEPHANT))


def test_cspf_also_keeps_the_interactive_flow(monkeypatch, net):
    a = make_app(monkeypatch, net, {"placement": "cspf"})
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    with_traffic(net, lambda: a._monitor(imbalance()))
    offs = [d for d in JOURNAL.since(since, "te_decision") if d["decision"] == "offload"]
    assert [d["flows"] for d in offs] == [[str(ELEPHANT)]] and offs[0]["policy"] == "cspf"
    assert offs[0]["circuit"].endswith("A:4-C:2"), offs
    assert "B" not in switches(net, "h1", pkt(ELEPHANT)) and "B" in switches(net, "h1", pkt(SIP))


def test_joint_is_the_offload_decider_as_before(monkeypatch, net):
    a = make_app(monkeypatch, net, {})
    assert type(a.decider) is OffloadDecider and a.cfg["placement"] == "joint"
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    with_traffic(net, lambda: a._monitor(imbalance()))
    (off,) = [d for d in JOURNAL.since(since, "te_decision") if d["decision"] == "offload"]
    assert off["flows"] == [str(ELEPHANT)] and "policy" not in off and "gain" in off
    assert "B" not in switches(net, "h1", pkt(ELEPHANT)) and "B" in switches(net, "h1", pkt(SIP))


@pytest.mark.parametrize("placement", ["joint", "otter", "cspf"])
def test_every_policy_judges_moves_with_the_configured_gain_settings(monkeypatch, net, placement):
    """``[te] min_gain_s`` / ``overhead_s`` reach every decider: the placement deciders once used the
    defaults (1 s) while the joint decider used the lab's 0.3 s, so OTTER's first move came seconds
    later than joint's on the same flow (the placement-compare lab's 0.80x)."""
    a = make_app(monkeypatch, net, {"placement": placement, "min_gain_s": 0.3, "overhead_s": 0.05})
    assert (a.decider.min_gain_s, a.decider.overhead_s) == (0.3, 0.05)
    # the same flow, the same numbers: 0.45 MB sent at 3 Mbit/s, a 10 Mbit/s circuit with 0.185 s setup —
    # a gain of ~0.6 s: it pays with 0.3 s, it would not with the default 1 s
    a.view.fine_flows[ELEPHANT] = FlowCount(450_000, 3.0, time.monotonic())
    ev = EventMonitor(Event(10.0, "packet:A:3-B:1", UNCONSTRAINED_IMBALANCE, (ELEPHANT,),
                            {"elephant_mbps": [3.0], "util": 0.5, "drops": 40, "threshold_mbps": 1.0}))
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    with_traffic(net, lambda: a._monitor(ev))
    offs = [d for d in JOURNAL.since(since, "te_decision") if d["decision"] == "offload"]
    assert [d["flows"] for d in offs] == [[str(ELEPHANT)]], JOURNAL.since(since, "te_decision")
    assert 0.3 <= offs[0]["gain"][str(ELEPHANT)]["gain_s"] < 1.0, offs[0]["gain"]


def test_a_bad_placement_is_refused_by_the_config() -> None:
    assert merge_config({"te": {"placement": "otter"}})["te"]["placement"] == "otter"
    assert merge_config({})["te"]["placement"] == "joint"
    with pytest.raises(ConfigError, match=r"\[te\] placement must be one of joint, otter, cspf, got 'magic'"):
        merge_config({"te": {"placement": "magic"}})
    with pytest.raises(ConfigError, match="placement_period"):
        merge_config({"te": {"placement_period": 0.0}})


def test_otter_move_that_does_not_pay_is_a_skip_with_the_gain_and_is_judged_again(monkeypatch, net):
    """The offload gain (app/te/gain.py) on the placement's move: the elephant has sent only 0.5 MB,
    so its predicted 0.5 MB more would finish in 0.67 s where it is and 0.69 s after the new
    circuit's 0.185 s setup + 0.1 s switch-over at the 10 Mbit/s it could reach there — it stays,
    nothing is lit. Once it has sent 50 MB the same move pays and is made."""
    a = make_app(monkeypatch, net, {"placement": "otter"})
    now = time.monotonic()
    a.view.fine_flows[ELEPHANT] = FlowCount(500_000, 6.0, now)
    since = JOURNAL.since()[-1]["seq"] if JOURNAL.since() else 0
    with_traffic(net, lambda: a._monitor(imbalance()))
    decisions = JOURNAL.since(since, "te_decision")
    assert not [d for d in decisions if d["decision"] == "offload"], decisions
    (skip,) = [d for d in decisions if d.get("gain")]
    assert skip["decision"] == "skip" and skip["flows"] == [str(ELEPHANT)] and skip["policy"] == "otter"
    assert "does not pay" in skip["reason"] and "gain -0.02 s < 1 s" in skip["reason"], skip["reason"]
    g = skip["gain"][str(ELEPHANT)]
    assert not g["pays"] and g["remaining_bytes"] == 500_000 and g["current_mbps"] == 6.0
    assert g["new_mbps"] == pytest.approx(10.0) and g["switch_s"] == pytest.approx(0.285, abs=1e-3)
    assert g["stay_s"] == pytest.approx(4 / 6, abs=1e-3) and g["move_s"] == pytest.approx(0.285 + 0.4, abs=1e-3)
    assert skip["refused"]["path"][0].startswith("A:4-C:2[") and not JOURNAL.since(since, "te_done")
    assert a.decider.offloads == {} and "B" in switches(net, "h1", pkt(ELEPHANT))  # still on A-B-C
    assert {(x.ots, x.ports) for x in net.all_xcons()} == {(o, frozenset({p, q})) for o, p, q in FIG2_CIRCUITS["initial"]}
    assert ELEPHANT in a.waiting and str(ELEPHANT) not in a.decider.policy.paths
    # a newer count: 50 MB sent — judged again, the move now pays and is executed
    a.view.fine_flows[ELEPHANT] = FlowCount(50_000_000, 6.0, time.monotonic() + 1.0)
    with_traffic(net, a._retry_waiting)
    (off,) = [d for d in JOURNAL.since(since, "te_decision") if d["decision"] == "offload"]
    assert off["flows"] == [str(ELEPHANT)] and off["gain"][str(ELEPHANT)]["pays"], off
    assert off["gain"][str(ELEPHANT)]["gain_s"] == pytest.approx(400 / 6 - (0.285 + 40), abs=1e-2)
    assert ELEPHANT not in a.waiting and "B" not in switches(net, "h1", pkt(ELEPHANT))


def test_otter_move_without_a_byte_count_is_taken(monkeypatch, net):
    """No byte count (e.g. sFlow sampling) means no prediction: the move is taken, as the joint
    decider takes an elephant the monitor named."""
    from app.te.placement import PlacementDecider, PlacementPolicy

    view = _View()
    d = PlacementDecider(PlacementPolicy("otter"), monitored=lambda: view.fine_flows,
                         forwarding=lambda: view.forwarding_rules)
    ev = Event(10.0, "packet:A:3-B:1", UNCONSTRAINED_IMBALANCE, (ELEPHANT,), {"elephant_mbps": [6.0]})
    (off,) = [x for x in d.on_event(ev, view.g, 10.0, flow_bytes=lambda _f: None) if x.kind == "offload"]
    assert off.flows == (ELEPHANT,) and off.detail["gain"][str(ELEPHANT)] == {
        "pays": True, "reason": "no byte count: the placement's move is taken"}
    # the monitored count (0.5 MB) when the caller gives none: the same move does not pay
    view.fine_flows[ELEPHANT] = FlowCount(500_000, 6.0, 0.0)
    d2 = PlacementDecider(PlacementPolicy("otter"), monitored=lambda: view.fine_flows,
                          forwarding=lambda: view.forwarding_rules)
    out = d2.on_event(ev, view.g, 10.0)
    assert [x.kind for x in out] == ["skip"] and not out[0].detail["gain"][str(ELEPHANT)]["pays"]


def test_placement_reads_the_lit_reservations_from_the_shared_context(monkeypatch, net) -> None:
    """The reservations app's lit circuits reach the placement through the ``LitReservations`` context
    (held where they are), never by looking the reservations app up by name."""
    from app.controller import te_app
    from app.controller.reservation_circuits import LIT_CONTEXT, LitReservations, circuit_for
    from pce.reservation import PathRequest, compute_path

    monkeypatch.setattr(te_app, "hub", SimpleNamespace(spawn=lambda f, *a: f(*a), sleep=time.sleep))
    monkeypatch.setattr(SETTINGS, "te", {"placement": "otter"}, raising=False)
    view = _View()
    lit = LitReservations()
    app = te_app.TeApp(mlte_network_view=view, mlte_plan_runner=PlanRunner(net, view), **{LIT_CONTEXT: lit})
    assert isinstance(app.decider, PlacementDecider)
    assert list(app.decider.reservations(0.0)) == []
    g = spec_to_graph(fig2_testbed())
    lit[7] = circuit_for(g, 7, "A:1", "C:3", compute_path(g, PathRequest("A:1", "C:3", 5, 0, 3600)).edges)
    (held,) = app.decider.reservations(0.0)
    assert held["id"] == 7 and held["src"] == "A:1" and held["dst"] == "C:3" and held["path"]


def test_a_bad_placement_scope_is_refused_by_the_config() -> None:
    assert merge_config({})["te"]["placement_scope"] == "congested"
    assert merge_config({"te": {"placement_scope": "all"}})["te"]["placement_scope"] == "all"
    with pytest.raises(ConfigError, match=r"\[te\] placement_scope must be one of named, congested, all, got 'x'"):
        merge_config({"te": {"placement_scope": "x"}})
    with pytest.raises(ValueError, match="unknown event scope"):
        PlacementDecider(PlacementPolicy("otter"), event_scope="x")
