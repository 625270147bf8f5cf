"""OTS driver app: cross-connects (XCONs) on OpenFlow 1.0 OTS nodes, with barriers and errors.

An XCON is one OF1.0 FLOW_MOD ``match in_port=A, actions=output:B``. Every change is followed by a
BARRIER_REQUEST; the OTS answers it only once the XCONs before it are *applied* (after the
provisioning delay), so a caller waiting here knows the circuit is lit. An OpenFlow ERROR for any
of the requests is returned to the caller (the control API turns it into a 4xx answer).
Capabilities come from the OTS VENDOR message and go into the capability store.

Reconciliation (docs/controller.md): when an OTS (re)connects, its XCONs are read back with an OF1.0
flow-stats request and *adopted* into the table (``xcon_adopted``); until that reply is in the OTS is
*reconciling* and the scan does not touch it (:meth:`OtsDriver.wait_reconciled`). Adopted XCONs on no
lit circuit are *orphans*: listed as such by ``GET /xcon`` and journalled (``xcon_orphan``), deleted
only by the operator.
"""
from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from os_ken.base import app_manager
from os_ken.controller import event as osken_event
from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_0

from app.controller import db_writer, events, ofmsg, reconcile
from app.controller.driver_errors import BarrierTimeout, DriverError
from app.controller.guard import loud
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.model import OTS, dpid_label
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import FlowStat, OfError, OpenFlowSouthbound
from app.controller.runtime import SETTINGS
from app.controller.services import Deadline
from ots_virtual import protocol
from topology import rule_plan
from topology.capabilities import CapabilityStore, NodeCapabilities

__all__ = ["BarrierTimeout", "DriverError", "OtsDriver", "XconResult"]  # errors re-exported from driver_errors

LOG = logging.getLogger("mlte.controller.ots")
CAPS = "capabilities"  # the CapabilityStore, a resource of the db_writer thread
COOKIE_XCON = rule_plan.XCON.cookie()


@dataclass
class _Readback:
    """An XCON read-back (flow-stats request through the southbound) of one OTS, under way or failed."""

    token: int  # tells this read-back's answer from an older one's (the OTS reconnected meanwhile)
    sent: float  # monotonic
    done: hub.Event = field(default_factory=hub.Event)
    touched: set[int] = field(default_factory=set)  # in_ports we changed since the read-back began
    error: str | None = None  # no answer or refused: the OTS stays unreconciled
    retry: bool = False  # the error was a timeout: the next scan tries again


class EventXconReadBack(osken_event.EventBase):
    """Internal: the answer to an XCON read-back (the driver sends it to itself from the greenthread
    that waited, so the table is changed in a handler)."""

    def __init__(self, dpid: int, token: int, stats: list[FlowStat] | None, error: str | None = None,
                 retry: bool = False) -> None:
        super().__init__()
        self.dpid, self.token, self.stats, self.error, self.retry = dpid, token, stats, error, retry


class EventOrphanCheck(osken_event.EventBase):
    """Internal: the adoptions have settled, look for orphan XCONs (sent by the driver to itself)."""


def xcon_of(st: FlowStat) -> tuple[int, int] | None:
    """(in_port, out_port) of a read-back rule that is an XCON (match in_port only, one output)."""
    if set(st.match) != {"in_port"} or len(st.out_ports) != 1:
        return None
    return int(st.match["in_port"]), st.out_ports[0]


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
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, MASTERSHIP: Mastership}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_ots_driver"
        self.mastership: Mastership = kwargs.get(MASTERSHIP) or Mastership()  # the leader writes capabilities
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.southbound.xcon_driver = self
        # dpid -> {in_port: out_port}, as confirmed by barriers (the network view's table, read-only)
        self.xcons: Mapping[int, dict[int, int]] = self.view.xcons
        # dpid -> {in_port: out_port} sent but never confirmed (barrier timed out): maybe applied, maybe
        # not; kept until a delete of that port is confirmed, so a roll-back can remove them
        self.unknown: Mapping[int, dict[int, int]] = self.view.unknown_xcons
        # dpid -> in_ports whose XCON was read back from the OTS (installed before this process knew)
        self.adopted: dict[int, set[int]] = {}
        # dpid -> the read-back under way (or refused); absent once the OTS is reconciled
        self.readback: dict[int, _Readback] = {}
        self._tokens = itertools.count(1)
        self.settle = reconcile.settle_seconds(SETTINGS.controller["link_timeout"],
                                               SETTINGS.controller["lldp_interval"])
        self._orphans_reported: set[tuple[int, int, int]] = set()
        # False from any switch (re)connecting until the check ``settle`` s later: a chain can only be
        # followed once its OTSes and the packet switches of its adaptations are back
        self.orphans_decided = True
        self._orphan_due: float | None = None
        self._orphan_timer = Deadline(lambda ev: self.send_event(self.name, ev), EventOrphanCheck,
                                      spawn=hub.spawn, sleep=hub.sleep)
        self._running = False
        self.barrier_timeout = float(SETTINGS.controller["barrier_timeout"])
        # the capability store (topology/); without a DB URL capabilities stay in memory only
        # (written in the controller's writer thread, db_writer: a locked database must not stall the hub)
        self.writer: db_writer.DbWriter | None = None
        if SETTINGS.db_url:
            self.writer = db_writer.shared()
            self.writer.open(CAPS, lambda db: CapabilityStore(db.engine))

    def start(self):
        self._running = True  # timers only in a running controller (unit tests call handlers directly)
        return super().start()

    def stop(self):
        self._running = False
        self._orphan_timer.stop()
        if self.writer is not None:
            self.writer = None
            db_writer.release()  # the last user flushes what is queued
        super().stop()

    def _store(self, caps: NodeCapabilities) -> None:
        if self.writer is not None and self.mastership.acting():
            self.writer.submit(db_writer.RECORD, CAPS, lambda store: store.upsert(caps))

    # ---- connection and capabilities ----------------------------------------------------------------
    @set_ev_cls(events.EventSwitchEnter)
    @loud
    def _switch_enter(self, ev: events.EventSwitchEnter) -> None:
        self.orphans_decided = False
        self._schedule_orphan_check()
        if ev.switch.kind != OTS:
            if self.writer is not None:
                # measured on the userspace datapath: FLOW_MOD + barrier ~1 ms (docs/controller.md)
                self._store(NodeCapabilities(dpid=ev.switch.dpid, switch_type="packet",
                                             switching_time=0.001, name=ev.switch.name))
            return
        dpid = ev.switch.dpid
        self.view.hold_xcons(dpid)  # busy until the read-back says what is lit (never reset to free)
        self.adopted[dpid] = set()
        self.southbound.send(dpid, [ofmsg.ots_caps_request()], kind="xcon")
        self._start_read_back(dpid)  # the XCONs outlive us: a restarted controller must know what is lit

    @set_ev_cls(events.EventMastership)
    @loud
    def _mastership(self, ev: events.EventMastership) -> None:
        """Elected: what every OTS holds now is read back and settled as after a reconnect (a follower saw
        only the XCONs there when it connected; the old leader changed them since)."""
        if not ev.master:
            return
        for sw in self.view.of_kind(OTS):
            if self.southbound.datapath(sw.dpid) is not None:
                self.view.hold_xcons(sw.dpid)
                self.adopted[sw.dpid] = set()
                self._start_read_back(sw.dpid)

    def _start_read_back(self, dpid: int) -> _Readback:
        old = self.readback.pop(dpid, None)
        if old is not None:
            old.error = "the OTS reconnected"
            old.done.set()
        rb = self.readback[dpid] = _Readback(next(self._tokens), time.monotonic())
        if self._running:  # unit tests deliver EventXconReadBack themselves
            hub.spawn(self._read_back, dpid, rb.token)
        return rb

    def _read_back(self, dpid: int, token: int) -> None:
        """Greenthread: ask the OTS for every XCON (OF1.0 flow stats), post the answer to ourselves."""
        try:
            stats = self.southbound.flow_stats(dpid, timeout=self.barrier_timeout)
            ev = EventXconReadBack(dpid, token, stats)
        except BarrierTimeout:
            ev = EventXconReadBack(dpid, token, None, f"no answer to the XCON read-back within "
                                                      f"{self.barrier_timeout:g}s", retry=True)
        except DriverError as exc:  # refused (e.g. an OTS without flow stats) or disconnected
            ev = EventXconReadBack(dpid, token, None, f"XCON read-back failed: {exc}")
        self.send_event(self.name, ev)

    @set_ev_cls(events.EventSwitchLeave)
    @loud
    def _switch_leave(self, ev: events.EventSwitchLeave) -> None:
        self.view.hold_xcons(ev.switch.dpid)  # its XCONs stay lit without us: their ports stay busy
        self.adopted.pop(ev.switch.dpid, None)
        rb = self.readback.pop(ev.switch.dpid, None)
        if rb is not None:
            rb.error = "the OTS disconnected"
            rb.done.set()
            self._orphan_check_after_read_back()

    # ---- read-back and adoption ---------------------------------------------------------------------
    @set_ev_cls(EventXconReadBack)
    @loud
    def _read_back_done(self, ev: EventXconReadBack) -> None:
        rb = self.readback.get(ev.dpid)
        if rb is None or rb.token != ev.token or rb.done.is_set():
            return  # an older read-back's answer (the OTS reconnected), or the OTS left
        if ev.stats is None:
            rb.error, rb.retry = f"{ev.error}: not reconciled", ev.retry
            rb.done.set()
            LOG.warning("OTS %016x: %s", ev.dpid, rb.error)
            JOURNAL.add("xcon_readback_failed", dpid=ev.dpid, error=rb.error)
            self._orphan_check_after_read_back()
            return
        entries = []
        for st in ev.stats:
            x = xcon_of(st)
            if x is None:
                LOG.warning("OTS %016x holds a rule that is no XCON (%s): ignored", ev.dpid, st)
            else:
                entries.append(x)
        self._adopt(ev.dpid, rb, entries)

    def _adopt(self, dpid: int, rb: _Readback, entries: list[tuple[int, int]]) -> None:
        # what was held as maybe applied (the OTS left, or a barrier timed out) is settled by what it reports
        held = {a: b for a, b in self.unknown.get(dpid, {}).items() if a not in rb.touched}
        self.view.settle_unknown(dpid, held)
        new = reconcile.adopt_xcons(entries, self.xcons.get(dpid, {}), self.unknown.get(dpid, {}), rb.touched)
        self.view.set_xcons(dpid, new)  # the graph has XCONs it did not have
        self.adopted.setdefault(dpid, set()).update(new)
        del self.readback[dpid]
        rb.done.set()
        sw = self.view.switches.get(dpid)
        name = sw.name if sw is not None else dpid_label(dpid)
        JOURNAL.add("xcon_adopted", ots=name, dpid=dpid, xcons=[[a, b] for a, b in sorted(new.items())],
                    read=len(entries), seconds=round(time.monotonic() - rb.sent, 4))
        if new:
            LOG.info("OTS %s: %d XCON(s) read back and adopted", name, len(new))
        self._orphan_check_after_read_back()

    def reconciling(self, dpid: int) -> bool:
        """True while the XCONs of OTS ``dpid`` are not read back (or the OTS refused the read-back)."""
        return dpid in self.readback

    def wait_reconciled(self, dpid: int, timeout: float) -> str | None:
        """Wait (at most ``timeout`` s) until OTS ``dpid`` is reconciled; None when it is, else why not.
        A read-back that timed out is tried again first."""
        rb = self.readback.get(dpid)
        if rb is None:
            return None
        if rb.done.is_set() and rb.retry:
            rb = self._start_read_back(dpid)
        if timeout > 0 and not rb.done.is_set():
            rb.done.wait(timeout=timeout)
        rb = self.readback.get(dpid)
        if rb is None:
            return None
        return rb.error or f"XCONs not read back after {timeout:g}s (reconciling)"

    def _touch(self, dpid: int, in_ports) -> None:
        """We change these ports now: a read-back still under way must not override our record."""
        rb = self.readback.get(dpid)
        if rb is not None:
            rb.touched.update(in_ports)

    # ---- orphans ------------------------------------------------------------------------------------
    def _schedule_orphan_check(self) -> None:
        """Decide orphans once no switch (re)connected for ``settle`` s: the other OTSes, whose XCONs
        complete a chain, and the packet switches, whose ports end it, reconnect within seconds."""
        self._orphan_due = time.monotonic() + self.settle
        if self._running:
            self._orphan_timer.push(self._orphan_due)

    @set_ev_cls(EventOrphanCheck)
    @loud
    def _orphan_check(self, ev: EventOrphanCheck | None) -> None:
        if self._orphan_due is not None and time.monotonic() < self._orphan_due:
            return  # another switch entered meanwhile: a newer check follows
        if self._reading_back():
            return  # a chain through an OTS not read back yet is not known: its answer checks again
        self.orphans_decided = True
        self.report_orphans()

    def _reading_back(self) -> bool:
        """True while some OTS's read-back has not answered (neither adopted nor failed)."""
        return any(not rb.done.is_set() for rb in self.readback.values())

    def _orphan_check_after_read_back(self) -> None:
        """A read-back answered (or failed): if the settle time is over and it was the last one under way,
        the deferred orphan check runs now. Measured in CI on a loaded machine: the read-backs of Fig. 2's
        three OTSes took 6 s after a restart, longer than the 5-s settle time, and an XCON whose chain ran
        through an OTS not read back yet was reported an orphan."""
        if not self.orphans_decided and self._orphan_due is not None:
            self._orphan_check(None)

    def report_orphans(self) -> list[dict]:
        """Journal (``xcon_orphan``) every adopted XCON on no lit circuit that was not reported yet."""
        inv = self.view
        out = []
        for d, a in sorted(self.orphans()):
            key = (d, a, self.xcons[d][a])
            if key in self._orphans_reported:
                continue
            self._orphans_reported.add(key)
            name = inv.switches[d].name
            out.append(JOURNAL.add("xcon_orphan", ots=name, in_port=a, out_port=key[2]))
            LOG.warning("orphan XCON %s %d->%d: adopted, on no known circuit; left alone (DELETE /xcon "
                        "removes it)", name, a, key[2])
        return out

    def _graph(self):
        """The merged multi-layer graph (adaptations from the scan / state file / static file, fibres,
        XCONs) of the shared network view."""
        return self.view.graph()[0]

    def orphans(self) -> set[tuple[int, int]]:
        """(dpid, in_port) of the adopted XCONs that lie on no lit circuit."""
        inv = self.view
        adopted = {d: {a: self.xcons[d][a] for a in ports if a in self.xcons.get(d, {})}
                   for d, ports in self.adopted.items() if ports and d in inv.switches}
        if not any(adopted.values()):
            return set()
        g = self._graph()
        names = {inv.switches[d].name: d for d in adopted}
        found = reconcile.orphan_xcons(g, {inv.switches[d].name: t for d, t in adopted.items()})
        return {(names[n], a) for n, a in found}

    @set_ev_cls(ofp_event.EventOFPVendor, MAIN_DISPATCHER)
    @loud
    def _vendor(self, ev) -> None:
        if not protocol.is_caps_reply(ev.msg):
            return
        caps = protocol.parse_caps_reply(ev.msg)
        dpid = ev.msg.datapath.id
        sw = self.view.switches.get(dpid)
        if sw is None:
            return
        own = sw.name == dpid_label(dpid) and caps.name and dpid not in SETTINGS.names
        # no name from the lab: the OTS's own (its bridge name)
        self.view.set_capabilities(dpid, json.loads(caps.to_json()), caps.name if own else None)
        JOURNAL.add("capabilities", dpid=dpid, name=sw.name)
        self._store(replace(NodeCapabilities.from_ots_report(sw.capabilities), name=sw.name))

    # ---- requests (called from control API greenthreads) ------------------------------------------
    def resolve(self, ots: str | int) -> int:
        """DPID of an OTS given by name, ``dp-…`` label or number; DriverError if unknown."""
        inv = self.view
        sw = inv.switches.get(ots) if isinstance(ots, int) else inv.by_name(str(ots))
        if sw is None:
            raise DriverError(f"unknown switch {ots!r}", 404)
        if sw.kind != OTS:
            raise DriverError(f"{sw.name} is a packet switch, not an OTS", 400)
        return sw.dpid

    def send_and_barrier(self, dpid: int, msgs: list) -> tuple[list[OfError], float, float | None]:
        """Send ``msgs`` then a barrier (through the shared southbound); wait for the BARRIER_REPLY;
        return (errors, sent, applied)."""
        done = self.southbound.confirm(dpid, msgs, timeout=self.barrier_timeout, kind="xcon")
        return done.errors, done.sent_at, done.confirmed_at

    def flow_mod(self, dpid: int, command: int, in_port: int | None, out_port: int | None,
                 only_to: int | None = None, **extra):
        """An OF1.0 FLOW_MOD for an XCON on a connected OTS (:func:`ofmsg.xcon_flow_mod`, bound to its
        datapath so it can be serialized before sending); ``extra``: ``match``/``actions`` let tests
        send non-XCON rules on purpose; ``only_to``: a DELETE matches only the XCON that outputs to this port."""
        dp = self.southbound.datapath(dpid)
        if dp is None:
            raise DriverError(f"datapath {dpid:016x} is not connected", 409)
        msg = ofmsg.xcon_flow_mod(command, in_port, out_port, COOKIE_XCON, only_to=only_to,
                                  fields=extra.pop("match", None), actions=extra.pop("actions", ()))
        msg.datapath = dp
        return msg

    def install(self, ots: str | int, in_port: int, out_port: int, bidirectional: bool = True) -> XconResult:
        """Cross-connect ``in_port``→``out_port`` (and back); wait until applied; roll back on error."""
        (result,) = self.install_many(ots, [(in_port, out_port)], bidirectional)
        if isinstance(result, BarrierTimeout):
            raise result
        return result

    def install_many(self, ots: str | int, hops: list[tuple[int, int]], bidirectional: bool = True,
                     remove_first: Sequence[tuple[int, int]] = ()) -> list[XconResult | BarrierTimeout]:
        """Cross-connect every ``(in_port, out_port)`` of ``hops`` on one OTS behind *one* barrier, so
        the OTS provisions them as one batch (one provisioning delay, not one per XCON: a restore that
        sets up Y 1↔2 and Y 3↔4 costs one delay). Per hop, all or nothing as :meth:`install`; a hop
        whose barrier timed out is a :class:`BarrierTimeout` in the result (its state is unknown).
        ``remove_first``: one-way XCONs ``in_port→out_port`` deleted in the same batch, before the
        adds, each only if it outputs there (the optical scan swaps one round's probes for the next's);
        they stay recorded unless the barrier answers without an error for them."""
        dpid = self.resolve(ots)
        ofp = ofproto_v1_0
        name = self.view.switches[dpid].name
        per_hop = [[(a, b)] + ([(b, a)] if bidirectional else []) for a, b in hops]
        msgs = [[self.flow_mod(dpid, ofp.OFPFC_ADD, a, b) for a, b in pairs] for pairs in per_hop]
        dels = [self.flow_mod(dpid, ofp.OFPFC_DELETE_STRICT, a, None, only_to=b) for a, b in remove_first]
        self._touch(dpid, [a for pairs in per_hop for a, _b in pairs] + [a for a, _b in remove_first])
        arrow = "<->" if bidirectional else "->"
        try:
            errors, sent, applied = self.send_and_barrier(dpid, dels + [m for hop in msgs for m in hop])
        except BarrierTimeout as exc:  # sent, never confirmed: record as unknown so it can be removed
            out: list[XconResult | BarrierTimeout] = []
            for (a, b), pairs in zip(hops, per_hop, strict=True):
                self.view.mark_unknown(dpid, pairs)
                JOURNAL.add("xcon_unknown", ots=name, in_port=a, out_port=b, error=str(exc))
                LOG.warning("XCON %s %d->%d: %s; state unknown (recorded for roll-back)", name, a, b, exc)
                out.append(BarrierTimeout(f"{exc}; XCON {name} {a}{arrow}{b} state unknown", pairs))
            return out
        failed = {e.xid for e in errors}
        for (a, b), m in zip(remove_first, dels, strict=True):
            if m.xid not in failed:
                self.view.remove_xcons(dpid, [a], b)
            JOURNAL.add("xcon_delete", ots=name, ports=[a], ok=m.xid not in failed)
        results: list[XconResult | BarrierTimeout] = []
        for (in_port, out_port), pairs, hop_msgs in zip(hops, per_hop, msgs, strict=True):
            xids = {m.xid for m in hop_msgs}
            mine = [e for e in errors if e.xid in xids]
            failed_xids = {e.xid for e in mine}
            changes = []
            for m, (a, b) in zip(hop_msgs, pairs, strict=True):
                ok = m.xid not in failed_xids
                changes.append({"in_port": a, "out_port": b, "ok": ok})
                if ok:
                    self.view.set_xcons(dpid, {a: b})
                    self.adopted.get(dpid, set()).discard(a)  # ours now: the controller set it
            self.view.settle_unknown(dpid, [a for a, _b in pairs])  # a barrier answered for them
            if mine:  # all or nothing: undo the directions that did go in
                undo = [c for c in changes if c["ok"]]
                if undo:
                    self._delete(dpid, [c["in_port"] for c in undo])
            JOURNAL.add("xcon_add", ots=name, in_port=in_port, out_port=out_port, ok=not mine,
                        errors=[e.to_json() for e in mine])
            results.append(XconResult(not mine, name, changes, [e.to_json() for e in mine], sent,
                                      None if mine else applied))
        return results

    def remove(self, ots: str | int, in_port: int, bidirectional: bool = True,
               only_to: int | None = None) -> XconResult:
        """Remove the XCON on ``in_port`` (and its reverse); wait until the OTS applied it. ``only_to``
        (one direction only): remove it only if it outputs to that port (a scan removing its probe
        can never take a different XCON with it)."""
        dpid = self.resolve(ots)
        ports = delete_ports(self.xcons.get(dpid, {}), self.unknown.get(dpid, {}), in_port, bidirectional)
        if only_to is not None and ports != [in_port]:
            raise ValueError("only_to applies to one direction (bidirectional=False)")
        errors, sent, applied = self._delete(dpid, ports, only_to)
        name = self.view.switches[dpid].name
        JOURNAL.add("xcon_delete", ots=name, ports=ports, ok=not errors)
        return XconResult(not errors, name, [{"in_port": p, "deleted": True} for p in ports],
                          [e.to_json() for e in errors], sent, None if errors else applied)

    def remove_many(self, ots: str | int, in_ports: list[int]) -> list[XconResult]:
        """Remove the bidirectional XCONs on ``in_ports`` of one OTS behind *one* barrier (one batch at
        the OTS: a bypass tears Y 1↔2 and Y 3↔4 down at once, not one barrier round trip after the
        other). An OpenFlow error fails every hop of the batch (the OTS answers a delete on a free
        port with no error, so one means the batch is in doubt)."""
        dpid = self.resolve(ots)
        per_hop = [delete_ports(self.xcons.get(dpid, {}), self.unknown.get(dpid, {}), p, True) for p in in_ports]
        errors, sent, applied = self._delete(dpid, [p for ports in per_hop for p in ports])
        name = self.view.switches[dpid].name
        out = []
        for ports in per_hop:
            JOURNAL.add("xcon_delete", ots=name, ports=ports, ok=not errors)
            out.append(XconResult(not errors, name, [{"in_port": p, "deleted": True} for p in ports],
                                  [e.to_json() for e in errors], sent, None if errors else applied))
        return out

    def _delete(self, dpid: int, in_ports: list[int], only_to: int | None = None):
        ofp = ofproto_v1_0
        msgs = [self.flow_mod(dpid, ofp.OFPFC_DELETE_STRICT, p, None, only_to=only_to) for p in in_ports]
        self._touch(dpid, in_ports)
        errors, sent, applied = self.send_and_barrier(dpid, msgs)
        if not errors:
            self.view.remove_xcons(dpid, in_ports, only_to)
            for p in in_ports:
                if p not in self.xcons.get(dpid, {}):
                    self.adopted.get(dpid, set()).discard(p)
        return errors, sent, applied

    def busy_ports(self, dpid: int) -> set[int]:
        """Ports of OTS ``dpid`` that are an end of an XCON (applied, adopted or unknown): never probed."""
        return self.view.busy_ots_ports(dpid)

    def known_port(self, dpid: int, in_port: int) -> bool:
        """True if ``in_port`` of OTS ``dpid`` has an XCON, applied or in an unknown state."""
        return in_port in self.xcons.get(dpid, {}) or in_port in self.unknown.get(dpid, {})

    def active(self) -> list[dict]:
        """Applied XCONs, then those in an unknown state (``"state": "unknown"``). Read-back ones carry
        ``"adopted": true`` and ``"orphan"``: on no lit circuit (null until decided, see
        :meth:`_schedule_orphan_check`)."""
        inv = self.view

        def name(d: int) -> str:
            return inv.switches[d].name if d in inv.switches else f"{d:016x}"

        orphans = self.orphans() if self.orphans_decided else set()
        out = []
        for d, table in sorted(self.xcons.items()):
            for a, b in sorted(table.items()):
                x = {"ots": name(d), "in_port": a, "out_port": b}
                if a in self.adopted.get(d, ()):
                    x.update(adopted=True, orphan=(d, a) in orphans if self.orphans_decided else None)
                out.append(x)
        out += [{"ots": name(d), "in_port": a, "out_port": b, "state": "unknown"}
                for d, table in sorted(self.unknown.items()) for a, b in sorted(table.items())]
        return out


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
