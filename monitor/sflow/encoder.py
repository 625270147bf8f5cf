"""sFlow v5 encoder: builds datagrams byte by byte from the spec.

Used by the tests (exact round trips, mutated-datagram fuzzing), the decoder benchmark and the
``mlte monitor sflow-send`` helper; it is independent of the decoder so each checks the other.
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from topology.flow import FiveTuple


def _pad(b: bytes) -> bytes:
    return b + b"\0" * (-len(b) % 4)


def _rec(fmt: int, body: bytes) -> bytes:
    return struct.pack("!II", fmt, len(body)) + body


def build_frame(key: FiveTuple, payload_len: int = 0, vlan: int | None = None,
                src_mac: bytes = b"\x02\0\0\0\0\x01", dst_mac: bytes = b"\x02\0\0\0\0\x02") -> bytes:
    """An Ethernet frame (optionally 802.1Q-tagged) carrying IPv4/IPv6 + TCP/UDP for ``key``."""
    v6 = ":" in key.src
    if key.proto == 6:
        l4 = struct.pack("!HHIIBBHHH", key.sport, key.dport, 1, 0, 5 << 4, 0x18, 65535, 0, 0)
    elif key.proto == 17:
        l4 = struct.pack("!HHHH", key.sport, key.dport, 8 + payload_len, 0)
    else:
        l4 = b""
    body = l4 + b"\0" * payload_len
    if v6:
        ip = struct.pack("!IHBB", 6 << 28, len(body), key.proto, 64)
        ip += ipaddress.IPv6Address(key.src).packed + ipaddress.IPv6Address(key.dst).packed
        ethertype = 0x86DD
    else:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), 1, 0, 64, key.proto, 0,
                         ipaddress.IPv4Address(key.src).packed, ipaddress.IPv4Address(key.dst).packed)
        ethertype = 0x0800
    eth = dst_mac + src_mac
    if vlan is not None:
        eth += struct.pack("!HH", 0x8100, vlan & 0x0FFF)
    return eth + struct.pack("!H", ethertype) + ip + body


@dataclass
class EncFlow:
    """What to put in one flow sample."""

    frame: bytes
    sampling_rate: int = 64
    input_if: int = 1
    output_if: int = 2
    source_index: int = 1
    sequence: int = 1
    frame_length: int | None = None  # default: len(frame) + 4 (FCS)
    header_bytes: int = 128
    expanded: bool = False


@dataclass
class EncCounters:
    """One generic interface counter record (values default to small distinct numbers)."""

    if_index: int = 1
    if_speed: int = 10_000_000
    in_octets: int = 1000
    in_discards: int = 0
    out_octets: int = 2000
    out_discards: int = 0
    out_errors: int = 0
    sequence: int = 1
    expanded: bool = False


def encode_flow_sample(f: EncFlow) -> bytes:
    hdr = f.frame[: f.header_bytes]
    flen = f.frame_length if f.frame_length is not None else len(f.frame) + 4
    raw = struct.pack("!IIII", 1, flen, 4, len(hdr)) + _pad(hdr)
    records = _rec(1, raw)
    pool = f.sequence * f.sampling_rate
    if f.expanded:
        body = struct.pack("!IIIIIIIIIII", f.sequence, 0, f.source_index, f.sampling_rate, pool, 0,
                           0, f.input_if, 0, f.output_if, 1)
        return _rec(3, body + records)
    body = struct.pack("!IIIIIIII", f.sequence, f.source_index & 0xFFFFFF, f.sampling_rate, pool, 0,
                       f.input_if, f.output_if, 1)
    return _rec(1, body + records)


def encode_counter_sample(c: EncCounters) -> bytes:
    ifc = struct.pack("!IIQIIQIIIIIIQIIIIII", c.if_index, 6, c.if_speed, 1, 3, c.in_octets, 10, 0, 1,
                      c.in_discards, 0, 0, c.out_octets, 20, 0, 2, c.out_discards, c.out_errors, 2)
    records = _rec(1, ifc)
    if c.expanded:
        return _rec(4, struct.pack("!IIII", c.sequence, 0, c.if_index, 1) + records)
    return _rec(2, struct.pack("!III", c.sequence, c.if_index & 0xFFFFFF, 1) + records)


def encode_datagram(samples: list[bytes], agent: str = "192.0.2.1", sequence: int = 1,
                    uptime_ms: int = 1000, sub_agent: int = 0) -> bytes:
    """A datagram carrying already-encoded samples (from the ``encode_*_sample`` functions)."""
    addr = ipaddress.ip_address(agent)
    atype = 1 if addr.version == 4 else 2
    head = struct.pack("!II", 5, atype) + addr.packed
    head += struct.pack("!IIII", sub_agent, sequence, uptime_ms, len(samples))
    return head + b"".join(samples)
