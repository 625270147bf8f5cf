"""Load-aware mapping shim (thin os-ken app, loaded when ``[te] mapping_sites`` names two switches).

The plain :class:`app.te.mapping.SiteMapper` decides; this app only feeds it and runs its plans:

- the site pair's paths come from the network view's graph (link-disjoint packet paths between the
  two site switches) once both are connected and two paths exist;
- flows are registered through the control API (``POST /mapping/flows``: a reservation's or a
  lab's 5-tuples; the hosts must be known to the view) and each is placed by a plan that installs
  its rules before the call returns; ``DELETE /mapping/flows`` removes them;
- every ``[te] mapping_interval`` seconds it reads the byte counters of the flows' forward egress
  rules at the far site (per path: Mbit/s) and the monitor's latest per-link latencies (per path: the
  sum over its links, if the monitor app is loaded), feeds the policy's estimator and executes the
  remap plan :meth:`SiteMapper.step` returns;
- ``PUT /mapping/policy`` (``{"policy": "static" | "throughput" | "rtt"}``) switches the policy at run
  time, with no flows mapped: a fresh mapper (equal weights, empty estimators, history cleared), so
  one controller can compare the policies one after the other (the multihoming lab does).

One plan at a time (``_busy``; greenthreads are cooperative, so the check-and-set cannot be
interleaved). Decisions go to the journal (``mapping_decision``) and to ``GET /mapping``.
"""
from __future__ import annotations

import logging
import math
import time
from collections import deque
from typing import Any

from os_ken.base import app_manager
from os_ken.controller import event as osken_event
from os_ken.controller.handler import set_ev_cls
from os_ken.lib import hub

from app.controller.api_routes import CONTEXT as ROUTES
from app.controller.api_routes import ApiRoutes
from app.controller.journal import JOURNAL
from app.controller.mastership import CONTEXT as MASTERSHIP
from app.controller.mastership import Mastership
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import NetworkView
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OFP_VERSIONS, OpenFlowSouthbound
from app.controller.plan_runner_live import RUNNER, RUNNER_EVENTS, PlanRunner, shared_runner
from app.controller.runtime import SETTINGS
from app.controller.services import Service, app_scheduler
from app.te.decisions import HostNotFound, host_port
from app.te.mapping import (
    PLACE,
    POLICIES,
    REMAP,
    MappedFlow,
    MappingDecision,
    MappingError,
    RateWindow,
    SiteMapper,
    path_rtt_ms,
    samples_for,
    site_paths,
)
from app.update.model import normalise_match
from topology import rule_plan
from topology.flow import FiveTuple

LOG = logging.getLogger("mlte.controller.mapping")
IDENT = 1  # cookie id of the (one) mapped site pair
#: Seconds of counter reads one rate spans (OVS updates rule counters every ~0.5 s; see RateWindow).
RATE_SPAN_S = 1.0


def _api_error(status: int, message: str) -> Exception:
    from app.controller.control_api import ApiError

    return ApiError(status, message)


class EventMappingTick(osken_event.EventBase):
    """Period of ``[te] mapping_interval``: measure the site's paths and remap if the policy says so."""


class MappingApp(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, ROUTES: ApiRoutes, RUNNER: PlanRunner,
                 MASTERSHIP: Mastership}
    _EVENTS = [*RUNNER_EVENTS]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_mapping"
        self.mastership: Mastership = kwargs.get(MASTERSHIP) or Mastership()  # a follower does not remap
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        routes = kwargs.get(ROUTES)  # the shared table, empty (so falsy) until apps add to it
        self.routes: ApiRoutes = ApiRoutes() if routes is None else routes
        cfg = SETTINGS.section("te")  # one table: app/config.py
        self.policy = str(cfg["mapping"])
        self.sites = [str(s) for s in cfg["mapping_sites"]]
        self.interval = float(cfg["mapping_interval"])
        self.runner = shared_runner(kwargs, self, self.view, self.southbound)
        self.mapper: SiteMapper | None = None
        self.history: deque[dict[str, Any]] = deque(maxlen=2000)
        self._busy = False
        self._window = RateWindow(RATE_SPAN_S)
        self.routes.add("GET", "/mapping", lambda q, d: self.status())
        self.routes.add("POST", "/mapping/flows", self.r_add)
        self.routes.add("DELETE", "/mapping/flows", self.r_remove)
        self.routes.add("PUT", "/mapping/policy", self.r_policy)
        self.services = app_scheduler(self, [Service("tick", EventMappingTick, self.interval)])

    def start(self):
        thread = super().start()
        self.services.start()
        return thread

    def stop(self):
        self.services.stop()
        super().stop()

    # ---- plans, one at a time ------------------------------------------------------------------------
    def _acquire(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self._busy:
            if time.monotonic() > deadline:
                raise _api_error(409, "a mapping plan is still running")
            hub.sleep(0.01)
        self._busy = True

    def _execute(self, d: MappingDecision, flow: MappedFlow | None = None) -> dict[str, Any]:
        assert self.mapper is not None
        rec: dict[str, Any] = {"state": "done"}
        if d.plan is not None:
            rec = self.runner.run(d.plan, f"mapping:{IDENT}", "mapping", ports=(),
                                  context={"decision": d.kind}).to_json()
        ok = rec["state"] == "done"
        self.mapper.done(d, ok, flow)
        entry = {**d.as_dict(), "ok": ok, "error": rec.get("error", "")}
        JOURNAL.add("mapping_decision", **entry)
        self.history.append(entry)
        if d.kind != PLACE:
            LOG.info("mapping %s: %s", d.kind, d.reason)
        return rec

    def settle_samples(self) -> int:
        """Samples per path before a weight changes (at start and after a move): 3, or more when the
        interval is short, so that no rate still spans the move (the rate window's span + 1 read)."""
        return max(3, math.ceil(RATE_SPAN_S / self.interval - 1e-9) + 1)

    # ---- the site pair -------------------------------------------------------------------------------
    def _ensure_mapper(self) -> SiteMapper | None:
        if self.mapper is None and len(self.sites) == 2:
            try:
                paths = site_paths(self.view.graph()[0], self.sites[0], self.sites[1])
            except MappingError as exc:
                LOG.debug("mapping not ready: %s", exc)
                return None
            self.mapper = SiteMapper(paths, self.policy, ident=IDENT, min_samples=self.settle_samples())
            JOURNAL.add("mapping_paths", policy=self.policy, paths=self.mapper.status()["paths"])
        return self.mapper

    # ---- API -----------------------------------------------------------------------------------------
    def _flows(self, body: dict) -> list[FiveTuple]:
        flows = body.get("flows") if isinstance(body, dict) else None
        if not isinstance(flows, list) or not flows:
            raise _api_error(400, "body must be {\"flows\": [{\"src\", \"dst\", \"proto\", \"sport\", \"dport\"}, ...]}")
        try:
            return [FiveTuple.from_dict(f) for f in flows]
        except (KeyError, TypeError, ValueError) as exc:
            raise _api_error(400, f"bad flow: {exc}") from None

    def r_add(self, q: dict, body: dict) -> Any:
        """``POST /mapping/flows``: place each flow (rules in before the answer)."""
        fives = self._flows(body)
        mapper = self._ensure_mapper()
        if mapper is None:
            raise _api_error(409, f"no site pair to map yet ([te] mapping_sites = {self.sites}; need both "
                                  "switches connected and two link-disjoint paths)")
        graph = self.view.graph()[0]
        placed: list[dict[str, str]] = []
        for five in fives:
            try:
                a, z = host_port(graph, five.src), host_port(graph, five.dst)
                if (a[0], z[0]) != tuple(self.sites):
                    raise MappingError(f"{five}: from {a[0]} to {z[0]}, not {self.sites[0]} -> {self.sites[1]}")
                flow = MappedFlow(five, a[1], z[1])
            except (HostNotFound, MappingError) as exc:
                raise _api_error(422, str(exc)) from None
            self._acquire()
            try:
                d = mapper.add_flow(flow, time.monotonic())
                rec = self._execute(d, flow)
            finally:
                self._busy = False
            if rec["state"] != "done":
                return 422, {"error": f"placing {five} failed: {rec.get('error')}", "placed": placed}
            placed.append({"flow": str(five), "decision": d.kind, "reason": d.reason})
        return {"placed": placed, **self.status()}

    def r_remove(self, q: dict, body: dict) -> Any:
        """``DELETE /mapping/flows``: remove the flows' rules."""
        fives = self._flows(body)
        if self.mapper is None:
            raise _api_error(409, "no site pair mapped")
        out = []
        for five in fives:
            self._acquire()
            try:
                rec = self._execute(self.mapper.remove_flow(five, time.monotonic()))
            finally:
                self._busy = False
            out.append({"flow": str(five), "state": rec["state"]})
        return {"removed": out}

    def r_policy(self, q: dict, body: dict) -> Any:
        """``PUT /mapping/policy``: start again under another policy (refused while flows are mapped:
        their split was made by the old one; remove them first)."""
        policy = body.get("policy") if isinstance(body, dict) else None
        if policy not in POLICIES:
            raise _api_error(400, f"body must be {{\"policy\": one of {', '.join(POLICIES)}}}, got {policy!r}")
        if self.mapper is not None and self.mapper.flows:
            raise _api_error(409, f"{len(self.mapper.flows)} flow(s) still mapped; DELETE /mapping/flows first")
        self._acquire()
        try:
            self.policy = policy
            self.mapper = None
            self._window = RateWindow(RATE_SPAN_S)
            self.history.clear()
            self._ensure_mapper()
        finally:
            self._busy = False
        JOURNAL.add("mapping_policy", policy=policy)
        LOG.info("mapping policy now %s", policy)
        return self.status()

    # ---- measuring and remapping -----------------------------------------------------------------------
    @set_ev_cls(EventMappingTick)
    def _periodic(self, ev: EventMappingTick) -> None:
        self.services.run("tick", self._tick)

    def _rates(self, mapper: SiteMapper, now: float) -> dict[int, float]:
        sw = self.view.by_name(mapper.paths[0].z)
        counted = mapper.counted_rules()
        if sw is None or not counted:
            return {}
        band = rule_plan.MAPPING
        stats = self.southbound.flow_stats(sw.dpid, band.cookie(IDENT), band.mask(by_id=True))
        counters = {}
        for st in stats:
            key = (mapper.paths[0].z, st.table, st.priority, normalise_match(st.match))
            if key in counted:
                counters[key] = (counted[key][0], st.bytes)
        rates = self._window.add(now, counters)
        return {i: rates.get(i, 0.0) for i in range(len(mapper.paths))} if rates else {}

    def _rtts(self, mapper: SiteMapper) -> dict[int, float | None]:
        handler = self.routes.get(("GET", "/monitor/latency"))  # the monitor's published read endpoint
        if handler is None:
            return {}
        links = handler({"samples": "0"}, {}).get("links", {})
        link_ms = {lid: v.get("last_ms") for lid, v in links.items()}
        return {i: path_rtt_ms(p, link_ms) for i, p in enumerate(mapper.paths)}

    def _tick(self) -> None:
        mapper = self._ensure_mapper()
        if mapper is None or self._busy or not self.mastership.acting():
            return
        now = time.monotonic()
        rates, rtts = self._rates(mapper, now), self._rtts(mapper)
        mapper.observe(samples_for(self.policy, rates, rtts))
        self.history.append({"decision": "sample", "t": now, "wall": time.time(),
                             "mbps": [round(rates.get(i, 0.0), 4) for i in range(len(mapper.paths))],
                             "rtt_ms": [rtts.get(i) for i in range(len(mapper.paths))],
                             "weights": [round(w, 4) for w in mapper.weights], "counts": mapper.counts()})
        d = mapper.step(now)
        if d.kind != REMAP:
            return
        self._busy = True
        try:
            self._execute(d)
        finally:
            self._busy = False

    def status(self) -> dict[str, Any]:
        base = {"policy": self.policy, "sites": self.sites, "interval": self.interval}
        if self.mapper is None:
            return {**base, "ready": False, "history": list(self.history)}
        return {**base, "ready": True, **self.mapper.status(), "history": list(self.history)}
