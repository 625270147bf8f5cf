"""The Fig. 2 testbed with our controller: optical scan, static file, OTS errors, XCON circuits.

One testbed for the whole module (controller subprocess + Mininet + 3 OTS agents) under the
machine-wide net lock; tests run in file order and each leaves no XCON behind.
"""
from __future__ import annotations

import subprocess
import threading

import pytest

from app.controller.client import ControlApiError, wait_until
from mininet_labs.netlock import net_lock

pytestmark = pytest.mark.integration

DELAY = (0.150, 0.220)


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    from mininet_labs.session import LabSession
    from topology.spec import fig2_testbed

    with net_lock(), LabSession(fig2_testbed(), tmp_path_factory.mktemp("fig2"), delay=DELAY) as session:
        yield session  # the session stops (controller, agents, bridges) however the tests end
        assert session.controller_errors() == "", session.controller_errors()


def ots_flows(session, ots: str) -> list[str]:
    """The OVS flows of an OTS bridge other than the agent's priority-0 drop-all rule."""
    out = subprocess.run(["ovs-ofctl", "--no-names", "dump-flows", session.lab.bridge(ots)],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    return [line for line in out.splitlines() if "cookie=" in line and "priority=0 " not in line
            and not line.rstrip().endswith("priority=0 actions=drop")]


def spec_adaptations(spec) -> set[tuple[str, str, int]]:
    return {(f"{a.b}:{a.b_port}", a.a, a.a_port) for a in spec.links_of_kind("adaptation")}


def test_datapaths_classified_and_capabilities_stored(testbed):
    from app.db.engine import make_engine
    from topology.capabilities import CapabilityStore

    kinds = {s["name"]: (s["kind"], s["of_version"]) for s in testbed.client.switches()}
    assert kinds == {"A": ("packet", "1.3"), "B": ("packet", "1.3"), "C": ("packet", "1.3"),
                     "X": ("ots", "1.0"), "Y": ("ots", "1.0"), "Z": ("ots", "1.0")}
    store = CapabilityStore(make_engine(str(testbed.workdir / "capabilities.db")))  # migrated by the controller
    try:
        x = store.get(0x0F01)
        assert x is not None and x.switch_type == "optical" and x.name == "X"
        assert x.granularity == {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2", 5: "ODU2", 6: "ODU0"}
        assert x.one_rule_per_port and (x.setup_time_min, x.setup_time_max) == DELAY
        assert store.get(0xA1).switch_type == "packet"
    finally:
        store.engine.dispose()
    # nothing we sent so far was refused: no packet-switch rule ever went to an OTS
    assert testbed.client.events(kind="of_error") == []


def test_optical_scan_finds_every_adaptation_and_leaves_no_probe(testbed):
    result = testbed.client.scan(timeout=120)
    found = {(a["oport"], a["switch"], a["port"]) for a in result["adaptations"]}
    assert found == spec_adaptations(testbed.spec)
    assert result["ambiguous"] == {} and result["errors"] == []
    assert result["probes"] > 0 and result["leftover_xcons"] == []
    assert testbed.client.xcons() == []
    for ots in ("X", "Y", "Z"):
        assert ots_flows(testbed, ots) == [], f"probe XCON left on {ots}"
    graph = testbed.client.topology(sources="lldp,scan")
    adapt = {tuple(sorted((link["u"], link["v"]))) for link in graph["links"] if link["kind"] == "adaptation"}
    assert adapt == {tuple(sorted((o, s))) for o, s, _ in spec_adaptations(testbed.spec)}


def test_static_file_gives_the_same_graph_as_the_scan(testbed, tmp_path):
    from topology.compare import graph_diff, without_hosts
    from topology.graph import MultiLayerGraph
    from topology.spec import spec_to_graph, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    if not testbed.client.events(kind="scan_done"):
        testbed.client.scan(timeout=120)
    path = tmp_path / "fig2-optical.json"
    write_vendor_file(spec_to_vendor_file(testbed.spec, setup_time=sum(DELAY) / 2), path)
    testbed.client.load_static(str(path))
    try:
        def graph(sources: str) -> MultiLayerGraph:
            data = testbed.client.topology(sources=sources)
            assert data.pop("problems") == []
            return MultiLayerGraph.from_dict(data)

        by_scan = graph("lldp,scan,static-fibres")
        by_file = graph("lldp,static")
        assert graph_diff(by_scan, by_file) == []
        assert len(by_file.edges_of_kind("adaptation")) == 6 and len(by_file.edges_of_kind("optical")) == 5
        expected = without_hosts(spec_to_graph(testbed.spec, setup_time=sum(DELAY) / 2))
        assert graph_diff(by_scan, expected, ignore_attrs=("source", "name")) == []
    finally:
        testbed.client.load_static("")


def test_non_xcon_flow_mod_returns_openflow_error(testbed):
    with pytest.raises(ControlApiError) as err:
        testbed.client.flowmod("X", {"in_port": 1, "dl_type": 0x0800}, out_port=2)
    assert err.value.status == 422
    errors = err.value.body["errors"]
    assert len(errors) == 1
    # OF1.0 has no BAD_MATCH: a match on more than in_port is FLOW_MOD_FAILED/UNSUPPORTED (docs/ots.md)
    assert (errors[0]["type_name"], errors[0]["code_name"]) == ("OFPET_FLOW_MOD_FAILED", "OFPFMFC_UNSUPPORTED")
    assert ots_flows(testbed, "X") == []
    # an XCON between ports of different granularity (ODU2 -> ODU0) is refused too, nothing installed
    with pytest.raises(ControlApiError) as err:
        testbed.client.xcon("X", 1, 6)
    assert err.value.status == 422
    assert {(e["type_name"], e["code_name"]) for e in err.value.body["errors"]} == {
        ("OFPET_FLOW_MOD_FAILED", "OFPFMFC_EPERM")}
    assert testbed.client.xcons() == [] and ots_flows(testbed, "X") == []


def test_xcon_chain_connects_clusters_only_after_provisioning(testbed):
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed
    from mininet_labs.testbed import ping, wait_ping

    h1 = testbed.lab.node("h1")
    hops = FIG2_CIRCUITS["initial"]
    assert not ping(h1, "10.0.0.3", wait=1), "clusters must not reach each other without a circuit"
    since = testbed.client.events()[-1]["seq"]
    result: dict = {}
    worker = threading.Thread(target=lambda: result.update(testbed.client.circuit(hops)))
    worker.start()
    try:
        early = ping(h1, "10.0.0.3", wait=0.1)  # the circuit is dark for >= DELAY[0] per XCON
    finally:
        worker.join(60)
    assert not early
    assert result.get("ok"), result
    try:
        for hop in result["xcons"]:
            assert hop["applied_at"] - hop["sent_at"] >= DELAY[0]
        first_sent = result["xcons"][0]["sent_at"]
        ups = [e for e in testbed.client.events(since, "port") if e["kind"] == "packet" and e["up"]]
        assert ups and min(e["t"] for e in ups) >= first_sent + DELAY[0] - 0.01
        testbed.wait_links(directed(FIG2_CIRCUIT_LINKS["initial"]), timeout=20)
        assert wait_ping(h1, "10.0.0.3", 20)
        assert wait_ping(testbed.lab.node("h2"), "10.0.0.4", 20)
        assert len(ots_flows(testbed, "Y")) == 4  # Y1<->Y2 and Y3<->Y4
    finally:
        testbed.client.remove_circuit(hops)
    assert testbed.client.xcons() == []
    wait_until(lambda: not testbed.seen_links(), 20, "circuit packet links to go")
    assert not ping(h1, "10.0.0.3", wait=1)
    for ots in ("X", "Y", "Z"):
        assert ots_flows(testbed, ots) == []


def test_parallel_circuit_and_its_packet_link(testbed):
    """All hops of a circuit at once (one provisioning delay): LLDP sees A:4-C:2, removal drops it."""
    from mininet_labs.circuits import FIG2_CIRCUIT_LINKS, FIG2_CIRCUITS, directed

    hops = FIG2_CIRCUITS["offload"]
    result = testbed.client.circuit(hops, parallel=True)
    try:
        assert result["ok"] and len(result["xcons"]) == 2
        testbed.wait_links(directed(FIG2_CIRCUIT_LINKS["offload"]), timeout=20)
        graph = testbed.client.topology(sources="lldp,scan")
        assert any(link["key"] == "packet:A:4-C:2" for link in graph["links"])
        active = {link["key"] for link in graph["links"] if link["kind"] == "xcon" and link["active"]}
        assert active == {"xcon:X:4-X:5", "xcon:Z:4-Z:5"}
    finally:
        testbed.client.remove_circuit(hops)
    wait_until(lambda: not testbed.seen_links(), 20, "offload link to go")
    assert testbed.client.xcons() == []
