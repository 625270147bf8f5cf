"""Fault injection for every lab: cut / repair a fibre, power an OTS off / on, kill / restart an OTS
agent, take a packet switch off its controller and back, flap a port (docs/ots.md, "Loss of light").

Each function acts on a running :class:`~mininet_labs.testbed.LabNet` (or a
:class:`~mininet_labs.session.LabSession`'s) and returns the ``time.monotonic()`` at which the fault
took effect, taken just before the command that makes it (``ip``, ``ovs-vsctl``, a signal): a
detection or restoration time measured from it is an upper bound, by the few ms a command takes to
start (taken after it returned, the agents had sometimes already reacted: negative times).
Ports are named as in the spec, ``"X:3"``; a fibre by the OTS ports at its two ends.

What each fault does to the lab (what the agents and the controller then see):

- ``cut_fibre(lab, "X:3", "Z:3")``: ``ip link set <X's veth of X:3> down`` — X sees its port taken
  down, Z loses carrier; both agents darken the XCON partners (loss of light), hop by hop to the
  packet ports at the circuit's ends. ``repair_fibre`` sets the same end up again.
- ``power_off_ots``: the agent dies (SIGKILL: no goodbye to the controller), the bridge's flows go
  and every port of the OTS goes down (its neighbours lose carrier). ``power_on_ots``: the ports stay
  down, the flows are cleared again and a fresh agent starts with no XCONs (a powered-off OTS has lost
  its cross-connects; the controller must provision again).
- ``kill_agent`` / ``restart_agent``: only the agent process (SIGKILL); the bridge keeps its XCON
  flows and light, as hardware does when its control card dies; a restarted agent adopts them.
- ``freeze_agent``: SIGSTOP / SIGCONT the agent — a *silent* switch whose TCP session stays open, which
  only the controller's echo timeout (``[controller] echo_interval`` × ``echo_misses``) notices.
- ``disconnect_switch`` / ``reconnect_switch``: a packet switch loses its control channel (OVS closes
  the session) and keeps forwarding with its flows (fail-mode secure), then gets the same controller
  records back. Its controller is pointed at a closed local port rather than deleted: OVS flushes a
  bridge's flows when it goes from having a controller to having none, or back (``bridge.c``; seen
  here: ``del-controller`` left the flow table empty), which a lost control channel does not do.
- ``flap_port``: a port's interface down, ``hold`` s, up again (any node: packet switch or OTS).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from mininet_labs.session import LabSession
from mininet_labs.testbed import LabNet, OtsSwitch
from topology.spec import LabSpec, LinkSpec


class FaultError(RuntimeError):
    """A fault that cannot be injected as asked (unknown port, not a fibre, not an OTS, ...)."""

    user_error = True


def parse_port(ref: str) -> tuple[str, int]:
    """``"X:3"`` -> ``("X", 3)``."""
    name, sep, port = ref.rpartition(":")
    if not sep or not name or not port.isdigit():
        raise FaultError(f"a port is NODE:NUMBER (e.g. X:3), got {ref!r}")
    return name, int(port)


def fibre(spec: LabSpec, a: str, b: str) -> LinkSpec:
    """The optical link of ``spec`` between OTS ports ``a`` and ``b`` (either way round)."""
    ends = {parse_port(a), parse_port(b)}
    for link in spec.links_of_kind("optical"):
        if {(link.a, link.a_port), (link.b, link.b_port)} == ends:
            return link
    raise FaultError(f"lab {spec.name} has no fibre {a}-{b}")


def _net(lab: LabNet | LabSession) -> LabNet:
    net = lab.lab if isinstance(lab, LabSession) else lab
    if net is None or net.net is None:
        raise FaultError("the lab is not running")
    return net


def interface(lab: LabNet | LabSession, ref: str) -> str:
    """The Linux interface (veth end) of port ``ref`` in the running lab."""
    name, port = parse_port(ref)
    node = _node(_net(lab), name)
    intf = node.intfs.get(port)
    if intf is None:
        raise FaultError(f"{name} has no port {port}")
    return str(intf.name)


def _node(net: LabNet, name: str) -> Any:
    try:
        return net.node(name)
    except KeyError:
        raise FaultError(f"the lab has no node {name!r}") from None


def _ots(net: LabNet, name: str) -> OtsSwitch:
    node = _node(net, name)
    if not isinstance(node, OtsSwitch):
        raise FaultError(f"{name} is not an OTS")
    return node


def link_commands(intfs: Sequence[str], up: bool) -> str:
    """``ip -batch`` input that sets every interface of ``intfs`` up or down."""
    return "".join(f"link set dev {i} {'up' if up else 'down'}\n" for i in intfs)


def _ip_links(intfs: Sequence[str], up: bool) -> float:
    """Set interfaces up/down in one ``ip`` process; the monotonic time just before it started."""
    at = time.monotonic()
    res = subprocess.run(["ip", "-batch", "-"], input=link_commands(intfs, up), capture_output=True, text=True,
                         timeout=15)
    if res.returncode != 0:
        raise FaultError(f"ip link set {'up' if up else 'down'} {' '.join(intfs)}: {res.stderr.strip()}")
    return at


def _run(*cmd: str) -> str:
    res = subprocess.run(list(cmd), capture_output=True, text=True, timeout=15)
    if res.returncode != 0:
        raise FaultError(f"{' '.join(cmd)}: {res.stderr.strip() or f'exit status {res.returncode}'}")
    return res.stdout.strip()


def _intfs(node: Any) -> list[str]:
    return [str(i.name) for i in node.intfList() if i.name != "lo"]


# ---- fibres and ports ----------------------------------------------------------------------------
def cut_fibre(lab: LabNet | LabSession, a: str, b: str) -> float:
    """Cut the fibre between OTS ports ``a`` and ``b``: ``a``'s end goes down."""
    fibre(_net(lab).spec, a, b)
    return _ip_links([interface(lab, a)], up=False)


def repair_fibre(lab: LabNet | LabSession, a: str, b: str) -> float:
    """Repair a fibre cut with :func:`cut_fibre` (same argument order): ``a``'s end comes up."""
    fibre(_net(lab).spec, a, b)
    return _ip_links([interface(lab, a)], up=True)


def flap_port(lab: LabNet | LabSession, ref: str, hold: float = 1.0,
              sleep: Callable[[float], Any] = time.sleep) -> float:
    """Port ``ref``'s interface down, ``hold`` s, up again; returns when it went down."""
    intf = interface(lab, ref)
    at = _ip_links([intf], up=False)
    try:
        sleep(hold)
    finally:
        _ip_links([intf], up=True)
    return at


# ---- OTS power and agents ----------------------------------------------------------------------------
def power_off_ots(lab: LabNet | LabSession, name: str) -> float:
    """The OTS loses power: agent killed, every port down (when this returns: the time taken), flows gone."""
    net = _net(lab)
    sw = _ots(net, name)
    sw.stop_agent(kill=True)
    at = _ip_links(_intfs(sw), up=False)
    _run("ovs-ofctl", "-O", "OpenFlow10", "del-flows", net.bridge(name))
    return at


def power_on_ots(lab: LabNet | LabSession, name: str) -> float:
    """Power comes back: ports still dark, no flows (the XCONs were lost), a fresh agent starts."""
    net = _net(lab)
    sw = _ots(net, name)
    sw.stop_agent(kill=True)
    _ip_links(_intfs(sw), up=False)
    _run("ovs-ofctl", "-O", "OpenFlow10", "del-flows", net.bridge(name))
    at = time.monotonic()
    sw.start_agent()
    return at


def kill_agent(lab: LabNet | LabSession, name: str) -> float:
    """SIGKILL the OTS agent (its control card dies); the bridge keeps its XCONs lit."""
    sw = _ots(_net(lab), name)
    if sw.agent is None or sw.agent.poll() is not None:
        raise FaultError(f"the agent of {name} is not running")
    at = time.monotonic()
    sw.stop_agent(kill=True)
    return at


def freeze_agent(lab: LabNet | LabSession, name: str, frozen: bool = True) -> float:
    """SIGSTOP (``frozen``) or SIGCONT the OTS agent: a *silent* switch — its TCP session stays open but
    nothing answers, so only the controller's echo timeout can tell it is gone. The XCONs stay lit."""
    sw = _ots(_net(lab), name)
    if sw.agent is None or sw.agent.poll() is not None:
        raise FaultError(f"the agent of {name} is not running")
    at = time.monotonic()
    os.kill(sw.agent.pid, signal.SIGSTOP if frozen else signal.SIGCONT)
    return at


def restart_agent(lab: LabNet | LabSession, name: str) -> float:
    """Start the OTS agent again over the same bridge (it adopts the XCONs it finds there)."""
    sw = _ots(_net(lab), name)
    if sw.agent is not None and sw.agent.poll() is None:
        raise FaultError(f"the agent of {name} is still running")
    at = time.monotonic()
    sw.start_agent()
    return at


# ---- packet switch control channel -------------------------------------------------------------------
def controller_records(bridge: str) -> list[tuple[str, str | None]]:
    """(target, max_backoff or None) of each controller record of ``bridge``."""
    uuids = _run("ovs-vsctl", "--timeout=10", "get", "bridge", bridge, "controller").strip("[]")
    out = []
    for uuid in (u.strip() for u in uuids.split(",") if u.strip()):
        target = _run("ovs-vsctl", "--timeout=10", "get", "controller", uuid, "target").strip('"')
        backoff = _run("ovs-vsctl", "--timeout=10", "get", "controller", uuid, "max_backoff").strip("[]")
        out.append((target, backoff or None))
    return out


def set_controller_args(bridge: str, records: Sequence[tuple[str, str | None]]) -> list[str]:
    """``ovs-vsctl`` arguments that give ``bridge`` exactly these controller records."""
    args: list[str] = []
    for i, (target, backoff) in enumerate(records):
        args += ["--", f"--id=@c{i}", "create", "controller", f'target="{target}"']
        if backoff is not None:
            args.append(f"max_backoff={backoff}")
    ids = ",".join(f"@c{i}" for i in range(len(records)))
    return [*args, "--", "set", "bridge", bridge, f"controller=[{ids}]"]


_SAVED: dict[str, list[tuple[str, str | None]]] = {}  # bridge -> its controller records while disconnected


def closed_port() -> int:
    """A local TCP port nothing listens on right now (connections to it are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def disconnect_switch(lab: LabNet | LabSession, name: str) -> float:
    """Take packet switch ``name`` off its controller (its controller records now point at a closed port);
    it keeps its flows and forwards with them."""
    net = _net(lab)
    bridge = net.bridge(name)
    if isinstance(_node(net, name), OtsSwitch):
        raise FaultError(f"{name} is an OTS: its control channel is its agent (kill_agent)")
    records = controller_records(bridge)
    if not records:
        raise FaultError(f"{name} has no controller to disconnect from")
    _SAVED[bridge] = records
    args = set_controller_args(bridge, [(f"tcp:127.0.0.1:{closed_port()}", records[0][1])])
    at = time.monotonic()
    _run("ovs-vsctl", "--timeout=10", *args)
    return at


def reconnect_switch(lab: LabNet | LabSession, name: str) -> float:
    """Give packet switch ``name`` back the controller records :func:`disconnect_switch` took away."""
    net = _net(lab)
    bridge = net.bridge(name)
    records = _SAVED.pop(bridge, None)
    if records is None:
        raise FaultError(f"{name} was not disconnected with disconnect_switch")
    at = time.monotonic()
    _run("ovs-vsctl", "--timeout=10", *set_controller_args(bridge, records))
    return at
