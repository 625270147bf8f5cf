"""OpenFlow 1.0 wire helpers for the agent: framing, the switch-side encoders os-ken lacks, decoders.

os-ken's v1.0 parser is written for controllers: it serialises controller->switch messages and parses
switch->controller ones. The agent is a switch upstream, so it needs the reverse for a few messages
(FEATURES_REPLY, PORT_STATUS, STATS_REPLY, ...). Those are packed here with os-ken's own pack strings,
so tests can check them by parsing them back with os-ken's parser (an independent implementation).
Downstream (agent -> OVS) the agent is a controller and uses os-ken's classes directly.
"""
from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from os_ken.ofproto import ofproto_parser
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

#: Bytes of the offending message echoed in an ERROR (the OF1.0 spec asks for at least 64).
ERROR_DATA_LEN = 64
#: Largest OpenFlow message; multipart replies are split below this.
MAX_MSG_LEN = 0xFFFF


class FakeDatapath:
    """Just enough of os-ken's ``Datapath`` for its parser/serialiser (no connection, no event loop)."""

    ofproto = ofp
    ofproto_parser = parser

    def __init__(self, dpid: int | None = None) -> None:
        self.id = dpid


DP = FakeDatapath()


class FramingError(Exception):
    """The byte stream cannot be split into OpenFlow messages any more (a length field < 8, or one that
    contradicts its message type, a foreign version byte, a message that never completes).

    OpenFlow has no resynchronisation marker, so the session must end. ``err_type``/``code`` and
    ``data`` (the offending bytes, at most :data:`ERROR_DATA_LEN`) are for the OFPT_ERROR sent first;
    ``xid`` is the offending header's (0 if fewer than 8 bytes of it arrived).
    """

    def __init__(self, reason: str, err_type: int = ofp.OFPET_BAD_REQUEST, code: int = ofp.OFPBRC_BAD_LEN,
                 data: bytes = b"", xid: int = 0) -> None:
        super().__init__(reason)
        self.err_type, self.code, self.data, self.xid = err_type, code, bytes(data[:ERROR_DATA_LEN]), xid


@dataclass(frozen=True)
class Header:
    version: int
    msg_type: int
    length: int
    xid: int


def parse_header(buf: bytes) -> Header:
    version, msg_type, length, xid = struct.unpack_from(ofp.OFP_HEADER_PACK_STR, buf, 0)
    return Header(version, msg_type, length, xid)


class MessageReader:
    """Split a TCP byte stream into whole OpenFlow messages (any version).

    ``check_header`` (e.g. :func:`check_request_header`) is called once per message as soon as its
    8-byte header is in, before waiting for the body, with the header and the bytes buffered from
    its start; ``check_message`` once the whole message is in. Either raises :class:`FramingError`.
    :attr:`partial_since` tells when the first byte of a message still incomplete arrived, so the
    caller can give up on a stream that stalls mid-message.
    """

    def __init__(self, check_header: Callable[[Header, bytes], None] | None = None,
                 check_message: Callable[[bytes], None] | None = None) -> None:
        self._buf = bytearray()
        self._check_header, self._check_message = check_header, check_message
        self._checked = False  # the header at the head of the buffer has been checked
        self.partial_since: float | None = None  # time.monotonic() of the incomplete message's first byte

    @property
    def partial(self) -> bytes:
        """The buffered bytes of the message not yet complete."""
        return bytes(self._buf)

    def feed(self, data: bytes) -> Iterator[bytes]:
        if data and not self._buf:
            self.partial_since = time.monotonic()
        self._buf += data
        while len(self._buf) >= ofp.OFP_HEADER_SIZE:
            h = parse_header(self._buf)
            if h.length < ofp.OFP_HEADER_SIZE:
                raise FramingError(f"OpenFlow length field {h.length} < 8", data=self._buf[:ofp.OFP_HEADER_SIZE],
                                   xid=h.xid)
            if not self._checked and self._check_header is not None:
                self._check_header(h, bytes(self._buf[:min(h.length, ERROR_DATA_LEN)]))
            self._checked = True
            if len(self._buf) < h.length:
                return
            msg = bytes(self._buf[:h.length])
            del self._buf[:h.length]
            self._checked = False
            self.partial_since = time.monotonic() if self._buf else None
            if self._check_message is not None:
                self._check_message(msg)
            yield msg


#: Exact lengths of the fixed-size controller-to-switch messages of OpenFlow 1.0.
REQUEST_LEN = {
    ofp.OFPT_FEATURES_REQUEST: ofp.OFP_HEADER_SIZE,
    ofp.OFPT_GET_CONFIG_REQUEST: ofp.OFP_HEADER_SIZE,
    ofp.OFPT_BARRIER_REQUEST: ofp.OFP_HEADER_SIZE,
    ofp.OFPT_SET_CONFIG: ofp.OFP_SWITCH_CONFIG_SIZE,
    ofp.OFPT_PORT_MOD: ofp.OFP_PORT_MOD_SIZE,
    ofp.OFPT_QUEUE_GET_CONFIG_REQUEST: ofp.OFP_QUEUE_GET_CONFIG_REQUEST_SIZE,
}
#: Minimum lengths of the variable-size ones (a FLOW_MOD also needs whole 8-byte action slots).
REQUEST_MIN_LEN = {
    ofp.OFPT_ERROR: ofp.OFP_ERROR_MSG_SIZE,
    ofp.OFPT_VENDOR: ofp.OFP_VENDOR_HEADER_SIZE,
    ofp.OFPT_FLOW_MOD: ofp.OFP_FLOW_MOD_SIZE,
    ofp.OFPT_STATS_REQUEST: ofp.OFP_STATS_MSG_SIZE,
    ofp.OFPT_PACKET_OUT: ofp.OFP_PACKET_OUT_SIZE,
}
#: Exact lengths of STATS_REQUESTs by stats type (VENDOR: at least this).
STATS_REQUEST_LEN = {
    ofp.OFPST_DESC: ofp.OFP_STATS_MSG_SIZE,
    ofp.OFPST_FLOW: ofp.OFP_FLOW_STATS_REQUEST_SIZE,
    ofp.OFPST_AGGREGATE: ofp.OFP_FLOW_STATS_REQUEST_SIZE,
    ofp.OFPST_TABLE: ofp.OFP_STATS_MSG_SIZE,
    ofp.OFPST_PORT: ofp.OFP_PORT_STATS_REQUEST_SIZE,
    ofp.OFPST_QUEUE: ofp.OFP_STATS_MSG_SIZE + ofp.OFP_QUEUE_STATS_REQUEST_SIZE,
    ofp.OFPST_VENDOR: ofp.OFP_VENDOR_STATS_MSG_SIZE,
}


def check_request_header(h: Header, head: bytes) -> None:
    """The switch's framing rules for what a controller sends (docs/ots.md, "Broken byte streams").

    A HELLO may carry any version (negotiation; a version below 1.0 is refused after it is read).
    Any other message must be version 1.0: after the HELLOs a foreign version byte means the stream
    is out of step (OVS closes the session too). A length that contradicts the message type's size
    means the sender's framing and ours disagree, so every later message would be misread.
    """
    if h.msg_type == ofp.OFPT_HELLO:
        return
    if h.version != ofp.OFP_VERSION:
        raise FramingError(f"OpenFlow version {h.version} in a message of type {h.msg_type} (1.0 only)",
                           ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VERSION, head, h.xid)
    fixed, least = REQUEST_LEN.get(h.msg_type), REQUEST_MIN_LEN.get(h.msg_type, ofp.OFP_HEADER_SIZE)
    if fixed is not None and h.length != fixed:
        raise FramingError(f"message type {h.msg_type} has length {h.length}, must be {fixed}", data=head, xid=h.xid)
    if h.length < least:
        raise FramingError(f"message type {h.msg_type} has length {h.length}, needs {least}", data=head, xid=h.xid)
    if h.msg_type == ofp.OFPT_FLOW_MOD and (h.length - ofp.OFP_FLOW_MOD_SIZE) % 8:
        raise FramingError(f"FLOW_MOD length {h.length} leaves a partial 8-byte action slot", data=head, xid=h.xid)


def check_request(msg: bytes) -> None:
    """Whole-message framing rules: a STATS_REQUEST's length must match its stats type's body."""
    h = parse_header(msg)
    if h.msg_type != ofp.OFPT_STATS_REQUEST or h.version != ofp.OFP_VERSION:
        return
    stats_type = struct.unpack_from("!H", msg, ofp.OFP_HEADER_SIZE)[0]
    want = STATS_REQUEST_LEN.get(stats_type)
    if want is None:
        return  # unknown stats type: answered with BAD_STAT, the length cannot be judged
    if h.length < want or (h.length != want and stats_type != ofp.OFPST_VENDOR):
        raise FramingError(f"STATS_REQUEST type {stats_type} has length {h.length}, must be {want}",
                           data=msg, xid=h.xid)


def header(msg_type: int, length: int, xid: int, version: int = ofp.OFP_VERSION) -> bytes:
    return struct.pack(ofp.OFP_HEADER_PACK_STR, version, msg_type, length, xid)


def message(msg_type: int, xid: int, body: bytes = b"") -> bytes:
    """An OF1.0 message of ``msg_type`` with ``body`` after the 8-byte header."""
    return header(msg_type, ofp.OFP_HEADER_SIZE + len(body), xid) + body


def serialize(msg: Any, xid: int | None = None) -> bytes:
    """Serialise an os-ken message object (controller->switch direction) with ``xid``."""
    if xid is not None:
        msg.xid = xid
    msg.serialize()
    return bytes(msg.buf)


def parse(buf: bytes) -> Any:
    """Parse a message os-ken knows how to parse; None for types it has no parser for."""
    h = parse_header(buf)
    if h.version != ofp.OFP_VERSION or h.msg_type not in parser._MSG_PARSERS:
        return None
    return ofproto_parser.msg(DP, h.version, h.msg_type, h.length, h.xid, buf)


# --- switch -> controller encoders -------------------------------------------------------------


@dataclass
class PhyPort:
    """ofp_phy_port: one port as the controller sees it."""

    port_no: int
    hw_addr: bytes
    name: str
    config: int = 0
    state: int = 0
    curr: int = 0
    advertised: int = 0
    supported: int = 0
    peer: int = 0

    def pack(self) -> bytes:
        return struct.pack(
            ofp.OFP_PHY_PORT_PACK_STR, self.port_no, self.hw_addr, self.name.encode()[:15],
            self.config, self.state, self.curr, self.advertised, self.supported, self.peer,
        )


def hello(xid: int) -> bytes:
    return message(ofp.OFPT_HELLO, xid)


def error(xid: int, err_type: int, code: int, offending: bytes) -> bytes:
    """OFPT_ERROR carrying the first 64 bytes of the offending message (same xid)."""
    return message(ofp.OFPT_ERROR, xid, struct.pack(ofp.OFP_ERROR_MSG_PACK_STR, err_type, code)
                   + bytes(offending[:ERROR_DATA_LEN]))


def echo_reply(xid: int, data: bytes) -> bytes:
    return message(ofp.OFPT_ECHO_REPLY, xid, data)


def barrier_reply(xid: int) -> bytes:
    return message(ofp.OFPT_BARRIER_REPLY, xid)


def get_config_reply(xid: int, flags: int, miss_send_len: int) -> bytes:
    return message(ofp.OFPT_GET_CONFIG_REPLY, xid, struct.pack(ofp.OFP_SWITCH_CONFIG_PACK_STR, flags, miss_send_len))


def features_reply(xid: int, dpid: int, ports: list[PhyPort], n_tables: int = 1,
                   capabilities: int = ofp.OFPC_FLOW_STATS | ofp.OFPC_TABLE_STATS | ofp.OFPC_PORT_STATS,
                   actions: int = 1 << ofp.OFPAT_OUTPUT) -> bytes:
    body = struct.pack(ofp.OFP_SWITCH_FEATURES_PACK_STR, dpid, 0, n_tables, capabilities, actions)
    return message(ofp.OFPT_FEATURES_REPLY, xid, body + b"".join(p.pack() for p in ports))


def port_status(reason: int, port: PhyPort, xid: int = 0) -> bytes:
    return message(ofp.OFPT_PORT_STATUS, xid, struct.pack("!B7x", reason) + port.pack())


def vendor(xid: int, vendor_id: int, data: bytes) -> bytes:
    return message(ofp.OFPT_VENDOR, xid, struct.pack(ofp.OFP_VENDOR_HEADER_PACK_STR, vendor_id) + data)


def queue_get_config_reply(xid: int, port_no: int) -> bytes:
    """No queues: an OTS port is one container, there is nothing to schedule."""
    return message(ofp.OFPT_QUEUE_GET_CONFIG_REPLY, xid, struct.pack(ofp.OFP_QUEUE_GET_CONFIG_REPLY_PACK_STR, port_no))


def stats_replies(xid: int, stats_type: int, entries: list[bytes]) -> list[bytes]:
    """One or more STATS_REPLY messages carrying ``entries``; all but the last flagged REPLY_MORE."""
    room = MAX_MSG_LEN - ofp.OFP_STATS_MSG_SIZE
    chunks: list[list[bytes]] = [[]]
    size = 0
    for entry in entries:
        if chunks[-1] and size + len(entry) > room:
            chunks.append([])
            size = 0
        chunks[-1].append(entry)
        size += len(entry)
    out = []
    for i, chunk in enumerate(chunks):
        flags = ofp.OFPSF_REPLY_MORE if i < len(chunks) - 1 else 0
        out.append(message(ofp.OFPT_STATS_REPLY, xid, struct.pack(ofp.OFP_STATS_MSG_PACK_STR, stats_type, flags)
                           + b"".join(chunk)))
    return out


def _cstr(text: str, size: int) -> bytes:
    return text.encode()[: size - 1]


def desc_stats(mfr: str, hw: str, sw: str, serial: str, dp: str) -> bytes:
    n, s = ofp.DESC_STR_LEN, ofp.SERIAL_NUM_LEN
    return struct.pack(ofp.OFP_DESC_STATS_PACK_STR, _cstr(mfr, n), _cstr(hw, n), _cstr(sw, n),
                       _cstr(serial, s), _cstr(dp, n))


def match_in_port(in_port: int) -> bytes:
    """An ofp_match with only ``in_port`` set."""
    buf = bytearray(ofp.OFP_MATCH_SIZE)
    parser.OFPMatch(in_port=in_port).serialize(buf, 0)
    return bytes(buf)


def action_output(port: int, max_len: int = 0) -> bytes:
    return struct.pack(ofp.OFP_ACTION_OUTPUT_PACK_STR, ofp.OFPAT_OUTPUT, ofp.OFP_ACTION_OUTPUT_SIZE, port, max_len)


def flow_stats(in_port: int, out_port: int, duration: float, priority: int, cookie: int,
               packets: int, bytes_: int, table_id: int = 0) -> bytes:
    sec = int(duration)
    nsec = int((duration - sec) * 1e9)
    actions = action_output(out_port)
    length = ofp.OFP_FLOW_STATS_SIZE + len(actions)
    return (struct.pack(ofp.OFP_FLOW_STATS_0_PACK_STR, length, table_id) + match_in_port(in_port)
            + struct.pack(ofp.OFP_FLOW_STATS_1_PACK_STR, sec, nsec, priority, 0, 0, cookie, packets, bytes_)
            + actions)


def aggregate_stats(packets: int, bytes_: int, flows: int) -> bytes:
    return struct.pack(ofp.OFP_AGGREGATE_STATS_REPLY_PACK_STR, packets, bytes_, flows)


def table_stats(table_id: int, name: str, max_entries: int, active: int, lookups: int, matched: int) -> bytes:
    wildcards = ofp.OFPFW_ALL & ~ofp.OFPFW_IN_PORT
    return struct.pack(ofp.OFP_TABLE_STATS_PACK_STR, table_id, _cstr(name, ofp.OFP_MAX_TABLE_NAME_LEN),
                       wildcards, max_entries, active, lookups, matched)


def port_stats(port_no: int, counters: dict[str, int]) -> bytes:
    """ofp_port_stats; ``counters`` uses os-ken's OFPPortStats field names (missing = 0)."""
    names = parser.OFPPortStats._fields[1:]
    return struct.pack(ofp.OFP_PORT_STATS_PACK_STR, port_no, *(int(counters.get(n, 0)) for n in names))


def flow_removed(in_port: int, cookie: int, priority: int, reason: int, duration: float,
                 packets: int, bytes_: int) -> bytes:
    sec = int(duration)
    nsec = int((duration - sec) * 1e9)
    return message(ofp.OFPT_FLOW_REMOVED, 0, match_in_port(in_port) + struct.pack(
        ofp.OFP_FLOW_REMOVED_PACK_STR0, cookie, priority, reason, sec, nsec, 0, packets, bytes_))


# --- controller -> switch decoders (types os-ken does not parse) -------------------------------


class DecodeError(ValueError):
    """A controller message is too short or inconsistent; answered with BAD_REQUEST/BAD_LEN."""


@dataclass(frozen=True)
class StatsRequest:
    stats_type: int
    flags: int
    match: Any = None  # OFPMatch for FLOW/AGGREGATE
    table_id: int = 0xFF
    out_port: int = ofp.OFPP_NONE
    port_no: int = ofp.OFPP_NONE  # PORT / QUEUE
    queue_id: int = 0xFFFFFFFF
    vendor_id: int = 0


def _need(buf: bytes, size: int, what: str) -> None:
    if len(buf) < size:
        raise DecodeError(f"{what}: {len(buf)} bytes, need {size}")


def decode_stats_request(buf: bytes) -> StatsRequest:
    _need(buf, ofp.OFP_STATS_MSG_SIZE, "STATS_REQUEST")
    stype, flags = struct.unpack_from(ofp.OFP_STATS_MSG_PACK_STR, buf, ofp.OFP_HEADER_SIZE)
    off = ofp.OFP_STATS_MSG_SIZE
    if stype in (ofp.OFPST_FLOW, ofp.OFPST_AGGREGATE):
        _need(buf, ofp.OFP_FLOW_STATS_REQUEST_SIZE, "FLOW_STATS_REQUEST")
        match = parser.OFPMatch.parse(buf, off)
        table_id, out_port = struct.unpack_from(ofp.OFP_FLOW_STATS_REQUEST_ID_PORT_STR, buf, off + ofp.OFP_MATCH_SIZE)
        return StatsRequest(stype, flags, match=match, table_id=table_id, out_port=out_port)
    if stype == ofp.OFPST_PORT:
        _need(buf, ofp.OFP_PORT_STATS_REQUEST_SIZE, "PORT_STATS_REQUEST")
        (port_no,) = struct.unpack_from(ofp.OFP_PORT_STATS_REQUEST_PACK_STR, buf, off)
        return StatsRequest(stype, flags, port_no=port_no)
    if stype == ofp.OFPST_QUEUE:
        _need(buf, off + ofp.OFP_QUEUE_STATS_REQUEST_SIZE, "QUEUE_STATS_REQUEST")
        port_no, queue_id = struct.unpack_from(ofp.OFP_QUEUE_STATS_REQUEST_PACK_STR, buf, off)
        return StatsRequest(stype, flags, port_no=port_no, queue_id=queue_id)
    if stype == ofp.OFPST_VENDOR:
        _need(buf, ofp.OFP_VENDOR_STATS_MSG_SIZE, "VENDOR_STATS_REQUEST")
        (vid,) = struct.unpack_from(ofp.OFP_VENDOR_STATS_MSG_PACK_STR, buf, off)
        return StatsRequest(stype, flags, vendor_id=vid)
    return StatsRequest(stype, flags)


def decode_set_config(buf: bytes) -> tuple[int, int]:
    _need(buf, ofp.OFP_SWITCH_CONFIG_SIZE, "SET_CONFIG")
    return struct.unpack_from(ofp.OFP_SWITCH_CONFIG_PACK_STR, buf, ofp.OFP_HEADER_SIZE)


def decode_queue_get_config_request(buf: bytes) -> int:
    _need(buf, ofp.OFP_QUEUE_GET_CONFIG_REQUEST_SIZE, "QUEUE_GET_CONFIG_REQUEST")
    return struct.unpack_from(ofp.OFP_QUEUE_GET_CONFIG_REQUEST_PACK_STR, buf, ofp.OFP_HEADER_SIZE)[0]


def decode_vendor(buf: bytes) -> tuple[int, bytes]:
    _need(buf, ofp.OFP_VENDOR_HEADER_SIZE, "VENDOR")
    (vid,) = struct.unpack_from(ofp.OFP_VENDOR_HEADER_PACK_STR, buf, ofp.OFP_HEADER_SIZE)
    return vid, bytes(buf[ofp.OFP_VENDOR_HEADER_SIZE:])


@dataclass(frozen=True)
class RawAction:
    """One action as sent: type, length and (for OUTPUT) the port; anything else is rejected anyway."""

    type: int
    length: int
    port: int | None = None


@dataclass(frozen=True)
class FlowMod:
    """A decoded OF1.0 FLOW_MOD; ``match`` is os-ken's OFPMatch (its ``wildcards`` as sent)."""

    xid: int
    match: Any
    cookie: int
    command: int
    idle_timeout: int
    hard_timeout: int
    priority: int
    buffer_id: int
    out_port: int
    flags: int
    actions: tuple[RawAction, ...]


class BadActionLength(DecodeError):
    """An action header has an impossible length (answered with BAD_ACTION/BAD_LEN)."""


def decode_flow_mod(buf: bytes) -> FlowMod:
    """Decode a FLOW_MOD. Actions are walked here (not by os-ken, whose parser asserts on unknown
    action types and trusts the length fields), so any byte string decodes or raises DecodeError."""
    _need(buf, ofp.OFP_FLOW_MOD_SIZE, "FLOW_MOD")
    h = parse_header(buf)
    end = min(h.length, len(buf))
    match = parser.OFPMatch.parse(buf, ofp.OFP_HEADER_SIZE)
    (cookie, command, idle, hard, priority, buffer_id, out_port, flags) = struct.unpack_from(
        ofp.OFP_FLOW_MOD_PACK_STR0, buf, ofp.OFP_HEADER_SIZE + ofp.OFP_MATCH_SIZE)
    actions: list[RawAction] = []
    off = ofp.OFP_FLOW_MOD_SIZE
    while off < end:
        if end - off < ofp.OFP_ACTION_HEADER_SIZE:
            raise BadActionLength(f"FLOW_MOD: {end - off} trailing bytes after the actions")
        a_type, a_len = struct.unpack_from("!HH", buf, off)
        if a_len < ofp.OFP_ACTION_HEADER_SIZE or a_len % 8 or off + a_len > end:
            raise BadActionLength(f"FLOW_MOD: action type {a_type} has bad length {a_len}")
        port = None
        if a_type == ofp.OFPAT_OUTPUT and a_len == ofp.OFP_ACTION_OUTPUT_SIZE:
            port = struct.unpack_from("!H", buf, off + 4)[0]
        actions.append(RawAction(a_type, a_len, port))
        off += a_len
    return FlowMod(h.xid, match, cookie, command, idle, hard, priority, buffer_id, out_port, flags, tuple(actions))
