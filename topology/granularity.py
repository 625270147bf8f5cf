"""Switching granularities of virtual optical ports (OTN ODUk containers), in bandwidth units.

The lab runs at a reduced scale: 1 unit = ``unit_mbps`` Mbit/s (``[ots] unit_mbps``, default 1),
so an ODU2 port (10 units) carries 10 Mbit/s in Mininet but stands for 10 Gbit/s in the paper.
A virtual optical port is taken whole: a demand that uses it consumes its full capacity.
"""
from __future__ import annotations

from topology.errors import TopologyError

#: Capacity of each granularity in units (OTN nominal rates, Gbit/s, rounded as in G.709 usage).
UNITS: dict[str, float] = {
    "ODU0": 1.25,
    "ODU1": 2.5,
    "ODU2": 10.0,
    "ODU2e": 10.4,
    "ODU3": 40.0,
    "ODU4": 100.0,
}

_CANONICAL = {name.upper(): name for name in UNITS}


def normalize(name: str) -> str:
    """Return the canonical spelling of a granularity (``"odu2"`` -> ``"ODU2"``).

    Raises TopologyError for unknown names, so a typo in a file or a spec fails loudly.
    """
    if not isinstance(name, str) or name.strip().upper() not in _CANONICAL:
        raise TopologyError(f"unknown granularity {name!r} (known: {', '.join(UNITS)})")
    return _CANONICAL[name.strip().upper()]


def units(name: str) -> float:
    """Capacity of one port of this granularity, in units."""
    return UNITS[normalize(name)]


def capacity_mbps(name: str, unit_mbps: float = 1.0) -> float:
    """Capacity of one port of this granularity in Mbit/s at the given lab scale."""
    if unit_mbps <= 0:
        raise TopologyError(f"unit_mbps must be > 0, got {unit_mbps!r}")
    return units(name) * unit_mbps


def from_port_name(port_name: str) -> str | None:
    """Granularity encoded in an OTS port name (``"ODU2-3"`` -> ``"ODU2"``), or None.

    The virtual OTS names its ports ``<granularity>-<port_no>`` in FEATURES_REPLY.
    """
    head, sep, num = port_name.rpartition("-")
    if not sep or not num.isdigit():
        return None
    try:
        return normalize(head)
    except TopologyError:
        return None
