"""The per-session channel under the agent's sessions: whole messages from several writer threads never
interleave, a peer that stops reading costs a writer at most its timeout, reads never block."""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from ots_virtual import of10
from ots_virtual.upstream import Channel


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_reads_never_block(pair):
    a, b = pair
    chan = Channel(a)
    assert chan.recv() is None  # nothing yet
    b.sendall(b"abc")
    deadline = time.monotonic() + 5
    got = b""
    while got != b"abc" and time.monotonic() < deadline:
        got += chan.recv() or b""
    assert got == b"abc"
    b.shutdown(socket.SHUT_WR)
    deadline = time.monotonic() + 5
    while (data := chan.recv()) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert data == b""  # the end of the stream


def test_a_peer_that_stops_reading_times_the_writer_out(pair):
    a, b = pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    chan = Channel(a)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="has not read"):
        chan.send(b"x" * (8 << 20), timeout=0.3)  # far more than both buffers hold
    assert time.monotonic() - started < 5  # bounded by the timeout, not by the peer


def test_messages_from_several_threads_never_interleave(pair):
    a, b = pair
    chan = Channel(a)
    writers, per_writer = 4, 300
    received = bytearray()

    def read() -> None:
        b.settimeout(10)
        while len(received) < writers * per_writer * 1008:
            data = b.recv(65536)
            if not data:
                return
            received.extend(data)

    reader = threading.Thread(target=read)
    reader.start()

    def write(n: int) -> None:
        for i in range(per_writer):
            chan.send(of10.message(4, n << 16 | i, bytes([n]) * 1000), timeout=10)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    reader.join(timeout=30)
    msgs = list(of10.MessageReader().feed(bytes(received)))
    assert len(msgs) == writers * per_writer
    seen: dict[int, list[int]] = {}
    for m in msgs:
        xid = struct.unpack_from("!I", m, 4)[0]
        n, i = xid >> 16, xid & 0xFFFF
        assert m[8:] == bytes([n]) * 1000  # one writer's bytes, whole
        seen.setdefault(n, []).append(i)
    assert all(v == list(range(per_writer)) for v in seen.values())  # each writer's order kept
