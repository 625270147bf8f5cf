"""The virtual OTS over a real OVS bridge (userspace datapath) with hosts in network namespaces.

h1, h2, h3 sit behind bridge ports 1, 2, 3 (all ODU2); port 4 (ODU2) is wired to port 1 of a second
OVS bridge standing in for a packet switch (it has its own test controller, which records the
PORT_STATUS the light model causes); virtual port 6 (ODU0) has no interface. A test-side OpenFlow 1.0
controller drives the agent and the data plane is checked with ping.
"""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from mininet_labs.netlock import net_lock
from ots_virtual import of10, protocol
from ots_virtual.agent import OtsAgent
from tests.lib.of10_client import Of10Controller, delete_xcon, error_of, xcon

pytestmark = pytest.mark.integration

DELAY = 1.5  # long enough that a ping sent right after the FLOW_MOD ends well inside the dark period
PORTS = {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2", 6: "ODU0"}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=30)


@dataclass
class Net:
    bridge: str
    packet_bridge: str  # its port 1 is wired to OTS port 4
    ns: dict[int, str]  # port -> namespace
    ip: dict[int, str]

    def ping(self, src: int, dst: int, count: int = 1, wait: float = 1.0) -> bool:
        res = sh("ip", "netns", "exec", self.ns[src], "ping", "-n", "-q", "-c", str(count), "-i", "0.2",
                 "-W", str(wait), self.ip[dst], check=False)
        return res.returncode == 0

    def ping_eventually(self, src: int, dst: int, tries: int = 5) -> bool:
        return any(self.ping(src, dst, count=2, wait=1.0) for _ in range(tries))

    def carrier(self, port: int) -> bool:
        out = sh("ip", "-n", self.ns[port], "-br", "link", "show", "eth0").stdout
        return "LOWER_UP" in out


@pytest.fixture(scope="module")
def net() -> Iterator[Net]:
    tag = secrets.token_hex(2)
    bridge, pbridge = f"otsit{tag}", f"otsit{tag}p"
    ns = {p: f"otsit{tag}n{p}" for p in (1, 2, 3)}
    ips = {p: f"10.77.{int(tag, 16) % 200}.{p}" for p in (1, 2, 3)}
    with net_lock():
        try:
            sh("ovs-vsctl", "add-br", bridge, "--", "set", "bridge", bridge, "datapath_type=netdev",
               "fail-mode=secure")
            for p, name in ns.items():
                sw, host = f"otsit{tag}s{p}", f"otsit{tag}h{p}"
                sh("ip", "netns", "add", name)
                sh("ip", "link", "add", sw, "type", "veth", "peer", "name", host)
                sh("ip", "link", "set", host, "netns", name)
                sh("ip", "-n", name, "link", "set", host, "name", "eth0")
                sh("ip", "-n", name, "addr", "add", f"{ips[p]}/24", "dev", "eth0")
                sh("ip", "-n", name, "link", "set", "eth0", "up")
                sh("ip", "-n", name, "link", "set", "lo", "up")
                sh("ip", "netns", "exec", name, "ethtool", "-K", "eth0", "tx", "off", check=False)
                sh("ip", "link", "set", sw, "up")
                sh("ovs-vsctl", "add-port", bridge, sw, "--", "set", "interface", sw, f"ofport_request={p}")
            sh("ovs-vsctl", "add-br", pbridge, "--", "set", "bridge", pbridge, "datapath_type=netdev",
               "fail-mode=secure", "protocols=OpenFlow10")
            sh("ip", "link", "add", f"otsit{tag}s4", "type", "veth", "peer", "name", f"otsit{tag}p1")
            for intf, br, ofport in ((f"otsit{tag}s4", bridge, 4), (f"otsit{tag}p1", pbridge, 1)):
                sh("ip", "link", "set", intf, "up")
                sh("ovs-vsctl", "add-port", br, intf, "--", "set", "interface", intf, f"ofport_request={ofport}")
            links = sh("ip", "-br", "link", "show").stdout
            for br in (bridge, pbridge):
                if br not in links:
                    pytest.fail(f"OVS did not create bridge {br} (add-br returns 0 even on failure)")
            yield Net(bridge, pbridge, ns, ips)
        finally:
            for br in (bridge, pbridge):
                sh("ovs-vsctl", "--if-exists", "del-br", br, check=False)
            sh("ip", "link", "del", f"otsit{tag}s4", check=False)
            for p, name in ns.items():
                sh("ip", "link", "del", f"otsit{tag}s{p}", check=False)
                sh("ip", "netns", "del", name, check=False)


@pytest.fixture(scope="module")
def rig(net: Net) -> Iterator[tuple[Net, OtsAgent, Of10Controller]]:
    ctl = Of10Controller()
    agent = OtsAgent(net.bridge, 0x0F01, PORTS, ctl.address, delay_min=DELAY, delay_max=DELAY)
    try:
        agent.start()
        assert agent.ovs.ready.wait(20), "OVS bridge never connected to the agent"
        ctl.wait_connected()
        agent.wait_idle()
        yield net, agent, ctl
    finally:
        agent.stop()
        ctl.close()


def flows_on_bridge(bridge: str) -> list[str]:
    out = sh("ovs-ofctl", "-O", "OpenFlow10", "dump-flows", bridge, "--no-stats").stdout
    return sorted(line.strip() for line in out.splitlines() if "priority=100" in line)


def test_ports_start_dark(rig):
    net, agent, ctl = rig
    f = ctl.features()
    assert sorted(f.ports) == [1, 2, 3, 4, 6]
    assert all(p.config & ofp.OFPPC_PORT_DOWN for p in f.ports.values())
    assert not net.carrier(1) and not net.carrier(2)
    assert not net.ping(1, 2)


def test_xcon_is_dark_for_the_delay_then_carries_traffic(rig):
    net, agent, ctl = rig
    mark = ctl.mark()
    ctl.send(xcon(1, 2))
    ctl.send(xcon(2, 1))
    barrier_xid = ctl.send(parser.OFPBarrierRequest(of10.DP))
    dark_ping_ok = net.ping(1, 2, count=1, wait=0.3)
    pinged_at = time.monotonic()
    barrier = ctl.wait_for(lambda r: r.header.xid == barrier_xid, timeout=10)
    assert not dark_ping_ok, "the circuit passed traffic during the provisioning delay"
    assert pinged_at < barrier.at, "the barrier reply came before the dark-period ping finished"
    assert not [r for r in ctl.received[mark:] if r.header.msg_type == ofp.OFPT_ERROR]
    assert net.ping_eventually(1, 2)
    assert net.carrier(1) and net.carrier(2) and not net.carrier(3)
    assert flows_on_bridge(net.bridge) == sorted([
        "priority=100,in_port=1 actions=output:2", "priority=100,in_port=2 actions=output:1"])
    # the agent reports its own ports lit (config up, link up once OVS sees carrier)
    for port in (1, 2):
        ctl.wait_for(lambda r, p=port: r.header.msg_type == ofp.OFPT_PORT_STATUS and r.msg.desc.port_no == p
                     and r.msg.desc.config == 0 and r.msg.desc.state == 0, start=mark)


def test_non_xcon_flow_mods_are_refused_and_change_nothing(rig):
    net, agent, ctl = rig
    before = flows_on_bridge(net.bridge)
    cases = [
        (parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=1, dl_dst="00:00:00:00:00:03"),
                           actions=[parser.OFPActionOutput(3, 0)]),
         (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_UNSUPPORTED)),
        (parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=3),
                           actions=[parser.OFPActionOutput(1, 0), parser.OFPActionOutput(2, 0)]),
         (ofp.OFPET_BAD_ACTION, ofp.OFPBAC_TOO_MANY)),
        (xcon(1, 3), (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP)),  # in_port 1 is busy
        (xcon(3, 6), (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM)),  # ODU2 -> ODU0
    ]
    for msg, expected in cases:
        xid = ctl.send(msg)
        etype, code, data = error_of(ctl.reply(xid))
        assert (etype, code) == expected
        assert data == of10.serialize(msg)[:64]
    ctl.barrier()
    assert flows_on_bridge(net.bridge) == before
    assert net.ping(1, 2, count=2)
    assert not net.ping(1, 3) and not net.carrier(3)


def test_port_stats_count_the_pings(rig):
    net, agent, ctl = rig
    before = {s.port_no: s for s in ctl.stats(parser.OFPPortStatsRequest(of10.DP, 0, ofp.OFPP_NONE))}
    assert sorted(before) == [1, 2, 3, 4, 6]
    assert net.ping(1, 2, count=3)
    after = {s.port_no: s for s in ctl.stats(parser.OFPPortStatsRequest(of10.DP, 0, ofp.OFPP_NONE))}
    for port in (1, 2):
        assert after[port].rx_packets - before[port].rx_packets >= 3
        assert after[port].tx_packets - before[port].tx_packets >= 3
    assert after[6].rx_packets == 0
    flows = ctl.stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(in_port=1), 0xFF, ofp.OFPP_NONE))
    assert [(f.match.in_port, f.actions[0].port) for f in flows] == [(1, 2)] and flows[0].packet_count >= 3


@pytest.fixture
def packet_switch(net: Net) -> Iterator[Of10Controller]:
    """The packet-switch bridge attached to OTS port 4, connected to its own test controller."""
    ctl = Of10Controller()
    sh("ovs-vsctl", "set-controller", net.packet_bridge, f"tcp:127.0.0.1:{ctl.port}")
    try:
        ctl.wait_connected(timeout=20)
        yield ctl
    finally:
        sh("ovs-vsctl", "del-controller", net.packet_bridge, check=False)
        ctl.close()


def packet_port_status(ctl: Of10Controller, link_up: bool, start: int) -> None:
    ctl.wait_for(lambda r: r.header.msg_type == ofp.OFPT_PORT_STATUS and r.msg.desc.port_no == 1
                 and bool(r.msg.desc.state & ofp.OFPPS_LINK_DOWN) != link_up, timeout=15, start=start)


def test_attached_packet_switch_sees_the_circuit_come_up_and_go_down(rig, packet_switch):
    net, agent, ctl = rig
    assert packet_switch.features().ports[1].state & ofp.OFPPS_LINK_DOWN  # OTS port 4 is dark
    mark = packet_switch.mark()
    ctl.send(xcon(4, 3))
    ctl.send(xcon(3, 4))
    ctl.barrier()
    packet_port_status(packet_switch, link_up=True, start=mark)
    assert net.carrier(3)
    mark = packet_switch.mark()
    ctl.send(delete_xcon(4))
    ctl.send(delete_xcon(3))
    ctl.barrier()
    packet_port_status(packet_switch, link_up=False, start=mark)
    assert not net.carrier(3)


def test_capabilities(rig):
    net, agent, ctl = rig
    caps = protocol.parse_caps_reply(ctl.request(protocol.caps_request(of10.DP)))
    assert caps.name == net.bridge and caps.ports[6].granularity == "ODU0" and caps.ports[1].capacity_mbps == 10.0


def test_delete_darkens_the_circuit_and_packet_side_sees_it(rig):
    net, agent, ctl = rig
    mark = ctl.mark()
    ctl.send(delete_xcon(1))
    ctl.send(delete_xcon(2))
    ctl.barrier()
    assert flows_on_bridge(net.bridge) == []
    assert not net.ping(1, 2, wait=0.5)
    assert not net.carrier(1) and not net.carrier(2)
    dark = {s.desc.port_no for s in ctl.port_statuses(mark) if s.desc.config & ofp.OFPPC_PORT_DOWN}
    assert dark == {1, 2}


def test_cli_entry_point(net, rig):
    """``python -m ots_virtual`` on the same bridge (the in-process agent gives it up while it runs)."""
    _, agent, _ = rig
    ctl = Of10Controller()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ots_virtual", "--bridge", net.bridge, "--dpid", "0x0f09",
         "--ports", "1:ODU2,2:ODU2,3:ODU2", "--controller", f"127.0.0.1:{ctl.port}",
         "--delay-min", "0", "--delay-max", "0"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ctl.wait_connected(timeout=30)
        assert ctl.features().datapath_id == 0x0F09
        ctl.send(xcon(1, 3))
        ctl.send(xcon(3, 1))
        ctl.barrier()
        assert net.ping_eventually(1, 3)
    finally:
        proc.terminate()
        try:
            rc = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        ctl.close()
    assert rc == 0, proc.stderr.read()
