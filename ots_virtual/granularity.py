"""Switching granularities of the virtual OTS and how they map to lab bandwidth and OF1.0 speed bits.

An OTS port carries exactly one ODU container; the controller learns the container from the port
name (``ODU2-3``) and the capabilities message. Sizes are in *units* (docs/graph-model.md); the
lab scale ``unit_mbps`` turns units into Mbit/s. The sizes come from ``topology/granularity.py``
(a plain library with no controller imports); this module adds the OpenFlow 1.0 side.
"""
from __future__ import annotations

import math

from os_ken.ofproto import ofproto_v1_0 as ofp

from topology import granularity as _gran
from topology.errors import TopologyError

#: container -> capacity in units: one table for the whole project (topology/ is a plain library)
GRANULARITY_UNITS: dict[str, float] = _gran.UNITS

#: Inverse of :func:`port_name` for the granularity part (``"ODU2-3"`` -> ``"ODU2"``; None otherwise).
granularity_from_port_name = _gran.from_port_name

# OF1.0 full-duplex rate bits and the rate each stands for (Mbit/s)
_SPEED_BITS: tuple[tuple[int, float], ...] = (
    (ofp.OFPPF_10MB_FD, 10.0),
    (ofp.OFPPF_100MB_FD, 100.0),
    (ofp.OFPPF_1GB_FD, 1000.0),
    (ofp.OFPPF_10GB_FD, 10000.0),
)


class PortSpecError(ValueError):
    """A ``--ports`` specification or granularity name is invalid."""

    user_error = True


def canonical_granularity(name: str) -> str:
    """Return the canonical spelling of a granularity name (case-insensitive), or raise."""
    try:
        return _gran.normalize(name)
    except TopologyError as exc:
        raise PortSpecError(str(exc)) from None


def capacity_mbps(granularity: str, unit_mbps: float = 1.0) -> float:
    """Capacity of one port of ``granularity`` in Mbit/s at lab scale ``unit_mbps``."""
    try:
        return _gran.capacity_mbps(granularity, unit_mbps)
    except TopologyError as exc:
        raise PortSpecError(str(exc)) from None


def speed_bits(mbps: float) -> int:
    """The OF1.0 ``curr`` feature bits closest (on a log scale) to ``mbps``, plus FIBER."""
    if mbps <= 0:
        return ofp.OFPPF_FIBER
    bit = min(_SPEED_BITS, key=lambda b: abs(math.log10(b[1]) - math.log10(mbps)))[0]
    return bit | ofp.OFPPF_FIBER


def parse_ports(text: str) -> dict[int, str]:
    """Parse ``"1:ODU2,2:ODU2,6:ODU0"`` into ``{1: "ODU2", 2: "ODU2", 6: "ODU0"}``.

    Port numbers are OpenFlow port numbers of the OVS bridge underneath (1..0xfeff).
    """
    ports: dict[int, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        num, sep, gran = item.partition(":")
        if not sep:
            raise PortSpecError(f"port spec {item!r} must be <port>:<granularity>, e.g. 3:ODU2")
        try:
            port_no = int(num, 0)
        except ValueError:
            raise PortSpecError(f"port number {num!r} in {item!r} is not an integer") from None
        if not 1 <= port_no < ofp.OFPP_MAX:
            raise PortSpecError(f"port number {port_no} out of range 1..{ofp.OFPP_MAX - 1}")
        if port_no in ports:
            raise PortSpecError(f"port {port_no} listed twice")
        ports[port_no] = canonical_granularity(gran)
    if not ports:
        raise PortSpecError("no ports given (e.g. --ports 1:ODU2,2:ODU2)")
    return ports


def port_name(port_no: int, granularity: str) -> str:
    """The OpenFlow port name the controller sees, e.g. ``ODU2-3``."""
    return f"{granularity}-{port_no}"
