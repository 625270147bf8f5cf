"""Small value objects the controller apps exchange (events carry these, never live Datapaths)."""
from __future__ import annotations

import re
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
    speed_kbps: int = 0  # current speed (OF1.3 curr_speed; OF1.0 from the ``curr`` feature bits); 0 = unknown
    # administratively down (config PORT_DOWN): on an OTS a dark port (unused or darkened by loss of
    # light), so a down OTS port with this False is a fault at that port (docs/failures.md)
    admin_down: bool = False


@dataclass
class SwitchInfo:
    """A connected datapath: a packet switch (OF1.3) or an OTS (OF1.0)."""

    dpid: int
    kind: str  # PACKET | OTS
    ofp_version: int
    name: str
    ports: dict[int, PortInfo] = field(default_factory=dict)
    capabilities: dict = field(default_factory=dict)  # OTS VENDOR capabilities (JSON payload)
    local_port: str = ""  # the LOCAL port's name: on Open vSwitch, the bridge's own name

    def to_json(self) -> dict:
        return {
            "dpid": self.dpid,
            "dpid_hex": f"{self.dpid:016x}",
            "kind": self.kind,
            "name": self.name,
            "of_version": {1: "1.0", 4: "1.3"}.get(self.ofp_version, str(self.ofp_version)),
            "ports": [
                {"port_no": p.port_no, "name": p.name, "hw_addr": p.hw_addr, "up": p.up, "speed_kbps": p.speed_kbps}
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


def host_label(mac: str) -> str:
    """Graph node id of a learned host the lab did not name: ``host-`` + its MAC without colons
    (stable while its IP is still unknown, and no ``:`` that would read as ``switch:port``)."""
    return "host-" + mac.lower().replace(":", "")


_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def split_names(raw: dict) -> tuple[dict[int, str], dict[str, str]]:
    """A names map ``{"0xa1": "A", "00:00:00:00:00:01": "h1"}`` -> (dpid names, host names by MAC).

    Raises ValueError (one line, naming the bad key) for a key that is neither a dpid nor a MAC.
    """
    if not isinstance(raw, dict):
        raise ValueError("names must be an object {dpid or MAC: name}")
    dpids: dict[int, str] = {}
    hosts: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(value, str) or not value:
            raise ValueError(f"name of {key!r} must be a non-empty string, got {value!r}")
        if isinstance(key, str) and _MAC.match(key):
            hosts[key.lower()] = value
            continue
        try:
            dpid = int(key, 0) if isinstance(key, str) else int(key)
        except (TypeError, ValueError):
            raise ValueError(f"{key!r} is neither a dpid (decimal or 0x hex) nor a MAC address") from None
        if not 0 <= dpid < 2**64:
            raise ValueError(f"dpid {key!r} out of range")
        dpids[dpid] = value
    return dpids, hosts
