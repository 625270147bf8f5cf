"""sFlow v5 decoder: exact decoding of datagrams built by our own encoder, and fuzzing."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.sflow import SflowDecodeError, SflowDecoder, decode_datagram
from monitor.sflow.encoder import (
    EncCounters,
    EncFlow,
    build_frame,
    encode_counter_sample,
    encode_datagram,
    encode_flow_sample,
)
from topology.flow import FiveTuple

TCP = FiveTuple("10.0.0.1", "10.0.0.3", 6, 40000, 5001)
UDP6 = FiveTuple("2001:db8::1", "2001:db8::2", 17, 1234, 53)


def _sample_datagram() -> bytes:
    return encode_datagram(
        [
            encode_flow_sample(EncFlow(build_frame(TCP, 1400), sampling_rate=64, input_if=5, output_if=7,
                                       source_index=5, sequence=9)),
            encode_flow_sample(EncFlow(build_frame(UDP6, 100, vlan=42), sampling_rate=10, expanded=True,
                                       source_index=70000, input_if=3, output_if=4)),
            encode_counter_sample(EncCounters(if_index=5, in_octets=123456789012, out_discards=17,
                                              out_errors=3)),
            encode_counter_sample(EncCounters(if_index=6, expanded=True, in_discards=4)),
        ],
        agent="192.0.2.10", sequence=77, uptime_ms=4242, sub_agent=2,
    )


def test_exact_decode_of_flow_and_counter_samples():
    dg = decode_datagram(_sample_datagram())
    assert (dg.agent, dg.sub_agent, dg.sequence, dg.uptime_ms) == ("192.0.2.10", 2, 77, 4242)
    f1, f2 = dg.flow_samples
    assert f1.key == TCP
    assert (f1.sampling_rate, f1.input_if, f1.output_if, f1.source_id_index, f1.sequence) == (64, 5, 7, 5, 9)
    assert f1.frame_length == 14 + 20 + 20 + 1400 + 4
    assert len(f1.header) == 128 and f1.vlan is None
    assert f1.src_mac == "02:00:00:00:00:01" and f1.dst_mac == "02:00:00:00:00:02"
    assert f2.key == UDP6 and f2.vlan == 42 and f2.sampling_rate == 10
    assert f2.source_id_index == 70000 and (f2.input_if, f2.output_if) == (3, 4)
    c1, c2 = dg.counter_samples
    assert c1.source_id_index == 5
    (ifc,) = c1.interfaces
    assert (ifc.if_index, ifc.in_octets, ifc.out_discards, ifc.out_errors) == (5, 123456789012, 17, 3)
    assert ifc.if_speed == 10_000_000
    assert c2.interfaces[0].in_discards == 4 and c2.source_id_index == 6
    assert dg.skipped == 0


def test_ipv6_agent_and_unknown_formats_are_skipped_by_length():
    unknown_sample = struct.pack("!II", (9 << 12) | 1, 8) + b"\x01" * 8  # enterprise 9: skipped
    flow = encode_flow_sample(EncFlow(build_frame(TCP)))
    dg = decode_datagram(encode_datagram([unknown_sample, flow], agent="2001:db8::9"))
    assert dg.agent == "2001:db8::9" and dg.skipped == 1 and dg.flow_samples[0].key == TCP


def test_fragment_and_icmp_have_zero_ports():
    icmp = FiveTuple("10.1.1.1", "10.1.1.2", 1)
    dg = decode_datagram(encode_datagram([encode_flow_sample(EncFlow(build_frame(icmp, 56)))]))
    assert dg.flow_samples[0].key == icmp
    frame = bytearray(build_frame(TCP, 10))
    frame[14 + 6] = 0x00
    frame[14 + 7] = 0x10  # fragment offset 16: no transport header in this fragment
    dg = decode_datagram(encode_datagram([encode_flow_sample(EncFlow(bytes(frame)))]))
    assert dg.flow_samples[0].key == FiveTuple(TCP.src, TCP.dst, 6, 0, 0)


def test_short_header_gives_key_without_ports():
    dg = decode_datagram(encode_datagram([encode_flow_sample(EncFlow(build_frame(TCP), header_bytes=36))]))
    assert dg.flow_samples[0].key == FiveTuple(TCP.src, TCP.dst, 6, 0, 0)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated"),
        (struct.pack("!II", 4, 1) + b"\0" * 20, "bad_version"),
        (struct.pack("!II", 5, 7) + b"\0" * 20, "bad_address_type"),
        (struct.pack("!II4sIIII", 5, 1, b"\0" * 4, 0, 0, 0, 1_000_000), "bad_count"),
        (b"\0" * 70000, "oversized"),
    ],
)
def test_bad_datagrams_raise_with_reason(data, reason):
    with pytest.raises(SflowDecodeError) as info:
        decode_datagram(data)
    assert info.value.reason == reason


def test_every_truncation_is_rejected_and_counted():
    good = _sample_datagram()
    dec = SflowDecoder()
    for n in range(len(good)):
        assert dec.decode(good[:n]) is None
    assert dec.decode(good) is not None
    stats = dec.stats()
    assert stats["decoded"] == 1 and stats["bad"] == len(good)
    assert set(stats["bad_by_reason"]) <= {"truncated", "bad_count"}


def test_record_length_beyond_sample_is_truncated():
    good = bytearray(_sample_datagram())
    # first sample's length field sits right after the 28-byte IPv4 datagram header + 4-byte format
    struct.pack_into("!I", good, 32, 10_000)
    with pytest.raises(SflowDecodeError) as info:
        decode_datagram(bytes(good))
    assert info.value.reason == "truncated"


FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=3000))
def test_random_bytes_never_raise_anything_else(data):
    try:
        decode_datagram(data)
    except SflowDecodeError:
        pass


@FUZZ
@given(st.binary(min_size=0, max_size=64))
def test_random_bytes_after_valid_header(tail):
    data = struct.pack("!II4sIIII", 5, 1, b"\x7f\0\0\1", 0, 1, 2, 3) + tail
    dec = SflowDecoder()
    dec.decode(data)
    assert dec.decoded + sum(dec.errors.values()) == 1 and "internal_error" not in dec.errors


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), min_size=1, max_size=8))
def test_mutated_valid_datagrams(mutations):
    data = bytearray(_sample_datagram())
    for pos, val in mutations:
        data[pos % len(data)] = val
    dec = SflowDecoder()
    dec.decode(bytes(data))
    assert "internal_error" not in dec.errors


@FUZZ
@given(st.integers(0, 200), st.binary(max_size=200))
def test_oversized_and_appended_garbage(extra_samples, garbage):
    # claims more samples than it carries, plus garbage: a clean error, never an exception escape
    data = bytearray(_sample_datagram())
    struct.pack_into("!I", data, 24, 4 + extra_samples)
    dec = SflowDecoder()
    dg = dec.decode(bytes(data) + garbage)
    if extra_samples == 0 and not garbage:
        assert dg is not None
    assert "internal_error" not in dec.errors


@FUZZ
@given(
    st.ip_addresses(v=4).map(str), st.ip_addresses(v=4).map(str), st.sampled_from([6, 17]),
    st.integers(0, 65535), st.integers(0, 65535), st.integers(1, 1 << 20), st.integers(0, 1400),
    st.one_of(st.none(), st.integers(0, 4095)),
)
def test_roundtrip_property(src, dst, proto, sport, dport, rate, payload, vlan):
    key = FiveTuple(src, dst, proto, sport, dport)
    dg = decode_datagram(encode_datagram([encode_flow_sample(EncFlow(build_frame(key, payload, vlan=vlan),
                                                                     sampling_rate=rate))]))
    (fs,) = dg.flow_samples
    assert fs.key == key and fs.sampling_rate == rate and fs.vlan == vlan
