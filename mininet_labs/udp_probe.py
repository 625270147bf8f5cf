"""An interactive flow that measures itself: small UDP packets at a steady rate, echoed back (stdlib only).

Why: a placement policy's worth for an interactive flow is its latency, jitter and loss, so the
lab's interactive flow must carry its own measurement. The sender stamps each packet with a sequence
number and its send time; the echo server returns it unchanged; the sender records each RTT. Run it
on a Mininet host as a file (``host.popen([sys.executable, SCRIPT, ...])``): it imports nothing from
the project but its sibling file ``traffic.py`` (stdlib only; the file's directory is on ``sys.path``).

``echo PORT --duration S``
    returns every datagram to its sender.
``send DST DPORT --sport P --interval S --size B --duration S --start WALL --out FILE``
    one packet every interval from source port ``P``; writes ``{"sent": [[seq, wall time]...],
    "rtt_ms": {seq: ms}, "size": B, "interval_s": S}`` (a seq without an RTT was lost).
``sink PORT --duration S --t0 WALL --bin B --out FILE``
    the receiver of :mod:`mininet_labs.traffic`'s elephant (acknowledges every packet, as its own
    receiver does) that also keeps, per bin, the bytes and the lowest and highest sequence number and
    the count of packets: the elephant's loss inside any window, not only over its whole life.
"""
from __future__ import annotations

import argparse
import json
import select
import sys
import time
from pathlib import Path

try:  # imported as part of the package
    from mininet_labs import traffic
except ImportError:  # run as a file on a Mininet host: its directory (sys.path[0]) holds traffic.py
    import traffic  # type: ignore[no-redef]

SCRIPT = str(Path(__file__).resolve())
HEADER = 16  # 8-byte sequence number + 8-byte send time (ns, monotonic)


def _echo(a: argparse.Namespace) -> int:
    for s, data, addr in traffic.datagrams(a.port, a.duration):
        try:
            s.sendto(data, addr)
        except OSError:
            pass
    return 0


def _send(a: argparse.Namespace) -> int:
    s = traffic.sender(a.sport, a.start)
    pad = b"p" * max(0, a.size - HEADER)
    sent: list[list[float]] = []
    rtt: dict[int, float] = {}
    seq, t_end = 0, time.monotonic() + a.duration
    due = time.monotonic()
    while time.monotonic() < t_end + 0.5:  # half a second more to collect the last echoes
        now = time.monotonic()
        if now >= due and now < t_end:
            try:
                s.sendto(seq.to_bytes(8, "big") + time.monotonic_ns().to_bytes(8, "big") + pad, (a.dst, a.dport))
                sent.append([seq, round(time.time(), 6)])
            except OSError:
                sent.append([seq, round(time.time(), 6)])  # counted as lost: it never left
            seq += 1
            due += a.interval
        ready, _, _ = select.select([s], [], [], max(0.0, min(due - time.monotonic(), 0.05)))
        while ready:
            try:
                data = s.recv(65535)
            except BlockingIOError:
                break
            if len(data) >= HEADER:
                n = int.from_bytes(data[:8], "big")
                rtt.setdefault(n, (time.monotonic_ns() - int.from_bytes(data[8:16], "big")) / 1e6)
    Path(a.out).write_text(json.dumps({"sent": sent, "rtt_ms": {str(k): round(v, 4) for k, v in rtt.items()},
                                       "size": a.size, "interval_s": a.interval}))
    return 0


def _sink(a: argparse.Namespace) -> int:
    bins: dict[int, list[int]] = {}  # bin -> [bytes, lowest seq, highest seq, packets]
    for s, data, addr in traffic.datagrams(a.port, a.duration, 4 << 20):
        if len(data) < 9:  # traffic.py's header: a 1-byte tag and an 8-byte sequence number
            continue
        seq = int.from_bytes(data[1:9], "big")
        b = bins.setdefault(int((time.time() - a.t0) // a.bin), [0, seq, seq, 0])
        b[0] += len(data)
        b[1], b[2], b[3] = min(b[1], seq), max(b[2], seq), b[3] + 1
        try:
            s.sendto(b"A" + data[1:9], addr)
        except OSError:
            pass
    Path(a.out).write_text(json.dumps({"t0": a.t0, "bin_s": a.bin, "bins": {str(k): v for k, v in sorted(bins.items())}}))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="udp_probe.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("echo", help="echo every datagram back")
    e.add_argument("port", type=int)
    e.add_argument("--duration", type=float, required=True)
    s = sub.add_parser("send", help="steady probes, RTT of each")
    s.add_argument("dst")
    s.add_argument("dport", type=int)
    s.add_argument("--sport", type=int, default=5060)
    s.add_argument("--interval", type=float, default=0.02)
    s.add_argument("--size", type=int, default=200)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--start", type=float, default=0.0, help="wall-clock time to start at (0 = now)")
    s.add_argument("--out", required=True)
    traffic.add_bin_arguments(sub.add_parser("sink", help="receive and acknowledge the elephant; bytes and "
                                                          "sequence numbers per bin"))
    a = p.parse_args(argv)
    return {"echo": _echo, "send": _send, "sink": _sink}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
