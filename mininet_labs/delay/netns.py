"""Run commands in a network namespace named by ``ip netns`` or by a process in it (a Mininet host).

Every command has a timeout and fails with a one-line :class:`NetError` naming what it ran.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass


class NetError(RuntimeError):
    """An ``ip``/``tc``/``ethtool`` command failed or hung (one line: the command and its error)."""

    user_error = True


@dataclass(frozen=True)
class Netns:
    """Where interfaces live: ``name`` (``ip netns``), ``pid`` (a Mininet host's ``node.pid``) or neither (ours)."""

    name: str | None = None
    pid: int | None = None

    def prefix(self) -> list[str]:
        """The argv prefix that runs a command inside this namespace (``ip netns exec`` / ``nsenter``)."""
        if self.name is not None:
            return ["ip", "netns", "exec", self.name]
        if self.pid is not None:
            return ["nsenter", "-t", str(self.pid), "-n"]
        return []

    def target(self) -> str:
        """What ``ip link set DEV netns X`` takes to move an interface here."""
        if self.name is not None:
            return self.name
        return str(self.pid if self.pid is not None else os.getpid())

    def run(self, *argv: str, timeout: float = 10.0, check: bool = True) -> subprocess.CompletedProcess:
        """Run ``argv`` in the namespace; raise :class:`NetError` (one line) if it fails and ``check``."""
        cmd = [*self.prefix(), *argv]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise NetError(f"timed out after {timeout:g}s: {' '.join(cmd)}") from None
        if check and proc.returncode != 0:
            err = (proc.stderr.strip() or proc.stdout.strip() or f"exit {proc.returncode}").splitlines()[0]
            raise NetError(f"{' '.join(argv)}: {err}")
        return proc

    def __str__(self) -> str:
        return self.name or (f"pid {self.pid}" if self.pid is not None else "root")


ROOT = Netns()
