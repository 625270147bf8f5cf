"""The web UI: login, reservation list/form/detail, multi-layer topology and events pages.

Server-rendered; the only script is ``static/chart.js`` (live utilization chart, polling the API with
the session cookie). Mutations go through the same :mod:`app.web.service` functions as the REST API.
"""
from __future__ import annotations

import math
from datetime import datetime, timezone
from functools import wraps
from typing import Any

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    make_response,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask import g as flask_g
from flask_wtf import FlaskForm
from sqlalchemy import select
from sqlalchemy.orm import Session, selectinload

from app.db.models import Circuit, Plan, Reservation, User
from app.db.states import (
    CANCELLABLE_STATES,
    DEGRADED,
    MODIFIABLE_STATES,
    PROVISIONING,
    RESERVED,
    RESTORING,
    STATES,
)
from app.web import monitor_read, restorations, service
from app.web.api.network import layers
from app.web.auth import check_owner, check_password, current_user, session_user, start_session
from app.web.context import advance_if_due, graph, now, read_session, state, write_tx
from app.web.drawing import CircuitLink, draw
from app.web.errors import ApiError
from app.web.forms import ActionForm, LoginForm, ModifyForm, ReservationForm
from app.web.listing import history, list_page
from app.web.sharing import LIVE_CIRCUIT_STATES, circuit_sharing, live_circuits
from app.web.throttle import login_keys
from app.web.validation import parse_create, parse_list, parse_modify

ui_bp = Blueprint("ui", __name__)


ERROR_TITLES = {400: "Bad request", 401: "Log in needed", 403: "Not yours", 404: "Not found",
                405: "Method not allowed", 409: "Conflict", 413: "Request too large", 429: "Too many requests",
                500: "Internal error", 503: "Service unavailable"}


def render_error(status: int, message: str):  # noqa: ANN201
    """An error page with the site's header and navigation. If the page cannot be rendered with the
    user's context (the error is that the database is gone), it is rendered without it — an error
    page must not fail in turn and leave the bare server page."""
    title = ERROR_TITLES.get(status, "Error")
    try:
        return render_template("error.html", status=status, title=title, message=message), status
    except Exception:  # noqa: BLE001 - whatever broke the request may break the context too
        flask_g.bare_error_page = True
        return render_template("error.html", status=status, title=title, message=message), status


def login_required(view):  # noqa: ANN001, ANN201
    @wraps(view)
    def wrapper(*args: Any, **kwargs: Any):  # noqa: ANN202
        user = current_user(read_session(), allow_session=True)
        if user is None:
            return redirect(url_for("ui.login", next=request.path))
        return view(user, *args, **kwargs)

    return wrapper


@ui_bp.app_template_filter("iso")
def _iso(ts: float | None) -> str:
    """Seconds precision for people; the API keeps the exact value."""
    if ts is None:
        return ""
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@ui_bp.app_template_filter("mbps")
def _mbps(value: float | None) -> str:
    """Bandwidth for people: plain decimals to 1 kbit/s (never ``1e-12``), thousands grouped."""
    if value is None:
        return ""
    if 0 < value < 0.001:
        return "< 0.001"
    text = f"{value:,.3f}".rstrip("0").rstrip(".")
    return text or "0"


@ui_bp.app_template_filter("endpoint")
def _endpoint(port: str, vlan: int | None) -> str:
    """``A:1`` or ``A:1 VLAN 100`` (``A:1.100`` read like a port number)."""
    return f"{port} VLAN {vlan}" if vlan else port


@ui_bp.app_context_processor
def _inject() -> dict[str, Any]:
    if flask_g.get("bare_error_page"):  # see render_error: no database reads
        return {"me": None, "action_form": None, "topology_source": None}
    user = session_user(read_session())
    topo = state().topology.describe(read_session(), now()) if user is not None else None
    return {"me": user, "action_form": ActionForm(), "topology_source": topo}


def _local_path(target: str) -> bool:
    """Only redirect after login to a path on this site (``//host`` and ``/\\host`` leave it)."""
    return target.startswith("/") and not target.startswith("//") and "\\" not in target and target.isprintable()


@ui_bp.route("/login", methods=["GET", "POST"])
def login():  # noqa: ANN201
    form = LoginForm()
    if form.validate_on_submit():
        throttle = state().login_throttle
        keys = login_keys(form.username.data, request.remote_addr)
        wait = throttle.retry_after(keys)
        if wait > 0:  # refused without looking at the password
            retry = max(1, math.ceil(wait))
            flash(f"too many failed logins: try again in {retry} s", "error")
            return render_template("login.html", form=form), 429, {"Retry-After": str(retry)}
        user = check_password(read_session(), form.username.data, form.password.data)
        if user is not None:
            throttle.succeeded(keys[0])
            if user.disabled:
                flash(f"user {user.name} is disabled: ask an admin to enable it", "error")
                return render_template("login.html", form=form), 403
            start_session(user)
            target = request.args.get("next", "")
            return redirect(target if _local_path(target) else url_for("ui.reservations"))
        throttle.failed(keys)
        flash("wrong user name or password", "error")
    return render_template("login.html", form=form), 200 if request.method == "GET" else 401


@ui_bp.post("/logout")
def logout():  # noqa: ANN201
    if ActionForm().validate_on_submit():
        session.clear()
    return redirect(url_for("ui.login"))


@ui_bp.get("/favicon.ico")
def favicon():  # noqa: ANN201
    """Browsers ask for /favicon.ico whatever the page links: the SVG icon, so no 404 is logged."""
    return current_app.send_static_file("favicon.svg")


@ui_bp.get("/")
def index():  # noqa: ANN201
    return redirect(url_for("ui.reservations"))


@ui_bp.get("/reservations")
@login_required
def reservations(user: User):  # noqa: ANN201
    args = {k: v for k, v in request.args.items() if v != ""}
    try:
        q = parse_list(args)
    except ApiError as exc:
        flash(f"filter: {exc.message}", "error")
        q = parse_list({})
    advance_if_due()
    rows, total = list_page(read_session(), user, q)
    return render_template("reservations.html", rows=rows, total=total, q=q, args=args, states=STATES)


def _utc(dt: datetime | None) -> str | None:
    """A form's naive ``datetime-local`` value, which the form labels as UTC, as ISO 8601."""
    return None if dt is None else dt.replace(tzinfo=timezone.utc).isoformat()


def _form_minute(ts: float) -> datetime:
    """Epoch seconds as the naive UTC minute a ``datetime-local`` input shows."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).replace(tzinfo=None, second=0, microsecond=0)


def _form_to_body(form: ReservationForm) -> dict[str, Any]:
    body: dict[str, Any] = {"name": form.name.data, "description": form.description.data or "",
                            "src": form.src.data, "dst": form.dst.data, "bandwidth": form.bandwidth.data,
                            "end": _utc(form.end.data), "mode": form.mode.data,
                            "protection": form.protection.data,
                            "src_vlan": form.src_vlan.data, "dst_vlan": form.dst_vlan.data}
    if form.start.data is not None:
        body["start"] = _utc(form.start.data)
    if form.ero.data:
        body["ero"] = form.ero.data.split()
    return body


def _error_text(exc: ApiError) -> str:
    """The message plus, for an admission rejection, what limited it."""
    text = exc.message
    if exc.extra.get("bottleneck") and str(exc.extra["bottleneck"]) not in text:
        text += f" (limited by {exc.extra['bottleneck']}"
        if exc.extra.get("available") is not None:
            text += f", {exc.extra['available']:g} Mbit/s free"
        text += ")"
    return text


def _attach_error(form: FlaskForm, exc: ApiError) -> bool:
    """Show ``exc`` next to the form field it names; False if no field of the form matches."""
    field = getattr(form, exc.field, None) if exc.field else None
    if field is None or not hasattr(field, "errors") or exc.field == "csrf_token":
        return False
    field.errors = [*field.errors, _error_text(exc)]
    return True


def _prefill_clone(form: ReservationForm, src: Reservation, t: float) -> None:
    """OSCARS "clone": the new form starts with the old reservation's parameters; a window that has
    already begun moves to start now with the same length."""
    form.name.data = f"copy of {src.name}"[:128]
    form.description.data = src.description
    form.src.data, form.src_vlan.data = src.src, src.src_vlan
    form.dst.data, form.dst_vlan.data = src.dst, src.dst_vlan
    form.bandwidth.data = src.bandwidth
    form.mode.data = src.mode
    form.protection.data = src.protection or "none"
    form.ero.data = " ".join(src.ero or ())
    if src.start_ts > t:
        form.start.data, form.end.data = _form_minute(src.start_ts), _form_minute(src.end_ts)
    else:
        form.start.data, form.end.data = None, _form_minute(t + (src.end_ts - src.start_ts) + 60)


@ui_bp.route("/reservations/new", methods=["GET", "POST"])
@login_required
def new_reservation(user: User):  # noqa: ANN201
    form = ReservationForm()
    error: str | None = None
    clone_of = None
    if request.method == "GET" and request.args.get("clone", "").isdigit():
        clone_of = int(request.args["clone"])
        _prefill_clone(form, _load(user, clone_of), now())
    if form.validate_on_submit():
        try:
            inp = parse_create(_form_to_body(form), now())
            with write_tx() as db:
                res = service.create(db, graph(db), user, inp, now(), state().hold_seconds, state().grooming)
                db.flush()
                res_id = res.id
                uses = [c.get("use") for c in (res.path or {}).get("circuits") or ()]
            groomed = ("; it rides an existing circuit" if "rides" in uses else
                       "; it lights a new circuit" if uses else "")  # grooming: which, said at once
            flash(f"reservation {res_id} is HELD{groomed}: commit it within {state().hold_seconds:.0f} s", "ok")
            return redirect(url_for("ui.reservation_detail", res_id=res_id))
        except ApiError as exc:
            if not _attach_error(form, exc):
                error = _error_text(exc)
    status = 400 if request.method == "POST" else 200
    return render_template("reservation_form.html", form=form, error=error, clone_of=clone_of,
                           endpoints=_endpoint_choices()), status


def _endpoint_choices() -> list[dict[str, str]]:
    """The form's endpoint picker from the served topology; none (typing only) while there is none."""
    from app.web.topology_source import TopologyUnavailable, endpoint_choices

    try:
        return endpoint_choices(graph(read_session()))
    except TopologyUnavailable:
        return []


def _load(user: User, res_id: int, db: Session | None = None) -> Reservation:
    """The reservation if ``user`` may see it; 404 / 403 pages otherwise."""
    res = (db or read_session()).get(Reservation, res_id) if 0 < res_id < 2**31 else None
    if res is None:
        abort(404, description=f"no reservation {res_id}: see the list of reservations")
    try:
        check_owner(user, res)
    except ApiError:
        abort(403)
    return res


def _modify_form(res: Reservation) -> ModifyForm:
    form = ModifyForm(prefix="modify")
    if not form.is_submitted():
        form.bandwidth.data = res.bandwidth
        form.end.data = _form_minute(res.end_ts)
    return form


def _detail_page(res: Reservation, modify_form: ModifyForm, status: int = 200):  # noqa: ANN202
    db = read_session()
    g = graph(db)
    path = res.path or {}
    drawing = draw(g, path_edges=tuple(path.get("edges", ())), path_nodes=tuple(path.get("nodes", ())),
                   circuit_edges=_circuit_edges(g, live_circuits(db)))
    chart_links = monitor_read.path_links(g, list(path.get("edges", ())))
    entries = history(db, res.id)
    names = {u.id: u.name for u in db.execute(select(User).where(
        User.id.in_({e.user_id for e in entries if e.user_id is not None}))).scalars()}
    rows = [(e, names.get(e.user_id, "system") if e.user_id is not None else _system(e.detail),
             _describe(e.action, e.detail)) for e in entries]
    plans = db.execute(select(Plan).where(Plan.reservation_id == res.id).order_by(Plan.id.desc()).limit(20)).scalars()
    return render_template("reservation_detail.html", res=res, drawing=drawing, history=rows,
                           chart_links=chart_links, modify_form=modify_form, plans=list(plans),
                           restorations=restorations.rows(db, g, res.id),
                           modifiable=res.state in MODIFIABLE_STATES, cancellable=CANCELLABLE_STATES), status


def _system(detail: dict[str, Any]) -> str:
    """Who made a change no user made: the controller says so in the detail, else the service's clock."""
    return "controller" if detail.get("by") == "controller" else "system"


def _describe(action: str, d: dict[str, Any]) -> str:
    """One line a person can read for an audit entry (the API's history has the raw values)."""
    if action == "transition":
        return f"{d.get('from')} → {d.get('to')}: {d.get('reason', '')}"
    if action == "modify":
        old, new = d.get("old", {}), d.get("new", {})
        parts = []
        if old.get("bandwidth") != new.get("bandwidth"):
            parts.append(f"bandwidth {old.get('bandwidth')} → {new.get('bandwidth')} Mbit/s")
        if old.get("end") != new.get("end"):
            parts.append(f"end {old.get('end')} → {new.get('end')}")
        return "; ".join(parts) or "no change"
    if action in ("install", "release"):
        verb = "installed" if action == "install" else "removed"
        circuits = ", ".join(d.get("circuits") or []) or "no circuit"
        return f"{verb}: {circuits}; {d.get('rules', 0)} packet rule(s)"
    if action == "create":
        return (f"{d.get('bandwidth', 0):g} Mbit/s {d.get('src')} → {d.get('dst')}, {d.get('start')} → {d.get('end')}"
                f", path {' → '.join(d.get('path') or [])}")
    return ", ".join(f"{k}={v}" for k, v in d.items())


@ui_bp.get("/reservations/<int:res_id>")
@login_required
def reservation_detail(user: User, res_id: int):  # noqa: ANN201
    advance_if_due()
    res = _load(user, res_id)
    return _detail_page(res, _modify_form(res))


@ui_bp.post("/reservations/<int:res_id>/modify")
@login_required
def modify_reservation(user: User, res_id: int):  # noqa: ANN201
    """Change bandwidth and/or end time; only the fields that differ from the current values are sent,
    so an untouched end (shown to the minute) keeps its seconds."""
    res = _load(user, res_id)
    form = _modify_form(res)
    if form.validate_on_submit():
        change: dict[str, Any] = {}
        if form.bandwidth.data is not None and form.bandwidth.data != res.bandwidth:
            change["bandwidth"] = form.bandwidth.data
        if form.end.data is not None and form.end.data != _form_minute(res.end_ts):
            change["end"] = _utc(form.end.data)
        if not change:
            flash("nothing changed", "ok")
            return redirect(url_for("ui.reservation_detail", res_id=res_id))
        try:
            with write_tx() as db:
                locked = _load(user, res_id, db)
                t = now()
                bandwidth, end = parse_modify(change, locked.start_ts, t)
                service.modify(db, graph(db), user, locked, bandwidth, end, t, groom=state().grooming)
            flash(f"reservation {res_id} modified: " + ", ".join(f"{k} {v}" for k, v in change.items()), "ok")
            return redirect(url_for("ui.reservation_detail", res_id=res_id))
        except ApiError as exc:
            if not _attach_error(form, exc):
                flash(_error_text(exc), "error")
    return _detail_page(_load(user, res_id), form, 400)


@ui_bp.post("/reservations/<int:res_id>/<action>")
@login_required
def reservation_action(user: User, res_id: int, action: str):  # noqa: ANN201
    if action not in ("commit", "cancel") or not ActionForm().validate_on_submit():
        abort(400)
    try:
        with write_tx() as db:
            res = _load(user, res_id, db)
            (service.commit if action == "commit" else service.cancel)(db, user, res, now())
        flash(f"reservation {res_id}: {action} done", "ok")
    except ApiError as exc:
        flash(exc.message, "error")
    return redirect(url_for("ui.reservation_detail", res_id=res_id))


def _circuit_edges(g: Any, live: list[Circuit]) -> tuple[str, ...]:
    """Edges to highlight as circuits: circuit packet links and active XCONs of the graph, plus the
    XCONs, fibres, end adaptations and packet link (once LLDP found it) of the circuits the controller
    recorded in the database."""
    keys = [k for k in g.edges_of_kind("packet") if g.edge(k).get("source") == "circuit"]
    keys += list(g.active_xcons())
    packet = set(g.edges_of_kind("packet"))
    for c in live:
        ports: set[str] = set()
        for x in c.xcons:
            a, b = f"{x.ots}:{x.in_port}", f"{x.ots}:{x.out_port}"
            ports |= {a, b}
            keys += [k for k in g.edges_of_kind("xcon") if set(g.edge_ends(k)) == {a, b}]
        keys += [k for k in g.edges_of_kind("optical") if set(g.edge_ends(k)) <= ports]
        for end in (c.a_end, c.z_end):
            sw, _, port = end.rpartition(":")
            if sw in g.g and port.isdigit():
                keys += g.edges_at_port(sw, int(port), kinds=("adaptation",))
        if monitor_read.link_key(c.a_end, c.z_end) in packet:
            keys.append(monitor_read.link_key(c.a_end, c.z_end))
    return tuple(dict.fromkeys(keys))


def _circuit_links(live: list[Circuit]) -> tuple[CircuitLink, ...]:
    """The lit circuits as packet-layer links, keyed as the monitor keys their utilization."""
    return tuple(CircuitLink(monitor_read.link_key(c.a_end, c.z_end), c.a_end.rpartition(":")[0],
                             c.z_end.rpartition(":")[0], f"circuit {c.name} ({c.capacity:g} Mbit/s)") for c in live)


def _topology_view(db: Session, g: Any, user: User) -> dict[str, Any]:
    """What the topology page shows and its live part re-renders: the drawing with the lit circuits,
    the circuits (lit, and the last released), the reservations booked but not lit yet or no longer
    (a failure broke their path: RESTORING, DEGRADED; the user's own; an admin's: all), the layer counts
    and the links the monitor samples."""
    live = live_circuits(db)
    booked = select(Reservation).where(Reservation.state.in_((RESERVED, PROVISIONING, RESTORING, DEGRADED)))
    if not user.is_admin:
        booked = booked.where(Reservation.owner_id == user.id)
    pending = list(db.execute(booked.order_by(Reservation.start_ts, Reservation.id).limit(20)).scalars())
    released = list(db.execute(select(Circuit).options(selectinload(Circuit.xcons))
                               .where(Circuit.state.not_in(LIVE_CIRCUIT_STATES))
                               .order_by(Circuit.updated_ts.desc(), Circuit.id.desc()).limit(10)).scalars())
    data = g.to_dict()
    counts = {"switches": len(g.nodes_of_kind("packet")), "hosts": len(g.nodes_of_kind("host")),
              "packet_links": len(g.edges_of_kind("packet")), "access": len(g.edges_of_kind("access")),
              "ots": len(g.nodes_of_kind("optical")), "oports": len(g.nodes_of_kind("oport")),
              "fibres": len(g.edges_of_kind("optical")), "xcons": len(g.edges_of_kind("xcon")),
              "active_xcons": len(g.active_xcons())}
    links = _circuit_links(live)
    monitored = list(dict.fromkeys([*g.edges_of_kind("packet"), *(c.key for c in links)]))
    return {"drawing": draw(g, circuit_edges=_circuit_edges(g, live), circuit_links=links), "circuits": live,
            "released": released, "pending": pending, "layers": layers(data), "counts": counts, "monitored": monitored,
            "link_of": {c.id: link.key for c, link in zip(live, links, strict=True)},
            "sharing": [s for s in circuit_sharing(live, user) if s["riders"]]}


@ui_bp.get("/topology")
@login_required
def topology(user: User):  # noqa: ANN201
    from app.web.topology_source import TopologyUnavailable

    advance_if_due()  # a booked window that started shows as PROVISIONING
    db = read_session()
    try:
        g = graph(db)
    except TopologyUnavailable as exc:  # --topology controller before the controller wrote a snapshot
        return render_template("topology_missing.html", message=exc.message), 503
    return render_template("topology.html", **_topology_view(db, g, user))


@ui_bp.get("/topology/live")
@login_required
def topology_live(user: User):  # noqa: ANN201
    """The topology page's live part (drawing, counts, circuits) as an HTML fragment, polled by
    ``static/topology.js``: with ``If-None-Match`` it is a 304 while nothing changed, so a page left
    open costs one small query set per poll and redraws only when a circuit or the graph changed."""
    from app.web.topology_source import TopologyUnavailable

    advance_if_due()  # a booked window that started shows as PROVISIONING
    db = read_session()
    try:
        g = graph(db)
    except TopologyUnavailable as exc:
        return render_error(503, exc.message)
    resp = make_response(render_template("_topology_live.html", **_topology_view(db, g, user)))
    resp.headers["Cache-Control"] = "no-cache"
    resp.add_etag()
    return resp.make_conditional(request)


@ui_bp.get("/events")
@login_required
def events(user: User):  # noqa: ANN201
    """The service's, controller's and monitor's events, and the plans the controller carried out (a
    plan that failed or was rolled back is an event already; one that succeeded is only in ``plans``)."""
    db = read_session()
    rows = monitor_read.merged_events(db, None, None, 200)
    plans = db.execute(select(Plan).where(Plan.state == "done").order_by(Plan.id.desc()).limit(200)).scalars()
    rows += [{"ts": p.finished_at, "kind": "plan.done", "severity": "info",
              "message": f"{p.kind} plan {p.id}{f' of reservation {p.reservation_id}' if p.reservation_id else ''} "
                         f"done: {len(p.steps)} step{'s' if len(p.steps) != 1 else ''} in "
                         f"{max(0.0, p.finished_at - p.started_at):.2f} s ({p.mode.replace('_', '-')})"}
             for p in plans]
    rows.sort(key=lambda r: r["ts"], reverse=True)
    return render_template("events.html", rows=rows[:200])
