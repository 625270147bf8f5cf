"""OTS driver app: cross-connects (XCONs) on OpenFlow 1.0 OTS nodes, with barriers and errors.

An XCON is one OF1.0 FLOW_MOD ``match in_port=A, actions=output:B``. Every change is followed by a
BARRIER_REQUEST; the OTS answers it only once the XCONs before it are *applied* (after the
provisioning delay), so a caller waiting here knows the circuit is lit. An OpenFlow ERROR for any
of the requests is returned to the caller (the control API turns it into a 4xx answer).
Capabilities come from the OTS VENDOR message and go into the capability store.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field, replace

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_0

from app.controller import db_writer, events, rule_plan
from app.controller.driver_errors import BarrierTimeout, DriverError
from app.controller.guard import loud
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.model import OTS, dpid_label
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.runtime import SETTINGS
from app.controller.southbound import CONTEXT as SOUTHBOUND
from app.controller.southbound import OpenFlowSouthbound
from ots_virtual import protocol
from topology.capabilities import CapabilityStore, NodeCapabilities

__all__ = ["BarrierTimeout", "DriverError", "OtsDriver", "XconResult"]  # errors re-exported from driver_errors

LOG = logging.getLogger("mlte.controller.ots")
CAPS = "capabilities"  # the CapabilityStore, a resource of the db_writer thread
COOKIE_XCON = rule_plan.XCON.cookie()


def error_names(err_type: int, code: int) -> tuple[str, str]:
    """OpenFlow 1.0 names of an error type and code (``OFPET_FLOW_MOD_FAILED``, ``OFPFMFC_OVERLAP``)."""
    ofp = ofproto_v1_0
    type_name = next(
        (n for n in dir(ofp) if n.startswith("OFPET_") and getattr(ofp, n) == err_type), str(err_type)
    )
    prefix = {
        "OFPET_HELLO_FAILED": "OFPHFC_",
        "OFPET_BAD_REQUEST": "OFPBRC_",
        "OFPET_BAD_ACTION": "OFPBAC_",
        "OFPET_FLOW_MOD_FAILED": "OFPFMFC_",
        "OFPET_PORT_MOD_FAILED": "OFPPMFC_",
        "OFPET_QUEUE_OP_FAILED": "OFPQOFC_",
    }.get(type_name, "")
    code_name = next(
        (n for n in dir(ofp) if prefix and n.startswith(prefix) and getattr(ofp, n) == code), str(code)
    )
    return type_name, code_name


@dataclass
class OfError:
    """An OpenFlow ERROR an OTS sent back for one of our requests."""

    xid: int
    type: int
    code: int

    def to_json(self) -> dict:
        tn, cn = error_names(self.type, self.code)
        return {"xid": self.xid, "type": self.type, "code": self.code, "type_name": tn, "code_name": cn}


@dataclass
class _Pending:
    xids: set[int]
    done: hub.Event = field(default_factory=hub.Event)
    errors: list[OfError] = field(default_factory=list)


@dataclass
class XconResult:
    """Outcome of an XCON change: ok, or the OpenFlow errors the OTS returned."""

    ok: bool
    ots: str
    changes: list[dict]
    errors: list[dict]
    sent_at: float
    applied_at: float | None

    def to_json(self) -> dict:
        return {
            "ok": self.ok,
            "ots": self.ots,
            "changes": self.changes,
            "errors": self.errors,
            "sent_at": self.sent_at,
            "applied_at": self.applied_at,
        }


class OtsDriver(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_ots_driver"
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.southbound.xcon_driver = self
        # dpid -> {in_port: out_port}, as confirmed by barriers (the network view's table)
        self.xcons: dict[int, dict[int, int]] = self.view.xcons
        # dpid -> {in_port: out_port} sent but never confirmed (barrier timed out): maybe applied, maybe
        # not; kept until a delete of that port is confirmed, so a roll-back can remove them
        self.unknown: dict[int, dict[int, int]] = self.view.unknown_xcons
        self._pending: dict[tuple[int, int], _Pending] = {}
        self.barrier_timeout = float(SETTINGS.controller["barrier_timeout"])
        # the capability store (topology/); without a DB URL capabilities stay in memory only
        # (written in the controller's writer thread, db_writer: a locked database must not stall the hub)
        self.writer: db_writer.DbWriter | None = None
        if SETTINGS.db_url:
            url = SETTINGS.db_url
            self.writer = db_writer.shared(int(SETTINGS.controller.get("db_queue_max", db_writer.DEFAULT_MAX_JOBS)))
            self.writer.open(CAPS, lambda: CapabilityStore(url))

    def stop(self):
        if self.writer is not None:
            self.writer = None
            db_writer.release()  # the last user flushes what is queued
        super().stop()

    def _store(self, caps: NodeCapabilities) -> None:
        if self.writer is not None:
            self.writer.submit(db_writer.RECORD, CAPS, lambda store: store.upsert(caps))

    def _inventory(self):
        return app_manager.lookup_service_brick("mlte_inventory")

    # ---- connection and capabilities ----------------------------------------------------------------
    @set_ev_cls(events.EventSwitchEnter)
    @loud
    def _switch_enter(self, ev: events.EventSwitchEnter) -> None:
        if ev.switch.kind != OTS:
            if self.writer is not None:
                # measured on the userspace datapath: FLOW_MOD + barrier ~1 ms (docs/controller.md)
                self._store(NodeCapabilities(dpid=ev.switch.dpid, switch_type="packet",
                                             switching_time=0.001, name=ev.switch.name))
            return
        self.xcons.setdefault(ev.switch.dpid, {})
        dp = self._inventory().datapath(ev.switch.dpid)
        dp.send_msg(protocol.caps_request(dp))

    @set_ev_cls(events.EventSwitchLeave)
    @loud
    def _switch_leave(self, ev: events.EventSwitchLeave) -> None:
        self.xcons.pop(ev.switch.dpid, None)
        self.unknown.pop(ev.switch.dpid, None)

    @set_ev_cls(ofp_event.EventOFPVendor, MAIN_DISPATCHER)
    @loud
    def _vendor(self, ev) -> None:
        if not protocol.is_caps_reply(ev.msg):
            return
        caps = protocol.parse_caps_reply(ev.msg)
        dpid = ev.msg.datapath.id
        sw = self._inventory().switches.get(dpid)
        if sw is None:
            return
        sw.capabilities = json.loads(caps.to_json())
        if sw.name == dpid_label(dpid) and caps.name and dpid not in SETTINGS.names:
            sw.name = caps.name  # no name from the lab: the OTS's own (its bridge name)
        JOURNAL.add("capabilities", dpid=dpid, name=sw.name)
        self._store(replace(NodeCapabilities.from_ots_report(sw.capabilities), name=sw.name))

    # ---- replies ------------------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    @loud
    def _error(self, ev) -> None:
        msg = ev.msg
        dpid = msg.datapath.id
        err = OfError(msg.xid, msg.type, msg.code)
        JOURNAL.add("of_error", dpid=dpid, **err.to_json())
        LOG.warning("OpenFlow error from %016x: %s", dpid, err.to_json())
        for (pdpid, _), pending in self._pending.items():
            if pdpid == dpid and msg.xid in pending.xids:
                pending.errors.append(err)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    @loud
    def _barrier(self, ev) -> None:
        pending = self._pending.get((ev.msg.datapath.id, ev.msg.xid))
        if pending is not None:
            pending.done.set()

    # ---- requests (called from control API greenthreads) ------------------------------------------
    def resolve(self, ots: str | int) -> int:
        """DPID of an OTS given by name, ``dp-…`` label or number; DriverError if unknown."""
        inv = self._inventory()
        sw = inv.switches.get(ots) if isinstance(ots, int) else inv.by_name(str(ots))
        if sw is None:
            raise DriverError(f"unknown switch {ots!r}", 404)
        if sw.kind != OTS:
            raise DriverError(f"{sw.name} is a packet switch, not an OTS", 400)
        return sw.dpid

    def send_and_barrier(self, dpid: int, msgs: list) -> tuple[list[OfError], float, float | None]:
        """Send ``msgs`` then a barrier; wait for the BARRIER_REPLY; return (errors, sent, applied)."""
        dp = self._inventory().datapath(dpid)
        if dp is None:
            raise DriverError(f"datapath {dpid:016x} is not connected", 409)
        for m in msgs:
            dp.set_xid(m)
        barrier = dp.ofproto_parser.OFPBarrierRequest(dp)
        dp.set_xid(barrier)
        pending = _Pending(xids={m.xid for m in msgs})
        self._pending[(dpid, barrier.xid)] = pending
        sent = time.time()
        try:
            for m in msgs:
                dp.send_msg(m)
            dp.send_msg(barrier)
            if not pending.done.wait(timeout=self.barrier_timeout):
                raise BarrierTimeout(f"no BARRIER_REPLY from {dpid:016x} within {self.barrier_timeout}s")
            hub.sleep(0)  # let an ERROR queued just before the reply be handled
            return pending.errors, sent, time.time()
        finally:
            self._pending.pop((dpid, barrier.xid), None)

    def flow_mod(self, dpid: int, command: int, in_port: int | None, out_port: int | None, **extra):
        """An OF1.0 FLOW_MOD for an XCON (``extra`` lets tests send non-XCON rules on purpose)."""
        dp = self._inventory().datapath(dpid)
        if dp is None:
            raise DriverError(f"datapath {dpid:016x} is not connected", 409)
        parser, ofp = dp.ofproto_parser, dp.ofproto
        match_fields = dict(extra.pop("match", {}))
        if in_port is not None:
            match_fields["in_port"] = in_port
        actions = [parser.OFPActionOutput(out_port)] if out_port is not None else []
        actions += extra.pop("actions", [])
        return parser.OFPFlowMod(
            datapath=dp,
            match=parser.OFPMatch(**match_fields),
            cookie=COOKIE_XCON,
            command=command,
            idle_timeout=0,
            hard_timeout=0,
            priority=ofp.OFP_DEFAULT_PRIORITY,
            buffer_id=0xFFFFFFFF,
            out_port=ofp.OFPP_NONE,
            flags=0,
            actions=actions,
        )

    def install(self, ots: str | int, in_port: int, out_port: int, bidirectional: bool = True) -> XconResult:
        """Cross-connect ``in_port``→``out_port`` (and back); wait until applied; roll back on error."""
        dpid = self.resolve(ots)
        ofp = ofproto_v1_0
        pairs = [(in_port, out_port)] + ([(out_port, in_port)] if bidirectional else [])
        msgs = [self.flow_mod(dpid, ofp.OFPFC_ADD, a, b) for a, b in pairs]
        name = self._inventory().switches[dpid].name
        try:
            errors, sent, applied = self.send_and_barrier(dpid, msgs)
        except BarrierTimeout as exc:  # sent, never confirmed: record as unknown so it can be removed
            record_unknown(self.unknown.setdefault(dpid, {}), pairs)
            JOURNAL.add("xcon_unknown", ots=name, in_port=in_port, out_port=out_port, error=str(exc))
            LOG.warning("XCON %s %d->%d: %s; state unknown (recorded for roll-back)", name, in_port, out_port, exc)
            arrow = "<->" if bidirectional else "->"
            raise BarrierTimeout(f"{exc}; XCON {name} {in_port}{arrow}{out_port} state unknown", pairs) from None
        failed_xids = {e.xid for e in errors}
        changes = []
        for m, (a, b) in zip(msgs, pairs, strict=True):
            ok = m.xid not in failed_xids
            changes.append({"in_port": a, "out_port": b, "ok": ok})
            if ok:
                self.xcons.setdefault(dpid, {})[a] = b
        for a, _b in pairs:
            self.unknown.get(dpid, {}).pop(a, None)  # a barrier answered for them: no longer unknown
        if errors:  # all or nothing: undo the directions that did go in
            undo = [c for c in changes if c["ok"]]
            if undo:
                self._delete(dpid, [c["in_port"] for c in undo])
        JOURNAL.add("xcon_add", ots=name, in_port=in_port, out_port=out_port, ok=not errors,
                    errors=[e.to_json() for e in errors])
        return XconResult(not errors, name, changes, [e.to_json() for e in errors], sent,
                          None if errors else applied)

    def remove(self, ots: str | int, in_port: int, bidirectional: bool = True) -> XconResult:
        """Remove the XCON on ``in_port`` (and its reverse); wait until the OTS applied it."""
        dpid = self.resolve(ots)
        ports = delete_ports(self.xcons.get(dpid, {}), self.unknown.get(dpid, {}), in_port, bidirectional)
        errors, sent, applied = self._delete(dpid, ports)
        name = self._inventory().switches[dpid].name
        JOURNAL.add("xcon_delete", ots=name, ports=ports, ok=not errors)
        return XconResult(not errors, name, [{"in_port": p, "deleted": True} for p in ports],
                          [e.to_json() for e in errors], sent, None if errors else applied)

    def _delete(self, dpid: int, in_ports: list[int]):
        ofp = ofproto_v1_0
        msgs = [self.flow_mod(dpid, ofp.OFPFC_DELETE_STRICT, p, None) for p in in_ports]
        errors, sent, applied = self.send_and_barrier(dpid, msgs)
        if not errors:
            for p in in_ports:
                self.xcons.get(dpid, {}).pop(p, None)
                self.unknown.get(dpid, {}).pop(p, None)
        return errors, sent, applied

    def known_port(self, dpid: int, in_port: int) -> bool:
        """True if ``in_port`` of OTS ``dpid`` has an XCON, applied or in an unknown state."""
        return in_port in self.xcons.get(dpid, {}) or in_port in self.unknown.get(dpid, {})

    def active(self) -> list[dict]:
        """Applied XCONs, then those in an unknown state (``"state": "unknown"``)."""
        inv = self._inventory()

        def name(d: int) -> str:
            return inv.switches[d].name if d in inv.switches else f"{d:016x}"

        out = [{"ots": name(d), "in_port": a, "out_port": b}
               for d, table in sorted(self.xcons.items()) for a, b in sorted(table.items())]
        out += [{"ots": name(d), "in_port": a, "out_port": b, "state": "unknown"}
                for d, table in sorted(self.unknown.items()) for a, b in sorted(table.items())]
        return out


def record_unknown(table: dict[int, int], pairs: list[tuple[int, int]]) -> None:
    """Remember XCON directions whose barrier timed out (``table``: in_port -> out_port)."""
    for a, b in pairs:
        table[a] = b


def delete_ports(applied: dict[int, int], unknown: dict[int, int], in_port: int, bidirectional: bool) -> list[int]:
    """The in_ports to delete for "remove the XCON on ``in_port``": it, and its reverse direction when
    that one points back (applied or unknown). A port with nothing recorded is still deleted: harmless."""
    ports = [in_port]
    if not bidirectional:
        return ports
    for table in (applied, unknown):
        peer = table.get(in_port)
        if peer is not None and peer != in_port and peer not in ports and \
                (applied.get(peer) == in_port or unknown.get(peer) == in_port):
            ports.append(peer)
    return ports
