"""OpenFlow over TLS (issue 24 item 4): packet switches reach a TLS-only controller with certificates
from `mlte pki init`; a switch whose certificate another CA signed is refused; nothing listens on
plain TCP.

One lab (two OVS bridges P-Q, a host on each) with ``LabSession(tls=True)``: the controller runs with
``--tls-dir <workdir>/pki`` and OVS with ``set-ssl`` (put back when the lab stops), under the
machine-wide net lock. The rogue bridge and the global SSL set-up it needs are undone in ``finally``.
"""
from __future__ import annotations

import re
import socket
import subprocess
import time

import pytest

from app.controller.client import wait_until
from mininet_labs.netlock import net_lock

pytestmark = pytest.mark.integration

ROGUE_DPID = 0x5FF


def pair_spec():
    from topology.spec import HostSpec, LabSpec, LinkSpec, SwitchSpec

    switches = (SwitchSpec("P", 0x5A1), SwitchSpec("Q", 0x5A2))
    hosts = (HostSpec("h1", "P", 1, "10.0.0.1", "02:00:00:00:05:a1"),
             HostSpec("h2", "Q", 1, "10.0.0.2", "02:00:00:00:05:a2"))
    links = (LinkSpec("h1", 0, "P", 1, "access", 20), LinkSpec("h2", 0, "Q", 1, "access", 20),
             LinkSpec("P", 2, "Q", 2, "packet", 20))
    return LabSpec("tls-pair", switches, (), hosts, links)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from mininet_labs.session import LabSession

    with net_lock(), LabSession(pair_spec(), tmp_path_factory.mktemp("tls"), tls=True) as session:
        yield session
        assert session.controller_errors() == "", session.controller_errors()


def _vsctl(*args: str) -> str:
    return subprocess.run(["ovs-vsctl", "--timeout=10", *args], capture_output=True, text=True, timeout=20,
                          check=True).stdout.strip()


def _is_connected(bridge: str) -> bool:
    uuid = _vsctl("get", "bridge", bridge, "controller").strip("[]")  # the bridge's one controller
    return _vsctl("get", "controller", uuid, "is_connected") == "true"


def test_packet_switches_connect_over_tls_and_forward(lab):
    from mininet_labs.testbed import wait_ping

    sws = {s["name"]: (s["kind"], s["of_version"]) for s in lab.client.switches()}
    assert sws == {"P": ("packet", "1.3"), "Q": ("packet", "1.3")}
    bridges = [lab.lab.bridge(sw) for sw in ("P", "Q")]
    for br in bridges:
        assert _vsctl("get-controller", br) == f"ssl:127.0.0.1:{lab.of_port}"
    # OVS writes is_connected to its database a few seconds late
    wait_until(lambda: all(_is_connected(br) for br in bridges), 15, "OVS to report P and Q connected")
    lab.wait_links(timeout=20)  # LLDP out and PACKET_IN back, over TLS
    assert wait_ping(lab.lab.node("h1"), "10.0.0.2", 15)


def test_nothing_listens_on_plain_tcp(lab):
    pid = lab.controller.pid
    ss = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, timeout=10).stdout
    ports = {int(m.group(1)) for line in ss.splitlines() if f"pid={pid}," in line
             for m in [re.search(r":(\d+)\s", line)] if m}
    assert ports == {lab.of_port, lab.api_port}  # no 6633/6653 fallback, no second OpenFlow listener
    with socket.create_connection(("127.0.0.1", lab.of_port), timeout=5) as s:
        s.sendall(bytes([4, 0, 0, 8, 0, 0, 0, 1]))  # an OpenFlow 1.3 HELLO in the clear
        s.settimeout(5)
        try:
            reply = s.recv(8)
        except (ConnectionResetError, TimeoutError):
            reply = b""
    assert reply[:2] != bytes([4, 0])  # no OpenFlow HELLO back: a TLS alert (0x15) or a close
    assert reply == b"" or reply[0] == 0x15


def test_switch_with_a_certificate_from_another_ca_is_refused(lab, tmp_path):
    from app import pki
    from mininet_labs.testbed import TlsFiles, set_ovs_ssl

    other = pki.init(tmp_path / "other-ca")["switch"]
    rogue = lab.lab.bridge("rg")
    log = lab.workdir / "controller.log"
    before = log.read_text().count("refused")
    # OVS has one SSL set-up for every bridge: the rogue's certificate is the other CA's (it trusts ours)
    set_ovs_ssl(TlsFiles(key=str(other.key), cert=str(other.cert), ca=lab.lab.tls.ca))
    try:
        _vsctl("add-br", rogue, "--", "set", "bridge", rogue, "datapath_type=netdev", "protocols=OpenFlow13",
               "fail-mode=secure", f"other-config:datapath-id={ROGUE_DPID:016x}",
               "--", "set-controller", rogue, f"ssl:127.0.0.1:{lab.of_port}")
        wait_until(lambda: re.search(r"TLS handshake from 127\.0\.0\.1:\d+ refused: .*certificate verify failed",
                                     log.read_text()) and log.read_text().count("refused") > before,
                   20, "the controller to log the refused handshake")
        deadline = time.monotonic() + 5  # OVS retries (back-off 1, 2, 4 s): it never gets in
        while time.monotonic() < deadline:
            assert ROGUE_DPID not in {s["dpid"] for s in lab.client.switches()}
            assert not _is_connected(rogue)
            time.sleep(0.5)
    finally:
        subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", rogue], capture_output=True, timeout=20)
        set_ovs_ssl(lab.lab.tls)
    # the lab's own switches are (again) connected with the right certificate
    wait_until(lambda: all(_is_connected(lab.lab.bridge(sw)) for sw in ("P", "Q")), 20, "P and Q connected")
    assert {s["name"] for s in lab.client.switches()} == {"P", "Q"}
