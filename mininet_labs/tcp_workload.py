"""A light TCP workload for the labs: one unbounded flow plus C concurrent small transfers.

One process per side instead of dozens of iperf3s (which saturate both cores here, and ``iperf3 -n``
exits before its data arrives). Standalone on purpose (standard library only): the labs run it inside
Mininet hosts as ``python tcp_workload.py recv|send ...``.

- ``recv PORT SECONDS OUT.json``: accepts on PORT (the long flow) and PORT+1 (small transfers), reads
  everything, and writes the bytes per class per ``--bin`` seconds and every small transfer's
  size and completion time (a transfer is complete when its sender closed and every byte arrived).
- ``send HOST PORT SECONDS C [--cc NAME] [--min-kb 512 --max-kb 4096] [--seed N]``: the long flow
  sends without pause; C transfers of S ~ U(min, max) bytes are kept in flight — a new one starts
  whenever fewer than C are active. ``--cc`` sets the sender's TCP congestion control per socket.
"""
from __future__ import annotations

import argparse
import json
import random
import selectors
import socket
import sys
import threading
import time

CHUNK = 64 * 1024
HEADER = 8  # a small transfer starts with its size, so the receiver can tell complete from cut off


def _cc(sock: socket.socket, cc: str | None) -> None:
    if cc:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())


def receive(port: int, seconds: float, out: str, bin_s: float = 0.1, host: str = "0.0.0.0") -> dict:
    """Count what arrives on ``port`` (long) and ``port + 1`` (small) for ``seconds``; write ``out``."""
    sel = selectors.DefaultSelector()
    for cls, p in (("long", port), ("small", port + 1)):
        ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((host, p))
        ls.listen(256)
        ls.setblocking(False)
        sel.register(ls, selectors.EVENT_READ, ("listen", cls))
    t0 = time.time()
    n_bins = int(seconds / bin_s) + 1
    bins = {"long": [0] * n_bins, "small": [0] * n_bins}
    conns: dict[socket.socket, list] = {}
    done: list[tuple[float, int, float]] = []  # (started, bytes, finished) of complete small transfers
    buf = bytearray(CHUNK)
    while time.time() < t0 + seconds:
        for key, _ in sel.select(timeout=0.05):
            kind, cls = key.data
            if kind == "listen":
                c, _addr = key.fileobj.accept()
                c.setblocking(False)
                sel.register(c, selectors.EVENT_READ, ("conn", cls))
                conns[c] = [time.time(), 0, b""]  # started, bytes, the size header (small transfers)
                continue
            c = key.fileobj
            try:
                n = c.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                n = 0
            t = time.time()
            if n:
                bins[cls][min(int((t - t0) / bin_s), n_bins - 1)] += n
                st = conns[c]
                if cls == "small" and len(st[2]) < HEADER:
                    st[2] += bytes(buf[:min(n, HEADER - len(st[2]))])
                st[1] += n
                continue
            started, total, header = conns.pop(c)
            sel.unregister(c)
            c.close()
            if cls == "small" and len(header) == HEADER and total == HEADER + int.from_bytes(header, "big"):
                done.append((started - t0, total - HEADER, t - t0))  # complete: every announced byte arrived
    res = {"t0": t0, "bin_s": bin_s, "seconds": seconds,
           "mbps": {k: [b * 8 / bin_s / 1e6 for b in v] for k, v in bins.items()},
           "bytes": {k: sum(v) for k, v in bins.items()},
           "small_done": [{"start": round(a, 4), "bytes": b, "end": round(e, 4)} for a, b, e in done]}
    with open(out, "w") as f:
        json.dump(res, f)
    return res


def _connect(host: str, port: int, wait_s: float = 5.0) -> socket.socket:
    """Connect, retrying a refused connection for ``wait_s`` (the receiver may still be starting)."""
    until = time.time() + wait_s
    while True:
        try:
            return socket.create_connection((host, port), timeout=10)
        except ConnectionRefusedError:
            if time.time() > until:
                raise
            time.sleep(0.05)


def send(host: str, port: int, seconds: float, concurrent: int, cc: str | None = None, min_kb: int = 512,
         max_kb: int = 4096, seed: int = 0) -> dict:
    """Run the long flow and keep ``concurrent`` small transfers in flight for ``seconds``."""
    rng = random.Random(seed)
    deadline = time.time() + seconds
    stats: dict = {"long_sent": 0, "small_started": 0, "small_finished": 0, "errors": 0}
    failed: dict[str, int] = {}  # "<flow>.<call>: <error>" -> count: which call failed, when one does
    lock = threading.Lock()

    def error(where: str, exc: OSError) -> None:
        key = f"{where}: {type(exc).__name__}"
        with lock:
            stats["errors"] += 1
            failed[key] = failed.get(key, 0) + 1
    payload = b"\0" * CHUNK

    first = _connect(host, port)  # fails here, loudly, if nobody listens
    _cc(first, cc)

    def long_flow(s: socket.socket = first) -> None:
        s.settimeout(1.0)
        try:
            while time.time() < deadline:
                try:
                    n = s.send(payload)
                except TimeoutError:
                    continue
                with lock:
                    stats["long_sent"] += n
        except OSError as exc:
            error("long.send", exc)
        finally:
            s.close()

    def transfer(size: int) -> None:
        call = "connect"
        try:
            s = socket.create_connection((host, port + 1), timeout=10)
            _cc(s, cc)
            s.settimeout(max(0.5, deadline - time.time() + 5))
            call = "header"
            s.sendall(size.to_bytes(HEADER, "big"))
            left = size
            call = "send"
            while left > 0 and time.time() < deadline:
                left -= s.send(payload[:min(left, CHUNK)])
            call = "shutdown"
            s.shutdown(socket.SHUT_WR)
            call = "recv"
            s.recv(1)  # the receiver closes once it has read everything
            s.close()
            if left <= 0:
                with lock:
                    stats["small_finished"] += 1
        except OSError as exc:
            error(f"small.{call}", exc)

    threads = [threading.Thread(target=long_flow, daemon=True)]
    threads[0].start()
    active: list[threading.Thread] = []
    while time.time() < deadline:
        active = [t for t in active if t.is_alive()]
        while concurrent and len(active) < concurrent:
            size = rng.randint(min_kb * 1024, max_kb * 1024)
            t = threading.Thread(target=transfer, args=(size,), daemon=True)
            t.start()
            active.append(t)
            stats["small_started"] += 1
        time.sleep(0.005)
    for t in threads + active:
        t.join(timeout=2)
    if failed:
        stats["failed_calls"] = dict(failed)
    return stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tcp_workload", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("port", type=int)
    r.add_argument("seconds", type=float)
    r.add_argument("out")
    r.add_argument("--bin", type=float, default=0.1)
    s = sub.add_parser("send")
    s.add_argument("host")
    s.add_argument("port", type=int)
    s.add_argument("seconds", type=float)
    s.add_argument("concurrent", type=int)
    s.add_argument("--cc")
    s.add_argument("--min-kb", type=int, default=512)
    s.add_argument("--max-kb", type=int, default=4096)
    s.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        if a.cmd == "recv":
            receive(a.port, a.seconds, a.out, a.bin)
        else:
            if a.concurrent < 0 or not 0 < a.min_kb <= a.max_kb:
                p.error("need concurrent >= 0 and 0 < min-kb <= max-kb")
            print(json.dumps(send(a.host, a.port, a.seconds, a.concurrent, a.cc, a.min_kb, a.max_kb, a.seed)))
    except OSError as exc:
        print(f"tcp_workload {a.cmd}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
