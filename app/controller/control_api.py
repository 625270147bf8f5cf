"""The local control API: JSON over HTTP on 127.0.0.1 (docs/controller.md), served on the hub.

Labs, tests, the monitor and the web service drive the controller only through this API
(:mod:`app.controller.client` is the Python client). Requests run in their own greenthreads and
call the other apps directly: under the eventlet hub everything shares one OS thread, so a
handler never sees another one half-way.
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

from app.controller import db_writer, guard, state_file
from app.controller.circuits import setup_circuit
from app.controller.graph_view import DEFAULT_ACCESS_MBPS, DEFAULT_LINK_MBPS, combined, live_graph, strip
from app.controller.inventory import OFP_VERSIONS
from app.controller.journal import JOURNAL
from app.controller.model import OTS, PACKET, PortRef, host_label, split_names
from app.controller.ots_driver import DriverError
from app.controller.runtime import SETTINGS
from app.controller.scanner import run_scan
from topology.vendor_file import load_vendor_graph

LOG = logging.getLogger("mlte.controller.api")
SOURCES = ("lldp", "scan", "static", "static-fibres", "hosts")
DEFAULT_SOURCES = ("lldp", "scan", "static", "hosts")


class ApiError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.extra = extra


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            409: "Conflict", 422: "Unprocessable Entity", 500: "Internal Server Error", 504: "Gateway Timeout"}


class ControlApi(app_manager.OSKenApp):
    OFP_VERSIONS = OFP_VERSIONS

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.name = "mlte_control_api"
        self.scan_attached: dict[tuple[int, int], PortRef | None] = state_file.load_attached(  # a restart keeps it
            SETTINGS.controller.get("state_file", ""), SETTINGS.names)
        self.static_graph = None
        self.static_path = ""
        self.last_scan: dict[str, Any] | None = None
        self._scan_lock = hub.BoundedSemaphore(1)
        self.started = time.time()
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
        }
        path = SETTINGS.controller.get("static_file") or ""
        if path:
            self._load_static(path)

    def start(self):
        thread = super().start()
        host, port = SETTINGS.controller["api_host"], int(SETTINGS.controller["api_port"])
        self._server = hub.WSGIServer((host, port), self.wsgi)
        self._server_thread = hub.spawn(self._server.serve_forever)
        return thread

    # ---- plumbing -------------------------------------------------------------------------------
    def app(self, name: str):
        return app_manager.lookup_service_brick(name)

    def wsgi(self, environ: dict, start_response) -> list[bytes]:
        method = environ["REQUEST_METHOD"]
        path = environ.get("PATH_INFO", "/").rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        status, body = 200, None
        try:
            handler = self.routes.get((method, path))
            if handler is None:
                known = {m for (m, p) in self.routes if p == path}
                raise ApiError(405 if known else 404, f"no route {method} {path}")
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
            body = handler(query, data)
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
        payload = json.dumps(body, sort_keys=True).encode()
        start_response(f"{status} {_REASONS.get(status, 'Error')}",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
        return [payload]

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
    def r_health(self, q: dict, d: dict) -> dict:
        inv = self.app("mlte_inventory")
        return {
            "ok": not guard.failures,
            "uptime": time.time() - self.started,
            "packet_switches": len(inv.of_kind(PACKET)),
            "ots": len(inv.of_kind(OTS)),
            "links": len(self.app("mlte_lldp").table.links()),
            "failures": guard.failures[-20:],
            # the database writer thread (db_writer): queue length, drops of samples, write errors
            "db": writer.stats() if (writer := db_writer.current()) is not None else None,
        }

    def r_switches(self, q: dict, d: dict) -> list:
        inv = self.app("mlte_inventory")
        return [sw.to_json() for sw in sorted(inv.switches.values(), key=lambda s: s.name)]

    def r_links(self, q: dict, d: dict) -> list:
        inv = self.app("mlte_inventory")

        def end(r: PortRef) -> dict:
            sw = inv.switches.get(r.dpid)
            return {"node": sw.name if sw else f"{r.dpid:x}", "dpid": r.dpid, "port": r.port_no}

        table = self.app("mlte_lldp").table
        return [{"src": end(link.src), "dst": end(link.dst), "last_seen": table.last_seen(link)}
                for link in table.links()]

    def r_hosts(self, q: dict, d: dict) -> list:
        inv = self.app("mlte_inventory")
        out = []
        for h in sorted(self.app("mlte_forwarding").hosts.values(), key=lambda h: h.mac):
            sw = inv.switches.get(h.port.dpid)
            out.append({"mac": h.mac, "ip": h.ip, "node": sw.name if sw else None, "port": h.port.port_no,
                        "id": SETTINGS.host_names.get(h.mac.lower()) or host_label(h.mac)})
        return out

    def build_graph(self, sources: tuple[str, ...] = DEFAULT_SOURCES):
        inv = self.app("mlte_inventory")
        links = self.app("mlte_lldp").table.links() if "lldp" in sources else []
        adapt = {k: v for k, v in self.scan_attached.items() if v is not None} if "scan" in sources else {}
        live, problems = live_graph(inv.switches.values(), links, adapt, self.app("mlte_ots_driver").xcons,
                                    float(SETTINGS.ots["unit_mbps"]),
                                    self.app("mlte_forwarding").hosts.values() if "hosts" in sources else (),
                                    SETTINGS.host_names,
                                    float(SETTINGS.controller.get("access_default_mbps", DEFAULT_ACCESS_MBPS)),
                                    float(SETTINGS.controller.get("link_default_mbps", DEFAULT_LINK_MBPS)))
        static = None
        if self.static_graph is not None and "static" in sources:
            static = self.static_graph
        elif self.static_graph is not None and "static-fibres" in sources:
            static = strip(self.static_graph, ["adaptation"])
        result = combined(live, static)
        return result.graph, problems + [str(c) for c in result.conflicts]

    def r_topology(self, q: dict, d: dict) -> dict:
        sources = tuple(s for s in q.get("sources", ",".join(DEFAULT_SOURCES)).split(",") if s)
        bad = [s for s in sources if s not in SOURCES]
        if bad:
            raise ApiError(400, f"unknown source(s) {bad} (known: {', '.join(SOURCES)})")
        graph, problems = self.build_graph(sources)
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
        return self.app("mlte_ots_driver").active()

    def _xcon_result(self, res) -> tuple[int, dict]:
        return (200 if res.ok else 422), res.to_json()

    def r_xcon_add(self, q: dict, d: dict):
        ots = d.get("ots")
        if ots is None:
            raise ApiError(400, "missing 'ots'")
        res = self.app("mlte_ots_driver").install(
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
        driver = self.app("mlte_ots_driver")
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
        driver = self.app("mlte_ots_driver")
        for hop in hops:
            if not isinstance(hop, dict) or "ots" not in hop:
                raise ApiError(400, "each XCON needs 'ots', 'in_port', 'out_port'")
            self._int(hop, "in_port"), self._int(hop, "out_port")
            driver.resolve(hop["ots"])

        def run_all(thunks: list) -> None:
            for t in [hub.spawn(t) for t in thunks]:
                t.wait()

        return setup_circuit(driver, hops, bool(d.get("parallel")), run_all)

    def r_circuit_delete(self, q: dict, d: dict):
        hops = d.get("xcons")
        if not isinstance(hops, list) or not hops:
            raise ApiError(400, "'xcons' must be a non-empty list of {ots, in_port}")
        if not all(isinstance(h, dict) and "ots" in h for h in hops):
            raise ApiError(400, "each XCON needs 'ots' and 'in_port'")
        driver = self.app("mlte_ots_driver")
        for h in hops:  # validate every hop before removing any
            self._int(h, "in_port")
            driver.resolve(h["ots"])
        results = []
        for h in hops:
            try:
                results.append(driver.remove(h["ots"], h["in_port"]).to_json())
            except DriverError as exc:  # e.g. no barrier reply: report it, go on with the other hops
                results.append({"ok": False, "ots": h["ots"], "in_port": h["in_port"], "error": str(exc),
                                "status": exc.status})
        ok = all(r["ok"] for r in results)
        return (200 if ok else 422), {"ok": ok, "xcons": results}

    def r_raw_flowmod(self, q: dict, d: dict):
        """Send one OF1.0 FLOW_MOD ADD with arbitrary match fields to an OTS (tests the OTS's checks)."""
        driver = self.app("mlte_ots_driver")
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

    # ---- discovery -------------------------------------------------------------------------------
    def _known_far_ends(self) -> dict[tuple[int, int], PortRef | None]:
        """OTS ports whose far end the static file already gives (fibre: None; adaptation: the port)."""
        known: dict[tuple[int, int], PortRef | None] = {}
        if self.static_graph is None:
            return known
        inv = self.app("mlte_inventory")
        by_name = {sw.name: sw.dpid for sw in inv.switches.values()}
        g = self.static_graph
        for node in g.nodes_of_kind("oport"):
            attrs = g.g.nodes[node]
            odpid = by_name.get(attrs["ots"])
            if odpid is None:
                continue
            att = g.adaptation_at(node)
            if att is not None and att[0] in by_name:
                known[(odpid, attrs["port"])] = PortRef(by_name[att[0]], att[1])
            elif g.fibre_peer(node) is not None:
                known[(odpid, attrs["port"])] = None
        return known

    def r_scan(self, q: dict, d: dict):
        """``{"all": false}``: probe OTS ports with unknown far ends (``all``: every free port)."""
        if not self._scan_lock.acquire(blocking=False):
            raise ApiError(409, "a scan is already running")
        try:
            known = {} if d.get("all") else self._known_far_ends()
            report = run_scan(self.app("mlte_inventory"), self.app("mlte_ots_driver"), known,
                              float(SETTINGS.controller["scan_settle"]))
        finally:
            self._scan_lock.release()
        self.scan_attached.update(report.attached)
        inv = self.app("mlte_inventory")

        def name(dpid: int) -> str:
            sw = inv.switches.get(dpid)
            return sw.name if sw else f"{dpid:x}"

        state_file.save_attached(SETTINGS.controller.get("state_file", ""), self.scan_attached, name)
        self.last_scan = {
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
            "leftover_xcons": self.app("mlte_ots_driver").active(),
        }
        return self.last_scan

    def r_scan_result(self, q: dict, d: dict):
        if self.last_scan is None:
            raise ApiError(404, "no scan has run yet")
        return self.last_scan

    def _load_static(self, path: str) -> None:
        self.static_graph = load_vendor_graph(path)
        self.static_path = path
        JOURNAL.add("static_loaded", path=path)

    def r_static_load(self, q: dict, d: dict):
        """``{"path": FILE}`` loads a vendor file; ``{"path": ""}`` drops it."""
        path = d.get("path")
        if not isinstance(path, str):
            raise ApiError(400, "'path' must be a string")
        if not path:
            self.static_graph, self.static_path = None, ""
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
        self.app("mlte_inventory").rename(names)
        SETTINGS.host_names.update(host_names)
        JOURNAL.add("names", switches=len(names), hosts=len(host_names))  # the graph's node ids changed
        return {"ok": True, "named": len(names) + len(host_names)}
