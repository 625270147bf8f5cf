"""Work-arounds for os-ken 4.2.2 bugs that break a mixed OF1.0 + OF1.3 controller, and its TLS listener.

- ``os_ken.controller.ofp_handler.error_msg_handler`` reads ``ofp.OFPET_EXPERIMENTER``, which
  ``ofproto_v1_0`` lacks: the AttributeError is raised in the datapath's receive loop, so the first
  OpenFlow ERROR from an OF1.0 switch (an OTS refusing a non-XCON FLOW_MOD) drops its connection.
  The fix lives next to the OTS protocol helpers (``ots_virtual.protocol``); we apply it here.
- OpenFlow over TLS (``[controller] tls``, docs/operations.md): os-ken's own TLS listener
  (``--ctl-privkey``/``--ctl-cert``/``--ca-certs``) already listens TLS-only on
  ``--ofp-ssl-listen-port`` and requires a client certificate when ``--ca-certs`` is set, but a
  refused handshake escapes as "hub: uncaught exception" with a traceback, a peer that never
  handshakes holds its green thread for ever, it accepts TLS 1.0 — and it hangs: ``hub.patch()`` is
  ``eventlet.monkey_patch(thread=True)``, which leaves ``ssl`` unpatched, so its plain ``SSLSocket``
  over the green socket blocks the whole hub in ``recv`` and the switch never gets its HELLO (OVS:
  "connection timed out" right after a good handshake). :func:`patch_tls_listener`
  replaces ``OpenFlowController.server_loop`` (when those options are set) with one that requires
  TLS >= 1.2 and a client certificate from the CA, bounds the handshake by ``socket_timeout`` and
  logs a refused peer as one WARNING line. The session is a
  :class:`app.controller.tls_channel.TlsChannel` (TLS in memory over the green socket: half the
  per-message cost of eventlet's green ``SSLSocket``, which it replaced).
- One write per burst (:func:`patch_send_coalescing`): os-ken's send loop writes every queued message
  with its own ``sendall``. Over TLS that is one TLS record, one encryption and one system call per
  FLOW_MOD and per BARRIER, and the switch wakes up for each record; a plan sends its messages to a
  switch back to back, so the loop now writes what is already queued (up to :data:`COALESCE_MAX`
  messages, in order) with one ``sendall``. The bytes on the wire are the same; fewer, larger writes.
- Reads by the chunk (:func:`patch_recv_batching`): os-ken's receive loop asks the socket for exactly
  what the message in hand still lacks (its 8-byte header, then its body), so every message cost two
  ``recv`` calls through eventlet, and ``ofproto_parser.header`` copied the whole buffer for each
  message; on germany50 with reservations arriving (~1,500 messages a second in) the receive loops were
  15 % of the controller's CPU. The loop now reads up to :data:`RECV_CHUNK` bytes at a time and parses
  every whole message in them; messages, their order and their dispatch are as before.
- Keep-alive echoes only on a quiet channel (:func:`patch_idle_keepalive`): os-ken sends every switch an
  ECHO_REQUEST each ``echo_request_interval`` whatever else it hears from it; on germany50 that was 50
  requests and 50 replies a second beside the port-stats replies every switch sends each Ts anyway. A
  tick now skips the echo when the switch sent something since the previous tick and no echo is
  outstanding; a silent switch is still dropped after ``maximum_unreplied_echo_requests`` unanswered
  echoes, at most one interval later than before.
"""
from __future__ import annotations

import logging
import ssl
import struct
from typing import Any

LOG = logging.getLogger("mlte.controller.tls")


def patch_os_ken() -> None:
    from ots_virtual.protocol import patch_os_ken_of10_errors

    patch_os_ken_of10_errors()
    patch_tls_listener()
    patch_send_coalescing()
    patch_recv_batching()
    patch_idle_keepalive()


_HEADER = struct.Struct("!BBHI")  # OpenFlow header: version, type, length, xid
COALESCE_MAX = 64  # messages joined into one write at most (a plan's burst to one switch is far fewer)


def drain_burst(first: tuple[bytes, bool], get_nowait: Any, release: Any, empty: type[Exception],
                limit: int = COALESCE_MAX) -> tuple[bytes, bool]:
    """``first`` and what is queued behind it now, in order, as one buffer: stops at a closing message,
    an empty queue (``get_nowait`` raises ``empty``) or ``limit`` messages. ``release`` is called once
    per message taken from the queue after the first (os-ken's queue semaphore); returns the joined
    bytes and whether to close the socket after them."""
    buf, close = first
    if close:
        return buf, True
    parts = [buf]
    while len(parts) < limit:
        try:
            nxt, close = get_nowait()
        except empty:
            break
        release()
        parts.append(nxt)
        if close:
            break
    return b"".join(parts), close


def patch_send_coalescing() -> None:
    import os_ken.base.app_manager  # noqa: F401 - first: importing os_ken.controller.controller alone is circular
    from os_ken.controller import controller as osc

    if getattr(osc.Datapath._send_loop, "mlte_coalescing", False):
        return

    def _send_loop(self: Any) -> None:
        try:
            while self.state != osc.DEAD_DISPATCHER:
                first = self.send_q.get()
                self._send_q_sem.release()
                buf, close_socket = drain_burst(first, lambda: self.send_q.get(block=False),
                                                self._send_q_sem.release, osc.hub.QueueEmpty)
                self.socket.sendall(buf)
                if close_socket:
                    break
        except osc.SocketTimeout:
            osc.LOG.debug("Socket timed out while sending data to switch at address %s", self.address)
        except OSError as ioe:
            osc.LOG.debug("Socket error while sending data to switch at address %s: [%s] %s",
                          self.address, ioe.errno, ioe.strerror)
        finally:
            q = self.send_q
            self.send_q = None  # no new references; release every waiter; disallow further sends
            try:
                while q.get(block=False):
                    self._send_q_sem.release()
            except osc.hub.QueueEmpty:
                pass
            self._close_write()

    _send_loop.mlte_coalescing = True  # type: ignore[attr-defined]
    osc.Datapath._send_loop = _send_loop


RECV_CHUNK = 65536  # bytes asked of the socket per read: whatever the switch has sent, up to this


def split_messages(buf: bytearray, min_len: int = 8) -> tuple[list[tuple[int, int, int, int, int]], int]:
    """The whole OpenFlow messages at the start of ``buf``: ``[(offset, version, type, length, xid)]``
    and the offset where the first incomplete one starts. A length below the header's is read as the
    header alone (os-ken's receive loop does the same: "someone isn't playing nicely")."""
    out = []
    off, end = 0, len(buf)
    while end - off >= min_len:
        version, msg_type, msg_len, xid = _HEADER.unpack_from(buf, off)
        if msg_len < min_len:
            msg_len = min_len
        if end - off < msg_len:
            break
        out.append((off, version, msg_type, msg_len, xid))
        off += msg_len
    return out, off


def patch_recv_batching() -> None:
    import os_ken.base.app_manager  # noqa: F401 - first: importing os_ken.controller.controller alone is circular
    from os_ken.controller import controller as osc
    from os_ken.controller import ofp_event
    from os_ken.ofproto import ofproto_parser

    if getattr(osc.Datapath._recv_loop, "mlte_batching", False):
        return

    def _recv_loop(self: Any) -> None:
        buf = bytearray()
        count = 0
        while self.state != osc.DEAD_DISPATCHER:
            try:
                ret = self.socket.recv(RECV_CHUNK)
            except osc.SocketTimeout:
                continue
            except ssl.SSLError:  # eventlet's SSL read timeout (os-ken's loop retries too)
                continue
            except (EOFError, OSError):
                break
            if not ret:
                break
            self.mlte_reads = getattr(self, "mlte_reads", 0) + 1  # the keep-alive's sign of life
            buf += ret
            found, used = split_messages(buf)
            for off, version, msg_type, msg_len, xid in found:
                msg = ofproto_parser.msg(self, version, msg_type, msg_len, xid, buf[off:off + msg_len])
                if msg:
                    ev = ofp_event.ofp_msg_to_ev(msg)
                    if self.ofp_brick is not None:
                        self.ofp_brick.send_event_to_observers(ev, self.state)
                        handlers = [h for h in self.ofp_brick.get_handlers(ev)
                                    if self.state in h.callers[ev.__class__].dispatchers]
                        for handler in handlers:
                            handler(ev)
                count += 1
                if count > 2048:  # let the other switches' loops run (os-ken's limit)
                    count = 0
                    osc.hub.sleep(0)
            if used:
                del buf[:used]

    osc.Datapath._recv_loop = osc._deactivate(_recv_loop)
    osc.Datapath._recv_loop.mlte_batching = True


def keepalive_echo_due(reads: int, last_reads: int, unreplied: int) -> bool:
    """Whether a keep-alive tick sends an ECHO_REQUEST: not when the switch sent something since the
    previous tick (``reads`` moved) while no echo is outstanding; always once one is (a switch that
    stopped answering is counted down to its drop as before)."""
    return unreplied > 0 or reads == last_reads


def patch_idle_keepalive() -> None:
    import os_ken.base.app_manager  # noqa: F401 - first: importing os_ken.controller.controller alone is circular
    from os_ken.controller import controller as osc

    from app.controller import ofmsg

    if getattr(osc.Datapath._echo_request_loop, "mlte_idle", False):
        return

    def _echo_request_loop(self: Any) -> None:
        if not self.max_unreplied_echo_requests:
            return
        last = -1  # its HELLO and features reply were read: the first tick finds it alive
        while self.send_q and len(self.unreplied_echo_requests) <= self.max_unreplied_echo_requests:
            reads = getattr(self, "mlte_reads", 0)
            if keepalive_echo_due(reads, last, len(self.unreplied_echo_requests)):
                echo_req = ofmsg.keepalive_echo(self)
                self.unreplied_echo_requests.append(self.set_xid(echo_req))
                self.send_msg(echo_req)
            last = reads
            osc.hub.sleep(self.echo_request_interval)
        self.close()

    _echo_request_loop.mlte_idle = True  # type: ignore[attr-defined]
    osc.Datapath._echo_request_loop = _echo_request_loop


def server_context(ca: str, cert: str, key: str, context: type[ssl.SSLContext] = ssl.SSLContext) -> ssl.SSLContext:
    """The controller's TLS context: TLS >= 1.2, our certificate, client certificates required and
    checked against ``ca``. Raises OSError / ssl.SSLError for a missing, unreadable or bad file.
    ``context``: the class (the controller uses the standard one: TLS runs in memory, app.controller.tls_channel)."""
    ctx = context(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_RENEGOTIATION  # TLS 1.2 renegotiation mid-session: refused (switches never ask)
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_cert_chain(cert, key)
    ctx.load_verify_locations(ca)
    return ctx


def patch_tls_listener() -> None:
    import os_ken.base.app_manager  # noqa: F401 - first: importing os_ken.controller.controller alone is circular
    from os_ken.controller import controller as osc

    original = getattr(osc.OpenFlowController.server_loop, "mlte_original", osc.OpenFlowController.server_loop)

    def server_loop(self: Any, ofp_tcp_listen_port: int, ofp_ssl_listen_port: int) -> None:
        conf = osc.CONF
        if conf.ctl_privkey is None or conf.ctl_cert is None:
            return original(self, ofp_tcp_listen_port, ofp_ssl_listen_port)
        if conf.ca_certs is None:  # never TLS without checking the switches' certificates
            raise RuntimeError("OpenFlow TLS needs --ca-certs: client certificates are required")
        from app.controller.tls_channel import TlsChannel

        ctx = server_context(conf.ca_certs, conf.ctl_cert, conf.ctl_privkey)

        def handle(sock: Any, addr: tuple) -> None:
            sock.settimeout(conf.socket_timeout)  # a peer that never handshakes is dropped
            try:
                tls = TlsChannel(sock, ctx, osc.hub.Semaphore())
            except (ssl.SSLError, OSError) as exc:
                LOG.warning("OpenFlow TLS handshake from %s:%s refused: %s", addr[0], addr[1], exc)
                sock.close()
                return
            osc.datapath_connection_factory(tls, addr)

        osc.hub.StreamServer((conf.ofp_listen_host, ofp_ssl_listen_port), handle).serve_forever()

    server_loop.mlte_original = original  # type: ignore[attr-defined]
    osc.OpenFlowController.server_loop = server_loop
