"""A record of the labs built on this machine, so one killed outright is cleaned up by the next.

A lab run killed with SIGKILL (a test's timeout, a cut session) cannot sweep its bridges, and Open
vSwitch keeps them in its database across restarts and reboots. Left alone, such a bridge carries
the same datapath id as the next lab's switch of that name; a tool that finds a switch's bridge by
datapath id may then pick the dead one (the monitor once turned sFlow on there and never saw the
elephant). Every :class:`~mininet_labs.testbed.LabNet` writes a file naming its owner process and
what it builds, and the processes a lab starts (controllers, OTS agents, web servers) are noted with
:func:`track`; the next lab to start removes what dead owners left, bridges and interfaces by exact
name only, processes by PID and start time.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

REGISTRY_DIR = Path(os.environ.get("MLTE_LAB_REGISTRY", "/var/tmp/mlte-labs"))  # kept across reboots, as OVSDB is


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat), or None
    if there is no such process; with the PID it names one process even after PID reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def record(prefix: str, bridges: Iterable[str], nodes: Iterable[str], directory: Path | None = None) -> Path:
    """Note that this process is building a lab: its bridges and the node names its interfaces
    start with (``<node>-ethN``)."""
    d = REGISTRY_DIR if directory is None else directory
    d.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    entry = {"pid": pid, "start": _start_time(pid), "boot": _boot_id(), "prefix": prefix,
             "bridges": sorted(bridges), "nodes": sorted(nodes)}
    path = d / f"{prefix or '_'}-{pid}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entry))
    tmp.replace(path)
    return path


def forget(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def owner_alive(entry: dict) -> bool:
    """True while the process that recorded ``entry`` runs (same boot, same PID, same start time)."""
    if entry.get("boot") != _boot_id():
        return False
    return _start_time(int(entry["pid"])) == entry.get("start")


def track(pid: int, directory: Path | None = None) -> Path | None:
    """Note a process this one started for a lab, so it is stopped if this one is killed outright
    (its children outlive it: a SIGKILL runs no cleanup). None if it already exited."""
    d = REGISTRY_DIR if directory is None else directory
    start = _start_time(pid)
    if start is None:
        return None
    d.mkdir(parents=True, exist_ok=True)
    me = os.getpid()
    entry = {"pid": me, "start": _start_time(me), "boot": _boot_id(), "child": pid, "child_start": start}
    path = d / f"proc-{me}-{pid}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(entry))
    tmp.replace(path)
    return path


def _stop_child(entry: dict) -> str | None:
    """SIGTERM, then SIGKILL after 3 s, the tracked process if it still runs; its PID or None."""
    pid = int(entry["child"])
    if entry.get("boot") != _boot_id() or _start_time(pid) != entry.get("child_start"):
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline and _start_time(pid) == entry["child_start"]:
            time.sleep(0.05)
        if _start_time(pid) == entry["child_start"]:
            os.kill(pid, signal.SIGKILL)
    return f"pid {pid}"


def sweep_dead(directory: Path | None = None) -> list[str]:
    """Stop the processes and delete the bridges and interfaces of labs whose owner is gone (processes
    first: an OTS agent holds its bridge); what was removed. Notes of exited processes are dropped."""
    d = REGISTRY_DIR if directory is None else directory
    removed: list[str] = []
    if not d.is_dir():
        return removed
    entries: list[tuple[Path, dict]] = []
    for path in sorted(d.glob("*.json")):
        try:
            entries.append((path, json.loads(path.read_text())))
        except (OSError, ValueError):
            forget(path)  # half-written by a killed process: nothing to go on
    for path, entry in entries:
        if "child" not in entry:
            continue
        if not owner_alive(entry):
            stopped = _stop_child(entry)
            removed += [stopped] if stopped else []
            forget(path)
        elif _start_time(int(entry["child"])) != entry.get("child_start"):
            forget(path)  # exited while its owner goes on
    for path, entry in entries:
        if "child" in entry or owner_alive(entry):
            continue
        removed += remove(entry.get("bridges", []), entry.get("nodes", []))
        forget(path)
    return removed


def remove(bridges: Iterable[str], nodes: Iterable[str]) -> list[str]:
    """Delete these bridges and every ``<node>-ethN`` interface of these nodes (by exact name only):
    the names removed."""
    removed = []
    present = set(subprocess.run(["ovs-vsctl", "--timeout=10", "list-br"], capture_output=True,
                                 text=True).stdout.split())
    for br in bridges:
        if br in present:
            subprocess.run(["ovs-vsctl", "--timeout=10", "--if-exists", "del-br", br], capture_output=True)
            removed.append(br)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    ours = set(nodes)
    for line in links.splitlines():
        parts = line.split(":", 2)
        if len(parts) < 3:
            continue
        ifname = parts[1].strip().split("@")[0]
        if "-eth" in ifname and ifname.rsplit("-eth", 1)[0] in ours:
            subprocess.run(["ip", "link", "del", ifname], capture_output=True)
            removed.append(ifname)
    return removed


def same_datapath_ids(bridges: dict[str, int]) -> list[tuple[str, str]]:
    """Other bridges on this switch daemon that carry one of ``bridges``' datapath ids (name → dpid):
    pairs (ours, theirs). A tool that finds bridges by datapath id cannot tell them apart."""
    out = subprocess.run(["ovs-vsctl", "--timeout=10", "--format=json", "--columns=name,datapath_id", "list",
                          "bridge"], capture_output=True, text=True).stdout
    try:
        rows = json.loads(out)["data"] if out else []
    except ValueError:
        return []
    by_dpid = {dpid: name for name, dpid in bridges.items()}
    clashes = []
    for name, dpid in rows:
        if isinstance(dpid, str) and dpid and name not in bridges and int(dpid, 16) in by_dpid:
            clashes.append((by_dpid[int(dpid, 16)], name))
    return sorted(clashes)
