"""UDP helpers for tests that run the labs' probe scripts as real processes."""
from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """A UDP port nobody holds right now on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_bound(port: int, proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """Until ``proc`` has bound UDP ``port`` (read from /proc/net/udp: binding it ourselves to find out
    could take it from under the process). A fixed sleep was too short on a loaded machine: the
    first datagrams went to a port nobody listened on yet."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with open("/proc/net/udp") as f:
            if any(line.split()[1].endswith(f":{port:04X}") for line in list(f)[1:]):
                return
        assert proc.poll() is None, "the receiver exited before binding its port"
        time.sleep(0.02)
    raise AssertionError(f"UDP port {port} not bound within {timeout} s")
