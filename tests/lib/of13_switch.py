"""A fake OpenFlow 1.3 packet switch that dials a controller over plain TCP or TLS (no OVS needed).

Enough of a switch for the controller to take it as connected and run plans on it: it answers
HELLO, FEATURES, ECHO, BARRIER, GET_CONFIG, ROLE and MULTIPART requests (port descriptions list
``ports``, every other statistic is empty) and takes every other message (FLOW_MOD, PACKET_OUT,
SET_CONFIG, METER_MOD ...) silently. It counts what it received, by OpenFlow type, and how many
``recv`` calls brought it (one per TLS record or TCP read): the number of writes the controller made.
One thread per datapath, blocking sockets. Used by ``bench/ctl_tls_fake.py`` and the unit tests of the
controller's send path; as a process:

    python -m tests.lib.of13_switch --connect 127.0.0.1:6653 --dpid 0xa1 --dpid 0xc1 [--tls DIR]
"""
from __future__ import annotations

import argparse
import json
import signal
import socket
import ssl
import struct
import sys
import threading
import time
from collections import Counter
from pathlib import Path

VERSION = 4
HEADER = struct.Struct("!BBHI")  # version, type, length, xid
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY = 0, 1, 2, 3
FEATURES_REQUEST, FEATURES_REPLY, GET_CONFIG_REQUEST, GET_CONFIG_REPLY = 5, 6, 7, 8
MULTIPART_REQUEST, MULTIPART_REPLY, BARRIER_REQUEST, BARRIER_REPLY = 18, 19, 20, 21
ROLE_REQUEST, ROLE_REPLY = 24, 25
MP_PORT_DESC = 13
PORT = struct.Struct("!I4x6s2x16sIIIIIIII")  # ofp_port (64 bytes)


def message(typ: int, xid: int, body: bytes = b"") -> bytes:
    return HEADER.pack(VERSION, typ, HEADER.size + len(body), xid) + body


def port_desc(ports: list[int], dpid: int) -> bytes:
    return b"".join(PORT.pack(p, struct.pack("!IH", dpid & 0xFFFFFFFF, p)[:6], f"s{dpid:x}-eth{p}".encode(),
                              0, 4, 0x820, 0, 0, 0, 10_000_000, 10_000_000)  # live, 10 Gb/s FD copper
                    for p in ports)


def replies(typ: int, xid: int, body: bytes, dpid: int, ports: list[int]) -> bytes:
    """What the switch answers to one message (b"" for none)."""
    if typ == HELLO:
        return b""  # ours went out first
    if typ == ECHO_REQUEST:
        return message(ECHO_REPLY, xid, body)
    if typ == FEATURES_REQUEST:  # datapath_id, n_buffers, n_tables, auxiliary_id, capabilities
        return message(FEATURES_REPLY, xid, struct.pack("!QIBB2xII", dpid, 0, 254, 0, 0x4F, 0))
    if typ == GET_CONFIG_REQUEST:
        return message(GET_CONFIG_REPLY, xid, struct.pack("!HH", 0, 0xFFFF))
    if typ == BARRIER_REQUEST:
        return message(BARRIER_REPLY, xid)
    if typ == ROLE_REQUEST:
        return message(ROLE_REPLY, xid, body)
    if typ == MULTIPART_REQUEST:
        (mp_type,) = struct.unpack_from("!H", body)
        payload = port_desc(ports, dpid) if mp_type == MP_PORT_DESC else b""
        return message(MULTIPART_REPLY, xid, struct.pack("!HH4x", mp_type, 0) + payload)
    return b""


class FakeSwitch:
    """One datapath's connection to the controller, served by a thread until :meth:`close`."""

    def __init__(self, address: tuple[str, int], dpid: int, ports: list[int] | None = None,
                 tls: ssl.SSLContext | None = None) -> None:
        self.dpid = dpid
        self.ports = ports if ports is not None else [1, 2, 3, 4]
        raw = socket.create_connection(address, timeout=10)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # OVS sets it on its OpenFlow sockets too
        self.sock = tls.wrap_socket(raw, server_hostname=address[0]) if tls is not None else raw
        self.sock.settimeout(None)
        self.received: Counter[int] = Counter()  # messages by OpenFlow type
        self.reads = 0  # recv calls that returned data (one per TLS record over TLS)
        self.barriers: list[tuple[float, float]] = []  # (read returned, reply written) per read holding a BARRIER
        self.error: Exception | None = None  # what ended the session, if not a clean end of stream
        self._lock = threading.Lock()
        self.sock.sendall(message(HELLO, 1))
        self._thread = threading.Thread(target=self._serve, name=f"fake-switch-{dpid:x}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        buf = b""
        try:
            while True:
                data = self.sock.recv(65536)
                got = time.time()
                if not data:
                    return
                out = []
                barrier = False
                with self._lock:
                    self.reads += 1
                    buf += data
                    while len(buf) >= HEADER.size:
                        _, typ, length, xid = HEADER.unpack_from(buf)
                        if len(buf) < length:
                            break
                        body, buf = buf[HEADER.size:length], buf[length:]
                        self.received[typ] += 1
                        barrier = barrier or typ == BARRIER_REQUEST
                        out.append(replies(typ, xid, body, self.dpid, self.ports))
                reply = b"".join(out)
                if reply:
                    self.sock.sendall(reply)
                    if barrier:
                        self.barriers.append((got, time.time()))
        except (OSError, ValueError) as exc:  # the controller hung up or we were closed: the session ends
            self.error = exc

    def counts(self) -> tuple[Counter[int], int]:
        """(messages received by type, reads that brought them) so far."""
        with self._lock:
            return Counter(self.received), self.reads

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self._thread.join(timeout=5)


def client_context(tls_dir: str | Path) -> ssl.SSLContext:
    """A switch's TLS client context from ``mlte pki init DIR``'s files (CA, switch cert and key)."""
    d = Path(tls_dir)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(str(d / "ca-cert.pem"))
    ctx.load_cert_chain(str(d / "switch-cert.pem"), str(d / "switch-key.pem"))
    return ctx


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--connect", required=True, help="HOST:PORT of the controller's OpenFlow listener")
    ap.add_argument("--dpid", action="append", required=True, help="one datapath per --dpid (0x.. or decimal)")
    ap.add_argument("--report", help="write what each switch received (JSON) to this file when stopped")
    ap.add_argument("--tls", help="directory of `mlte pki init` (switch-cert.pem, switch-key.pem, ca-cert.pem)")
    args = ap.parse_args(argv)
    host, _, port = args.connect.rpartition(":")
    try:
        dpids = [int(d, 0) for d in args.dpid]
        ctx = client_context(args.tls) if args.tls else None
        switches = [FakeSwitch((host, int(port)), d, tls=ctx) for d in dpids]
    except (ValueError, OSError) as exc:
        print(f"of13_switch: error: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.wait(0.5) and all(s._thread.is_alive() for s in switches):
            pass
    except KeyboardInterrupt:
        pass
    for s in switches:
        s.close()
    if args.report:
        Path(args.report).write_text(json.dumps({hex(s.dpid): {"received": dict(s.received), "reads": s.reads,
                                                               "barriers": s.barriers} for s in switches}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
