"""The virtual OTS agent: an OpenFlow 1.0 switch upstream, the controller of one OVS bridge downstream.

Threads: one upstream session per controller (connect with backoff, read, answer), the OVS link
(accept, read), and one provisioning worker that applies accepted XCON changes in arrival order. FLOW_MODs are
checked the moment they arrive (:mod:`ots_virtual.rules`, against the accepted table, so a second
rule on a busy port is refused even while the first one is still dark); BARRIER_REQUESTs go
through the worker's queue, so their reply leaves only after every XCON before them is lit.

Batching (docs/ots.md): the worker collects changes into one batch until a BARRIER_REQUEST (or
:meth:`OtsAgent.wait_idle`, or the end of the session) closes it, or, with no barrier following,
until no change has arrived for ``batch_idle`` s (or ``batch_max`` s after its first change). A
batch is never closed just because the worker happened to run before the reader had queued the
next FLOW_MOD, so a two-way XCON sent before one barrier always gets one provisioning delay.

Light model (docs/ots.md): a port is admin-down ("dark") unless it is in an applied XCON. A batch
of changes darkens every affected port, removes deleted XCON flows, waits the provisioning delay
(only if it sets up a circuit), installs the new flows, then lights the ports of applied XCONs.
Loss of light (:mod:`ots_virtual.light`): a faulted port darkens its XCON partners until it recovers,
so a cut travels hop by hop to the packet ports at both ends of the circuit. A restarted agent adopts
the XCON flows it finds on the bridge instead of wiping them.

Several controllers (docs/ots.md, "Several controllers and roles"): as Open vSwitch, the agent keeps
a session to every controller listed; replies go to the session that asked, PORT_STATUS to every
session, FLOW_REMOVED to every session but SLAVEs. Nicira roles (:mod:`ots_virtual.roles`) decide who
may change the switch: a SLAVE's FLOW_MOD, PORT_MOD and PACKET_OUT get BAD_REQUEST / EPERM.
"""
from __future__ import annotations

import functools
import logging
import queue
import random
import select
import socket
import ssl
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from os_ken.ofproto import ofproto_v1_0 as ofp

from ots_virtual import light, of10, protocol, roles
from ots_virtual.granularity import GRANULARITY_UNITS, capacity_mbps, port_name, speed_bits
from ots_virtual.ovs import OvsError, OvsLink, claim_bridge, release_bridge
from ots_virtual.rules import Change, Xcon, XconRejected, XconTable, exact_fields
from ots_virtual.upstream import Channel, Target, UpstreamConfigError, connect, describe_failure

LOG = logging.getLogger("ots_virtual.agent")

SW_VERSION = "mlte ots_virtual 0.1"
BACKOFF_MIN, BACKOFF_MAX = 0.25, 8.0
ECHO_INTERVAL = 5.0  # seconds between keepalive ECHO_REQUESTs to the controller (0 = no keepalive)
ECHO_TIMEOUT = 15.0  # seconds without any message from the controller before the session is dropped
ECHO_PAYLOAD = b"mlte-ots-keepalive"
READ_TIMEOUT = 5.0  # s: a message whose first byte arrived this long ago and is still incomplete ends the session
LINGER = 1.0  # s: after a stream error, how long the agent reads and discards before closing the socket
BATCH_IDLE = 0.1  # s: with no barrier following, a batch closes after this long without a new change
BATCH_MAX = 1.0  # s: ... or this long after its first change, so a stream without barriers still moves
BATCH_LOG = 256  # batches kept in OtsAgent.batches
SEND_TIMEOUT = 10.0  # s: a controller that has not made room for a message in this long loses its session
#: messages that change the switch: refused from a SLAVE session (Open vSwitch's reject_slave_controller)
CHANGES = frozenset({ofp.OFPT_FLOW_MOD, ofp.OFPT_PORT_MOD, ofp.OFPT_PACKET_OUT})


class _CloseSession(Exception):
    """End the upstream session (and reconnect after the backoff)."""


@dataclass(frozen=True)
class Batch:
    """One provisioning batch, as kept in :attr:`OtsAgent.batches` (times are ``time.monotonic()``)."""

    first_change: float  # arrival of its first change
    closed: float  # when the worker closed it and began provisioning
    finished: float  # when its ports were lit (or its XCONs removed)
    changes: int  # XCON changes (adds, modifies, deletes) in it
    delay: float  # provisioning delay waited (0 for a batch that sets nothing up)
    closed_by: str  # "barrier", "idle", "max", "wait_idle" or "session-end"


@dataclass(eq=False)
class _Session:
    """One upstream session; a reply queued for a session that has ended is dropped."""

    chan: Channel
    number: int
    target: Target
    sent: dict[int, tuple[int, int]] = field(default_factory=dict)  # port -> (config, state) last reported
    featured: bool = False  # has answered a FEATURES_REQUEST (the controller knows the switch)


class OtsAgent:
    """A virtual Open Transport Switch over the OVS bridge ``bridge``.

    ``ports`` maps OpenFlow port numbers (the same on the bridge and towards the controller) to
    granularity names. ``delay`` overrides the provisioning delay draw (a callable returning seconds),
    e.g. ``lambda: 0.5`` in tests. ``claim`` = False leaves the bridge's OVS configuration alone
    (the caller points it at :attr:`ovs_port`). Keepalive: an ECHO_REQUEST goes upstream every
    ``echo_interval`` s; after ``echo_timeout`` s without any message from the controller (a dead
    controller behind a half-open TCP session sends nothing) the session is closed and re-dialled.
    ``echo_interval`` = 0 turns the keepalive off. ``batch_idle`` / ``batch_max``: when no barrier
    closes a batch of XCON changes, it is closed after that long without a new change / after its
    first change (module docstring); :attr:`batches` logs the latest batches for tests and labs.
    A broken byte stream from the controller (:func:`of10.check_request_header`, or a message still
    incomplete ``read_timeout`` s after its first byte) gets an OFPT_ERROR and ends the session.

    ``controller``: one ``(host, port)`` or :class:`Target`, or a list of them (a session to each, each
    with its own backoff and keepalive); ``tls``: the client context for ``ssl:`` targets
    (:meth:`ots_virtual.upstream.TlsFiles.context`). :attr:`roles` holds each session's role.
    """

    def __init__(self, bridge: str, dpid: int, ports: dict[int, str],
                 controller: tuple[str, int] | Target | Sequence[tuple[str, int] | Target],
                 delay_min: float = 0.150, delay_max: float = 0.220, unit_mbps: float = 1.0,
                 listen_port: int = 0, delay: Callable[[], float] | None = None, claim: bool = True,
                 ovs_wait: float = 10.0, echo_interval: float = ECHO_INTERVAL,
                 echo_timeout: float = ECHO_TIMEOUT, batch_idle: float = BATCH_IDLE,
                 batch_max: float = BATCH_MAX, read_timeout: float = READ_TIMEOUT,
                 tls: ssl.SSLContext | None = None) -> None:
        if not 0 <= delay_min <= delay_max:
            raise ValueError("need 0 <= delay_min <= delay_max")
        if not 0 <= batch_idle <= batch_max:
            raise ValueError("need 0 <= batch_idle <= batch_max")
        if not read_timeout > 0:
            raise ValueError("read_timeout must be > 0")
        self.read_timeout = read_timeout
        self.stream_errors = 0  # sessions ended because the byte stream broke (docs/ots.md)
        check_keepalive(echo_interval, echo_timeout)
        self.batch_idle, self.batch_max = batch_idle, batch_max
        self.batches: deque[Batch] = deque(maxlen=BATCH_LOG)  # the latest batches, oldest first
        self.batch_count = 0  # batches provisioned (all sessions)
        self.echo_interval, self.echo_timeout = echo_interval, echo_timeout
        self.echo_requests = 0  # keepalive ECHO_REQUESTs sent (all sessions)
        self.keepalive_drops = 0  # sessions closed because the controller went silent
        self.bridge = bridge
        self.dpid = dpid
        self.controllers = _targets(controller)
        self.controller = self.controllers[0].address  # the first (the only one of a single-controller agent)
        self.tls = tls
        if tls is None and any(t.tls for t in self.controllers):
            raise UpstreamConfigError("an ssl: controller needs TLS files (--ssl-ca, --ssl-cert, --ssl-key or --tls)")
        self.roles = roles.Roles()
        self.slave_refusals = 0  # changes refused because their session was a SLAVE
        self.unit_mbps = unit_mbps
        self.delay_min, self.delay_max = delay_min, delay_max
        self._delay = delay or (lambda: random.uniform(self.delay_min, self.delay_max))
        self._claim = claim
        self._ovs_wait = ovs_wait
        self.table = XconTable(ports)  # accepted XCONs (the controller's view)
        self._applied: dict[int, tuple[Xcon, float]] = {}  # in_port -> (xcon, time lit), the data plane
        self._dark: set[int] = set()  # ports held dark by a batch in progress
        self._los: set[int] = set()  # ports held dark by loss of light on an XCON partner
        self._sense: dict[int, light.PortSense] = {}  # what each port's light was told and seen to be
        self._state_lock = threading.RLock()  # table, _applied, _dark, _los, _sense
        self._light_lock = threading.Lock()  # held while computing and sending one port's light
        self._adopt = True  # the first OVS session adopts the bridge's XCON flows (a restarted agent)
        self.adopted: list[Xcon] = []  # XCONs taken over from the bridge at start-up
        self._apply_lock = threading.Lock()  # one writer to the bridge at a time (worker vs resync)
        self._report_lock = threading.Lock()  # guards each session's ``sent``; held while computing and sending
        # worker queue: (kind, argument, session number, arrival time)
        self._work: queue.Queue[tuple[str, Any, int, float]] = queue.Queue()
        self._stop = threading.Event()
        self._live: dict[int, _Session] = {}  # session number -> session, every controller connected now
        self._connecting: dict[Target, socket.socket] = {}  # sockets still in their TCP/TLS handshake
        self._sessions = 0  # sessions opened so far (numbers them)
        self._up_lock = threading.Lock()  # guards _live and _sessions
        self._switch_config = (ofp.OFPC_FRAG_NORMAL, 128)
        self._threads: list[threading.Thread] = []
        self.ovs = OvsLink(self._resync, self._ovs_port_changed, listen_port)
        self.connected_upstream = threading.Event()

    @property
    def ports(self) -> dict[int, str]:
        return self.table.ports

    @property
    def ovs_port(self) -> int:
        """TCP port on 127.0.0.1 where the OVS bridge must connect."""
        return self.ovs.port

    # --- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Claim the bridge and start all threads; returns at once (the controller may be down)."""
        self.ovs.start()
        if self._claim:
            try:
                claim_bridge(self.bridge, self.ovs.port, wait_s=self._ovs_wait)
            except BaseException:  # e.g. no such bridge: do not leave the listener and its thread behind
                self.ovs.stop()
                raise
        t = threading.Thread(target=self._worker, name=f"ots-worker-{self.bridge}", daemon=True)
        t.start()
        self._threads.append(t)
        for n, target in enumerate(self.controllers):
            t = threading.Thread(target=self._upstream_loop, args=(target,), name=f"ots-upstream{n}-{self.bridge}",
                                 daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Disconnect from both sides and stop the threads; the bridge keeps its flows."""
        self._stop.set()
        self._work.put(("stop", None, 0, time.monotonic()))
        with self._up_lock:
            live = list(self._live.values())
            connecting = list(self._connecting.values())
        for session in live:
            session.chan.close()
        for sock in connecting:  # a handshake that hangs would hold its thread for CONNECT_TIMEOUT
            _abort(sock)
        if self._claim:
            release_bridge(self.bridge)
        self.ovs.stop()
        for t in self._threads:
            t.join(timeout=5)

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every change queued so far has been applied (for tests and labs)."""
        done = threading.Event()
        self._work.put(("wait_idle", done.set, 0, time.monotonic()))
        return done.wait(timeout)

    # --- upstream session ---------------------------------------------------------------------

    def _upstream_loop(self, target: Target) -> None:
        """One controller's session, for the agent's lifetime: connect, serve, reconnect with backoff."""
        # the controller should see the OTS only once its data plane answers (bounded wait)
        deadline = time.monotonic() + self._ovs_wait
        while not self.ovs.ready.wait(0.1) and not self._stop.is_set() and time.monotonic() < deadline:
            pass
        if not self.ovs.ready.is_set() and not self._stop.is_set():
            LOG.warning("OVS bridge %s has not connected after %.0fs; connecting upstream anyway",
                        self.bridge, self._ovs_wait)
        backoff = BACKOFF_MIN
        last_failure = ""
        while not self._stop.is_set():
            try:
                chan = connect(target, self.tls, connecting=functools.partial(self._handshaking, target))
            except OSError as exc:
                reason = describe_failure(target, exc, first=True)
                # one line per attempt; a new reason (e.g. a refused certificate) is a warning
                level = logging.WARNING if reason != last_failure and target.tls else logging.INFO
                LOG.log(level, "controller %s unreachable: %s; retry in %.2fs", target, reason, backoff)
                last_failure = reason
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            last_failure = ""
            with self._up_lock:
                self._sessions += 1
                session = _Session(chan, self._sessions, target)
                self.roles.add(session.number)  # a new session is OTHER (the controller has told it nothing)
                self._live[session.number] = session
            if self._stop.is_set():  # stop() ran while we were connecting
                self._end_session(session)
                return
            LOG.info("controller %s connected (session %d)", target, session.number)
            started = time.monotonic()
            self._serve(session)
            self._end_session(session)
            if time.monotonic() - started > 5:
                backoff = BACKOFF_MIN
            if not self._stop.is_set():
                LOG.info("controller %s session ended; reconnect in %.2fs", target, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _handshaking(self, target: Target, sock: socket.socket | None) -> None:
        with self._up_lock:
            if sock is None:
                self._connecting.pop(target, None)
            else:
                self._connecting[target] = sock
        if sock is not None and self._stop.is_set():
            _abort(sock)

    def _end_session(self, session: _Session) -> None:
        with self._up_lock:
            self._live.pop(session.number, None)
            featured = any(s.featured for s in self._live.values())
        self.roles.remove(session.number)
        # changes of this session still waiting for a barrier are applied now, not after batch_idle
        self._work.put(("session-end", None, session.number, time.monotonic()))
        if not featured:
            self.connected_upstream.clear()
        session.chan.close()

    def _wait_readable(self, session: _Session, keep: dict[str, float], reader: of10.MessageReader) -> bool:
        """Wait until the session has data (True). Keepalive: send ECHO_REQUESTs while it is quiet;
        False once the controller has been silent for ``echo_timeout`` s (the caller reconnects).
        Raise FramingError once a message has been incomplete for ``read_timeout`` s."""
        keepalive = self.echo_interval > 0
        while not self._stop.is_set():
            if session.chan.pending():  # TLS: a record already decrypted, select() would not see it
                return True
            now = time.monotonic()
            deadlines = []
            if reader.partial_since is not None:
                stall = reader.partial_since + self.read_timeout
                if now >= stall:
                    part = reader.partial
                    xid = of10.parse_header(part).xid if len(part) >= ofp.OFP_HEADER_SIZE else 0
                    raise of10.FramingError(f"message incomplete after {now - reader.partial_since:.1f}s "
                                            f"({len(part)} bytes buffered)", data=part, xid=xid)
                deadlines.append(stall)
            if keepalive:
                if now - keep["rx"] >= self.echo_timeout:
                    self.keepalive_drops += 1
                    LOG.warning("controller %s silent for %.1fs (no reply to ECHO_REQUEST); reconnecting",
                                session.target, now - keep["rx"])
                    return False
                if now >= keep["echo"]:
                    self.echo_requests += 1
                    self._send(session, of10.message(ofp.OFPT_ECHO_REQUEST,
                                                     0xE0000000 | self.echo_requests & 0xFFFFFFF, ECHO_PAYLOAD))
                    keep["echo"] = now + self.echo_interval
                deadlines += [keep["echo"], keep["rx"] + self.echo_timeout]
            wait = max(0.0, min(deadlines) - now) if deadlines else None
            try:
                ready, _, _ = select.select([session.chan], [], [], wait)
            except (ValueError, OSError):  # closed by stop()
                return False
            if ready:
                return True
        return False

    def _serve(self, session: _Session) -> None:
        reader = of10.MessageReader(of10.check_request_header, of10.check_request)
        now = time.monotonic()
        keep = {"rx": now, "echo": now + self.echo_interval, "got": 0.0}  # got: bytes have arrived
        try:
            while not self._stop.is_set():
                if not self._wait_readable(session, keep, reader):
                    return
                data = session.chan.recv()
                if data is None:  # nothing yet (e.g. half a TLS record)
                    continue
                if not data:
                    return
                keep["rx"] = time.monotonic()  # any message proves the controller alive
                keep["got"] = 1.0
                for raw in reader.feed(data):
                    try:
                        self._handle(raw, session)
                    except _CloseSession:
                        raise
                    except (OvsError, of10.DecodeError, struct.error) as exc:
                        LOG.warning("request failed: %s", exc)
                        self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM
                                    if isinstance(exc, OvsError) else ofp.OFPBRC_BAD_LEN)
                    except Exception:  # never let one bad message take the switch down
                        LOG.exception("error handling message type %d", raw[1])
                        self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
        except of10.FramingError as exc:
            self.stream_errors += 1
            LOG.warning("controller byte stream broken (%s): error type %d code %d, session closed",
                        exc, exc.err_type, exc.code)
            self._send(session, of10.error(exc.xid, exc.err_type, exc.code, exc.data))
            self._linger_close(session)
        except _CloseSession as exc:
            LOG.warning("controller %s session unusable (%s); reconnecting", session.target, exc)
            self._linger_close(session)
        except OSError as exc:
            if self._stop.is_set():
                return
            first = not keep["got"]
            # a TLS session refused at its start (e.g. our certificate) is worth a warning
            LOG.log(logging.WARNING if session.chan.tls and first or isinstance(exc, ssl.SSLError) else logging.INFO,
                    "controller %s connection lost: %s", session.target,
                    describe_failure(session.target, exc, first=first))

    def _linger_close(self, session: _Session) -> None:
        """Close after an ERROR so that the controller reads it: send FIN, then read and discard what
        it still sends (up to EOF or :data:`LINGER` s) instead of closing with unread data, which
        makes the kernel answer with a RST that can destroy the ERROR before the controller reads it."""
        with self._up_lock:
            self._live.pop(session.number, None)  # nothing else is sent on this session
        try:
            session.chan.shutdown_write()
            deadline = time.monotonic() + LINGER
            while not self._stop.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if not session.chan.pending() and not select.select([session.chan], [], [], left)[0]:
                    break
                if session.chan.recv() == b"":
                    break
        except (OSError, ValueError):
            pass

    def _send(self, session: _Session | int, data: bytes) -> None:
        """Send to one session if it is still connected (a reply to a session that ended is dropped).
        A controller that does not take the message within SEND_TIMEOUT s loses its session."""
        number = session if isinstance(session, int) else session.number
        with self._up_lock:
            current = self._live.get(number)
        if current is None:
            return
        try:
            current.chan.send(data, SEND_TIMEOUT)
        except OSError as exc:
            LOG.warning("send to controller %s failed (%s); closing its session", current.target, exc)
            current.chan.abort()

    def _sessions_now(self) -> list[_Session]:
        with self._up_lock:
            return list(self._live.values())

    def _broadcast(self, data: bytes, slaves: bool = True) -> None:
        """An asynchronous message to every session (``slaves`` False: all but the SLAVEs)."""
        for s in self._sessions_now():
            if slaves or self.roles.role(s.number) != roles.SLAVE:
                self._send(s, data)

    def _error(self, session: _Session, raw: bytes, err_type: int, code: int) -> None:
        self._send(session, of10.error(of10.parse_header(raw).xid, err_type, code, raw))

    # --- upstream messages --------------------------------------------------------------------

    def _handle(self, raw: bytes, session: _Session) -> None:
        h = of10.parse_header(raw)
        if h.msg_type == ofp.OFPT_HELLO:
            if h.version < ofp.OFP_VERSION:
                self._send(session, of10.error(h.xid, ofp.OFPET_HELLO_FAILED, ofp.OFPHFC_INCOMPATIBLE,
                                               b"OpenFlow 1.0 required"))
                raise _CloseSession(f"controller speaks OpenFlow version {h.version}")
            return
        t = h.msg_type
        if t in CHANGES and not self.roles.may_change(session.number):
            # Open vSwitch refuses a slave's changes before looking at them (OF1.0: BAD_REQUEST / EPERM)
            self.slave_refusals += 1
            LOG.info("refused message type %d xid %#x from SLAVE controller %s", t, h.xid, session.target)
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
            return
        if t == ofp.OFPT_ECHO_REQUEST:
            self._send(session, of10.echo_reply(h.xid, raw[ofp.OFP_HEADER_SIZE:]))
        elif t == ofp.OFPT_FEATURES_REQUEST:
            session.featured = True  # before the reply: whoever reads the reply sees the agent connected
            self.connected_upstream.set()
            with self._report_lock:
                ports = [self.virtual_port(p) for p in sorted(self.ports)]
                session.sent.update({p.port_no: (p.config, p.state) for p in ports})
                self._send(session, of10.features_reply(h.xid, self.dpid, ports))
        elif t == ofp.OFPT_GET_CONFIG_REQUEST:
            self._send(session, of10.get_config_reply(h.xid, *self._switch_config))
        elif t == ofp.OFPT_SET_CONFIG:
            config = of10.decode_set_config(raw)
            if self.roles.may_change(session.number):  # a SLAVE's is ignored, as Open vSwitch ignores its flags
                self._switch_config = config
        elif t == ofp.OFPT_FLOW_MOD:
            self._flow_mod(raw, session)
        elif t == ofp.OFPT_BARRIER_REQUEST:
            self._work.put(("barrier", h.xid, session.number, time.monotonic()))
        elif t == ofp.OFPT_STATS_REQUEST:
            self._stats(raw, session)
        elif t == ofp.OFPT_VENDOR:
            self._vendor(raw, session)
        elif t == ofp.OFPT_QUEUE_GET_CONFIG_REQUEST:
            port_no = of10.decode_queue_get_config_request(raw)
            if port_no in self.ports:
                self._send(session, of10.queue_get_config_reply(h.xid, port_no))
            else:
                self._error(session, raw, ofp.OFPET_QUEUE_OP_FAILED, ofp.OFPQOFC_BAD_PORT)
        elif t == ofp.OFPT_PORT_MOD:
            # light follows the XCONs; the controller cannot switch a port on or off by itself
            if len(raw) >= 10 and struct.unpack_from("!H", raw, 8)[0] not in self.ports:
                self._error(session, raw, ofp.OFPET_PORT_MOD_FAILED, ofp.OFPPMFC_BAD_PORT)
            else:
                self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
        elif t == ofp.OFPT_PACKET_OUT:
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE)
        elif t in (ofp.OFPT_ECHO_REPLY, ofp.OFPT_ERROR):
            if t == ofp.OFPT_ERROR and len(raw) >= 12:
                LOG.warning("controller sent error type %d code %d", *struct.unpack_from("!HH", raw, 8))
        else:
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE)

    def _flow_mod(self, raw: bytes, session: _Session) -> None:
        try:
            fm = of10.decode_flow_mod(raw)
        except of10.BadActionLength:
            self._error(session, raw, ofp.OFPET_BAD_ACTION, ofp.OFPBAC_BAD_LEN)
            return
        try:
            with self._state_lock:
                changes = self.table.apply_flow_mod(fm)
        except XconRejected as rej:
            LOG.info("rejected FLOW_MOD xid %#x: %s", fm.xid, rej.reason)
            self._error(session, raw, rej.err_type, rej.code)
            return
        if changes:
            LOG.info("accepted %s", ", ".join(f"{c.op} {c.xcon.in_port}->{c.xcon.out_port}" for c in changes))
            self._work.put(("changes", changes, session.number, time.monotonic()))

    def _vendor(self, raw: bytes, session: _Session) -> None:
        h = of10.parse_header(raw)
        vendor_id, payload = of10.decode_vendor(raw)
        if vendor_id == roles.NX_VENDOR_ID:
            if roles.is_role_message(raw) and raw[15] == roles.NXT_ROLE_REQUEST:
                self._role_request(raw, session)
            else:
                self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_SUBTYPE)
            return
        if vendor_id != protocol.MLTE_VENDOR_ID:
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VENDOR)
            return
        parts = protocol.split_vendor_payload(payload)
        if parts is None or parts[0] != protocol.CAPS_REQUEST:
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_SUBTYPE)
            return
        body = protocol.vendor_payload(protocol.CAPS_REPLY, self.capabilities().to_json().encode())
        self._send(session, of10.vendor(h.xid, protocol.MLTE_VENDOR_ID, body))

    def _role_request(self, raw: bytes, session: _Session) -> None:
        """NXT_ROLE_REQUEST (docs/ots.md, "Several controllers and roles"): set the session's role and
        answer with NXT_ROLE_REPLY; a bad length, an unknown role or a stale generation get an ERROR."""
        h = of10.parse_header(raw)
        try:
            req = roles.decode(raw)
        except roles.RoleFormatError as exc:
            LOG.info("role request from %s: %s", session.target, exc)
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN)
            return
        if req.role not in roles.NAMES:
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, roles.NXBRC_BAD_ROLE)
            return
        decision = self.roles.request(session.number, req.role, req.generation_id)
        if decision.stale:
            LOG.warning("controller %s asked to be %s with stale generation %d (current %d): refused, made SLAVE",
                        session.target, roles.NAMES[req.role], req.generation_id, decision.generation_id)
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
            return
        for number in decision.demoted:
            with self._up_lock:
                other = self._live.get(number)
            LOG.info("controller %s is now SLAVE (%s became MASTER)", other.target if other else number,
                     session.target)
        LOG.info("controller %s is now %s (generation %s)", session.target, roles.NAMES[decision.role],
                 decision.generation_id)
        # the reply has the request's form: with mlte's generation id if the request carried one (the
        # switch's current one; 0 while there is none, as Open vSwitch answers an OF1.3 role request)
        gen = None if req.generation_id is None else decision.generation_id or 0
        self._send(session, roles.encode(roles.NXT_ROLE_REPLY, h.xid, decision.role, gen))

    def capabilities(self) -> protocol.Capabilities:
        ports = {p: protocol.PortCaps(g, GRANULARITY_UNITS[g], capacity_mbps(g, self.unit_mbps))
                 for p, g in sorted(self.ports.items())}
        return protocol.Capabilities(
            dpid=self.dpid, name=self.bridge, ports=ports, unit_mbps=self.unit_mbps,
            setup_time_min=self.delay_min, setup_time_max=self.delay_max, table_capacity=len(self.ports),
            granularities={g: GRANULARITY_UNITS[g] for g in sorted(set(self.ports.values()))},
        )

    # --- statistics ---------------------------------------------------------------------------

    def _stats(self, raw: bytes, session: _Session) -> None:
        req = of10.decode_stats_request(raw)
        h = of10.parse_header(raw)
        if req.stats_type == ofp.OFPST_DESC:
            body = [of10.desc_stats("mlte", "virtual OTS (OVS userspace datapath)", SW_VERSION,
                                    f"{self.dpid:016x}", self.bridge)]
        elif req.stats_type in (ofp.OFPST_FLOW, ofp.OFPST_AGGREGATE):
            body = self._flow_stats(req)
        elif req.stats_type == ofp.OFPST_TABLE:
            with self._state_lock:
                active = len(self.table)
            body = [of10.table_stats(0, "xcon", len(self.ports), active, 0, 0)]
        elif req.stats_type == ofp.OFPST_PORT:
            if req.port_no != ofp.OFPP_NONE and req.port_no not in self.ports:
                self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_EPERM)
                return
            counters = self.ovs.port_counters() if self.ovs.connected.is_set() else {}
            wanted = sorted(self.ports) if req.port_no == ofp.OFPP_NONE else [req.port_no]
            body = [of10.port_stats(p, counters[p]._asdict() if p in counters else {}) for p in wanted]
        elif req.stats_type == ofp.OFPST_QUEUE:
            body = []  # no queues on an OTS port
        elif req.stats_type == ofp.OFPST_VENDOR:
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VENDOR)
            return
        else:
            self._error(session, raw, ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_STAT)
            return
        for msg in of10.stats_replies(h.xid, req.stats_type, body):
            self._send(session, msg)

    def _flow_stats(self, req: of10.StatsRequest) -> list[bytes]:
        wc = req.match.wildcards
        with self._state_lock:
            xcons = list(self.table)
            lit_since = {i: t for i, (_, t) in self._applied.items()}
        if exact_fields(wc):
            xcons = []
        elif not wc & ofp.OFPFW_IN_PORT:
            xcons = [x for x in xcons if x.in_port == req.match.in_port]
        if req.out_port != ofp.OFPP_NONE:
            xcons = [x for x in xcons if x.out_port == req.out_port]
        if req.table_id not in (0, 0xFF):
            xcons = []
        counters = self.ovs.xcon_flow_counters() if xcons and self.ovs.connected.is_set() else {}
        now = time.monotonic()
        if req.stats_type == ofp.OFPST_AGGREGATE:
            pkts = sum(counters.get(x.in_port, (0, 0))[0] for x in xcons)
            byts = sum(counters.get(x.in_port, (0, 0))[1] for x in xcons)
            return [of10.aggregate_stats(pkts, byts, len(xcons))]
        return [of10.flow_stats(x.in_port, x.out_port, now - lit_since.get(x.in_port, now), x.priority, x.cookie,
                                *counters.get(x.in_port, (0, 0))) for x in xcons]

    # --- ports and light ----------------------------------------------------------------------

    def _lit(self, port_no: int) -> bool:
        return (port_no not in self._dark and port_no not in self._los
                and any(port_no in x.ports for x, _ in self._applied.values()))

    @property
    def los(self) -> set[int]:
        """Ports darkened right now because an XCON partner lost its light."""
        with self._state_lock:
            return set(self._los)

    def _ovs_view(self, port_no: int) -> tuple[bool, bool] | None:
        """(admin up, link up) of a bridge port as OVS last reported it; None if the bridge has no such port."""
        p = self.ovs.ports.get(port_no)
        if p is None:
            return None
        return not p.config & ofp.OFPPC_PORT_DOWN, not p.state & ofp.OFPPS_LINK_DOWN

    def _update_los(self) -> set[int]:
        """Recompute the LOS set from the applied XCONs and OVS's port views; return the ports whose
        LOS state changed (the caller sets their light)."""
        with self._state_lock:
            xcons = [x.ports for x, _ in self._applied.values()]
            faulted = {p for p, s in self._sense.items()
                       if (v := self._ovs_view(p)) is not None and light.lost(s, *v)}
            new = light.next_los(xcons, self._dark, faulted, self._los)
            changed = new ^ self._los
            self._los = new
        if changed:
            LOG.info("loss of light: faulted ports %s, darkened %s", sorted(faulted - new), sorted(new))
        return changed

    def virtual_port(self, port_no: int) -> of10.PhyPort:
        """The controller's view of one virtual port (name ``ODU2-3``, speed bits, light state)."""
        gran = self.ports[port_no]
        speed = speed_bits(capacity_mbps(gran, self.unit_mbps))
        with self._state_lock:
            lit = self._lit(port_no)
            # taken down by someone else (a cut): a fault, in an XCON or not, until it comes up again —
            # so the controller keeps routing around it after it took the broken circuit down
            held = self._sense.get(port_no, light.PortSense()).held
        view = self._ovs_view(port_no)
        config = 0 if lit or held else ofp.OFPPC_PORT_DOWN
        link_down = not lit or view is None or not all(view)
        hw = struct.pack("!BBHH", 0x02, 0x0F, self.dpid & 0xFFFF, port_no)
        return of10.PhyPort(port_no, hw, port_name(port_no, gran), config,
                            ofp.OFPPS_LINK_DOWN if link_down else 0, speed, speed, speed, 0)

    def _report_port(self, port_no: int) -> None:
        """Send PORT_STATUS(MODIFY) upstream if the port's config/state changed since last reported.

        Computing and sending happen under one lock, so the last message always shows the latest state
        even when the worker and the OVS reader report the same port at once.
        """
        if port_no not in self.ports:
            return
        with self._report_lock:
            sessions = self._sessions_now()
            if not sessions:
                return
            port = self.virtual_port(port_no)
            msg = of10.port_status(ofp.OFPPR_MODIFY, port)
            for session in sessions:  # every controller, SLAVEs too (they keep their view warm)
                if session.sent.get(port_no) != (port.config, port.state):
                    session.sent[port_no] = (port.config, port.state)
                    self._send(session, msg)

    def _ovs_port_changed(self, port_no: int) -> None:
        """OVS reported a port change (OVS reader thread): note it, then pass a loss of light on."""
        view = self._ovs_view(port_no)
        if view is not None and port_no in self.ports:
            with self._state_lock:
                self._sense[port_no] = light.observe(self._sense.get(port_no, light.PortSense()), *view)
        self._set_light(self._update_los())
        self._report_port(port_no)

    def _set_light(self, ports: set[int]) -> None:
        """Set each port's admin state from the model; a port someone else took down is never lit
        (the operator's ``ip link set down`` sticks until ``up``)."""
        for p in sorted(ports):
            with self._light_lock:  # compute and send together: the last PortMod has the latest state
                with self._state_lock:
                    lit = self._lit(p)
                    sense = self._sense.get(p, light.PortSense())
                    self._sense[p] = light.command(sense, lit)
                if self.ovs.connected.is_set() and not (lit and sense.held):
                    try:
                        self.ovs.set_light(p, lit)
                    except OvsError as exc:
                        LOG.warning("port %d light: %s", p, exc)
            self._report_port(p)

    # --- provisioning -------------------------------------------------------------------------

    def _worker(self) -> None:
        """Collect changes into a batch until something closes it (module docstring), then apply it.

        The idle and max timers run on the changes' arrival times (stamped by the reader), so changes
        that queued up while the previous batch was provisioning join the next batch at once.
        """
        pending: list[tuple[Change, int]] = []
        first = last = 0.0
        while True:
            timeout = None
            if pending:
                timeout = max(0.0, min(last + self.batch_idle, first + self.batch_max) - time.monotonic())
            try:
                kind, arg, session, at = self._work.get(timeout=timeout)
            except queue.Empty:
                idle = time.monotonic() >= last + self.batch_idle
                self._run_batch(pending, first, "idle" if idle else "max")
                pending = []
                continue
            if kind == "stop" or self._stop.is_set():
                return
            if kind == "changes":
                if not pending:
                    first = at
                pending.extend((c, session) for c in arg)
                last = at
                continue
            if kind == "session-end" and all(s != session for _, s in pending):
                continue  # another controller's session ended: the batch under way is not its
            if pending:  # a barrier, wait_idle or the end of the session closes the batch
                self._run_batch(pending, first, kind)
                pending = []
            if kind == "barrier":
                self._send(session, of10.barrier_reply(arg))
            elif kind == "wait_idle":
                arg()

    def _run_batch(self, batch: list[tuple[Change, int]], first: float, closed_by: str) -> None:
        closed = time.monotonic()
        try:
            delay = self._apply(batch)
        except Exception:
            LOG.exception("applying XCON changes failed")
            return
        self.batches.append(Batch(first, closed, time.monotonic(), len(batch), delay, closed_by))
        self.batch_count += 1

    def _apply(self, batch: list[tuple[Change, int]]) -> float:
        """Provision ``batch`` (changes in arrival order, with the session each came from); return
        the provisioning delay waited."""
        affected = {p for c, _ in batch for x in (c.xcon, c.old) if x is not None for p in x.ports}
        with self._apply_lock:
            with self._state_lock:
                before = dict(self._applied)
                kept = dict(self._applied)  # applied XCONs this batch does not touch
                setup: dict[int, Xcon] = {}  # XCONs this batch lights, by in_port
                removed: list[tuple[Xcon, float, int]] = []  # explicitly deleted, for FLOW_REMOVED
                for c, session in batch:
                    i = c.xcon.in_port
                    if c.op == "delete":
                        if setup.pop(i, None) is None and i in kept:
                            x, since = kept.pop(i)
                            removed.append((x, since, session))
                    else:
                        kept.pop(i, None)
                        setup[i] = c.xcon
                self._applied = kept
                stale = [i for i in before if i not in kept and i not in setup]
                still_used = {p for x, _ in kept.values() for p in x.ports}
                # new circuits go dark while they are set up; a teardown darkens only ports nothing else uses
                self._dark |= {p for x in setup.values() for p in x.ports}
                self._dark |= {p for i in stale for p in before[i][0].ports} - still_used
            counters: dict[int, tuple[int, int]] = {}
            if any(x.send_flow_removed for x, _, _ in removed) and self.ovs.connected.is_set():
                try:
                    counters = self.ovs.xcon_flow_counters()
                except OvsError as exc:
                    LOG.warning("flow counters for FLOW_REMOVED: %s", exc)
            self._set_light(affected | self._update_los())  # dark first: the attached packet ports see the link go down
            if self.ovs.connected.is_set():
                for i in stale:
                    self._ovs_try(self.ovs.remove_xcon, i)
            delay = max((self._delay() for _ in setup), default=0.0)
            if delay > 0:
                self._stop.wait(delay)
            if self._stop.is_set():
                return delay
            if self.ovs.connected.is_set() and setup:
                for x in setup.values():
                    self._ovs_try(self.ovs.install_xcon, x.in_port, x.out_port)
                self._ovs_try(self.ovs.barrier)  # the flows are in before the light comes on
            now = time.monotonic()
            with self._state_lock:
                for i, x in setup.items():
                    self._applied[i] = (x, now)
                self._dark -= affected
            self._set_light(affected | self._update_los())
            if self.ovs.connected.is_set():
                self._ovs_try(self.ovs.barrier)
        for x, since, _ in removed:
            if x.send_flow_removed:  # to every controller but the SLAVEs (Open vSwitch's default)
                pk, by = counters.get(x.in_port, (0, 0))
                self._broadcast(of10.flow_removed(x.in_port, x.cookie, x.priority, ofp.OFPRR_DELETE,
                                                  time.monotonic() - since, pk, by), slaves=False)
        LOG.info("applied %d change(s) after %.3fs dark; XCONs now %s", len(batch), delay,
                 sorted((x.in_port, x.out_port) for x, _ in self._applied.values()))
        return delay

    def _ovs_try(self, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except OvsError as exc:
            LOG.warning("%s%s: %s", fn.__name__, args, exc)

    def _resync(self) -> None:
        """After (re)connecting to OVS: flows and port light from the applied XCONs. The first session
        of a fresh agent adopts the XCON flows on the bridge instead (an agent restarted over a live
        bridge must not take its circuits down); a later one re-installs what this agent applied."""
        with self._apply_lock:
            adopt, self._adopt = self._adopt, False
            if not (adopt and self._adopt_bridge()):
                self.ovs.reset_flows()
                with self._state_lock:
                    applied = [x for x, _ in self._applied.values()]
                for x in applied:
                    self.ovs.install_xcon(x.in_port, x.out_port)
            self.ovs.barrier()
            self._set_light(set(self.ports) | self._update_los())
            self.ovs.barrier()

    def _adopt_bridge(self) -> bool:
        """Take over the XCON flows on the bridge as applied (lit) XCONs; False if there are none (or the
        controller has already sent XCONs of its own), so the caller starts from a clean bridge."""
        with self._state_lock:
            if len(self.table) or self._applied:
                return False
        found = self.ovs.xcon_flows()
        if not found:
            return False
        now = time.monotonic()
        with self._state_lock:
            adopted = [x for i, outs in sorted(found.items())
                       if len(outs) == 1 and (x := self.table.adopt(i, outs[0])) is not None]
            for x in adopted:
                self._applied[x.in_port] = (x, now)
            views = {p: v for p in self.ports if (v := self._ovs_view(p)) is not None}
            self._sense.update(light.adopt([x.ports for x in adopted], views))
        self.adopted = adopted
        for i in sorted(set(found) - {x.in_port for x in adopted}):
            self.ovs.remove_xcon(i)
        self.ovs.install_drop_all()
        LOG.info("adopted %d XCON(s) from bridge %s: %s", len(adopted), self.bridge,
                 sorted((x.in_port, x.out_port) for x in adopted))
        return True


def check_keepalive(echo_interval: float, echo_timeout: float) -> None:
    """ValueError unless the keepalive settings make sense (interval 0 = off)."""
    if echo_interval < 0 or echo_timeout < 0:
        raise ValueError("echo interval and timeout must be >= 0")
    if echo_interval > 0 and echo_timeout <= echo_interval:
        raise ValueError(f"echo timeout ({echo_timeout}s) must be longer than the echo interval ({echo_interval}s)")


def _targets(controller: tuple[str, int] | Target | Sequence[tuple[str, int] | Target]) -> list[Target]:
    """The controllers to connect to, from one ``(host, port)`` / Target or a list of them."""
    if isinstance(controller, Target) or (isinstance(controller, tuple) and len(controller) == 2
                                          and isinstance(controller[0], str)):
        items: list[Any] = [controller]
    else:
        items = list(controller)
    targets = [c if isinstance(c, Target) else Target(str(c[0]), int(c[1])) for c in items]
    if not targets:
        raise UpstreamConfigError("no controller given")
    return targets


def _abort(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
