"""The web UI: login, reservation list/form/detail, multi-layer topology and events pages.

Server-rendered; the only script is ``static/chart.js`` (live utilization chart, polling the API with
the session cookie). Mutations go through the same :mod:`app.web.service` functions as the REST API.
"""
from __future__ import annotations

from datetime import timezone
from functools import wraps
from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, session, url_for
from sqlalchemy import func, or_, select
from sqlalchemy.orm import selectinload

from app.web import monitor_read, service
from app.web.api.network import layers
from app.web.auth import check_owner, check_password, current_user
from app.web.context import advance_if_due, graph, now, read_session, state, write_tx
from app.web.drawing import draw
from app.web.errors import ApiError
from app.web.forms import ActionForm, LoginForm, ReservationForm
from app.web.models import Circuit, Reservation, User
from app.web.states import STATES
from app.web.timeutil import to_iso
from app.web.validation import parse_create, parse_list

ui_bp = Blueprint("ui", __name__)


def render_error(status: int, message: str):  # noqa: ANN201
    return render_template("error.html", status=status, message=message), status


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
    text = to_iso(ts)
    return "" if text is None else text.replace("T", " ").replace("Z", " UTC")


@ui_bp.app_context_processor
def _inject() -> dict[str, Any]:
    uid = session.get("user_id")
    user = read_session().get(User, uid) if uid is not None else None
    return {"me": user, "action_form": ActionForm()}


@ui_bp.route("/login", methods=["GET", "POST"])
def login():  # noqa: ANN201
    form = LoginForm()
    if form.validate_on_submit():
        user = check_password(read_session(), form.username.data, form.password.data)
        if user is not None:
            session.clear()
            session["user_id"] = user.id
            target = request.args.get("next", "")
            return redirect(target if target.startswith("/") and not target.startswith("//")
                            else url_for("ui.reservations"))
        flash("wrong user name or password", "error")
    return render_template("login.html", form=form), 200 if request.method == "GET" else 401


@ui_bp.post("/logout")
def logout():  # noqa: ANN201
    if ActionForm().validate_on_submit():
        session.clear()
    return redirect(url_for("ui.login"))


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
    stmt = select(Reservation).options(selectinload(Reservation.owner))
    if not user.is_admin:
        stmt = stmt.where(Reservation.owner_id == user.id)
    if q.states:
        stmt = stmt.where(Reservation.state.in_(q.states))
    if q.endpoint:
        ep = q.endpoint if ":" in q.endpoint else q.endpoint + ":"
        stmt = stmt.where(or_(Reservation.src.startswith(ep, autoescape=True),
                              Reservation.dst.startswith(ep, autoescape=True)))
    if q.min_bandwidth is not None:
        stmt = stmt.where(Reservation.bandwidth >= q.min_bandwidth)
    if q.max_bandwidth is not None:
        stmt = stmt.where(Reservation.bandwidth <= q.max_bandwidth)
    if q.time_from is not None:
        stmt = stmt.where(Reservation.end_ts > q.time_from)
    if q.time_to is not None:
        stmt = stmt.where(Reservation.start_ts < q.time_to)
    db = read_session()
    total = db.execute(select(func.count()).select_from(stmt.subquery())).scalar_one()
    rows = list(db.execute(stmt.order_by(Reservation.id.desc()).limit(q.limit).offset(q.offset)).scalars())
    return render_template("reservations.html", rows=rows, total=total, q=q, args=args, states=STATES)


def _form_to_body(form: ReservationForm) -> dict[str, Any]:
    def iso(dt: Any) -> str | None:
        return None if dt is None else dt.replace(tzinfo=timezone.utc).isoformat()

    body: dict[str, Any] = {"name": form.name.data, "description": form.description.data or "",
                            "src": form.src.data, "dst": form.dst.data, "bandwidth": form.bandwidth.data,
                            "end": iso(form.end.data), "mode": form.mode.data,
                            "src_vlan": form.src_vlan.data, "dst_vlan": form.dst_vlan.data}
    if form.start.data is not None:
        body["start"] = iso(form.start.data)
    if form.ero.data:
        body["ero"] = form.ero.data.split()
    return body


@ui_bp.route("/reservations/new", methods=["GET", "POST"])
@login_required
def new_reservation(user: User):  # noqa: ANN201
    form = ReservationForm()
    error: ApiError | None = None
    if form.validate_on_submit():
        try:
            inp = parse_create(_form_to_body(form), now())
            with write_tx() as db:
                res = service.create(db, graph(db), user, inp, now(), state().hold_seconds)
                db.flush()
                res_id = res.id
            flash(f"reservation {res_id} is HELD: commit it within {state().hold_seconds:.0f} s", "ok")
            return redirect(url_for("ui.reservation_detail", res_id=res_id))
        except ApiError as exc:
            error = exc
            if exc.field and hasattr(form, exc.field):
                getattr(form, exc.field).errors = [*getattr(form, exc.field).errors, exc.message]
    status = 400 if request.method == "POST" else 200
    return render_template("reservation_form.html", form=form, error=error), status


def _load(user: User, res_id: int) -> Reservation:
    res = read_session().get(Reservation, res_id) if 0 < res_id < 2**31 else None
    if res is None:
        abort(404)
    try:
        check_owner(user, res)
    except ApiError:
        abort(403)
    return res


@ui_bp.get("/reservations/<int:res_id>")
@login_required
def reservation_detail(user: User, res_id: int):  # noqa: ANN201
    advance_if_due()
    res = _load(user, res_id)
    db = read_session()
    g = graph(db)
    path = res.path or {}
    drawing = draw(g, path_edges=tuple(path.get("edges", ())), path_nodes=tuple(path.get("nodes", ())),
                   circuit_edges=_circuit_edges(g))
    history = service_history(res.id)
    return render_template("reservation_detail.html", res=res, drawing=drawing, history=history,
                           chart_links=[e for e in path.get("edges", []) if g.g.has_edge(*g.edge_ends(e), e)]
                           if path else [])


def service_history(res_id: int) -> list[Any]:
    from app.web.models import AuditEntry

    return list(read_session().execute(select(AuditEntry).where(
        AuditEntry.entity == "reservation", AuditEntry.entity_id == res_id).order_by(AuditEntry.id)).scalars())


@ui_bp.post("/reservations/<int:res_id>/<action>")
@login_required
def reservation_action(user: User, res_id: int, action: str):  # noqa: ANN201
    if action not in ("commit", "cancel") or not ActionForm().validate_on_submit():
        abort(400)
    try:
        with write_tx() as db:
            res = db.get(Reservation, res_id) if 0 < res_id < 2**31 else None
            if res is None:
                abort(404)
            check_owner(user, res)
            (service.commit if action == "commit" else service.cancel)(db, user, res, now())
        flash(f"reservation {res_id}: {action} done", "ok")
    except ApiError as exc:
        flash(exc.message, "error")
    return redirect(url_for("ui.reservation_detail", res_id=res_id))


def _circuit_edges(g: Any) -> tuple[str, ...]:
    """Edges to highlight as circuits: circuit packet links and active XCONs of the graph, plus the
    XCONs and end adaptations of the circuits the controller recorded in the database."""
    keys = [k for k in g.edges_of_kind("packet") if g.edge(k).get("source") == "circuit"]
    keys += list(g.active_xcons())
    rows = read_session().execute(select(Circuit).options(selectinload(Circuit.xcons))
                                  .where(Circuit.state.in_(("ACTIVE", "UP", "PLANNED")))).scalars()
    for c in rows:
        ports: set[str] = set()
        for x in c.xcons:
            a, b = f"{x.ots}:{x.in_port}", f"{x.ots}:{x.out_port}"
            ports |= {a, b}
            keys += [k for k in g.edges_of_kind("xcon") if set(g.edge_ends(k)) == {a, b}]
        keys += [k for k in g.edges_of_kind("optical") if set(g.edge_ends(k)) <= ports]
        for end in (c.a_end, c.z_end):
            sw, _, port = end.rpartition(":")
            if sw in g.g and port.isdigit():
                keys += g.edges_at_port(sw, int(port), kinds=("adaptation", "packet"))
    return tuple(dict.fromkeys(keys))


@ui_bp.get("/topology")
@login_required
def topology(user: User):  # noqa: ANN201
    db = read_session()
    g = graph(db)
    circuits = list(db.execute(select(Circuit).options(selectinload(Circuit.xcons))
                               .order_by(Circuit.id)).scalars())
    data = g.to_dict()
    return render_template("topology.html", drawing=draw(g, circuit_edges=_circuit_edges(g)), circuits=circuits,
                           layers=layers(data), graph=data)


@ui_bp.get("/events")
@login_required
def events(user: User):  # noqa: ANN201
    rows = monitor_read.merged_events(read_session(), None, None, 200)
    return render_template("events.html", rows=rows)
