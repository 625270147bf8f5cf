"""The controller's send path over a real TLS session, against the fake switch of the TLS benchmark.

os-ken's send loop as the controller patches it (``compat.patch_send_coalescing``) writes a queued
FLOW_MOD + BARRIER over TLS (the controller's :class:`TlsChannel` and server context, ``mlte pki
init``'s certificates) or plain TCP, then closes its side for writing (the closing message); the fake switch (``tests/lib/of13_switch.py``) must receive both, in order, in one read
(one TLS record), and answer the barrier with its xid. The fake switch's replies must parse with
os-ken's OpenFlow 1.3 parser, or the benchmark would not measure a controller that took it as a switch.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from types import SimpleNamespace

import pytest
from os_ken.ofproto import ofproto_parser, ofproto_v1_3, ofproto_v1_3_parser

from app import pki
from app.controller.compat import patch_os_ken, server_context
from app.controller.tls_channel import TlsChannel
from tests.lib import of13_switch as fake

DP = SimpleNamespace(ofproto=ofproto_v1_3, ofproto_parser=ofproto_v1_3_parser, id=None)


def parse(raw: bytes):
    version, typ, length, xid = ofproto_parser.header(raw)
    return ofproto_parser.msg(DP, version, typ, length, xid, raw[:length])


def test_fake_switch_replies_parse_as_openflow_1_3():
    features = parse(fake.replies(fake.FEATURES_REQUEST, 7, b"", 0xA1, [1, 2]))
    assert isinstance(features, ofproto_v1_3_parser.OFPSwitchFeatures)
    assert (features.xid, features.datapath_id, features.n_tables) == (7, 0xA1, 254)
    desc = parse(fake.replies(fake.MULTIPART_REQUEST, 8, struct.pack("!HH4x", fake.MP_PORT_DESC, 0), 0xA1, [1, 3]))
    assert isinstance(desc, ofproto_v1_3_parser.OFPPortDescStatsReply)
    assert [p.port_no for p in desc.body] == [1, 3]
    assert desc.body[1].name == b"sa1-eth3" and desc.body[1].state == ofproto_v1_3.OFPPS_LIVE
    barrier = parse(fake.replies(fake.BARRIER_REQUEST, 9, b"", 0xA1, []))
    assert isinstance(barrier, ofproto_v1_3_parser.OFPBarrierReply) and barrier.xid == 9
    echo = parse(fake.replies(fake.ECHO_REQUEST, 10, b"ping", 0xA1, []))
    assert isinstance(echo, ofproto_v1_3_parser.OFPEchoReply) and echo.data == b"ping"
    flow_stats = parse(fake.replies(fake.MULTIPART_REQUEST, 11, struct.pack("!HH4x", 1, 0), 0xA1, [1]))
    assert isinstance(flow_stats, ofproto_v1_3_parser.OFPFlowStatsReply) and flow_stats.body == []
    assert fake.replies(14, 12, b"", 0xA1, []) == b""  # a FLOW_MOD is taken silently


def _read_message(sock) -> bytes:
    buf = b""
    while len(buf) < 8 or len(buf) < struct.unpack_from("!H", buf, 2)[0]:
        chunk = sock.recv(4096)
        assert chunk, "the switch hung up"
        buf += chunk
    return buf


@pytest.mark.parametrize("tls", [True, False], ids=["tls", "plain"])
def test_a_burst_leaves_the_send_loop_in_one_write_and_the_barrier_is_answered(tmp_path, tls):
    import os_ken.base.app_manager  # noqa: F401 - before os_ken.controller.controller (circular import)
    from os_ken.controller import controller as osc
    from os_ken.lib import hub

    patch_os_ken()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    ctx = client = None
    if tls:
        pki.init(tmp_path / "pki")
        d = tmp_path / "pki"
        ctx = server_context(str(d / "ca-cert.pem"), str(d / "controller-cert.pem"), str(d / "controller-key.pem"))
        client = fake.client_context(d)
    accepted: list = []

    def accept() -> None:
        sock, _ = listener.accept()
        accepted.append(TlsChannel(sock, ctx, threading.Lock()) if ctx else sock)  # as the controller's listener

    t = threading.Thread(target=accept)
    t.start()
    switch = fake.FakeSwitch(listener.getsockname(), 0xA1, tls=client)
    try:
        t.join(timeout=10)
        server = accepted[0]
        server.settimeout(10)
        hello = _read_message(server)
        assert hello[1] == fake.HELLO
        flow_mod = fake.message(14, 41, bytes(40))
        barrier = fake.message(fake.BARRIER_REQUEST, 42)
        dp = object.__new__(osc.Datapath)  # os-ken's Datapath, only its (patched) send loop
        dp.socket, dp.address, dp.state = server, ("127.0.0.1", 0), None
        dp.send_q = hub.Queue(16)
        dp._send_q_sem = hub.BoundedSemaphore(16)
        for buf, close in ((flow_mod, False), (barrier, True)):  # close after the barrier: the loop returns
            dp._send_q_sem.acquire()
            dp.send_q.put((buf, close))
        dp._send_loop()
        reply = _read_message(server)
        assert reply[:8] == fake.message(fake.BARRIER_REPLY, 42)  # the barrier's xid back
        deadline = time.monotonic() + 5
        while not switch.barriers and time.monotonic() < deadline:  # noted just after the reply went out
            time.sleep(0.01)
        received, reads = switch.counts()
        assert (received[14], received[fake.BARRIER_REQUEST]) == (1, 1)
        assert reads == 1  # FLOW_MOD and BARRIER in one write: one TLS record, one read at the switch
        assert switch.barriers and switch.barriers[0][0] <= switch.barriers[0][1]
    finally:
        switch.close()
        listener.close()
        for s in accepted:
            s.close()


def test_the_fake_switch_command_refuses_a_bad_dpid(capsys):
    assert fake.main(["--connect", "127.0.0.1:1", "--dpid", "xyz"]) == 2
    assert "of13_switch: error:" in capsys.readouterr().err
