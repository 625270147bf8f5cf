"""A switch's OpenFlow-over-TLS session for os-ken's Datapath: TLS in memory, one green socket underneath.

Why not eventlet's green ``SSLSocket``: measured per OpenFlow round trip (``bench/ctl_tls_socket.py``,
docs/operations.md "OpenFlow over TLS") it costs the controller about twice the CPU and wall time
of plain TCP. Every record is read from the kernel in two calls (its 5-byte header, then its body);
os-ken's receive loop reads each message as an 8-byte header and then the rest, so every call
decrypts through six Python layers and ends in an ``SSLWantReadError`` raised and caught when the
socket is empty. Here the TLS state is an ``ssl.SSLObject`` over two memory BIOs: one ``recv`` of
up to 64 KiB from the socket brings whatever records have arrived, they are decrypted at once, and
os-ken's small reads are served from the plaintext buffer. Writes encrypt into the outgoing BIO and
leave in one ``sendall``. The bytes on the wire are the same TLS.

What stays as before: the handshake is bounded by the socket's timeout and a refused peer still
gets its TLS alert; a socket timeout is raised to os-ken's loop as before (it retries). What
changes: a broken TLS stream (a bad record, a fatal alert) is a ``ConnectionAbortedError``, which
os-ken's receive loop treats as the end of the session; a green ``SSLSocket``'s ``SSLError`` made
that loop retry the same failing read for ever. A TLS ``close_notify`` is the end of the stream.
"""
from __future__ import annotations

import ssl
from typing import Any

READ_SIZE = 65536  # bytes asked of the socket per read: whatever records have arrived, at once


class TlsChannel:
    """TLS over ``sock`` (a connected green socket), server side, handshake done in the constructor.

    ``recv``/``sendall``/``setsockopt``/``settimeout``/``shutdown``/``close``: what os-ken's
    ``Datapath`` calls. Its receive and send loops are two greenthreads on one channel: decrypting
    and encrypting never yield (C calls on the ``SSLObject``), and whatever the TLS layer has to
    send (records, alerts, post-handshake messages) leaves under one lock, in the order it was
    made, so records from the two loops never interleave on the wire.
    """

    def __init__(self, sock: Any, context: ssl.SSLContext, lock: Any) -> None:
        self.sock = sock
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._in, self._out, server_side=True)
        self._plain = bytearray()
        self._lock = lock  # a green lock: one writer of TLS output at a time
        self._eof = False
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                if not self._fill():
                    raise ssl.SSLEOFError("EOF during the TLS handshake") from None
            except ssl.SSLError:
                self._flush_quietly()  # the peer gets our alert (e.g. "unknown ca") before we close
                raise
        self._flush()

    def _flush(self) -> None:
        with self._lock:
            if self._out.pending:
                self.sock.sendall(self._out.read())

    def _flush_quietly(self) -> None:
        try:
            self._flush()
        except OSError:
            pass

    def _fill(self) -> bool:
        """One read from the socket into the TLS layer; False at the end of the stream."""
        data = self.sock.recv(READ_SIZE)
        if not data:
            self._in.write_eof()
            return False
        self._in.write(data)
        return True

    def recv(self, size: int) -> bytes:
        """Up to ``size`` bytes of plaintext (``b""`` at the end of the stream), waiting for at least one."""
        while not self._plain and not self._eof:
            try:
                data = self._tls.read(READ_SIZE)
                if not data:  # the peer's close_notify (Python returns b"" for a clean TLS shutdown)
                    self._eof = True
                    break
                self._plain += data
                continue
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):  # close_notify, or the TCP stream ended
                self._eof = True
                break
            except ssl.SSLError as exc:  # a bad record or a fatal alert: the session is over
                self._flush_quietly()
                raise ConnectionAbortedError(f"TLS: {exc}") from None
            if self._out.pending:  # what reading made the TLS layer answer (e.g. a key update); rare,
                self._flush()  # so the receive loop does not wait on the send loop's lock otherwise
            if not self._fill():
                self._eof = True
        out = bytes(self._plain[:size])
        del self._plain[:size]
        return out

    def sendall(self, data: bytes) -> None:
        with self._lock:
            try:
                self._tls.write(data)
            except ssl.SSLError as exc:
                raise ConnectionAbortedError(f"TLS: {exc}") from None
            self.sock.sendall(self._out.read())

    def setsockopt(self, *args: Any) -> None:
        self.sock.setsockopt(*args)

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()
