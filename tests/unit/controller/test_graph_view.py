"""The controller's live graph + the static file reproduce the Fig. 2 spec graph."""
import subprocess
import sys

from app.controller.live_graph import combined, live_graph, strip
from app.controller.model import OTS, PACKET, PacketLink, PortInfo, PortRef, SwitchInfo
from topology.compare import graph_diff, without_hosts
from topology.spec import fig2_testbed, spec_to_graph, spec_to_vendor_file
from topology.vendor_file import vendor_to_graph


def live_state(spec):
    switches = []
    for s in spec.switches:
        switches.append(SwitchInfo(s.dpid, PACKET, 4, s.name))
    for o in spec.ots:
        ports = {p: PortInfo(p, f"{g}-{p}", "00:00:00:00:00:00", False) for p, g in o.ports.items()}
        caps = {"setup_time_min": 0.15, "setup_time_max": 0.22, "unit_mbps": 1.0}
        switches.append(SwitchInfo(o.dpid, OTS, 1, o.name, ports, caps))
    dpid = {s.name: s.dpid for s in spec.switches} | {o.name: o.dpid for o in spec.ots}
    adapt = {(dpid[a.b], a.b_port): PortRef(dpid[a.a], a.a_port) for a in spec.links_of_kind("adaptation")}
    return switches, adapt, dpid


def test_scan_plus_fibres_equals_spec():
    spec = fig2_testbed()
    switches, adapt, _ = live_state(spec)
    live, problems = live_graph(switches, [], adapt, {})
    assert problems == []
    static = strip(vendor_to_graph(spec_to_vendor_file(spec)), ["adaptation"])
    merged = combined(live, static)
    assert merged.conflicts == []
    assert graph_diff(merged.graph, without_hosts(spec_to_graph(spec)), ignore_attrs=("source", "name")) == []


def test_circuit_link_capacity_and_active_xcons():
    spec = fig2_testbed()
    switches, adapt, dpid = live_state(spec)
    links = [PacketLink(PortRef(0xA1, 3), PortRef(0xB1, 1)), PacketLink(PortRef(0xB1, 1), PortRef(0xA1, 3))]
    xcons = {dpid["X"]: {1: 2, 2: 1}, dpid["Y"]: {1: 2}}
    g, problems = live_graph(switches, links, adapt, xcons)
    assert problems == []
    assert g.edges_of_kind("packet") == ["packet:A:3-B:1"]
    assert g.edge("packet:A:3-B:1")["capacity"] == 10.0  # an ODU2 circuit at 1 Mbit/s per unit
    assert g.active_xcons() == ["xcon:X:1-X:2", "xcon:Y:1-Y:2"]


def test_plain_modules_do_not_import_os_ken():
    code = ("import sys, app.controller.scan_inference, app.controller.paths, app.controller.links, "
            "app.controller.live_graph, app.controller.journal; assert 'os_ken' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
