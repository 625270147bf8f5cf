"""Open vSwitch must be running before Mininet builds a network: after a reboot (or in a container,
where apt does not start services) it is not, and Mininet then fails with a page of ovs-vsctl errors
and leaves the lab waiting. ``mlte lab`` starts it the way ``scripts/bootstrap.sh`` does."""
from __future__ import annotations

import subprocess
from collections.abc import Callable

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"


class OvsUnavailable(RuntimeError):
    """OVS is installed but could not be started (the message says why, in one line)."""


def ovs_running() -> bool:
    """Whether ovsdb-server answers (``ovs-vsctl show`` within 2 s)."""
    try:
        return subprocess.run(["ovs-vsctl", "--timeout=2", "show"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def ensure_ovs(log: Callable[[str], None] = print, ctl: str = OVS_CTL) -> bool:
    """Start OVS when it is not running; True when it had to be started. Raises OvsUnavailable."""
    if ovs_running():
        return False
    log("Open vSwitch is not running: starting it (ovs-ctl start)")
    try:
        proc = subprocess.run([ctl, "start", "--system-id=random"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise OvsUnavailable(f"could not start Open vSwitch with {ctl}: {exc}") from None
    if not ovs_running():
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise OvsUnavailable(f"Open vSwitch did not start ({ctl} exited {proc.returncode}: {last[0]})")
    return True
