"""Measure what a path really adds, so a lab records the delay it measured, never the one it asked for.

- :func:`measure_rtt`: ping from a namespace (a Mininet host: ``Netns(pid=h1.pid)``) and the RTT
  distribution; what a lab puts in results.json via :func:`path_record`.
- :func:`one_way`: timestamped UDP (``dlyprobe``) at a given rate and frame size from one namespace to
  another; per-frame one-way delay (both ends share the machine's clock) and loss. The benchmark and
  the integration test use it.
"""
from __future__ import annotations

import re
import select
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from mininet_labs.delay.build import ensure_binary
from mininet_labs.delay.netns import NetError, Netns

PING_TIME = re.compile(r"icmp_seq=(\d+) .*time=([\d.]+) ms")
PING_SENT = re.compile(r"(\d+) packets transmitted, (\d+) received")


def summary(ms: np.ndarray) -> dict[str, float] | None:
    """mean, p1, p50, p99, min, max, stdev of a sample in ms (None when empty)."""
    if ms.size == 0:
        return None
    p1, p50, p99 = np.percentile(ms, [1, 50, 99])
    return {"mean": round(float(ms.mean()), 4), "p1": round(float(p1), 4), "p50": round(float(p50), 4),
            "p99": round(float(p99), 4), "min": round(float(ms.min()), 4), "max": round(float(ms.max()), 4),
            "stdev": round(float(ms.std()), 4), "n": int(ms.size)}


def measure_rtt(src: Netns, dst_ip: str, count: int = 50, interval_s: float = 0.02,
                size: int = 56) -> dict[str, Any]:
    """Ping ``dst_ip`` from ``src`` ``count`` times: sent, received, loss and the RTT distribution (ms)."""
    if not 1 <= count <= 100_000 or not 0.002 <= interval_s <= 10 or not 0 <= size <= 65000:
        raise ValueError("count in [1, 100000], interval_s in [0.002, 10], size in [0, 65000]")
    timeout = count * interval_s + 10
    proc = src.run("ping", "-n", "-c", str(count), "-i", f"{interval_s:g}", "-s", str(size), "-W", "2",
                   dst_ip, timeout=timeout, check=False)
    sent_recv = PING_SENT.search(proc.stdout)
    if sent_recv is None:
        err = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[0]
        raise NetError(f"ping {dst_ip} from {src}: {err}")
    sent, received = int(sent_recv.group(1)), int(sent_recv.group(2))
    rtts = np.array([float(t) for _, t in PING_TIME.findall(proc.stdout)])
    return {"dst": dst_ip, "sent": sent, "received": received,
            "loss": round(1 - received / sent, 6) if sent else None, "rtt_ms": summary(rtts)}


def path_record(link_description: dict[str, Any], rtt: dict[str, Any],
                baseline_rtt: dict[str, Any] | None = None) -> dict[str, Any]:
    """What results.json holds for a delayed path: configured values, backend and the *measured* delay.

    ``measured_one_way_ms`` is half the RTT added by the element (minus ``baseline_rtt``, the same ping
    without it, when given); a lab states this number, not ``configured.delay_ms``.
    """
    rec: dict[str, Any] = {**link_description, "measured_rtt": rtt}
    if rtt.get("rtt_ms"):
        base = (baseline_rtt or {}).get("rtt_ms") or {"mean": 0.0, "p50": 0.0}
        rec["measured_one_way_ms"] = round((rtt["rtt_ms"]["p50"] - base["p50"]) / 2, 4)
        rec["baseline_rtt"] = baseline_rtt
    else:
        rec["measured_one_way_ms"] = None  # nothing came back: the lab must not claim a delay
    return rec


def warm_up(src: Netns, dst_ip: str, tries: int = 20) -> int:
    """Ping until one reply (at most ``tries``), so ARP is resolved before a measurement: otherwise the
    first frames wait a round trip through the element for it, or die in the ARP queue. Returns the
    pings sent; raises :class:`NetError` if none came back."""
    for n in range(1, tries + 1):
        if src.run("ping", "-n", "-c", "1", "-W", "1", dst_ip, timeout=10, check=False).returncode == 0:
            return n
    raise NetError(f"{dst_ip} does not answer ping from {src} ({tries} tries)")


def one_way(src: Netns, dst: Netns, dst_ip: str, rate_mbps: float, frame_bytes: int, seconds: float,
            port: int = 47000, drain_s: float = 1.0) -> dict[str, Any]:
    """Send ``rate_mbps`` of ``frame_bytes`` frames for ``seconds``; one-way delay (ms) and loss as received.

    ARP is resolved first (:func:`warm_up`). The receiver is stopped ``drain_s`` after the sender
    ends, so set it above the path's delay.
    """
    binary = str(ensure_binary("dlyprobe"))
    warm_up(src, dst_ip)
    with tempfile.TemporaryDirectory(prefix="dlyprobe-") as tmp:
        out = Path(tmp) / "rx.bin"
        recv = subprocess.Popen([*dst.prefix(), binary, "recv", "--port", str(port),
                                 "--duration", f"{seconds + drain_s + 30:g}", "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            assert recv.stdout is not None
            ready, _, _ = select.select([recv.stdout], [], [], 10)
            if not ready or recv.stdout.readline().strip() != b"ready":
                raise NetError(f"dlyprobe recv in {dst}: {recv.stderr.read().decode().strip() if recv.poll() else 'not ready'}")
            send = src.run(binary, "send", "--dst", dst_ip, "--port", str(port), "--rate-bps",
                           f"{rate_mbps * 1e6:.0f}", "--size", str(frame_bytes), "--duration", f"{seconds:g}",
                           timeout=seconds + 30)
            sent = int(re.search(r'"sent": (\d+)', send.stdout).group(1))  # type: ignore[union-attr]
            select.select([], [], [], drain_s)
            recv.send_signal(signal.SIGTERM)
            recv.wait(timeout=10)
        finally:
            if recv.poll() is None:
                recv.kill()
                recv.wait(timeout=10)
            for pipe in (recv.stdout, recv.stderr):
                if pipe is not None:
                    pipe.close()
        rec = np.fromfile(out, dtype="<i8").reshape(-1, 3) if out.exists() else np.zeros((0, 3), "<i8")
    seqs = np.unique(rec[:, 0])
    delays = (rec[:, 2] - rec[:, 1]) / 1e6
    reordered = int(np.sum(np.diff(rec[:, 0]) < 0)) if len(rec) > 1 else 0
    return {"rate_mbps": rate_mbps, "frame_bytes": frame_bytes, "seconds": seconds, "sent": sent,
            "received": int(seqs.size), "duplicates": int(len(rec) - seqs.size), "reordered": reordered,
            "loss": round(1 - seqs.size / sent, 6) if sent else None, "delay_ms": summary(delays),
            "delays_ms": delays}
