"""A fake OpenFlow switch table that applies the real os-ken messages the controller sends.

The idea of Faucet's ``clib/fakeoftable.py``, in our own much smaller code: every message that leaves
:meth:`app.controller.openflow_southbound.OpenFlowSouthbound.send` reaches a :class:`FakeDatapath`, which
serializes it (it must encode) and applies it to its :class:`FakeOFTable`; a test then asks "which
ports would this packet leave on?" for a packet given as match fields
(``{"in_port": 1, "eth_dst": "...", "eth_type": 0x0800, "ipv4_src": ..., "tcp_dst": ...}``).

Modelled, as far as the controller uses them:

- OpenFlow 1.3: FLOW_MOD add (an identical match and priority is overwritten, counters kept), modify,
  modify-strict, delete and delete-strict (cookie and cookie mask, ``out_port``, ``table_id`` /
  ``OFPTT_ALL``), masked fields, several tables with goto-table, apply/write/clear actions,
  set-field, meters (METER_MOD add/modify/delete; a packet records the meters it passed), output to
  a port (never the packet's own in_port), ``IN_PORT``, ``FLOOD``/``ALL`` and ``CONTROLLER``; no matching rule drops the packet (the
  OpenFlow 1.3 table-miss default); PACKET_OUT (to a port, or through the table with ``OFPP_TABLE``);
  OXM prerequisites are checked as a switch does (an IPv4 field needs ``eth_type=0x0800``...).
- OpenFlow 1.0 (an OTS): XCON FLOW_MODs ``in_port -> output`` (add, delete, delete-strict with
  ``out_port``); a match on anything but ``in_port`` is refused, as the OTS does.

- Groups: GROUP_MOD add/modify/delete of fast-failover groups (OFPGT_FF; other types are refused): a
  packet applying one leaves by the first bucket whose watch port is live (:meth:`FakeOFTable.port_down`
  takes a port down as a cut would, with no message to the controller); a rule naming an unknown
  group is refused, deleting a group deletes the rules that use it (OpenFlow 1.3 §6.5). Output to a
  port that is down sends nothing.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from os_ken.lib.packet import arp, ethernet, ipv4, packet, tcp, udp, vlan
from os_ken.ofproto import ofproto_v1_0 as ofp10
from os_ken.ofproto import ofproto_v1_0_parser as parser10
from os_ken.ofproto import ofproto_v1_3 as ofp13
from os_ken.ofproto import ofproto_v1_3_parser as parser13

CONTROLLER = ofp13.OFPP_CONTROLLER
OF10, OF13 = ofp10.OFP_VERSION, ofp13.OFP_VERSION
FULL = -1  # mask of an unmasked field (every bit)

_MAC_FIELDS = {"eth_src", "eth_dst", "arp_sha", "arp_tha"}
_IP_FIELDS = {"ipv4_src", "ipv4_dst", "arp_spa", "arp_tpa"}
# OXM prerequisites (OpenFlow 1.3 §7.2.3.8): field -> (required field, allowed values)
_PREREQ = {
    "ipv4_src": ("eth_type", {0x0800}), "ipv4_dst": ("eth_type", {0x0800}), "ip_proto": ("eth_type", {0x0800}),
    "tcp_src": ("ip_proto", {6}), "tcp_dst": ("ip_proto", {6}),
    "udp_src": ("ip_proto", {17}), "udp_dst": ("ip_proto", {17}),
    "arp_op": ("eth_type", {0x0806}), "arp_spa": ("eth_type", {0x0806}), "arp_tpa": ("eth_type", {0x0806}),
    "arp_sha": ("eth_type", {0x0806}), "arp_tha": ("eth_type", {0x0806}),
}


class FlowModError(ValueError):
    """The message is one a real switch would refuse (an OpenFlow ERROR)."""


def _int(name: str, value: Any) -> int:
    """A field value as an integer (MACs and IPv4 addresses included)."""
    if isinstance(value, int):
        return value
    if name in _MAC_FIELDS:
        return int(str(value).replace(":", ""), 16)
    if name in _IP_FIELDS:
        return int(ipaddress.IPv4Address(str(value)))
    return int(value)


def _field(name: str, value: Any) -> tuple[int, int]:
    """``(value, mask)`` of a match field (os-ken gives a masked field as a ``(value, mask)`` pair)."""
    if isinstance(value, tuple):
        v, m = _int(name, value[0]), _int(name, value[1])
        return v & m, m
    return _int(name, value), FULL


def normalise_packet(pkt: Mapping[str, Any]) -> dict[str, int]:
    """A packet's fields as integers (MACs, addresses included)."""
    return {k: _int(k, v) for k, v in pkt.items()}


def packet_fields(data: bytes, in_port: int) -> dict[str, Any]:
    """The match fields of a frame (for PACKET_OUTs and frames a test injects)."""
    pkt = packet.Packet(data)
    out: dict[str, Any] = {"in_port": in_port}
    eth = pkt.get_protocol(ethernet.ethernet)
    if eth is None:
        return out
    out.update(eth_src=eth.src, eth_dst=eth.dst, eth_type=eth.ethertype)
    tag = pkt.get_protocol(vlan.vlan)
    if tag is not None:
        out.update(vlan_vid=ofp13.OFPVID_PRESENT | tag.vid, eth_type=tag.ethertype)
    ip = pkt.get_protocol(ipv4.ipv4)
    if ip is not None:
        out.update(ipv4_src=ip.src, ipv4_dst=ip.dst, ip_proto=ip.proto)
        for proto, name in ((tcp.tcp, "tcp"), (udp.udp, "udp")):
            l4 = pkt.get_protocol(proto)
            if l4 is not None:
                out[f"{name}_src"], out[f"{name}_dst"] = l4.src_port, l4.dst_port
    a = pkt.get_protocol(arp.arp)
    if a is not None:
        out.update(arp_op=a.opcode, arp_spa=a.src_ip, arp_tpa=a.dst_ip, arp_sha=a.src_mac, arp_tha=a.dst_mac)
    return out


@dataclass
class Rule:
    """One flow entry as the fake holds it."""

    table: int
    priority: int
    match: dict[str, tuple[int, int]]
    cookie: int
    instructions: list  # OF1.3 instructions; OF1.0: [OFPActionOutput...] (its action list)
    idle_timeout: int = 0
    packets: int = 0
    bytes: int = 0

    def matches(self, pkt: Mapping[str, int]) -> bool:
        for name, (value, mask) in self.match.items():
            if name not in pkt or pkt[name] & mask != value & mask:
                return False
        return True

    def within(self, match: Mapping[str, tuple[int, int]]) -> bool:
        """True if this rule is at least as specific as ``match`` (a non-strict modify or delete takes it)."""
        for name, (value, mask) in match.items():
            mine = self.match.get(name)
            if mine is None or mine[1] & mask != mask or mine[0] & mask != value & mask:
                return False
        return True

    def actions(self) -> list:
        """Every action of the entry (apply and write actions), for ``out_port`` filters."""
        out: list = []
        for inst in self.instructions:
            out.extend(getattr(inst, "actions", None) or ([inst] if hasattr(inst, "port") else []))
        return out

    def outputs_to(self, port: int) -> bool:
        return any(type(a).__name__ == "OFPActionOutput" and a.port == port for a in self.actions())

    @property
    def groups(self) -> set[int]:
        """The groups the entry applies."""
        return {a.group_id for a in self.actions() if type(a).__name__ == "OFPActionGroup"}

    @property
    def meter(self) -> int | None:
        return next((i.meter_id for i in self.instructions if type(i).__name__ == "OFPInstructionMeter"), None)


@dataclass
class Result:
    """Where one packet went: each output with the packet as it left, the meters it passed, the rules it hit."""

    outputs: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    meters: list[int] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    @property
    def ports(self) -> set[int]:
        return {p for p, _pkt in self.outputs}

    @property
    def dropped(self) -> bool:
        return not self.outputs


class FakeOFTable:
    """The tables of one switch: OpenFlow 1.3 (packet switch) or 1.0 (OTS, XCONs only)."""

    def __init__(self, version: int = OF13, ports: Iterable[int] = ()) -> None:
        self.version = version
        self.ports = set(ports)  # for FLOOD / ALL
        self.rules: list[Rule] = []
        self.meters: dict[int, int | None] = {}  # meter id -> drop rate in kbit/s
        self.groups: dict[int, list] = {}  # fast-failover group id -> its buckets (OFPBucket), in order
        self.down: set[int] = set()  # ports whose link is down (no light, no carrier)
        self.packet_outs: list[Result] = []  # each PACKET_OUT, resolved
        self.applied: list[Any] = []  # every message applied, in order

    # ---- messages --------------------------------------------------------------------------------
    def apply(self, msg: Any) -> None:
        """Apply one os-ken message as the switch would (read-only requests change nothing)."""
        self.applied.append(msg)
        kind = type(msg).__name__
        if kind == "OFPFlowMod":
            (self._flow_mod13 if self.version == OF13 else self._flow_mod10)(msg)
        elif kind == "OFPMeterMod":
            self._meter_mod(msg)
        elif kind == "OFPPacketOut":
            self._packet_out(msg)
        elif kind == "OFPGroupMod":
            self._group_mod(msg)

    def _flow_mod13(self, m: Any) -> None:
        match = {k: _field(k, v) for k, v in m.match.items()}
        for name in match:
            need = _PREREQ.get(name)
            if need is not None and match.get(need[0], (None, FULL))[0] not in need[1]:
                raise FlowModError(f"OFPBMC_BAD_PREREQ: {name} needs {need[0]} in {sorted(need[1])}")
        cmd = m.command
        if cmd == ofp13.OFPFC_ADD:
            if not 0 <= m.table_id < ofp13.OFPTT_MAX:
                raise FlowModError(f"OFPFMFC_BAD_TABLE_ID: {m.table_id}")
            for inst in m.instructions:
                meter = getattr(inst, "meter_id", None)
                if type(inst).__name__ == "OFPInstructionMeter" and meter not in self.meters:
                    raise FlowModError(f"OFPMMFC_UNKNOWN_METER: {meter}")
                for a in getattr(inst, "actions", None) or ():
                    if type(a).__name__ == "OFPActionGroup" and a.group_id not in self.groups:
                        raise FlowModError(f"OFPBAC_BAD_OUT_GROUP: {a.group_id}")
            new = Rule(m.table_id, m.priority, match, m.cookie, list(m.instructions), m.idle_timeout)
            for i, old in enumerate(self.rules):
                if (old.table, old.priority, old.match) == (new.table, new.priority, new.match):
                    new.packets, new.bytes = old.packets, old.bytes
                    self.rules[i] = new
                    return
            self.rules.append(new)
            return
        strict = cmd in (ofp13.OFPFC_MODIFY_STRICT, ofp13.OFPFC_DELETE_STRICT)
        hit = [r for r in self.rules if self._selected(r, m, match, strict)]
        if cmd in (ofp13.OFPFC_MODIFY, ofp13.OFPFC_MODIFY_STRICT):
            for r in hit:
                r.instructions = list(m.instructions)
        elif cmd in (ofp13.OFPFC_DELETE, ofp13.OFPFC_DELETE_STRICT):
            self.rules = [r for r in self.rules if r not in hit]
        else:
            raise FlowModError(f"OFPFMFC_BAD_COMMAND: {cmd}")

    @staticmethod
    def _selected(r: Rule, m: Any, match: dict, strict: bool) -> bool:
        if m.table_id != ofp13.OFPTT_ALL and r.table != m.table_id:
            return False
        if m.cookie_mask and r.cookie & m.cookie_mask != m.cookie & m.cookie_mask:
            return False
        if m.command in (ofp13.OFPFC_DELETE, ofp13.OFPFC_DELETE_STRICT) and m.out_port != ofp13.OFPP_ANY \
                and not r.outputs_to(m.out_port):
            return False
        if strict:
            return r.priority == m.priority and r.match == match
        return r.within(match)

    def _flow_mod10(self, m: Any) -> None:
        wild = m.match.wildcards
        if wild | ofp10.OFPFW_IN_PORT != ofp10.OFPFW_ALL:
            raise FlowModError("OFPBRC_EPERM: an OTS takes XCONs only (match on in_port alone)")
        match = {} if wild & ofp10.OFPFW_IN_PORT else {"in_port": (int(m.match.in_port), FULL)}
        if m.command == ofp10.OFPFC_ADD:
            new = Rule(0, m.priority, match, m.cookie, list(m.actions))
            self.rules = [r for r in self.rules if (r.priority, r.match) != (new.priority, new.match)] + [new]
            return
        if m.command not in (ofp10.OFPFC_DELETE, ofp10.OFPFC_DELETE_STRICT):
            raise FlowModError(f"OFPFMFC_BAD_COMMAND: {m.command}")
        strict = m.command == ofp10.OFPFC_DELETE_STRICT

        def gone(r: Rule) -> bool:
            if m.out_port != ofp10.OFPP_NONE and not r.outputs_to(m.out_port):
                return False
            return (r.priority == m.priority and r.match == match) if strict else r.within(match)

        self.rules = [r for r in self.rules if not gone(r)]

    def _meter_mod(self, m: Any) -> None:
        rate = next((b.rate for b in m.bands), None)
        if m.command == ofp13.OFPMC_ADD:
            if m.meter_id in self.meters:
                raise FlowModError(f"OFPMMFC_METER_EXISTS: {m.meter_id}")
            self.meters[m.meter_id] = rate
        elif m.command == ofp13.OFPMC_MODIFY:
            if m.meter_id not in self.meters:
                raise FlowModError(f"OFPMMFC_UNKNOWN_METER: {m.meter_id}")
            self.meters[m.meter_id] = rate
        elif m.command == ofp13.OFPMC_DELETE:
            self.meters.pop(m.meter_id, None)
            self.rules = [r for r in self.rules if r.meter != m.meter_id]  # the switch deletes their rules too

    def _group_mod(self, m: Any) -> None:
        if m.command == ofp13.OFPGC_DELETE:
            self.groups.pop(m.group_id, None)
            self.rules = [r for r in self.rules if m.group_id not in r.groups]  # the switch deletes their rules too
            return
        if m.type != ofp13.OFPGT_FF:
            raise FlowModError(f"OFPGMFC_BAD_TYPE: only fast-failover groups are modelled, not type {m.type}")
        for b in m.buckets:
            if b.watch_port == ofp13.OFPP_ANY:
                raise FlowModError("OFPGMFC_BAD_WATCH: a fast-failover bucket needs a watch port")
        if m.command == ofp13.OFPGC_ADD:
            if m.group_id in self.groups:
                raise FlowModError(f"OFPGMFC_GROUP_EXISTS: {m.group_id}")
        elif m.command == ofp13.OFPGC_MODIFY:
            if m.group_id not in self.groups:
                raise FlowModError(f"OFPGMFC_UNKNOWN_GROUP: {m.group_id}")
        else:
            raise FlowModError(f"OFPGMFC_BAD_COMMAND: {m.command}")
        self.groups[m.group_id] = list(m.buckets)

    def port_down(self, port: int, down: bool = True) -> None:
        """Take ``port``'s link down (or, ``down=False``, back up): what a fibre cut does to the switch.
        Fast-failover groups see it at once; the controller hears nothing from this call."""
        (self.down.add if down else self.down.discard)(port)

    def live_bucket(self, group_id: int) -> Any:
        """The bucket a fast-failover group uses now: the first whose watch port is up (None: all down)."""
        return next((b for b in self.groups[group_id] if b.watch_port not in self.down), None)

    def _packet_out(self, m: Any) -> None:
        pkt = normalise_packet(packet_fields(bytes(m.data), m.in_port))
        res = Result()
        for a in m.actions:
            if a.port == ofp13.OFPP_TABLE:
                sub = self.lookup(pkt)
                res.outputs += sub.outputs
                res.meters += sub.meters
                res.rules += sub.rules
            else:
                res.outputs += [(p, dict(pkt)) for p in self._ports_of(a.port, pkt)]
        self.packet_outs.append(res)

    # ---- questions -------------------------------------------------------------------------------
    def lookup(self, pkt: Mapping[str, Any], count: bool = False) -> Result:
        """Run a packet (match fields; ``in_port`` required) through the tables from table 0."""
        fields = normalise_packet(pkt)
        res = Result()
        table = 0
        write: dict[str, Any] = {}
        while True:
            rule = self._best(table, fields)
            if rule is None:
                break  # table miss with no table-miss rule: dropped (OpenFlow 1.3)
            res.rules.append(rule)
            if count:
                rule.packets += 1
            if self.version == OF10:
                for a in rule.instructions:
                    res.outputs += [(p, dict(fields)) for p in self._ports_of(a.port, fields)]
                return res
            goto = None
            for inst in rule.instructions:
                kind = type(inst).__name__
                if kind == "OFPInstructionMeter":
                    if inst.meter_id not in self.meters:
                        raise FlowModError(f"rule uses meter {inst.meter_id}, which is not set")
                    res.meters.append(inst.meter_id)
                elif kind == "OFPInstructionActions" and inst.type == ofp13.OFPIT_APPLY_ACTIONS:
                    self._actions(inst.actions, fields, res)
                elif kind == "OFPInstructionActions" and inst.type == ofp13.OFPIT_WRITE_ACTIONS:
                    for a in inst.actions:
                        write[type(a).__name__ + str(getattr(a, "key", ""))] = a
                elif kind == "OFPInstructionActions" and inst.type == ofp13.OFPIT_CLEAR_ACTIONS:
                    write.clear()
                elif kind == "OFPInstructionGotoTable":
                    goto = inst.table_id
            if goto is None:
                break
            if goto <= table:
                raise FlowModError(f"goto table {goto} from table {table}: only forward")
            table = goto
        outs = [a for a in write.values() if type(a).__name__ == "OFPActionOutput"]
        self._actions([a for a in write.values() if a not in outs] + outs, fields, res)
        return res

    def _best(self, table: int, pkt: Mapping[str, int]) -> Rule | None:
        best = None
        for r in self.rules:
            if r.table == table and r.matches(pkt) and (best is None or r.priority > best.priority):
                best = r
        return best

    def _actions(self, actions: Iterable[Any], pkt: dict[str, int], res: Result) -> None:
        for a in actions:
            kind = type(a).__name__
            if kind == "OFPActionOutput":
                res.outputs += [(p, dict(pkt)) for p in self._ports_of(a.port, pkt)]
            elif kind == "OFPActionSetField":
                pkt[a.key] = _int(a.key, a.value)
            elif kind == "OFPActionGroup":
                if a.group_id not in self.groups:
                    raise FlowModError(f"rule uses group {a.group_id}, which is not set")
                bucket = self.live_bucket(a.group_id)
                if bucket is not None:
                    self._actions(bucket.actions, dict(pkt), res)
            else:
                raise FlowModError(f"action {kind} is not modelled")

    def _ports_of(self, port: int, pkt: Mapping[str, int]) -> list[int]:
        in_port = pkt.get("in_port")
        if self.version == OF10:
            return [in_port] if port == ofp10.OFPP_IN_PORT else [port]
        if port == ofp13.OFPP_IN_PORT:
            return [in_port] if in_port is not None else []
        if port in (ofp13.OFPP_FLOOD, ofp13.OFPP_ALL):
            return sorted(p for p in self.ports if p != in_port and p not in self.down)
        if port in self.down:
            return []  # no carrier: the frame is lost
        return [] if port == in_port else [port]  # never back out of the ingress port (only OFPP_IN_PORT does)

    def outputs(self, pkt: Mapping[str, Any]) -> set[int]:
        """The ports the packet would leave on (``CONTROLLER`` for a copy to the controller)."""
        return self.lookup(pkt).ports

    def is_output(self, pkt: Mapping[str, Any], port: int) -> bool:
        """Would the packet leave on ``port``?"""
        return port in self.outputs(pkt)

    def to_controller(self, pkt: Mapping[str, Any]) -> bool:
        return self.is_output(pkt, CONTROLLER)

    def xcons(self) -> dict[int, int]:
        """OF1.0: ``{in_port: out_port}`` of every XCON."""
        return {r.match["in_port"][0]: a.port for r in self.rules if "in_port" in r.match
                for a in r.instructions if type(a).__name__ == "OFPActionOutput"}

    def rules_with(self, cookie: int, mask: int = FULL) -> list[Rule]:
        return [r for r in self.rules if r.cookie & mask == cookie & mask]


class FakeDatapath:
    """An os-ken ``Datapath`` stand-in whose messages land in a :class:`FakeOFTable`.

    Every message is serialized (it must encode), recorded in :attr:`sent` and applied. A
    BARRIER_REQUEST and a FLOW_STATS request are answered at once through ``on_barrier`` /
    ``on_flow_stats`` callbacks (give the :class:`OpenFlowSouthbound`'s, and its ``confirm`` and
    ``flow_stats`` return without a switch); a message the table refuses is answered through
    ``on_error`` like an OpenFlow ERROR when that callback is given, else it raises.
    """

    def __init__(self, dpid: int, version: int = OF13, ports: Iterable[int] = (), *,
                 on_barrier: Callable[[int, int], Any] | None = None,
                 on_flow_stats: Callable[..., Any] | None = None,
                 on_error: Callable[..., Any] | None = None) -> None:
        self.id = dpid
        self.ofproto, self.ofproto_parser = (ofp13, parser13) if version == OF13 else (ofp10, parser10)
        self.table = FakeOFTable(version, ports)
        self.sent: list = []
        self.xid = 0
        self.on_barrier, self.on_flow_stats, self.on_error = on_barrier, on_flow_stats, on_error
        self.after_apply: Callable[[FakeDatapath, Any], Any] | None = None  # e.g. a fabric following the light

    @classmethod
    def for_southbound(cls, southbound: Any, dpid: int, version: int = OF13, ports: Iterable[int] = ()
                       ) -> FakeDatapath:
        """A datapath connected to ``southbound``, its barriers, stats and errors answered to it."""
        dp = cls(dpid, version, ports, on_barrier=southbound.on_barrier, on_flow_stats=southbound.on_flow_stats,
                 on_error=southbound.on_error)
        southbound.connected(dp)
        return dp

    def set_xid(self, msg: Any) -> int:
        assert msg.xid is None
        self.xid += 1
        msg.set_xid(self.xid)
        return self.xid

    def send_msg(self, msg: Any) -> bool:
        if msg.xid is None:
            self.set_xid(msg)
        assert msg.datapath is self, "the southbound binds every message to its datapath"
        msg.serialize()
        self.sent.append(msg)
        try:
            self.table.apply(msg)
        except FlowModError as exc:
            if self.on_error is None:
                raise
            err, code = self.ofproto.OFPET_FLOW_MOD_FAILED, 0
            if type(msg).__name__ == "OFPGroupMod":  # the group error the message names (OFPGMFC_...)
                err, code = self.ofproto.OFPET_GROUP_MOD_FAILED, getattr(self.ofproto, str(exc).split(":")[0], 0)
            self.on_error(self.id, msg.xid, err, code, self.ofproto.OFP_VERSION)
        if self.after_apply is not None:
            self.after_apply(self, msg)
        kind = type(msg).__name__
        if kind == "OFPBarrierRequest" and self.on_barrier is not None:
            self.on_barrier(self.id, msg.xid)
        elif kind == "OFPFlowStatsRequest" and self.on_flow_stats is not None:
            self.on_flow_stats(self.id, msg.xid, self.ofproto.OFP_VERSION, self._flow_stats(msg), False)
        return True

    def _flow_stats(self, req: Any) -> list:
        if self.table.version == OF10:
            return [_Of10Stat(r) for r in self.table.rules]
        mask = req.cookie_mask
        return [parser13.OFPFlowStats(table_id=r.table, priority=r.priority, cookie=r.cookie,
                                      packet_count=r.packets, byte_count=r.bytes, instructions=r.instructions,
                                      match=parser13.OFPMatch(**{k: _raw(k, v) for k, v in r.match.items()}))
                for r in self.table.rules if not mask or r.cookie & mask == req.cookie & mask]

    def packets_out(self) -> list:
        """The PACKET_OUTs sent, as os-ken messages."""
        return [m for m in self.sent if type(m).__name__ == "OFPPacketOut"]


def _raw(name: str, value: tuple[int, int]) -> Any:
    """A normalised field back in os-ken's form (MACs and addresses as strings)."""
    v, m = value

    def one(x: int) -> Any:
        if name in _MAC_FIELDS:
            return ":".join(f"{x:012x}"[i:i + 2] for i in range(0, 12, 2))
        if name in _IP_FIELDS:
            return str(ipaddress.IPv4Address(x))
        return x

    return one(v) if m == FULL else (one(v), one(m))


class _Of10Stat:
    """An OF1.0 flow-stats entry (os-ken builds those only by parsing a reply)."""

    def __init__(self, r: Rule) -> None:
        self.cookie, self.priority, self.packet_count, self.byte_count = r.cookie, r.priority, r.packets, r.bytes
        self.match = parser10.OFPMatch(in_port=r.match["in_port"][0]) if "in_port" in r.match else parser10.OFPMatch()
        self.actions = list(r.instructions)
