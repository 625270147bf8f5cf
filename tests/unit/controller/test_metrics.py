"""GET /metrics on the control API: scraped and parsed as Prometheus does, values follow the network."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.controller import db_writer, events, guard
from app.controller.api_routes import CONTEXT as ROUTES
from app.controller.api_routes import ApiRoutes
from app.controller.api_token import BearerCheck
from app.controller.control_api import ControlApi
from app.controller.live_southbound import LiveSouthbound
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.metrics import CONTEXT as METRICS
from app.controller.metrics import ControllerMetrics
from app.controller.metrics_app import MetricsApp
from app.controller.metrics_collector import NetworkCollector
from app.controller.model import PACKET, HostInfo, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.controller.plan_runner import CONTEXT as RUNNER
from app.controller.plan_runner import PlanRunner
from app.controller.services import Scheduler, Service
from app.update.executor import threaded
from tests.lib.fakeoftable import FakeDatapath
from tests.unit.controller.test_control_api import TOKEN, FakeDriver, FakeInventory


class Controller:
    """The control API and the metrics app over one view, southbound, runner and registry (fake OTS)."""

    def __init__(self) -> None:
        self.view = view = NetworkView()
        for sw in FakeInventory().switches.values():
            view.add_switch(sw)
        self.southbound = OpenFlowSouthbound(barrier_timeout=0.2)
        self.southbound.xcon_driver = FakeDriver(view)
        self.mastership = Mastership()
        runner = PlanRunner(LiveSouthbound(self.southbound, view), view, run_parallel=threaded)
        self.metrics = ControllerMetrics()
        ctx = {VIEW: view, SOUTHBOUND: self.southbound, RUNNER: runner, ROUTES: ApiRoutes(),
               MASTERSHIP: self.mastership, METRICS: self.metrics}
        self.api = ControlApi(**ctx)
        self.api.auth = BearerCheck(TOKEN)
        self.app = MetricsApp(**ctx)

    def request(self, method: str, path: str, body: dict | None = None, token: str | None = TOKEN):
        raw = json.dumps(body).encode() if body is not None else b""
        env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "CONTENT_LENGTH": str(len(raw)),
               "wsgi.input": io.BytesIO(raw)}
        if token is not None:
            env["HTTP_AUTHORIZATION"] = f"Bearer {token}"
        seen: dict = {}
        out = b"".join(self.api.wsgi(env, lambda status, headers: seen.update(status=int(status.split()[0]),
                                                                               headers=dict(headers))))
        return seen["status"], seen["headers"], out

    def scrape(self) -> dict[tuple[str, tuple], float]:
        """``{(sample name, sorted labels): value}`` of one scrape, parsed by prometheus_client's parser."""
        status, headers, body = self.request("GET", "/metrics")
        assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return samples(body.decode())


def samples(text: str) -> dict[tuple[str, tuple], float]:
    out: dict[tuple[str, tuple], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(scrape: dict, name: str, **labels: str) -> float:
    return scrape.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def ctl():
    return Controller()


def test_metrics_need_the_token_like_every_route(ctl):
    status, headers, body = ctl.request("GET", "/metrics", token=None)
    assert status == 401 and "WWW-Authenticate" in headers and b"mlte_" not in body
    assert ctl.request("GET", "/metrics", token="wrong-token-0123456789")[0] == 401
    assert ctl.request("POST", "/metrics")[0] == 405


def test_switches_ports_hosts_and_links_come_from_the_view(ctl):
    m = ctl.scrape()
    assert value(m, "mlte_switches", kind="packet") == 1 and value(m, "mlte_switches", kind="ots") == 1
    assert value(m, "mlte_ports", kind="packet", state="up") == 1
    assert value(m, "mlte_ports", kind="ots", state="down") == 2
    assert value(m, "mlte_hosts") == 0 and value(m, "mlte_circuits_lit") == 0
    assert value(m, "mlte_mastership_leader") == 1 and value(m, "mlte_mastership_epoch") == 0
    assert value(m, "process_resident_memory_bytes") > 0  # the process collector is in this registry

    ctl.view.add_switch(SwitchInfo(0xB1, PACKET, 4, "B", {1: PortInfo(1, "B-eth1", "00:00:00:00:0b:01", True),
                                                          2: PortInfo(2, "B-eth2", "00:00:00:00:0b:02", False)}))
    ctl.view.add_host(HostInfo("00:00:00:00:00:01", "10.0.0.1", PortRef(0xB1, 1)))
    m = ctl.scrape()
    assert value(m, "mlte_switches", kind="packet") == 2
    assert value(m, "mlte_ports", kind="packet", state="up") == 2
    assert value(m, "mlte_ports", kind="packet", state="down") == 1
    assert value(m, "mlte_hosts") == 1 and value(m, "mlte_links", layer="access") == 1
    assert value(m, "mlte_view_changes_total") == ctl.view.version
    assert value(m, "mlte_view_announcements_total", kind="SwitchEntered") == ctl.view.announced["SwitchEntered"] >= 1
    assert value(m, "mlte_view_announcements_total", kind="HostAdded") == 1
    assert value(m, "mlte_graph_builds_total") == ctl.view.graph_builds >= 1  # this scrape built the graph
    built = ctl.view.graph_builds
    m = ctl.scrape()  # nothing changed: the cached graph
    assert value(m, "mlte_graph_builds_total") == built


def test_a_circuit_plan_is_counted_and_timed_and_its_xcons_and_ports_show(ctl):
    before = ctl.scrape()
    assert value(before, "mlte_plans_total", source="circuit", kind="circuit", outcome="done") == 0
    status, _, _ = ctl.request("POST", "/circuit", {"xcons": [{"ots": "X", "in_port": 1, "out_port": 2}]})
    assert status == 200
    m = ctl.scrape()
    assert value(m, "mlte_plans_total", source="circuit", kind="circuit", outcome="done") == 1
    assert value(m, "mlte_plan_duration_seconds_count", source="circuit", kind="circuit") == 1
    assert value(m, "mlte_plan_step_duration_seconds_count", kind="xcon_add", phase="forward") == 1
    assert value(m, "mlte_xcons", state="applied") == 2  # one per direction
    # a refused XCON: the plan fails and is rolled back, counted under its outcome
    status, _, _ = ctl.request("POST", "/circuit", {"xcons": [{"ots": "X", "in_port": 3, "out_port": 9}]})
    assert status == 422
    m = ctl.scrape()
    failed = {k: v for k, v in m.items() if k[0] == "mlte_plans_total" and ("outcome", "done") not in k[1]}
    assert sum(failed.values()) == 1 and value(m, "mlte_plans_total", source="circuit", kind="circuit", outcome="done") == 1


def test_openflow_messages_are_counted_per_type_from_the_one_send_path(ctl):
    from os_ken.ofproto import ofproto_v1_3 as ofp13

    from app.controller import ofmsg

    FakeDatapath.for_southbound(ctl.southbound, 0xA1, ports=(1, 2))
    ctl.southbound.send(0xA1, [ofmsg.echo_request(b"x"), ofmsg.barrier(ofp13.OFP_VERSION)], kind="monitor_echo")
    ctl.southbound.send(0xA1, [ofmsg.barrier(ofp13.OFP_VERSION)], kind="forwarding")
    m = ctl.scrape()
    assert value(m, "mlte_openflow_messages_sent_total", type="OFPBarrierRequest") == 2
    assert value(m, "mlte_openflow_messages_sent_total", type="OFPEchoRequest") == 1
    assert value(m, "mlte_openflow_sender_messages_total", sender="monitor_echo") == 2
    assert value(m, "mlte_openflow_datapaths") == 1


def test_reserved_ports_by_owner_kind(ctl):
    ctl.view.reserve("reservation:7", [("A", 3), ("C", 1)])
    ctl.view.reserve("te:1", [("A", 4)])
    m = ctl.scrape()
    assert value(m, "mlte_port_owners", kind="reservation") == 1
    assert value(m, "mlte_reserved_ports", kind="reservation") == 2
    assert value(m, "mlte_reserved_ports", kind="te") == 1
    ctl.view.unreserve("reservation:7")
    assert value(ctl.scrape(), "mlte_port_owners", kind="reservation") == 0


def test_mastership_of_an_elected_controller(ctl):
    ctl.mastership.elected_mode(lambda _now: True)
    assert value(ctl.scrape(), "mlte_mastership_leader") == 0
    ctl.mastership.elected(5)
    m = ctl.scrape()
    assert value(m, "mlte_mastership_leader") == 1 and value(m, "mlte_mastership_epoch") == 5
    assert value(m, "mlte_mastership_transitions_total") == 1
    ctl.southbound.gate = ctl.mastership.is_master
    ctl.mastership.deposed("test")
    assert value(ctl.scrape(), "mlte_mastership_leader") == 0


def test_te_decisions_from_the_bus(ctl):
    ctl.app._decision(events.EventDecision({"decision": "offload", "reason": "gain"}))
    ctl.app._decision(events.EventDecision({"decision": "skip", "reason": "no path"}))
    ctl.app._decision(events.EventDecision({"decision": "skip", "reason": "no path"}))
    m = ctl.scrape()
    assert value(m, "mlte_te_decisions_total", decision="skip") == 2
    assert value(m, "mlte_te_decisions_total", decision="offload") == 1


def test_services_failures_and_the_db_writer_queue():
    """The collector reads the services table, the failure list and the writer's queue as they are."""
    view, sb = NetworkView(), OpenFlowSouthbound()
    writer = db_writer.DbWriter(max_jobs=10)  # not started: its jobs stay queued
    failures: list[str] = []
    sched = Scheduler("mlte_test", lambda ev: None, [Service("tick", object, 1.0)],
                      spawn=lambda *a: None, sleep=lambda s: None)
    metrics = ControllerMetrics(process=False)
    metrics.attach(NetworkCollector(view, sb, writer=lambda: writer, service_health=sched.status,
                                    failures=failures))
    m = samples(metrics.render().decode())
    assert value(m, "mlte_db_writer_queue_jobs") == 0 and value(m, "mlte_db_writer_queue_limit_jobs") == 10
    assert value(m, "mlte_service_runs_total", service="mlte_test.tick") == 0
    for _ in range(3):
        writer.submit(db_writer.EVENT, "store", lambda store: None)
    sched.run("tick", lambda: None)
    before = len(guard.failures)
    try:
        sched.run("tick", lambda: 1 / 0)  # the one failure policy: counted, swallowed
    finally:
        del guard.failures[before:]
    failures.append("handler x: boom")
    m = samples(metrics.render().decode())
    assert value(m, "mlte_db_writer_queue_jobs") == 3
    assert value(m, "mlte_service_runs_total", service="mlte_test.tick") == 2
    assert value(m, "mlte_service_failures_total", service="mlte_test.tick") == 1
    assert value(m, "mlte_handler_failures_total") == 1
    assert ("mlte_mastership_leader", ()) not in m  # no mastership given: no series


def test_the_monitor_cycle_is_timed(monkeypatch):
    from tests.unit.controller.test_periodic_work import Monitor

    mon = Monitor(monkeypatch)
    metrics = mon.app.metrics = ControllerMetrics(process=False)
    mon.app._poll(SimpleNamespace())
    mon.reply("queue")
    mon.reply("port")  # the last reply: the cycle ends at once
    mon.drain()
    mon.app._poll(SimpleNamespace())
    mon.reply("queue")
    mon.drain()  # the port stats never come: the cycle ends at the reply deadline, 0.4 s on
    m = samples(metrics.render().decode())
    assert value(m, "mlte_monitor_cycle_duration_seconds_count") == 2
    assert value(m, "mlte_monitor_cycle_duration_seconds_sum") == pytest.approx(0.4)
    assert value(m, "mlte_monitor_cycle_duration_seconds_bucket", le="0.5") == 2
    assert value(m, "mlte_monitor_cycle_duration_seconds_bucket", le="0.25") == 1


def test_two_controllers_in_one_process_keep_their_own_registries():
    a, b = Controller(), Controller()
    a.view.reserve("te:1", [("A", 4)])
    assert value(a.scrape(), "mlte_port_owners", kind="te") == 1
    assert value(b.scrape(), "mlte_port_owners", kind="te") == 0


def test_a_te_decision_is_timed_and_counted_off_the_bus(monkeypatch):
    """The OTTER decider turns a move down (the elephant sent too little for it to pay): one decision,
    timed by the TE app's hook, counted by the metrics app from the EventDecision it announced."""
    import time

    from app.update.model import FlowRule, XconSpec
    from mininet_labs.circuits import FIG2_CIRCUITS
    from monitor.flowstats import FlowCount
    from tests.lib.fake_network import FakeNetwork
    from tests.unit.te.test_placement_app import ELEPHANT, FORWARDING, imbalance, make_app
    from topology.spec import fig2_testbed

    net = FakeNetwork.from_spec(fig2_testbed(), xcon_delay_s=0.02)
    try:
        net.preload([XconSpec(*x) for x in FIG2_CIRCUITS["initial"]],
                    [FlowRule(sw, "forwarding", 0, 100, (("eth_dst", mac),), port)
                     for sw, rules in FORWARDING.items() for mac, port in rules.items()])
        te = make_app(monkeypatch, net, {"placement": "otter"})
        metrics = te.metrics = ControllerMetrics(process=False)
        app = MetricsApp(**{METRICS: metrics})
        monkeypatch.setattr(te, "send_event_to_observers", app._decision)  # the bus, with one observer
        te.view.fine_flows[ELEPHANT] = FlowCount(500_000, 6.0, time.monotonic())
        te._monitor(imbalance())
    finally:
        net.close()
    m = samples(metrics.render().decode())
    assert value(m, "mlte_te_decision_duration_seconds_count", decider="offload") == 1
    assert value(m, "mlte_te_decision_duration_seconds_sum", decider="offload") > 0
    assert value(m, "mlte_te_decisions_total", decision="skip") == 1
    assert value(m, "mlte_te_decisions_total", decision="offload") == 0


def test_a_plan_kind_from_a_request_body_does_not_become_a_label_value():
    """POST /plan may name any kind: only the planner's kinds are labels, the rest count as other."""
    from app.update.executor import PlanRecord, StepRecord

    metrics = ControllerMetrics(process=False)
    for kind in ("move", "x" * 40, "another"):
        metrics.plan_finished(PlanRecord("p", kind, "ordered", started_at=1.0, finished_at=1.5,
                                         steps=[StepRecord("s", "flow_add", "A", [], 1.0, 1.25)]), "api")
    m = samples(metrics.render().decode())
    assert value(m, "mlte_plans_total", source="api", kind="move", outcome="done") == 1
    assert value(m, "mlte_plans_total", source="api", kind="other", outcome="done") == 2
    assert {dict(k[1]).get("kind") for k in m if k[0] == "mlte_plans_total"} == {"move", "other"}
    assert value(m, "mlte_plan_duration_seconds_sum", source="api", kind="other") == pytest.approx(1.0)
    assert value(m, "mlte_plan_step_duration_seconds_sum", kind="flow_add", phase="forward") == pytest.approx(0.75)


def test_the_real_apps_and_a_reservation_plan_over_the_fig2_fabric(tmp_path):
    """The real OTS driver, LLDP and forwarding apps over fake Fig. 2 switches, a reservation's provision
    plan through the plan runner: the scrape shows the discovered network, the plan with its step
    times, the lit circuit and who holds its ports, and the OpenFlow messages the apps sent."""
    import time

    from app.controller.reservation_circuits import circuit_for
    from app.update import planner
    from mininet_labs.circuits import FIG2_CIRCUITS
    from pce.reservation import PathRequest, compute_path
    from tests.lib.offabric import OFFabric
    from tests.unit.controller.test_openflow_fabric import Controller as Apps
    from topology.spec import fig2_testbed, spec_to_graph, spec_to_vendor_file
    from topology.vendor_file import write_vendor_file

    spec = fig2_testbed()
    fabric = OFFabric(spec)
    metrics = ControllerMetrics(process=False)
    runner = PlanRunner(fabric.live(), fabric.view, sleep=time.sleep)
    MetricsApp(**fabric.contexts(), **{RUNNER: runner, METRICS: metrics})
    Apps(fabric, ["offload"])  # A:4-C:2 lit; LLDP finds it
    # LLDP links over the circuits, but the OTSes' VENDOR capabilities not in yet: the graph is built with
    # those links as copper (live_graph lists the scan's adaptations as problems) and every figure answers
    m = samples(metrics.render().decode())
    assert value(m, "mlte_graph_ok") == 1 and value(m, "mlte_switches", kind="ots") == 3
    assert value(m, "mlte_links", layer="packet") > 0
    assert value(m, "mlte_xcons", state="applied") == 2 * len(FIG2_CIRCUITS["offload"])  # one per direction
    for o in spec.ots:  # as the OTS driver records them, and the fibres from the operator's vendor file
        fabric.view.set_capabilities(fabric.dpid(o.name),
                                     {"ports": {str(p): {"granularity": g} for p, g in dict(o.ports).items()}})
    doc = spec_to_vendor_file(spec, setup_time=0.1)
    doc["adaptations"], doc["packet_switches"] = [], []
    for o in doc["ots"]:
        o["dpid"] = hex(fabric.dpid(o["name"]))
    write_vendor_file(doc, tmp_path / "optical.json")
    fabric.view.load_static(str(tmp_path / "optical.json"))
    m = samples(metrics.render().decode())
    assert value(m, "mlte_graph_ok") == 1 and value(m, "mlte_links", layer="optical") > 0
    assert value(m, "mlte_switches", kind="packet") == 3 and value(m, "mlte_switches", kind="ots") == 3
    assert value(m, "mlte_circuits_lit") == 1
    assert value(m, "mlte_openflow_sender_messages_total", sender="lldp") > 0
    assert value(m, "mlte_openflow_sender_messages_total", sender="forwarding") > 0
    assert value(m, "mlte_openflow_messages_sent_total", type="OFPPacketOut") > 0
    xcon_mods = value(m, "mlte_openflow_sender_messages_total", sender="xcon")

    g = spec_to_graph(fig2_testbed())
    c = circuit_for(g, 5, "A:1", "C:3", compute_path(g, PathRequest("A:1", "C:3", 5, 0, 3600)).edges)
    fabric.auto_links = True  # the plan waits for its circuit's link: let the view follow the light
    plan = planner.provision(c.xcons, c.packet_ports, list(c.segments), list(c.transit), list(c.ingress),
                             verify=False, stable_ms=5, circuit_timeout_s=1.0, plan_id="res5")
    rec = runner.run(plan, "reservation:5", "reservations", ports=c.packet_ports, context={"reservation_id": 5})
    assert rec.state == "done", rec.error
    m = samples(metrics.render().decode())
    assert value(m, "mlte_plans_total", source="reservations", kind="provision", outcome="done") == 1
    for kind in ("xcon_add", "circuit_up", "flow_add"):
        assert value(m, "mlte_plan_step_duration_seconds_count", kind=kind, phase="forward") >= 1, kind
    assert value(m, "mlte_plan_duration_seconds_sum", source="reservations", kind="provision") > 0
    assert value(m, "mlte_circuits_lit") == 2
    assert value(m, "mlte_port_owners", kind="reservation") == 1
    assert value(m, "mlte_reserved_ports", kind="reservation") == len(c.packet_ports)
    assert value(m, "mlte_openflow_sender_messages_total", sender="xcon") > xcon_mods


def test_a_failing_plan_observer_is_loud_but_does_not_fail_the_plan(ctl):
    """A bug in a figure must not turn a lit circuit into an error for whoever asked for it."""
    def broken(record, source):  # noqa: ANN001
        raise RuntimeError("figure bug")

    ctl.api.runner.observers.insert(0, broken)
    before = len(guard.failures)
    try:
        status, _, _ = ctl.request("POST", "/circuit", {"xcons": [{"ots": "X", "in_port": 1, "out_port": 2}]})
        assert status == 200
        assert guard.failures[before:] == ["plan observer: RuntimeError('figure bug')"]
    finally:
        del guard.failures[before:]
    assert value(ctl.scrape(), "mlte_plans_total", source="circuit", kind="circuit", outcome="done") == 1


def test_a_graph_that_cannot_be_built_leaves_the_other_figures_answering(ctl, monkeypatch):
    def broken() -> None:
        raise KeyError("X:1")

    monkeypatch.setattr(ctl.view, "graph", broken)
    ctl.view.add_switch(SwitchInfo(0xB2, PACKET, 4, "B2", {}))  # a new view version: the figures are worked out again
    m = ctl.scrape()
    assert value(m, "mlte_graph_ok") == 0 and value(m, "mlte_switches", kind="packet") == 2
    assert ("mlte_links", (("layer", "packet"),)) not in m
