"""One OpenFlow round trip on the controller's socket alone: plain TCP, TLS as the controller does it, TLS as it did.

The controller's side of a plan step's round trip without os-ken's queues, the plan runner or HTTP:
one eventlet process accepts a fake switch (``tests/lib/of13_switch.py``, another process) and
wraps the socket as the controller does over TLS (``tls``: :class:`app.controller.tls_channel.TlsChannel`
with :func:`app.controller.compat.server_context`) or did before (``green``: eventlet's green
``SSLSocket``), or leaves it plain (``plain``); then N times writes a FLOW_MOD + BARRIER in one
``sendall`` (the send loop's coalesced burst) and reads the BARRIER_REPLY the way os-ken's receive
loop does (the 8-byte header, then the rest). It prints one JSON line: wall and CPU microseconds per
round trip of this process. ``bench/ctl_tls_fake.py`` runs it alternately in every mode.

    .venv/bin/python bench/ctl_tls_socket.py plain|tls|green [N]
"""
from __future__ import annotations

import eventlet
import eventlet.semaphore

eventlet.monkey_patch(thread=True)  # as os-ken's hub.patch(thread=True) in the controller

import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from eventlet.green import socket as green_socket  # noqa: E402
from eventlet.green import ssl as green_ssl  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app import pki  # noqa: E402
from app.controller.compat import server_context  # noqa: E402
from app.controller.tls_channel import TlsChannel  # noqa: E402

MODES = ("plain", "tls", "green")

HEADER = struct.Struct("!BBHI")
FLOW_MOD = HEADER.pack(4, 14, 88, 7) + bytes(80)  # a FLOW_MOD's size; the fake switch does not parse its body
BARRIER = HEADER.pack(4, 20, 8, 8)
WARM_UP = 200


def read_message(sock) -> bytes:
    """One OpenFlow message, read as os-ken's ``Datapath._recv_loop`` reads: header, then the rest."""
    buf = b""
    while len(buf) < HEADER.size:
        chunk = sock.recv(HEADER.size - len(buf))
        if not chunk:
            raise ConnectionError("switch closed")
        buf += chunk
    (length,) = struct.unpack_from("!H", buf, 2)
    while len(buf) < length:
        chunk = sock.recv(length - len(buf))
        if not chunk:
            raise ConnectionError("switch closed")
        buf += chunk
    return buf


def probe(mode: str, n: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="mlte-tls-socket-"))
    switch = None
    try:
        pki.init(work / "pki")
        d = work / "pki"
        listener = green_socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        cmd = [sys.executable, "-m", "tests.lib.of13_switch", "--connect", f"127.0.0.1:{listener.getsockname()[1]}",
               "--dpid", "0xa1", *(["--tls", str(d)] if mode != "plain" else [])]
        switch = subprocess.Popen(cmd, cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                  stdin=subprocess.DEVNULL)
        listener.settimeout(30)
        sock, _ = listener.accept()
        sock.setsockopt(6, 1, 1)  # TCP_NODELAY, as os-ken's Datapath
        sock.settimeout(5)
        files = (str(d / "ca-cert.pem"), str(d / "controller-cert.pem"), str(d / "controller-key.pem"))
        if mode == "tls":
            sock = TlsChannel(sock, server_context(*files), eventlet.semaphore.Semaphore())
        elif mode == "green":
            sock = server_context(*files, green_ssl.SSLContext).wrap_socket(sock, server_side=True)
        read_message(sock)  # the switch's HELLO
        sock.sendall(HEADER.pack(4, 0, 8, 1))
        for i in range(WARM_UP + n):
            if i == WARM_UP:
                t0, c0 = time.perf_counter(), time.process_time()
            sock.sendall(FLOW_MOD + BARRIER)
            reply = read_message(sock)
            if reply[1] != 21:
                raise RuntimeError(f"expected a BARRIER_REPLY, got type {reply[1]}")
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        sock.close()
        return {"mode": mode, "n": n, "wall_us_per_rt": round(wall / n * 1e6, 1),
                "cpu_us_per_rt": round(cpu / n * 1e6, 1)}
    finally:
        if switch is not None:
            switch.terminate()
            switch.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    if len(sys.argv) not in (2, 3) or sys.argv[1] not in MODES:
        print("usage: ctl_tls_socket.py plain|tls|green [N]", file=sys.stderr)
        return 2
    try:
        n = int(sys.argv[2]) if len(sys.argv) == 3 else 3000
    except ValueError:
        n = 0
    if n < 1:
        print("ctl_tls_socket: error: N must be a positive integer", file=sys.stderr)
        return 2
    print(json.dumps(probe(sys.argv[1], n)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
