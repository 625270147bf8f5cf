"""The control API's HTTP layer (routing, validation, status codes) over fake apps: no switch needed."""
from __future__ import annotations

import io
import json

import pytest

from app.controller.api_token import BearerCheck
from app.controller.control_api import ControlApi
from app.controller.live_southbound import LiveSouthbound
from app.controller.model import OTS, PACKET, PacketLink, PortInfo, PortRef, SwitchInfo
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.controller.ots_driver import BarrierTimeout, DriverError, XconResult, delete_ports
from app.controller.plan_runner import CONTEXT as RUNNER
from app.controller.plan_runner import PlanRunner
from app.update.executor import threaded


class FakeInventory:
    def __init__(self):
        self.switches = {
            0xA1: SwitchInfo(0xA1, PACKET, 4, "A", {3: PortInfo(3, "A-eth3", "00:00:00:00:00:03", True)}),
            0xF01: SwitchInfo(0xF01, OTS, 1, "X", {p: PortInfo(p, f"ODU2-{p}", "02:0f:00:00:00:01", False)
                                                   for p in (1, 2)}),
        }

    def of_kind(self, kind):
        return [s for s in self.switches.values() if s.kind == kind]

    def by_name(self, name):
        return next((s for s in self.switches.values() if s.name == name), None)

    def rename(self, names):
        for dpid, name in names.items():
            self.switches[dpid].name = name


class FakeDriver:
    """The real driver's bookkeeping (delete_ports, the view's XCON methods) over a fake OTS."""

    def __init__(self, view: NetworkView):
        self.view = view
        self.xcons = view.xcons
        self.unknown = view.unknown_xcons
        self.deleted: list[int] = []  # in_ports DELETE_STRICTs were sent for

    def resolve(self, ots):
        if ots != "X":
            raise DriverError(f"unknown switch {ots!r}", 404)
        return 0xF01

    def install(self, ots, a, b, bidirectional=True):
        self.resolve(ots)
        if b == 9:  # the fake OTS refuses port 9 like a real one: an OpenFlow error
            err = {"xid": 7, "type": 2, "code": 4, "type_name": "OFPET_BAD_ACTION", "code_name": "OFPBAC_BAD_OUT_PORT"}
            return XconResult(False, "X", [], [err], 1.0, None)
        if b == 8:  # the fake OTS stops answering: no barrier reply; the XCON may or may not be in
            self.view.mark_unknown(0xF01, [(a, b), (b, a)])
            raise BarrierTimeout("no BARRIER_REPLY from 0000000000000f01 within 5.0s", [(a, b), (b, a)])
        self.view.set_xcons(0xF01, {a: b, b: a})
        return XconResult(True, "X", [{"in_port": a, "out_port": b, "ok": True}], [], 1.0, 1.2)

    def known_port(self, dpid, a):
        return a in self.xcons.get(dpid, {}) or a in self.unknown.get(dpid, {})

    def remove(self, ots, a, bidirectional=True):
        ports = delete_ports(self.xcons.get(0xF01, {}), self.unknown.get(0xF01, {}), a, bidirectional)
        self.deleted += ports  # DELETE_STRICT on a port without an XCON changes nothing on the OTS
        self.view.remove_xcons(0xF01, ports)
        return XconResult(True, "X", [{"in_port": p, "deleted": True} for p in ports], [], 1.0, 1.1)

    def active(self):
        return [{"ots": "X", "in_port": a, "out_port": b} for a, b in sorted(self.xcons.get(0xF01, {}).items())] + [
            {"ots": "X", "in_port": a, "out_port": b, "state": "unknown"}
            for a, b in sorted(self.unknown.get(0xF01, {}).items())]


@pytest.fixture
def api():
    """The API over a network view filled as the apps would fill it, and a fake OTS driver."""
    view = NetworkView()
    for sw in FakeInventory().switches.values():
        view.add_switch(sw)
    view.add_link(PacketLink(PortRef(0xA1, 3), PortRef(0xA1, 4)), 5.0)
    southbound = OpenFlowSouthbound()
    southbound.xcon_driver = FakeDriver(view)
    # plans and circuits run through a runner with threads for parallel steps (no eventlet hub here)
    runner = PlanRunner(LiveSouthbound(southbound, view), view, run_parallel=threaded)
    api = ControlApi(**{VIEW: view, SOUTHBOUND: southbound, RUNNER: runner})
    api.auth = BearerCheck(TOKEN)  # what start() loads from [controller] api_token_file
    return api


TOKEN = "t0ken-for-the-unit-tests-0123456789"


def call(api, method, path, body=None, token=TOKEN):
    raw = json.dumps(body).encode() if body is not None else b""
    path, _, query = path.partition("?")
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
           "CONTENT_LENGTH": str(len(raw)), "wsgi.input": io.BytesIO(raw)}
    if token is not None:
        env["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    seen = {}
    out = api.wsgi(env, lambda status, headers: seen.update(status=int(status.split()[0])))
    return seen["status"], json.loads(b"".join(out))


def test_switches_and_health(api):
    status, body = call(api, "GET", "/switches")
    assert status == 200 and [s["name"] for s in body] == ["A", "X"]
    assert body[1]["kind"] == "ots" and body[1]["of_version"] == "1.0"
    status, body = call(api, "GET", "/health")
    assert status == 200 and body["packet_switches"] == 1 and body["ots"] == 1


def test_health_lists_every_running_service(api):
    from app.controller.services import Scheduler, Service

    sch = Scheduler("app", print, [Service("poll", object, 1.0)], spawn=lambda *a: None, sleep=lambda s: None)
    sch.start()
    try:
        assert call(api, "GET", "/health")[1]["services"]["app.poll"]["runs"] == 0
    finally:
        sch.stop()
    assert "app.poll" not in call(api, "GET", "/health")[1]["services"]


def test_routes_and_validation(api):
    assert call(api, "GET", "/nope")[0] == 404
    assert call(api, "PUT", "/xcon")[0] == 405
    assert call(api, "POST", "/xcon", {"ots": "X", "in_port": "1", "out_port": 2})[0] == 400
    assert call(api, "POST", "/xcon", {"in_port": 1, "out_port": 2})[0] == 400
    assert call(api, "POST", "/xcon", {"ots": "Q", "in_port": 1, "out_port": 2})[0] == 404
    assert call(api, "GET", "/topology?sources=lldp,bogus")[0] == 400
    assert call(api, "GET", "/scan")[0] == 404  # no scan yet


def test_xcon_errors_become_422_with_openflow_error(api):
    status, body = call(api, "POST", "/xcon", {"ots": "X", "in_port": 1, "out_port": 9})
    assert status == 422 and body["errors"][0]["code_name"] == "OFPBAC_BAD_OUT_PORT"
    status, body = call(api, "POST", "/xcon", {"ots": "X", "in_port": 1, "out_port": 2})
    assert status == 200 and body["ok"]
    assert call(api, "GET", "/xcon")[1] == [{"ots": "X", "in_port": 1, "out_port": 2},
                                           {"ots": "X", "in_port": 2, "out_port": 1}]
    assert call(api, "DELETE", "/xcon", {"ots": "X", "in_port": 5})[0] == 404
    assert call(api, "DELETE", "/xcon", {"ots": "X", "in_port": 1})[0] == 200


def test_circuit_rolls_back_on_refusal(api):
    status, body = call(api, "POST", "/circuit", {"xcons": [{"ots": "X", "in_port": 1, "out_port": 2},
                                                            {"ots": "X", "in_port": 3, "out_port": 9}]})
    assert status == 422 and body["rolled_back"] == 1
    assert call(api, "GET", "/xcon")[1] == []


@pytest.mark.parametrize("parallel", [False, True])
def test_circuit_rolls_back_when_an_ots_does_not_answer(api, parallel):
    hops = [{"ots": "X", "in_port": 1, "out_port": 2}, {"ots": "X", "in_port": 3, "out_port": 8},
            {"ots": "X", "in_port": 5, "out_port": 6}]
    status, body = call(api, "POST", "/circuit", {"xcons": hops, "parallel": parallel})
    assert status == 504 and "BARRIER_REPLY" in body["error"] and not body["ok"]
    # the hop whose barrier timed out is in an unknown state: rolled back too, both directions
    assert body["unknown"] == [{"ots": "X", "in_port": 3, "out_port": 8}]
    assert body["rolled_back"] == (3 if parallel else 2)  # in parallel the third hop went in too
    assert {3, 8} <= set(api.driver.deleted)
    assert call(api, "GET", "/xcon")[1] == []


def test_timed_out_xcon_is_listed_as_unknown_and_deletable(api):
    status, body = call(api, "POST", "/xcon", {"ots": "X", "in_port": 3, "out_port": 8})
    assert status == 504
    assert call(api, "GET", "/xcon")[1] == [{"ots": "X", "in_port": 3, "out_port": 8, "state": "unknown"},
                                           {"ots": "X", "in_port": 8, "out_port": 3, "state": "unknown"}]
    assert call(api, "DELETE", "/xcon", {"ots": "X", "in_port": 3})[0] == 200  # not a 404: it may be there
    assert api.driver.deleted == [3, 8] and call(api, "GET", "/xcon")[1] == []


def test_circuit_delete_validates_hops(api):
    assert call(api, "DELETE", "/circuit", {"xcons": [{"in_port": 1}]})[0] == 400
    assert call(api, "DELETE", "/circuit", {"xcons": [3]})[0] == 400


def test_topology_is_graph_json_with_live_nodes(api):
    status, body = call(api, "GET", "/topology")
    assert status == 200
    ids = {n["id"] for n in body["nodes"]}
    assert {"A", "X", "X:1", "X:2"} <= ids
    assert any(link["kind"] == "xcon" for link in body["links"])


def test_names_and_links(api):
    assert call(api, "POST", "/names", {"names": {"0xa1": "Alpha"}})[0] == 200
    status, links = call(api, "GET", "/links")
    assert links[0]["src"]["node"] == "Alpha" and links[0]["last_seen"] == 5.0
    assert call(api, "POST", "/names", {"names": {"zz": "B"}})[0] == 400


def test_topology_has_learnt_hosts_and_names_them(api, monkeypatch):
    from app.controller.model import HostInfo
    from app.controller.runtime import SETTINGS

    monkeypatch.setattr(SETTINGS, "host_names", {})
    api.view.add_host(HostInfo("00:00:00:00:00:01", "10.0.0.1", PortRef(0xA1, 3)))
    api.view.remove_port_links(PortRef(0xA1, 3))  # A:3 is an edge port here
    status, body = call(api, "GET", "/topology")
    assert status == 200
    access = [link for link in body["links"] if link["kind"] == "access"]
    # FakeInventory's A:3 reports no speed: the [controller] access_default_mbps default
    assert [(a["u"], a["v"], a["capacity"]) for a in access] == [("A", "host-000000000001", 1000.0)]
    assert call(api, "GET", "/topology?sources=lldp,scan")[1]["links"] == [
        link for link in body["links"] if link["kind"] != "access"]  # without "hosts": no host edges
    assert call(api, "POST", "/names", {"names": {"00:00:00:00:00:01": "h1"}})[0] == 200
    assert {n["id"] for n in call(api, "GET", "/topology")[1]["nodes"] if n["kind"] == "host"} == {"h1"}
    assert call(api, "GET", "/hosts")[1][0]["id"] == "h1"
    assert call(api, "GET", "/events?type=names")[1][-1]["hosts"] == 1


def raw_call(api, method, path, raw: bytes, length: str | None = None):
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "",
           "CONTENT_LENGTH": str(len(raw)) if length is None else length, "wsgi.input": io.BytesIO(raw),
           "HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
    seen = {}
    out = api.wsgi(env, lambda status, headers: seen.update(status=int(status.split()[0])))
    return seen["status"], json.loads(b"".join(out))


@pytest.mark.parametrize("raw,length", [(b"{bad", None), (b"\xff\xfe\x00", None), (b"[1, 2]", None),
                                        (b'{"ots": "X"}', "abc")])
def test_malformed_bodies_are_400_with_a_reason(api, raw, length):
    status, body = raw_call(api, "POST", "/xcon", raw, length)
    assert status == 400 and body["error"]


@pytest.mark.parametrize("path,body", [
    ("/xcon", {"ots": "X", "in_port": -1, "out_port": 2}),
    ("/xcon", {"ots": "X", "in_port": 1, "out_port": 70000}),
    ("/xcon", {"ots": "X", "in_port": 0, "out_port": 2}),
    ("/circuit", {"xcons": [{"ots": "X", "in_port": 1, "out_port": 2}, {"ots": "X", "in_port": 65535, "out_port": 2}]}),
    ("/flowmod", {"ots": "X", "match": {"in_port": 1}, "out_port": -4}),
])
def test_out_of_range_ports_are_400_and_change_nothing(api, path, body):
    status, answer = call(api, "POST", path, body)
    assert status == 400 and "out of range" in answer["error"]
    assert call(api, "GET", "/xcon")[1] == []


def test_unknown_ots_is_404_everywhere(api):
    for method, path, body in (("POST", "/xcon", {"ots": "Q", "in_port": 1, "out_port": 2}),
                               ("DELETE", "/xcon", {"ots": "Q", "in_port": 1}),
                               ("POST", "/circuit", {"xcons": [{"ots": "Q", "in_port": 1, "out_port": 2}]}),
                               ("DELETE", "/circuit", {"xcons": [{"ots": "Q", "in_port": 1}]}),
                               ("POST", "/flowmod", {"ots": "Q", "match": {"in_port": 1}, "out_port": 2})):
        status, answer = call(api, method, path, body)
        assert status == 404 and "unknown switch" in answer["error"], (method, path, answer)


def test_circuit_delete_validates_every_hop_before_removing_any(api):
    assert call(api, "POST", "/xcon", {"ots": "X", "in_port": 1, "out_port": 2})[0] == 200
    status, _ = call(api, "DELETE", "/circuit", {"xcons": [{"ots": "X", "in_port": 1}, {"ots": "X", "in_port": "a"}]})
    assert status == 400 and api.driver.deleted == []


def test_bad_static_file_and_names_are_400(api, tmp_path):
    assert call(api, "POST", "/static", {"path": str(tmp_path)})[0] == 400  # a directory
    assert call(api, "POST", "/static", {"path": str(tmp_path / "none.yaml")})[0] == 400
    assert call(api, "POST", "/names", {"names": {"0xa1": ""}})[0] == 400
    assert call(api, "POST", "/names", {"names": ["A"]})[0] == 400


def test_reserved_ports_keep_default_forwarding_off_a_circuit():
    view = NetworkView()
    for sw in FakeInventory().switches.values():
        view.add_switch(sw)
    view.add_switch(SwitchInfo(0xC1, PACKET, 4, "C", {2: PortInfo(2, "C-eth2", "00:00:00:00:00:0c", True)}))
    link = PacketLink(PortRef(0xA1, 3), PortRef(0xC1, 2))
    view.add_link(link, 1.0)
    assert view.usable_links() == [link]
    assert view.reserve("plan:p1", [("A", 3), ("C", 2)]) is True
    assert view.usable_links() == [] and view.reserved_ports == {("A", 3), ("C", 2)}
    assert view.reserve("plan:p1", [("C", 2), ("A", 3)]) is False  # the same set: nothing to re-plan
    assert view.unreserve("plan:p1") is True and view.usable_links() == [link]


def test_circuit_is_a_plan_run_by_the_runner(api):
    """POST /circuit builds a plan and runs it through the plan runner: the plan log has it, roll-back
    included (the executor's, not a second engine)."""
    status, _ = call(api, "POST", "/circuit", {"xcons": [{"ots": "X", "in_port": 1, "out_port": 2}]})
    (rec,) = api.runner.log.items(1)
    assert status == 200 and rec["source"] == "circuit" and rec["kind"] == "circuit" and rec["state"] == "done"
    assert [s["kind"] for s in rec["steps"]] == ["xcon_add"] and rec["steps"][0]["target"] == "X:1<->2"
    call(api, "DELETE", "/xcon", {"ots": "X", "in_port": 1})
    status, body = call(api, "POST", "/circuit", {"xcons": [{"ots": "X", "in_port": 1, "out_port": 2},
                                                            {"ots": "X", "in_port": 3, "out_port": 9}]})
    (rec,) = api.runner.log.items(1)
    assert status == 422 and rec["state"] == "rolled_back" and rec["failed_step"] == "xcon+X:3-9"
    assert [s["target"] for s in rec["rollback"]] == ["X:1<->2"] and body["rolled_back"] == 1
    # a hop listed twice is a bad request, refused before anything is sent
    hop = {"ots": "X", "in_port": 1, "out_port": 2}
    assert call(api, "POST", "/circuit", {"xcons": [hop, hop]})[0] == 400


def test_constructing_the_api_reads_no_file(tmp_path, monkeypatch):
    """The state file (what the optical scan learnt) is restored by start(), not by the constructor."""
    from app.controller import state_file
    from app.controller.runtime import SETTINGS

    path = tmp_path / "state.json"
    state_file.save_attached(str(path), {(0xF01, 1): PortRef(0xA1, 3)}, {0xF01: "X", 0xA1: "A"}.__getitem__)
    monkeypatch.setitem(SETTINGS.controller, "state_file", str(path))
    monkeypatch.setattr(SETTINGS, "names", {0xF01: "X", 0xA1: "A"})
    view = NetworkView()
    a = ControlApi(**{VIEW: view, SOUTHBOUND: OpenFlowSouthbound(), RUNNER: PlanRunner(None, view)})
    assert view.scan_attached == {}
    a.restore()
    assert view.scan_attached == {(0xF01, 1): PortRef(0xA1, 3)}
