"""Controller → database → web, end to end on the Fig. 2 testbed.

The controller (with its topology_publisher and monitor apps) writes to a temporary SQLite database; the real
``mlte web --topology controller`` serves the same file. The web service must show the discovered
graph (hosts included once they have sent traffic), the circuit lit through the controller API,
admit reservations A → C (also between the host ports A:1 and C:3) against that live topology, and show the monitor's utilization samples of the circuit while UDP traffic crosses it.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest
import requests

from app.controller.client import wait_until
from mininet_labs.netlock import net_lock
from tests.lib.webserver import create_user_cli, serve_cli

pytestmark = pytest.mark.integration

DELAY = (0.150, 0.220)
UDP_SENDER = r'''
import socket, sys, time
dst, seconds, mbps = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
payload, t0 = b"x" * 1000, time.monotonic()
per_tick = max(1, round(mbps * 1e6 / 8 / 1000 / 50))  # 50 bursts per second
while time.monotonic() - t0 < seconds:
    for _ in range(per_tick):
        s.sendto(payload, (dst, 5999))
    time.sleep(0.02)
'''


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind(("127.0.0.1", 0))
        return u.getsockname()[1]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """(lab session, web base URL, auth headers) sharing one SQLite database."""
    from mininet_labs.session import LabSession
    from topology.spec import fig2_testbed, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    work = tmp_path_factory.mktemp("webe2e")
    spec = fig2_testbed()
    static = work / "fig2-optical.json"  # fibres between OTSes: the scan cannot see them (docs/controller.md)
    write_vendor_file(spec_to_vendor_file(spec, setup_time=sum(DELAY) / 2), static)
    conf = work / "mlte.toml"
    conf.write_text(f"[monitor]\ninterval = 1.0\nfine_backend = \"flowstats\"\n"
                    f"sflow_collector_port = {free_udp_port()}\n")
    (work / "udp.py").write_text(UDP_SENDER)
    db = work / "mlte.db"
    mp = pytest.MonkeyPatch()
    mp.setenv("MLTE_CONFIG", str(conf))  # the monitor app's settings, read in the controller process
    with net_lock():
        session = LabSession(spec, work, delay=DELAY, static_file=str(static),
                             extra_apps=("app.controller.monitor_app",),
                             controller_args=("--db-url", f"sqlite:///{db}"))
        try:
            session.start(timeout=60)
            token = create_user_cli(str(db), "e2e")
            with serve_cli(str(db), log_path=work / "web.log", extra=["--topology", "controller"]) as url:
                session.work = work
                yield session, url, {"Authorization": f"Bearer {token}"}
            assert session.controller_errors() == "", session.controller_errors()
        finally:
            session.stop()
            mp.undo()


def api(stack, path: str, **params):  # noqa: ANN001, ANN201
    _session, url, headers = stack
    r = requests.get(f"{url}/api/v1/{path}", headers=headers, params=params, timeout=10)
    return r.status_code, r.json()


class Mismatch(list):
    """graph_diff lines that count as "not yet" for wait_until and show in its timeout message."""

    def __bool__(self) -> bool:
        return False


def web_graph(stack):  # noqa: ANN001, ANN201
    from topology.graph import MultiLayerGraph

    status, body = api(stack, "topology")
    return MultiLayerGraph.from_dict(body["graph"]) if status == 200 else None


def test_web_serves_the_discovered_topology(stack):
    from mininet_labs.testbed import wait_ping
    from topology.compare import graph_diff, with_known_hosts
    from topology.spec import spec_to_graph

    session = stack[0]
    scan = session.client.scan(timeout=120)
    assert scan["errors"] == [] and scan["leftover_xcons"] == []
    spec_graph = spec_to_graph(session.spec, setup_time=sum(DELAY) / 2)

    def diff(expected, *ignore: str) -> Mismatch | bool:  # noqa: ANN001
        g = web_graph(stack)
        if g is None:
            return Mismatch(["no snapshot yet"])
        # an access edge is as wide as the switch port reports (veth: 10 Gbit/s), not as the lab shapes it
        lines = graph_diff(g, expected(g), ignore_attrs=("source", "name", "access.capacity", *ignore))
        return Mismatch(lines) if lines else True

    # before any ping some hosts may already be known (from IPv6 neighbour discovery: no IPv4 address
    # yet), each at its own port; never a wrong one
    wait_until(lambda: diff(lambda g: with_known_hosts(spec_graph, g), "host.ip"), 30,
               "the web topology to equal the Fig. 2 graph (with the hosts known so far)", interval=0.5)
    # hosts exist for the controller once they send traffic: within each cluster (no circuit yet)
    h1, h3 = session.lab.node("h1"), session.lab.node("h3")
    assert wait_ping(h1, "10.0.0.2", 30) and wait_ping(h3, "10.0.0.4", 30)
    wait_until(lambda: diff(lambda g: spec_graph), 30,
               "the web topology to equal the Fig. 2 graph including its four hosts", interval=0.5)
    status, body = api(stack, "topology")
    assert {"A", "B", "C", "h1", "h2", "h3", "h4"} == set(body["layers"]["packet"]["nodes"])
    assert len(body["layers"]["adaptation"]["links"]) == 6
    # access capacity = the switch port's OF1.3 curr_speed (kbit/s) in Mbit/s
    speeds = {(sw["name"], p["port_no"]): p["speed_kbps"] for sw in session.client.switches() for p in sw["ports"]}
    graph = web_graph(stack)
    for key in graph.edges_of_kind("access"):
        edge = graph.edge(key)
        (sw, port), = edge["ports"].items()
        assert speeds[(sw, port)] > 0 and edge["capacity"] == speeds[(sw, port)] / 1000
        assert edge["source"] == "learning"


def test_circuit_set_up_through_the_controller_appears_in_the_web(stack):
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed

    session = stack[0]
    assert session.client.circuit(FIG2_CIRCUITS["initial"])["ok"]
    session.wait_links(directed(FIG2_CIRCUIT_LINKS["initial"]), timeout=30)

    def active() -> list:
        _s, body = api(stack, "circuits", state="ACTIVE")
        return body["items"]

    items = wait_until(lambda: len(active()) == 2 and active(), 30, "two ACTIVE circuits in the web")
    assert {(c["a_end"], c["z_end"]) for c in items} == {("A:3", "B:1"), ("B:2", "C:1")}
    hops = {c["a_end"]: [(x["ots"], x["in_port"], x["out_port"]) for x in c["xcons"]] for c in items}
    assert hops == {"A:3": [("X", 1, 2), ("Y", 1, 2)], "B:2": [("Y", 3, 4), ("Z", 1, 2)]}
    assert all(c["capacity"] == 10.0 and all(x["active"] for x in c["xcons"]) for c in items)
    # the web topology now has the packet links LLDP found over the circuit, and the lit XCONs
    wait_until(lambda: "packet:A:3-B:1" in (web_graph(stack).edges_of_kind("packet")), 30, "circuit links in the web")
    _s, events = api(stack, "events", kind="circuit.up")
    assert len(events["items"]) == 2


def test_reservation_a_to_c_admitted_against_the_live_topology(stack):
    _session, url, headers = stack
    graph = web_graph(stack)
    now = datetime.now(timezone.utc)
    body = {"name": "e2e A-C", "src": "A:4", "dst": "C:2", "bandwidth": 2.0,
            "start": (now + timedelta(minutes=10)).isoformat(), "end": (now + timedelta(hours=1)).isoformat()}
    r = requests.post(f"{url}/api/v1/reservations", json=body, headers=headers, timeout=30)
    assert r.status_code == 201, r.text
    path = r.json()["path"]
    keys = {k for _u, _v, k in graph.g.edges(keys=True)}
    assert path["edges"] and set(path["edges"]) <= keys  # every hop is an edge of the discovered graph
    assert path["nodes"][0] == "A" and path["nodes"][-1] == "C"
    # an endpoint the discovered graph does not have is refused, naming the field
    bad = requests.post(f"{url}/api/v1/reservations", json={**body, "name": "bad", "dst": "Q:1"},
                        headers=headers, timeout=30)
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "dst"


def test_reservation_between_host_ports_admitted_against_the_live_topology(stack):
    """A:1 -> C:3 (h1's and h3's switch ports): the pce uses the learnt hosts' access edges."""
    _session, url, headers = stack
    graph = web_graph(stack)
    assert {"access:A:1-h1", "access:C:3-h3"} <= set(graph.edges_of_kind("access"))
    now = datetime.now(timezone.utc)
    # a window after the A:4 -> C:2 booking's (an optical port is taken whole by a booking)
    body = {"name": "e2e h1-h3", "src": "A:1", "dst": "C:3", "bandwidth": 2.0,
            "start": (now + timedelta(hours=2)).isoformat(), "end": (now + timedelta(hours=3)).isoformat()}
    r = requests.post(f"{url}/api/v1/reservations", json=body, headers=headers, timeout=30)
    assert r.status_code == 201, r.text
    path = r.json()["path"]
    assert path["edges"][0] == "access:A:1-h1" and path["edges"][-1] == "access:C:3-h3"
    assert set(path["edges"]) <= {k for _u, _v, k in graph.g.edges(keys=True)}
    assert path["nodes"][0] == "A" and path["nodes"][-1] == "C"


def test_monitor_utilization_reaches_the_web_while_traffic_flows(stack):
    from mininet_labs.testbed import wait_ping

    session = stack[0]
    h1 = session.lab.node("h1")
    assert wait_ping(h1, "10.0.0.3", 30)
    sender = h1.popen([sys.executable, str(session.work / "udp.py"), "10.0.0.3", "20", "3"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def loaded() -> list:
            since = datetime.fromtimestamp(time.time() - 30, timezone.utc).isoformat()
            _s, body = api(stack, "utilization", link="packet:A:3-B:1", since=since)
            return [p for p in body["series"]["packet:A:3-B:1"] if p["mbps"] > 1.0]

        points = wait_until(loaded, 20, "utilization samples of packet:A:3-B:1 above 1 Mbit/s", interval=0.5)
    finally:
        sender.terminate()
        sender.wait(10)
    assert all(0 < p["utilization"] <= 1.0 for p in points)
    _s, all_series = api(stack, "utilization")
    assert "packet:B:2-C:1" in all_series["series"]  # every monitored circuit has its series


def test_a_locked_database_does_not_stall_the_controller(stack):
    """Hold the SQLite write lock (as the web's admission does with BEGIN IMMEDIATE) for 3 s: the
    controller's writes queue in its writer thread, its API keeps answering, no LLDP link expires,
    and the queued rows are written once the lock is released."""
    import sqlite3

    session = stack[0]
    session.wait_links(timeout=30)
    expired_before = [e for e in session.client.events(kind="link_delete") if e.get("why") == "expired"]
    links_before = session.seen_links()
    before = session.client.health()["db"]
    assert before is not None and before["alive"]
    locker = sqlite3.connect(str(session.work / "mlte.db"), isolation_level=None, timeout=30)
    locker.execute("BEGIN IMMEDIATE")
    held: list[dict] = []
    try:
        t_end = time.monotonic() + 3.0
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            held.append(session.client.health())
            assert time.monotonic() - t0 < 1.0, "GET /health waited for the database lock"
            time.sleep(0.2)
    finally:
        locker.execute("COMMIT")
        locker.close()
    # the monitor (Ts = 1 s) queued samples it could not write while the lock was held
    assert any(h["db"]["queued"] > 0 and h["db"]["busy"] for h in held)
    after = wait_until(lambda: not (h := session.client.health()["db"])["queued"] and not h["busy"] and h, 30,
                       "the writer to drain")
    assert after["written"] > before["written"] and after["errors"] == before["errors"]
    assert after["dropped_samples"] == 0
    expired = [e for e in session.client.events(kind="link_delete") if e.get("why") == "expired"]
    assert expired == expired_before
    assert session.seen_links() == links_before
