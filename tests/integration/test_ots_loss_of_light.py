"""Loss of light, agent restart and OTS power on a small Mininet lab, through mininet_labs/faults.py.

h1 - A:1 | A:3 - X:1 =X= X:3 ~fibre~ Y:1 =Y= Y:2 ~fibre~ Z:3 =Z= Z:2 - C:1 | C:3 - h3 (=N= an XCON
on OTS N: a circuit over three OTSes, so a failure travels two hops each way). The OTS agents are the lab's
own subprocesses (OtsSwitch), each pointed at a test-side OpenFlow 1.0 controller that provisions the
XCONs; the packet switches forward with a NORMAL flow and report PORT_STATUS to test controllers too.
Shows: a fibre cut and a flapped packet port darken the packet ports at both ends of the circuit and a
repair brings them back; a killed and restarted agent keeps its XCON flows, light and traffic; a
powered-off OTS darkens every port and comes back with no XCONs. Prints the timings it saw.

First, on Fig. 2 with the mlte controller (its own lab, before the module's): the optical scan still
finds every adaptation with loss of light on; a fibre cut under circuit ``direct`` takes the packet
ports at both ends down at the controller and a repair brings the packet link back; a killed and
restarted agent's XCONs are read back and adopted by the connected controller.
"""
from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from app.controller.client import wait_until
from mininet_labs import faults
from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
from mininet_labs.netlock import net_lock
from mininet_labs.session import LabSession, free_port, random_prefix
from mininet_labs.testbed import LabNet, ping, wait_ping
from ots_virtual import of10
from tests.lib.of10_client import Of10Controller, xcon
from topology.spec import HostSpec, LabSpec, LinkSpec, OtsSpec, SwitchSpec, fig2_testbed, spec_to_vendor_file
from topology.vendor_file import write_vendor_file

pytestmark = pytest.mark.integration

FAULT = (0, ofp.OFPPS_LINK_DOWN)  # an OTS port in an XCON whose fibre/cable failed
LOS = (ofp.OFPPC_PORT_DOWN, ofp.OFPPS_LINK_DOWN)  # an OTS port darkened by loss of light


def packet_port_up(session: LabSession, switch: str, port: int) -> bool:
    sw = next(s for s in session.client.switches() if s["name"] == switch)
    return next(p["up"] for p in sw["ports"] if p["port_no"] == port)


def test_fig2_controller_sees_the_cut_and_adopts_a_restarted_agents_xcons(tmp_path):
    spec = fig2_testbed()
    doc = spec_to_vendor_file(spec, setup_time=0.185)  # the operator's file: fibres only, as `mlte lab`
    doc["adaptations"], doc["packet_switches"] = [], []
    write_vendor_file(doc, tmp_path / "optical-domain.json")
    with net_lock(), LabSession(spec, tmp_path, static_file=str(tmp_path / "optical-domain.json"),
                                state_file="") as s:
        scan = s.client.scan(timeout=120)
        assert len(scan["adaptations"]) == 6 and scan["errors"] == []  # probes towards dark fibres still light
        assert s.client.circuit(FIG2_CIRCUITS["direct"])["ok"]  # X:1-X:3 ~ Z:3-Z:2: packet link A:3-C:1
        s.wait_links(directed(FIG2_CIRCUIT_LINKS["direct"]), timeout=20)
        h1 = s.lab.node("h1")
        assert wait_ping(h1, "10.0.0.3", 20)
        cut = faults.cut_fibre(s, "X:3", "Z:3")
        wait_until(lambda: not packet_port_up(s, "A", 3) and not packet_port_up(s, "C", 1), 5,
                   "A:3 and C:1 down at the controller", interval=0.005)
        known = time.monotonic() - cut
        assert not directed(FIG2_CIRCUIT_LINKS["direct"]) & s.seen_links()
        print(f"\nFig. 2 cut X:3-Z:3 -> A:3 and C:1 down in GET /switches after <= {1000 * known:.0f} ms")
        faults.repair_fibre(s, "X:3", "Z:3")
        s.wait_links(directed(FIG2_CIRCUIT_LINKS["direct"]), timeout=20)
        assert wait_ping(h1, "10.0.0.3", 20)
        faults.kill_agent(s, "X")
        assert ping(h1, "10.0.0.3", count=3)
        faults.restart_agent(s, "X")
        s.wait_connected(30)
        wait_until(lambda: {(x["in_port"], x["out_port"]) for x in s.client.xcons()
                            if x["ots"] == "X" and x.get("adopted")} == {(1, 3), (3, 1)}, 15,
                   "the restarted agent's XCONs adopted by the controller")
        assert ping(h1, "10.0.0.3", count=3)
        assert s.controller_errors() == "", s.controller_errors()


def spec() -> LabSpec:
    hosts = (HostSpec("h1", "A", 1, "10.0.0.1", "00:00:00:00:00:01"),
             HostSpec("h3", "C", 3, "10.0.0.3", "00:00:00:00:00:03"))
    links = (LinkSpec("h1", 0, "A", 1, "access", 20), LinkSpec("h3", 0, "C", 3, "access", 20),
             LinkSpec("A", 3, "X", 1, "adaptation", 10), LinkSpec("C", 1, "Z", 2, "adaptation", 10),
             LinkSpec("X", 3, "Y", 1, "optical", 10), LinkSpec("Y", 2, "Z", 3, "optical", 10))
    ots = (OtsSpec("X", 0x0F01, {1: "ODU2", 3: "ODU2"}), OtsSpec("Y", 0x0F02, {1: "ODU2", 2: "ODU2"}),
           OtsSpec("Z", 0x0F03, {2: "ODU2", 3: "ODU2"}))
    return LabSpec("los", (SwitchSpec("A", 0xA1), SwitchSpec("C", 0xC1)), ots, hosts, links)


@dataclass
class Rig:
    lab: LabNet
    ctl: dict[str, Of10Controller]  # node name -> its test controller

    def flows(self, node: str) -> list[str]:
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow10", "dump-flows", self.lab.bridge(node), "--no-stats"],
                             capture_output=True, text=True, timeout=15).stdout
        return sorted(line.strip() for line in out.splitlines() if "priority=100" in line)

    def circuit(self, ots: str, a: int, b: int) -> None:
        c = self.ctl[ots]
        c.send(xcon(a, b))
        c.send(xcon(b, a))
        c.barrier()

    def h(self, name: str):
        return self.lab.node(name)


def port_change(ctl: Of10Controller, port: int, down: bool, start: int, timeout: float = 10.0) -> float:
    """Arrival time of the first PORT_STATUS since ``start`` showing ``port`` with link down/up."""
    r = ctl.wait_for(lambda r: r.header.msg_type == ofp.OFPT_PORT_STATUS and r.msg.desc.port_no == port
                     and bool(r.msg.desc.state & ofp.OFPPS_LINK_DOWN) == down, timeout=timeout, start=start)
    return r.at


def last_status(ctl: Of10Controller, port: int) -> tuple[int, int]:
    st = [s for s in ctl.port_statuses() if s.desc.port_no == port]
    return st[-1].desc.config, st[-1].desc.state


def wait_status(ctl: Of10Controller, port: int, want: tuple[int, int], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while last_status(ctl, port) != want:
        assert time.monotonic() < deadline, f"port {port}: {last_status(ctl, port)}, want {want}"
        time.sleep(0.01)


def wait_reconnected(ctl: Of10Controller, connections: int, timeout: float = 30.0, agent_log: str | None = None) -> None:
    """Wait until the switch has opened a session after the ``connections``-th (on failure: the agent's log)."""
    deadline = time.monotonic() + timeout
    while ctl.connections == connections:
        if time.monotonic() >= deadline:
            tail = ""
            if agent_log and os.path.exists(agent_log):
                with open(agent_log, errors="replace") as f:
                    tail = "".join(f.readlines()[-30:])
            raise AssertionError(f"the switch never reconnected in {timeout:.0f} s ({ctl.diagnosis()}); "
                                 f"its agent's log ends:\n{tail}")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def rig(tmp_path_factory) -> Iterator[Rig]:
    workdir = tmp_path_factory.mktemp("los")
    ctl = {n: Of10Controller() for n in ("A", "C", "X", "Y", "Z")}
    lab = LabNet(spec(), prefix=random_prefix(), controller=("127.0.0.1", free_port()), delay=(0.15, 0.22),
                 shaping=False, agent_log_dir=str(workdir))
    with net_lock():
        try:
            lab.start()
            for n in ("X", "Y", "Z"):  # each agent to its own test controller
                sw = lab.node(n)
                sw.stop_agent()
                sw.controller_targets = [f"127.0.0.1:{ctl[n].port}"]
                sw.start_agent()
            for n in ("A", "C"):
                br = lab.bridge(n)
                subprocess.run(["ovs-vsctl", "set", "bridge", br, "protocols=OpenFlow10,OpenFlow13", "--",
                                "set-controller", br, f"tcp:127.0.0.1:{ctl[n].port}"], check=True, timeout=15)
                subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flow", br, "priority=1,actions=NORMAL"],
                               check=True, timeout=15)
            for c in ctl.values():
                c.wait_connected(timeout=30)
            r = Rig(lab, ctl)
            r.circuit("X", 1, 3)
            r.circuit("Y", 1, 2)
            r.circuit("Z", 2, 3)
            assert wait_ping(r.h("h1"), "10.0.0.3", timeout=20), "no traffic over the circuit"
            yield r
        finally:
            lab.stop()
            for c in ctl.values():
                c.close()


def test_fibre_cut_darkens_both_ends_and_repair_restores_them(rig):
    a, c = rig.ctl["A"], rig.ctl["C"]
    marks = a.mark(), c.mark()
    cut = faults.cut_fibre(rig.lab, "X:3", "Y:1")
    down_a, down_c = port_change(a, 3, True, marks[0]), port_change(c, 1, True, marks[1])
    wait_status(rig.ctl["X"], 3, FAULT)
    wait_status(rig.ctl["X"], 1, LOS)
    wait_status(rig.ctl["Y"], 1, FAULT)
    wait_status(rig.ctl["Y"], 2, LOS)
    wait_status(rig.ctl["Z"], 3, FAULT)  # one hop further: Y darkened Y:2
    wait_status(rig.ctl["Z"], 2, LOS)
    assert not ping(rig.h("h1"), "10.0.0.3", wait=0.5)
    marks = a.mark(), c.mark()
    repair = faults.repair_fibre(rig.lab, "X:3", "Y:1")
    up_a, up_c = port_change(a, 3, False, marks[0]), port_change(c, 1, False, marks[1])
    for ots, ports in (("X", (1, 3)), ("Y", (1, 2)), ("Z", (2, 3))):
        for p in ports:
            wait_status(rig.ctl[ots], p, (0, 0))
    assert wait_ping(rig.h("h1"), "10.0.0.3", timeout=10)
    print(f"\ncut X:3-Y:1 at X -> A:3 down {1000 * (down_a - cut):.1f} ms, C:1 down {1000 * (down_c - cut):.1f} ms; "
          f"repair -> A:3 up {1000 * (up_a - repair):.1f} ms, C:1 up {1000 * (up_c - repair):.1f} ms")


def test_a_packet_port_flap_travels_to_the_other_end(rig):
    c = rig.ctl["C"]
    mark = c.mark()
    slept: list[float] = []

    def hold(s: float) -> None:
        slept.append(time.monotonic())
        port_change(c, 1, True, mark)  # C's port went down while A:3 was down
        slept.append(time.monotonic())

    down = faults.flap_port(rig.lab, "A:3", hold=0.0, sleep=hold)
    up = port_change(c, 1, False, mark)
    assert wait_ping(rig.h("h1"), "10.0.0.3", timeout=10)
    print(f"\nA:3 down -> C:1 down {1000 * (slept[1] - down):.1f} ms, A:3 set up -> C:1 up ≤ {1000 * (up - slept[1]):.1f} ms "
          f"(through X, Y and Z)")


@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_restarted_agent_keeps_its_xcons_and_traffic(rig, how):
    """SIGKILL (a crash) or SIGTERM (the agent releases the bridge): the XCON flows stay either way."""
    a = rig.ctl["A"]
    before = rig.flows("X")
    assert len(before) == 2
    mark = a.mark()
    if how == "killed":
        faults.kill_agent(rig.lab, "X")
    else:
        rig.lab.node("X").stop_agent()
    assert rig.flows("X") == before and ping(rig.h("h1"), "10.0.0.3", count=3)  # hardware keeps its XCONs lit
    connections = rig.ctl["X"].connections
    faults.restart_agent(rig.lab, "X")
    wait_reconnected(rig.ctl["X"], connections, agent_log=rig.lab.node("X").agent_log)
    stats = rig.ctl["X"].stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE))
    assert sorted((f.match.in_port, f.actions[0].port) for f in stats) == [(1, 3), (3, 1)]
    ports = rig.ctl["X"].features().ports
    assert ports[1].config == 0 and ports[3].config == 0 and not ports[1].state & ofp.OFPPS_LINK_DOWN
    assert rig.flows("X") == before and ping(rig.h("h1"), "10.0.0.3", count=3)
    assert not [s for s in a.port_statuses(mark) if s.desc.port_no == 3], "A:3 blinked during the restart"


def test_power_off_darkens_every_port_and_power_on_has_no_xcons(rig):
    a, c = rig.ctl["A"], rig.ctl["C"]
    marks = a.mark(), c.mark()
    off = faults.power_off_ots(rig.lab, "Y")
    down_a, down_c = port_change(a, 3, True, marks[0]), port_change(c, 1, True, marks[1])
    for p in (1, 2):
        with open(f"/sys/class/net/{faults.interface(rig.lab, f'Y:{p}')}/operstate") as f:
            assert f.read().strip() == "down"
    assert rig.flows("Y") == []
    for ots, fibre_port, client_port in (("X", 3, 1), ("Z", 3, 2)):
        wait_status(rig.ctl[ots], fibre_port, FAULT)
        wait_status(rig.ctl[ots], client_port, LOS)
    connections = rig.ctl["Y"].connections
    faults.power_on_ots(rig.lab, "Y")
    try:
        wait_reconnected(rig.ctl["Y"], connections, timeout=20, agent_log=rig.lab.node("Y").agent_log)
    except AssertionError as first:
        # Seen in three full `make test` runs (once with both cores busy, 2026-11-28): the new agent logged "connected" but
        # this test's listener never accepted it (the accept loop alive and waiting). Not understood yet:
        # the sockets on the port are printed; the power-on is repeated once so the test goes on to what
        # it checks (the loss of light), and a second failure fails it.
        print(f"\nRETRIED the power-on of Y: {first}")
        faults.power_on_ots(rig.lab, "Y")
        wait_reconnected(rig.ctl["Y"], connections, agent_log=rig.lab.node("Y").agent_log)
    assert rig.ctl["Y"].stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE)) == []
    assert all(p.config & ofp.OFPPC_PORT_DOWN for p in rig.ctl["Y"].features().ports.values())
    marks = a.mark(), c.mark()
    rig.circuit("Y", 1, 2)  # the controller provisions it again
    port_change(a, 3, False, marks[0])
    port_change(c, 1, False, marks[1])
    assert wait_ping(rig.h("h1"), "10.0.0.3", timeout=10)
    print(f"\npower off Y -> A:3 down {1000 * (down_a - off):.1f} ms, C:1 down {1000 * (down_c - off):.1f} ms")


def test_a_packet_switch_off_its_controller_keeps_forwarding(rig):
    a = rig.ctl["A"]
    ends = len(a.session_ends)
    records = faults.controller_records(rig.lab.bridge("A"))
    faults.disconnect_switch(rig.lab, "A")
    a.wait_session_end(ends + 1)
    assert ping(rig.h("h1"), "10.0.0.3", count=3)
    connections = a.connections
    faults.reconnect_switch(rig.lab, "A")
    wait_reconnected(a, connections)
    assert faults.controller_records(rig.lab.bridge("A")) == records
    assert ping(rig.h("h1"), "10.0.0.3", count=3)
