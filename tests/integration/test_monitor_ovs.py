"""Real OVS: sFlow samples from a userspace bridge reach our collector; the drop signal counts drops.

One netdev bridge, two namespaces joined by veths, light UDP generators (python sockets).
Holds the machine-wide network lock for the module; everything is removed in the fixture's finally.
"""
from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mininet_labs.netlock import net_lock
from monitor.drops import OvsShapedQueue
from monitor.ovsdb_sflow import OvsSflow
from monitor.sflow import SflowCollector
from topology.flow import FiveTuple

pytestmark = pytest.mark.integration

TRAFFIC = r'''
import socket, sys, time
mode = sys.argv[1]
if mode == "send":  # send DST PORT MBPS SECONDS PAYLOAD SPORT -> prints packets sent
    dst, port, mbps, dur, size, sport = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("", sport))
    payload, gap = b"x" * size, size * 8 / (mbps * 1e6)
    t0 = time.monotonic(); n = 0
    while True:
        now = time.monotonic()
        if now - t0 >= dur: break
        due = t0 + n * gap
        if due > now: time.sleep(min(due - now, 0.01)); continue
        try: s.sendto(payload, (dst, port)); n += 1
        except OSError: time.sleep(0.001)
    print(n, flush=True)
else:  # recv PORT SECONDS -> prints packets bytes
    port, dur = int(sys.argv[2]), float(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("", port)); s.settimeout(0.2)
    n = b = 0; end = time.monotonic() + dur
    while time.monotonic() < end:
        try: d = s.recv(65535); n += 1; b += len(d)
        except socket.timeout: pass
    print(n, b, flush=True)
'''


def sh(*args: str, check: bool = True) -> str:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


class TwoHostNet:
    """Bridge ``br`` (datapath=netdev) with ports ``a1``/``b1``; namespaces ``ns_a``/``ns_b``."""

    def __init__(self, tmp: Path) -> None:
        tag = secrets.token_hex(2)
        self.br, self.ns_a, self.ns_b = f"mlmbr{tag}", f"mlm{tag}a", f"mlm{tag}b"
        self.a0, self.a1, self.b0, self.b1 = f"mlm{tag}a0", f"mlm{tag}a1", f"mlm{tag}b0", f"mlm{tag}b1"
        self.ip_a, self.ip_b = "10.213.7.1", "10.213.7.2"
        self.script = tmp / "traffic.py"
        self.script.write_text(TRAFFIC)

    def up(self) -> None:
        sh("ovs-vsctl", "add-br", self.br, "--", "set", "bridge", self.br, "datapath_type=netdev")
        for ns, inner, outer, ip in ((self.ns_a, self.a0, self.a1, self.ip_a), (self.ns_b, self.b0, self.b1, self.ip_b)):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", inner, "type", "veth", "peer", "name", outer)
            sh("ip", "link", "set", inner, "netns", ns)
            # no IPv6 chatter (router solicitations, MLD, ND): only the test's own packets may reach
            # the shaped queue, or its drop count exceeds the losses the test can account for
            sh("sysctl", "-qw", f"net.ipv6.conf.{outer}.disable_ipv6=1", check=False)
            for key in ("all", "default"):
                sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{key}.disable_ipv6=1", check=False)
            sh("ip", "link", "set", outer, "up")
            sh("ovs-vsctl", "add-port", self.br, outer)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", inner)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", inner, "up")
            sh("ip", "netns", "exec", ns, "ethtool", "-K", inner, "tx", "off", check=False)
        sh("sysctl", "-qw", f"net.ipv6.conf.{self.br}.disable_ipv6=1", check=False)
        sh("ip", "link", "set", self.br, "up")
        # static neighbours: no ARP refresh during a blast adds packets to the shaped queue
        mac_a = sh("ip", "netns", "exec", self.ns_a, "cat", f"/sys/class/net/{self.a0}/address").strip()
        mac_b = sh("ip", "netns", "exec", self.ns_b, "cat", f"/sys/class/net/{self.b0}/address").strip()
        sh("ip", "netns", "exec", self.ns_a, "ip", "neigh", "replace", self.ip_b, "lladdr", mac_b, "dev", self.a0,
           "nud", "permanent")
        sh("ip", "netns", "exec", self.ns_b, "ip", "neigh", "replace", self.ip_a, "lladdr", mac_a, "dev", self.b0,
           "nud", "permanent")
        sh("ip", "netns", "exec", self.ns_a, "ping", "-c", "1", "-W", "2", self.ip_b, check=False)  # learn MACs

    def down(self) -> None:
        sh("ovs-vsctl", "--if-exists", "del-br", self.br, check=False)
        for ns, outer in ((self.ns_a, self.a1), (self.ns_b, self.b1)):
            sh("ip", "link", "del", outer, check=False)
            sh("ip", "netns", "del", ns, check=False)

    def blast(self, mbps: float, seconds: float, size: int = 1000, sport: int = 40000,
              dport: int = 5001) -> tuple[int, int, float]:
        """Send UDP a→b at ``mbps`` for ``seconds``; return (sent, received, monotonic end of sending)."""
        recv = subprocess.Popen(["ip", "netns", "exec", self.ns_b, sys.executable, str(self.script), "recv",
                                 str(dport), str(seconds + 1.5)], stdout=subprocess.PIPE, text=True)
        try:
            time.sleep(0.3)
            out = sh("ip", "netns", "exec", self.ns_a, sys.executable, str(self.script), "send", self.ip_b,
                     str(dport), str(mbps), str(seconds), str(size), str(sport))
            t_end = time.monotonic()
            received = int(recv.communicate(timeout=seconds + 10)[0].split()[0])
        finally:
            if recv.poll() is None:
                recv.kill()
                recv.wait()
        return int(out.split()[0]), received, t_end


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    with net_lock():
        n = TwoHostNet(tmp_path_factory.mktemp("monnet"))
        try:
            n.up()
            yield n
        finally:
            if _port_exists(n.b1):
                OvsShapedQueue().remove(n.b1)
            n.down()


def _port_exists(port: str) -> bool:
    return subprocess.run(["ovs-vsctl", "port-to-br", port], capture_output=True).returncode == 0


def test_sflow_samples_from_ovs_name_the_flow_and_estimate_its_rate(net):
    with SflowCollector(port=0, window=6.0) as col:
        ctl = OvsSflow(f"127.0.0.1:{col.port}", sampling=10, polling=1)
        ctl.enable(net.br)
        try:
            cfg = ctl.status(net.br)
            assert cfg is not None and cfg.targets == (f"127.0.0.1:{col.port}",) and cfg.sampling == 10
            sent, received, t_end = net.blast(mbps=8.0, seconds=3.0, sport=40123, dport=5001)
            time.sleep(max(0.0, t_end + 1.0 - time.monotonic()))  # let the last datagrams arrive
            rates = {r.key: r for r in col.flow_rates(now=t_end + 1.0)}  # the window holds all 3 s of traffic
        finally:
            ctl.disable(net.br)
        key = FiveTuple(net.ip_a, net.ip_b, 17, 40123, 5001)
        assert key in rates, f"flow not sampled; saw {list(rates)} stats {col.stats()}"
        est = rates[key]
        # estimated bytes = Σ frame_length × sampling_rate; true bytes = sent × 1042-byte frames
        # (+4 if the agent counts the FCS). ~300 samples: standard error ~6%, so ±25% is > 4 sigma.
        est_bytes, true_bytes = est.bytes_per_s * col.estimator.window, sent * 1042
        print(f"sent={sent} received={received} estimated={est_bytes:.0f} B true={true_bytes} B "
              f"({est.mbps:.2f} Mbit/s over the window) from {est.samples} samples")
        assert 0.75 * true_bytes < est_bytes < 1.25 * (true_bytes + 4 * sent)
        assert col.stats()["bad"] == 0 and col.counter_samples > 0
        assert ctl.status(net.br) is None
        assert f"127.0.0.1:{col.port}" not in sh("ovs-vsctl", "list", "sflow")
        time.sleep(1.5)  # datagrams already in flight
        before = col.flow_samples + col.counter_samples
        net.blast(mbps=2.0, seconds=1.5, sport=40124)
        assert col.flow_samples + col.counter_samples == before, "samples kept arriving after disable"


def _queue_stats(br: str, port: str) -> tuple[int, int]:
    """(tx_packets, errors) of ``port``'s queue 0 as the switch reports them over OpenFlow 1.3."""
    ofport = sh("ovs-vsctl", "get", "interface", port, "ofport").strip()
    out = sh("ovs-ofctl", "-O", "OpenFlow13", "queue-stats", br, ofport, "0")
    m = re.search(r"pkts=(\d+), errors=(\d+)", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def _other_losses(net) -> int:
    """Losses outside the shaped queue: receiver socket overflows (UDP RcvbufErrors in ns b) and
    packets OVS could not take in or hand out (interface rx/tx_dropped) — seen on a loaded machine."""
    snmp = sh("ip", "netns", "exec", net.ns_b, "cat", "/proc/net/snmp").splitlines()
    udp = [line.split() for line in snmp if line.startswith("Udp:")]
    rcvbuf = int(dict(zip(udp[0], udp[1], strict=True)).get("RcvbufErrors", 0))
    ovs = 0
    for port in (net.a1, net.b1):
        stats = sh("ovs-vsctl", "get", "interface", port, "statistics")
        ovs += sum(int(v) for k, v in re.findall(r"(rx_dropped|tx_dropped)=(\d+)", stats))
    return rcvbuf + ovs


def test_bounded_queue_counts_known_drops(net):
    shaper = OvsShapedQueue()
    shaper.apply(net.b1, max_rate=4_000_000, limit=16)
    try:
        pkts0, err0 = _queue_stats(net.br, net.b1)
        tc0 = shaper.tc_drops(net.b1)
        other0 = _other_losses(net)
        sent, received, _ = net.blast(mbps=12.0, seconds=3.0, sport=40200, dport=5002)
        time.sleep(0.3)
        pkts1, err1 = _queue_stats(net.br, net.b1)
        tc1 = shaper.tc_drops(net.b1)
        other = _other_losses(net) - other0
    finally:
        shaper.remove(net.b1)
    lost = sent - received
    switch_drops, tc_drops = err1 - err0, tc1.dropped - tc0.dropped
    transmitted = pkts1 - pkts0
    offered = transmitted + switch_drops  # packets that reached the shaped egress queue
    print(f"sent={sent} received={received} lost={lost} switch-reported drops={switch_drops} (tc {tc_drops}) "
          f"queue transmitted={transmitted} offered={offered} counted elsewhere={other}")
    assert lost > sent * 0.4  # 12 Mbit/s into 4 Mbit/s: about two thirds must go
    assert switch_drops == tc_drops  # OVS reports the kernel class counter
    # none invented. Measured: up to 27 more drops than losses (of ~3,050) with IPv6 and ARP on, 10 with them silenced
    # (not yet explained; a send that OVS retries after the full queue refused it would count twice).
    assert switch_drops <= lost * 1.02 + 10
    assert offered <= sent * 1.02 + 10
    assert transmitted - 10 <= received <= transmitted + 10 or received >= 0.97 * transmitted
    # every loss after the switch took the packet in is a counted queue drop. On an idle machine
    # offered == sent (measured: 3032 of 3047 losses counted); on a loaded one OVS's ingress socket
    # can overflow before the queue, which no counter shows (docs/monitor.md).
    assert switch_drops >= 0.95 * (offered - received) - 10
    assert offered >= 0.5 * sent
    assert pkts1 - pkts0 >= received
    assert json.loads(sh("ovs-vsctl", "--format=json", "find", "qos", f"external-ids:mlte-shaped={net.b1}"))["data"] == []
