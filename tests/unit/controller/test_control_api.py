"""The control API's HTTP layer (routing, validation, status codes) over fake apps: no switch needed."""
from __future__ import annotations

import io
import json

import pytest

from app.controller.control_api import ControlApi
from app.controller.links import LinkTable
from app.controller.model import OTS, PACKET, PacketLink, PortInfo, PortRef, SwitchInfo
from app.controller.ots_driver import DriverError, XconResult


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
    def __init__(self):
        self.xcons: dict[int, dict[int, int]] = {}

    def resolve(self, ots):
        if ots != "X":
            raise DriverError(f"unknown switch {ots!r}", 404)
        return 0xF01

    def install(self, ots, a, b, bidirectional=True):
        self.resolve(ots)
        if b == 9:  # the fake OTS refuses port 9 like a real one: an OpenFlow error
            err = {"xid": 7, "type": 2, "code": 4, "type_name": "OFPET_BAD_ACTION", "code_name": "OFPBAC_BAD_OUT_PORT"}
            return XconResult(False, "X", [], [err], 1.0, None)
        if b == 8:  # the fake OTS stops answering: no barrier reply
            raise DriverError("no BARRIER_REPLY from 0000000000000f01 within 5.0s", 504)
        self.xcons.setdefault(0xF01, {})[a] = b
        return XconResult(True, "X", [{"in_port": a, "out_port": b, "ok": True}], [], 1.0, 1.2)

    def remove(self, ots, a, bidirectional=True):
        self.xcons[0xF01].pop(a)
        return XconResult(True, "X", [{"in_port": a, "deleted": True}], [], 1.0, 1.1)

    def active(self):
        return [{"ots": "X", "in_port": a, "out_port": b} for a, b in sorted(self.xcons.get(0xF01, {}).items())]


class FakeLldp:
    def __init__(self):
        self.table = LinkTable()
        self.table.seen(PacketLink(PortRef(0xA1, 3), PortRef(0xA1, 4)), 5.0)


class FakeForwarding:
    hosts: dict = {}


@pytest.fixture
def api():
    a = ControlApi()
    apps = {"mlte_inventory": FakeInventory(), "mlte_ots_driver": FakeDriver(), "mlte_lldp": FakeLldp(),
            "mlte_forwarding": FakeForwarding()}
    a.app = apps.__getitem__
    return a


def call(api, method, path, body=None):
    raw = json.dumps(body).encode() if body is not None else b""
    path, _, query = path.partition("?")
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
           "CONTENT_LENGTH": str(len(raw)), "wsgi.input": io.BytesIO(raw)}
    seen = {}
    out = api.wsgi(env, lambda status, headers: seen.update(status=int(status.split()[0])))
    return seen["status"], json.loads(b"".join(out))


def test_switches_and_health(api):
    status, body = call(api, "GET", "/switches")
    assert status == 200 and [s["name"] for s in body] == ["A", "X"]
    assert body[1]["kind"] == "ots" and body[1]["of_version"] == "1.0"
    status, body = call(api, "GET", "/health")
    assert status == 200 and body["packet_switches"] == 1 and body["ots"] == 1


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
    assert call(api, "GET", "/xcon")[1] == [{"ots": "X", "in_port": 1, "out_port": 2}]
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
    assert body["rolled_back"] == (2 if parallel else 1)  # in parallel the third hop went in too
    assert call(api, "GET", "/xcon")[1] == []


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
