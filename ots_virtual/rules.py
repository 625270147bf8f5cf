"""The cross-connect (XCON) table of a virtual OTS and the checks every FLOW_MOD must pass.

Pure logic (no sockets, no OVS, no clock): the agent decodes a FLOW_MOD, asks
:meth:`XconTable.apply_flow_mod` what it means, sends the returned OpenFlow error if it raises
:class:`XconRejected`, and otherwise provisions the returned changes in order. A rejected message
changes nothing.

An OTS switches whole containers, so the only rule it can hold is "everything entering port A
leaves on port B": match exactly ``in_port`` (all other fields wildcarded), exactly one ``output``
action to another port of the same granularity, one rule per in_port, one rule per output port
(two inputs cannot be merged into one container), no timeouts.

OpenFlow 1.0 has no BAD_MATCH error type (it appeared in 1.1, where its number 4 is 1.0's
PORT_MOD_FAILED), so a match that is not "exactly in_port" is answered, as OVS does for matches it
cannot hold, with FLOW_MOD_FAILED / UNSUPPORTED. Errors chosen (type / code):

==========================================================  =================================
FLOW_MOD command unknown                                    FLOW_MOD_FAILED / BAD_COMMAND
buffer_id set (an OTS buffers no packets)                   BAD_REQUEST / BUFFER_UNKNOWN
match sets a field other than in_port                       FLOW_MOD_FAILED / UNSUPPORTED
match wildcards in_port                                     FLOW_MOD_FAILED / UNSUPPORTED
in_port is not a virtual port of this OTS                   FLOW_MOD_FAILED / UNSUPPORTED
an action other than OUTPUT                                 BAD_ACTION / BAD_TYPE
OUTPUT action with a length other than 8                    BAD_ACTION / BAD_LEN
more than one action                                        BAD_ACTION / TOO_MANY
no action (a drop rule)                                     BAD_ACTION / BAD_ARGUMENT
output to a reserved/unknown port or to in_port itself      BAD_ACTION / BAD_OUT_PORT
non-zero idle/hard timeout, OFPFF_EMERG                     FLOW_MOD_FAILED / EPERM
in_port and output port of different granularity            FLOW_MOD_FAILED / EPERM
ADD on an in_port that already has a different XCON         FLOW_MOD_FAILED / OVERLAP
output port already the output of another XCON              FLOW_MOD_FAILED / OVERLAP
==========================================================  =================================
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from os_ken.ofproto import ofproto_v1_0 as ofp

from ots_virtual.of10 import FlowMod

NO_BUFFER = 0xFFFFFFFF

# match fields other than in_port: (name, wildcard bit)
_FIELD_BITS: tuple[tuple[str, int], ...] = (
    ("dl_vlan", ofp.OFPFW_DL_VLAN),
    ("dl_src", ofp.OFPFW_DL_SRC),
    ("dl_dst", ofp.OFPFW_DL_DST),
    ("dl_type", ofp.OFPFW_DL_TYPE),
    ("nw_proto", ofp.OFPFW_NW_PROTO),
    ("tp_src", ofp.OFPFW_TP_SRC),
    ("tp_dst", ofp.OFPFW_TP_DST),
    ("dl_vlan_pcp", ofp.OFPFW_DL_VLAN_PCP),
    ("nw_tos", ofp.OFPFW_NW_TOS),
)


class XconRejected(Exception):
    """A FLOW_MOD the OTS cannot hold; carries the OpenFlow error type and code to send back."""

    def __init__(self, err_type: int, code: int, reason: str) -> None:
        super().__init__(reason)
        self.err_type = err_type
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class Xcon:
    """One cross-connect: everything entering ``in_port`` leaves on ``out_port``."""

    in_port: int
    out_port: int
    cookie: int = 0
    priority: int = ofp.OFP_DEFAULT_PRIORITY
    send_flow_removed: bool = False

    @property
    def ports(self) -> tuple[int, int]:
        return (self.in_port, self.out_port)


@dataclass(frozen=True)
class Change:
    """What the agent must provision: ``op`` is ``add``, ``modify`` (``old`` set) or ``delete``."""

    op: str
    xcon: Xcon
    old: Xcon | None = None


def exact_fields(wildcards: int) -> set[str]:
    """Names of the match fields *not* wildcarded, other than in_port (nw_src/nw_dst by prefix)."""
    exact = {name for name, bit in _FIELD_BITS if not wildcards & bit}
    if (wildcards & ofp.OFPFW_NW_SRC_MASK) >> ofp.OFPFW_NW_SRC_SHIFT < 32:
        exact.add("nw_src")
    if (wildcards & ofp.OFPFW_NW_DST_MASK) >> ofp.OFPFW_NW_DST_SHIFT < 32:
        exact.add("nw_dst")
    return exact


class XconTable:
    """The accepted XCONs of one OTS (including ones still being provisioned), keyed by in_port."""

    def __init__(self, ports: dict[int, str]) -> None:
        self.ports = dict(ports)  # port_no -> granularity
        self._by_in: dict[int, Xcon] = {}

    # --- queries ---------------------------------------------------------------------------

    def __iter__(self):
        return iter(sorted(self._by_in.values(), key=lambda x: x.in_port))

    def __len__(self) -> int:
        return len(self._by_in)

    def get(self, in_port: int) -> Xcon | None:
        return self._by_in.get(in_port)

    def lit_ports(self) -> set[int]:
        """Ports that carry light: in some XCON as in_port or output."""
        return {p for x in self._by_in.values() for p in x.ports}

    def _output_owner(self, port: int) -> Xcon | None:
        return next((x for x in self._by_in.values() if x.out_port == port), None)

    def adopt(self, in_port: int, out_port: int) -> Xcon | None:
        """Take over an XCON found on the bridge (a restarted agent); None if it is no valid XCON here
        (unknown port, granularity mismatch, or a port another XCON already uses that way)."""
        if in_port not in self.ports or out_port not in self.ports or in_port == out_port:
            return None
        if self.ports[in_port] != self.ports[out_port] or in_port in self._by_in or self._output_owner(out_port):
            return None
        x = self._by_in[in_port] = Xcon(in_port, out_port)
        return x

    # --- the checks ------------------------------------------------------------------------

    def apply_flow_mod(self, fm: FlowMod) -> list[Change]:
        """Check ``fm`` and update the table; return the changes to provision (maybe none).

        Raises :class:`XconRejected` (table unchanged) when ``fm`` is not an acceptable XCON rule.
        """
        if fm.command in (ofp.OFPFC_ADD, ofp.OFPFC_MODIFY, ofp.OFPFC_MODIFY_STRICT):
            return self._add_or_modify(fm)
        if fm.command in (ofp.OFPFC_DELETE, ofp.OFPFC_DELETE_STRICT):
            return self._delete(fm)
        raise XconRejected(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_COMMAND, f"unknown FLOW_MOD command {fm.command}")

    def check_xcon(self, fm: FlowMod) -> Xcon:
        """Validate an ADD/MODIFY as a cross-connect against the port set (not against busy ports)."""
        if fm.buffer_id != NO_BUFFER:
            raise XconRejected(ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BUFFER_UNKNOWN,
                               f"buffer_id {fm.buffer_id}: an OTS buffers no packets")
        wc = fm.match.wildcards
        extra = exact_fields(wc)
        if extra:
            raise XconRejected(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_UNSUPPORTED,
                               f"an XCON matches only in_port; match also sets {', '.join(sorted(extra))}")
        if wc & ofp.OFPFW_IN_PORT:
            raise XconRejected(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_UNSUPPORTED, "an XCON must match in_port")
        in_port = fm.match.in_port
        if in_port not in self.ports:
            raise XconRejected(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_UNSUPPORTED, f"in_port {in_port} is not a port of this OTS")
        for action in fm.actions:
            if action.type != ofp.OFPAT_OUTPUT:
                raise XconRejected(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_TYPE,
                                   f"action type {action.type}: an XCON has only an OUTPUT action")
            if action.length != ofp.OFP_ACTION_OUTPUT_SIZE:
                raise XconRejected(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_LEN, f"OUTPUT action of length {action.length}")
        if len(fm.actions) > 1:
            raise XconRejected(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_TOO_MANY,
                               f"{len(fm.actions)} actions: an XCON has exactly one OUTPUT")
        if not fm.actions:
            raise XconRejected(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_ARGUMENT, "no action: an OTS cannot drop")
        out_port = fm.actions[0].port
        if out_port not in self.ports or out_port == in_port:
            raise XconRejected(ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_OUT_PORT,
                               f"output port {out_port:#x} is not another port of this OTS")
        if fm.idle_timeout or fm.hard_timeout:
            raise XconRejected(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM, "XCONs are permanent: timeouts must be 0")
        if fm.flags & ofp.OFPFF_EMERG:
            raise XconRejected(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM, "no emergency flow table on an OTS")
        g_in, g_out = self.ports[in_port], self.ports[out_port]
        if g_in != g_out:
            raise XconRejected(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_EPERM,
                               f"granularity mismatch: port {in_port} is {g_in}, port {out_port} is {g_out}")
        return Xcon(in_port, out_port, fm.cookie, fm.priority, bool(fm.flags & ofp.OFPFF_SEND_FLOW_REM))

    def _add_or_modify(self, fm: FlowMod) -> list[Change]:
        new = self.check_xcon(fm)
        old = self._by_in.get(new.in_port)
        if old is not None and old.out_port == new.out_port:
            # same circuit: nothing to provision; keep the newest cookie/flags as OF ADD/MODIFY would
            self._by_in[new.in_port] = replace(new)
            return []
        if old is not None and fm.command == ofp.OFPFC_ADD:
            raise XconRejected(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP,
                               f"in_port {new.in_port} already cross-connected to {old.out_port} (delete or MODIFY it)")
        owner = self._output_owner(new.out_port)
        if owner is not None and owner.in_port != new.in_port:
            raise XconRejected(ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_OVERLAP,
                               f"port {new.out_port} is already the output of the XCON from {owner.in_port}")
        self._by_in[new.in_port] = new
        if old is None:
            return [Change("add", new)]
        return [Change("modify", new, old)]

    def _delete(self, fm: FlowMod) -> list[Change]:
        wc = fm.match.wildcards
        if exact_fields(wc):
            return []  # XCON entries wildcard every other field: none is as specific as this match
        if wc & ofp.OFPFW_IN_PORT:
            if fm.command == ofp.OFPFC_DELETE_STRICT:
                return []  # strict: only an all-wildcard entry would match, and there is none
            victims = list(self)
        else:
            x = self._by_in.get(fm.match.in_port)
            victims = [x] if x is not None else []
        if fm.out_port != ofp.OFPP_NONE:
            victims = [x for x in victims if x.out_port == fm.out_port]
        for x in victims:
            del self._by_in[x.in_port]
        return [Change("delete", x) for x in victims]
