"""Value types of ordered updates: one XCON, one packet rule, one southbound outcome.

They are plain, frozen and JSON-serialisable so a plan can be built, compared, stored and replayed
without a switch. A ``FlowRule`` takes its cookie and priority range from ``topology.rule_plan``
(the one place bands are declared), so a plan can never install a rule outside its owner's band.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from topology import rule_plan

#: OpenFlow 1.3 OXM field names a plan may match on, in the order used to normalise a match.
OXM_FIELDS: tuple[str, ...] = ("in_port", "eth_type", "eth_src", "eth_dst", "vlan_vid", "ipv4_src", "ipv4_dst",
                               "ip_proto", "tcp_src", "tcp_dst", "udp_src", "udp_dst")
OF13_PORT_MAX = 0xFFFFFF00  # OFPP_MAX: highest physical port number of OpenFlow 1.3
OF10_PORT_MAX = 0xFF00  # OFPP_MAX of OpenFlow 1.0 (OTS nodes)
ETH_TYPE_IPV4 = 0x0800
IP_PROTO_TCP = 6
IP_PROTO_UDP = 17
_MAC = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")

Port = tuple[str, int]  # (packet switch name, port number)


class ModelError(ValueError):
    """A value that no switch would accept (bad band, priority, cookie id, match field or port)."""


def _port(value: Any, what: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
        raise ModelError(f"{what}: port {value!r} is not an integer in 1..{high}")
    return value


def _uint(value: Any, what: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise ModelError(f"{what}: {value!r} is not an integer in 0..{high}")
    return value


#: fields a plan may match with a bit mask: ``(value, mask)``. Open vSwitch matches TCP and UDP ports
#: bitwise (ovs-fields(7): "arbitrary bitwise masks", OpenFlow 1.2+), which splits traffic by a hash-like
#: part of the 5-tuple without a group table (docs/te-loop.md, "Balanced growth").
MASKABLE: frozenset[str] = frozenset({"tcp_src", "tcp_dst", "udp_src", "udp_dst"})
L4_FULL_MASK = 0xFFFF


def _masked(name: str, value: Any, what: str) -> Any:
    """``(value & mask, mask)`` for a masked port match; a full mask is the plain value."""
    if name not in MASKABLE:
        raise ModelError(f"{what}: {name} cannot be matched with a mask (maskable: {', '.join(sorted(MASKABLE))})")
    if len(value) != 2:
        raise ModelError(f"{what}: {name} {value!r} is not a (value, mask) pair")
    v, m = (_uint(x, what, L4_FULL_MASK) for x in value)
    if m == 0:
        raise ModelError(f"{what}: {name} with mask 0 matches everything: leave the field out")
    return v & m if m == L4_FULL_MASK else (v & m, m)


def field_matches(want: Any, value: Any) -> bool:
    """Whether a packet's field ``value`` matches a normalised match value (plain or ``(value, mask)``)."""
    if isinstance(want, tuple):
        return isinstance(value, int) and value & want[1] == want[0]
    return value == want


def _field_value(name: str, value: Any, what: str) -> Any:
    """The normalised value of one OXM field (MACs lower case, IPv4 addresses as dotted strings)."""
    if isinstance(value, (tuple, list)):
        return _masked(name, value, what)
    if name == "in_port":
        return _port(value, what, OF13_PORT_MAX)
    if name in ("eth_src", "eth_dst"):
        if not isinstance(value, str) or not _MAC.match(value.lower()):
            raise ModelError(f"{what}: {name} {value!r} is not a MAC address xx:xx:xx:xx:xx:xx")
        return value.lower()
    if name in ("ipv4_src", "ipv4_dst"):
        try:
            return str(ipaddress.IPv4Address(value))
        except (ipaddress.AddressValueError, ValueError) as exc:
            raise ModelError(f"{what}: {name} {value!r} is not an IPv4 address") from exc
    if name == "eth_type":
        return _uint(value, what, 0xFFFF)
    if name == "vlan_vid":
        return _uint(value, what, 0x1FFF)  # OFPVID_PRESENT | vid
    if name == "ip_proto":
        return _uint(value, what, 0xFF)
    return _uint(value, what, 0xFFFF)  # tcp/udp ports


def _prerequisites(match: Mapping[str, Any], what: str) -> None:
    """OXM prerequisites (OpenFlow 1.3 §7.2.3.8): a switch refuses a match without them (BAD_PREREQ)."""
    ip_fields = [k for k in ("ipv4_src", "ipv4_dst", "ip_proto") if k in match]
    if ip_fields and match.get("eth_type") != ETH_TYPE_IPV4:
        raise ModelError(f"{what}: {', '.join(ip_fields)} need eth_type=0x0800")
    for proto, fields in ((IP_PROTO_TCP, ("tcp_src", "tcp_dst")), (IP_PROTO_UDP, ("udp_src", "udp_dst"))):
        used = [k for k in fields if k in match]
        if used and match.get("ip_proto") != proto:
            raise ModelError(f"{what}: {', '.join(used)} need ip_proto={proto}")


def normalise_match(match: Mapping[str, Any] | Iterable[tuple[str, Any]], what: str = "match"
                    ) -> tuple[tuple[str, Any], ...]:
    """A match as sorted ``((field, value), ...)`` pairs in OXM order; ModelError for anything a switch refuses."""
    pairs = list(match.items()) if isinstance(match, Mapping) else [tuple(p) for p in match]
    seen: dict[str, Any] = {}
    for pair in pairs:
        if len(pair) != 2:
            raise ModelError(f"{what}: {pair!r} is not a (field, value) pair")
        name, value = pair
        if name not in OXM_FIELDS:
            raise ModelError(f"{what}: unknown match field {name!r} (known: {', '.join(OXM_FIELDS)})")
        if name in seen:
            raise ModelError(f"{what}: match field {name!r} given twice")
        seen[name] = _field_value(name, value, what)
    _prerequisites(seen, what)
    return tuple((k, seen[k]) for k in OXM_FIELDS if k in seen)


@dataclass(frozen=True)
class XconSpec:
    """A bidirectional cross-connect ``in_port <-> out_port`` on one OTS (two OF1.0 rules on the wire)."""

    ots: str
    in_port: int
    out_port: int

    def __post_init__(self) -> None:
        if not isinstance(self.ots, str) or not self.ots:
            raise ModelError(f"XCON: OTS name {self.ots!r} must be a non-empty string")
        what = f"XCON on {self.ots}"
        _port(self.in_port, what, OF10_PORT_MAX)
        _port(self.out_port, what, OF10_PORT_MAX)
        if self.in_port == self.out_port:
            raise ModelError(f"{what}: in_port and out_port are both {self.in_port}")

    @property
    def ports(self) -> frozenset[int]:
        return frozenset((self.in_port, self.out_port))

    @property
    def cookie(self) -> int:
        return rule_plan.XCON.cookie()

    def target(self) -> str:
        return f"{self.ots}:{self.in_port}<->{self.out_port}"

    def to_json(self) -> dict[str, Any]:
        return {"ots": self.ots, "in_port": self.in_port, "out_port": self.out_port}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> XconSpec:
        return cls(d["ots"], d["in_port"], d["out_port"])


_BANDS = {b.name: b for b in rule_plan.BANDS}


@dataclass(frozen=True)
class FlowRule:
    """One OpenFlow 1.3 packet rule ``match -> output`` in a band of ``rule_plan`` (its cookie follows).

    Two rules with the same :meth:`key` are the same OpenFlow entry: an ADD of one overwrites the
    other and a strict DELETE of one removes the other.
    """

    switch: str
    band: str
    ident: int
    priority: int
    match: tuple[tuple[str, Any], ...]
    out_port: int
    table: int = 0
    meter: int | None = None  # an OpenFlow 1.3 meter the rule's packets pass first (elastic reservations)
    #: a fast-failover group the rule outputs to instead of ``out_port`` (1+1 protection); ``out_port`` is
    #: then the group's first bucket, the working port
    group: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.switch, str) or not self.switch:
            raise ModelError(f"rule: switch name {self.switch!r} must be a non-empty string")
        what = f"rule on {self.switch}"
        band = _BANDS.get(self.band)
        if band is None:
            raise ModelError(f"{what}: unknown band {self.band!r} (rule_plan.BANDS)")
        if band.protocol != rule_plan.OF13:
            raise ModelError(f"{what}: band {self.band!r} is not a packet-switch band (XCONs are XconSpec)")
        if isinstance(self.ident, bool) or not isinstance(self.ident, int):
            raise ModelError(f"{what}: cookie id {self.ident!r} is not an integer")
        try:
            band.cookie(self.ident)
            if isinstance(self.priority, bool) or not isinstance(self.priority, int):
                raise ValueError(f"priority {self.priority!r} is not an integer")
            band.priority(self.priority - band.low)
        except ValueError as exc:
            raise ModelError(f"{what}: {exc}") from None
        if self.table != band.table:
            raise ModelError(f"{what}: band {self.band!r} lives in table {band.table}, not {self.table}")
        _port(self.out_port, what, OF13_PORT_MAX)
        object.__setattr__(self, "match", normalise_match(self.match, what))
        if dict(self.match).get("in_port") == self.out_port:
            raise ModelError(f"{what}: output to its own in_port {self.out_port} (use OFPP_IN_PORT)")
        if self.meter is not None:
            _port(self.meter, f"{what}: meter", rule_plan.METER_MAX)
        if self.group is not None:
            _uint(self.group, f"{what}: group", rule_plan.GROUP_MAX)

    @property
    def cookie(self) -> int:
        return _BANDS[self.band].cookie(self.ident)

    def match_dict(self) -> dict[str, Any]:
        return dict(self.match)

    def key(self) -> tuple[str, int, int, tuple[tuple[str, Any], ...]]:
        """What identifies the OpenFlow entry: switch, table, priority and match (not cookie, not output)."""
        return (self.switch, self.table, self.priority, self.match)

    def target(self) -> str:
        m = ",".join(f"{k}={v:#06x}" if k == "eth_type" else f"{k}={v[0]}/{v[1]:#x}" if isinstance(v, tuple)
                     else f"{k}={v}" for k, v in self.match)
        meter = f" meter {self.meter}" if self.meter is not None else ""
        out = f"group {self.group} ({self.out_port} first)" if self.group is not None else self.out_port
        return f"{self.switch}/{self.band}#{self.ident} p{self.priority} [{m}]{meter} -> {out}"

    def to_json(self) -> dict[str, Any]:
        d = {"switch": self.switch, "band": self.band, "ident": self.ident, "priority": self.priority,
             "match": {k: list(v) if isinstance(v, tuple) else v for k, v in self.match},
             "out_port": self.out_port, "table": self.table, "cookie": f"{self.cookie:#018x}"}
        if self.meter is not None:
            d["meter"] = self.meter
        if self.group is not None:
            d["group"] = self.group
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FlowRule:
        rule = cls(d["switch"], d["band"], d["ident"], d["priority"], tuple(d["match"].items()),
                   d["out_port"], d.get("table", 0), d.get("meter"), d.get("group"))
        if "cookie" in d and int(d["cookie"], 16) != rule.cookie:
            raise ModelError(f"rule on {rule.switch}: cookie {d['cookie']} is not band {rule.band!r} "
                             f"id {rule.ident} ({rule.cookie:#018x})")
        return rule


@dataclass(frozen=True)
class GroupSpec:
    """An OpenFlow 1.3 fast-failover group on a packet switch: one bucket per port in ``ports``, each
    outputting to and watching its port, so the switch sends on the first port that is up with no
    controller in the loop (1+1 protection: the working port, then the protection port)."""

    switch: str
    group_id: int
    ports: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.switch, str) or not self.switch:
            raise ModelError(f"group: switch name {self.switch!r} must be a non-empty string")
        what = f"group on {self.switch}"
        _uint(self.group_id, what, rule_plan.GROUP_MAX)
        object.__setattr__(self, "ports", tuple(self.ports))
        if not self.ports:
            raise ModelError(f"{what}: a fast-failover group needs at least one port")
        for p in self.ports:
            _port(p, what, OF13_PORT_MAX)
        if len(set(self.ports)) != len(self.ports):
            raise ModelError(f"{what}: port listed twice in {list(self.ports)}")

    def target(self) -> str:
        return f"{self.switch}/group {self.group_id} ff[{','.join(map(str, self.ports))}]"

    def to_json(self) -> dict[str, Any]:
        return {"switch": self.switch, "group_id": self.group_id, "ports": list(self.ports)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> GroupSpec:
        return cls(d["switch"], d["group_id"], tuple(d["ports"]))


@dataclass(frozen=True)
class Outcome:
    """What one southbound call did.

    ``ok`` False with ``detail["unknown"]`` true means the message may have been applied (its barrier
    never answered): a roll-back must undo it. Any other failure means nothing was applied.
    """

    ok: bool
    error: str = ""
    at: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def unknown(self) -> bool:
        return not self.ok and bool(self.detail.get("unknown"))

    @classmethod
    def done(cls, at: float | None = None, **detail: Any) -> Outcome:
        return cls(True, "", at, dict(detail))

    @classmethod
    def refused(cls, error: str, at: float | None = None, **detail: Any) -> Outcome:
        return cls(False, error, at, dict(detail))

    @classmethod
    def timed_out(cls, error: str, at: float | None = None, **detail: Any) -> Outcome:
        """No answer in time: the message may or may not have been applied."""
        return cls(False, error, at, {**detail, "unknown": True})

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "error": self.error, "at": self.at, "detail": dict(self.detail)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Outcome:
        return cls(d["ok"], d.get("error", ""), d.get("at"), dict(d.get("detail", {})))


@dataclass(frozen=True)
class IngressChange:
    """The rule that moves traffic: ``new`` replaces ``old`` at the ingress switch (``old`` None: a new flow).

    Same :meth:`FlowRule.key`: ``new`` overwrites ``old`` (undo reinstalls ``old``). Higher priority:
    ``new`` shadows ``old``, which goes with the old path. Lower priority: ``new`` goes in first and
    deleting ``old`` is the swap.
    """

    new: FlowRule
    old: FlowRule | None = None

    def __post_init__(self) -> None:
        if self.old is None:
            return
        if self.old.switch != self.new.switch:
            raise ModelError(f"ingress change: old rule on {self.old.switch}, new rule on {self.new.switch}")
        if self.old.key() != self.new.key() and self.old.priority == self.new.priority:
            raise ModelError(f"ingress change on {self.new.switch}: two different matches at one priority "
                             f"({self.new.priority}) overlap in an undefined order")

    @property
    def overwrites(self) -> bool:
        return self.old is not None and self.old.key() == self.new.key()

    def to_json(self) -> dict[str, Any]:
        return {"new": self.new.to_json(), "old": None if self.old is None else self.old.to_json()}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IngressChange:
        return cls(FlowRule.from_json(d["new"]), None if d.get("old") is None else FlowRule.from_json(d["old"]))


def port_str(p: Port) -> str:
    return f"{p[0]}:{p[1]}"
