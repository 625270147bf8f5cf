"""Shared fixtures of the OTS agent tests: a foreign OF1.0 controller and agents connected to it
(the OVS side stays unconnected, or is a :class:`FakeBridge`: no root, no OVS)."""
from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest
from os_ken.ofproto import ofproto_v1_0 as ofp

from ots_virtual import of10
from ots_virtual.agent import OtsAgent
from tests.lib.of10_client import Of10Controller


@pytest.fixture
def ctl() -> Iterator[Of10Controller]:
    c = Of10Controller()
    yield c
    c.close()


@pytest.fixture
def start_agent(ctl: Of10Controller) -> Iterator[Callable[..., OtsAgent]]:
    """``start_agent(bridge, dpid, ports, **kw)``: an agent connected to ``ctl``, stopped after the test."""
    started: list[OtsAgent] = []

    def start(bridge: str, dpid: int, ports: dict[int, str], **kw) -> OtsAgent:
        a = OtsAgent(bridge, dpid, ports, ctl.address, claim=False, ovs_wait=0, **kw)
        a.start()
        started.append(a)
        ctl.wait_connected()
        return a

    yield start
    for a in started:
        a.stop()


class FakeBridge:
    """An OF1.0 switch standing in for the OVS bridge under an agent (no root, no OVS).

    It connects to the agent's OVS listener, answers FEATURES/BARRIER/ECHO/flow STATS, keeps the flow
    table (priority, in_port) -> out ports, and models each port as OVS on a veth does: a PORT_MOD or
    an operator's ``ip link set`` changes the admin state (:meth:`set_admin`), the far end's admin state
    the carrier (:meth:`set_peer`); every change goes to the agent as PORT_STATUS, as OVS sends it.
    """

    def __init__(self, ports: list[int], flows: dict[tuple[int, int], list[int]] | None = None,
                 admin: dict[int, bool] | None = None, peer: dict[int, bool] | None = None) -> None:
        self.flows = dict(flows or {})
        self.admin = {p: (admin or {}).get(p, False) for p in ports}  # the bridge port's admin state
        self.peer = {p: (peer or {}).get(p, True) for p in ports}  # the far end of its cable is up
        self.port_mods: list[tuple[int, bool]] = []  # (port, admin up) as the agent asked
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None

    def connect(self, agent: OtsAgent) -> None:
        self._sock = socket.create_connection(("127.0.0.1", agent.ovs_port))
        self._sock.sendall(of10.hello(1))
        threading.Thread(target=self._read, daemon=True).start()
        assert agent.ovs.ready.wait(10), "the agent never finished its resync with the fake bridge"

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()

    def phy(self, p: int) -> of10.PhyPort:
        link = self.admin[p] and self.peer[p]
        return of10.PhyPort(p, bytes([2, 0, 0, 0, 0, p]), f"fb-eth{p}",
                            0 if self.admin[p] else ofp.OFPPC_PORT_DOWN, 0 if link else ofp.OFPPS_LINK_DOWN)

    def _send(self, data: bytes) -> None:
        with self._lock:
            assert self._sock is not None
            self._sock.sendall(data)

    def _changed(self, p: int, before: tuple[int, int]) -> None:
        port = self.phy(p)
        if (port.config, port.state) != before:
            self._send(of10.port_status(ofp.OFPPR_MODIFY, port))

    def set_admin(self, p: int, up: bool) -> None:
        """``ip link set <port> up/down`` (or the agent's PORT_MOD): the port's admin state."""
        before = (self.phy(p).config, self.phy(p).state)
        self.admin[p] = up
        self._changed(p, before)

    def set_peer(self, p: int, up: bool) -> None:
        """The far end of port ``p``'s cable goes up or down: carrier follows."""
        before = (self.phy(p).config, self.phy(p).state)
        self.peer[p] = up
        self._changed(p, before)

    def xcons(self) -> dict[int, int]:
        return {i: outs[0] for (prio, i), outs in self.flows.items() if prio == 100 and len(outs) == 1}

    def _read(self) -> None:
        reader = of10.MessageReader()
        assert self._sock is not None
        try:
            while data := self._sock.recv(65536):
                for raw in reader.feed(data):
                    self._handle(raw)
        except OSError:
            pass

    def _handle(self, raw: bytes) -> None:
        h = of10.parse_header(raw)
        if h.msg_type == ofp.OFPT_ECHO_REQUEST:
            self._send(of10.echo_reply(h.xid, raw[8:]))
        elif h.msg_type == ofp.OFPT_FEATURES_REQUEST:
            self._send(of10.features_reply(h.xid, 0xFB, [self.phy(p) for p in sorted(self.admin)]))
        elif h.msg_type == ofp.OFPT_BARRIER_REQUEST:
            self._send(of10.barrier_reply(h.xid))
        elif h.msg_type == ofp.OFPT_PORT_MOD:
            port_no, _, config, mask, _ = struct.unpack_from(ofp.OFP_PORT_MOD_PACK_STR, raw, ofp.OFP_HEADER_SIZE)
            if mask & ofp.OFPPC_PORT_DOWN and port_no in self.admin:
                self.port_mods.append((port_no, not config & ofp.OFPPC_PORT_DOWN))
                self.set_admin(port_no, not config & ofp.OFPPC_PORT_DOWN)
        elif h.msg_type == ofp.OFPT_FLOW_MOD:
            fm = of10.decode_flow_mod(raw)
            in_port = None if fm.match.wildcards & ofp.OFPFW_IN_PORT else fm.match.in_port
            if fm.command == ofp.OFPFC_ADD:
                self.flows[(fm.priority, in_port or 0)] = [a.port for a in fm.actions if a.port is not None]
            elif fm.command == ofp.OFPFC_DELETE and in_port is None:
                self.flows.clear()
            elif fm.command == ofp.OFPFC_DELETE_STRICT:
                self.flows.pop((fm.priority, in_port or 0), None)
        elif h.msg_type == ofp.OFPT_STATS_REQUEST and of10.decode_stats_request(raw).stats_type == ofp.OFPST_FLOW:
            body = [of10.flow_stats(i, o, 0.0, 100, 0, 0, 0) for i, o in sorted(self.xcons().items())]
            for msg in of10.stats_replies(h.xid, ofp.OFPST_FLOW, body):
                self._send(msg)


@pytest.fixture
def fake_bridge() -> Iterator[Callable[..., FakeBridge]]:
    """``fake_bridge(agent, ports, flows=..., admin=..., peer=...)``: a FakeBridge connected to ``agent``."""
    made: list[FakeBridge] = []

    def make(agent: OtsAgent, ports: list[int], **kw) -> FakeBridge:
        b = FakeBridge(ports, **kw)
        made.append(b)
        b.connect(agent)
        return b

    yield make
    for b in made:
        b.close()
