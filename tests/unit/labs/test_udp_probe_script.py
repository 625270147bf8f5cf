"""``mininet_labs/udp_probe.py`` runs on a Mininet host as a plain file, with nothing of the project
on ``sys.path`` but its own directory (it imports its sibling ``traffic.py``): echo, send and sink
over loopback, each a separate process started from another directory."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

from mininet_labs import traffic, udp_probe
from tests.lib.udp import free_port, wait_bound


def test_echo_and_send_measure_every_probe(tmp_path):
    port, out = free_port(), tmp_path / "probe.json"
    echo = subprocess.Popen([sys.executable, udp_probe.SCRIPT, "echo", str(port), "--duration", "3"], cwd=tmp_path)
    try:
        wait_bound(port, echo)
        subprocess.run([sys.executable, udp_probe.SCRIPT, "send", "127.0.0.1", str(port), "--sport", str(free_port()),
                        "--interval", "0.01", "--duration", "0.5", "--out", str(out)], cwd=tmp_path, check=True,
                       timeout=10)
    finally:
        echo.wait(timeout=10)
    got = json.loads(out.read_text())
    assert 40 <= len(got["sent"]) <= 51 and len(got["rtt_ms"]) == len(got["sent"])
    assert all(0 < ms < 100 for ms in got["rtt_ms"].values())


def test_sink_counts_bins_and_acknowledges(tmp_path):
    port, out = free_port(), tmp_path / "sink.json"
    t0 = time.time()
    sink = subprocess.Popen([sys.executable, udp_probe.SCRIPT, "sink", str(port), "--duration", "2.5",
                             "--t0", str(t0), "--bin", "0.25", "--out", str(out)], cwd=tmp_path)
    try:
        wait_bound(port, sink)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(1.0)
            for seq in range(20):
                s.sendto(traffic.ELEPHANT + seq.to_bytes(8, "big") + b"x" * 91, ("127.0.0.1", port))
                assert s.recv(64) == b"A" + seq.to_bytes(8, "big")  # every packet acknowledged
    finally:
        sink.wait(timeout=10)
    bins = json.loads(out.read_text())["bins"]
    assert sum(b[0] for b in bins.values()) == 20 * 100 and sum(b[3] for b in bins.values()) == 20
    assert min(b[1] for b in bins.values()) == 0 and max(b[2] for b in bins.values()) == 19
