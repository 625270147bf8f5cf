"""The OpenAPI 3.0 document of ``/api/v1`` (served at ``/api/v1/openapi.json``).

Written by hand next to the code and checked by schemathesis in tests/unit/web/test_schemathesis.py,
so the document and the behaviour cannot drift apart silently.
"""
from __future__ import annotations

from typing import Any

from app.db.states import STATES
from app.web.validation import MAX_BANDWIDTH, MIN_BANDWIDTH

_STR = {"type": "string"}
_DT = {"type": "string", "format": "date-time"}
_NULLABLE_DT = {"type": "string", "format": "date-time", "nullable": True}
_ENDPOINT = {"type": "string", "pattern": r"^[A-Za-z0-9_.\-]{1,48}:[0-9]{1,9}$", "example": "A:1"}
_VLAN = {"type": "integer", "minimum": 1, "maximum": 4094, "nullable": True}
_PROTECTION = {"type": "string", "enum": ["none", "1+1"],
               "description": "1+1: a working and a fibre-disjoint protection path, both lit; the ingress switch "
                              "fails over by itself (OpenFlow fast-failover group)"}
_BANDWIDTH = {"type": "number", "minimum": MIN_BANDWIDTH, "maximum": MAX_BANDWIDTH,
              "description": f"Mbit/s, at least {MIN_BANDWIDTH:g}"}
_ID = {"name": "res_id", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 1}}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict[str, Any]:
    text = {400: "invalid input (the error names the field)", 401: "missing or invalid bearer token",
            403: "not your reservation / admin only", 404: "no such object",
            409: "not admitted (bottleneck named) or illegal state transition",
            415: "Content-Type is not application/json", 503: "no topology available yet"}
    return {str(c): _json(_ref("Error"), text[c]) for c in codes}


def _op(op_id: str, summary: str, ok: dict[str, Any], errors: tuple[int, ...], *, params: list | None = None,
        body: dict[str, Any] | None = None, ok_code: str = "200", tag: str = "reservations") -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": op_id, "summary": summary, "tags": [tag],
                          "responses": {ok_code: ok, **_errors(*errors)}}
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
    return op


def _q(name: str, schema: dict[str, Any], description: str = "", required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema, "description": description}


SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object", "required": ["error"],
        "properties": {"error": {
            "type": "object", "required": ["status", "message", "field"],
            "properties": {
                "status": {"type": "integer"}, "message": _STR,
                "field": {"type": "string", "nullable": True,
                          "description": "the request field (or header) that caused the error"},
                "bottleneck": {"type": "string", "nullable": True,
                               "description": "edge key or optical port limiting the request"},
                "available": {"type": "number", "nullable": True},
                "state": {"type": "string"},
            },
        }},
    },
    "Path": {
        "type": "object", "nullable": True,
        "required": ["nodes", "edges", "oports", "xcons", "latency", "available"],
        "properties": {
            "nodes": {"type": "array", "items": _STR}, "edges": {"type": "array", "items": _STR},
            "oports": {"type": "array", "items": _STR},
            "xcons": {"type": "array", "items": {"type": "array", "items": _STR}},
            "latency": {"type": "number"}, "available": {"type": "number"},
            "protection": {"type": "object", "nullable": True,
                           "description": "a 1+1 reservation's protection path (the same fields): it shares no "
                                          "fibre, OTS port or adaptation port with this, the working path"},
        },
    },
    "ReservationCreate": {
        "type": "object", "additionalProperties": False, "required": ["name", "src", "dst", "bandwidth", "end"],
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 128},
            "description": {"type": "string", "maxLength": 4000},
            "src": _ENDPOINT, "src_vlan": _VLAN, "dst": _ENDPOINT, "dst_vlan": _VLAN,
            "bandwidth": _BANDWIDTH,
            "start": {**_DT, "nullable": True, "description": "default: now"},
            "end": _DT,
            "mode": {"type": "string", "enum": ["static", "elastic"], "default": "static"},
            "ero": {"type": "array", "minItems": 2, "maxItems": 64, "nullable": True,
                    "items": {"type": "string", "pattern": r"^[A-Za-z0-9_.:\-]{1,64}$"},
                    "description": "explicit route: node ids the path must follow"},
            "protection": {**_PROTECTION, "default": "none"},
        },
    },
    "ReservationModify": {
        "type": "object", "additionalProperties": False, "minProperties": 1,
        "properties": {"bandwidth": _BANDWIDTH, "end": _DT},
    },
    "FailRequest": {
        "type": "object", "additionalProperties": False,
        "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": 500}},
    },
    "Reservation": {
        "type": "object",
        "required": ["id", "name", "description", "src", "src_vlan", "dst", "dst_vlan", "bandwidth", "start",
                     "end", "mode", "state", "state_reason", "ero", "path", "owner", "hold_expires", "created",
                     "updated"],
        "properties": {
            "id": {"type": "integer"}, "name": _STR, "description": _STR, "src": _STR, "src_vlan": _VLAN,
            "dst": _STR, "dst_vlan": _VLAN, "bandwidth": {"type": "number"}, "start": _DT, "end": _DT,
            "mode": {"type": "string", "enum": ["static", "elastic"]}, "protection": _PROTECTION,
            "state": {"type": "string", "enum": list(STATES)},
            "state_reason": {"type": "string", "description": "why it is in this state (the failure reason "
                                                              "of a FAILED reservation)"},
            "ero": {"type": "array", "items": _STR, "nullable": True}, "path": _ref("Path"), "owner": _STR,
            "hold_expires": _NULLABLE_DT, "created": _DT, "updated": _DT,
            "provisioned_bandwidth": {"type": "number", "nullable": True,
                                      "description": "Mbit/s the controller gives it now: an elastic reservation "
                                                     "grows a unit at a time up to bandwidth (null: static or not lit)"},
        },
    },
    "ReservationDetail": {
        "allOf": [_ref("Reservation"), {
            "type": "object", "required": ["circuits", "rules"],
            "properties": {"circuits": {"type": "array", "items": _ref("Circuit"),
                                        "description": "circuits (with XCONs) the controller lit for it"},
                           "rules": {"type": "array", "items": _ref("Rule"),
                                     "description": "packet rules the controller installed for it"}}}],
    },
    "ReservationList": {
        "type": "object", "required": ["items", "total", "limit", "offset"],
        "properties": {"items": {"type": "array", "items": _ref("Reservation")}, "total": {"type": "integer"},
                       "limit": {"type": "integer"}, "offset": {"type": "integer"}},
    },
    "AuditList": {
        "type": "object", "required": ["items"],
        "properties": {"items": {"type": "array", "items": {
            "type": "object", "required": ["id", "time", "user_id", "action", "detail"],
            "properties": {"id": {"type": "integer"}, "time": _DT, "user_id": {"type": "integer", "nullable": True},
                           "action": _STR, "detail": {"type": "object"}}}}},
    },
    "RestorationList": {
        "type": "object", "required": ["items"],
        "properties": {"items": {"type": "array", "items": {
            "type": "object",
            "required": ["id", "cause", "outcome", "reason", "attempt", "detected", "started", "finished", "took_s",
                         "old_path", "new_path"],
            "properties": {"id": {"type": "integer"}, "cause": _STR,
                           "outcome": {"type": "string", "enum": ["restored", "degraded", "failed", "reverted", "revert_failed"]},
                           "reason": _STR, "attempt": {"type": "integer"}, "detected": _DT, "started": _DT,
                           "finished": {**_DT, "nullable": True},
                           "took_s": {"type": "number", "nullable": True,
                                      "description": "seconds from detection to the outcome"},
                           "old_path": {"type": "array", "items": _STR},
                           "new_path": {"type": "array", "items": _STR}}}}},
    },
    "Available": {
        "type": "object", "required": ["src", "dst", "start", "end", "available", "path"],
        "properties": {"src": _STR, "dst": _STR, "start": _DT, "end": _DT, "available": {"type": "number"},
                       "path": _ref("Path")},
    },
    "Topology": {
        "type": "object", "required": ["graph", "layers"],
        "properties": {
            "graph": {"type": "object", "required": ["nodes", "links"],
                      "properties": {"nodes": {"type": "array", "items": {"type": "object"}},
                                     "links": {"type": "array", "items": {"type": "object"}}}},
            "layers": {"type": "object", "required": ["packet", "optical", "adaptation"],
                       "properties": {"packet": {"type": "object"}, "optical": {"type": "object"},
                                      "adaptation": {"type": "object"}}},
        },
    },
    "Circuit": {
        "type": "object", "required": ["id", "name", "reservation_id", "a_end", "z_end", "capacity", "state",
                                       "xcons", "created", "updated"],
        "properties": {
            "id": {"type": "integer"}, "name": _STR, "reservation_id": {"type": "integer", "nullable": True},
            "a_end": _STR, "z_end": _STR, "capacity": {"type": "number"},
            "state": {"type": "string", "description": "ACTIVE (installed) or RELEASED"},
            "xcons": {"type": "array", "items": {
                "type": "object", "required": ["ots", "in_port", "out_port", "active"],
                "properties": {"ots": _STR, "in_port": {"type": "integer"}, "out_port": {"type": "integer"},
                               "active": {"type": "boolean"}}}},
            "created": _DT, "updated": _DT},
    },
    "CircuitList": {
        "type": "object", "required": ["items"],
        "properties": {"items": {"type": "array", "items": _ref("Circuit")}},
    },
    "CircuitSharing": {
        "type": "object", "required": ["items"],
        "properties": {"items": {"type": "array", "items": {
            "type": "object",
            "required": ["circuit", "a_end", "z_end", "link", "capacity", "xcons", "rows", "riders", "booked", "free",
                         "shared"],
            "properties": {
                "circuit": _STR, "a_end": _STR, "z_end": _STR,
                "link": {"type": "string", "description": "the monitor's key of its packet link (/utilization)"},
                "capacity": {"type": "number"},
                "xcons": {"type": "array", "items": {"type": "array", "items": {}}},
                "rows": {"type": "array", "items": {"type": "integer"}, "description": "its rows in /circuits"},
                "riders": {"type": "array", "items": {
                    "type": "object", "required": ["id", "bandwidth", "vlan", "state", "mode"],
                    "properties": {"id": {"type": "integer"}, "bandwidth": {"type": "number"}, "vlan": _VLAN,
                                   "state": _STR, "mode": _STR,
                                   "name": {"type": "string", "description": "the owner's and admins' only"}}}},
                "booked": {"type": "number", "description": "Mbit/s its riders book together"},
                "free": {"type": "number", "nullable": True,
                         "description": "capacity minus booked (null: no reservation rides it)"},
                "shared": {"type": "boolean"}}}}},
    },
    "Rule": {
        "type": "object", "description": "a packet-switch flow rule the controller installed for a reservation",
        "required": ["id", "switch", "table", "priority", "cookie", "match", "actions", "installed", "installed_at",
                     "removed_at"],
        "properties": {
            "id": {"type": "integer"}, "switch": _STR, "table": {"type": "integer"}, "priority": {"type": "integer"},
            "cookie": {"type": "string", "pattern": "^0x[0-9a-f]{16}$"}, "match": {"type": "object"},
            "actions": {"type": "array", "items": {}}, "installed": {"type": "boolean"},
            "installed_at": _DT, "removed_at": _NULLABLE_DT},
    },
    "PlanList": {
        "type": "object", "required": ["items"],
        "properties": {"items": {"type": "array", "items": {
            "type": "object",
            "required": ["id", "kind", "mode", "reservation_id", "state", "error", "started", "finished", "steps"],
            "properties": {
                "id": {"type": "integer"}, "kind": _STR, "mode": {"type": "string", "enum": ["ordered", "one_shot"]},
                "reservation_id": {"type": "integer", "nullable": True},
                "state": {"type": "string", "enum": ["done", "failed", "rolled_back"]},
                "error": {"type": "string", "nullable": True}, "started": _DT, "finished": _DT,
                "steps": {"type": "array", "items": {
                    "type": "object",
                    "required": ["id", "kind", "target", "deps", "started_at", "finished_at", "ok", "error"],
                    "properties": {"id": {}, "kind": _STR, "target": _STR, "deps": {"type": "array", "items": {}},
                                   "started_at": _NULLABLE_DT, "finished_at": _NULLABLE_DT,
                                   "ok": {"type": "boolean", "nullable": True},
                                   "error": {"type": "string", "nullable": True}}}}}}}},
    },
    "Utilization": {
        "type": "object", "required": ["since", "as_of", "series"],
        "properties": {"since": _DT, "as_of": _DT, "series": {"type": "object", "additionalProperties": {
            "type": "array", "items": {"type": "object", "required": ["time", "mbps", "utilization"],
                                       "properties": {"time": _DT, "mbps": {"type": "number"},
                                                      "utilization": {"type": "number"}}}}}},
    },
    "EventList": {
        "type": "object", "required": ["items"],
        "properties": {"items": {"type": "array", "items": {
            "type": "object", "required": ["id", "time", "kind", "severity", "message", "detail"],
            "properties": {"id": {"type": "integer"}, "time": _DT, "kind": _STR,
                           "severity": {"type": "string", "enum": ["info", "warning", "error"]},
                           "message": _STR, "detail": {"type": "object"}}}}},
    },
    "Me": {"type": "object", "required": ["id", "name", "admin"],
           "properties": {"id": {"type": "integer"}, "name": _STR, "admin": {"type": "boolean"}}},
}

_LIST_PARAMS = [
    _q("state", {"type": "string", "pattern": "^(" + "|".join(STATES) + ")(,(" + "|".join(STATES) + "))*$"},
       "comma-separated states"),
    _q("endpoint", {"type": "string", "pattern": r"^[A-Za-z0-9_.:\-]{1,64}$"},
       "a switch (any of its ports: `A`) or exactly one switch port (`A:1`, not `A:10`)"),
    _q("from", _DT, "only reservations whose window ends after this"),
    _q("to", _DT, "only reservations whose window starts before this"),
    _q("min_bandwidth", {"type": "number", "minimum": 0}),
    _q("max_bandwidth", {"type": "number", "minimum": 0}),
    _q("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}),
    _q("offset", {"type": "integer", "minimum": 0, "maximum": 10**9, "default": 0}),
]

_RES = _json(_ref("Reservation"), "the reservation")
_MUT_ERRORS = (400, 401, 403, 404, 409, 503)


_LINKS = {name: {"operationId": op_id, "parameters": {"res_id": "$response.body#/id"}}
          for name, op_id in (("get", "getReservation"), ("commit", "commitReservation"),
                              ("cancel", "cancelReservation"), ("modify", "modifyReservation"),
                              ("history", "reservationHistory"), ("fail", "failReservation"))}

#: A valid request (far-future window, the Fig. 2 testbed's host ports) used as the documented example.
CREATE_EXAMPLE = {"name": "backup A to C", "description": "nightly backup", "src": "A:1", "dst": "C:3",
                  "bandwidth": 2.0, "start": "2099-01-01T00:00:00Z", "end": "2099-01-01T02:00:00Z",
                  "mode": "static"}


def document() -> dict[str, Any]:
    """The OpenAPI document as a dict."""
    create = _op("createReservation", "Create a reservation (state HELD); admission-checked",
                 _json(_ref("Reservation"), "held"), (400, 401, 409, 415, 503), body=_ref("ReservationCreate"),
                 ok_code="201")
    create["responses"]["201"]["links"] = _LINKS
    create["requestBody"]["content"]["application/json"]["example"] = CREATE_EXAMPLE
    paths = {
        "/api/v1/reservations": {
            "post": create,
            "get": _op("listReservations", "List reservations (own; admins: all) with filters and pagination",
                       _json(_ref("ReservationList"), "a page"), (400, 401), params=_LIST_PARAMS),
        },
        "/api/v1/reservations/{res_id}": {
            "get": _op("getReservation", "Get one reservation with its circuits and packet rules",
                       _json(_ref("ReservationDetail"), "the reservation"), (401, 403, 404), params=[_ID]),
            "patch": _op("modifyReservation", "Modify bandwidth and/or end time (re-checked by admission control;"
                         " RESERVED/PROVISIONING/ACTIVE on their current path)", _RES,
                         (*_MUT_ERRORS, 415), params=[_ID], body=_ref("ReservationModify")),
        },
        "/api/v1/reservations/{res_id}/commit": {
            "post": _op("commitReservation", "HELD → RESERVED (409 once the hold expired or the window ended)", _RES, _MUT_ERRORS, params=[_ID])},
        "/api/v1/reservations/{res_id}/cancel": {
            "post": _op("cancelReservation", "Cancel (HELD, RESERVED, PROVISIONING or ACTIVE → CANCELLED)", _RES, _MUT_ERRORS, params=[_ID])},
        "/api/v1/reservations/{res_id}/fail": {
            "post": _op("failReservation", "Mark FAILED (admins / the controller)", _RES, (*_MUT_ERRORS, 415), params=[_ID],
                        body=_ref("FailRequest"))},
        "/api/v1/reservations/{res_id}/history": {
            "get": _op("reservationHistory", "Audit log of one reservation", _json(_ref("AuditList"), "entries"), (401, 403, 404),
                       params=[_ID])},
        "/api/v1/reservations/{res_id}/restorations": {
            "get": _op("reservationRestorations", "How the controller repaired the reservation after failures "
                       "(newest first)", _json(_ref("RestorationList"), "restorations"), (401, 403, 404),
                       params=[_ID])},
        "/api/v1/available": {
            "get": _op("availableBandwidth", "What-if: available bandwidth between two ports over a window",
                       _json(_ref("Available"), "the widest feasible path"), (400, 401, 503),
                       params=[_q("src", _ENDPOINT, required=True), _q("dst", _ENDPOINT, required=True),
                               _q("start", _DT, "default: now"), _q("end", _DT, required=True),
                               _q("protection", {**_PROTECTION, "default": "none"},
                                  "1+1: the most both paths of a disjoint pair carry (path.protection)")])},
        "/api/v1/topology": {
            "get": _op("getTopology", "The multi-layer topology (packet + optical layers)", _json(_ref("Topology"), "graph"),
                       (400, 401, 503), tag="network")},
        "/api/v1/circuits": {
            "get": _op("listCircuits", "Optical circuits and their XCONs", _json(_ref("CircuitList"), "circuits"), (400, 401),
                       params=[_q("state", {"type": "string", "enum": ["ACTIVE", "RELEASED"]})], tag="network")},
        "/api/v1/circuits/sharing": {
            "get": _op("circuitSharing", "Per lit circuit, the reservations riding it and what is free on it",
                       _json(_ref("CircuitSharing"), "one item per lit circuit"), (400, 401), tag="network")},
        "/api/v1/plans": {
            "get": _op("listPlans", "Update plans the controller executed (provision, release...), newest first",
                       _json(_ref("PlanList"), "plans"), (400, 401, 403, 404),
                       params=[_q("reservation", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                                  "only the plans of this reservation"),
                               _q("limit", {"type": "integer", "minimum": 1, "maximum": 500, "default": 50})],
                       tag="network")},
        "/api/v1/utilization": {
            "get": _op("getUtilization", "Link utilization time series", _json(_ref("Utilization"), "series"), (400, 401),
                       params=[{**_q("link", {"type": "array", "items": {"type": "string", "minLength": 1,
                                                                         "maxLength": 128}}),
                                "style": "form", "explode": True},
                               _q("since", _DT, "default: 5 minutes ago"),
                               _q("limit", {"type": "integer", "minimum": 1, "maximum": 20000})],
                       tag="telemetry")},
        "/api/v1/events": {
            "get": _op("listEvents", "Controller and service events, newest first", _json(_ref("EventList"), "events"),
                       (400, 401), params=[_q("since", _DT), _q("kind", {"type": "string", "maxLength": 64}),
                                           _q("limit", {"type": "integer", "minimum": 1, "maximum": 1000})],
                       tag="telemetry")},
        "/api/v1/me": {"get": _op("getMe", "The authenticated user", _json(_ref("Me"), "user"), (400, 401), tag="auth")},
    }
    return {
        "openapi": "3.0.3",
        "info": {"title": "mlte reservation service", "version": "1.0.0",
                 "description": "Bandwidth reservations over a multi-layer packet + optical network "
                                "(hold → commit → provisioning → active → finished, or cancel), with "
                                "admission control by the mlte PCE; the controller lights them."},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {"schemas": SCHEMAS,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
