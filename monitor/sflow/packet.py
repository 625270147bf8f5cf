"""Decode the sampled packet header (Ethernet / 802.1Q / IPv4 / IPv6 / TCP / UDP) into a 5-tuple.

Sampled headers are truncated (OVS sends the first ``header`` bytes, 128 by default), so every
read is bounds-checked and a header too short for the ports yields ports 0 rather than an error.
"""
from __future__ import annotations

import socket
import struct

from topology.flow import FiveTuple

ETH_IPV4 = 0x0800
ETH_IPV6 = 0x86DD
ETH_VLAN = (0x8100, 0x88A8, 0x9100)
#: IPv6 extension headers we skip to reach the transport header.
IPV6_EXT = {0, 43, 60}
IPV6_FRAG = 44
PORT_PROTOS = {6, 17, 132}  # TCP, UDP, SCTP: ports in the first 4 bytes

# sFlow header_protocol values (sFlow v5 spec, sampled_header)
HEADER_ETHERNET = 1
HEADER_IPV4 = 11
HEADER_IPV6 = 12


def mac_str(b: bytes) -> str:
    return b.hex(":")


def _ports(buf: bytes, off: int, proto: int) -> tuple[int, int]:
    if proto in PORT_PROTOS and off + 4 <= len(buf):
        sport, dport = struct.unpack_from("!HH", buf, off)
        return sport, dport
    return 0, 0


def parse_ipv4(buf: bytes, off: int = 0) -> FiveTuple | None:
    if off + 20 > len(buf) or buf[off] >> 4 != 4:
        return None
    ihl = (buf[off] & 0x0F) * 4
    if ihl < 20:
        return None
    frag = struct.unpack_from("!H", buf, off + 6)[0] & 0x1FFF
    proto = buf[off + 9]
    src = socket.inet_ntop(socket.AF_INET, buf[off + 12 : off + 16])
    dst = socket.inet_ntop(socket.AF_INET, buf[off + 16 : off + 20])
    sport, dport = (0, 0) if frag else _ports(buf, off + ihl, proto)
    return FiveTuple(src, dst, proto, sport, dport)


def parse_ipv6(buf: bytes, off: int = 0) -> FiveTuple | None:
    if off + 40 > len(buf) or buf[off] >> 4 != 6:
        return None
    nxt = buf[off + 6]
    src = socket.inet_ntop(socket.AF_INET6, buf[off + 8 : off + 24])
    dst = socket.inet_ntop(socket.AF_INET6, buf[off + 24 : off + 40])
    p = off + 40
    for _ in range(8):  # bounded walk over extension headers
        if nxt in IPV6_EXT:
            if p + 2 > len(buf):
                return FiveTuple(src, dst, nxt, 0, 0)
            nxt, p = buf[p], p + (buf[p + 1] + 1) * 8
        elif nxt == IPV6_FRAG:
            if p + 8 > len(buf):
                return FiveTuple(src, dst, nxt, 0, 0)
            offset = struct.unpack_from("!H", buf, p + 2)[0] >> 3
            nxt, p = buf[p], p + 8
            if offset:
                return FiveTuple(src, dst, nxt, 0, 0)
        else:
            break
    sport, dport = _ports(buf, p, nxt)
    return FiveTuple(src, dst, nxt, sport, dport)


def parse_header(protocol: int, buf: bytes) -> tuple[FiveTuple | None, str, str, int | None]:
    """Return ``(key, src_mac, dst_mac, vlan)`` from a sampled header; ``key`` is None for non-IP."""
    if protocol == HEADER_IPV4:
        return parse_ipv4(buf), "", "", None
    if protocol == HEADER_IPV6:
        return parse_ipv6(buf), "", "", None
    if protocol != HEADER_ETHERNET or len(buf) < 14:
        return None, "", "", None
    dst_mac, src_mac = mac_str(buf[0:6]), mac_str(buf[6:12])
    ethertype = struct.unpack_from("!H", buf, 12)[0]
    off, vlan = 14, None
    while ethertype in ETH_VLAN and off + 4 <= len(buf):  # 802.1Q / QinQ: keep the outer VLAN id
        tci, ethertype = struct.unpack_from("!HH", buf, off)
        if vlan is None:
            vlan = tci & 0x0FFF
        off += 4
    if ethertype == ETH_IPV4:
        return parse_ipv4(buf, off), src_mac, dst_mac, vlan
    if ethertype == ETH_IPV6:
        return parse_ipv6(buf, off), src_mac, dst_mac, vlan
    return None, src_mac, dst_mac, vlan
