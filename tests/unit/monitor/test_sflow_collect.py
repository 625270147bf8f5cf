"""Collector over real UDP on 127.0.0.1, rate estimation, OVSDB commands, sFlow-RT backend."""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from monitor.drops import OvsShapedQueue, parse_tc_qdisc_json
from monitor.ovsdb_sflow import OvsSflow, bridges_by_dpid
from monitor.sflow import FlowRateEstimator, SflowCollector
from monitor.sflow.encoder import (
    EncCounters,
    EncFlow,
    build_frame,
    encode_counter_sample,
    encode_datagram,
    encode_flow_sample,
)
from monitor.sflow.records import FlowSample
from monitor.sflow.sflow_rt import SflowRtBackend, SflowRtError, parse_key
from topology.flow import FiveTuple

K1 = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 5001)
K2 = FiveTuple("10.0.0.2", "10.0.0.4", 17, 1234, 9)


def fs(key, agent="192.0.2.1", idx=1, rate=100, length=1500):
    return FlowSample(agent, 1, 0, idx, rate, 0, 0, 1, 2, frame_length=length, key=key)


def test_estimator_rate_window_and_max_over_points():
    est = FlowRateEstimator(window=2.0)
    for i in range(10):  # 10 samples × 1500 B × 100 in 2 s = 750 kB/s = 6 Mbit/s
        est.add(fs(K1), now=10.0 + i * 0.2)
        est.add(fs(K1, agent="192.0.2.2"), now=10.0 + i * 0.2)  # same flow seen at a 2nd switch
    est.add(fs(K2, rate=10, length=100), now=11.0)
    est.add(fs(None), now=11.0)  # non-IP: ignored
    r = est.rates(now=11.9)
    assert [x.key for x in r] == [K1, K2]
    assert r[0].mbps == pytest.approx(6.0) and r[0].samples == 10 and len(r[0].points) == 2
    assert r[1].bytes_per_s == pytest.approx(500.0)
    assert est.rates(now=11.9, agents={"192.0.2.9"}) == []
    assert est.rates(now=20.0) == []  # all expired


def test_estimator_warm_up_after_mark_start():
    est = FlowRateEstimator(window=1.0)
    est.mark_start("192.0.2.1", 10.0)
    for i in range(5):  # 0.5 s of samples since sampling started: 5 × 150 kB
        est.add(fs(K1), now=10.05 + i * 0.1)
    (r,) = est.rates(now=10.5)
    assert r.bytes_per_s == pytest.approx(5 * 150_000 / 0.5)
    (r,) = est.rates(now=10.9)  # 0.9 s since start, same samples in the window
    assert r.bytes_per_s == pytest.approx(5 * 150_000 / 0.9)
    est.add(fs(K1), now=12.0)
    (r,) = est.rates(now=12.0)  # a full window later: plain window
    assert r.bytes_per_s == pytest.approx(150_000 / 1.0)


def test_collector_over_udp_counts_good_and_bad():
    frames = [encode_flow_sample(EncFlow(build_frame(K1, 1000), sampling_rate=50, sequence=i)) for i in range(5)]
    good = encode_datagram(frames + [encode_counter_sample(EncCounters(if_index=7, out_discards=9))])
    with SflowCollector(port=0, window=10.0) as col:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for data in (good, b"garbage", good[:40], good):
            s.sendto(data, ("127.0.0.1", col.port))
        deadline = time.monotonic() + 5
        while col.decoder.stats()["decoded"] + col.decoder.stats()["bad"] < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        st = col.stats()
        assert st["decoded"] == 2 and st["bad"] == 2 and st["flow_samples"] == 10
        assert st["agents"] == ["192.0.2.1"]
        (rate,) = col.flow_rates()
        assert rate.key == K1 and rate.bytes_per_s == pytest.approx(10 * 1058 * 50 / 10.0)
        assert col.counters()[("192.0.2.1", 7)][1].out_discards == 9
        s.close()


def test_ovsdb_sflow_commands_and_status_parsing():
    calls = []

    def fake(args):
        calls.append(list(args))
        if args[:2] == ["get", "bridge"]:
            return "5f0c8c2e-0000-4000-8000-000000000001\n"
        if "list" in args:
            return json.dumps({"headings": [], "data": [["127.0.0.1:6343", 64, 1, 128, ["set", []]]]})
        return ""

    ctl = OvsSflow("127.0.0.1:6343", sampling=64, polling=1, runner=fake)
    ctl.enable("s1")
    assert calls[0] == ["--", "--id=@sf", "create", "sflow", 'targets="127.0.0.1:6343"', "sampling=64", "polling=1",
                        "header=128", "--", "set", "bridge", "s1", "sflow=@sf"]
    cfg = ctl.status("s1")
    assert cfg.targets == ("127.0.0.1:6343",) and cfg.sampling == 64 and cfg.agent == ""
    ctl.disable("s1")
    assert calls[-1] == ["clear", "bridge", "s1", "sflow"]
    assert OvsSflow("x", runner=lambda a: "[]\n").status("s1") is None
    with pytest.raises(ValueError):
        OvsSflow("x", sampling=0)


def test_shaped_queue_commands_and_tc_parse():
    vs, cmd = [], []
    q = OvsShapedQueue(vsctl=lambda a: vs.append(list(a)) or json.dumps({"data": [[["uuid", "u1"]]]}),
                       cmd=lambda a: cmd.append(list(a)) or json.dumps(
                           [{"kind": "htb", "handle": "1:", "drops": 5},
                            {"kind": "pfifo", "handle": "10:", "packets": 7, "bytes": 700, "drops": 42}]))
    q.apply("p1", max_rate=4_000_000, limit=16)
    assert "type=linux-htb" in vs[0] and "other-config:max-rate=4000000" in vs[0]
    assert cmd[0] == ["tc", "qdisc", "replace", "dev", "p1", "parent", "1:1", "handle", "10:", "pfifo", "limit", "16"]
    assert q.tc_drops("p1").dropped == 42
    q.remove("p1")
    assert ["--if-exists", "destroy", "qos", "u1"] in vs and ["--if-exists", "destroy", "queue", "u1"] in vs
    assert parse_tc_qdisc_json("not json") == []


class _FakeRt(BaseHTTPRequestHandler):
    flows: dict = {}

    def log_message(self, *a):
        pass

    def _reply(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):
        n = int(self.headers["Content-Length"])
        _FakeRt.flows[self.path] = json.loads(self.rfile.read(n))
        self._reply({})

    def do_DELETE(self):
        _FakeRt.flows.pop(self.path, None)
        self._reply({})

    def do_GET(self):
        _FakeRt.last_get = self.path
        self._reply([{"key": "10.0.0.1,10.0.0.3,6,40000,5001", "value": 125000.0, "agent": "10.0.0.250",
                      "dataSource": "3"}, {"key": "bad", "value": 1}])


def test_sflow_rt_backend_against_fake_server():
    srv = HTTPServer(("127.0.0.1", 0), _FakeRt)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        rt = SflowRtBackend(f"http://127.0.0.1:{srv.server_port}")
        rt.define()
        assert _FakeRt.flows["/flow/mlte5tuple/json"]["value"] == "bytes"
        (r,) = rt.flow_rates(agents={"10.0.0.250"})
        assert r.key == K1 and r.mbps == pytest.approx(1.0) and r.points == (("10.0.0.250", 3),)
        assert _FakeRt.last_get.startswith("/activeflows/10.0.0.250/mlte5tuple/json?") and "aggMode=max" in _FakeRt.last_get
        rt.remove()
        assert "/flow/mlte5tuple/json" not in _FakeRt.flows
    finally:
        srv.shutdown()
        srv.server_close()
    with pytest.raises(SflowRtError):
        SflowRtBackend(f"http://127.0.0.1:{srv.server_port}", timeout=0.5).flow_rates()
    assert parse_key("a,b,x,1,2") is None


def test_bridges_by_dpid_prefers_the_connected_bridge_of_a_shared_datapath_id():
    """A killed lab left e0A behind with A's datapath id: sFlow went to it, and no sample named the
    elephant that crossed the live b1A (test_monitor_fig2 failed in CI that way)."""
    bridges = {"data": [["e0A", "00000000000000a1", ["uuid", "c-stale"]],
                        ["b1A", "00000000000000a1", ["set", [["uuid", "c-dead"], ["uuid", "c-live"]]]],
                        ["b1B", "00000000000000b1", ["uuid", "c-b"]],
                        ["a1B", "00000000000000b1", ["set", []]],
                        ["x9", "", ["set", []]]]}
    controllers = {"data": [[["uuid", "c-stale"], False], [["uuid", "c-dead"], False], [["uuid", "c-live"], True],
                            [["uuid", "c-b"], False]]}

    def fake(args):
        return json.dumps(bridges if "bridge" in args else controllers)

    assert bridges_by_dpid(fake) == {0xA1: "b1A", 0xB1: "a1B"}  # none connected: the first name
    controllers["data"][3][1] = True
    assert bridges_by_dpid(fake) == {0xA1: "b1A", 0xB1: "b1B"}
