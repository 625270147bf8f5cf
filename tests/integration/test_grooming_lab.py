"""Grooming on the Fig. 2 testbed (issue 28): three 3 Mbit/s reservations h1 → h3 (VLANs 101-103) share
one 10 Mbit/s circuit — the first lights it, the other two ride it and install only their rules and
meters. With iperf3 UDP on all three at once each gets >= 95 % of its rate; then one of them sends 8
Mbit/s, far beyond its meter: it is held to its 3 Mbit/s and the other two still get theirs (without the
meters the circuit would carry 14 Mbit/s of offers in 10). Cancelling them one by one, the circuit stays
lit until the last one goes."""
from __future__ import annotations

import json
import subprocess
import time

import pytest
import requests

from app.controller.client import wait_until
from app.web.timeutil import to_iso
from mininet_labs.lab_web import lab_web
from mininet_labs.reservation_lifecycle import _state

pytestmark = pytest.mark.integration
VLANS = (101, 102, 103)
RATE = 3.0


def vlan_interfaces(session) -> None:  # noqa: ANN001
    """h1 and h3 get one VLAN interface per reservation: 10.<vlan>.0.1 and 10.<vlan>.0.3."""
    for host, last in (("h1", 1), ("h3", 3)):
        node = session.lab.node(host)
        intf = f"{host}-eth0"
        for v in VLANS:
            node.cmd(f"ip link add link {intf} name {intf}.{v} type vlan id {v} && "
                     f"ip addr add 10.{v}.0.{last}/24 dev {intf}.{v} && ip link set {intf}.{v} up && "
                     f"ethtool -K {intf}.{v} tx off >/dev/null 2>&1")


def udp_at_once(session, offers: dict[int, float], seconds: float = 5.0) -> dict[int, float]:  # noqa: ANN001
    """iperf3 UDP h1 → h3 on each VLAN at the offered Mbit/s, all at once: Mbit/s received per VLAN."""
    h1, h3 = session.lab.node("h1"), session.lab.node("h3")
    servers = {v: h3.popen(["iperf3", "-s", "-1", "-p", str(5200 + v), "-B", f"10.{v}.0.3", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for v in offers}
    try:
        time.sleep(0.7)
        clients = {v: h1.popen(["iperf3", "-c", f"10.{v}.0.3", "-p", str(5200 + v), "-u", "-b", f"{mbps}M",
                                "-t", str(seconds), "-l", "1200", "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for v, mbps in offers.items()}
        got = {}
        for v, c in clients.items():
            out, _err = c.communicate(timeout=seconds + 30)
            s = json.loads(out)["end"]["sum"]
            got[v] = float(s.get("bits_per_second", 0.0)) / 1e6 * (1 - float(s.get("lost_percent", 0.0)) / 100)
        return got
    finally:
        for p in servers.values():
            p.kill()
            p.wait(timeout=10)


def test_three_reservations_share_one_circuit_and_keep_their_rates(tmp_path) -> None:  # noqa: ANN001
    from mininet_labs.netlock import net_lock
    from mininet_labs.session import LabSession
    from topology.spec import fig2_testbed, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    spec = fig2_testbed()
    static = tmp_path / "fig2-optical.json"
    write_vendor_file(spec_to_vendor_file(spec, setup_time=0.185), static)
    db = tmp_path / "mlte.db"
    conf = tmp_path / "mlte.toml"
    conf.write_text("[controller]\nmeter_reservations = true\n")
    with net_lock(), LabSession(spec, tmp_path / "work", static_file=str(static), config_file=str(conf),
                                controller_args=("--db-url", f"sqlite:///{db}")) as session:
        vlan_interfaces(session)
        with lab_web(db, tmp_path / "web.log", extra=("--grooming",)) as web:
            url, headers = web.url, web.headers
            start = time.time() + 5
            ids, uses = [], []
            for v in VLANS:
                r = requests.post(url + "/reservations", headers=headers, timeout=30, json={
                    "name": f"groomed {v}", "src": "A:1", "dst": "C:3", "src_vlan": v, "dst_vlan": v,
                    "bandwidth": RATE, "start": to_iso(start), "end": to_iso(start + 300)})
                assert r.status_code == 201, r.text
                ids.append(r.json()["id"])
                uses.append([c["use"] for c in r.json()["path"]["circuits"]])
                requests.post(f"{url}/reservations/{ids[-1]}/commit", headers=headers, timeout=30).raise_for_status()
            assert uses == [["lights"], ["rides"], ["rides"]], uses
            for rid in ids:
                assert wait_until(lambda rid=rid: _state(url, headers, rid, ("ACTIVE", "FAILED")), 60, "lit") == "ACTIVE"
            assert len({(x["ots"], x.get("in_port"), x.get("out_port")) for x in session.client.xcons()}) <= 4
            for v in VLANS:  # ARP inside each VLAN, across the reservation's rules
                session.lab.node("h1").cmd(f"ping -c1 -W2 10.{v}.0.3 >/dev/null 2>&1")
            together = udp_at_once(session, {v: RATE for v in VLANS})
            over = udp_at_once(session, {101: RATE, 102: RATE, 103: 8.0})
            print(f"\nMEASURED grooming lab: three at {RATE} Mbit/s at once received "
                  f"{ {v: round(m, 3) for v, m in together.items()} }; with VLAN 103 offering 8 Mbit/s: "
                  f"{ {v: round(m, 3) for v, m in over.items()} }")
            assert all(m >= 0.95 * RATE for m in together.values()), together
            assert over[101] >= 0.95 * RATE and over[102] >= 0.95 * RATE, over
            assert over[103] <= 1.1 * RATE, over  # held by its meter
            xcons_lit = session.client.xcons()
            for rid in ids[:2]:
                requests.post(f"{url}/reservations/{rid}/cancel", headers=headers, timeout=30).raise_for_status()
            wait_until(lambda: all(_state(url, headers, rid, ("CANCELLED",)) for rid in ids[:2]), 30, "cancelled")
            time.sleep(3.0)  # two polls: their releases ran
            assert len(session.client.xcons()) == len(xcons_lit)  # the last reservation still rides it
            assert udp_at_once(session, {103: RATE}, 3.0)[103] >= 0.95 * RATE
            requests.post(f"{url}/reservations/{ids[2]}/cancel", headers=headers, timeout=30).raise_for_status()
            assert wait_until(lambda: not session.client.xcons(), 30, "the circuit released with the last one")
            assert session.controller_errors() == "", session.controller_errors()
