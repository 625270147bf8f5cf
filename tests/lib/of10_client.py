"""A minimal OpenFlow 1.0 controller for tests: one TCP listener, one switch, os-ken's parser.

It answers HELLO and ECHO, records every message the switch sends (parsed with os-ken when os-ken
can parse it, with its arrival time) and lets a test send messages and wait for replies by xid.
No event loop framework: one reader thread and a condition variable.
"""
from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

from ots_virtual import of10


@dataclass
class Received:
    """One message from the switch: raw bytes, header, os-ken object (None if unparsable), arrival time."""

    raw: bytes
    header: of10.Header
    msg: Any
    at: float


class Of10Controller:
    """Listen on 127.0.0.1 (a free port unless given) for one OpenFlow 1.0 switch."""

    def __init__(self, port: int = 0) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", port))
        self._listener.listen(8)
        self.port: int = self._listener.getsockname()[1]
        self.received: list[Received] = []
        self._cond = threading.Condition()
        self._sock: socket.socket | None = None
        self._xid = 1000
        self._closed = False
        self.connections = 0
        self.session_ends: list[float] = []  # time.monotonic() when each switch session ended (EOF or reset)
        self.loop_error: BaseException | None = None  # why the accept loop ended, if it did before close()
        self._thread = threading.Thread(target=self._accept_loop, name="of10-test-controller", daemon=True)
        self._thread.start()

    def diagnosis(self) -> str:
        """The listener's state and the kernel's TCP sockets on its port (for a test that waited for a
        session in vain: a peer that believes it is connected shows there, with its process)."""
        import subprocess

        try:
            ss = subprocess.run(["ss", "-tanpH", f"( sport = :{self.port} or dport = :{self.port} )"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            ss = f"ss failed: {exc}"
        return (f"accept loop alive={self._thread.is_alive()} error={self.loop_error!r} connections={self.connections} "
                f"sessions ended={len(self.session_ends)} current session={'yes' if self._sock is not None else 'no'}; "
                f"sockets on port {self.port}:\n{ss or '(none)'}")

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    # --- connection ---------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        try:
            self._serve()
        except BaseException as exc:  # noqa: BLE001 - kept for the test that waits on a session
            self.loop_error = exc
            raise

    def _serve(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._listener.accept()
            except OSError as exc:
                if not self._closed:
                    self.loop_error = exc
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # our HELLO goes out before the session is published: a test that sends as soon as it sees
            # the switch connected must not get its bytes ahead of the HELLO (on a busy machine they did,
            # and a test of broken streams saw the HELLO glued to the bytes it left unfinished)
            try:
                sock.sendall(of10.hello(self.next_xid()))
            except OSError:  # the switch went at once (a test killed it): _read records the session's end
                pass
            with self._cond:
                self._sock = sock
                self.connections += 1
                self._cond.notify_all()
            self._read(sock)

    def _read(self, sock: socket.socket) -> None:
        reader = of10.MessageReader()
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                for raw in reader.feed(data):
                    h = of10.parse_header(raw)
                    if h.msg_type == ofp.OFPT_ECHO_REQUEST:
                        self._send_raw(of10.message(ofp.OFPT_ECHO_REPLY, h.xid, raw[8:]))
                    try:
                        msg = of10.parse(raw)
                    except Exception:
                        msg = None
                    with self._cond:
                        self.received.append(Received(raw, h, msg, time.monotonic()))
                        self._cond.notify_all()
        except OSError:
            pass
        finally:
            with self._cond:
                if self._sock is sock:
                    self._sock = None
                self.session_ends.append(time.monotonic())
                self._cond.notify_all()
            sock.close()  # the switch ended the session (or disconnect() did): release our side too

    def wait_session_end(self, count: int = 1, timeout: float = 15.0) -> float:
        """Wait until ``count`` switch sessions have ended; return when the last of them did."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.session_ends) >= count, timeout):
                raise TimeoutError(f"switch session {count} did not end")
            return self.session_ends[count - 1]

    def send_raw(self, data: bytes) -> None:
        """Send bytes as they are (broken streams in tests); OSError if the switch has gone."""
        self._send_raw(data)

    def wait_connected(self, timeout: float = 15.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self._sock is not None, timeout):
                raise TimeoutError("no switch connected")

    def disconnect(self) -> None:
        """Drop the current switch connection (the switch should reconnect)."""
        with self._cond:
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # the switch reset the session or it is being closed already: nothing to end
                pass
            sock.close()

    def close(self) -> None:
        self._closed = True
        self.disconnect()
        self._listener.close()

    # --- sending ------------------------------------------------------------------------------

    def next_xid(self) -> int:
        with self._cond:
            self._xid += 1
            return self._xid

    def _send_raw(self, data: bytes) -> None:
        with self._cond:
            sock = self._sock
        if sock is None:
            raise ConnectionError("no switch connected")
        sock.sendall(data)

    def send(self, msg: Any) -> int:
        """Send an os-ken message object or raw bytes (whose xid is kept); return the xid."""
        if isinstance(msg, (bytes, bytearray)):
            self._send_raw(bytes(msg))
            return of10.parse_header(msg).xid
        xid = self.next_xid()
        self._send_raw(of10.serialize(msg, xid))
        return xid

    # --- receiving ----------------------------------------------------------------------------

    def wait_for(self, pred: Callable[[Received], bool], timeout: float = 10.0, start: int = 0) -> Received:
        """The first received message (from index ``start``) satisfying ``pred``; TimeoutError if none."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for r in self.received[start:]:
                    if pred(r):
                        return r
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("expected message not received")
                self._cond.wait(left)

    def replies(self, xid: int) -> list[Received]:
        with self._cond:
            return [r for r in self.received if r.header.xid == xid]

    def reply(self, xid: int, timeout: float = 10.0) -> Received:
        """The (first) message with ``xid`` from the switch: a reply or an ERROR."""
        return self.wait_for(lambda r: r.header.xid == xid and r.header.msg_type != ofp.OFPT_HELLO, timeout)

    def request(self, msg: Any, timeout: float = 10.0) -> Any:
        """Send and return the parsed reply (os-ken object)."""
        return self.reply(self.send(msg), timeout).msg

    def stats(self, msg: Any, timeout: float = 10.0) -> list[Any]:
        """Send a STATS_REQUEST; return the concatenated bodies of all reply parts."""
        xid = self.send(msg)
        last = self.wait_for(lambda r: r.header.xid == xid and (
            r.header.msg_type == ofp.OFPT_ERROR
            or (r.header.msg_type == ofp.OFPT_STATS_REPLY and not r.msg.flags & ofp.OFPSF_REPLY_MORE)), timeout)
        if last.header.msg_type == ofp.OFPT_ERROR:
            raise AssertionError(f"stats request answered with error {last.msg.type}/{last.msg.code}")
        body: list[Any] = []
        for r in self.replies(xid):
            b = r.msg.body
            body.extend(b if isinstance(b, list) else [b])
        return body

    def barrier(self, timeout: float = 10.0) -> Received:
        xid = self.send(parser.OFPBarrierRequest(of10.DP))
        return self.wait_for(lambda r: r.header.xid == xid and r.header.msg_type == ofp.OFPT_BARRIER_REPLY, timeout)

    def features(self, timeout: float = 10.0) -> Any:
        return self.request(parser.OFPFeaturesRequest(of10.DP), timeout)

    def port_statuses(self, start: int = 0) -> list[Any]:
        with self._cond:
            return [r.msg for r in self.received[start:] if r.header.msg_type == ofp.OFPT_PORT_STATUS]

    def mark(self) -> int:
        """Index of the next message to arrive (pass as ``start`` to wait only for newer ones)."""
        with self._cond:
            return len(self.received)


def xcon(in_port: int, out_port: int, command: int = ofp.OFPFC_ADD, **kw: Any) -> Any:
    """An XCON FLOW_MOD: match in_port, one output."""
    return parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=in_port), command=command,
                             actions=[parser.OFPActionOutput(out_port, 0)], **kw)


def delete_xcon(in_port: int, strict: bool = False) -> Any:
    return parser.OFPFlowMod(of10.DP, parser.OFPMatch(in_port=in_port),
                             command=ofp.OFPFC_DELETE_STRICT if strict else ofp.OFPFC_DELETE)


def error_of(received: Received) -> tuple[int, int, bytes]:
    """(type, code, data) of an OFPT_ERROR."""
    assert received.header.msg_type == ofp.OFPT_ERROR, f"expected ERROR, got type {received.header.msg_type}"
    etype, code = struct.unpack_from("!HH", received.raw, 8)
    return etype, code, received.raw[12:]
