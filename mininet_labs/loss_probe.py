"""A probe that times its own loss: one small UDP packet per period, each with its sequence number and
send time, and a receiver that keeps every arrival (stdlib only; run on Mininet hosts as files).

Why: restoration and protection are judged by how long a flow's packets stop arriving after a fault,
so the probe must say which packets were lost and when the first one arrived again.
``send DST PORT SECONDS PERIOD`` prints ``sent t0`` (t0: wall time of packet 0); ``recv PORT SECONDS
OUT`` writes ``{seq: [sent_wall, arrived_wall]}``.
"""
from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path

SCRIPT = str(Path(__file__).resolve())


def send(dst: str, port: int, seconds: float, period: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    t0, t0_wall, n = time.monotonic(), time.time(), 0
    while n * period <= seconds:
        due = t0 + n * period
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        s.sendto(n.to_bytes(4, "big") + time.time_ns().to_bytes(8, "big") + b"p" * 52, (dst, port))
        n += 1
    print(n, t0_wall)


def recv(port: int, seconds: float, out: str) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.2)
    got: dict[int, tuple[float, float]] = {}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            data, _ = s.recvfrom(2048)
        except TimeoutError:
            continue
        got[int.from_bytes(data[:4], "big")] = (int.from_bytes(data[4:12], "big") / 1e9, time.time())
    Path(out).write_text(json.dumps(got))


def loss_after(got: Mapping[int, tuple[float, float]], sent: int, t0: float, period: float,
               fault_at: float) -> dict[str, float | int | None]:
    """What a fault at wall time ``fault_at`` did to the probe: packets lost (all of the run), the longest
    gap of lost packets, and ``restored_s``: from the fault to the first arrival after the last packet
    lost after it (0 when nothing was lost after the fault; None when nothing arrived after it)."""
    missing = [n for n in range(sent) if n not in got]
    after = [n for n in missing if t0 + n * period >= fault_at - period]
    longest = run = 0
    for a, b in zip(missing, missing[1:], strict=False):
        run = run + 1 if b == a + 1 else 0
        longest = max(longest, run + 1)
    if missing and not longest:
        longest = 1
    restored: float | None
    if not after:
        restored = 0.0
    else:
        back = [got[n][1] for n in got if n > after[-1]]
        restored = round(min(back) - fault_at, 4) if back else None
    return {"probe_sent": sent, "probe_lost": len(missing), "probe_lost_after_fault": len(after),
            "longest_gap_packets": longest, "restored_s": restored}


if __name__ == "__main__":
    if sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    else:
        recv(int(sys.argv[2]), float(sys.argv[3]), sys.argv[4])
