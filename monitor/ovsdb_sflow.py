"""Turn Open vSwitch's sFlow agent on and off per bridge through OVSDB (``ovs-vsctl``).

Fine monitoring is enabled only on hot spots, so this is called per bridge with the collector
target, 1-in-N packet sampling and the counter polling interval. The ``sFlow`` row is created
unreferenced by anything else, so clearing the bridge's ``sflow`` column lets OVSDB
garbage-collect it: disabling leaves nothing behind.
"""
from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Runner = Callable[[Sequence[str]], str]


class OvsdbError(RuntimeError):
    """``ovs-vsctl`` failed (bridge missing, OVS not running, bad value)."""

    user_error = True


def run_vsctl(args: Sequence[str]) -> str:
    """Run ``ovs-vsctl`` with a timeout; raise :class:`OvsdbError` with its stderr on failure."""
    try:
        proc = subprocess.run(["ovs-vsctl", "--timeout=10", *args], capture_output=True, text=True, timeout=20)
    except FileNotFoundError:
        raise OvsdbError("ovs-vsctl not found (is Open vSwitch installed?)") from None
    except subprocess.TimeoutExpired:
        raise OvsdbError(f"ovs-vsctl {' '.join(args)} timed out") from None
    if proc.returncode != 0:
        raise OvsdbError(f"ovs-vsctl {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


@dataclass(frozen=True)
class SflowConfig:
    """What one bridge's sFlow row says."""

    bridge: str
    targets: tuple[str, ...]
    sampling: int
    polling: int
    header: int
    agent: str


class OvsSflow:
    """sFlow control for OVS bridges (``runner`` is replaceable so unit tests need no OVS)."""

    def __init__(self, target: str, sampling: int = 64, polling: int = 1, header: int = 128,
                 agent: str = "", runner: Runner = run_vsctl) -> None:
        if sampling < 1 or polling < 0 or header < 1:
            raise ValueError("sampling >= 1, polling >= 0 and header >= 1 are required")
        self.target, self.sampling, self.polling, self.header, self.agent = target, sampling, polling, header, agent
        self.run = runner

    def enable_cmd(self, bridge: str, agent: str | None = None) -> list[str]:
        cmd = ["--", "--id=@sf", "create", "sflow", f'targets="{self.target}"',
               f"sampling={self.sampling}", f"polling={self.polling}", f"header={self.header}"]
        agent = self.agent if agent is None else agent
        if agent:
            cmd.append(f'agent="{agent}"')
        return cmd + ["--", "set", "bridge", bridge, "sflow=@sf"]

    def enable(self, bridge: str, agent: str | None = None) -> None:
        """Point ``bridge``'s sFlow agent at our collector (replacing any previous row).

        ``agent`` is the agent address (or interface) the datagrams carry; on one host give each
        bridge its own (e.g. 127.0.1.N, measured to work on OVS 3.1) so samples can be told apart.
        """
        self.run(self.enable_cmd(bridge, agent))

    def disable(self, bridge: str) -> None:
        """Remove sFlow from ``bridge`` (the row is garbage-collected)."""
        self.run(["clear", "bridge", bridge, "sflow"])

    def status(self, bridge: str) -> SflowConfig | None:
        """The bridge's sFlow row, or None when sFlow is off."""
        ref = self.run(["get", "bridge", bridge, "sflow"]).strip()
        if ref in ("", "[]"):
            return None
        out = self.run(["--format=json", "--columns=targets,sampling,polling,header,agent", "list", "sflow", ref])
        row = json.loads(out)["data"][0]
        targets = row[0][1] if isinstance(row[0], list) and row[0][0] == "set" else [row[0]]
        return SflowConfig(bridge, tuple(str(t) for t in targets), _int(row[1]), _int(row[2]), _int(row[3]),
                           _str(row[4]))


def _int(v: object) -> int:
    return int(v) if isinstance(v, int) else 0  # an empty optional column is ["set", []]


def _str(v: object) -> str:
    return v if isinstance(v, str) else ""


def bridges_by_dpid(runner: Runner = run_vsctl) -> dict[int, str]:
    """Local OVS bridges by datapath id (how the controller finds the bridge of a switch).

    Two bridges can carry the same datapath id: a lab left behind by a killed run, or a spare
    copy an operator keeps unconnected. The one whose OpenFlow controller connection is up is the
    switch we talk to, so it wins; among equals the first name in order (a fixed choice). Picking
    the stale one silently turned sFlow on where no traffic flows.
    """
    out = runner(["--format=json", "--columns=name,datapath_id,controller", "list", "bridge"])
    connected = _connected_controllers(runner)
    best: dict[int, tuple[bool, str]] = {}  # dpid -> (not connected, name): the least wins
    for name, dpid, controllers in json.loads(out)["data"]:
        if not (isinstance(dpid, str) and dpid):
            continue
        rank = (not any(ref in connected for ref in _uuids(controllers)), name)
        key = int(dpid, 16)
        if key not in best or rank < best[key]:
            best[key] = rank
    return {dpid: name for dpid, (_, name) in best.items()}


def _uuids(column: object) -> list[str]:
    """The row references of an OVSDB column in ``--format=json``: ``["uuid", u]`` or
    ``["set", [["uuid", u], ...]]``."""
    if isinstance(column, list) and len(column) == 2:
        if column[0] == "uuid":
            return [str(column[1])]
        if column[0] == "set":
            return [str(ref[1]) for ref in column[1] if isinstance(ref, list) and len(ref) == 2]
    return []


def _connected_controllers(runner: Runner) -> set[str]:
    out = runner(["--format=json", "--columns=_uuid,is_connected", "list", "controller"])
    return {str(ref[1]) for ref, up in json.loads(out)["data"] if up is True and isinstance(ref, list)}
