"""Tagged UDP traffic between lab hosts: one paced sender per source host carrying every VLAN it was
given, one receiver per destination host counting bytes per UDP port.

The hosts' kernel has no 802.1Q module (no VLAN interfaces, so no iperf3 over a VLAN): the sender
writes whole tagged frames on a raw socket and the receiver reads them the same way. A reservation
with a VLAN is reached only by frames carrying its tag, so this is how traffic rides reservations
(the grooming lab, the WAN lab's loaded stage). Each flow is ``(vlan, udp port, Mbit/s)``; a starved
sender (a busy machine) skips overdue frames rather than bursting them, so compare what arrived with
what was *sent*, not with what was offered.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PAYLOAD = 1172
FRAME_BITS = (14 + 4 + 20 + 8 + PAYLOAD) * 8  # a tagged frame's bits as the receiver counts them

#: ``iface src_mac dst_mac vlan:port:mbps:dst_mac,... seconds`` (a flow's own dst MAC optional); prints
#: the frames sent per flow.
SENDER = r"""
import socket, struct, sys, time
iface, src, dst, spec, seconds = sys.argv[1:6]
mac = lambda t: bytes(int(b, 16) for b in t.split(":"))
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
sock.bind((iface, 0))
flows = []
for item in spec.split(","):
    parts = item.split(":", 3)
    vlan, port, mbps = parts[:3]
    to = parts[3] if len(parts) > 3 else dst
    payload = b"x" * PAYLOAD_LEN
    udp = struct.pack("!HHHH", 40000, int(port), 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,
                     socket.inet_aton("10.%d.%d.1" % (int(vlan) // 256, int(vlan) % 256)),
                     socket.inet_aton("10.%d.%d.3" % (int(vlan) // 256, int(vlan) % 256)))
    frame = mac(to) + mac(src) + struct.pack("!HH", 0x8100, int(vlan)) + struct.pack("!H", 0x0800) + ip + udp
    flows.append([frame, len(frame) * 8 / (float(mbps) * 1e6), 0.0, 0])
t0 = time.monotonic()
for i, f in enumerate(flows):
    f[2] = t0 + f[1] * i / len(flows)  # spread the flows' first frames over one gap
end = t0 + float(seconds)
while True:
    now = time.monotonic()
    if now >= end:
        break
    for f in flows:
        if now - f[2] > 0.02:  # starved (a busy machine): skip what is overdue instead of bursting it
            f[2] = now
        while f[2] <= now:
            sock.send(f[0])
            f[3] += 1
            f[2] += f[1]
    # until the next frame is due (50 senders of 0.1-Mbit/s flows waking every 1 ms took a core)
    time.sleep(min(0.02, max(0.0005, min(f[2] for f in flows) - time.monotonic())))
print(" ".join(str(f[3]) for f in flows))
""".replace("PAYLOAD_LEN", str(PAYLOAD))

#: ``iface seconds``: frame bytes (as sent, tag included) received per UDP destination port, as JSON.
RECEIVER = r"""
import json, socket, sys, time
iface, seconds = sys.argv[1], float(sys.argv[2])
sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
sock.bind((iface, 0))
sock.settimeout(0.2)
got = {}
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        frame, addr = sock.recvfrom(65535)
    except socket.timeout:
        continue
    if addr[2] == socket.PACKET_OUTGOING:
        continue
    off = 12
    tagged = frame[off:off + 2] == b"\x81\x00"
    if tagged:
        off += 4
    if frame[off:off + 2] != b"\x08\x00" or frame[off + 11] != 17:
        continue
    ip = off + 2
    port = int.from_bytes(frame[ip + (frame[ip] & 15) * 4 + 2: ip + (frame[ip] & 15) * 4 + 4], "big")
    got[port] = got.get(port, 0) + len(frame) + (0 if tagged else 4)
print(json.dumps(got))
"""


@dataclass(frozen=True)
class Flow:
    """Tagged UDP from host ``src`` to host ``dst`` on ``vlan`` at ``mbps`` (frame bits), to UDP ``port``."""

    src: str
    dst: str
    vlan: int
    port: int
    mbps: float


def plan_hosts(flows: Sequence[Flow]) -> tuple[dict[str, list[Flow]], list[str]]:
    """The flows each source host sends and the hosts that receive, in a fixed order; refuses two
    flows to one host on one UDP port (the receiver counts by port)."""
    by_src: dict[str, list[Flow]] = {}
    seen: set[tuple[str, int]] = set()
    for f in flows:
        if (f.dst, f.port) in seen:
            raise ValueError(f"two flows to {f.dst} on UDP port {f.port}: the receiver could not tell them apart")
        if f.mbps <= 0:
            raise ValueError(f"flow on VLAN {f.vlan}: Mbit/s must be > 0, got {f.mbps}")
        seen.add((f.dst, f.port))
        by_src.setdefault(f.src, []).append(f)
    return by_src, sorted({f.dst for f in flows})


def run(lab: Any, work: Path, flows: Sequence[Flow], seconds: float,
        during: Any = None) -> tuple[dict[Flow, float], dict[Flow, float]]:
    """Send ``flows`` for ``seconds`` (all at once) on the running ``lab`` (a LabNet: ``node(name)``);
    ``during()`` runs while they send (e.g. a CPU window). Mbit/s sent and received per flow over
    the sending time."""
    by_src, receivers = plan_hosts(flows)
    (work / "tudp_send.py").write_text(SENDER)
    (work / "tudp_recv.py").write_text(RECEIVER)
    procs: list[subprocess.Popen] = []
    try:
        recv = {h: lab.node(h).popen([sys.executable, str(work / "tudp_recv.py"), lab.node(h).defaultIntf().name,
                                      str(seconds + 2.0)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for h in receivers}
        procs += recv.values()
        time.sleep(0.5)
        send = {}
        for h, fs in by_src.items():
            node = lab.node(h)
            spec = ",".join(f"{f.vlan}:{f.port}:{f.mbps}:{lab.node(f.dst).MAC()}" for f in fs)
            send[h] = node.popen([sys.executable, str(work / "tudp_send.py"), node.defaultIntf().name, node.MAC(),
                                  "ff:ff:ff:ff:ff:ff", spec, str(seconds)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs += send.values()
        if during is not None:
            during()
        sent: dict[Flow, float] = {}
        for h, proc in send.items():
            out, err = proc.communicate(timeout=seconds + 60)
            if proc.returncode != 0:
                raise RuntimeError(f"sender on {h} failed: {err.strip()[-300:]}")
            for f, n in zip(by_src[h], out.split(), strict=True):
                sent[f] = int(n) * FRAME_BITS / seconds / 1e6
        got: dict[str, Mapping[str, int]] = {}
        for h, proc in recv.items():
            out, err = proc.communicate(timeout=seconds + 60)
            if proc.returncode != 0:
                raise RuntimeError(f"receiver on {h} failed: {err.strip()[-300:]}")
            got[h] = json.loads(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    received = {f: got.get(f.dst, {}).get(str(f.port), 0) * 8 / seconds / 1e6 for f in flows}
    return sent, received
