"""LabClock keeps a lab's wait for the network lock apart from its own run time."""
from __future__ import annotations

import fcntl
import os
import threading
import time

from mininet_labs import labclock, netlock


def test_lock_wait_and_network_time_are_kept_apart(tmp_path, monkeypatch):
    lock = tmp_path / "net.lock"
    monkeypatch.setattr(netlock, "LOCK_PATH", str(lock))
    fd = os.open(lock, os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another lab holds the lock for 0.6 s
    threading.Timer(0.6, os.close, (fd,)).start()
    lines: list[str] = []
    clock = labclock.LabClock(lines.append)
    with clock.locked():
        time.sleep(0.3)
    d = clock.durations()
    assert 0.5 <= d["lock_wait"] <= 1.6, d  # net_lock polls every 0.5 s
    assert 0.3 <= d["network"] <= 0.6, d
    assert d["total"] >= d["lock_wait"] + d["network"] - 0.1, d
    assert lines and lines[0].endswith("network lock held") and lines[0].startswith("[")


def test_durations_before_the_lock_count_everything_as_waiting():
    clock = labclock.LabClock(lambda _line: None)
    d = clock.durations()
    assert d["network"] == 0.0 and d["lock_wait"] == d["total"]
