"""The change bus: every NetworkView method moves the version iff a graph input changed and announces
exactly one change per change; the journal is a log only; the inventory app bridges changes to os-ken."""
from __future__ import annotations

import dataclasses

import pytest

from app.controller import events
from app.controller import view_changes as vc
from app.controller.inventory import Inventory
from app.controller.journal import JOURNAL
from app.controller.model import OTS, PACKET, HostInfo, PacketLink, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.controller.runtime import Settings

A, B, X = 0xA1, 0xB1, 0xF01


def port(n: int, up: bool = True) -> PortInfo:
    return PortInfo(n, f"eth{n}", "00:00:00:00:00:0a", up)


class Recorder:
    """A view with a listener that keeps what it announced; :meth:`step` says what one call did."""

    def __init__(self) -> None:
        self.view = NetworkView(Settings())
        self.changes: list = []
        self.view.subscribe(self.changes.append)

    def step(self, call) -> tuple[int, list]:
        """(version moves, changes announced) of ``call(view)``."""
        before, self.changes[:] = self.view.version, []
        call(self.view)
        return self.view.version - before, list(self.changes)


@pytest.fixture
def rec() -> Recorder:
    r = Recorder()
    r.view.add_switch(SwitchInfo(A, PACKET, 4, "A", {1: port(1), 2: port(2)}))
    r.view.add_switch(SwitchInfo(B, PACKET, 4, "B", {1: port(1)}))
    r.view.add_switch(SwitchInfo(X, OTS, 1, "X", {1: port(1), 2: port(2)}))
    return r


def test_switches_and_ports(rec):
    c = SwitchInfo(0xC1, PACKET, 4, "C")
    assert rec.step(lambda v: v.add_switch(c)) == (1, [vc.SwitchEntered(c)])
    a = rec.view.switches[A]
    assert rec.step(lambda v: v.set_port(A, 1, port(1), 5.0)) == (0, [])  # as it was: no change
    assert rec.step(lambda v: v.set_port(A, 1, port(1, up=False), 5.0)) == (
        1, [vc.PortChanged(a, port(1), port(1, up=False), 5.0)])
    assert rec.step(lambda v: v.set_port(A, 3, None, 6.0)) == (0, [])  # deleting a port it never had
    assert rec.step(lambda v: v.set_port(0xDD, 1, port(1), 6.0)) == (0, [])  # an unknown switch
    x = rec.view.switches[X]
    assert rec.step(lambda v: v.set_capabilities(X, {"ports": {}}, "Xots")) == (1, [vc.CapabilitiesChanged(x)])
    assert x.name == "Xots" and x.capabilities == {"ports": {}}
    assert rec.step(lambda v: v.remove_switch(0xC1)) == (1, [vc.SwitchLeft(c)])
    assert rec.step(lambda v: v.remove_switch(0xC1)) == (0, [])


def test_names(rec):
    assert rec.step(lambda v: v.rename({A: "Alpha"}, {"00:00:00:00:00:01": "h1"})) == (
        1, [vc.NamesChanged({A: "Alpha"}, {"00:00:00:00:00:01": "h1"})])
    assert rec.view.switches[A].name == "Alpha"
    assert rec.step(lambda v: v.rename({A: "Alpha"}, {"00:00:00:00:00:01": "h1"})) == (0, [])


def test_links(rec):
    ab, ba = PacketLink(PortRef(A, 1), PortRef(B, 1)), PacketLink(PortRef(B, 1), PortRef(A, 1))
    assert rec.step(lambda v: v.add_link(ab, 1.0)) == (1, [vc.LinkAdded(ab)])
    assert rec.step(lambda v: v.add_link(ab, 2.0)) == (0, [])  # a refresh is no change of the graph
    assert rec.view.links.last_seen(ab) == 2.0
    rec.view.add_link(ba, 2.0)
    repatched = PacketLink(PortRef(A, 1), PortRef(A, 2))  # A:1 now reaches A:2: the old link is replaced
    assert rec.step(lambda v: v.add_link(repatched, 3.0)) == (2, [vc.LinkDeleted(ab), vc.LinkAdded(repatched)])
    assert rec.step(lambda v: v.expire_links(4.0, 1.5)) == (1, [vc.LinkDeleted(ba)])
    assert rec.step(lambda v: v.remove_port_links(PortRef(A, 2))) == (1, [vc.LinkDeleted(repatched)])
    rec.view.add_link(ab, 5.0)
    assert rec.step(lambda v: v.remove_switch_links(B)) == (1, [vc.LinkDeleted(ab)])
    assert rec.step(lambda v: v.remove_switch_links(B)) == (0, [])


def test_hosts(rec):
    h1 = HostInfo("00:00:00:00:00:01", None, PortRef(A, 2))
    assert rec.step(lambda v: v.add_host(h1)) == (1, [vc.HostAdded(h1)])
    assert rec.step(lambda v: v.add_host(h1)) == (0, [])
    with_ip = dataclasses.replace(h1, ip="10.0.0.1")
    assert rec.step(lambda v: v.add_host(with_ip)) == (1, [vc.HostAdded(with_ip)])
    assert rec.step(lambda v: v.remove_host(h1.mac)) == (1, [vc.HostRemoved(with_ip)])
    assert rec.step(lambda v: v.remove_host(h1.mac)) == (0, [])


def test_xcons(rec):
    assert rec.step(lambda v: v.set_xcons(X, {1: 2, 2: 1})) == (1, [vc.XconsChanged(X)])
    assert rec.step(lambda v: v.set_xcons(X, {1: 2})) == (0, [])
    assert rec.step(lambda v: v.mark_unknown(X, [(3, 4), (4, 3)])) == (0, [])  # not a graph input
    assert rec.view.busy_ots_ports(X) == {1, 2, 3, 4}
    assert rec.step(lambda v: v.remove_xcons(X, [3, 4])) == (0, [])  # only unknown ones went
    assert rec.view.unknown_xcons[X] == {}
    assert rec.step(lambda v: v.remove_xcons(X, [1], only_to=5)) == (0, [])  # 1 outputs to 2, not 5
    assert rec.step(lambda v: v.remove_xcons(X, [1], only_to=2)) == (1, [vc.XconsChanged(X)])
    assert rec.view.xcons[X] == {2: 1}
    rec.view.mark_unknown(X, [(3, 4)])
    rec.view.settle_unknown(X, [3])
    assert rec.view.unknown_xcons[X] == {}
    assert rec.step(lambda v: v.clear_xcons(X)) == (1, [vc.XconsChanged(X)])
    assert rec.step(lambda v: v.clear_xcons(X)) == (0, [])


def test_scan_static_and_scanning(rec):
    found = {(X, 1): PortRef(A, 1), (X, 2): None}
    assert rec.step(lambda v: v.set_scan(found, {"ok": True})) == (1, [vc.AdaptationsChanged(found)])
    assert rec.view.last_scan == {"ok": True} and rec.view.scan_attached == found
    assert rec.step(lambda v: v.set_scan(found, {"ok": False})) == (0, [])  # the same far ends
    assert rec.view.last_scan == {"ok": False}
    assert rec.step(lambda v: v.set_scan({(X, 2): PortRef(B, 1)})) == (1, [vc.AdaptationsChanged({(X, 2): PortRef(B, 1)})])
    assert rec.view.last_scan == {"ok": False}  # restored far ends keep the last report
    assert rec.step(lambda v: v.load_static("")) == (1, [vc.StaticLoaded("")])
    assert rec.step(lambda v: v.set_scanning(True)) == (0, []) and rec.view.scanning


def test_reservations_are_announced_without_moving_the_graph(rec):
    assert rec.step(lambda v: v.reserve("plan:1", [("A", 1)])) == (0, [vc.ReservedPortsChanged()])
    assert rec.step(lambda v: v.reserve("plan:1", [("A", 1)])) == (0, [])
    assert rec.step(lambda v: v.reserve("plan:2", [("A", 1)])) == (0, [])  # the same set of ports
    assert rec.step(lambda v: v.unreserve("plan:1")) == (0, [])
    assert rec.step(lambda v: v.unreserve("plan:2")) == (0, [vc.ReservedPortsChanged()])


def test_measurements_are_no_change(rec):
    assert rec.step(lambda v: v.set_fine_flows({"f": 1})) == (0, [])
    assert rec.step(lambda v: v.set_link_loads({"A:1-B:1": 3.0})) == (0, [])
    assert rec.step(lambda v: v.set_forwarding_rules({A: {"00:00:00:00:00:01": 2}})) == (0, [])
    assert rec.view.fine_flows == {"f": 1} and rec.view.link_loads == {"A:1-B:1": 3.0}
    assert rec.view.forwarding_rules[A] == {"00:00:00:00:00:01": 2}


def test_readers_cannot_write(rec):
    for table in ("switches", "hosts", "xcons", "unknown_xcons", "scan_attached", "fine_flows", "link_loads",
                  "forwarding_rules"):
        with pytest.raises(TypeError):
            getattr(rec.view, table)[1] = None
    with pytest.raises(AttributeError):
        rec.view.scanning = True
    with pytest.raises(AttributeError):
        rec.view.switches = {}


def test_a_journal_entry_alone_keeps_the_cached_graph(rec):
    g, _ = rec.view.graph()
    JOURNAL.add("te_decision", decision="skip", reason="a log line")
    assert rec.view.graph()[0] is g
    assert rec.view.adaptation_ports() is rec.view.adaptation_ports()
    rec.view.add_link(PacketLink(PortRef(A, 1), PortRef(B, 1)), 1.0)
    g2, _ = rec.view.graph()
    assert g2 is not g and g2.g.number_of_edges() > g.g.number_of_edges()


def test_unsubscribe_stops_the_announcements_and_spares_the_other_listeners(rec):
    later: list = []

    def leave_at_once(change) -> None:
        rec.view.unsubscribe(leave_at_once)  # during an announcement: the listeners after it still hear it

    rec.view.subscribe(leave_at_once)
    rec.view.subscribe(later.append)
    rec.view.set_port(A, 1, port(1, up=False), 5.0)
    assert len(later) == 1
    rec.view.unsubscribe(later.append)
    assert rec.step(lambda v: v.set_port(A, 1, port(1), 6.0))[1]  # the first listener stays
    assert len(later) == 1
    with pytest.raises(ValueError):
        rec.view.unsubscribe(later.append)


def test_every_change_has_its_os_ken_event():
    kinds = {cls for name, cls in vars(vc).items() if not name.startswith("_") and isinstance(cls, type)
             and issubclass(cls, vc.ViewChange) and cls is not vc.ViewChange}
    assert {cls.__mro__[1] for cls in events.VIEW_EVENTS} == kinds
    assert events.EventReservedPorts not in events.GRAPH_EVENTS and events.EventLinkAdd in events.GRAPH_EVENTS
    link = PacketLink(PortRef(A, 1), PortRef(B, 1))
    ev = events.event_of(vc.LinkAdded(link))
    assert type(ev) is events.EventLinkAdd and ev.link == link and isinstance(ev, vc.LinkAdded)


def test_the_inventory_app_bridges_the_view_onto_os_ken_events():
    view = NetworkView(Settings())
    app = Inventory(**{VIEW: view, SOUTHBOUND: OpenFlowSouthbound()})
    sent: list = []
    app.send_event_to_observers = sent.append
    sw = SwitchInfo(A, PACKET, 4, "A", {1: port(1)})
    view.add_switch(sw)
    view.reserve("plan:1", [("A", 1)])
    assert sent == [events.EventSwitchEnter(sw), events.EventReservedPorts()]
    assert [type(e) for e in sent] == [events.EventSwitchEnter, events.EventReservedPorts]
    assert events.EventHostAdd in app._EVENTS  # registered, so @set_ev_cls subscribers receive them


def test_apps_subscribed_with_set_ev_cls_receive_the_views_changes():
    """As os-ken wires the loaded apps: the inventory's ``_EVENTS`` make it the source of every change."""
    from os_ken.base import app_manager

    from app.controller.forwarding import Forwarding
    from app.controller.topology_publisher import TopologyPublisher

    view, sb = NetworkView(Settings()), OpenFlowSouthbound()
    apps = [Inventory(**{VIEW: view, SOUTHBOUND: sb}), TopologyPublisher(**{VIEW: view}), Forwarding(**{VIEW: view, SOUTHBOUND: sb})]
    try:
        for app in apps:
            app_manager.register_app(app)
        app_manager.AppManager.get_instance()._update_bricks()
        inventory, feed, forwarding = apps
        assert feed.name in inventory.observers[events.EventXconChange]
        assert forwarding.name in inventory.observers[events.EventReservedPorts]
        assert feed.name not in inventory.observers[events.EventReservedPorts]  # not a graph change
        view.set_xcons(X, {1: 2})
        assert feed.events.get() == (events.EventXconChange(X), None)  # queued for the feed's event loop
        view.reserve("plan:1", [("A", 1)])
        assert forwarding.events.get() == (events.EventReservedPorts(), None)
    finally:
        for app in apps:
            app_manager.unregister_app(app)


def test_by_name_remembers_its_answers_and_never_misses_a_rename_or_a_leave() -> None:
    from app.controller.model import dpid_label

    view = NetworkView()
    view.add_switch(SwitchInfo(A, PACKET, 4, "A", {1: port(1)}))
    view.add_switch(SwitchInfo(B, PACKET, 4, "B", {1: port(1)}))
    assert view.by_name("A").dpid == A and view.by_name("A").dpid == A  # type: ignore[union-attr]
    assert view.by_name(dpid_label(B)).dpid == B and view.by_name(hex(B)).dpid == B  # type: ignore[union-attr]
    assert view.by_name(str(A)).dpid == A and view.by_name("nope") is None  # type: ignore[union-attr]
    view.rename({A: "core-1"})
    assert view.by_name("A") is None and view.by_name("core-1").dpid == A  # type: ignore[union-attr]
    view.remove_switch(B)
    assert view.by_name("B") is None and view.by_name(hex(B)) is None
    view.add_switch(SwitchInfo(B, PACKET, 4, "B", {1: port(1)}))  # back again
    assert view.by_name("B").dpid == B  # type: ignore[union-attr]


def test_known_far_ends_are_kept_until_the_version_moves(tmp_path):
    """LLDP asks for them every round: the static file's ports are walked once per view version, and a
    rename (which moves it) is seen at once. Callers get their own copy."""
    from topology.spec import fig2_testbed, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    view = NetworkView(Settings())
    doc = spec_to_vendor_file(fig2_testbed())
    write_vendor_file(doc, tmp_path / "optical.json")
    view.load_static(str(tmp_path / "optical.json"))
    x = next(o for o in doc["ots"] if o["name"] == "X")
    a = next(s for s in doc["packet_switches"] if s["name"] == "A")
    view.add_switch(SwitchInfo(int(x["dpid"], 0), OTS, 1, "X", {}))
    view.add_switch(SwitchInfo(int(a["dpid"], 0), PACKET, 4, "A", {}))
    adapt = next(d for d in doc["adaptations"] if d["switch"] == "A" and d["oport"].startswith("X:"))
    key = (int(x["dpid"], 0), int(adapt["oport"].split(":")[1]))
    first = view.known_far_ends()
    assert first[key] == PortRef(int(a["dpid"], 0), adapt["port"])
    first.clear()  # the caller's copy
    assert view.known_far_ends()[key] == PortRef(int(a["dpid"], 0), adapt["port"])
    walks = []
    real = view._walk_far_ends
    view._walk_far_ends = lambda: walks.append(1) or real()  # type: ignore[method-assign]
    view.known_far_ends()
    view.dark_adaptation_ports()
    assert walks == []  # nothing changed: no walk
    view.rename({int(a["dpid"], 0): "A2"})  # A is not the file's "A" any more: its adaptations are unknown
    assert key not in view.known_far_ends() and walks == [1]
