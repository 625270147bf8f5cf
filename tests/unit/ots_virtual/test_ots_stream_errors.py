"""Broken byte streams from the controller end the session with an ERROR, as OVS does; then the agent
reconnects with its backoff and serves a clean session (docs/ots.md, "Broken byte streams").

OpenFlow frames messages only by their length field, so once a length or version is wrong every
later message would be misread: keepalives kept succeeding while FLOW_MODs were parsed from the
middle of other messages. Driven by the foreign OF1.0 test controller; no OVS.
"""
from __future__ import annotations

import random
import struct
import time

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual import of10
from ots_virtual.agent import OtsAgent
from tests.lib.of10_client import Of10Controller, Received, error_of, xcon

PORTS = {1: "ODU2", 2: "ODU2", 3: "ODU2", 4: "ODU2"}
DELAY = 0.2
READ_TIMEOUT = 1.0


@pytest.fixture
def agent(start_agent):
    return start_agent("ut-stream", 0x0F03, PORTS, delay=lambda: DELAY, read_timeout=READ_TIMEOUT)


def barrier_bytes(xid: int) -> bytes:
    return of10.serialize(parser.OFPBarrierRequest(of10.DP), xid)


def errors(ctl: Of10Controller, start: int) -> list[Received]:
    return [r for r in ctl.received[start:] if r.header.msg_type == ofp.OFPT_ERROR]


def send_broken(ctl: Of10Controller, data: bytes) -> tuple[int, float]:
    """Send ``data`` in one write (the agent may close while it is still arriving); (mark, send time)."""
    start = ctl.mark()
    sent = time.monotonic()
    try:
        ctl.send_raw(data)
    except OSError:  # reset by the agent before the whole write went out: it has already seen enough
        pass
    return start, sent


def closed_with(ctl: Of10Controller, agent: OtsAgent, start: int, expected: tuple[int, int]) -> Received:
    """The session ends; its last message is the ERROR ``expected`` (type, code); nothing comes after it."""
    ended = ctl.wait_session_end(1)
    errs = errors(ctl, start)
    assert errs, "no ERROR before the close"
    last = errs[-1]
    assert error_of(last)[:2] == expected
    assert last.at <= ended
    assert ctl.received[-1] is last or all(r.at >= ended for r in ctl.received[ctl.received.index(last) + 1:])
    assert agent.stream_errors == 1
    return last


def serves_a_clean_session(ctl: Of10Controller, kept: tuple[tuple[int, int], ...] = ()) -> None:
    """The agent re-dials and a normal two-way XCON + barrier works on the new session (next to the
    XCONs ``kept`` from before)."""
    deadline = time.monotonic() + 10
    while ctl.connections < 2:
        assert time.monotonic() < deadline, "agent did not reconnect"
        time.sleep(0.02)
    ctl.wait_connected()
    start = ctl.mark()
    ctl.send(xcon(1, 2))
    ctl.send(xcon(2, 1))
    sent = time.monotonic()
    reply = ctl.barrier()
    assert reply.at - sent >= DELAY * 0.9
    assert errors(ctl, start) == []
    lit = {s.desc.port_no for s in ctl.port_statuses(start) if not s.desc.config & ofp.OFPPC_PORT_DOWN}
    assert lit == {1, 2}
    flows = ctl.stats(parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE))
    assert sorted((s.match.in_port, s.actions[0].port) for s in flows) == sorted([(1, 2), (2, 1), *kept])
    assert ctl.connections == 2


def test_half_a_header_then_a_full_message_stalls_and_is_closed_after_the_read_timeout(ctl, agent):
    """The half header and the message's first half make one FLOW_MOD shifted by 4 bytes (its
    actions end in garbage: BAD_ACTION/BAD_LEN); the message's last 4 bytes then wait for a body that
    never comes, so after ``read_timeout`` the session ends with BAD_REQUEST/BAD_LEN."""
    full = of10.serialize(xcon(1, 2), 0x1234)
    start, sent = send_broken(ctl, full[:4] + full)
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN))
    assert error_of(last)[2] == full[-4:]  # the bytes that never became a message
    assert READ_TIMEOUT <= ctl.session_ends[0] - sent < READ_TIMEOUT + 1.0
    first = errors(ctl, start)[0]
    assert error_of(first)[:2] == (ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_LEN)
    assert first.header.xid == struct.unpack("!I", full[:4])[0]  # the shifted "xid" is the real header
    serves_a_clean_session(ctl)


def test_half_a_header_then_more_traffic_is_caught_at_the_next_header(ctl, agent):
    """Same, but the controller goes on (a barrier): the misaligned "header" (the FLOW_MOD's last 4
    bytes and the barrier's first 4) has length 0."""
    full = of10.serialize(xcon(1, 2), 0x1234)
    start, sent = send_broken(ctl, full[:4] + full + barrier_bytes(0x99))
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN))
    assert error_of(last)[2] == full[-4:] + barrier_bytes(0x99)[:4]
    assert ctl.session_ends[0] - sent < READ_TIMEOUT  # no need to wait for a stall
    assert not ctl.replies(0x99)  # the barrier was never seen as one
    serves_a_clean_session(ctl)


def test_a_fixed_size_message_announcing_more_bytes_is_refused_at_its_header(ctl, agent):
    """A BARRIER_REQUEST with length 16, then a FLOW_MOD and a barrier: BAD_LEN, nothing applied."""
    bad = struct.pack(ofp.OFP_HEADER_PACK_STR, 1, ofp.OFPT_BARRIER_REQUEST, 16, 0x77)
    start, _ = send_broken(ctl, bad + of10.serialize(xcon(1, 2), 0x78) + barrier_bytes(0x79))
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN))
    assert last.header.xid == 0x77 and error_of(last)[2][:8] == bad
    assert not ctl.replies(0x78) and not ctl.replies(0x79)
    assert agent.wait_idle() and len(agent.table) == 0  # the FLOW_MOD after the break was never read
    serves_a_clean_session(ctl)


def test_a_variable_size_message_announcing_more_bytes_swallows_the_next_header(ctl, agent):
    """An ECHO_REQUEST claiming 20 bytes carries 12: it swallows the FLOW_MOD's header, whose match then
    comes up as the next "header" (version 0): BAD_VERSION and the session ends; no XCON appears."""
    echo = struct.pack(ofp.OFP_HEADER_PACK_STR, 1, ofp.OFPT_ECHO_REQUEST, 20, 0x55) + b"ping"
    fm = of10.serialize(xcon(1, 2), 0x56)
    start, _ = send_broken(ctl, echo + fm + barrier_bytes(0x57))
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VERSION))
    assert error_of(last)[2] == fm[8:8 + 64]
    echo_reply = ctl.reply(0x55)
    assert echo_reply.header.msg_type == ofp.OFPT_ECHO_REPLY and echo_reply.raw[8:] == b"ping" + fm[:8]
    assert agent.wait_idle() and len(agent.table) == 0
    serves_a_clean_session(ctl)


@pytest.mark.parametrize("length", [0, 4, 7])
def test_a_length_field_below_8_is_refused(ctl, agent, length):
    bad = struct.pack(ofp.OFP_HEADER_PACK_STR, 1, ofp.OFPT_ECHO_REQUEST, length, 0x42)
    start, _ = send_broken(ctl, bad + barrier_bytes(0x43))
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN))
    assert last.header.xid == 0x42 and error_of(last)[2] == bad
    assert not ctl.replies(0x43)
    serves_a_clean_session(ctl)


def test_64k_of_random_bytes_end_the_session_once(ctl, agent):
    """Whatever the first "header" is, the session ends with one BAD_REQUEST error; the XCON sent
    before the garbage in the same write was accepted and survives into the next session."""
    junk = random.Random(20261125).randbytes(65536)
    start, _ = send_broken(ctl, of10.serialize(xcon(3, 4), 0x31) + junk)
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VERSION))
    assert error_of(last)[2] == junk[:64]
    assert len(errors(ctl, start)) == 1
    assert agent.wait_idle()
    serves_a_clean_session(ctl, kept=((3, 4),))


@pytest.mark.parametrize("version", [0, 2, 4, 0x81])
def test_a_wrong_version_byte_is_refused_and_the_session_closed(ctl, agent, version):
    raw = bytearray(of10.serialize(xcon(1, 2), 0x61))
    raw[0] = version
    start, _ = send_broken(ctl, bytes(raw) + barrier_bytes(0x62))
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VERSION))
    assert last.header.xid == 0x61 and error_of(last)[2] == bytes(raw[:64])
    assert not ctl.replies(0x62)
    serves_a_clean_session(ctl)


def test_an_echo_request_of_another_version_is_refused_too(ctl, agent):
    """Stricter than OVS (which answers HELLO/ECHO/ERROR of any version it knows): after the HELLOs
    only 1.0 is spoken, and a foreign version byte is taken as a stream out of step."""
    raw = struct.pack(ofp.OFP_HEADER_PACK_STR, 4, ofp.OFPT_ECHO_REQUEST, 8, 80)
    start, _ = send_broken(ctl, raw)
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VERSION))
    assert last.header.xid == 80 and error_of(last)[2] == raw
    serves_a_clean_session(ctl)


@pytest.mark.parametrize("raw", [
    of10.message(ofp.OFPT_FLOW_MOD, 78, b"\x00" * 20),  # truncated FLOW_MOD
    of10.message(ofp.OFPT_FLOW_MOD, 78, b"\x00" * 68),  # a partial 8-byte action slot
    of10.message(ofp.OFPT_STATS_REQUEST, 78, b"\x00"),  # no stats type
    of10.message(ofp.OFPT_STATS_REQUEST, 78, struct.pack("!HH", ofp.OFPST_DESC, 0) + b"\x00" * 8),  # DESC + junk
    of10.message(ofp.OFPT_SET_CONFIG, 78, b"\x00" * 2),
    of10.message(ofp.OFPT_VENDOR, 78, b"\x00" * 2),
], ids=["flow-mod-28", "flow-mod-76", "stats-9", "desc-stats-20", "set-config-10", "vendor-10"])
def test_a_length_that_contradicts_the_message_type_is_a_framing_error(ctl, agent, raw):
    start, _ = send_broken(ctl, raw)
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN))
    assert last.header.xid == 78 and error_of(last)[2] == raw[:64]
    serves_a_clean_session(ctl)


def test_a_message_that_never_completes_is_dropped_after_the_read_timeout(ctl, agent):
    """A FLOW_MOD header announcing 80 bytes, 40 sent, then silence: no blocking forever."""
    fm = of10.serialize(xcon(1, 2), 0x71)
    start, sent = send_broken(ctl, fm[:40])
    last = closed_with(ctl, agent, start, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN))
    # the error carries the stuck bytes; an ECHO_REPLY the controller sent during the stall (the agent's
    # keepalive) may follow them in the buffer, so the data starts with the 40 bytes sent
    assert last.header.xid == 0x71 and error_of(last)[2].startswith(fm[:40])
    assert READ_TIMEOUT <= ctl.session_ends[0] - sent < READ_TIMEOUT + 1.0
    serves_a_clean_session(ctl)


def test_a_stall_is_caught_even_while_the_controller_answers_keepalives(ctl):
    """The controller answers ECHO_REQUESTs while a message of its own is stuck half-sent: its
    echo replies fill the hole and misalign the stream; the session still ends with an ERROR."""
    agent = OtsAgent("ut-stream", 0x0F03, PORTS, ctl.address, delay=lambda: DELAY, claim=False, ovs_wait=0,
                     read_timeout=READ_TIMEOUT, echo_interval=0.2, echo_timeout=5.0)
    agent.start()
    try:
        ctl.wait_connected()
        start, sent = send_broken(ctl, of10.serialize(xcon(1, 2), 0x72)[:40])
        ended = ctl.wait_session_end(1)
        assert ended - sent < READ_TIMEOUT + 1.0
        # the FLOW_MOD completed with echo-reply bytes as its actions (a content error), then the
        # rest of an echo reply came up as a header: the session ends on that
        *_, err = errors(ctl, start)
        assert err.at <= ended and error_of(err)[0] == ofp.OFPET_BAD_REQUEST
        assert agent.stream_errors == 1 and agent.keepalive_drops == 0
        serves_a_clean_session(ctl)
    finally:
        agent.stop()


def test_read_timeout_must_be_positive():
    with pytest.raises(ValueError):
        OtsAgent("b", 1, PORTS, ("127.0.0.1", 9), read_timeout=0, claim=False)


def os_ken_requests() -> list:
    """One of every controller-to-switch message os-ken's OF1.0 parser serialises."""
    dp, match = of10.DP, parser.OFPMatch()
    vendor = parser.OFPVendor(dp)
    vendor.vendor, vendor.data = 0x2320, b""
    return [
        parser.OFPHello(dp), parser.OFPEchoRequest(dp, b"abc"), parser.OFPEchoReply(dp, b""),
        parser.OFPFeaturesRequest(dp), parser.OFPGetConfigRequest(dp), parser.OFPSetConfig(dp, 0, 128),
        xcon(1, 2), parser.OFPFlowMod(dp, parser.OFPMatch(in_port=1), command=ofp.OFPFC_DELETE),
        parser.OFPPortMod(dp, 1, "00:00:00:00:00:01", 0, 0, 0), parser.OFPBarrierRequest(dp),
        parser.OFPQueueGetConfigRequest(dp, 1), parser.OFPDescStatsRequest(dp, 0),
        parser.OFPFlowStatsRequest(dp, 0, match, 0xFF, ofp.OFPP_NONE),
        parser.OFPAggregateStatsRequest(dp, 0, match, 0xFF, ofp.OFPP_NONE), parser.OFPTableStatsRequest(dp, 0),
        parser.OFPPortStatsRequest(dp, 0, ofp.OFPP_NONE), parser.OFPQueueStatsRequest(dp, 0, ofp.OFPP_ALL, ofp.OFPQ_ALL),
        parser.OFPVendorStatsRequest(dp, 0, 0x2320, b"abcd"), vendor,
        parser.OFPPacketOut(dp, 0xFFFFFFFF, ofp.OFPP_NONE, [parser.OFPActionOutput(1, 0)], b"x" * 60),
    ]


def test_every_request_os_ken_serialises_passes_the_framing_rules():
    """The rules must never drop a well-formed controller: os-ken's own encodings all pass, sent
    one by one and as one stream split at every byte."""
    raws = [of10.serialize(m, i) for i, m in enumerate(os_ken_requests(), 1)]
    for raw in raws:
        assert list(of10.MessageReader(of10.check_request_header, of10.check_request).feed(raw)) == [raw]
    stream = b"".join(raws)
    reader = of10.MessageReader(of10.check_request_header, of10.check_request)
    out = [m for i in range(len(stream)) for m in reader.feed(stream[i:i + 1])]
    assert out == raws and reader.partial == b"" and reader.partial_since is None


def test_reader_tracks_when_the_incomplete_message_began():
    fm = of10.serialize(xcon(1, 2), 5)
    reader = of10.MessageReader(of10.check_request_header, of10.check_request)
    assert list(reader.feed(fm[:10])) == [] and reader.partial == fm[:10]
    began = reader.partial_since
    assert began is not None
    time.sleep(0.01)
    assert list(reader.feed(fm[10:20])) == [] and reader.partial_since == began  # the same message
    assert list(reader.feed(fm[20:] + fm[:3])) == [fm]
    assert reader.partial == fm[:3] and reader.partial_since is not None and reader.partial_since > began
