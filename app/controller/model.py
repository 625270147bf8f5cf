"""Small value objects the controller apps exchange (events carry these, never live Datapaths)."""
from __future__ import annotations

from dataclasses import dataclass, field

from topology.graph import dpid_name as dpid_label  # noqa: F401 - re-exported: the id of an unnamed switch

PACKET = "packet"
OTS = "ots"


@dataclass(frozen=True)
class PortInfo:
    """One port of a datapath as last reported (PORT_DESC / FEATURES_REPLY / PORT_STATUS)."""

    port_no: int
    name: str
    hw_addr: str
    up: bool  # link up and not administratively down


@dataclass
class SwitchInfo:
    """A connected datapath: a packet switch (OF1.3) or an OTS (OF1.0)."""

    dpid: int
    kind: str  # PACKET | OTS
    ofp_version: int
    name: str
    ports: dict[int, PortInfo] = field(default_factory=dict)
    capabilities: dict = field(default_factory=dict)  # OTS VENDOR capabilities (JSON payload)

    def to_json(self) -> dict:
        return {
            "dpid": self.dpid,
            "dpid_hex": f"{self.dpid:016x}",
            "kind": self.kind,
            "name": self.name,
            "of_version": {1: "1.0", 4: "1.3"}.get(self.ofp_version, str(self.ofp_version)),
            "ports": [
                {"port_no": p.port_no, "name": p.name, "hw_addr": p.hw_addr, "up": p.up}
                for p in sorted(self.ports.values(), key=lambda p: p.port_no)
            ],
            "capabilities": self.capabilities,
        }


@dataclass(frozen=True, order=True)
class PortRef:
    """A switch port, ``dpid:port_no``."""

    dpid: int
    port_no: int

    def __str__(self) -> str:
        return f"{self.dpid:x}:{self.port_no}"


@dataclass(frozen=True, order=True)
class PacketLink:
    """A directed packet-layer adjacency seen by LLDP (src port sent, dst port received)."""

    src: PortRef
    dst: PortRef

    def reverse(self) -> PacketLink:
        return PacketLink(self.dst, self.src)


@dataclass(frozen=True)
class HostInfo:
    """A host learned at an edge port."""

    mac: str
    ip: str | None
    port: PortRef
