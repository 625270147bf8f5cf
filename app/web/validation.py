"""Input checking for the REST API and the web form: every error names the offending field.

Kept free of Flask so the same rules serve JSON bodies, query strings and HTML forms.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from app.web.errors import ApiError
from app.web.states import STATES
from app.web.timeutil import parse_iso

ENDPOINT_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,48}:[0-9]{1,9}$")
NODE_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")
MAX_BANDWIDTH = 1e9  # Mbit/s (1 Pbit/s): beyond this the number is nonsense, not merely infeasible
#: Mbit/s (1 kbit/s): the smallest bandwidth a reservation may ask for (API, UI form, OpenAPI). Below
#: it an amount is indistinguishable from float noise and says nothing a network can honour.
MIN_BANDWIDTH = 0.001
MAX_WINDOW = 366 * 86400.0  # a reservation lasts at most a year
MAX_PAST = 300.0  # a start time may lie at most this far in the past (clock skew, slow forms)
MODES = ("static", "elastic")
PROTECTIONS = ("none", "1+1")  # 1+1: a working and a fibre-disjoint protection path, both lit
#: 9999-01-01T00:00Z: later instants (e.g. 9999-12-31T23:00-12:00) have no ISO 8601 form in UTC
MAX_TIMESTAMP = 253370764800.0

CREATE_FIELDS = {"name", "description", "src", "src_vlan", "dst", "dst_vlan", "bandwidth", "start", "end",
                 "mode", "ero", "protection"}
MODIFY_FIELDS = {"bandwidth", "end"}


@dataclass
class ReservationInput:
    name: str
    description: str
    src: str
    src_vlan: int | None
    dst: str
    dst_vlan: int | None
    bandwidth: float
    start: float
    end: float
    mode: str
    ero: list[str] | None
    protection: str = "none"


def _require_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError("request body must be a JSON object", field="body")
    return body


def _unknown(body: dict[str, Any], allowed: set[str]) -> None:
    for key in body:
        if key not in allowed:
            raise ApiError(f"unknown field {key!r} (allowed: {', '.join(sorted(allowed))})", field=str(key))


#: Bidirectional-text controls: they make a name display as something else ("Trojan Source").
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def bad_character(value: str, *, multiline: bool = False) -> str | None:
    """A description of the first character a name (or, ``multiline``, a text) must not contain."""
    import unicodedata

    for ch in value:
        if ch in BIDI_CONTROLS:
            return f"a bidirectional-text control character (U+{ord(ch):04X})"
        if unicodedata.category(ch) == "Cc" and not (multiline and ch in "\t\n\r"):
            return "NUL characters" if ch == "\x00" else f"a control character (U+{ord(ch):04X})"
    return None


def check_string(value: Any, field: str, *, max_len: int, min_len: int = 0, multiline: bool = False) -> str:
    if not isinstance(value, str):
        raise ApiError(f"{field} must be a string", field=field)
    if not min_len <= len(value) <= max_len:
        raise ApiError(f"{field} must be {min_len}..{max_len} characters long", field=field)
    bad = bad_character(value, multiline=multiline)
    if bad:
        raise ApiError(f"{field} must not contain {bad}", field=field)
    return value


def check_bandwidth(value: Any, field: str = "bandwidth") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(f"{field} must be a number (Mbit/s)", field=field)
    bw = float(value)
    if not math.isfinite(bw) or bw <= 0:
        raise ApiError(f"{field} must be a positive number of Mbit/s, got {value}", field=field)
    if bw < MIN_BANDWIDTH:
        raise ApiError(f"{field} must be at least {MIN_BANDWIDTH:g} Mbit/s, got {value}", field=field)
    if bw > MAX_BANDWIDTH:
        raise ApiError(f"{field} {bw:g} Mbit/s is absurd (limit {MAX_BANDWIDTH:g})", field=field)
    return bw


def check_time(value: Any, field: str) -> float:
    try:
        ts = parse_iso(value)
    except (ValueError, TypeError, OverflowError):
        raise ApiError(f"{field} must be an ISO 8601 date-time, e.g. 2030-01-01T12:00:00Z", field=field) from None
    if not math.isfinite(ts) or not 0 <= ts < MAX_TIMESTAMP:
        raise ApiError(f"{field} must lie between 1970 and 9999 (UTC)", field=field)
    return ts


def check_endpoint(value: Any, field: str) -> str:
    if not isinstance(value, str) or not ENDPOINT_RE.match(value):
        raise ApiError(f"{field} must be a switch port 'SWITCH:PORT', e.g. 'A:1'", field=field)
    return value


def check_vlan(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4094:
        raise ApiError(f"{field} must be an integer VLAN id 1..4094 or null", field=field)
    return value


def check_protection(value: Any) -> str:
    if not isinstance(value, str) or value not in PROTECTIONS:
        raise ApiError(f"protection must be one of {', '.join(repr(p) for p in PROTECTIONS)}, got {value!r}",
                       field="protection")
    return value


def check_window(start: float, end: float, now: float, *, start_field: str = "start",
                 start_fixed: bool = False) -> None:
    """The window rules of every request that names one (create, modify, what-if), in one place.

    ``start_fixed``: the start is already stored (a modify of a running reservation), so it may lie
    in the past; only the end is checked.
    """
    if end <= start:
        raise ApiError("end must be after start", field="end")
    if end - start > MAX_WINDOW:
        raise ApiError("the window may last at most 366 days", field="end")
    if end <= now:
        raise ApiError("end must lie in the future", field="end")
    if not start_fixed and start < now - MAX_PAST:
        raise ApiError(f"{start_field} lies more than {MAX_PAST:.0f} s in the past", field=start_field)


def parse_create(body: Any, now: float) -> ReservationInput:
    """Check a create request; raise :class:`ApiError` naming the first bad field."""
    body = _require_object(body)
    _unknown(body, CREATE_FIELDS)
    for required in ("name", "src", "dst", "bandwidth", "end"):
        if required not in body:
            raise ApiError(f"missing required field {required!r}", field=required)
    name = check_string(body["name"], "name", min_len=1, max_len=128)
    description = check_string(body.get("description", ""), "description", max_len=4000, multiline=True)
    src = check_endpoint(body["src"], "src")
    dst = check_endpoint(body["dst"], "dst")
    if src == dst:
        raise ApiError("dst must differ from src", field="dst")
    src_vlan = check_vlan(body.get("src_vlan"), "src_vlan")
    dst_vlan = check_vlan(body.get("dst_vlan"), "dst_vlan")
    bandwidth = check_bandwidth(body["bandwidth"])
    start = check_time(body["start"], "start") if body.get("start") is not None else now
    end = check_time(body["end"], "end")
    check_window(start, end, now)
    mode = body.get("mode", "static")
    if mode not in MODES:
        raise ApiError(f"mode must be one of {', '.join(MODES)}", field="mode")
    protection = check_protection(body.get("protection", "none"))
    ero = body.get("ero")
    if ero is not None:
        if not isinstance(ero, list) or not 2 <= len(ero) <= 64:
            raise ApiError("ero must be a list of 2..64 node ids", field="ero")
        for hop in ero:
            if not isinstance(hop, str) or not NODE_RE.match(hop):
                raise ApiError(f"ero hop {hop!r} is not a node id", field="ero")
    return ReservationInput(name, description, src, src_vlan, dst, dst_vlan, bandwidth, start, end, mode, ero,
                            protection)


def parse_modify(body: Any, start: float, now: float) -> tuple[float | None, float | None]:
    """Check a modify request (bandwidth and/or end); return the new values (None = unchanged)."""
    body = _require_object(body)
    _unknown(body, MODIFY_FIELDS)
    if not body:
        raise ApiError("give bandwidth and/or end to modify", field="body")
    bandwidth = check_bandwidth(body["bandwidth"]) if "bandwidth" in body else None
    end = check_time(body["end"], "end") if "end" in body else None
    if end is not None:
        check_window(start, end, now, start_fixed=True)
    return bandwidth, end


@dataclass
class ListQuery:
    states: list[str]
    endpoint: str | None
    time_from: float | None
    time_to: float | None
    min_bandwidth: float | None
    max_bandwidth: float | None
    limit: int
    offset: int


LIST_PARAMS = {"state", "endpoint", "from", "to", "min_bandwidth", "max_bandwidth", "limit", "offset"}


def _int_param(args: dict[str, str], key: str, default: int, lo: int, hi: int) -> int:
    if key not in args:
        return default
    try:
        value = int(args[key])
    except ValueError:
        raise ApiError(f"{key} must be an integer", field=key) from None
    if not lo <= value <= hi:
        raise ApiError(f"{key} must be in {lo}..{hi}", field=key)
    return value


def _float_param(args: dict[str, str], key: str) -> float | None:
    if key not in args:
        return None
    try:
        value = float(args[key])
    except ValueError:
        raise ApiError(f"{key} must be a number", field=key) from None
    if not math.isfinite(value) or value < 0:
        raise ApiError(f"{key} must be a finite number >= 0", field=key)
    return value


def parse_list(args: dict[str, str]) -> ListQuery:
    """Check the list filters (query string)."""
    for key in args:
        if key not in LIST_PARAMS:
            raise ApiError(f"unknown query parameter {key!r}", field=key)
    states = [s for s in args.get("state", "").split(",") if s]
    for s in states:
        if s not in STATES:
            raise ApiError(f"state must be one of {', '.join(STATES)}", field="state")
    endpoint = args.get("endpoint") or None
    if endpoint is not None and not NODE_RE.match(endpoint):
        raise ApiError("endpoint must be a switch or switch port, e.g. 'A' or 'A:1'", field="endpoint")
    time_from = check_time(args["from"], "from") if "from" in args else None
    time_to = check_time(args["to"], "to") if "to" in args else None
    if time_from is not None and time_to is not None and time_to < time_from:
        raise ApiError("to must not be before from", field="to")
    return ListQuery(states, endpoint, time_from, time_to, _float_param(args, "min_bandwidth"),
                     _float_param(args, "max_bandwidth"), _int_param(args, "limit", 50, 1, 500),
                     _int_param(args, "offset", 0, 0, 10**9))
