"""Lab ``multihoming``: two multihomed sites, two paths, static split vs load-aware mapping (seed 004).

Sites A (senders s1..sK) and Z (receivers d1..dK) are joined by two paths of OVS switches,
A:5–P1–Z:5 and A:6–P2–Z:6; each P -> Z link is shaped to ``path_mbps`` (HTB, a bounded queue;
there is no netem here, so the paths differ only by load and queueing), the links into it are fast.
Background as in the paper: greedy TCP flows from bg1a/bg1b on P1 and bg2a/bg2b on P2 to bgz on
Z, as many on each path as there are mapped flows, and from ``bg_start`` to ``bg_end`` s extra ones
on path 1 only. Every flow is Cubic or Reno (``CC_MIX``), as the paper's. The mapped greedy TCP
flows s_i → d_i are registered with the controller's mapping app (``POST /mapping/flows``) and
start at random offsets. One network and one controller serve every policy and seed: between
runs the flows are removed and the policy switched (``PUT /mapping/policy``). Per-flow throughput
over the loaded window gives the paper's AVGT, STD and MMR (min/max ratio) plus Jain's index.

Writes ``results.json`` and ``multihoming.png``. Also a ``mn`` custom file (the topology only)::

    sudo mn --custom mininet_labs/multihoming.py --topo multihoming --controller remote,port=6653
"""
from __future__ import annotations

import inspect
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def _bootstrap_path() -> None:
    """When ``mn`` execs this file, make the project importable (as mininet_labs/testbed.py does)."""
    root = Path(inspect.currentframe().f_code.co_filename).resolve().parents[1]  # type: ignore[union-attr]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))


_bootstrap_path()

from app.te.mapping import POLICIES, STATIC, flow_metrics  # noqa: E402
from topology.spec import HostSpec, LabSpec, LinkSpec, SwitchSpec  # noqa: E402

SITES = ("A", "Z")
#: Each path link's HTB rate. Not 20 Mbit/s: measured at 20, ovs-vswitchd (the userspace datapath's
#: one forwarding thread for these veth ports) ran at 87 % of a core and was the bottleneck, not the
#: links: when the background load started on path 1, the *unloaded* path 2 fell from 19.6 to about
#: 10 Mbit/s, so the two paths were not independent and the per-path rates the policies read were
#: the CPU's share, not the path's. At 10 Mbit/s (20 in all, ~60 Mbit/s of bridge hops) the
#: shaped links are the bottleneck, as in the paper's topology.
PATH_MBPS = 10.0
DATA_PORT, BG_PORT = 5001, 5002
#: Packets each path link's HTB class may queue (a bounded pfifo leaf). Without it, measured with
#: 43 greedy flows on path 1, the 8 background flows of the idle path 2 fell to 2.9 Mbit/s and its
#: mapped flows to ~0.1 each while path 2's probes saw no queue: the paths were coupled. Our reading
#: (consistent with that and with path 1's probes never above ~120 ms behind a 1,000-packet pfifo,
#: not checked in the OVS source): the userspace datapath's shared packet socket counts the packets
#: waiting in every qdisc against one send buffer, so path 1's queue starved sends to path 2. With
#: a bound per link each path drops its own packets, as separate routers do.
PATH_QUEUE_PKTS = 25
#: Run sizes: seconds per run, when the extra load starts (uniform, s), how many extra flows (× N)
#: and over how many seconds they start. Background as in the paper's set-up, scaled to N mapped
#: flows: N greedy flows on each path from the start (its 64 + 64 beside 64 mapped flows) and, on
#: path 1 from ``bg_start`` to near the end, 7 × N more (its 448 = 7 × 64), starting at random
#: times over ``extra_spread`` s (its 448 start at random times over 40-50 s of a 600-s run).
#: Not 2-3 × N: under per-flow fair shares moving 4/4 -> 1/7 then gains the mapped flows only
#: +7-12 %, less than what the moves themselves cost them (measured, docs/labs.md); at 7 × N +23 %.
#: Not all at one instant: measured with 43 extra flows started together, their synchronised slow
#: starts and timeouts left path 1 lighter than its flow count (static's 4 mapped flows there got
#: 0.5-2.9 Mbit/s, fair share 0.7) and made it the largest part of the run-to-run noise (docs/labs.md).
#: ``--quick`` is seed 0 of the default size: 32-s runs (25 s before: an 18-s window, of which the
#: throughput policy spent ~7 s converging).
QUICK = {"seconds": 32.0, "bg_start": (2.0, 3.0), "extra": (7, 7), "extra_spread": 1.5}
FULL = dict(QUICK)
QUICK_SEEDS, SEEDS = 1, 5
#: Mapped flows per sender (4 senders: 8 flows). Not more by default: every flow more on a path
#: means more background to keep the paper's proportions, and ovs-vswitchd forwards them all on one core.
PER_SENDER = 2
#: The mapping app's measurement interval in the lab (``[te] mapping_interval``).
INTERVAL_S = 0.25
#: Background senders per path, each on its own access link (path switch ports 3..). Not one: with
#: all 8 of path 2's background flows on one host (bg2) they sometimes backed off together for a
#: whole run (0.14-0.21 Mbit/s in all in some runs, 5.7 in others), and the mapped flows' AVGT
#: under the same split then ranged 0.29-2.15 Mbit/s for the same seed (docs/labs.md).
BG_PER_PATH = 2
BG_SENDERS = tuple(f"bg{p}{chr(ord('a') + j)}" for p in (1, 2) for j in range(BG_PER_PATH))
UPLINKS = ((5, "P1", 5), (6, "P2", 6))  # (A port, path switch, Z port); path switch ports 1 (A side), 2 (Z side)
#: Each TCP flow's congestion control, dealt in turn over every path's flows (mapped and background
#: alike): the paper's flows are "a mixture of TCP Linux Cubic, Sack and NewReno" (Linux's ``reno``
#: is NewReno with SACK). Not the kernel's default here, BBR: it does not back off on loss, so with
#: 12-68 flows behind a 25-packet queue who got what did not follow the flow counts (docs/labs.md).
CC_MIX = ("cubic", "reno")

# Light traffic tools (iperf3 per flow saturates the two cores; see docs/environment.md).
SENDER = r'''
import errno, selectors, socket, sys, time
dst, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
plan = sorted(((int(p), float(d), cc) for p, d, cc in (x.split("@") for x in sys.argv[4].split(","))), key=lambda x: x[1])
t0 = time.monotonic(); sel = selectors.DefaultSelector(); buf = b"x" * 65536
while time.monotonic() - t0 < seconds:
    while plan and time.monotonic() - t0 >= plan[0][1]:
        sport, _, cc = plan.pop(0)  # connect without blocking: a lost SYN must not hold up the other flows
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", sport))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        s.setblocking(False); err = s.connect_ex((dst, port))
        if err not in (0, errno.EINPROGRESS):
            print(f"connect {sport}: {errno.errorcode.get(err, err)}", file=sys.stderr); s.close(); continue
        sel.register(s, selectors.EVENT_WRITE)
    for key, _ in sel.select(timeout=0.05):
        try:
            key.fileobj.send(buf)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            sel.unregister(key.fileobj); key.fileobj.close()
for key in list(sel.get_map().values()):
    key.fileobj.close()
'''
RECEIVER = r'''
import json, selectors, socket, sys, time
port, seconds, out, binsz = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], 0.5
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); srv.bind(("0.0.0.0", port)); srv.listen(256)
srv.setblocking(False); sel = selectors.DefaultSelector(); sel.register(srv, selectors.EVENT_READ)
t0 = time.time(); bins = {}; names = {}
while time.time() - t0 < seconds:
    for key, _ in sel.select(timeout=0.1):
        if key.fileobj is srv:
            c, addr = srv.accept(); c.setblocking(False); names[c] = f"{addr[0]}:{addr[1]}"; sel.register(c, selectors.EVENT_READ)
            continue
        try:
            data = key.fileobj.recv(262144)
        except (BlockingIOError, InterruptedError):
            continue
        except OSError:
            data = b""
        if not data:
            sel.unregister(key.fileobj); key.fileobj.close(); continue
        b = bins.setdefault(names[key.fileobj], {}); k = int((time.time() - t0) / binsz); b[k] = b.get(k, 0) + len(data)
json.dump({"t0": t0, "bin_s": binsz, "flows": {n: sorted(b.items()) for n, b in bins.items()}}, open(out, "w"))
'''


# ---------------------------------------------------------------------- the topology (plain data)
def multihoming_spec(senders: int = 4, path_mbps: float = PATH_MBPS, access_mbps: float = 100.0) -> LabSpec:
    """Sites A and Z with ``senders`` host pairs, two 2-hop paths via P1 and P2, background senders on P1/P2."""
    if not 1 <= senders <= 4:
        raise ValueError(f"senders must be 1..4 (A and Z use ports 1-4 for hosts), got {senders}")
    switches = (SwitchSpec("A", 0x4D01), SwitchSpec("P1", 0x4D02), SwitchSpec("P2", 0x4D03), SwitchSpec("Z", 0x4D04))
    hosts = [HostSpec(f"s{i}", "A", i, f"10.0.1.{i}", f"00:00:00:00:01:{i:02x}") for i in range(1, senders + 1)]
    hosts += [HostSpec(f"d{i}", "Z", i, f"10.0.2.{i}", f"00:00:00:00:02:{i:02x}") for i in range(1, senders + 1)]
    hosts.append(HostSpec("bgz", "Z", 7, "10.0.3.2", "00:00:00:00:03:02"))
    bg_ips = iter(i for i in range(1, 255) if i != 2)  # bgz keeps 10.0.3.2
    for path, switch in ((1, "P1"), (2, "P2")):
        for j, name in enumerate(bg_senders(path)):
            n = next(bg_ips)
            hosts.append(HostSpec(name, switch, 3 + j, f"10.0.3.{n}", f"00:00:00:00:03:{n:02x}"))
    # One bottleneck per path, P -> Z, shared by the mapped and the background flows; every link
    # into it (A's uplink, the background senders' access) is fast. Not path-rate links into it: then
    # each aggregate (the mapped flows behind A's uplink, the background behind its access links)
    # kept its own upstream queue full and arrived as a steady path-rate stream, and which one got
    # most of P -> Z flipped from run to run (measured: path 2's background 1.8 Mbit/s beside 4
    # mapped flows' 7.4 in one run, 7.4 beside 7 mapped flows' 2.6 in the next; docs/labs.md).
    # Not a relay Q between P and Z either (every packet then reaches the bottleneck through one
    # port): measured twice, the mapped flows still got ~2x the background's per-flow share on
    # both paths (docs/labs.md)
    links = [LinkSpec(h.name, 0, h.switch, h.port, "access", access_mbps) for h in hosts]
    for a_port, mid, z_port in UPLINKS:
        links.append(LinkSpec("A", a_port, mid, 1, "packet", access_mbps))
        links.append(LinkSpec(mid, 2, "Z", z_port, "packet", path_mbps))
    return LabSpec("multihoming", switches, (), tuple(hosts), tuple(links))


def bg_senders(path: int) -> tuple[str, ...]:
    """The background senders behind path ``path`` (1 or 2): bg1a, bg1b, ... on P1."""
    return tuple(n for n in BG_SENDERS if n.startswith(f"bg{path}"))


def background_plans(sch: dict[str, Any], bg_ports: Sequence[int]) -> dict[str, list[str]]:
    """Each background sender's ``port@start@cc`` list: path 1's base and extra flows and path 2's base
    flows dealt round-robin over that path's senders (``bg_ports``: base ports, then the extra ones)."""
    base, starts = sch["base_flows"], sch["base_starts"]
    if len(bg_ports) != base + sch["extra_flows"] or len(starts) != 2 * base:
        raise ValueError(f"{len(bg_ports)} background ports / {len(starts)} starts for {base} base and "
                         f"{sch['extra_flows']} extra flows")
    per_path = {1: list(zip(bg_ports[:base], starts[:base], strict=True))
                + list(zip(bg_ports[base:], sch["extra_starts"], strict=True)),
                2: list(zip(bg_ports[:base], starts[base:], strict=True))}
    plans: dict[str, list[str]] = {}
    for path, items in per_path.items():
        names = bg_senders(path)
        for i, (port, start) in enumerate(items):
            # each sender its turn of the flows, and within its own flows each congestion control in turn
            plans.setdefault(names[i % len(names)], []).append(plan_item(port, start, i // len(names)))
    return plans


def plan_item(port: int, start: float, index: int) -> str:
    """One flow of a sender's plan, ``port@start@cc``: the ``index``-th flow takes CC_MIX's turn."""
    return f"{port}@{start}@{CC_MIX[index % len(CC_MIX)]}"


def flows_for(spec: LabSpec, per_sender: int) -> list[dict[str, Any]]:
    """The mapped TCP flows: ``per_sender`` from each s_i to d_i (source ports 40001..; a run gives
    them its own, see :func:`ports_for`)."""
    out = []
    senders = [h for h in spec.hosts if h.name.startswith("s")]
    for h in senders:
        dst = next(d for d in spec.hosts if d.name == "d" + h.name[1:])
        for j in range(per_sender):
            out.append({"src": h.ip, "dst": dst.ip, "proto": 6, "sport": 40001 + j, "dport": DATA_PORT,
                        "from": h.name, "to": dst.name})
    return out


def schedule(seed: int, quick: bool, n_flows: int) -> dict[str, Any]:
    """One seed's timings: flow start offsets, background flows and window, the measured window."""
    rng = random.Random(seed)
    size = QUICK if quick else FULL
    seconds = size["seconds"]
    bg_start = rng.uniform(*size["bg_start"])
    lo, hi = size["extra"]
    sch = {"seconds": seconds, "starts": [round(rng.uniform(0.0, 1.0), 3) for _ in range(n_flows)],
           "base_flows": n_flows, "base_starts": [round(rng.uniform(0.0, 1.0), 3) for _ in range(2 * n_flows)],
           "extra_flows": rng.randint(lo * n_flows, hi * n_flows),
           "bg_start": round(bg_start, 3), "bg_end": round(seconds - rng.uniform(0.5, 1.5), 3),
           # the paper measures while the extra load is on (40-400 s of 600); we leave the first
           # seconds of load for the estimators to react, as its window starts with the load
           "window": (round(bg_start + 2.0, 3), round(seconds - 2.0, 3))}
    sch["extra_starts"] = sorted(round(bg_start + rng.uniform(0.0, size["extra_spread"]), 3)
                                 for _ in range(sch["extra_flows"]))
    return sch


# ---------------------------------------------------------------------- results
def background_by_path(spec: LabSpec, per_conn: dict[str, float]) -> list[float]:
    """Sum bgz's per-connection Mbit/s (``ip:port`` keys) by the path its sender sits on (P1, P2)."""
    path_of = {h.ip: int(h.switch[1]) for h in spec.hosts if h.name in BG_SENDERS}
    out = [0.0, 0.0]
    for name, mbps in per_conn.items():
        path = path_of.get(name.rsplit(":", 1)[0])
        if path:
            out[path - 1] += mbps
    return [round(x, 3) for x in out]


def window_means(timeline: Sequence[dict[str, Any]], window: tuple[float, float],
                 key: str = "mbps") -> list[float] | None:
    """The mean of the controller's per-path samples of ``key`` (Mbit/s, or flows with ``counts``)
    whose time falls in ``window``."""
    inside = [s[key] for s in timeline if window[0] <= s["t"] <= window[1] and s.get(key)]
    if not inside:
        return None
    return [round(statistics.fmean(x), 3) for x in zip(*inside, strict=True)]


def flow_throughputs(recv: dict[str, Any], window: tuple[float, float]) -> dict[str, float]:
    """Mbit/s of each connection over ``window`` (s since the receiver started), from its byte bins."""
    lo, hi = window
    if hi <= lo:
        raise ValueError(f"empty window {window}")
    b = float(recv["bin_s"])
    out = {}
    for name, bins in recv["flows"].items():
        got = sum(n for k, n in bins if lo <= k * b and (k + 1) * b <= hi)
        out[name] = got * 8 / 1e6 / (hi - lo)
    return out


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per policy: the mean over seeds of each metric, its seed-to-seed sd, and the change vs static
    in the paper's sense (AVGT and MMR: increase %; STD: decrease %)."""
    out: dict[str, Any] = {}
    for policy, rs in runs.items():
        m: dict[str, Any] = {"seeds": len(rs)}
        for key in ("avgt_mbps", "std_mbps", "mmr", "jain"):
            vals = [r["metrics"][key] for r in rs]
            m[key] = statistics.fmean(vals)
            m[f"{key}_sd"] = statistics.stdev(vals) if len(vals) > 1 else 0.0
        out[policy] = m
    base = out.get(STATIC)
    if base:
        for policy, m in out.items():
            if policy == STATIC:
                continue
            pct = lambda new, old: 100.0 * (new - old) / old if old else 0.0  # noqa: E731
            m["vs_static_pct"] = {"avgt": pct(m["avgt_mbps"], base["avgt_mbps"]),
                                  "std_decrease": -pct(m["std_mbps"], base["std_mbps"]),
                                  "mmr": pct(m["mmr"], base["mmr"]), "jain": pct(m["jain"], base["jain"])}
    return out


def plot(summary: dict[str, Any], timelines: dict[str, list[dict[str, Any]]], path: Path, seed: int = 0) -> Path:
    """Bars of the four metrics per policy (mean ± sd over seeds) and path 1's weight over time
    (``timelines``: each policy's run of seed ``seed``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = [p for p in POLICIES if p in summary]
    fig, axes = plt.subplots(1, 5, figsize=(15, 3.2))
    for ax, (key, label) in zip(axes, (("avgt_mbps", "AVGT (Mbit/s)"), ("std_mbps", "STD (Mbit/s)"),
                                       ("mmr", "min/max"), ("jain", "Jain")), strict=False):
        ax.bar(policies, [summary[p][key] for p in policies], yerr=[summary[p][f"{key}_sd"] for p in policies],
               color=["tab:gray", "tab:blue", "tab:orange"][:len(policies)], capsize=3)
        ax.set_title(label, fontsize=9)
        ax.tick_params(labelsize=8)
    ax = axes[-1]
    for p in policies:
        pts = [(s["t"], s["weights"][0]) for s in timelines.get(p, []) if s.get("weights")]
        if pts:
            ax.plot([t for t, _ in pts], [w for _, w in pts], label=p, lw=1)
    ax.set_title(f"weight of path 1 (loaded), seed {seed}", fontsize=9)
    ax.set_xlabel("s", fontsize=8)
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------- runs on one network
def _config(work: Path, interval: float) -> Path:
    cfg = work / "mlte.toml"
    cfg.write_text(f'[te]\nmapping = "{STATIC}"\nmapping_sites = ["{SITES[0]}", "{SITES[1]}"]\n'
                   f'mapping_interval = {interval}\n\n[monitor]\nprobe_interval = 0.2\n')
    return cfg


def ports_for(run_index: int, n_flows: int, n_bg: int) -> tuple[list[int], list[int]]:
    """Source ports of run ``run_index``'s mapped and background flows: new ones every run, so no
    connection of the previous run (its TIME_WAIT, its rules) is mistaken for one of this run
    (below 32768, the kernel's own ephemeral ports)."""
    if not 0 <= run_index < 50 or n_flows > 200 or n_bg > 200:
        raise ValueError(f"at most 200 flows of each kind per run and 50 runs (got {n_flows}, {n_bg}, run {run_index})")
    return ([10000 + 200 * run_index + j for j in range(n_flows)],
            [20000 + 200 * run_index + j for j in range(n_bg)])


def _prepare(session: Any) -> None:
    """Every host sends once (the view learns where it is) and the mapping app finds its two paths."""
    from app.controller.client import wait_until

    session.wait_links(timeout=60)
    lab = session.lab
    for h in session.spec.hosts:
        peer = next(x for x in session.spec.hosts if x.switch != h.switch)
        lab.node(h.name).cmd(f"ping -c1 -W1 {peer.ip} >/dev/null 2>&1")
    wait_until(lambda: session.client.request("GET", "/mapping").get("ready") or None, 30,
               "the mapping app to find two paths A -> Z")
    bound_path_queues(session)


def path_interfaces(spec: LabSpec, prefix: str) -> list[str]:
    """Both ends of every path link (Mininet names them <prefix><switch>-eth<port>)."""
    return [f"{prefix}{sw}-eth{port}" for x in spec.links_of_kind("packet")
            for sw, port in ((x.a, x.a_port), (x.b, x.b_port))]


def bound_path_queues(session: Any, limit: int = PATH_QUEUE_PKTS) -> None:
    """A ``limit``-packet pfifo under each path link's HTB class (Mininet's 5:1); see PATH_QUEUE_PKTS."""
    import subprocess

    for intf in path_interfaces(session.spec, session.prefix):
        cmd = ["tc", "qdisc", "replace", "dev", intf, "parent", "5:1", "handle", "10:", "pfifo", "limit", str(limit)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")


def run_once(session: Any, work: Path, policy: str, seed: int, run_index: int, quick: bool, per_sender: int,
             note: Callable[[str], None]) -> dict[str, Any]:
    """One policy, one seed on the running network: switch the controller's policy (a fresh mapper),
    register this run's flows, load path 1, measure every flow, remove the flows."""
    import subprocess

    work.mkdir(parents=True, exist_ok=True)
    spec, lab, client = session.spec, session.lab, session.client
    flows = flows_for(spec, per_sender)
    sch = schedule(seed, quick, len(flows))
    base = sch["base_flows"]
    sports, bg_ports = ports_for(run_index, len(flows), base + sch["extra_flows"])
    for f, sport in zip(flows, sports, strict=True):
        f["sport"] = sport
    seconds = sch["seconds"]
    errors_before = len(session.controller_errors())
    client.request("PUT", "/mapping/policy", {"policy": policy})
    # the placement answers 422 naming any host the view has not learnt
    client.request("POST", "/mapping/flows", {"flows": [
        {k: f[k] for k in ("src", "dst", "proto", "sport", "dport")} for f in flows]}, timeout=120)
    procs = []
    recvs = {}
    try:
        for f in flows:
            if f["to"] not in recvs:
                out = work / f"recv-{f['to']}.json"
                recvs[f["to"]] = out
                procs.append(lab.node(f["to"]).popen([sys.executable, str(work.parent / "recv.py"), str(DATA_PORT),
                                                     str(seconds + 2), str(out)]))
        procs.append(lab.node("bgz").popen([sys.executable, str(work.parent / "recv.py"), str(BG_PORT),
                                            str(seconds + 2), str(work / "recv-bg.json")]))
        time.sleep(0.3)
        t_start = time.time()
        by_sender: dict[str, list[str]] = {}
        for i, (f, start) in enumerate(zip(flows, sch["starts"], strict=True)):
            by_sender.setdefault(f["from"], []).append(plan_item(f["sport"], start, i))
        dst_of = {f["from"]: f["dst"] for f in flows}
        for name, plan in by_sender.items():
            procs.append(lab.node(name).popen([sys.executable, str(work.parent / "send.py"), dst_of[name],
                                               str(DATA_PORT), str(seconds), ",".join(plan)],
                                              stderr=subprocess.DEVNULL))
        for name, plan in background_plans(sch, bg_ports).items():
            procs.append(lab.node(name).popen([sys.executable, str(work.parent / "send.py"), "10.0.3.2",
                                               str(BG_PORT), str(sch["bg_end"]), ",".join(plan)],
                                              stderr=subprocess.DEVNULL))
        deadline = t_start + seconds + 5
        while time.time() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.2)
    finally:
        for p in procs:  # stop by PID whatever is left
            if p.poll() is None:
                p.terminate()
                p.wait(5)
    status = client.request("GET", "/mapping")
    client.request("DELETE", "/mapping/flows", {"flows": [
        {k: f[k] for k in ("src", "dst", "proto", "sport", "dport")} for f in flows]}, timeout=120)
    errors = session.controller_errors()[errors_before:]
    per_flow: dict[str, float] = {}
    for to, path in recvs.items():
        if not path.exists():
            raise RuntimeError(f"{policy} seed {seed}: the receiver on {to} wrote nothing ({path})")
        recv = json.loads(path.read_text())
        shift = t_start - float(recv["t0"])  # receiver clock 0 -> sender clock 0
        got = flow_throughputs(recv, (sch["window"][0] + shift, sch["window"][1] + shift))
        per_flow.update({f"{to}/{k}": v for k, v in got.items()})
    missing = len(flows) - len(per_flow)
    if missing:  # a flow that never connected counts as 0 Mbit/s (it got nothing), not as absent
        per_flow.update({f"missing{i}": 0.0 for i in range(missing)})
    samples = [h for h in status.get("history", []) if h.get("decision") == "sample"]
    timeline = [{"t": round(s["wall"] - t_start, 2), "weights": s["weights"], "counts": s["counts"],
                 "mbps": s["mbps"], "rtt_ms": s["rtt_ms"]} for s in samples]
    metrics = flow_metrics(list(per_flow.values()))
    bg_mbps = None
    if (work / "recv-bg.json").exists():
        recv = json.loads((work / "recv-bg.json").read_text())
        shift = t_start - float(recv["t0"])
        got = flow_throughputs(recv, (sch["window"][0] + shift, sch["window"][1] + shift))
        bg_mbps = background_by_path(spec, got)
    remaps = [h for h in status.get("history", []) if h.get("decision") == "remap"]
    note(f"{policy} seed {seed}: AVGT {metrics['avgt_mbps']:.3f} Mbit/s, STD {metrics['std_mbps']:.3f}, "
         f"MMR {metrics['mmr']:.3f}, Jain {metrics['jain']:.3f}; {len(remaps)} remap(s), final weights "
         f"{status.get('weights')}, counts {status.get('counts')}; mapped Mbit/s per path "
         f"{window_means(timeline, sch['window'])}, background {bg_mbps}")
    return {"policy": policy, "seed": seed, "schedule": sch, "metrics": metrics, "per_flow_mbps": per_flow,
            "final_weights": status.get("weights"), "final_counts": status.get("counts"),
            "remaps": len(remaps), "first_remap_s": round(remaps[0]["t"] - samples[0]["t"] + samples[0]["wall"]
                                                           - t_start, 2) if remaps and samples else None,
            "timeline": timeline, "controller_errors": errors,
            # what each path carried over the window: the mapped flows (the controller's counters,
            # mean of its samples) and the background (bgz's receiver), Mbit/s per path
            "mapped_path_mbps": window_means(timeline, sch["window"]), "bg_path_mbps": bg_mbps,
            # flows per path over the window: the split while path 1 is loaded (final_counts is read
            # after the extra load has stopped, when the policy may be moving flows back)
            "window_counts": window_means(timeline, sch["window"], "counts")}


def run(out: Path, *, quick: bool = False, progress: Callable[[str], None] = print, seeds: int | None = None,
        policies: Sequence[str] = POLICIES, seed: int = 0) -> dict[str, Any]:
    """Every policy × ``seeds`` runs (seeds ``seed``, ``seed`` + 1, ...) on one network and one
    controller (the policy switched through ``PUT /mapping/policy`` between runs); writes
    ``results.json`` and ``multihoming.png``."""
    from mininet_labs.netlock import net_lock
    from mininet_labs.session import LabSession

    seeds = (QUICK_SEEDS if quick else SEEDS) if seeds is None else seeds
    if seeds < 1 or seed < 0:
        raise ValueError(f"seeds must be >= 1 and the first seed >= 0, got {seeds} from {seed}")
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"unknown mapping policies {unknown} (known: {', '.join(POLICIES)})")
    from mininet_labs.big_vs_small import available_ccs

    missing = [cc for cc in CC_MIX if cc not in available_ccs()]
    if missing:
        raise ValueError(f"this kernel does not offer TCP {', '.join(missing)} (the lab's flows use "
                         f"{', '.join(CC_MIX)}; net.ipv4.tcp_available_congestion_control)")
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    spec = multihoming_spec()
    per_sender = PER_SENDER
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "send.py").write_text(SENDER)
    (work / "recv.py").write_text(RECEIVER)
    t0 = time.time()

    def note(text: str) -> None:
        progress(f"[{time.time() - t0:7.1f}s] {text}")

    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in policies}
    with net_lock():
        lock_wait, t0 = time.time() - t0, time.time()  # the lab's own duration starts here
        note(f"network lock held (waited {lock_wait:.0f} s); starting the controller and the network")
        with LabSession(spec, work, config_file=str(_config(work, INTERVAL_S))) as session:
            _prepare(session)
            note("network up, hosts learnt, two paths A -> Z found")
            i = 0
            for s in range(seed, seed + seeds):
                for policy in policies:
                    runs[policy].append(run_once(session, work / f"{policy}-s{s}", policy, s, i, quick,
                                                 per_sender, note))
                    i += 1
    network_s = time.time() - t0  # the lock is released here
    summary = summarise(runs)
    res = {"lab": "multihoming", "quick": quick, "seeds": seeds, "first_seed": seed, "flows": per_sender * 4,
           "path_mbps": PATH_MBPS, "cc_mix": list(CC_MIX), "interval_s": INTERVAL_S, "duration_s": round(time.time() - t0, 1),
           "lock_wait_s": round(lock_wait, 1),
           # as the other labs keep it (mininet_labs/labclock.py): the lab's own time is `network`
           "lab_seconds": {"lock_wait": round(lock_wait, 1), "network": round(network_s, 1),
                           "total": round(lock_wait + network_s, 1)},
           "summary": summary,
           "runs": {p: [{k: v for k, v in r.items() if k != "timeline"} for r in rs] for p, rs in runs.items()}}
    (out / "results.json").write_text(json.dumps(res, indent=2, sort_keys=True))
    (out / "timelines.json").write_text(json.dumps({p: [r["timeline"] for r in rs] for p, rs in runs.items()},
                                                   indent=1))
    plot(summary, {p: rs[0]["timeline"] for p, rs in runs.items()}, out / "multihoming.png", seed)
    for p in policies:
        s = summary[p]
        note(f"{p}: AVGT {s['avgt_mbps']:.3f} Mbit/s, STD {s['std_mbps']:.3f}, MMR {s['mmr']:.3f}, "
             f"Jain {s['jain']:.3f} over {s['seeds']} seeds")
    progress(f"wrote {out / 'results.json'} and {out / 'multihoming.png'}")
    return res


# ---------------------------------------------------------------------- `mn --custom`
try:  # only where Mininet is importable (Debian's python3, or a venv that sees it)
    from mininet_labs.testbed import SpecTopo

    class MultihomingTopo(SpecTopo):
        """``--topo multihoming[,senders=4,path_mbps=10]``: the lab's topology, no controller apps."""

        def build(self, senders: int = 4, path_mbps: float = PATH_MBPS, **kwargs: Any) -> None:  # type: ignore[override]
            super().build(spec=multihoming_spec(int(senders), float(path_mbps)), **kwargs)

    topos = {"multihoming": MultihomingTopo}
except ImportError:  # pragma: no cover - no Mininet: the lab's plain parts still import
    topos = {}
