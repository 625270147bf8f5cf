"""A threaded UDP sFlow v5 collector: decodes datagrams, keeps flow-rate estimates and counters."""
from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

from monitor.sflow.decoder import SflowDecoder
from monitor.sflow.estimator import FlowRate, FlowRateEstimator
from monitor.sflow.records import Datagram, IfCounters

log = logging.getLogger(__name__)


class SflowCollector:
    """Listen on UDP ``host:port`` (port 0 = any free port, see :attr:`port` after :meth:`start`).

    The receive thread only decodes and records; readers call :meth:`flow_rates` /
    :meth:`counters` from their own thread. ``clock`` supplies ``now`` for received datagrams.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 6343, window: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 on_datagram: Callable[[Datagram, float], None] | None = None) -> None:
        self.host, self.port = host, port
        self.clock = clock
        self.decoder = SflowDecoder()
        self.estimator = FlowRateEstimator(window)
        self.on_datagram = on_datagram
        self.flow_samples = 0
        self.counter_samples = 0
        self.agents: set[str] = set()
        self._counters: dict[tuple[str, int], tuple[float, IfCounters]] = {}
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> SflowCollector:
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((self.host, self.port))
        sock.settimeout(0.2)
        self.port = sock.getsockname()[1]
        self._sock = sock
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"sflow-collector-{self.port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        if self._sock is not None:
            self._sock.close()
        self._sock = self._thread = None

    def __enter__(self) -> SflowCollector:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                data = self._sock.recv(65535)
            except TimeoutError:
                continue
            except OSError:
                break
            self.feed(data, self.clock())

    # -- processing ------------------------------------------------------------------------
    def feed(self, data: bytes, now: float) -> Datagram | None:
        """Decode and record one datagram (the receive thread calls this; tests may too)."""
        dg = self.decoder.decode(data)
        if dg is None:
            return None
        with self._lock:
            self.agents.add(dg.agent)
            self.flow_samples += len(dg.flow_samples)
            self.counter_samples += len(dg.counter_samples)
            for cs in dg.counter_samples:
                for ifc in cs.interfaces:
                    self._counters[(dg.agent, ifc.if_index)] = (now, ifc)
        for fs in dg.flow_samples:
            self.estimator.add(fs, now)
        if self.on_datagram is not None:
            try:
                self.on_datagram(dg, now)
            except Exception:  # a consumer bug must not kill the receive thread
                log.exception("sFlow on_datagram callback failed")
        return dg

    def flow_rates(self, now: float | None = None, agents: set[str] | None = None) -> list[FlowRate]:
        return self.estimator.rates(self.clock() if now is None else now, agents)

    def counters(self) -> dict[tuple[str, int], tuple[float, IfCounters]]:
        """Latest generic interface counters per (agent, ifIndex), with the time they arrived."""
        with self._lock:
            return dict(self._counters)

    def stats(self) -> dict[str, object]:
        with self._lock:
            base = {"port": self.port, "flow_samples": self.flow_samples,
                    "counter_samples": self.counter_samples, "agents": sorted(self.agents)}
        base.update(self.decoder.stats())
        return base
