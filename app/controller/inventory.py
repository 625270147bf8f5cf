"""Inventory app: tracks connected datapaths, classifies them, and reports port changes.

A datapath speaking OpenFlow 1.0 whose ports are named ``<granularity>-<n>`` (contract section 3)
is an OTS; every OpenFlow 1.3 datapath is a packet switch. Other apps look the datapaths up here
(``datapath(dpid)``) and receive the classified, Datapath-free events of :mod:`app.controller.events`.
"""
from __future__ import annotations

import time
from collections.abc import Mapping

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.controller import Datapath
from os_ken.controller.handler import DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_0, ofproto_v1_3

from app.controller import events, ofmsg
from app.controller.guard import loud
from app.controller.journal import JOURNAL
from app.controller.model import OTS, PACKET, PortInfo, SwitchInfo, dpid_label
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OFP_VERSIONS, OpenFlowSouthbound
from app.controller.runtime import SETTINGS
from app.controller.view_changes import ViewChange
from topology.granularity import from_port_name

__all__ = ["OFP_VERSIONS", "Inventory", "classify", "port_speed_kbps"]


#: OF1.0 ``curr`` feature bits -> kbit/s (OF1.0 ports carry no speed field, only these flags)
_OF10_SPEEDS = ((ofproto_v1_0.OFPPF_10GB_FD, 10_000_000), (ofproto_v1_0.OFPPF_1GB_FD, 1_000_000),
                (ofproto_v1_0.OFPPF_1GB_HD, 1_000_000), (ofproto_v1_0.OFPPF_100MB_FD, 100_000),
                (ofproto_v1_0.OFPPF_100MB_HD, 100_000), (ofproto_v1_0.OFPPF_10MB_FD, 10_000),
                (ofproto_v1_0.OFPPF_10MB_HD, 10_000))


def port_speed_kbps(ofp, port) -> int:
    """Current speed of a port in kbit/s: OF1.3 ``curr_speed``, OF1.0 the fastest ``curr`` bit; 0 = none."""
    if ofp.OFP_VERSION == ofproto_v1_3.OFP_VERSION:
        return int(getattr(port, "curr_speed", 0) or 0)
    curr = int(getattr(port, "curr", 0) or 0)
    return next((kbps for bit, kbps in _OF10_SPEEDS if curr & bit), 0)


def _port_info(ofp, port) -> PortInfo:
    name = port.name.decode("utf-8", "replace") if isinstance(port.name, bytes) else str(port.name)
    up = not (port.state & ofp.OFPPS_LINK_DOWN) and not (port.config & ofp.OFPPC_PORT_DOWN)
    return PortInfo(port_no=port.port_no, name=name.rstrip("\x00"), hw_addr=port.hw_addr, up=up,
                    speed_kbps=port_speed_kbps(ofp, port), admin_down=bool(port.config & ofp.OFPPC_PORT_DOWN))


def classify(ofp_version: int, port_names: list[str]) -> str:
    """OTS if it speaks OF1.0 and names its ports like ``ODU2-3``; otherwise a packet switch."""
    if ofp_version == ofproto_v1_0.OFP_VERSION and port_names and all(
        from_port_name(n) is not None for n in port_names
    ):
        return OTS
    return PACKET


class Inventory(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound}
    _EVENTS = events.VIEW_EVENTS  # the change bus: every change of the network view, broadcast from here

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_inventory"
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.switches: Mapping[int, SwitchInfo] = self.view.switches  # the view owns them; we keep them current
        self.view.subscribe(self._announce)

    # ---- lookups used by the other apps and the control API -------------------------------------
    def datapath(self, dpid: int) -> Datapath | None:
        return self.southbound.datapath(dpid)

    def by_name(self, name: str) -> SwitchInfo | None:
        return self.view.by_name(name)

    def datapath_by_name(self, name: str) -> Datapath | None:
        """The connected datapath of the switch ``name`` (see :meth:`by_name`), if any."""
        sw = self.by_name(name)
        return self.datapath(sw.dpid) if sw is not None else None

    def of_kind(self, kind: str) -> list[SwitchInfo]:
        return self.view.of_kind(kind)

    def rename(self, names: dict[int, str]) -> None:
        self.view.rename(names)

    def _announce(self, change: ViewChange) -> None:
        """The change bus: one os-ken event per change of the network view, to whoever subscribed."""
        self.send_event_to_observers(events.event_of(change))

    # ---- connection life cycle -------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    @loud
    def _state_change(self, ev) -> None:
        dp = ev.datapath
        if dp.id is None:
            return
        if ev.state == MAIN_DISPATCHER:
            self.southbound.connected(dp)
            if dp.ofproto.OFP_VERSION == ofproto_v1_3.OFP_VERSION:
                self.southbound.send(dp, [ofmsg.port_desc_request()], kind="inventory")
            else:  # OF1.0: the FEATURES_REPLY carried the ports (os-ken stored them on dp.ports)
                self._enter(dp, list((dp.ports or {}).values()))
        elif ev.state == DEAD_DISPATCHER and self.southbound.datapath(dp.id) is dp:
            self.southbound.disconnected(dp)
            sw = self.view.remove_switch(dp.id)
            if sw is not None:
                JOURNAL.add("switch_leave", dpid=sw.dpid, name=sw.name, kind=sw.kind)

    @set_ev_cls(ofp_event.EventOFPPortDescStatsReply, MAIN_DISPATCHER)
    @loud
    def _port_desc(self, ev) -> None:
        dp = ev.msg.datapath
        if dp.id in self.switches:  # a later PORT_DESC (e.g. refresh): update ports only
            for port in ev.msg.body:
                self._update_port(dp, port, "modify")
            return
        self._enter(dp, list(ev.msg.body))

    def _enter(self, dp: Datapath, ports: list) -> None:
        ofp = dp.ofproto
        infos = [_port_info(ofp, p) for p in ports]
        local = [p.name for p in infos if p.port_no == ofp.OFPP_LOCAL]
        real = {p.port_no: p for p in infos if p.port_no < ofp.OFPP_MAX}
        kind = classify(ofp.OFP_VERSION, [p.name for p in real.values()])
        name = SETTINGS.names.get(dp.id) or (local[0] if local else dpid_label(dp.id))
        sw = SwitchInfo(dpid=dp.id, kind=kind, ofp_version=ofp.OFP_VERSION, name=name, ports=real,
                        local_port=local[0] if local else "")
        self.logger.info("switch %s (dpid %016x) entered as %s with %d ports", name, dp.id, kind, len(real))
        self.view.add_switch(sw)
        JOURNAL.add("switch_enter", dpid=dp.id, name=name, kind=kind)

    # ---- port changes ------------------------------------------------------------------------------
    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    @loud
    def _port_status(self, ev) -> None:
        msg = ev.msg
        ofp = msg.datapath.ofproto
        reason = {ofp.OFPPR_ADD: "add", ofp.OFPPR_DELETE: "delete"}.get(msg.reason, "modify")
        self._update_port(msg.datapath, msg.desc, reason)

    def _update_port(self, dp: Datapath, port, reason: str) -> None:
        sw = self.switches.get(dp.id)
        ofp = dp.ofproto
        if sw is None or port.port_no >= ofp.OFPP_MAX:
            return
        new = None if reason == "delete" else _port_info(ofp, port)
        change = self.view.set_port(dp.id, port.port_no, new, time.time())
        if change is None:
            return
        old = change.old
        JOURNAL.add(
            "port",
            dpid=sw.dpid,
            node=sw.name,
            kind=sw.kind,
            port=port.port_no,
            reason=reason,
            up=bool(new and new.up),
            was_up=bool(old and old.up),
        )
