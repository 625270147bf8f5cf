"""The transport flow key every layer names flows by: the monitor's sFlow decoder and flow counters,
the TE decisions and the controller's steering rules (docs/architecture.md, "Code layers")."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: IP protocol numbers the monitor names in output.
PROTO_NAMES = {1: "icmp", 6: "tcp", 17: "udp", 58: "icmpv6"}


@dataclass(frozen=True, order=True)
class FiveTuple:
    """A transport flow key. Ports are 0 for protocols without ports (ICMP) and for fragments."""

    src: str
    dst: str
    proto: int
    sport: int = 0
    dport: int = 0

    def __str__(self) -> str:
        name = PROTO_NAMES.get(self.proto, str(self.proto))
        return f"{name} {self.src}:{self.sport} -> {self.dst}:{self.dport}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FiveTuple:
        return cls(str(d["src"]), str(d["dst"]), int(d["proto"]), int(d.get("sport", 0)), int(d.get("dport", 0)))
