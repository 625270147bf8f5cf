"""sFlow v5 datagram decoder (sFlow.org "sFlow Version 5", XDR encoding, big-endian).

Decoded: the datagram header (IPv4/IPv6 agent), flow_sample (0:1) and expanded flow_sample (0:3)
with the raw packet header record (0:1), sampled IPv4 (0:3) / IPv6 (0:4) records and extended
switch data (0:1001); counter_sample (0:2) and expanded counter_sample (0:4) with generic
interface counters (0:1). Other sample and record formats are skipped using their length field,
as the spec intends. Every length is checked against the bytes that remain, so a malformed
datagram raises :class:`SflowDecodeError` (with a short machine-readable ``reason``) and never
anything else; :class:`SflowDecoder` turns those into per-reason counts.
"""
from __future__ import annotations

import logging
import socket
import struct
import threading
from collections import Counter

from monitor.sflow.packet import parse_header
from monitor.sflow.records import CounterSample, Datagram, FlowSample, IfCounters
from topology.flow import FiveTuple

log = logging.getLogger(__name__)

SFLOW_VERSION = 5
#: Largest datagram we accept; OVS and hsflowd stay under the 1400-byte default MTU.
MAX_DATAGRAM = 65535
#: A sane upper bound on the sample/record counts a datagram can announce (each needs ≥ 8 bytes).
MAX_ITEMS = MAX_DATAGRAM // 8

_U32 = struct.Struct("!I")
_HDR = struct.Struct("!II")  # format, length
_FLOW = struct.Struct("!IIIIIIII")  # seq, source_id, rate, pool, drops, input, output, nrecords
_FLOW_X = struct.Struct("!IIIIIIIIIII")  # seq, src type, src index, rate, pool, drops, in fmt/val, out fmt/val, n
_CNT = struct.Struct("!III")  # seq, source_id, nrecords
_CNT_X = struct.Struct("!IIII")  # seq, src type, src index, nrecords
_RAW = struct.Struct("!IIII")  # header_protocol, frame_length, stripped, header_length
_IFC = struct.Struct("!IIQIIQIIIIIIQIIIIII")  # generic interface counters, 88 bytes
_SAMPLED_V4 = struct.Struct("!II4s4sIIII")  # length, proto, src, dst, sport, dport, tcp_flags, tos
_SAMPLED_V6 = struct.Struct("!II16s16sIIII")
_EXT_SWITCH = struct.Struct("!IIII")


class SflowDecodeError(ValueError):
    """A datagram that is not valid sFlow v5; ``reason`` is a short key for statistics."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def _need(buf: bytes, off: int, n: int, end: int, what: str) -> None:
    if n < 0 or off + n > end:
        raise SflowDecodeError("truncated", f"{what} needs {n} bytes at offset {off}, {end - off} left")


def _decode_flow_records(buf: bytes, off: int, end: int, n: int) -> tuple[dict, int]:
    out: dict = {}
    skipped = 0
    if n > MAX_ITEMS:
        raise SflowDecodeError("bad_count", f"{n} flow records")
    for _ in range(n):
        _need(buf, off, 8, end, "flow record header")
        fmt, length = _HDR.unpack_from(buf, off)
        off += 8
        _need(buf, off, length, end, "flow record")
        rend = off + length
        if fmt == 1:  # raw packet header
            _need(buf, off, 16, rend, "raw packet header")
            proto, frame_length, stripped, hlen = _RAW.unpack_from(buf, off)
            _need(buf, off + 16, hlen, rend, "sampled header bytes")
            header = bytes(buf[off + 16 : off + 16 + hlen])
            key, smac, dmac, vlan = parse_header(proto, header)
            out.update(frame_length=frame_length, stripped=stripped, header=header, src_mac=smac,
                       dst_mac=dmac)
            if key is not None:
                out["key"] = key
            if vlan is not None:
                out.setdefault("vlan", vlan)
        elif fmt in (3, 4):  # sampled IPv4 / IPv6: a key only if the raw header gave none
            st = _SAMPLED_V4 if fmt == 3 else _SAMPLED_V6
            _need(buf, off, st.size, rend, "sampled ip record")
            length_ip, proto, src, dst, sport, dport, _flags, _tos = st.unpack_from(buf, off)
            if "key" not in out:
                fam = socket.AF_INET if fmt == 3 else socket.AF_INET6
                out["key"] = FiveTuple(socket.inet_ntop(fam, src), socket.inet_ntop(fam, dst), proto & 0xFF, sport & 0xFFFF,
                                       dport & 0xFFFF)
                out.setdefault("frame_length", length_ip)
        elif fmt == 1001:  # extended switch: the incoming VLAN
            _need(buf, off, 16, rend, "extended switch")
            out["vlan"] = _EXT_SWITCH.unpack_from(buf, off)[0]
        else:
            skipped += 1
        off = rend
    return out, skipped


def _decode_counter_records(buf: bytes, off: int, end: int, n: int) -> tuple[list[IfCounters], int]:
    ifs: list[IfCounters] = []
    skipped = 0
    if n > MAX_ITEMS:
        raise SflowDecodeError("bad_count", f"{n} counter records")
    for _ in range(n):
        _need(buf, off, 8, end, "counter record header")
        fmt, length = _HDR.unpack_from(buf, off)
        off += 8
        _need(buf, off, length, end, "counter record")
        if fmt == 1:
            _need(buf, off, _IFC.size, off + length, "generic interface counters")
            ifs.append(IfCounters(*_IFC.unpack_from(buf, off)))
        else:
            skipped += 1
        off += length
    return ifs, skipped


def decode_datagram(data: bytes) -> Datagram:
    """Decode one sFlow v5 datagram; raise :class:`SflowDecodeError` if it is malformed."""
    buf = bytes(data)
    end = len(buf)
    if end > MAX_DATAGRAM:
        raise SflowDecodeError("oversized", f"{end} bytes")
    _need(buf, 0, 8, end, "datagram header")
    version, atype = struct.unpack_from("!II", buf, 0)
    if version != SFLOW_VERSION:
        raise SflowDecodeError("bad_version", str(version))
    off = 8
    if atype == 1:
        _need(buf, off, 4, end, "agent address")
        agent = socket.inet_ntop(socket.AF_INET, buf[off : off + 4])
        off += 4
    elif atype == 2:
        _need(buf, off, 16, end, "agent address")
        agent = socket.inet_ntop(socket.AF_INET6, buf[off : off + 16])
        off += 16
    elif atype == 0:
        agent = ""
    else:
        raise SflowDecodeError("bad_address_type", str(atype))
    _need(buf, off, 16, end, "datagram header")
    sub_agent, seq, uptime, nsamples = struct.unpack_from("!IIII", buf, off)
    off += 16
    if nsamples > MAX_ITEMS or nsamples * 8 > end - off:
        raise SflowDecodeError("bad_count", f"{nsamples} samples in {end - off} bytes")
    flows: list[FlowSample] = []
    counters: list[CounterSample] = []
    skipped = 0
    for _ in range(nsamples):
        _need(buf, off, 8, end, "sample header")
        fmt, length = _HDR.unpack_from(buf, off)
        off += 8
        _need(buf, off, length, end, "sample")
        send = off + length
        enterprise, fmt = fmt >> 12, fmt & 0xFFF
        if enterprise != 0 or fmt not in (1, 2, 3, 4):
            skipped += 1
        elif fmt == 1:
            _need(buf, off, _FLOW.size, send, "flow_sample")
            sq, sid, rate, pool, drops, inp, outp, nrec = _FLOW.unpack_from(buf, off)
            rec, sk = _decode_flow_records(buf, off + _FLOW.size, send, nrec)
            skipped += sk
            flows.append(FlowSample(agent, sq, sid >> 24, sid & 0xFFFFFF, rate, pool, drops,
                                    inp & 0x3FFFFFFF, outp & 0x3FFFFFFF, **rec))
        elif fmt == 3:
            _need(buf, off, _FLOW_X.size, send, "expanded flow_sample")
            sq, stype, sidx, rate, pool, drops, _if, inp, _of, outp, nrec = _FLOW_X.unpack_from(buf, off)
            rec, sk = _decode_flow_records(buf, off + _FLOW_X.size, send, nrec)
            skipped += sk
            flows.append(FlowSample(agent, sq, stype, sidx, rate, pool, drops, inp, outp, **rec))
        elif fmt == 2:
            _need(buf, off, _CNT.size, send, "counter_sample")
            sq, sid, nrec = _CNT.unpack_from(buf, off)
            ifs, sk = _decode_counter_records(buf, off + _CNT.size, send, nrec)
            skipped += sk
            counters.append(CounterSample(agent, sq, sid >> 24, sid & 0xFFFFFF, tuple(ifs)))
        else:
            _need(buf, off, _CNT_X.size, send, "expanded counter_sample")
            sq, stype, sidx, nrec = _CNT_X.unpack_from(buf, off)
            ifs, sk = _decode_counter_records(buf, off + _CNT_X.size, send, nrec)
            skipped += sk
            counters.append(CounterSample(agent, sq, stype, sidx, tuple(ifs)))
        off = send
    return Datagram(agent, sub_agent, seq, uptime, tuple(flows), tuple(counters), skipped)


class SflowDecoder:
    """A decoder that never raises: it counts good datagrams and bad ones by reason (thread-safe)."""

    def __init__(self) -> None:
        self.decoded = 0
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()

    def decode(self, data: bytes) -> Datagram | None:
        try:
            dg = decode_datagram(data)
        except SflowDecodeError as exc:
            with self._lock:
                self.errors[exc.reason] += 1
            return None
        except Exception:  # a decoder bug must not stop the collector; it is logged and counted
            log.exception("sFlow decoder failed on a %d-byte datagram", len(data))
            with self._lock:
                self.errors["internal_error"] += 1
            return None
        with self._lock:
            self.decoded += 1
        return dg

    def stats(self) -> dict[str, object]:
        with self._lock:
            return {"decoded": self.decoded, "bad": sum(self.errors.values()), "bad_by_reason": dict(self.errors)}

