"""A lab session with several controllers: a private etcd, N ``mlte controller`` processes elected
through it, and a Mininet lab whose packet switches and OTS agents connect to every controller.

Each controller (``c1``, ``c2``, ...) has its own OpenFlow and API ports, its own log and state file
(in ``WORKDIR/cN/``) and the lab's one database (:attr:`shared_db`, a private PostgreSQL server, shared
as in a deployment: docs/operations.md).
:attr:`client` always talks to the current leader (:meth:`leader` finds it through each controller's
``GET /mastership``); :meth:`kill`, :meth:`freeze`, :meth:`thaw` and :meth:`restart` act on one
member by PID, for the failover lab.
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.controller.client import ControlApiError, ControllerClient, wait_until
from app.db.pg_server import postgres_server
from mininet_labs.session import LabSession, LabStartError, free_port
from mininet_labs.testbed import LabNet


@dataclass
class Member:
    """One controller of the lab."""

    name: str
    of_port: int
    api_port: int
    workdir: Path
    config_file: Path
    token_file: Path  # the lab's one control-API token (every member reads the same file)
    proc: subprocess.Popen | None = None
    frozen: bool = False

    @property
    def client(self) -> ControllerClient:
        return ControllerClient(port=self.api_port, timeout=5.0, token_file=str(self.token_file))

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class HaSession(LabSession):
    """``HaSession(spec, workdir, controllers=3, ttl=1.0)``: etcd + N controllers + the lab."""

    def __init__(self, spec: Any, workdir: str | Path, controllers: int = 3, ttl: float = 1.0,
                 **kwargs: Any) -> None:
        super().__init__(spec, workdir, **kwargs)
        if controllers < 1:
            raise ValueError("need at least one controller")
        self.ttl = ttl
        self.base_config = Path(self.config_file).read_text() if self.config_file else ""
        self.members = [Member(f"c{i + 1}", free_port(), free_port(), self.workdir / f"c{i + 1}",
                               self.workdir / f"c{i + 1}" / "mlte.toml", self.token_file) for i in range(controllers)]
        self.etcd: Any = None
        # one PostgreSQL database for every controller and the web service (a private server): with
        # SQLite a controller frozen mid-transaction holds the write lock, and no new leader can write
        self.shared_db = ""
        self._pg: contextlib.ExitStack | None = None

    # ---- life cycle ------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0, timings: dict[str, float] | None = None) -> HaSession:
        """etcd, PostgreSQL, the members, a leader, then the lab (``timings``: not recorded here)."""
        from app.ha.etcd_server import EtcdServer

        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            self._pg = contextlib.ExitStack()
            self.shared_db = self._pg.enter_context(postgres_server()).create_database("mlte")
            self.etcd = EtcdServer(data_dir=self.workdir / "etcd").start()
            for m in self.members:
                self._start_member(m)
            self.wait_leader(timeout=30)
            self.lab = LabNet(self.spec, prefix=self.prefix, controllers=[("127.0.0.1", m.of_port) for m in self.members],
                              delay=self.delay, shaping=self.shaping, agent_log_dir=str(self.workdir))
            self.lab.start()
            self.wait_connected(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def __enter__(self) -> HaSession:
        return self.start()

    def _start_member(self, m: Member) -> None:
        """Start one controller with this session's arguments, its own ports, logs and [ha] name."""
        m.workdir.mkdir(parents=True, exist_ok=True)
        m.config_file.write_text(f"{self.base_config}\n[ha]\netcd = [\"{self.etcd.endpoint}\"]\n"
                                 f"name = \"{m.name}\"\nttl = {self.ttl}\n")
        saved = (self.workdir, self.of_port, self.api_port, self.config_file, self.state_file,
                 self.controller_args, self.client)
        self.workdir, self.of_port, self.api_port = m.workdir, m.of_port, m.api_port
        self.config_file, self.state_file = str(m.config_file), str(m.workdir / "controller-state.json")
        self.controller_args = (*saved[5], "--db-url", self.shared_db)  # the last --db-url wins
        self.client = ControllerClient(port=m.api_port, token_file=str(self.token_file))
        try:
            self._start_controller_once(append_log=True)
            m.proc, m.frozen = self.controller, False
        finally:
            (self.workdir, self.of_port, self.api_port, self.config_file, self.state_file,
             self.controller_args, self.client) = saved
            self.controller = None

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            for m in self.members:
                self._end(m, signal.SIGTERM)
            if self.etcd is not None:
                self.etcd.close()
                self.etcd = None
            if self._pg is not None:
                self._pg.close()
                self._pg = None

    def _end(self, m: Member, sig: int) -> None:
        proc = m.proc
        if proc is None or proc.poll() is not None:
            return
        if m.frozen:
            os.kill(proc.pid, signal.SIGCONT)
            m.frozen = False
        proc.send_signal(sig)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    # ---- who leads -------------------------------------------------------------------------------
    def status(self, m: Member) -> dict[str, Any] | None:
        if not m.alive() or m.frozen:
            return None
        try:
            return m.client.request("GET", "/mastership", timeout=2.0)
        except ControlApiError:
            return None

    def leader(self) -> Member | None:
        """The one member that says it is master now (None while there is none)."""
        masters = [m for m in self.members if (st := self.status(m)) is not None and st.get("master")]
        return masters[0] if len(masters) == 1 else None

    def wait_leader(self, timeout: float = 30.0, exclude: Member | None = None, stable_s: float = 0.0) -> Member:
        """The leader (not ``exclude``) once there is one — and, with ``stable_s``, once the same member
        has led that long: on a loaded machine a new leader can lose its 1-s lease again at once and
        another take over (seen: deposed 0.3 s after its election); :attr:`client` then talks to it."""
        seen: dict[str, Any] = {"m": None, "since": 0.0}

        def found() -> Member | None:
            m = self.leader()
            if m is None or m is exclude:
                seen["m"] = None
                return None
            now = time.monotonic()
            if m is not seen["m"]:
                seen["m"], seen["since"] = m, now
            return m if now - seen["since"] >= stable_s else None

        try:
            m: Member = wait_until(found, timeout, "a leader", interval=0.05)
        except TimeoutError:
            raise LabStartError(f"no controller became leader within {timeout:g}s "
                                f"(logs: {self.workdir}/c*/controller.log)") from None
        self.client = m.client
        return m

    # ---- faults -----------------------------------------------------------------------------------
    def kill(self, m: Member) -> float:
        """SIGKILL one controller (a crash); returns when it happened (time.time())."""
        self._end(m, signal.SIGKILL)
        return time.time()

    def freeze(self, m: Member) -> float:
        """SIGSTOP one controller: its TCP sessions stay up, it answers nothing."""
        assert m.proc is not None
        os.kill(m.proc.pid, signal.SIGSTOP)
        m.frozen = True
        return time.time()

    def thaw(self, m: Member) -> float:
        assert m.proc is not None
        os.kill(m.proc.pid, signal.SIGCONT)
        m.frozen = False
        return time.time()

    def restart(self, m: Member) -> float:
        """Start a killed member again (same ports): it rejoins as a follower."""
        self._end(m, signal.SIGKILL)
        started = time.time()
        self._start_member(m)
        return started

    def controller_errors(self) -> str:
        """Every member's handler-exception log, each under its name ("" when nothing failed)."""
        out = []
        for m in self.members:
            p = m.workdir / "controller-errors.log"
            if p.exists() and p.read_text().strip():
                out.append(f"[{m.name}]\n{p.read_text()}")
        return "\n".join(out)
