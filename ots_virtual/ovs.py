"""The OVS bridge under a virtual OTS: configuring it, and the agent's OpenFlow 1.0 session to it.

The agent is the bridge's only controller: it listens on 127.0.0.1, points the bridge at itself
(``fail-mode=secure``, out-of-band, 1 s reconnect backoff) and drives it with plain OF1.0 through
os-ken's classes. :class:`OvsLink` owns the listening socket and the current session; it keeps the
bridge's port table (from FEATURES_REPLY and PORT_STATUS) and matches replies to requests by xid.
"""
from __future__ import annotations

import logging
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual import of10

LOG = logging.getLogger("ots_virtual.ovs")

XCON_PRIORITY = 100  # priority of XCON flows on the bridge; the drop-all flow has 0


class OvsError(RuntimeError):
    """The OVS bridge cannot be configured or did not answer."""

    user_error = True


def vsctl(*args: str) -> str:
    """Run ``ovs-vsctl`` (10 s timeout); raise OvsError with its stderr on failure."""
    cmd = ["ovs-vsctl", "--timeout=10", *args]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OvsError(f"{' '.join(cmd)}: {exc}") from None
    if res.returncode != 0:
        raise OvsError(f"{' '.join(cmd)}: {res.stderr.strip() or f'exit status {res.returncode}'}")
    return res.stdout.strip()


#: how long an agent waits for its bridge to appear: Mininet's batch start-up creates every bridge in
#: one ovs-vsctl call after the switches' start(), and the testbed starts each OTS agent in start()
BRIDGE_WAIT_S = 10.0


def _bridge_exists(bridge: str) -> bool:
    try:
        subprocess.run(["ovs-vsctl", "--timeout=10", "br-exists", bridge], check=True, timeout=15,
                       capture_output=True)
    except subprocess.CalledProcessError:
        return False
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OvsError(f"ovs-vsctl br-exists {bridge}: {exc}") from None
    return True


def claim_bridge(bridge: str, port: int, wait_s: float = BRIDGE_WAIT_S,
                 sleep: Callable[[float], None] = time.sleep) -> None:
    """Point ``bridge`` at the agent's listener on 127.0.0.1:``port`` (secure fail mode, OF1.0 enabled);
    waits up to ``wait_s`` for a bridge that is still being created."""
    tries = round(wait_s / 0.1)
    while not _bridge_exists(bridge):
        if tries <= 0:
            raise OvsError(f"OVS bridge {bridge!r} does not exist (waited {wait_s:g} s)")
        sleep(0.1)
        tries -= 1
    protocols = vsctl("get", "bridge", bridge, "protocols").strip("[]").replace('"', "")
    protos = [p.strip() for p in protocols.split(",") if p.strip()]
    extra: list[str] = []
    if protos and "OpenFlow10" not in protos:
        extra = ["--", "set", "bridge", bridge, f"protocols={','.join(['OpenFlow10', *protos])}"]
    vsctl("--", "set-fail-mode", bridge, "secure",
          "--", "--id=@c", "create", "controller", f"target=\"tcp:127.0.0.1:{port}\"",
          "connection-mode=out-of-band", "max_backoff=1000",
          "--", "set", "bridge", bridge, "controller=@c", *extra)


#: where a released bridge's controller points: a privileged port nothing listens on (tcpmux), so it
#: connects nowhere. (OVS ignores ``unix:`` targets outside its run directory, which leaves the
#: bridge with no controller.)
RELEASED_TARGET = "tcp:127.0.0.1:1"


def release_bridge(bridge: str) -> None:
    """Stop being the bridge's controller; its XCON flows stay (fail-mode secure keeps it closed).

    The controller record is pointed at :data:`RELEASED_TARGET` instead of deleted: OVS flushes every
    flow of a bridge that goes from having a controller to having none (``ovs-vsctl del-controller``
    emptied an OTS bridge here), and left pointing at the agent's old ephemeral port the bridge would
    connect to whatever process binds that port next (another agent)."""
    try:
        vsctl("--", "--id=@c", "create", "controller", f'target="{RELEASED_TARGET}"',
              "--", "set", "bridge", bridge, "controller=@c")
    except OvsError as exc:
        LOG.warning("releasing bridge %s: %s", bridge, exc)


class OvsLink:
    """The listener the bridge connects to, and the OF1.0 session on it.

    ``on_connect`` runs (in its own thread) after each new session's FEATURES_REPLY so the agent can
    re-install its state; ``on_port_change(port_no)`` runs on the reader thread after every port change.
    """

    def __init__(self, on_connect: Callable[[], None], on_port_change: Callable[[int], None],
                 listen_port: int = 0) -> None:
        self._on_connect = on_connect
        self._on_port_change = on_port_change
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", listen_port))
        self._listener.listen(4)
        self.port: int = self._listener.getsockname()[1]
        self.ports: dict[int, Any] = {}  # OVS port_no -> os-ken OFPPhyPort
        self.connected = threading.Event()  # a session is up and its FEATURES_REPLY is in
        self.ready = threading.Event()  # ... and on_connect (the agent's resync) has finished
        self._sock: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._xid = 0x10000
        self._pending: dict[int, tuple[threading.Event, list[Any]]] = {}
        self._stopped = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        t = threading.Thread(target=self._accept_loop, name="ots-ovs-accept", daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self) -> None:
        self._stopped.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._listener.close()
        self._drop_session()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5)

    def _drop_session(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
            pending, self._pending = self._pending, {}
        self.connected.clear()
        self.ready.clear()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for event, replies in pending.values():
            replies.append(None)  # None = session lost
            event.set()

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self._drop_session()  # a bridge reconnecting replaces its old session
            try:  # HELLO first, before other threads can see (and send on) the new session
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.sendall(of10.hello(self.next_xid()))
            except OSError as exc:
                LOG.warning("OVS session failed at HELLO: %s", exc)
                sock.close()
                continue
            with self._lock:
                self._sock = sock
            t = threading.Thread(target=self._session, args=(sock,), name="ots-ovs-session", daemon=True)
            t.start()
            self._threads = [x for x in self._threads if x.is_alive()] + [t]

    def _session(self, sock: socket.socket) -> None:
        reader = of10.MessageReader()
        try:
            self._send_raw(of10.serialize(parser.OFPSetConfig(of10.DP, ofp.OFPC_FRAG_NORMAL, 0), self.next_xid()))
            threading.Thread(target=self._handshake, name="ots-ovs-handshake", daemon=True).start()
            while not self._stopped.is_set():
                data = sock.recv(65536)
                if not data:
                    break
                for raw in reader.feed(data):
                    self._dispatch(raw)
        except (OSError, OvsError, of10.FramingError) as exc:
            if not self._stopped.is_set():
                LOG.warning("OVS session lost: %s", exc)
        finally:
            with self._lock:
                mine = self._sock is sock
            if mine:
                self._drop_session()

    def _handshake(self) -> None:
        try:
            replies = self.request(parser.OFPFeaturesRequest(of10.DP))
        except OvsError as exc:
            LOG.warning("OVS features request failed: %s", exc)
            return
        features = replies[0]
        self.ports = {p.port_no: p for p in features.ports.values()}
        LOG.info("OVS bridge dpid %016x connected with ports %s", features.datapath_id, sorted(self.ports))
        self.connected.set()
        try:
            self._on_connect()
        except Exception:  # a failed resync must not kill the session; the next reconnect retries
            LOG.exception("resync after OVS connect failed")
        self.ready.set()

    # --- messages -----------------------------------------------------------------------------

    def next_xid(self) -> int:
        with self._lock:
            self._xid = (self._xid + 1) & 0xFFFFFFFF or 0x10000
            return self._xid

    def _send_raw(self, data: bytes) -> None:
        with self._lock:
            sock = self._sock
        if sock is None:
            raise OvsError("OVS bridge not connected")
        try:
            with self._send_lock:
                sock.sendall(data)
        except OSError as exc:
            raise OvsError(f"sending to OVS: {exc}") from None

    def send(self, msg: Any) -> None:
        """Send an os-ken message (fire and forget; errors come back as logged OFPT_ERROR)."""
        self._send_raw(of10.serialize(msg, self.next_xid()))

    def request(self, msg: Any, timeout: float = 5.0) -> list[Any]:
        """Send ``msg`` and wait for its reply (all parts of a multipart STATS_REPLY)."""
        xid = self.next_xid()
        event, replies = threading.Event(), []
        with self._lock:
            self._pending[xid] = (event, replies)
        try:
            self._send_raw(of10.serialize(msg, xid))
            if not event.wait(timeout):
                raise OvsError(f"OVS did not answer {type(msg).__name__} within {timeout}s")
        finally:
            with self._lock:
                self._pending.pop(xid, None)
        if replies and replies[-1] is None:
            raise OvsError("OVS session lost while waiting for a reply")
        if replies and getattr(replies[-1], "msg_type", None) == ofp.OFPT_ERROR:
            err = replies[-1]
            raise OvsError(f"OVS answered {type(msg).__name__} with error type {err.type} code {err.code}")
        return replies

    def barrier(self, timeout: float = 5.0) -> None:
        self.request(parser.OFPBarrierRequest(of10.DP), timeout)

    def _dispatch(self, raw: bytes) -> None:
        h = of10.parse_header(raw)
        if h.msg_type == ofp.OFPT_ECHO_REQUEST:
            self._send_raw(of10.echo_reply(h.xid, raw[ofp.OFP_HEADER_SIZE:]))
            return
        if h.msg_type in (ofp.OFPT_HELLO, ofp.OFPT_PACKET_IN):
            if h.msg_type == ofp.OFPT_HELLO and h.version < ofp.OFP_VERSION:
                LOG.error("OVS speaks OpenFlow version %d < 1.0", h.version)
            return
        msg = of10.parse(raw)
        if msg is None:
            LOG.debug("ignoring OVS message type %d", h.msg_type)
            return
        if h.msg_type == ofp.OFPT_PORT_STATUS:
            self._port_status(msg)
            return
        with self._lock:
            waiter = self._pending.get(h.xid)
        if waiter is None:
            if h.msg_type == ofp.OFPT_ERROR:
                LOG.warning("OVS error type %d code %d (xid %#x)", msg.type, msg.code, h.xid)
            return
        event, replies = waiter
        replies.append(msg)
        if h.msg_type == ofp.OFPT_STATS_REPLY and msg.flags & ofp.OFPSF_REPLY_MORE:
            return
        event.set()

    def _port_status(self, msg: Any) -> None:
        desc = msg.desc
        if msg.reason == ofp.OFPPR_DELETE:
            self.ports.pop(desc.port_no, None)
        else:
            self.ports[desc.port_no] = desc
        self._on_port_change(desc.port_no)

    # --- the operations the agent needs --------------------------------------------------------

    def reset_flows(self) -> None:
        """Delete every flow and install the priority-0 drop-all (no PACKET_IN storm, nothing leaks)."""
        self.send(parser.OFPFlowMod(of10.DP, parser.OFPMatch(), command=ofp.OFPFC_DELETE))
        self.install_drop_all()

    def install_drop_all(self) -> None:
        """The priority-0 drop-all under the XCON flows (an ADD of the same flow replaces it)."""
        self.send(parser.OFPFlowMod(of10.DP, parser.OFPMatch(), command=ofp.OFPFC_ADD, priority=0, actions=[]))

    def install_xcon(self, in_port: int, out_port: int) -> None:
        self.send(parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=in_port), command=ofp.OFPFC_ADD,
                                    priority=XCON_PRIORITY, actions=[parser.OFPActionOutput(out_port, 0)]))

    def remove_xcon(self, in_port: int) -> None:
        self.send(parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=in_port), command=ofp.OFPFC_DELETE_STRICT,
                                    priority=XCON_PRIORITY))

    def set_light(self, port_no: int, lit: bool) -> bool:
        """Admin up/down one bridge port (the veth follows, so its peer loses/gains carrier).

        Returns False if the bridge has no such port.
        """
        p = self.ports.get(port_no)
        if p is None:
            return False
        config = 0 if lit else ofp.OFPPC_PORT_DOWN
        self.send(parser.OFPPortMod(of10.DP, port_no, p.hw_addr, config, ofp.OFPPC_PORT_DOWN, 0))
        return True

    def port_counters(self) -> dict[int, Any]:
        """OFPPortStats per bridge port."""
        replies = self.request(parser.OFPPortStatsRequest(of10.DP, 0, ofp.OFPP_NONE))
        return {s.port_no: s for r in replies for s in r.body}

    def _xcon_flow_stats(self) -> list[Any]:
        """The bridge's flows at XCON priority that match an in_port (os-ken OFPFlowStats)."""
        req = parser.OFPFlowStatsRequest(of10.DP, 0, parser.OFPMatch(), 0xFF, ofp.OFPP_NONE)
        return [f for r in self.request(req) for f in r.body
                if f.priority == XCON_PRIORITY and not f.match.wildcards & ofp.OFPFW_IN_PORT]

    def xcon_flow_counters(self) -> dict[int, tuple[int, int]]:
        """(packets, bytes) of each XCON flow on the bridge, by in_port."""
        return {f.match.in_port: (f.packet_count, f.byte_count) for f in self._xcon_flow_stats()}

    def xcon_flows(self) -> dict[int, list[int]]:
        """The output ports of each XCON flow on the bridge, by in_port (what a restarted agent adopts)."""
        return {f.match.in_port: [a.port for a in f.actions if isinstance(a, parser.OFPActionOutput)]
                for f in self._xcon_flow_stats()}
