"""A private, single-member etcd for the labs and tests (Debian's ``etcd-server``, a plain process).

Free loopback ports, a data directory (a temp dir unless given), the fast timing the election needs
(heartbeat 50 ms, election timeout 500 ms: etcd's shortest lease TTL follows the election timeout, so
a 1 s lease really expires after ~1.4 s instead of ~2.2 s with the defaults), a wait until it has
elected itself and answers, and a stop by PID (SIGTERM, then SIGKILL). ``stop()`` keeps the data, so
``start()`` again brings the same store back (revisions, hence epochs, keep growing).

    with etcd_server() as etcd:
        Election(etcd.endpoint, candidate="c1").campaign()
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from app.errors import MlteError

ETCD_BINARY = "/usr/bin/etcd"
HEARTBEAT_MS = 50
ELECTION_MS = 500


class EtcdServerError(MlteError):
    """etcd is missing, did not start, or did not answer in time (one-line message)."""


def find_etcd(binary: str | None = None) -> Path:
    """The etcd binary: ``binary`` if given, else /usr/bin/etcd, else ``etcd`` on PATH."""
    for cand in (binary,) if binary else (ETCD_BINARY, shutil.which("etcd")):
        if cand and os.access(cand, os.X_OK):
            return Path(cand)
    raise EtcdServerError(f"etcd not found ({binary or ETCD_BINARY}): `make test` (scripts/bootstrap.sh) "
                          "installs Debian's etcd-server")


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (etcd binds it a moment later; start() retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EtcdServer:
    """One etcd process on 127.0.0.1; ``endpoint`` is its client URL (``http://127.0.0.1:PORT``)."""

    def __init__(self, data_dir: str | Path | None = None, binary: str | None = None,
                 heartbeat_ms: int = HEARTBEAT_MS, election_ms: int = ELECTION_MS) -> None:
        self.binary = find_etcd(binary)
        self._own_dir = data_dir is None
        self.base = Path(tempfile.mkdtemp(prefix="mlte-etcd-")) if data_dir is None else Path(data_dir)
        self.data_dir = self.base / "data"
        self.log_path = self.base / "etcd.log"
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.client_port = 0
        self.peer_port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _command(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.peer_port}"
        return [str(self.binary), "--name", "mlte", "--data-dir", str(self.data_dir),
                "--listen-client-urls", self.endpoint, "--advertise-client-urls", self.endpoint,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"mlte={peer}", "--initial-cluster-state", "new",
                "--heartbeat-interval", str(self.heartbeat_ms), "--election-timeout", str(self.election_ms),
                "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"]

    def start(self, timeout: float = 20.0) -> EtcdServer:
        """Start (or restart, same ports and data) and return once it has a leader and answers."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        self.base.mkdir(parents=True, exist_ok=True)
        fresh_ports = self.client_port == 0
        for attempt in range(3):
            if fresh_ports or attempt:
                self.client_port, self.peer_port = free_port(), free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(self._command(), stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            if self._wait_ready(timeout):
                return self
            lost_port = self.proc.poll() is not None and "address already in use" in self._log_tail()
            self.stop()
            if not lost_port:
                break
        raise EtcdServerError(f"etcd did not answer at {self.endpoint} within {timeout:g}s "
                              f"(log {self.log_path}: {self._log_tail().strip()[-300:] or 'empty'})")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                return False
            if self.healthy():
                return True
            time.sleep(0.05)
        return False

    def healthy(self) -> bool:
        """True when the member answers and knows a raft leader (so writes and leases work)."""
        req = urllib.request.Request(self.endpoint + "/v3/maintenance/status", data=b"{}",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=1.0) as resp:
                return bool(json.loads(resp.read() or b"{}").get("leader"))
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; the data stays (``start()`` brings it back)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, sig)
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def close(self) -> None:
        """Stop and delete the temp directory this object made (a given ``data_dir`` is kept)."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> EtcdServer:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def etcd_server(data_dir: str | Path | None = None, binary: str | None = None,
                heartbeat_ms: int = HEARTBEAT_MS, election_ms: int = ELECTION_MS) -> Iterator[EtcdServer]:
    """Start a private etcd; stop it by PID and delete its temp files when the block ends."""
    server = EtcdServer(data_dir, binary, heartbeat_ms, election_ms)
    try:
        yield server.start()
    finally:
        server.close()
