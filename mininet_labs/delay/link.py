"""Delay, jitter, loss and rate on a link: netem where the kernel has it, our ``dlyfwd`` element where not.

:class:`DelayLink` joins two interfaces of one namespace into a wire with the configured behaviour
each way: with netem, a ``tc`` mirred redirect between them plus a netem qdisc on each egress; without,
the userspace forwarder ``dlyfwd`` (raw sockets on both). :func:`splice` puts a DelayLink into an
existing link at one node's interface (a Mininet host's ``h1-eth0``, say) without the node or its
peer noticing anything but the delay: same name, MAC, addresses and routes; :meth:`SplicedLink.remove`
puts the original back. Processes are stopped by PID; namespaces and interfaces are removed by name.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from mininet_labs.delay.build import ensure_binary
from mininet_labs.delay.config import DelayConfig, DelayConfigError, check_ifname
from mininet_labs.delay.netns import ROOT, NetError, Netns

BACKENDS = ("auto", "netem", "element")
_netem: bool | None = None


class DelayLinkError(RuntimeError):
    """The element would not start or stop (one line: why, from its own error output)."""

    user_error = True


def netem_available() -> bool:
    """Whether this kernel has the netem qdisc (tried once on a scratch veth in a scratch namespace)."""
    global _netem
    if _netem is None:
        ns = Netns(f"dlynm{os.getpid() % 100000}")
        ROOT.run("ip", "netns", "add", ns.name)
        try:
            ns.run("ip", "link", "add", "dlynm0", "type", "veth", "peer", "name", "dlynm1")
            _netem = ns.run("tc", "qdisc", "add", "dev", "dlynm0", "root", "netem", "delay", "1ms",
                            check=False).returncode == 0
        finally:
            ROOT.run("ip", "netns", "del", ns.name, check=False)
    return _netem


def _pdeathsig() -> None:
    """In the child: die with the lab process, so a crashed lab leaves no forwarder running."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class DelayLink:
    """A wire between ``a_if`` and ``b_if`` (same namespace) that delays, jitters, loses and shapes frames."""

    def __init__(self, a_if: str, b_if: str, delay_ms: float, jitter_ms: float = 0.0, loss: float = 0.0,
                 rate_mbps: float | None = None, *, netns: Netns = ROOT, backend: str = "auto",
                 limit: int = 10000, seed: int = 1, rt_priority: int = 10) -> None:
        self.a_if, self.b_if = check_ifname(a_if), check_ifname(b_if)
        if a_if == b_if:
            raise DelayConfigError(f"a_if and b_if must differ (both {a_if!r})")
        if backend not in BACKENDS:
            raise DelayConfigError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
        if isinstance(rt_priority, bool) or not isinstance(rt_priority, int) or not 0 <= rt_priority <= 99:
            raise DelayConfigError(f"rt_priority must be an integer in [0, 99], not {rt_priority!r}")
        self.config = DelayConfig(delay_ms, jitter_ms, loss, rate_mbps, limit, seed)
        self.netns, self.requested, self.rt_priority = netns, backend, rt_priority
        self.backend: str | None = None  # what start() chose
        self.pid: int | None = None
        self.final_counters: dict[str, Any] = {}
        self._proc: subprocess.Popen | None = None
        self._dir: Path | None = None

    # -- life cycle ------------------------------------------------------------------------------
    def start(self) -> DelayLink:
        """Apply the link; returns self. ``auto`` uses netem when the kernel has it, else the element."""
        if self.backend is not None:
            raise DelayLinkError("already started")
        for ifname in (self.a_if, self.b_if):
            self._prepare(ifname)
        use_netem = self.requested == "netem" or (self.requested == "auto" and netem_available())
        if use_netem:
            try:
                self._start_netem()
                self.backend = "netem"
                return self
            except NetError:
                self._stop_netem()
                if self.requested == "netem":
                    raise
        self._start_element()
        self.backend = "element"
        return self

    def stop(self) -> dict[str, Any]:
        """Remove the link's behaviour (kills the element by PID); returns its final counters. Idempotent."""
        if self.backend == "netem":
            self._stop_netem()
        elif self.backend == "element":
            self._stop_element()
        self.backend = None
        return self.final_counters

    def __enter__(self) -> DelayLink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what a lab records ---------------------------------------------------------------------
    def counters(self, timeout: float = 2.0) -> dict[str, Any]:
        """The element's live counters per direction (rx, tx, lost, queue_drop, ...); {} under netem."""
        if self.backend != "element" or self._dir is None or self.pid is None:
            return {}
        path = self._dir / "stats.json"
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        os.kill(self.pid, signal.SIGUSR1)
        deadline = time.monotonic() + timeout
        while not path.exists():
            if time.monotonic() > deadline:
                raise DelayLinkError(f"dlyfwd (pid {self.pid}) wrote no counters within {timeout:g}s")
            time.sleep(0.01)
        return json.loads(path.read_text())

    def describe(self) -> dict[str, Any]:
        """Configured values and backend, for results.json (next to :func:`measure.path_record`'s numbers)."""
        return {"backend": self.backend, "a_if": self.a_if, "b_if": self.b_if, "netns": str(self.netns),
                "configured": self.config.to_json()}

    # -- backends --------------------------------------------------------------------------------
    def _prepare(self, ifname: str) -> None:
        """Up, no IPv6 chatter of its own, no receive offload merging frames above the MTU."""
        self.netns.run("ip", "link", "set", "dev", ifname, "up")
        self.netns.run("sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1", check=False)
        if shutil.which("ethtool"):
            self.netns.run("ethtool", "-K", ifname, "gro", "off", check=False)

    def _start_netem(self) -> None:
        for src, dst in ((self.a_if, self.b_if), (self.b_if, self.a_if)):
            self.netns.run("tc", "qdisc", "add", "dev", src, "clsact")
            self.netns.run("tc", "filter", "add", "dev", src, "ingress", "protocol", "all", "u32", "match",
                           "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", dst)
            self.netns.run("tc", "qdisc", "add", "dev", dst, "root", "netem", *self.config.netem_args())

    def _stop_netem(self) -> None:
        for ifname in (self.a_if, self.b_if):
            self.netns.run("tc", "qdisc", "del", "dev", ifname, "clsact", check=False)
            self.netns.run("tc", "qdisc", "del", "dev", ifname, "root", check=False)

    def _start_element(self, ready_timeout: float = 10.0) -> None:
        binary = ensure_binary("dlyfwd")
        self._dir = Path(tempfile.mkdtemp(prefix="dlyfwd-"))
        stats, errlog = self._dir / "stats.json", self._dir / "stderr.log"
        argv = [*self.netns.prefix(), str(binary), "--a", self.a_if, "--b", self.b_if,
                *self.config.element_args(), "--rt", str(self.rt_priority), "--stats", str(stats)]
        with open(errlog, "w") as err:
            self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL,
                                          preexec_fn=_pdeathsig)
        self.pid = self._proc.pid  # ip netns exec / nsenter exec the forwarder: this is its PID
        assert self._proc.stdout is not None
        ready, _, _ = select.select([self._proc.stdout], [], [], ready_timeout)
        line = self._proc.stdout.readline().decode().strip() if ready else ""
        if line != "ready":
            self._stop_element()
            why = (errlog.read_text().strip().splitlines() or [f"not ready within {ready_timeout:g}s"]) \
                if errlog.exists() else ["no output"]
            raise DelayLinkError(f"dlyfwd {self.a_if}<->{self.b_if} in {self.netns}: {why[-1]}")

    def _stop_element(self, timeout: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout)
            if proc.stdout is not None:
                proc.stdout.close()
        if self._dir is not None:
            with contextlib.suppress(FileNotFoundError, ValueError):
                self.final_counters = json.loads((self._dir / "stats.json").read_text())
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self.pid = None


# -- splicing into an existing link ---------------------------------------------------------------
def _snapshot(ns: Netns, ifname: str) -> dict[str, Any]:
    """MAC, MTU, addresses and (non-kernel) routes of an interface: what a replacement must carry."""
    link = json.loads(ns.run("ip", "-j", "link", "show", "dev", ifname).stdout)[0]
    addrs = json.loads(ns.run("ip", "-j", "addr", "show", "dev", ifname).stdout)[0].get("addr_info", [])
    routes = []
    for family in ("-4", "-6"):
        out = ns.run("ip", "-j", family, "route", "show", "dev", ifname, check=False).stdout or "[]"
        routes += [r for r in json.loads(out) if r.get("protocol") != "kernel"]
    return {"mac": link.get("address"), "mtu": link.get("mtu"), "was_up": "UP" in link.get("flags", []),
            "addrs": [f"{a['local']}/{a['prefixlen']}" for a in addrs
                      if a.get("scope") != "link" and a.get("local")],
            "routes": routes}


def _restore(ns: Netns, ifname: str, snap: dict[str, Any]) -> None:
    """Give ``ifname`` the snapshot's MAC, MTU, addresses and routes, and bring it up."""
    if snap.get("mac"):
        ns.run("ip", "link", "set", "dev", ifname, "address", snap["mac"])
    if snap.get("mtu"):
        ns.run("ip", "link", "set", "dev", ifname, "mtu", str(snap["mtu"]))
    if shutil.which("ethtool"):  # frames above the MTU cannot cross the element
        ns.run("ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off", check=False)
    for cidr in snap["addrs"]:
        ns.run("ip", "addr", "replace", cidr, "dev", ifname)
    if snap["was_up"]:
        ns.run("ip", "link", "set", "dev", ifname, "up")
    for r in snap["routes"]:
        argv = ["ip", "route", "replace", r["dst"], "dev", ifname]
        for key, word in (("gateway", "via"), ("metric", "metric"), ("prefsrc", "src")):
            if key in r:
                argv += [word, str(r[key])]
        ns.run(*argv, check=False)


class SplicedLink:
    """A :class:`DelayLink` spliced into a node's interface; :meth:`remove` puts the original link back."""

    def __init__(self, node_ns: Netns, node_if: str, tag: str, link: DelayLink, snapshot: dict[str, Any]) -> None:
        self.node_ns, self.node_if, self.tag, self.link, self._snap = node_ns, node_if, tag, link, snapshot
        self.element_ns = Netns(tag)

    @property
    def pid(self) -> int | None:
        return self.link.pid

    def describe(self) -> dict[str, Any]:
        """The link's backend and configured values plus where it sits (for :func:`measure.path_record`)."""
        return {**self.link.describe(), "node_ns": str(self.node_ns), "node_if": self.node_if,
                "element_ns": self.tag}

    def remove(self) -> dict[str, Any]:
        """Stop the element, give the node back its original interface (same peer), delete the namespace.

        Safe to call on a half-built splice and more than once; returns the element's final counters.
        """
        counters = self.link.stop()
        ens, old = self.element_ns, f"{self.tag}b"
        if self.node_ns.run("ip", "link", "show", "dev", old, check=False).returncode == 0:
            # the splice failed before the old end left the node: just give it its name back
            self.node_ns.run("ip", "link", "set", "dev", old, "name", self.node_if, check=False)
            _restore(self.node_ns, self.node_if, {**self._snap, "addrs": [], "routes": []})
        if ens.run("ip", "link", "show", "dev", old, check=False).returncode == 0:
            with contextlib.suppress(NetError):
                self._snap = _snapshot(self.node_ns, self.node_if)  # addresses added since the splice
            self.node_ns.run("ip", "link", "del", "dev", self.node_if, check=False)  # the new pair
            ens.run("ip", "link", "set", "dev", old, "down", check=False)
            ens.run("ip", "link", "set", "dev", old, "name", self.node_if)
            ens.run("ip", "link", "set", "dev", self.node_if, "netns", self.node_ns.target())
            _restore(self.node_ns, self.node_if, self._snap)
        ROOT.run("ip", "netns", "del", ens.name, check=False)
        return counters

    def __enter__(self) -> SplicedLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def splice(node_ns: Netns, node_if: str, delay_ms: float, jitter_ms: float = 0.0, loss: float = 0.0,
           rate_mbps: float | None = None, *, backend: str = "auto", tag: str | None = None,
           **link_kw: Any) -> SplicedLink:
    """Insert a delay link at ``node_if`` (in ``node_ns``): node ─ new veth ─ element ─ old veth ─ peer.

    The node keeps an interface of the same name, MAC, addresses and routes; its old interface, still
    peered with the switch, moves into a namespace ``dly<hex>`` of its own with the element. Don't
    splice an interface OVS holds as a port (OVS tracks it by name): splice the host's end.
    """
    check_ifname(node_if)
    config = DelayConfig(delay_ms, jitter_ms, loss, rate_mbps)  # fail before touching anything
    tag = tag or f"dly{uuid.uuid4().hex[:6]}"
    if not tag.startswith("dly") or len(tag) > 14:
        raise DelayConfigError(f"tag must start with 'dly' and have at most 14 characters, not {tag!r}")
    snap = _snapshot(node_ns, node_if)
    ens = Netns(tag)
    link = DelayLink(f"{tag}a", f"{tag}b", config.delay_ms, config.jitter_ms, config.loss, config.rate_mbps,
                     netns=ens, backend=backend, **link_kw)
    spliced = SplicedLink(node_ns, node_if, tag, link, snap)
    ROOT.run("ip", "netns", "add", tag)
    try:
        ens.run("sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
        ens.run("sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1", check=False)
        node_ns.run("ip", "link", "set", "dev", node_if, "down")
        node_ns.run("ip", "link", "set", "dev", node_if, "name", f"{tag}b")
        node_ns.run("ip", "link", "set", "dev", f"{tag}b", "netns", tag)
        ens.run("ip", "link", "add", f"{tag}a", "type", "veth", "peer", "name", node_if,
                "netns", node_ns.target())
        if snap.get("mtu"):
            ens.run("ip", "link", "set", "dev", f"{tag}a", "mtu", str(snap["mtu"]))
        if shutil.which("ethtool"):
            ens.run("ethtool", "-K", f"{tag}a", "tso", "off", "gso", "off", check=False)
        _restore(node_ns, node_if, snap)
        link.start()
    except BaseException:
        spliced.remove()
        raise
    return spliced
