"""Mininet networks built from a :class:`~topology.spec.LabSpec` (the Fig. 2 testbed and generated labs).

- Packet switches: OVS userspace bridges (``datapath='user'``), OpenFlow 1.3, connected to the mlte
  controller.
- OTS nodes: OVS userspace bridges each owned by one virtual OTS agent process
  (``python -m ots_virtual``), started when the switch starts and stopped (by PID) when it stops;
  the agent speaks OpenFlow 1.0 to the controller.
- Links: TCLink with HTB shaping at the spec's rate (no delay/loss: there is no netem here).
- Hosts: TCP checksum offload off (``ethtool -K <intf> tx off``), or TCP between hosts fails.

Also a ``mn`` custom file::

    sudo .venv/bin/python /usr/bin/mn --custom mininet_labs/testbed.py --topo mlte \\
        --controller remote,ip=127.0.0.1,port=6653

(plain ``sudo mn --custom ...`` works too: the file puts the project and its .venv on sys.path).
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


def _bootstrap_path() -> Path:
    """When ``mn`` execs this file, make the project and its venv importable."""
    here = Path(inspect.currentframe().f_code.co_filename).resolve()  # type: ignore[union-attr]
    root = here.parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    venv_site = root / ".venv" / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    if venv_site.is_dir() and str(venv_site) not in sys.path:
        sys.path.append(str(venv_site))
    return root


PROJECT_ROOT = _bootstrap_path()

from mininet.link import TCLink  # noqa: E402
from mininet.log import lg  # noqa: E402
from mininet.net import Mininet  # noqa: E402
from mininet.node import Host, Node, OVSSwitch, RemoteController  # noqa: E402
from mininet.topo import Topo  # noqa: E402

from mininet_labs import lab_registry  # noqa: E402
from topology.spec import LabSpec, fig2_testbed  # noqa: E402


class _QuietHtb:
    """Drop the kernel's harmless "quantum of class ... is big" HTB warning (rates > ~16 Mbit/s)."""

    @staticmethod
    def filter(record) -> bool:
        return "quantum of class" not in str(record.getMessage())


lg.addFilter(_QuietHtb())


def agent_python() -> str:
    """The project venv's Python (has os_ken) when there is one, else this interpreter.

    Under ``mn`` this process is Debian's python3 with the venv appended to ``sys.path``; a child
    started with it would not see the venv, so the venv interpreter is preferred.
    """
    venv = PROJECT_ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


class OffloadOffHost(Host):
    """A host with TX checksum offload off on its interfaces (else TCP over veth + OVS fails)."""

    def config(self, **params):
        result = super().config(**params)
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd("ethtool -K", intf.name, "tx off >/dev/null 2>&1")
        return result


class PacketSwitch(OVSSwitch):
    """OpenFlow 1.3 packet switch on the userspace datapath."""

    def __init__(self, name: str, **params):
        params.setdefault("datapath", "user")
        params.setdefault("protocols", "OpenFlow13")
        params.setdefault("failMode", "secure")
        super().__init__(name, **params)


class OtsSwitch(OVSSwitch):
    """An OVS bridge driven by a virtual OTS agent process (OpenFlow 1.0 towards the controller).

    Extra params: ``ots_ports`` ("1:ODU2,2:ODU2,6:ODU0"), ``delay_min``/``delay_max`` (s),
    ``unit_mbps``, ``agent_log`` (file, default: discard).
    """

    def __init__(self, name: str, ots_ports: str = "", delay_min: float = 0.150, delay_max: float = 0.220,
                 unit_mbps: float = 1.0, agent_log: str = "", **params):
        params.setdefault("datapath", "user")
        params.setdefault("protocols", "OpenFlow10")
        params.setdefault("failMode", "secure")
        super().__init__(name, **params)
        self.ots_ports = ots_ports
        self.delay = (float(delay_min), float(delay_max))
        self.unit_mbps = float(unit_mbps)
        self.agent_log = agent_log
        self.agent: subprocess.Popen | None = None
        self.controller_targets = ["127.0.0.1:6653"]  # HOST:PORT the agent dials (every controller of the lab)
        self.agent_tls: TlsFiles | None = None  # set by LabNet(tls=...): the agent dials the controllers over TLS

    def start(self, controllers):
        super().start([])  # the agent, not the controller, is this bridge's OpenFlow peer
        targets = [f"{c.IP()}:{c.port}" for c in controllers if hasattr(c, "port")]
        if targets:
            self.controller_targets = targets
        self.start_agent()

    def start_agent(self) -> None:
        """Start this switch's agent process (again, e.g. after :meth:`stop_agent` in a fault lab)."""
        if self.agent is not None and self.agent.poll() is None:
            raise RuntimeError(f"the OTS agent of {self.name} is already running (pid {self.agent.pid})")
        cmd = [agent_python(), "-m", "ots_virtual", "--bridge", self.name, "--dpid", f"0x{self.dpid}",
               "--ports", self.ots_ports,
               *[a for t in self.controller_targets for a in ("--controller", ("ssl:" if self.agent_tls else "") + t)],
               "--delay-min", str(self.delay[0]),
               "--delay-max", str(self.delay[1]), "--unit-mbps", str(self.unit_mbps)]
        if self.agent_log:
            cmd += ["--log", self.agent_log]
        if self.agent_tls is not None:
            cmd += agent_tls_args(self.agent_tls)
        env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
        # stderr (e.g. a one-line argument error, before logging starts) goes to the agent's log too
        err = open(self.agent_log, "ab") if self.agent_log else subprocess.DEVNULL
        try:
            self.agent = subprocess.Popen(cmd, cwd=str(PROJECT_ROOT), env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=err)
            lab_registry.track(self.agent.pid)  # stopped by the next lab if this process is killed outright
        finally:
            if self.agent_log:
                err.close()

    def stop_agent(self, timeout: float = 5.0, kill: bool = False) -> None:
        """Stop this switch's agent by PID (SIGTERM, then SIGKILL; ``kill``: SIGKILL at once, a crash)."""
        proc, self.agent = self.agent, None
        if proc is None or proc.poll() is not None:
            return
        if kill:
            proc.kill()
        else:
            proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def stop(self, deleteIntfs=True):
        self.stop_agent()
        super().stop(deleteIntfs)

    @classmethod
    def batchShutdown(cls, switches, **kwargs):  # noqa: N802 (Mininet's name)
        """``net.stop()`` shuts OVS switches down in a batch without calling ``stop()``: stop the agents first."""
        for sw in switches:
            sw.stop_agent()
        return super().batchShutdown(switches, **kwargs)


# ---- OpenFlow over TLS (issue 24; docs/operations.md "OpenFlow over TLS") ---------------------------------
@dataclass(frozen=True)
class TlsFiles:
    """The PEM files a switch or an OTS agent shows the controller (``mlte pki init``'s switch-*)."""

    key: str
    cert: str
    ca: str


#: The OTS agent's TLS client options (key, certificate, CA): ``python -m ots_virtual --help``
AGENT_TLS_OPTIONS = ("--ssl-key", "--ssl-cert", "--ssl-ca")


def agent_tls_args(files: TlsFiles) -> list[str]:
    key, cert, ca = AGENT_TLS_OPTIONS
    return [key, files.key, cert, files.cert, ca, files.ca]


def _ovs_ssl() -> TlsFiles | None:
    """Open vSwitch's global SSL configuration (``ovs-vsctl get-ssl``), None when there is none."""
    out = subprocess.run(["ovs-vsctl", "--timeout=10", "get-ssl"], capture_output=True, text=True,
                         check=True).stdout
    fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    if not fields.get("Private key"):
        return None
    return TlsFiles(fields["Private key"], fields["Certificate"], fields["CA Certificate"])


def set_ovs_ssl(files: TlsFiles | None) -> None:
    """Set (None: delete) the key, certificate and CA every OVS bridge uses for ``ssl:`` controllers.
    It is global to the OVS instance: :class:`LabNet` puts back what was there when it stops."""
    cmd = ["del-ssl"] if files is None else ["set-ssl", files.key, files.cert, files.ca]
    subprocess.run(["ovs-vsctl", "--timeout=10", *cmd], capture_output=True, text=True, check=True)


class ExternalController(RemoteController):
    """Our controller, already started and answering its API (``LabSession`` waits for that).

    Mininet's ``RemoteController`` probes the port with ``telnet`` and decodes the reply as UTF-8;
    when the controller's binary OpenFlow HELLO arrives before telnet exits, its random xid is often
    not valid UTF-8 and the lab build failed with a UnicodeDecodeError, at random.
    """

    def checkListening(self) -> None:  # noqa: N802 (Mininet's name)
        pass

    def stop(self, *args, **kwargs):
        """End the node's shell: ``RemoteController.stop`` does nothing, and every lab left a
        ``bash ... mininet:<prefix>c0`` process behind (our controller process is the session's,
        stopped by PID)."""
        Node.stop(self, *args, **kwargs)


def ots_port_arg(ports: dict[int, str]) -> str:
    return ",".join(f"{p}:{g}" for p, g in sorted(ports.items()))


class SpecTopo(Topo):
    """A Mininet topology from a LabSpec; node names get ``prefix`` (unique names for tests)."""

    def build(self, spec: LabSpec | None = None, prefix: str = "", delay: tuple[float, float] = (0.150, 0.220),
              shaping: bool = True, agent_log_dir: str = "") -> None:
        spec = spec or fig2_testbed()
        n = lambda name: prefix + name  # noqa: E731
        for s in spec.switches:
            self.addSwitch(n(s.name), cls=PacketSwitch, dpid=f"{s.dpid:016x}")
        for o in spec.ots:
            log = os.path.join(agent_log_dir, f"ots-{o.name}.log") if agent_log_dir else ""
            self.addSwitch(n(o.name), cls=OtsSwitch, dpid=f"{o.dpid:016x}", ots_ports=ots_port_arg(o.ports),
                           delay_min=delay[0], delay_max=delay[1], unit_mbps=spec.unit_mbps, agent_log=log)
        for h in spec.hosts:
            self.addHost(n(h.name), cls=OffloadOffHost, ip=f"{h.ip}/8", mac=h.mac)
        for link in spec.links:
            opts = {"cls": TCLink, "bw": link.mbps} if shaping else {}
            self.addLink(n(link.a), n(link.b), port1=link.a_port, port2=link.b_port, **opts)


class LabNet:
    """A running Mininet lab from a spec, attached to a controller; a context manager.

    ``stop()`` stops the OTS agents (by PID), the Mininet network, and deletes any bridge or
    interface with one of this lab's names that is still there.
    """

    def __init__(self, spec: LabSpec, prefix: str = "", controller: tuple[str, int] = ("127.0.0.1", 6653),
                 delay: tuple[float, float] = (0.150, 0.220), shaping: bool = True, agent_log_dir: str = "",
                 controllers: list[tuple[str, int]] | None = None, tls: TlsFiles | None = None) -> None:
        self.spec = spec
        self.prefix = prefix
        self.controller = controller
        # several controllers (docs/operations.md): every packet switch and OTS agent connects to each
        self.controllers = list(controllers) if controllers else [controller]
        self.delay = delay
        self.shaping = shaping
        self.agent_log_dir = agent_log_dir
        self.tls = tls  # the bridges (OVS set-ssl) and the agents dial the controller over TLS with these files
        self._saved_ssl: list[TlsFiles | None] = []  # OVS's SSL set-up before start(), put back by stop()
        self.net: Mininet | None = None
        self._record: Path | None = None  # this lab's entry in lab_registry while it is built

    # ---- names -----------------------------------------------------------------------------------
    def node(self, name: str):
        assert self.net is not None, "lab not started"
        return self.net.get(self.prefix + name)

    def bridge(self, name: str) -> str:
        return self.prefix + name

    # ---- life cycle ------------------------------------------------------------------------------
    def start(self) -> LabNet:
        topo = SpecTopo(spec=self.spec, prefix=self.prefix, delay=self.delay, shaping=self.shaping,
                        agent_log_dir=self.agent_log_dir)
        self.net = Mininet(topo=topo, controller=None, build=False, autoSetMacs=False, autoStaticArp=False,
                           waitConnected=False)
        for i, (host, port) in enumerate(self.controllers):
            self.net.addController(ExternalController(f"{self.prefix}c{i}", ip=host, port=port,
                                                      protocol="ssl" if self.tls else "tcp"))
        swept = lab_registry.sweep_dead()  # what labs killed outright left behind (docs/labs.md)
        if swept:
            print(f"removed {len(swept)} leftovers of killed labs: {' '.join(swept[:12])}", file=sys.stderr)
        self._sweep()  # leftovers with exactly our names (a crashed earlier run) would break the build
        self._record = lab_registry.record(self.prefix, [self.bridge(n) for n in self.spec.dpid_names().values()],
                                           [self.prefix + n for n in node_names(self.spec)])
        for ours, theirs in lab_registry.same_datapath_ids({self.bridge(n): d for d, n in
                                                            self.spec.dpid_names().items()}):
            print(f"warning: bridge {theirs} carries the datapath id of this lab's {ours} (a leftover? "
                  f"ovs-vsctl del-br {theirs})", file=sys.stderr)
        try:
            if self.tls is not None:
                self._saved_ssl = [_ovs_ssl()]
                set_ovs_ssl(self.tls)
            self.net.build()
            for o in self.spec.ots if self.tls is not None else ():
                self.net.get(self.prefix + o.name).agent_tls = self.tls
            self.net.start()
        except BaseException:
            self.stop()
            raise
        return self

    def agents_alive(self) -> dict[str, bool]:
        assert self.net is not None
        return {o.name: (sw := self.net.get(self.prefix + o.name)).agent is not None and sw.agent.poll() is None
                for o in self.spec.ots}

    def stop(self) -> None:
        """Stop agents, the network, then sweep; each step runs even if an earlier one failed."""
        net, self.net = self.net, None
        if net is not None:
            for o in self.spec.ots:
                try:
                    net.get(self.prefix + o.name).stop_agent()
                except Exception:  # noqa: BLE001 - a dead agent must not stop the cleanup
                    pass
            try:
                net.stop()
            except Exception:  # noqa: BLE001 - keep cleaning up below
                pass
            except BaseException:  # Ctrl-C while Mininet stops: sweep what is ours first, then stop
                self._sweep()
                raise
        self._sweep()
        if self._record is not None:
            lab_registry.forget(self._record)
            self._record = None
        if self._saved_ssl:
            set_ovs_ssl(self._saved_ssl.pop())

    def _sweep(self) -> None:
        """Delete this lab's bridges and interfaces if anything is left (by exact name only)."""
        lab_registry.remove([self.prefix + name for name in self.spec.dpid_names().values()],
                            [self.prefix + n for n in node_names(self.spec)])

    def __enter__(self) -> LabNet:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def node_names(spec: LabSpec) -> list[str]:
    """Every Mininet node of a lab (switches, OTSes, hosts): interface names start with these."""
    return [s.name for s in spec.switches] + [o.name for o in spec.ots] + [h.name for h in spec.hosts]


def ping(src, dst_ip: str, count: int = 1, wait: float = 1.0) -> bool:
    """One ping from Mininet host ``src``; True if a reply came back."""
    out = src.cmd(f"ping -c {count} -W {wait} -n {dst_ip}")
    return " 0% packet loss" in out or f"{count} received" in out


def wait_ping(src, dst_ip: str, timeout: float) -> bool:
    """Ping until one succeeds or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ping(src, dst_ip, wait=0.5):
            return True
    return False


class MlteTopo(SpecTopo):
    """``--topo mlte``: the Fig. 2 testbed (``--topo mlte,unit_mbps=2`` scales it)."""

    def build(self, unit_mbps: float = 1.0, **kwargs) -> None:  # type: ignore[override]
        super().build(spec=fig2_testbed(float(unit_mbps)), **kwargs)


topos = {"mlte": MlteTopo}
