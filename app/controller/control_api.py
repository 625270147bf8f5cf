"""The local control API: JSON over HTTP on 127.0.0.1 (docs/controller.md), served on the hub.

Labs and tests drive the controller through this API (:mod:`app.controller.client` is the Python
client). It is a thin adapter: reads come from the shared :class:`NetworkView`, single changes go
through the southbound (XCONs through the OTS driver registered there), plans and circuits through
the shared :class:`~app.controller.plan_runner.PlanRunner`; no other app is looked up by name.
Constructing it changes nothing: the state file and the static file are read in :meth:`ControlApi.start`.
Requests run in their own greenthreads: under the eventlet hub everything shares one OS thread, so
a handler never sees another one half-way. Every request needs ``Authorization: Bearer <token>``
(:mod:`app.controller.api_token`), except ``GET /health`` without that header, which answers only
whether the controller is alive (a liveness probe needs no secret and learns nothing else).
"""
from __future__ import annotations

import json
import logging
import struct
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from os_ken.base import app_manager
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_0

from app.controller import api_token, db_writer, guard, services, state_file
from app.controller.api_routes import CONTEXT as ROUTES
from app.controller.api_routes import ApiRoutes, Text
from app.controller.circuit_request import CircuitOutcome, run_circuit
from app.controller.driver_errors import DriverError
from app.controller.journal import JOURNAL
from app.controller.model import OTS, PACKET, PortRef, host_label, split_names
from app.controller.network_view import CONTEXT as VIEW
from app.controller.network_view import DEFAULT_SOURCES, SOURCES, NetworkView, UnknownSource
from app.controller.openflow_southbound import CONTEXT as SOUTHBOUND
from app.controller.openflow_southbound import OFP_VERSIONS, OpenFlowSouthbound
from app.controller.plan_log import PLANS
from app.controller.plan_runner import API_OWNER
from app.controller.plan_runner_live import RUNNER, RUNNER_EVENTS, PlanRunner, shared_runner
from app.controller.runtime import SETTINGS
from app.controller.scan_runner import run_scan
from app.update.model import ModelError
from app.update.plan import Plan, PlanError

LOG = logging.getLogger("mlte.controller.api")
__all__ = ["DEFAULT_SOURCES", "SOURCES", "ApiError", "ControlApi"]


def circuit_status(out: CircuitOutcome) -> int:
    """The HTTP status of a circuit set-up (here, in the adapter): 200 lit, 422 refused by an OTS, else
    the driver's (504 no barrier reply, 409 not connected)."""
    if out.ok:
        return 200
    return 422 if out.refused or out.failure is None else out.failure.status


class ApiError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 422: "Unprocessable Entity", 500: "Internal Server Error", 504: "Gateway Timeout"}


class ControlApi(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS
    _CONTEXTS = {VIEW: NetworkView, SOUTHBOUND: OpenFlowSouthbound, ROUTES: ApiRoutes, RUNNER: PlanRunner}
    _EVENTS = [*RUNNER_EVENTS]

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_control_api"
        self.view: NetworkView = kwargs.get(VIEW) or NetworkView()
        self.southbound: OpenFlowSouthbound = kwargs.get(SOUTHBOUND) or OpenFlowSouthbound()
        self.extra_routes: ApiRoutes = r if (r := kwargs.get(ROUTES)) is not None else ApiRoutes()
        self.runner = shared_runner(kwargs, self, self.view, self.southbound)
        self._scan_lock = hub.BoundedSemaphore(1)
        self.started = time.time()
        # fails closed until start() loads the token ([controller] api_token_file) or api_auth is off
        self.auth = api_token.BearerCheck(None)
        self.routes: dict[tuple[str, str], Callable[[dict, dict], Any]] = {
            ("GET", "/health"): self.r_health,
            ("GET", "/switches"): self.r_switches,
            ("GET", "/links"): self.r_links,
            ("GET", "/hosts"): self.r_hosts,
            ("GET", "/topology"): self.r_topology,
            ("GET", "/xcon"): self.r_xcon_list,
            ("POST", "/xcon"): self.r_xcon_add,
            ("DELETE", "/xcon"): self.r_xcon_delete,
            ("POST", "/circuit"): self.r_circuit_add,
            ("DELETE", "/circuit"): self.r_circuit_delete,
            ("POST", "/scan"): self.r_scan,
            ("GET", "/scan"): self.r_scan_result,
            ("POST", "/static"): self.r_static_load,
            ("POST", "/names"): self.r_names,
            ("POST", "/flowmod"): self.r_raw_flowmod,
            ("GET", "/events"): self.r_events,
            ("POST", "/plan"): self.r_plan_run,
            ("GET", "/plans"): self.r_plans,
        }

    @property
    def driver(self):
        """The OTS driver (it registers itself with the southbound when it starts)."""
        if self.southbound.xcon_driver is None:
            raise DriverError("the OTS driver is not loaded", 409)
        return self.southbound.xcon_driver

    def restore(self) -> None:
        """What the controller knew before a restart: the optical scan's attachments (``[controller]
        state_file``) and the vendor file (``static_file``), into the view."""
        self.view.set_scan(state_file.load_attached(SETTINGS.controller.get("state_file", ""), SETTINGS.names))
        path = SETTINGS.controller.get("static_file") or ""
        if path:
            self._load_static(path)

    def load_credential(self) -> None:
        """The token from ``[controller] api_token_file`` (made on the first start; `mlte controller`
        has checked it already), or no credential at all with ``[controller] api_auth = false``."""
        ctl = SETTINGS.controller
        if not ctl.get("api_auth", True):
            LOG.warning("control API credential OFF ([controller] api_auth = false): every local user "
                        "can change the network through http://%s:%s", ctl["api_host"], ctl["api_port"])
            self.auth = api_token.BearerCheck(None, required=False)
            return
        # `mlte controller` put the file it resolved (flag > env > config > default) in the setting
        where = api_token.resolve(ctl.get("api_token_file") or None, explicit_name=api_token.KEY)
        self.auth = api_token.BearerCheck(api_token.load_or_create(where))

    def start(self):
        thread = super().start()
        self.load_credential()
        self.restore()
        host, port = SETTINGS.controller["api_host"], int(SETTINGS.controller["api_port"])
        self._server = hub.WSGIServer((host, port), self.wsgi)
        self._server_thread = hub.spawn(self._server.serve_forever)
        return thread

    # ---- plumbing -------------------------------------------------------------------------------
    def wsgi(self, environ: dict, start_response) -> list[bytes]:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "/").rstrip("/") or "/"
        status, body = 200, None
        headers = [("Content-Type", "application/json")]
        try:
            denied = self.auth.problem(environ.get("HTTP_AUTHORIZATION"))
            if denied is not None and (method, path) == ("GET", "/health") and not environ.get("HTTP_AUTHORIZATION"):
                body = self.r_liveness()
            elif denied is not None:  # before routing: a caller without the token learns no route either
                headers.append(("WWW-Authenticate", denied.challenge))
                raise ApiError(401, denied.reason)
            else:
                body = self._dispatch(method, path, environ)
            if isinstance(body, tuple):
                status, body = body
        except ApiError as exc:
            status, body = exc.status, {"error": str(exc), **exc.extra}
        except DriverError as exc:
            status, body = exc.status, {"error": str(exc)}
        except Exception as exc:  # a bug: loud in the log, 500 to the caller
            guard.failures.append(f"API {method} {path}: {exc!r}")
            guard.ERROR_LOG.exception("API %s %s failed", method, path)
            status, body = 500, {"error": f"internal error: {exc!r}"}
        if isinstance(body, Text):  # GET /metrics: not JSON
            payload, headers = body.body, [("Content-Type", body.content_type)]
        else:
            payload = json.dumps(body, sort_keys=True).encode()
        start_response(f"{status} {_REASONS.get(status, 'Error')}", [*headers, ("Content-Length", str(len(payload)))])
        return [payload]

    def _dispatch(self, method: str, path: str, environ: dict) -> Any:
        """An authorised request: route it, parse the query and the JSON body, run the handler."""
        handler = self.routes.get((method, path)) or self.extra_routes.get((method, path))
        if handler is None:
            known = {m for (m, p) in (*self.routes, *self.extra_routes) if p == path}
            raise ApiError(405 if known else 404, f"no route {method} {path}")
        query = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise ApiError(400, "bad Content-Length") from None
        raw = environ["wsgi.input"].read(length) if length > 0 else b""
        try:
            data = json.loads(raw) if raw else {}
        except ValueError as exc:  # bad JSON, or bytes that are not UTF-8
            raise ApiError(400, f"request body is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ApiError(400, "request body must be a JSON object")
        return handler(query, data)

    @staticmethod
    def _int(data: dict, key: str, required: bool = True) -> int | None:
        """An OpenFlow port number from the body: an integer in 1..0xFEFF (OF1.0 physical ports)."""
        v = data.get(key)
        if v is None:
            if required:
                raise ApiError(400, f"missing '{key}'")
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise ApiError(400, f"'{key}' must be an integer, got {v!r}")
        if not 1 <= v < ofproto_v1_0.OFPP_MAX:
            raise ApiError(400, f"'{key}' {v} out of range 1..{ofproto_v1_0.OFPP_MAX - 1}")
        return v

    # ---- read endpoints -------------------------------------------------------------------------
    def r_liveness(self) -> dict:
        """``GET /health`` without a credential: alive and healthy or not, nothing about the network."""
        return {"ok": not guard.failures, "uptime": time.time() - self.started, "auth": "required"}

    def r_health(self, q: dict, d: dict) -> dict:
        return {
            "ok": not guard.failures,
            "uptime": time.time() - self.started,
            "packet_switches": len(self.view.of_kind(PACKET)),
            "ots": len(self.view.of_kind(OTS)),
            "links": len(self.view.links.links()),
            "failures": guard.failures[-20:],
            # the database writer thread (db_writer): queue length, drops of samples, write errors
            "db": writer.stats() if (writer := db_writer.current()) is not None else None,
            # every periodic service of the running apps (app.controller.services): runs, failures, ...
            "services": services.health(),
        }

    def r_switches(self, q: dict, d: dict) -> list:
        return [sw.to_json() for sw in sorted(self.view.switches.values(), key=lambda s: s.name)]

    def r_links(self, q: dict, d: dict) -> list:
        def end(r: PortRef) -> dict:
            return {"node": self.view.name_of(r.dpid), "dpid": r.dpid, "port": r.port_no}

        table = self.view.links
        return [{"src": end(link.src), "dst": end(link.dst), "last_seen": table.last_seen(link)}
                for link in table.links()]

    def r_hosts(self, q: dict, d: dict) -> list:
        out = []
        for h in sorted(self.view.hosts.values(), key=lambda h: h.mac):
            sw = self.view.switches.get(h.port.dpid)
            out.append({"mac": h.mac, "ip": h.ip, "node": sw.name if sw else None, "port": h.port.port_no,
                        "id": SETTINGS.host_names.get(h.mac.lower()) or host_label(h.mac)})
        return out

    def r_topology(self, q: dict, d: dict) -> dict:
        sources = tuple(s for s in q.get("sources", ",".join(DEFAULT_SOURCES)).split(",") if s)
        try:
            graph, problems = self.view.graph(sources)
        except UnknownSource as exc:
            raise ApiError(400, str(exc)) from None
        out = graph.to_dict()
        out["problems"] = problems
        return out

    def r_events(self, q: dict, d: dict) -> list:
        try:
            since = int(q.get("since", 0))
        except ValueError:
            raise ApiError(400, "'since' must be an integer") from None
        return JOURNAL.since(since, q.get("type"))

    # ---- XCONs and circuits ----------------------------------------------------------------------
    def r_xcon_list(self, q: dict, d: dict) -> list:
        return self.driver.active()

    def _xcon_result(self, res) -> tuple[int, dict]:
        return (200 if res.ok else 422), res.to_json()

    def r_xcon_add(self, q: dict, d: dict):
        ots = d.get("ots")
        if ots is None:
            raise ApiError(400, "missing 'ots'")
        res = self.driver.install(
            ots, self._int(d, "in_port"), self._int(d, "out_port"), bool(d.get("bidirectional", True))
        )
        return self._xcon_result(res)

    def r_xcon_delete(self, q: dict, d: dict):
        d = d or q
        ots = d.get("ots")
        if ots is None:
            raise ApiError(400, "missing 'ots'")
        port = d.get("in_port")
        port = int(port) if isinstance(port, str) and port.isdigit() else port
        port = self._int({"in_port": port}, "in_port")
        driver = self.driver
        dpid = driver.resolve(ots)
        if not driver.known_port(dpid, port):
            raise ApiError(404, f"no XCON on {ots} in_port {port}")
        bidir = d.get("bidirectional", True)
        return self._xcon_result(driver.remove(ots, port, bidir not in (False, "false", "0")))

    def r_circuit_add(self, q: dict, d: dict):
        """A chain of XCONs ``{"xcons": [{"ots", "in_port", "out_port"}, ...], "parallel": false}``; all or
        nothing."""
        hops = d.get("xcons")
        if not isinstance(hops, list) or not hops:
            raise ApiError(400, "'xcons' must be a non-empty list of {ots, in_port, out_port}")
        driver = self.driver
        for hop in hops:
            if not isinstance(hop, dict) or "ots" not in hop:
                raise ApiError(400, "each XCON needs 'ots', 'in_port', 'out_port'")
            self._int(hop, "in_port"), self._int(hop, "out_port")
            driver.resolve(hop["ots"])
        try:
            out = run_circuit(self.runner, driver, hops, bool(d.get("parallel")))
        except (PlanError, ModelError) as exc:  # a hop listed twice, or joining a port to itself
            raise ApiError(400, str(exc)) from None
        return circuit_status(out), out.body

    def r_circuit_delete(self, q: dict, d: dict):
        hops = d.get("xcons")
        if not isinstance(hops, list) or not hops:
            raise ApiError(400, "'xcons' must be a non-empty list of {ots, in_port}")
        if not all(isinstance(h, dict) and "ots" in h for h in hops):
            raise ApiError(400, "each XCON needs 'ots' and 'in_port'")
        driver = self.driver
        for h in hops:  # validate every hop before removing any
            self._int(h, "in_port")
            driver.resolve(h["ots"])
        # the hops on one OTS go behind one barrier (one batch there), OTS by OTS in first-seen order
        groups: dict[str, list[int]] = {}
        for i, h in enumerate(hops):
            groups.setdefault(str(h["ots"]), []).append(i)
        results: list[dict] = [{}] * len(hops)
        for idx in groups.values():
            try:
                done = [r.to_json() for r in driver.remove_many(hops[idx[0]]["ots"], [hops[i]["in_port"] for i in idx])]
            except DriverError as exc:  # e.g. no barrier reply: report it, go on with the other OTSes
                done = [{"ok": False, "ots": hops[i]["ots"], "in_port": hops[i]["in_port"], "error": str(exc),
                         "status": exc.status} for i in idx]
            for i, r in zip(idx, done, strict=True):
                results[i] = r
        ok = all(r["ok"] for r in results)
        return (200 if ok else 422), {"ok": ok, "xcons": results}

    def r_raw_flowmod(self, q: dict, d: dict):
        """Send one OF1.0 FLOW_MOD ADD with arbitrary match fields to an OTS (tests the OTS's checks)."""
        driver = self.driver
        dpid = driver.resolve(d.get("ots", ""))
        match = d.get("match") or {}
        if not isinstance(match, dict):
            raise ApiError(400, "'match' must be an object of OF1.0 match fields")
        out_port = self._int(d, "out_port", required=False)
        try:
            msg = driver.flow_mod(dpid, ofproto_v1_0.OFPFC_ADD, None, out_port, match=match)
            msg.xid = 0
            msg.serialize()  # a field value that does not fit (e.g. in_port -1) fails here, not in send_msg
            msg.xid, msg.buf = None, None
        except (TypeError, ValueError, KeyError, struct.error) as exc:
            raise ApiError(400, f"bad match: {exc}") from None
        errors, sent, applied = driver.send_and_barrier(dpid, [msg])
        if errors:
            return 422, {"ok": False, "errors": [e.to_json() for e in errors]}
        return {"ok": True, "errors": []}

    # ---- update plans ----------------------------------------------------------------------------
    def r_plan_run(self, q: dict, d: dict):
        """``{"plan": <app.update Plan JSON>}``: run it through the southbound (blocks until done or
        rolled back); 200 with the record when done, 422 when it failed or was rolled back."""
        raw = d.get("plan")
        if not isinstance(raw, dict):
            raise ApiError(400, "'plan' must be an update plan object (docs/updates.md)")
        try:
            plan = Plan.from_json(raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise ApiError(400, f"bad plan: {exc}") from None
        # the ports of the circuits it opens are kept from default forwarding until a plan removes the
        # XCONs they hang on (or given back at once if it does not finish)
        record = self.runner.run(plan, f"{API_OWNER}{plan.id}", "api").to_json()
        return (200 if record["state"] == "done" else 422), record

    def r_plans(self, q: dict, d: dict) -> list:
        try:
            limit = int(q.get("limit", 50))
            res = int(q["reservation"]) if "reservation" in q else None
        except ValueError:
            raise ApiError(400, "'limit' and 'reservation' must be integers") from None
        return PLANS.items(limit, res)

    # ---- discovery -------------------------------------------------------------------------------
    def r_scan(self, q: dict, d: dict):
        """``{"all": false}``: probe OTS ports with unknown far ends (``all``: every free port)."""
        if not self._scan_lock.acquire(blocking=False):
            raise ApiError(409, "a scan is already running")
        try:
            self.view.set_scanning(True)
            known = {} if d.get("all") else self.view.known_far_ends()
            report = run_scan(self.view, self.driver, known, float(SETTINGS.controller["scan_settle"]))
        finally:
            self.view.set_scanning(False)
            self._scan_lock.release()
        name = self.view.name_of
        result = {
            "ok": not report.errors,
            "probes": report.probes,
            "seconds": round(report.seconds, 3),
            "adaptations": [
                {"oport": f"{name(o)}:{p}", "switch": name(r.dpid), "port": r.port_no}
                for (o, p), r in sorted(report.attached.items()) if r is not None
            ],
            "dark": [f"{name(o)}:{p}" for (o, p), r in sorted(report.attached.items()) if r is None],
            "ambiguous": {f"{name(o)}:{p}": [f"{name(r.dpid)}:{r.port_no}" for r in c]
                          for (o, p), c in sorted(report.ambiguous.items())},
            "unscannable": [f"{name(o)}:{p}" for o, p in sorted(report.unscannable)],
            "errors": report.errors,
            "leftover_xcons": self.driver.active(),
        }
        self.view.set_scan(report.attached, result)
        state_file.save_attached(SETTINGS.controller.get("state_file", ""), self.view.scan_attached, name)
        return result

    def r_scan_result(self, q: dict, d: dict):
        if self.view.last_scan is None:
            raise ApiError(404, "no scan has run yet")
        return self.view.last_scan

    def _load_static(self, path: str) -> None:
        self.view.load_static(path)
        JOURNAL.add("static_loaded", path=path)

    def r_static_load(self, q: dict, d: dict):
        """``{"path": FILE}`` loads a vendor file; ``{"path": ""}`` drops it."""
        path = d.get("path")
        if not isinstance(path, str):
            raise ApiError(400, "'path' must be a string")
        if not path:
            self.view.load_static("")
            return {"ok": True, "static": None}
        try:
            self._load_static(path)
        except Exception as exc:
            if getattr(exc, "user_error", False):
                raise ApiError(400, str(exc)) from None
            raise
        return {"ok": True, "static": path}

    def r_names(self, q: dict, d: dict):
        """``{"names": {"0xa1": "A", "00:00:00:00:00:01": "h1"}}``: name datapaths and hosts (the lab knows)."""
        raw = d.get("names")
        if not isinstance(raw, dict):
            raise ApiError(400, "'names' must be an object {dpid or host MAC: name}")
        try:
            names, host_names = split_names(raw)
        except ValueError as exc:
            raise ApiError(400, str(exc)) from None
        self.view.rename(names, host_names)
        JOURNAL.add("names", switches=len(names), hosts=len(host_names))  # the graph's node ids changed
        return {"ok": True, "named": len(names) + len(host_names)}
