"""A light traffic generator for the labs: many flows from one process (stdlib only).

Spawning one iperf3 per flow saturates both cores of the lab machine and ``iperf3 -n`` misreports
short transfers (docs/environment notes), so every flow of a host lives in one Python process.
Run it on a Mininet host as a file (``host.popen([sys.executable, SCRIPT, ...])``): it imports
nothing from the project, so it needs no ``PYTHONPATH`` inside the host's namespace (``udp_probe.py``
imports it as its sibling file).

Sub-commands (times are wall-clock seconds so they line up with the controller's journal):

``flows DST DPORT DURATION SPEC...``
    UDP flows ``sport:start_mbps:end_mbps:size:burst_period_s``: each sends bursts every period,
    its rate ramped from start to end over the first 60 % of the run; prints the packets sent.
``small DST DPORT --duration S --concurrent C --size-kb MIN:MAX --mbps R --seed N --report FILE``
    C concurrent sized UDP transfers (the paper's small flows: a new one starts, on a new source
    port, as soon as one ends), each paced at R Mbit/s in small bursts; sizes drawn uniformly.
``elephant DST DPORT --duration S --start WALL --round T --report FILE``
    a window-based bulk transfer over UDP: each round of T seconds it sends its window as one burst;
    the receiver acknowledges every packet; a round with a loss cuts the window to 0.7 (CUBIC's
    beta), a clean round grows it by 1/8 (a high-bandwidth-delay TCP in miniature: there is no netem here, and real TCP at
    this lab's ~1 ms RTT recovers from contention too fast to show the paper's effect).
``recv PORT --duration S --t0 WALL --bin B --out FILE``
    counts the bytes of elephant and small packets per bin (and acknowledges elephant packets).
"""
from __future__ import annotations

import argparse
import json
import random
import select
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

SCRIPT = str(Path(__file__).resolve())
ELEPHANT, SMALL, ACK = b"E", b"S", b"A"
HEADER = 9  # tag + 8-byte sequence number


def _flows(argv: list[str]) -> int:
    """The monitor tests' generator: fixed UDP flows with ramps and bursts."""
    dst, dport, dur = argv[0], int(argv[1]), float(argv[2])
    flows = []
    for spec in argv[3:]:
        sport, m0, m1, size, period = spec.split(":")
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("", int(sport)))
        flows.append([s, float(m0), float(m1), int(size), float(period), 0.0])
    t0, sent = time.monotonic(), 0
    while True:
        now = time.monotonic() - t0
        if now >= dur:
            break
        nxt = dur
        for f in flows:
            s, m0, m1, size, period, due = f
            if now >= due:
                mbps = m0 + (m1 - m0) * min(1.0, now / (dur * 0.6))  # ramp over the first 60%, then hold
                burst = max(1, round(mbps * 1e6 / 8 * period / size))
                for _ in range(burst):
                    try:
                        s.sendto(b"x" * size, (dst, dport))
                        sent += 1
                    except OSError:
                        pass
                f[5] = due = due + period
            nxt = min(nxt, due)
        time.sleep(max(0.0, min(nxt - (time.monotonic() - t0), 0.05)))
    print(sent)
    return 0


def _small(a: argparse.Namespace) -> int:
    """C concurrent paced transfers; each ends after its size and is replaced on a new port."""
    rng = random.Random(a.seed)
    lo, hi = (int(x) * 1024 for x in a.size_kb.split(":"))
    per_burst = max(1, round(a.mbps * 1e6 / 8 * a.period))  # bytes per burst per transfer
    next_port = a.sport_base
    active: list[list] = []  # [socket, bytes left, next due]
    done, sent_bytes = 0, 0
    start = time.monotonic()

    def new(due: float) -> list:
        nonlocal next_port
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("", next_port))
        next_port = a.sport_base + (next_port - a.sport_base + 1) % 2000
        return [s, rng.randint(lo, hi), due]

    for i in range(a.concurrent):  # staggered so their bursts do not line up
        active.append(new(start + a.period * i / a.concurrent))
    payload = SMALL + b"s" * (max(per_burst, HEADER) - 1)
    while time.monotonic() - start < a.duration:
        now = time.monotonic()
        for f in active:
            if now < f[2]:
                continue
            n = min(len(payload), f[1])
            try:
                f[0].sendto(payload[:max(n, HEADER)], (a.dst, a.dport))
                sent_bytes += n
            except OSError:
                pass
            f[1] -= n
            f[2] += a.period
            if f[1] <= 0:
                f[0].close()
                done += 1
                f[:] = new(f[2])
        due = min(f[2] for f in active)
        time.sleep(max(0.0, min(due - time.monotonic(), 0.05)))
    _report(a.report, {"transfers_done": done, "bytes_sent": sent_bytes, "concurrent": a.concurrent})
    return 0


def sender(sport: int, start: float) -> socket.socket:
    """A non-blocking UDP socket on source port ``sport``, returned at wall-clock time ``start`` (at once
    if it is past): the sending side of the elephant here and of ``udp_probe.py``'s probe."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("", sport))
    s.setblocking(False)
    time.sleep(max(0.0, start - time.time()))
    return s


def _elephant(a: argparse.Namespace) -> int:
    """Window-based bulk transfer with per-packet acknowledgements (see the module docstring)."""
    s = sender(a.sport, a.start)
    pad = b"e" * (a.size - HEADER)
    window, seq, acked = float(a.init_window), 0, set()
    slow_start, reduced, rounds, sent, lost_total = True, False, [], 0, 0
    t_end = time.monotonic() + a.duration
    due = time.monotonic()
    previous: tuple[int, int] | None = None  # the last round's sequence numbers, judged half a round later
    while time.monotonic() < t_end:
        first = seq
        for _ in range(int(window)):
            try:
                s.sendto(ELEPHANT + seq.to_bytes(8, "big") + pad, (a.dst, a.dport))
            except OSError:
                pass
            seq += 1
        sent += seq - first
        due += a.round
        judge = due - a.round / 2  # the previous round's acks had 1.5 rounds to come back
        while time.monotonic() < judge:
            _drain_acks(s, acked, judge - time.monotonic())
        if previous is not None:
            lost = sum(1 for n in range(*previous) if n not in acked)
            acked.difference_update(range(*previous))
            lost_total += lost
            if lost and not reduced:  # one reduction per loss episode (the next round still drains the queue)
                window, slow_start = max(2.0, window * 0.7), False  # CUBIC's beta
            elif not lost:
                window = min(a.max_window, window * 2 if slow_start else window + max(1.0, window / 8))
            reduced = bool(lost) and not reduced
            rounds.append(int(window))
        previous = (first, seq)
        while time.monotonic() < due:
            _drain_acks(s, acked, due - time.monotonic())
    _report(a.report, {"packets_sent": sent, "packets_lost": lost_total, "size": a.size,
                       "windows": rounds[-50:]})
    return 0


def _drain_acks(s: socket.socket, acked: set[int], timeout: float) -> None:
    ready, _, _ = select.select([s], [], [], max(0.0, timeout))
    while ready:
        try:
            data = s.recv(64)
        except BlockingIOError:
            return
        if data[:1] == ACK and len(data) >= HEADER:
            acked.add(int.from_bytes(data[1:HEADER], "big"))


def datagrams(port: int, duration: float, rcvbuf: int | None = None
              ) -> Iterator[tuple[socket.socket, bytes, tuple[str, int]]]:
    """Every datagram that reaches UDP ``port`` within ``duration`` seconds, as (socket, data, sender):
    the receive loop of every lab receiver here and in ``udp_probe.py`` (which imports this file)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.bind(("0.0.0.0", port))
    s.settimeout(0.2)
    t_end = time.monotonic() + duration
    with s:
        while time.monotonic() < t_end:
            try:
                data, addr = s.recvfrom(65535)
            except TimeoutError:
                continue
            yield s, data, addr


def add_bin_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of a receiver that counts per time bin (``recv`` here, ``sink`` in udp_probe)."""
    p.add_argument("port", type=int)
    p.add_argument("--duration", type=float, required=True)
    p.add_argument("--t0", type=float, required=True, help="wall-clock time bins count from")
    p.add_argument("--bin", type=float, default=0.25)
    p.add_argument("--out", required=True)


def _recv(a: argparse.Namespace) -> int:
    """Bytes per bin of elephant and small packets; every elephant packet is acknowledged."""
    series: dict[str, dict[int, int]] = {"elephant": {}, "small": {}, "other": {}}
    flows: dict[str, set[int]] = {"elephant": set(), "small": set(), "other": set()}
    for s, data, addr in datagrams(a.port, a.duration, 4 << 20):
        kind = {ELEPHANT: "elephant", SMALL: "small"}.get(data[:1], "other")
        b = int((time.time() - a.t0) // a.bin)
        series[kind][b] = series[kind].get(b, 0) + len(data)
        flows[kind].add(addr[1])
        if kind == "elephant":
            try:
                s.sendto(ACK + data[1:HEADER], addr)
            except OSError:
                pass
    out = {"t0": a.t0, "bin_s": a.bin,
           "series": {k: {str(b): v for b, v in sorted(d.items())} for k, d in series.items()},
           "source_ports": {k: len(v) for k, v in flows.items()}}
    Path(a.out).write_text(json.dumps(out))
    return 0


def _report(path: str | None, data: dict) -> None:
    text = json.dumps(data)
    if path:
        Path(path).write_text(text)
    print(text)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "flows":
        return _flows(argv[1:])
    p = argparse.ArgumentParser(prog="traffic.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sm = sub.add_parser("small", help="C concurrent paced UDP transfers")
    el = sub.add_parser("elephant", help="a window-based bulk transfer over UDP")
    for q in (sm, el):
        q.add_argument("dst")
        q.add_argument("dport", type=int)
        q.add_argument("--duration", type=float, required=True)
        q.add_argument("--report")
    sm.add_argument("--concurrent", type=int, default=16)
    sm.add_argument("--size-kb", default="32:256")
    sm.add_argument("--mbps", type=float, default=0.1, help="rate of each transfer")
    sm.add_argument("--period", type=float, default=0.02, help="seconds between a transfer's bursts")
    sm.add_argument("--seed", type=int, default=1)
    sm.add_argument("--sport-base", type=int, default=46000)
    el.add_argument("--start", type=float, default=0.0, help="wall-clock time to start at (0 = now)")
    el.add_argument("--sport", type=int, default=45000)
    el.add_argument("--round", type=float, default=0.05, help="seconds per window round")
    el.add_argument("--size", type=int, default=1000)
    el.add_argument("--init-window", type=int, default=4)
    el.add_argument("--max-window", type=int, default=58,
                    help="window cap in packets (default: 10 Mbit/s x one 50-ms round, as a tuned host sets it)")
    add_bin_arguments(sub.add_parser("recv", help="count what arrives, per bin"))
    a = p.parse_args(argv)
    return {"small": _small, "elephant": _elephant, "recv": _recv}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
