"""A lab session: our controller process + a Mininet lab from a spec, started and cleaned up together.

Used by ``mlte lab`` and by the integration tests (one session per test module). Everything it
starts is stopped by PID; bridges and interfaces are deleted by their exact (prefixed) names.
Hold :func:`mininet_labs.netlock.net_lock` (the CLI does) while a session runs.
"""
from __future__ import annotations

import json
import os
import random
import signal
import socket
import string
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from app.controller.client import ControllerClient, wait_until
from mininet_labs import lab_registry
from mininet_labs.circuits import directed
from mininet_labs.testbed import PROJECT_ROOT, LabNet, TlsFiles
from topology.spec import LabSpec


class LabStartError(RuntimeError):
    """The controller or an OTS agent exited, or never answered (a one-line reason; the logs have the rest)."""

    user_error = True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_prefix() -> str:
    """Two characters that keep node, bridge and interface names unique and short (one no
    interface or bridge on the machine starts with, when there is such a one)."""
    names = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names += subprocess.run(["ovs-vsctl", "--timeout=10", "list-br"], capture_output=True, text=True).stdout
    taken = {w.split(":", 2)[1].strip()[:2] for w in names.splitlines() if w.count(":") >= 2}
    taken |= {line[:2] for line in names.splitlines()}
    for _ in range(50):
        prefix = random.choice(string.ascii_lowercase) + random.choice(string.digits)
        if prefix not in taken:
            return prefix
    return prefix


class LabSession:
    """Controller (subprocess) + Mininet lab; a context manager that always cleans up."""

    def __init__(self, spec: LabSpec, workdir: str | Path, prefix: str | None = None,
                 delay: tuple[float, float] = (0.150, 0.220), shaping: bool = True,
                 static_file: str | None = None, of_port: int | None = None, api_port: int | None = None,
                 extra_apps: tuple[str, ...] = (), controller_args: tuple[str, ...] = (),
                 config_file: str | None = None, state_file: str | None = None, tls: bool = False) -> None:
        self.spec = spec
        self.workdir = Path(workdir).resolve()  # the controller runs in the project root: absolute paths only
        self.prefix = random_prefix() if prefix is None else prefix
        self.delay = delay
        self.shaping = shaping
        self.static_file = str(Path(static_file).resolve()) if static_file else None
        self.of_port = of_port or free_port()
        self.api_port = api_port or free_port()
        self.extra_apps = extra_apps  # more os-ken app modules for the controller (e.g. a monitor)
        self.controller_args = controller_args  # more `mlte controller` arguments
        self.config_file = str(Path(config_file).resolve()) if config_file else None  # `mlte -c FILE` for the controller (e.g. [controller] lldp_interval)
        # `mlte controller --state-file`: what the optical scan learnt survives a controller restart
        # (default: controller-state.json in the workdir; "" = none)
        self.state_file = str(Path(state_file).resolve()) if state_file else (
            None if state_file == "" else str(self.workdir / "controller-state.json"))
        # the control API's credential: the controller makes it (0600) in the workdir on its first start
        self.token_file = self.workdir / "api-token"
        self.client = ControllerClient(port=self.api_port, token_file=str(self.token_file))
        self.controller: subprocess.Popen | None = None
        self.lab: LabNet | None = None
        # OpenFlow over TLS: a CA and certificates in <workdir>/pki (made once), the controller TLS-only
        self.tls_dir: Path | None = self.workdir / "pki" if tls else None

    # ---- life cycle ------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0, timings: dict[str, float] | None = None) -> LabSession:
        """Controller, then the lab, then every datapath connected; ``timings`` (if given) gets the
        seconds each phase took: ``controller_s``, ``lab_build_s`` (Mininet, OVS bridges, OTS agents),
        ``connect_s`` (from the lab built to every datapath known to the controller)."""
        marks = [time.monotonic()]
        try:
            self.switch_tls()  # the CA before the controller, which loads it
            self._start_controller()
            marks.append(time.monotonic())
            self.lab = LabNet(self.spec, prefix=self.prefix, controller=("127.0.0.1", self.of_port),
                              delay=self.delay, shaping=self.shaping, agent_log_dir=str(self.workdir),
                              tls=self.switch_tls())
            self.lab.start()
            marks.append(time.monotonic())
            self.wait_connected(timeout)
            marks.append(time.monotonic())
            if timings is not None:
                timings.update({k: round(b - a, 2) for k, (a, b) in
                                zip(("controller_s", "lab_build_s", "connect_s"), zip(marks, marks[1:], strict=False), strict=True)})
        except BaseException:
            self.stop()
            raise
        return self

    def _start_controller(self, attempts: int = 3) -> None:
        """Start the controller; if a free port was taken meanwhile (a race), retry on new ports."""
        for attempt in range(attempts):
            try:
                return self._start_controller_once()
            except LabStartError as exc:
                if "is not available" not in str(exc) or attempt == attempts - 1:
                    raise
                self.of_port, self.api_port = free_port(), free_port()
                self.client = ControllerClient(port=self.api_port, token_file=str(self.token_file))

    def _log_tail(self, name: str, lines: int = 15) -> str:
        p = self.workdir / name
        return "\n".join(p.read_text(errors="replace").splitlines()[-lines:]) if p.exists() else ""

    def _start_controller_once(self, append_log: bool = False) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        names = self.workdir / "names.json"
        # datapaths by dpid, hosts by MAC: the controller's graph then uses the spec's node ids
        names.write_text(json.dumps({**{hex(k): v for k, v in self.spec.dpid_names().items()},
                                     **{h.mac: h.name for h in self.spec.hosts}}))
        cmd = [sys.executable, "-m", "app.cli.main", *(["-c", str(self.config_file)] if self.config_file else []),
               "controller", "--of-port", str(self.of_port),
               "--api-port", str(self.api_port), "--names", str(names),
               "--db-url", f"sqlite:///{self.workdir / 'capabilities.db'}",
               "--log-file", str(self.workdir / "controller-errors.log"),
               "--api-token-file", str(self.token_file)]
        if self.tls_dir is not None:
            cmd += ["--tls-dir", str(self.tls_dir)]
        if self.static_file:
            cmd += ["--static-file", str(self.static_file)]
        if self.state_file:
            cmd += ["--state-file", self.state_file]
        for mod in self.extra_apps:
            cmd += ["--app", mod]
        cmd += list(self.controller_args)
        log = open(self.workdir / "controller.log", "a" if append_log else "w")
        env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
        self.controller = subprocess.Popen(cmd, cwd=str(PROJECT_ROOT), env=env, stdin=subprocess.DEVNULL,
                                           stdout=log, stderr=subprocess.STDOUT)
        log.close()
        lab_registry.track(self.controller.pid)  # stopped by the next lab if this process is killed outright
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.controller.poll() is not None:
                last = self._log_tail("controller.log", 1).strip() or "no output"
                raise LabStartError(f"controller exited with {self.controller.returncode}: {last} "
                                           f"(log: {self.workdir / 'controller.log'})")
            if self.client._try_health():
                return
            time.sleep(0.1)
        raise LabStartError(f"controller API did not come up within 30 s (log: {self.workdir / 'controller.log'})")

    def switch_tls(self) -> TlsFiles | None:
        """The switches' (and agents') TLS files, making the lab's CA the first time (``mlte pki init``)."""
        if self.tls_dir is None:
            return None
        from app import pki

        if not (self.tls_dir / pki.CA_CERT).exists():
            pki.init(self.tls_dir)
        sw = pki.cert_paths(self.tls_dir, pki.SWITCH)
        return TlsFiles(key=str(sw.key), cert=str(sw.cert), ca=str(self.tls_dir / pki.CA_CERT))

    def restart_controller(self, kill: bool = True) -> float:
        """Stop the controller — SIGKILL (a crash: no goodbye to the switches) or SIGTERM — and start
        it again on the same ports with the same arguments; return the time.time() it was started at.
        The switches and OTS agents keep running and reconnect by themselves."""
        proc, self.controller = self.controller, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        started = time.time()
        self._start_controller_once(append_log=True)
        return started

    def wait_connected(self, timeout: float = 60.0) -> list[dict]:
        """Wait until every switch and OTS of the spec is connected (OTS capabilities known)."""
        want = set(self.spec.dpid_names().values())

        def ready() -> list[dict] | None:
            dead = [name for name, alive in (self.lab.agents_alive() if self.lab else {}).items() if not alive]
            if dead:  # fail now, not after the timeout
                raise LabStartError(f"OTS agent(s) {', '.join(dead)} exited (logs: {self.workdir}/ots-<name>.log)")
            sws = self.client.switches()
            have = {s["name"] for s in sws if s["kind"] == "packet" or s["capabilities"]}
            return sws if want <= have else None

        return wait_until(ready, timeout, f"{len(want)} datapaths to connect")

    def expected_links(self) -> set[tuple[str, int, str, int]]:
        """Directed packet links the spec's copper must produce in LLDP."""
        return directed([(link.a, link.a_port, link.b, link.b_port) for link in self.spec.links_of_kind("packet")])

    def seen_links(self) -> set[tuple[str, int, str, int]]:
        return {(x["src"]["node"], x["src"]["port"], x["dst"]["node"], x["dst"]["port"]) for x in self.client.links()}

    def wait_links(self, expected: set[tuple[str, int, str, int]] | None = None, timeout: float = 30.0) -> None:
        want = self.expected_links() if expected is None else expected
        wait_until(lambda: want <= self.seen_links(), timeout, f"{len(want)} LLDP links")

    def stop(self) -> None:
        lab, self.lab = self.lab, None
        try:
            if lab is not None:
                lab.stop()
        finally:
            proc, self.controller = self.controller, None
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)

    def controller_errors(self) -> str:
        """Contents of the controller's handler-exception log ("" when nothing failed)."""
        p = self.workdir / "controller-errors.log"
        return p.read_text() if p.exists() else ""

    def __enter__(self) -> LabSession:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
