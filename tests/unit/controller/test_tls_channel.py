"""TlsChannel: the controller's TLS session with a switch, as os-ken's Datapath uses it.

Real TLS (``mlte pki init``'s CA and certificates, the controller's server context) on loopback
sockets; the peer is the benchmark's fake switch or a plain ``ssl`` client in a thread.
"""
from __future__ import annotations

import socket
import ssl
import struct
import threading
import time

import pytest

from app import pki
from app.controller.compat import server_context
from app.controller.tls_channel import TlsChannel
from tests.lib import of13_switch as fake


class CountingSocket:
    """A socket that counts its ``recv`` calls (the system calls a TLS read costs)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock, self.recvs = sock, 0

    def recv(self, n: int) -> bytes:
        self.recvs += 1
        return self.sock.recv(n)

    def __getattr__(self, name: str):
        return getattr(self.sock, name)


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    pki.init(d)
    return d


def controller_ctx(d) -> ssl.SSLContext:
    return server_context(str(d / "ca-cert.pem"), str(d / "controller-cert.pem"), str(d / "controller-key.pem"))


def session(pki_dir, client, timeout: float = 10):
    """(TlsChannel or the exception it raised, listener, what ``client(address)`` returned)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    got: list = []

    def accept() -> None:
        sock, _ = listener.accept()
        sock.settimeout(timeout)
        try:
            got.append(TlsChannel(CountingSocket(sock), controller_ctx(pki_dir), threading.Lock()))
        except (ssl.SSLError, OSError) as exc:
            got.append(exc)
            sock.close()

    t = threading.Thread(target=accept)
    t.start()
    try:
        peer = client(listener.getsockname())
    finally:
        t.join(timeout=15)
        listener.close()
    return got[0], peer


def read_message(chan) -> bytes:
    """As os-ken's receive loop: the 8-byte header, then the rest."""
    head = b""
    while len(head) < 8:
        part = chan.recv(8 - len(head))
        assert part, "end of stream"
        head += part
    (length,) = struct.unpack_from("!H", head, 2)
    body = b""
    while len(body) < length - 8:
        part = chan.recv(length - 8 - len(body))
        assert part, "end of stream"
        body += part
    return head + body


def test_round_trips_with_os_ken_small_reads_cost_one_socket_read_each(pki_dir):
    chan, switch = session(pki_dir, lambda addr: fake.FakeSwitch(addr, 0xA1, tls=fake.client_context(pki_dir)))
    try:
        assert isinstance(chan, TlsChannel)
        assert read_message(chan)[1] == fake.HELLO
        for xid in range(100, 110):
            before = chan.sock.recvs
            chan.sendall(fake.message(14, xid, bytes(80)) + fake.message(fake.BARRIER_REQUEST, xid + 1000))
            assert read_message(chan) == fake.message(fake.BARRIER_REPLY, xid + 1000)
            assert chan.sock.recvs - before == 1  # header and body from one read of the socket
        received, reads = switch.counts()
        assert (received[14], received[fake.BARRIER_REQUEST], reads) == (10, 10, 10)  # one record per burst
        chan.sendall(fake.message(fake.FEATURES_REQUEST, 7))
        features = read_message(chan)
        assert features[1] == fake.FEATURES_REPLY and struct.unpack_from("!Q", features, 8)[0] == 0xA1
    finally:
        switch.close()
        chan.close()


def test_several_messages_in_one_record_are_served_one_by_one(pki_dir):
    def client(addr):
        s = fake.client_context(pki_dir).wrap_socket(socket.create_connection(addr), server_hostname="127.0.0.1")
        s.sendall(fake.message(fake.HELLO, 1) + fake.message(fake.ECHO_REQUEST, 2, b"abc") + fake.message(21, 3))
        return s

    chan, peer = session(pki_dir, client)
    try:
        assert [read_message(chan) for _ in range(3)] == [
            fake.message(fake.HELLO, 1), fake.message(fake.ECHO_REQUEST, 2, b"abc"), fake.message(21, 3)]
    finally:
        peer.close()
        chan.close()


def test_close_notify_and_a_closed_socket_end_the_stream(pki_dir):
    def client(addr):
        return fake.client_context(pki_dir).wrap_socket(socket.create_connection(addr), server_hostname="127.0.0.1")

    chan, peer = session(pki_dir, client)
    peer.sendall(b"last")
    peer.settimeout(0.3)
    try:
        peer.unwrap()  # sends TLS close_notify, then waits for ours (the channel sends none): timeout
    except (TimeoutError, ssl.SSLError, OSError):
        pass
    assert chan.recv(100) == b"last"
    assert chan.recv(100) == b""
    assert chan.recv(100) == b""  # and stays ended
    peer.close()
    chan.close()

    chan, peer = session(pki_dir, client)
    peer.close()  # TCP closed without close_notify (a switch that died; RST: it left our session tickets unread)
    try:
        assert chan.recv(8) == b""
    except ConnectionResetError:  # an OSError that is no ssl.SSLError: os-ken's receive loop ends the session
        pass
    chan.close()


def test_a_broken_record_ends_the_session_as_a_connection_error_not_an_ssl_error(pki_dir):
    holder: list = []

    def client(addr):
        raw = socket.create_connection(addr)
        holder.append(raw)
        return fake.client_context(pki_dir).wrap_socket(raw, server_hostname="127.0.0.1")

    chan, peer = session(pki_dir, client)
    try:
        socket.socket.sendall(peer, b"\x17\x03\x03\x00\x20" + bytes(32))  # application data that fails to decrypt
        with pytest.raises(ConnectionAbortedError) as err:
            chan.recv(8)
        # os-ken's receive loop retries an ssl.SSLError for ever; an OSError that is not one ends it
        assert not isinstance(err.value, ssl.SSLError) and isinstance(err.value, OSError)
    finally:
        peer.close()
        chan.close()


def test_a_socket_timeout_reaches_the_caller_and_the_session_goes_on(pki_dir):
    def client(addr):
        return fake.client_context(pki_dir).wrap_socket(socket.create_connection(addr), server_hostname="127.0.0.1")

    chan, peer = session(pki_dir, client, timeout=0.2)
    try:
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):  # os-ken's loop catches socket.timeout and reads again
            chan.recv(8)
        assert time.monotonic() - t0 < 5
        peer.sendall(b"after")
        assert chan.recv(8) == b"after"
    finally:
        peer.close()
        chan.close()


def test_a_peer_with_another_ca_is_refused_in_the_handshake(pki_dir, tmp_path):
    pki.init(tmp_path / "other")
    other = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    other.check_hostname = False
    other.verify_mode = ssl.CERT_NONE  # it would trust us; we must not trust it
    other.load_cert_chain(str(tmp_path / "other" / "switch-cert.pem"), str(tmp_path / "other" / "switch-key.pem"))

    def client(addr):
        s = other.wrap_socket(socket.create_connection(addr))
        try:
            s.sendall(b"x")
            return s.recv(10)
        except (ssl.SSLError, OSError) as exc:
            return exc
        finally:
            s.close()

    chan, peer_saw = session(pki_dir, client)
    assert isinstance(chan, ssl.SSLError) and "certificate" in str(chan).lower()
    assert isinstance(peer_saw, (ssl.SSLError, OSError))  # the alert reached it, or the session ended under it


def test_a_cleartext_openflow_hello_is_refused_and_gets_no_openflow_back(pki_dir):
    def client(addr):
        s = socket.create_connection(addr)
        s.settimeout(10)
        s.sendall(fake.message(fake.HELLO, 1))
        try:
            return s.recv(100)
        except ConnectionResetError:
            return b""
        finally:
            s.close()

    chan, answer = session(pki_dir, client)
    assert isinstance(chan, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(chan)
    assert answer == b"" or answer[:1] == b"\x15"  # the session closes (or a TLS alert), never a HELLO
