"""Controller-side helpers for the virtual OTS's OpenFlow 1.0 VENDOR capabilities message.

An OTS is driven with plain OpenFlow 1.0; the only extension is one VENDOR request/reply pair that
tells the controller what the node is (docs/ots.md, "Vendor message"). Wire format of both::

    ofp_header (type OFPT_VENDOR=4) | vendor id u32 = MLTE_VENDOR_ID | subtype u32 | JSON (UTF-8)

subtype ``CAPS_REQUEST`` (1) has an empty JSON part; ``CAPS_REPLY`` (2) carries
:meth:`Capabilities.to_json`. The reply has the request's xid. Usage from an os-ken app::

    from ots_virtual import protocol
    datapath.send_msg(protocol.caps_request(datapath))          # OF1.0 datapath
    # in an EventOFPVendor handler:
    if protocol.is_caps_reply(ev.msg):
        caps = protocol.parse_caps_reply(ev.msg)   # -> Capabilities
        caps.ports[3].granularity, caps.ports[3].capacity_mbps

Also: :func:`port_granularity` reads the granularity from an OTS port name (``ODU2-3`` -> ``ODU2``),
which is all FEATURES_REPLY needs.
"""
from __future__ import annotations

import json
import struct
from dataclasses import asdict, dataclass, field
from typing import Any

from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual.granularity import granularity_from_port_name

#: OF1.0 vendor id of mlte's OTS extension (ASCII "\0MLT").
MLTE_VENDOR_ID = 0x004D4C54
CAPS_REQUEST = 1
CAPS_REPLY = 2
_SUBTYPE = struct.Struct("!I")


class CapabilitiesError(ValueError):
    """A VENDOR message is not a well-formed OTS capabilities reply."""

    user_error = True


@dataclass(frozen=True)
class PortCaps:
    granularity: str  # "ODU2"
    capacity_units: float  # 10.0 for ODU2
    capacity_mbps: float  # capacity_units * unit_mbps


@dataclass(frozen=True)
class Capabilities:
    """What an OTS node can do; the capability store keeps this per DPID."""

    dpid: int
    name: str
    ports: dict[int, PortCaps]
    unit_mbps: float
    setup_time_min: float  # seconds an XCON stays dark before it carries traffic
    setup_time_max: float
    switch_type: str = "ots"
    one_rule_per_port: bool = True
    table_capacity: int = 0  # max simultaneous XCONs (= number of ports)
    match_fields: tuple[str, ...] = ("in_port",)
    actions: tuple[str, ...] = ("output",)
    vlan_restrictions: str = "no-vlan-match"  # an OTS switches containers, not VLANs
    granularities: dict[str, float] = field(default_factory=dict)  # name -> units, for the ports present

    def to_json(self) -> str:
        data = asdict(self)
        data["ports"] = {str(k): v for k, v in data["ports"].items()}
        data["match_fields"] = list(self.match_fields)
        data["actions"] = list(self.actions)
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Capabilities:
        try:
            data: dict[str, Any] = json.loads(text)
            ports = {int(k): PortCaps(**v) for k, v in data.pop("ports").items()}
            data["match_fields"] = tuple(data["match_fields"])
            data["actions"] = tuple(data["actions"])
            return cls(ports=ports, **data)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise CapabilitiesError(f"bad OTS capabilities JSON: {exc}") from None


def caps_request(datapath: Any) -> Any:
    """An os-ken ``OFPVendor`` asking the OTS on ``datapath`` for its capabilities."""
    msg = parser.OFPVendor(datapath)
    msg.vendor = MLTE_VENDOR_ID
    msg.data = _SUBTYPE.pack(CAPS_REQUEST)
    return msg


def is_caps_reply(msg: Any) -> bool:
    """True if an os-ken OF1.0 message (e.g. ``ev.msg`` of EventOFPVendor) is an OTS capabilities reply."""
    data = getattr(msg, "data", None)
    return (getattr(msg, "msg_type", None) == ofp.OFPT_VENDOR and getattr(msg, "vendor", None) == MLTE_VENDOR_ID
            and isinstance(data, (bytes, bytearray)) and len(data) >= 4
            and _SUBTYPE.unpack_from(data)[0] == CAPS_REPLY)


def parse_caps_reply(msg: Any) -> Capabilities:
    """Decode an OTS capabilities reply (os-ken OFPVendor, or the raw message bytes)."""
    if isinstance(msg, (bytes, bytearray)):
        if len(msg) < ofp.OFP_VENDOR_HEADER_SIZE + 4:
            raise CapabilitiesError("VENDOR message too short")
        (vendor,) = struct.unpack_from("!I", msg, ofp.OFP_HEADER_SIZE)
        data = bytes(msg[ofp.OFP_VENDOR_HEADER_SIZE:])
    else:
        vendor, data = getattr(msg, "vendor", None), getattr(msg, "data", b"")
    if vendor != MLTE_VENDOR_ID:
        raise CapabilitiesError(f"vendor id {vendor!r} is not mlte's {MLTE_VENDOR_ID:#x}")
    if not isinstance(data, (bytes, bytearray)) or len(data) < 4 or _SUBTYPE.unpack_from(data)[0] != CAPS_REPLY:
        raise CapabilitiesError("not a capabilities reply")
    return Capabilities.from_json(bytes(data[4:]))


def port_granularity(port_name: str | bytes) -> str | None:
    """Granularity of an OTS port from its OpenFlow name (``ODU2-3`` -> ``ODU2``); None if not one."""
    if isinstance(port_name, (bytes, bytearray)):
        port_name = bytes(port_name).rstrip(b"\0").decode(errors="replace")
    return granularity_from_port_name(port_name)


def patch_os_ken_of10_errors() -> None:
    """Work around an os-ken 4.2.2 bug that drops an OF1.0 switch on its first ERROR message.

    ``os_ken.controller.ofp_handler.OFPHandler.error_msg_handler`` compares ``msg.type`` with
    ``ofproto.OFPET_EXPERIMENTER``, which ``ofproto_v1_0`` does not define (OF1.0 has no experimenter
    errors): the AttributeError tears the datapath connection down, so every refused XCON would
    disconnect the OTS. Defining the constant with its OF1.2+ value (0xffff, never an OF1.0 error
    type) fixes it. Call once in the controller process before OpenFlow connections are accepted;
    calling it again does nothing.
    """
    if not hasattr(ofp, "OFPET_EXPERIMENTER"):
        ofp.OFPET_EXPERIMENTER = 0xFFFF


# --- agent side --------------------------------------------------------------------------------


def vendor_payload(subtype: int, body: bytes = b"") -> bytes:
    """The bytes after the vendor id: subtype + JSON body."""
    return _SUBTYPE.pack(subtype) + body


def split_vendor_payload(data: bytes) -> tuple[int, bytes] | None:
    """(subtype, body) of an mlte VENDOR payload; None if it is too short to carry a subtype."""
    if len(data) < 4:
        return None
    return _SUBTYPE.unpack_from(data)[0], bytes(data[4:])
