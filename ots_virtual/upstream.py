"""The agent's connections to its controllers: targets (``tcp:``/``ssl:HOST:PORT``), TLS, and one channel per session.

Why a channel class: the agent reads a session in one thread and writes to it from several (replies,
PORT_STATUS from the OVS reader, barrier replies from the worker). An ``ssl.SSLSocket`` must not be
used by two threads at once, and a blocking ``sendall`` to a controller that stopped reading (a
frozen process) would hold every writer. So the socket is non-blocking: each read or write call runs
under one lock, a whole message is written under a second lock (messages never interleave), and a
write waits at most ``timeout`` s for room before the session is given up.

TLS (docs/ots.md, "TLS"): the agent is the client. It checks the controller's certificate against
the CA and presents its own certificate; like Open vSwitch it does not match host names (the CA is
the trust: any certificate it signed is a controller).
"""
from __future__ import annotations

import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ots_virtual import of10

CONNECT_TIMEOUT = 5.0  # s: TCP connect plus TLS handshake
#: TLS directory layout (``mlte pki init DIR``): the CA's certificate, and NAME-cert.pem / NAME-key.pem
TLS_CA = "ca-cert.pem"
TLS_NAME = "switch"


class UpstreamConfigError(ValueError):
    """A bad ``--controller`` or TLS option (one line; the CLI exits 2)."""

    user_error = True


@dataclass(frozen=True)
class Target:
    """One controller to connect to."""

    host: str
    port: int
    tls: bool = False

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'ssl' if self.tls else 'tcp'}:{host}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port


def parse_target(text: str) -> Target:
    """``HOST:PORT``, ``tcp:HOST:PORT`` or ``ssl:HOST:PORT`` (Open vSwitch's syntax; an IPv6 host in
    brackets; an empty host is 127.0.0.1)."""
    spec = text.strip()
    tls = False
    for prefix in ("tcp:", "ssl:"):
        if spec.startswith(prefix):
            tls, spec = prefix == "ssl:", spec[len(prefix):]
            break
    host, sep, port = spec.rpartition(":")
    if not sep or not port.isdigit():
        raise UpstreamConfigError(f"controller must be [tcp:|ssl:]HOST:PORT, got {text!r}")
    if not 0 < int(port) < 65536:
        raise UpstreamConfigError(f"controller port {port} out of range 1..65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise UpstreamConfigError(f"controller must be [tcp:|ssl:]HOST:PORT (an IPv6 host in brackets), got {text!r}")
    return Target(host or "127.0.0.1", int(port), tls)


def parse_targets(texts: list[str]) -> list[Target]:
    """Every controller of repeated and comma-separated ``--controller`` values, in order; a
    controller listed twice is an error (two sessions to one controller would fight over roles)."""
    targets = [parse_target(part) for text in texts for part in text.split(",") if part.strip()]
    if not targets:
        raise UpstreamConfigError("no controller given")
    seen: set[tuple[str, int]] = set()
    for t in targets:
        if t.address in seen:
            raise UpstreamConfigError(f"controller {t.host}:{t.port} listed twice")
        seen.add(t.address)
    return targets


@dataclass(frozen=True)
class TlsFiles:
    """The agent's TLS material: the CA that signs controllers, and its own certificate and key."""

    ca: str
    cert: str
    key: str

    @classmethod
    def from_dir(cls, directory: str, name: str = TLS_NAME) -> TlsFiles:
        """``DIR/ca-cert.pem``, ``DIR/NAME-cert.pem``, ``DIR/NAME-key.pem`` (``mlte pki init``'s layout)."""
        d = Path(directory)
        return cls(str(d / TLS_CA), str(d / f"{name}-cert.pem"), str(d / f"{name}-key.pem"))

    def context(self) -> ssl.SSLContext:
        """A client context: TLS 1.2+, the controller's certificate verified against the CA, ours presented."""
        for what, path in (("CA", self.ca), ("certificate", self.cert), ("key", self.key)):
            if not Path(path).is_file():
                raise UpstreamConfigError(f"TLS {what} file {path}: not found")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.check_hostname = False  # as Open vSwitch: the CA is the trust, not the controller's name
        ctx.verify_mode = ssl.CERT_REQUIRED
        try:
            ctx.load_verify_locations(cafile=self.ca)
        except (ssl.SSLError, OSError) as exc:
            raise UpstreamConfigError(f"TLS CA file {self.ca}: {_reason(exc)}") from None
        try:
            ctx.load_cert_chain(self.cert, self.key)
        except (ssl.SSLError, OSError) as exc:
            raise UpstreamConfigError(f"TLS certificate {self.cert} / key {self.key}: {_reason(exc)}") from None
        return ctx


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason).lower().replace("_", " ")
    return getattr(exc, "strerror", None) or str(exc)


#: how a TLS session looks when the controller hangs up on it (e.g. after refusing our certificate)
_HUNG_UP = (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError, BrokenPipeError)


def describe_failure(target: Target, exc: OSError, first: bool = False) -> str:
    """One line saying why a session could not start or ended (a refused certificate says which side
    to fix). ``first``: nothing had arrived on the session yet. With TLS 1.3 the client's handshake
    ends before the server has checked the client's certificate, so a controller refusing ours shows
    up as its alert, or, when its close overtakes the alert, only as a hang-up."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"TLS: the certificate of controller {target} was refused ({exc.verify_message}); "
                f"is it signed by the CA given to the agent?")
    text = _reason(exc) if isinstance(exc, ssl.SSLError) else exc.strerror or str(exc) or type(exc).__name__
    reason = str(getattr(exc, "reason", "") or "")
    if "ALERT" in reason and any(w in reason for w in ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_REQUIRED")):
        return f"TLS: controller {target} refused the agent's certificate ({text}); is it signed by the CA the controller trusts?"
    if target.tls and first and isinstance(exc, _HUNG_UP):
        return (f"TLS: controller {target} hung up before its first message ({text}); "
                f"did it refuse the agent's certificate?")
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake with {target} failed: {text}"
    return text


class Channel:
    """One upstream session's socket (plain or TLS), non-blocking, safe to write from several threads."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self.tls = isinstance(sock, ssl.SSLSocket)
        self._io = threading.Lock()  # one read or write call at a time (an SSL object is not thread-safe)
        self._write = threading.Lock()  # one message at a time

    def fileno(self) -> int:
        return self.sock.fileno()

    def pending(self) -> bool:
        """True if decrypted bytes wait inside the TLS layer (``select`` cannot see them)."""
        if not self.tls:
            return False
        with self._io:
            try:
                return bool(self.sock.pending())  # type: ignore[attr-defined]
            except (OSError, ValueError):
                return False

    def recv(self) -> bytes | None:
        """What has arrived: bytes, ``b""`` at the end of the stream, None if nothing yet (call again
        after ``select``). OSError when the session broke."""
        with self._io:
            try:
                return self.sock.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                return None
            except ValueError as exc:  # closed under us by stop()
                raise OSError(str(exc)) from None

    def send(self, data: bytes, timeout: float) -> None:
        """Write all of ``data``; OSError (TimeoutError) if the peer has not made room within ``timeout`` s."""
        view = memoryview(data)
        deadline = time.monotonic() + timeout
        with self._write:
            while view:
                with self._io:
                    try:
                        n = self.sock.send(view)
                    except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError, InterruptedError):
                        n = 0
                    except ValueError as exc:
                        raise OSError(str(exc)) from None
                view = view[n:]
                if not view:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"controller has not read for {timeout:g}s")
                try:
                    select.select([], [self.sock], [], min(left, 0.05))
                except (ValueError, OSError) as exc:
                    raise OSError(f"session closed: {exc}") from None

    def shutdown_write(self) -> None:
        """Send FIN (on the TCP socket underneath a TLS one: the TLS layer stays readable)."""
        with self._io:
            socket.socket.shutdown(self.sock, socket.SHUT_WR)

    def abort(self) -> None:
        """Break the session now (both directions): its reader sees the end and the session closes."""
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        self.abort()
        self.sock.close()


def connect(target: Target, tls: ssl.SSLContext | None, timeout: float = CONNECT_TIMEOUT,
            connecting: Callable[[socket.socket | None], None] | None = None) -> Channel:
    """A session to ``target`` (TLS handshake done for ``ssl:``) that has already sent our HELLO: it
    must come first, and the session is published to the other threads (PORT_STATUS) only after this.
    ``connecting`` is told the TCP socket while the handshake runs (and None after), so that the
    agent's stop() can break a handshake that hangs."""
    sock = socket.create_connection(target.address, timeout=timeout)
    if connecting is not None:
        connecting(sock)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if target.tls:
            if tls is None:
                raise UpstreamConfigError(f"controller {target} needs TLS files (--ssl-ca/--ssl-cert/--ssl-key)")
            sock = tls.wrap_socket(sock, server_hostname=target.host)  # handshake, within the timeout
        sock.sendall(of10.hello(0))
    except BaseException:
        try:
            sock.close()
        except OSError:
            pass
        raise
    finally:
        if connecting is not None:
            connecting(None)
    return Channel(sock)
