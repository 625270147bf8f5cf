"""The southbound: OpenFlow messages out, confirmed domain results back (OF1.0 OTS and OF1.3 switches).

One object (an os-ken context shared by the apps, :data:`CONTEXT`) owns the connected datapaths, the
one way messages leave (:meth:`OpenFlowSouthbound.send`: every message the controller emits, built by
:mod:`app.controller.ofmsg`, counted, and refused while the :attr:`~OpenFlowSouthbound.gate` is closed
if it would change a switch) and every request that waits for an answer: a change followed by a BARRIER_REQUEST returns only once
the switch answered the barrier (with the OpenFlow ERRORs any of the messages drew), and a flow
statistics request returns the rules it matched. The thin app :class:`SouthboundApp` feeds it the
replies. Callers get values (:class:`Confirmed`, lists of :class:`FlowStat`) instead of HTTP-shaped
tuples; the control API and the update executor are adapters over it.

Everything runs on the eventlet hub: callers are greenthreads (API requests, plan steps) that block
on ``hub.Event``; the handlers only set events.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_0, ofproto_v1_3

from app.controller import ofmsg
from app.controller.driver_errors import BarrierTimeout, DriverError
from app.controller.guard import loud
from app.controller.journal import JOURNAL
from app.controller.network_view import CONTEXT as VIEW_CONTEXT
from app.controller.network_view import NetworkView
from app.controller.runtime import SETTINGS

LOG = logging.getLogger("mlte.controller.southbound")
CONTEXT = "mlte_southbound"
#: every app declares both (os-ken intersects the versions of all loaded apps)
OFP_VERSIONS = [ofproto_v1_0.OFP_VERSION, ofproto_v1_3.OFP_VERSION]


def error_names(err_type: int, code: int, version: int = ofproto_v1_0.OFP_VERSION) -> tuple[str, str]:
    """OpenFlow 1.0 names of an error type and code (``OFPET_FLOW_MOD_FAILED``, ``OFPFMFC_OVERLAP``)."""
    ofp = ofproto_v1_0 if version == ofproto_v1_0.OFP_VERSION else ofproto_v1_3
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
        "OFPET_GROUP_MOD_FAILED": "OFPGMFC_",
        "OFPET_METER_MOD_FAILED": "OFPMMFC_",
    }.get(type_name, "")
    code_name = next(
        (n for n in dir(ofp) if prefix and n.startswith(prefix) and getattr(ofp, n) == code), str(code)
    )
    return type_name, code_name


class GateClosed(DriverError):
    """The southbound's gate is closed: messages that change a switch are refused (not master)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 503)


def _open() -> bool:
    return True


@dataclass
class OfError:
    """An OpenFlow ERROR a switch sent back for one of our requests."""

    xid: int
    type: int
    code: int
    version: int = ofproto_v1_0.OFP_VERSION

    def to_json(self) -> dict:
        tn, cn = error_names(self.type, self.code, self.version)
        return {"xid": self.xid, "type": self.type, "code": self.code, "type_name": tn, "code_name": cn}


@dataclass
class Confirmed:
    """Messages sent and confirmed by a BARRIER_REPLY: the switch processed them (the datapath may
    still lag by a fraction of a millisecond: verify traffic in the data plane, never here)."""

    errors: list[OfError]
    sent_at: float
    confirmed_at: float

    @property
    def ok(self) -> bool:
        return not self.errors


@dataclass(frozen=True)
class FlowStat:
    """One rule as a switch reports it in a flow-statistics reply."""

    cookie: int
    priority: int
    table: int
    match: dict[str, Any]
    out_ports: tuple[int, ...]
    packets: int
    bytes: int


@dataclass
class _Waiter:
    xids: set[int]
    stats_request: bool = False  # an ERROR ends a stats request (no reply follows); a barrier still comes
    done: Any = field(default_factory=hub.Event)
    errors: list[OfError] = field(default_factory=list)
    stats: list[FlowStat] = field(default_factory=list)


def _outputs(actions: list) -> tuple[int, ...]:
    return tuple(int(a.port) for a in actions if hasattr(a, "port") and type(a).__name__ == "OFPActionOutput")


def flow_stat(ofp_version: int, st: Any) -> FlowStat:
    """A :class:`FlowStat` from an OF1.0 or OF1.3 flow-stats entry."""
    if ofp_version == ofproto_v1_3.OFP_VERSION:
        acts = [a for inst in st.instructions for a in getattr(inst, "actions", [])]
        match = dict(st.match.items())
    else:
        acts = list(st.actions)
        match = {"in_port": int(st.match.in_port)} if st.match.in_port else {}  # XCONs match in_port only
    return FlowStat(int(st.cookie), int(st.priority), int(getattr(st, "table_id", 0)), match, _outputs(acts),
                    int(st.packet_count), int(st.byte_count))


class OpenFlowSouthbound:
    """Datapaths, the one way out (:meth:`send`) and waits for answers (barriers, errors, flow statistics)."""

    def __init__(self, barrier_timeout: float = 5.0) -> None:
        self.datapaths: dict[int, Any] = {}  # dpid -> connected os-ken Datapath (filled by the inventory)
        self.barrier_timeout = barrier_timeout
        self._waiters: dict[tuple[int, int], _Waiter] = {}
        # False refuses every message that changes a switch (:func:`ofmsg.is_change`); reads still go.
        # Open unless someone (the mastership of several controllers) decides otherwise.
        self.gate: Callable[[], bool] = _open
        # what left, by message type, by dpid and by the caller's kind; what the gate refused, by type
        self.sent_by_type: Counter[str] = Counter()
        self.sent_by_dpid: Counter[int] = Counter()
        self.sent_by_kind: Counter[str] = Counter()
        self.refused_by_type: Counter[str] = Counter()
        # XCON operations (install/remove with roll-back bookkeeping): the OTS driver app registers
        # itself here when it is loaded, so nobody has to look it up by name
        self.xcon_driver: Any = None

    # ---- connection registry ---------------------------------------------------------------------
    def connected(self, dp: Any) -> None:
        self.datapaths[dp.id] = dp

    def disconnected(self, dp: Any) -> None:
        if dp.id in self.datapaths and self.datapaths[dp.id] is dp:  # not a newer connection's
            del self.datapaths[dp.id]
        for (dpid, _xid), w in list(self._waiters.items()):  # nobody will answer them now
            if dpid == dp.id:
                w.done.set()

    def datapath(self, dpid: int) -> Any:
        return self.datapaths.get(dpid)

    def _dp(self, dpid: int) -> Any:
        dp = self.datapaths.get(dpid)
        if dp is None:
            raise DriverError(f"datapath {dpid:016x} is not connected", 409)
        return dp

    # ---- the one way out -----------------------------------------------------------------------------
    def send(self, target: int | Any, msgs: Sequence[Any], kind: str = "other") -> float:
        """Send ``msgs`` (built by :mod:`app.controller.ofmsg`) in order to ``target`` (a dpid or a
        connected Datapath) without waiting; returns when they left (``time.time()``).

        Every OpenFlow message of the controller leaves here: the datapath is bound, each message is
        counted by type, by dpid and by ``kind`` (who sent it). While :attr:`gate` is closed a batch
        holding any state-changing message is refused whole (nothing sent, :class:`GateClosed`).
        DriverError if the dpid is not connected."""
        dp = self._dp(target) if isinstance(target, int) else target
        msgs = list(msgs)
        if not self.gate() and any(ofmsg.is_change(m) for m in msgs):
            self.refused_by_type.update(ofmsg.name(m) for m in msgs)
            raise GateClosed(f"southbound gate closed: {len(msgs)} message(s) to {dp.id:016x} refused")
        for m in msgs:
            if m.datapath is None:
                m.datapath = dp
            dp.send_msg(m)
            self.sent_by_type[ofmsg.name(m)] += 1
        self.sent_by_dpid[dp.id] += len(msgs)
        self.sent_by_kind[kind] += len(msgs)
        return time.time()

    # ---- requests (greenthreads) ---------------------------------------------------------------
    def confirm(self, dpid: int, msgs: list, timeout: float | None = None, kind: str = "confirm") -> Confirmed:
        """Send ``msgs`` then a BARRIER_REQUEST; wait for its reply. BarrierTimeout if none comes,
        DriverError if the switch is not (or no longer) connected (GateClosed: refused, nothing sent)."""
        dp = self._dp(dpid)
        for m in msgs:
            dp.set_xid(m)
        barrier = ofmsg.barrier(dp.ofproto.OFP_VERSION)
        dp.set_xid(barrier)
        waiter = _Waiter(xids={m.xid for m in msgs})
        self._waiters[(dpid, barrier.xid)] = waiter
        limit = self.barrier_timeout if timeout is None else timeout
        sent = time.time()
        try:
            self.send(dp, [*msgs, barrier], kind)
            if not waiter.done.wait(timeout=limit):
                raise BarrierTimeout(f"no BARRIER_REPLY from {dpid:016x} within {limit}s")
            if self.datapaths.get(dpid) is not dp:
                raise DriverError(f"datapath {dpid:016x} disconnected before it answered", 409)
            hub.sleep(0)  # an ERROR queued just before the reply is handled first
            return Confirmed(waiter.errors, sent, time.time())
        finally:
            self._waiters.pop((dpid, barrier.xid), None)

    def flow_stats(self, dpid: int, cookie: int = 0, cookie_mask: int = 0,
                   timeout: float | None = None, kind: str = "flow_stats") -> list[FlowStat]:
        """The rules of an OF1.3 switch whose cookie matches (every rule with mask 0); of an OF1.0 OTS
        every rule (OF1.0 has no cookie filter). Raises the DriverError the request met."""
        (answer,) = self.flow_stats_many([(dpid, cookie, cookie_mask)], timeout, kind)
        if isinstance(answer, DriverError):
            raise answer
        return answer

    def flow_stats_many(self, queries: Sequence[tuple[int, int, int]], timeout: float | None = None,
                        kind: str = "flow_stats") -> list[list[FlowStat] | DriverError]:
        """:meth:`flow_stats` of each ``(dpid, cookie, cookie_mask)``, the requests sent together and the
        replies awaited together: one round trip for all, where one after the other costs one each (a
        verify step reads every rule of a path that crosses 18 switches every poll). Each answer is its
        stats or the DriverError that request met (not connected, refused, no reply in time)."""
        limit = self.barrier_timeout if timeout is None else timeout
        out: list[list[FlowStat] | DriverError] = []
        sent: dict[int, tuple[int, int, _Waiter]] = {}  # index in queries -> (dpid, xid, waiter)
        try:
            for dpid, cookie, mask in queries:
                try:
                    dp = self._dp(dpid)
                    req = ofmsg.flow_stats_request(dp.ofproto.OFP_VERSION, cookie, mask)
                    dp.set_xid(req)
                    waiter = _Waiter(xids={req.xid}, stats_request=True)
                    self._waiters[(dpid, req.xid)] = waiter
                    sent[len(out)] = (dpid, req.xid, waiter)
                    self.send(dp, [req], kind)
                except DriverError as exc:
                    unsent = sent.pop(len(out), None)
                    if unsent is not None:
                        self._waiters.pop((unsent[0], unsent[1]), None)
                    out.append(exc)
                    continue
                out.append([])
            deadline = time.monotonic() + limit
            for i, (dpid, _xid, waiter) in sent.items():
                if not waiter.done.wait(timeout=max(0.0, deadline - time.monotonic())):
                    out[i] = BarrierTimeout(f"no FLOW_STATS reply from {dpid:016x} within {limit}s")
                elif waiter.errors:
                    out[i] = DriverError(f"{dpid:016x} refused the flow statistics request: {waiter.errors}", 422)
                else:
                    out[i] = waiter.stats
        finally:
            for dpid, xid, _waiter in sent.values():
                self._waiters.pop((dpid, xid), None)
        return out

    # ---- replies (handlers of SouthboundApp) --------------------------------------------------
    def on_barrier(self, dpid: int, xid: int) -> None:
        w = self._waiters.get((dpid, xid))
        if w is not None:
            w.done.set()

    def on_error(self, dpid: int, xid: int, err_type: int, code: int,
                 version: int = ofproto_v1_0.OFP_VERSION) -> OfError:
        err = OfError(xid, err_type, code, version)
        for (wdpid, _), w in self._waiters.items():
            if wdpid == dpid and xid in w.xids:
                w.errors.append(err)
                if w.stats_request:
                    w.done.set()  # a refused stats request gets no reply
        return err

    def on_flow_stats(self, dpid: int, xid: int, ofp_version: int, body: list, more: bool) -> None:
        w = self._waiters.get((dpid, xid))
        if w is None:
            return
        w.stats.extend(flow_stat(ofp_version, st) for st in body)
        if not more:
            w.done.set()


class SouthboundApp(app_manager.OSKenApp):
    """Feeds BARRIER_REPLY, ERROR and FLOW_STATS replies to the shared :class:`OpenFlowSouthbound`."""

    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {CONTEXT: OpenFlowSouthbound, VIEW_CONTEXT: NetworkView}

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_southbound"
        self.southbound: OpenFlowSouthbound = kwargs[CONTEXT]
        self.southbound.barrier_timeout = float(SETTINGS.controller["barrier_timeout"])

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    @loud
    def _barrier(self, ev) -> None:
        self.southbound.on_barrier(ev.msg.datapath.id, ev.msg.xid)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    @loud
    def _error(self, ev) -> None:
        msg = ev.msg
        dpid = msg.datapath.id
        err = self.southbound.on_error(dpid, msg.xid, msg.type, msg.code, msg.datapath.ofproto.OFP_VERSION)
        JOURNAL.add("of_error", dpid=dpid, **err.to_json())
        LOG.warning("OpenFlow error from %016x: %s", dpid, err.to_json())

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    @loud
    def _flow_stats(self, ev) -> None:
        msg = ev.msg
        dp = msg.datapath
        ofp = dp.ofproto  # OF1.3 multipart replies; OF1.0 stats replies
        more = bool(msg.flags & getattr(ofp, "OFPMPF_REPLY_MORE", getattr(ofp, "OFPSF_REPLY_MORE", 1)))
        self.southbound.on_flow_stats(dp.id, msg.xid, dp.ofproto.OFP_VERSION, list(msg.body), more)
