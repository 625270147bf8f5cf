"""Value objects produced by the sFlow v5 decoder (plain, immutable, JSON-friendly)."""
from __future__ import annotations

from dataclasses import dataclass, field

from topology.flow import FiveTuple


@dataclass(frozen=True)
class FlowSample:
    """One sampled packet (flow_sample, compact or expanded) with what we decoded from its header."""

    agent: str
    sequence: int
    source_id_type: int
    source_id_index: int
    sampling_rate: int
    sample_pool: int
    drops: int
    input_if: int
    output_if: int
    frame_length: int = 0  # original frame length (bytes) from the raw packet header record
    stripped: int = 0
    header: bytes = b""
    key: FiveTuple | None = None
    src_mac: str = ""
    dst_mac: str = ""
    vlan: int | None = None


@dataclass(frozen=True)
class IfCounters:
    """Generic interface counters (counter record enterprise 0, format 1)."""

    if_index: int
    if_type: int
    if_speed: int
    direction: int
    status: int
    in_octets: int
    in_ucast: int
    in_mcast: int
    in_bcast: int
    in_discards: int
    in_errors: int
    in_unknown_protos: int
    out_octets: int
    out_ucast: int
    out_mcast: int
    out_bcast: int
    out_discards: int
    out_errors: int
    promiscuous: int


@dataclass(frozen=True)
class CounterSample:
    """One counter sample (compact or expanded) with the generic interface records it carried."""

    agent: str
    sequence: int
    source_id_type: int
    source_id_index: int
    interfaces: tuple[IfCounters, ...] = ()


@dataclass(frozen=True)
class Datagram:
    """A decoded sFlow v5 datagram."""

    agent: str
    sub_agent: int
    sequence: int
    uptime_ms: int
    flow_samples: tuple[FlowSample, ...] = ()
    counter_samples: tuple[CounterSample, ...] = ()
    skipped: int = field(default=0)  # samples/records of formats we do not decode (skipped by length)
