"""Start-up checks of ``mlte web`` and ``mlte controller``: every setting is tried before serving.

Each check raises :class:`StartupError` whose message names the setting and the problem in one line
(the CLI prints it and exits 2), instead of a server that announces a port it never binds, or a
traceback from the first request. Imports neither Flask nor os-ken (the controller uses it too).
"""
from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from app.errors import MlteError

if TYPE_CHECKING:
    from app.db.engine import Database

PORT_MIN, PORT_MAX = 1, 65535


class StartupError(MlteError):
    """A setting that would make the service fail once started."""


def check_port(port: object, setting: str) -> int:
    """A TCP port to listen on: 1..65535 (0 would bind a random port the log never names)."""
    if isinstance(port, bool) or not isinstance(port, int) or not PORT_MIN <= port <= PORT_MAX:
        raise StartupError(f"{setting}: port {port!r} out of range {PORT_MIN}..{PORT_MAX}")
    return port


def check_bindable(host: str, port: int, host_setting: str, port_setting: str) -> None:
    """Bind ``host:port`` once and let go, so "in use" or a foreign address is reported now.

    SO_REUSEADDR as the servers set it: a socket in TIME_WAIT is not "in use", a listener is.
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise StartupError(f"{host_setting}: cannot resolve listen address {host!r} ({_reason(exc)})") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as exc:
            raise StartupError(f"{host_setting}/{port_setting}: cannot listen on {host}:{port} ({_reason(exc)}; "
                               f"is another server running there?)") from None


def check_database_exists(url: str, setting: str) -> None:
    """Refuse a SQLite file that does not exist, for commands that only read: opening it would create
    an empty database (and a mistyped ``--db`` would print "no users yet" instead of an error).
    A server database (PostgreSQL) that is missing fails on connect anyway."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from app.db.engine import is_memory_sqlite, normalise_url

    full = normalise_url(url)
    if not full.startswith("sqlite") or is_memory_sqlite(full):
        return
    try:
        path = make_url(full).database
    except ArgumentError as exc:
        raise StartupError(f"{setting} {_hide_password(url)}: not a database URL ({_reason(exc)})") from None
    if path and not os.path.isfile(path):
        raise StartupError(f"{setting} {_hide_password(url)}: no such database file {path!r} "
                           f"(check the name; `mlte web` or `mlte controller` creates a new one)")


def open_database(url: str, setting: str, *, must_exist: bool = False) -> Database:
    """Open ``url``, bring it to the newest schema and prove it takes writes; the caller disposes it.

    The write test updates the one ``admission_lock`` row to itself and rolls back: a read-only file,
    a read-only PostgreSQL role or a full disk fail here, not on the first reservation.
    """
    from sqlalchemy import text
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

    from app.db.engine import Database, normalise_url
    from app.db.migrate import SchemaTooNew, upgrade

    shown = _hide_password(url)
    if must_exist:
        check_database_exists(url, setting)
    try:
        db = Database(url)
    except NoSuchModuleError:
        scheme = normalise_url(url).split("://", 1)[0]
        raise StartupError(f"{setting} {shown}: unknown database driver {scheme!r} "
                           f"(use a SQLite file path, sqlite:///FILE or postgresql://USER@HOST/DB)") from None
    except ArgumentError as exc:
        raise StartupError(f"{setting} {shown}: not a database URL ({_reason(exc)})") from None
    except ModuleNotFoundError as exc:
        raise StartupError(f"{setting} {shown}: the database driver module {exc.name!r} is not installed") from None
    try:
        with db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        upgrade(db.engine)
        with db.engine.connect() as conn:
            trans = conn.begin()
            try:
                conn.execute(text("UPDATE admission_lock SET counter = counter WHERE id = 1"))
            finally:
                trans.rollback()
    except SchemaTooNew as exc:
        db.dispose()
        raise StartupError(f"{setting} {shown}: {_reason(exc)}") from None
    except (SQLAlchemyError, OSError) as exc:
        db.dispose()
        raise StartupError(f"{setting} {shown}: {_db_problem(exc, db)}") from None
    return db


def _db_problem(exc: BaseException, db: Database) -> str:
    """The driver's own first line ("unable to open database file", "connection refused"...), with
    the likely cause of SQLite's terse one."""
    orig = getattr(exc, "orig", None) or exc
    text = _reason(orig)
    if "readonly" in text or "read-only" in text:
        return f"not writable ({text})"
    if db.is_sqlite and "unable to open" in text:
        path = db.engine.url.database or ""
        parent = os.path.dirname(os.path.abspath(path)) if path and not path.startswith("file:") else "?"
        return f"cannot create or open the SQLite file ({text}: is its directory {parent} there and writable?)"
    return f"cannot open the database ({text})"


def _reason(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _hide_password(url: str) -> str:
    """``postgresql://u:secret@h/db`` -> ``postgresql://u:***@h/db`` (messages end up in logs)."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    cred, _, host = rest.rpartition("@")
    user, colon, _ = cred.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"
