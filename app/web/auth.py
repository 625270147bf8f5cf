"""Authentication: API tokens (``Authorization: Bearer``; only SHA-256 hashes stored) for the REST API,
session login for the UI; roles user/admin (admins see and manage every reservation).

Tokens are 256 random bits, so a fast hash is enough; a token is found by looking its hash up, so no
secret is ever compared character by character (a timing difference could only reveal a prefix of
a hash, which does not help to forge a token). Passwords use werkzeug's scrypt.
"""
from __future__ import annotations

import hashlib
import secrets
import time

from flask import g, request, session
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from app.db.models import ApiToken, Reservation, User
from app.web.context import now, state
from app.web.errors import ApiError, Forbidden, Unauthorized
from app.web.timeutil import to_iso


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_user(db: Session, name: str, *, admin: bool = False, password: str | None = None,
                label: str = "cli") -> tuple[User, str]:
    """Create a user with one API token; return the user and the token (shown only now)."""
    if not name or len(name) > 64:
        raise ApiError("user name must be 1..64 characters", field="name")
    from app.web.validation import bad_character

    bad = bad_character(name)
    if bad:
        raise ApiError(f"user name must not contain {bad}", field="name")
    if db.execute(select(User).where(User.name == name)).scalar() is not None:
        raise ApiError(f"user {name!r} exists already", field="name", status=409)
    user = User(name=name, is_admin=admin, created_at=time.time(),
                password_hash=generate_password_hash(password) if password else None)
    db.add(user)
    db.flush()
    return user, add_token(db, user, label)


def add_token(db: Session, user: User, label: str = "", expires_at: float | None = None) -> str:
    token = "mlte_" + secrets.token_urlsafe(32)
    db.add(ApiToken(user_id=user.id, token_hash=hash_token(token), label=label, created_at=time.time(),
                    expires_at=expires_at))
    return token


#: a token's last use is written at most this often (seconds): one write per request would queue
#: every API call behind the database's write lock
LAST_USE_RESOLUTION = 60.0


def authenticate_token(db: Session, token: str) -> User:
    """The user of a valid token; an unknown, expired or disabled user's token is a 401 saying which.
    Records the token's last use (at :data:`LAST_USE_RESOLUTION`)."""
    row = db.execute(select(ApiToken).where(ApiToken.token_hash == hash_token(token))).scalar()
    if row is None:
        raise Unauthorized("invalid API token", field="Authorization")
    t = now()
    if row.expires_at is not None and row.expires_at <= t:
        raise Unauthorized(f"API token {row.label!r} of {row.user.name} expired at {to_iso(row.expires_at)}: "
                           f"ask an admin for a new one (mlte web user new-token {row.user.name})",
                           field="Authorization")
    if row.user.disabled:
        raise Unauthorized(f"user {row.user.name} is disabled: ask an admin to enable it "
                           f"(mlte web user enable {row.user.name})", field="Authorization")
    if row.last_used_at is None or t - row.last_used_at >= LAST_USE_RESOLUTION:
        _record_use(row.id, t)
    return row.user


def _record_use(token_id: int, t: float) -> None:
    """Write the last use in its own short transaction (the request's read session stays read-only)."""
    st = state().db
    with st.writer():
        s = st.session()
        try:
            s.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=t))
            s.commit()
        finally:
            s.close()


def start_session(user: User) -> None:
    """Log ``user`` in: the session carries the user's epoch, so a later raise ends it."""
    session.clear()
    session["user_id"] = user.id
    session["epoch"] = user.session_epoch


def session_user(db: Session) -> User | None:
    """The logged-in user of this request's session cookie; ``None`` (and the cookie cleared) when the
    session ended: the password was changed, the user was disabled or removed."""
    uid = session.get("user_id")
    if uid is None:
        return None
    user = db.get(User, uid)
    if user is None or user.disabled or session.get("epoch", 0) != user.session_epoch:
        session.clear()
        g.session_ended = True
        return None
    return user


_DUMMY_HASH: list[str] = []


def check_password(db: Session, name: str, password: str) -> User | None:
    """The user if the password matches. An unknown name costs one hash check too, so the answer
    time does not tell which user names exist."""
    user = db.execute(select(User).where(User.name == name)).scalar()
    if user is None or not user.password_hash:
        if not _DUMMY_HASH:
            _DUMMY_HASH.append(generate_password_hash(secrets.token_hex(8)))
        check_password_hash(_DUMMY_HASH[0], password)
        return None
    return user if check_password_hash(user.password_hash, password) else None


def current_user(db: Session, *, allow_session: bool) -> User | None:
    """The caller: a bearer token always; the login session only where ``allow_session`` (no CSRF risk)."""
    if "user" in g:
        return g.user
    user = None
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Authorization header must be 'Bearer <token>'", field="Authorization")
        user = authenticate_token(db, token.strip())
    elif allow_session:
        user = session_user(db)
    g.user = user
    return user


def require_user(db: Session, *, allow_session: bool = False) -> User:
    user = current_user(db, allow_session=allow_session)
    if user is None:
        how = "a bearer token or a login session" if allow_session else "a bearer token"
        if g.get("session_ended"):
            raise Unauthorized("the login session ended (password changed or user disabled): log in again",
                               field="session")
        raise Unauthorized(f"authentication required: {how}", field="Authorization")
    return user


def check_owner(user: User, res: Reservation) -> None:
    """Users manage their own reservations; admins manage all."""
    if not user.is_admin and res.owner_id != user.id:
        raise Forbidden(f"reservation {res.id} belongs to another user", field="id")
