"""``mlte web``: run the reservation service (waitress), and ``mlte web user ...`` to manage its users.

Every setting is checked before serving (:mod:`app.cli.startup`): a bad one is a one-line error
naming it, never a server that announces a port it does not bind or a traceback on the first call.
User commands print their notes on stderr and a token alone on stdout (``TOKEN=$(...)`` works, and
scripts that take the last line of the output keep working).
"""
from __future__ import annotations

import argparse
import getpass
import logging
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

log = logging.getLogger(__name__)

TOKEN_USE = "send it as the header 'Authorization: Bearer <token>'"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("web", help="reservation service: REST API + web UI (waitress); `mlte web user` manages users")
    p.add_argument("--db", help="database URL or SQLite file (default: [db] url)")
    p.add_argument("--host", help="listen address (default: [web] host)")
    p.add_argument("--port", type=int, help="listen port 1..65535 (default: [web] port)")
    p.add_argument("--topology", default="controller",
                   help="controller (default: the newest snapshot the controller wrote to the DB) | fig2 (the "
                        "built-in lab testbed, not the live network) | FILE.json (a MultiLayerGraph file)")
    p.add_argument("--threads", type=int, default=8, help="waitress worker threads")
    p.add_argument("--grooming", action="store_true", default=None,
                   help="reservations may ride circuits others booked when they have room (default: [web] grooming)")
    p.add_argument("--secret-key", help="session signing key (default: random per start; logs users out on restart)")
    p.add_argument("--secure-cookies", action="store_true",
                   help="mark the session cookie Secure (set this when users reach the UI through HTTPS)")
    p.set_defaults(func=_serve)
    wsub = p.add_subparsers(dest="web_cmd", metavar="WEB_COMMAND")

    user = wsub.add_parser("user", help="create, list, disable and remove users; set passwords and admins; "
                                        "issue and revoke API tokens")
    usub = user.add_subparsers(dest="user_cmd", metavar="USER_COMMAND", required=True)

    create = usub.add_parser("create", help="create a user (password prompted on a terminal) and print an API token")
    _create_args(create)
    create.set_defaults(func=_create_user, prompt=True)

    sp = usub.add_parser("set-password", help="set or reset a user's web UI password")
    sp.add_argument("name")
    _password_args(sp)
    _db_arg(sp)
    sp.set_defaults(func=_set_password)

    ls = usub.add_parser("list", help="list users: name, admin, password set, API tokens, created")
    _db_arg(ls)
    ls.set_defaults(func=_list_users)

    rm = usub.add_parser("remove", help="remove a user and its tokens")
    rm.add_argument("name")
    rm.add_argument("--force", action="store_true", help="remove even the last admin")
    _db_arg(rm)
    rm.set_defaults(func=_remove_user)

    nt = usub.add_parser("new-token", aliases=["create-token"], help="issue another API token (printed once)")
    nt.add_argument("name")
    nt.add_argument("--label", help="name of the token, to revoke it later (default: token<N>)")
    nt.add_argument("--expires-in", metavar="DAYS",
                    help="the token is refused after DAYS days (a positive number; default: never expires)")
    _db_arg(nt)
    nt.set_defaults(func=_new_token)

    rt = usub.add_parser("revoke-token", help="revoke a user's API token by label, or all of them")
    rt.add_argument("name")
    which = rt.add_mutually_exclusive_group(required=True)
    which.add_argument("label", nargs="?", help="label of the token (see `mlte web user list`)")
    which.add_argument("--all", action="store_true", help="revoke every token of the user")
    _db_arg(rt)
    rt.set_defaults(func=_revoke_token)

    for verb, helptext in (("disable", "refuse the user's web login, sessions and API tokens (keeps its reservations)"),
                           ("enable", "let a disabled user log in and use its API tokens again")):
        en = usub.add_parser(verb, help=helptext)
        en.add_argument("name")
        _db_arg(en)
        en.set_defaults(func=_set_enabled, enabled=verb == "enable")

    adm = usub.add_parser("admin", help="promote (--on) or demote (--off) an admin; never the last one")
    adm.add_argument("name")
    onoff = adm.add_mutually_exclusive_group()
    onoff.add_argument("--on", dest="admin", action="store_true", default=None, help="make the user an admin")
    onoff.add_argument("--off", dest="admin", action="store_false", help="make the admin an ordinary user")
    _db_arg(adm)
    adm.set_defaults(func=_set_admin)

    alias = wsub.add_parser("create-user", help="same as `mlte web user create`, never prompts (scripts)")
    _create_args(alias)
    alias.set_defaults(func=_create_user, prompt=False)


def _days(text: str) -> float:
    """``--expires-in``: a positive, finite number of days (one-line error otherwise)."""
    import math

    from app.errors import MlteError

    try:
        days = float(text)
    except ValueError:
        raise MlteError(f"--expires-in {text!r} is not a number of days (e.g. 30 or 0.5)") from None
    if not math.isfinite(days) or days <= 0:
        raise MlteError(f"--expires-in {text!r}: give a positive number of days (omit it: never expires)")
    return days


def _db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", dest="user_db", help="database URL or SQLite file (default: [db] url)")


def _password_args(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--password-stdin", action="store_true", help="read the password from the first line of stdin")
    src.add_argument("--password-file", metavar="FILE", help="read the password from the first line of FILE")
    src.add_argument("--password", help=argparse.SUPPRESS)  # visible in `ps`; kept for old scripts


def _create_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name")
    p.add_argument("--admin", action="store_true", help="the user sees and manages every reservation")
    _password_args(p)
    p.add_argument("--no-password", action="store_true",
                   help="do not ask for a password: the user can only use API tokens")
    _db_arg(p)


# ---------------------------------------------------------------------- users
def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _read_password(args: argparse.Namespace, *, prompt: bool, optional: bool) -> str | None:
    """The password from ``--password-stdin``/``--password-file``/``--password``, else asked twice on a
    terminal when ``prompt``; ``None`` if none was given (and ``optional``)."""
    from app.errors import MlteError
    from app.web.users import check_password_text

    if args.password_stdin:
        return check_password_text(sys.stdin.readline().rstrip("\r\n"))
    if args.password_file:
        try:
            with open(args.password_file) as f:
                return check_password_text(f.readline().rstrip("\r\n"))
        except OSError as exc:
            raise MlteError(f"--password-file {args.password_file}: {exc.strerror or exc}") from None
    if args.password is not None:
        return check_password_text(args.password)
    if prompt and sys.stdin.isatty():
        try:
            first = getpass.getpass(f"Password for {args.name}{' (empty: API tokens only)' if optional else ''}: ")
            if not first and optional:
                return None
            check_password_text(first)
            again = getpass.getpass("Repeat the password: ")
        except EOFError:  # Ctrl-D at the prompt: a cancel, not a traceback
            raise MlteError("no password entered (end of input at the prompt); nothing changed") from None
        if again != first:
            raise MlteError("the passwords differ; nothing changed")
        return first
    if optional:
        return None
    raise MlteError("no password given: use --password-stdin or --password-file FILE, or run it on a terminal")


@contextmanager
def _user_session(args: argparse.Namespace) -> Iterator[Session]:
    """A session on the checked database, committed on success; database errors become one line."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.cli.startup import open_database
    from app.errors import MlteError

    url, setting = (args.user_db, "--db") if args.user_db else \
        (args.db, "--db") if getattr(args, "db", None) else (args.cfg["db"]["url"], "[db] url")
    # only `user create` may make a new database; the others need an existing one (a typo is an error)
    db = open_database(url, setting, must_exist=args.func is not _create_user)
    try:
        with db.session() as s:
            # the write lock first (SQLite: BEGIN IMMEDIATE), so a busy database is waited for: a read
            # followed by a write in a deferred transaction fails at once ("database is locked") when a
            # running controller committed in between (a CI run's lab lost its `create-user` that way)
            db.lock_for_write(s)
            yield s
            s.commit()
    except SQLAlchemyError as exc:
        first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or ["?"])[0]
        raise MlteError(f"{setting}: database error ({first})") from None
    finally:
        db.dispose()


def _print_token(name: str, label: str, token: str) -> None:
    _note(f"API token {label!r} of {name} — shown only this once (only its hash is stored); {TOKEN_USE}:")
    print(token, flush=True)


def _create_user(args: argparse.Namespace) -> int:
    from app.web.auth import create_user

    password = None if args.no_password else _read_password(args, prompt=args.prompt, optional=True)
    with _user_session(args) as s:
        _user, token = create_user(s, args.name, admin=args.admin, password=password)
    _note(f"created user {args.name}{' (admin)' if args.admin else ''}")
    if password:
        _note(f"{args.name} can log in to the web UI with that password")
    else:
        _note(f"{args.name} has no password, so it can only use API tokens (no web UI login); "
              f"set one with: mlte web user set-password {args.name}")
    _print_token(args.name, "cli", token)
    return 0


def _set_password(args: argparse.Namespace) -> int:
    from app.web.users import get_user, set_password

    with _user_session(args) as s:
        get_user(s, args.name)  # "no such user" before asking for a password
        password = _read_password(args, prompt=True, optional=False)
        assert password is not None
        set_password(s, args.name, password)
    _note(f"password of {args.name} set; it can log in to the web UI (its logged-in sessions were ended)")
    return 0


def _set_enabled(args: argparse.Namespace) -> int:
    from app.web.users import set_disabled

    with _user_session(args) as s:
        changed = set_disabled(s, args.name, not args.enabled)
    if not changed:
        _note(f"{args.name} is {'enabled' if args.enabled else 'disabled'} already; nothing changed")
    elif args.enabled:
        _note(f"enabled {args.name}: its password and API tokens work again")
    else:
        _note(f"disabled {args.name}: web login, its sessions and API tokens are refused; reservations kept")
    return 0


def _set_admin(args: argparse.Namespace) -> int:
    from app.errors import MlteError
    from app.web.users import set_admin

    if args.admin is None:
        raise MlteError(f"say which: mlte web user admin {args.name} --on (promote) or --off (demote)")
    with _user_session(args) as s:
        changed = set_admin(s, args.name, args.admin)
    what = "an admin" if args.admin else "not an admin"
    _note(f"{args.name} is {what}{'' if changed else ' already; nothing changed'}")
    return 0


def _list_users(args: argparse.Namespace) -> int:
    from app.web.users import list_users

    with _user_session(args) as s:
        rows = list_users(s)
    if not rows:
        _note("no users yet: mlte web user create NAME --admin")
        return 0
    table = [("NAME", "ADMIN", "PASSWORD", "TOKENS", "CREATED")]
    table += [(r.name, "yes" if r.admin else "no", "yes" if r.has_password else "no", str(r.tokens),
               _utc(r.created)) for r in rows]
    _print_table(table)
    tokens = [("USER", "TOKEN", "CREATED", "LAST USED", "EXPIRES")]
    tokens += [(r.name, t.label or "-", _utc(t.created), _utc(t.last_used) if t.last_used else "never",
                _utc(t.expires) if t.expires else "never") for r in rows for t in r.token_rows]
    if len(tokens) > 1:
        print()
        _print_table(tokens)
    disabled = [r.name for r in rows if r.disabled]
    if disabled:
        print(f"\nDISABLED: {', '.join(disabled)} (mlte web user enable NAME)")
    return 0


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _print_table(table: list[tuple[str, ...]]) -> None:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _remove_user(args: argparse.Namespace) -> int:
    from app.web.users import remove_user

    with _user_session(args) as s:
        remove_user(s, args.name, force=args.force)
    _note(f"removed user {args.name} and its API tokens")
    return 0


def _new_token(args: argparse.Namespace) -> int:
    import time

    from app.web.users import new_token

    expires = None if args.expires_in is None else time.time() + _days(args.expires_in) * 86400
    with _user_session(args) as s:
        label, token = new_token(s, args.name, args.label, expires)
    if expires is not None:
        _note(f"API token {label!r} expires at {_utc(expires)}")
    _print_token(args.name, label, token)
    return 0


def _revoke_token(args: argparse.Namespace) -> int:
    from app.web.users import revoke_tokens

    with _user_session(args) as s:
        n = revoke_tokens(s, args.name, None if args.all else args.label)
    what = "every API token" if args.all else f"API token {args.label!r}"
    _note(f"revoked {what} of {args.name} ({n} token{'s' if n != 1 else ''})")
    return 0


# ---------------------------------------------------------------------- serving
def _sweeper(app, interval: float, stop: threading.Event) -> None:  # noqa: ANN001
    """Apply time-driven transitions (expired holds, start/end of windows) even when nobody calls the API."""
    from app.web.context import write_tx

    while not stop.wait(interval):
        try:
            with app.app_context(), write_tx():
                pass
        except Exception:  # noqa: BLE001 - keep sweeping; the error is logged
            log.exception("state sweep failed")


def check_serve_settings(args: argparse.Namespace) -> dict[str, Any]:
    """Check every setting ``mlte web`` serves with, cheapest first; return the app config plus
    ``host``/``port`` and the opened, migrated ``db`` (the caller disposes it). Raises StartupError
    naming the setting."""
    from app.cli.startup import StartupError, check_bindable, check_port, open_database
    from app.web.errors import ApiError
    from app.web.topology_source import TopologySource

    cfg = args.cfg
    host = args.host or cfg["web"]["host"]
    port_setting = "--port" if args.port is not None else "[web] port"
    port = check_port(args.port if args.port is not None else cfg["web"]["port"], port_setting)
    if args.threads < 1:
        raise StartupError(f"--threads: {args.threads} is not a positive number of threads")
    check_bindable(host, port, "--host" if args.host else "[web] host", port_setting)
    url, db_setting = (args.db, "--db") if args.db else (cfg["db"]["url"], "[db] url")
    db = open_database(url, db_setting)
    try:
        source = TopologySource(args.topology, cfg["ots"]["unit_mbps"])
    except ApiError as exc:
        db.dispose()
        raise StartupError(f"--topology: {exc.message}") from None
    conf: dict[str, Any] = {
        "DATABASE": url, "TOPOLOGY": args.topology,
        "UNIT_MBPS": cfg["ots"]["unit_mbps"], "HOLD_SECONDS": cfg["web"]["hold_seconds"],
        "LOGIN_MAX_FAILURES": cfg["web"]["login_max_failures"],
        "LOGIN_WINDOW_SECONDS": cfg["web"]["login_window_seconds"], "GROOMING": bool(getattr(args, "grooming", None)) or cfg["web"]["grooming"]}
    if args.secret_key:
        conf["SECRET_KEY"] = args.secret_key
    if args.secure_cookies:
        conf["SESSION_COOKIE_SECURE"] = True
    return {"app": conf, "db": db, "host": host, "port": port, "port_setting": port_setting, "topology": source}


def _serve(args: argparse.Namespace) -> int:
    from waitress.server import create_server

    from app.cli.startup import StartupError
    from app.web import create_app

    checked = check_serve_settings(args)
    host, port = checked["host"], checked["port"]
    app = create_app(checked["app"], checked["db"])  # the database the check opened and migrated
    try:
        server = create_server(app, host=host, port=port, threads=args.threads, ident="mlte")
    except OSError as exc:  # taken between the check and now
        app.extensions["mlte"].db.dispose()
        raise StartupError(f"{checked['port_setting']}: cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    stop = threading.Event()
    threading.Thread(target=_sweeper, args=(app, 5.0, stop), daemon=True, name="mlte-web-sweeper").start()
    with app.extensions["mlte"].db.session() as s:
        topo = checked["topology"].describe(s)["text"]
    print(f"mlte web: serving on http://{host}:{server.effective_port}/ (API docs /api/v1/docs); topology: {topo}",
          flush=True)
    try:
        server.run()
    finally:
        stop.set()
        server.close()
        app.extensions["mlte"].db.dispose()
    return 0
