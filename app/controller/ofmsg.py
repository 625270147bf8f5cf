"""Every OpenFlow message the controller emits, built in one place (the idea of Faucet's ``valve_of.py``).

Plain functions return os-ken message objects with *no datapath bound*: they depend only on the
OpenFlow version (OF1.3 for packet switches, OF1.0 for OTS nodes), so managers and tests can build
them without a connection. They leave only through :meth:`app.controller.openflow_southbound.OpenFlowSouthbound.send`,
which binds the datapath, applies the gate (:func:`is_change`) and counts them. Where a rule sits
(table, priority band, cookie) is declared in :mod:`topology.rule_plan`; this module only
encodes it. A unit test fails if an ``OFP…(`` constructor is called anywhere else in ``app/``.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from os_ken.ofproto import ofproto_v1_0 as ofp10
from os_ken.ofproto import ofproto_v1_0_parser as parser10
from os_ken.ofproto import ofproto_v1_3 as ofp13
from os_ken.ofproto import ofproto_v1_3_parser as parser13

from ots_virtual import protocol as ots_protocol
from ots_virtual import roles as ots_roles
from topology.rule_plan import ALL_BITS, OF13, Band

OF10_VERSION = ofp10.OFP_VERSION
OF13_VERSION = ofp13.OFP_VERSION

#: message classes that change what a switch does (refused while the southbound's gate is closed);
#: every other message (stats, echo, barrier, role, port-desc, the OTS capability request) only reads
_CHANGES = frozenset({"OFPFlowMod", "OFPMeterMod", "OFPGroupMod", "OFPPacketOut", "OFPPortMod", "OFPTableMod"})


def is_change(msg: Any) -> bool:
    """True if ``msg`` changes switch state or the data plane (a flow/meter/group/port mod, a packet-out)."""
    return type(msg).__name__ in _CHANGES


def name(msg: Any) -> str:
    """The message's type as counted by the southbound (``OFPFlowMod``, ``OFPBarrierRequest``...)."""
    return type(msg).__name__


# ---- OpenFlow 1.3 pieces ------------------------------------------------------------------------
def match(fields: Mapping[str, Any] | None = None) -> Any:
    """An OF1.3 OXM match from ``{field: value}`` (``eth_dst``, ``ipv4_src``, ``tcp_dst``...)."""
    return parser13.OFPMatch(**dict(fields or {}))


def output(port: int) -> Any:
    """Output to ``port``."""
    return parser13.OFPActionOutput(port)


def to_controller(max_len: int | None = None) -> Any:
    """Output the whole packet to the controller (no buffering on the switch); with ``max_len`` only its
    first ``max_len`` bytes (enough for the headers when only they are read)."""
    return parser13.OFPActionOutput(ofp13.OFPP_CONTROLLER, ofp13.OFPCML_NO_BUFFER if max_len is None else max_len)


def set_eth_dst(mac: str) -> Any:
    """Rewrite the destination MAC (the monitor's learn copies)."""
    return parser13.OFPActionSetField(eth_dst=mac)


def _instructions(actions: Sequence[Any], meter: int | None) -> list:
    inst = [parser13.OFPInstructionActions(ofp13.OFPIT_APPLY_ACTIONS, list(actions))]
    if meter is not None:  # the packets pass the meter before the actions
        inst.insert(0, parser13.OFPInstructionMeter(meter, ofp13.OFPIT_METER))
    return inst


# ---- OpenFlow 1.3 rules -------------------------------------------------------------------------
def flow_add(cookie: int, priority: int, fields: Mapping[str, Any] | None, actions: Sequence[Any], *,
             table: int = 0, meter: int | None = None, idle_timeout: int = 0) -> Any:
    """OFPFC_ADD of ``fields -> [meter] apply actions`` (overwrites a rule with the same match and priority)."""
    return parser13.OFPFlowMod(datapath=None, cookie=cookie, table_id=table, priority=priority,
                               match=match(fields), idle_timeout=idle_timeout,
                               instructions=_instructions(actions, meter))


def flow_delete(cookie: int, cookie_mask: int = ALL_BITS, fields: Mapping[str, Any] | None = None) -> Any:
    """OFPFC_DELETE in every table of the rules that ``fields`` covers and whose cookie matches under
    ``cookie_mask`` (each app deletes only its own rules)."""
    return parser13.OFPFlowMod(datapath=None, cookie=cookie, cookie_mask=cookie_mask, command=ofp13.OFPFC_DELETE,
                               table_id=ofp13.OFPTT_ALL, priority=0, out_port=ofp13.OFPP_ANY,
                               out_group=ofp13.OFPG_ANY, match=match(fields))


def flow_delete_strict(cookie: int, priority: int, fields: Mapping[str, Any] | None, *, table: int = 0,
                       cookie_mask: int = ALL_BITS) -> Any:
    """OFPFC_DELETE_STRICT of exactly one rule (its match, priority, table and cookie)."""
    return parser13.OFPFlowMod(datapath=None, cookie=cookie, cookie_mask=cookie_mask,
                               command=ofp13.OFPFC_DELETE_STRICT, table_id=table, priority=priority,
                               out_port=ofp13.OFPP_ANY, out_group=ofp13.OFPG_ANY, match=match(fields))


def band_rule(band: Band, ident: int, priority: int, fields: Mapping[str, Any], out_port: int | None, *,
              delete: bool = False, table: int | None = None, meter: int | None = None,
              group: int | None = None) -> Any:
    """One rule of a :mod:`rule_plan` band: ADD (overwrite) ``fields -> [meter] output`` (or, with
    ``group``, ``-> group``), or with ``delete`` a DELETE_STRICT of exactly that rule. ValueError for a
    priority outside the band."""
    if band.protocol != OF13:
        raise ValueError(f"band {band.name!r} is not an OpenFlow 1.3 band")
    band.priority(priority - band.low)  # refuses a priority outside the band
    table_id = band.table if table is None else table
    if delete:
        return flow_delete_strict(band.cookie(ident), priority, fields, table=table_id)
    if group is not None:
        actions = [to_group(group)]
    else:
        actions = [output(out_port)] if out_port is not None else []
    return flow_add(band.cookie(ident), priority, fields, actions, table=table_id, meter=meter)


def to_group(group_id: int) -> Any:
    """Apply group ``group_id`` (a fast-failover group picks the output)."""
    return parser13.OFPActionGroup(group_id)


def failover_group(group_id: int, ports: Sequence[int], command: str) -> Any:
    """OFPGC ``add`` / ``modify`` an OFPGT_FF group with one bucket per port (output to it, watching it),
    in preference order, or ``delete`` it: the switch sends on the first bucket whose port is live."""
    cmd = {"add": ofp13.OFPGC_ADD, "modify": ofp13.OFPGC_MODIFY, "delete": ofp13.OFPGC_DELETE}[command]
    buckets = [] if command == "delete" else [
        parser13.OFPBucket(weight=0, watch_port=p, watch_group=ofp13.OFPG_ANY, actions=[output(p)]) for p in ports]
    return parser13.OFPGroupMod(datapath=None, command=cmd, type_=ofp13.OFPGT_FF, group_id=group_id,
                                buckets=buckets)


METER_BURST_S = 0.1  # a reservation's meter lets this much of its rate through at once (at least 4 frames)


def meter_burst_kbit(kbps: int) -> int:
    """The drop band's burst: ``METER_BURST_S`` of the rate, at least four 1,500-byte frames. Without
    OFPMF_BURST the switch picks its own (userspace OVS: a whole second of the rate), and a sharer sending
    far beyond its meter then pours a second's worth into the shared circuit at once."""
    return max(int(kbps * METER_BURST_S), 48)


def meter_mod(meter_id: int, kbps: int | None, command: str) -> Any:
    """OFPMC ``add`` / ``modify`` a drop meter of ``kbps`` kbit/s, or ``delete`` it."""
    cmd = {"add": ofp13.OFPMC_ADD, "modify": ofp13.OFPMC_MODIFY, "delete": ofp13.OFPMC_DELETE}[command]
    bands = [] if kbps is None else [parser13.OFPMeterBandDrop(rate=int(kbps), burst_size=meter_burst_kbit(int(kbps)))]
    return parser13.OFPMeterMod(datapath=None, command=cmd, flags=ofp13.OFPMF_KBPS | ofp13.OFPMF_BURST,
                                meter_id=meter_id, bands=bands)


def packet_out(port: int, data: bytes) -> Any:
    """A frame from the controller out of ``port``."""
    return parser13.OFPPacketOut(datapath=None, buffer_id=ofp13.OFP_NO_BUFFER, in_port=ofp13.OFPP_CONTROLLER,
                                 actions=[output(port)], data=data)


def packet_out_table(in_port: int, data: bytes) -> Any:
    """A frame run through the switch's table 0 as if it came in on ``in_port`` (data-plane probes)."""
    return parser13.OFPPacketOut(datapath=None, buffer_id=ofp13.OFP_NO_BUFFER, in_port=in_port,
                                 actions=[output(ofp13.OFPP_TABLE)], data=data)


# ---- OpenFlow 1.3 requests (read only) ----------------------------------------------------------
def echo_request(data: bytes) -> Any:
    """An ECHO_REQUEST carrying ``data`` (the monitor's control-channel delay)."""
    return parser13.OFPEchoRequest(None, data)


def keepalive_echo(datapath: Any) -> Any:
    """The keep-alive ECHO_REQUEST (no data) in the datapath's own version: OF1.3 switch or OF1.0 OTS
    (os-ken's echo loop, as patched by :func:`app.controller.compat.patch_idle_keepalive`, sends it)."""
    return datapath.ofproto_parser.OFPEchoRequest(datapath)


def port_desc_request() -> Any:
    """PORT_DESC multipart request (an OF1.3 switch's ports)."""
    return parser13.OFPPortDescStatsRequest(None, 0)


def queue_stats_request() -> Any:
    """QUEUE_STATS of every queue of every port."""
    return parser13.OFPQueueStatsRequest(None, 0, ofp13.OFPP_ANY, ofp13.OFPQ_ALL)


def role_request(role: str, generation_id: int) -> Any:
    """ROLE_REQUEST ``master`` / ``slave`` / ``equal`` / ``nochange`` (several controllers)."""
    code = {"master": ofp13.OFPCR_ROLE_MASTER, "slave": ofp13.OFPCR_ROLE_SLAVE,
            "equal": ofp13.OFPCR_ROLE_EQUAL, "nochange": ofp13.OFPCR_ROLE_NOCHANGE}[role]
    return parser13.OFPRoleRequest(None, code, generation_id)


# ---- both versions --------------------------------------------------------------------------------
def barrier(version: int) -> Any:
    """A BARRIER_REQUEST (its reply: the switch has processed everything sent before it)."""
    return (parser13 if version == OF13_VERSION else parser10).OFPBarrierRequest(None)


def port_stats_request(version: int) -> Any:
    """PORT_STATS of every port."""
    if version == OF13_VERSION:
        return parser13.OFPPortStatsRequest(None, 0, ofp13.OFPP_ANY)
    return parser10.OFPPortStatsRequest(None, 0, ofp10.OFPP_NONE)


def flow_stats_request(version: int, cookie: int = 0, cookie_mask: int = 0) -> Any:
    """FLOW_STATS: on OF1.3 of the rules whose cookie matches (all with mask 0), in every table; on
    OF1.0 of every rule (OF1.0 has no cookie filter)."""
    if version == OF13_VERSION:
        return parser13.OFPFlowStatsRequest(None, 0, ofp13.OFPTT_ALL, ofp13.OFPP_ANY, ofp13.OFPG_ANY,
                                            cookie, cookie_mask, parser13.OFPMatch())
    return parser10.OFPFlowStatsRequest(None, 0, parser10.OFPMatch(), 0xFF, ofp10.OFPP_NONE)


# ---- OpenFlow 1.0 (OTS nodes) --------------------------------------------------------------------
def xcon_flow_mod(command: int, in_port: int | None, out_port: int | None, cookie: int, *,
                  only_to: int | None = None, fields: Mapping[str, Any] | None = None,
                  actions: Sequence[Any] = ()) -> Any:
    """An OF1.0 FLOW_MOD for an XCON ``in_port -> output:out_port`` (``command``: OFPFC_ADD or
    OFPFC_DELETE_STRICT); ``only_to``: a delete matches only the XCON that outputs to this port.
    ``fields``/``actions`` add arbitrary match fields or actions (the raw FLOW_MOD the OTS must refuse)."""
    match_fields = dict(fields or {})
    if in_port is not None:
        match_fields["in_port"] = in_port
    acts = [parser10.OFPActionOutput(out_port)] if out_port is not None else []
    return parser10.OFPFlowMod(
        datapath=None,
        match=parser10.OFPMatch(**match_fields),
        cookie=cookie,
        command=command,
        idle_timeout=0,
        hard_timeout=0,
        priority=ofp10.OFP_DEFAULT_PRIORITY,
        buffer_id=0xFFFFFFFF,
        out_port=ofp10.OFPP_NONE if only_to is None else only_to,
        flags=0,
        actions=acts + list(actions),
    )


def ots_caps_request() -> Any:
    """The OTS's capability request (an MLTE vendor message, :mod:`ots_virtual.protocol`)."""
    return ots_protocol.caps_request(None)


def nx_role_request(role: str, generation_id: int | None = None) -> Any:
    """Nicira's NXT_ROLE_REQUEST ``master`` / ``slave`` / ``other`` (= ``equal``) for an OTS (OF1.0 has no
    ROLE_REQUEST); ``generation_id``: mlte's extension, a stale one is refused (:mod:`ots_virtual.roles`).
    The answer is an NXT_ROLE_REPLY inside EventOFPVendor (:func:`ots_virtual.roles.parse_reply`)."""
    if role not in ots_roles.BY_NAME:
        raise ValueError(f"Nicira role must be master, slave or other, got {role!r}")
    return ots_roles.request(None, ots_roles.BY_NAME[role], generation_id)
