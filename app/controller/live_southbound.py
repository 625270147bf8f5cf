"""The update executor's southbound (:class:`app.update.southbound.Southbound`) on the running controller.

A thin adapter: XCONs go through the OTS driver (its barrier waits for the provisioning delay and
its bookkeeping keeps the network view's XCON table right), packet rules through
:class:`OpenFlowSouthbound` (FLOW_MOD + BARRIER), waits read the network view that the inventory
and LLDP apps keep current, counters come from OpenFlow 1.3 flow statistics filtered by cookie.
Calls block the calling greenthread only (``hub.sleep`` while polling), never the hub.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_0 as ofp10

from app.controller import ofmsg
from app.controller.driver_errors import BarrierTimeout, DriverError
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import OpenFlowSouthbound
from app.update.model import FlowRule, GroupSpec, ModelError, Outcome, Port, XconSpec, normalise_match
from topology.rule_plan import ALL_BITS, BANDS

_BANDS = {b.name: b for b in BANDS}
POLL_S = 0.002  # how often a wait looks at the view (PORT_STATUS / LLDP arrive as events meanwhile)


def _errors(errors: list[dict]) -> str:
    """OpenFlow errors (``OfError.to_json()``) as ``TYPE/CODE`` names."""
    return ", ".join(f"{e.get('type_name', e.get('type'))}/{e.get('code_name', e.get('code'))}" for e in errors)


def green_parallel(thunks: list) -> list:
    """Run plan steps as greenthreads and wait for all (the executor's ``run_parallel`` on the hub)."""
    if len(thunks) <= 1:
        return [t() for t in thunks]
    threads = [hub.spawn(t) for t in thunks]
    return [t.wait() for t in threads]


class LiveSouthbound:
    """:class:`app.update.southbound.Southbound` over the controller's shared objects."""

    def __init__(self, southbound: OpenFlowSouthbound, view: NetworkView) -> None:
        self.sb = southbound
        self.view = view
        self.meters: set[tuple[str, int]] = set()  # (switch, meter id) added by us: the next set modifies
        self.groups: set[tuple[str, int]] = set()  # (switch, group id) added by us: the next set modifies

    # ---- XCONs -----------------------------------------------------------------------------------
    @staticmethod
    def _xcon_call(what: str, ots: str, call: Any) -> Outcome:
        """Run a driver call; its result, refusal or silence as an :class:`Outcome`."""
        try:
            res = call()
        except BarrierTimeout as exc:
            return Outcome.timed_out(str(exc))
        except DriverError as exc:
            return Outcome.refused(str(exc))
        if isinstance(res, float):  # sent without a barrier (one-shot)
            return Outcome.done(res, sent_only=True)
        if not res.ok:
            return Outcome.refused(f"{ots} refused the {what}: {_errors(res.errors)}", errors=res.errors)
        return Outcome.done(res.applied_at, sent_at=res.sent_at)

    def install_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        driver = self.sb.xcon_driver
        if driver is None:
            return Outcome.refused("the OTS driver is not loaded")
        if not barrier:
            return self._xcon_nowait(x, add=True)
        return self._xcon_call("XCON", x.ots, lambda: driver.install(x.ots, x.in_port, x.out_port))

    def remove_xcon(self, x: XconSpec, barrier: bool = True) -> Outcome:
        driver = self.sb.xcon_driver
        if driver is None:
            return Outcome.refused("the OTS driver is not loaded")
        sw = self.view.by_name(x.ots)
        if sw is None:
            return Outcome.refused(f"unknown OTS {x.ots}")
        joined = {**self.view.unknown_xcons.get(sw.dpid, {}), **self.view.xcons.get(sw.dpid, {})}
        if joined.get(x.in_port) not in (None, x.out_port) or joined.get(x.out_port) not in (None, x.in_port):
            return Outcome.refused(f"{x.ots}:{x.in_port} is joined to another port, not {x.out_port}")
        if x.in_port not in joined and x.out_port not in joined:
            return Outcome.done(time.time(), absent=True)  # nothing there: removing it is a success
        if not barrier:
            return self._xcon_nowait(x, add=False)
        return self._xcon_call("delete", x.ots, lambda: driver.remove(x.ots, x.in_port))

    def _xcon_nowait(self, x: XconSpec, add: bool) -> Outcome:
        """One-shot: both directions sent with no barrier. Never confirmed, so they are recorded as
        XCONs in an unknown state (listed by ``GET /xcon``, removable, never probed by a scan)."""
        sw = self.view.by_name(x.ots)
        if sw is None:
            return Outcome.refused(f"unknown OTS {x.ots}")
        pairs = ((x.in_port, x.out_port), (x.out_port, x.in_port))
        try:
            msgs = [self.sb.xcon_driver.flow_mod(sw.dpid, ofp10.OFPFC_ADD if add else ofp10.OFPFC_DELETE_STRICT,
                                                 a, b if add else None) for a, b in pairs]
            sent = self.sb.send(sw.dpid, msgs, kind="plan")
        except DriverError as exc:
            return Outcome.refused(str(exc))
        if add:
            self.view.mark_unknown(sw.dpid, pairs)
        else:
            self.view.remove_xcons(sw.dpid, [a for a, _b in pairs])
        return Outcome.done(sent, sent_only=True)

    # ---- packet rules ------------------------------------------------------------------------------
    def _flow(self, r: FlowRule, delete: bool, barrier: bool) -> Outcome:
        sw = self.view.by_name(r.switch)
        if sw is None:
            return Outcome.refused(f"unknown switch {r.switch}")
        return self._confirmed(sw.dpid, f"{r.switch} refused {r.target()}", barrier, lambda: ofmsg.band_rule(
            _BANDS[r.band], r.ident, r.priority, r.match_dict(), None if delete else r.out_port,
            delete=delete, table=r.table, meter=None if delete else r.meter, group=None if delete else r.group))

    def _confirmed(self, dpid: int, refused: str, barrier: bool, build: Any) -> Outcome:
        """Send the message ``build()`` makes (with a barrier unless told not to) as an :class:`Outcome`."""
        try:
            msg = build()
            if not barrier:
                return Outcome.done(self.sb.send(dpid, [msg], kind="plan"), sent_only=True)
            done = self.sb.confirm(dpid, [msg], kind="plan")
        except BarrierTimeout as exc:
            return Outcome.timed_out(str(exc))
        except DriverError as exc:
            return Outcome.refused(str(exc))
        if not done.ok:
            return Outcome.refused(f"{refused}: " + _errors([e.to_json() for e in done.errors]))
        return Outcome.done(done.confirmed_at, sent_at=done.sent_at)

    def install_flow(self, r: FlowRule, barrier: bool = True) -> Outcome:
        return self._flow(r, False, barrier)

    def remove_flow(self, r: FlowRule, barrier: bool = True) -> Outcome:
        return self._flow(r, True, barrier)

    # ---- meters (elastic reservations) ---------------------------------------------------------------
    def _meter(self, switch: str, meter_id: int, kbps: int | None, command: str) -> Outcome:
        sw = self.view.by_name(switch)
        if sw is None:
            return Outcome.refused(f"unknown switch {switch}")
        return self._confirmed(sw.dpid, f"{switch} refused meter {meter_id} {command}", True,
                               lambda: ofmsg.meter_mod(meter_id, kbps, command))

    def set_meter(self, switch: str, meter_id: int, kbps: float) -> Outcome:
        """Add the meter (first time) or modify its rate (OFPMC_ADD of an existing meter is an error)."""
        key = (switch, meter_id)
        out = self._meter(switch, meter_id, int(kbps), "modify" if key in self.meters else "add")
        if out.ok:
            self.meters.add(key)
        return out

    def remove_meter(self, switch: str, meter_id: int) -> Outcome:
        self.meters.discard((switch, meter_id))
        return self._meter(switch, meter_id, None, "delete")

    # ---- fast-failover groups (1+1 protection) ---------------------------------------------------------
    def _group(self, g: GroupSpec, command: str, barrier: bool) -> Outcome:
        sw = self.view.by_name(g.switch)
        if sw is None:
            return Outcome.refused(f"unknown switch {g.switch}")
        return self._confirmed(sw.dpid, f"{g.switch} refused group {g.group_id} {command}", barrier,
                               lambda: ofmsg.failover_group(g.group_id, g.ports, command))

    def set_group(self, g: GroupSpec, barrier: bool = True) -> Outcome:
        """Add the group (first time) or modify its buckets (OFPGC_ADD of an existing group is an error;
        a group added before a restart of ours is modified once the switch says it exists)."""
        key = (g.switch, g.group_id)
        out = self._group(g, "modify" if key in self.groups else "add", barrier)
        if not out.ok and "GROUP_EXISTS" in out.error:
            out = self._group(g, "modify", barrier)
        if out.ok:
            self.groups.add(key)
        return out

    def remove_group(self, g: GroupSpec, barrier: bool = True) -> Outcome:
        self.groups.discard((g.switch, g.group_id))
        return self._group(g, "delete", barrier)

    # ---- waits on the view -----------------------------------------------------------------------
    def wait_ports_up(self, ports: Sequence[Port], stable_s: float, timeout_s: float) -> Outcome:
        """Every port up, with no PORT_STATUS change for ``stable_s`` (a flap restarts the clock)."""
        start = time.monotonic()
        since: float | None = None
        last: tuple[Any, ...] | None = None
        while True:
            now = time.monotonic()
            state = tuple(self._port_state(p) for p in ports)
            if state != last:  # any change (also up -> down -> up between two looks shows as a new object)
                last, since = state, (now if all(s is not None and s.up for s in state) else None)
            if since is not None and now - since >= stable_s:
                return Outcome.done(time.time(), stable_since=time.time() - (now - since))
            if now - start > timeout_s:
                down = [f"{sw}:{p}" for (sw, p), s in zip(ports, state, strict=True) if s is None or not s.up]
                what = f"ports {', '.join(down)} not up" if down else "ports not stable"
                return Outcome.refused(f"{what} within {timeout_s}s")
            hub.sleep(POLL_S)

    def _port_state(self, port: Port) -> Any:
        sw = self.view.by_name(port[0])
        return sw.ports.get(port[1]) if sw is not None else None

    def wait_link(self, a: Port, b: Port, timeout_s: float) -> Outcome:
        start = time.monotonic()
        while not self.view.has_link(a, b):
            if time.monotonic() - start > timeout_s:
                return Outcome.refused(f"LLDP did not see {a[0]}:{a[1]}-{b[0]}:{b[1]} within {timeout_s}s")
            hub.sleep(POLL_S)
        return Outcome.done(time.time())

    # ---- counters ----------------------------------------------------------------------------------
    def flow_packets(self, r: FlowRule) -> int | None:
        st = self._flow_stat(r)
        return None if st is None else st.packets

    def flow_bytes(self, r: FlowRule) -> int | None:
        """The rule's byte counter (an elastic reservation's measured demand)."""
        st = self._flow_stat(r)
        return None if st is None else st.bytes

    def flow_packets_many(self, rules: Sequence[FlowRule]) -> list[int | None]:
        """Every rule's packet counter from one FLOW_STATS request per switch and cookie, all sent together."""
        groups: dict[tuple[int, int], list[int]] = {}
        for i, r in enumerate(rules):
            sw = self.view.by_name(r.switch)
            if sw is not None:
                groups.setdefault((sw.dpid, r.cookie), []).append(i)
        out: list[int | None] = [None] * len(rules)
        keys = list(groups)
        answers = self.sb.flow_stats_many([(dpid, cookie, ALL_BITS) for dpid, cookie in keys])
        for key, stats in zip(keys, answers, strict=True):
            if isinstance(stats, DriverError):
                continue
            for i in groups[key]:
                st = _exactly(rules[i], stats)
                out[i] = None if st is None else st.packets
        return out

    def _flow_stat(self, r: FlowRule) -> Any:
        """FLOW_STATS of exactly ``r`` (cookie, table, priority, match), None if absent."""
        sw = self.view.by_name(r.switch)
        if sw is None:
            return None
        try:
            stats = self.sb.flow_stats(sw.dpid, r.cookie, ALL_BITS)
        except DriverError:
            return None
        return _exactly(r, stats)


def _exactly(r: FlowRule, stats: Sequence[Any]) -> Any:
    """The entry of ``stats`` that is exactly ``r`` (priority, table, match), None if none is."""
    for st in stats:
        if st.priority != r.priority or st.table != r.table:
            continue
        try:
            if normalise_match(st.match) == r.match:
                return st
        except ModelError:
            continue
    return None
