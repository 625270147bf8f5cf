"""A machine-wide lock so only one lab, test or benchmark at a time builds an OVS/Mininet network.

Mininet interface names and ``mn``-style cleanups collide when two networks are built at once
(two developers, or a test and a demo). Integration fixtures hold this lock for their lifetime.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator

LOCK_PATH = "/tmp/mlte-net.lock"


@contextlib.contextmanager
def net_lock(timeout: float = 1200.0) -> Iterator[None]:
    """Hold the network lock; raise TimeoutError if another holder keeps it longer than ``timeout``."""
    fd = os.open(LOCK_PATH, os.O_CREAT | os.O_RDWR, 0o666)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{LOCK_PATH} held by another test for {timeout:.0f}s") from None
                time.sleep(0.5)
        yield
    finally:
        os.close(fd)  # closing releases the lock
