"""What ``GET /metrics`` reads at scrape time from the objects that already keep it (plain code).

A ``prometheus_client`` custom collector: each scrape asks the network view, the southbound's
counters, the services table, the database writer, the handler failures and the mastership for their
current figures and turns them into metric families. Nothing here counts anything itself, so no
figure can drift from ``GET /health``, ``GET /switches`` or ``GET /mastership``. It runs on the
controller's hub like every API handler, so it sees the view between two handlers, never half-way.
"""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from app.controller import db_writer, guard, services
from app.controller.lit_circuits import lit_circuits
from app.controller.mastership import Mastership
from app.controller.model import OTS, PACKET
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import OpenFlowSouthbound

LOG = logging.getLogger("mlte.controller.metrics")
#: graph edge kinds reported as links, by layer (an XCON is counted as an XCON, not a link)
LINK_LAYERS = ("packet", "optical", "adaptation", "access")


def owner_kind(owner: str) -> str:
    """``reservation:12`` -> ``reservation``; the kind of whoever holds reserved ports."""
    return owner.split(":", 1)[0] if ":" in owner else "other"


class NetworkCollector:
    """Metric families read off the controller's objects (see the module docstring)."""

    def __init__(self, view: NetworkView, southbound: OpenFlowSouthbound, mastership: Mastership | None = None,
                 *, writer: Callable[[], db_writer.DbWriter | None] = db_writer.current,
                 service_health: Callable[[], dict[str, dict[str, Any]]] = services.health,
                 failures: list[str] | None = None) -> None:
        self.view, self.southbound, self.mastership = view, southbound, mastership
        self.writer, self.service_health = writer, service_health
        self.failures = guard.failures if failures is None else failures
        self._graph_cache: tuple[int, Counter[str], int, int] | None = None
        self._graph_failed: int | None = None  # the view version whose graph failed (logged once)

    def describe(self) -> list[Metric]:
        return []  # families are only known at scrape time (labels come from the network)

    def collect(self) -> Iterator[Metric]:
        yield from self._network()
        yield from self._openflow()
        yield from self._health()
        yield from self._db()
        yield from self._mastership()

    # ---- the network view --------------------------------------------------------------------------
    def _network(self) -> Iterator[Metric]:
        view = self.view
        switches = GaugeMetricFamily("mlte_switches", "Connected switches, by kind (packet, ots)", labels=["kind"])
        ports = GaugeMetricFamily("mlte_ports", "Ports of connected switches, by switch kind and state (up, down)",
                                  labels=["kind", "state"])
        for kind in (PACKET, OTS):
            of_kind = view.of_kind(kind)
            switches.add_metric([kind], len(of_kind))
            up = sum(p.up for sw in of_kind for p in sw.ports.values())
            total = sum(len(sw.ports) for sw in of_kind)
            ports.add_metric([kind, "up"], up)
            ports.add_metric([kind, "down"], total - up)
        yield switches
        yield ports
        yield GaugeMetricFamily("mlte_hosts", "Hosts learnt at edge ports", value=len(view.hosts))

        held = view.reservations_of("")
        owners = GaugeMetricFamily("mlte_port_owners", "Owners holding packet ports away from default forwarding, "
                                   "by kind (reservation: lit reservations; te: offloads; grow: growths; "
                                   "plan: POST /plan circuits)", labels=["kind"])
        reserved = GaugeMetricFamily("mlte_reserved_ports", "Packet ports held away from default forwarding, "
                                     "by the owner's kind", labels=["kind"])
        per_kind: dict[str, tuple[int, int]] = {}
        for owner, owned in held.items():
            n_owners, n_ports = per_kind.get(owner_kind(owner), (0, 0))
            per_kind[owner_kind(owner)] = (n_owners + 1, n_ports + len(owned))
        for kind, (n_owners, n_ports) in sorted(per_kind.items()):
            owners.add_metric([kind], n_owners)
            reserved.add_metric([kind], n_ports)
        yield owners
        yield reserved
        yield CounterMetricFamily("mlte_view_changes", "Changes of the network view's graph inputs (its version)",
                                  value=view.version)
        announced = CounterMetricFamily("mlte_view_announcements", "Changes the network view announced, by kind "
                                        "(SwitchEntered, PortChanged, LinkAdded, XconsChanged, ...): its churn",
                                        labels=["kind"])
        for kind, n in sorted(view.announced.items()):
            announced.add_metric([kind], n)
        yield announced

        xcons = GaugeMetricFamily("mlte_xcons", "OTS cross-connects, one per direction, by state (applied; "
                                  "unknown: the barrier timed out)", labels=["state"])
        xcons.add_metric(["applied"], sum(len(x) for x in view.xcons.values()))
        xcons.add_metric(["unknown"], sum(len(x) for x in view.unknown_xcons.values()))
        yield xcons

        try:
            by_kind, n_problems, n_lit = self._graph_figures()
        except Exception as exc:  # noqa: BLE001 - the other figures still answer; the gauge says why not these
            if self._graph_failed != view.version:  # once per view version, not on every scrape
                self._graph_failed = view.version
                LOG.warning("metrics: the merged graph cannot be built (%r): no link or circuit figures", exc)
            yield GaugeMetricFamily("mlte_graph_ok", "1 when the merged graph could be built for this scrape", value=0)
            return
        yield GaugeMetricFamily("mlte_graph_ok", "1 when the merged graph could be built for this scrape", value=1)
        links = GaugeMetricFamily("mlte_links", "Links of the merged multi-layer graph, by layer (packet: LLDP "
                                  "and static packet links; optical: fibres; adaptation: packet port to OTS port; "
                                  "access: host to switch)", labels=["layer"])
        for layer in LINK_LAYERS:
            links.add_metric([layer], by_kind.get(layer, 0))
        yield links
        yield CounterMetricFamily("mlte_graph_builds", "Merged multi-layer graphs built (each version of the "
                                  "view asked for, per set of sources)", value=view.graph_builds)
        yield GaugeMetricFamily("mlte_graph_problems", "Merge conflicts of the graph (GET /topology problems)",
                                value=n_problems)
        yield GaugeMetricFamily("mlte_circuits_lit", "Lit circuits: light paths joining two packet ports",
                                value=n_lit)

    def _graph_figures(self) -> tuple[Counter[str], int, int]:
        """Edges by kind, merge problems and lit circuits of the view's graph, worked out once per view
        version (the graph itself is cached by the view on the same key)."""
        version = self.view.version
        if self._graph_cache is None or self._graph_cache[0] != version:
            graph, problems = self.view.graph()
            by_kind = Counter(d["kind"] for _u, _v, d in graph.g.edges(data=True))
            self._graph_cache = (version, by_kind, len(problems), len(lit_circuits(graph)))
        return self._graph_cache[1:]

    # ---- the one send path ---------------------------------------------------------------------------
    def _openflow(self) -> Iterator[Metric]:
        sb = self.southbound
        sent = CounterMetricFamily("mlte_openflow_messages_sent", "OpenFlow messages sent, by message type",
                                   labels=["type"])
        for name, n in sorted(sb.sent_by_type.items()):
            sent.add_metric([name], n)
        yield sent
        by_sender = CounterMetricFamily("mlte_openflow_sender_messages", "OpenFlow messages sent, by the sender "
                                        "(forwarding, lldp, monitor_coarse, xcon, plan, ...)", labels=["sender"])
        for name, n in sorted(sb.sent_by_kind.items()):
            by_sender.add_metric([name], n)
        yield by_sender
        refused = CounterMetricFamily("mlte_openflow_messages_refused", "OpenFlow messages the closed gate refused "
                                      "(not master), by message type", labels=["type"])
        for name, n in sorted(sb.refused_by_type.items()):
            refused.add_metric([name], n)
        yield refused
        yield GaugeMetricFamily("mlte_openflow_datapaths", "Datapaths connected to the southbound",
                                value=len(sb.datapaths))

    # ---- failures and services -----------------------------------------------------------------------
    def _health(self) -> Iterator[Metric]:
        yield CounterMetricFamily("mlte_handler_failures", "Exceptions in handlers, services, API requests and "
                                  "plans since start (GET /health failures)", value=len(self.failures))
        runs = CounterMetricFamily("mlte_service_runs", "Runs of each periodic service", labels=["service"])
        fails = CounterMetricFamily("mlte_service_failures", "Runs of each periodic service that raised",
                                    labels=["service"])
        skipped = CounterMetricFamily("mlte_service_skipped", "Periods that posted nothing: the last run was "
                                      "still pending", labels=["service"])
        last = GaugeMetricFamily("mlte_service_last_run_seconds", "Duration of the last run", labels=["service"])
        longest = GaugeMetricFamily("mlte_service_max_run_seconds", "Longest run since start", labels=["service"])
        for name, st in sorted(self.service_health().items()):
            runs.add_metric([name], st["runs"])
            fails.add_metric([name], st["failures"])
            skipped.add_metric([name], st["skipped"])
            last.add_metric([name], st["last_ms"] / 1e3)
            longest.add_metric([name], st["max_ms"] / 1e3)
        yield from (runs, fails, skipped, last, longest)

    # ---- the database writer -------------------------------------------------------------------------
    def _db(self) -> Iterator[Metric]:
        writer = self.writer()
        if writer is None:  # no database URL: no writer, no series
            return
        st = writer.stats()
        yield GaugeMetricFamily("mlte_db_writer_queue_jobs", "Jobs waiting in the database writer's queue",
                                value=st["queued"])
        yield GaugeMetricFamily("mlte_db_writer_queue_limit_jobs", "The queue's bound ([controller] db_queue_max)",
                                value=st["max_jobs"])
        yield GaugeMetricFamily("mlte_db_writer_busy", "1 while the writer thread runs a job", value=int(st["busy"]))
        yield GaugeMetricFamily("mlte_db_writer_alive", "1 while the writer thread is alive", value=int(st["alive"]))
        yield CounterMetricFamily("mlte_db_writer_jobs_written", "Jobs the writer completed", value=st["written"])
        yield CounterMetricFamily("mlte_db_writer_errors", "Jobs that failed for good", value=st["errors"])
        dropped = CounterMetricFamily("mlte_db_writer_dropped_jobs", "Droppable jobs discarded on a full queue, "
                                      "by what (samples, prunes)", labels=["what"])
        dropped.add_metric(["samples"], st["dropped_samples"])
        dropped.add_metric(["prunes"], st["dropped_prunes"])
        yield dropped
        yield CounterMetricFamily("mlte_db_writer_over_bound_jobs", "Jobs that may not be dropped, accepted over "
                                  "the bound", value=st["over_bound"])
        if "refused_writes" in st:
            yield CounterMetricFamily("mlte_db_fence_refused_writes", "Writes the database fence refused "
                                      "(a newer epoch holds the database)", value=st["refused_writes"])

    # ---- mastership ----------------------------------------------------------------------------------
    def _mastership(self) -> Iterator[Metric]:
        m = self.mastership
        if m is None:
            return
        yield GaugeMetricFamily("mlte_mastership_leader", "1 while this controller may change the network "
                                "(always 1 for a single controller)", value=int(m.is_master()))
        yield GaugeMetricFamily("mlte_mastership_epoch", "This controller's epoch as leader (0: none)",
                                value=m.epoch or 0)
        yield GaugeMetricFamily("mlte_mastership_highest_epoch", "The highest epoch any switch or the election "
                                "showed", value=m.highest_seen)
        yield CounterMetricFamily("mlte_mastership_transitions", "Times this controller became or stopped "
                                  "being leader", value=m.transitions)
