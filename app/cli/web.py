"""``mlte web``: run the reservation service (waitress), and ``mlte web create-user``."""
from __future__ import annotations

import argparse
import logging
import threading

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("web", help="reservation service: REST API + web UI (waitress)")
    p.add_argument("--db", help="database URL or SQLite file (default: [db] url)")
    p.add_argument("--host", help="listen address (default: [web] host)")
    p.add_argument("--port", type=int, help="listen port (default: [web] port)")
    p.add_argument("--topology", default="auto",
                   help="auto (default: the controller's newest snapshot in the DB, else fig2) | controller "
                        "(only the controller's snapshot) | fig2 | FILE.json")
    p.add_argument("--threads", type=int, default=8, help="waitress worker threads")
    p.add_argument("--secret-key", help="session signing key (default: random per start; logs users out on restart)")
    p.add_argument("--secure-cookies", action="store_true",
                   help="mark the session cookie Secure (set this when users reach the UI through HTTPS)")
    p.set_defaults(func=_serve)
    wsub = p.add_subparsers(dest="web_cmd", metavar="WEB_COMMAND")
    cu = wsub.add_parser("create-user", help="create a user and print its API token")
    cu.add_argument("name")
    cu.add_argument("--admin", action="store_true", help="the user sees and manages every reservation")
    cu.add_argument("--password", help="password for the web UI login (omit: API token only)")
    cu.add_argument("--db", dest="user_db", help="database URL or SQLite file (default: [db] url)")
    cu.set_defaults(func=_create_user)


def _create_user(args: argparse.Namespace) -> int:
    from app.db.engine import Database
    from app.db.migrate import upgrade
    from app.web.auth import create_user

    db = Database(args.user_db or args.db or args.cfg["db"]["url"])
    try:
        upgrade(db.engine)
        with db.session() as s:
            user, token = create_user(s, args.name, admin=args.admin, password=args.password)
            s.commit()
    finally:
        db.dispose()
    print(token)
    return 0


def _sweeper(app, interval: float, stop: threading.Event) -> None:  # noqa: ANN001
    """Apply time-driven transitions (expired holds, start/end of windows) even when nobody calls the API."""
    from app.web.context import write_tx

    while not stop.wait(interval):
        try:
            with app.app_context(), write_tx():
                pass
        except Exception:  # noqa: BLE001 - keep sweeping; the error is logged
            log.exception("state sweep failed")


def _serve(args: argparse.Namespace) -> int:
    import waitress

    from app.web import create_app

    cfg = args.cfg
    conf = {"DATABASE": args.db or cfg["db"]["url"], "TOPOLOGY": args.topology,
            "UNIT_MBPS": cfg["ots"]["unit_mbps"], "HOLD_SECONDS": cfg["web"]["hold_seconds"],
            "LOGIN_MAX_FAILURES": cfg["web"]["login_max_failures"],
            "LOGIN_WINDOW_SECONDS": cfg["web"]["login_window_seconds"]}
    if args.secret_key:
        conf["SECRET_KEY"] = args.secret_key
    if args.secure_cookies:
        conf["SESSION_COOKIE_SECURE"] = True
    app = create_app(conf)
    host = args.host or cfg["web"]["host"]
    port = args.port if args.port is not None else cfg["web"]["port"]
    stop = threading.Event()
    threading.Thread(target=_sweeper, args=(app, 5.0, stop), daemon=True, name="mlte-web-sweeper").start()
    print(f"mlte web: serving on http://{host}:{port}/ (API docs /api/v1/docs)", flush=True)
    try:
        waitress.serve(app, host=host, port=port, threads=args.threads, ident="mlte")
    finally:
        stop.set()
        app.extensions["mlte"].db.dispose()
    return 0
